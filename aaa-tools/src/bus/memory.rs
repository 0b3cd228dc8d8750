//! [`MemoryBus`]: the embedded bus.
//!
//! A publish collects the wake-ups of the consumers it matches in a `smallvec`
//! (usually one or two, so none allocates) and sends them once the bus's lock is
//! released. Which consumers and replays a subject wakes is worked out once per subject
//! of a run and remembered until a consumer or replay comes or goes (see `Wakes`), and
//! a subject's run prefix is found with `memchr`, the well-kept vectorised byte search
//! (a publish scans past two long ids to find it).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::stream::{self, BoxStream};
use smallvec::SmallVec;
use tokio::sync::Notify;
use tokio::time::{Instant, Sleep};

use super::recent_ids::RecentIds;
use super::{
    Acker, Bus, BusError, BusFuture, Confirmation, ConsumerSpec, Message, Payload, Retention,
    Stored, Subscription, is_dot, subject_matches, tokens_match,
};

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
#[derive(Clone)]
pub struct MemoryBus {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// Woken whenever a consumer's unsettled count may have dropped, while anyone
    /// waits in [`MemoryBus::until_settled`].
    settled: Notify,
    /// How many wait in [`MemoryBus::until_settled`]: with none (as almost always), an
    /// ack wakes nobody, and takes no lock but the bus's.
    settled_waiters: AtomicUsize,
    next_holder: AtomicU64,
    retention: Retention,
}

/// The hasher of the bus's maps: fast on the long ids and subjects they hold, seeded
/// per process.
type Hasher = foldhash::fast::RandomState;

struct State {
    /// The messages kept, oldest first: `log[i]` has sequence number `first_seq + i`.
    log: VecDeque<Kept>,
    /// The sequence number of `log[0]` (of the next publish while the log is empty).
    first_seq: u64,
    /// Message ids seen within the de-duplication window, and when (oldest first).
    recent_ids: RecentIds,
    consumers: HashMap<String, ConsumerState, Hasher>,
    /// Replay streams following the log, each woken only by matching publishes.
    replays: Vec<Weak<Replay>>,
    /// The messages kept, by their subject's first three tokens (`aaa.<tenant>.<run>`).
    by_prefix: HashMap<String, RunIndex, Hasher>,
    /// Changes whenever a consumer or a replay comes or goes: the [`Wakes`] a run
    /// remembers for a subject hold for the generation they were worked out in.
    generation: u64,
}

/// What the log holds of one run (one subject prefix).
struct RunIndex {
    /// The sequence numbers of its messages, oldest first, so replaying one run reads
    /// that run's messages, not the whole log.
    seqs: VecDeque<u64>,
    /// The subjects its messages were published on (a run uses a handful, again and
    /// again): its messages share them instead of holding a copy each, so a long log
    /// holds, and later frees, one allocation less per message.
    subjects: SmallVec<[Interned; 4]>,
}

/// A subject a run publishes on: the copy its messages share, and whom a publish on
/// it wakes, once worked out.
struct Interned {
    subject: Arc<str>,
    wakes: Option<Wakes>,
}

impl RunIndex {
    /// Where this run keeps `subject`, if it published on it before.
    fn known(&self, subject: &str) -> Option<usize> {
        self.subjects.iter().position(|s| *s.subject == *subject)
    }

    /// Keeps a copy of `subject` (which it does not know yet) for this run's messages
    /// to share; returns where.
    fn intern(&mut self, subject: &str) -> usize {
        self.subjects.push(Interned {
            subject: Arc::from(subject),
            wakes: None,
        });
        self.subjects.len() - 1
    }
}

/// Which consumers and replays a subject matches, as bits in the order of the bus's
/// consumer map and replay list, which hold still within one generation. Every
/// publish is matched against every filter; a run publishes on a handful of subjects
/// again and again, so each is matched once per generation and read back after.
#[derive(Clone, Copy)]
struct Wakes {
    generation: u64,
    consumers: u64,
    replays: u64,
}

impl Wakes {
    /// Matches `subject` against every consumer and replay; `None` when there are too
    /// many for the bits (each publish then matches them itself).
    fn of(
        subject: &str,
        consumers: &HashMap<String, ConsumerState, Hasher>,
        replays: &[Weak<Replay>],
        generation: u64,
    ) -> Option<Wakes> {
        if consumers.len() > 64 || replays.len() > 64 {
            return None;
        }
        let bits = |matched: &mut dyn Iterator<Item = bool>| {
            matched
                .enumerate()
                .fold(0_u64, |bits, (i, m)| bits | (u64::from(m) << i))
        };
        Some(Wakes {
            generation,
            consumers: bits(&mut consumers.values().map(|c| c.filters.matches(subject))),
            replays: bits(&mut replays.iter().map(|r| {
                r.upgrade()
                    .is_some_and(|replay| replay.filters.matches(subject))
            })),
        })
    }
}

/// A message in the log, and when it was published (for [`Retention::max_age`]).
struct Kept {
    stored: Stored,
    at: Instant,
}

/// A replay stream as the bus sees it: what wakes it, and how far it has read, which
/// keeps the messages it has yet to read in the log.
struct Replay {
    filters: Filters,
    wake: Arc<Notify>,
    /// The first sequence number it has not looked at (changed under the bus's lock).
    next: AtomicU64,
}

/// The first three tokens of a subject, when it has more. Every publish and every
/// trimmed message asks, so the dots are found with memchr (the long ids come first,
/// and a byte-by-byte scan of them cost a publish hundreds of instructions).
fn prefix_of(subject: &str) -> Option<&str> {
    let third = memchr::memchr_iter(b'.', subject.as_bytes()).nth(2)?;
    Some(&subject[..third])
}

fn check_filter(filter: &str) -> Result<(), BusError> {
    super::check_subject(filter, true).map_err(|why| super::invalid_filter(filter, why))
}

/// Whether a filter (or part of one) has no wildcard token.
fn is_literal(filter: &str) -> bool {
    !filter.split('.').any(|t| t == "*" || t == ">")
}

/// The literal first three tokens of a filter whose wildcards all come later.
fn literal_prefix_of(filter: &str) -> Option<&str> {
    prefix_of(filter).filter(|prefix| is_literal(prefix))
}

/// Subject filters, each marked once as literal or not: a literal filter (the usual
/// case for replays, which follow named event types) matches by one comparison instead
/// of token by token, and every publish is checked against every filter.
struct Filters {
    all: Vec<String>,
    /// Per filter: how it is matched quickly.
    shape: Vec<Shape>,
}

/// How a filter is matched. Most subjects a consumer sees are not its own, and the
/// tokens that tell the engine's subjects apart come last (`aaa.<tenant>.<run>.tool.
/// requested`), after the long ids: a filter without `>` is matched from the end, so a
/// subject of another kind is turned away after its last token or two.
enum Shape {
    /// No wildcard: equal or not.
    Literal,
    /// Literal tokens, then one or more `*`, then literal tokens
    /// (`aaa.*.*.tool.requested`, the handler's own): the subject starts with the
    /// filter's first `head` bytes, ends with its last `tail` bytes, and what lies
    /// between holds `dots` dots. Subjects are checked when published (no empty
    /// token), so counting dots, which the compiler vectorises, counts the tokens.
    Span {
        head: usize,
        tail: usize,
        dots: usize,
    },
    /// `*` wildcards only: token for token from the end.
    Closed,
    /// Ends with `>`: token for token from the start.
    Rest,
}

