//! The [`GuardStore`](aaa_tools::GuardStore) contract (`aaa_tests::contract`), run
//! unchanged against the embedded store: one test per case, each on a fresh backend.
//! The same suite runs on the JetStream store in
//! `aaa-tools-nats/tests/store_contract.rs`.

use aaa_tests::contract::Memory;

aaa_tests::store_suite!(Some(Memory::new()));
