//! The [`Bus`](aaa_tools::bus::Bus) contract (`aaa_tests::contract`), run unchanged
//! against the embedded bus: one test per case, each on a fresh backend. The same
//! suite runs on the JetStream bus in `aaa-tools-nats/tests/bus_contract.rs`.

use aaa_tests::contract::{Backend, Memory};

aaa_tests::bus_suite!(Some(Memory::new()));

/// The embedded bus is never closed (it lives as long as anyone holds it, a listener
/// included), so it has no closing listener to show.
#[tokio::test]
async fn the_embedded_bus_has_nothing_to_close() {
    assert!(!Memory::new().close().await);
}
