//! `OpenAiResponsesModel` against a local server that answers as OpenAI Responses
//! does. OpenAI's error bodies are the same for both of its APIs, so the error
//! fixtures are Chat Completions'.

#![cfg(feature = "openai-responses")]

mod http_server;

use aaa_loop::http::{OpenAiResponsesModel, RetryPolicy};
use aaa_loop::{ModelError, StopReason};
use http_server::{Reply, Server, fast_retries, request, turn};
use serde_json::json;

const P: &str = "openai_responses";

fn client(server: &Server, retry: RetryPolicy) -> OpenAiResponsesModel {
    OpenAiResponsesModel::builder("gpt-5")
        .base_url(format!("{}/v1", server.url()))
        .api_key("sk-test")
        .retry(retry)
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_plain_answer_and_what_the_client_sent() {
    let server = Server::start([Reply::fixture(P, "text_only")]).await;
    let turn = turn(
        &client(&server, RetryPolicy::none()),
        &request().with_max_output_tokens(500),
    )
    .await
    .unwrap();
    assert_eq!(
        turn.text.as_deref(),
        Some("It is 18 °C and sunny in Paris.")
    );
    assert_eq!(turn.stop, StopReason::EndTurn);

    let sent = server.only();
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("POST", "/v1/responses")
    );
    assert_eq!(sent.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(sent.body["model"], "gpt-5");
    assert_eq!(sent.body["max_output_tokens"], 500);
    assert_eq!(
        sent.body["input"],
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
        ])
    );
    // The tool in the Responses format: flat, `strict` written out.
    let tool = &sent.body["tools"][0];
    assert_eq!(
        (tool["type"].as_str(), tool["name"].as_str()),
        (Some("function"), Some("add"))
    );
    assert_eq!(tool["strict"], false);
    assert_eq!(tool["parameters"]["required"], json!(["a", "b"]));
    assert_eq!(tool.get("function"), None);
}

#[tokio::test]
async fn strict_tools_are_exported_strict() {
    let server = Server::start([Reply::fixture(P, "text_only")]).await;
    let model = OpenAiResponsesModel::builder("gpt-5")
        .base_url(server.url())
        .strict_tools(true)
        .build()
        .unwrap();
    turn(&model, &request()).await.unwrap();
    let tool = &server.only().body["tools"][0];
    assert_eq!(tool["strict"], true);
    assert_eq!(tool["parameters"]["additionalProperties"], false);
}

#[tokio::test]
async fn parallel_calls_come_in_the_providers_order() {
    let server = Server::start([Reply::fixture(P, "parallel_calls")]).await;
    let turn = turn(&client(&server, RetryPolicy::none()), &request())
        .await
        .unwrap();
    let calls: Vec<_> = turn
        .calls
        .iter()
        .map(|c| (c.provider_id.as_deref().unwrap(), &*c.name))
        .collect();
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[0], ("call_3xzbtJ9xQ1xB4HBy8bHvoWBa", "get_weather"));
    assert_eq!(turn.stop, StopReason::ToolUse);
}

#[tokio::test]
async fn malformed_arguments_are_a_problem_on_that_call() {
    let server = Server::start([Reply::fixture(P, "malformed_args")]).await;
    let turn = turn(&client(&server, RetryPolicy::none()), &request())
        .await
        .unwrap();
    assert!(
        turn.calls[0]
            .arguments
            .problem()
            .unwrap()
            .starts_with("the arguments are not valid JSON")
    );
    assert!(turn.calls[1].arguments.arguments().is_some());
}

#[tokio::test]
async fn a_refusal_is_a_turn() {
    let server = Server::start([Reply::fixture(P, "refusal")]).await;
    let turn = turn(&client(&server, RetryPolicy::none()), &request())
        .await
        .unwrap();
    assert_eq!(
        turn.stop,
        StopReason::Refused("I'm sorry, I can't help with that request.".into())
    );
}

#[tokio::test]
async fn errors_are_retried_or_not_as_their_status_says() {
    let server = Server::start([
        Reply::error(500, "openai_chat", "http_500"),
        Reply::error(429, "openai_chat", "http_429").header("retry-after", "0"),
        Reply::error(401, "openai_chat", "http_401"),
        Reply::fixture(P, "text_only"),
    ])
    .await;
    let error = turn(&client(&server, fast_retries(5)), &request())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ModelError::Status { status: 401, message } if message.starts_with("invalid_request_error: Incorrect API key provided")),
        "{error:?}"
    );
    assert_eq!(server.received().len(), 3);
}

#[tokio::test]
async fn a_streamed_answer_is_assembled() {
    let server = Server::start([Reply::events(P, "stream_parallel_calls")]).await;
    let model = OpenAiResponsesModel::builder("gpt-5")
        .base_url(server.url())
        .streaming(true)
        .build()
        .unwrap();
    let turn = turn(&model, &request()).await.unwrap();
    assert_eq!(turn.calls.len(), 3);
    assert_eq!(
        turn.calls[0].arguments.arguments().unwrap()["city"],
        "Zürich"
    );
    assert_eq!(server.only().body["stream"], true);
}
