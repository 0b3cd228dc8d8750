//! Fault tests of the JetStream bus and KV guard store: real `nats-server`, real worker
//! processes (the `aaa-test-worker` binary), real signals. Every tool execution is
//! written to a ledger file, so the tests count executions across processes.
//!
//! The tests take turns (one server and its workers at a time): on a small machine,
//! parallel servers would starve the leases these tests measure.

use std::path::Path;
use std::sync::LazyLock;
use std::time::Duration;

use aaa_tests::{Ledger, NatsServer, WorkerProcess, WorkerSettings};
use aaa_tools::event::{self, AttemptFact, Event, StaleResult};
use aaa_tools::{ApprovalDecision, CallId, Engine, FailureKind, RunHandle};
use aaa_tools_nats::{NatsBus, NatsOptions};
use futures::StreamExt;
use serde_json::{Value, json};

static TURN: LazyLock<tokio::sync::Mutex<()>> = LazyLock::new(|| tokio::sync::Mutex::new(()));

const REQUESTS: &str = "aaa-tool-requests";

fn worker_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_aaa-test-worker"))
}

/// A server, a ledger, and a client engine with its bus.
struct Cluster {
    server: NatsServer,
    ledger: Ledger,
    client: Engine,
    bus: NatsBus,
}

impl Cluster {
    async fn start() -> Option<Cluster> {
        let server = NatsServer::start()?;
        let options = NatsOptions::new(server.url());
        let (bus, store) = options.connect_parts().await.expect("the client connects");
        Some(Cluster {
            client: Engine::new(bus.clone(), store),
            bus,
            ledger: Ledger::new(),
            server,
        })
    }

    async fn worker(&self, settings: &WorkerSettings) -> WorkerProcess {
        WorkerProcess::spawn(worker_binary(), &self.server.url(), &self.ledger, settings).await
    }

    /// Two workers with `settings`, a call of `tool` requested, and its first attempt
    /// started.
    async fn first_attempt(
        &self,
        settings: &WorkerSettings,
        tool: &str,
        arguments: Value,
    ) -> (Vec<WorkerProcess>, RunHandle, CallId, AttemptFact) {
        let workers = vec![self.worker(settings).await, self.worker(settings).await];
        let run = self.client.new_run();
        let call = run.request(tool, arguments).await.unwrap();
        let first = started(&run, &call, 1).await;
        (workers, run, call, first)
    }

    /// Two workers with `settings`, a call of `work` with `arguments` whose first
    /// attempt started, and its worker SIGKILLed: the survivor, the run and the call's
    /// result, which the survivor completed at attempt 2.
    async fn holder_killed(
        &self,
        settings: &WorkerSettings,
        arguments: Value,
    ) -> (WorkerProcess, RunHandle, Value) {
        let (mut workers, run, call, first) = self.first_attempt(settings, "work", arguments).await;
        let victim = workers.remove(pick(&workers, &first.worker));
        victim.kill().await;
        let survivor = workers.remove(0);
        let outcome = run.outcome(&call).await.unwrap();
        let result = outcome.result().expect("the call completed").clone();
        assert_eq!(result["attempt"], json!(2), "{result}");
        assert_eq!(result["worker"], json!(survivor.id()));
        (survivor, run, result)
    }

    /// How many times the server delivered a request, redeliveries included.
    async fn deliveries(&self) -> u64 {
        let stream = NatsOptions::new(self.server.url());
        let info = self
            .bus
            .raw_jetstream()
            .get_stream(stream.stream_name())
            .await
            .expect("the stream")
            .consumer_info(REQUESTS)
            .await
            .expect("consumer info");
        info.delivered.consumer_sequence
    }

    async fn ack_pending(&self) -> u64 {
        self.bus
            .consumer_pending(REQUESTS)
            .await
            .expect("consumer info")
            .0
    }

