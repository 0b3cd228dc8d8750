//! The stalled-worker guard on the embedded engine: several workers (engines) share one
//! `MemoryBus` and one `MemoryStore`; workers die (their handler is dropped), stall
//! (their runtime thread is blocked) and resume.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aaa_tools::RecordKind;
use aaa_tools::bus::{Bus, MemoryBus};
use aaa_tools::event::{self, AttemptFact, Event, StaleResult};
use aaa_tools::{
    Engine, FailureKind, GuardConfig, HandlerHandle, LostLease, MemoryStore, Outcome, Resolution,
    RunHandle, State, ToolContext, ToolError, ToolHandler, ToolRegistry, tool, tools,
};
use futures::StreamExt;
use serde_json::json;
use tokio::sync::Notify;

/// What the tools saw, shared by every worker of a test.
#[derive(Default)]
struct Probe {
    runs: AtomicUsize,
    keys: Mutex<Vec<(u32, String)>>,
    entered: Notify,
    release: HashMap<u32, Notify>,
    cancelled: AtomicUsize,
    cancel_seen: Notify,
}

impl Probe {
    fn new() -> Arc<Probe> {
        Arc::new(Probe {
            release: (1..=4).map(|a| (a, Notify::new())).collect(),
            ..Probe::default()
        })
    }
}

/// A downstream system that remembers the highest fence written per key and rejects
/// writes from older attempts: how a user protects itself with `ctx.fence()`.
#[derive(Default)]
struct FencedLedger {
    entries: Mutex<HashMap<String, (u64, String)>>,
    rejected: AtomicU32,
}

impl FencedLedger {
    fn write(&self, key: &str, fence: u64, value: &str) -> Result<(), ToolError> {
        let mut entries = self.entries.lock().unwrap();
        match entries.get(key) {
            Some((seen, _)) if *seen > fence => {
                self.rejected.fetch_add(1, Ordering::SeqCst);
                Err(ToolError::new(format!(
                    "fence {fence} is older than {seen}; write rejected"
                )))
            }
            _ => {
                entries.insert(key.to_owned(), (fence, value.to_owned()));
                Ok(())
            }
        }
    }
}

/// Runs until released for its attempt, then writes to the ledger under its fence.
#[tool]
async fn work(
    ctx: ToolContext,
    probe: State<Probe>,
    ledger: State<FencedLedger>,
    item: String,
) -> Result<String, ToolError> {
    probe.runs.fetch_add(1, Ordering::SeqCst);
    probe
        .keys
        .lock()
        .unwrap()
        .push((ctx.attempt(), ctx.idempotency_key().to_owned()));
    probe.entered.notify_one();
    tokio::select! {
        _ = probe.release[&ctx.attempt().min(4)].notified() => { }
        _ = ctx.cancelled() => {
            probe.cancelled.fetch_add(1, Ordering::SeqCst);
            probe.cancel_seen.notify_one();
            return Err(ToolError::new("cancelled"));
        }
    }
    ledger.write(
        ctx.idempotency_key(),
        ctx.fence(),
        &format!("{item} by attempt {}", ctx.attempt()),
    )?;
    Ok(format!("{item} done by attempt {}", ctx.attempt()))
}

/// Charges a card, at most once.
#[tool(delivery = "at_most_once")]
async fn charge(probe: State<Probe>, cents: u64) -> String {
    probe.runs.fetch_add(1, Ordering::SeqCst);
    probe.entered.notify_one();
    std::future::pending::<()>().await;
    format!("charged {cents}")
}

/// Crashes its worker (the test drops the worker when it starts).
#[tool(guard(max_attempts = 3))]
async fn poison(probe: State<Probe>) -> String {
    probe.runs.fetch_add(1, Ordering::SeqCst);
    probe.entered.notify_one();
    std::future::pending::<()>().await;
    "never".into()
}

/// Counts its runs.
#[tool]
async fn count(probe: State<Probe>) -> usize {
    probe.runs.fetch_add(1, Ordering::SeqCst) + 1
}

/// Counts its runs, once a human approves.
#[tool(requires_approval = true)]
async fn approved_count(probe: State<Probe>) -> usize {
    probe.runs.fetch_add(1, Ordering::SeqCst) + 1
}

