//! Google Gemini (`models/{model}:generateContent` and `:streamGenerateContent`).
//!
//! - **In**: `candidates[0].content.parts[]`: `functionCall` parts (`name`, `args` an
//!   object, left out for a function without parameters, and an optional `id`) are
//!   the calls, in their order, each with the `thoughtSignature` of its part when it
//!   has one ([`ProviderCall::signature`]); `text` parts give the text (`thought`
//!   parts are skipped). Only the first candidate is read.
//! - **Stream**: successive `GenerateContentResponse` chunks, each with whole parts
//!   (a `functionCall` never spans chunks); the chunk with `finishReason` ends the
//!   turn, `usageMetadata` is cumulative. A JSON array of chunks (the body of
//!   `streamGenerateContent` without `alt=sse`) is taken whole.
//! - **Out**: one `{"role": "user", "parts": [{"functionResponse": {"name",
//!   "response", "id"}}...]}` content holding every call's response in the calls'
//!   order; `id` is the call's own, left out when it came without one. `response` is
//!   the result when it is an object, `{"result": <result>}` when it is not, and
//!   `{"error": <Outcome::for_model text>}` for a failure.
//!
//! **Ids.** Gemini may send calls without an `id` (and then matches responses by name
//! and order). Such a call gets the [`positional_call_id`] of the turn's index (which
//! the caller counts: 0 for the first model turn of a run, 1 for the next, ...) and of
//! its position among the turn's calls, so re-reading a turn gives the same ids.
//!
//! Stop reasons: `STOP` is [`EndTurn`](StopReason::EndTurn) or
//! [`ToolUse`](StopReason::ToolUse) (when there are calls; Gemini says `STOP` either
//! way), `MAX_TOKENS` is [`MaxTokens`](StopReason::MaxTokens); `SAFETY`,
//! `RECITATION`, `BLOCKLIST`, `PROHIBITED_CONTENT`, `SPII`, `IMAGE_SAFETY` and
//! `IMAGE_PROHIBITED_CONTENT`, and a prompt blocked by `promptFeedback.blockReason`
//! (which comes with no candidates), are [`Refused`](StopReason::Refused); anything
//! else (`MALFORMED_FUNCTION_CALL`, `OTHER`, ...) is [`Other`](StopReason::Other).

use aaa_tools::{CallId, Outcome};
use serde_json::{Value, json};

use crate::error::CodecError;
use crate::ids::POSITIONAL;
use crate::provider::Provider;
use crate::render::pair;
use crate::shape::{Node, from_slice, provider_error};
use crate::turn::{
    ArgumentsOrProblem, AssistantTurn, ProviderCall, StopReason, Usage, finish_turn,
};

const P: Provider = Provider::Gemini;

/// The [`CallId`] of a Gemini call that came without an `id`: `x--g<turn>-<position>`,
/// from the turn's index in the run and the call's position among the turn's calls
/// (both from 0). It cannot meet the id of any call that has one (see
/// [`call_id_for`](crate::call_id_for)).
///
/// ```
/// assert_eq!(aaa_loop::gemini::positional_call_id(3, 1).as_str(), "x--g3-1");
/// ```
pub fn positional_call_id(turn: u32, position: usize) -> CallId {
    CallId::new(format!("{POSITIONAL}{turn}-{position}")).expect("a positional id is valid")
}

/// Reads a whole (non-streamed) response body of turn `turn` (the turn's index in
/// the run, from 0: it names the calls that come without an id).
///
/// ```
/// use aaa_loop::{StopReason, gemini};
/// use serde_json::json;
///
/// let body = json!({"candidates": [{"finishReason": "STOP", "content": {"role": "model", "parts": [
///     {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}}]}}]});
/// let turn = gemini::parse(&body, 0)?;
/// assert_eq!(turn.stop, StopReason::ToolUse);
/// assert_eq!(turn.calls[0].call_id.as_str(), "x--g0-0");
/// assert_eq!(turn.calls[0].provider_id, None);
/// # Ok::<(), aaa_loop::CodecError>(())
/// ```
pub fn parse(body: &Value, turn: u32) -> Result<AssistantTurn, CodecError> {
    let mut assembler = Assembler::new(turn);
    if let Some(error) = provider_error(P, body) {
        return Err(error);
    }
    let root = Node::root(P, body)?;
    if root.get("candidates").is_none() && blocked(&root)?.is_none() {
        root.field("candidates")?;
    }
    assembler.chunk(&root)?;
    assembler.stop.get_or_insert(StopReason::EndTurn);
    assembler.finish()
}

