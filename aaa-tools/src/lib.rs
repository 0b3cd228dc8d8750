//! Durable, guarded tool execution for LLM agents.
//!
//! Write an ordinary async fn, put [`#[tool]`](macro@tool) on it, and get a JSON Schema
//! every provider accepts, arguments checked against that schema before the fn runs,
//! and errors a model can read and act on.
//!
//! ```
//! use aaa_tools::{ToolContext, ToolError, ToolRegistry, tool, tools};
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(rename_all = "lowercase")]
//! enum Unit { Celsius, Fahrenheit }
//!
//! #[derive(Serialize)]
//! struct Weather { city: String, degrees: f64 }
//!
//! /// Get the current weather for a city.
//! ///
//! /// # Arguments
//! /// * `city` - City name, e.g. "Paris".
//! /// * `unit` - Temperature unit; Celsius when left out.
//! #[tool(timeout_s = 10)]
//! async fn get_weather(city: String, unit: Option<Unit>) -> Result<Weather, ToolError> {
//!     let degrees = match unit { Some(Unit::Fahrenheit) => 68.0, _ => 20.0 };
//!     Ok(Weather { city, degrees })
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! // The fn is still an ordinary fn.
//! assert_eq!(get_weather("Oslo".into(), None).await.unwrap().degrees, 20.0);
//!
//! // The tool: name, description, schema, settings.
//! let registry = ToolRegistry::new(tools![get_weather]).unwrap();
//! let tool = registry.get("get_weather").unwrap();
//! assert_eq!(tool.description(), "Get the current weather for a city.");
//! assert_eq!(tool.parameters()["required"], serde_json::json!(["city"]));
//!
//! // Arguments are checked against the schema, with a message for the model.
//! let err = registry
//!     .call("get_weather", ToolContext::builder().build(), serde_json::json!({"city": "Oslo", "unit": "kelvin"}))
//!     .await
//!     .unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     r#"invalid arguments for `get_weather`: unit: expected one of "celsius", "fahrenheit"; got "kelvin""#
//! );
//! # }
//! ```
//!
//! # What is here
//!
//! - [`macro@tool`], [`Tool`], [`ToolRegistry`]: declaring tools and collecting them.
//! - [`ToolContext`] and [`State`]: what a running tool can reach.
//! - [`ToolError`], [`ToolArgsError`], [`CallError`]: failures in the model's words.
//! - [`export`]: the registry's tools for OpenAI (strict and not), Anthropic, Gemini
//!   and MCP `tools/list`.
//! - [`Engine`], [`RunHandle`], [`Outcome`]: requesting calls and reading their facts;
//!   [`ApprovalDecision`]: deciding on a call that waits for a human; [`event`]
//!   documents the wire format (CloudEvents 1.0, JSON).
//! - [`ToolHandler`]: executing calls under timeouts, pools, approvals, guardrails
//!   ([`GuardPolicy`]) and the stalled-worker guard (configured with [`GuardConfig`];
//!   the state machine lives in `aaa-guard`).
//! - [`bus`]: the [`Bus`](bus::Bus) trait and the embedded [`MemoryBus`](bus::MemoryBus);
//!   [`GuardStore`] and [`MemoryStore`]: the record store, which keeps the guard's
//!   call records and the handler's other records apart ([`RecordKind`]).
//! - [`Operator`] (`engine.operator()`): listing and resolving `outcome_unknown` calls.
//! - The same engine across machines is the crate `aaa-tools-nats`: a NATS JetStream
//!   stream (the bus, and the calls' guard records) and a KV bucket (approvals,
//!   budgets), written against the public [`Bus`](bus::Bus) and [`GuardStore`]
//!   contracts like any other backend.
//!
//! # Decisions
//!
//! - Ids are restricted to `[A-Za-z0-9_-]{1,128}` and odd ones are rejected, not
//!   encoded, so an id means the same thing in every subject, key and log line.
//! - [`ToolError`] does not implement `std::error::Error`, so that every other error
//!   converts into it with `?` (as an internal error the model sees in generic words).
//! - Without the guard (`enabled = false`) delivery is at least once and duplicates go
//!   unnoticed; with it (the default), duplicates never run twice, lost attempts are
//!   taken over under `at_least_once` and declared `outcome_unknown` under
//!   `at_most_once`.
//! - A null sent for an optional argument counts as leaving it out (OpenAI strict mode
//!   sends nulls).
//! - Approval deadlines are wall-clock times stored with the pending approval (any worker
//!   may expire it); lease lapses never use wall clocks (see `aaa_guard::LeaseWatch`).
//! - Outcome facts carry a message id derived from the call, so a republished outcome
//!   is dropped by the bus's de-duplication window; a run handle takes a call's first
//!   outcome as its outcome.
//! - The embedded bus is bounded by default (a [`Retention`](bus::Retention) of 100 000
//!   messages, JetStream-like limits), so a long-running embedded engine's log levels
//!   off; unlike a JetStream stream's limits, a message a consumer has not settled or a
//!   live replay has not read is never removed. A [`RunHandle`] follows its run's
//!   outcomes from its first request, so its own calls' outcomes never depend on the
//!   log still holding them; it keeps an outcome until it is asked for, and then only
//!   a 16-byte fingerprint of the call's id. The [`MemoryStore`] keeps the records of
//!   the last 100 000 settled calls (outcome published, request acknowledged; see
//!   [`GuardStore::retire`]) and every record still in play, so a repeated request
//!   for a recent call is answered, not run again. What a long-running embedded
//!   engine keeps per call then comes down to the fingerprints of the calls its open
//!   run handles have handed out.

