//! Reading a tool's description and its parameters' descriptions from rustdoc.
//!
//! The description is the doc comment's prose up to its first heading; the
//! `# Arguments` section (rustdoc's convention) gives per-parameter descriptions:
//!
//! ```text
//! /// Get the current weather for a city.
//! ///
//! /// # Arguments
//! /// * `city` - City name, e.g. "Paris".
//! /// * `unit` - Temperature unit; Celsius when left out.
//! ```

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, Lit, Meta};

/// What the doc comment says.
#[derive(Debug, Default)]
pub(crate) struct Docs {
    pub(crate) prose: String,
    /// `(name, description, span of the doc line)` from `# Arguments`.
    pub(crate) arguments: Vec<(String, String, Span)>,
}

fn doc_lines(attrs: &[Attribute]) -> Vec<(String, Span)> {
    let mut lines = Vec::new();
    for attr in attrs {
        if !attr.path().is_ident("doc") {
            continue;
        }
        if let Meta::NameValue(nv) = &attr.meta
            && let Expr::Lit(syn::ExprLit {
                lit: Lit::Str(text),
                ..
            }) = &nv.value
        {
            let value = text.value();
            if value.trim().is_empty() {
                lines.push((String::new(), attr.span()));
                continue;
            }
            for line in value.lines() {
                let line = line.strip_prefix(' ').unwrap_or(line);
                lines.push((line.trim_end().to_owned(), attr.span()));
            }
        }
    }
    lines
}

fn is_list_item(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("- ")
        || t.starts_with("* ")
        || t.split_once(". ")
            .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Joins wrapped lines into paragraphs; list items keep their own line.
fn reflow(lines: &[String]) -> String {
    let mut out = String::new();
    let mut blank = false;
    for line in lines {
        if line.trim().is_empty() {
            blank = !out.is_empty();
            continue;
        }
        if blank {
            out.push_str("\n\n");
        } else if !out.is_empty() {
            out.push(if is_list_item(line) { '\n' } else { ' ' });
        }
        out.push_str(if is_list_item(line) {
            line.trim_end()
        } else {
            line.trim()
        });
        blank = false;
    }
    out
}

/// Parses `* `name` - text`, `- name: text` and the like.
fn argument_item(line: &str) -> Option<(String, String)> {
    let rest = line
        .trim_start()
        .strip_prefix("* ")
        .or_else(|| line.trim_start().strip_prefix("- "))?;
    let rest = rest.trim_start();
    let (name, after) = if let Some(stripped) = rest.strip_prefix('`') {
        let end = stripped.find('`')?;
        (&stripped[..end], &stripped[end + 1..])
    } else {
        let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '#'))?;
        (&rest[..end], &rest[end..])
    };
    let after = after.trim_start();
    let text = after
        .strip_prefix("--")
        .or_else(|| after.strip_prefix('-'))
        .or_else(|| after.strip_prefix(':'))
        .or_else(|| after.strip_prefix('—'))
        .or_else(|| after.strip_prefix('–'))?;
    let name = name.strip_prefix("r#").unwrap_or(name);
    Some((name.to_owned(), text.trim().to_owned()))
}

pub(crate) fn read(attrs: &[Attribute]) -> Docs {
    let lines = doc_lines(attrs);
    let mut prose = Vec::new();
    let mut arguments: Vec<(String, String, Span)> = Vec::new();
    let mut section: Option<String> = None;
    for (line, span) in lines {
        let trimmed = line.trim_start();
        if let Some(heading) = trimmed.strip_prefix('#') {
            section = Some(heading.trim_start_matches('#').trim().to_lowercase());
            continue;
        }
        match section.as_deref() {
            None => prose.push(line),
            Some("arguments" | "parameters" | "args") => {
                if let Some((name, text)) = argument_item(&line) {
                    arguments.push((name, text, span));
                } else if let Some(last) = arguments.last_mut()
                    && !trimmed.is_empty()
                {
                    if !last.1.is_empty() {
                        last.1.push(' ');
                    }
                    last.1.push_str(trimmed);
                }
            }
            Some(_) => {}
        }
    }
    Docs {
        prose: reflow(&prose),
        arguments,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(text: &str) -> Vec<Attribute> {
        text.lines()
            .map(|l| {
                let lit = syn::LitStr::new(l, Span::call_site());
                syn::parse_quote!(#[doc = #lit])
            })
            .collect()
    }

    #[test]
    fn prose_stops_at_the_first_heading() {
        let docs = read(&attrs(
            " Get the weather\n for a city.\n\n Second paragraph.\n - a list item\n\n # Errors\n Fails.",
        ));
        assert_eq!(
            docs.prose,
            "Get the weather for a city.\n\nSecond paragraph.\n- a list item"
        );
    }

    #[test]
    fn arguments_section_gives_descriptions() {
        let docs = read(&attrs(
            " Doc.\n\n # Arguments\n * `city` - City name, e.g. \"Paris\".\n * `unit` - Unit;\n   Celsius when left out.\n - r#type: The kind.\n\n # Examples\n * `x` - not an argument",
        ));
        let args: Vec<_> = docs
            .arguments
            .iter()
            .map(|(n, d, _)| (n.as_str(), d.as_str()))
            .collect();
        assert_eq!(
            args,
            [
                ("city", "City name, e.g. \"Paris\"."),
                ("unit", "Unit; Celsius when left out."),
                ("type", "The kind.")
            ]
        );
    }
}
