//! A `ToolLoop` driven end to end through each HTTP client: the local server answers
//! as the provider would (first a call of `add`, then the answer), the call runs
//! through the embedded engine on a real `#[tool]`, and its result goes back to the
//! provider in the provider's format.

// Each test needs its client's feature; the `http` feature alone has none.
#![cfg(any(
    feature = "openai-chat",
    feature = "openai-responses",
    feature = "anthropic",
    feature = "gemini"
))]

mod http_server;

use std::time::Duration;

use aaa_loop::{LoopEnd, LoopResult, Message, Model, ToolLoop};
use aaa_tools::{Engine, ToolHandler, ToolRegistry, tools};
use http_server::{Reply, Server, tools::add};
use serde_json::{Value, json};

/// Runs a loop with `model` on a fresh embedded engine whose handler runs `add`.
async fn run_loop(model: impl Model + 'static) -> LoopResult {
    let engine = Engine::embedded();
    let _worker = ToolHandler::new(ToolRegistry::new(tools![add]).unwrap())
        .attach(&engine)
        .await
        .unwrap();
    let agent = ToolLoop::new(model, tools![add]);
    let input = vec![
        Message::system("Use the tools."),
        Message::user("What is 2 + 3?"),
    ];
    let result = tokio::time::timeout(Duration::from_secs(30), agent.run(&engine.new_run(), input))
        .await
        .expect("the loop hung")
        .unwrap();
    assert_eq!(result.end, LoopEnd::Final("2 + 3 = 5.".into()));
    assert_eq!((result.turns, result.tool_calls), (2, 1));
    result
}

/// The server's two replies for `provider`.
async fn server(provider: &str) -> Server {
    Server::start([
        Reply::fixture(provider, "loop_call_add"),
        Reply::fixture(provider, "loop_answer"),
    ])
    .await
}

/// The body of the second request: the conversation with the call and its result.
fn second_body(server: &Server) -> Value {
    let received = server.received();
    assert_eq!(received.len(), 2, "{received:#?}");
    received[1].body.clone()
}

#[cfg(feature = "openai-chat")]
#[tokio::test]
async fn openai_chat_drives_a_loop() {
    use aaa_loop::http::OpenAiChatModel;

    let server = server("openai_chat").await;
    let model = OpenAiChatModel::builder("gpt-4.1")
        .base_url(server.url())
        .api_key("sk-test")
        .build()
        .unwrap();
    let result = run_loop(model).await;
    assert_eq!(result.usage.total_tokens(), 78 + 98);
    let body = second_body(&server);
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "Use the tools."},
            {"role": "user", "content": "What is 2 + 3?"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_Ad2xQ9pLm3Vt7Rk1Zs8Yw4Nb",
                "type": "function", "function": {"name": "add", "arguments": "{\"a\":2,\"b\":3}"}}]},
            {"role": "tool", "tool_call_id": "call_Ad2xQ9pLm3Vt7Rk1Zs8Yw4Nb", "content": "5"},
        ])
    );
}

#[cfg(feature = "openai-responses")]
#[tokio::test]
async fn openai_responses_drives_a_loop() {
    use aaa_loop::http::OpenAiResponsesModel;

    let server = server("openai_responses").await;
    let model = OpenAiResponsesModel::builder("gpt-4.1")
        .base_url(server.url())
        .api_key("sk-test")
        .build()
        .unwrap();
    run_loop(model).await;
    let body = second_body(&server);
    assert_eq!(
        body["input"],
        json!([
            {"role": "system", "content": "Use the tools."},
            {"role": "user", "content": "What is 2 + 3?"},
            {"type": "function_call", "call_id": "call_Ad2xQ9pLm3Vt7Rk1Zs8Yw4Nb", "name": "add", "arguments": "{\"a\":2,\"b\":3}"},
            {"type": "function_call_output", "call_id": "call_Ad2xQ9pLm3Vt7Rk1Zs8Yw4Nb", "output": "5"},
        ])
    );
}