#![cfg_attr(docsrs, feature(doc_cfg))]

mod args;
pub mod bus;
mod context;
mod engine;
mod error;
pub mod event;
pub mod export;
mod handler;
mod ids;
mod names;
mod operator;
mod outcome;
mod outcomes;
mod output;
mod progress;
mod registry;
mod schema;
mod tool;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

// Declaring tools.
#[doc(inline)]
pub use aaa_tools_macros::tool;
pub use registry::{RegistryCallError, ToolRegistry, ToolRegistryBuilder};
pub use tool::{Tool, ToolAnnotations, is_valid_tool_name};

// What a running tool reaches, and how it fails.
pub use args::decode;
pub use context::{State, ToolContext, ToolContextBuilder};
pub use error::{ArgProblem, CallError, DefinitionError, ToolArgsError, ToolError};
pub use output::ToolOutput;
pub use progress::{Progress, TOOL_PROGRESS, ToolProgress};

// Requesting calls and reading what became of them.
pub use engine::{Engine, EngineError, FactError, RunHandle, ToolCall, new_call_id, new_run_id};
pub use event::{ApprovalDecision, FailureKind};
pub use ids::{CallId, IdError, RunId, TenantId};
pub use outcome::Outcome;

// Executing them.
pub use handler::{
    GuardPolicy, HandlerError, HandlerHandle, PolicyCall, PostCall, PreCall, RetryPolicy,
    ToolConfig, ToolHandler,
};

// The guard's settings and its store.
pub use aaa_guard::{
    ConfigError, Delivery, GuardConfig, GuardOverrides, GuardStore, LostLease, MemoryStore,
    RecordKind,
};

// Operators: calls whose outcome is unknown.
pub use operator::{Operator, OperatorError, Resolution, UnknownCall};

/// The [`Tool`] values of several `#[tool]` fns, as a `Vec`:
/// `tools![get_weather, send_payment]` is `vec![get_weather::tool(), send_payment::tool()]`.
///
/// ```
/// use aaa_tools::{ToolRegistry, tool, tools};
///
/// /// Ping.
/// #[tool]
/// fn ping() -> &'static str { "pong" }
///
/// let registry = ToolRegistry::new(tools![ping]).unwrap();
/// assert!(registry.get("ping").is_some());
/// ```
#[macro_export]
macro_rules! tools {
    ($($tool:path),* $(,)?) => {
        <[$crate::Tool]>::into_vec($crate::__private::Box::new([$(<$tool>::tool()),*]))
    };
}
