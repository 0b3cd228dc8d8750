//! OpenAI Responses (`POST /v1/responses`).
//!
//! - **In**: the `output[]` items: `function_call` items (`call_id`, `name`,
//!   `arguments` a string of JSON) are the calls, in their order; `message` items give
//!   the text (`output_text` parts) and refusals (`refusal` parts); `reasoning` items
//!   are kept whole, in their order, as the turn's
//!   [`reasoning`](AssistantTurn::reasoning), for a request to send back with the
//!   calls they led to. Other items (built-in tools that run at OpenAI, custom tools)
//!   are not calls for the engine and are skipped.
//! - **Stream**: `response.output_item.added` opens an item, `response.output_text.delta`,
//!   `response.refusal.delta` and `response.function_call_arguments.delta` add to it
//!   (keyed by `output_index`), `response.function_call_arguments.done` and
//!   `response.output_item.done` give its final form, and `response.completed` (or
//!   `response.incomplete`) ends the turn with the status and usage.
//!   `response.failed` and `error` events are [`CodecError::Provider`]; others are
//!   skipped.
//! - **Out**: one `{"type": "function_call_output", "call_id", "output"}` input item
//!   per call, in the calls' order, `output` being [`Outcome::for_model`].
//!
//! Stop reasons come from `status`: `completed` is [`EndTurn`](StopReason::EndTurn)
//! or [`ToolUse`](StopReason::ToolUse) (when there are calls); `incomplete` is
//! [`MaxTokens`](StopReason::MaxTokens) for `max_output_tokens`,
//! [`Refused`](StopReason::Refused) for `content_filter` and
//! [`Other`](StopReason::Other) otherwise; a `refusal` part makes any turn
//! `Refused`. `failed` is [`CodecError::Provider`]; `queued`, `in_progress` and
//! `cancelled` are [`CodecError::Unfinished`].

use std::collections::BTreeMap;

use aaa_tools::Outcome;
use serde_json::{Value, json};

use crate::error::CodecError;
use crate::provider::Provider;
use crate::render::pair;
use crate::shape::{Node, from_slice, provider_error};
use crate::turn::{AssistantTurn, ProviderCall, StopReason, Usage, finish_turn, text_arguments};

const P: Provider = Provider::OpenAiResponses;

/// Reads a whole (non-streamed) response body.
///
/// ```
/// use aaa_loop::{StopReason, openai_responses};
/// use serde_json::json;
///
/// let body = json!({"status": "completed", "output": [
///     {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
///      "arguments": "{\"city\":\"Oslo\"}", "status": "completed"}]});
/// let turn = openai_responses::parse(&body)?;
/// assert_eq!(turn.stop, StopReason::ToolUse);
/// assert_eq!(turn.calls[0].provider_id.as_deref(), Some("call_1"));
/// # Ok::<(), aaa_loop::CodecError>(())
/// ```
pub fn parse(body: &Value) -> Result<AssistantTurn, CodecError> {
    if let Some(error) = provider_error(P, body) {
        return Err(error);
    }
    let root = Node::root(P, body)?;
    root.field("output")?;
    let mut items = Vec::new();
    for item in root.items("output")? {
        items.push(Item::read(&item)?);
    }
    let stop = stop_reason(&root)?;
    let usage = root.get("usage").map(|u| usage(&u)).unwrap_or_default();
    turn(items, stop, usage)
}

/// [`parse`] of a body's bytes.
pub fn parse_slice(body: &[u8]) -> Result<AssistantTurn, CodecError> {
    parse(&from_slice(P, body)?)
}

/// One output item, as far as the turn is concerned.
#[derive(Debug)]
enum Item {
    Message {
        text: String,
        refusal: String,
    },
    Call {
        item_id: Option<String>,
        call_id: String,
        name: String,
        arguments: String,
    },
    /// A `reasoning` item, kept as it came (its final form, in a stream).
    Reasoning(Value),
    Skipped,
}

