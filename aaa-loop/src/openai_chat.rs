//! OpenAI Chat Completions (`POST /v1/chat/completions`), and the many servers that
//! speak it.
//!
//! - **In**: `choices[0].message`: `content` (text), `refusal`, and `tool_calls[]`, each
//!   `{"id", "type": "function", "function": {"name", "arguments"}}` with `arguments`
//!   a string of JSON. Only the first choice is read (ask for `n = 1`).
//! - **Stream**: chunks whose `choices[0].delta` carries pieces: `content` and
//!   `refusal` text, and `tool_calls[]` fragments keyed by `index` (the first with `id`
//!   and `function.name`, the rest with pieces of `function.arguments`). A chunk with
//!   `finish_reason` ends the turn; a last chunk with empty `choices` may carry `usage`
//!   (`stream_options.include_usage`). The `[DONE]` sentinel is accepted and ignored.
//! - **Out**: one `{"role": "tool", "tool_call_id", "content"}` message per call, in
//!   the calls' order, `content` being [`Outcome::for_model`].
//!
//! Stop reasons: `stop` is [`EndTurn`](StopReason::EndTurn) (or
//! [`ToolUse`](StopReason::ToolUse) when there are calls: a forced `tool_choice` ends
//! with `stop`), `tool_calls` is `ToolUse`, `length` is
//! [`MaxTokens`](StopReason::MaxTokens), `content_filter` and a non-empty
//! `message.refusal` are [`Refused`](StopReason::Refused), anything else
//! [`Other`](StopReason::Other). The legacy single `function_call` (no id to answer
//! with) is a [`CodecError::Shape`]; a tool call of another `type` than `function`
//! (e.g. `custom`) is kept with a [`Problem`](ArgumentsOrProblem::Problem).

use aaa_tools::Outcome;
use serde_json::{Value, json};

use crate::error::CodecError;
use crate::provider::Provider;
use crate::render::pair;
use crate::shape::{Node, from_slice, provider_error};
use crate::turn::{
    ArgumentsOrProblem, AssistantTurn, ProviderCall, StopReason, Usage, finish_turn, text_arguments,
};

const P: Provider = Provider::OpenAiChat;

/// Reads a whole (non-streamed) response body.
///
/// ```
/// use aaa_loop::{StopReason, openai_chat};
/// use serde_json::json;
///
/// let body = json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
///     "role": "assistant", "content": null,
///     "tool_calls": [{"id": "call_1", "type": "function",
///                     "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]}}]});
/// let turn = openai_chat::parse(&body)?;
/// assert_eq!(turn.stop, StopReason::ToolUse);
/// assert_eq!(&*turn.calls[0].name, "get_weather");
/// assert_eq!(turn.calls[0].arguments.arguments().unwrap()["city"], "Oslo");
/// # Ok::<(), aaa_loop::CodecError>(())
/// ```
pub fn parse(body: &Value) -> Result<AssistantTurn, CodecError> {
    if let Some(error) = provider_error(P, body) {
        return Err(error);
    }
    let root = Node::root(P, body)?;
    root.field("choices")?;
    let Some(choice) = root.items("choices")?.into_iter().next() else {
        return Err(CodecError::Empty { provider: P });
    };
    let message = choice.req_object("message")?;
    let text = content_text(message.get("content"))?;
    let refusal = message.str("refusal")?.unwrap_or_default().to_owned();
    let calls = message
        .items("tool_calls")?
        .iter()
        .map(call)
        .collect::<Result<Vec<_>, _>>()?;
    if calls.is_empty()
        && let Some(legacy) = message.get("function_call")
    {
        return Err(legacy.error(
            "is a legacy function call, which has no id to answer with; offer the tools as `tools`",
        ));
    }
    let stop = stop_reason(choice.str("finish_reason")?, refusal);
    let usage = root.get("usage").map(|u| usage(&u)).unwrap_or_default();
    finish_turn(P, text, calls, stop, usage)
}

/// [`parse`] of a body's bytes.
pub fn parse_slice(body: &[u8]) -> Result<AssistantTurn, CodecError> {
    parse(&from_slice(P, body)?)
}

