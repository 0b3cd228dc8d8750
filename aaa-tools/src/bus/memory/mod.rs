//! [`MemoryBus`]: the embedded bus, and the reference implementation of the
//! [`Bus`] contract. Read it first when you write a backend.
//!
//! The contract is a JetStream stream with durable pull consumers, reduced to what
//! the engine relies on. Each part lives in one module here, whose docs state that
//! part before the code that keeps it:
//!
//! | Module | The part of the contract it carries |
//! |---|---|
//! | [`subject`](crate::bus::subject) | what a subject and a filter are; the one matching rule |
//! | [`log`] | a publish is stored, in order, under the next sequence number; what is kept ([`Retention`]) |
//! | [`dedup`] | a repeated message id within the window is dropped, and the publish still succeeds |
//! | [`filters`] | a consumer or replay sees exactly what its filters match, and a publish wakes only those |
//! | [`consumers`] | durable consumers: competing subscriptions, ack, nak, in progress, term, redelivery |
//! | [`replay`] | replay and replay_any, listen (from the end of the log), first (the oldest match) |
//!
//! The shared conformance suite (`aaa_tests::contract`, in the workspace's `tests`
//! crate) runs the same tests against this bus and the JetStream bus; a new backend
//! passes it too.
//!
//! # One lock, wake-ups after it
//!
//! Everything is in one [`State`] behind one mutex, and a publish or a settlement is
//! done when it is called: its future is ready, and allocates nothing.
//! A critical section leaves the state consistent before anything in it can panic, so
//! a poisoned lock is taken over as it is. Tasks to wake are collected under the lock
//! (in a `smallvec`: a publish usually wakes one or two) and woken after it is
//! released: a wake-up may unpark another thread, a system call that every other
//! publisher would otherwise wait for. For the same reason messages trimmed from the
//! log are freed after the lock is released.
//!
//! Time is tokio's clock, so a test with a paused clock controls ack deadlines, nak
//! delays and the de-duplication window exactly.

mod consumers;
mod dedup;
mod filters;
mod log;
mod replay;
mod retention;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex, Weak};

use futures::stream::BoxStream;
use smallvec::SmallVec;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::{Bus, BusError, BusFuture, Confirmation, ConsumerSpec, Payload, Stored, Subscription};
use consumers::ConsumerState;
use dedup::RecentIds;
use filters::Wakes;
use log::Log;
use replay::{Replay, ReplayFrom};
pub use retention::Retention;

/// The embedded, in-process [`Bus`], with the semantics of a JetStream stream and its
/// durable pull consumers: a log, per-consumer pending state, ack deadlines,
/// redelivery on deadline, on `nak` and when a subscription is dropped, delivery
/// counts, and de-duplication of publishes by message id within a window (2 minutes,
/// like JetStream's default).
///
/// Clones share one bus, so several engines in one process act as workers on it. Time
/// is tokio's clock, so tests with a paused clock control deadlines exactly. A publish
/// wakes only the consumers and replays whose filters match its subject, and an ack or
/// term wakes nobody (nothing becomes deliverable by it): every needless wake-up costs
/// a call a task switch, often onto another thread.
///
/// The log lives in memory: this is the embedded default for a single process and for
/// tests, not a store that outlives the process. Its [`Retention`] bounds it (100 000
/// messages by default), but never at the cost of a message a consumer has not settled
/// or a replay has not read: those stay however old the log grows around them. It
/// holds each [`Payload`] as published: a deferred one (the engine's own events) is
/// written to bytes only if something reads them, and every consumer in the process
/// that knows its type reads the value instead.
///
/// ```
/// use aaa_tools::bus::{Bus, ConsumerSpec, MemoryBus};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let bus = MemoryBus::new();
/// let mut work = bus.subscribe(&ConsumerSpec::new("work", ["aaa.*.*.job"])).await.unwrap();
/// bus.publish("aaa.t.r.job", b"1".to_vec().into(), Some("job-1")).await.unwrap();
/// bus.publish("aaa.t.r.job", b"1".to_vec().into(), Some("job-1")).await.unwrap();
/// assert_eq!(bus.len(), 1, "the repeated id was dropped");
///
/// let message = work.next().await.unwrap();
/// assert_eq!((&message.payload[..], message.delivery_count), (&b"1"[..], 1));
/// message.ack().await.unwrap();
/// assert_eq!(bus.ack_pending("work"), 0);
/// # }
/// ```
#[derive(Clone)]
pub struct MemoryBus {
    shared: Arc<Shared>,
}

