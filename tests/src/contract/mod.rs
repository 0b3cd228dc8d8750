//! The contracts of [`Bus`] and [`GuardStore`], as tests written once and run
//! unchanged against every backend: the embedded [`MemoryBus`](aaa_tools::bus::MemoryBus)
//! and [`MemoryStore`](aaa_tools::MemoryStore) ([`Memory`]), the JetStream bus and store
//! on a real `nats-server` ([`Nats`]), and any backend written next.
//!
//! Each case is an async fn over `&dyn Bus` or `&dyn GuardStore` (in [`bus`],
//! [`consumers`] and [`store`]), or over a [`Backend`] when it needs more than one
//! handle or has to close the bus. [`bus_suite!`](crate::bus_suite) and
//! [`store_suite!`](crate::store_suite) make one test of each case on a backend:
//! `tests/bus_contract.rs` and `tests/store_contract.rs` run them on the embedded
//! backends, and the same files of `aaa-tools-nats` on the JetStream ones. To check a
//! new backend, implement [`Backend`] for it and call the two macros in its crate's
//! tests.
//!
//! # What the cases rely on
//!
//! Only what every backend promises. Where the two backends differ, the cases keep to
//! what both do, and the case says so:
//!
//! - subjects start with `aaa.` (a JetStream stream stores only its own subjects);
//! - a consumer has one filter, and its durable name is `[A-Za-z0-9_-]` (JetStream's
//!   rules on servers before 2.10, and on every server, respectively);
//! - [`Bus::listen`] is asked only for outcome subjects
//!   (`aaa.<tenant>.<run>.tool.<how>.<call>`), the only ones the JetStream bus
//!   listens to;
//! - a message held by a dropped subscription comes back, and the case only waits for
//!   it (the embedded bus hands it back at once; a server learns of it only by the
//!   ack deadline, and its client by its next pull);
//! - a listener hears each filter's matches in log order, but across several filters
//!   in no promised order (the JetStream bus subscribes once per filter);
//! - store keys are checked by `create` and `update` (the embedded store does not
//!   check a key it merely reads or deletes), and a store's keys are written both in
//!   the `guard.` space and another (the JetStream store keeps call records on the
//!   facts stream and the rest in a KV bucket: both must keep the contract).
//!
//! Waits are bounded by [`PATIENCE`]: a message a case expects comes well within it,
//! and a case that must see *nothing* arrive watches for a stated time.

mod backends;
pub mod bus;
pub mod consumers;
pub mod store;
mod suite;

use std::sync::Arc;
use std::time::Duration;

use aaa_tools::GuardStore;
use aaa_tools::bus::{Bus, BusError, Message, Stored, Subscription};
use futures::future::BoxFuture;
use futures::stream::{BoxStream, StreamExt};

pub use backends::{Memory, Nats};

/// The de-duplication window every [`Backend`] gives its buses.
pub const DUPLICATE_WINDOW: Duration = Duration::from_secs(2);

/// How long a case waits for something it expects before it fails.
pub const PATIENCE: Duration = Duration::from_secs(15);

/// A backend under test: hands out buses and stores on one log and one set of
/// records, fresh when the backend is made.
///
/// Each call is a new handle (a new connection, where there is one) on the same log
/// or the same records, so what one handle stores another sees.
pub trait Backend: Send + Sync {
    /// The backend's name, for messages.
    fn name(&self) -> &'static str;

    /// A handle on the backend's bus, whose de-duplication window is
    /// [`DUPLICATE_WINDOW`].
    fn bus(&self) -> BoxFuture<'_, Arc<dyn Bus>>;

    /// A handle on the backend's store.
    fn store(&self) -> BoxFuture<'_, Arc<dyn GuardStore>>;

    /// Closes every bus handle made so far; `false` when the backend has nothing to
    /// close (an in-process bus lives for as long as anyone holds it).
    fn close(&self) -> BoxFuture<'_, bool>;
}

/// `body` as a payload.
pub(crate) fn bytes(body: &str) -> aaa_tools::bus::Payload {
    body.as_bytes().to_vec().into()
}

/// Publishes `body` at `subject`, which must succeed.
pub(crate) async fn publish(bus: &dyn Bus, subject: &str, body: &str) {
    bus.publish(subject, bytes(body), None)
        .await
        .unwrap_or_else(|error| panic!("publishing at {subject}: {error}"));
}

/// The next item of `stream`, which must come within [`PATIENCE`].
pub(crate) async fn next_stored(
    stream: &mut BoxStream<'static, Result<Stored, BusError>>,
) -> Stored {
    tokio::time::timeout(PATIENCE, stream.next())
        .await
        .expect("a stored message comes")
        .expect("the stream goes on")
        .expect("a readable message")
}

/// The next message of `subscription`, which must come within [`PATIENCE`].
pub(crate) async fn next_message(subscription: &mut dyn Subscription) -> Message {
    tokio::time::timeout(PATIENCE, subscription.next())
        .await
        .expect("a message is delivered")
        .expect("a readable delivery")
}

/// Asserts that `subscription` delivers nothing within `wait`.
pub(crate) async fn nothing_within(subscription: &mut dyn Subscription, wait: Duration, why: &str) {
    if let Ok(delivered) = tokio::time::timeout(wait, subscription.next()).await {
        let delivered = delivered.map(|m| (m.subject.to_string(), m.seq, m.delivery_count));
        panic!("{why}, but {delivered:?} was delivered");
    }
}

/// The body of a stored message or a delivery, as text.
pub(crate) fn text(payload: &aaa_tools::bus::Payload) -> String {
    String::from_utf8(payload.to_vec()).expect("a text payload")
}

/// Whether `error` is [`BusError::Invalid`].
pub(crate) fn invalid(error: &BusError) -> bool {
    matches!(error, BusError::Invalid { .. })
}
