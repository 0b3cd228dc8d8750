//! `GeminiModel` against a local server that answers as Google's Gemini API does: the
//! path that names the model and the method, the `x-goog-api-key` header, the body
//! (`contents`, `systemInstruction`, `functionDeclarations` in Gemini's schema
//! subset), Google's error bodies, server-sent chunks, and retries.

#![cfg(feature = "gemini")]

mod http_server;

use std::collections::BTreeMap;
use std::time::Duration;

use aaa_loop::http::{GeminiModel, RetryPolicy};
use aaa_loop::{CodecError, Message, ModelError, ModelRequest, Provider, StopReason};
use http_server::{Reply, Server, fast_retries, request, turn};
use serde_json::json;

const P: &str = "gemini";

fn client(server: &Server, retry: RetryPolicy) -> GeminiModel {
    GeminiModel::builder("gemini-2.5-flash")
        .base_url(server.url())
        .api_key("test-key")
        .retry(retry)
        .build()
        .unwrap()
}

fn streaming(server: &Server) -> GeminiModel {
    GeminiModel::builder("gemini-2.5-flash")
        .base_url(server.url())
        .api_key("test-key")
        .streaming(true)
        .retry(fast_retries(2))
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_plain_answer_and_what_the_client_sent() {
    let server = Server::start([Reply::fixture(P, "text_only")]).await;
    let turn = turn(&client(&server, RetryPolicy::none()), &request())
        .await
        .unwrap();
    // The thought part is not text.
    assert_eq!(
        turn.text.as_deref(),
        Some("It is 18 °C and sunny in Paris.")
    );
    assert_eq!(turn.stop, StopReason::EndTurn);
    assert_eq!(
        (
            turn.usage.input_tokens,
            turn.usage.output_tokens,
            turn.usage.reasoning_tokens,
            turn.usage.cached_input_tokens
        ),
        (120, 42 + 150, 150, 64)
    );

    let sent = server.only();
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/v1beta/models/gemini-2.5-flash:generateContent");
    assert_eq!(sent.query, None);
    assert_eq!(sent.header("x-goog-api-key"), Some("test-key"));
    assert_eq!(sent.header("authorization"), None);
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert_eq!(
        sent.body["contents"],
        json!([{"role": "user", "parts": [{"text": "Weather in Paris?"}]}])
    );
    assert_eq!(
        sent.body["systemInstruction"],
        json!({"parts": [{"text": "Be brief."}]})
    );
    // The model is in the path, not the body; no limit was asked for.
    assert_eq!(sent.body.get("model"), None);
    assert_eq!(sent.body.get("generationConfig"), None);
    // The tool as a Gemini function declaration: OpenAPI types, in `parameters`.
    assert_eq!(sent.body["tools"].as_array().unwrap().len(), 1);
    let declaration = &sent.body["tools"][0]["functionDeclarations"][0];
    assert_eq!(declaration["name"], "add");
    assert_eq!(declaration["description"], "Add two integers.");
    assert_eq!(declaration["parameters"]["type"], "OBJECT");
    assert_eq!(declaration["parameters"]["required"], json!(["a", "b"]));
    assert_eq!(
        declaration["parameters"]["properties"]["a"],
        json!({"type": "INTEGER", "format": "int64", "description": "The first addend."})
    );
    assert_eq!(declaration.get("parametersJsonSchema"), None);
}

#[tokio::test]
async fn the_output_limit_and_the_api_version_are_sent() {
    let server = Server::start([Reply::fixture(P, "text_only")]).await;
    let model = GeminiModel::builder("models/gemini-2.5-pro")
        .base_url(format!("{}/", server.url()))
        .api_key("test-key")
        .api_version("v1alpha")
        .build()
        .unwrap();
    turn(&model, &request().with_max_output_tokens(64))
        .await
        .unwrap();
    let sent = server.only();
    assert_eq!(sent.path, "/v1alpha/models/gemini-2.5-pro:generateContent");
    assert_eq!(
        sent.body["generationConfig"],
        json!({"maxOutputTokens": 64})
    );
}

#[tokio::test]
async fn parallel_calls_come_in_the_providers_order_named_by_the_turn() {
    let server = Server::start([
        Reply::fixture(P, "parallel_calls"),
        Reply::fixture(P, "with_ids"),
    ])
    .await;
    let model = client(&server, RetryPolicy::none());
    let mut third = request();
    third.turn = 3;
    let turn_3 = turn(&model, &third).await.unwrap();
    let calls: Vec<_> = turn_3
        .calls
        .iter()
        .map(|c| (c.call_id.as_str(), c.provider_id.as_deref(), &*c.name))
        .collect();
    assert_eq!(
        calls,
        [
            ("x--g3-0", None, "get_weather"),
            ("x--g3-1", None, "get_time"),
            ("x--g3-2", None, "get_weather"),
        ]
    );
    assert_eq!(
        turn_3.calls[2].arguments.arguments().unwrap()["unit"],
        "fahrenheit"
    );
    assert_eq!(
        (turn_3.text.as_deref(), turn_3.stop),
        (Some("Checking all three."), StopReason::ToolUse)
    );

    // Calls that come with ids keep them.
    let with_ids = turn(&model, &request()).await.unwrap();
    let ids: Vec<_> = with_ids
        .calls
        .iter()
        .map(|c| c.provider_id.as_deref().unwrap())
        .collect();
    assert_eq!(ids, ["fc-7f3a91c2", "tools/get_time:1"]);
}

#[tokio::test]
async fn arguments_that_are_not_an_object_are_a_problem_on_that_call() {
    let server = Server::start([Reply::fixture(P, "non_object_args")]).await;
    let turn = turn(&client(&server, RetryPolicy::none()), &request())
        .await
        .unwrap();
    let problems: Vec<_> = turn
        .calls
        .iter()
        .map(|c| c.arguments.problem().unwrap())
        .collect();
    assert!(
        problems[0].starts_with("the arguments are a JSON array, not an object")
            && problems[1].starts_with("the arguments are a JSON string, not an object"),
        "{problems:?}"
    );
}

#[tokio::test]
async fn a_malformed_function_call_is_a_turn_that_says_so() {
    let server = Server::start([Reply::fixture(P, "malformed_call")]).await;
    let turn = turn(&client(&server, RetryPolicy::none()), &request())
        .await
        .unwrap();
    assert_eq!(
        turn.stop,
        StopReason::Other("MALFORMED_FUNCTION_CALL".into())
    );
    assert!(!turn.has_calls());
}

#[tokio::test]
async fn a_body_cut_off_is_a_decode_error_and_not_retried() {
    let cut = br#"{"candidates": [{"content": {"parts": [{"text": "It is"#.to_vec();
    let server = Server::start([Reply::json(200, cut), Reply::fixture(P, "text_only")]).await;
    let error = turn(&client(&server, fast_retries(2)), &request())
        .await
        .unwrap_err();
    assert!(
        matches!(
            &error,
            ModelError::Decode(CodecError::Json {
                provider: Provider::Gemini,
                ..
            })
        ),
        "{error:?}"
    );
    assert_eq!(server.received().len(), 1);
}

#[tokio::test]
async fn a_blocked_prompt_and_a_safety_stop_are_refusals() {
    let server = Server::start([
        Reply::fixture(P, "refusal"),
        Reply::fixture(P, "safety_stop"),
    ])
    .await;
    let model = client(&server, RetryPolicy::none());
    let blocked = turn(&model, &request()).await.unwrap();
    assert_eq!(
        blocked.stop,
        StopReason::Refused(
            "the provider blocked the prompt (promptFeedback.blockReason: PROHIBITED_CONTENT)"
                .into()
        )
    );
    let stopped = turn(&model, &request()).await.unwrap();
    assert_eq!(
        stopped.stop,
        StopReason::Refused(
            "the provider's safety system stopped the answer (finishReason: SAFETY)".into()
        )
    );
}

#[tokio::test]
async fn a_429_is_retried_after_the_retry_after_header() {
    let server = Server::start([
        Reply::error(429, P, "http_429").header("retry-after", "0.5"),
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
    // The backoff is a millisecond: only the header explains half a second between them.
    let waited = sent[1].at - sent[0].at;
    assert!(waited >= Duration::from_millis(500), "waited {waited:?}");
    assert_eq!(sent[0].body, sent[1].body);
}

#[tokio::test]
async fn a_429_waits_the_retry_delay_google_puts_in_its_body() {
    // The fixture's body asks for 7 s (`RetryInfo.retryDelay`), and it has no header:
    // under a policy that waits out at most a second, the client gives up and says so.
    let server = Server::start([
        Reply::error(429, P, "http_429"),
        Reply::fixture(P, "text_only"),
    ])
    .await;
    let policy = fast_retries(2).with_max_retry_after(Duration::from_secs(1));
    let error = turn(&client(&server, policy), &request())
        .await
        .unwrap_err();
    let ModelError::Status { status, message } = &error else {
        panic!("{error:?}")
    };
    assert_eq!(*status, 429);
    assert!(message.contains("asked to wait 7s"), "{message}");
    assert_eq!(server.received().len(), 1, "no second attempt");
}

#[tokio::test]
async fn resource_exhausted_internal_and_unavailable_are_retried() {
    let server = Server::start([
        // The header (no wait) wins over the 7 s the body asks for.
        Reply::error(429, P, "http_429").header("retry-after", "0"),
        Reply::error(500, P, "http_500"),
        Reply::error(503, P, "http_503"),
        Reply::fixture(P, "text_only"),
    ])
    .await;
    let turn = turn(&client(&server, fast_retries(3)), &request())
        .await
        .unwrap();
    assert_eq!(turn.stop, StopReason::EndTurn);
    assert_eq!(server.received().len(), 4);
}

#[tokio::test]
async fn a_500_that_persists_names_the_status_and_googles_message() {
    let server = Server::start(vec![Reply::error(500, P, "http_500"); 3]).await;
    let error = turn(&client(&server, fast_retries(2)), &request())
        .await
        .unwrap_err();
    assert_eq!(
        error,
        ModelError::Status {
            status: 500,
            message: "INTERNAL: An internal error has occurred. Please retry or report in \
                      https://developers.generativeai.google/guide/troubleshooting (gave up \
                      after 3 attempts)"
                .into()
        }
    );
    assert!(error.is_transient());
}

#[tokio::test]
async fn a_wrong_key_is_not_retried_and_says_why() {
    let server = Server::start([
        Reply::error(400, P, "http_400_key"),
        Reply::fixture(P, "text_only"),
    ])
    .await;
    let model = GeminiModel::builder("gemini-2.5-flash")
        .base_url(server.url())
        .api_key("wrong-key")
        .retry(fast_retries(3))
        .build()
        .unwrap();
    let error = turn(&model, &request()).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "the model API answered 400: INVALID_ARGUMENT: API key not valid. Please pass a valid \
         API key."
    );
    let sent = server.only();
    assert_eq!(sent.header("x-goog-api-key"), Some("wrong-key"));
}

#[tokio::test]
async fn a_streamed_answer_is_assembled() {
    let server = Server::start([Reply::events(P, "stream_parallel_calls").crlf()]).await;
    let turn = turn(&streaming(&server), &request()).await.unwrap();
    let names: Vec<_> = turn.calls.iter().map(|c| &*c.name).collect();
    assert_eq!(names, ["get_weather", "get_time", "get_weather"]);
    assert_eq!(
        turn.calls[0].arguments.arguments().unwrap()["city"],
        "Zürich"
    );
    assert_eq!(turn.text.as_deref(), Some("Checking all three."));
    assert_eq!(turn.stop, StopReason::ToolUse);
    assert_eq!(turn.usage.output_tokens, 42 + 150);

    let sent = server.only();
    assert_eq!(
        (sent.path.as_str(), sent.query.as_deref()),
        (
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
            Some("alt=sse")
        )
    );
    // Streaming is the method, not a field of the body.
    assert_eq!(sent.body.get("stream"), None);
    assert_eq!(
        sent.body["contents"][0]["parts"][0]["text"],
        "Weather in Paris?"
    );
}

#[tokio::test]
async fn a_json_array_of_chunks_is_one_stream() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/gemini/stream_parallel_calls.jsonl"
    ))
    .unwrap();
    let chunks: Vec<serde_json::Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let server = Server::start([Reply::json(200, serde_json::to_vec(&chunks).unwrap())]).await;
    let turn = turn(&streaming(&server), &request()).await.unwrap();
    assert_eq!(turn.calls.len(), 3);
    assert_eq!(turn.text.as_deref(), Some("Checking all three."));
}

