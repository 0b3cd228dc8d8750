//! Shared parts of the integration tests (they live in `tests/`): a real `nats-server`
//! per test ([`NatsServer`]) and worker processes ([`WorkerProcess`]) for the fault
//! tests of the JetStream bus and KV store.

mod server;
mod worker;

pub use server::NatsServer;
pub use worker::{Ledger, WorkerProcess, WorkerSettings};
