//! Gemini function declarations: a subset of the OpenAPI 3.0 schema object.

use serde_json::{Map, Value, json};

use crate::args::join_path;
use crate::error::ArgProblem;

use super::resolve_ref;

/// Keywords kept as they are.
const KEPT: &[&str] = &[
    "description",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
];

/// The `parameters` of a declaration; `None` for a tool without parameters.
pub(super) fn parameters(schema: &Value) -> Result<Option<Value>, String> {
    if schema
        .get("properties")
        .and_then(Value::as_object)
        .is_none_or(Map::is_empty)
    {
        return Ok(None);
    }
    if let Some(props) = schema["properties"].as_object() {
        for name in props.keys() {
            let ok = name.len() <= 64
                && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !ok {
                return Err(format!(
                    "parameter name {name:?} is not accepted (letters, digits and '_', starting with a letter or '_', at most 64)"
                ));
            }
        }
    }
    let mut stack = Vec::new();
    node(schema, schema, ArgProblem::ROOT, &mut stack).map(Some)
}

fn upper(t: &str) -> Result<&'static str, String> {
    Ok(match t {
        "string" => "STRING",
        "integer" => "INTEGER",
        "number" => "NUMBER",
        "boolean" => "BOOLEAN",
        "array" => "ARRAY",
        "object" => "OBJECT",
        other => return Err(format!("type {other:?} has no Gemini equivalent")),
    })
}

fn node(schema: &Value, root: &Value, at: &str, stack: &mut Vec<String>) -> Result<Value, String> {
    if super::accepts_anything(schema) {
        return Err(format!(
            "`{at}` accepts any JSON value (e.g. a `serde_json::Value` parameter), which this format cannot express; give it a concrete type"
        ));
    }
    let Value::Object(map) = schema else {
        return Err(format!(
            "`{at}` accepts any JSON value, which Gemini cannot express; give it a concrete type"
        ));
    };
    if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
        if stack.iter().any(|r| r == reference) {
            let name = reference.rsplit('/').next().unwrap_or(reference);
            return Err(format!(
                "`{at}` is of the recursive type `{name}`, which Gemini cannot express (it has no $ref); use a non-recursive type for this tool"
            ));
        }
        let target = resolve_ref(root, reference)
            .ok_or_else(|| format!("`{at}`: unresolved reference {reference}"))?;
        stack.push(reference.to_owned());
        let mut inlined = node(target, root, at, stack)?;
        stack.pop();
        if let (Some(d), Value::Object(out)) = (map.get("description"), &mut inlined) {
            out.insert("description".into(), d.clone());
        }
        return Ok(inlined);
    }

    let mut out = Map::new();
    let mut nullable = false;
    match map.get("type") {
        Some(Value::String(t)) if t == "null" => nullable = true,
        Some(Value::String(t)) => {
            out.insert("type".into(), json!(upper(t)?));
        }
        Some(Value::Array(ts)) => {
            let concrete: Vec<&str> = ts
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null")
                .collect();
            nullable = concrete.len() < ts.len();
            match concrete.as_slice() {
                [one] => {
                    out.insert("type".into(), json!(upper(one)?));
                }
                [] => {}
                many => {
                    let variants: Result<Vec<Value>, String> = many
                        .iter()
                        .map(|t| Ok(json!({"type": upper(t)?})))
                        .collect();
                    out.insert("anyOf".into(), Value::Array(variants?));
                }
            }
        }
        _ => {}
    }
    for key in KEPT {
        if let Some(v) = map.get(*key) {
            out.insert((*key).into(), v.clone());
        }
    }
    if let Some(format) = map.get("format").and_then(Value::as_str) {
        let kept = matches!(
            (out.get("type").and_then(Value::as_str), format),
            (Some("STRING"), "date-time" | "enum")
                | (Some("INTEGER"), "int32" | "int64")
                | (Some("NUMBER"), "float" | "double")
        );
        if kept {
            out.insert("format".into(), json!(format));
        }
    }
    let enum_values = map
        .get("enum")
        .cloned()
        .or_else(|| map.get("const").map(|c| json!([c])));
    if let Some(Value::Array(values)) = enum_values {
        if values.contains(&Value::Null) {
            nullable = true;
        }
        let strings: Vec<&Value> = values.iter().filter(|v| !v.is_null()).collect();
        if strings.iter().all(|v| v.is_string()) {
            out.insert("type".into(), json!("STRING"));
            out.insert("enum".into(), json!(strings));
        } else {
            let listed = strings
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(", ");
            let description = out
                .get("description")
                .and_then(Value::as_str)
                .map(|d| format!("{d} "))
                .unwrap_or_default();
            out.insert(
                "description".into(),
                json!(format!("{description}One of: {listed}.")),
            );
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(items)) = map.get(key) {
            let mut variants = Vec::new();
            for item in items {
                if item.get("type").is_some_and(|t| t == "null") {
                    nullable = true;
                    continue;
                }
                variants.push(node(item, root, at, stack)?);
            }
            match variants.len() {
                1 => {
                    let only = variants.pop().expect("one variant");
                    if let Value::Object(inner) = only {
                        for (k, v) in inner {
                            out.entry(k).or_insert(v);
                        }
                    }
                }
                _ => {
                    out.insert("anyOf".into(), Value::Array(variants));
                }
            }
        }
    }
    if map.contains_key("allOf") {
        return Err(format!("`{at}` uses allOf, which Gemini does not accept"));
    }
    if map.contains_key("prefixItems") {
        return Err(format!(
            "`{at}` is a tuple, which Gemini does not accept; use a struct"
        ));
    }
    if let Some(items) = map.get("items") {
        out.insert(
            "items".into(),
            node(items, root, &format!("{at}[]"), stack)?,
        );
    }
    if let Some(Value::Object(props)) = map.get("properties") {
        let mut converted = Map::new();
        for (name, prop) in props {
            let path = join_path(at, name);
            converted.insert(name.clone(), node(prop, root, &path, stack)?);
        }
        if converted.is_empty() {
            return Err(format!(
                "`{at}` is an object without properties, which Gemini rejects"
            ));
        }
        out.insert("properties".into(), Value::Object(converted));
        if let Some(required) = map.get("required") {
            out.insert("required".into(), required.clone());
        }
    } else if out.get("type").is_some_and(|t| t == "OBJECT") {
        return Err(format!(
            "`{at}` is a map or free-form object, which Gemini cannot express (objects need fixed properties); use a struct or a list of pairs"
        ));
    }
    if nullable {
        out.insert("nullable".into(), json!(true));
    }
    Ok(Value::Object(out))
}
