//! The [`Model`] trait: one model turn, whatever the provider.
//!
//! A [`ToolLoop`](crate::ToolLoop) asks its model for one [`AssistantTurn`] at a time,
//! handing it the whole conversation so far ([`ModelRequest`]). A model is anything
//! that answers that: an HTTP client for a provider (which builds the provider's
//! request body from the [`ModelRequest`] and reads the response with the provider's
//! codec), a [`ScriptedModel`](crate::ScriptedModel) in tests, or a wrapper that adds
//! retries or logging around another model.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use aaa_tools::event::{ToolCompleted, ToolFailed};
use aaa_tools::{Outcome, Tool};
use serde::{Deserialize, Serialize};

use crate::error::CodecError;
use crate::turn::{AssistantTurn, ProviderCall};

/// The future a [`Model`] returns: boxed, `Send`, borrowing the model and the request.
pub type ModelFuture<'a> =
    Pin<Box<dyn Future<Output = Result<AssistantTurn, ModelError>> + Send + 'a>>;

/// A language model, one turn at a time: given the conversation and the tools, what
/// does the assistant say next?
///
/// A [`ToolLoop`](crate::ToolLoop) asks its model for one [`AssistantTurn`] at a
/// time, handing it the whole conversation so far ([`ModelRequest`]). A model is
/// anything that answers that: a client for a provider (which builds the provider's
/// request from the [`ModelRequest`] and reads the response with the provider's
/// codec), a [`ScriptedModel`](crate::ScriptedModel), or a wrapper that adds
/// retries or logging around another model. `&M`, `Box<M>` and `Arc<M>` are models
/// when `M` is.
///
/// # Implementing it
///
/// The trait returns a boxed future ([`ModelFuture`]) rather than using `async fn`
/// in the trait, so that a loop can hold any model as `Arc<dyn Model>` (an `async fn`
/// in a trait is not object safe on Rust 1.88) and so that the future is `Send`
/// (a loop runs as a task on a multi-threaded runtime). Write the body as an `async`
/// block and box it:
///
/// ```
/// use aaa_loop::{AssistantTurn, Message, Model, ModelError, ModelFuture, ModelRequest, openai_chat};
/// use serde_json::{Value, json};
///
/// /// A provider that speaks OpenAI Chat Completions (the transport is left out here).
/// struct MyProvider;
///
/// impl MyProvider {
///     async fn post(&self, _body: Value) -> Result<Value, String> {
///         Ok(json!({"choices": [{"finish_reason": "stop",
///             "message": {"role": "assistant", "content": "Hello!"}}]}))
///     }
/// }
///
/// impl Model for MyProvider {
///     fn turn<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a> {
///         Box::pin(async move {
///             let body = json!({"model": "my-model", "messages": request.messages.len()});
///             let response = self.post(body).await.map_err(ModelError::Transport)?;
///             Ok(openai_chat::parse(&response)?) // a CodecError is ModelError::Decode
///         })
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let request = ModelRequest::new(vec![Message::user("Hi")], vec![]);
/// let turn = MyProvider.turn(&request).await.unwrap();
/// assert_eq!(turn.text.as_deref(), Some("Hello!"));
/// # }
/// ```
pub trait Model: Send + Sync {
    /// The assistant's next turn for `request`.
    ///
    /// Called once per turn; the loop records the turn before it runs its calls, so a
    /// turn returned here is never asked for again in the same run, even across a
    /// restart. An error ends the loop with [`LoopError::Model`](crate::LoopError::Model)
    /// (nothing of the failed turn is recorded; running the loop again on the run asks
    /// again). Retries belong in the model (or a wrapper around it).
    fn turn<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a>;
}

impl<M: Model + ?Sized> Model for &M {
    fn turn<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a> {
        (**self).turn(request)
    }
}

impl<M: Model + ?Sized> Model for Box<M> {
    fn turn<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a> {
        (**self).turn(request)
    }
}

