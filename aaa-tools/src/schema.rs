//! Building a tool's parameters schema.
//!
//! schemars derives each parameter's schema from its Rust type (it is the crate rmcp and
//! most of the Rust LLM ecosystem use, follows serde attributes, and emits JSON Schema
//! 2020-12). A tool's schema is computed once, when its [`Tool`](crate::Tool) value is
//! built, and shared by every call and export afterwards.
//!
//! The shape every tool gets, whatever built it:
//! `{"type": "object", "properties": {..}, "required": [..], "additionalProperties":
//! false, "$defs": {..}}`, with `required` and `$defs` left out when empty. Parameters
//! of type `Option<T>` are not required (and also accept `null`).

use schemars::{JsonSchema, Schema, SchemaGenerator, generate::SchemaSettings};
use serde_json::{Map, Value, json};

use crate::error::DefinitionError;

/// One parameter of a tool: its name, description, whether it is required, and how to
/// get its schema.
#[derive(Clone, Copy)]
pub struct ParamSpec {
    /// The argument name the model uses.
    pub name: &'static str,
    /// What the model should put there.
    pub description: Option<&'static str>,
    /// Whether the argument must be present.
    pub required: bool,
    /// The schema of the parameter's type.
    pub schema: fn(&mut SchemaGenerator) -> Schema,
}

impl ParamSpec {
    /// A parameter of type `T`.
    pub fn of<T: crate::__private::ToolParam>(
        name: &'static str,
        description: Option<&'static str>,
        required: bool,
    ) -> Self {
        ParamSpec {
            name,
            description,
            required,
            schema: |g| g.subschema_for::<T>(),
        }
    }
}

impl std::fmt::Debug for ParamSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParamSpec")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("required", &self.required)
            .finish_non_exhaustive()
    }
}

pub(crate) fn generator() -> SchemaGenerator {
    SchemaSettings::draft2020_12()
        .for_deserialize()
        .into_generator()
}

/// The object schema for a list of parameters.
pub(crate) fn object_schema(params: &[ParamSpec]) -> Value {
    let mut generator = generator();
    let mut properties = Map::new();
    let mut required = Vec::new();
    for param in params {
        let mut schema = (param.schema)(&mut generator);
        if let Some(description) = param.description {
            schema
                .ensure_object()
                .insert("description".into(), Value::String(description.into()));
        }
        properties.insert(param.name.to_owned(), schema.to_value());
        if param.required {
            required.push(Value::String(param.name.to_owned()));
        }
    }
    let definitions = generator.take_definitions(true);
    let mut root = Map::new();
    root.insert("type".into(), json!("object"));
    root.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        root.insert("required".into(), Value::Array(required));
    }
    root.insert("additionalProperties".into(), Value::Bool(false));
    if !definitions.is_empty() {
        root.insert("$defs".into(), Value::Object(definitions));
    }
    Value::Object(root)
}

/// The object schema of a whole arguments type `A`, normalized to the shape above.
pub(crate) fn schema_of_args<A: JsonSchema>(tool: &str) -> Result<Value, DefinitionError> {
    let schema = generator().into_root_schema_for::<A>().to_value();
    normalize(tool, schema)
}

/// Checks that `schema` is an object schema and brings it to the common shape: no
/// `title` at the root, `properties` present, unknown arguments rejected unless the
/// schema says otherwise.
///
/// The rest of JSON Schema 2020-12 is kept as written, `$schema` and root-level
/// `allOf`/`anyOf`/`oneOf` included: the handler checks arguments against all of it,
/// and MCP serves it as is. What a provider refuses is refused by that provider's
/// export ([`crate::export`]), not here.
pub(crate) fn normalize(tool: &str, schema: Value) -> Result<Value, DefinitionError> {
    let invalid = |reason: &str| DefinitionError::InvalidSchema {
        tool: tool.to_owned(),
        reason: reason.to_owned(),
    };
    let Value::Object(mut root) = schema else {
        return Err(invalid("it is not a JSON object"));
    };
    match root.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        _ => {
            return Err(invalid(
                "the root must say \"type\": \"object\" (a tool takes named arguments)",
            ));
        }
    }
    root.remove("title");
    if let Some(defs) = root.remove("definitions") {
        root.entry("$defs").or_insert(defs);
    }
    root.entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    root.entry("additionalProperties")
        .or_insert(Value::Bool(false));
    if root
        .get("required")
        .is_some_and(|r| r.as_array().is_some_and(Vec::is_empty))
    {
        root.remove("required");
    }
    Ok(Value::Object(root))
}
