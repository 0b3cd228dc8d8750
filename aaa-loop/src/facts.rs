//! The facts a [`ToolLoop`](crate::ToolLoop) keeps on its run: what it was asked,
//! each model turn, and how it ended. Resuming a loop is reading them back.
//!
//! They are CloudEvents on the run's subjects, like the engine's own facts (see
//! [`aaa_tools::event`]), published on the engine's bus:
//!
//! | `type` | subject | `id` | `data` |
//! |---|---|---|---|
//! | `aaa.loop.started` | `aaa.<tenant>.<run>.loop.started` | fresh | `{}`: a loop (re)started on the run; it reads the run's facts up to this one |
//! | `aaa.loop.input` | `aaa.<tenant>.<run>.loop.input` | `loop-input.<tenant>.<run>` | [`LoopInput`] `{messages}` |
//! | `aaa.loop.turn` | `aaa.<tenant>.<run>.loop.turn` | `loop-turn.<tenant>.<run>.<turn>` | [`LoopTurn`] `{turn, assistant}`, for a turn no request carries (below) |
//! | `aaa.loop.ended` | `aaa.<tenant>.<run>.loop.ended` | fresh | [`LoopEnded`] `{end, turns, tool_calls, usage}` |
//!
//! A turn is on the run before anything it leads to. The first of its calls the loop
//! requests carries it: the call's `aaa.tool.requested` holds the turn as its
//! [`Attachment`] (`{"type": "aaa.loop.turn", "data": {turn, assistant}}`), stored in
//! the same message as the request, so there is never a request of a turn the run
//! does not hold, and a turn costs no message of its own. That message was most of
//! what a loop added to a call: in the `loop_overhead` bench the per-turn ratio to a
//! direct call went from 1.114 to 1.094 on two worker threads and from 1.145 to
//! 1.070 on a current-thread runtime (the bench's docs have the figures). A turn
//! none of whose calls is requested (a final answer, a refusal, calls whose
//! arguments do not read, a turn a budget stopped) is an `aaa.loop.turn` fact of its
//! own, published before the loop asks the model again or ends.
//!
//! Readers take the first record of each turn number, in the run's order, as a
//! resumed loop does, so a second one (a publish retried after the first was stored)
//! is stored and never read, and the bus is not asked to drop it: its
//! de-duplication cost a turn 620 instructions of 51 950 and about 0.04 of the
//! per-turn ratio on two worker threads in the `loop_overhead` bench. The input is
//! de-duplicated by its id; `started` and `ended` have fresh ids, which nothing
//! repeats. The calls' own facts (`aaa.tool.requested`, `aaa.approval.*`,
//! `aaa.tool.completed|failed`) are the engine's, under the call ids of
//! [`loop_call_id`]. A final answer is the last turn (one without calls); the
//! `aaa.loop.ended` fact is for readers (a UI, an audit) and each run of the loop
//! publishes one; resuming never reads it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write;
use std::sync::Arc;

use aaa_tools::event::{self, Attachment, Event, TOOL_COMPLETED, TOOL_FAILED, TOOL_REQUESTED};
use aaa_tools::{CallId, FactError, Outcome, RunHandle};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::model::Message;
use crate::tool_loop::end::{LoopEnd, LoopError};
use crate::turn::{AssistantTurn, Usage};
use crate::wire::{Dedupe, Fact};

/// `aaa.loop.started`: a loop started (or restarted) on the run.
pub const LOOP_STARTED: &str = "aaa.loop.started";
/// `aaa.loop.input`: the messages the loop started from.
pub const LOOP_INPUT: &str = "aaa.loop.input";
/// `aaa.loop.turn`: one model turn; the type of a request's [`Attachment`] that
/// carries one, and of the fact that records a turn no request carries.
pub const LOOP_TURN: &str = "aaa.loop.turn";
/// `aaa.loop.ended`: a run of the loop ended, and why.
pub const LOOP_ENDED: &str = "aaa.loop.ended";

/// `data` of `aaa.loop.input`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LoopInput {
    /// The conversation the loop started from.
    pub messages: Vec<Message>,
}

/// `data` of `aaa.loop.turn`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LoopTurn {
    /// The turn's number in the run, from 0.
    pub turn: u32,
    /// What the model said (shared with the conversation: see
    /// [`Message::assistant`]).
    pub assistant: Arc<AssistantTurn>,
}

/// `data` of `aaa.loop.ended`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LoopEnded {
    /// Why it ended.
    pub end: LoopEnd,
    /// Model turns in the run.
    pub turns: u32,
    /// Tool calls in the run.
    pub tool_calls: u32,
    /// Tokens of every turn.
    pub usage: Usage,
}

