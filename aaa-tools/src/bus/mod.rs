//! The [`Bus`]: durable publish and competing-consumer delivery with deferred acks.
//!
//! A bus is a log of messages (subject + bytes) and durable consumers over it. A
//! consumer hands each matching message to one of the subscriptions bound to it, and
//! the message stays *pending* until that subscription settles it:
//!
//! - [`Message::ack`]: done, never delivered again;
//! - [`Message::nak`]: deliver again after a delay;
//! - [`Message::in_progress`]: still working, extend the ack deadline;
//! - [`Message::term`]: never deliver again (a poison message).
//!
//! A pending message is delivered again when its ack deadline passes or when the
//! subscription that held it is dropped. Every delivery carries its delivery count.
//!
//! Acks are matched by sequence number, not by delivery, exactly like JetStream: a
//! late ack from a subscription that lost the message still settles it. Whoever may
//! have been superseded must not ack (the guard takes care of that).
//!
//! Subjects and filters follow NATS's rules (`*` one token, `>` the rest), matched by
//! one function for every bus: [`subject_matches`].
//!
//! Implementations: [`MemoryBus`] (the embedded default, in process) and the JetStream
//! bus (`NatsBus`, in the crate `aaa-tools-nats`).
//!
//! # Writing a backend
//!
//! Read [`MemoryBus`]'s source first: it is the reference implementation, one module
//! per part of the contract (its log and retention, filters, consumers and
//! redelivery, replay, de-duplication), each opening with the part it carries. Then
//! run the workspace's conformance suite against yours: the contract tests of `Bus`
//! and `GuardStore`, written once (`aaa_tests::contract`) and run unchanged on every
//! backend.
//!
//! A backend in a crate of its own checks subjects and filters, and reports bad ones,
//! with the same functions the embedded bus uses, so every bus refuses the same input
//! with the same error: [`check_publish_subject`], [`check_filter`],
//! [`invalid_filter`] (for a filter the backend refuses for a rule of its own) and
//! [`no_filters`]; [`replay_covering`] is [`Bus::replay_any`] for a bus that replays
//! one filter at a time.
//!
//! What a message holds is a [`Payload`]: bytes ([`Bytes`](bytes::Bytes), crate `bytes`, the buffer
//! type tokio and async-nats use, so a delivery shares the buffer its log holds and a
//! NATS message's buffer passes through as it arrived), or, on the embedded bus, the
//! value those bytes are written from, written only if somebody reads them (see
//! [`Payload`]).

mod future;
mod memory;
mod payload;
mod subject;

use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;

pub use future::BusFuture;
pub use memory::{MemoryBus, Retention};
pub use payload::{Encode, Payload};
pub use subject::{
    check_filter, check_publish_subject, covering_filter, invalid_filter, no_filters,
    subject_matches,
};

/// Resolves once a message sent with [`Bus::send`] is stored (or failed to be).
pub type Confirmation = BusFuture<'static, ()>;

/// A failed bus operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BusError {
    /// The bus could not be reached or did not answer; the operation may be retried.
    #[error("bus unavailable: {0}")]
    Unavailable(String),
    /// The bus has been closed.
    #[error("bus closed")]
    Closed,
    /// An invalid subject, filter or consumer name.
    #[error("invalid {what}: {detail}")]
    Invalid {
        /// What was invalid.
        what: &'static str,
        /// Why.
        detail: String,
    },
    /// A message larger than the bus takes in one piece ([`Bus::max_payload`]). Never
    /// transient: sending it again fails again.
    #[error(
        "a message of {size} bytes is larger than the bus takes in one message (max_payload: {limit} bytes)"
    )]
    TooLarge {
        /// The message's size, headers included.
        size: usize,
        /// The bus's limit.
        limit: usize,
    },
}

impl BusError {
    /// Whether retrying may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, BusError::Unavailable(_))
    }
}

/// A message read back from the log (by [`Bus::replay`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// Its position in the log.
    pub seq: u64,
    /// Its subject (shared: the embedded bus keeps one copy of each subject per run).
    pub subject: Arc<str>,
    /// Its content, shared with the log that holds it (cloning is a reference count).
    pub payload: Payload,
}

