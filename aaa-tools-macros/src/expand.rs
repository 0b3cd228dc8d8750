//! Code generation: the user's fn unchanged, plus a companion type whose `tool()`
//! builds the `Tool` once.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{ItemFn, Path};

use crate::attr::ToolArgs;
use crate::model::{ParamKind, Returns, ToolFn};

pub(crate) struct Resolved {
    pub(crate) args: ToolArgs,
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) krate: Path,
    pub(crate) tool: ToolFn,
}

fn opt_str(krate: &Path, v: Option<&str>) -> TokenStream {
    match v {
        Some(s) => quote!(#krate::__private::Option::Some(#s)),
        None => quote!(#krate::__private::Option::None),
    }
}

fn guard_expr(r: &Resolved) -> TokenStream {
    let krate = &r.krate;
    let mut expr =
        quote!(<#krate::__private::GuardOverrides as ::core::default::Default>::default());
    if let Some(g) = &r.args.guard {
        if let Some(v) = g.enabled {
            expr = quote!(#expr.with_enabled(#v));
        }
        if let Some(v) = &g.max_attempts {
            let v = **v;
            expr = quote!(#expr.with_max_attempts(#v));
        }
        for (setter, value) in [
            ("with_lease_ttl_s", &g.lease_ttl_s),
            ("with_heartbeat_s", &g.heartbeat_s),
            ("with_wait_poll_s", &g.wait_poll_s),
        ] {
            if let Some(v) = value {
                let setter = format_ident!("{}", setter);
                let secs = v.0;
                expr = quote!(#expr.#setter(#secs));
            }
        }
        if let Some(v) = g.fence_results {
            expr = quote!(#expr.with_fence_results(#v));
        }
        if let Some(v) = &g.lost_lease {
            let variant = if v.0 == "finish" {
                quote!(Finish)
            } else {
                quote!(Cancel)
            };
            expr = quote!(#expr.with_lost_lease(#krate::__private::LostLease::#variant));
        }
    }
    expr
}

fn annotations_expr(r: &Resolved) -> TokenStream {
    let krate = &r.krate;
    let Some(a) = &r.args.annotations else {
        return quote!(#krate::__private::Option::None);
    };
    let mut expr =
        quote!(<#krate::__private::ToolAnnotations as ::core::default::Default>::default());
    if let Some(title) = &a.title {
        expr = quote!(#expr.with_title(#title));
    }
    for (setter, value) in [
        ("with_read_only", a.read_only_hint),
        ("with_destructive", a.destructive_hint),
        ("with_idempotent", a.idempotent_hint),
        ("with_open_world", a.open_world_hint),
    ] {
        if let Some(v) = value {
            let setter = format_ident!("{}", setter);
            expr = quote!(#expr.#setter(#v));
        }
    }
    quote!(#krate::__private::Option::Some(#expr))
}

/// The companion type and its `tool()`.
pub(crate) fn expand(item: &ItemFn, r: &Resolved) -> TokenStream {
    let krate = &r.krate;
    let vis = &item.vis;
    let fn_ident = &item.sig.ident;
    let name = &r.name;
    let description = &r.description;

    let mut takes = Vec::new();
    let mut key_takes = Vec::new();
    let mut key_args = Vec::new();
    let mut param_specs = Vec::new();
    let mut checks = Vec::new();
    let mut state_needs = Vec::new();
    let mut state_lets = Vec::new();
    let mut call_args = Vec::new();
    for (i, p) in r.tool.params.iter().enumerate() {
        let ty = &p.ty;
        match &p.kind {
            ParamKind::Arg { required } => {
                let pname = &p.name;
                let desc = opt_str(krate, p.description.as_deref());
                param_specs.push(quote_spanned!(ty.span()=> #krate::__private::ParamSpec::of::<#ty>(#pname, #desc, #required)));
                let var = format_ident!("__aaa_arg_{}", i);
                takes.push(
                    quote_spanned!(ty.span()=> let #var: #ty = __aaa_args.get::<#ty>(#pname)?;),
                );
                let key_var = format_ident!("__aaa_key_{}", i);
                key_takes.push(
                    quote_spanned!(ty.span()=> let #key_var: #ty = __aaa_args.get::<#ty>(#pname)?;),
                );
                key_args.push(quote!(&#key_var));
                call_args.push(quote!(#var));
            }
            ParamKind::Context => call_args.push(quote!(::core::clone::Clone::clone(&__aaa_ctx))),
            ParamKind::ContextRef => call_args.push(quote!(&__aaa_ctx)),
            ParamKind::State(inner) => {
                let var = format_ident!("__aaa_state_{}", i);
                state_needs.push(quote!(#krate::__private::StateNeed::of::<#inner>()));
                state_lets
                    .push(quote!(let #var = #krate::__private::state::<#inner>(&__aaa_ctx)?;));
                call_args.push(quote!(#var));
            }
        }
    }

    let convert = match &r.tool.returns {
        Returns::Unit => quote!(#krate::__private::value_output(__aaa_out)),
        Returns::Result(ty) => {
            quote_spanned!(ty.span()=> #krate::__private::result_output(__aaa_out))
        }
        Returns::Value(ty) => {
            checks.push(quote_spanned!(ty.span()=> #krate::__private::assert_output::<#ty>();));
            quote_spanned!(ty.span()=> #krate::__private::value_output(__aaa_out))
        }
    };

    let blocking = !r.tool.is_async;
    let body = if r.tool.is_async {
        quote! {
            #krate::__private::async_body(move |__aaa_ctx: #krate::__private::ToolContext| {
                #krate::__private::boxed(async move {
                    #(#state_lets)*
                    let __aaa_out = #fn_ident(#(#call_args),*).await;
                    #convert
                })
            })
        }
    } else {
        quote! {
            #krate::__private::blocking_body(move |__aaa_ctx: #krate::__private::ToolContext| {
                #(#state_lets)*
                let __aaa_out = #fn_ident(#(#call_args),*);
                #convert
            })
        }
    };

    let key = match &r.args.idempotency_key {
        Some(path) => quote_spanned! {path.span()=>
            #krate::__private::key_fn(|__aaa_tool: &str, __aaa_value: &#krate::__private::serde_json::Value| {
                let __aaa_args = #krate::__private::args_map(__aaa_tool, __aaa_value)?;
                #(#key_takes)*
                #krate::__private::Result::Ok(::core::convert::Into::<#krate::__private::String>::into(#path(#(#key_args),*)))
            })
        },
        None => quote!(#krate::__private::no_key_fn()),
    };

    let delivery = match r.args.delivery.as_ref().map(|d| d.0.as_str()) {
        Some("at_most_once") => {
            quote!(#krate::__private::Option::Some(#krate::__private::Delivery::AtMostOnce))
        }
        Some(_) => {
            quote!(#krate::__private::Option::Some(#krate::__private::Delivery::AtLeastOnce))
        }
        None => quote!(#krate::__private::Option::None),
    };
    let requires_approval = r.args.requires_approval;
    let timeout_s = r.args.timeout_s.as_ref().map_or(60.0, |t| t.0);
    let pool = r
        .args
        .pool
        .as_ref()
        .map_or_else(|| "default".to_owned(), |p| (**p).clone());
    let require_descriptions = r.args.require_descriptions;
    let guard = guard_expr(r);
    let annotations = annotations_expr(r);
    let struct_doc = format!(
        "The `#[tool]` companion of [`{fn_ident}()`]: `{fn_ident}::tool()` is the [`Tool`]({}::Tool) `{name}`.",
        quote!(#krate).to_string().replace(' ', "")
    );
    let fn_doc = format!(
        "The tool `{name}`, built once (its schema is computed on the first call) and cloned after."
    );

    quote! {
        #[doc = #struct_doc]
        #[allow(non_camel_case_types, dead_code)]
        #vis struct #fn_ident {}

        #[automatically_derived]
        #[allow(clippy::all, clippy::pedantic, non_snake_case)]
        impl #fn_ident {
            #[doc = #fn_doc]
            #[must_use]
            #vis fn tool() -> #krate::Tool {
                static __AAA_TOOL: #krate::__private::OnceLock<#krate::Tool> = #krate::__private::OnceLock::new();
                ::core::clone::Clone::clone(__AAA_TOOL.get_or_init(|| {
                    #(#checks)*
                    let __aaa_spec = #krate::__private::ToolSpec {
                        name: #name,
                        description: #description,
                        params: #krate::__private::vec![#(#param_specs),*],
                        requires_approval: #requires_approval,
                        timeout_s: #timeout_s,
                        pool: #pool,
                        delivery: #delivery,
                        guard: #guard,
                        state: #krate::__private::vec![#(#state_needs),*],
                        blocking: #blocking,
                        require_descriptions: #require_descriptions,
                        annotations: #annotations,
                    };
                    let __aaa_prepare = #krate::__private::prepare_fn(
                        |__aaa_tool: &str, __aaa_value: &#krate::__private::serde_json::Value| {
                            let __aaa_args = #krate::__private::args_map(__aaa_tool, __aaa_value)?;
                            #(#takes)*
                            #krate::__private::Result::Ok(#body)
                        },
                    );
                    #krate::__private::build(__aaa_spec, __aaa_prepare, #key)
                }))
            }
        }
    }
}

/// What is emitted when the attribute has errors: the fn, our errors, and a companion
/// whose `tool()` never runs (the crate does not compile), so that uses of
/// `my_fn::tool()` elsewhere do not add errors of their own.
pub(crate) fn fallback(item: &ItemFn, krate: &Path, errors: TokenStream) -> TokenStream {
    if matches!(item.sig.inputs.first(), Some(syn::FnArg::Receiver(_))) {
        // A method: a companion type cannot live in an impl block.
        return quote!(#item #errors);
    }
    let vis = &item.vis;
    let fn_ident = &item.sig.ident;
    quote! {
        #item
        #errors
        #[allow(non_camel_case_types, dead_code, missing_docs)]
        #vis struct #fn_ident {}
        #[allow(missing_docs, unreachable_code)]
        impl #fn_ident {
            #vis fn tool() -> #krate::Tool {
                ::core::unreachable!("this crate does not compile: see the #[tool] error")
            }
        }
    }
}
