//! `AnthropicModel` against a local server that answers as Anthropic Messages does:
//! its headers, its body (system apart, tools with `input_schema`, `max_tokens`),
//! its error bodies, streams, and retries.

#![cfg(feature = "anthropic")]

mod http_server;

use std::time::Duration;

use aaa_loop::http::{AnthropicModel, RetryPolicy};
use aaa_loop::{ModelError, StopReason};
use http_server::{Reply, Server, fast_retries, request, turn};
use serde_json::json;

const P: &str = "anthropic";

fn client(server: &Server, retry: RetryPolicy) -> AnthropicModel {
    AnthropicModel::builder("claude-sonnet-4-5")
        .base_url(server.url())
        .api_key("sk-ant-test")
        .retry(retry)
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_plain_answer_and_what_the_client_sent() {
    let server = Server::start([Reply::fixture(P, "text_only")]).await;
    let turn = turn(&client(&server, RetryPolicy::none()), &request())
        .await
        .unwrap();
    assert_eq!(
        turn.text.as_deref(),
        Some("It is 18 °C and sunny in Paris.")
    );
    assert_eq!(turn.stop, StopReason::EndTurn);
    // Cached prompt tokens count in the prompt.
    assert_eq!(
        (turn.usage.input_tokens, turn.usage.cached_input_tokens),
        (1496, 1024)
    );

    let sent = server.only();
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(sent.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.header("authorization"), None);
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert_eq!(sent.body["model"], "claude-sonnet-4-5");
    assert_eq!(sent.body["system"], "Be brief.");
    assert_eq!(sent.body["max_tokens"], 4096);
    assert_eq!(
        sent.body["messages"],
        json!([{"role": "user", "content": "Weather in Paris?"}])
    );
    // The tool in Anthropic's format: `input_schema`, no `type`/`function` wrapper.
    let tool = &sent.body["tools"][0];
    assert_eq!(tool["name"], "add");
    assert_eq!(tool["description"], "Add two integers.");
    assert_eq!(tool["input_schema"]["type"], "object");
    assert_eq!(tool["input_schema"]["required"], json!(["a", "b"]));
    assert_eq!(tool.get("function"), None);
}

#[tokio::test]
async fn the_version_and_the_output_limit_can_be_set() {
    let server = Server::start([
        Reply::fixture(P, "text_only"),
        Reply::fixture(P, "text_only"),
    ])
    .await;
    let model = AnthropicModel::builder("claude-haiku-4-5")
        .base_url(server.url())
        .api_key("sk-ant-test")
        .anthropic_version("2023-01-01")
        .max_tokens(512)
        .build()
        .unwrap();
    turn(&model, &request()).await.unwrap();
    turn(&model, &request().with_max_output_tokens(64))
        .await
        .unwrap();
    let sent = server.received();
    assert_eq!(sent[0].header("anthropic-version"), Some("2023-01-01"));
    assert_eq!(
        (
            sent[0].body["max_tokens"].as_u64(),
            sent[1].body["max_tokens"].as_u64()
        ),
        (Some(512), Some(64))
    );
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
    assert_eq!(
        calls,
        [
            ("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather"),
            ("toolu_01Hn6ZoQNVBT5k3bFqXWgQ7c", "get_time"),
            ("toolu_01PzR3y5Wq8XkV2mN4bL6jT9", "get_weather"),
        ]
    );
    assert_eq!(turn.text.as_deref(), Some("Checking all three."));
}

#[tokio::test]
async fn input_that_is_not_an_object_is_a_problem_on_that_call() {
    let server = Server::start([Reply::fixture(P, "non_object_args")]).await;
    let turn = turn(&client(&server, RetryPolicy::none()), &request())
        .await
        .unwrap();
    assert!(
        turn.calls[0]
            .arguments
            .problem()
            .unwrap()
            .starts_with("the arguments are a JSON array, not an object")
    );
    assert!(
        turn.calls[1]
            .arguments
            .problem()
            .unwrap()
            .starts_with("the arguments are a JSON string, not an object")
    );
}

#[tokio::test]
async fn a_refusal_is_a_turn() {
    let server = Server::start([Reply::fixture(P, "refusal")]).await;
    let turn = turn(&client(&server, RetryPolicy::none()), &request())
        .await
        .unwrap();
    assert_eq!(
        turn.stop,
        StopReason::Refused("the model declined to answer (stop_reason: refusal)".into())
    );
}

#[tokio::test]
async fn overloaded_and_rate_limited_are_retried() {
    let server = Server::start([
        Reply::error(529, P, "error"),
        Reply::error(429, P, "http_429").header("retry-after", "0"),
        Reply::error(500, P, "http_500"),
        Reply::fixture(P, "text_only"),
    ])
    .await;
    let turn = turn(&client(&server, fast_retries(3)), &request())
        .await
        .unwrap();
    assert_eq!(
        turn.text.as_deref(),
        Some("It is 18 °C and sunny in Paris.")
    );
    assert_eq!(server.received().len(), 4);
}

#[tokio::test]
async fn an_error_that_persists_names_the_status_and_the_providers_message() {
    let server = Server::start(vec![Reply::error(529, P, "error"); 2]).await;
    let error = turn(&client(&server, fast_retries(1)), &request())
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "the model API answered 529: overloaded_error: Overloaded (gave up after 2 attempts)"
    );
}

