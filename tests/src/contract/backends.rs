//! The backends the contract suite runs against: [`Memory`] and [`Nats`].

use std::sync::{Arc, Mutex};

use aaa_tools::bus::{Bus, MemoryBus, Retention};
use aaa_tools::{GuardStore, MemoryStore};
use aaa_tools_nats::{NatsBus, NatsOptions};
use futures::future::BoxFuture;

use super::{Backend, DUPLICATE_WINDOW};
use crate::NatsServer;

/// The embedded backends: one [`MemoryBus`] and one [`MemoryStore`], whose clones are
/// the handles.
pub struct Memory {
    bus: MemoryBus,
    store: MemoryStore,
}

impl Memory {
    /// An empty bus (with a [`DUPLICATE_WINDOW`]) and an empty store.
    pub fn new() -> Self {
        let retention = Retention::default().with_duplicate_window(DUPLICATE_WINDOW);
        Memory {
            bus: MemoryBus::with_retention(retention),
            store: MemoryStore::new(),
        }
    }
}

impl Default for Memory {
    fn default() -> Self {
        Memory::new()
    }
}

impl Backend for Memory {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn bus(&self) -> BoxFuture<'_, Arc<dyn Bus>> {
        Box::pin(async move { Arc::new(self.bus.clone()) as Arc<dyn Bus> })
    }

    fn store(&self) -> BoxFuture<'_, Arc<dyn GuardStore>> {
        Box::pin(async move { Arc::new(self.store.clone()) as Arc<dyn GuardStore> })
    }

    fn close(&self) -> BoxFuture<'_, bool> {
        Box::pin(async { false })
    }
}

/// The JetStream bus and store on a `nats-server` of their own, started for the
/// backend and stopped with it. Every handle is a connection of its own
/// ([`NatsOptions::connect_parts`]).
pub struct Nats {
    server: NatsServer,
    /// Every bus handed out, to close them.
    buses: Mutex<Vec<NatsBus>>,
}

impl Nats {
    /// A backend on a new server: `AAA_NATS_SERVER`, else the `nats-server` on `PATH`.
    /// `None` (the suite's NATS tests then pass without running, and say so) when
    /// there is none; a panic instead when `AAA_REQUIRE_NATS=1`.
    pub fn start() -> Option<Self> {
        let server = NatsServer::start()?;
        Some(Nats {
            server,
            buses: Mutex::new(Vec::new()),
        })
    }

    /// The server's version line.
    pub fn version(&self) -> String {
        self.server.version()
    }

    fn options(&self) -> NatsOptions {
        NatsOptions::new(self.server.url()).duplicate_window(DUPLICATE_WINDOW)
    }
}

impl Backend for Nats {
    fn name(&self) -> &'static str {
        "nats"
    }

    fn bus(&self) -> BoxFuture<'_, Arc<dyn Bus>> {
        Box::pin(async move {
            let (bus, _) = self.options().connect_parts().await.expect("connects");
            self.buses.lock().unwrap().push(bus.clone());
            Arc::new(bus) as Arc<dyn Bus>
        })
    }

    fn store(&self) -> BoxFuture<'_, Arc<dyn GuardStore>> {
        Box::pin(async move {
            let (_, store) = self.options().connect_parts().await.expect("connects");
            Arc::new(store) as Arc<dyn GuardStore>
        })
    }

    fn close(&self) -> BoxFuture<'_, bool> {
        Box::pin(async move {
            let buses = std::mem::take(&mut *self.buses.lock().unwrap());
            for bus in buses {
                bus.raw_jetstream()
                    .client()
                    .drain()
                    .await
                    .expect("the connection drains");
            }
            true
        })
    }
}
