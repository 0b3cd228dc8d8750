//! [`ToolLoop`]: a model driven through durable, guarded tool calls until it answers.

use std::collections::HashSet;
use std::sync::Arc;

use aaa_tools::{RunHandle, Tool};

use crate::model::{Message, Model};

mod calls;
mod driver;
pub(crate) mod end;
mod limits;
mod stream;

pub use end::{LoopEnd, LoopError, LoopEvent, LoopResult};
pub use limits::Limits;
pub use stream::LoopStream;

use calls::Emit;
use driver::Config;

/// Drives a [`Model`] through tool calls on an engine's run: model turn, calls
/// through the engine, outcomes back to the model, next turn, until the model
/// answers without calling a tool or a budget ([`Limits`]) ends it.
///
/// ```
/// use aaa_loop::{ArgumentsOrProblem, AssistantTurn, LoopEnd, Message, ProviderCall, ScriptedModel, ToolLoop};
/// use aaa_tools::{Engine, ToolHandler, ToolRegistry, tool, tools};
/// use std::sync::Arc;
///
/// /// Add two integers.
/// #[tool]
/// async fn add(a: i64, b: i64) -> i64 { a + b }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let engine = Engine::embedded();
/// let _worker = ToolHandler::new(ToolRegistry::new(tools![add])?).attach(&engine).await?;
///
/// let model = Arc::new(ScriptedModel::from_fn(|request| match request.last_results() {
///     None => AssistantTurn::tool_calls([ProviderCall::new("call_1", "add", ArgumentsOrProblem::from_text(r#"{"a":2,"b":3}"#))]),
///     Some(results) => AssistantTurn::answer(format!("2 + 3 = {}", results[0].outcome.for_model())),
/// }));
/// let agent = ToolLoop::new(model.clone(), tools![add]);
/// let result = agent.run(&engine.new_run(), vec![Message::user("What is 2 + 3?")]).await?;
/// assert_eq!(result.end, LoopEnd::Final("2 + 3 = 5".into()));
/// assert_eq!((result.turns, result.tool_calls, model.calls()), (2, 1, 2));
/// # Ok(()) }
/// ```
///
/// # What it guarantees
///
/// - **Every call goes through the engine** ([`RunHandle::request_call`] and
///   [`RunHandle::outcome`]), so pools, timeouts, approvals, guardrails and the guard
///   hold for the loop as for any caller. A turn's calls are requested together and
///   their results given to the model in the provider's order, whatever order they
///   finish in. Tools named in [`sequential`](Self::sequential) run one at a time
///   instead, in order, each awaited before the next is requested.
/// - **Calls with unreadable arguments are answered**, never dropped: the codec's
///   [`ArgumentsOrProblem::Problem`](crate::ArgumentsOrProblem::Problem) becomes a
///   `bad_args` failure (``invalid arguments for `add`: <problem>``) that the model
///   reads next turn. The loop answers it itself rather than requesting it: there are
///   no arguments to hand a tool or a guardrail, and the codec's words say more than
///   a parse error of the same text would. The answer is derived from the recorded
///   turn, so it is the same after a restart.
/// - **Durable**: each turn is recorded on the run ([`facts`](crate::facts)) in the
///   same message as the first of its calls requested (or on its own when none is),
///   its calls under ids derived from the turn
///   ([`loop_call_id`](crate::loop_call_id)). Running a loop on a run that has
///   recorded turns resumes it: the recorded turns are taken instead of asking the
///   model, calls with an outcome are not requested again, calls requested before
///   (a pending approval, a tool that was still running) are waited for, and only
///   what never happened is done. A run whose last turn is a final answer ends
///   again with it, without asking the model.
/// - **Budgets are checked in one place**, before each step (asking the model,
///   answering a turn's calls); the result says which ended the loop
///   ([`LoopEnd`]). A turn that refuses ([`StopReason::Refused`](crate::StopReason::Refused))
///   ends it with [`LoopEnd::Refused`].
///
/// One loop at a time per run: two loops on one run at once would both ask the model.
/// A model error ends the loop with [`LoopError::Model`]; retrying is the model's
/// business (or running the loop again, which resumes).
#[derive(Clone)]
pub struct ToolLoop {
    config: Arc<Config>,
}

