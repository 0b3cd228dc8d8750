//! The tool fn, resolved: what each parameter is and how the result is converted.

use darling::FromMeta;
use darling::ast::NestedMeta;
use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{FnArg, GenericArgument, Ident, ItemFn, Pat, PathArguments, ReturnType, Type};

use crate::attr::ParamArgs;
use crate::docs;

/// What a parameter is.
pub(crate) enum ParamKind {
    /// An argument the model fills, in the schema.
    Arg { required: bool },
    /// `ToolContext`, by value.
    Context,
    /// `&ToolContext`.
    ContextRef,
    /// `State<T>`: shared state; holds `T`.
    State(Box<Type>),
}

pub(crate) struct Param {
    pub(crate) ident: Ident,
    /// The name the model sees (the identifier without `r#`).
    pub(crate) name: String,
    pub(crate) ty: Type,
    pub(crate) kind: ParamKind,
    pub(crate) description: Option<String>,
}

/// How the fn's return value becomes a result.
pub(crate) enum Returns {
    Unit,
    Result(Type),
    Value(Type),
}

pub(crate) struct ToolFn {
    pub(crate) is_async: bool,
    pub(crate) params: Vec<Param>,
    pub(crate) returns: Returns,
    pub(crate) docs: docs::Docs,
}

fn last_segment(ty: &Type) -> Option<&syn::PathSegment> {
    match ty {
        Type::Path(p) if p.qself.is_none() => p.path.segments.last(),
        Type::Group(g) => last_segment(&g.elem),
        Type::Paren(p) => last_segment(&p.elem),
        _ => None,
    }
}

fn single_type_arg(segment: &syn::PathSegment) -> Option<&Type> {
    match &segment.arguments {
        PathArguments::AngleBracketed(args) if args.args.len() == 1 => match args.args.first() {
            Some(GenericArgument::Type(t)) => Some(t),
            _ => None,
        },
        _ => None,
    }
}

fn is_named(ty: &Type, name: &str) -> bool {
    last_segment(ty).is_some_and(|s| s.ident == name && s.arguments.is_none())
}

/// The first `impl Trait` inside `ty`, if any.
fn find_impl_trait(ty: &Type) -> Option<&Type> {
    match ty {
        Type::ImplTrait(_) => Some(ty),
        Type::Reference(r) => find_impl_trait(&r.elem),
        Type::Paren(p) => find_impl_trait(&p.elem),
        Type::Group(g) => find_impl_trait(&g.elem),
        Type::Slice(s) => find_impl_trait(&s.elem),
        Type::Array(a) => find_impl_trait(&a.elem),
        Type::Tuple(t) => t.elems.iter().find_map(find_impl_trait),
        Type::Path(p) => p.path.segments.iter().find_map(|s| match &s.arguments {
            PathArguments::AngleBracketed(args) => args.args.iter().find_map(|a| match a {
                GenericArgument::Type(t) => find_impl_trait(t),
                _ => None,
            }),
            _ => None,
        }),
        _ => None,
    }
}

fn classify(ty: &Type) -> Result<ParamKind, syn::Error> {
    if let Some(found) = find_impl_trait(ty) {
        return Err(syn::Error::new_spanned(
            found,
            "`impl Trait` parameters cannot be tools' parameters: a tool call decodes each argument into one concrete type",
        ));
    }
    if is_named(ty, "ToolContext") {
        return Ok(ParamKind::Context);
    }
    if let Type::Reference(r) = ty
        && is_named(&r.elem, "ToolContext")
    {
        if r.mutability.is_some() {
            return Err(syn::Error::new_spanned(
                ty,
                "take `&ToolContext` or `ToolContext`; `&mut ToolContext` is not supported",
            ));
        }
        return Ok(ParamKind::ContextRef);
    }
    if let Type::Reference(r) = ty {
        return Err(syn::Error::new_spanned(
            ty,
            format!(
                "borrowed parameters cannot be decoded from a call; take an owned type{}",
                if is_named(&r.elem, "str") {
                    " (`String` instead of `&str`)"
                } else {
                    ""
                }
            ),
        ));
    }
    if let Some(segment) = last_segment(ty) {
        if segment.ident == "State" {
            return match single_type_arg(segment) {
                Some(inner) => Ok(ParamKind::State(Box::new(inner.clone()))),
                None => Err(syn::Error::new_spanned(
                    ty,
                    "`State` takes one type: `State<T>`",
                )),
            };
        }
        if segment.ident == "Option" && single_type_arg(segment).is_some() {
            return Ok(ParamKind::Arg { required: false });
        }
    }
    Ok(ParamKind::Arg { required: true })
}

