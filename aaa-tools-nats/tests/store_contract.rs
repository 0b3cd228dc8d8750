//! The [`GuardStore`](aaa_tools::GuardStore) contract (`aaa_tests::contract`), run
//! unchanged against the JetStream store on a real `nats-server`: one test per case,
//! each on a backend of its own (a server of its own).
//!
//! The tests pass without running, and say so, when no `nats-server` is found;
//! `AAA_REQUIRE_NATS=1` makes that a failure. `AAA_NATS_SERVER` picks the binary.

use aaa_tests::contract::Nats;

aaa_tests::store_suite!(Nats::start());
