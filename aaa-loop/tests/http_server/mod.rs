//! A provider on 127.0.0.1 for the HTTP client tests: it answers each request with the
//! next scripted reply (the fixtures, written from each provider's documented format)
//! and keeps what it was sent.

#![allow(dead_code, unreachable_pub)]

use std::collections::VecDeque;
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aaa_loop::http::RetryPolicy;
use aaa_loop::{AssistantTurn, Message, Model, ModelError, ModelRequest};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::HeaderMap;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// What the server answers one request with.
#[derive(Debug, Clone)]
pub struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    hang: bool,
}

impl Reply {
    /// `status` with a JSON body.
    pub fn json(status: u16, body: Vec<u8>) -> Self {
        Reply {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body,
            hang: false,
        }
    }

    /// 200 with `tests/fixtures/<provider>/<name>.json`.
    pub fn fixture(provider: &str, name: &str) -> Self {
        Reply::json(200, fixture(provider, &format!("{name}.json")))
    }

    /// `status` with `tests/fixtures/<provider>/<name>.json`.
    pub fn error(status: u16, provider: &str, name: &str) -> Self {
        Reply::json(status, fixture(provider, &format!("{name}.json")))
    }

    /// 200 with `tests/fixtures/<provider>/<name>.jsonl` as server-sent events, one
    /// event per line (with the `event:` line Anthropic and Responses send; OpenAI's
    /// `[DONE]` is a line of the fixture).
    pub fn events(provider: &str, name: &str) -> Self {
        let text = String::from_utf8(fixture(provider, &format!("{name}.jsonl"))).unwrap();
        let mut body = String::new();
        for line in text.lines().filter(|line| !line.trim().is_empty()) {
            let data: Value = serde_json::from_str(line).unwrap_or(Value::Null);
            if let Some(kind) = data.get("type").and_then(Value::as_str) {
                body.push_str(&format!("event: {kind}\n"));
            }
            body.push_str(&format!("data: {line}\n\n"));
        }
        Reply {
            status: 200,
            headers: vec![(
                "content-type".into(),
                "text/event-stream; charset=utf-8".into(),
            )],
            body: body.into_bytes(),
            hang: false,
        }
    }

    /// Never answers (the request is read, the response never comes).
    pub fn hang() -> Self {
        Reply {
            status: 200,
            headers: Vec::new(),
            body: Vec::new(),
            hang: true,
        }
    }

    /// This reply with its lines ended by `\r\n` (as Google's server-sent events
    /// are) instead of `\n`.
    pub fn crlf(mut self) -> Self {
        let text = String::from_utf8(self.body).unwrap();
        self.body = text.replace('\n', "\r\n").into_bytes();
        self
    }

    /// This reply with a header added.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// A fixture's JSON (`tests/fixtures/<provider>/<name>.json`).
#[allow(dead_code)] // each test binary uses a part
pub fn fixture_json(provider: &str, name: &str) -> serde_json::Value {
    serde_json::from_slice(&fixture(provider, &format!("{name}.json"))).expect("a JSON fixture")
}

fn fixture(provider: &str, file: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(provider)
        .join(file);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    /// The query string, without its `?`.
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub body: Value,
    pub at: Instant,
}

impl Received {
    /// A header's value, as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

#[derive(Default)]
struct State {
    script: Mutex<VecDeque<Reply>>,
    received: Mutex<Vec<Received>>,
}

/// The server; it stops when dropped.
pub struct Server {
    url: String,
    state: Arc<State>,
    accept: JoinHandle<()>,
}

impl Server {
    /// A server on a free port of 127.0.0.1 that answers with `replies`, in order
    /// (and with a 599 once they are used up, which fails the test that asked).
    pub async fn start(replies: impl IntoIterator<Item = Reply>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(State {
            script: Mutex::new(replies.into_iter().collect()),
            received: Mutex::default(),
        });
        let shared = state.clone();
        let accept = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let state = shared.clone();
                tokio::spawn(async move {
                    let service =
                        hyper::service::service_fn(move |request| answer(state.clone(), request));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Server { url, state, accept }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The requests received so far, in order.
    pub fn received(&self) -> Vec<Received> {
        self.state.received.lock().unwrap().clone()
    }

    /// The only request received; panics unless there was exactly one.
    pub fn only(&self) -> Received {
        let received = self.received();
        assert_eq!(received.len(), 1, "expected one request, got {received:#?}");
        received.into_iter().next().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn answer(
    state: Arc<State>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = request.into_parts();
    let bytes = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    state.received.lock().unwrap().push(Received {
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        query: parts.uri.query().map(str::to_owned),
        headers: parts.headers,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        at: Instant::now(),
    });
    let reply = state.script.lock().unwrap().pop_front();
    let Some(reply) = reply else {
        let mut response = Response::new(Full::new(Bytes::from_static(
            b"{\"error\": {\"message\": \"the test server has no reply left\"}}",
        )));
        *response.status_mut() = StatusCode::from_u16(599).unwrap();
        return Ok(response);
    };
    if reply.hang {
        std::future::pending::<()>().await;
    }
    let mut response = Response::new(Full::new(Bytes::from(reply.body)));
    *response.status_mut() = StatusCode::from_u16(reply.status).unwrap();
    for (name, value) in reply.headers {
        response.headers_mut().append(
            hyper::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    Ok(response)
}

/// The request every client test asks: a system and a user message, and `add`.
pub fn request() -> ModelRequest {
    ModelRequest::new(
        vec![
            Message::system("Be brief."),
            Message::user("Weather in Paris?"),
        ],
        aaa_tools::tools![tools::add],
    )
}

/// `model`'s turn for `request`, bounded: a client that hangs fails the test instead
/// of hanging it.
pub async fn turn(model: &impl Model, request: &ModelRequest) -> Result<AssistantTurn, ModelError> {
    tokio::time::timeout(Duration::from_secs(30), model.turn(request))
        .await
        .expect("the client hung")
}

/// A retry policy for tests: `retries` retries, a millisecond of backoff.
pub fn fast_retries(retries: u32) -> RetryPolicy {
    RetryPolicy::default()
        .with_max_retries(retries)
        .with_backoff(Duration::from_millis(1), Duration::from_millis(2))
}

/// A port on 127.0.0.1 that nothing listens on (bound, then released).
pub async fn closed_port_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    url
}

/// The tools the tests offer and run.
pub mod tools {
    use aaa_tools::tool;

    /// Add two integers.
    ///
    /// # Arguments
    /// * `a` - The first addend.
    /// * `b` - The second addend.
    #[tool]
    pub async fn add(a: i64, b: i64) -> i64 {
        a + b
    }
}
