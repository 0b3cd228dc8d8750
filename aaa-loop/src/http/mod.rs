//! [`Model`](crate::Model)s that ask a provider over HTTP: OpenAI Chat Completions
//! (and every compatible server), OpenAI Responses, Anthropic Messages, Google
//! Gemini. Each client exists when its feature is on (the table names them as text,
//! so these docs build whichever features a workspace turns on).
//!
//! | client | feature | endpoint | key |
//! |---|---|---|---|
//! | `OpenAiChatModel` | `openai-chat` | `{base_url}/chat/completions`, base `https://api.openai.com/v1` | `Authorization: Bearer`, optional off OpenAI |
//! | `OpenAiResponsesModel` | `openai-responses` | `{base_url}/responses`, base `https://api.openai.com/v1` | `Authorization: Bearer` |
//! | `AnthropicModel` | `anthropic` | `{base_url}/v1/messages`, base `https://api.anthropic.com` | `x-api-key`, `anthropic-version` |
//! | `GeminiModel` | `gemini` | `{base_url}/v1beta/models/{model}:generateContent` (`:streamGenerateContent?alt=sse` streaming), base `https://generativelanguage.googleapis.com` | `x-goog-api-key` |
//!
//! Each client builds the provider's request body from a
//! [`ModelRequest`](crate::ModelRequest) (the conversation, the tools exported with
//! [`aaa_tools::export`], the output limit; see each client's `request_body`), posts
//! it, and reads the answer with the provider's codec, so what a client understands
//! is exactly what [`openai_chat`](crate::openai_chat),
//! [`openai_responses`](crate::openai_responses), [`anthropic`](crate::anthropic) and
//! [`gemini`](crate::gemini) understand, tested against the same documented
//! formats. A conversation is sent whole each turn: the clients keep no state, so a
//! loop resumed on another machine asks exactly what the first one would have.
//!
//! ```no_run
//! use aaa_loop::http::OpenAiChatModel;
//! use aaa_loop::{LoopEnd, Message, ToolLoop};
//! use aaa_tools::{Engine, ToolHandler, ToolRegistry, tool, tools};
//!
//! /// Add two integers.
//! #[tool]
//! async fn add(a: i64, b: i64) -> i64 { a + b }
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let engine = Engine::embedded();
//! let _worker = ToolHandler::new(ToolRegistry::new(tools![add])?).attach(&engine).await?;
//!
//! // OPENAI_API_KEY and, for another compatible server, OPENAI_BASE_URL.
//! let model = OpenAiChatModel::from_env("gpt-4.1-mini").build()?;
//! let agent = ToolLoop::new(model, tools![add]);
//! let result = agent.run(&engine.new_run(), vec![Message::user("What is 2 + 3?")]).await?;
//! if let LoopEnd::Final(answer) = result.end {
//!     println!("{answer}");
//! }
//! # Ok(()) }
//! ```
//!
//! # Timeouts, retries, errors
//!
//! - Each attempt has a timeout (10 minutes by default: a long answer from a slow
//!   model takes minutes), from sending the request to the answer's last byte, and
//!   connecting has its own (10 s). A timeout is [`ModelError::Timeout`](crate::ModelError::Timeout).
//! - A failed attempt is retried ([`RetryPolicy`]: 2 retries by default, as in
//!   OpenAI's and Anthropic's SDKs) when asking again may succeed: 429 (except
//!   OpenAI's `insufficient_quota`, which waiting does not cure; Gemini's
//!   `RESOURCE_EXHAUSTED` included), 408, any 5xx (Anthropic's 529
//!   `overloaded_error` and Gemini's 503 `UNAVAILABLE` included), a timeout, a
//!   connection that failed or broke off. **No other 4xx is retried**: a bad key
//!   (401; Gemini says 400), a forbidden model (403), a bad request (400, 404, 413,
//!   422) gets the same answer every time, so it is returned at once. This is the
//!   same line [`ModelError::is_transient`](crate::ModelError::is_transient) draws.
//! - The wait before a retry is the provider's `Retry-After` when it sent one
//!   (OpenAI's `retry-after-ms`, else `Retry-After` in seconds or as an HTTP-date;
//!   Gemini's `RetryInfo.retryDelay` in its error body), else exponential backoff (500 ms doubling to 8 s, less up to a quarter at
//!   random). A `Retry-After` past [`RetryPolicy::max_retry_after`] (60 s) is not
//!   waited out: the error comes back at once and says what the provider asked.
//! - An error answer is [`ModelError::Status`](crate::ModelError::Status) with the
//!   HTTP status and the provider's own words: `"<type>: <message>"` from its
//!   `error` object (`invalid_request_error: Incorrect API key provided ...`,
//!   `rate_limit_error: ...`, Gemini's `"<status>: <message>"` such as
//!   `INVALID_ARGUMENT: API key not valid. ...`), else the body's text, noting the
//!   attempts when it was retried (`... (gave up after 3 attempts)`). An answer that
//!   cannot be read is [`ModelError::Decode`](crate::ModelError::Decode) with the
//!   codec's [`CodecError`](crate::CodecError), and is not retried (an `error`
//!   event in the middle of a stream, such as Anthropic's `overloaded_error` or
//!   Gemini's `UNAVAILABLE`, is one of these); a refusal is a turn, not an error.
//!
//! # Why reqwest and rustls, not a provider's client crate
//!
//! Neither OpenAI, Anthropic nor Google publishes an official Rust SDK for these
//! APIs; the community crates were weighed against reqwest plus this crate's codecs:
//!
//! - **Correctness.** async-openai (the best kept) deserializes into its own typed
//!   structs, so a compatible server that sends `arguments` as an object or
//!   `content` as parts fails in serde before any code of ours could answer the
//!   model; the codecs here read those, and turn bad arguments into a fact for the
//!   model instead of an error. Its retry layer honours `Retry-After` only in
//!   seconds, not as an HTTP-date, and covers OpenAI only; an Anthropic or Gemini
//!   crate would bring a second error model and a second retry policy (gemini-rust,
//!   for one, reads Gemini's JSON into its own typed structs, with its own error
//!   type). Using one would mean two parsers of one format (its types, then ours to
//!   get an [`AssistantTurn`](crate::AssistantTurn)).
//! - **Build cost.** async-openai builds on reqwest too, and compiles its types
//!   for the whole OpenAI API (files, audio, assistants, realtime, ...) on top, to
//!   use one endpoint. reqwest is the HTTP client most dependency trees already
//!   hold; with `default-features = false` it brings hyper's HTTP/1 client and
//!   nothing for compression, cookies or HTTP/2 (gemini-rust 2.0 asks for reqwest
//!   0.12 with HTTP/2: a second HTTP stack next to this workspace's 0.13). Measured:
//!   the client features (which all share the `http` machinery; `gemini` adds no
//!   crate to it) add 62 crates (hyper, rustls, *ring*, url) and about 80 s to a
//!   cold debug build on 2 cores, where this crate without them takes about 90 s;
//!   the default features bring none of it.
//! - **TLS.** rustls with the *ring* provider (`rustls-no-provider` on reqwest, the
//!   provider chosen here, never installed process-wide), and the platform's
//!   certificate roots through rustls-platform-verifier: no OpenSSL or native-tls,
//!   and no aws-lc-rs, whose large C build is reqwest's default and which this
//!   workspace does not otherwise need (*ring* it already has, through async-nats).
//!   A machine without CA certificates fails a builder's `build` with
//!   [`BuildError::Tls`]; pass your own client with the builders' `http_client` to
//!   choose roots, a proxy or HTTP/2 ([`reqwest`] is re-exported for that).
//!
//! The price is this module: a few hundred lines for four endpoints, their
//! request bodies and one retry loop, tested against a local server in the
//! crate's `tests/http_*.rs`.
//!
//! # Another provider
//!
//! A provider with another API is a few lines over [`Model`](crate::Model) (its docs
//! show one), with any HTTP client.

