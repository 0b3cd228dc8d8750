//! Fixtures and outcomes shared by the codec tests.

#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;

use aaa_loop::{ArgumentsOrProblem, ProviderCall};
use aaa_tools::Outcome;
use serde_json::{Map, Value, json};

fn path(provider: &str, file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(provider)
        .join(file)
}

/// `tests/fixtures/<provider>/<name>.json`, as bytes.
pub fn bytes(provider: &str, name: &str) -> Vec<u8> {
    let path = path(provider, &format!("{name}.json"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `tests/fixtures/<provider>/<name>.json`, as JSON.
pub fn body(provider: &str, name: &str) -> Value {
    serde_json::from_slice(&bytes(provider, name)).unwrap()
}

/// The events of `tests/fixtures/<provider>/<name>.jsonl`: one server-sent event's
/// `data` a line.
pub fn events(provider: &str, name: &str) -> Vec<Vec<u8>> {
    let path = path(provider, &format!("{name}.jsonl"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| line.as_bytes().to_vec())
        .collect()
}

/// The arguments of a call that has usable ones, as a JSON value.
pub fn args(call: &ProviderCall) -> Value {
    match &call.arguments {
        ArgumentsOrProblem::Arguments(map) => Value::Object(Map::clone(map)),
        other => panic!("call {} has no arguments: {other:?}", call.call_id),
    }
}

/// The problem of a call whose arguments are unusable.
pub fn problem(call: &ProviderCall) -> &str {
    call.arguments
        .problem()
        .unwrap_or_else(|| panic!("call {} has arguments, expected a problem", call.call_id))
}

/// `(provider id, name, arguments)` of each call, for whole-list comparisons.
pub fn summary(calls: &[ProviderCall]) -> Vec<(Option<String>, String, Value)> {
    calls
        .iter()
        .map(|c| {
            let id = c.provider_id.as_ref().map(|id| id.to_string());
            (id, c.name.to_string(), args(c))
        })
        .collect()
}

/// The three calls every `parallel_calls` fixture holds, in order.
pub fn parallel_expected() -> Vec<(String, Value)> {
    vec![
        ("get_weather".into(), json!({"city": "Zürich"})),
        ("get_time".into(), json!({"tz": "Europe/Oslo"})),
        (
            "get_weather".into(),
            json!({"city": "Oslo", "unit": "fahrenheit"}),
        ),
    ]
}

/// The `aaa.tool.completed` fact of a call, as the engine publishes it.
pub fn completed(call: &ProviderCall, result: Value) -> Outcome {
    Outcome::Completed(
        serde_json::from_value(json!({
            "call_id": call.call_id, "name": call.name, "result": result, "attempt": 1
        }))
        .unwrap(),
    )
}

/// The `aaa.tool.failed` fact of a call, as the engine publishes it.
pub fn failed(call: &ProviderCall, kind: &str, message: &str) -> Outcome {
    Outcome::Failed(
        serde_json::from_value(json!({
            "call_id": call.call_id, "name": call.name, "kind": kind, "message": message, "attempt": 1
        }))
        .unwrap(),
    )
}

/// An empty argument object.
pub fn no_args() -> Map<String, Value> {
    Map::new()
}
