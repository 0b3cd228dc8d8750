//! Serve aaa-tools over MCP: any MCP client (Claude Desktop and Code, Cursor, VS Code,
//! the OpenAI Agents SDK, pydantic-ai, ...) lists and calls `#[tool]` functions, and
//! every call goes through the [`Engine`](aaa_tools::Engine): pools, timeouts,
//! approvals, guardrails, the stalled-worker guard, delivery policy and stale-result
//! fencing hold for MCP calls as for any other.
//!
//! ```no_run
//! use aaa_mcp::{HttpOptions, HttpServer, McpServer, serve_stdio};
//! use aaa_tools::{Engine, ToolHandler, ToolRegistry, tool, tools};
//!
//! /// Add two integers.
//! ///
//! /// # Arguments
//! /// * `a` - The first addend.
//! /// * `b` - The second addend.
//! #[tool]
//! async fn add(a: i64, b: i64) -> i64 { a + b }
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let registry = ToolRegistry::new(tools![add])?;
//! let engine = Engine::embedded();
//! let _worker = ToolHandler::new(registry.clone()).attach(&engine).await?;
//! let server = McpServer::builder(registry, engine).name("calculator", "1.0.0").build()?;
//!
//! // What MCP hosts launch: stdio.
//! serve_stdio(server.clone()).await?;
//! // Or Streamable HTTP on 127.0.0.1:8080, path /mcp.
//! HttpServer::start(server, HttpOptions::new(8080)).await?.wait().await?;
//! # Ok(()) }
//! ```
//!
//! # What is served
//!
//! - `tools/list`: the registry's tools (name, description, the input schema the
//!   engine enforces, annotations, an `outputSchema` where declared), in pages
//!   ([`listing`]).
//! - `tools/call`: one engine call per request ([`call`]); the outcome becomes the
//!   result ([`reply`]): `structuredContent` and the JSON text for a value, and every
//!   failure fact (bad arguments, timeout, a tool's error, denial, `outcome_unknown`,
//!   ...) as `isError: true` with the text the model reads. An unknown tool or
//!   malformed params are JSON-RPC `-32602`, naming the closest tools.
//! - Progress: a tool's [`ToolContext::report_progress`](aaa_tools::ToolContext::report_progress)
//!   becomes `notifications/progress` for a client that sent a progress token, from
//!   wherever the tool runs.
//! - Approvals ([`approval`]): the client's user decides through an elicitation form
//!   (or an `input_required` result on protocol `2026-07-28`) bound to the call and
//!   its arguments, or an operator on the bus; never the model, never the server.
//! - Re-sent requests ([`idempotency`]): a request with
//!   `params._meta["aaa-tools/idempotencyKey"]` ([`IDEMPOTENCY_KEY`]) names one engine
//!   call; sent again, it gets that call's outcome and the tool does not run twice.
//! - Tasks ([`tasks`]): a tool declared with [`McpServerBuilder::task_support`]
//!   answers a client that declared the tasks extension with a task, which `tasks/get`,
//!   `tasks/update` and `tasks/cancel` follow, answer and stop, from any server of the
//!   engine.
//! - Everything else (resources, prompts, completions, logging): an rmcp
//!   [`ServerHandler`](rmcp::ServerHandler) of your own, through
//!   [`McpServerBuilder::extras`].
//!
//! Both protocol eras are rmcp's: the `initialize` handshake and sessions for
//! `2024-11-05` to `2025-11-25`, stateless requests and `server/discover` for
//! `2026-07-28`; the server speaks what the client asks for.
//!
//! Transports: [`serve_stdio`] (what hosts launch), [`HttpServer`] (Streamable HTTP on
//! loopback, a bearer token required elsewhere, `Origin` checked against DNS
//! rebinding), [`serve_io`] for any byte stream.
//!
//! # Decisions
//!
//! - The protocol is rmcp's; this crate maps tools and outcomes, nothing more. A
//!   protocol fix in rmcp is a fix here.
//! - Calls go to one run per server ([`McpServerBuilder::run_id`]), except those with
//!   an idempotency key: each of those has a run derived from its key, so it can be
//!   found again after a restart without the server keeping anything.
//! - A tool that wants MCP content other than text (images, audio, resources) or an
//!   `input_required` round returns an [`McpReply`]: plain JSON, so the tool may run
//!   on any worker.
//! - [`McpCaller`] (the live session: log messages, sampling, elicitation from inside
//!   a tool) exists only where the tool runs in the server's process, and only when the
//!   server is built with [`McpServerBuilder::share_sessions`]; progress, which travels
//!   as a fact on the bus, works everywhere.
//! - The `outputSchema` of a tool is declared on the builder
//!   ([`McpServerBuilder::output_schema`]): a `#[tool]` does not record its return
//!   type's schema.
//! - MCP tasks (the `io.modelcontextprotocol/tasks` extension) are engine calls
//!   recorded in the engine's store, for the tools declared with
//!   [`McpServerBuilder::task_support`]: a task outlives the server process that made
//!   it ([`tasks`]).
//! - A cancelled request (`notifications/cancelled`, or on protocol `2026-07-28` over
//!   HTTP a closed response stream) cancels its engine call
//!   ([`RunHandle::cancel`](aaa_tools::RunHandle::cancel)): the tool is told through
//!   [`ToolContext::cancelled`](aaa_tools::ToolContext::cancelled) and stopped wherever
//!   it runs, and no response is sent, as the spec asks. A session that ends, or a
//!   server that stops, cancels nothing: the call goes on (see [`cancel`]).

#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod approval;
pub mod call;
mod caller;
pub mod cancel;
mod follow;
mod forward;
mod handler;
mod http;
pub mod idempotency;
pub mod listing;
pub mod reply;
mod server;
mod state;
mod stdio;
pub mod tasks;

pub use approval::Approvals;
pub use call::APPROVAL_META_KEY;
pub use caller::{McpCaller, McpRequest, REQUEST_META_KEY};
pub use follow::OUTCOME_SEEN;
pub use http::{DEFAULT_MAX_BODY_BYTES, HttpOptions, HttpServer, MCP_PATH, ServeError};
pub use idempotency::IDEMPOTENCY_KEY;
pub use reply::{CALL_META_KEY, McpReply, REPLY_KEY};
pub use server::{BuildError, DEFAULT_PAGE_SIZE, McpServer, McpServerBuilder, NoExtras};
pub use stdio::{serve_io, serve_stdio};
pub use tasks::TaskSupport;

pub use rmcp;
