//! A registry's tools in each provider's format.
//!
//! | [`Format`] | shape of one entry | schema rules applied |
//! |---|---|---|
//! | `OpenAiChat { strict }` | `{"type": "function", "function": {name, description, parameters, strict?}}` | strict: see below |
//! | `OpenAiResponses { strict }` | `{"type": "function", name, description, parameters, strict}` | strict: see below |
//! | `Anthropic` | `{name, description, input_schema}` | the schema as is |
//! | `Gemini` | `{name, description, parameters?}` | OpenAPI 3.0 subset: refs inlined, uppercase types, `nullable`, unsupported keywords dropped |
//! | `Mcp` | `{name, title?, description, inputSchema, annotations?}` (a `tools/list` entry) | the schema as is |
//!
//! OpenAI strict mode: every property is listed in `required` (optional ones accept
//! `null` instead), `additionalProperties: false` on every object, `oneOf` becomes
//! `anyOf`, `const` becomes a one-value `enum`, and keywords strict mode does not accept
//! (`format` other than the supported ones, numeric and length bounds, `default`, ...)
//! are dropped. What the export drops is still enforced: the handler checks arguments
//! against the tool's full schema.
//!
//! Every provider format (all but `Mcp`) drops a root `$schema` (the providers state
//! the dialect themselves) and refuses a schema whose root is an `allOf`, `anyOf` or
//! `oneOf` (OpenAI, Anthropic and Gemini reject one). MCP serves the schema as the tool
//! declares it, JSON Schema 2020-12 in full.
//!
//! A tool that a format cannot express (a root composition for a provider, a recursive
//! type for Gemini, a map or arbitrary JSON for OpenAI strict mode) is reported in
//! [`Export::errors`] with the reason; the other tools are still exported.
//!
//! Gemini: a tool without parameters has no `parameters` field, as Google's reference
//! says to leave it unset; every other format exports `{"type": "object",
//! "properties": {}}` for it.
//!
//! ```
//! use aaa_tools::export::Format;
//! use aaa_tools::{ToolRegistry, tool, tools};
//!
//! /// Add two integers.
//! #[tool]
//! fn add(a: i64, b: Option<i64>) -> i64 { a + b.unwrap_or(0) }
//!
//! let registry = ToolRegistry::new(tools![add]).unwrap();
//! let openai = registry.export(Format::OpenAiChat { strict: true }).into_result().unwrap();
//! assert_eq!(openai[0]["function"]["parameters"]["required"], serde_json::json!(["a", "b"]));
//! assert_eq!(openai[0]["function"]["strict"], true);
//! ```

mod gemini;
mod openai;

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use crate::registry::ToolRegistry;
use crate::tool::Tool;

/// A provider format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// OpenAI Chat Completions `tools`.
    OpenAiChat {
        /// Structured Outputs strict mode.
        strict: bool,
    },
    /// OpenAI Responses API `tools`.
    OpenAiResponses {
        /// Strict mode (the Responses API's default is strict, so `false` is written out).
        strict: bool,
    },
    /// Anthropic Messages `tools`.
    Anthropic,
    /// Gemini `functionDeclarations`.
    Gemini,
    /// MCP `tools/list` result entries.
    Mcp,
}

/// A tool the format could not express.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tool `{tool}` cannot be exported for {format}: {reason}")]
#[non_exhaustive]
pub struct ExportError {
    /// The tool.
    pub tool: String,
    /// The format's name.
    pub format: &'static str,
    /// Why.
    pub reason: String,
}

/// The result of exporting a registry: the entries, and the tools that could not be
/// expressed.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Export {
    /// One entry per exported tool, in registration order.
    pub tools: Vec<Value>,
    /// The tools left out, with the reason.
    pub errors: Vec<ExportError>,
}

impl Export {
    /// The entries, or the first error if any tool was left out.
    pub fn into_result(self) -> Result<Vec<Value>, ExportError> {
        match self.errors.into_iter().next() {
            Some(error) => Err(error),
            None => Ok(self.tools),
        }
    }

    /// The entries as a JSON array.
    pub fn to_json(&self) -> Value {
        Value::Array(self.tools.clone())
    }
}

impl Format {
    /// A short name for messages.
    pub fn name(self) -> &'static str {
        match self {
            Format::OpenAiChat { strict: true } => "OpenAI Chat Completions (strict)",
            Format::OpenAiChat { strict: false } => "OpenAI Chat Completions",
            Format::OpenAiResponses { strict: true } => "OpenAI Responses (strict)",
            Format::OpenAiResponses { strict: false } => "OpenAI Responses",
            Format::Anthropic => "Anthropic",
            Format::Gemini => "Gemini",
            Format::Mcp => "MCP",
        }
    }
}