// The `http` feature alone (no client) builds the shared parts with nothing to use them.
#![cfg_attr(
    not(any(
        feature = "openai-chat",
        feature = "openai-responses",
        feature = "anthropic",
        feature = "gemini"
    )),
    allow(dead_code, unused_imports, unused_macros)
)]

mod endpoint;
mod retry;
mod settings;
mod sse;

#[cfg(feature = "anthropic")]
mod anthropic;
#[cfg(feature = "gemini")]
mod gemini;
#[cfg(feature = "openai-chat")]
mod openai_chat;
#[cfg(feature = "openai-responses")]
mod openai_responses;

#[cfg(feature = "anthropic")]
#[cfg_attr(docsrs, doc(cfg(feature = "anthropic")))]
pub use anthropic::{AnthropicBuilder, AnthropicModel};
#[cfg(feature = "gemini")]
#[cfg_attr(docsrs, doc(cfg(feature = "gemini")))]
pub use gemini::{GeminiBuilder, GeminiModel};
#[cfg(feature = "openai-chat")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai-chat")))]
pub use openai_chat::{OpenAiChatBuilder, OpenAiChatModel};
#[cfg(feature = "openai-responses")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai-responses")))]
pub use openai_responses::{OpenAiResponsesBuilder, OpenAiResponsesModel};
/// The HTTP client crate the clients use, for the builders' `http_client`.
pub use reqwest;
pub use retry::RetryPolicy;

