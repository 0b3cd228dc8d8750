//! The [`Bus`](aaa_tools::bus::Bus) contract (`aaa_tests::contract`), run unchanged
//! against the embedded bus and the JetStream bus on a real `nats-server`: one test
//! per case and backend, each on a fresh backend.
//!
//! The NATS tests pass without running, and say so, when no `nats-server` is found;
//! `AAA_REQUIRE_NATS=1` makes that a failure. `AAA_NATS_SERVER` picks the binary.

use aaa_tests::contract::{self, Backend, Memory, Nats};

/// One test per case, named after it, each on a backend `$make` makes (`None`: the
/// test passes without running, as [`Nats::start`] says). A case runs on a bus handle
/// (`bus`) or on the backend itself (`backend`).
macro_rules! cases {
    ($make:expr; $($module:ident::$case:ident($on:ident)),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() {
            let Some(backend) = $make else { return };
            cases!(@run backend, $module::$case, $on);
        }
    )*};
    (@run $backend:ident, $module:ident::$case:ident, bus) => {
        contract::$module::$case(&*$backend.bus().await).await
    };
    (@run $backend:ident, $module:ident::$case:ident, backend) => {
        contract::$module::$case(&$backend).await
    };
}

/// Every case that every bus backend passes.
macro_rules! bus_suite {
    ($make:expr) => {
        cases!($make;
            bus::a_replay_reads_the_log_in_order_then_follows(bus),
            bus::replay_any_keeps_log_order(bus),
            bus::bad_subjects_are_refused_and_not_stored(bus),
            bus::duplicates_within_the_window_are_dropped(bus),
            bus::listen_hears_only_what_is_stored_after_it_returns(bus),
            bus::first_is_the_oldest_match(bus),
            consumers::subscriptions_of_one_consumer_compete(bus),
            consumers::an_unsettled_message_comes_back_after_the_ack_wait(bus),
            consumers::nak_brings_a_message_back_and_term_ends_it(bus),
            consumers::in_progress_holds_a_message_past_its_ack_wait(bus),
            consumers::a_dropped_subscription_hands_its_messages_back(backend),
            consumers::a_consumer_needs_a_name_and_a_good_filter(bus),
        );
    };
}

mod memory {
    use super::*;

    bus_suite!(Some(Memory::new()));

    /// The embedded bus is never closed (it lives as long as anyone holds it, a
    /// listener included), so it has no closing listener to show.
    #[tokio::test]
    async fn the_embedded_bus_has_nothing_to_close() {
        assert!(!Memory::new().close().await);
    }
}

mod nats {
    use super::*;

    bus_suite!(Nats::start());

    /// The JetStream bus's listener ends when its connection is drained (its
    /// reconnect watch with it).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn listen_ends_when_the_bus_closes() {
        let Some(backend) = Nats::start() else { return };
        contract::bus::listen_ends_when_the_bus_closes(&backend).await;
    }
}
