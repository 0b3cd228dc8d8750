//! [`Outcomes`]: how an engine waits for outcomes. One listener per tenant for the
//! whole engine, however many runs and calls it waits on, handing each outcome to
//! whoever waits for it.
//!
//! # Why a listener per tenant, and lookups by subject
//!
//! A wait must cost the bus's server nothing per run or per call: an engine that
//! opened a replay per run (as versions before 0.2 did, with a JetStream consumer
//! each) ran a busy server out of consumers at about a thousand concurrent runs. So
//! an engine holds one [`Bus::listen`] per tenant it waits in (on NATS: two core
//! subscriptions on the subjects the stream republishes outcomes on once it has
//! stored them, and one on its leader elections; no consumer), and routes what it
//! hears to the runs and calls in this process. Nothing is replayed: a wait on a run
//! with 100 000 earlier calls reads none of them.
//!
//! What the listener cannot have heard (an outcome stored before the wait began, for
//! a call requested elsewhere; anything while the connection was down) is looked up
//! by its subject: an outcome travels on a subject of its own call
//! (`aaa.<tenant>.<run>.tool.completed.<call>`), so [`Bus::first`] finds it in one
//! lookup. The order of the steps is what makes that enough:
//!
//! - a call requested through this engine is *expected* before its request is
//!   published, on a listener the server already holds, so its outcome cannot come
//!   and go unheard: it is kept until somebody asks, even once the bus no longer
//!   holds it (see [`Retention`](crate::bus::Retention));
//! - a wait for any other call (requested by another process, or asked for again after
//!   its outcome was handed out) leaves its waiter first, then looks the outcome up:
//!   an outcome stored before the waiter was left is found by the lookup, one stored
//!   after is heard;
//! - when the listener says it may have missed something (a reconnect, a new leader
//!   of a JetStream cluster's stream), every call still expected or waited for is
//!   looked up again; and every [`SWEEP`] the calls pending since before the last
//!   sweep are, which bounds what no listener can report (a republish lost between
//!   two servers of a cluster) to twice that interval.
//!
//! The first outcome of a call is its outcome: once a call's outcome is handed out (or
//! kept), a later one (a republish after a takeover) is ignored. An outcome nobody in
//! this process expects is dropped as it arrives, so a listener's memory follows the
//! calls this process waits for, not the tenant's traffic. A run's waits are dropped
//! with the last handle on the run.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::stream::{BoxStream, Fuse};
use futures::{Stream, StreamExt};
use smallvec::SmallVec;
use tokio::sync::{OnceCell, oneshot};

use crate::bus::{Bus, BusError, Stored};
use crate::ids::{CallId, RunId, TenantId};
use crate::names;
use crate::outcome::Outcome;

/// The most facts the listener takes from the bus in one go.
const BATCH: usize = 256;

/// How many lookups a listener makes at once after a reconnect.
const LOOKUPS_AT_ONCE: usize = 32;

/// The fast hasher of the maps here: ids are long, and the seed is per process.
type Hasher = foldhash::fast::RandomState;

/// Who waits for one call's outcome: nearly always one caller, held without an
/// allocation of its own.
type Waiters = SmallVec<[oneshot::Sender<Outcome>; 1]>;

/// An engine's outcome waiting: one [`TenantOutcomes`] per tenant it waits in.
pub(crate) struct Outcomes {
    bus: Arc<dyn Bus>,
    tenants: Mutex<HashMap<TenantId, Arc<TenantOutcomes>, Hasher>>,
}

impl Outcomes {
    pub(crate) fn new(bus: Arc<dyn Bus>) -> Self {
        Outcomes {
            bus,
            tenants: Mutex::default(),
        }
    }

    /// The waits of `tenant`, listening once [`TenantOutcomes::listening`] returns.
    pub(crate) fn tenant(&self, tenant: &TenantId) -> Arc<TenantOutcomes> {
        let mut tenants = self.tenants.lock().unwrap_or_else(|p| p.into_inner());
        tenants
            .entry(tenant.clone())
            .or_insert_with(|| {
                Arc::new(TenantOutcomes {
                    tenant: tenant.clone(),
                    bus: self.bus.clone(),
                    waits: Arc::default(),
                    listener: OnceCell::new(),
                })
            })
            .clone()
    }
}