/// What a durable consumer delivers.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumerSpec {
    /// The durable name; subscriptions with the same name compete for messages.
    pub durable: String,
    /// Subject filters (`*` matches one token, `>` the rest).
    pub filters: Vec<String>,
    /// How long a delivered message may stay unsettled before it is delivered again.
    pub ack_wait: Duration,
    /// How many messages one subscription holds unsettled at most (a bus sizes its
    /// server-side limits from it: JetStream's `MaxAckPending`).
    pub max_in_flight: usize,
}

impl ConsumerSpec {
    /// A consumer named `durable` over `filters`, with a 30 s ack wait and up to 256
    /// messages in flight per subscription.
    pub fn new(
        durable: impl Into<String>,
        filters: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        ConsumerSpec {
            durable: durable.into(),
            filters: filters.into_iter().map(Into::into).collect(),
            ack_wait: Duration::from_secs(30),
            max_in_flight: 256,
        }
    }

    /// Sets the ack wait.
    pub fn with_ack_wait(mut self, ack_wait: Duration) -> Self {
        self.ack_wait = ack_wait;
        self
    }

    /// Sets how many messages one subscription holds unsettled at most.
    pub fn with_max_in_flight(mut self, max_in_flight: usize) -> Self {
        self.max_in_flight = max_in_flight.max(1);
        self
    }
}

/// Settles delivered messages; implemented by each bus.
pub trait Acker: Send + Sync {
    /// Acknowledges message `seq`.
    fn ack(&self, seq: u64) -> BusFuture<'_, ()>;
    /// Asks for `seq` to be delivered again after `delay`.
    fn nak(&self, seq: u64, delay: Duration) -> BusFuture<'_, ()>;
    /// Extends the ack deadline of `seq`.
    fn in_progress(&self, seq: u64) -> BusFuture<'_, ()>;
    /// Stops all deliveries of `seq`.
    fn term(&self, seq: u64) -> BusFuture<'_, ()>;
}

/// A delivered message.
pub struct Message {
    /// Its subject (shared with the log that holds it).
    pub subject: Arc<str>,
    /// Its content, shared with the log that holds it.
    pub payload: Payload,
    /// Its position in the log (what acks refer to).
    pub seq: u64,
    /// 1 on the first delivery, 2 on the next, ...
    ///
    /// A hint, not a fact to build safety on: a JetStream server may hand a message
    /// held by a subscription that went away to another one without counting up. The
    /// engine uses it only to guess that a call is new (the guard's record decides;
    /// budgets count calls by id).
    pub delivery_count: u32,
    acker: Arc<dyn Acker>,
}

impl Message {
    /// A message settled through `acker` (for bus implementations).
    pub fn new(
        subject: impl Into<Arc<str>>,
        payload: Payload,
        seq: u64,
        delivery_count: u32,
        acker: Arc<dyn Acker>,
    ) -> Self {
        Message {
            subject: subject.into(),
            payload,
            seq,
            delivery_count,
            acker,
        }
    }

    /// Acknowledges the message: it is never delivered again.
    pub async fn ack(&self) -> Result<(), BusError> {
        self.acker.ack(self.seq).await
    }

    /// Delivers it again after `delay`.
    pub async fn nak(&self, delay: Duration) -> Result<(), BusError> {
        self.acker.nak(self.seq, delay).await
    }

    /// Extends its ack deadline.
    pub async fn in_progress(&self) -> Result<(), BusError> {
        self.acker.in_progress(self.seq).await
    }

    /// Never delivers it again.
    pub async fn term(&self) -> Result<(), BusError> {
        self.acker.term(self.seq).await
    }
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Message")
            .field("subject", &self.subject)
            .field("seq", &self.seq)
            .field("delivery_count", &self.delivery_count)
            // A deferred payload is not written just to be shown.
            .field(
                "bytes",
                &self.payload.is_written().then(|| self.payload.len()),
            )
            .finish()
    }
}

