//! Durable consumers, their subscriptions, settlement and redelivery.
//!
//! # The part of the [`Bus`](crate::bus::Bus) contract this carries
//!
//! - A **durable consumer** is named; [`subscribe`](crate::bus::Bus::subscribe) makes
//!   it on first use (reading from the oldest message the log keeps) and binds another
//!   subscription to it after that. Its filters are fixed when it is made: binding with
//!   other filters is [`BusError::Invalid`].
//! - Its subscriptions **compete**: each matching message goes to one of them.
//! - A delivered message is **pending** until settled through
//!   [`Message`]: `ack` and `term` end it for good (`term`: a
//!   poison message), `nak` asks for it again after a delay, `in_progress` pushes its
//!   ack deadline back by the consumer's ack wait.
//! - A pending message is **delivered again**, with its delivery count one higher,
//!   when its ack deadline passes or when the subscription holding it is dropped.
//! - Settlements are matched by **sequence number**, not by delivery: a late ack from a
//!   subscription that lost the message still settles it (as on JetStream).
//!
//! # How it works here
//!
//! Each consumer has a cursor (the first message it has not looked at), a queue of the
//! messages a publish matched for it since (so it matches each message once), its
//! pending deliveries with their deadlines, and the messages due for redelivery. A
//! subscription takes under the bus's lock: a due redelivery first, then the oldest
//! matched message, then whatever matches past the cursor; otherwise it waits for a
//! publish it matches or for the earliest deadline. An ack or term wakes nobody:
//! nothing becomes deliverable by it, and a wake per ack would cost every call a task
//! switch.

