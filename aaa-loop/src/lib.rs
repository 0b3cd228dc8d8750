//! The agent loop for [aaa-tools](aaa_tools): any LLM driven through durable,
//! guarded tool calls.
//!
//! - [`ToolLoop`]: a model turn, the turn's calls through the engine (so pools,
//!   timeouts, approvals, guardrails and the guard hold), their outcomes back to the
//!   model, the next turn, until the model answers or a budget ([`Limits`]) ends it.
//!   Each turn is a fact on the run ([`facts`]), so a loop that crashed resumes
//!   where it was: recorded turns are not asked again, finished calls not run again.
//!   [`ToolLoop::run_stream`] tells a UI what happens as it happens ([`LoopEvent`]).
//! - [`Model`]: one turn of any model, a trait a provider client implements in a few
//!   lines; [`ScriptedModel`] answers from a script (tests, offline demos).
//! - Provider codecs: the provider's JSON to an [`AssistantTurn`] and the engine's
//!   outcomes back to the provider's messages.
//!
//! # A crash-resumable agent
//!
//! A loop keeps its state on the run, so a program that restarts and runs the loop
//! again on the same run id (and the same input) carries on where the last one
//! stopped:
//!
//! ```
//! use aaa_loop::{ArgumentsOrProblem, AssistantTurn, LoopEnd, Message, ProviderCall, ScriptedModel, ToolLoop};
//! use aaa_tools::{Engine, RunId, ToolHandler, ToolRegistry, tool, tools};
//! use std::sync::Arc;
//!
//! /// Add two integers.
//! #[tool]
//! async fn add(a: i64, b: i64) -> i64 { a + b }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let engine = Engine::embedded(); // in production, a bus that outlives the process (NATS)
//! let _worker = ToolHandler::new(ToolRegistry::new(tools![add])?).attach(&engine).await?;
//! let (run, input) = (RunId::new("ticket-4711")?, vec![Message::user("What is 2 + 3?")]);
//!
//! // The first process: the model calls `add`, then the loop dies before the next
//! // turn (here the script runs out; a killed process leaves the same facts).
//! let call = ProviderCall::new("call_1", "add", ArgumentsOrProblem::from_text(r#"{"a":2,"b":3}"#));
//! let first = ToolLoop::new(ScriptedModel::new([AssistantTurn::tool_calls([call])]), tools![add]);
//! assert!(first.run(&engine.run(run.clone()), input.clone()).await.is_err());
//!
//! // The next process: turn 0 and the outcome of its call come from the run.
//! let model = Arc::new(ScriptedModel::from_fn(|request| {
//!     AssistantTurn::answer(format!("2 + 3 = {}", request.last_results().unwrap()[0].outcome.for_model()))
//! }));
//! let result = ToolLoop::new(model.clone(), tools![add]).run(&engine.run(run), input).await?;
//! assert_eq!(result.end, LoopEnd::Final("2 + 3 = 5".into()));
//! assert_eq!((result.resumed_turns, model.calls(), model.requests()[0].turn), (1, 1, 1));
//! # Ok(()) }
//! ```
//!
//! # Provider codecs
//!
//! The codecs are pure functions over JSON: no network, no async, no engine. Each
//! provider module has the same three parts:
//!
//! - `parse` reads a whole response body into an [`AssistantTurn`]: the model's text,
//!   its tool calls as [`ProviderCall`]s (in the provider's order), a
//!   [`StopReason`] and the [`Usage`];
//! - `Assembler` takes a streamed response one chunk or event at a time and gives the
//!   same [`AssistantTurn`] at the end;
//! - `render_outcomes` turns the engine's [`Outcome`](aaa_tools::Outcome)s back into
//!   the messages the provider expects next, in the calls' order.
//!
//! | module | calls come from | outcomes go back as |
//! |---|---|---|
//! | [`openai_chat`] | `choices[0].message.tool_calls[]` | `{"role": "tool", "tool_call_id", "content"}` messages |
//! | [`openai_responses`] | `output[]` items of type `function_call` | `{"type": "function_call_output", "call_id", "output"}` items |
//! | [`anthropic`] | `content[]` blocks of type `tool_use` | one `user` message of `tool_result` blocks |
//! | [`gemini`] | `candidates[0].content.parts[].functionCall` | one `user` content of `functionResponse` parts |
//!
//! # From the model to the engine
//!
//! ```
//! use aaa_loop::{ArgumentsOrProblem, StopReason, anthropic};
//! use aaa_tools::ToolCall;
//! use serde_json::{Value, json};
//!
//! let body = json!({
//!     "type": "message", "role": "assistant", "stop_reason": "tool_use",
//!     "content": [
//!         {"type": "text", "text": "Let me look."},
//!         {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Oslo"}},
//!         {"type": "tool_use", "id": "toolu_02", "name": "get_weather", "input": "Paris"}
//!     ],
//!     "usage": {"input_tokens": 120, "output_tokens": 40}
//! });
//! let turn = anthropic::parse(&body)?;
//! assert_eq!(turn.stop, StopReason::ToolUse);
//! assert_eq!(turn.text.as_deref(), Some("Let me look."));
//!
//! // Calls with usable arguments go to the engine under their call ids...
//! let calls: Vec<ToolCall> = turn
//!     .calls
//!     .iter()
//!     .filter_map(|call| {
//!         let args = call.arguments.arguments()?.clone();
//!         Some(ToolCall::new(call.name.clone(), Value::Object(args)).with_id(call.call_id.clone()))
//!     })
//!     .collect();
//! assert_eq!(calls.len(), 1);
//! // ...and the others carry a reason for the model.
//! assert_eq!(
//!     turn.calls[1].arguments.problem(),
//!     Some("the arguments are a JSON string, not an object; send one JSON object whose properties are the tool's arguments")
//! );
//! # Ok::<(), aaa_loop::CodecError>(())
//! ```
//!
//! # From the engine back to the model
//!
//! ```
//! use aaa_loop::openai_chat;
//! use aaa_tools::{Engine, ToolCall, ToolHandler, ToolRegistry, tool, tools};
//! use serde_json::{Value, json};
//!
//! /// Add two integers.
//! #[tool]
//! async fn add(a: i64, b: i64) -> i64 { a + b }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let body = json!({"choices": [{"finish_reason": "tool_calls", "message": {"role": "assistant",
//!     "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "add", "arguments": "{\"a\":2,\"b\":3}"}}]}}]});
//! let turn = openai_chat::parse(&body)?;
//!
//! let engine = Engine::embedded();
//! let _worker = ToolHandler::new(ToolRegistry::new(tools![add])?).attach(&engine).await?;
//! let calls = turn.calls.iter().map(|call| {
//!     let args = call.arguments.arguments().cloned().unwrap_or_default();
//!     ToolCall::new(call.name.clone(), Value::Object(args)).with_id(call.call_id.clone())
//! });
//! let outcomes = engine.new_run().call_all(calls.collect()).await?;
//!
//! let messages = openai_chat::render_outcomes(&turn.calls, &outcomes)?;
//! assert_eq!(messages, [json!({"role": "tool", "tool_call_id": "call_1", "content": "5"})]);
//! # Ok(()) }
//! ```
//!
//! # Decisions
//!
//! - **Call ids.** A provider's call id becomes the engine's [`CallId`](aaa_tools::CallId)
//!   through [`call_id_for`]: itself when it is a valid call id (and does not start
//!   with [`ESCAPE_PREFIX`], `x--`), else `x--b` and the base64url of its bytes, or,
//!   past 93 bytes, `x--s` and its SHA-256 in hex. Deterministic (a resumed loop asks
//!   for the same calls) and injective (two provider ids never share a call);
//!   [`provider_id_for`] reverses it except for hashed ids, so a [`ProviderCall`]
//!   keeps the provider's id too, and outcomes are always rendered with it. A Gemini
//!   call without an id gets [`gemini::positional_call_id`] from the turn's index
//!   (which the caller passes) and the call's position.
//! - **Arguments.** Arguments that are not JSON, cut-off JSON, or JSON that is not an
//!   object never fail the turn and never drop the call: the call carries an
//!   [`ArgumentsOrProblem::Problem`] in words for the model, for the loop to answer as
//!   a `bad_args` failure. Arguments left out (or empty text) count as `{}`.
//! - **Duplicate ids.** Two calls with one provider id in one turn are a
//!   [`CodecError::DuplicateCallId`]: such a turn cannot be answered one result per
//!   call, and the provider would reject the conversation that echoes it, so the
//!   loop should ask the model again rather than guess.
//! - **Refusals are turns, not errors**: an OpenAI `refusal`, a `content_filter` stop,
//!   Anthropic's `refusal` stop reason, Gemini's safety finish reasons and a blocked
//!   prompt are a turn with [`StopReason::Refused`] and the reason, for the loop to
//!   end the run with. Calls in such a turn are kept.
//! - **Errors are for responses the loop cannot use** ([`CodecError`]): a body that is
//!   not JSON or not the provider's shape (the error names the path), a provider
//!   error body or event, a turn with no text and no calls that says it ended
//!   normally ([`CodecError::Empty`]), a stream that ended before its final event
//!   ([`CodecError::Unfinished`]), and outcomes that do not answer the turn's calls
//!   one to one.
//! - Unknown tool names are not the codec's business: the engine answers them.
//! - Only the first choice or candidate is read. Reasoning the provider wants back
//!   (Anthropic's signed `thinking` and `redacted_thinking` blocks, OpenAI Responses'
//!   `reasoning` items) is kept whole in [`AssistantTurn::reasoning`], and Gemini's
//!   `thoughtSignature` on its call ([`ProviderCall::signature`]); built-in tools the
//!   provider runs are skipped.
//! - A completed outcome is rendered as [`Outcome::for_model`](aaa_tools::Outcome::for_model)
//!   (a string result as is, others as JSON text), a failure as its
//!   `error (<kind>): <message>`; Gemini takes objects: the result when it is one,
//!   else `{"result": ...}`, and `{"error": ...}` for a failure.
//!
//! - **The loop** (see [`ToolLoop`] for the whole list): calls with a `Problem` are
//!   answered by the loop with a `bad_args` failure, never requested; the engine knows
//!   each call as [`loop_call_id`] of its turn, because providers do not promise call
//!   ids unique across a conversation; a turn is recorded in the request of its first
//!   call (never after it), or on its own when no call of it is requested; budgets are
//!   checked in one place, before each step.
//!
//! # Talking to a provider
//!
//! The `http` module (one feature per client: `openai-chat`, `openai-responses`,
//! `anthropic`, `gemini`) has [`Model`]s over HTTP: an OpenAI Chat Completions
//! client for OpenAI and every compatible server (vLLM, llama.cpp, Ollama: a base
//! URL and an optional key), an OpenAI Responses client, an Anthropic Messages
//! client and a Google Gemini (`generateContent`) client. Each renders the
//! conversation for its provider, reads the answer with the codec above, and has
//! timeouts and retries on 429 and 5xx that honour `Retry-After`; errors name the
//! HTTP status and the provider's message. A [`Model`] for any other provider is a
//! few lines over your HTTP client and a codec (see [`Model`]). Assistant turns are
//! sent back as their reasoning (unchanged, first), text and calls, Gemini's calls
//! with their signatures (the placeholder Google documents only for a turn whose
//! calls have none, such as a scripted one).

#![cfg_attr(docsrs, feature(doc_cfg))]

mod arguments;
mod error;
mod ids;
mod model;
mod provider;
mod render;
mod scripted;
mod shape;
mod tool_loop;
mod turn;
mod wire;

pub mod anthropic;
pub mod facts;
pub mod gemini;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub mod http;
pub mod openai_chat;
pub mod openai_responses;

pub use arguments::{Arguments, ArgumentsOrProblem};
pub use error::CodecError;
pub use facts::loop_call_id;
pub use ids::{ESCAPE_PREFIX, call_id_for, provider_id_for};
pub use model::{Message, Model, ModelError, ModelFuture, ModelRequest, ToolResult};
pub use provider::Provider;
pub use scripted::ScriptedModel;
pub use tool_loop::{Limits, LoopEnd, LoopError, LoopEvent, LoopResult, LoopStream, ToolLoop};
pub use turn::{AssistantTurn, ProviderCall, StopReason, Usage};