/// A subscription to a durable consumer. Dropping it hands its unsettled messages back
/// for redelivery.
#[must_use = "dropping a subscription hands its unsettled messages back for redelivery"]
pub trait Subscription: Send {
    /// The next message (waits until one is available).
    fn next(&mut self) -> BusFuture<'_, Message>;

    /// The next message, from a caller that could take `room` messages now: a bus that
    /// pulls from a server may ask for up to that many at once (never more, so nothing
    /// waits in a buffer for a slot). The default ignores `room`.
    fn next_with_room(&mut self, room: usize) -> BusFuture<'_, Message> {
        let _ = room;
        self.next()
    }
}

/// Durable publish and delivery (see the [module docs](self)).
pub trait Bus: Send + Sync + 'static {
    /// Appends a message. A second publish with the same `msg_id` within the bus's
    /// de-duplication window is dropped.
    fn publish<'a>(
        &'a self,
        subject: &'a str,
        payload: Payload,
        msg_id: Option<&'a str>,
    ) -> BusFuture<'a, ()>;

    /// Sends a message without waiting for it to be stored: returns once it is on its
    /// way, ordered before anything published later through this bus, with a
    /// [`Confirmation`] to await (or drop) for the outcome. For facts whose publisher
    /// need not wait. The default publishes fully, then confirms at once.
    fn send<'a>(
        &'a self,
        subject: &'a str,
        payload: Payload,
        msg_id: Option<&'a str>,
    ) -> BusFuture<'a, Confirmation> {
        BusFuture::new(async move {
            self.publish(subject, payload, msg_id).await?;
            Ok(Confirmation::ready(Ok(())))
        })
    }

    /// Sends a message nobody waits for and nobody confirms: ordered before anything
    /// published later through this bus, and lost without a trace when the bus cannot
    /// store it. For audit facts whose loss costs only the record of something that
    /// happened, never a decision (the guard's `attempt_started`, say). A server-backed
    /// bus sends it without asking for a receipt. The default [`send`](Self::send)s it
    /// and looks at the [`Confirmation`] once without waiting: a bus that stores as it
    /// sends (the embedded one) has its answer, an error included, ready by then.
    fn emit<'a>(
        &'a self,
        subject: &'a str,
        payload: Payload,
        msg_id: Option<&'a str>,
    ) -> BusFuture<'a, ()> {
        BusFuture::new(async move {
            let confirmation = self.send(subject, payload, msg_id).await?;
            futures::FutureExt::now_or_never(confirmation).unwrap_or(Ok(()))
        })
    }

    /// Binds a subscription to the durable consumer `spec.durable` (created on first
    /// use).
    fn subscribe<'a>(&'a self, spec: &'a ConsumerSpec) -> BusFuture<'a, Box<dyn Subscription>>;

    /// The largest message the bus takes, in bytes, when it has a limit (a NATS
    /// server's `max_payload`, which counts headers too). A publish past it fails with
    /// [`BusError::TooLarge`]; the engine keeps every fact it publishes within it. The
    /// default: no limit.
    fn max_payload(&self) -> Option<usize> {
        None
    }

    /// Every stored message matching `filter`, from the start of the log, then new ones
    /// as they arrive.
    fn replay<'a>(
        &'a self,
        filter: &'a str,
    ) -> BusFuture<'a, BoxStream<'static, Result<Stored, BusError>>>;

    /// Every stored message matching any of `filters`, in log order, from the start of
    /// the log, then new ones as they arrive. The default replays the narrowest filter
    /// covering them all ([`covering_filter`]) and drops what none of them matches;
    /// buses that filter by several subjects at once do better.
    fn replay_any<'a>(
        &'a self,
        filters: &'a [String],
    ) -> BusFuture<'a, BoxStream<'static, Result<Stored, BusError>>> {
        BusFuture::new(replay_covering(self, filters))
    }

    /// The messages matching any of `filters` that are stored from now on, as they
    /// are stored: nothing from before, and nothing kept for the listener on a server
    /// beyond a subscription. Once the returned future resolves, every message stored
    /// later comes through, unless the stream says otherwise: an `Err` item means
    /// messages may have been missed (the connection to a server dropped, say), and
    /// whoever needs each one looks it up with [`first`](Self::first). The stream ends
    /// when the bus closes.
    ///
    /// A bus may listen to part of its subjects only: the JetStream bus listens to
    /// the facts of one call (`aaa.<tenant>.<run>.tool.<how>.<call>`: outcomes and
    /// cancels), which its stream republishes once they are stored; another filter is
    /// [`BusError::Invalid`].
    fn listen<'a>(
        &'a self,
        filters: &'a [String],
    ) -> BusFuture<'a, BoxStream<'static, Result<Stored, BusError>>>;

    /// The oldest message the bus holds that matches `filter`, if it holds one. One
    /// lookup on a subject index, not a read of everything before it (the JetStream
    /// bus asks the stream for its next message on the subject).
    fn first<'a>(&'a self, filter: &'a str) -> BusFuture<'a, Option<Stored>>;

    /// The sequence number of the last message stored (0 when none), or `None` when
    /// the bus cannot tell: a position to compare the `seq` of later deliveries with.
    /// A worker asks once when it starts listening for cancels (and after a gap in
    /// what it heard), so that only a call whose request was stored before that
    /// position costs it a [`first`](Self::first) lookup for a cancel it may have
    /// missed. The default, `None`, makes the worker look up every call it starts.
    fn last_seq(&self) -> BusFuture<'_, Option<u64>> {
        BusFuture::ready(Ok(None))
    }
}