/// One tool in `format`.
pub fn export_tool(tool: &Tool, format: Format) -> Result<Value, ExportError> {
    let fail = |reason: String| ExportError {
        tool: tool.name().to_owned(),
        format: format.name(),
        reason,
    };
    let parameters = match format {
        Format::Mcp => Cow::Borrowed(tool.parameters()),
        _ => for_providers(tool.parameters()).map_err(fail)?,
    };
    let parameters = &*parameters;
    Ok(match format {
        Format::OpenAiChat { strict } => {
            let schema = if strict {
                openai::strict(parameters).map_err(fail)?
            } else {
                parameters.clone()
            };
            let mut function = Map::new();
            function.insert("name".into(), json!(tool.name()));
            function.insert("description".into(), json!(tool.description()));
            function.insert("parameters".into(), schema);
            if strict {
                function.insert("strict".into(), json!(true));
            }
            json!({"type": "function", "function": function})
        }
        Format::OpenAiResponses { strict } => {
            let schema = if strict {
                openai::strict(parameters).map_err(fail)?
            } else {
                parameters.clone()
            };
            json!({
                "type": "function",
                "name": tool.name(),
                "description": tool.description(),
                "parameters": schema,
                "strict": strict,
            })
        }
        Format::Anthropic => json!({
            "name": tool.name(),
            "description": tool.description(),
            "input_schema": parameters,
        }),
        Format::Gemini => {
            let mut declaration = Map::new();
            declaration.insert("name".into(), json!(tool.name()));
            declaration.insert("description".into(), json!(tool.description()));
            if let Some(schema) = gemini::parameters(parameters).map_err(fail)? {
                declaration.insert("parameters".into(), schema);
            }
            Value::Object(declaration)
        }
        Format::Mcp => {
            let mut entry = Map::new();
            entry.insert("name".into(), json!(tool.name()));
            if let Some(title) = tool.annotations().and_then(|a| a.title.clone()) {
                entry.insert("title".into(), json!(title));
            }
            entry.insert("description".into(), json!(tool.description()));
            entry.insert("inputSchema".into(), parameters.clone());
            if let Some(annotations) = tool.annotations() {
                let value = serde_json::to_value(annotations).unwrap_or(Value::Null);
                if value.as_object().is_some_and(|o| !o.is_empty()) {
                    entry.insert("annotations".into(), value);
                }
            }
            Value::Object(entry)
        }
    })
}

/// The schema as model providers take it: no `$schema`, and no root composition.
fn for_providers(schema: &Value) -> Result<Cow<'_, Value>, String> {
    let Some(root) = schema.as_object() else {
        return Ok(Cow::Borrowed(schema));
    };
    if let Some(key) = ["allOf", "anyOf", "oneOf"]
        .into_iter()
        .find(|key| root.contains_key(*key))
    {
        return Err(format!(
            "the schema's root is an {key}, which model providers reject (MCP serves it)"
        ));
    }
    if !root.contains_key("$schema") {
        return Ok(Cow::Borrowed(schema));
    }
    let mut root = root.clone();
    root.remove("$schema");
    Ok(Cow::Owned(Value::Object(root)))
}

impl ToolRegistry {
    /// Every tool in `format`, in registration order; tools the format cannot express
    /// are listed in [`Export::errors`].
    pub fn export(&self, format: Format) -> Export {
        let mut export = Export {
            tools: Vec::with_capacity(self.len()),
            errors: Vec::new(),
        };
        for tool in self {
            match export_tool(tool, format) {
                Ok(entry) => export.tools.push(entry),
                Err(error) => export.errors.push(error),
            }
        }
        export
    }
}

/// Whether a schema node constrains nothing (arbitrary JSON, such as a
/// `serde_json::Value` parameter), ignoring annotations like `description`.
pub(crate) fn accepts_anything(schema: &Value) -> bool {
    const SHAPING: &[&str] = &[
        "type",
        "enum",
        "const",
        "anyOf",
        "oneOf",
        "allOf",
        "$ref",
        "properties",
        "items",
        "not",
    ];
    match schema {
        Value::Bool(b) => *b,
        Value::Object(map) => !map.keys().any(|k| SHAPING.contains(&k.as_str())),
        _ => false,
    }
}

/// Follows a local `$ref` (`#/$defs/Name`) within `root`.
pub(crate) fn resolve_ref<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    root.pointer(reference.strip_prefix('#')?)
}
