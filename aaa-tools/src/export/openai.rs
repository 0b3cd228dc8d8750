//! OpenAI Structured Outputs strict mode.

use serde_json::{Map, Value, json};

use crate::args::join_path;
use crate::error::ArgProblem;

/// String formats strict mode accepts.
const FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

/// Keywords strict mode rejects (or that carry nothing for the model), dropped.
const DROPPED: &[&str] = &[
    "$schema",
    "$id",
    "title",
    "default",
    "examples",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "propertyNames",
    "patternProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contains",
    "minContains",
    "maxContains",
    "contentEncoding",
    "contentMediaType",
    "readOnly",
    "writeOnly",
    "deprecated",
    "dependentRequired",
    "dependentSchemas",
    "if",
    "then",
    "else",
    "not",
];

/// The strict form of a tool's parameters schema.
pub(super) fn strict(schema: &Value) -> Result<Value, String> {
    let mut out = node(schema, ArgProblem::ROOT)?;
    if let Some(Value::Object(defs)) = schema.get("$defs") {
        let mut strict_defs = Map::new();
        for (name, def) in defs {
            strict_defs.insert(name.clone(), node(def, name)?);
        }
        out.as_object_mut()
            .expect("root is an object")
            .insert("$defs".into(), Value::Object(strict_defs));
    }
    Ok(out)
}

fn node(schema: &Value, at: &str) -> Result<Value, String> {
    if super::accepts_anything(schema) {
        return Err(format!(
            "`{at}` accepts any JSON value (e.g. a `serde_json::Value` parameter), which this format cannot express; give it a concrete type"
        ));
    }
    let Value::Object(map) = schema else {
        return Err(format!(
            "`{at}` accepts any JSON value (e.g. a `serde_json::Value` parameter), which strict mode cannot express; give it a concrete type or export without strict"
        ));
    };
    let mut out = Map::new();
    for (key, value) in map {
        if DROPPED.contains(&key.as_str()) || key == "$defs" {
            continue;
        }
        match key.as_str() {
            "format" => {
                if value.as_str().is_some_and(|f| FORMATS.contains(&f)) {
                    out.insert(key.clone(), value.clone());
                }
            }
            "const" => {
                out.insert("enum".into(), json!([value]));
            }
            "oneOf" | "anyOf" => {
                let items = value
                    .as_array()
                    .ok_or_else(|| format!("`{at}`: {key} is not an array"))?;
                let mut converted = Vec::with_capacity(items.len());
                for item in items {
                    converted.push(node(item, at)?);
                }
                out.insert("anyOf".into(), Value::Array(converted));
            }
            "allOf" => {
                return Err(format!(
                    "`{at}` uses allOf, which strict mode does not accept"
                ));
            }
            "prefixItems" => {
                return Err(format!(
                    "`{at}` is a tuple (prefixItems), which strict mode does not accept; use a struct"
                ));
            }
            "items" => {
                out.insert(key.clone(), node(value, &format!("{at}[]"))?);
            }
            "properties" | "additionalProperties" | "required" => {}
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    let is_object = map.get("type").is_some_and(|t| {
        t == "object" || t.as_array().is_some_and(|a| a.contains(&json!("object")))
    }) || map.contains_key("properties");
    if is_object {
        if let Some(extra) = map.get("additionalProperties")
            && extra != &Value::Bool(false)
            && map
                .get("properties")
                .is_none_or(|p| p.as_object().is_none_or(|o| o.is_empty()))
        {
            return Err(format!(
                "`{at}` is a map with free-form keys, which strict mode cannot express (every object needs fixed properties); use a struct or a list of pairs"
            ));
        }
        let properties = map
            .get("properties")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let required: Vec<&str> = map
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut strict_props = Map::new();
        for (name, prop) in &properties {
            let path = join_path(at, name);
            let mut converted = node(prop, &path)?;
            if !required.contains(&name.as_str()) {
                converted = nullable(converted);
            }
            strict_props.insert(name.clone(), converted);
        }
        let all: Vec<Value> = properties.keys().map(|k| json!(k)).collect();
        out.insert("properties".into(), Value::Object(strict_props));
        out.insert("required".into(), Value::Array(all));
        out.insert("additionalProperties".into(), Value::Bool(false));
    }
    Ok(Value::Object(out))
}

fn accepts_null(schema: &Map<String, Value>) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(ts)) => ts.contains(&json!("null")),
        _ => {
            schema
                .get("anyOf")
                .and_then(Value::as_array)
                .is_some_and(|items| {
                    items
                        .iter()
                        .any(|i| i.as_object().is_some_and(accepts_null))
                })
                || schema
                    .get("enum")
                    .and_then(Value::as_array)
                    .is_some_and(|e| e.contains(&Value::Null))
        }
    }
}

/// `schema` widened to accept `null` (an optional property under strict mode).
fn nullable(schema: Value) -> Value {
    let Value::Object(mut map) = schema else {
        return schema;
    };
    if accepts_null(&map) {
        return Value::Object(map);
    }
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        values.push(Value::Null);
    }
    match map.get("type").cloned() {
        Some(Value::String(t)) => {
            map.insert("type".into(), json!([t, "null"]));
            Value::Object(map)
        }
        Some(Value::Array(mut ts)) => {
            ts.push(json!("null"));
            map.insert("type".into(), Value::Array(ts));
            Value::Object(map)
        }
        _ if map.contains_key("enum") => Value::Object(map),
        _ => {
            if let Some(Value::Array(items)) = map.get_mut("anyOf") {
                items.push(json!({"type": "null"}));
                return Value::Object(map);
            }
            let description = map.remove("description");
            let mut wrapper = Map::new();
            wrapper.insert(
                "anyOf".into(),
                json!([Value::Object(map), {"type": "null"}]),
            );
            if let Some(d) = description {
                wrapper.insert("description".into(), d);
            }
            Value::Object(wrapper)
        }
    }
}