/// The outcomes of one tenant's calls that this engine expects or waits for.
pub(crate) struct TenantOutcomes {
    tenant: TenantId,
    bus: Arc<dyn Bus>,
    waits: Arc<Mutex<Waits>>,
    /// The listener's task, started by the first run handle that needs it.
    listener: OnceCell<Listener>,
}

/// The listener's task, stopped when the engine goes.
struct Listener(tokio::task::JoinHandle<()>);

impl Drop for Listener {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[derive(Default)]
struct Waits {
    runs: HashMap<RunId, RunWaits, Hasher>,
    /// How many sweeps the listener has made.
    sweeps: u64,
    /// The listener stopped (the bus closed): nobody who waits now will be answered.
    ended: bool,
}

impl Waits {
    /// The waits of `run`, made when it has none.
    fn run(&mut self, run: &RunId) -> &mut RunWaits {
        self.runs.entry(run.clone()).or_default()
    }
}

/// One run's expected and awaited calls, and how many handles on the run are open.
#[derive(Default)]
struct RunWaits {
    handles: usize,
    calls: HashMap<CallId, Slot, Hasher>,
}

/// Where one call's outcome stands. `born` is the sweep count when the call was first
/// expected or waited for (see [`SWEEP`]).
enum Slot {
    /// Requested through this engine; nobody asked for the outcome yet. `reused` when
    /// the call id was the caller's: it may name a call that finished before this
    /// engine listened (asked for again), whose repeated request the bus takes as a
    /// duplicate, so no outcome is heard for it and the claim looks it up.
    Expected { born: u64, reused: bool },
    /// Arrived before anybody asked: kept until somebody does.
    Arrived(Outcome),
    /// Somebody waits for it.
    Waiting { waiters: Waiters, born: u64 },
}

impl Slot {
    /// When the call was first expected or waited for, while it still is.
    fn pending_since(&self) -> Option<u64> {
        match self {
            Slot::Expected { born, .. } | Slot::Waiting { born, .. } => Some(*born),
            Slot::Arrived(_) => None,
        }
    }
}

/// What a caller asking for one call's outcome gets.
pub(crate) enum Claim {
    /// The outcome, which had arrived.
    Ready(Outcome),
    /// It comes through this; when `look_up` is set the listener may not hear of it
    /// (the call was not expected), and the caller looks it up on the bus.
    Waiting {
        receiver: oneshot::Receiver<Outcome>,
        look_up: bool,
    },
    /// The listener stopped; nothing will arrive.
    Ended,
}

impl TenantOutcomes {
    /// Starts the listener, once: when this returns, every outcome the bus stores from
    /// now on reaches it.
    pub(crate) async fn listening(&self) -> Result<(), BusError> {
        self.listener
            .get_or_try_init(|| async {
                let filters = names::tenant_outcome_filters(&self.tenant);
                let stored = self.bus.listen(&filters).await?;
                let task = tokio::spawn(listen(
                    stored,
                    self.waits.clone(),
                    self.bus.clone(),
                    self.tenant.clone(),
                ));
                Ok(Listener(task))
            })
            .await
            .map(|_| ())
    }

    /// A handle on `run` opened: its waits are kept until the last one closes.
    pub(crate) fn open_run(&self, run: &RunId) {
        let mut waits = self.lock();
        waits.runs.entry(run.clone()).or_default().handles += 1;
    }

    /// A handle on `run` closed: the last one drops the run's waits.
    pub(crate) fn close_run(&self, run: &RunId) {
        let mut waits = self.lock();
        if let Some(runs) = waits.runs.get_mut(run) {
            runs.handles -= 1;
            if runs.handles == 0 {
                waits.runs.remove(run);
            }
        }
    }

    /// `call` of `run` is about to be requested through this engine: its outcome is
    /// kept when it arrives, whenever it is asked for. `reused` when the caller chose
    /// the id (see [`Slot::Expected`]); a fresh id cannot have an outcome yet.
    pub(crate) fn expect(&self, run: &RunId, call: &CallId, reused: bool) {
        let mut waits = self.lock();
        let born = waits.sweeps;
        let calls = &mut waits.run(run).calls;
        calls
            .entry(call.clone())
            .or_insert(Slot::Expected { born, reused });
    }

