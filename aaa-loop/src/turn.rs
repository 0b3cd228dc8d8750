//! [`AssistantTurn`] and its parts: what a model said in one turn, provider-neutral.

use std::collections::HashMap;
use std::sync::Arc;

use aaa_tools::CallId;
use serde::{Deserialize, Serialize};

pub(crate) use crate::arguments::{ArgumentsOrProblem, text_arguments};
use crate::error::CodecError;
use crate::provider::Provider;

/// One assistant turn, whole: what the model wrote, the tools it called (in its order),
/// why it stopped and what it cost.
///
/// Built by each provider's `parse` (a whole response) or `Assembler` (a stream);
/// serializable, so a loop can keep it as a fact and resume from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AssistantTurn {
    /// The model's text, its parts joined; `None` when it wrote none. Reasoning
    /// ("thinking") is not included.
    pub text: Option<String>,
    /// The tool calls, in the order the provider listed them. Whatever the stop
    /// reason, each one needs an answer in the next request.
    pub calls: Vec<ProviderCall>,
    /// Why the model stopped.
    pub stop: StopReason,
    /// Token counts.
    pub usage: Usage,
    /// The model's reasoning as the provider wants it back with the turn, in the
    /// provider's own form and order: Anthropic's `thinking` blocks (with their
    /// `signature`) and `redacted_thinking` blocks, which a request must repeat
    /// unchanged before the `tool_use` blocks of a turn it answers when extended
    /// thinking is on. Empty for the other providers (Gemini's signatures travel with
    /// each call: [`ProviderCall::signature`]). Recorded with the turn, so a resumed
    /// loop sends it too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasoning: Vec<serde_json::Value>,
}

impl AssistantTurn {
    /// A turn that answers with `text` and calls no tool: a final answer.
    /// For scripted models and tests; codecs build turns from responses.
    ///
    /// ```
    /// use aaa_loop::{AssistantTurn, StopReason};
    ///
    /// let turn = AssistantTurn::answer("It is 21 °C in Zürich.");
    /// assert_eq!((turn.text.as_deref(), turn.stop), (Some("It is 21 °C in Zürich."), StopReason::EndTurn));
    /// ```
    pub fn answer(text: impl Into<String>) -> Self {
        AssistantTurn {
            text: Some(text.into()),
            calls: Vec::new(),
            stop: StopReason::EndTurn,
            usage: Usage::default(),
            reasoning: Vec::new(),
        }
    }

    /// A turn that calls `calls` (in that order), stopping with
    /// [`StopReason::ToolUse`]; no text.
    ///
    /// ```
    /// use aaa_loop::{ArgumentsOrProblem, AssistantTurn, ProviderCall};
    ///
    /// let turn = AssistantTurn::tool_calls([ProviderCall::new("call_1", "add", ArgumentsOrProblem::from_text(r#"{"a":2,"b":3}"#))]);
    /// assert!(turn.has_calls());
    /// ```
    pub fn tool_calls(calls: impl IntoIterator<Item = ProviderCall>) -> Self {
        AssistantTurn {
            text: None,
            calls: calls.into_iter().collect(),
            stop: StopReason::ToolUse,
            usage: Usage::default(),
            reasoning: Vec::new(),
        }
    }

    /// Sets the text.
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }

    /// Sets the stop reason.
    pub fn with_stop(mut self, stop: StopReason) -> Self {
        self.stop = stop;
        self
    }

    /// Sets the token counts.
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = usage;
        self
    }

    /// Sets the reasoning the provider wants back with the turn (see
    /// [`reasoning`](Self::reasoning)).
    pub fn with_reasoning(mut self, reasoning: Vec<serde_json::Value>) -> Self {
        self.reasoning = reasoning;
        self
    }

    /// Whether the turn asks for tools to run (it has calls).
    pub fn has_calls(&self) -> bool {
        !self.calls.is_empty()
    }
}

