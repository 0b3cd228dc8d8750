//! Cancels: how a worker hears that a caller cancelled a call
//! ([`RunHandle::cancel`](crate::RunHandle::cancel)) and stops it.
//!
//! # How it works
//!
//! A cancel is a fact, `aaa.tool.cancelled`, on the call's own subject
//! (`aaa.<tenant>.<run>.tool.cancelled.<call>`). Every executor holds one
//! [`Bus::listen`](crate::bus::Bus::listen) on every tenant's cancels, opened before it
//! takes its first request: on NATS a core subscription on the subject the stream
//! republishes the fact on once stored (the rule that republishes outcomes covers it),
//! so listening costs the server nothing per call, run or tenant. What it hears:
//!
//! - a call this worker handles (registered by [`Cancels::watch`] from the moment its
//!   request is admitted until it is settled) is told: a call not started yet never
//!   starts, a running tool's [`ToolContext::cancelled`](crate::ToolContext::cancelled)
//!   fires (see the `attempt` module for the grace it gets);
//! - a call waiting for approval, which no worker holds, is failed as `cancelled` by
//!   whichever worker's compare-and-set on its approval record wins;
//! - anything else is remembered ([`HEARD`] cancels at most) for a request that
//!   reaches this worker later, and otherwise ignored: a call running elsewhere is
//!   stopped by the worker that hears it there, a finished or unknown call has
//!   nothing to stop.
//!
//! What no listener heard (a cancel stored before this worker listened, or while its
//! connection was being re-made, or one forgotten to keep [`HEARD`]) is looked up
//! with [`Bus::first`](crate::bus::Bus::first) on the call's cancel subject, but only
//! for a call that could have one: the worker keeps a *horizon*, the bus's last
//! sequence number when it began to listen (moved on after each gap, and to the
//! newest cancel it forgot), and a call whose carrying message was stored after the
//! horizon cannot have a cancel this worker missed (a cancel follows its request).
//! So a call costs one map insert and removal on the way, and a lookup only when it
//! was requested before the worker listened (a backlog after a restart) or when a
//! granted approval starts it (rare, and slow anyway: a human decided). A lookup per
//! call was measured against this and rejected: the embedded bus answers `first`
//! from a run's index, which a long run (the `dispatch` bench makes 400 000 calls in
//! one) makes a scan.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::sync::Notify;

use super::call::Call;
use super::core::Core;
use crate::bus::{BusError, Stored};
use crate::event::{Event, ToolCancelled};
use crate::ids::{CallId, RunId, TenantId};
use crate::names;

/// How many cancels of calls not handled here a worker remembers.
pub(super) const HEARD: usize = 4096;

/// A call, across tenants and runs.
type Key = (TenantId, RunId, CallId);

/// The fast hasher of the maps here.
type Hasher = foldhash::fast::RandomState;

/// A worker's cancels: the calls it handles, the cancels it heard, and its horizon.
pub(super) struct Cancels {
    handled: Mutex<HashMap<Key, (Arc<Signal>, usize), Hasher>>,
    heard: Mutex<Heard>,
    /// The bus's last sequence number when the listener began (or last re-began)
    /// hearing everything; `u64::MAX` while unknown.
    listened_from: AtomicU64,
    /// The newest cancel forgotten to keep the memory bounded.
    forgotten: AtomicU64,
}

/// Cancels heard for calls not handled here when they came, oldest first.
#[derive(Default)]
struct Heard {
    calls: HashMap<Key, Option<String>, Hasher>,
    order: VecDeque<(Key, u64)>,
}

impl Default for Cancels {
    fn default() -> Self {
        Cancels {
            handled: Mutex::default(),
            heard: Mutex::default(),
            listened_from: AtomicU64::new(u64::MAX),
            forgotten: AtomicU64::new(0),
        }
    }
}

/// Whether one call was cancelled, and why: shared by every handling of the call on
/// this worker.
#[derive(Default)]
pub(super) struct Signal {
    fired: AtomicBool,
    notify: Notify,
    reason: Mutex<Option<String>>,
}

impl Signal {
    fn fire(&self, reason: Option<String>) {
        if self.fired.load(Ordering::Acquire) {
            return;
        }
        *self.reason.lock().unwrap_or_else(|p| p.into_inner()) = reason;
        self.fired.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }
}

/// One handling of a call, registered with the worker's [`Cancels`] until dropped.
pub(super) struct Watch<'a> {
    cancels: &'a Cancels,
    key: Key,
    signal: Arc<Signal>,
}