    /// Takes the outcome of `call` if it arrived, or leaves a waiter for it.
    pub(crate) fn claim(&self, run: &RunId, call: &CallId) -> Claim {
        let mut waits = self.lock();
        if waits.ended {
            return Claim::Ended;
        }
        let born = waits.sweeps;
        let calls = &mut waits.run(run).calls;
        let (sender, receiver) = oneshot::channel();
        let look_up = match calls.get_mut(call) {
            Some(Slot::Arrived(_)) => {
                let Some(Slot::Arrived(outcome)) = calls.remove(call) else {
                    unreachable!("matched above")
                };
                return Claim::Ready(outcome);
            }
            Some(Slot::Waiting { waiters, .. }) => {
                waiters.push(sender);
                // Whoever waited first looked it up (or the call was expected).
                false
            }
            Some(slot @ Slot::Expected { .. }) => {
                let Slot::Expected { born, reused } = *slot else {
                    unreachable!("matched above")
                };
                let waiters = SmallVec::from_buf([sender]);
                *slot = Slot::Waiting { waiters, born };
                reused
            }
            None => {
                let waiters = SmallVec::from_buf([sender]);
                calls.insert(call.clone(), Slot::Waiting { waiters, born });
                true
            }
        };
        Claim::Waiting { receiver, look_up }
    }

