//! Shared parts of the integration tests (they live in `tests/`): a real `nats-server`
//! per test ([`NatsServer`]) and worker processes ([`WorkerProcess`]) for the fault
//! tests of the JetStream bus and KV store, the backends' conformance suite
//! ([`contract`]), and the [`History`] an embedded engine keeps, for the benches.

mod cluster;
pub mod contract;
mod history;
mod raw;
mod server;
mod wire;
mod worker;

pub use cluster::NatsCluster;
pub use history::History;
pub use raw::RawJetStream;
pub use server::{NatsServer, WITHOUT_JETSTREAM};
pub use wire::{WireBus, bus_under_test, embedded, over_the_wire};
pub use worker::{Ledger, WorkerProcess, WorkerSettings};

/// The consumers on the facts stream (`AAA`) of `bus`, by the server's count.
pub async fn stream_consumers(bus: &aaa_tools_nats::NatsBus) -> usize {
    let mut stream = bus.raw_jetstream().get_stream("AAA").await.unwrap();
    stream.info().await.unwrap().state.consumer_count
}

/// A Python interpreter that can import `module`: `AAA_PYTHON` (the venv
/// `scripts/test` makes), else `python3` on `PATH`. `None` (printing why) when there is
/// none; a panic instead when `AAA_REQUIRE_PYTHON=1`: CI must not skip these tests.
pub fn python_with(module: &str) -> Option<std::path::PathBuf> {
    let python = std::env::var_os("AAA_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "python3".into());
    let imports = std::process::Command::new(&python)
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|out| out.status.success());
    if imports {
        return Some(python);
    }
    let reason = format!(
        "{} cannot import {module} (scripts/test makes a venv with it and sets AAA_PYTHON)",
        python.display()
    );
    if std::env::var("AAA_REQUIRE_PYTHON").as_deref() == Ok("1") {
        panic!("AAA_REQUIRE_PYTHON=1 but {reason}");
    }
    say_skipped(&reason);
    None
}

/// Says once per test binary, on the real stderr (past the test harness's capture, so
/// `cargo test` shows it even when the tests pass), that tests were skipped and why.
pub(crate) fn say_skipped(reason: &str) {
    use std::io::Write;
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        let binary = std::env::args().next().unwrap_or_default();
        let binary = binary.rsplit('/').next().unwrap_or_default().to_owned();
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED ({binary}): tests here passed without running: {reason}"
        );
    });
}

/// Every fact of `run` up to now: a marker request (for a tool nobody serves) is
/// published last, and the run's facts are read until it comes back.
pub async fn facts_until_now(run: &aaa_tools::RunHandle) -> Vec<aaa_tools::event::Event> {
    use futures::StreamExt;
    let mut facts = run.facts().await.expect("the run's facts");
    let marker = run
        .request("no_such_tool_marker", serde_json::json!({}))
        .await
        .expect("the marker is published");
    let mut out = Vec::new();
    while let Some(fact) = facts.next().await {
        let fact = fact.expect("a readable fact");
        if fact.kind == aaa_tools::event::TOOL_REQUESTED
            && fact.subject.as_deref() == Some(marker.as_str())
        {
            return out;
        }
        out.push(fact);
    }
    panic!("the run's facts ended before the marker")
}

/// The JSON of an event whose attributes say `tenant` and `run`, as any publisher may
/// write it (source `elsewhere`).
pub fn raw_event(
    kind: &str,
    tenant: &str,
    run: &str,
    call: &str,
    data: serde_json::Value,
) -> Vec<u8> {
    serde_json::json!({
        "specversion": "1.0", "id": aaa_tools::new_call_id().as_str(), "source": "elsewhere",
        "type": kind, "subject": call, "aaatenant": tenant, "aaarunid": run, "data": data,
    })
    .to_string()
    .into_bytes()
}

/// `fut`, or a panic naming `what` once it has taken longer than anything that works
/// would (30 s): a bound on a failing test, never a synchronization.
pub async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(std::time::Duration::from_secs(30), fut)
        .await
        .unwrap_or_else(|_| panic!("{what} did not happen"))
}

/// The message of `outcome`, which must be a `cancelled` failure.
pub fn cancelled(outcome: &aaa_tools::Outcome) -> &str {
    let failure = outcome
        .failure()
        .unwrap_or_else(|| panic!("not a failure: {outcome:?}"));
    assert_eq!(
        failure.kind,
        aaa_tools::FailureKind::Cancelled,
        "{outcome:?}"
    );
    &failure.message
}