/// The messages matching any of `filters` (what the log holds, then new ones as they
/// arrive), through one replay of their covering filter, dropping what none of them
/// matches: the default of [`Bus::replay_any`], and the
/// fallback of buses that cannot always filter by several subjects (the JetStream bus
/// on a server that takes one filter per consumer). No filter is [`no_filters`]'s
/// error; a malformed one is refused by `bus.replay`.
///
/// ```
/// use aaa_tools::bus::{Bus, MemoryBus, Payload, replay_covering};
/// use futures::StreamExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), aaa_tools::bus::BusError> {
/// let bus = MemoryBus::new();
/// for subject in ["a.1.x", "a.2.y", "a.3.x"] {
///     bus.publish(subject, Payload::from(b"{}".to_vec()), None).await?;
/// }
/// let filters = ["a.1.x".to_owned(), "a.3.>".to_owned()];
/// // A replay follows the log after its end: take what is there.
/// let stored: Vec<_> = replay_covering(&bus, &filters).await?.take(2).collect().await;
/// let subjects: Vec<String> = stored.into_iter().map(|m| m.unwrap().subject.to_string()).collect();
/// assert_eq!(subjects, ["a.1.x", "a.3.x"]);
/// # Ok(()) }
/// ```
pub async fn replay_covering<B: Bus + ?Sized>(
    bus: &B,
    filters: &[String],
) -> Result<BoxStream<'static, Result<Stored, BusError>>, BusError> {
    let cover = covering_filter(filters).ok_or_else(no_filters)?;
    let stream = bus.replay(&cover).await?;
    if filters.len() == 1 {
        return Ok(stream);
    }
    let filters = filters.to_vec();
    let wanted = move |item: &Result<Stored, BusError>| {
        let keep = match item {
            Ok(stored) => filters.iter().any(|f| subject_matches(f, &stored.subject)),
            Err(_) => true,
        };
        std::future::ready(keep)
    };
    Ok(Box::pin(futures::StreamExt::filter(stream, wanted)))
}