impl Filters {
    fn new(all: Vec<String>) -> Self {
        let shape = all
            .iter()
            .map(|f| {
                if is_literal(f) {
                    Shape::Literal
                } else if f == ">" || f.ends_with(".>") {
                    Shape::Rest
                } else {
                    span_of(f).unwrap_or(Shape::Closed)
                }
            })
            .collect();
        Filters { all, shape }
    }

    fn matches(&self, subject: &str) -> bool {
        self.all
            .iter()
            .zip(&self.shape)
            .any(|(filter, shape)| match shape {
                Shape::Literal => filter == subject,
                Shape::Span { head, tail, dots } => {
                    let (f, s) = (filter.as_bytes(), subject.as_bytes());
                    s.len() > head + tail + 2 * dots
                        && s.starts_with(&f[..*head])
                        && s.ends_with(&f[f.len() - tail..])
                        && s[*head..s.len() - tail]
                            .iter()
                            .filter(|b| **b == b'.')
                            .count()
                            == *dots
                }
                Shape::Closed => tokens_match(
                    filter.as_bytes().rsplit(is_dot),
                    subject.as_bytes().rsplit(is_dot),
                ),
                Shape::Rest => subject_matches(filter, subject),
            })
    }
}

/// The [`Shape::Span`] of a filter of `*` and literal tokens, if its wildcards are
/// all next to each other.
fn span_of(filter: &str) -> Option<Shape> {
    let tokens: Vec<&str> = filter.split('.').collect();
    let first = tokens.iter().position(|t| *t == "*")?;
    let stars = tokens[first..].iter().take_while(|t| **t == "*").count();
    if tokens[first + stars..]
        .iter()
        .any(|t| *t == "*" || *t == ">")
    {
        return None;
    }
    // The literal tokens before the stars with the dot after each; those after them
    // with the dot before each.
    let head: usize = tokens[..first].iter().map(|t| t.len() + 1).sum();
    let tail: usize = tokens[first + stars..].iter().map(|t| t.len() + 1).sum();
    Some(Shape::Span {
        head,
        tail,
        dots: stars - 1,
    })
}

struct ConsumerState {
    filters: Filters,
    ack_wait: Duration,
    /// Wakes this consumer's subscriptions.
    wake: Arc<Notify>,
    /// The first sequence number not yet looked at.
    cursor: u64,
    /// Sequence numbers before `cursor` that match and are not yet delivered, in log
    /// order: a publish matches each consumer once, and a consumer that has looked at
    /// the whole log takes the publishes it matched from here instead of matching again.
    matched: VecDeque<u64>,
    /// Delivered and unsettled.
    pending: BTreeMap<u64, Pending>,
    /// No pending deadline is earlier than this (`None`: nothing pending). A taker
    /// looks for expired deliveries only once it has passed, not at every take.
    expiry: Option<Instant>,
    /// To deliver again: seq -> (deliveries so far, not before).
    redeliver: BTreeMap<u64, (u32, Instant)>,
}

struct Pending {
    deliveries: u32,
    deadline: Instant,
    holder: u64,
}

impl ConsumerState {
    /// Whether this consumer still needs message `seq` (the oldest in the log): not
    /// looked at yet and matching, or matched and not delivered yet, or delivered and
    /// not settled.
    fn holds(&self, seq: u64, subject: &str) -> bool {
        (self.cursor <= seq && self.filters.matches(subject))
            || self.matched.front() == Some(&seq)
            || self.pending.contains_key(&seq)
            || self.redeliver.contains_key(&seq)
    }
}

/// Message `seq` of a log whose first message is `first_seq`, if it still holds it.
fn stored_at(log: &VecDeque<Kept>, first_seq: u64, seq: u64) -> Option<&Stored> {
    let index = usize::try_from(seq.checked_sub(first_seq)?).ok()?;
    log.get(index).map(|kept| &kept.stored)
}

impl State {
    fn new() -> Self {
        State {
            log: VecDeque::new(),
            first_seq: 1,
            recent_ids: RecentIds::new(),
            consumers: HashMap::default(),
            replays: Vec::new(),
            by_prefix: HashMap::default(),
            generation: 0,
        }
    }

    /// The sequence number the next publish gets.
    fn next_seq(&self) -> u64 {
        self.first_seq + self.log.len() as u64
    }

    /// Message `seq`, if the log still holds it.
    fn get(&self, seq: u64) -> Option<&Stored> {
        stored_at(&self.log, self.first_seq, seq)
    }

    /// Whether a consumer or a live replay still needs message `stored`, the oldest in
    /// the log.
    fn is_held(&self, stored: &Stored) -> bool {
        let (seq, subject) = (stored.seq, &*stored.subject);
        self.consumers.values().any(|c| c.holds(seq, subject))
            || self.replays.iter().any(|replay| {
                replay.upgrade().is_some_and(|replay| {
                    replay.next.load(Ordering::Relaxed) <= seq && replay.filters.matches(subject)
                })
            })
    }

