//! Golden tests of the provider exports, each checked against JSON Schema's
//! meta-schema (where the format is JSON Schema) and the provider's rules.
//!
//! Regenerate the golden files with `UPDATE_GOLDEN=1 cargo test -p aaa-tests --test exports`
//! and review the diff.

use std::collections::HashMap;
use std::path::PathBuf;

use aaa_tools::export::Format;
use aaa_tools::{ToolError, ToolRegistry, tool, tools};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

/// How urgent.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
enum Priority {
    Low,
    High,
}

/// Where to deliver.
#[derive(Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[allow(dead_code)]
enum Destination {
    /// A street address.
    Address {
        /// Street and number.
        street: String,
        /// Postal code.
        zip: Option<String>,
    },
    /// A pickup point.
    Pickup {
        /// The point's id.
        point_id: u32,
    },
}

/// One line of an order.
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Line {
    /// Stock keeping unit.
    sku: String,
    /// How many.
    quantity: u16,
    /// Gift wrapping.
    #[serde(default)]
    gift: bool,
}

/// Place an order.
///
/// # Arguments
/// * `lines` - What to order.
/// * `destination` - Where to deliver it.
/// * `priority` - How urgent; low when left out.
/// * `note` - A note for the courier.
#[tool]
async fn place_order(
    lines: Vec<Line>,
    destination: Destination,
    priority: Option<Priority>,
    note: Option<String>,
) -> Result<String, ToolError> {
    let to = match destination {
        Destination::Address { street, .. } => street,
        Destination::Pickup { point_id } => format!("point {point_id}"),
    };
    Ok(format!(
        "{} lines to {to}, {:?}, {:?}",
        lines.len(),
        priority.is_some(),
        note
    ))
}

/// Tag a document.
///
/// # Arguments
/// * `labels` - Label name to weight.
#[tool]
async fn tag(labels: HashMap<String, f32>) -> usize {
    labels.len()
}

/// A folder tree.
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Folder {
    /// Its name.
    name: String,
    /// Its subfolders.
    children: Vec<Folder>,
}

/// Create a folder tree.
///
/// # Arguments
/// * `root` - The top folder.
#[tool]
async fn make_tree(root: Folder) -> String {
    root.name
}

/// Store any JSON.
///
/// # Arguments
/// * `value` - Anything.
#[tool(annotations(title = "Store", read_only_hint = false, idempotent_hint = true))]
async fn store(value: Value) -> Value {
    value
}

/// What time is it?
#[tool(annotations(read_only_hint = true))]
fn now() -> String {
    "noon".into()
}

fn registry() -> ToolRegistry {
    ToolRegistry::new(tools![place_order, tag, make_tree, store, now]).unwrap()
}

fn golden(name: &str, actual: &Value) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("golden")
        .join(format!("{name}.json"));
    let text = serde_json::to_string_pretty(actual).unwrap() + "\n";
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run with UPDATE_GOLDEN=1 to create it",
            path.display()
        )
    });
    assert_eq!(
        text,
        expected,
        "{name} export differs from {}",
        path.display()
    );
}

/// Every schema node (objects in schema positions), depth first.
fn nodes<'a>(schema: &'a Value, out: &mut Vec<&'a Map<String, Value>>) {
    let Value::Object(map) = schema else { return };
    out.push(map);
    for key in ["properties", "$defs"] {
        if let Some(Value::Object(children)) = map.get(key) {
            children.values().for_each(|c| nodes(c, out));
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = map.get(key) {
            nodes(child, out);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(children)) = map.get(key) {
            children.iter().for_each(|c| nodes(c, out));
        }
    }
}

fn assert_json_schema(schema: &Value, context: &str) {
    assert!(
        jsonschema::meta::is_valid(schema),
        "{context}: not a valid JSON Schema: {schema}"
    );
    assert_eq!(
        schema["type"], "object",
        "{context}: the root must be an object schema"
    );
    assert!(
        schema["properties"].is_object(),
        "{context}: `properties` must be present"
    );
}

