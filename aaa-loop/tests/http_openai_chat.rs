//! `OpenAiChatModel` against a local server that answers as Chat Completions does:
//! what it sends, what it reads, and how it retries, times out and fails.
//!
//! The retry and timeout behaviour lives in code all three clients share; it is
//! tested here in full, and per provider in the other `http_*` tests where the
//! provider's error bodies differ.

#![cfg(feature = "openai-chat")]

mod http_server;

use std::time::{Duration, SystemTime};

use aaa_loop::http::{OpenAiChatModel, RetryPolicy};
use aaa_loop::{CodecError, ModelError, StopReason};
use http_server::{Reply, Server, closed_port_url, fast_retries, request, turn};
use serde_json::json;

const P: &str = "openai_chat";

fn client(server: &Server, retry: RetryPolicy) -> OpenAiChatModel {
    OpenAiChatModel::builder("gpt-4.1")
        .base_url(format!("{}/v1", server.url()))
        .api_key("sk-test")
        .retry(retry)
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_plain_answer_and_what_the_client_sent() {
    let server = Server::start([Reply::fixture(P, "text_only")]).await;
    let model = OpenAiChatModel::builder("gpt-4.1")
        .base_url(format!("{}/v1/", server.url()))
        .api_key("sk-test")
        .header("OpenAI-Organization", "org-test")
        .body_field("temperature", json!(0.2))
        .build()
        .unwrap();
    let turn = turn(&model, &request().with_max_output_tokens(300))
        .await
        .unwrap();
    assert_eq!(
        turn.text.as_deref(),
        Some("It is 18 °C and sunny in Paris.")
    );
    assert_eq!(turn.stop, StopReason::EndTurn);
    assert_eq!(
        (turn.usage.input_tokens, turn.usage.output_tokens),
        (82, 18)
    );

    let sent = server.only();
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(sent.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert_eq!(sent.header("openai-organization"), Some("org-test"));
    assert!(sent.header("user-agent").unwrap().starts_with("aaa-loop/"));
    assert_eq!(sent.body["model"], "gpt-4.1");
    assert_eq!(sent.body["temperature"], 0.2);
    assert_eq!(sent.body["max_completion_tokens"], 300);
    assert_eq!(sent.body.get("stream"), None);
    assert_eq!(
        sent.body["messages"],
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
        ])
    );
    // The tool in Chat Completions' format: a function wrapped in `function`.
    let tool = &sent.body["tools"][0];
    assert_eq!(tool["type"], "function");
    assert_eq!(tool["function"]["name"], "add");
    assert_eq!(tool["function"]["description"], "Add two integers.");
    assert_eq!(
        tool["function"]["parameters"]["required"],
        json!(["a", "b"])
    );
    assert_eq!(
        tool["function"]["parameters"]["properties"]["a"]["type"],
        "integer"
    );
}

#[tokio::test]
async fn parallel_calls_come_in_the_providers_order_and_no_key_is_sent_without_one() {
    let server = Server::start([Reply::fixture(P, "parallel_calls")]).await;
    // A compatible server (vLLM, llama.cpp, Ollama) that wants no key.
    let model = OpenAiChatModel::builder("qwen3:8b")
        .base_url(format!("{}/v1", server.url()))
        .build()
        .unwrap();
    let turn = turn(&model, &request()).await.unwrap();
    let calls: Vec<_> = turn
        .calls
        .iter()
        .map(|c| (c.provider_id.as_deref().unwrap(), &*c.name))
        .collect();
    assert_eq!(
        calls,
        [
            ("call_3xzbtJ9xQ1xB4HBy8bHvoWBa", "get_weather"),
            ("call_Zt1bMSuEQV2UE6wkSoZkHF8d", "get_time"),
            ("call_pK8mW2nQ4rT6vX8zB1dF3hJ5", "get_weather"),
        ]
    );
    assert_eq!(
        turn.calls[0].arguments.arguments().unwrap()["city"],
        "Zürich"
    );
    assert_eq!(turn.stop, StopReason::ToolUse);
    assert_eq!(server.only().header("authorization"), None);
}