/// [`parse`] of a body's bytes.
pub fn parse_slice(body: &[u8], turn: u32) -> Result<AssistantTurn, CodecError> {
    parse(&from_slice(P, body)?, turn)
}

/// Why the prompt was blocked, if it was.
fn blocked(root: &Node<'_>) -> Result<Option<String>, CodecError> {
    let Some(feedback) = root.object("promptFeedback")? else {
        return Ok(None);
    };
    let Some(reason) = feedback.str("blockReason")? else {
        return Ok(None);
    };
    let mut why = format!("the provider blocked the prompt (promptFeedback.blockReason: {reason})");
    if let Some(message) = feedback.str("blockReasonMessage")? {
        why.push_str(": ");
        why.push_str(message);
    }
    Ok(Some(why))
}

fn stop_reason(candidate: &Node<'_>) -> Result<Option<StopReason>, CodecError> {
    let Some(reason) = candidate.str("finishReason")? else {
        return Ok(None);
    };
    Ok(Some(match reason {
        "STOP" => StopReason::EndTurn,
        "MAX_TOKENS" => StopReason::MaxTokens,
        "SAFETY"
        | "RECITATION"
        | "BLOCKLIST"
        | "PROHIBITED_CONTENT"
        | "SPII"
        | "IMAGE_SAFETY"
        | "IMAGE_PROHIBITED_CONTENT" => {
            let mut why =
                format!("the provider's safety system stopped the answer (finishReason: {reason})");
            if let Some(message) = candidate.str("finishMessage")? {
                why.push_str(": ");
                why.push_str(message);
            }
            StopReason::Refused(why)
        }
        other => StopReason::Other(other.to_owned()),
    }))
}

fn usage(node: &Node<'_>) -> Usage {
    let thoughts = node.count(&["thoughtsTokenCount"]);
    Usage {
        input_tokens: node.count(&["promptTokenCount"]),
        // Gemini counts thinking apart from the answer; `Usage` counts all output.
        output_tokens: node
            .count(&["candidatesTokenCount"])
            .saturating_add(thoughts),
        cached_input_tokens: node.count(&["cachedContentTokenCount"]),
        reasoning_tokens: thoughts,
    }
}

/// Assembles a streamed response (`:streamGenerateContent`) from its chunks, one at
/// a time, into the [`AssistantTurn`] [`parse`] would give for the whole response.
///
/// ```
/// use aaa_loop::gemini::Assembler;
/// use serde_json::json;
///
/// let mut stream = Assembler::new(0);
/// stream.push(&json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Let me "}]}}]}))?;
/// stream.push(&json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "check."},
///     {"functionCall": {"id": "fc-1", "name": "get_weather", "args": {"city": "Oslo"}}}]},
///     "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 9}}))?;
/// let turn = stream.finish()?;
/// assert_eq!(turn.text.as_deref(), Some("Let me check."));
/// assert_eq!(turn.calls[0].provider_id.as_deref(), Some("fc-1"));
/// # Ok::<(), aaa_loop::CodecError>(())
/// ```
#[derive(Debug)]
pub struct Assembler {
    turn: u32,
    text: String,
    calls: Vec<ProviderCall>,
    stop: Option<StopReason>,
    blocked: Option<String>,
    usage: Usage,
}

impl Assembler {
    /// An assembler for the streamed response of turn `turn` (see [`parse`]).
    pub fn new(turn: u32) -> Self {
        Assembler {
            turn,
            text: String::new(),
            calls: Vec::new(),
            stop: None,
            blocked: None,
            usage: Usage::default(),
        }
    }

    /// Takes the next chunk (one `GenerateContentResponse`), or an array of them.
    pub fn push(&mut self, chunk: &Value) -> Result<(), CodecError> {
        if let Value::Array(chunks) = chunk {
            return chunks.iter().try_for_each(|chunk| self.push(chunk));
        }
        if let Some(error) = provider_error(P, chunk) {
            return Err(error);
        }
        self.chunk(&Node::named(P, chunk, "chunk")?)
    }