fn call(node: &Node<'_>) -> Result<ProviderCall, CodecError> {
    let id = node.req_str("id")?;
    let kind = node.str("type")?.unwrap_or("function");
    if kind != "function" {
        let name = node
            .object(kind)?
            .map(|inner| inner.str("name"))
            .transpose()?
            .flatten()
            .unwrap_or(kind);
        let problem = format!(
            "tool calls of type `{kind}` are not supported; call the tool as a function with \
             one JSON object of arguments"
        );
        return Ok(ProviderCall::new(
            id,
            name,
            ArgumentsOrProblem::Problem(problem.into()),
        ));
    }
    let function = node.req_object("function")?;
    let name = function.req_str("name")?;
    let arguments = text_arguments(function.value().get("arguments"));
    Ok(ProviderCall::new(id, name, arguments))
}

/// `content`: a string, or (from some compatible servers) an array of text parts.
fn content_text(content: Option<Node<'_>>) -> Result<String, CodecError> {
    let Some(content) = content else {
        return Ok(String::new());
    };
    match content.value() {
        Value::String(text) => Ok(text.clone()),
        Value::Array(parts) => Ok(parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect()),
        _ => Err(content.error("is neither a string nor an array of parts")),
    }
}

fn stop_reason(finish: Option<&str>, refusal: String) -> StopReason {
    if !refusal.is_empty() {
        return StopReason::Refused(refusal);
    }
    match finish {
        None | Some("stop") => StopReason::EndTurn,
        Some("tool_calls" | "function_call") => StopReason::ToolUse,
        Some("length") => StopReason::MaxTokens,
        Some("content_filter") => StopReason::Refused(
            "the provider's content filter stopped the answer (finish_reason: content_filter)"
                .to_owned(),
        ),
        Some(other) => StopReason::Other(other.to_owned()),
    }
}

fn usage(node: &Node<'_>) -> Usage {
    Usage {
        input_tokens: node.count(&["prompt_tokens"]),
        output_tokens: node.count(&["completion_tokens"]),
        cached_input_tokens: node.count(&["prompt_tokens_details", "cached_tokens"]),
        reasoning_tokens: node.count(&["completion_tokens_details", "reasoning_tokens"]),
    }
}

/// Assembles a streamed response (`"stream": true`) from its chunks, one at a time,
/// into the [`AssistantTurn`] [`parse`] would give for the whole response.
///
/// ```
/// use aaa_loop::openai_chat::Assembler;
/// use serde_json::json;
///
/// let mut stream = Assembler::new();
/// stream.push(&json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1",
///     "type": "function", "function": {"name": "get_weather", "arguments": "{\"ci"}}]}}]}))?;
/// stream.push(&json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0,
///     "function": {"arguments": "ty\":\"Oslo\"}"}}]}}]}))?;
/// stream.push(&json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}))?;
/// stream.push_slice(b"[DONE]")?;
/// let turn = stream.finish()?;
/// assert_eq!(turn.calls[0].arguments.arguments().unwrap()["city"], "Oslo");
/// # Ok::<(), aaa_loop::CodecError>(())
/// ```
#[derive(Debug, Default)]
pub struct Assembler {
    text: String,
    refusal: String,
    calls: Vec<Partial>,
    finish: Option<String>,
    usage: Usage,
}

/// A call while its fragments arrive.
#[derive(Debug)]
struct Partial {
    index: usize,
    id: Option<String>,
    kind: Option<String>,
    name: String,
    arguments: String,
}

impl Assembler {
    /// An assembler for one streamed response.
    pub fn new() -> Self {
        Assembler::default()
    }