impl Watch<'_> {
    /// Whether the caller cancelled the call.
    pub(super) fn is_cancelled(&self) -> bool {
        self.signal.fired.load(Ordering::Acquire)
    }

    /// Resolves once the caller cancels the call.
    pub(super) async fn cancelled(&self) {
        loop {
            let notified = self.signal.notify.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }

    /// Why the caller cancelled, when it said.
    pub(super) fn reason(&self) -> Option<String> {
        self.signal
            .reason
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        let mut handled = self.cancels.lock_handled();
        if let Some((_, count)) = handled.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                handled.remove(&self.key);
            }
        }
    }
}

impl Cancels {
    fn lock_handled(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<Key, (Arc<Signal>, usize), Hasher>> {
        self.handled.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_heard(&self) -> std::sync::MutexGuard<'_, Heard> {
        self.heard.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a handling of `call`, carried by a message stored at `seq`, and
    /// finds out whether it was cancelled already: a cancel this worker heard, or one
    /// stored that it may have missed (looked up when `seq` is not past the horizon,
    /// or when `look_up`).
    pub(super) async fn watch<'a>(
        &'a self,
        core: &Core,
        call: &Call,
        seq: u64,
        look_up: bool,
    ) -> Watch<'a> {
        let key = (call.tenant.clone(), call.run.clone(), call.call_id.clone());
        let signal = {
            let mut handled = self.lock_handled();
            let (signal, count) = handled
                .entry(key.clone())
                .or_insert_with(|| (Arc::default(), 0));
            *count += 1;
            signal.clone()
        };
        let watch = Watch {
            cancels: self,
            key,
            signal,
        };
        // Registered first: a cancel stored from now on is heard, one before is
        // found below.
        let heard = {
            let heard = self.lock_heard();
            heard.calls.get(&watch.key).cloned()
        };
        if let Some(reason) = heard {
            watch.signal.fire(reason);
        } else if (look_up || seq <= self.horizon())
            && let Some(reason) = stored_cancel(core, &watch.key).await
        {
            watch.signal.fire(reason);
        }
        watch
    }

    /// The horizon: a call carried by a message stored at or before it may have a
    /// cancel this worker did not hear.
    fn horizon(&self) -> u64 {
        self.listened_from
            .load(Ordering::Acquire)
            .max(self.forgotten.load(Ordering::Acquire))
    }

    /// Takes in a cancel heard at `seq`: tells the handling of the call here, or
    /// remembers it. Returns whether no handling here was told (so the call may be
    /// waiting for approval).
    fn hear(&self, key: Key, seq: u64, reason: Option<String>) -> bool {
        if let Some((signal, _)) = self.lock_handled().get(&key) {
            signal.fire(reason.clone());
            self.remember(key, seq, reason);
            return false;
        }
        self.remember(key, seq, reason);
        true
    }

    /// Remembers a cancel (for a request that reaches this worker later, or comes
    /// again), forgetting the oldest beyond [`HEARD`] and moving the horizon past it.
    fn remember(&self, key: Key, seq: u64, reason: Option<String>) {
        let mut heard = self.lock_heard();
        if heard.calls.insert(key.clone(), reason).is_none() {
            heard.order.push_back((key, seq));
        }
        while heard.order.len() > HEARD {
            let Some((oldest, seq)) = heard.order.pop_front() else {
                break;
            };
            heard.calls.remove(&oldest);
            self.forgotten.fetch_max(seq, Ordering::AcqRel);
        }
    }

    /// The calls handled here now.
    fn handled_now(&self) -> Vec<(Key, Arc<Signal>)> {
        self.lock_handled()
            .iter()
            .map(|(key, (signal, _))| (key.clone(), signal.clone()))
            .collect()
    }
}

/// The reason of a cancel of `key` stored on the bus, `Some(None)` for one without a
/// reason; `None` when there is none, or when the bus could not say within a
/// heartbeat (the call goes on, as it would had the cancel come after it finished).
/// Bounded: nothing tells the bus the call's message is being worked on while the
/// lookup waits, and a server failing over answers late or never.
async fn stored_cancel(core: &Core, (tenant, run, call): &Key) -> Option<Option<String>> {
    let subject = names::cancel_subject(tenant, run, call);
    let looked = tokio::time::timeout(core.heartbeat(), core.engine.bus().first(&subject)).await;
    match looked {
        Ok(Ok(Some(stored))) => Some(reason_of(&stored)),
        Ok(Ok(None)) => None,
        Ok(Err(error)) => {
            tracing::warn!(%error, %call, "could not look for a cancel of the call; it goes on");
            None
        }
        Err(_) => {
            tracing::warn!(%call, "the bus did not say in time whether the call was cancelled; it goes on");
            None
        }
    }
}