    /// [`push`](Self::push) of a chunk's bytes.
    pub fn push_slice(&mut self, chunk: &[u8]) -> Result<(), CodecError> {
        self.push(&from_slice(P, chunk)?)
    }

    fn chunk(&mut self, chunk: &Node<'_>) -> Result<(), CodecError> {
        if let Some(why) = blocked(chunk)? {
            self.blocked = Some(why);
        }
        if let Some(usage_node) = chunk.object("usageMetadata")? {
            self.usage = usage(&usage_node);
        }
        let Some(candidate) = chunk.items("candidates")?.into_iter().next() else {
            return Ok(());
        };
        if let Some(content) = candidate.object("content")? {
            for part in content.items("parts")? {
                self.part(&part)?;
            }
        }
        if let Some(stop) = stop_reason(&candidate)? {
            self.stop = Some(stop);
        }
        Ok(())
    }

    fn part(&mut self, part: &Node<'_>) -> Result<(), CodecError> {
        if part.get("thought").and_then(|t| t.value().as_bool()) == Some(true) {
            return Ok(());
        }
        if let Some(text) = part.str("text")? {
            self.text.push_str(text);
        }
        let Some(call) = part.object("functionCall")? else {
            return Ok(());
        };
        let name = call.req_str("name")?.to_owned();
        let arguments = match call.get("args") {
            None => ArgumentsOrProblem::empty(),
            Some(args) => ArgumentsOrProblem::from_value(args.value().clone()),
        };
        let mut call = match call.str("id")?.filter(|id| !id.is_empty()) {
            Some(id) => ProviderCall::new(id, name, arguments),
            None => ProviderCall::without_id(
                positional_call_id(self.turn, self.calls.len()),
                name,
                arguments,
            ),
        };
        if let Some(signature) = part.str("thoughtSignature")?.filter(|s| !s.is_empty()) {
            call = call.with_signature(signature);
        }
        self.calls.push(call);
        Ok(())
    }

    /// The turn, once the stream has ended. A stream that stopped before a chunk with
    /// a `finishReason` (and whose prompt was not blocked) is
    /// [`CodecError::Unfinished`]; one without any candidate is
    /// [`CodecError::Empty`].
    pub fn finish(self) -> Result<AssistantTurn, CodecError> {
        let stop = match (self.blocked, self.stop) {
            (Some(why), _) => StopReason::Refused(why),
            (None, Some(stop)) => stop,
            (None, None) => {
                return Err(CodecError::Unfinished {
                    provider: P,
                    what: "the stream ended before a chunk with a `finishReason`".to_owned(),
                });
            }
        };
        finish_turn(P, self.text, self.calls, stop, self.usage)
    }
}

/// A function response's `response`: an object as it is, anything else wrapped.
fn response(outcome: &Outcome) -> Value {
    match outcome.result() {
        Some(Value::Object(result)) => Value::Object(result.clone()),
        Some(result) => json!({ "result": result }),
        None => json!({ "error": outcome.for_model() }),
    }
}

