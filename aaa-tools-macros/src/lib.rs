//! The `#[tool]` attribute of aaa-tools. Depend on `aaa-tools` and use it as
//! `aaa_tools::tool`; this crate's output only works through that crate.
//!
//! The code is laid out as parse, resolve, check, expand: `attr.rs` (darling receivers
//! for the options), `docs.rs` (descriptions from rustdoc), `model.rs` (what each
//! parameter is), `valid.rs` (checks decidable at compile time), `expand.rs` (the
//! generated code).

use proc_macro::TokenStream;
use quote::quote;

mod attr;
mod docs;
mod expand;
mod model;
mod valid;

use darling::FromMeta;
use darling::ast::NestedMeta;
use syn::spanned::Spanned;

/// Turns a fn into a tool an LLM can call. See the full documentation on
/// `aaa_tools::tool`.
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    let attr = proc_macro2::TokenStream::from(attr);
    let mut item = match syn::parse::<syn::ItemFn>(item.clone()) {
        Ok(item) => item,
        Err(_) => {
            // Not a fn: point at what it is, and emit it unchanged.
            let item2 = proc_macro2::TokenStream::from(item);
            let error = syn::Error::new(
                item2
                    .clone()
                    .into_iter()
                    .next()
                    .map_or_else(proc_macro2::Span::call_site, |t| t.span()),
                "#[tool] goes on a fn (`async fn` or `fn`)",
            )
            .to_compile_error();
            return quote!(#error #item2).into();
        }
    };

    let mut errors = darling::Error::accumulator();
    let args = NestedMeta::parse_meta_list(attr)
        .map_err(darling::Error::from)
        .and_then(|items| attr::ToolArgs::from_list(&items));
    let args = errors.handle(args);
    let krate = args
        .as_ref()
        .and_then(|a| a.krate.clone())
        .unwrap_or_else(|| syn::parse_quote!(::aaa_tools));
    let tool = model::resolve(&mut item, &mut errors);

    let resolved = match (args, tool) {
        (Some(args), Some(tool)) => {
            let (name, name_span) = match &args.name {
                Some(n) => ((**n).clone(), n.span()),
                None => (
                    item.sig
                        .ident
                        .to_string()
                        .trim_start_matches("r#")
                        .to_owned(),
                    item.sig.ident.span(),
                ),
            };
            valid::check_options(&args, &name, name_span, &mut errors);
            let description = args
                .description
                .clone()
                .unwrap_or_else(|| tool.docs.prose.clone());
            if args.require_descriptions {
                valid::check_descriptions(&tool, &description, item.sig.ident.span(), &mut errors);
            }
            Some(expand::Resolved {
                args,
                name,
                description,
                krate: krate.clone(),
                tool,
            })
        }
        _ => None,
    };

    match (errors.finish(), resolved) {
        (Ok(()), Some(resolved)) => {
            let companion = expand::expand(&item, &resolved);
            quote!(#item #companion).into()
        }
        (Err(e), _) => expand::fallback(&item, &krate, e.write_errors()).into(),
        (Ok(()), None) => {
            let error = syn::Error::new(item.sig.span(), "#[tool] could not read this fn")
                .to_compile_error();
            expand::fallback(&item, &krate, error).into()
        }
    }
}
