//! Answering one turn's calls: through the engine, in the provider's order.

use std::collections::{HashMap, HashSet};

use aaa_tools::event::ToolFailed;
use aaa_tools::{CallId, Outcome, RunHandle, ToolCall};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc::UnboundedSender;
use tokio::time::Instant;

use crate::facts::{LoopTurn, loop_call_id, turn_attachment};
use crate::model::ToolResult;
use crate::turn::{ArgumentsOrProblem, ProviderCall};

use super::{LoopError, LoopEvent};

/// Where a loop's events go, when somebody listens.
#[derive(Clone, Copy)]
pub(crate) struct Emit<'a>(pub(crate) Option<&'a UnboundedSender<LoopEvent>>);

impl Emit<'_> {
    /// Sends the event `event()` makes, making it only when somebody listens.
    pub(crate) fn send(self, event: impl FnOnce() -> LoopEvent) {
        if let Some(sender) = self.0 {
            // A listener that went away stops listening; the loop goes on.
            let _ = sender.send(event());
        }
    }
}

/// What the loop knows of a run's calls.
#[derive(Debug, Default)]
pub(crate) struct Known {
    /// Outcomes read back from the run and not yet used.
    pub(crate) outcomes: HashMap<CallId, Outcome>,
    /// Calls requested in the run (by a loop before a restart, or by this one).
    pub(crate) requested: HashSet<CallId>,
}

impl Known {
    /// The answer the loop has for `call` (engine id `id`) without asking the engine:
    /// a `bad_args` failure for arguments the codec could not read, or the outcome
    /// the run held when the loop started.
    fn answer(&mut self, call: &ProviderCall, id: &CallId) -> Option<Outcome> {
        match &call.arguments {
            ArgumentsOrProblem::Problem(problem) => Some(bad_args(call, problem)),
            // A fresh run has none: no need to hash the id.
            _ if self.outcomes.is_empty() => None,
            _ => self.outcomes.remove(id),
        }
    }
}

/// One turn's calls to answer.
pub(crate) struct TurnCalls<'a> {
    pub(crate) run: &'a RunHandle,
    pub(crate) turn: u32,
    pub(crate) calls: &'a [ProviderCall],
    pub(crate) sequential: &'a HashSet<String>,
    pub(crate) emit: Emit<'a>,
}