    /// Removes the oldest messages while the log is over its limits and nobody holds
    /// them; returns them, to be dropped once the lock is released.
    fn trim(&mut self, now: Instant, retention: &Retention) -> SmallVec<[Kept; 2]> {
        let mut removed = SmallVec::new();
        while let Some(front) = self.log.front() {
            let too_old = retention
                .max_age()
                .is_some_and(|age| now.duration_since(front.at) > age);
            if !(self.log.len() > retention.max_messages() || too_old)
                || self.is_held(&front.stored)
            {
                break;
            }
            let Some(kept) = self.log.pop_front() else {
                break;
            };
            self.first_seq += 1;
            // The oldest message is the oldest of its run too.
            if let Some(prefix) = prefix_of(&kept.stored.subject)
                && let Some(run) = self.by_prefix.get_mut(prefix)
            {
                run.seqs.pop_front();
                if run.seqs.is_empty() {
                    self.by_prefix.remove(prefix);
                }
            }
            removed.push(kept);
        }
        removed
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

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Every critical section leaves the state consistent before it can panic.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Settles `seq` for good (ack, term). Nothing becomes deliverable by that, so the
    /// consumer's subscriptions are not woken: a wake per ack would cost every call a
    /// task switch.
    fn forget(&self, durable: &str, seq: u64) {
        if let Some(consumer) = self.lock().consumers.get_mut(durable) {
            consumer.pending.remove(&seq);
            consumer.redeliver.remove(&seq);
        }
        self.settled_changed();
    }

    /// Wakes whoever waits in [`MemoryBus::until_settled`], after a settlement made
    /// under the bus's lock.
    ///
    /// A waiter counts itself before it reads the state under that lock, and a
    /// settlement changes the state under it before it reads the count: so either the
    /// waiter reads the changed state, or the settlement sees the waiter and wakes it.
    fn settled_changed(&self) {
        if self.settled_waiters.load(Ordering::SeqCst) > 0 {
            self.settled.notify_waiters();
        }
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
                state: Mutex::new(State::new()),
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

    /// Messages delivered to `durable` and not yet settled: what JetStream calls the
    /// consumer's ack-pending count.
    pub fn ack_pending(&self, durable: &str) -> usize {
        self.shared
            .lock()
            .consumers
            .get(durable)
            .map_or(0, |c| c.pending.len() + c.redeliver.len())
    }

    /// Waits until `durable` holds no delivered-but-unsettled message (returns at once
    /// when it holds none). For tests and shutdown checks.
    pub async fn until_settled(&self, durable: &str) {
        /// Counts a waiter for as long as it waits (a dropped wait included).
        struct Waiting<'a>(&'a AtomicUsize);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        self.shared.settled_waiters.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(&self.shared.settled_waiters);
        loop {
            let changed = self.shared.settled.notified();
            if self.ack_pending(durable) == 0 {
                return;
            }
            changed.await;
        }
    }

    /// Appends a message to the log (unless its id was seen within the window) and
    /// wakes the consumers and replays it matches. Synchronous: publishing and sending
    /// are the same thing here.
    fn append(
        &self,
        subject: &str,
        payload: Payload,
        msg_id: Option<&str>,
    ) -> Result<(), BusError> {
        let retention = &self.shared.retention;
        let mut state = self.shared.lock();
        let seq = state.next_seq();
        let State {
            log,
            by_prefix,
            recent_ids,
            consumers,
            replays,
            generation,
            ..
        } = &mut *state;
        let prefix = prefix_of(subject);
        let mut run = prefix.and_then(|prefix| by_prefix.get_mut(prefix));
        // A run publishes on a handful of subjects again and again, and on one subject
        // per call once (an outcome's, which ends in the call's id): only the first
        // kind is worth keeping for the run's messages to share.
        let shared = memchr::memchr_iter(b'.', subject.as_bytes())
            .nth(4)
            .is_none();
        // A subject this run published on before was checked then.
        let known = run
            .as_ref()
            .filter(|_| shared)
            .and_then(|run| run.known(subject));
        if known.is_none()
            && let Err(why) = super::check_subject(subject, false)
        {
            return Err(BusError::Invalid {
                what: "subject",
                detail: format!("{subject:?} is not a publishable subject: {why}"),
            });
        }
        let now = Instant::now();
        let window = retention.duplicate_window();
        recent_ids.forget_while(|at, _| now.duration_since(at) >= window);
        if let Some(id) = msg_id
            && !recent_ids.remember(id, now, retention.max_messages())
        {
            return Ok(());
        }
        let run = match (prefix, run.take()) {
            // Most publishes extend a run already indexed: no key to allocate.
            (Some(_), Some(run)) => {
                run.seqs.push_back(seq);
                Some(run)
            }
            (Some(prefix), None) => {
                let run = RunIndex {
                    seqs: VecDeque::from([seq]),
                    subjects: SmallVec::new(),
                };
                Some(
                    by_prefix
                        .entry(prefix.to_owned())
                        .insert_entry(run)
                        .into_mut(),
                )
            }
            (None, _) => None,
        };
        let (shared_subject, interned) = match run.filter(|_| shared) {
            Some(run) => {
                let at = known.unwrap_or_else(|| run.intern(subject));
                let interned = &mut run.subjects[at];
                (interned.subject.clone(), Some(interned))
            }
            None => (Arc::from(subject), None),
        };
        log.push_back(Kept {
            stored: Stored {
                seq,
                subject: shared_subject,
                payload,
            },
            at: now,
        });
        let replaying = replays.len();
        replays.retain(|replay| replay.strong_count() > 0);
        if replays.len() != replaying {
            *generation += 1;
        }
        let wakes = match interned {
            Some(Interned {
                wakes: Some(wakes), ..
            }) if wakes.generation == *generation => Some(*wakes),
            Some(interned) => {
                interned.wakes = Wakes::of(subject, consumers, replays, *generation);
                interned.wakes
            }
            None => Wakes::of(subject, consumers, replays, *generation),
        };
        // Woken after the lock is released: a wake-up may unpark another thread (a
        // system call), which must not happen while every other publisher waits.
        let mut wake: SmallVec<[Arc<Notify>; 4]> = SmallVec::new();
        for (i, consumer) in consumers.values_mut().enumerate() {
            let matches = match wakes {
                Some(wakes) => wakes.consumers >> i & 1 == 1,
                None => consumer.filters.matches(subject),
            };
            if matches {
                wake.push(consumer.wake.clone());
            }
            // A consumer that has looked at everything before this message has now
            // looked at it too.
            if consumer.cursor == seq {
                consumer.cursor += 1;
                if matches {
                    consumer.matched.push_back(seq);
                }
            }
        }
        for (i, replay) in replays.iter().enumerate() {
            let known = wakes.map(|wakes| wakes.replays >> i & 1 == 1);
            if known != Some(false)
                && let Some(replay) = replay.upgrade()
                && (known == Some(true) || replay.filters.matches(subject))
            {
                wake.push(replay.wake.clone());
            }
        }
        let removed = state.trim(now, retention);
        drop(state);
        drop(removed);
        for notify in wake {
            notify.notify_waiters();
        }
        Ok(())
    }

    /// The number of messages the log holds now.
    pub fn len(&self) -> usize {
        self.shared.lock().log.len()
    }

    /// Whether the log is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Applies a settlement to one consumer and wakes its subscriptions.
fn settle(shared: &Shared, durable: &str, change: impl FnOnce(&mut ConsumerState, Instant)) {
    let mut state = shared.lock();
    let wake = state.consumers.get_mut(durable).map(|consumer| {
        change(consumer, Instant::now());
        consumer.wake.clone()
    });
    drop(state);
    if let Some(wake) = wake {
        wake.notify_waiters();
    }
    shared.settled_changed();
}

struct MemoryAcker {
    shared: Arc<Shared>,
    durable: String,
}

impl Acker for MemoryAcker {
    fn ack(&self, seq: u64) -> BusFuture<'_, ()> {
        self.shared.forget(&self.durable, seq);
        BusFuture::ready(Ok(()))
    }

    fn nak(&self, seq: u64, delay: Duration) -> BusFuture<'_, ()> {
        settle(&self.shared, &self.durable, |c, now| {
            if let Some(p) = c.pending.remove(&seq) {
                c.redeliver.insert(seq, (p.deliveries, now + delay));
            }
        });
        BusFuture::ready(Ok(()))
    }