/// What every clone of a bus shares.
struct Shared {
    state: Mutex<State>,
    /// Woken whenever a consumer's unsettled count may have dropped, while anyone
    /// waits in [`MemoryBus::until_settled`].
    settled: Notify,
    /// How many wait in [`MemoryBus::until_settled`]: with none (as almost always), an
    /// ack wakes nobody, and takes no lock but the bus's.
    settled_waiters: AtomicUsize,
    /// The next subscription's id (see `consumers`).
    next_holder: AtomicU64,
    retention: Retention,
}

/// The hasher of the bus's maps: fast on the long ids and subjects they hold, seeded
/// per process.
type Hasher = foldhash::fast::RandomState;

/// The durable consumers, by name.
type Consumers = HashMap<String, ConsumerState, Hasher>;

/// Everything behind the bus's lock.
struct State {
    /// The messages kept.
    log: Log,
    /// Message ids seen within the de-duplication window.
    recent_ids: RecentIds,
    consumers: Consumers,
    /// Replay streams following the log, each woken only by matching publishes.
    replays: Vec<Weak<Replay>>,
    /// Changes whenever a consumer or a replay comes or goes: the [`Wakes`] a run
    /// remembers for a subject hold for the generation they were worked out in.
    generation: u64,
}

impl State {
    /// Whether a consumer or a live replay still needs message `stored`, the oldest in
    /// the log.
    fn is_held(consumers: &Consumers, replays: &[Weak<Replay>], stored: &Stored) -> bool {
        let (seq, subject) = (stored.seq, &*stored.subject);
        consumers.values().any(|c| c.holds(seq, subject))
            || replays
                .iter()
                .any(|replay| replay.upgrade().is_some_and(|r| r.holds(seq, subject)))
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Every critical section leaves the state consistent before it can panic.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Default for MemoryBus {
    fn default() -> Self {
        MemoryBus::new()
    }
}

impl std::fmt::Debug for MemoryBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.shared.lock();
        f.debug_struct("MemoryBus")
            .field("messages", &state.log.len())
            .field("consumers", &state.consumers.len())
            .finish()
    }
}

impl MemoryBus {
    /// An empty bus with the default [`Retention`] (up to 100 000 messages).
    pub fn new() -> Self {
        MemoryBus::with_retention(Retention::default())
    }

    /// An empty bus that keeps what `retention` says.
    pub fn with_retention(retention: Retention) -> Self {
        MemoryBus {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    log: Log::new(),
                    recent_ids: RecentIds::new(),
                    consumers: HashMap::default(),
                    replays: Vec::new(),
                    generation: 0,
                }),
                settled: Notify::new(),
                settled_waiters: AtomicUsize::new(0),
                next_holder: AtomicU64::new(1),
                retention,
            }),
        }
    }

    /// What this bus keeps.
    pub fn retention(&self) -> Retention {
        self.shared.retention
    }

    /// The number of messages the log holds now.
    pub fn len(&self) -> usize {
        self.shared.lock().log.len()
    }

    /// Whether the log is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends a message to the log (unless its id was seen within the window), wakes
    /// the consumers and replays it matches, and trims the log. Synchronous:
    /// publishing, sending and emitting are the same thing here.
    fn append(
        &self,
        subject: &str,
        payload: Payload,
        msg_id: Option<&str>,
    ) -> Result<(), BusError> {
        let retention = &self.shared.retention;
        let now = Instant::now();
        let mut state = self.shared.lock();
        let State {
            log,
            recent_ids,
            consumers,
            replays,
            generation,
        } = &mut *state;
        let admit = || recent_ids.admit(msg_id, now, retention);
        let Some(appended) = log.append(subject, payload, now, admit)? else {
            return Ok(());
        };
        let seq = appended.seq;
        replay::forget_dropped(replays, generation);
        let remembered = appended.interned.map(|interned| &mut interned.wakes);
        let wakes = Wakes::remembered(remembered, *generation, || {
            Wakes::of(
                *generation,
                consumers.values().map(|c| c.filters.matches(subject)),
                replays.iter().map(|r| {
                    r.upgrade()
                        .is_some_and(|replay| replay.filters.matches(subject))
                }),
            )
        });
        // Woken after the lock is released.
        let mut wake: SmallVec<[Arc<Notify>; 4]> = SmallVec::new();
        consumers::published(consumers, seq, subject, wakes, &mut wake);
        if let Some(stored) = log.get(seq) {
            replay::published(replays, stored, wakes, &mut wake);
        }
        let removed = log.trim(now, retention, |oldest| {
            State::is_held(consumers, replays, oldest)
        });
        drop(state);
        drop(removed);
        for notify in wake {
            notify.notify_waiters();
        }
        Ok(())
    }
}

