//! Anthropic Messages (`POST /v1/messages`).
//!
//! - **In**: the `content[]` blocks: `tool_use` blocks (`id`, `name`, `input` an
//!   object) are the calls, in their order; `text` blocks give the text; `thinking`
//!   (with its `signature`) and `redacted_thinking` blocks are kept whole, in their
//!   order, as the turn's [`reasoning`](AssistantTurn::reasoning), which a request must
//!   send back when extended thinking is on. Other blocks (server tools that run at
//!   Anthropic and their results) are skipped.
//! - **Stream**: `message_start` (input usage), `content_block_start` (a `text`,
//!   `tool_use`, `thinking` or `redacted_thinking` block at an `index`),
//!   `content_block_delta` (`text_delta.text`, `input_json_delta.partial_json`,
//!   `thinking_delta.thinking` and `signature_delta.signature` pieces),
//!   `content_block_stop`, `message_delta`
//!   (`stop_reason`, output usage), `message_stop`. An `error` event is
//!   [`CodecError::Provider`]; `ping` and unknown events are skipped.
//! - **Out**: one `{"role": "user", "content": [{"type": "tool_result", "tool_use_id",
//!   "content", "is_error"}...]}` message holding every call's result in the calls'
//!   order; `content` is [`Outcome::for_model`] and `is_error` is `true` for every
//!   failure (left out otherwise).
//!
//! Stop reasons: `end_turn` and `stop_sequence` are [`EndTurn`](StopReason::EndTurn),
//! `tool_use` is [`ToolUse`](StopReason::ToolUse), `max_tokens` and
//! `model_context_window_exceeded` are [`MaxTokens`](StopReason::MaxTokens), `refusal`
//! is [`Refused`](StopReason::Refused), anything else (`pause_turn`) is
//! [`Other`](StopReason::Other).

use std::collections::BTreeMap;

use aaa_tools::Outcome;
use serde_json::{Value, json};

use crate::error::CodecError;
use crate::provider::Provider;
use crate::render::pair;
use crate::shape::{Node, from_slice, provider_error};
use crate::turn::{
    ArgumentsOrProblem, AssistantTurn, ProviderCall, StopReason, Usage, finish_turn,
};

const P: Provider = Provider::Anthropic;

/// Reads a whole (non-streamed) response body.
///
/// ```
/// use aaa_loop::{StopReason, anthropic};
/// use serde_json::json;
///
/// let body = json!({"type": "message", "role": "assistant", "stop_reason": "tool_use", "content": [
///     {"type": "text", "text": "Checking."},
///     {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Oslo"}}]});
/// let turn = anthropic::parse(&body)?;
/// assert_eq!(turn.text.as_deref(), Some("Checking."));
/// assert_eq!(turn.calls[0].call_id.as_str(), "toolu_01");
/// # Ok::<(), aaa_loop::CodecError>(())
/// ```
pub fn parse(body: &Value) -> Result<AssistantTurn, CodecError> {
    if let Some(error) = provider_error(P, body) {
        return Err(error);
    }
    let root = Node::root(P, body)?;
    root.field("content")?;
    let mut blocks = Vec::new();
    for block in root.items("content")? {
        blocks.push(Block::read(&block)?);
    }
    let stop = stop_reason(root.str("stop_reason")?);
    let mut counts = Counts::default();
    if let Some(usage_node) = root.object("usage")? {
        counts.update(&usage_node);
    }
    turn(blocks, stop, counts.usage())
}

/// [`parse`] of a body's bytes.
pub fn parse_slice(body: &[u8]) -> Result<AssistantTurn, CodecError> {
    parse(&from_slice(P, body)?)
}

/// One content block, as far as the turn is concerned.
#[derive(Debug)]
enum Block {
    Text(String),
    /// A `tool_use` block: its `input` as it started, and the JSON pieces streamed.
    Tool {
        id: String,
        name: String,
        input: Option<Value>,
        json: String,
    },
    /// A `thinking` block: the reasoning and the signature that vouches for it.
    Thinking {
        thinking: String,
        signature: String,
    },
    /// A `redacted_thinking` block, kept as it came.
    Redacted(Value),
    Skipped,
}

impl Block {
    fn read(block: &Node<'_>) -> Result<Block, CodecError> {
        Ok(match block.str("type")? {
            Some("text") => Block::Text(block.str("text")?.unwrap_or("").to_owned()),
            Some("thinking") => Block::Thinking {
                thinking: block.str("thinking")?.unwrap_or("").to_owned(),
                signature: block.str("signature")?.unwrap_or("").to_owned(),
            },
            Some("redacted_thinking") => Block::Redacted(block.value().clone()),
            Some("tool_use") => Block::Tool {
                id: block.req_str("id")?.to_owned(),
                name: block.req_str("name")?.to_owned(),
                input: block.get("input").map(|input| input.value().clone()),
                json: String::new(),
            },
            _ => Block::Skipped,
        })
    }
}