use std::collections::{BTreeMap, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use smallvec::SmallVec;
use tokio::sync::Notify;
use tokio::time::{Instant, Sleep};

use super::filters::{Filters, Wakes};
use super::{Consumers, MemoryBus, Shared, State};
use crate::bus::{Acker, BusError, BusFuture, ConsumerSpec, Message, Subscription, subject};

/// A durable consumer's state.
pub(super) struct ConsumerState {
    pub(super) filters: Filters,
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

/// A delivery not yet settled.
struct Pending {
    deliveries: u32,
    deadline: Instant,
    /// The subscription that holds it.
    holder: u64,
}

impl ConsumerState {
    /// Whether this consumer still needs message `seq` (the oldest in the log): not
    /// looked at yet and matching, or matched and not delivered yet, or delivered and
    /// not settled.
    pub(super) fn holds(&self, seq: u64, subject: &str) -> bool {
        (self.cursor <= seq && self.filters.matches(subject))
            || self.matched.front() == Some(&seq)
            || self.pending.contains_key(&seq)
            || self.redeliver.contains_key(&seq)
    }

    /// Messages delivered and not yet settled.
    pub(super) fn unsettled(&self) -> usize {
        self.pending.len() + self.redeliver.len()
    }
}

/// Tells every consumer of message `seq`, on `subject`, just stored: each that has
/// looked at everything before it has now looked at it too (and queues it when it
/// matches), and each that matches is to be woken, through `wake`, once the bus's lock
/// is released.
pub(super) fn published(
    consumers: &mut Consumers,
    seq: u64,
    subject: &str,
    wakes: Option<Wakes>,
    wake: &mut SmallVec<[Arc<Notify>; 4]>,
) {
    for (i, consumer) in consumers.values_mut().enumerate() {
        let matches = match wakes {
            Some(wakes) => wakes.consumer(i),
            None => consumer.filters.matches(subject),
        };
        if matches {
            wake.push(consumer.wake.clone());
        }
        if consumer.cursor == seq {
            consumer.cursor += 1;
            if matches {
                consumer.matched.push_back(seq);
            }
        }
    }
}

/// Binds a subscription to `spec.durable`, making the consumer on first use.
pub(super) fn subscribe(
    shared: &Arc<Shared>,
    spec: &ConsumerSpec,
) -> Result<Box<dyn Subscription>, BusError> {
    if spec.durable.is_empty() || spec.filters.is_empty() {
        return Err(BusError::Invalid {
            what: "consumer",
            detail: "a durable name and at least one filter are required".into(),
        });
    }
    for filter in &spec.filters {
        subject::check_filter(filter)?;
    }
    let mut state = shared.lock();
    let first_seq = state.log.first_seq();
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
    if consumer.filters.all() != spec.filters {
        return Err(BusError::Invalid {
            what: "consumer",
            detail: format!(
                "`{}` exists with other filters {:?}",
                spec.durable,
                consumer.filters.all()
            ),
        });
    }
    let wake = consumer.wake.clone();
    drop(state);
    let holder = shared.next_holder.fetch_add(1, Ordering::Relaxed);
    let acker: Arc<dyn Acker> = Arc::new(MemoryAcker {
        shared: shared.clone(),
        durable: spec.durable.clone(),
    });
    Ok(Box::new(MemorySubscription {
        shared: shared.clone(),
        wake,
        durable: spec.durable.clone(),
        holder,
        acker,
        timer: None,
    }))
}

impl MemoryBus {
    /// Messages delivered to `durable` and not yet settled: what JetStream calls the
    /// consumer's ack-pending count.
    pub fn ack_pending(&self, durable: &str) -> usize {
        self.shared
            .lock()
            .consumers
            .get(durable)
            .map_or(0, ConsumerState::unsettled)
    }

    /// Waits until `durable` holds no delivered-but-unsettled message (returns at once
    /// when it holds none). For tests and shutdown checks.
    pub async fn until_settled(&self, durable: &str) {
        /// Counts a waiter for as long as it waits (a dropped wait included).
        struct Waiting<'a>(&'a std::sync::atomic::AtomicUsize);
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
}

impl Shared {
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

    /// Applies a settlement to one consumer and wakes its subscriptions.
    fn settle(&self, durable: &str, change: impl FnOnce(&mut ConsumerState, Instant)) {
        let mut state = self.lock();
        let wake = state.consumers.get_mut(durable).map(|consumer| {
            change(consumer, Instant::now());
            consumer.wake.clone()
        });
        drop(state);
        if let Some(wake) = wake {
            wake.notify_waiters();
        }
        self.settled_changed();
    }
}

/// Settles the messages of one consumer. A settlement is done before it returns: its
/// future is ready, and allocates nothing.
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
        self.shared.settle(&self.durable, |c, now| {
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

/// One subscription to a durable consumer.
struct MemorySubscription {
    shared: Arc<Shared>,
    wake: Arc<Notify>,
    durable: String,
    /// Tells this subscription's deliveries from its siblings'.
    holder: u64,
    acker: Arc<dyn Acker>,
    /// Wakes a waiting taker at the next deadline. Kept from wait to wait and moved
    /// only when the deadline does (which, the expiry being a lower bound, is rarely):
    /// a timer registered anew at every wait could wake a parked runtime thread each
    /// time, to learn of a deadline half a minute away.
    timer: Option<Pin<Box<Sleep>>>,
}

impl Drop for MemorySubscription {
    /// Hands what it holds back for redelivery, at once.
    fn drop(&mut self) {
        let holder = self.holder;
        self.shared.settle(&self.durable, |consumer, now| {
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
        let State { log, consumers, .. } = &mut *state;
        let (first_seq, end) = (log.first_seq(), log.next_seq());
        // Held messages are never removed, so every one looked up here is in the log.
        let at = |seq: u64| log.get(seq).expect("a held message is kept");
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use tokio::time::Instant;

    use super::super::publish;
    use crate::bus::{Bus, ConsumerSpec, MemoryBus};

    /// The consumer most tests use: `work`, on subject `q`, with `ack_wait`.
    fn work(ack_wait: Duration) -> ConsumerSpec {
        ConsumerSpec::new("work", ["q"]).with_ack_wait(ack_wait)
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
}