// A publish, like a settlement (see `consumers`), is done before it returns: its
// future is ready, and allocates nothing.
impl Bus for MemoryBus {
    fn publish<'a>(
        &'a self,
        subject: &'a str,
        payload: Payload,
        msg_id: Option<&'a str>,
    ) -> BusFuture<'a, ()> {
        BusFuture::ready(self.append(subject, payload, msg_id))
    }

    /// Stores at once (there is no server to wait for): the confirmation is ready.
    fn send<'a>(
        &'a self,
        subject: &'a str,
        payload: Payload,
        msg_id: Option<&'a str>,
    ) -> BusFuture<'a, Confirmation> {
        let stored = BusFuture::ready(self.append(subject, payload, msg_id));
        BusFuture::ready(Ok(stored))
    }

    /// Stores at once, as [`publish`](Bus::publish) does (nothing to wait for, and an
    /// error is known at once).
    fn emit<'a>(
        &'a self,
        subject: &'a str,
        payload: Payload,
        msg_id: Option<&'a str>,
    ) -> BusFuture<'a, ()> {
        self.publish(subject, payload, msg_id)
    }

    fn subscribe<'a>(&'a self, spec: &'a ConsumerSpec) -> BusFuture<'a, Box<dyn Subscription>> {
        BusFuture::new(async move { consumers::subscribe(&self.shared, spec) })
    }

    fn replay<'a>(
        &'a self,
        filter: &'a str,
    ) -> BusFuture<'a, BoxStream<'static, Result<Stored, BusError>>> {
        let filters = vec![filter.to_owned()];
        BusFuture::ready(replay::open(
            self.shared.clone(),
            filters,
            ReplayFrom::Oldest,
        ))
    }

    fn replay_any<'a>(
        &'a self,
        filters: &'a [String],
    ) -> BusFuture<'a, BoxStream<'static, Result<Stored, BusError>>> {
        let filters = filters.to_vec();
        BusFuture::ready(replay::open(
            self.shared.clone(),
            filters,
            ReplayFrom::Oldest,
        ))
    }

    /// A replay that starts at the end of the log: in process, nothing is ever missed.
    fn listen<'a>(
        &'a self,
        filters: &'a [String],
    ) -> BusFuture<'a, BoxStream<'static, Result<Stored, BusError>>> {
        let filters = filters.to_vec();
        BusFuture::ready(replay::open(self.shared.clone(), filters, ReplayFrom::Now))
    }

    /// Reads the run's index when the filter names one run (as a call's outcome
    /// filter does), the whole log otherwise.
    fn first<'a>(&'a self, filter: &'a str) -> BusFuture<'a, Option<Stored>> {
        BusFuture::ready(replay::first(&self.shared, filter))
    }

    fn last_seq(&self) -> BusFuture<'_, Option<u64>> {
        let next = self.shared.lock().log.next_seq();
        BusFuture::ready(Ok(Some(next.saturating_sub(1))))
    }
}

/// Publishes `body` at `subject` on `bus` (for the tests of every module here).
#[cfg(test)]
async fn publish(bus: &MemoryBus, subject: &str, body: &str) {
    bus.publish(subject, body.as_bytes().to_vec().into(), None)
        .await
        .unwrap();
}