#[cfg(feature = "openai-responses")]
#[tokio::test]
async fn openai_responses_reasoning_goes_back_with_its_turn() {
    use aaa_loop::http::OpenAiResponsesModel;

    let server = Server::start([
        Reply::fixture("openai_responses", "loop_reasoning_call_add"),
        Reply::fixture("openai_responses", "loop_answer"),
    ])
    .await;
    let model = OpenAiResponsesModel::builder("o4-mini")
        .base_url(server.url())
        .api_key("sk-test")
        .build()
        .unwrap();
    run_loop(model).await;
    let body = second_body(&server);
    let reasoning =
        http_server::fixture_json("openai_responses", "loop_reasoning_call_add")["output"][0]
            .clone();
    // The reasoning as it came, then the call it led to, then the call's output.
    assert_eq!(body["input"][2], reasoning);
    assert_eq!(body["input"][3]["type"], "function_call");
    assert_eq!(body["input"][4]["type"], "function_call_output");
}

#[cfg(feature = "anthropic")]
#[tokio::test]
async fn anthropic_drives_a_loop() {
    use aaa_loop::http::AnthropicModel;

    let server = server("anthropic").await;
    let model = AnthropicModel::builder("claude-sonnet-4-5")
        .base_url(server.url())
        .api_key("sk-ant-test")
        .build()
        .unwrap();
    run_loop(model).await;
    let body = second_body(&server);
    assert_eq!(body["system"], "Use the tools.");
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": "What is 2 + 3?"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "I'll add them."},
                {"type": "tool_use", "id": "toolu_01AddQ9pLm3Vt7Rk1Zs8Yw4N", "name": "add", "input": {"a": 2, "b": 3}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01AddQ9pLm3Vt7Rk1Zs8Yw4N", "content": "5"},
            ]},
        ])
    );
}

#[cfg(feature = "anthropic")]
#[tokio::test]
async fn anthropic_thinking_goes_back_with_its_turn() {
    use aaa_loop::http::AnthropicModel;

    let server = Server::start([
        Reply::fixture("anthropic", "loop_thinking_call_add"),
        Reply::fixture("anthropic", "loop_answer"),
    ])
    .await;
    let model = AnthropicModel::builder("claude-sonnet-4-5")
        .base_url(server.url())
        .api_key("sk-ant-test")
        .body_field(
            "thinking",
            json!({"type": "enabled", "budget_tokens": 2048}),
        )
        .build()
        .unwrap();
    run_loop(model).await;
    let body = second_body(&server);
    assert_eq!(body["thinking"]["type"], "enabled");
    // The turn's thinking, unchanged and first, then its tool use.
    let sent = &body["messages"][1]["content"];
    let answered = http_server::fixture_json("anthropic", "loop_thinking_call_add");
    assert_eq!(sent, &answered["content"], "{sent:#}");
}

#[cfg(feature = "gemini")]
#[tokio::test]
async fn gemini_drives_a_loop() {
    use aaa_loop::http::GeminiModel;

    let server = server("gemini").await;
    let model = GeminiModel::builder("gemini-2.5-flash")
        .base_url(server.url())
        .api_key("test-key")
        .build()
        .unwrap();
    let result = run_loop(model).await;
    assert_eq!(result.usage.total_tokens(), (61 + 21 + 44) + (98 + 8));
    let body = second_body(&server);
    assert_eq!(
        body["systemInstruction"],
        json!({"parts": [{"text": "Use the tools."}]})
    );
    // The call came without an id: it is echoed without one, answered by name and
    // order, and with the signature it came with.
    assert_eq!(
        body["contents"],
        json!([
            {"role": "user", "parts": [{"text": "What is 2 + 3?"}]},
            {"role": "model", "parts": [
                {"text": "I'll add them."},
                {"functionCall": {"name": "add", "args": {"a": 2, "b": 3}},
                 "thoughtSignature": "CiQB0e2Kb7yFq3pN1vR8sW4tX6zA9cD2eG5hJ7kL0mP3qS6uV8w="},
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "add", "response": {"result": 5}}},
            ]},
        ])
    );
}