/// The turn a codec read, checked the same way for every provider: no provider id
/// twice, [`StopReason::ToolUse`] exactly when there are calls (for a turn that ended
/// normally), and something in it.
pub(crate) fn finish_turn(
    provider: Provider,
    text: String,
    calls: Vec<ProviderCall>,
    stop: StopReason,
    usage: Usage,
) -> Result<AssistantTurn, CodecError> {
    let mut seen = HashMap::with_capacity(calls.len());
    for (position, call) in calls.iter().enumerate() {
        if let Some(&first) = seen.get(&call.call_id) {
            return Err(CodecError::DuplicateCallId {
                provider,
                provider_id: call.answer_id().to_owned(),
                first,
                second: position,
            });
        }
        seen.insert(&call.call_id, position);
    }
    let text = (!text.is_empty()).then_some(text);
    let stop = match stop {
        StopReason::EndTurn | StopReason::ToolUse if !calls.is_empty() => StopReason::ToolUse,
        StopReason::EndTurn | StopReason::ToolUse if text.is_none() => {
            return Err(CodecError::Empty { provider });
        }
        StopReason::ToolUse => StopReason::EndTurn,
        other => other,
    };
    Ok(AssistantTurn {
        text,
        calls,
        stop,
        usage,
        reasoning: Vec::new(),
    })
}

/// One tool call as the provider sent it, with the [`CallId`] the engine knows it by.
///
/// Its parts are shared (`Arc<str>`, [`CallId`], an [`Arc`] around the arguments):
/// a copy of a call counts references instead of copying text and maps. A loop copies
/// each call into the result the model reads and hands the tool's name to the
/// engine's request, and a scripted model copies its turns: with owned parts these
/// copies were 6 300 instructions of a turn's 64 500 in the `loop_overhead` bench
/// (about half of them the loop's, half the scripted model's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ProviderCall {
    /// The provider's id for the call, exactly as sent; the outcome is rendered back
    /// with it. `None` only for a Gemini call that came without one.
    pub provider_id: Option<Arc<str>>,
    /// The engine's id: [`call_id_for`](crate::call_id_for) of the provider id, or a
    /// positional id for a Gemini call without one
    /// ([`gemini::positional_call_id`](crate::gemini::positional_call_id)).
    pub call_id: CallId,
    /// The tool's name as the model sent it (unknown names are the engine's to answer).
    pub name: Arc<str>,
    /// The arguments, or what is wrong with them.
    pub arguments: ArgumentsOrProblem,
    /// An opaque signature the provider attached to the call and wants back with it
    /// (Gemini's `thoughtSignature`, which carries the model's reasoning from one turn
    /// to the next); recorded with the turn, so a resumed loop sends it too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<Arc<str>>,
}

impl ProviderCall {
    /// A call with the provider's id `provider_id` (its [`CallId`] derived with
    /// [`call_id_for`](crate::call_id_for)).
    ///
    /// ```
    /// use aaa_loop::{ArgumentsOrProblem, ProviderCall};
    ///
    /// let call = ProviderCall::new("call_1", "get_weather", ArgumentsOrProblem::from_text(r#"{"city":"Oslo"}"#));
    /// assert_eq!(call.call_id.as_str(), "call_1");
    /// ```
    pub fn new(
        provider_id: impl Into<Arc<str>>,
        name: impl Into<Arc<str>>,
        arguments: ArgumentsOrProblem,
    ) -> Self {
        let provider_id = provider_id.into();
        ProviderCall {
            call_id: crate::call_id_for(&provider_id),
            provider_id: Some(provider_id),
            name: name.into(),
            arguments,
            signature: None,
        }
    }

    /// The call with the provider's `signature` (see [`signature`](Self::signature)).
    pub fn with_signature(mut self, signature: impl Into<Arc<str>>) -> Self {
        self.signature = Some(signature.into());
        self
    }

    /// A call the provider gave no id, known by `call_id`.
    pub(crate) fn without_id(
        call_id: CallId,
        name: impl Into<Arc<str>>,
        arguments: ArgumentsOrProblem,
    ) -> Self {
        ProviderCall {
            provider_id: None,
            call_id,
            name: name.into(),
            arguments,
            signature: None,
        }
    }