fn turn(blocks: Vec<Block>, stop: StopReason, usage: Usage) -> Result<AssistantTurn, CodecError> {
    let (mut text, mut calls, mut reasoning) = (String::new(), Vec::new(), Vec::new());
    for block in blocks {
        match block {
            Block::Text(piece) => text.push_str(&piece),
            Block::Thinking {
                thinking,
                signature,
            } => reasoning.push(json!({
                "type": "thinking", "thinking": thinking, "signature": signature,
            })),
            Block::Redacted(block) => reasoning.push(block),
            Block::Tool {
                id,
                name,
                input,
                json,
            } => {
                // Streamed input arrives as JSON pieces; a tool without parameters may
                // get none, and keeps the `{}` its block started with.
                let arguments = match (json.is_empty(), input) {
                    (false, _) => ArgumentsOrProblem::from_text(&json),
                    (true, Some(input)) => ArgumentsOrProblem::from_value(input),
                    (true, None) => ArgumentsOrProblem::empty(),
                };
                calls.push(ProviderCall::new(id, name, arguments));
            }
            Block::Skipped => {}
        }
    }
    Ok(finish_turn(P, text, calls, stop, usage)?.with_reasoning(reasoning))
}

fn stop_reason(reason: Option<&str>) -> StopReason {
    match reason {
        None | Some("end_turn" | "stop_sequence") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens" | "model_context_window_exceeded") => StopReason::MaxTokens,
        Some("refusal") => {
            StopReason::Refused("the model declined to answer (stop_reason: refusal)".to_owned())
        }
        Some(other) => StopReason::Other(other.to_owned()),
    }
}

/// Anthropic's counts as they arrive: a stream reports input counts in
/// `message_start` and (cumulative) output counts in `message_delta`.
#[derive(Debug, Default)]
struct Counts {
    input: u64,
    cache_creation: u64,
    cache_read: u64,
    output: u64,
}

impl Counts {
    /// Takes every count `usage` reports, keeping the others.
    fn update(&mut self, usage: &Node<'_>) {
        for (slot, key) in [
            (&mut self.input, "input_tokens"),
            (&mut self.cache_creation, "cache_creation_input_tokens"),
            (&mut self.cache_read, "cache_read_input_tokens"),
            (&mut self.output, "output_tokens"),
        ] {
            if let Some(count) = usage.value().get(key).and_then(Value::as_u64) {
                *slot = count;
            }
        }
    }

    /// Anthropic counts cached prompt tokens apart from `input_tokens`; [`Usage`]
    /// counts the whole prompt.
    fn usage(&self) -> Usage {
        Usage {
            input_tokens: self
                .input
                .saturating_add(self.cache_creation)
                .saturating_add(self.cache_read),
            output_tokens: self.output,
            cached_input_tokens: self.cache_read,
            reasoning_tokens: 0,
        }
    }
}

/// Assembles a streamed response (`"stream": true`) from its events, one at a time,
/// into the [`AssistantTurn`] [`parse`] would give for the whole response.
///
/// ```
/// use aaa_loop::anthropic::Assembler;
/// use serde_json::json;
///
/// let mut stream = Assembler::new();
/// stream.push(&json!({"type": "content_block_start", "index": 0, "content_block":
///     {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {}}}))?;
/// for piece in ["{\"city\": \"Os", "lo\"}"] {
///     stream.push(&json!({"type": "content_block_delta", "index": 0,
///         "delta": {"type": "input_json_delta", "partial_json": piece}}))?;
/// }
/// stream.push(&json!({"type": "content_block_stop", "index": 0}))?;
/// stream.push(&json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 20}}))?;
/// stream.push(&json!({"type": "message_stop"}))?;
/// let turn = stream.finish()?;
/// assert_eq!(turn.calls[0].arguments.arguments().unwrap()["city"], "Oslo");
/// assert_eq!(turn.usage.output_tokens, 20);
/// # Ok::<(), aaa_loop::CodecError>(())
/// ```
#[derive(Debug, Default)]
pub struct Assembler {
    blocks: BTreeMap<usize, Block>,
    stop: Option<StopReason>,
    counts: Counts,
}

impl Assembler {
    /// An assembler for one streamed response.
    pub fn new() -> Self {
        Assembler::default()
    }