#[tokio::test]
async fn a_stream_that_ends_early_is_a_decode_error() {
    let server = Server::start([Reply::events(P, "stream_cut_off")]).await;
    let error = turn(&streaming(&server), &request()).await.unwrap_err();
    assert!(
        matches!(error, ModelError::Decode(CodecError::Unfinished { .. })),
        "{error:?}"
    );
    assert_eq!(server.received().len(), 1);
}

#[tokio::test]
async fn an_error_in_the_stream_names_googles_status() {
    // UNAVAILABLE passes: it is asked again, under the retry policy.
    let server = Server::start(vec![Reply::events(P, "stream_error"); 3]).await;
    let error = turn(&streaming(&server), &request()).await.unwrap_err();
    assert_eq!(
        error,
        ModelError::Decode(CodecError::Provider {
            provider: Provider::Gemini,
            message: "UNAVAILABLE: The model is overloaded. Please try again later. \
                      (gave up after 3 attempts)"
                .into(),
            code: Some("UNAVAILABLE".into()),
        })
    );
    assert_eq!(server.received().len(), 3);
}

/// Sum the values of a map.
#[aaa_tools::tool]
async fn total(values: BTreeMap<String, i64>) -> i64 {
    values.values().sum()
}

#[tokio::test]
async fn a_tool_gemini_cannot_declare_fails_the_turn_before_anything_is_sent() {
    let server = Server::start([Reply::fixture(P, "text_only")]).await;
    let request = ModelRequest::new(vec![Message::user("Sum.")], aaa_tools::tools![total]);
    let error = turn(&client(&server, RetryPolicy::none()), &request)
        .await
        .unwrap_err();
    let ModelError::Other(message) = &error else {
        panic!("{error:?}")
    };
    assert!(
        message.starts_with("tool `total` cannot be exported for Gemini:")
            && message.contains("map"),
        "{message}"
    );
    assert!(server.received().is_empty());
}