    /// Takes the next chunk (the JSON of one server-sent event's `data`).
    pub fn push(&mut self, chunk: &Value) -> Result<(), CodecError> {
        if let Some(error) = provider_error(P, chunk) {
            return Err(error);
        }
        let chunk = Node::named(P, chunk, "chunk")?;
        if let Some(usage_node) = chunk.object("usage")? {
            self.usage = usage(&usage_node);
        }
        for choice in chunk.items("choices")? {
            // Only the first choice, as `parse` reads only the first.
            if choice.get("index").and_then(|i| i.value().as_u64()) > Some(0) {
                continue;
            }
            if let Some(delta) = choice.object("delta")? {
                self.text.push_str(delta.str("content")?.unwrap_or(""));
                self.refusal.push_str(delta.str("refusal")?.unwrap_or(""));
                for fragment in delta.items("tool_calls")? {
                    self.fragment(&fragment)?;
                }
            }
            if let Some(finish) = choice.str("finish_reason")? {
                self.finish = Some(finish.to_owned());
            }
        }
        Ok(())
    }

    /// [`push`](Self::push) of a chunk's bytes; `[DONE]` is skipped.
    pub fn push_slice(&mut self, chunk: &[u8]) -> Result<(), CodecError> {
        if chunk.trim_ascii() == b"[DONE]" {
            return Ok(());
        }
        self.push(&from_slice(P, chunk)?)
    }

    fn fragment(&mut self, fragment: &Node<'_>) -> Result<(), CodecError> {
        let id = fragment.str("id")?;
        let index = match fragment.get("index") {
            Some(_) => fragment.index("index")?,
            // Some compatible servers leave `index` out: a new id starts a new call,
            // anything else continues the last one.
            None => match self.calls.last() {
                Some(last) if id.is_none() || id == last.id.as_deref() => last.index,
                _ => self.calls.iter().map(|c| c.index + 1).max().unwrap_or(0),
            },
        };
        let position = match self.calls.iter().position(|c| c.index == index) {
            Some(position) => position,
            None => {
                self.calls.push(Partial {
                    index,
                    id: None,
                    kind: None,
                    name: String::new(),
                    arguments: String::new(),
                });
                self.calls.len() - 1
            }
        };
        let partial = &mut self.calls[position];
        if partial.id.is_none() {
            partial.id = id.map(str::to_owned);
        }
        if partial.kind.is_none() {
            partial.kind = fragment.str("type")?.map(str::to_owned);
        }
        if let Some(function) = fragment.object("function")? {
            if partial.name.is_empty() {
                partial.name = function.str("name")?.unwrap_or("").to_owned();
            }
            match function.get("arguments").map(|a| a.value()) {
                Some(Value::String(piece)) => partial.arguments.push_str(piece),
                Some(whole) => partial.arguments = whole.to_string(),
                None => {}
            }
        }
        Ok(())
    }

    /// The turn, once the stream has ended. A stream that stopped before its
    /// `finish_reason` is [`CodecError::Unfinished`].
    pub fn finish(mut self) -> Result<AssistantTurn, CodecError> {
        let Some(finish) = self.finish else {
            return Err(CodecError::Unfinished {
                provider: P,
                what: "the stream ended before a chunk with a `finish_reason`".to_owned(),
            });
        };
        self.calls.sort_by_key(|c| c.index);
        let mut calls = Vec::with_capacity(self.calls.len());
        for partial in self.calls {
            let whole = json!({
                "id": partial.id,
                "type": partial.kind,
                "function": {"name": (!partial.name.is_empty()).then_some(partial.name),
                             "arguments": partial.arguments},
            });
            let path = format!("chunk.choices[0].delta.tool_calls(index {})", partial.index);
            calls.push(call(&Node::named(P, &whole, &path)?)?);
        }
        let stop = stop_reason(Some(&finish), self.refusal);
        finish_turn(P, self.text, calls, stop, self.usage)
    }
}

