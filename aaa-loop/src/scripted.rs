//! [`ScriptedModel`]: a [`Model`] that answers from a script, for tests and offline
//! demos.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::model::{Model, ModelError, ModelFuture, ModelRequest};
use crate::turn::AssistantTurn;

type TurnFn = dyn Fn(&ModelRequest) -> AssistantTurn + Send + Sync;

/// A [`Model`] that answers with scripted turns, or with a function of the request;
/// it keeps the requests it was asked and counts them.
///
/// ```
/// use aaa_loop::{ArgumentsOrProblem, AssistantTurn, Message, Model, ModelRequest, ProviderCall, ScriptedModel};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let model = ScriptedModel::new([
///     AssistantTurn::tool_calls([ProviderCall::new("c1", "add", ArgumentsOrProblem::from_text(r#"{"a":2,"b":3}"#))]),
///     AssistantTurn::answer("5"),
/// ]);
/// let request = ModelRequest::new(vec![Message::user("2 + 3?")], vec![]);
/// assert!(model.turn(&request).await.unwrap().has_calls());
/// assert_eq!(model.turn(&request).await.unwrap().text.as_deref(), Some("5"));
/// assert!(model.turn(&request).await.is_err()); // the script is over
/// assert_eq!(model.calls(), 3);
/// assert_eq!(model.requests().len(), 3);
///
/// // Or answer from what the model is asked:
/// let echo = ScriptedModel::from_fn(|request| AssistantTurn::answer(format!("{} messages", request.messages.len())));
/// assert_eq!(echo.turn(&request).await.unwrap().text.as_deref(), Some("1 messages"));
/// # }
/// ```
pub struct ScriptedModel {
    script: Script,
    requests: Mutex<Vec<ModelRequest>>,
    calls: AtomicUsize,
    record: bool,
}

enum Script {
    Turns(Mutex<VecDeque<AssistantTurn>>),
    Fn(Box<TurnFn>),
}

impl ScriptedModel {
    /// A model that answers with `turns`, one per call, in order; once they are
    /// used up, it fails with [`ModelError::Other`].
    pub fn new(turns: impl IntoIterator<Item = AssistantTurn>) -> Self {
        ScriptedModel::with_script(Script::Turns(Mutex::new(turns.into_iter().collect())))
    }

    /// A model that answers each request with `answer(request)`.
    pub fn from_fn(
        answer: impl Fn(&ModelRequest) -> AssistantTurn + Send + Sync + 'static,
    ) -> Self {
        ScriptedModel::with_script(Script::Fn(Box::new(answer)))
    }

    fn with_script(script: Script) -> Self {
        ScriptedModel {
            script,
            requests: Mutex::new(Vec::new()),
            calls: AtomicUsize::new(0),
            record: true,
        }
    }

    /// Whether to keep a copy of each request (on by default). Each request holds
    /// the whole conversation, so a long benchmark turns it off.
    pub fn record_requests(mut self, record: bool) -> Self {
        self.record = record;
        self
    }

    /// How many times the model was asked for a turn.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// The requests it was asked, in order (empty when not recording).
    pub fn requests(&self) -> Vec<ModelRequest> {
        lock(&self.requests).clone()
    }

    fn answer(&self, request: &ModelRequest) -> Result<AssistantTurn, ModelError> {
        let asked = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if self.record {
            lock(&self.requests).push(request.clone());
        }
        match &self.script {
            Script::Turns(turns) => lock(turns).pop_front().ok_or_else(|| {
                ModelError::Other(format!(
                    "the scripted model has no turn left (asked {asked} times)"
                ))
            }),
            Script::Fn(answer) => Ok(answer(request)),
        }
    }
}

/// A poisoned lock only means a test panicked elsewhere; the data is still usable.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Model for ScriptedModel {
    fn turn<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a> {
        let answer = self.answer(request);
        Box::pin(std::future::ready(answer))
    }
}

impl fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("calls", &self.calls())
            .field("record", &self.record)
            .finish_non_exhaustive()
    }
}