impl Item {
    fn read(item: &Node<'_>) -> Result<Item, CodecError> {
        Ok(match item.str("type")? {
            Some("reasoning") => Item::Reasoning(item.value().clone()),
            Some("function_call") => Item::Call {
                item_id: item.str("id")?.map(str::to_owned),
                call_id: item.req_str("call_id")?.to_owned(),
                name: item.req_str("name")?.to_owned(),
                arguments: match item.get("arguments").map(|a| a.value()) {
                    Some(Value::String(text)) => text.clone(),
                    Some(other) => other.to_string(),
                    None => String::new(),
                },
            },
            Some("message") => {
                let (mut text, mut refusal) = (String::new(), String::new());
                for part in item.items("content")? {
                    match part.str("type")? {
                        Some("output_text") => text.push_str(part.str("text")?.unwrap_or("")),
                        Some("refusal") => refusal.push_str(part.str("refusal")?.unwrap_or("")),
                        _ => {}
                    }
                }
                Item::Message { text, refusal }
            }
            _ => Item::Skipped,
        })
    }
}

/// The turn of a response's items, in their order.
fn turn(items: Vec<Item>, stop: StopReason, usage: Usage) -> Result<AssistantTurn, CodecError> {
    let (mut text, mut refusal, mut calls) = (String::new(), String::new(), Vec::new());
    let mut reasoning = Vec::new();
    for item in items {
        match item {
            Item::Message {
                text: t,
                refusal: r,
            } => {
                text.push_str(&t);
                refusal.push_str(&r);
            }
            Item::Call {
                call_id,
                name,
                arguments,
                ..
            } => {
                let arguments = text_arguments(Some(&Value::String(arguments)));
                calls.push(ProviderCall::new(call_id, name, arguments));
            }
            Item::Reasoning(item) => reasoning.push(item),
            Item::Skipped => {}
        }
    }
    let stop = if refusal.is_empty() {
        stop
    } else {
        StopReason::Refused(refusal)
    };
    Ok(finish_turn(P, text, calls, stop, usage)?.with_reasoning(reasoning))
}

/// The stop reason of a response object (the body, or a final stream event's
/// `response`).
fn stop_reason(response: &Node<'_>) -> Result<StopReason, CodecError> {
    match response.str("status")? {
        None | Some("completed") => Ok(StopReason::EndTurn),
        Some("incomplete") => {
            let reason = response
                .object("incomplete_details")?
                .map(|d| d.str("reason"))
                .transpose()?
                .flatten();
            Ok(match reason {
                Some("max_output_tokens") => StopReason::MaxTokens,
                Some("content_filter") => StopReason::Refused(
                    "the provider's content filter stopped the answer \
                     (incomplete_details.reason: content_filter)"
                        .to_owned(),
                ),
                other => StopReason::Other(other.unwrap_or("incomplete").to_owned()),
            })
        }
        Some("failed") => Err(provider_error(P, response.value()).unwrap_or_else(failed)),
        Some(status) => Err(CodecError::Unfinished {
            provider: P,
            what: format!("its status is `{status}`"),
        }),
    }
}

/// A failure the provider gave no words for.
fn failed() -> CodecError {
    CodecError::Provider {
        provider: P,
        message: "the response failed".to_owned(),
        code: None,
    }
}

fn usage(node: &Node<'_>) -> Usage {
    Usage {
        input_tokens: node.count(&["input_tokens"]),
        output_tokens: node.count(&["output_tokens"]),
        cached_input_tokens: node.count(&["input_tokens_details", "cached_tokens"]),
        reasoning_tokens: node.count(&["output_tokens_details", "reasoning_tokens"]),
    }
}

