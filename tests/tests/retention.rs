//! The embedded engine on a bus with a small [`Retention`]: the log levels off, and still
//! no call and no outcome is lost.

use std::sync::Arc;
use std::time::Duration;

use aaa_tools::bus::{MemoryBus, Retention};
use aaa_tools::event::{TOOL_REQUESTED, ToolRequested};
use aaa_tools::{Engine, MemoryStore, State, ToolCall, ToolHandler, ToolRegistry, tool, tools};
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

#[derive(Default)]
struct Gate {
    entered: Notify,
    release: Notify,
}

const LIMIT: usize = 40;

#[tokio::test(flavor = "multi_thread")]
async fn a_bounded_log_loses_no_call_and_no_outcome() {
    let bus = MemoryBus::with_retention(Retention::default().with_max_messages(LIMIT));
    let engine = Engine::new(bus.clone(), MemoryStore::new());
    let gate = Arc::new(Gate::default());
    let registry = ToolRegistry::builder()
        .tools(tools![add, hold])
        .state_arc(gate.clone())
        .build()
        .unwrap();
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
    assert_eq!(request.arguments, json!({"a": 5, "b": 5}));
}
