//! Outcomes from a real engine, rendered for every provider: the path a loop takes.

mod common;

use aaa_loop::{
    ArgumentsOrProblem, AssistantTurn, anthropic, gemini, openai_chat, openai_responses,
};
use aaa_tools::{Engine, Outcome, ToolCall, ToolError, ToolHandler, ToolRegistry, tool, tools};
use common::{body, events};
use serde_json::{Map, Value, json};

/// Get the weather in a city.
///
/// # Arguments
/// * `city` - The city.
/// * `unit` - `celsius` (the default) or `fahrenheit`.
#[tool]
async fn get_weather(city: String, unit: Option<String>) -> Result<Value, ToolError> {
    if city == "Oslo" {
        return Err(ToolError::new("no station in Oslo"));
    }
    let degrees = if unit.as_deref() == Some("fahrenheit") {
        70.7
    } else {
        21.5
    };
    Ok(json!({"city": city, "degrees": degrees}))
}

/// The time in a time zone.
///
/// # Arguments
/// * `tz` - An IANA time zone.
#[tool]
fn get_time(tz: String) -> String {
    format!("12:00 in {tz}")
}

/// Runs a turn's calls through an embedded engine, as the loop will: usable arguments
/// as they are, a problem as arguments the engine refuses (`bad_args`).
async fn run(turn: &AssistantTurn) -> Vec<Outcome> {
    let engine = Engine::embedded();
    let registry = ToolRegistry::new(tools![get_weather, get_time]).unwrap();
    let _worker = ToolHandler::new(registry).attach(&engine).await.unwrap();
    let calls = turn
        .calls
        .iter()
        .map(|call| {
            let arguments = match &call.arguments {
                ArgumentsOrProblem::Arguments(map) => Value::Object(Map::clone(map)),
                other => Value::String(other.problem().unwrap().to_owned()),
            };
            ToolCall::new(call.name.clone(), arguments).with_id(call.call_id.clone())
        })
        .collect();
    let mut outcomes = engine.new_run().call_all(calls).await.unwrap();
    // Whatever order they come in, rendering follows the calls.
    outcomes.reverse();
    outcomes
}

#[tokio::test]
async fn openai_chat_messages_from_real_outcomes() {
    let turn = openai_chat::parse(&body("openai_chat", "parallel_calls")).unwrap();
    let outcomes = run(&turn).await;
    let messages = openai_chat::render_outcomes(&turn.calls, &outcomes).unwrap();
    assert_eq!(
        messages,
        [
            json!({"role": "tool", "tool_call_id": "call_3xzbtJ9xQ1xB4HBy8bHvoWBa",
                   "content": "{\"city\":\"Zürich\",\"degrees\":21.5}"}),
            json!({"role": "tool", "tool_call_id": "call_Zt1bMSuEQV2UE6wkSoZkHF8d", "content": "12:00 in Europe/Oslo"}),
            json!({"role": "tool", "tool_call_id": "call_pK8mW2nQ4rT6vX8zB1dF3hJ5",
                   "content": "error (error): no station in Oslo"}),
        ]
    );
}

#[tokio::test]
async fn failed_outcomes_render_exactly_their_text_for_the_model() {
    // `call_mal` carries a problem, which the engine refuses as `bad_args`; `call_ok`
    // sends `{}` to a tool that needs `tz`.
    let turn = openai_responses::parse(&body("openai_responses", "malformed_args")).unwrap();
    let outcomes = run(&turn).await;
    let items = openai_responses::render_outcomes(&turn.calls, &outcomes).unwrap();
    for (item, call) in items.iter().zip(&turn.calls) {
        let outcome = outcomes
            .iter()
            .find(|o| *o.call_id() == call.call_id)
            .unwrap();
        assert_eq!(outcome.failure().unwrap().kind.as_str(), "bad_args");
        assert_eq!(item["call_id"], call.provider_id.as_deref().unwrap());
        assert_eq!(item["output"], outcome.for_model());
    }
    assert_eq!(
        items[1],
        json!({"type": "function_call_output", "call_id": "call_ok",
               "output": "error (bad_args): invalid arguments for `get_time`: tz: is required but missing"})
    );
}

#[tokio::test]
async fn anthropic_tool_results_from_a_streamed_turn() {
    let mut assembler = anthropic::Assembler::new();
    for event in events("anthropic", "stream_parallel_calls") {
        assembler.push_slice(&event).unwrap();
    }
    let turn = assembler.finish().unwrap();
    let outcomes = run(&turn).await;
    let messages = anthropic::render_outcomes(&turn.calls, &outcomes).unwrap();
    assert_eq!(
        messages,
        [json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
             "content": "{\"city\":\"Zürich\",\"degrees\":21.5}"},
            {"type": "tool_result", "tool_use_id": "toolu_01Hn6ZoQNVBT5k3bFqXWgQ7c", "content": "12:00 in Europe/Oslo"},
            {"type": "tool_result", "tool_use_id": "toolu_01PzR3y5Wq8XkV2mN4bL6jT9",
             "content": "error (error): no station in Oslo", "is_error": true},
        ]})]
    );
}

#[tokio::test]
async fn gemini_function_responses_from_positional_calls() {
    let turn = gemini::parse(&body("gemini", "parallel_calls"), 2).unwrap();
    let outcomes = run(&turn).await;
    let contents = gemini::render_outcomes(&turn.calls, &outcomes).unwrap();
    assert_eq!(
        contents,
        [json!({"role": "user", "parts": [
            {"functionResponse": {"name": "get_weather", "response": {"city": "Zürich", "degrees": 21.5}}},
            {"functionResponse": {"name": "get_time", "response": {"result": "12:00 in Europe/Oslo"}}},
            {"functionResponse": {"name": "get_weather", "response": {"error": "error (error): no station in Oslo"}}},
        ]})]
    );
}

#[tokio::test]
async fn odd_provider_ids_reach_the_engine_encoded_and_come_back_as_sent() {
    let long = format!("call.{}", "x".repeat(140));
    let body = json!({"choices": [{"finish_reason": "tool_calls", "message": {"tool_calls": [
        {"id": "functions.get_time:0", "type": "function", "function": {"name": "get_time", "arguments": "{\"tz\":\"UTC\"}"}},
        {"id": long, "type": "function", "function": {"name": "get_time", "arguments": "{\"tz\":\"CET\"}"}},
    ]}}]});
    let turn = openai_chat::parse(&body).unwrap();
    assert_eq!(
        turn.calls[0].call_id.as_str(),
        "x--bZnVuY3Rpb25zLmdldF90aW1lOjA"
    );
    assert!(turn.calls[1].call_id.as_str().starts_with("x--s"));
    let outcomes = run(&turn).await;
    assert_eq!(
        outcomes
            .iter()
            .map(|o| o.call_id())
            .collect::<Vec<_>>()
            .len(),
        2
    );
    let messages = openai_chat::render_outcomes(&turn.calls, &outcomes).unwrap();
    assert_eq!(messages[0]["tool_call_id"], "functions.get_time:0");
    assert_eq!(messages[0]["content"], "12:00 in UTC");
    assert_eq!(messages[1]["tool_call_id"], json!(long));
    assert_eq!(messages[1]["content"], "12:00 in CET");
}