    /// Polls the consumer until nothing is pending or `within` passes; returns
    /// `(ack_pending, pending)` at the end. (The server offers no event for this.)
    async fn settled(&self, within: Duration) -> (u64, u64) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let counts = self
                .bus
                .consumer_pending(REQUESTS)
                .await
                .expect("consumer info");
            if counts == (0, 0) || tokio::time::Instant::now() >= deadline {
                return counts;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Waits for the first fact of `run` of type `kind` that `pick` accepts.
async fn fact_event(
    run: &RunHandle,
    kind: &str,
    within: Duration,
    pick: impl Fn(&Event) -> bool,
) -> Event {
    let mut facts = run.facts().await.expect("the run's facts");
    tokio::time::timeout(within, async {
        while let Some(event) = facts.next().await {
            let event: Event = event.expect("a readable fact");
            if event.kind == kind && pick(&event) {
                return event;
            }
        }
        panic!("the facts of the run ended before {kind}");
    })
    .await
    .unwrap_or_else(|_| panic!("no {kind} within {within:?}"))
}

/// Waits for the first fact of `run` of type `kind` whose data `pick` accepts.
async fn fact<T: serde::de::DeserializeOwned>(
    run: &RunHandle,
    kind: &str,
    within: Duration,
    pick: impl Fn(&T) -> bool,
) -> T {
    let event = fact_event(run, kind, within, |e| {
        e.data_as::<T>().is_ok_and(|d| pick(&d))
    })
    .await;
    event.data_as::<T>().expect("checked above")
}

/// Every fact of `run` so far (reads until `quiet` passes without a new one).
async fn facts_so_far(run: &RunHandle) -> Vec<Event> {
    let mut facts = run.facts().await.expect("the run's facts");
    let mut out = Vec::new();
    while let Ok(Some(event)) = tokio::time::timeout(Duration::from_millis(300), facts.next()).await
    {
        out.push(event.expect("a readable fact"));
    }
    out
}

fn count(facts: &[Event], kind: &str) -> usize {
    facts.iter().filter(|e| e.kind == kind).count()
}

async fn started(run: &RunHandle, call: &CallId, attempt: u32) -> AttemptFact {
    fact::<AttemptFact>(run, event::ATTEMPT_STARTED, Duration::from_secs(30), |f| {
        &f.call_id == call && f.attempt == attempt
    })
    .await
}

fn pick(workers: &[WorkerProcess], id: &str) -> usize {
    workers
        .iter()
        .position(|w| w.id() == id)
        .unwrap_or_else(|| panic!("no worker {id}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_call_completes_on_another_worker_with_attempt_2() {
    let _turn = TURN.lock().await;
    let Some(cluster) = Cluster::start().await else {
        return;
    };
    let (_survivor, run, result) = cluster
        .holder_killed(
            &WorkerSettings::default(),
            json!({"ms": 1500, "tag": "kill"}),
        )
        .await;
    let lines = cluster.ledger.lines();
    let starts: Vec<_> = lines.iter().filter(|l| l.event == "start").collect();
    let dones: Vec<_> = lines.iter().filter(|l| l.event == "done").collect();
    assert_eq!(starts.len(), 2, "{lines:?}");
    assert_eq!(dones.len(), 1, "exactly one committed result: {lines:?}");
    assert_eq!(starts[0].key, starts[1].key, "the same idempotency key");
    assert_eq!(result["key"], json!(starts[0].key));
    let facts = facts_so_far(&run).await;
    assert_eq!(count(&facts, event::TOOL_COMPLETED), 1);
    assert_eq!(count(&facts, event::TAKEN_OVER), 1);
    assert_eq!(cluster.settled(Duration::from_secs(10)).await, (0, 0));
}

async fn stalled_worker_resumes(policy: &'static str) {
    let _turn = TURN.lock().await;
    let Some(cluster) = Cluster::start().await else {
        return;
    };
    let settings = WorkerSettings {
        lost_lease: policy,
        ..WorkerSettings::default()
    };
    let (workers, run, call, first) = cluster
        .first_attempt(&settings, "work", json!({"ms": 3000, "tag": policy}))
        .await;
    let stalled = &workers[pick(&workers, &first.worker)];
    stalled.pause();
    let second = started(&run, &call, 2).await;
    assert_ne!(second.worker, first.worker);
    assert_eq!(
        cluster.ack_pending().await,
        1,
        "the successor holds the message"
    );

    stalled.resume();
    // The resumed worker learns it lost the lease...
    fact::<AttemptFact>(&run, event::LEASE_LOST, Duration::from_secs(30), |f| {
        f.attempt == 1 && f.worker == first.worker
    })
    .await;
    if policy == "finish" {
        // ...finishes its tool, and its result is dropped and audited.
        let stale: StaleResult = fact(
            &run,
            event::STALE_RESULT,
            Duration::from_secs(10),
            |f: &StaleResult| f.attempt == 1,
        )
        .await;
        assert_eq!(stale.current_attempt, 2);
    }
    // It sent no ack, nak or progress for the message the successor works on.
    assert_eq!(
        cluster.ack_pending().await,
        1,
        "the resumed worker must not settle its successor's message"
    );

    let outcome = run.outcome(&call).await.unwrap();
    let result = outcome
        .result()
        .expect("completed by the successor")
        .clone();
    assert_eq!(result["attempt"], json!(2));
    assert_eq!(result["worker"], json!(second.worker));
    let lines = cluster.ledger.lines();
    let done_by_first = lines
        .iter()
        .filter(|l| l.event == "done" && *l.worker == *first.worker)
        .count();
    match policy {
        "cancel" => assert_eq!(done_by_first, 0, "Cancel stops the tool: {lines:?}"),
        _ => assert_eq!(done_by_first, 1, "Finish lets it run to the end: {lines:?}"),
    }
    let facts = facts_so_far(&run).await;
    assert_eq!(count(&facts, event::TOOL_COMPLETED), 1);
    assert_eq!(
        count(&facts, event::STALE_RESULT),
        usize::from(policy == "finish")
    );
    assert_eq!(cluster.settled(Duration::from_secs(10)).await, (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigstop_past_the_lease_then_sigcont_under_cancel() {
    stalled_worker_resumes("cancel").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigstop_past_the_lease_then_sigcont_under_finish() {
    stalled_worker_resumes("finish").await;
}

async fn server_restart_under_load(signal: &'static str) {
    let _turn = TURN.lock().await;
    let Some(mut cluster) = Cluster::start().await else {
        return;
    };
    // A lease longer than the outage: a restart is not a dead worker.
    let settings = WorkerSettings {
        lease_ttl_s: 6.0,
        ..WorkerSettings::default()
    };
    let _workers = [
        cluster.worker(&settings).await,
        cluster.worker(&settings).await,
    ];
    let run = cluster.client.new_run();
    let mut calls = Vec::new();
    for i in 0..40 {
        let tool = if i % 2 == 0 { "work" } else { "work_once" };
        let id = run
            .request(tool, json!({"ms": 400, "tag": format!("c{i}")}))
            .await
            .unwrap();
        calls.push((tool, id));
    }
    // Wait until calls are running, then take the server away and bring it back.
    started(&run, &calls[0].1, 1).await;
    let before = cluster.ledger.counts();
    assert!(
        before.values().any(|(starts, dones)| starts > dones),
        "calls are running when the server goes away"
    );
    cluster.server.stop(signal);
    // An outage longer than the ack wait (1 s): the server redelivers what was pending
    // when it comes back, while the first attempts may still be running.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    cluster.server.start_again();

    for (tool, call) in &calls {
        let outcome = tokio::time::timeout(Duration::from_secs(90), run.outcome(call))
            .await
            .unwrap_or_else(|_| panic!("{call} has no outcome 90 s after the restart"))
            .unwrap();
        assert!(
            outcome.is_ok(),
            "{tool} {call} did not complete after the restart: {outcome:?}"
        );
    }
    let counts = cluster.ledger.counts();
    assert_eq!(counts.len(), calls.len(), "every call ran: {counts:?}");
    for (tool, call) in &calls {
        // The default idempotency key is `<tenant>/<run>/<call id>`.
        let key = format!("{}/{}/{call}", run.tenant(), run.run_id());
        let (starts, dones) = counts[&key];
        assert!(dones >= 1, "{key} never finished");
        if *tool == "work_once" {
            assert_eq!(starts, 1, "an at-most-once call ran twice: {key}");
        }
    }
    assert_eq!(cluster.settled(Duration::from_secs(30)).await, (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_sigterm_restart_under_load_loses_nothing() {
    server_restart_under_load("TERM").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_sigkill_restart_under_load_loses_nothing() {
    server_restart_under_load("KILL").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_call_is_abandoned_after_max_attempts() {
    let _turn = TURN.lock().await;
    let Some(cluster) = Cluster::start().await else {
        return;
    };
    let settings = WorkerSettings::default();
    let mut workers = Vec::new();
    for _ in 0..4 {
        workers.push(cluster.worker(&settings).await);
    }
    let run = cluster.client.new_run();
    let call = run
        .request("crash", json!({"tag": "poison"}))
        .await
        .unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(60), run.outcome(&call))
        .await
        .expect("an outcome within 60 s")
        .unwrap();
    let failure = outcome.failure().expect("the call failed");
    assert_eq!(failure.kind, FailureKind::Abandoned, "{failure:?}");
    assert_eq!(failure.attempt, 3);
    assert_eq!(
        cluster.ledger.lines().len(),
        3,
        "each attempt crashed a worker"
    );
    let mut exited = 0;
    for worker in &mut workers {
        if worker.exited_within(Duration::from_millis(100)).await {
            exited += 1;
        }
    }
    assert_eq!(exited, 3);
    assert_eq!(
        cluster.settled(Duration::from_secs(10)).await,
        (0, 0),
        "nothing lingers in the consumer"
    );
}

/// A delivery that finds the call leased by a worker that just died waits for the lease
/// to lapse, and tells the server all the while that it still works on the message:
/// the message is not handed out again at each ack deadline. Here the ack wait (0.9 s)
/// is far shorter than the lease (6 s), and its heartbeat (0.3 s) longer than the
/// waiting delivery's polls (0.2 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_waiting_for_a_lease_keeps_its_message() {
    let _turn = TURN.lock().await;
    let Some(cluster) = Cluster::start().await else {
        return;
    };
    let settings = WorkerSettings {
        lease_ttl_s: 6.0,
        ack_wait_s: Some(0.9),
        ..WorkerSettings::default()
    };
    let _survivor = cluster
        .holder_killed(&settings, json!({"ms": 1000, "tag": "wait"}))
        .await;
    assert_eq!(cluster.settled(Duration::from_secs(10)).await, (0, 0));
    // One delivery to the worker that died, one to the survivor, which waited about
    // three seconds for the lease without the server taking the message back.
    assert_eq!(cluster.deliveries().await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_at_most_once_call_whose_worker_dies_is_outcome_unknown() {
    let _turn = TURN.lock().await;
    let Some(cluster) = Cluster::start().await else {
        return;
    };
    let (mut workers, run, call, first) = cluster
        .first_attempt(
            &WorkerSettings::default(),
            "work_once",
            json!({"ms": 5000, "tag": "once"}),
        )
        .await;
    workers.remove(pick(&workers, &first.worker)).kill().await;
    let outcome = run.outcome(&call).await.unwrap();
    assert_eq!(
        outcome.failure().expect("not completed").kind,
        FailureKind::OutcomeUnknown
    );
    assert_eq!(cluster.ledger.lines().len(), 1, "never run again");
    let unknown = cluster
        .client
        .operator()
        .outcome_unknown_calls()
        .await
        .unwrap();
    assert_eq!(unknown.len(), 1);
    assert_eq!(cluster.settled(Duration::from_secs(10)).await, (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_request_runs_once_inside_and_outside_the_dedup_window() {
    let _turn = TURN.lock().await;
    let Some(server) = NatsServer::start() else {
        return;
    };
    // A short window, so "outside" comes soon.
    let window = Duration::from_secs(1);
    let options = NatsOptions::new(server.url()).duplicate_window(window);
    let client = options.connect().await.unwrap();
    let ledger = Ledger::new();
    let _worker = WorkerProcess::spawn(
        worker_binary(),
        &server.url(),
        &ledger,
        &WorkerSettings::default(),
    )
    .await;
    let run = client.new_run();
    let call = run
        .request("work", json!({"ms": 10, "tag": "dup"}))
        .await
        .unwrap();
    let request = fact_event(&run, event::TOOL_REQUESTED, Duration::from_secs(10), |_| {
        true
    })
    .await;
    // Inside the window: the server drops it.
    client.publish(&request).await.unwrap();
    run.outcome(&call).await.unwrap();
    // Outside the window: delivered again, and the guard runs nothing.
    tokio::time::sleep(window + Duration::from_millis(500)).await;
    client.publish(&request).await.unwrap();
    let facts = wait_for_count(&run, event::TOOL_REQUESTED, 2).await;
    assert_eq!(count(&facts, event::TOOL_REQUESTED), 2);
    let (bus, _) = options.connect_parts().await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while bus.consumer_pending(REQUESTS).await.unwrap() != (0, 0) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the duplicate was never settled"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let counts = ledger.counts();
    assert_eq!(counts.len(), 1);
    assert_eq!(counts.values().next(), Some(&(1, 1)), "one execution");
}

async fn wait_for_count(run: &RunHandle, kind: &str, n: usize) -> Vec<Event> {
    let mut facts = run.facts().await.unwrap();
    let mut seen = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(event) = facts.next().await {
            let event = event.unwrap();
            let hit = event.kind == kind;
            seen.push(event);
            if hit && count(&seen, kind) == n {
                return;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("fewer than {n} {kind}"));
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_granted_while_no_worker_is_alive_runs_once_on_a_later_worker() {
    let _turn = TURN.lock().await;
    let Some(cluster) = Cluster::start().await else {
        return;
    };
    let settings = WorkerSettings::default();
    let first = cluster.worker(&settings).await;
    let run = cluster.client.new_run();
    let call = run
        .request("approved", json!({"ms": 10, "tag": "approve"}))
        .await
        .unwrap();
    let asked: event::ApprovalRequested = fact(
        &run,
        event::APPROVAL_REQUESTED,
        Duration::from_secs(10),
        |_: &event::ApprovalRequested| true,
    )
    .await;
    first.kill().await;
    run.grant(ApprovalDecision::for_request(&asked).with_approver("test"))
        .await
        .unwrap();
    let _later = cluster.worker(&settings).await;
    let outcome = run.outcome(&call).await.unwrap();
    assert!(outcome.is_ok(), "{outcome:?}");
    let counts = cluster.ledger.counts();
    assert_eq!(counts.values().copied().collect::<Vec<_>>(), vec![(1, 1)]);
}

/// A client killed (-9) in the middle of a replay leaves nothing on the server: the
/// replay's consumer expires by itself within its inactivity threshold (30 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_killed_mid_replay_leaves_no_consumer() {
    use tokio::io::AsyncBufReadExt;

    let Some(server) = NatsServer::start() else {
        return;
    };
    let (bus, store) = NatsOptions::new(server.url())
        .connect_parts()
        .await
        .unwrap();
    let engine = aaa_tools::Engine::new(bus.clone(), store);
    let run = engine.new_run();
    run.request("add", json!({"a": 1, "b": 2})).await.unwrap();
    let mut replayer = tokio::process::Command::new(env!("CARGO_BIN_EXE_aaa-test-replayer"))
        .env("AAA_NATS_URL", server.url())
        .env("AAA_RUN", run.run_id().as_str())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(replayer.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line()).await;
    assert_eq!(line.unwrap().unwrap().as_deref(), Some("replaying"));
    assert_eq!(
        aaa_tests::stream_consumers(&bus).await,
        1,
        "the replay's consumer"
    );

    replayer.start_kill().unwrap();
    replayer.wait().await.unwrap();
    let killed = std::time::Instant::now();
    while aaa_tests::stream_consumers(&bus).await != 0 {
        assert!(
            killed.elapsed() < Duration::from_secs(45),
            "the consumer of a dead client's replay is still there"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    println!(
        "a dead client's replay consumer was gone {:.1} s after the kill",
        killed.elapsed().as_secs_f64()
    );
}