/// The reason a cancel fact gives, if it is readable and gives one.
fn reason_of(stored: &Stored) -> Option<String> {
    Event::from_bytes(&stored.payload)
        .and_then(|event| event.into_data::<ToolCancelled>())
        .ok()
        .and_then(|cancelled| cancelled.reason)
}

/// Opens the executor's listener on every cancel, and sets the horizon: what it
/// returns hears every cancel stored from now on.
pub(super) async fn listen(
    core: &Core,
) -> Result<BoxStream<'static, Result<Stored, BusError>>, BusError> {
    let bus = core.engine.bus();
    let heard = bus.listen(&[names::ALL_CANCELS.to_owned()]).await?;
    let last = bus.last_seq().await?;
    core.cancels
        .listened_from
        .store(last.unwrap_or(u64::MAX), Ordering::Release);
    Ok(heard)
}

/// The first wait between two attempts to read the bus's position after a gap.
const POSITION_RETRY: Duration = Duration::from_millis(100);

/// Hears cancels until the executor stops (see the [module docs](self)).
pub(super) async fn hear_cancels(
    core: Arc<Core>,
    mut heard: BoxStream<'static, Result<Stored, BusError>>,
) {
    loop {
        let item = tokio::select! {
            item = heard.next() => item,
            _ = core.stop.cancelled() => return,
        };
        match item {
            None => return,
            Some(Ok(stored)) => {
                let Some(key) = names::cancel_of_subject(&stored.subject) else {
                    continue;
                };
                let reason = reason_of(&stored);
                if core.cancels.hear(key.clone(), stored.seq, reason.clone()) {
                    // Perhaps waiting for approval: settled apart, so a slow store
                    // holds up no other cancel.
                    let core = core.clone();
                    tokio::spawn(async move {
                        super::approval::cancel_pending(&core, key, reason.as_deref()).await;
                    });
                }
            }
            Some(Err(gap)) => {
                tracing::debug!(%gap, "cancels may have been missed; looking them up");
                core.cancels
                    .listened_from
                    .store(u64::MAX, Ordering::Release);
                tokio::spawn(after_gap(core.clone()));
            }
        }
    }
}

/// After a gap in what the listener heard: the horizon moves to the bus's position
/// (every call carried before it looks its cancel up), and each call handled here
/// now looks its cancel up.
async fn after_gap(core: Arc<Core>) {
    let mut pause = POSITION_RETRY;
    loop {
        match core.engine.bus().last_seq().await {
            Ok(last) => {
                core.cancels
                    .listened_from
                    .store(last.unwrap_or(u64::MAX), Ordering::Release);
                break;
            }
            Err(error) => {
                tracing::warn!(%error, "could not read the bus's position; every call looks for a cancel until it can");
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = core.stop.cancelled() => return,
                }
                pause = (pause * 2).min(Duration::from_secs(5));
            }
        }
    }
    for (key, signal) in core.cancels.handled_now() {
        if let Some(reason) = stored_cancel(&core, &key).await {
            signal.fire(reason);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(call: &str) -> Key {
        (
            TenantId::default(),
            RunId::new("r").unwrap(),
            CallId::new(call).unwrap(),
        )
    }

    #[test]
    fn a_forgotten_cancel_moves_the_horizon_past_it() {
        let cancels = Cancels::default();
        cancels.listened_from.store(10, Ordering::Release);
        for i in 0..HEARD as u64 {
            assert!(cancels.hear(key(&format!("c{i}")), 100 + i, None));
        }
        assert_eq!(cancels.horizon(), 10);
        assert!(cancels.hear(key("last"), 100_000, None));
        // The oldest (seq 100) is forgotten: a request before it may have been
        // cancelled by it, so it is looked up.
        assert_eq!(cancels.horizon(), 100);
        assert!(!cancels.lock_heard().calls.contains_key(&key("c0")));
        assert!(cancels.lock_heard().calls.contains_key(&key("last")));
    }

    #[test]
    fn a_cancel_reaches_every_handling_of_its_call_and_only_them() {
        let cancels = Cancels::default();
        let signal = Arc::new(Signal::default());
        cancels.lock_handled().insert(key("a"), (signal.clone(), 1));
        assert!(!cancels.hear(key("a"), 5, Some("enough".into())));
        assert!(signal.fired.load(Ordering::Acquire));
        assert_eq!(signal.reason.lock().unwrap().as_deref(), Some("enough"));
        assert!(cancels.hear(key("b"), 6, None));
        // A second cancel keeps the first reason.
        signal.fire(Some("other".into()));
        assert_eq!(signal.reason.lock().unwrap().as_deref(), Some("enough"));
    }
}