fn check_openai_strict(parameters: &Value, tool: &str) {
    assert_json_schema(parameters, tool);
    const ALLOWED: &[&str] = &[
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "anyOf",
        "description",
        "$ref",
        "$defs",
        "format",
    ];
    let mut all = Vec::new();
    nodes(parameters, &mut all);
    for node in all {
        for key in node.keys() {
            assert!(
                ALLOWED.contains(&key.as_str()),
                "{tool}: strict mode does not accept `{key}` in {node:?}"
            );
        }
        if node.contains_key("properties") || node.get("type") == Some(&Value::from("object")) {
            assert_eq!(
                node.get("additionalProperties"),
                Some(&Value::Bool(false)),
                "{tool}: {node:?}"
            );
            let keys: Vec<&str> = node["properties"]
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            let required: Vec<&str> = node["required"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
            assert_eq!(
                keys, required,
                "{tool}: every property must be required in strict mode"
            );
        }
    }
}

fn check_gemini(parameters: &Value, tool: &str) {
    const ALLOWED: &[&str] = &[
        "type",
        "format",
        "description",
        "nullable",
        "enum",
        "items",
        "properties",
        "required",
        "anyOf",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "pattern",
    ];
    const TYPES: &[&str] = &["STRING", "INTEGER", "NUMBER", "BOOLEAN", "ARRAY", "OBJECT"];
    let mut all = Vec::new();
    nodes(parameters, &mut all);
    for node in all {
        for key in node.keys() {
            assert!(
                ALLOWED.contains(&key.as_str()),
                "{tool}: Gemini does not accept `{key}` in {node:?}"
            );
        }
        if let Some(t) = node.get("type") {
            assert!(TYPES.contains(&t.as_str().unwrap()), "{tool}: type {t}");
        }
        if let Some(Value::Array(values)) = node.get("enum") {
            assert!(
                values.iter().all(Value::is_string),
                "{tool}: Gemini enums are strings"
            );
        }
        if let Some(n) = node.get("nullable") {
            assert!(n.is_boolean());
        }
        if node.get("type") == Some(&Value::from("OBJECT")) {
            assert!(
                node["properties"]
                    .as_object()
                    .is_some_and(|p| !p.is_empty()),
                "{tool}: objects need properties"
            );
        }
    }
}

#[test]
fn openai_chat_completions() {
    let export = registry().export(Format::OpenAiChat { strict: false });
    assert!(export.errors.is_empty(), "{:?}", export.errors);
    for entry in &export.tools {
        assert_eq!(entry["type"], "function");
        assert!(entry["function"].get("strict").is_none());
        assert_json_schema(
            &entry["function"]["parameters"],
            entry["function"]["name"].as_str().unwrap(),
        );
    }
    golden("openai_chat", &export.to_json());
}

#[test]
fn openai_strict_expresses_what_it_can_and_names_what_it_cannot() {
    let export = registry().export(Format::OpenAiChat { strict: true });
    let names: Vec<&str> = export
        .tools
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["place_order", "make_tree", "now"]);
    for entry in &export.tools {
        assert_eq!(entry["function"]["strict"], true);
        check_openai_strict(
            &entry["function"]["parameters"],
            entry["function"]["name"].as_str().unwrap(),
        );
    }
    let errors: Vec<String> = export.errors.iter().map(ToString::to_string).collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0].starts_with(
            "tool `tag` cannot be exported for OpenAI Chat Completions (strict): `labels` is a map"
        ),
        "{}",
        errors[0]
    );
    assert!(errors[1].starts_with("tool `store` cannot be exported for OpenAI Chat Completions (strict): `value` accepts any JSON value"), "{}", errors[1]);
    // Optional parameters stay optional by accepting null.
    let place = &export.tools[0]["function"]["parameters"];
    assert_eq!(
        place["properties"]["note"]["type"],
        serde_json::json!(["string", "null"])
    );
    golden("openai_chat_strict", &export.to_json());

    let responses = registry().export(Format::OpenAiResponses { strict: true });
    assert_eq!(responses.tools[0]["name"], "place_order");
    assert_eq!(responses.tools[0]["strict"], true);
    assert_eq!(responses.tools[0]["parameters"], *place);
    let loose = registry().export(Format::OpenAiResponses { strict: false });
    assert_eq!(
        loose.tools[0]["strict"], false,
        "the Responses API defaults to strict, so false is written out"
    );
    golden("openai_responses_strict", &responses.to_json());
}

