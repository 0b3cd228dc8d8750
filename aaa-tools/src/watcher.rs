//! [`Watcher`]: follows one run's outcome facts and hands each to whoever waits for it.
//!
//! A run handle opens one watcher, on its first request, and keeps it for its life. The
//! watcher is a task reading the run's outcome facts from the bus; a caller that waits
//! for an outcome leaves a waiter with it, and the task hands the outcome over when the
//! fact arrives. An outcome that arrives before anyone asks is kept until somebody
//! does. Once handed out, only a fingerprint of the call's id is kept ([`CallSet`]):
//! the first outcome of a call is its outcome, and a later one (a duplicate from a
//! takeover) is skipped.
//!
//! The task handles whatever has arrived at once: one lock of the state for the lot,
//! then the waiters woken back to back, so a caller on another thread wakes once for
//! the lot rather than once per outcome. The buffers it does that with are kept from
//! one wake to the next: the watcher of a busy run would otherwise allocate (and free,
//! on another thread) a buffer per wake.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::stream::{BoxStream, Fuse};
use futures::{Stream, StreamExt};
use smallvec::SmallVec;
use tokio::sync::oneshot;

use crate::bus::{BusError, Stored};
use crate::call_set::CallSet;
use crate::ids::CallId;
use crate::outcome::Outcome;

/// The most facts the task takes from the bus in one go.
const BATCH: usize = 256;

/// Who waits for one call's outcome: nearly always one caller, held without an
/// allocation of its own.
type Waiters = SmallVec<[oneshot::Sender<Outcome>; 1]>;