    /// Looks the outcome of `call` up on the bus and hands it over if it is there,
    /// trying again while the bus is unavailable (see [`look_up_retrying`]).
    pub(crate) async fn look_up(&self, run: &RunId, call: &CallId) -> Result<(), BusError> {
        look_up_retrying(&*self.bus, &self.waits, &self.tenant, run, call).await
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Waits> {
        lock(&self.waits)
    }
}

fn lock(waits: &Mutex<Waits>) -> std::sync::MutexGuard<'_, Waits> {
    waits.lock().unwrap_or_else(|p| p.into_inner())
}

/// The first outcome fact of one call the bus holds, found by its subject: one
/// lookup, or two when the call's cancel came before its outcome.
pub(crate) async fn first_outcome(
    bus: &dyn Bus,
    tenant: &TenantId,
    run: &RunId,
    call: &CallId,
) -> Result<Option<Stored>, BusError> {
    let filter = names::outcome_filter(tenant, run, call);
    let Some(stored) = bus.first(&filter).await? else {
        return Ok(None);
    };
    if names::cancel_of_subject(&stored.subject).is_none() {
        return Ok(Some(stored));
    }
    // The call's cancel (on the same `tool.<how>.<call>` layout) came before its
    // outcome: look for each kind of outcome on its own subject. Only cancelled calls
    // pay for the two lookups.
    let mut found = None;
    for subject in names::outcome_subjects(tenant, run, call) {
        if let Some(outcome) = bus.first(&subject).await?
            && found.as_ref().is_none_or(|f: &Stored| outcome.seq < f.seq)
        {
            found = Some(outcome);
        }
    }
    Ok(found)
}

/// Looks one call's outcome up by its subject and hands it over.
async fn look_up(
    bus: &dyn Bus,
    waits: &Mutex<Waits>,
    tenant: &TenantId,
    run: &RunId,
    call: &CallId,
) -> Result<(), BusError> {
    let Some(stored) = first_outcome(bus, tenant, run, call).await? else {
        return Ok(());
    };
    let mut ready = Vec::new();
    if let Some(found) = parse(&stored) {
        hand_over(&mut lock(waits), found, &mut ready);
    }
    for (waiter, outcome) in ready {
        let _ = waiter.send(outcome);
    }
    Ok(())
}

/// The first wait between two lookups of one outcome while the bus is unavailable.
const FIRST_RETRY: std::time::Duration = std::time::Duration::from_millis(50);
/// The longest.
const LAST_RETRY: std::time::Duration = std::time::Duration::from_secs(2);

/// [`look_up`], tried again with a growing pause (up to [`LAST_RETRY`]) while the bus
/// is unavailable (a server failing over), for as long as the call's outcome is still
/// waited for or expected: a lookup that fails leaves a waiter that nothing but a
/// lookup may answer, so giving up would leave it hanging. A permanent error (an
/// invalid filter) is returned.
async fn look_up_retrying(
    bus: &dyn Bus,
    waits: &Mutex<Waits>,
    tenant: &TenantId,
    run: &RunId,
    call: &CallId,
) -> Result<(), BusError> {
    let mut pause = FIRST_RETRY;
    loop {
        match look_up(bus, waits, tenant, run, call).await {
            Err(error) if error.is_transient() => {
                let pending = lock(waits)
                    .runs
                    .get(run)
                    .and_then(|r| r.calls.get(call))
                    .is_some_and(|slot| slot.pending_since().is_some());
                if !pending {
                    return Ok(());
                }
                tracing::warn!(%error, %run, %call, "could not look an outcome up; trying again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(LAST_RETRY);
            }
            done => return done,
        }
    }
}

/// An outcome as the listener hears it: its run, its call and the outcome.
struct Found {
    /// The fact's subject, which names the run.
    subject: Arc<str>,
    /// Where the run lies in the subject.
    run: std::ops::Range<usize>,
    outcome: Outcome,
}

impl Found {
    /// The run the subject names.
    fn run(&self) -> &str {
        &self.subject[self.run.clone()]
    }
}

/// The run, call and outcome a stored fact carries, when it is an outcome whose data
/// names the call its subject names (the subject is the authority; a fact whose data
/// says otherwise is skipped, and said so).
fn parse(stored: &Stored) -> Option<Found> {
    let subject = names::OutcomeSubject::parse(&stored.subject)?;
    let call = subject.call;
    let outcome = Outcome::from_stored(stored, subject.completed)?;
    if outcome.call_id().as_str() != call {
        tracing::warn!(subject = %stored.subject, call_id = %outcome.call_id(),
            "skipping an outcome whose data names another call than its subject");
        return None;
    }
    // A run token that is no valid id names no run waited on here: it is simply not
    // found in the map.
    Some(Found {
        subject: stored.subject.clone(),
        run: subject.run,
        outcome,
    })
}

/// Takes in one outcome: to its waiters (put in `ready`), or kept if the call is
/// expected; ignored if the call had an outcome already or nobody here expects it.
fn hand_over(
    waits: &mut Waits,
    found: Found,
    ready: &mut Vec<(oneshot::Sender<Outcome>, Outcome)>,
) {
    let Some(calls) = waits.runs.get_mut(found.run()).map(|r| &mut r.calls) else {
        return;
    };
    let Some(slot) = calls.get_mut(found.outcome.call_id()) else {
        return;
    };
    match slot {
        Slot::Expected { .. } => *slot = Slot::Arrived(found.outcome),
        Slot::Waiting { .. } => {
            let Some(Slot::Waiting { mut waiters, .. }) = calls.remove(found.outcome.call_id())
            else {
                unreachable!("matched above")
            };
            let last = waiters.pop();
            for waiter in waiters {
                ready.push((waiter, found.outcome.clone()));
            }
            if let Some(last) = last {
                ready.push((last, found.outcome));
            }
        }
        Slot::Arrived(_) => {}
    }
}

/// How often the listener sweeps: each call expected or waited for since before the
/// last sweep is looked up. A safety net under the listener: a server republishes an
/// outcome after storing it, and a server that dies between the two (a cluster's
/// stream leader, killed) stored an outcome nobody hears of. A JetStream listener
/// reports the leader changes it sees, which makes the lookups at once; the sweep
/// bounds what it cannot see (a route between two servers lost without a change of
/// leader) to twice this, and costs one lookup per interval for each call waited on
/// for longer.
const SWEEP: std::time::Duration = std::time::Duration::from_secs(15);

/// Which calls a lookup round covers.
#[derive(Clone, Copy)]
enum Round {
    /// Every call expected or waited for: the listener may have missed something.
    All,
    /// Those pending since before sweep number `before`.
    OlderThan(u64),
}

/// The listener's task: hands out outcomes until the bus closes. Lookups run beside
/// it (in `lookups`, stopped with it), so a round of them never holds up what the
/// listener hears meanwhile.
async fn listen(
    stored: BoxStream<'static, Result<Stored, BusError>>,
    waits: Arc<Mutex<Waits>>,
    bus: Arc<dyn Bus>,
    tenant: TenantId,
) {
    let mut stored = stored.fuse();
    let mut items = Vec::with_capacity(BATCH);
    let mut found = Vec::new();
    let mut ready = Vec::new();
    let mut lookups = tokio::task::JoinSet::new();
    let mut sweep = tokio::time::interval_at(tokio::time::Instant::now() + SWEEP, SWEEP);
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        while lookups.try_join_next().is_some() {}
        let arrived = Arrived {
            stored: &mut stored,
            into: &mut items,
        };
        let round = tokio::select! {
            more = arrived => {
                if !more {
                    break;
                }
                None
            }
            _ = sweep.tick() => {
                let mut waits = lock(&waits);
                waits.sweeps += 1;
                Some(Round::OlderThan(waits.sweeps - 1))
            }
        };
        let mut round = round;
        for item in items.drain(..) {
            match item {
                Ok(stored) => found.extend(parse(&stored)),
                Err(error) => {
                    tracing::warn!(%error, "outcomes may have been missed; looking up every awaited call");
                    round = Some(Round::All);
                }
            }
        }
        {
            let mut waits = lock(&waits);
            for one in found.drain(..) {
                hand_over(&mut waits, one, &mut ready);
            }
        }
        for (waiter, outcome) in ready.drain(..) {
            let _ = waiter.send(outcome);
        }
        if let Some(round) = round {
            let (bus, waits, tenant) = (bus.clone(), waits.clone(), tenant.clone());
            lookups.spawn(async move { look_up_all(&*bus, &waits, &tenant, round).await });
        }
    }
    let mut waits = lock(&waits);
    waits.ended = true;
    for run in waits.runs.values_mut() {
        run.calls.clear();
    }
}

/// Looks up the calls of `round` still expected or waited for.
async fn look_up_all(bus: &dyn Bus, waits: &Mutex<Waits>, tenant: &TenantId, round: Round) {
    let pending: Vec<(RunId, CallId)> = {
        let waits = lock(waits);
        let covered = |born: u64| match round {
            Round::All => true,
            Round::OlderThan(sweep) => born < sweep,
        };
        waits
            .runs
            .iter()
            .flat_map(|(run, r)| {
                r.calls
                    .iter()
                    .filter(|(_, slot)| slot.pending_since().is_some_and(covered))
                    .map(move |(call, _)| (run.clone(), call.clone()))
            })
            .collect()
    };
    futures::stream::iter(pending)
        .for_each_concurrent(LOOKUPS_AT_ONCE, |(run, call)| async move {
            if let Err(error) = look_up_retrying(bus, waits, tenant, &run, &call).await {
                tracing::warn!(%error, %run, %call, "could not look an outcome up");
            }
        })
        .await;
}

/// Resolves once facts have arrived, having moved every one that is ready (up to
/// [`BATCH`]) into `into`; to `false` when the facts stop and none is left. The
/// listener handles what arrived at once: one lock for the lot, then the waiters
/// woken back to back, so a caller on another thread wakes once for the lot; its
/// buffers are kept from one wake to the next.
struct Arrived<'a> {
    stored: &'a mut Fuse<BoxStream<'static, Result<Stored, BusError>>>,
    into: &'a mut Vec<Result<Stored, BusError>>,
}