/// Takes the `#[arg(...)]` attributes off a parameter and reads them.
pub(crate) fn take_param_attrs(
    pat: &mut syn::PatType,
    errors: &mut darling::error::Accumulator,
) -> ParamArgs {
    let mut args = ParamArgs::default();
    let mut kept = Vec::new();
    for attr in pat.attrs.drain(..) {
        if attr.path().is_ident("arg") {
            let parsed = match &attr.meta {
                syn::Meta::List(list) => NestedMeta::parse_meta_list(list.tokens.clone())
                    .map_err(darling::Error::from)
                    .and_then(|items| ParamArgs::from_list(&items)),
                _ => Err(
                    darling::Error::custom("write `#[arg(description = \"...\")]`")
                        .with_span(&attr),
                ),
            };
            if let Some(parsed) = errors.handle(parsed)
                && parsed.description.is_some()
            {
                args.description = parsed.description;
            }
        } else {
            kept.push(attr);
        }
    }
    pat.attrs = kept;
    args
}

/// Resolves the fn. Parameter attributes are stripped from `item` in place, so the fn
/// can be emitted as the user wrote it even when there are errors.
pub(crate) fn resolve(
    item: &mut ItemFn,
    errors: &mut darling::error::Accumulator,
) -> Option<ToolFn> {
    let sig = &item.sig;
    if !sig.generics.params.is_empty() {
        errors.push(
            darling::Error::custom(
                "generic fns cannot be tools: the schema needs one concrete type per parameter",
            )
            .with_span(&sig.generics),
        );
    }
    if let Some(clause) = &sig.generics.where_clause {
        errors.push(
            darling::Error::custom("generic fns cannot be tools: remove the `where` clause")
                .with_span(clause),
        );
    }
    if let Some(unsafety) = &sig.unsafety {
        errors.push(
            darling::Error::custom(
                "`unsafe fn` cannot be a tool: the handler calls it without any safety contract",
            )
            .with_span(unsafety),
        );
    }
    if let Some(variadic) = &sig.variadic {
        errors.push(darling::Error::custom("variadic fns cannot be tools").with_span(variadic));
    }
    if let Some(constness) = &sig.constness {
        errors.push(
            darling::Error::custom("`const fn` cannot be a tool; remove `const`")
                .with_span(constness),
        );
    }
    let is_async = sig.asyncness.is_some();
    let docs = docs::read(&item.attrs);

    let mut params: Vec<Param> = Vec::new();
    let mut context_seen: Option<Span> = None;
    for input in item.sig.inputs.iter_mut() {
        let pat_type = match input {
            FnArg::Receiver(receiver) => {
                errors.push(
                    darling::Error::custom(
                        "#[tool] goes on free fns, not methods; to reach shared data take a `State<T>` parameter and register the value with `ToolRegistry::builder().state(..)`",
                    )
                    .with_span(receiver),
                );
                continue;
            }
            FnArg::Typed(pat_type) => pat_type,
        };
        let param_args = take_param_attrs(pat_type, errors);
        let ident = match &*pat_type.pat {
            Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => p.ident.clone(),
            other => {
                errors.push(darling::Error::custom("tool parameters must be plain identifiers (the identifier is the argument's name); destructure inside the body").with_span(other));
                continue;
            }
        };
        let name = ident.to_string().trim_start_matches("r#").to_owned();
        if params.iter().any(|p| p.name == name) {
            errors.push(
                darling::Error::custom(format!("duplicate parameter `{name}`")).with_span(&ident),
            );
            continue;
        }
        let kind = match classify(&pat_type.ty) {
            Ok(kind) => kind,
            Err(e) => {
                errors.push(e.into());
                continue;
            }
        };
        if matches!(kind, ParamKind::Context | ParamKind::ContextRef) {
            if context_seen.is_some() {
                errors.push(
                    darling::Error::custom("a tool takes at most one `ToolContext` parameter")
                        .with_span(&pat_type.ty),
                );
                continue;
            }
            context_seen = Some(pat_type.span());
        }
        let description = param_args.description.or_else(|| {
            docs.arguments
                .iter()
                .find(|(n, _, _)| *n == name)
                .map(|(_, d, _)| d.clone())
        });
        params.push(Param {
            ident,
            name,
            ty: (*pat_type.ty).clone(),
            kind,
            description,
        });
    }

    for (documented, _, span) in &docs.arguments {
        if !params.iter().any(|p| &p.name == documented) {
            errors.push(
                darling::Error::custom(format!(
                    "`# Arguments` documents `{documented}`, which is not a parameter of this fn"
                ))
                .with_span(span),
            );
        }
    }

    let returns = match &item.sig.output {
        ReturnType::Default => Returns::Unit,
        ReturnType::Type(_, ty) => {
            if last_segment(ty).is_some_and(|s| s.ident == "Result") {
                Returns::Result((**ty).clone())
            } else {
                Returns::Value((**ty).clone())
            }
        }
    };
    Some(ToolFn {
        is_async,
        params,
        returns,
        docs,
    })
}