#[test]
fn anthropic() {
    let export = registry().export(Format::Anthropic);
    assert!(export.errors.is_empty());
    for entry in &export.tools {
        assert_eq!(
            entry.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["name", "description", "input_schema"]
        );
        assert_json_schema(&entry["input_schema"], entry["name"].as_str().unwrap());
    }
    golden("anthropic", &export.to_json());
}

#[test]
fn gemini_inlines_and_reports_recursion_per_tool() {
    let export = registry().export(Format::Gemini);
    let names: Vec<&str> = export
        .tools
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["place_order", "now"]);
    for entry in &export.tools {
        if let Some(parameters) = entry.get("parameters") {
            check_gemini(parameters, entry["name"].as_str().unwrap());
        }
    }
    assert!(
        export.tools[1].get("parameters").is_none(),
        "a tool without parameters leaves `parameters` unset"
    );
    let errors: Vec<String> = export.errors.iter().map(ToString::to_string).collect();
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(
        errors[0].contains("`tag` cannot be exported for Gemini: `labels` is a map"),
        "{}",
        errors[0]
    );
    assert!(errors[1].contains("`make_tree` cannot be exported for Gemini: `root.children[]` is of the recursive type `Folder`"), "{}", errors[1]);
    assert!(
        errors[2].contains("`store` cannot be exported for Gemini"),
        "{}",
        errors[2]
    );
    golden("gemini", &export.to_json());
}

#[test]
fn mcp_tools_list() {
    let export = registry().export(Format::Mcp);
    assert!(export.errors.is_empty());
    for entry in &export.tools {
        assert_json_schema(&entry["inputSchema"], entry["name"].as_str().unwrap());
    }
    let store = &export.tools[3];
    assert_eq!(store["title"], "Store");
    assert_eq!(
        store["annotations"],
        serde_json::json!({"title": "Store", "readOnlyHint": false, "idempotentHint": true})
    );
    assert!(export.tools[0].get("annotations").is_none());
    golden("mcp", &export.to_json());
}

#[tokio::test]
async fn what_strict_mode_sends_for_left_out_arguments_is_accepted() {
    // Strict mode made `gift` (a `#[serde(default)]` bool) and `note` nullable and
    // required; the model sends null for both.
    let args = serde_json::json!({
        "lines": [{"sku": "a-1", "quantity": 2, "gift": null}],
        "destination": {"kind": "pickup", "point_id": 4},
        "priority": null,
        "note": null,
    });
    let out = registry()
        .call(
            "place_order",
            aaa_tools::ToolContext::builder().build(),
            args,
        )
        .await
        .unwrap();
    assert_eq!(out, "1 lines to point 4, false, None");
}

#[test]
fn a_tool_without_parameters_exports_an_empty_object() {
    let expected = serde_json::json!({"type": "object", "properties": {}});
    for (format, pointer) in [
        (Format::OpenAiChat { strict: false }, "/function/parameters"),
        (Format::Anthropic, "/input_schema"),
        (Format::Mcp, "/inputSchema"),
    ] {
        let export = registry().export(format);
        let now = export
            .tools
            .iter()
            .find(|t| {
                t.pointer("/name").or(t.pointer("/function/name")) == Some(&Value::from("now"))
            })
            .unwrap();
        let mut schema = now.pointer(pointer).unwrap().clone();
        schema
            .as_object_mut()
            .unwrap()
            .remove("additionalProperties");
        assert_eq!(schema, expected, "{format:?}");
    }
}