fn handler(probe: &Arc<Probe>, ledger: &Arc<FencedLedger>, guard: GuardConfig) -> ToolHandler {
    let registry = ToolRegistry::builder()
        .tools(tools![work, charge, poison, count, approved_count])
        .state_arc(probe.clone())
        .state_arc(ledger.clone())
        .build()
        .unwrap();
    ToolHandler::new(registry).guard(guard)
}

struct System {
    bus: MemoryBus,
    store: MemoryStore,
    probe: Arc<Probe>,
    ledger: Arc<FencedLedger>,
}

impl System {
    fn new() -> Self {
        System {
            bus: MemoryBus::new(),
            store: MemoryStore::new(),
            probe: Probe::new(),
            ledger: Arc::default(),
        }
    }

    fn engine(&self) -> Engine {
        Engine::new(
            aaa_tests::bus_under_test(self.bus.clone()),
            self.store.clone(),
        )
    }

    async fn worker(&self, guard: GuardConfig) -> (Engine, HandlerHandle) {
        let engine = self.engine();
        let handle = handler(&self.probe, &self.ledger, guard)
            .attach(&engine)
            .await
            .unwrap();
        (engine, handle)
    }
}

/// The facts of `kind` in a run so far, once `until` of them have arrived.
async fn facts_of(run: &RunHandle, kind: &str, until: usize) -> Vec<Event> {
    let mut facts = run.facts().await.unwrap();
    let mut found = Vec::new();
    while found.len() < until {
        let fact = facts.next().await.unwrap().unwrap();
        if fact.kind == kind {
            found.push(fact);
        }
    }
    found
}

/// Waits (bounded) until no request is delivered and unsettled.
async fn settled(bus: &MemoryBus) {
    tokio::time::timeout(
        Duration::from_secs(60),
        bus.until_settled("aaa-tool-requests"),
    )
    .await
    .expect("a request stayed unsettled");
}

fn failed(outcome: &Outcome) -> (FailureKind, u32) {
    let f = outcome
        .failure()
        .unwrap_or_else(|| panic!("expected a failure: {outcome:?}"));
    (f.kind, f.attempt)
}