/// Follows a run's outcome facts and hands them to whoever waits for them. Dropping it
/// stops the task.
pub(crate) struct Watcher {
    state: Arc<Mutex<WatchState>>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
struct WatchState {
    /// The first outcome fact of each call that arrived before anyone asked for it, as
    /// stored, until somebody does.
    arrived: HashMap<CallId, Stored, foldhash::fast::RandomState>,
    /// The calls whose outcome has been handed out: only their ids' fingerprints are
    /// kept (a long run does not keep every result it ever had, nor every id), and
    /// asking again reads the bus.
    handed_out: CallSet,
    waiters: HashMap<CallId, Waiters, foldhash::fast::RandomState>,
    /// The facts stopped: nobody who waits now will be answered.
    ended: bool,
}

/// What the watcher has for a caller asking for one call's outcome.
pub(crate) enum Claim {
    /// The outcome, which had arrived.
    Ready(Outcome),
    /// It has not arrived yet: it comes through this.
    Waiting(oneshot::Receiver<Outcome>),
    /// It was handed out before; only the bus still has it.
    HandedOut,
    /// The run's facts stopped before it arrived.
    Ended,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Watcher {
    /// Starts following `facts` (the run's outcome facts, from its start).
    pub(crate) fn start(facts: Facts) -> Watcher {
        let state = Arc::new(Mutex::new(WatchState::default()));
        let task = tokio::spawn(follow(facts, state.clone()));
        Watcher { state, task }
    }

    /// Takes the outcome of `call_id` if it arrived, or leaves a waiter for it.
    pub(crate) fn claim(&self, call_id: &CallId) -> Claim {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(outcome) = state.arrived.remove(call_id).and_then(|stored| {
            state.handed_out.insert(call_id);
            Outcome::from_stored(&stored)
        }) {
            return Claim::Ready(outcome);
        }
        if state.handed_out.contains(call_id) {
            Claim::HandedOut
        } else if state.ended {
            Claim::Ended
        } else {
            let (tx, rx) = oneshot::channel();
            state.waiters.entry(call_id.clone()).or_default().push(tx);
            Claim::Waiting(rx)
        }
    }
}

/// The run's outcome facts, as the bus delivers them.
type Facts = BoxStream<'static, Result<Stored, BusError>>;

/// The watcher's task: hands out outcomes until the facts stop.
async fn follow(facts: Facts, state: Arc<Mutex<WatchState>>) {
    let mut facts = facts.fuse();
    let mut items = Vec::with_capacity(BATCH);
    let mut outcomes = Vec::new();
    let mut ready: Vec<(oneshot::Sender<Outcome>, Outcome)> = Vec::new();
    while (Arrived {
        facts: &mut facts,
        into: &mut items,
    })
    .await
    {
        for item in items.drain(..) {
            match item {
                // Only outcomes matter here: the rest is skipped unparsed.
                Ok(stored) => {
                    if let Some(outcome) = Outcome::from_stored(&stored) {
                        outcomes.push((outcome, stored));
                    }
                }
                // A bus that recovers by itself (JetStream's ordered consumer) reports
                // the hiccup and goes on.
                Err(error) => tracing::warn!(%error, "the run's facts were interrupted"),
            }
        }
        {
            let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
            for (outcome, stored) in outcomes.drain(..) {
                state.take(outcome, stored, &mut ready);
            }
        }
        for (waiter, outcome) in ready.drain(..) {
            let _ = waiter.send(outcome);
        }
    }
    let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
    state.ended = true;
    state.waiters.clear();
}

impl WatchState {
    /// Takes in one outcome fact: to its waiters (put in `ready`), or kept until asked
    /// for; skipped if the call had an outcome already.
    fn take(
        &mut self,
        outcome: Outcome,
        stored: Stored,
        ready: &mut Vec<(oneshot::Sender<Outcome>, Outcome)>,
    ) {
        let id = outcome.call_id();
        // A call somebody waits for has had no outcome yet: `claim` leaves no waiter
        // for a call whose outcome arrived or was handed out. So the usual case, an
        // awaited outcome, needs no other look-up.
        let Some(mut waiters) = self.waiters.remove(id) else {
            // The first outcome of a call is its outcome.
            if !self.arrived.contains_key(id) && !self.handed_out.contains(id) {
                self.arrived.insert(id.clone(), stored);
            }
            return;
        };
        self.handed_out.insert(id);
        let last = waiters.pop();
        for waiter in waiters {
            ready.push((waiter, outcome.clone()));
        }
        if let Some(last) = last {
            ready.push((last, outcome));
        }
    }
}

/// Resolves once facts have arrived, having moved every one that is ready (up to
/// [`BATCH`]) into `into`; to `false` when the facts stop and none is left.
struct Arrived<'a> {
    facts: &'a mut Fuse<Facts>,
    into: &'a mut Vec<Result<Stored, BusError>>,
}

impl Future for Arrived<'_> {
    type Output = bool;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        let this = self.get_mut();
        while this.into.len() < BATCH {
            match Pin::new(&mut *this.facts).poll_next(cx) {
                Poll::Ready(Some(item)) => this.into.push(item),
                Poll::Ready(None) => return Poll::Ready(!this.into.is_empty()),
                Poll::Pending => break,
            }
        }
        if this.into.is_empty() {
            Poll::Pending
        } else {
            Poll::Ready(true)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::engine::{Engine, new_call_id, new_run_id};
    use crate::event::{self, TOOL_COMPLETED};
    use crate::ids::TenantId;

    /// Publishes a completed fact of `call` with `result` into `run`.
    async fn complete(engine: &Engine, run: &crate::ids::RunId, call: &CallId, result: i64) {
        let data = json!({"call_id": call, "name": "add", "result": result, "attempt": 1});
        let tenant = TenantId::default();
        let fact = engine.event(TOOL_COMPLETED, &tenant, run, Some(call), data);
        engine.publish(&fact).await.unwrap();
    }

    fn result(outcome: &Outcome) -> i64 {
        outcome
            .result()
            .and_then(serde_json::Value::as_i64)
            .unwrap()
    }

    #[tokio::test]
    async fn hands_out_each_call_s_first_outcome_once_whenever_it_is_asked_for() {
        let engine = Engine::embedded();
        let run = new_run_id();
        let filters = [event::subject(&TenantId::default(), &run, TOOL_COMPLETED)];
        let (early, late) = (new_call_id(), new_call_id());
        // One outcome arrives before anyone asks, with a duplicate after it.
        complete(&engine, &run, &early, 1).await;
        complete(&engine, &run, &early, 2).await;
        let watcher = Watcher::start(engine.bus().replay_any(&filters).await.unwrap());
        // The other is asked for before it arrives, by two callers.
        let waiting = [(); 2].map(|()| match watcher.claim(&late) {
            Claim::Waiting(receiver) => receiver,
            _ => panic!("nothing arrived for this call yet"),
        });
        complete(&engine, &run, &late, 3).await;
        for receiver in waiting {
            assert_eq!(result(&receiver.await.unwrap()), 3);
        }
        // The early one was kept: its first outcome, handed out once.
        let kept = match watcher.claim(&early) {
            Claim::Ready(outcome) => outcome,
            // Not read yet: wait for it.
            Claim::Waiting(receiver) => receiver.await.unwrap(),
            _ => panic!("the early outcome is kept until asked for"),
        };
        assert_eq!(
            result(&kept),
            1,
            "the first outcome of a call is its outcome"
        );
        assert!(matches!(watcher.claim(&early), Claim::HandedOut));
        assert!(matches!(watcher.claim(&late), Claim::HandedOut));
    }

    #[tokio::test]
    async fn a_caller_waiting_when_the_facts_stop_is_told() {
        let (tx, rx) = futures::channel::mpsc::unbounded::<Result<Stored, BusError>>();
        let watcher = Watcher::start(Box::pin(rx));
        let call = new_call_id();
        let Claim::Waiting(receiver) = watcher.claim(&call) else {
            panic!("nothing arrived");
        };
        drop(tx);
        assert!(
            receiver.await.is_err(),
            "the waiter is dropped, not left hanging"
        );
        assert!(matches!(watcher.claim(&call), Claim::Ended));
    }
}
