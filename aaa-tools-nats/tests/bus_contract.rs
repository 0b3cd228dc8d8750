//! The [`Bus`](aaa_tools::bus::Bus) contract (`aaa_tests::contract`), run unchanged
//! against the JetStream bus on a real `nats-server`: one test per case, each on a
//! backend of its own (a server of its own).
//!
//! The tests pass without running, and say so, when no `nats-server` is found;
//! `AAA_REQUIRE_NATS=1` makes that a failure. `AAA_NATS_SERVER` picks the binary.

use aaa_tests::contract::{self, Nats};

aaa_tests::bus_suite!(Nats::start());

/// The JetStream bus's listener ends when its connection is drained (its reconnect
/// watch with it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_ends_when_the_bus_closes() {
    let Some(backend) = Nats::start() else { return };
    contract::bus::listen_ends_when_the_bus_closes(&backend).await;
}