    /// The id to answer the call with: the provider's, else the engine's.
    pub(crate) fn answer_id(&self) -> &str {
        self.provider_id.as_deref().unwrap_or(self.call_id.as_str())
    }
}

/// Why the model stopped. Each codec documents how its provider's reasons map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StopReason {
    /// The model finished its answer (natural end or a stop sequence).
    EndTurn,
    /// The model asked for tools; the turn has calls.
    ToolUse,
    /// The model ran out of tokens (the output limit, or the context window); text and
    /// arguments may be cut off.
    MaxTokens,
    /// The model or the provider's safety system declined. The text says why, in the
    /// model's words when it gave some (OpenAI's `refusal`), else the provider's reason.
    Refused(String),
    /// Any other reason, as the provider named it (e.g. Anthropic `pause_turn`, Gemini
    /// `MALFORMED_FUNCTION_CALL`).
    Other(String),
}

/// Token counts of one turn; 0 where the provider did not report a count.
///
/// The counts mean the same for every provider: `input_tokens` is the whole prompt
/// (cached tokens included, which Anthropic reports apart), `output_tokens` the whole
/// output (reasoning included, which Gemini reports apart).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Usage {
    /// Prompt tokens, cached ones included.
    pub input_tokens: u64,
    /// Output tokens, reasoning included.
    pub output_tokens: u64,
    /// Prompt tokens read from the provider's cache.
    pub cached_input_tokens: u64,
    /// Output tokens spent on reasoning.
    pub reasoning_tokens: u64,
}

impl Usage {
    /// Counts of `input_tokens` and `output_tokens` (the others 0).
    ///
    /// ```
    /// assert_eq!(aaa_loop::Usage::new(100, 20).total_tokens(), 120);
    /// ```
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Usage {
            input_tokens,
            output_tokens,
            ..Usage::default()
        }
    }

    /// `input_tokens + output_tokens`.
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

/// Sums counts (saturating): what a loop reports for its turns together.
///
/// ```
/// use aaa_loop::Usage;
///
/// let mut total = Usage::new(100, 20);
/// total += Usage::new(150, 30);
/// assert_eq!(total.total_tokens(), 300);
/// ```
impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cached_input_tokens = self
            .cached_input_tokens
            .saturating_add(other.cached_input_tokens);
        self.reasoning_tokens = self.reasoning_tokens.saturating_add(other.reasoning_tokens);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_of_a_call_shares_its_parts() {
        let call = ProviderCall::new("call_1", "add", ArgumentsOrProblem::from_text(r#"{"a":1}"#));
        let copy = call.clone();
        let text = |call: &ProviderCall| -> [*const str; 3] {
            let id = call.provider_id.as_deref().unwrap();
            [id, &*call.name, call.call_id.as_str()]
        };
        assert_eq!(text(&copy), text(&call));
        let (ArgumentsOrProblem::Arguments(a), ArgumentsOrProblem::Arguments(b)) =
            (&call.arguments, &copy.arguments)
        else {
            panic!("{call:?}")
        };
        assert!(Arc::ptr_eq(&a.shared(), &b.shared()));
    }

    #[test]
    fn usage_total_and_turn_round_trip_through_serde() {
        let turn = AssistantTurn {
            text: Some("hi".into()),
            calls: vec![ProviderCall::new(
                "a.b",
                "t",
                ArgumentsOrProblem::Problem("bad".into()),
            )],
            stop: StopReason::Refused("no".into()),
            usage: Usage {
                input_tokens: 3,
                output_tokens: 4,
                ..Usage::default()
            },
            reasoning: vec![
                serde_json::json!({"type": "thinking", "thinking": "t", "signature": "s"}),
            ],
        };
        assert_eq!(turn.usage.total_tokens(), 7);
        let back: AssistantTurn =
            serde_json::from_value(serde_json::to_value(&turn).unwrap()).unwrap();
        assert_eq!(back, turn);
        assert_eq!(back.calls[0].answer_id(), "a.b");
    }
}