impl Future for Arrived<'_> {
    type Output = bool;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        let this = self.get_mut();
        while this.into.len() < BATCH {
            match Pin::new(&mut *this.stored).poll_next(cx) {
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
    use crate::event::TOOL_COMPLETED;

    /// Publishes a completed fact of `call` with `result` into `run`.
    async fn complete(engine: &Engine, run: &RunId, call: &CallId, result: i64) {
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

    /// What `claim` gives, awaited.
    async fn claimed(outcomes: &TenantOutcomes, run: &RunId, call: &CallId) -> Option<Outcome> {
        match outcomes.claim(run, call) {
            Claim::Ready(outcome) => Some(outcome),
            Claim::Waiting { receiver, look_up } => {
                if look_up {
                    outcomes.look_up(run, call).await.unwrap();
                }
                receiver.await.ok()
            }
            Claim::Ended => None,
        }
    }

    /// The waits of the default tenant on `engine`'s bus, listening, with `run` open.
    async fn listening(engine: &Engine, run: &RunId) -> Arc<TenantOutcomes> {
        let outcomes = Outcomes::new(engine.bus().clone()).tenant(&TenantId::default());
        outcomes.listening().await.unwrap();
        outcomes.open_run(run);
        outcomes
    }

    #[tokio::test]
    async fn an_expected_outcome_is_kept_until_asked_for_and_the_first_one_counts() {
        let engine = Engine::embedded();
        let run = new_run_id();
        let outcomes = listening(&engine, &run).await;
        let (early, late) = (new_call_id(), new_call_id());
        outcomes.expect(&run, &early, false);
        outcomes.expect(&run, &late, false);
        // One outcome arrives before anyone asks, with a repeat after it.
        complete(&engine, &run, &early, 1).await;
        complete(&engine, &run, &early, 2).await;
        // The other is asked for before it arrives, by two callers.
        let waiting = [(); 2].map(|()| match outcomes.claim(&run, &late) {
            Claim::Waiting { receiver, look_up } => {
                assert!(!look_up, "an expected call needs no lookup");
                receiver
            }
            _ => panic!("nothing arrived for this call yet"),
        });
        complete(&engine, &run, &late, 3).await;
        for receiver in waiting {
            assert_eq!(result(&receiver.await.unwrap()), 3);
        }
        let kept = claimed(&outcomes, &run, &early).await.unwrap();
        assert_eq!(
            result(&kept),
            1,
            "the first outcome of a call is its outcome"
        );
        // Asked again: looked up on the bus, the same first outcome.
        let again = claimed(&outcomes, &run, &early).await.unwrap();
        assert_eq!(result(&again), 1);
    }

    #[tokio::test]
    async fn a_call_requested_elsewhere_is_found_before_and_after_it_is_stored() {
        let engine = Engine::embedded();
        let run = new_run_id();
        let (before, after) = (new_call_id(), new_call_id());
        complete(&engine, &run, &before, 7).await;
        let outcomes = listening(&engine, &run).await;
        assert_eq!(result(&claimed(&outcomes, &run, &before).await.unwrap()), 7);
        let Claim::Waiting { receiver, look_up } = outcomes.claim(&run, &after) else {
            panic!("not stored yet");
        };
        assert!(look_up, "a call nobody here requested is looked up");
        outcomes.look_up(&run, &after).await.unwrap();
        complete(&engine, &run, &after, 8).await;
        assert_eq!(result(&receiver.await.unwrap()), 8);
    }

    #[tokio::test]
    async fn an_outcome_whose_data_names_another_call_is_not_handed_out() {
        let engine = Engine::embedded();
        let run = new_run_id();
        let outcomes = listening(&engine, &run).await;
        let (call, other) = (new_call_id(), new_call_id());
        outcomes.expect(&run, &call, false);
        // On `call`'s subject, saying it is `other`'s outcome.
        let data = json!({"call_id": other, "name": "add", "result": 1, "attempt": 1});
        let tenant = TenantId::default();
        let fact = engine.event(TOOL_COMPLETED, &tenant, &run, Some(&other), data);
        let subject = names::event_subject(&tenant, &run, TOOL_COMPLETED, Some(&call));
        let bytes = fact.to_bytes();
        engine
            .bus()
            .publish(&subject, bytes.into(), None)
            .await
            .unwrap();
        complete(&engine, &run, &call, 2).await;
        assert_eq!(result(&claimed(&outcomes, &run, &call).await.unwrap()), 2);
    }

    /// Waits of the default tenant on `engine`'s bus whose listener hears only what is
    /// sent into the returned channel (lookups go to the bus).
    fn fed_by_hand(
        engine: &Engine,
    ) -> (
        futures::channel::mpsc::UnboundedSender<Result<Stored, BusError>>,
        TenantOutcomes,
    ) {
        let (heard, stream) = futures::channel::mpsc::unbounded();
        let waits = Arc::new(Mutex::new(Waits::default()));
        let (bus, tenant) = (engine.bus().clone(), TenantId::default());
        let task = tokio::spawn(listen(
            Box::pin(stream),
            waits.clone(),
            bus.clone(),
            tenant.clone(),
        ));
        let outcomes = TenantOutcomes {
            tenant,
            bus,
            waits,
            listener: OnceCell::new_with(Some(Listener(task))),
        };
        (heard, outcomes)
    }

    /// A listener that says it may have missed something makes every awaited call be
    /// looked up; one whose facts stop answers its waiters (they see the end).
    #[tokio::test]
    async fn a_gap_in_the_listener_is_filled_by_lookups_and_an_end_is_told() {
        let engine = Engine::embedded();
        let (run, call) = (new_run_id(), new_call_id());
        let (heard, outcomes) = fed_by_hand(&engine);
        outcomes.open_run(&run);
        outcomes.expect(&run, &call, false);
        let Claim::Waiting { receiver, .. } = outcomes.claim(&run, &call) else {
            panic!("nothing heard");
        };
        // Stored, but the listener never hears of it: only the lookup finds it.
        complete(&engine, &run, &call, 5).await;
        heard
            .unbounded_send(Err(BusError::Unavailable("reconnected".into())))
            .unwrap();
        // Bounded, so that a listener that does not look up fails here, not hangs.
        let found = tokio::time::timeout(std::time::Duration::from_secs(10), receiver).await;
        assert_eq!(result(&found.expect("looked up").unwrap()), 5);

        let waiting = new_call_id();
        let Claim::Waiting { receiver, .. } = outcomes.claim(&run, &waiting) else {
            panic!("nothing heard");
        };
        drop(heard);
        assert!(
            receiver.await.is_err(),
            "the waiter is dropped, not left hanging"
        );
        assert!(matches!(outcomes.claim(&run, &waiting), Claim::Ended));
    }

    /// An outcome no listener heard of, and no gap reported: the sweep finds it.
    #[tokio::test(start_paused = true)]
    async fn a_call_waited_on_for_long_is_looked_up_by_the_sweep() {
        let engine = Engine::embedded();
        let (run, call) = (new_run_id(), new_call_id());
        let (_heard, outcomes) = fed_by_hand(&engine);
        outcomes.open_run(&run);
        outcomes.expect(&run, &call, false);
        let Claim::Waiting { receiver, .. } = outcomes.claim(&run, &call) else {
            panic!("nothing heard");
        };
        complete(&engine, &run, &call, 9).await;
        let started = tokio::time::Instant::now();
        let found = tokio::time::timeout(SWEEP * 3, receiver).await;
        assert_eq!(result(&found.expect("found by a sweep").unwrap()), 9);
        assert!(started.elapsed() >= SWEEP, "not before a sweep");
    }

    /// A call asked for again under the caller's id after it finished: the repeated
    /// request stores nothing new, so no listener hears of it; the claim looks it up
    /// at once rather than leaving it to a sweep.
    #[tokio::test(start_paused = true)]
    async fn a_reused_call_id_is_looked_up_when_claimed() {
        let engine = Engine::embedded();
        let (run, call) = (new_run_id(), new_call_id());
        complete(&engine, &run, &call, 4).await;
        let (_heard, outcomes) = fed_by_hand(&engine);
        outcomes.open_run(&run);
        outcomes.expect(&run, &call, true);
        let found = tokio::time::timeout(SWEEP / 2, claimed(&outcomes, &run, &call)).await;
        assert_eq!(result(&found.expect("found before a sweep").unwrap()), 4);
    }

    #[tokio::test]
    async fn the_last_handle_on_a_run_drops_its_waits() {
        let engine = Engine::embedded();
        let run = new_run_id();
        let outcomes = listening(&engine, &run).await;
        outcomes.open_run(&run);
        outcomes.expect(&run, &new_call_id(), false);
        outcomes.close_run(&run);
        assert_eq!(outcomes.lock().runs[&run].calls.len(), 1);
        outcomes.close_run(&run);
        assert!(outcomes.lock().runs.is_empty());
    }
}