    fn in_progress(&self, seq: u64) -> BusFuture<'_, ()> {
        let mut state = self.shared.lock();
        if let Some(consumer) = state.consumers.get_mut(&self.durable) {
            let wait = consumer.ack_wait;
            if let Some(p) = consumer.pending.get_mut(&seq) {
                p.deadline = Instant::now() + wait;
            }
        }
        BusFuture::ready(Ok(()))
    }

    fn term(&self, seq: u64) -> BusFuture<'_, ()> {
        self.shared.forget(&self.durable, seq);
        BusFuture::ready(Ok(()))
    }
}

struct MemorySubscription {
    shared: Arc<Shared>,
    wake: Arc<Notify>,
    durable: String,
    holder: u64,
    acker: Arc<dyn Acker>,
    /// Wakes a waiting taker at the next deadline. Kept from wait to wait and moved
    /// only when the deadline does (which, the expiry being a lower bound, is rarely):
    /// a timer registered anew at every wait could wake a parked runtime thread each
    /// time, to learn of a deadline half a minute away.
    timer: Option<Pin<Box<Sleep>>>,
}

impl Drop for MemorySubscription {
    fn drop(&mut self) {
        let holder = self.holder;
        settle(&self.shared, &self.durable, |consumer, now| {
            let mine: Vec<u64> = consumer
                .pending
                .iter()
                .filter(|(_, p)| p.holder == holder)
                .map(|(seq, _)| *seq)
                .collect();
            for seq in mine {
                if let Some(p) = consumer.pending.remove(&seq) {
                    consumer.redeliver.insert(seq, (p.deliveries, now));
                }
            }
        });
    }
}

impl MemorySubscription {
    /// One attempt to take a message; otherwise when to look again.
    fn try_take(&self) -> Result<Message, Option<Instant>> {
        let mut state = self.shared.lock();
        let now = Instant::now();
        let State {
            log,
            first_seq,
            consumers,
            ..
        } = &mut *state;
        let first_seq = *first_seq;
        let end = first_seq + log.len() as u64;
        // Held messages are never removed, so every one looked up here is in the log.
        let at = |seq: u64| stored_at(log, first_seq, seq).expect("a held message is kept");
        let Some(consumer) = consumers.get_mut(&self.durable) else {
            return Err(None);
        };

        if consumer.expiry.is_some_and(|at| at <= now) {
            let (redeliver, mut expiry) = (&mut consumer.redeliver, None::<Instant>);
            consumer.pending.retain(|seq, p| {
                if p.deadline <= now {
                    redeliver.insert(*seq, (p.deliveries, now));
                    return false;
                }
                expiry = Some(expiry.map_or(p.deadline, |at| at.min(p.deadline)));
                true
            });
            consumer.expiry = expiry;
        }
        let due = consumer
            .redeliver
            .iter()
            .find(|(_, (_, at))| *at <= now)
            .map(|(seq, (n, _))| (*seq, *n));
        let deliver = |consumer: &mut ConsumerState, seq: u64, deliveries: u32| {
            let deadline = now + consumer.ack_wait;
            consumer.pending.insert(
                seq,
                Pending {
                    deliveries,
                    deadline,
                    holder: self.holder,
                },
            );
            consumer.expiry = Some(consumer.expiry.map_or(deadline, |at| at.min(deadline)));
            let stored = at(seq);
            Message::new(
                stored.subject.clone(),
                stored.payload.clone(),
                seq,
                deliveries,
                self.acker.clone(),
            )
        };
        if let Some((seq, n)) = due {
            consumer.redeliver.remove(&seq);
            return Ok(deliver(consumer, seq, n + 1));
        }
        if let Some(seq) = consumer.matched.pop_front() {
            return Ok(deliver(consumer, seq, 1));
        }
        // What it had not looked at may have been removed since (it did not match).
        consumer.cursor = consumer.cursor.max(first_seq);
        while consumer.cursor < end {
            let seq = consumer.cursor;
            consumer.cursor += 1;
            if consumer.filters.matches(&at(seq).subject) {
                return Ok(deliver(consumer, seq, 1));
            }
        }
        // The expiry may be early (a settled delivery's): looking again then finds the
        // true one.
        let next_redelivery = consumer.redeliver.values().map(|(_, at)| *at);
        Err(consumer.expiry.into_iter().chain(next_redelivery).min())
    }
}

impl Subscription for MemorySubscription {
    fn next(&mut self) -> BusFuture<'_, Message> {
        // A message is usually there already: hand it over without a future to box.
        if let Ok(message) = self.try_take() {
            return BusFuture::ready(Ok(message));
        }
        BusFuture::new(async move {
            loop {
                let changed = self.wake.notified();
                match self.try_take() {
                    Ok(message) => return Ok(message),
                    Err(Some(wake)) => {
                        let timer = match &mut self.timer {
                            Some(timer) => {
                                if timer.deadline() != wake {
                                    timer.as_mut().reset(wake);
                                }
                                timer
                            }
                            None => self.timer.insert(Box::pin(tokio::time::sleep_until(wake))),
                        };
                        tokio::select! {
                            _ = changed => {}
                            _ = timer.as_mut() => {}
                        }
                    }
                    Err(None) => changed.await,
                }
            }
        })
    }
}

// A publish, like a settlement (see `MemoryAcker`), is done before it returns: its
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
        BusFuture::new(async move {
            if spec.durable.is_empty() || spec.filters.is_empty() {
                return Err(BusError::Invalid {
                    what: "consumer",
                    detail: "a durable name and at least one filter are required".into(),
                });
            }
            for filter in &spec.filters {
                check_filter(filter)?;
            }
            let mut state = self.shared.lock();
            let first_seq = state.first_seq;
            if !state.consumers.contains_key(&spec.durable) {
                // The consumer map is about to change its order.
                state.generation += 1;
            }
            let consumer = state
                .consumers
                .entry(spec.durable.clone())
                .or_insert_with(|| ConsumerState {
                    filters: Filters::new(spec.filters.clone()),
                    ack_wait: spec.ack_wait,
                    wake: Arc::new(Notify::new()),
                    cursor: first_seq,
                    matched: VecDeque::new(),
                    pending: BTreeMap::new(),
                    expiry: None,
                    redeliver: BTreeMap::new(),
                });
            if consumer.filters.all != spec.filters {
                return Err(BusError::Invalid {
                    what: "consumer",
                    detail: format!(
                        "`{}` exists with other filters {:?}",
                        spec.durable, consumer.filters.all
                    ),
                });
            }
            let wake = consumer.wake.clone();
            drop(state);
            let holder = self.shared.next_holder.fetch_add(1, Ordering::Relaxed);
            let acker: Arc<dyn Acker> = Arc::new(MemoryAcker {
                shared: self.shared.clone(),
                durable: spec.durable.clone(),
            });
            Ok(Box::new(MemorySubscription {
                shared: self.shared.clone(),
                wake,
                durable: spec.durable.clone(),
                holder,
                acker,
                timer: None,
            }) as Box<dyn Subscription>)
        })
    }

    fn replay<'a>(
        &'a self,
        filter: &'a str,
    ) -> BusFuture<'a, BoxStream<'static, Result<Stored, BusError>>> {
        let shared = self.shared.clone();
        let filters = vec![filter.to_owned()];
        BusFuture::ready(replay_filters(shared, filters, ReplayFrom::Oldest))
    }

    fn replay_any<'a>(
        &'a self,
        filters: &'a [String],
    ) -> BusFuture<'a, BoxStream<'static, Result<Stored, BusError>>> {
        let shared = self.shared.clone();
        let filters = filters.to_vec();
        BusFuture::ready(replay_filters(shared, filters, ReplayFrom::Oldest))
    }

    /// A replay that starts at the end of the log: in process, nothing is ever missed.
    fn listen<'a>(
        &'a self,
        filters: &'a [String],
    ) -> BusFuture<'a, BoxStream<'static, Result<Stored, BusError>>> {
        let shared = self.shared.clone();
        let filters = filters.to_vec();
        BusFuture::ready(replay_filters(shared, filters, ReplayFrom::Now))
    }

    /// Reads the run's index when the filter names one run (as a call's outcome
    /// filter does), the whole log otherwise.
    fn first<'a>(&'a self, filter: &'a str) -> BusFuture<'a, Option<Stored>> {
        BusFuture::ready(check_filter(filter).map(|()| {
            let filters = Filters::new(vec![filter.to_owned()]);
            let state = self.shared.lock();
            let mut found = VecDeque::with_capacity(1);
            let mut from = state.first_seq;
            while found.is_empty() && from < state.next_seq() {
                from = take_matches(
                    &state,
                    &filters,
                    literal_prefix_of(filter),
                    from,
                    1,
                    &mut found,
                );
            }
            found.pop_front()
        }))
    }
}