#[tokio::test]
async fn a_401_is_not_retried_and_says_why() {
    let server = Server::start([
        Reply::error(401, P, "http_401"),
        Reply::fixture(P, "text_only"),
    ])
    .await;
    let error = turn(&client(&server, fast_retries(3)), &request())
        .await
        .unwrap_err();
    assert_eq!(
        error,
        ModelError::Status {
            status: 401,
            message: "authentication_error: invalid x-api-key".into()
        }
    );
    assert_eq!(server.received().len(), 1);
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let server = Server::start([Reply::hang()]).await;
    let model = AnthropicModel::builder("claude-sonnet-4-5")
        .base_url(server.url())
        .api_key("sk-ant-test")
        .timeout(Duration::from_millis(150))
        .retry(RetryPolicy::none())
        .build()
        .unwrap();
    let error = turn(&model, &request()).await.unwrap_err();
    assert_eq!(error, ModelError::Timeout(Duration::from_millis(150)));
}

#[tokio::test]
async fn a_streamed_answer_is_assembled() {
    let server = Server::start([Reply::events(P, "stream_parallel_calls")]).await;
    let model = AnthropicModel::builder("claude-sonnet-4-5")
        .base_url(server.url())
        .api_key("sk-ant-test")
        .streaming(true)
        .build()
        .unwrap();
    let turn = turn(&model, &request()).await.unwrap();
    let names: Vec<_> = turn.calls.iter().map(|c| &*c.name).collect();
    assert_eq!(names, ["get_weather", "get_time", "get_weather"]);
    assert_eq!(
        turn.calls[0].arguments.arguments().unwrap()["city"],
        "Zürich"
    );
    assert_eq!(turn.stop, StopReason::ToolUse);
    assert_eq!(server.only().body["stream"], true);
}

/// A streaming client whose retries are quick.
fn streaming(server: &Server) -> AnthropicModel {
    AnthropicModel::builder("claude-sonnet-4-5")
        .base_url(server.url())
        .api_key("sk-ant-test")
        .streaming(true)
        .retry(fast_retries(2))
        .build()
        .unwrap()
}

#[tokio::test]
async fn an_overloaded_error_in_the_middle_of_a_stream_is_retried() {
    // Anthropic may send an `error` event after `200 OK` and some of the answer.
    let server = Server::start([
        Reply::events(P, "stream_overloaded"),
        Reply::events(P, "stream_parallel_calls"),
    ])
    .await;
    let answered = turn(&streaming(&server), &request()).await.unwrap();
    assert_eq!(answered.calls.len(), 3);
    assert_eq!(server.received().len(), 2);

    let server = Server::start(vec![Reply::events(P, "stream_overloaded"); 3]).await;
    let error = turn(&streaming(&server), &request()).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "Anthropic Messages reported an error: overloaded_error: Overloaded \
         (gave up after 3 attempts)"
    );
    assert_eq!(server.received().len(), 3);
}

#[tokio::test]
async fn an_error_in_a_stream_that_asking_again_cannot_fix_is_not_retried() {
    let server = Server::start([Reply::events(P, "stream_invalid_request")]).await;
    let error = turn(&streaming(&server), &request()).await.unwrap_err();
    assert!(
        matches!(&error, ModelError::Decode(e) if !e.is_transient()),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("invalid_request_error"),
        "{error}"
    );
    assert_eq!(server.received().len(), 1);
}

#[tokio::test]
async fn malformed_streamed_input_is_a_problem_on_that_call() {
    let server = Server::start([Reply::events(P, "stream_malformed_args")]).await;
    let model = AnthropicModel::builder("claude-sonnet-4-5")
        .base_url(server.url())
        .api_key("sk-ant-test")
        .streaming(true)
        .build()
        .unwrap();
    let turn = turn(&model, &request()).await.unwrap();
    assert!(
        turn.calls.iter().any(|c| c.arguments.problem().is_some()),
        "{:?}",
        turn.calls
    );
}