#[tokio::test(start_paused = true)]
async fn a_dropped_worker_is_taken_over_with_attempt_two_and_the_same_key() {
    let system = System::new();
    let (client, first) = system.worker(GuardConfig::default()).await;
    let run = client.new_run();
    let call_id = run
        .request("work", json!({"item": "invoice-7"}))
        .await
        .unwrap();
    system.probe.entered.notified().await;
    drop(first); // dies mid-call

    let (_engine, _second) = system.worker(GuardConfig::default()).await;
    system.probe.entered.notified().await; // attempt 2 started, after the 15 s lease lapsed
    system.probe.release[&2].notify_one();
    let outcome = run.outcome(&call_id).await.unwrap();
    assert_eq!(outcome.for_model(), "invoice-7 done by attempt 2");

    let keys = system.probe.keys.lock().unwrap().clone();
    let expected_key = format!("{}/{}/{}", run.tenant(), run.run_id(), call_id);
    assert_eq!(keys, [(1, expected_key.clone()), (2, expected_key)]);
    let taken: AttemptFact = facts_of(&run, event::TAKEN_OVER, 1).await[0]
        .data_as()
        .unwrap();
    assert_eq!((taken.attempt, taken.previous_attempt), (2, Some(1)));
    assert_eq!(facts_of(&run, event::ATTEMPT_STARTED, 2).await.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_poison_call_is_abandoned_after_exactly_max_attempts() {
    let system = System::new();
    let (client, mut worker) = system.worker(GuardConfig::default()).await;
    let run = client.new_run();
    let call_id = run.request("poison", json!({})).await.unwrap();
    for _ in 0..3 {
        system.probe.entered.notified().await;
        drop(worker); // the call kills its worker
        worker = system.worker(GuardConfig::default()).await.1;
    }
    let outcome = run.outcome(&call_id).await.unwrap();
    assert_eq!(failed(&outcome), (FailureKind::Abandoned, 3));
    assert_eq!(
        system.probe.runs.load(Ordering::SeqCst),
        3,
        "exactly max_attempts executions"
    );
    settled(&system.bus).await; // nothing lingers
}

#[tokio::test(start_paused = true)]
async fn a_lost_at_most_once_call_is_outcome_unknown_and_never_rerun() {
    let system = System::new();
    let (client, first) = system.worker(GuardConfig::default()).await;
    let run = client.new_run();
    let call_id = run.request("charge", json!({"cents": 500})).await.unwrap();
    system.probe.entered.notified().await;
    drop(first);
    let (_engine, _second) = system.worker(GuardConfig::default()).await;
    let outcome = run.outcome(&call_id).await.unwrap();
    assert_eq!(failed(&outcome), (FailureKind::OutcomeUnknown, 1));
    assert_eq!(system.probe.runs.load(Ordering::SeqCst), 1);

    // The operator lists it and records what the bank says.
    let operator = client.operator();
    let unknown = operator.outcome_unknown_calls().await.unwrap();
    assert_eq!(unknown.len(), 1);
    assert_eq!(
        (
            unknown[0].call_id.clone(),
            &*unknown[0].name,
            unknown[0].attempt
        ),
        (call_id.clone(), "charge", 1)
    );
    operator
        .resolve(
            &unknown[0],
            Resolution::Completed(json!("charged 500")),
            "ops@example.com",
        )
        .await
        .unwrap();
    let resolved = facts_of(&run, event::TOOL_RESOLVED, 1).await.remove(0);
    assert_eq!(resolved.data["result"], "charged 500");
    assert!(operator.outcome_unknown_calls().await.unwrap().is_empty());
    let again = operator
        .resolve(&unknown[0], Resolution::Failed("x".into()), "ops")
        .await;
    assert!(
        matches!(again, Err(aaa_tools::OperatorError::NotUnknown(_))),
        "{again:?}"
    );
    assert_eq!(system.probe.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_duplicate_delivery_of_a_finished_call_does_not_run_it_again() {
    let system = System::new();
    let (client, _worker) = system.worker(GuardConfig::default()).await;
    let run = client.new_run();
    let call_id = run.request("count", json!({})).await.unwrap();
    assert_eq!(
        run.outcome(&call_id).await.unwrap().result(),
        Some(&json!(1))
    );
    // The same request again, as a second message (outside any de-duplication).
    let request = facts_of(&run, event::TOOL_REQUESTED, 1).await.remove(0);
    system
        .bus
        .publish(&request.bus_subject(), request.to_bytes().into(), None)
        .await
        .unwrap();
    // A later call in the run completes after the duplicate was handled (one consumer, in order).
    assert_eq!(
        run.call("count", json!({})).await.unwrap().result(),
        Some(&json!(2))
    );
    assert_eq!(system.probe.runs.load(Ordering::SeqCst), 2);
    assert_eq!(facts_of(&run, event::TOOL_COMPLETED, 2).await.len(), 2);
    settled(&system.bus).await;
}

#[tokio::test(start_paused = true)]
async fn without_the_guard_a_duplicate_runs_twice() {
    let system = System::new();
    let (client, _worker) = system
        .worker(GuardConfig::default().with_enabled(false))
        .await;
    let run = client.new_run();
    let call_id = run.request("count", json!({})).await.unwrap();
    run.outcome(&call_id).await.unwrap();
    let request = facts_of(&run, event::TOOL_REQUESTED, 1).await.remove(0);
    system
        .bus
        .publish(&request.bus_subject(), request.to_bytes().into(), None)
        .await
        .unwrap();
    run.call("count", json!({})).await.unwrap();
    assert_eq!(
        system.probe.runs.load(Ordering::SeqCst),
        3,
        "the duplicate ran: nothing detects it"
    );
    assert!(
        client
            .store()
            .keys(RecordKind::Call, "")
            .await
            .unwrap()
            .is_empty(),
        "no records"
    );
}

/// A worker on its own single-threaded runtime, so the test can stall it by blocking
/// that thread (the in-process analogue of SIGSTOP).
struct StallableWorker {
    runtime: tokio::runtime::Handle,
    stop: Arc<Notify>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl StallableWorker {
    fn start(system: &System, guard: GuardConfig) -> StallableWorker {
        let (bus, store, probe, ledger) = (
            system.bus.clone(),
            system.store.clone(),
            system.probe.clone(),
            system.ledger.clone(),
        );
        let stop = Arc::new(Notify::new());
        let (tx, rx) = std::sync::mpsc::channel();
        let stopper = stop.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            tx.send(runtime.handle().clone()).unwrap();
            runtime.block_on(async move {
                let engine = Engine::new(aaa_tests::bus_under_test(bus), store);
                let _handle = handler(&probe, &ledger, guard)
                    .ack_wait(Duration::from_millis(300))
                    .attach(&engine)
                    .await
                    .unwrap();
                stopper.notified().await;
            });
        });
        StallableWorker {
            runtime: rx.recv().unwrap(),
            stop,
            thread: Some(thread),
        }
    }

    /// Blocks the worker's only thread for `d`: no renewals, no progress, no tool.
    fn stall(&self, d: Duration) {
        self.runtime.spawn(async move { std::thread::sleep(d) });
    }
}

impl Drop for StallableWorker {
    fn drop(&mut self) {
        self.stop.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn short_lease(lost_lease: LostLease) -> GuardConfig {
    GuardConfig::default()
        .with_lease_ttl_s(0.3)
        .with_heartbeat_s(0.05)
        .with_wait_poll_s(0.05)
        .with_lost_lease(lost_lease)
}

struct Stalled {
    system: System,
    run: RunHandle,
    call_id: aaa_tools::CallId,
    _stalled: StallableWorker,
    _successor: HandlerHandle,
}

/// Attempt 1 runs on a worker that then stalls past its lease; a second worker takes
/// over with attempt 2 and holds it; the stalled worker resumes and learns it lost.
async fn stalled_worker_scenario(lost_lease: LostLease) -> Stalled {
    let system = System::new();
    let stalled = StallableWorker::start(&system, short_lease(lost_lease));
    let client = system.engine();
    let run = client.new_run();
    let call_id = run.request("work", json!({"item": "row-1"})).await.unwrap();
    system.probe.entered.notified().await; // attempt 1 runs on the stallable worker
    stalled.stall(Duration::from_millis(1500));

    // A second worker receives the request once its ack deadline passes, sees the lease
    // lapse, and takes over with attempt 2.
    let successor = handler(&system.probe, &system.ledger, short_lease(lost_lease))
        .ack_wait(Duration::from_millis(300))
        .attach(&client.sibling())
        .await
        .unwrap();
    system.probe.entered.notified().await;
    assert_eq!(system.probe.keys.lock().unwrap().last().unwrap().0, 2);

    // The stalled worker resumes while attempt 2 runs, and learns it lost its lease.
    let lost: AttemptFact = facts_of(&run, event::LEASE_LOST, 1).await[0]
        .data_as()
        .unwrap();
    assert_eq!(lost.attempt, 1);
    Stalled {
        system,
        run,
        call_id,
        _stalled: stalled,
        _successor: successor,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_worker_that_resumes_under_finish_has_its_result_rejected() {
    let Stalled {
        system,
        run,
        call_id,
        _stalled,
        _successor,
    } = stalled_worker_scenario(LostLease::Finish).await;
    assert_eq!(
        system.bus.ack_pending("aaa-tool-requests"),
        1,
        "the successor holds the message"
    );
    // Attempt 2 finishes first and writes under fence 2.
    system.probe.release[&2].notify_one();
    let outcome = run.outcome(&call_id).await.unwrap();
    assert_eq!(outcome.for_model(), "row-1 done by attempt 2");
    // Attempt 1 runs on (Finish): the ledger rejects its older fence, and its result is
    // dropped and audited, never committed.
    system.probe.release[&1].notify_one();
    let stale: StaleResult = facts_of(&run, event::STALE_RESULT, 1).await[0]
        .data_as()
        .unwrap();
    assert_eq!((stale.attempt, stale.current_attempt), (1, 2));
    assert_eq!(system.ledger.rejected.load(Ordering::SeqCst), 1);
    let entries = system.ledger.entries.lock().unwrap().clone();
    assert_eq!(
        entries.values().next().unwrap(),
        &(2, "row-1 by attempt 2".to_owned())
    );
    settled(&system.bus).await;
    // Exactly one outcome fact in the whole run, the stale attempt's included: every
    // fact up to a marker published after everything settled.
    let marker = run
        .request("marker_after_settling", json!({}))
        .await
        .unwrap();
    let mut facts = run.facts().await.unwrap();
    let mut outcomes = Vec::new();
    while let Some(fact) = facts.next().await {
        let fact = fact.unwrap();
        if fact.subject.as_deref() == Some(marker.as_str()) {
            break;
        }
        if fact.kind == event::TOOL_COMPLETED || fact.kind == event::TOOL_FAILED {
            outcomes.push(fact);
        }
    }
    assert_eq!(outcomes.len(), 1, "{outcomes:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_worker_that_resumes_under_cancel_stops_its_tool() {
    let Stalled {
        system,
        run,
        call_id,
        _stalled,
        _successor,
    } = stalled_worker_scenario(LostLease::Cancel).await;
    // The resumed worker cancels attempt 1 and records nothing; it does not touch the
    // message its successor holds.
    system.probe.cancel_seen.notified().await;
    assert_eq!(system.probe.cancelled.load(Ordering::SeqCst), 1);
    assert_eq!(
        system.bus.ack_pending("aaa-tool-requests"),
        1,
        "no ack, nak or term from the superseded worker"
    );
    system.probe.release[&2].notify_one();
    assert_eq!(
        run.outcome(&call_id).await.unwrap().for_model(),
        "row-1 done by attempt 2"
    );
    assert_eq!(system.ledger.rejected.load(Ordering::SeqCst), 0);
    settled(&system.bus).await;
}

/// A store whose answers to guard writes get lost: for the first `lose` writes it either
/// performs the write and then reports a timeout (`after` = true), or reports the
/// timeout without writing. Either way the writer cannot tell what happened.
struct AmbiguousStore {
    inner: MemoryStore,
    /// Which writes lose their answers: records of this kind whose keys start with
    /// this (the prefix picks among the kind's records, e.g. approvals and not their
    /// timeout marks; the kind is never read from it).
    lossy: (RecordKind, &'static str),
    /// Writes of `lossy` records answered before the losing starts.
    skip: AtomicUsize,
    lose: AtomicUsize,
    after: bool,
}

impl AmbiguousStore {
    fn lost(&self, kind: RecordKind, key: &str) -> bool {
        let countdown = |n: &AtomicUsize| {
            n.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        };
        kind == self.lossy.0
            && key.starts_with(self.lossy.1)
            && !countdown(&self.skip)
            && self
                .lose
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
    }

    /// Calls `write` only when the write is to happen: a store may write as soon as an
    /// operation is called.
    async fn write<'a>(
        &self,
        kind: RecordKind,
        key: &str,
        write: impl FnOnce() -> aaa_guard::StoreFuture<'a, aaa_guard::Revision>,
    ) -> Result<aaa_guard::Revision, aaa_guard::StoreError> {
        if !self.lost(kind, key) {
            return write().await;
        }
        if self.after {
            let _ = write().await;
        }
        Err(aaa_guard::StoreError::Unavailable("timed out".into()))
    }
}

impl aaa_guard::GuardStore for AmbiguousStore {
    fn create<'a>(
        &'a self,
        kind: RecordKind,
        key: &'a str,
        value: Vec<u8>,
    ) -> aaa_guard::StoreFuture<'a, aaa_guard::Revision> {
        aaa_guard::StoreFuture::new(
            self.write(kind, key, move || self.inner.create(kind, key, value)),
        )
    }
    fn update<'a>(
        &'a self,
        kind: RecordKind,
        key: &'a str,
        value: Vec<u8>,
        expected: aaa_guard::Revision,
    ) -> aaa_guard::StoreFuture<'a, aaa_guard::Revision> {
        aaa_guard::StoreFuture::new(self.write(kind, key, move || {
            self.inner.update(kind, key, value, expected)
        }))
    }
    fn get<'a>(
        &'a self,
        kind: RecordKind,
        key: &'a str,
    ) -> aaa_guard::StoreFuture<'a, Option<aaa_guard::Entry>> {
        self.inner.get(kind, key)
    }
    fn delete<'a>(&'a self, kind: RecordKind, key: &'a str) -> aaa_guard::StoreFuture<'a, ()> {
        self.inner.delete(kind, key)
    }
    fn keys<'a>(
        &'a self,
        kind: RecordKind,
        prefix: &'a str,
    ) -> aaa_guard::StoreFuture<'a, Vec<String>> {
        self.inner.keys(kind, prefix)
    }
}