impl<B: Bus + ?Sized> Bus for Arc<B> {
    fn publish<'a>(
        &'a self,
        subject: &'a str,
        payload: Payload,
        msg_id: Option<&'a str>,
    ) -> BusFuture<'a, ()> {
        (**self).publish(subject, payload, msg_id)
    }
    fn send<'a>(
        &'a self,
        subject: &'a str,
        payload: Payload,
        msg_id: Option<&'a str>,
    ) -> BusFuture<'a, Confirmation> {
        (**self).send(subject, payload, msg_id)
    }
    fn emit<'a>(
        &'a self,
        subject: &'a str,
        payload: Payload,
        msg_id: Option<&'a str>,
    ) -> BusFuture<'a, ()> {
        (**self).emit(subject, payload, msg_id)
    }
    fn subscribe<'a>(&'a self, spec: &'a ConsumerSpec) -> BusFuture<'a, Box<dyn Subscription>> {
        (**self).subscribe(spec)
    }
    fn max_payload(&self) -> Option<usize> {
        (**self).max_payload()
    }
    fn replay<'a>(
        &'a self,
        filter: &'a str,
    ) -> BusFuture<'a, BoxStream<'static, Result<Stored, BusError>>> {
        (**self).replay(filter)
    }
    fn replay_any<'a>(
        &'a self,
        filters: &'a [String],
    ) -> BusFuture<'a, BoxStream<'static, Result<Stored, BusError>>> {
        (**self).replay_any(filters)
    }
    fn listen<'a>(
        &'a self,
        filters: &'a [String],
    ) -> BusFuture<'a, BoxStream<'static, Result<Stored, BusError>>> {
        (**self).listen(filters)
    }
    fn first<'a>(&'a self, filter: &'a str) -> BusFuture<'a, Option<Stored>> {
        (**self).first(filter)
    }
    fn last_seq(&self) -> BusFuture<'_, Option<u64>> {
        (**self).last_seq()
    }
}

#[cfg(test)]
mod tests {
    /// A bus behind an `Arc` (as every engine holds its bus) keeps its own `emit`.
    #[test]
    fn an_arc_forwards_emit_to_the_bus_it_holds() {
        use super::*;
        use std::sync::atomic::{AtomicUsize, Ordering};

        struct Counting(crate::bus::MemoryBus, AtomicUsize);
        impl Bus for Counting {
            fn publish<'a>(
                &'a self,
                s: &'a str,
                p: Payload,
                id: Option<&'a str>,
            ) -> BusFuture<'a, ()> {
                self.0.publish(s, p, id)
            }
            fn send<'a>(
                &'a self,
                s: &'a str,
                p: Payload,
                id: Option<&'a str>,
            ) -> BusFuture<'a, Confirmation> {
                self.0.send(s, p, id)
            }
            fn emit<'a>(
                &'a self,
                s: &'a str,
                p: Payload,
                id: Option<&'a str>,
            ) -> BusFuture<'a, ()> {
                self.1.fetch_add(1, Ordering::SeqCst);
                self.0.emit(s, p, id)
            }
            fn subscribe<'a>(
                &'a self,
                spec: &'a ConsumerSpec,
            ) -> BusFuture<'a, Box<dyn Subscription>> {
                self.0.subscribe(spec)
            }
            fn replay<'a>(
                &'a self,
                f: &'a str,
            ) -> BusFuture<'a, BoxStream<'static, Result<Stored, BusError>>> {
                self.0.replay(f)
            }
            fn listen<'a>(
                &'a self,
                f: &'a [String],
            ) -> BusFuture<'a, BoxStream<'static, Result<Stored, BusError>>> {
                self.0.listen(f)
            }
            fn first<'a>(&'a self, f: &'a str) -> BusFuture<'a, Option<Stored>> {
                self.0.first(f)
            }
        }
        let counting = Arc::new(Counting(crate::bus::MemoryBus::new(), AtomicUsize::new(0)));
        let bus: Arc<dyn Bus> = counting.clone();
        // `Arc<dyn Bus>` is itself a `Bus`: this goes through that impl.
        let emitted = Bus::emit(&bus, "aaa.t.r.x", b"{}".to_vec().into(), None);
        assert!(matches!(
            futures::FutureExt::now_or_never(emitted),
            Some(Ok(()))
        ));
        assert_eq!(counting.1.load(Ordering::SeqCst), 1);
    }
}
