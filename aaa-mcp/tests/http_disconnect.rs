//! Protocol `2026-07-28` over Streamable HTTP: a client that closes a `tools/call`'s
//! connection before the answer cancels the engine call (that era sends no
//! `notifications/cancelled`: the closed stream is the cancel).

mod support;

use aaa_mcp::{HttpOptions, HttpServer};
use aaa_tools::event::{ATTEMPT_STARTED, TOOL_CANCELLED, TOOL_REQUESTED};
use aaa_tools::{CallId, FailureKind};
use serde_json::{Value, json};
use support::{fact, within};

const MODERN: &str = "2026-07-28";

/// POSTs a stateless `2026-07-28` `tools/call` of `name`; the answer's JSON-RPC
/// messages (the `data:` lines of its stream, or its JSON body).
async fn call(url: &str, name: &str, arguments: Value) -> Vec<Value> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": name,
        "arguments": arguments,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "disconnect-test", "version": "1"},
        },
    }});
    let text = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", "tools/call")
        .header("mcp-name", name)
        .body(body.to_string())
        .send()
        .await
        .expect("the server answers")
        .text()
        .await
        .expect("the answer's body");
    match serde_json::from_str(&text) {
        Ok(one) => vec![one],
        Err(_) => text
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str(data.trim()).ok())
            .collect(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_connection_cancels_the_call() {
    // reqwest is built with rustls and no crypto provider where the workspace turns
    // aaa-loop's `http` feature on.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let test = support::server().await;
    let run = test.server.run().clone();
    let server = HttpServer::start(test.server.clone(), HttpOptions::new(0))
        .await
        .expect("the server starts");
    let url = server.url();

    // A call of an hour, its connection closed once the tool runs.
    let posting = tokio::spawn({
        let url = url.clone();
        async move { call(&url, "sleepy", json!({"ms": 3_600_000})).await }
    });
    let requested = fact(&run, TOOL_REQUESTED, None).await;
    let call_id = CallId::new(requested.subject.unwrap()).unwrap();
    fact(&run, ATTEMPT_STARTED, Some(&call_id)).await;
    posting.abort();
    assert!(posting.await.unwrap_err().is_cancelled());

    // The run records the cancel, and the tool stopped when told.
    fact(&run, TOOL_CANCELLED, Some(&call_id)).await;
    let outcome = within("the outcome", run.outcome(&call_id)).await.unwrap();
    let failure = outcome.failure().expect("a failure");
    assert_eq!(failure.kind, FailureKind::Cancelled, "{outcome:?}");

    // The server goes on serving.
    let answer = within("another call", call(&url, "greet", json!({"name": "Ada"}))).await;
    let result = answer.iter().find(|m| m["id"] == 1).expect("an answer");
    assert_eq!(
        result["result"]["content"][0]["text"], "Hello, Ada!",
        "{answer:?}"
    );
}
