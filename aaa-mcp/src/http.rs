//! Streamable HTTP: [`HttpServer`] serves an [`McpServer`] at one path (`/mcp`), with
//! rmcp's Streamable HTTP transport (sessions for protocols up to `2025-11-25`,
//! stateless requests for `2026-07-28`) and these rules around it:
//!
//! - **Loopback by default.** [`HttpOptions::new`] binds `127.0.0.1`. Any other
//!   address needs a bearer token ([`HttpOptions::token`]); [`HttpServer::start`]
//!   refuses to start without one ([`ServeError::TokenRequired`]).
//! - **A token, when set, on every request**: `Authorization: Bearer <token>`, else
//!   `401` with `WWW-Authenticate: Bearer` and nothing reaches the MCP layer. Tokens are
//!   compared by their SHA-256 digests, so the time a comparison takes says nothing
//!   about the token.
//! - **DNS rebinding**: a request whose `Origin` header is not an allowed origin is
//!   refused (`403`); by default the allowed origins are the loopback ones
//!   (`http://localhost`, `http://127.0.0.1`, `http://[::1]`, any port). On a loopback
//!   address the `Host` header must be a loopback name too. Requests without `Origin`
//!   (every non-browser client) pass.
//! - **Bad input** is answered before any call is made: a body over
//!   [`HttpOptions::max_body_bytes`] is `413`, a body that is not JSON is `400` with a
//!   JSON-RPC parse error (`-32700`), and rmcp answers the rest: JSON that is not a
//!   JSON-RPC message is `400`, a `Content-Type` other than `application/json` is
//!   `415`, an unknown `MCP-Protocol-Version` is `400`, a JSON-RPC batch is refused,
//!   malformed params are `-32602`.
//!
//! axum serves the connections: it is what rmcp's transport is built to sit in (a
//! tower service), and the token check is one middleware function beside it.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::ServerHandler;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::server::McpServer;

/// The path the server answers on.
pub const MCP_PATH: &str = "/mcp";

/// The default largest request body: 4 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// How to serve over Streamable HTTP.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpOptions {
    /// The address to listen on (port 0 picks a free one).
    pub bind: SocketAddr,
    /// The bearer token every request must carry; required off loopback.
    pub token: Option<String>,
    /// The browser origins allowed to call (`scheme://host:port`, `:*` for any port).
    /// Default: the loopback origins.
    pub allowed_origins: Vec<String>,
    /// The `Host` names allowed; default: the loopback names on a loopback address, any
    /// host elsewhere (where the token guards the server).
    pub allowed_hosts: Option<Vec<String>>,
    /// The largest request body, in bytes.
    pub max_body_bytes: usize,
}

impl HttpOptions {
    /// Serving on `127.0.0.1:port` (0: a free port), without a token.
    pub fn new(port: u16) -> HttpOptions {
        HttpOptions::bind(SocketAddr::from(([127, 0, 0, 1], port)))
    }

    /// Serving on `bind`; off loopback, set a [`token`](Self::token) too.
    pub fn bind(bind: SocketAddr) -> HttpOptions {
        HttpOptions {
            bind,
            token: None,
            allowed_origins: vec![
                "http://localhost:*".into(),
                "http://127.0.0.1:*".into(),
                "http://[::1]:*".into(),
            ],
            allowed_hosts: None,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        }
    }

    /// Requires `Authorization: Bearer <token>` on every request.
    pub fn token(mut self, token: impl Into<String>) -> HttpOptions {
        self.token = Some(token.into());
        self
    }

    /// Replaces the allowed browser origins.
    pub fn allowed_origins(mut self, origins: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.allowed_origins = origins.into_iter().map(Into::into).collect();
        self
    }

    /// Replaces the allowed `Host` names (`name` or `name:port`).
    pub fn allowed_hosts(mut self, hosts: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.allowed_hosts = Some(hosts.into_iter().map(Into::into).collect());
        self
    }

    /// Sets the largest request body.
    pub fn max_body_bytes(mut self, bytes: usize) -> HttpOptions {
        self.max_body_bytes = bytes;
        self
    }
}

/// Why a server could not start, or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// A non-loopback address without a token.
    #[error(
        "serving on {0} (not a loopback address) needs a bearer token: set HttpOptions::token, \
         or bind 127.0.0.1"
    )]
    TokenRequired(SocketAddr),
    /// An empty token.
    #[error("the bearer token is empty")]
    EmptyToken,
    /// Listening or serving failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The MCP session over stdio could not start or failed.
    #[error("the MCP session failed: {0}")]
    Session(String),
}