/// The engine's call id for call `call_id` of turn `turn`: `t<turn>-<call_id>`, or,
/// when that would pass [`CallId::MAX_LEN`], `t<turn>_` and the SHA-256 of the call
/// id in hex.
///
/// Namespaced by turn because providers do not promise ids unique across a
/// conversation (OpenAI-compatible servers number calls from 0 in every turn), and
/// the engine runs a call id once per run: a repeated id would get the first call's
/// outcome. Deterministic (a resumed loop finds its calls again) and injective.
///
/// ```
/// use aaa_loop::loop_call_id;
/// use aaa_tools::CallId;
///
/// let id = CallId::new("call_abc").unwrap();
/// assert_eq!(loop_call_id(3, &id).as_str(), "t3-call_abc");
/// ```
pub fn loop_call_id(turn: u32, call_id: &CallId) -> CallId {
    // Built by hand: this runs for every call of every turn.
    let turn = turn.to_string();
    let id = call_id.as_str();
    let mut text = String::with_capacity(2 + turn.len() + id.len().max(64));
    text.push('t');
    text.push_str(&turn);
    if 2 + turn.len() + id.len() <= CallId::MAX_LEN {
        text.push('-');
        text.push_str(id);
    } else {
        text.push('_');
        for byte in Sha256::digest(id.as_bytes()) {
            text.push(char::from(HEX[usize::from(byte >> 4)]));
            text.push(char::from(HEX[usize::from(byte & 15)]));
        }
    }
    CallId::new(text).expect("a turn and a call id make a valid call id")
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Publishes one loop's facts on its run.
///
/// What the facts of one loop have alike is made once, when the loop starts: the
/// engine's `source`, which every fact shares, and the subject and id prefix of the
/// turns. Each turn's fact then costs its number written out and a reference to the
/// turn. Made for each fact (the source copied, the subject written, the id
/// `format!`ted), they were 2 700 instructions of a turn's 61 300 (4.4 %) in the
/// `loop_overhead` bench.
pub(crate) struct Recorder<'a> {
    run: &'a RunHandle,
    source: Arc<str>,
    turn_subject: String,
    /// `loop-turn.<tenant>.<run>.`: each turn's id without its number.
    turn_id_prefix: String,
}

impl<'a> Recorder<'a> {
    /// A recorder of facts on `run`.
    pub(crate) fn new(run: &'a RunHandle) -> Self {
        Recorder {
            run,
            source: Arc::from(run.engine().source()),
            turn_subject: subject(run, LOOP_TURN),
            turn_id_prefix: format!("loop-turn.{}.{}.", run.tenant(), run.run_id()),
        }
    }

    /// Records turn `turn` as a fact of its own (a turn none of whose calls is
    /// requested: see the module's docs). Returns once the bus has it.
    pub(crate) async fn turn(
        &self,
        turn: u32,
        assistant: &Arc<AssistantTurn>,
    ) -> Result<(), LoopError> {
        let mut id = String::with_capacity(self.turn_id_prefix.len() + 10);
        id.push_str(&self.turn_id_prefix);
        write!(id, "{turn}").expect("writing to a String");
        let data = LoopTurn {
            turn,
            assistant: assistant.clone(),
        };
        self.publish(&self.turn_subject, LOOP_TURN, id, data, Dedupe::No)
            .await
    }

    /// Records the loop's input.
    pub(crate) async fn input(&self, messages: &[Message]) -> Result<(), LoopError> {
        let run = self.run;
        let id = format!("loop-input.{}.{}", run.tenant(), run.run_id());
        let data = LoopInput {
            messages: messages.to_vec(),
        };
        let subject = subject(run, LOOP_INPUT);
        self.publish(&subject, LOOP_INPUT, id, data, Dedupe::ById)
            .await
    }

    /// Says how this run of the loop ended.
    pub(crate) async fn ended(&self, ended: LoopEnded) -> Result<(), LoopError> {
        let id = fresh_id("loop-ended");
        let subject = subject(self.run, LOOP_ENDED);
        self.publish(&subject, LOOP_ENDED, id, ended, Dedupe::No)
            .await
    }

    /// Reads the run's facts up to now: opens the run's replay, publishes an
    /// `aaa.loop.started` marker, and reads until the marker comes back (the replay
    /// follows the log, so everything stored before the marker has been read by
    /// then).
    pub(crate) async fn replay(&self) -> Result<Recorded, LoopError> {
        let run = self.run;
        let mut facts = run.facts().await?;
        let marker = fresh_id("loop-started");
        let data = Value::Object(Default::default());
        self.publish(
            &subject(run, LOOP_STARTED),
            LOOP_STARTED,
            marker.clone(),
            data,
            Dedupe::No,
        )
        .await?;
        let mut recorded = Recorded::default();
        let mut turns = BTreeMap::new();
        loop {
            let fact = match facts.next().await {
                Some(Ok(fact)) => fact,
                // Someone else's message on the run's subjects: not the loop's business.
                Some(Err(FactError::Unreadable { .. })) => continue,
                Some(Err(error)) => return Err(LoopError::Facts(error)),
                None => return Err(LoopError::FactsEnded),
            };
            if fact.id == marker {
                break;
            }
            recorded.read(fact, &mut turns)?;
        }
        for (expected, (number, turn)) in (0_u32..).zip(turns) {
            if number != expected {
                return Err(LoopError::Unreadable(format!(
                    "the run records turn {number} but not turn {expected}"
                )));
            }
            recorded.turns.push(turn);
        }
        Ok(recorded)
    }