impl TurnCalls<'_> {
    /// Answers every call, the results in the calls' order; `None` when `deadline`
    /// passed first (calls already requested go on in the engine).
    ///
    /// - A call whose arguments the codec could not read is answered here, with a
    ///   `bad_args` failure carrying the codec's words: nothing is requested, so no
    ///   tool (and no guardrail) ever sees text that is not arguments.
    /// - A call whose outcome the run holds is not requested again; one requested
    ///   before (a pending approval, a tool still running when the loop stopped) is
    ///   only waited for.
    /// - The others are requested; those of `sequential` tools one at a time, each
    ///   awaited before the next is requested, the rest all at once.
    ///
    /// `unrecorded`, the turn when the run does not hold it yet, goes with the first
    /// request made here (see [`facts`](crate::facts)), and is taken then.
    ///
    /// After `None` the loop ends (the wall time is spent): calls requested here are
    /// not remembered for another try.
    pub(crate) async fn answer(
        &self,
        known: &mut Known,
        deadline: Option<Instant>,
        unrecorded: &mut Option<LoopTurn>,
    ) -> Result<Option<Vec<ToolResult>>, LoopError> {
        if let [call] = self.calls {
            // One call, the common turn: nothing to order or to run side by side.
            let answered = self.answer_one(call, known, deadline, unrecorded).await?;
            let Some(outcome) = answered else {
                return Ok(None);
            };
            return Ok(Some(vec![ToolResult::new(call.clone(), outcome)]));
        }
        let ids: Vec<CallId> = self
            .calls
            .iter()
            .map(|call| loop_call_id(self.turn, &call.call_id))
            .collect();
        let mut outcomes: Vec<Option<Outcome>> = vec![None; self.calls.len()];
        let (mut together, mut one_by_one) = (Vec::new(), Vec::new());
        for (at, call) in self.calls.iter().enumerate() {
            match known.answer(call, &ids[at]) {
                Some(outcome) => {
                    self.arrived(&ids[at], call, &outcome);
                    outcomes[at] = Some(outcome);
                }
                None if self.sequential.contains(&*call.name) => one_by_one.push(at),
                None => together.push(at),
            }
        }
        for &at in &together {
            if !known.requested.contains(&ids[at]) {
                self.request_new(&ids[at], &self.calls[at], unrecorded)
                    .await?;
            }
        }
        let requested = &known.requested;
        let ids = &ids;
        let serial = async {
            let mut done = Vec::with_capacity(one_by_one.len());
            for &at in &one_by_one {
                if !requested.contains(&ids[at]) {
                    self.request_new(&ids[at], &self.calls[at], unrecorded)
                        .await?;
                }
                let outcome = self.run.outcome(&ids[at]).await?;
                self.arrived(&ids[at], &self.calls[at], &outcome);
                done.push((at, outcome));
            }
            Ok::<_, LoopError>(done)
        };
        let concurrent = async {
            let mut waiting: FuturesUnordered<_> = together
                .iter()
                .map(|&at| async move { (at, self.run.outcome(&ids[at]).await) })
                .collect();
            let mut done = Vec::with_capacity(together.len());
            while let Some((at, outcome)) = waiting.next().await {
                let outcome = outcome?;
                self.arrived(&ids[at], &self.calls[at], &outcome);
                done.push((at, outcome));
            }
            Ok::<_, LoopError>(done)
        };
        let both = futures::future::try_join(serial, concurrent);
        let Some(both) = until(deadline, both).await else {
            return Ok(None);
        };
        let (serial, concurrent) = both?;
        for (at, outcome) in serial.into_iter().chain(concurrent) {
            outcomes[at] = Some(outcome);
        }
        let results = self
            .calls
            .iter()
            .zip(outcomes)
            .map(|(call, outcome)| {
                ToolResult::new(call.clone(), outcome.expect("every call was answered"))
            })
            .collect();
        Ok(Some(results))
    }

    /// [`answer`](Self::answer) for a turn of one call: the same steps, without the
    /// vectors that order many. Buys about 1 000 instructions of a turn's 69 000
    /// (1.5 %) in the `loop_overhead` bench (counted with its `--count`).
    async fn answer_one(
        &self,
        call: &ProviderCall,
        known: &mut Known,
        deadline: Option<Instant>,
        unrecorded: &mut Option<LoopTurn>,
    ) -> Result<Option<Outcome>, LoopError> {
        let id = loop_call_id(self.turn, &call.call_id);
        let outcome = match known.answer(call, &id) {
            Some(outcome) => outcome,
            None => {
                if !known.requested.contains(&id) {
                    self.request_new(&id, call, unrecorded).await?;
                }
                match until(deadline, self.run.outcome(&id)).await {
                    Some(outcome) => outcome?,
                    None => return Ok(None),
                }
            }
        };
        self.arrived(&id, call, &outcome);
        Ok(Some(outcome))
    }

    /// Requests `call` under `id`, with the turn when it is `unrecorded` (taken then).
    async fn request_new(
        &self,
        id: &CallId,
        call: &ProviderCall,
        unrecorded: &mut Option<LoopTurn>,
    ) -> Result<(), LoopError> {
        let arguments = match &call.arguments {
            // Shared with the turn, which the run records.
            ArgumentsOrProblem::Arguments(arguments) => arguments.shared(),
            // Answered locally (see `answer`); never requested.
            _ => Value::Object(Map::new()).into(),
        };
        // First: the loop read the run and found no request of `id` (see `Known`).
        let mut request = ToolCall::new(call.name.clone(), arguments)
            .with_id(id.clone())
            .first_request();
        if let Some(turn) = unrecorded.take() {
            request = request.with_attachment(turn_attachment(turn));
        }
        self.run.request_call(request).await?;
        self.emit.send(|| LoopEvent::CallRequested {
            turn: self.turn,
            call: call.clone(),
            call_id: id.clone(),
        });
        Ok(())
    }

    fn arrived(&self, id: &CallId, call: &ProviderCall, outcome: &Outcome) {
        self.emit.send(|| LoopEvent::Outcome {
            turn: self.turn,
            call_id: id.clone(),
            result: ToolResult::new(call.clone(), outcome.clone()),
        });
    }
}

/// `future`'s output, or `None` when `deadline` passes first.
pub(crate) async fn until<T>(
    deadline: Option<Instant>,
    future: impl Future<Output = T>,
) -> Option<T> {
    match deadline {
        Some(deadline) => tokio::time::timeout_at(deadline, future).await.ok(),
        None => Some(future.await),
    }
}

/// The answer to a call whose arguments could not be read: a `bad_args` failure in
/// the words the engine uses for arguments that do not fit a schema.
fn bad_args(call: &ProviderCall, problem: &str) -> Outcome {
    let failed: ToolFailed = serde_json::from_value(json!({
        "call_id": call.call_id,
        "name": call.name,
        "kind": "bad_args",
        "message": format!("invalid arguments for `{}`: {problem}", call.name),
        "attempt": 0,
    }))
    .expect("a failure fact's data");
    Outcome::Failed(failed)
}