impl<M: Model + ?Sized> Model for Arc<M> {
    fn turn<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a> {
        (**self).turn(request)
    }
}

/// What a [`Model`] is asked: the conversation so far, the tools it may call, and
/// limits.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ModelRequest {
    /// The conversation, oldest first: the loop's input (system and user messages),
    /// then each assistant turn, each followed by the results of its calls.
    pub messages: Vec<Message>,
    /// The tools the model may call (export them for the provider with
    /// [`aaa_tools::export`]).
    pub tools: Vec<Tool>,
    /// The most tokens the model may write in this turn, when limited.
    pub max_output_tokens: Option<u32>,
    /// The turn asked for, from 0 (Gemini's codec names calls without an id by it).
    pub turn: u32,
}

impl ModelRequest {
    /// A request for turn 0 of `messages`, with `tools` and no output limit.
    pub fn new(messages: Vec<Message>, tools: Vec<Tool>) -> Self {
        ModelRequest {
            messages,
            tools,
            max_output_tokens: None,
            turn: 0,
        }
    }

    /// Limits the tokens of the turn.
    pub fn with_max_output_tokens(mut self, max: u32) -> Self {
        self.max_output_tokens = Some(max);
        self
    }

    /// The results of the last turn's calls, when the conversation ends with them
    /// (what a model reads to decide its next turn).
    pub fn last_results(&self) -> Option<&[ToolResult]> {
        match self.messages.last() {
            Some(Message::ToolResults(results)) => Some(results),
            _ => None,
        }
    }
}

/// One message of a conversation, provider-neutral.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Message {
    /// Instructions for the model (a system or developer message).
    System(String),
    /// What the user said.
    User(String),
    /// An assistant turn: its text and its calls. Shared: the conversation, the
    /// run's record of the turn and the loop's events hold one turn between them
    /// (see [`Message::assistant`]).
    Assistant(Arc<AssistantTurn>),
    /// The outcomes of the previous assistant turn's calls, one per call, in the
    /// calls' order.
    ToolResults(Vec<ToolResult>),
}

impl Message {
    /// A [`Message::System`].
    pub fn system(text: impl Into<String>) -> Self {
        Message::System(text.into())
    }

    /// A [`Message::User`].
    pub fn user(text: impl Into<String>) -> Self {
        Message::User(text.into())
    }

    /// A [`Message::Assistant`] of `turn`.
    ///
    /// The turn is held behind an [`Arc`] so that the conversation, the fact that
    /// records it on the run and the loop's events share one turn: recording it
    /// counts a reference. A copy of the turn for its fact was 3 000 instructions of
    /// a turn's 67 500 (4.4 %) in the `loop_overhead` bench.
    ///
    /// ```
    /// use aaa_loop::{AssistantTurn, Message};
    ///
    /// let Message::Assistant(turn) = Message::assistant(AssistantTurn::answer("Hi!")) else { panic!() };
    /// assert_eq!(turn.text.as_deref(), Some("Hi!"));
    /// ```
    pub fn assistant(turn: impl Into<Arc<AssistantTurn>>) -> Self {
        Message::Assistant(turn.into())
    }
}

/// A call and its outcome: what the model reads about one call of its turn.
///
/// The outcome answers the call as the codecs pair them: its
/// [`call_id`](Outcome::call_id) is the call's [`call_id`](ProviderCall::call_id), so
/// a provider's `render_outcomes` takes the calls and outcomes of a turn's results as
/// they are. (The engine knows the call under [`loop_call_id`](crate::loop_call_id) of
/// the turn and that id.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolResult {
    /// The call, as the model made it.
    pub call: ProviderCall,
    /// What became of it.
    #[serde(with = "outcome_serde")]
    pub outcome: Outcome,
}