    /// Publishes a fact of `kind` on `subject` under the event id `id`.
    async fn publish<T: Serialize + Send + Sync + 'static>(
        &self,
        subject: &str,
        kind: &'static str,
        id: String,
        data: T,
        dedupe: Dedupe,
    ) -> Result<(), LoopError> {
        let fact = Fact::new(self.run, self.source.clone(), kind, id, data);
        Ok(fact
            .publish(self.run.engine().bus(), subject, dedupe)
            .await?)
    }
}

/// The run's subject for facts of `kind`.
fn subject(run: &RunHandle, kind: &str) -> String {
    event::subject(run.tenant(), run.run_id(), kind)
}

/// `<prefix>.<a fresh call id>`: unique, for facts that are not de-duplicated.
fn fresh_id(prefix: &str) -> String {
    format!("{prefix}.{}", aaa_tools::new_call_id())
}

/// Turn `turn`, to go with the first call of it the loop requests.
pub(crate) fn turn_attachment(turn: LoopTurn) -> Attachment {
    Attachment::new(LOOP_TURN, turn)
}

/// The turn a request carries (see [`turn_attachment`]), if it carries one.
fn attached_turn(request: &Event) -> Result<Option<LoopTurn>, LoopError> {
    let Some(attachment) = request.data.get("attachment") else {
        return Ok(None);
    };
    // Another caller's record, or none we can read as one: not the loop's.
    let Ok(attachment) = Attachment::deserialize(attachment) else {
        return Ok(None);
    };
    if attachment.kind() != LOOP_TURN {
        return Ok(None);
    }
    let turn = attachment
        .data()
        .map_err(|error| LoopError::Unreadable(format!("the turn a request carries: {error}")))?;
    Ok(Some(turn))
}

/// What a run holds of a loop: read back when the loop (re)starts.
#[derive(Debug, Default)]
pub(crate) struct Recorded {
    /// The recorded input, if any.
    pub(crate) input: Option<Vec<Message>>,
    /// The recorded turns, by number from 0.
    pub(crate) turns: Vec<Arc<AssistantTurn>>,
    /// The first outcome of each call of the run.
    pub(crate) outcomes: HashMap<CallId, Outcome>,
    /// The calls requested in the run.
    pub(crate) requested: HashSet<CallId>,
}

impl Recorded {
    fn read(
        &mut self,
        fact: Event,
        turns: &mut BTreeMap<u32, Arc<AssistantTurn>>,
    ) -> Result<(), LoopError> {
        let unreadable = |error: event::EventError| LoopError::Unreadable(error.to_string());
        match fact.kind.as_str() {
            LOOP_INPUT if self.input.is_none() => {
                let input: LoopInput = fact.into_data().map_err(unreadable)?;
                self.input = Some(input.messages);
            }
            LOOP_TURN => {
                let turn: LoopTurn = fact.into_data().map_err(unreadable)?;
                turns.entry(turn.turn).or_insert(turn.assistant);
            }
            TOOL_REQUESTED => {
                if let Some(turn) = attached_turn(&fact)? {
                    turns.entry(turn.turn).or_insert(turn.assistant);
                }
                if let Some(call) = fact.subject.and_then(|id| CallId::new(id).ok()) {
                    self.requested.insert(call);
                }
            }
            TOOL_COMPLETED | TOOL_FAILED => {
                // The engine's facts; one that does not read is not ours to judge
                // (the run handle skips it too).
                let outcome = if fact.kind == TOOL_COMPLETED {
                    fact.into_data().ok().map(Outcome::Completed)
                } else {
                    fact.into_data().ok().map(Outcome::Failed)
                };
                if let Some(outcome) = outcome {
                    self.outcomes
                        .entry(outcome.call_id().clone())
                        .or_insert(outcome);
                }
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loop_call_ids_are_namespaced_by_turn_and_fit() {
        let short = CallId::new("functions_add_0").unwrap();
        assert_eq!(loop_call_id(0, &short).as_str(), "t0-functions_add_0");
        assert_ne!(loop_call_id(0, &short), loop_call_id(1, &short));
        let long = CallId::new("a".repeat(CallId::MAX_LEN)).unwrap();
        let hashed = loop_call_id(12, &long);
        assert!(hashed.as_str().starts_with("t12_"), "{hashed}");
        assert_eq!(hashed.as_str().len(), 4 + 64);
        assert_eq!(hashed, loop_call_id(12, &long));
        // The two forms never meet: `t<digits>-` against `t<digits>_`.
        let edge = CallId::new("b".repeat(CallId::MAX_LEN - 3)).unwrap();
        assert!(loop_call_id(7, &edge).as_str().starts_with("t7-"));
        assert!(loop_call_id(10, &edge).as_str().starts_with("t10_"));
    }
}
