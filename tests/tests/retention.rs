//! The embedded engine on a bus with a small [`Retention`]: the log levels off, and still
//! no call and no outcome is lost.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aaa_tools::bus::{MemoryBus, Retention};
use aaa_tools::event::{ATTEMPT_STARTED, AttemptFact, TOOL_REQUESTED, ToolRequested};
use aaa_tools::{
    CallId, Engine, GuardStore, MemoryStore, RecordKind, State, ToolCall, ToolHandler,
    ToolRegistry, tool, tools,
};
use futures::StreamExt;
use serde_json::json;
use tokio::sync::Notify;

/// Add two integers.
#[tool]
async fn add(a: i64, b: i64) -> i64 {
    a + b
}

/// Hold until released.
#[tool]
async fn hold(gate: State<Gate>) -> String {
    gate.entered.notify_one();
    gate.release.notified().await;
    "released".into()
}

/// Count the runs of this tool.
#[tool]
async fn count(runs: State<Runs>) -> usize {
    runs.0.fetch_add(1, Ordering::SeqCst) + 1
}

#[derive(Default)]
struct Runs(AtomicUsize);

#[derive(Default)]
struct Gate {
    entered: Notify,
    release: Notify,
}

const LIMIT: usize = 40;

fn registry(gate: &Arc<Gate>, runs: &Arc<Runs>) -> ToolRegistry {
    ToolRegistry::builder()
        .tools(tools![add, hold, count])
        .state_arc(gate.clone())
        .state_arc(runs.clone())
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bounded_log_loses_no_call_and_no_outcome() {
    let bus = MemoryBus::with_retention(Retention::default().with_max_messages(LIMIT));
    let engine = Engine::new(bus.clone(), MemoryStore::new());
    let gate = Arc::new(Gate::default());
    let registry = registry(&gate, &Arc::default());
    let _worker = ToolHandler::new(registry).attach(&engine).await.unwrap();

    // A long-running call: its request stays unsettled, and keeps every newer message.
    let held_run = engine.new_run();
    let held = held_run.request("hold", json!({})).await.unwrap();
    gate.entered.notified().await;
    // A call requested now and awaited only once the log has moved far past it.
    let later_run = engine.new_run();
    let later = later_run
        .request("add", json!({"a": -1, "b": 1}))
        .await
        .unwrap();

    let busy = engine.new_run();
    for turn in 0..25_i64 {
        let calls = (0..8)
            .map(|i| ToolCall::new("add", json!({"a": turn * 8 + i, "b": 1})))
            .collect();
        let outcomes = busy.call_all(calls).await.unwrap();
        for (i, outcome) in (0..).zip(&outcomes) {
            assert_eq!(outcome.result(), Some(&json!(turn * 8 + i + 1)));
        }
    }
    assert!(
        bus.len() > 400,
        "the held request keeps the log behind it: {}",
        bus.len()
    );

    gate.release.notify_one();
    assert_eq!(
        held_run.outcome(&held).await.unwrap().for_model(),
        "released"
    );
    tokio::time::timeout(
        Duration::from_secs(5),
        bus.until_settled("aaa-tool-requests"),
    )
    .await
    .expect("every request is acknowledged");
    // Nothing is held any more: the next publishes bring the log down to its limit.
    for i in 0..4 {
        let outcome = busy.call("add", json!({"a": i, "b": i})).await.unwrap();
        assert_eq!(outcome.result(), Some(&json!(2 * i)));
    }
    assert!(bus.len() <= LIMIT, "{} messages kept", bus.len());

    // The handle that requested the call saw its outcome, which the log no longer has.
    let outcome = tokio::time::timeout(Duration::from_secs(5), later_run.outcome(&later))
        .await
        .expect("the outcome was kept by the handle that requested the call")
        .unwrap();
    assert_eq!(outcome.result(), Some(&json!(0)));
    // A new handle on that run reads what the log still holds: nothing of the old call.
    let mut facts = engine
        .run(later_run.run_id().clone())
        .facts()
        .await
        .unwrap();
    later_run
        .request("add", json!({"a": 5, "b": 5}))
        .await
        .unwrap();
    let first = facts.next().await.unwrap().unwrap();
    assert_eq!(first.kind, TOOL_REQUESTED);
    let request: ToolRequested = first.data_as().unwrap();
    assert_eq!(*request.arguments, json!({"a": 5, "b": 5}));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_outcome_asked_for_again_is_the_same() {
    let engine = Engine::embedded();
    let registry = registry(&Arc::default(), &Arc::default());
    let _worker = ToolHandler::new(registry).attach(&engine).await.unwrap();
    let run = engine.new_run();
    // Asked for while running, then again once handed out (read from the bus).
    let waited = run.request("add", json!({"a": 1, "b": 2})).await.unwrap();
    let first = run.outcome(&waited).await.unwrap();
    let again = tokio::time::timeout(Duration::from_secs(5), run.outcome(&waited))
        .await
        .expect("an outcome handed out is found again")
        .unwrap();
    assert_eq!(first.result(), Some(&json!(3)));
    assert_eq!(again.call_id(), first.call_id());
    assert_eq!(again.result(), first.result());
    // Arrived before anyone asked: kept by the handle until asked for, then the same.
    let early = run.request("add", json!({"a": 2, "b": 2})).await.unwrap();
    let mut facts = run.facts().await.unwrap();
    let mut completed = 0;
    while completed < 2 {
        let fact = facts.next().await.unwrap().unwrap();
        completed += usize::from(fact.kind == aaa_tools::event::TOOL_COMPLETED);
    }
    for _ in 0..2 {
        let outcome = tokio::time::timeout(Duration::from_secs(5), run.outcome(&early))
            .await
            .expect("an outcome that arrived first is kept until asked for")
            .unwrap();
        assert_eq!(outcome.result(), Some(&json!(4)));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_store_forgets_only_the_oldest_settled_calls() {
    let store = MemoryStore::new().with_retired_limit(5);
    let bus = MemoryBus::new();
    let engine = Engine::new(bus.clone(), store.clone());
    let runs = Arc::new(Runs::default());
    let gate = Arc::new(Gate::default());
    let registry = registry(&gate, &runs);
    let _worker = ToolHandler::new(registry).attach(&engine).await.unwrap();
    let run = engine.new_run();
    let held = run.request("hold", json!({})).await.unwrap();
    gate.entered.notified().await;
    let mut ids = Vec::new();
    for i in 1..=20 {
        let id = CallId::new(format!("count-{i}")).unwrap();
        let call = ToolCall::new("count", json!({})).with_id(id.clone());
        let outcome = run.call_all(vec![call]).await.unwrap().remove(0);
        assert_eq!(outcome.result(), Some(&json!(i)));
        ids.push(id);
    }
    let key = |id: &CallId| format!("guard.{}.{}.{id}", run.tenant(), run.run_id());
    let prefix = format!("guard.{}.{}.", run.tenant(), run.run_id());
    let mut kept = store.keys(RecordKind::Call, &prefix).await.unwrap();
    kept.sort();
    let mut expected: Vec<String> = ids[15..].iter().chain([&held]).map(key).collect();
    expected.sort();
    assert_eq!(
        kept, expected,
        "the running call and the last five settled ones"
    );

    gate.release.notify_one();
    assert_eq!(run.outcome(&held).await.unwrap().for_model(), "released");

    // A repeated request for a call still remembered is answered, not run; one for a
    // call forgotten runs as a new call.
    let mut facts = run.facts().await.unwrap();
    for id in [&ids[19], &ids[0]] {
        let again = ToolCall::new("count", json!({})).with_id(id.clone());
        run.request_call(again).await.unwrap();
    }
    // The forgotten call starts a second attempt 1 (its new outcome carries the first
    // one's message id, so the bus drops it as a duplicate: the first outcome stands).
    // The remembered one was delivered before it, and is settled once every request is.
    let rerun = async {
        let mut starts = 0;
        while let Some(fact) = facts.next().await {
            let fact = fact.unwrap();
            if fact.kind == ATTEMPT_STARTED {
                let started: AttemptFact = fact.data_as().unwrap();
                starts += usize::from(started.call_id == ids[0]);
                if starts == 2 {
                    return;
                }
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(5), rerun)
        .await
        .expect("the forgotten call runs again");
    tokio::time::timeout(
        Duration::from_secs(5),
        bus.until_settled("aaa-tool-requests"),
    )
    .await
    .expect("both repeated requests are handled");
    assert_eq!(
        runs.0.load(Ordering::SeqCst),
        21,
        "the remembered call ran once"
    );
}