#[tokio::test]
async fn malformed_arguments_are_a_problem_on_that_call_not_an_error() {
    let server = Server::start([Reply::fixture(P, "malformed_args")]).await;
    let turn = turn(&client(&server, RetryPolicy::none()), &request())
        .await
        .unwrap();
    assert_eq!(turn.calls.len(), 2);
    assert!(
        turn.calls[0]
            .arguments
            .problem()
            .unwrap()
            .starts_with("the arguments are not valid JSON"),
        "{:?}",
        turn.calls[0].arguments
    );
    assert!(turn.calls[1].arguments.arguments().unwrap().is_empty());
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
async fn a_429_is_retried_after_the_retry_after_seconds() {
    let server = Server::start([
        Reply::error(429, P, "http_429").header("retry-after", "1"),
        Reply::fixture(P, "text_only"),
    ])
    .await;
    let turn = turn(&client(&server, fast_retries(2)), &request())
        .await
        .unwrap();
    assert_eq!(
        turn.text.as_deref(),
        Some("It is 18 °C and sunny in Paris.")
    );
    let sent = server.received();
    assert_eq!(sent.len(), 2);
    // The backoff is a millisecond: only the header explains a second between them.
    let waited = sent[1].at - sent[0].at;
    assert!(waited >= Duration::from_secs(1), "waited {waited:?}");
    assert_eq!(sent[0].body, sent[1].body);
}

#[tokio::test]
async fn retry_after_ms_is_honoured_too() {
    let server = Server::start([
        Reply::error(429, P, "http_429")
            .header("retry-after-ms", "150")
            .header("retry-after", "1"),
        Reply::fixture(P, "text_only"),
    ])
    .await;
    turn(&client(&server, fast_retries(1)), &request())
        .await
        .unwrap();
    let sent = server.received();
    let waited = sent[1].at - sent[0].at;
    assert!(waited >= Duration::from_millis(150), "waited {waited:?}");
}

#[tokio::test]
async fn a_retry_after_past_the_policys_limit_is_not_waited_out() {
    let in_an_hour = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(3600));
    for asked in ["120", in_an_hour.as_str()] {
        let server = Server::start([
            Reply::error(429, P, "http_429").header("retry-after", asked),
            Reply::fixture(P, "text_only"),
        ])
        .await;
        let error = turn(&client(&server, fast_retries(3)), &request())
            .await
            .unwrap_err();
        let ModelError::Status { status, message } = &error else {
            panic!("{error:?}")
        };
        assert_eq!(*status, 429);
        assert!(
            message.starts_with("tokens: Rate limit reached for gpt-4.1")
                && message.contains("the provider asked to wait")
                && message.ends_with("longer than the 60s the retry policy waits)"),
            "{message}"
        );
        assert_eq!(server.received().len(), 1, "asked {asked}");
    }
}

#[tokio::test]
async fn a_500_then_success_is_retried() {
    let server = Server::start([
        Reply::error(500, P, "http_500"),
        Reply::error(503, P, "http_500"),
        Reply::fixture(P, "text_only"),
    ])
    .await;
    let turn = turn(&client(&server, fast_retries(2)), &request())
        .await
        .unwrap();
    assert_eq!(
        turn.text.as_deref(),
        Some("It is 18 °C and sunny in Paris.")
    );
    assert_eq!(server.received().len(), 3);
}

#[tokio::test]
async fn a_500_that_persists_names_the_status_and_the_providers_message() {
    let server = Server::start(vec![Reply::error(500, P, "http_500"); 4]).await;
    let error = turn(&client(&server, fast_retries(2)), &request())
        .await
        .unwrap_err();
    assert_eq!(
        error,
        ModelError::Status {
            status: 500,
            message: "server_error: The server had an error while processing your request. \
                      Sorry about that! (gave up after 3 attempts)"
                .into(),
        }
    );
    assert_eq!(
        error.to_string(),
        "the model API answered 500: server_error: The server had an error while processing \
         your request. Sorry about that! (gave up after 3 attempts)"
    );
    assert_eq!(server.received().len(), 3);
}

#[tokio::test]
async fn a_401_is_not_retried_and_says_why() {
    // Were it retried, the second reply would make it succeed.
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
            message: "invalid_request_error: Incorrect API key provided: sk-bad. You can find \
                      your API key at https://platform.openai.com/account/api-keys."
                .into(),
        }
    );
    assert!(!error.is_transient());
    assert_eq!(server.received().len(), 1);
}