impl ToolResult {
    /// `call`'s result `outcome`, its call id set to the call's.
    pub fn new(call: ProviderCall, mut outcome: Outcome) -> Self {
        set_call_id(&mut outcome, &call);
        ToolResult { call, outcome }
    }
}

/// Makes `outcome` answer `call` (its call id the call's).
fn set_call_id(outcome: &mut Outcome, call: &ProviderCall) {
    match outcome {
        Outcome::Completed(completed) => completed.call_id = call.call_id.clone(),
        Outcome::Failed(failed) => failed.call_id = call.call_id.clone(),
        // A kind of outcome this version does not know keeps its id.
        _ => {}
    }
}

/// [`Outcome`] has no serde form of its own; this one is `{"completed": {...}}` or
/// `{"failed": {...}}`, with the fact's data inside.
mod outcome_serde {
    use super::*;

    #[derive(Serialize)]
    #[serde(rename_all = "snake_case")]
    enum Borrowed<'a> {
        Completed(&'a ToolCompleted),
        Failed(&'a ToolFailed),
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum Owned {
        Completed(ToolCompleted),
        Failed(ToolFailed),
    }

    pub(super) fn serialize<S: serde::Serializer>(
        outcome: &Outcome,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match outcome {
            Outcome::Completed(completed) => Borrowed::Completed(completed),
            Outcome::Failed(failed) => Borrowed::Failed(failed),
            _ => return Err(serde::ser::Error::custom("an outcome of an unknown kind")),
        }
        .serialize(serializer)
    }

    pub(super) fn deserialize<'de, D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Outcome, D::Error> {
        Ok(match Owned::deserialize(deserializer)? {
            Owned::Completed(completed) => Outcome::Completed(completed),
            Owned::Failed(failed) => Outcome::Failed(failed),
        })
    }
}

/// Why a [`Model`] gave no turn.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The provider answered with an error status.
    #[error("the model API answered {status}: {message}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// No answer in time.
    #[error("the model did not answer within {0:?}")]
    Timeout(Duration),
    /// The provider could not be reached, or the connection failed.
    #[error("could not reach the model: {0}")]
    Transport(String),
    /// The response could not be read.
    #[error(transparent)]
    Decode(#[from] CodecError),
    /// Anything else (a scripted model out of turns, a model's own rule).
    #[error("{0}")]
    Other(String),
}

impl ModelError {
    /// Whether asking again may succeed: a timeout, a transport failure, a 408, 429
    /// or 5xx status.
    ///
    /// ```
    /// use aaa_loop::ModelError;
    ///
    /// assert!(ModelError::Status { status: 429, message: "slow down".into() }.is_transient());
    /// assert!(!ModelError::Status { status: 400, message: "bad request".into() }.is_transient());
    /// ```
    pub fn is_transient(&self) -> bool {
        match self {
            ModelError::Status { status, .. } => matches!(status, 408 | 429 | 500..=599),
            ModelError::Timeout(_) | ModelError::Transport(_) => true,
            ModelError::Decode(_) | ModelError::Other(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turn::ArgumentsOrProblem;
    use serde_json::json;

    #[test]
    fn results_answer_their_call_and_round_trip() {
        let call = ProviderCall::new("call_1", "add", ArgumentsOrProblem::from_text("{}"));
        let outcome: ToolCompleted = serde_json::from_value(
            json!({"call_id": "t0-call_1", "name": "add", "result": 5, "attempt": 1}),
        )
        .unwrap();
        let result = ToolResult::new(call, Outcome::Completed(outcome));
        assert_eq!(result.outcome.call_id().as_str(), "call_1");
        let messages = vec![
            Message::system("Be brief."),
            Message::ToolResults(vec![result]),
        ];
        let text = serde_json::to_value(&messages).unwrap();
        assert_eq!(
            text[1]["tool_results"][0]["outcome"]["completed"]["result"],
            5
        );
        let back: Vec<Message> = serde_json::from_value(text).unwrap();
        assert_eq!(back, messages);
    }
}
