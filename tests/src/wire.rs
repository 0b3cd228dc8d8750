//! [`WireBus`]: the embedded bus with every payload written to bytes on the way, so
//! the engine and guard suites, run over it (`AAA_WIRE=bytes`), go through the same
//! byte codec as NATS does: every request, outcome and fact is written as JSON by its
//! publisher and parsed by its reader.

use std::sync::Arc;

use aaa_tools::bus::{
    Bus, BusFuture, Confirmation, ConsumerSpec, MemoryBus, Payload, Stored, Subscription,
};
use aaa_tools::{Engine, MemoryStore};
use futures::stream::BoxStream;

/// A bus that hands every payload on as bytes: a value the engine would hand over
/// unwritten (the embedded bus's fast path) is written to JSON, and its reader parses it.
#[derive(Debug, Clone)]
pub struct WireBus<B>(pub B);

/// `payload` as bytes: a value the engine handed over unwritten is written now.
fn written(payload: Payload) -> Payload {
    Payload::from(payload.into_bytes())
}

impl<B: Bus> Bus for WireBus<B> {
    fn publish<'a>(
        &'a self,
        subject: &'a str,
        payload: Payload,
        msg_id: Option<&'a str>,
    ) -> BusFuture<'a, ()> {
        self.0.publish(subject, written(payload), msg_id)
    }

    fn send<'a>(
        &'a self,
        subject: &'a str,
        payload: Payload,
        msg_id: Option<&'a str>,
    ) -> BusFuture<'a, Confirmation> {
        self.0.send(subject, written(payload), msg_id)
    }

    fn emit<'a>(
        &'a self,
        subject: &'a str,
        payload: Payload,
        msg_id: Option<&'a str>,
    ) -> BusFuture<'a, ()> {
        self.0.emit(subject, written(payload), msg_id)
    }

    fn subscribe<'a>(&'a self, spec: &'a ConsumerSpec) -> BusFuture<'a, Box<dyn Subscription>> {
        self.0.subscribe(spec)
    }

    fn max_payload(&self) -> Option<usize> {
        self.0.max_payload()
    }

    fn replay<'a>(
        &'a self,
        filter: &'a str,
    ) -> BusFuture<'a, BoxStream<'static, Result<Stored, aaa_tools::bus::BusError>>> {
        self.0.replay(filter)
    }

    fn replay_any<'a>(
        &'a self,
        filters: &'a [String],
    ) -> BusFuture<'a, BoxStream<'static, Result<Stored, aaa_tools::bus::BusError>>> {
        self.0.replay_any(filters)
    }

    fn listen<'a>(
        &'a self,
        filters: &'a [String],
    ) -> BusFuture<'a, BoxStream<'static, Result<Stored, aaa_tools::bus::BusError>>> {
        self.0.listen(filters)
    }

    fn first<'a>(&'a self, filter: &'a str) -> BusFuture<'a, Option<Stored>> {
        self.0.first(filter)
    }

    fn last_seq(&self) -> BusFuture<'_, Option<u64>> {
        self.0.last_seq()
    }
}

/// Whether the suites run over the byte codec (`AAA_WIRE=bytes`).
pub fn over_the_wire() -> bool {
    std::env::var("AAA_WIRE").as_deref() == Ok("bytes")
}

/// `bus` as the engine under test sees it: as it is, or through [`WireBus`] when
/// [`over_the_wire`].
pub fn bus_under_test(bus: MemoryBus) -> Arc<dyn Bus> {
    if over_the_wire() {
        Arc::new(WireBus(bus))
    } else {
        Arc::new(bus)
    }
}

/// The embedded engine under test: [`Engine::embedded`], through [`WireBus`] when
/// [`over_the_wire`].
pub fn embedded() -> Engine {
    Engine::new(bus_under_test(MemoryBus::new()), MemoryStore::new())
}