/// Where a replay starts.
#[derive(Clone, Copy)]
enum ReplayFrom {
    /// At the oldest message the log holds.
    Oldest,
    /// After the newest: only what is published later.
    Now,
}

/// The most messages a replay takes from the log under one lock.
const REPLAY_BATCH: usize = 64;

/// Moves the messages from `from` on that match `filters` (among the messages of run
/// `prefix` when the filters name one run, in the whole log otherwise) into `into`, up
/// to `most`; returns the first sequence number not looked at.
fn take_matches(
    state: &State,
    filters: &Filters,
    prefix: Option<&str>,
    from: u64,
    most: usize,
    into: &mut VecDeque<Stored>,
) -> u64 {
    let mut take = |seqs: &mut dyn Iterator<Item = u64>| {
        for seq in seqs {
            if into.len() == most {
                return seq;
            }
            if let Some(stored) = state.get(seq).filter(|s| filters.matches(&s.subject)) {
                into.push_back(stored.clone());
            }
        }
        state.next_seq()
    };
    match prefix {
        Some(prefix) => match state.by_prefix.get(prefix) {
            Some(run) => {
                let start = run.seqs.partition_point(|seq| *seq < from);
                take(&mut run.seqs.range(start..).copied())
            }
            None => state.next_seq(),
        },
        None => take(&mut (from..state.next_seq())),
    }
}