#[tokio::test]
async fn no_other_4xx_is_retried() {
    for status in [400, 403, 404, 409, 422] {
        let server = Server::start([
            Reply::json(
                status,
                br#"{"error": {"message": "no", "type": "invalid_request_error"}}"#.to_vec(),
            ),
            Reply::fixture(P, "text_only"),
        ])
        .await;
        let error = turn(&client(&server, fast_retries(3)), &request())
            .await
            .unwrap_err();
        assert!(
            matches!(&error, ModelError::Status { status: s, message } if *s == status && message == "invalid_request_error: no"),
            "{error:?}"
        );
        assert_eq!(server.received().len(), 1, "status {status}");
    }
}

#[tokio::test]
async fn a_used_up_quota_is_not_retried() {
    let server = Server::start([
        Reply::error(429, P, "http_429_quota"),
        Reply::fixture(P, "text_only"),
    ])
    .await;
    let error = turn(&client(&server, fast_retries(3)), &request())
        .await
        .unwrap_err();
    assert_eq!(
        error,
        ModelError::Status {
            status: 429,
            message: "insufficient_quota: You exceeded your current quota, please check your \
                      plan and billing details."
                .into(),
        }
    );
    assert_eq!(server.received().len(), 1);
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_on_each_attempt() {
    let server = Server::start([Reply::hang(), Reply::hang()]).await;
    let model = OpenAiChatModel::builder("gpt-4.1")
        .base_url(server.url())
        .timeout(Duration::from_millis(200))
        .retry(fast_retries(1))
        .build()
        .unwrap();
    let error = turn(&model, &request()).await.unwrap_err();
    assert_eq!(error, ModelError::Timeout(Duration::from_millis(200)));
    assert_eq!(error.to_string(), "the model did not answer within 200ms");
    assert_eq!(server.received().len(), 2);
}

#[tokio::test]
async fn a_server_that_is_not_there_is_a_transport_error() {
    let model = OpenAiChatModel::builder("gpt-4.1")
        .base_url(closed_port_url().await)
        .retry(fast_retries(1))
        .build()
        .unwrap();
    let error = turn(&model, &request()).await.unwrap_err();
    let ModelError::Transport(message) = &error else {
        panic!("{error:?}")
    };
    assert!(message.contains("Connection refused"), "{message}");
    assert!(message.ends_with("(gave up after 2 attempts)"), "{message}");
    assert!(error.is_transient());
}

#[tokio::test]
async fn a_streamed_answer_is_assembled() {
    let server = Server::start([Reply::events(P, "stream_parallel_calls")]).await;
    let model = OpenAiChatModel::builder("gpt-4.1")
        .base_url(server.url())
        .streaming(true)
        .build()
        .unwrap();
    let turn = turn(&model, &request()).await.unwrap();
    let names: Vec<_> = turn.calls.iter().map(|c| &*c.name).collect();
    assert_eq!(names, ["get_weather", "get_time", "get_weather"]);
    assert_eq!(
        turn.calls[2].arguments.arguments().unwrap()["unit"],
        "fahrenheit"
    );
    let sent = server.only();
    assert_eq!(sent.body["stream"], true);
    assert_eq!(sent.body["stream_options"], json!({"include_usage": true}));
}

#[tokio::test]
async fn a_stream_that_ends_early_is_a_decode_error() {
    let server = Server::start([Reply::events(P, "stream_cut_off")]).await;
    let model = OpenAiChatModel::builder("gpt-4.1")
        .base_url(server.url())
        .streaming(true)
        .retry(fast_retries(2))
        .build()
        .unwrap();
    let error = turn(&model, &request()).await.unwrap_err();
    assert!(
        matches!(error, ModelError::Decode(CodecError::Unfinished { .. })),
        "{error:?}"
    );
    assert_eq!(server.received().len(), 1);
}

#[tokio::test]
async fn a_body_that_is_not_the_providers_is_a_decode_error() {
    let server = Server::start([Reply::json(200, b"<html>maintenance</html>".to_vec())]).await;
    let error = turn(&client(&server, RetryPolicy::none()), &request())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ModelError::Decode(CodecError::Json { .. })),
        "{error:?}"
    );
}