/// The outcomes of a turn's calls as the next content: one `user` content whose
/// `functionResponse` parts answer every call, in the calls' order (the outcomes may
/// come in any order). Every call needs exactly one outcome; no calls give no content.
pub fn render_outcomes(
    calls: &[ProviderCall],
    outcomes: &[Outcome],
) -> Result<Vec<Value>, CodecError> {
    let parts: Vec<Value> = pair(calls, outcomes)?
        .into_iter()
        .map(|(call, outcome)| {
            let mut answer = json!({"name": call.name, "response": response(outcome)});
            if let Some(id) = &call.provider_id {
                answer["id"] = Value::String(id.to_string());
            }
            json!({ "functionResponse": answer })
        })
        .collect();
    if parts.is_empty() {
        return Ok(Vec::new());
    }
    Ok(vec![json!({"role": "user", "parts": parts})])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call_id_for;
    use crate::render::fixtures::{completed, failed};

    #[test]
    fn calls_without_ids_are_named_by_turn_and_position() {
        let body = json!({"candidates": [{"finishReason": "STOP", "content": {"parts": [
            {"functionCall": {"name": "a", "args": {}}},
            {"functionCall": {"name": "b", "id": "x--g7-1"}},
            {"functionCall": {"name": "c"}},
        ]}}]});
        let turn = parse(&body, 7).unwrap();
        let ids: Vec<_> = turn.calls.iter().map(|c| c.call_id.as_str()).collect();
        assert_eq!(ids, ["x--g7-0", call_id_for("x--g7-1").as_str(), "x--g7-2"]);
        assert_eq!(turn.calls[2].arguments, ArgumentsOrProblem::empty());
        assert_eq!(turn, parse(&body, 7).unwrap());
        assert_ne!(
            turn.calls[0].call_id,
            parse(&body, 8).unwrap().calls[0].call_id
        );
    }

    #[test]
    fn a_calls_thought_signature_is_kept_and_survives_the_record() {
        let body = json!({"candidates": [{"finishReason": "STOP", "content": {"parts": [
            {"functionCall": {"name": "a", "args": {}}, "thoughtSignature": "c2lnLTE="},
            {"functionCall": {"name": "b", "args": {}}},
        ]}}]});
        let turn = parse(&body, 0).unwrap();
        assert_eq!(turn.calls[0].signature.as_deref(), Some("c2lnLTE="));
        assert_eq!(turn.calls[1].signature, None);
        // A turn is recorded on its run as JSON: the signature comes back with it, and
        // a record from before signatures were kept still reads.
        let recorded: AssistantTurn =
            serde_json::from_value(serde_json::to_value(&turn).unwrap()).unwrap();
        assert_eq!(recorded, turn);
        let mut old = serde_json::to_value(&turn).unwrap();
        old["calls"][0].as_object_mut().unwrap().remove("signature");
        let old: AssistantTurn = serde_json::from_value(old).unwrap();
        assert_eq!(old.calls[0].signature, None);

        let mut streamed = Assembler::new(0);
        streamed.push(&body).unwrap();
        assert_eq!(streamed.finish().unwrap(), turn);
    }

    #[test]
    fn thoughts_are_not_text_and_usage_counts_them_as_output() {
        let body = json!({"candidates": [{"finishReason": "STOP", "content": {"parts": [
            {"text": "pondering", "thought": true}, {"text": "42"}]}}],
            "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2, "thoughtsTokenCount": 30, "cachedContentTokenCount": 4}});
        let turn = parse(&body, 0).unwrap();
        assert_eq!(turn.text.as_deref(), Some("42"));
        assert_eq!(
            (
                turn.usage.input_tokens,
                turn.usage.output_tokens,
                turn.usage.reasoning_tokens,
                turn.usage.cached_input_tokens
            ),
            (5, 32, 30, 4)
        );
    }

    #[test]
    fn an_array_of_chunks_is_one_stream() {
        let mut stream = Assembler::new(0);
        stream
            .push(&json!([
                {"candidates": [{"content": {"parts": [{"text": "a"}]}}]},
                {"candidates": [{"content": {"parts": [{"text": "b"}]}, "finishReason": "MAX_TOKENS"}]},
            ]))
            .unwrap();
        let turn = stream.finish().unwrap();
        assert_eq!(
            (turn.text.as_deref(), turn.stop),
            (Some("ab"), StopReason::MaxTokens)
        );
    }

    #[test]
    fn renders_function_responses_with_objects_and_errors() {
        let body = json!({"candidates": [{"finishReason": "STOP", "content": {"parts": [
            {"functionCall": {"name": "f", "args": {}}},
            {"functionCall": {"name": "g", "args": {}, "id": "g-1"}},
            {"functionCall": {"name": "h", "args": {}}},
        ]}}]});
        let turn = parse(&body, 2).unwrap();
        let outcomes = [
            completed("x--g2-0", "f", json!({"temp": 20})),
            completed("g-1", "g", json!(20)),
            failed("x--g2-2", "h", "unknown_tool", "no tool named h"),
        ];
        assert_eq!(
            render_outcomes(&turn.calls, &outcomes).unwrap(),
            [json!({"role": "user", "parts": [
                {"functionResponse": {"name": "f", "response": {"temp": 20}}},
                {"functionResponse": {"name": "g", "response": {"result": 20}, "id": "g-1"}},
                {"functionResponse": {"name": "h", "response": {"error": "error (unknown_tool): no tool named h"}}},
            ]})]
        );
    }
}