/// A worker engine over `system`'s bus whose store loses the answers to the first
/// `lose` writes of `lossy` records (see [`AmbiguousStore`]).
async fn losing_store_answers(
    system: &System,
    lossy: (RecordKind, &'static str),
    lose: usize,
    after: bool,
) -> (Engine, HandlerHandle) {
    let store = AmbiguousStore {
        inner: system.store.clone(),
        lossy,
        skip: AtomicUsize::new(0),
        lose: AtomicUsize::new(lose),
        after,
    };
    let engine = Engine::new(aaa_tests::bus_under_test(system.bus.clone()), store);
    let worker = handler(&system.probe, &system.ledger, GuardConfig::default())
        .attach(&engine)
        .await
        .unwrap();
    (engine, worker)
}

/// A `count` call through an [`AmbiguousStore`]: the outcome, the tool's runs, and the
/// first attempt started.
async fn with_lost_store_answers(after: bool, lose: usize) -> (Outcome, usize, Vec<u32>) {
    let system = System::new();
    let (engine, _worker) =
        losing_store_answers(&system, (RecordKind::Call, ""), lose, after).await;
    let run = engine.new_run();
    let outcome = run.call("count", json!({})).await.unwrap();
    settled(&system.bus).await;
    let attempts = facts_of(&run, event::ATTEMPT_STARTED, 1)
        .await
        .iter()
        .map(|f| f.data_as::<AttemptFact>().unwrap().attempt)
        .collect();
    (outcome, system.probe.runs.load(Ordering::SeqCst), attempts)
}

#[tokio::test(start_paused = true)]
async fn a_store_write_whose_answer_is_lost_is_resolved_by_reading_it_back() {
    // `after`: the writes happened, and reading them back shows it, so the first
    // attempt goes on (no wait for its own lease to lapse, no second attempt). Else the
    // writes did not happen: the request comes back. Either way the tool runs once.
    let cases = [(true, 1), (true, 2), (true, 3), (false, 1), (false, 2)];
    for (after, lose) in cases {
        let (outcome, runs, attempts) = with_lost_store_answers(after, lose).await;
        let case = format!("after {after}, lose {lose}");
        assert_eq!(outcome.result(), Some(&json!(1)), "{case}: {outcome:?}");
        assert_eq!((runs, attempts), (1, vec![1]), "{case}");
    }
}

/// Two deliveries of one `at_most_once` call on one worker at once (its request sent
/// twice, as a server may redeliver during a failover): the second loses the answer to
/// its claim and reads the record back. It finds the first delivery's claim, which it
/// would have written alike but for the claim's number, and must not take it for its
/// own: the call runs once.
#[tokio::test(start_paused = true)]
async fn a_claim_read_back_is_told_from_another_deliverys_claim() {
    for after in [false, true] {
        let system = System::new();
        let store = AmbiguousStore {
            inner: system.store.clone(),
            lossy: (RecordKind::Call, ""),
            skip: AtomicUsize::new(1),
            lose: AtomicUsize::new(1),
            after,
        };
        let engine = Engine::new(aaa_tests::bus_under_test(system.bus.clone()), store);
        let _worker = handler(&system.probe, &system.ledger, GuardConfig::default())
            .attach(&engine)
            .await
            .unwrap();
        let run = engine.new_run();
        let id = aaa_tools::CallId::new("charge-1").unwrap();
        for _ in 0..2 {
            let call = aaa_tools::ToolCall::new("charge", json!({"cents": 5}));
            run.request_call(call.with_id(id.clone())).await.unwrap();
        }
        system.probe.entered.notified().await;
        // Virtual time: the second delivery comes back and waits on the live lease.
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(
            system.probe.runs.load(Ordering::SeqCst),
            1,
            "after {after}: an at-most-once call ran twice"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_pending_approval_whose_write_answer_was_lost_is_still_asked_for() {
    let system = System::new();
    let (engine, _worker) =
        losing_store_answers(&system, (RecordKind::Handler, "approval."), 1, true).await;
    let run = engine.new_run();
    let call_id = run.request("approved_count", json!({})).await.unwrap();
    // The pending record was written but the worker saw a timeout; the request comes
    // back, and a human is asked all the same.
    let asked = tokio::time::timeout(
        Duration::from_secs(60),
        facts_of(&run, event::APPROVAL_REQUESTED, 1),
    )
    .await
    .expect("the approval was never requested");
    let asked: event::ApprovalRequested = asked[0].data_as().unwrap();
    run.grant(aaa_tools::ApprovalDecision::for_request(&asked))
        .await
        .unwrap();
    let outcome = run.outcome(&call_id).await.unwrap();
    assert_eq!(outcome.result(), Some(&json!(1)), "{outcome:?}");
    assert_eq!(system.probe.runs.load(Ordering::SeqCst), 1);
    settled(&system.bus).await;
}