impl ToolLoop {
    /// A loop asking `model`, which may call `tools` (a registry's:
    /// `registry.iter().cloned()`, or `tools![...]`), with default [`Limits`].
    ///
    /// The tools are what the model is told about; what runs is what the engine's
    /// handler has (a call of another name is answered `unknown_tool` by the engine).
    pub fn new(model: impl Model + 'static, tools: impl IntoIterator<Item = Tool>) -> Self {
        ToolLoop {
            config: Arc::new(Config {
                model: Arc::new(model),
                tools: tools.into_iter().collect(),
                limits: Limits::default(),
                sequential: HashSet::new(),
                max_output_tokens: None,
            }),
        }
    }

    /// Sets the budgets.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        Arc::make_mut(&mut self.config).limits = limits;
        self
    }

    /// Runs calls of these tools one at a time (requested and awaited one by one, in
    /// the turn's order) rather than with the turn's other calls; for tools that
    /// must not overlap (a shell, a browser, anything with shared state the tool
    /// does not lock).
    pub fn sequential(mut self, tools: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let config = Arc::make_mut(&mut self.config);
        config.sequential.extend(tools.into_iter().map(Into::into));
        self
    }

    /// Limits each turn's output tokens ([`ModelRequest::max_output_tokens`](crate::ModelRequest::max_output_tokens)).
    pub fn with_max_output_tokens(mut self, max: u32) -> Self {
        Arc::make_mut(&mut self.config).max_output_tokens = Some(max);
        self
    }

    /// The budgets.
    pub fn limits(&self) -> &Limits {
        &self.config.limits
    }

    /// Runs the loop on `run` from `input` (system and user messages) to its end, or
    /// resumes it when the run has recorded turns (`input` must then be the input
    /// it was started with: [`LoopError::InputMismatch`] otherwise).
    pub async fn run(&self, run: &RunHandle, input: Vec<Message>) -> Result<LoopResult, LoopError> {
        driver::drive(&self.config, run, input, Emit(None)).await
    }

    /// [`run`](Self::run), telling what happens as it happens: the stream yields each
    /// [`LoopEvent`] and ends with [`LoopEvent::Ended`]. After
    /// [`LoopEvent::Resumed`] (a restarted loop), the recorded turns and the outcomes
    /// the run holds come first, as [`LoopEvent::Turn`]s and [`LoopEvent::Outcome`]s,
    /// without [`LoopEvent::CallRequested`] for calls requested before.
    ///
    /// ```
    /// use aaa_loop::{AssistantTurn, LoopEnd, LoopEvent, Message, ScriptedModel, ToolLoop};
    /// use aaa_tools::Engine;
    /// use futures::StreamExt;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let agent = ToolLoop::new(ScriptedModel::new([AssistantTurn::answer("Hi!")]), []);
    /// let events: Vec<LoopEvent> = agent.run_stream(&Engine::embedded().new_run(), vec![Message::user("Hello")]).collect().await;
    /// assert!(matches!(&events[0], LoopEvent::Turn { turn: 0, .. }));
    /// assert_eq!(events[1], LoopEvent::Final("Hi!".into()));
    /// let LoopEvent::Ended(Ok(result)) = &events[2] else { panic!("{events:?}") };
    /// assert_eq!(result.end, LoopEnd::Final("Hi!".into()));
    /// # }
    /// ```
    pub fn run_stream(&self, run: &RunHandle, input: Vec<Message>) -> LoopStream {
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        let (config, run) = (self.config.clone(), run.clone());
        let driving = async move {
            let sender = sender;
            driver::drive(&config, &run, input, Emit(Some(&sender))).await
        };
        LoopStream::new(Box::pin(driving), receiver)
    }
}

impl std::fmt::Debug for ToolLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut tools: Vec<&str> = self.config.tools.iter().map(Tool::name).collect();
        tools.sort_unstable();
        f.debug_struct("ToolLoop")
            .field("tools", &tools)
            .field("limits", &self.config.limits)
            .field("sequential", &self.config.sequential)
            .finish_non_exhaustive()
    }
}