/// An MCP server listening on Streamable HTTP; stops when [`shutdown`](Self::shutdown)
/// is called or it is dropped.
///
/// ```no_run
/// use aaa_mcp::{HttpOptions, HttpServer, McpServer};
/// use aaa_tools::{Engine, ToolRegistry};
///
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let server = McpServer::builder(ToolRegistry::new([])?, Engine::embedded()).build()?;
/// let http = HttpServer::start(server, HttpOptions::new(8080)).await?;
/// println!("serving on {}", http.url());
/// http.wait().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct HttpServer {
    local_addr: SocketAddr,
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl HttpServer {
    /// Binds and starts serving `server` as `options` say.
    pub async fn start<X: ServerHandler + Clone>(
        server: McpServer<X>,
        options: HttpOptions,
    ) -> Result<HttpServer, ServeError> {
        let loopback = options.bind.ip().is_loopback();
        match &options.token {
            Some(token) if token.is_empty() => return Err(ServeError::EmptyToken),
            None if !loopback => return Err(ServeError::TokenRequired(options.bind)),
            _ => {}
        }
        let stop = CancellationToken::new();
        let mut config = StreamableHttpServerConfig::default()
            .with_cancellation_token(stop.child_token())
            .with_max_request_body_bytes(options.max_body_bytes)
            .with_allowed_origins(options.allowed_origins.clone())
            .enforce_origin_validation();
        config = match &options.allowed_hosts {
            Some(hosts) => config.with_allowed_hosts(hosts.clone()),
            None if loopback => config,
            None => config.disable_allowed_hosts(),
        };
        // Each session (each stateless request) gets a clone of its own, which knows
        // when the server stops: a stream closed by a stop is no client's cancel.
        let stopping = stop.clone();
        let service = StreamableHttpService::new(
            move || Ok(server.clone().stopping_with(stopping.clone())),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        let limit = options.max_body_bytes;
        let mut router =
            axum::Router::new()
                .route_service(MCP_PATH, service)
                .layer(middleware::from_fn(move |request: Request, next: Next| {
                    check_body(limit, request, next)
                }));
        if let Some(token) = &options.token {
            let expected: Arc<[u8; 32]> = Arc::new(Sha256::digest(token.as_bytes()).into());
            router = router.layer(middleware::from_fn(move |request: Request, next: Next| {
                let expected = expected.clone();
                async move { authorize(&expected, request, next).await }
            }));
        }
        let listener = tokio::net::TcpListener::bind(options.bind).await?;
        let local_addr = listener.local_addr()?;
        let until = stop.clone();
        let task = tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(until.cancelled_owned())
                .await
        });
        Ok(HttpServer {
            local_addr,
            stop,
            task: Some(task),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The URL clients connect to: `http://<address>/mcp`.
    pub fn url(&self) -> String {
        let host = match self.local_addr.ip() {
            IpAddr::V6(ip) => format!("[{ip}]"),
            IpAddr::V4(ip) => ip.to_string(),
        };
        format!("http://{host}:{}{MCP_PATH}", self.local_addr.port())
    }

    /// Stops accepting connections, ends the sessions, and waits for the server to stop.
    pub async fn shutdown(mut self) -> Result<(), ServeError> {
        self.stop.cancel();
        self.join().await
    }

    /// Serves until stopped (by [`shutdown`](Self::shutdown) from elsewhere, or a
    /// failure).
    pub async fn wait(mut self) -> Result<(), ServeError> {
        self.join().await
    }

    async fn join(&mut self) -> Result<(), ServeError> {
        let Some(task) = self.task.take() else {
            return Ok(());
        };
        match task.await {
            Ok(result) => result.map_err(ServeError::Io),
            Err(error) => Err(ServeError::Io(std::io::Error::other(error))),
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Answers a POST whose body is too large (`413`) or not JSON (`400` with a JSON-RPC
/// parse error, as JSON-RPC asks) before the MCP layer sees it; other requests pass
/// untouched. (rmcp alone would answer a body that is not JSON with `415`, as if its
/// media type were wrong.)
async fn check_body(limit: usize, request: Request, next: Next) -> Response {
    if request.method() != axum::http::Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, limit).await {
        Ok(bytes) => bytes,
        Err(_) => {
            let message = format!("the request body is larger than {limit} bytes");
            return (StatusCode::PAYLOAD_TOO_LARGE, message).into_response();
        }
    };
    let is_json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            value
                .trim_start()
                .to_ascii_lowercase()
                .starts_with("application/json")
        });
    if is_json && let Err(error) = serde_json::from_slice::<serde::de::IgnoredAny>(&bytes) {
        let reply = serde_json::json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": {"code": -32700, "message": format!("Parse error: the body is not JSON ({error})")},
        });
        return (
            StatusCode::BAD_REQUEST,
            [(header::CONTENT_TYPE, "application/json")],
            reply.to_string(),
        )
            .into_response();
    }
    next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
        .await
}

/// Lets a request through when it carries the token.
async fn authorize(expected: &[u8; 32], request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| {
            let (scheme, token) = value.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        });
    let digest: Option<[u8; 32]> = presented.map(|token| Sha256::digest(token.as_bytes()).into());
    if digest.as_ref() == Some(expected) {
        return next.run(request).await;
    }
    let message = if presented.is_some() {
        "the bearer token is wrong"
    } else {
        "this server needs `Authorization: Bearer <token>`"
    };
    let mut response = (StatusCode::UNAUTHORIZED, message).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"aaa-mcp\""),
    );
    response
}
