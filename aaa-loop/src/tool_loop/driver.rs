//! The loop itself: a small state machine over the run's facts.
//!
//! ```text
//!            ┌────────────── results ──────────────┐
//!            v                                     │
//! start ─> Ask ── turn with calls ──> Run ─────────┘
//!            │
//!            └─ final answer / refusal ──> End
//! ```
//!
//! Before each step, [`Limits::exceeded`] (the one budget check) may send the loop
//! to `End` instead. `Ask` takes the next recorded turn when the run has one (a
//! restarted loop walks its record this way, through the same steps and the same
//! checks), else asks the model. `Run` answers the turn's calls through the engine
//! ([`TurnCalls::answer`]). A turn from the model is on the run before anything it
//! leads to: its first call's request carries it, and a turn no request took is
//! recorded on its own before the next `Ask` or the `End`
//! ([`Driver::record_turn`]).

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use aaa_tools::{RunHandle, Tool};
use tokio::time::Instant;

use crate::facts::{LoopEnded, LoopTurn, Recorder};
use crate::model::{Message, Model, ModelRequest};
use crate::turn::{AssistantTurn, StopReason};

use super::calls::{Emit, Known, TurnCalls, until};
use super::limits::{Limits, Next, Progress};
use super::{LoopEnd, LoopError, LoopEvent, LoopResult};

/// What a [`ToolLoop`](crate::ToolLoop) is made of.
#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) model: Arc<dyn Model>,
    pub(crate) tools: Vec<Tool>,
    pub(crate) limits: Limits,
    pub(crate) sequential: HashSet<String>,
    pub(crate) max_output_tokens: Option<u32>,
}

/// The step a loop takes next.
enum Step {
    /// Get the next turn (recorded, or from the model).
    Ask,
    /// Answer the calls of the last turn.
    Run,
    /// Stop.
    End(LoopEnd),
}

struct Driver<'a> {
    config: &'a Config,
    run: &'a RunHandle,
    recorder: Recorder<'a>,
    emit: Emit<'a>,
    started: Instant,
    deadline: Option<Instant>,
    /// The conversation, and what the model is asked.
    request: ModelRequest,
    /// Turns recorded before this loop started, not yet walked.
    recorded: VecDeque<Arc<AssistantTurn>>,
    resumed_turns: u32,
    known: Known,
    progress: Progress,
    /// The last turn, while the run does not hold it: it goes with the first call of
    /// it that is requested, or on its own before the loop asks again or ends.
    unrecorded: Option<LoopTurn>,
}

/// Runs a loop on `run` from `input` to its end.
pub(crate) async fn drive(
    config: &Config,
    run: &RunHandle,
    input: Vec<Message>,
    emit: Emit<'_>,
) -> Result<LoopResult, LoopError> {
    let started = Instant::now();
    let recorder = Recorder::new(run);
    let record = recorder.replay().await?;
    match &record.input {
        Some(recorded) if *recorded != input => {
            return Err(LoopError::InputMismatch(run.run_id().clone()));
        }
        Some(_) => {}
        None => recorder.input(&input).await?,
    }
    let resumed_turns = u32::try_from(record.turns.len()).unwrap_or(u32::MAX);
    if resumed_turns > 0 {
        emit.send(|| LoopEvent::Resumed {
            turns: resumed_turns,
        });
    }
    let mut request = ModelRequest::new(input, config.tools.clone());
    request.max_output_tokens = config.max_output_tokens;
    let driver = Driver {
        config,
        run,
        recorder,
        emit,
        started,
        deadline: config
            .limits
            .wall_time
            .and_then(|wall| started.checked_add(wall)),
        request,
        recorded: record.turns.into(),
        resumed_turns,
        known: Known {
            outcomes: record.outcomes,
            requested: record.requested,
        },
        progress: Progress::default(),
        unrecorded: None,
    };
    driver.drive().await
}

