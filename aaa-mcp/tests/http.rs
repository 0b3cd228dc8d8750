//! Streamable HTTP as a client sees it on the wire: the bearer token, `Origin` and
//! `Host` checks, bad input (each a clear HTTP or JSON-RPC error, after which the server
//! keeps serving and no call was run), and the `2026-07-28` approval round
//! (`input_required`, a sealed `requestState` bound to the call and its arguments),
//! and a tool that asks first and becomes an MCP task once answered.

mod support;

use std::net::SocketAddr;

use aaa_mcp::{HttpOptions, HttpServer, ServeError};
use reqwest::StatusCode;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Value, json};
use support::TestServer;

const MODERN: &str = "2026-07-28";

/// The `_meta` every `2026-07-28` request carries.
fn modern_meta(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "raw-http-test", "version": "1"},
    })
}

/// A `2026-07-28` request (stateless: no session, everything in the request).
fn request(id: u64, method: &str, mut params: Value, capabilities: Value) -> Value {
    params["_meta"] = modern_meta(capabilities);
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// What came back: the status, and the JSON-RPC messages (from a JSON body or an
/// SSE stream), or the body's text when it is neither.
struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    messages: Vec<Value>,
    text: String,
}

impl Reply {
    /// The message answering request `id`.
    fn answer(&self, id: u64) -> &Value {
        self.messages
            .iter()
            .find(|m| m["id"] == id)
            .unwrap_or_else(|| panic!("no answer to {id}: {} {}", self.status, self.text))
    }
}

struct Wire {
    http: reqwest::Client,
    url: String,
    token: Option<String>,
}

impl Wire {
    fn new(server: &HttpServer, token: Option<&str>) -> Wire {
        Wire {
            http: http_client(),
            url: server.url(),
            token: token.map(str::to_owned),
        }
    }