use aaa_tools::Tool;
use aaa_tools::export::{Format, export_tool};
use serde_json::Value;

use crate::provider::Provider;

/// `tools` in the provider's `format`, for a request body; a tool the format cannot
/// express fails the turn before anything is sent.
fn export_tools(tools: &[Tool], format: Format) -> Result<Vec<Value>, crate::ModelError> {
    tools
        .iter()
        .map(|tool| export_tool(tool, format))
        .collect::<Result<_, _>>()
        .map_err(|e| crate::ModelError::Other(e.to_string()))
}

/// Why a client could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The provider's own URL needs a key, and none was set.
    #[error("no API key for {provider}: set one with `api_key`, or in {variable}")]
    MissingApiKey {
        /// The API.
        provider: Provider,
        /// The environment variable `from_env` reads it from.
        variable: &'static str,
    },
    /// The model name cannot go in the endpoint's URL (a client whose URL names the
    /// model: Gemini).
    #[error("the model name {model:?} is not usable: {reason}")]
    InvalidModel {
        /// The model name as given.
        model: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The base URL is not an http or https URL.
    #[error("the base URL {url:?} is not usable: {reason}")]
    InvalidUrl {
        /// The base URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A header's name or value is not usable (a key with a line break in it).
    #[error("the header `{name}` is not usable: {reason}")]
    InvalidHeader {
        /// The header's name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// TLS could not be set up (no CA certificates on the machine).
    #[error(
        "could not set up TLS: {0} (install the system's CA certificates, or pass a client \
         of your own with `http_client`)"
    )]
    Tls(String),
    /// The HTTP client could not be built.
    #[error("could not build the HTTP client: {0}")]
    Client(String),
}

/// A call's arguments as the JSON text a provider echoes: `{}` when they were
/// unreadable (the original text is not kept; the call's result says what was wrong).
#[cfg(any(feature = "openai-chat", feature = "openai-responses"))]
fn arguments_text(call: &crate::ProviderCall) -> String {
    match call.arguments.arguments() {
        Some(arguments) => serde_json::to_string(arguments).unwrap_or_else(|_| "{}".to_owned()),
        None => "{}".to_owned(),
    }
}