/// The outcomes of a turn's calls as the next messages of the conversation: one
/// `{"role": "tool", "tool_call_id", "content"}` per call, in the calls' order (the
/// outcomes may come in any order). Every call needs exactly one outcome.
///
/// Append them after the assistant message that made the calls.
pub fn render_outcomes(
    calls: &[ProviderCall],
    outcomes: &[Outcome],
) -> Result<Vec<Value>, CodecError> {
    Ok(pair(calls, outcomes)?
        .into_iter()
        .map(|(call, outcome)| {
            json!({"role": "tool", "tool_call_id": call.answer_id(), "content": outcome.for_model()})
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixtures::{completed, failed};

    fn fragment(index: Option<u64>, id: Option<&str>, name: Option<&str>, args: &str) -> Value {
        let mut call = json!({"function": {"arguments": args}});
        if let Some(index) = index {
            call["index"] = json!(index);
        }
        if let Some(id) = id {
            call["id"] = json!(id);
            call["type"] = json!("function");
        }
        if let Some(name) = name {
            call["function"]["name"] = json!(name);
        }
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": null}]})
    }

    #[test]
    fn fragments_without_index_follow_their_id() {
        let mut stream = Assembler::new();
        for chunk in [
            fragment(None, Some("a"), Some("f"), "{\"x\":"),
            fragment(None, None, None, "1}"),
            fragment(None, Some("b"), Some("g"), "{}"),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
            json!({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4}}),
        ] {
            stream.push(&chunk).unwrap();
        }
        let turn = stream.finish().unwrap();
        let got: Vec<_> = turn
            .calls
            .iter()
            .map(|c| (c.answer_id(), &*c.name, c.arguments.clone()))
            .collect();
        assert_eq!(
            got,
            [
                ("a", "f", ArgumentsOrProblem::from_text("{\"x\":1}")),
                ("b", "g", ArgumentsOrProblem::from_text("{}")),
            ]
        );
        assert_eq!((turn.usage.input_tokens, turn.usage.output_tokens), (9, 4));
    }

    #[test]
    fn a_fragment_that_never_names_its_call_is_a_shape_error() {
        let mut stream = Assembler::new();
        stream.push(&fragment(Some(0), None, None, "{}")).unwrap();
        stream
            .push(&json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}))
            .unwrap();
        assert_eq!(
            stream.finish().unwrap_err().to_string(),
            "unexpected OpenAI Chat Completions response: `chunk.choices[0].delta.tool_calls(index 0).id` is missing"
        );
    }

    #[test]
    fn custom_tool_calls_and_object_arguments_are_kept() {
        let body = json!({"choices": [{"finish_reason": "tool_calls", "message": {"tool_calls": [
            {"id": "c1", "type": "custom", "custom": {"name": "grep", "input": "foo"}},
            {"id": "c2", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}},
        ]}}]});
        let turn = parse(&body).unwrap();
        assert_eq!(&*turn.calls[0].name, "grep");
        assert!(
            turn.calls[0]
                .arguments
                .problem()
                .unwrap()
                .starts_with("tool calls of type `custom` are not supported")
        );
        assert_eq!(turn.calls[1].arguments.arguments().unwrap()["a"], 1);
    }

    #[test]
    fn legacy_function_call_and_error_bodies_are_errors() {
        let legacy = json!({"choices": [{"finish_reason": "function_call", "message": {
            "function_call": {"name": "f", "arguments": "{}"}}}]});
        assert_eq!(
            parse(&legacy).unwrap_err().to_string(),
            "unexpected OpenAI Chat Completions response: `choices[0].message.function_call` is a legacy function call, which has no id to answer with; offer the tools as `tools`"
        );
        let error = json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}});
        assert_eq!(
            parse(&error).unwrap_err().to_string(),
            "OpenAI Chat Completions reported an error: requests: Rate limit reached"
        );
    }

    #[test]
    fn renders_tool_messages_in_call_order() {
        let turn = parse(
            &json!({"choices": [{"finish_reason": "tool_calls", "message": {"tool_calls": [
                {"id": "a.1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}},
            ]}}]}),
        )
        .unwrap();
        let outcomes = [
            failed("b", "g", "timeout", "g ran past 5s"),
            completed(turn.calls[0].call_id.as_str(), "f", json!({"ok": true})),
        ];
        assert_eq!(
            render_outcomes(&turn.calls, &outcomes).unwrap(),
            [
                json!({"role": "tool", "tool_call_id": "a.1", "content": "{\"ok\":true}"}),
                json!({"role": "tool", "tool_call_id": "b", "content": "error (timeout): g ran past 5s"}),
            ]
        );
    }
}