/// Assembles a streamed response (`"stream": true`) from its events, one at a time,
/// into the [`AssistantTurn`] [`parse`] would give for the whole response.
///
/// ```
/// use aaa_loop::openai_responses::Assembler;
/// use serde_json::json;
///
/// let mut stream = Assembler::new();
/// stream.push(&json!({"type": "response.output_item.added", "output_index": 0, "item": {
///     "type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": ""}}))?;
/// stream.push(&json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1",
///     "output_index": 0, "delta": "{\"city\":\"Os"}))?;
/// stream.push(&json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1",
///     "output_index": 0, "delta": "lo\"}"}))?;
/// stream.push(&json!({"type": "response.completed", "response": {"status": "completed", "output": []}}))?;
/// let turn = stream.finish()?;
/// assert_eq!(turn.calls[0].arguments.arguments().unwrap()["city"], "Oslo");
/// # Ok::<(), aaa_loop::CodecError>(())
/// ```
#[derive(Debug, Default)]
pub struct Assembler {
    items: BTreeMap<usize, Item>,
    stop: Option<StopReason>,
    usage: Usage,
}

impl Assembler {
    /// An assembler for one streamed response.
    pub fn new() -> Self {
        Assembler::default()
    }

    /// Takes the next event (the JSON of one server-sent event's `data`; its `type`
    /// says which event it is).
    pub fn push(&mut self, event: &Value) -> Result<(), CodecError> {
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        let node = Node::named(P, event, if kind.is_empty() { "event" } else { kind })?;
        match kind {
            "error" => {
                // The error's fields sit on the event itself, or (in some versions)
                // under `error`.
                let body = match event.get("error") {
                    Some(Value::Object(_)) => event.clone(),
                    _ => {
                        let mut fields = event.clone();
                        if let Some(fields) = fields.as_object_mut() {
                            fields.remove("type");
                        }
                        json!({ "error": fields })
                    }
                };
                return Err(provider_error(P, &body).unwrap_or_else(failed));
            }
            "response.failed" => {
                let response = node.req_object("response")?;
                return Err(provider_error(P, response.value()).unwrap_or_else(failed));
            }
            "response.completed" | "response.incomplete" => {
                let response = node.req_object("response")?;
                self.stop = Some(stop_reason(&response)?);
                if let Some(usage_node) = response.object("usage")? {
                    self.usage = usage(&usage_node);
                }
            }
            "response.output_item.added" | "response.output_item.done" => {
                let index = node.index("output_index")?;
                self.items
                    .insert(index, Item::read(&node.req_object("item")?)?);
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                let piece = node.req_str("delta")?;
                let index = node.index("output_index")?;
                let item = self.items.entry(index).or_insert_with(|| Item::Message {
                    text: String::new(),
                    refusal: String::new(),
                });
                if let Item::Message { text, refusal } = item {
                    let to = if kind == "response.refusal.delta" {
                        refusal
                    } else {
                        text
                    };
                    to.push_str(piece);
                }
            }
            "response.function_call_arguments.delta" | "response.function_call_arguments.done" => {
                let done = kind.ends_with(".done");
                let piece = node.req_str(if done { "arguments" } else { "delta" })?;
                let Some(arguments) = self.call_arguments(&node)? else {
                    return Err(node.error(
                        "names an output item that no `response.output_item.added` opened as a \
                         function call",
                    ));
                };
                if done {
                    piece.clone_into(arguments);
                } else {
                    arguments.push_str(piece);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The arguments buffer of the call an arguments event names, by `output_index`,
    /// else by `item_id`.
    fn call_arguments(&mut self, event: &Node<'_>) -> Result<Option<&mut String>, CodecError> {
        let index = match event.get("output_index") {
            Some(_) => Some(event.index("output_index")?),
            None => None,
        };
        let item_id = event.str("item_id")?;
        Ok(self
            .items
            .iter_mut()
            .find(|(i, item)| match item {
                Item::Call { item_id: id, .. } => {
                    Some(**i) == index || (index.is_none() && id.as_deref() == item_id)
                }
                _ => false,
            })
            .and_then(|(_, item)| match item {
                Item::Call { arguments, .. } => Some(arguments),
                _ => None,
            }))
    }

    /// [`push`](Self::push) of an event's bytes.
    pub fn push_slice(&mut self, event: &[u8]) -> Result<(), CodecError> {
        self.push(&from_slice(P, event)?)
    }

    /// The turn, once the stream has ended. A stream that stopped before
    /// `response.completed` (or `response.incomplete`) is [`CodecError::Unfinished`].
    pub fn finish(self) -> Result<AssistantTurn, CodecError> {
        let Some(stop) = self.stop else {
            return Err(CodecError::Unfinished {
                provider: P,
                what: "the stream ended before `response.completed`".to_owned(),
            });
        };
        turn(self.items.into_values().collect(), stop, self.usage)
    }
}

/// The outcomes of a turn's calls as the next input items: one
/// `{"type": "function_call_output", "call_id", "output"}` per call, in the calls'
/// order (the outcomes may come in any order). Every call needs exactly one outcome.
///
/// Send them as `input` with `previous_response_id`, or after the response's output
/// items in a conversation you keep yourself.
pub fn render_outcomes(
    calls: &[ProviderCall],
    outcomes: &[Outcome],
) -> Result<Vec<Value>, CodecError> {
    Ok(pair(calls, outcomes)?
        .into_iter()
        .map(|(call, outcome)| {
            json!({"type": "function_call_output", "call_id": call.answer_id(), "output": outcome.for_model()})
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixtures::{completed, failed};

    #[test]
    fn statuses_map_to_stops_and_errors() {
        let with = |extra: Value| {
            let mut body = json!({"output": [{"type": "message", "content": [{"type": "output_text", "text": "hi"}]}]});
            body.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            parse(&body)
        };
        assert_eq!(with(json!({})).unwrap().stop, StopReason::EndTurn);
        let cut =
            json!({"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}});
        assert_eq!(with(cut).unwrap().stop, StopReason::MaxTokens);
        let filtered =
            json!({"status": "incomplete", "incomplete_details": {"reason": "content_filter"}});
        assert!(matches!(
            with(filtered).unwrap().stop,
            StopReason::Refused(_)
        ));
        assert_eq!(
            with(json!({"status": "in_progress"}))
                .unwrap_err()
                .to_string(),
            "the OpenAI Responses response is not finished: its status is `in_progress`"
        );
        let failed =
            json!({"status": "failed", "error": {"code": "server_error", "message": "boom"}});
        assert_eq!(
            with(failed).unwrap_err().to_string(),
            "OpenAI Responses reported an error: server_error: boom"
        );
    }

    #[test]
    fn stream_errors_and_orphan_deltas_are_errors() {
        let mut stream = Assembler::new();
        let orphan = json!({"type": "response.function_call_arguments.delta", "output_index": 3, "delta": "{"});
        assert_eq!(
            stream.push(&orphan).unwrap_err().to_string(),
            "unexpected OpenAI Responses response: `response.function_call_arguments.delta` names \
             an output item that no `response.output_item.added` opened as a function call"
        );
        let error = json!({"type": "error", "code": "rate_limit_exceeded", "message": "slow down"});
        assert_eq!(
            stream.push(&error).unwrap_err().to_string(),
            "OpenAI Responses reported an error: rate_limit_exceeded: slow down"
        );
        let failed = json!({"type": "response.failed", "response": {"status": "failed", "error": {"code": "server_error", "message": "boom"}}});
        assert!(matches!(
            stream.push(&failed),
            Err(CodecError::Provider { .. })
        ));
    }

    #[test]
    fn renders_function_call_outputs_in_call_order() {
        let calls = [
            ProviderCall::new("call_a", "f", text_arguments(None)),
            ProviderCall::new("call b", "g", text_arguments(None)),
        ];
        let outcomes = [
            failed(
                calls[1].call_id.as_str(),
                "g",
                "bad_args",
                "city: is required but missing",
            ),
            completed("call_a", "f", json!("sunny")),
        ];
        assert_eq!(
            render_outcomes(&calls, &outcomes).unwrap(),
            [
                json!({"type": "function_call_output", "call_id": "call_a", "output": "sunny"}),
                json!({"type": "function_call_output", "call_id": "call b",
                       "output": "error (bad_args): city: is required but missing"}),
            ]
        );
    }
}
