//! [`CodecError`]: a response a codec cannot turn into a turn, or outcomes it cannot
//! render.

use aaa_tools::CallId;

use crate::provider::Provider;

/// Why a response (or a stream) could not become an
/// [`AssistantTurn`](crate::AssistantTurn), or why outcomes could not be rendered.
///
/// Problems with one call's arguments are not errors: they travel with the call as
/// [`ArgumentsOrProblem::Problem`](crate::ArgumentsOrProblem::Problem). Refusals are
/// not errors either: they are turns that stop with
/// [`StopReason::Refused`](crate::StopReason::Refused).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The body (or a stream event) is not JSON.
    #[error("{provider} response is not JSON: {message}")]
    Json {
        /// The API.
        provider: Provider,
        /// serde_json's words.
        message: String,
    },
    /// The body is JSON but not the provider's shape.
    #[error("unexpected {provider} response: `{path}` {problem}")]
    Shape {
        /// The API.
        provider: Provider,
        /// Where, as a path into the body (`choices[0].message`) or the stream event
        /// (`content_block_delta.index`).
        path: String,
        /// What is wrong there (`is missing`, `is a number, expected a string`).
        problem: String,
    },
    /// The provider answered with an error (an `error` body or stream event, a failed
    /// response).
    #[error("{provider} reported an error: {message}")]
    Provider {
        /// The API.
        provider: Provider,
        /// The provider's message, with its error type or code when it gave one.
        message: String,
        /// The provider's error type or code alone, when it gave one
        /// (`overloaded_error`, `server_error`, `UNAVAILABLE`): what
        /// [`is_transient`](CodecError::is_transient) reads.
        code: Option<String>,
    },
    /// The response holds no text and no tool calls, and says it ended normally.
    #[error("the {provider} response is empty: no text and no tool calls")]
    Empty {
        /// The API.
        provider: Provider,
    },
    /// The response or stream is not finished: a stream that ended before its final
    /// event (a dropped connection), or a response still in progress.
    #[error("the {provider} response is not finished: {what}")]
    Unfinished {
        /// The API.
        provider: Provider,
        /// What was missing.
        what: String,
    },
    /// Two calls of one turn carry the same provider id. The turn cannot be answered one
    /// result per call, and the provider would refuse the conversation that echoes it;
    /// ask the model again.
    #[error(
        "the {provider} response has two tool calls with id {provider_id:?} \
         (calls {first} and {second}, counting from 0)"
    )]
    DuplicateCallId {
        /// The API.
        provider: Provider,
        /// The repeated id.
        provider_id: String,
        /// The position of its first call.
        first: usize,
        /// The position of the repeat.
        second: usize,
    },
    /// Rendering: a call of the turn has no outcome. Every call needs an answer, or
    /// the provider rejects the next request.
    #[error("call {0} has no outcome to render")]
    MissingOutcome(CallId),
    /// Rendering: an outcome of a call that is not in the turn, or a second outcome of
    /// one call.
    #[error("the outcome of call {0} answers no call of the turn, or answers it twice")]
    UnexpectedOutcome(CallId),
}

/// The error types and codes the providers document as passing: asking again may
/// succeed. Anthropic's `overloaded_error`, `api_error` and `rate_limit_error`;
/// OpenAI's `server_error` and `rate_limit_exceeded`; Google's `UNAVAILABLE`,
/// `INTERNAL`, `RESOURCE_EXHAUSTED` and `DEADLINE_EXCEEDED`.
const TRANSIENT: [&str; 9] = [
    "overloaded_error",
    "api_error",
    "rate_limit_error",
    "server_error",
    "rate_limit_exceeded",
    "UNAVAILABLE",
    "INTERNAL",
    "RESOURCE_EXHAUSTED",
    "DEADLINE_EXCEEDED",
];

impl CodecError {
    /// Whether asking the model again may succeed: a provider error whose type or code
    /// the provider documents as passing (an overloaded or failing server, a rate
    /// limit), such as an `error` event in the middle of a stream that had begun with
    /// `200 OK`. The HTTP clients retry these under their
    /// [`RetryPolicy`](crate::http::RetryPolicy), as they retry a 429 or a 5xx status.
    ///
    /// ```
    /// use aaa_loop::anthropic::Assembler;
    /// use serde_json::json;
    ///
    /// let overloaded = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    /// assert!(Assembler::new().push(&overloaded).unwrap_err().is_transient());
    /// let invalid = json!({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}});
    /// assert!(!Assembler::new().push(&invalid).unwrap_err().is_transient());
    /// ```
    pub fn is_transient(&self) -> bool {
        matches!(self, CodecError::Provider { code: Some(code), .. } if TRANSIENT.contains(&code.as_str()))
    }

    /// The API whose response failed, `None` for the rendering errors.
    pub fn provider(&self) -> Option<Provider> {
        match self {
            CodecError::Json { provider, .. }
            | CodecError::Shape { provider, .. }
            | CodecError::Provider { provider, .. }
            | CodecError::Empty { provider }
            | CodecError::Unfinished { provider, .. }
            | CodecError::DuplicateCallId { provider, .. } => Some(*provider),
            CodecError::MissingOutcome(_) | CodecError::UnexpectedOutcome(_) => None,
        }
    }
}