    /// POSTs `body` (raw bytes) with the usual headers, `extra` overriding them.
    async fn post_raw(&self, body: Vec<u8>, extra: &[(&'static str, &str)]) -> Reply {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.insert(
            "accept",
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        headers.insert("mcp-protocol-version", HeaderValue::from_static(MODERN));
        if let Some(token) = &self.token {
            let value = format!("Bearer {token}");
            headers.insert("authorization", HeaderValue::from_str(&value).unwrap());
        }
        for (name, value) in extra {
            headers.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        let response = self
            .http
            .post(&self.url)
            .headers(headers)
            .body(body)
            .send()
            .await
            .expect("the server answers");
        let status = response.status();
        let headers = response.headers().clone();
        let text = response.text().await.unwrap_or_default();
        let messages = messages_of(&text);
        Reply {
            status,
            headers,
            messages,
            text,
        }
    }

    /// POSTs a JSON-RPC message, with the method (and name) headers protocol
    /// `2026-07-28` asks for.
    async fn post(&self, message: &Value) -> Reply {
        let method = message["method"].as_str().unwrap_or_default().to_owned();
        let name = message["params"]["name"].as_str().map(str::to_owned);
        let mut extra = vec![("mcp-method", method.as_str())];
        if let Some(name) = &name {
            extra.push(("mcp-name", name.as_str()));
        }
        self.post_raw(message.to_string().into_bytes(), &extra)
            .await
    }
}

/// The JSON-RPC messages of a body: one JSON value, or the `data:` lines of an SSE
/// stream.
fn messages_of(text: &str) -> Vec<Value> {
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        return match value {
            Value::Array(items) => items,
            other => vec![other],
        };
    }
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str(data.trim()).ok())
        .collect()
}

async fn serve(test: &TestServer, options: HttpOptions) -> HttpServer {
    HttpServer::start(test.server.clone(), options)
        .await
        .expect("the server starts")
}

/// A `tools/call` of `counted` that works: proof the server still serves.
async fn still_serves(wire: &Wire, id: u64) -> Value {
    let call = request(
        id,
        "tools/call",
        json!({"name": "counted", "arguments": {"note": "fine"}}),
        json!({}),
    );
    let reply = wire.post(&call).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    reply.answer(id)["result"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_loopback_a_token_is_required() {
    let test = support::server().await;
    let anywhere = SocketAddr::from(([0, 0, 0, 0], 0));
    let error = HttpServer::start(test.server.clone(), HttpOptions::bind(anywhere))
        .await
        .unwrap_err();
    assert!(matches!(error, ServeError::TokenRequired(_)), "{error}");
    assert!(error.to_string().contains("needs a bearer token"));
    let empty = HttpServer::start(test.server.clone(), HttpOptions::bind(anywhere).token(""))
        .await
        .unwrap_err();
    assert!(matches!(empty, ServeError::EmptyToken), "{empty}");

    // With a token it serves, on every interface, any Host name.
    let http = serve(&test, HttpOptions::bind(anywhere).token("s3cret")).await;
    let port = http.local_addr().port();
    let wire = Wire {
        http: http_client(),
        url: format!("http://127.0.0.1:{port}/mcp"),
        token: Some("s3cret".into()),
    };
    let result = still_serves(&wire, 1).await;
    assert_eq!(result["structuredContent"]["run"], 1);
    http.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_wrong_token_is_401_and_runs_nothing() {
    let test = support::server().await;
    let http = serve(&test, HttpOptions::new(0).token("right-token")).await;
    let call = request(
        1,
        "tools/call",
        json!({"name": "counted", "arguments": {"note": "x"}}),
        json!({}),
    );
    for token in [None, Some("wrong-token"), Some("right-token-but-longer")] {
        let reply = Wire::new(&http, token).post(&call).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{token:?}");
        let challenge = reply.headers.get("www-authenticate").unwrap();
        assert!(challenge.to_str().unwrap().starts_with("Bearer"));
    }
    assert_eq!(test.runs.counted(), 0, "nothing ran");
    let wire = Wire::new(&http, Some("right-token"));
    assert_eq!(still_serves(&wire, 2).await["structuredContent"]["run"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_origins_and_hosts_are_refused() {
    let test = support::server().await;
    let http = serve(&test, HttpOptions::new(0)).await;
    let wire = Wire::new(&http, None);
    let call = request(
        1,
        "tools/call",
        json!({"name": "counted", "arguments": {"note": "x"}}),
        json!({}),
    );
    let body = call.to_string().into_bytes();
    let headers = [("mcp-method", "tools/call"), ("mcp-name", "counted")];
    let with = |extra: (&'static str, &'static str)| {
        let mut all = headers.to_vec();
        all.push(extra);
        all
    };
    let evil = wire
        .post_raw(body.clone(), &with(("origin", "http://evil.example")))
        .await;
    assert_eq!(evil.status, StatusCode::FORBIDDEN, "{}", evil.text);
    let rebound = wire
        .post_raw(body.clone(), &with(("host", "evil.example")))
        .await;
    assert!(rebound.status.is_client_error(), "{}", rebound.status);
    assert_eq!(test.runs.counted(), 0);
    let local = wire
        .post_raw(body, &with(("origin", "http://localhost:3000")))
        .await;
    assert_eq!(local.status, StatusCode::OK, "{}", local.text);
    assert_eq!(test.runs.counted(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_clear_error_and_the_server_keeps_serving() {
    let test = support::server().await;
    let http = serve(&test, HttpOptions::new(0).max_body_bytes(2048)).await;
    let wire = Wire::new(&http, None);
    let call = request(
        1,
        "tools/call",
        json!({"name": "counted", "arguments": {"note": "x"}}),
        json!({}),
    );
    let headers = [("mcp-method", "tools/call"), ("mcp-name", "counted")];

    // An oversized body.
    let mut big = call.clone();
    big["params"]["arguments"]["note"] = json!("x".repeat(4096));
    let reply = wire.post_raw(big.to_string().into_bytes(), &headers).await;
    assert_eq!(
        reply.status,
        StatusCode::PAYLOAD_TOO_LARGE,
        "{}",
        reply.text
    );

    // A body that is not JSON.
    let reply = wire
        .post_raw(b"{\"jsonrpc\": \"2.0\", ".to_vec(), &headers)
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text);
    assert_eq!(reply.messages[0]["error"]["code"], -32700, "{}", reply.text);

    // JSON that is not JSON-RPC.
    let reply = wire.post_raw(b"{\"hello\": 1}".to_vec(), &headers).await;
    assert!(
        reply.status.is_client_error(),
        "{} {}",
        reply.status,
        reply.text
    );

    // The wrong Content-Type.
    let mut typed = headers.to_vec();
    typed.push(("content-type", "text/plain"));
    let reply = wire.post_raw(call.to_string().into_bytes(), &typed).await;
    assert_eq!(
        reply.status,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "{}",
        reply.text
    );

    // An unsupported protocol version.
    let mut old = headers.to_vec();
    old.push(("mcp-protocol-version", "1999-01-01"));
    let reply = wire.post_raw(call.to_string().into_bytes(), &old).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text);
    let mut unknown = call.clone();
    unknown["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("1999-01-01");
    let reply = wire.post(&unknown).await;
    assert!(
        reply.status.is_client_error() || reply.messages.iter().any(|m| m["error"].is_object()),
        "{} {}",
        reply.status,
        reply.text
    );

    // A batch, which no protocol version from 2025-06-18 on allows.
    let batch = json!([call.clone(), call.clone()]);
    let reply = wire
        .post_raw(batch.to_string().into_bytes(), &headers)
        .await;
    assert!(
        reply.status.is_client_error(),
        "{} {}",
        reply.status,
        reply.text
    );

    // Malformed params: a name that is not a string, and an unknown tool.
    let mut nameless = call.clone();
    nameless["params"]["name"] = json!(42);
    let reply = wire
        .post_raw(nameless.to_string().into_bytes(), &headers)
        .await;
    let error = reply
        .messages
        .iter()
        .find_map(|m| m.get("error"))
        .unwrap_or_else(|| panic!("an error: {} {}", reply.status, reply.text));
    assert_eq!(error["code"], -32602, "{error}");
    let mut misspelt = call.clone();
    misspelt["id"] = json!(7);
    misspelt["params"]["name"] = json!("countd");
    let reply = wire.post(&misspelt).await;
    let error = &reply.answer(7)["error"];
    assert_eq!(error["code"], -32602, "{error}");
    assert!(
        error["message"].as_str().unwrap().contains("`counted`"),
        "{error}"
    );

    // None of it ran anything; the server still serves, and this call runs once.
    assert_eq!(test.runs.counted(), 0);
    let result = still_serves(&wire, 9).await;
    assert_eq!(result["structuredContent"]["run"], 1);
    assert_eq!(test.runs.counted(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_client_approves_in_an_input_required_round() {
    let test = support::server().await;
    let http = serve(&test, HttpOptions::new(0)).await;
    let wire = Wire::new(&http, None);
    let can_elicit = json!({"elicitation": {"form": {}}});
    let arguments = json!({"to": "bob", "amount_cents": 300});
    let call = |id: u64, arguments: &Value, more: Value| {
        let mut params = json!({"name": "send_payment", "arguments": arguments});
        for (key, value) in more.as_object().unwrap() {
            params[key] = value.clone();
        }
        request(id, "tools/call", params, can_elicit.clone())
    };

    // Round one: the call waits for approval, and the client is asked.
    let reply = wire.post(&call(1, &arguments, json!({}))).await;
    let first = &reply.answer(1)["result"];
    assert_eq!(first["resultType"], "input_required", "{first}");
    let form = &first["inputRequests"]["aaa-tools/approval"];
    assert_eq!(form["method"], "elicitation/create", "{form}");
    let message = form["params"]["message"].as_str().unwrap();
    assert!(
        message.contains("`send_payment`") && message.contains("300"),
        "{message}"
    );
    let state = first["requestState"].as_str().unwrap().to_owned();
    assert_eq!(test.runs.payments(), 0);

    let approve = json!({"aaa-tools/approval": {"action": "accept", "content": {"approve": true}}});

    // A changed state, or the state with other arguments, is refused.
    let mut tampered = state.clone();
    let last = tampered.pop().unwrap();
    tampered.push(if last == 'A' { 'B' } else { 'A' });
    let forged = call(
        2,
        &arguments,
        json!({"requestState": tampered, "inputResponses": approve}),
    );
    let error = &wire.post(&forged).await.answer(2)["error"].clone();
    assert_eq!(error["code"], -32602, "{error}");
    let more = json!({"to": "bob", "amount_cents": 300000});
    let swapped = call(
        3,
        &more,
        json!({"requestState": state, "inputResponses": approve}),
    );
    let error = &wire.post(&swapped).await.answer(3)["error"].clone();
    assert_eq!(error["code"], -32602, "{error}");
    assert_eq!(test.runs.payments(), 0);

    // No usable answer: asked again, for the same call.
    let unanswered = call(4, &arguments, json!({"requestState": state}));
    let again = &wire.post(&unanswered).await.answer(4)["result"].clone();
    assert_eq!(again["resultType"], "input_required", "{again}");
    assert!(again["inputRequests"]["aaa-tools/approval"].is_object());

    // Approved: the call runs, once, and the result says who decided.
    let answered = call(
        5,
        &arguments,
        json!({"requestState": state, "inputResponses": approve}),
    );
    let done = &wire.post(&answered).await.answer(5)["result"].clone();
    assert_eq!(done["isError"], false, "{done}");
    assert_eq!(done["structuredContent"]["paid"], 300);
    assert_eq!(done["_meta"]["aaa-tools/approval"]["by"], "client");
    assert_eq!(test.runs.payments(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_after_input_tool_asks_in_the_request_then_becomes_a_task() {
    let test =
        support::server_with(|b| b.task_support("ask_name", aaa_mcp::TaskSupport::AfterInput))
            .await;
    let http = serve(&test, HttpOptions::new(0)).await;
    let wire = Wire::new(&http, None);
    let tasks =
        json!({"elicitation": {"form": {}}, "extensions": {"io.modelcontextprotocol/tasks": {}}});
    let call = |id: u64, more: Value| {
        let mut params = json!({"name": "ask_name", "arguments": {}});
        for (key, value) in more.as_object().unwrap() {
            params[key] = value.clone();
        }
        request(id, "tools/call", params, tasks.clone())
    };
    // Round one runs in the request: it asks, and no task is made.
    let first = wire.post(&call(1, json!({}))).await.answer(1)["result"].clone();
    assert_eq!(first["resultType"], "input_required", "{first}");
    assert!(first.get("taskId").is_none(), "{first}");
    let state = first["requestState"].clone();
    // The answers make it a task, which runs the next round with them.
    let answers = json!({
        "first": {"action": "accept", "content": {"name": "Grace"}},
        "last": {"action": "accept", "content": {"name": "Hopper"}},
    });
    let more = json!({"requestState": state, "inputResponses": answers});
    let created = wire.post(&call(2, more)).await.answer(2)["result"].clone();
    assert_eq!(created["resultType"], "task", "{created}");
    let task = created["taskId"].as_str().unwrap().to_owned();
    let round = format!("{task}-r1");
    let run = test.engine.run(aaa_tools::RunId::new(&round).unwrap());
    let call_id = aaa_tools::CallId::new(&round).unwrap();
    support::within("the task's round", run.outcome(&call_id))
        .await
        .unwrap();
    let get = request(3, "tasks/get", json!({"taskId": task}), tasks.clone());
    let reply = wire
        .post_raw(
            get.to_string().into_bytes(),
            &[("mcp-method", "tasks/get"), ("mcp-name", &task)],
        )
        .await;
    let done = reply.answer(3)["result"].clone();
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"],
        "Hello, Grace Hopper (state \"asked\")"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_task_requests_are_invalid_params() {
    let test =
        support::server_with(|b| b.task_support("sleepy", aaa_mcp::TaskSupport::Optional)).await;
    let http = serve(&test, HttpOptions::new(0)).await;
    let wire = Wire::new(&http, None);
    let tasks = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    let cases = [
        (
            "tasks/update",
            json!({"taskId": "task-x", "inputResponses": 5}),
            "task-x",
        ),
        ("tasks/get", json!({"taskId": 7}), "7"),
        ("tasks/cancel", json!({}), ""),
    ];
    for (id, (method, params, name)) in (1..).zip(cases) {
        let message = request(id, method, params, tasks.clone());
        let reply = wire
            .post_raw(
                message.to_string().into_bytes(),
                &[("mcp-method", method), ("mcp-name", name)],
            )
            .await;
        let error = reply.answer(id)["error"].clone();
        assert_eq!(error["code"], -32602, "{method}: {error}");
        assert!(
            error["message"].as_str().unwrap().contains(method),
            "{method}: {error}"
        );
    }
    still_serves(&wire, 10).await;
}

/// A plain-HTTP client. A workspace build unifies reqwest's features: where aaa-loop's
/// `http` feature is on, reqwest is built with rustls and no crypto provider, and
/// building a client (even for `http://`) panics unless one is installed.
fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}
