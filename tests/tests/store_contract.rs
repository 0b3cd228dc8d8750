//! The [`GuardStore`](aaa_tools::GuardStore) contract (`aaa_tests::contract`), run
//! unchanged against the embedded store and the JetStream store on a real
//! `nats-server`: one test per case and backend, each on a fresh backend.
//!
//! The NATS tests pass without running, and say so, when no `nats-server` is found;
//! `AAA_REQUIRE_NATS=1` makes that a failure. `AAA_NATS_SERVER` picks the binary.

use aaa_tests::contract::{self, Backend, Memory, Nats};

/// One test per case, named after it, each on a store of a backend `$make` makes
/// (`None`: the test passes without running, as [`Nats::start`] says).
macro_rules! store_suite {
    ($make:expr) => {
        store_suite!($make;
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
    ($make:expr; $($case:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() {
            let Some(backend) = $make else { return };
            contract::store::$case(&*backend.store().await).await;
        }
    )*};
}

mod memory {
    use super::*;

    store_suite!(Some(Memory::new()));
}

mod nats {
    use super::*;

    store_suite!(Nats::start());
}