    /// Takes the next event (the JSON of one server-sent event's `data`; its `type`
    /// says which event it is).
    pub fn push(&mut self, event: &Value) -> Result<(), CodecError> {
        if let Some(error) = provider_error(P, event) {
            return Err(error);
        }
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        let node = Node::named(P, event, if kind.is_empty() { "event" } else { kind })?;
        match kind {
            "message_start" => {
                let message = node.req_object("message")?;
                if let Some(usage) = message.object("usage")? {
                    self.counts.update(&usage);
                }
            }
            "content_block_start" => {
                let block = Block::read(&node.req_object("content_block")?)?;
                self.blocks.insert(node.index("index")?, block);
            }
            "content_block_delta" => {
                let index = node.index("index")?;
                let delta = node.req_object("delta")?;
                let Some(block) = self.blocks.get_mut(&index) else {
                    return Err(node.field("index")?.error(format!(
                        "names block {index}, which no `content_block_start` opened"
                    )));
                };
                match (delta.str("type")?, block) {
                    (Some("text_delta"), Block::Text(text)) => {
                        text.push_str(delta.req_str("text")?);
                    }
                    (Some("input_json_delta"), Block::Tool { json, .. }) => {
                        json.push_str(delta.req_str("partial_json")?);
                    }
                    (Some("thinking_delta"), Block::Thinking { thinking, .. }) => {
                        thinking.push_str(delta.req_str("thinking")?);
                    }
                    (Some("signature_delta"), Block::Thinking { signature, .. }) => {
                        signature.push_str(delta.req_str("signature")?);
                    }
                    (
                        Some(
                            kind @ ("text_delta" | "input_json_delta" | "thinking_delta"
                            | "signature_delta"),
                        ),
                        _,
                    ) => {
                        return Err(delta.error(format!(
                            "is a `{kind}` for block {index}, which is not of that kind"
                        )));
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(delta) = node.object("delta")?
                    && let Some(reason) = delta.str("stop_reason")?
                {
                    self.stop = Some(stop_reason(Some(reason)));
                }
                if let Some(usage) = node.object("usage")? {
                    self.counts.update(&usage);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// [`push`](Self::push) of an event's bytes.
    pub fn push_slice(&mut self, event: &[u8]) -> Result<(), CodecError> {
        self.push(&from_slice(P, event)?)
    }

    /// The turn, once the stream has ended. A stream that stopped before a
    /// `message_delta` with the `stop_reason` is [`CodecError::Unfinished`].
    pub fn finish(self) -> Result<AssistantTurn, CodecError> {
        let Some(stop) = self.stop else {
            return Err(CodecError::Unfinished {
                provider: P,
                what: "the stream ended before a `message_delta` with the stop reason".to_owned(),
            });
        };
        turn(
            self.blocks.into_values().collect(),
            stop,
            self.counts.usage(),
        )
    }
}

/// The outcomes of a turn's calls as the next message: one user message whose
/// `tool_result` blocks answer every call, in the calls' order (the outcomes may come
/// in any order), failures marked `is_error`. Every call needs exactly one outcome;
/// no calls give no message.
pub fn render_outcomes(
    calls: &[ProviderCall],
    outcomes: &[Outcome],
) -> Result<Vec<Value>, CodecError> {
    let results: Vec<Value> = pair(calls, outcomes)?
        .into_iter()
        .map(|(call, outcome)| {
            let mut result = json!({
                "type": "tool_result",
                "tool_use_id": call.answer_id(),
                "content": outcome.for_model(),
            });
            if !outcome.is_ok() {
                result["is_error"] = Value::Bool(true);
            }
            result
        })
        .collect();
    if results.is_empty() {
        return Ok(Vec::new());
    }
    Ok(vec![json!({"role": "user", "content": results})])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixtures::{completed, failed};

    #[test]
    fn a_tool_without_parameters_keeps_its_empty_input() {
        let mut stream = Assembler::new();
        for event in [
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "now", "input": {}}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": ""}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 7}}),
        ] {
            stream.push(&event).unwrap();
        }
        let turn = stream.finish().unwrap();
        assert_eq!(turn.calls[0].arguments, ArgumentsOrProblem::empty());
        assert_eq!(
            (
                turn.usage.input_tokens,
                turn.usage.cached_input_tokens,
                turn.usage.output_tokens
            ),
            (100, 90, 7)
        );
    }

    #[test]
    fn out_of_order_events_and_error_events_are_errors() {
        let mut stream = Assembler::new();
        let orphan = json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{"}});
        assert_eq!(
            stream.push(&orphan).unwrap_err().to_string(),
            "unexpected Anthropic Messages response: `content_block_delta.index` names block 2, \
             which no `content_block_start` opened"
        );
        let error = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
        assert_eq!(
            stream.push(&error).unwrap_err().to_string(),
            "Anthropic Messages reported an error: overloaded_error: Overloaded"
        );
        assert!(matches!(
            stream.finish(),
            Err(CodecError::Unfinished { .. })
        ));
    }

    #[test]
    fn renders_one_user_message_with_errors_marked() {
        let calls = [
            ProviderCall::new("toolu_a", "f", ArgumentsOrProblem::empty()),
            ProviderCall::new("toolu_b", "g", ArgumentsOrProblem::empty()),
        ];
        let outcomes = [
            completed("toolu_a", "f", json!([1, 2])),
            failed("toolu_b", "g", "denied", "a human said no"),
        ];
        assert_eq!(
            render_outcomes(&calls, &outcomes).unwrap(),
            [json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "[1,2]"},
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "error (denied): a human said no", "is_error": true},
            ]})]
        );
        assert_eq!(render_outcomes(&[], &[]).unwrap(), Vec::<Value>::new());
    }
}
