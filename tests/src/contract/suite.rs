//! The suites as macros: one `#[tokio::test]` per case, named after it, so a backend's
//! crate runs the whole contract with one line in an integration test of its own.
//!
//! ```no_run
//! // tests/contract.rs of a backend's crate, `MyBackend::start()` in place of this:
//! use aaa_tests::contract::Memory;
//!
//! aaa_tests::bus_suite!(Some(Memory::new()));
//! aaa_tests::store_suite!(Some(Memory::new()));
//! # fn main() {}
//! ```
//!
//! `$make` is an `Option` of a [`Backend`](super::Backend), evaluated once per test
//! (`None`: the test passes without running, as [`Nats::start`](super::Nats::start)
//! says). The test files use `tokio` and this crate.

/// One test per case of the [`Bus`](aaa_tools::bus::Bus) contract, each on a fresh
/// backend `$make` makes (see the [module docs](crate::contract)).
#[macro_export]
macro_rules! bus_suite {
    ($make:expr) => {
        $crate::bus_suite!(@cases $make;
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
    (@cases $make:expr; $($module:ident::$case:ident($on:ident)),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() {
            let Some(backend) = $make else { return };
            $crate::bus_suite!(@run backend, $module::$case, $on);
        }
    )*};
    (@run $backend:ident, $module:ident::$case:ident, bus) => {
        $crate::contract::$module::$case(&*$crate::contract::Backend::bus(&$backend).await)
            .await
    };
    (@run $backend:ident, $module:ident::$case:ident, backend) => {
        $crate::contract::$module::$case(&$backend).await
    };
}

/// One test per case of the [`GuardStore`](aaa_tools::GuardStore) contract, each on a
/// store of a fresh backend `$make` makes (see the [module docs](crate::contract)).
#[macro_export]
macro_rules! store_suite {
    ($make:expr) => {
        $crate::store_suite!(@cases $make;
            create_makes_a_record_only_when_absent,
            values_come_back_as_written,
            update_compares_and_sets_on_the_revision,
            of_two_writers_one_wins,
            delete_removes_and_the_key_can_be_made_again,
            keys_lists_by_prefix_in_key_order,
            bad_keys_are_refused,
            retire_and_age_take_any_key,
            the_two_kinds_are_kept_apart,
        );
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() {
            let Some(backend) = $make else { return };
            $crate::contract::store::$case(&*$crate::contract::Backend::store(&backend).await)
                .await;
        }
    )*};
}
