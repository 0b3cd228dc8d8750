//! Provider codecs for [aaa-tools](aaa_tools): a model's tool calls in, the engine's
//! outcomes out, for OpenAI Chat Completions, OpenAI Responses, Anthropic Messages and
//! Google Gemini.
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
//! - Only the first choice or candidate is read; items that are not function calls
//!   (reasoning, thinking, built-in tools the provider runs) are skipped.
//! - A completed outcome is rendered as [`Outcome::for_model`](aaa_tools::Outcome::for_model)
//!   (a string result as is, others as JSON text), a failure as its
//!   `error (<kind>): <message>`; Gemini takes objects: the result when it is one,
//!   else `{"result": ...}`, and `{"error": ...}` for a failure.
//!
//! # Not here yet
//!
//! This crate is the first part of the agent loop. The `Model` trait, the HTTP
//! clients for each provider (one feature each) and `ToolLoop` itself (which drives a
//! model through turns, answers `Problem` calls with `bad_args` facts, and keeps its
//! state as facts on the run) come next; none of them exists yet. Neither does
//! rendering the assistant turn itself back into the conversation history (echoing
//! the model's calls, reasoning and signatures): keep the provider's own assistant
//! message for that until then.

#![cfg_attr(docsrs, feature(doc_cfg))]

mod error;
mod ids;
mod render;
mod shape;
mod turn;

pub mod anthropic;
pub mod gemini;
pub mod openai_chat;
pub mod openai_responses;

pub use error::CodecError;
pub use ids::{ESCAPE_PREFIX, call_id_for, provider_id_for};
pub use turn::{ArgumentsOrProblem, AssistantTurn, Provider, ProviderCall, StopReason, Usage};
