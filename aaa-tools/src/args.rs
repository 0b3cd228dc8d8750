//! Checking and decoding a call's arguments, with errors a model can act on.
//!
//! Two steps, both before the tool runs:
//! 1. the arguments are validated against the exact schema the model was shown
//!    (jsonschema, compiled once per tool), so what the schema advertises is what is
//!    enforced, including `additionalProperties: false`;
//! 2. they are decoded into the tool's parameter types with serde, through
//!    serde_path_to_error, so a failure that only serde sees (a custom `Deserialize`)
//!    still names its path.
//!
//! jsonschema was chosen because it implements JSON Schema 2020-12 (the dialect schemars
//! emits) with structured errors, which is what lets each message say the argument path,
//! what was expected and what arrived.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{ArgProblem, ToolArgsError};

/// The default limit on a call's arguments, serialized: 1 MiB.
pub(crate) const DEFAULT_MAX_ARGS_BYTES: usize = 1 << 20;

/// How much of an offending value an error message quotes.
const SHOWN_VALUE_CHARS: usize = 80;

/// The JSON text of `value`, cut to a readable length on a character boundary.
pub(crate) fn show_value(value: &Value) -> String {
    let text = value.to_string();
    cut(&text, SHOWN_VALUE_CHARS)
}

pub(crate) fn cut(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text.to_owned(),
        Some((at, _)) => format!("{}… ({} bytes in all)", &text[..at], text.len()),
    }
}

/// Turns a JSON pointer (`/stops/2/city`) into an argument path (`stops[2].city`).
fn pointer_to_path(pointer: &str) -> String {
    let mut path = String::new();
    for raw in pointer.split('/').skip(1) {
        let segment = raw.replace("~1", "/").replace("~0", "~");
        if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) {
            path.push('[');
            path.push_str(&segment);
            path.push(']');
        } else {
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(&segment);
        }
    }
    if path.is_empty() {
        ArgProblem::ROOT.to_owned()
    } else {
        path
    }
}

