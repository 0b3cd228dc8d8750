//! Bad input never panics: every fixture with each of its values replaced by values of
//! every other type, and arbitrary JSON, through every codec.

mod common;

use aaa_loop::{anthropic, gemini, openai_chat, openai_responses};
use proptest::prelude::*;
use serde_json::{Value, json};

const DIRS: [&str; 4] = ["openai_chat", "openai_responses", "anthropic", "gemini"];

/// Every JSON value in a fixture directory: whole bodies, and each stream as a list.
fn fixtures(dir: &str) -> Vec<(String, Vec<Value>)> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir);
    let mut out = Vec::new();
    for entry in std::fs::read_dir(path).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let values = match path.extension().and_then(|e| e.to_str()) {
            Some("json") => vec![common::body(dir, &name)],
            Some("jsonl") => common::events(dir, &name)
                .iter()
                .filter_map(|line| serde_json::from_slice(line).ok())
                .collect(),
            _ => continue,
        };
        out.push((name, values));
    }
    assert!(out.len() >= 10, "{dir}: fixtures missing");
    out
}

/// Feeds `events` to `dir`'s codec as a whole body (the first) and as a stream.
fn feed(dir: &str, events: &[Value]) {
    match dir {
        "openai_chat" => {
            let _ = openai_chat::parse(&events[0]);
            let mut stream = openai_chat::Assembler::new();
            if events.iter().all(|e| stream.push(e).is_ok()) {
                let _ = stream.finish();
            }
        }
        "openai_responses" => {
            let _ = openai_responses::parse(&events[0]);
            let mut stream = openai_responses::Assembler::new();
            if events.iter().all(|e| stream.push(e).is_ok()) {
                let _ = stream.finish();
            }
        }
        "anthropic" => {
            let _ = anthropic::parse(&events[0]);
            let mut stream = anthropic::Assembler::new();
            if events.iter().all(|e| stream.push(e).is_ok()) {
                let _ = stream.finish();
            }
        }
        _ => {
            let _ = gemini::parse(&events[0], u32::MAX);
            let mut stream = gemini::Assembler::new(u32::MAX);
            if events.iter().all(|e| stream.push(e).is_ok()) {
                let _ = stream.finish();
            }
        }
    }
}

/// Pointers to every value inside `value`.
fn pointers(value: &Value, at: String, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                pointers(
                    child,
                    format!("{at}/{}", key.replace('~', "~0").replace('/', "~1")),
                    out,
                );
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                pointers(child, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
    out.push(at);
}

#[test]
fn every_value_of_every_fixture_replaced_by_every_other_kind() {
    let replacements = [
        Value::Null,
        json!(true),
        json!(-1),
        json!(1e300),
        json!(u64::MAX),
        json!(""),
        json!("{\"a\":"),
        json!([]),
        json!({}),
    ];
    let mut runs = 0;
    for dir in DIRS {
        for (_, events) in fixtures(dir) {
            for (i, event) in events.iter().enumerate() {
                let mut paths = Vec::new();
                pointers(event, String::new(), &mut paths);
                for path in paths {
                    for replacement in &replacements {
                        let mut mutated = events.clone();
                        match mutated[i].pointer_mut(&path) {
                            Some(slot) => *slot = replacement.clone(),
                            None => continue,
                        }
                        feed(dir, &mutated);
                        runs += 1;
                    }
                }
                // And each event left out, or sent twice.
                let mut without = events.clone();
                without.remove(i);
                if !without.is_empty() {
                    feed(dir, &without);
                }
                let mut twice = events.clone();
                twice.insert(i, event.clone());
                feed(dir, &twice);
            }
        }
    }
    assert!(runs > 10_000, "{runs}");
}

#[test]
fn every_prefix_of_a_body_is_an_error_not_a_panic() {
    for dir in DIRS {
        let bytes = common::bytes(dir, "parallel_calls");
        for end in 0..bytes.trim_ascii_end().len() {
            let prefix = &bytes[..end];
            let failed = match dir {
                "openai_chat" => openai_chat::parse_slice(prefix).is_err(),
                "openai_responses" => openai_responses::parse_slice(prefix).is_err(),
                "anthropic" => anthropic::parse_slice(prefix).is_err(),
                _ => gemini::parse_slice(prefix, 0).is_err(),
            };
            assert!(failed, "{dir}: a prefix of {end} bytes parsed");
        }
    }
}

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        prop::sample::select(vec![
            "type",
            "tool_use",
            "function_call",
            "content_block_delta",
            "response.completed",
            "message_delta",
            "STOP",
            "SAFETY",
            "{",
            "",
        ])
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        let keys = prop::sample::select(vec![
            "choices",
            "message",
            "tool_calls",
            "delta",
            "index",
            "id",
            "function",
            "arguments",
            "name",
            "output",
            "output_index",
            "item",
            "call_id",
            "content",
            "content_block",
            "partial_json",
            "input",
            "candidates",
            "parts",
            "functionCall",
            "args",
            "type",
            "stop_reason",
            "finishReason",
            "usage",
            "error",
            "response",
            "status",
        ]);
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((keys, inner), 0..6).prop_map(|pairs| Value::Object(
                pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
            )),
        ]
    })
}

proptest! {
    #[test]
    fn arbitrary_json_never_panics(events in prop::collection::vec(arbitrary_json(), 1..5)) {
        for dir in DIRS {
            feed(dir, &events);
        }
    }
}