impl Driver<'_> {
    async fn drive(mut self) -> Result<LoopResult, LoopError> {
        let mut step = Step::Ask;
        loop {
            let next = match &step {
                Step::Ask => Next::Ask,
                Step::Run => Next::Run(last_turn(&self.request.messages)),
                Step::End(_) => break,
            };
            // The one place budgets are checked. The clock is read only when a wall
            // time is set: two reads a turn were 0.3 % of a turn in the
            // `loop_overhead` bench (220 of 69 000 instructions).
            let elapsed = match self.config.limits.wall_time {
                Some(_) => self.started.elapsed(),
                None => Duration::ZERO,
            };
            if let Some(end) = self.config.limits.exceeded(&self.progress, next, elapsed) {
                step = Step::End(end);
                continue;
            }
            step = match step {
                Step::Ask => self.ask().await?,
                Step::Run => self.answer_calls().await?,
                Step::End(_) => unreachable!("left the loop above"),
            };
        }
        let Step::End(end) = step else {
            unreachable!("the loop ends at End")
        };
        self.finish(end).await
    }

    /// The next turn: the next recorded one, or a new one from the model (recorded
    /// with the first call of it requested, or by [`record_turn`](Self::record_turn)).
    async fn ask(&mut self) -> Result<Step, LoopError> {
        self.record_turn().await?;
        let number = self.progress.turns;
        let turn = match self.recorded.pop_front() {
            Some(turn) => turn,
            None => {
                self.request.turn = number;
                let asked = self.config.model.turn(&self.request);
                let Some(turn) = until(self.deadline, asked).await else {
                    // Back to the budget check, which ends the loop.
                    return Ok(Step::Ask);
                };
                let turn = Arc::new(turn?);
                self.unrecorded = Some(LoopTurn {
                    turn: number,
                    assistant: turn.clone(),
                });
                turn
            }
        };
        self.progress.add_turn(&turn);
        self.emit.send(|| LoopEvent::Turn {
            turn: number,
            assistant: turn.clone(),
        });
        let step = match &turn.stop {
            StopReason::Refused(reason) => Step::End(LoopEnd::Refused(reason.clone())),
            _ if !turn.has_calls() => {
                let text = turn.text.clone().unwrap_or_default();
                self.emit.send(|| LoopEvent::Final(text.clone()));
                Step::End(LoopEnd::Final(text))
            }
            _ => Step::Run,
        };
        self.request.messages.push(Message::Assistant(turn));
        Ok(step)
    }

    /// Answers the last turn's calls and adds their results to the conversation.
    async fn answer_calls(&mut self) -> Result<Step, LoopError> {
        let turn = last_turn(&self.request.messages);
        let calls = TurnCalls {
            run: self.run,
            turn: self.progress.turns - 1,
            calls: &turn.calls,
            sequential: &self.config.sequential,
            emit: self.emit,
        };
        let answered = calls.answer(&mut self.known, self.deadline, &mut self.unrecorded);
        let Some(results) = answered.await? else {
            // The wall time passed while waiting: back to the budget check.
            return Ok(Step::Run);
        };
        self.progress.add_calls(last_turn(&self.request.messages));
        self.request.messages.push(Message::ToolResults(results));
        Ok(Step::Ask)
    }

    /// Records the last turn on its own if no request took it (see
    /// [`TurnCalls::answer`]): a turn without calls, one whose calls were all
    /// answered without a request (arguments that do not read), or one the loop ends
    /// after without requesting its calls (a budget). Called before the model is
    /// asked again and before the loop ends, so a turn is on the run before the loop
    /// does anything after it but request its calls.
    async fn record_turn(&mut self) -> Result<(), LoopError> {
        match self.unrecorded.take() {
            Some(turn) => self.recorder.turn(turn.turn, &turn.assistant).await,
            None => Ok(()),
        }
    }

    async fn finish(mut self, end: LoopEnd) -> Result<LoopResult, LoopError> {
        self.record_turn().await?;
        let ended = LoopEnded {
            end,
            turns: self.progress.turns,
            tool_calls: self.progress.tool_calls,
            usage: self.progress.usage,
        };
        self.recorder.ended(ended.clone()).await?;
        Ok(LoopResult {
            end: ended.end,
            messages: self.request.messages,
            turns: ended.turns,
            resumed_turns: self.resumed_turns,
            tool_calls: ended.tool_calls,
            usage: ended.usage,
        })
    }
}

/// The turn the conversation ends with (in `Run`, the one whose calls are next).
fn last_turn(messages: &[Message]) -> &AssistantTurn {
    match messages.last() {
        Some(Message::Assistant(turn)) => turn,
        _ => unreachable!("Run follows a turn with calls"),
    }
}