/// `parent.child`, or `child` when the parent is the arguments object itself.
pub(crate) fn join_path(parent: &str, child: &str) -> String {
    if parent == ArgProblem::ROOT {
        child.to_owned()
    } else {
        format!("{parent}.{child}")
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The choices of an enum, without `null` (how an optional argument is left out; the
/// model needs the real choices).
fn list_options(options: &Value) -> String {
    match options {
        Value::Array(items) => items
            .iter()
            .filter(|v| !v.is_null())
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    }
}

/// Words for one jsonschema error.
fn problem_for(error: &jsonschema::ValidationError<'_>, schema: &Value) -> ArgProblem {
    use jsonschema::error::ValidationErrorKind as Kind;
    let path = pointer_to_path(error.instance_path().as_str());
    let got = error.instance();
    let message = match error.kind() {
        Kind::Required { property } => {
            let name = property
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| property.to_string());
            return ArgProblem::new(join_path(&path, &name), "is required but missing");
        }
        Kind::AdditionalProperties { unexpected } => {
            let known = known_properties(schema, error.schema_path().as_str());
            let mut message = format!(
                "unknown argument{} {}",
                if unexpected.len() == 1 { "" } else { "s" },
                unexpected
                    .iter()
                    .map(|u| format!("`{u}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            if !known.is_empty() {
                message.push_str(&format!("; expected only: {}", known.join(", ")));
            }
            message
        }
        Kind::Enum { options } => {
            format!(
                "expected one of {}; got {}",
                list_options(options),
                show_value(got)
            )
        }
        Kind::Constant { expected_value } => {
            format!("expected {}; got {}", expected_value, show_value(got))
        }
        Kind::Type { kind } => {
            let expected = match kind {
                jsonschema::error::TypeKind::Single(t) => t.to_string(),
                jsonschema::error::TypeKind::Multiple(ts) => ts
                    .iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join(" or "),
            };
            format!(
                "expected {expected}; got {} {}",
                type_name(got),
                show_value(got)
            )
        }
        Kind::Minimum { limit } => format!("must be >= {limit}; got {}", show_value(got)),
        Kind::Maximum { limit } => format!("must be <= {limit}; got {}", show_value(got)),
        Kind::ExclusiveMinimum { limit } => format!("must be > {limit}; got {}", show_value(got)),
        Kind::ExclusiveMaximum { limit } => format!("must be < {limit}; got {}", show_value(got)),
        Kind::MinLength { limit } => format!("must have at least {limit} characters"),
        Kind::MaxLength { limit } => format!("must have at most {limit} characters"),
        Kind::MinItems { limit } => format!("must have at least {limit} items"),
        Kind::MaxItems { limit } => format!("must have at most {limit} items"),
        Kind::Pattern { pattern } => {
            format!(
                "must match the pattern {pattern:?}; got {}",
                show_value(got)
            )
        }
        Kind::Format { format } => format!("must be a valid {format}; got {}", show_value(got)),
        Kind::AnyOf { .. } | Kind::OneOfNotValid { .. } => {
            let node = schema_at(
                schema,
                error
                    .schema_path()
                    .as_str()
                    .rsplit_once('/')
                    .map_or("", |(parent, _)| parent),
            );
            match node.and_then(|n| literal_values(schema, n, 0)) {
                Some(values) => {
                    format!(
                        "expected one of {}; got {}",
                        list_options(&Value::Array(values)),
                        show_value(got)
                    )
                }
                None => format!(
                    "does not match any of the allowed shapes; got {}",
                    show_value(got)
                ),
            }
        }
        _ => {
            let text = error.to_string();
            let first = text.lines().next().unwrap_or("invalid").to_owned();
            cut(&first, 160)
        }
    };
    ArgProblem::new(path, message)
}

/// The schema node at a jsonschema keyword location, following the `$ref`s the path
/// went through.
fn schema_at<'a>(schema: &'a Value, schema_path: &str) -> Option<&'a Value> {
    let mut node = Some(schema);
    for raw in schema_path.split('/').skip(1) {
        let current = node?;
        let segment = raw.replace("~1", "/").replace("~0", "~");
        node = if segment == "$ref" {
            follow_ref(schema, current)
        } else {
            match current {
                Value::Object(map) => map.get(&segment),
                Value::Array(items) => segment.parse::<usize>().ok().and_then(|i| items.get(i)),
                _ => None,
            }
        };
    }
    node
}

fn follow_ref<'a>(root: &'a Value, node: &'a Value) -> Option<&'a Value> {
    node.get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix('#'))
        .and_then(|p| root.pointer(p))
}

/// The property names the object at an `additionalProperties` location declares.
fn known_properties(schema: &Value, schema_path: &str) -> Vec<String> {
    let object_path = schema_path
        .strip_suffix("/additionalProperties")
        .unwrap_or(schema_path);
    schema_at(schema, object_path)
        .and_then(|n| n.get("properties"))
        .and_then(Value::as_object)
        .map(|props| props.keys().cloned().collect())
        .unwrap_or_default()
}

/// When every branch of a node is a literal (`const`, `enum`, or `null`), the allowed
/// values: what schemars emits for enums with documented variants.
fn literal_values(root: &Value, node: &Value, depth: usize) -> Option<Vec<Value>> {
    if depth > 8 {
        return None;
    }
    if let Some(target) = follow_ref(root, node) {
        return literal_values(root, target, depth + 1);
    }
    if let Some(c) = node.get("const") {
        return Some(vec![c.clone()]);
    }
    if let Some(Value::Array(values)) = node.get("enum") {
        return Some(values.clone());
    }
    if node.get("type").is_some_and(|t| t == "null") {
        return Some(vec![Value::Null]);
    }
    let branches = node
        .get("oneOf")
        .or_else(|| node.get("anyOf"))?
        .as_array()?;
    let mut all = Vec::new();
    for branch in branches {
        all.extend(literal_values(root, branch, depth + 1)?);
    }
    Some(all)
}

/// Whether a schema node accepts `null`.
fn accepts_null(root: &Value, node: &Value, depth: usize) -> bool {
    if depth > 16 {
        return false;
    }
    if let Some(target) = follow_ref(root, node) {
        return accepts_null(root, target, depth + 1);
    }
    match node {
        Value::Bool(b) => *b,
        Value::Object(map) => {
            let shaped = ["type", "enum", "const", "anyOf", "oneOf", "$ref", "allOf"]
                .iter()
                .any(|k| map.contains_key(*k));
            if !shaped {
                return true;
            }
            match map.get("type") {
                Some(Value::String(t)) if t == "null" => return true,
                Some(Value::Array(ts)) if ts.iter().any(|t| t == "null") => return true,
                _ => {}
            }
            map.get("enum")
                .and_then(Value::as_array)
                .is_some_and(|e| e.contains(&Value::Null))
                || ["anyOf", "oneOf"].iter().any(|k| {
                    map.get(*k)
                        .and_then(Value::as_array)
                        .is_some_and(|items| items.iter().any(|i| accepts_null(root, i, depth + 1)))
                })
        }
        _ => false,
    }
}

/// Whether `value` holds a `null` anywhere (the cheap test before
/// [`drop_optional_nulls`] walks the schema).
/// Deeper than the walk goes, it answers yes (the walk then decides).
pub(crate) fn has_null(value: &Value) -> bool {
    fn within(value: &Value, depth: usize) -> bool {
        match value {
            Value::Null => true,
            _ if depth > 32 => true,
            Value::Object(fields) => fields.values().any(|v| within(v, depth + 1)),
            Value::Array(items) => items.iter().any(|v| within(v, depth + 1)),
            _ => false,
        }
    }
    within(value, 0)
}

/// Removes `null` values of optional properties whose schema does not accept `null`.
///
/// OpenAI strict mode makes every property required and optional ones nullable, so a
/// model in strict mode sends `null` for an argument it leaves out. Here that `null`
/// counts as leaving the argument out, so the same tool serves strict and non-strict
/// clients.
pub(crate) fn drop_optional_nulls(root: &Value, node: &Value, value: &mut Value, depth: usize) {
    if depth > 32 {
        return;
    }
    if let Some(target) = follow_ref(root, node) {
        return drop_optional_nulls(root, target, value, depth + 1);
    }
    match value {
        Value::Object(fields) => {
            let Some(props) = node.get("properties").and_then(Value::as_object) else {
                return;
            };
            let required: Vec<&str> = node
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            fields.retain(|key, v| {
                !(v.is_null()
                    && !required.contains(&key.as_str())
                    && props.get(key).is_some_and(|p| !accepts_null(root, p, 0)))
            });
            for (key, v) in fields.iter_mut() {
                if let Some(prop) = props.get(key) {
                    drop_optional_nulls(root, prop, v, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = node.get("items") {
                for item in items {
                    drop_optional_nulls(root, item_schema, item, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// A compiled argument checker for one tool's schema.
pub(crate) struct ArgsChecker {
    validator: jsonschema::Validator,
}

impl ArgsChecker {
    pub(crate) fn compile(schema: &Value) -> Result<Self, String> {
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(schema)
            .map_err(|e| e.to_string())?;
        Ok(ArgsChecker { validator })
    }

    pub(crate) fn check(
        &self,
        tool: &str,
        schema: &Value,
        args: &Value,
    ) -> Result<(), ToolArgsError> {
        if !args.is_object() {
            return Err(ToolArgsError::single(
                tool,
                ArgProblem::ROOT,
                format!(
                    "expected a JSON object of named arguments; got {} {}",
                    type_name(args),
                    show_value(args)
                ),
            ));
        }
        if self.validator.is_valid(args) {
            return Ok(());
        }
        let mut problems: Vec<ArgProblem> = self
            .validator
            .iter_errors(args)
            .map(|e| problem_for(&e, schema))
            .collect();
        problems.dedup();
        problems.truncate(10);
        Err(ToolArgsError::new(tool, problems))
    }
}

/// Decodes checked arguments into `T`, naming the path of a failure. The arguments are
/// read where they lie: only what `T` keeps is copied.
pub fn decode<T: DeserializeOwned>(tool: &str, args: &Value) -> Result<T, ToolArgsError> {
    decode_at(tool, ArgProblem::ROOT, args)
}

/// Decodes one argument, naming `name` (and the path inside it) on failure; `name` is
/// [`ArgProblem::ROOT`] for the arguments object itself.
pub(crate) fn decode_at<T: DeserializeOwned>(
    tool: &str,
    name: &str,
    value: &Value,
) -> Result<T, ToolArgsError> {
    serde_path_to_error::deserialize(value).map_err(|err| {
        let inner = err.path().to_string();
        // serde appends " at line L column C" for text input; a Value has none.
        let path = if inner == "." || inner.is_empty() {
            name.to_owned()
        } else if name == ArgProblem::ROOT {
            inner
        } else if inner.starts_with('[') {
            format!("{name}{inner}")
        } else {
            format!("{name}.{inner}")
        };
        ToolArgsError::single(tool, path, err.into_inner().to_string())
    })
}

/// Checks the size of raw argument text before it is parsed.
pub(crate) fn check_size(tool: &str, len: usize, limit: usize) -> Result<(), ToolArgsError> {
    if len > limit {
        return Err(ToolArgsError::single(
            tool,
            ArgProblem::ROOT,
            format!("are {len} bytes; the limit is {limit} bytes. Send less data"),
        ));
    }
    Ok(())
}

/// The serialized size of a value, without building the text.
pub(crate) fn json_len(value: &Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Writing a Value to an in-memory counter cannot fail.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_become_argument_paths() {
        assert_eq!(pointer_to_path(""), "(arguments)");
        assert_eq!(pointer_to_path("/unit"), "unit");
        assert_eq!(pointer_to_path("/stops/2/city"), "stops[2].city");
        assert_eq!(pointer_to_path("/a~1b"), "a/b");
    }

    #[test]
    fn cut_respects_char_boundaries() {
        let text = "é".repeat(100);
        let shown = cut(&text, 80);
        assert!(shown.starts_with(&"é".repeat(80)));
        assert!(shown.ends_with("(200 bytes in all)"));
    }

    #[test]
    fn nulls_are_found_at_any_depth() {
        assert!(!has_null(&json!({"a": 1, "b": [true, "x", {"c": 2}]})));
        assert!(has_null(&json!({"a": 1, "b": [true, {"c": null}]})));
        assert!(has_null(&json!(null)));
    }

    #[test]
    fn json_len_matches_serialization() {
        let v = json!({"a": [1, 2, "ü"], "b": null});
        assert_eq!(json_len(&v), v.to_string().len());
    }
}