#[test]
fn an_export_of_a_hundred_tools_reuses_the_schemas() {
    let many: Vec<aaa_tools::Tool> = (0..100)
        .map(|i| {
            aaa_tools::Tool::from_json_fn(
                format!("tool_{i}"),
                "A tool.",
                serde_json::json!({"type": "object", "properties": {"x": {"type": "integer"}}}),
                |_ctx, v: Value| async move { Ok::<_, ToolError>(v) },
            )
            .unwrap()
        })
        .collect();
    let registry = ToolRegistry::new(many).unwrap();
    let export = registry
        .export(Format::OpenAiChat { strict: true })
        .into_result()
        .unwrap();
    assert_eq!(export.len(), 100);
    assert_eq!(
        export[99]["function"]["parameters"]["required"],
        serde_json::json!(["x"])
    );
}

/// A hand-written JSON Schema 2020-12 with a `$schema` and a root `allOf`: MCP serves
/// it as written, the handler enforces it, and every provider format leaves the tool
/// out, naming the root composition (model providers reject one).
#[tokio::test]
async fn a_root_composition_is_served_over_mcp_and_refused_for_providers() {
    let dialect = "https://json-schema.org/draft/2020-12/schema";
    let schema = serde_json::json!({
        "$schema": dialect,
        "type": "object",
        "properties": {"phone": {"type": "string"}, "email": {"type": "string"}},
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "additionalProperties": false
    });
    let contact = aaa_tools::Tool::from_json_fn(
        "contact",
        "Contact someone.",
        schema,
        |_ctx, _args: Value| async move { Ok::<_, ToolError>("sent") },
    )
    .unwrap();
    let registry = ToolRegistry::new(vec![contact]).unwrap();

    let mcp = registry.export(Format::Mcp).into_result().unwrap();
    assert_eq!(mcp[0]["inputSchema"]["$schema"], dialect);
    assert!(mcp[0]["inputSchema"]["allOf"][0]["anyOf"].is_array());

    for format in [
        Format::OpenAiChat { strict: true },
        Format::OpenAiChat { strict: false },
        Format::OpenAiResponses { strict: false },
        Format::Anthropic,
        Format::Gemini,
    ] {
        let export = registry.export(format);
        assert!(export.tools.is_empty(), "{format:?}");
        assert!(
            export.errors[0].reason.contains("root is an allOf"),
            "{format:?}: {}",
            export.errors[0]
        );
    }

    let engine = aaa_tools::Engine::embedded();
    let _worker = aaa_tools::ToolHandler::new(registry)
        .attach(&engine)
        .await
        .unwrap();
    let run = engine.new_run();
    let refused = run.call("contact", serde_json::json!({})).await.unwrap();
    let failure = refused.failure().expect("neither phone nor email");
    assert_eq!(
        failure.kind,
        aaa_tools::event::FailureKind::BadArgs,
        "{}",
        failure.message
    );
    let sent = run
        .call("contact", serde_json::json!({"email": "a@b.c"}))
        .await
        .unwrap();
    assert_eq!(sent.result(), Some(&serde_json::json!("sent")));
}

/// A `$schema` alone is kept for MCP and dropped for the providers.
#[test]
fn a_dialect_is_kept_for_mcp_and_dropped_for_providers() {
    let schema = serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"q": {"type": "string"}},
        "required": ["q"]
    });
    let find =
        aaa_tools::Tool::from_json_fn("find", "Find.", schema, |_ctx, _args: Value| async move {
            Ok::<_, ToolError>(0)
        })
        .unwrap();
    let registry = ToolRegistry::new(vec![find]).unwrap();
    let mcp = registry.export(Format::Mcp).into_result().unwrap();
    assert!(mcp[0]["inputSchema"].get("$schema").is_some());
    let anthropic = registry.export(Format::Anthropic).into_result().unwrap();
    assert!(anthropic[0]["input_schema"].get("$schema").is_none());
    let chat = registry
        .export(Format::OpenAiChat { strict: false })
        .into_result()
        .unwrap();
    assert!(chat[0]["function"]["parameters"].get("$schema").is_none());
}