/// The messages matching any of `filters`, from the oldest the log holds, then new
/// ones; the stream is woken only by publishes that match, and what it has yet to take
/// from the log stays there while it lives. It takes what matches in batches, one lock
/// of the bus for up to [`REPLAY_BATCH`] messages: a reader that keeps up with a busy
/// run (a run handle's watcher, following its outcomes) would otherwise take the lock,
/// and search the run's index, once per message.
fn replay_filters(
    shared: Arc<Shared>,
    filters: Vec<String>,
    start: ReplayFrom,
) -> Result<BoxStream<'static, Result<Stored, BusError>>, BusError> {
    if filters.is_empty() {
        return Err(super::no_filters());
    }
    for filter in &filters {
        check_filter(filter)?;
    }
    // When every filter names one run, read that run's index, not the whole log.
    let prefix = literal_prefix_of(&filters[0])
        .filter(|p| filters.iter().all(|f| literal_prefix_of(f) == Some(*p)))
        .map(str::to_owned);
    let replay = Arc::new(Replay {
        filters: Filters::new(filters),
        wake: Arc::new(Notify::new()),
        next: AtomicU64::new(0),
    });
    {
        let mut state = shared.lock();
        if let ReplayFrom::Now = start {
            replay.next.store(state.next_seq(), Ordering::Relaxed);
        }
        state.replays.push(Arc::downgrade(&replay));
        state.generation += 1;
    }
    // Taken from the log and not yet handed out: these are past `replay.next`, so the
    // log may drop them, but the stream holds them.
    let taken = VecDeque::with_capacity(REPLAY_BATCH);
    let stream = stream::unfold(
        (shared, replay, prefix, taken),
        |(shared, replay, prefix, mut taken)| async move {
            loop {
                if let Some(found) = taken.pop_front() {
                    return Some((Ok(found), (shared, replay, prefix, taken)));
                }
                let changed = replay.wake.notified();
                {
                    let state = shared.lock();
                    let from = replay.next.load(Ordering::Relaxed).max(state.first_seq);
                    let (filters, prefix) = (&replay.filters, prefix.as_deref());
                    let next =
                        take_matches(&state, filters, prefix, from, REPLAY_BATCH, &mut taken);
                    replay.next.store(next, Ordering::Relaxed);
                }
                if taken.is_empty() {
                    changed.await;
                }
            }
        },
    );
    Ok(Box::pin(stream) as BoxStream<'static, Result<Stored, BusError>>)
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    async fn publish(bus: &MemoryBus, subject: &str, body: &str) {
        bus.publish(subject, body.as_bytes().to_vec().into(), None)
            .await
            .unwrap();
    }

    /// The consumer most tests use: `work`, on subject `q`, with `ack_wait`.
    fn work(ack_wait: Duration) -> ConsumerSpec {
        ConsumerSpec::new("work", ["q"]).with_ack_wait(ack_wait)
    }

    /// Every way of matching a filter (literal, a span of `*`, `*` anywhere, a
    /// trailing `>`) agrees with the plain token-by-token rule, over every filter of
    /// up to four tokens and every subject of up to five.
    #[test]
    fn each_filter_shape_matches_as_the_rule_does() {
        let sequences = |tokens: &[&str], most: usize| {
            let mut all: Vec<String> = Vec::new();
            let mut last: Vec<String> = vec![String::new()];
            for _ in 0..most {
                last = last
                    .iter()
                    .flat_map(|s| {
                        tokens.iter().map(move |t| match s.is_empty() {
                            true => (*t).to_owned(),
                            false => format!("{s}.{t}"),
                        })
                    })
                    .collect();
                all.extend(last.iter().cloned());
            }
            all
        };
        let filters: Vec<String> = sequences(&["a", "bc", "*", ">"], 4)
            .into_iter()
            .filter(|f| check_filter(f).is_ok())
            .collect();
        let subjects = sequences(&["a", "bc", "d"], 5);
        assert!(
            filters
                .iter()
                .any(|f| matches!(span_of(f), Some(Shape::Span { .. })))
        );
        for filter in &filters {
            let compiled = Filters::new(vec![filter.clone()]);
            for subject in &subjects {
                assert_eq!(
                    compiled.matches(subject),
                    super::super::subject_matches(filter, subject),
                    "{filter} against {subject}"
                );
            }
        }
    }

    #[tokio::test]
    async fn emitted_messages_are_stored_and_deduplicated() {
        let bus = MemoryBus::new();
        bus.emit("aaa.t.r.x", b"1".to_vec().into(), Some("one"))
            .await
            .unwrap();
        bus.emit("aaa.t.r.x", b"again".to_vec().into(), Some("one"))
            .await
            .unwrap();
        publish(&bus, "aaa.t.r.x", "2").await;
        let mut replay = bus.replay("aaa.t.r.x").await.unwrap();
        let first = replay.next().await.unwrap().unwrap();
        let second = replay.next().await.unwrap().unwrap();
        assert_eq!(
            (&first.payload[..], &second.payload[..]),
            (&b"1"[..], &b"2"[..])
        );
        let error = bus
            .emit("aaa.t.*", Vec::new().into(), None)
            .await
            .unwrap_err();
        assert!(matches!(error, BusError::Invalid { .. }), "{error}");
    }

    #[tokio::test(start_paused = true)]
    async fn competing_subscriptions_share_a_consumer() {
        let bus = MemoryBus::new();
        let spec = ConsumerSpec::new("work", ["q.>"]);
        let mut a = bus.subscribe(&spec).await.unwrap();
        let mut b = bus.subscribe(&spec).await.unwrap();
        publish(&bus, "q.1", "one").await;
        publish(&bus, "other", "skip").await;
        publish(&bus, "q.2", "two").await;
        let first = a.next().await.unwrap();
        let second = b.next().await.unwrap();
        assert_eq!(
            (&first.payload[..], &second.payload[..]),
            (&b"one"[..], &b"two"[..])
        );
        first.ack().await.unwrap();
        second.ack().await.unwrap();
        assert_eq!(bus.ack_pending("work"), 0);
    }

    /// A run remembers whom a publish on each of its subjects wakes; a consumer and a
    /// replay that come later still get the next publish on a subject it knows.
    #[tokio::test(start_paused = true)]
    async fn a_late_consumer_and_replay_get_publishes_on_a_known_subject() {
        let bus = MemoryBus::new();
        let subject = "aaa.t.r.tool.requested";
        publish(&bus, subject, "1").await;
        let spec = ConsumerSpec::new("late", ["aaa.*.*.tool.requested"]);
        let mut sub = bus.subscribe(&spec).await.unwrap();
        let mut replay = bus.replay(subject).await.unwrap();
        // Both have read the whole log: the next publish is matched as it is made.
        let first = sub.next().await.unwrap();
        let replayed = replay.next().await.unwrap().unwrap();
        assert_eq!(
            (&first.payload[..], &replayed.payload[..]),
            (&b"1"[..], &b"1"[..])
        );
        publish(&bus, subject, "2").await;
        let wait = Duration::from_secs(1);
        let second = tokio::time::timeout(wait, sub.next())
            .await
            .expect("the late consumer gets the publish")
            .unwrap();
        let replayed = tokio::time::timeout(wait, replay.next())
            .await
            .expect("the late replay gets the publish")
            .unwrap()
            .unwrap();
        assert_eq!(
            (&second.payload[..], &replayed.payload[..]),
            (&b"2"[..], &b"2"[..])
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_late_consumer_reads_the_log_then_new_publishes_in_order() {
        let bus = MemoryBus::new();
        publish(&bus, "q.1", "one").await;
        publish(&bus, "other", "skip").await;
        let spec = ConsumerSpec::new("late", ["q.*"]).with_ack_wait(Duration::from_secs(5));
        let mut sub = bus.subscribe(&spec).await.unwrap();
        // Published before the consumer has looked at the log, then after.
        publish(&bus, "q.2", "two").await;
        let first = sub.next().await.unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        publish(&bus, "q.3", "three").await;
        publish(&bus, "other.x", "skip").await;
        let mut bodies = vec![first.payload.to_vec()];
        let mut held = vec![first];
        for _ in 0..2 {
            let message = sub.next().await.unwrap();
            bodies.push(message.payload.to_vec());
            held.push(message);
        }
        assert_eq!(bodies, [&b"one"[..], b"two", b"three"]);
        // The earliest deadline (the first's, at 5 s) is settled; the last one left
        // (at 7 s) brings its message back then, not before and not never.
        held[0].ack().await.unwrap();
        held[1].ack().await.unwrap();
        let start = tokio::time::Instant::now();
        let again = sub.next().await.unwrap();
        assert_eq!((again.seq, again.delivery_count), (held[2].seq, 2));
        assert_eq!(start.elapsed(), Duration::from_secs(5));
        assert!(
            tokio::time::timeout(Duration::from_secs(1), sub.next())
                .await
                .is_err(),
            "nothing else to deliver"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn unsettled_messages_come_back() {
        let bus = MemoryBus::new();
        let spec = work(Duration::from_secs(5));
        let mut sub = bus.subscribe(&spec).await.unwrap();
        publish(&bus, "q", "x").await;
        let first = sub.next().await.unwrap();
        assert_eq!(first.delivery_count, 1);
        // Past the ack deadline: delivered again, counted.
        let again = sub.next().await.unwrap();
        assert_eq!(again.delivery_count, 2);
        assert!(Instant::now() >= tokio::time::Instant::now());
        // A nak delays the next delivery.
        again.nak(Duration::from_secs(60)).await.unwrap();
        let start = Instant::now();
        let third = sub.next().await.unwrap();
        assert_eq!(third.delivery_count, 3);
        assert!(start.elapsed() >= Duration::from_secs(60));
        third.term().await.unwrap();
        assert_eq!(bus.ack_pending("work"), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn until_settled_is_woken_by_the_settlement_of_the_last_message() {
        let bus = MemoryBus::new();
        let spec = work(Duration::from_secs(3600));
        let mut sub = bus.subscribe(&spec).await.unwrap();
        publish(&bus, "q", "1").await;
        publish(&bus, "q", "2").await;
        let (first, second) = (sub.next().await.unwrap(), sub.next().await.unwrap());
        // Nobody waits: an ack wakes nobody, and the count stays at zero.
        let waiters = || bus.shared.settled_waiters.load(Ordering::SeqCst);
        assert_eq!(waiters(), 0);

        let waiting = tokio::spawn({
            let bus = bus.clone();
            async move { bus.until_settled("work").await }
        });
        tokio::task::yield_now().await;
        assert_eq!(waiters(), 1, "the waiter counts itself");
        first.ack().await.unwrap();
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "one message is still unsettled");
        second.term().await.unwrap();
        // Woken by the settlement, not by a timer: paused time would fire the timeout.
        tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .expect("the last settlement wakes the waiter")
            .unwrap();
        assert_eq!(waiters(), 0);

        // A wait given up (dropped) counts itself out too.
        publish(&bus, "q", "3").await;
        let third = sub.next().await.unwrap();
        let given_up = tokio::time::timeout(Duration::from_secs(1), bus.until_settled("work"));
        assert!(given_up.await.is_err());
        assert_eq!(waiters(), 0);
        third.ack().await.unwrap();
        bus.until_settled("work").await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_subscription_hands_its_messages_back() {
        let bus = MemoryBus::new();
        let spec = work(Duration::from_secs(3600));
        let mut a = bus.subscribe(&spec).await.unwrap();
        publish(&bus, "q", "x").await;
        let held = a.next().await.unwrap();
        drop(a);
        let mut b = bus.subscribe(&spec).await.unwrap();
        let again = tokio::time::timeout(Duration::from_secs(1), b.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!((again.seq, again.delivery_count), (held.seq, 2));
    }

    #[tokio::test(start_paused = true)]
    async fn in_progress_extends_the_deadline() {
        let bus = MemoryBus::new();
        let spec = work(Duration::from_secs(10));
        let mut sub = bus.subscribe(&spec).await.unwrap();
        publish(&bus, "q", "x").await;
        let msg = sub.next().await.unwrap();
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_secs(8)).await;
            msg.in_progress().await.unwrap();
        }
        assert!(
            tokio::time::timeout(Duration::from_secs(9), sub.next())
                .await
                .is_err(),
            "no redelivery while in progress"
        );
        msg.ack().await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn publishes_dedupe_by_id_within_the_window() {
        let bus = MemoryBus::new();
        bus.publish("q", b"1".to_vec().into(), Some("id-1"))
            .await
            .unwrap();
        bus.publish("q", b"1".to_vec().into(), Some("id-1"))
            .await
            .unwrap();
        assert_eq!(bus.len(), 1);
        tokio::time::sleep(Duration::from_secs(121)).await;
        bus.publish("q", b"1".to_vec().into(), Some("id-1"))
            .await
            .unwrap();
        assert_eq!(bus.len(), 2);
        assert!(bus.publish("q.*", Vec::new().into(), None).await.is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn replaying_one_run_reads_only_its_messages_in_order() {
        let bus = MemoryBus::new();
        for i in 0..50 {
            publish(&bus, &format!("aaa.t.run-{}.tool.x", i % 5), &i.to_string()).await;
        }
        let mut replay = bus.replay("aaa.t.run-3.>").await.unwrap();
        let mut seen = Vec::new();
        for _ in 0..10 {
            seen.push(
                String::from_utf8(replay.next().await.unwrap().unwrap().payload.to_vec()).unwrap(),
            );
        }
        let expected: Vec<String> = (0..50)
            .filter(|i| i % 5 == 3)
            .map(|i| i.to_string())
            .collect();
        assert_eq!(seen, expected);
        publish(&bus, "aaa.t.run-3.tool.y", "late").await;
        assert_eq!(&replay.next().await.unwrap().unwrap().payload[..], b"late");
        assert_eq!(prefix_of("aaa.t.r.tool.x"), Some("aaa.t.r"));
        assert_eq!(literal_prefix_of("aaa.*.r.>"), None);
    }

    /// The quick shapes of a filter never change what it matches.
    #[test]
    fn filters_match_as_the_subject_rules_say() {
        let filters = [
            "aaa.*.*.tool.requested",
            "aaa.t.r.tool.completed",
            "aaa.*.*.approval.*",
            "aaa.t.>",
            "*.b",
            "a.*.x",
            "*",
            ">",
            "*.*.*.tool.*",
            "aaa.*.r.>",
        ];
        let subjects = [
            "aaa.t.r.tool.requested",
            "aaa.t.r.tool.completed",
            "aaa.t.r.approval.granted",
            "aaa.t.r.xrequested",
            "aaa.t.requested",
            "a.b",
            "b",
            "a.b.x",
            "a.b.yx",
            "a.bx",
            "aaa.t",
            "aaa.t.r.tool",
            "x.aaa.t.r.tool.requested",
        ];
        for filter in filters {
            let quick = Filters::new(vec![filter.to_owned()]);
            for subject in subjects {
                assert_eq!(
                    quick.matches(subject),
                    subject_matches(filter, subject),
                    "{filter} {subject}"
                );
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn replaying_several_filters_keeps_log_order() {
        let bus = MemoryBus::new();
        publish(&bus, "aaa.t.r.tool.requested", "0").await;
        publish(&bus, "aaa.t.r.tool.failed", "1").await;
        publish(&bus, "aaa.t.r2.tool.completed", "other run").await;
        publish(&bus, "aaa.t.r.tool.completed", "2").await;
        let filters = [
            "aaa.t.r.tool.completed".to_owned(),
            "aaa.t.r.tool.failed".to_owned(),
        ];
        let mut replay = bus.replay_any(&filters).await.unwrap();
        assert_eq!(&replay.next().await.unwrap().unwrap().payload[..], b"1");
        assert_eq!(&replay.next().await.unwrap().unwrap().payload[..], b"2");
        // A publish matching neither filter does not end the wait; a matching one does.
        publish(&bus, "aaa.t.r.tool.requested", "3").await;
        publish(&bus, "aaa.t.r.tool.failed", "4").await;
        assert_eq!(&replay.next().await.unwrap().unwrap().payload[..], b"4");
        assert!(bus.replay_any(&[]).await.is_err());
        assert!(bus.replay_any(&["a.>.b".to_owned()]).await.is_err());
    }

    fn kept_seqs(bus: &MemoryBus) -> Vec<u64> {
        let state = bus.shared.lock();
        state.log.iter().map(|kept| kept.stored.seq).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn released_messages_beyond_the_limit_are_removed_oldest_first() {
        let bus = MemoryBus::with_retention(Retention::default().with_max_messages(3));
        let spec = ConsumerSpec::new("work", ["aaa.t.*.q"]);
        let mut sub = bus.subscribe(&spec).await.unwrap();
        for i in 1..=10 {
            publish(&bus, &format!("aaa.t.r{}.q", i % 2), &i.to_string()).await;
            sub.next().await.unwrap().ack().await.unwrap();
        }
        assert_eq!(kept_seqs(&bus), [8, 9, 10]);
        // A replay starts at the oldest message kept, whole-log or one run's.
        let mut all = bus.replay("aaa.>").await.unwrap();
        assert_eq!(all.next().await.unwrap().unwrap().seq, 8);
        let mut run = bus.replay("aaa.t.r1.q").await.unwrap();
        assert_eq!(&run.next().await.unwrap().unwrap().payload[..], b"9");
        drop((all, run));
        // A run's index goes with its last message.
        for i in 11..=13 {
            publish(&bus, "aaa.t.r2.q", &i.to_string()).await;
            sub.next().await.unwrap().ack().await.unwrap();
        }
        assert_eq!(kept_seqs(&bus), [11, 12, 13]);
        let state = bus.shared.lock();
        let runs: Vec<&String> = state.by_prefix.keys().collect();
        assert_eq!(runs, ["aaa.t.r2"]);
        assert_eq!(state.by_prefix["aaa.t.r2"].seqs, [11, 12, 13]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_message_a_consumer_still_needs_is_kept() {
        let bus = MemoryBus::with_retention(Retention::default().with_max_messages(2));
        let spec = work(Duration::from_secs(10));
        let mut sub = bus.subscribe(&spec).await.unwrap();
        publish(&bus, "q", "held").await;
        let held = sub.next().await.unwrap();
        // Not delivered yet (matched), and not looked at yet by a new consumer: kept.
        for i in 0..5 {
            publish(&bus, "q", &i.to_string()).await;
        }
        assert_eq!(kept_seqs(&bus), [1, 2, 3, 4, 5, 6]);
        let mut late = bus
            .subscribe(&ConsumerSpec::new("late", ["q"]))
            .await
            .unwrap();
        assert_eq!(
            late.next().await.unwrap().seq,
            1,
            "a new consumer reads the oldest kept"
        );
        // Past its deadline the held message comes back whole.
        tokio::time::sleep(Duration::from_secs(11)).await;
        let again = sub.next().await.unwrap();
        assert_eq!(again.delivery_count, 2);
        drop(held);
        assert_eq!((again.seq, &again.payload[..]), (1, &b"held"[..]));
        again.ack().await.unwrap();
        while let Ok(Ok(message)) = tokio::time::timeout(Duration::from_secs(1), sub.next()).await {
            message.ack().await.unwrap();
        }
        // `late` took seq 1 and holds it: nothing can go yet.
        publish(&bus, "other", "x").await;
        assert_eq!(kept_seqs(&bus).first(), Some(&1));
        drop(late);
        let mut late = bus
            .subscribe(&ConsumerSpec::new("late", ["q"]))
            .await
            .unwrap();
        loop {
            let message = late.next().await.unwrap();
            message.ack().await.unwrap();
            if message.seq == 6 {
                break;
            }
        }
        // Everything is settled: the next publish trims the log to its limit.
        publish(&bus, "other", "y").await;
        assert_eq!(kept_seqs(&bus), [7, 8]);
        assert_eq!(bus.ack_pending("work") + bus.ack_pending("late"), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_live_replay_keeps_what_it_has_not_read() {
        let bus = MemoryBus::with_retention(Retention::default().with_max_messages(1));
        let mut replay = bus.replay("aaa.t.a.>").await.unwrap();
        publish(&bus, "aaa.t.a.x", "1").await;
        publish(&bus, "aaa.t.a.x", "2").await;
        publish(&bus, "aaa.t.b.x", "other run").await;
        assert_eq!(kept_seqs(&bus), [1, 2, 3], "nothing is read yet");
        // The replay takes both its messages under one lock: the log holds neither
        // for it any more, and it still hands out the second.
        assert_eq!(&replay.next().await.unwrap().unwrap().payload[..], b"1");
        publish(&bus, "aaa.t.b.x", "other run").await;
        assert_eq!(kept_seqs(&bus), [4]);
        assert_eq!(&replay.next().await.unwrap().unwrap().payload[..], b"2");
        publish(&bus, "aaa.t.a.x", "5").await;
        publish(&bus, "aaa.t.b.x", "other run").await;
        assert_eq!(kept_seqs(&bus), [5, 6], "5 is not read yet");
        assert_eq!(&replay.next().await.unwrap().unwrap().payload[..], b"5");
        // Read up to date (and then beyond what it matches): nothing is held for it.
        publish(&bus, "aaa.t.b.x", "other run").await;
        assert_eq!(kept_seqs(&bus), [7]);
        // A dropped replay holds nothing.
        let unread = bus.replay("aaa.t.b.>").await.unwrap();
        publish(&bus, "aaa.t.b.x", "8").await;
        assert_eq!(kept_seqs(&bus), [7, 8]);
        drop(unread);
        publish(&bus, "aaa.t.b.x", "9").await;
        assert_eq!(kept_seqs(&bus), [9]);
    }

    #[tokio::test]
    async fn a_replay_takes_a_long_backlog_in_batches_and_loses_none() {
        let bus = MemoryBus::new();
        let total = REPLAY_BATCH * 3 + 5;
        for i in 0..total {
            publish(&bus, "aaa.t.a.x", &i.to_string()).await;
            publish(&bus, "aaa.t.a.y", "skipped").await;
        }
        let mut replay = bus.replay("aaa.t.a.x").await.unwrap();
        for i in 0..total {
            let stored = replay.next().await.unwrap().unwrap();
            assert_eq!(&stored.payload[..], i.to_string().as_bytes());
        }
        publish(&bus, "aaa.t.a.x", "live").await;
        assert_eq!(&replay.next().await.unwrap().unwrap().payload[..], b"live");
    }

    #[tokio::test(start_paused = true)]
    async fn old_released_messages_are_removed_at_the_next_publish() {
        let retention = Retention::unlimited().with_max_age(Duration::from_secs(60));
        let bus = MemoryBus::with_retention(retention);
        publish(&bus, "q", "old").await;
        tokio::time::sleep(Duration::from_secs(30)).await;
        publish(&bus, "q", "newer").await;
        tokio::time::sleep(Duration::from_secs(31)).await;
        assert_eq!(
            kept_seqs(&bus),
            [1, 2],
            "nothing is removed between publishes"
        );
        publish(&bus, "q", "new").await;
        assert_eq!(kept_seqs(&bus), [2, 3]);
    }

    #[tokio::test(start_paused = true)]
    async fn publish_ids_are_remembered_within_the_limits() {
        let retention = Retention::default()
            .with_max_messages(2)
            .with_duplicate_window(Duration::from_secs(5));
        let bus = MemoryBus::with_retention(retention);
        let publish_as = async |id: &str| {
            bus.publish("q", id.as_bytes().to_vec().into(), Some(id))
                .await
                .unwrap();
        };
        // The second `a` is a duplicate; then `c` makes `a` the third id back,
        // forgotten: the third `a` is stored, and the second `c` is a duplicate.
        for id in ["a", "b", "a", "c", "a", "c"] {
            publish_as(id).await;
        }
        let mut replay = bus.replay("q").await.unwrap();
        let mut bodies = Vec::new();
        for _ in 0..2 {
            bodies.push(replay.next().await.unwrap().unwrap().payload.to_vec());
        }
        assert_eq!(bodies, [b"c".to_vec(), b"a".to_vec()]);
        assert_eq!(kept_seqs(&bus), [3, 4]);
        tokio::time::sleep(Duration::from_secs(6)).await;
        publish_as("c").await;
        assert_eq!(kept_seqs(&bus).last(), Some(&5), "past the window");
    }

    #[tokio::test(start_paused = true)]
    async fn replay_reads_the_past_then_follows() {
        let bus = MemoryBus::new();
        publish(&bus, "run.a.x", "1").await;
        publish(&bus, "run.b.x", "2").await;
        let mut replay = bus.replay("run.a.>").await.unwrap();
        assert_eq!(&replay.next().await.unwrap().unwrap().payload[..], b"1");
        publish(&bus, "run.a.y", "3").await;
        assert_eq!(&replay.next().await.unwrap().unwrap().payload[..], b"3");
    }
}
