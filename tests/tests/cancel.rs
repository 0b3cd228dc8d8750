//! Cancelling calls on the embedded engine (`RunHandle::cancel`): a running tool is
//! told and stopped, a call that has not started never runs, a finished call keeps its
//! outcome, and a cancel sent before any worker listened is still found.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aaa_tests::{cancelled, within};
use aaa_tools::event::{ATTEMPT_STARTED, Event, TOOL_CANCELLED, TOOL_FAILED};
use aaa_tools::{
    ApprovalDecision, CallId, Engine, EngineError, RunHandle, State, ToolContext, ToolHandler,
    ToolRegistry, tool, tools,
};
use futures::StreamExt;
use serde_json::json;
use tokio::sync::Notify;

#[derive(Default)]
struct Seen {
    started: Notify,
    told: AtomicUsize,
    ran: AtomicUsize,
    dropped: AtomicUsize,
    finished: AtomicUsize,
}

/// Counts a tool's future dropped before it finished.
struct OnDrop(Arc<Seen>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        self.0.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

/// Waits until cancelled, then says so.
#[tool]
async fn polite(ctx: ToolContext, seen: State<Seen>) -> String {
    seen.started.notify_one();
    ctx.cancelled().await;
    seen.told.fetch_add(1, Ordering::SeqCst);
    "noticed".into()
}

/// Ignores the cancel: sleeps for an hour.
#[tool(timeout_s = 3600.0)]
async fn stubborn(seen: State<Seen>) -> String {
    let guard = OnDrop(seen.arc().clone());
    seen.started.notify_one();
    tokio::time::sleep(Duration::from_secs(3600)).await;
    std::mem::forget(guard);
    seen.finished.fetch_add(1, Ordering::SeqCst);
    "finished".into()
}

/// Holds the only slot of pool `solo` until cancelled.
#[tool(pool = "solo")]
async fn hold(ctx: ToolContext, seen: State<Seen>) -> String {
    seen.started.notify_one();
    ctx.cancelled().await;
    "released".into()
}

/// Counts its runs (in pool `solo`).
#[tool(pool = "solo")]
async fn counted(seen: State<Seen>) -> String {
    seen.ran.fetch_add(1, Ordering::SeqCst);
    "ran".into()
}

/// Needs a human's approval; counts its runs.
#[tool(requires_approval = true)]
async fn pay(cents: u64, seen: State<Seen>) -> String {
    seen.ran.fetch_add(1, Ordering::SeqCst);
    format!("paid {cents}")
}

/// Adds two integers.
#[tool]
async fn add(a: i64, b: i64) -> i64 {
    a + b
}

fn handler(seen: &Arc<Seen>) -> ToolHandler {
    let registry = ToolRegistry::builder()
        .tools(tools![polite, stubborn, hold, counted, pay, add])
        .state_arc(seen.clone())
        .build()
        .unwrap();
    // A short ack wait: a tool that ignores the cancel is dropped one heartbeat
    // (a third of it) after it was told.
    ToolHandler::new(registry)
        .pool("solo", 1)
        .ack_wait(Duration::from_millis(300))
}

async fn worker(engine: &Engine, seen: &Arc<Seen>) -> aaa_tools::HandlerHandle {
    handler(seen).attach(engine).await.unwrap()
}

/// Waits until the run has a fact of `kind` about `call`.
async fn fact(run: &RunHandle, kind: &str, call: &CallId) -> Event {
    let mut facts = run.facts().await.unwrap();
    while let Some(event) = facts.next().await {
        let event = event.unwrap();
        if event.kind == kind && event.subject.as_deref() == Some(call.as_str()) {
            return event;
        }
    }
    panic!("the run's facts ended before a {kind} of {call}");
}

/// Every fact of the run about `call` stored so far, by type.
async fn kinds_of(run: &RunHandle, call: &CallId) -> Vec<String> {
    let outcome = within("the outcome", run.outcome(call)).await.unwrap();
    let mut facts = run.facts().await.unwrap();
    let mut kinds = Vec::new();
    // The outcome is stored: reading up to it reads everything about the call before.
    while let Some(event) = facts.next().await {
        let event = event.unwrap();
        if event.subject.as_deref() == Some(call.as_str()) {
            let done = event.kind == TOOL_FAILED || event.kind.ends_with(".completed");
            kinds.push(event.kind);
            if done {
                break;
            }
        }
    }
    drop(outcome);
    kinds
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_tool_is_told_and_its_outcome_is_cancelled() {
    let seen = Arc::new(Seen::default());
    let engine = Engine::embedded();
    let _worker = worker(&engine, &seen).await;
    let run = engine.new_run();
    let started = seen.started.notified();
    let call = run.request("polite", json!({})).await.unwrap();
    started.await;
    run.cancel_with_reason(&call, "the user stopped it")
        .await
        .unwrap();
    let outcome = within("the outcome", run.outcome(&call)).await.unwrap();
    let message = cancelled(&outcome);
    assert!(message.contains("stopped when told"), "{message}");
    assert!(message.contains("the user stopped it"), "{message}");
    assert_eq!(seen.told.load(Ordering::SeqCst), 1);
    // What the run says: the cancel, then the failure; no completion.
    let kinds = kinds_of(&run, &call).await;
    let cancel_at = kinds.iter().position(|k| k == TOOL_CANCELLED).unwrap();
    assert!(cancel_at < kinds.len() - 1, "{kinds:?}");
    assert_eq!(
        kinds.last().map(String::as_str),
        Some(TOOL_FAILED),
        "{kinds:?}"
    );
    // A waiter elsewhere finds the outcome by its subject, past the cancel stored
    // before it on the same `tool.<how>.<call>` layout.
    let elsewhere = engine.sibling().run(run.run_id().clone());
    let looked_up = within("the outcome, looked up", elsewhere.outcome(&call))
        .await
        .unwrap();
    cancelled(&looked_up);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_ignores_the_cancel_is_dropped_after_its_grace() {
    let seen = Arc::new(Seen::default());
    let engine = Engine::embedded();
    let _worker = worker(&engine, &seen).await;
    let run = engine.new_run();
    let started = seen.started.notified();
    let call = run.request("stubborn", json!({})).await.unwrap();
    started.await;
    run.cancel(&call).await.unwrap();
    let outcome = within("the outcome", run.outcome(&call)).await.unwrap();
    let message = cancelled(&outcome);
    assert!(message.contains("was stopped"), "{message}");
    assert_eq!(
        seen.dropped.load(Ordering::SeqCst),
        1,
        "the tool was dropped"
    );
    assert_eq!(seen.finished.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waiting_for_its_pool_never_runs() {
    let seen = Arc::new(Seen::default());
    let engine = Engine::embedded();
    let _worker = worker(&engine, &seen).await;
    let run = engine.new_run();
    let started = seen.started.notified();
    let holder = run.request("hold", json!({})).await.unwrap();
    started.await;
    // `solo` is full: the call is taken (the `default` pool has room), starts its
    // attempt and waits for a permit.
    let queued = run.request("counted", json!({})).await.unwrap();
    fact(&run, ATTEMPT_STARTED, &queued).await;
    run.cancel(&queued).await.unwrap();
    let outcome = within("the outcome", run.outcome(&queued)).await.unwrap();
    let message = cancelled(&outcome);
    assert!(message.contains("it did not run"), "{message}");
    run.cancel(&holder).await.unwrap();
    cancelled(&within("the outcome", run.outcome(&holder)).await.unwrap());
    // The pool is free again, and the cancelled call stays unrun.
    let next = run.call("counted", json!({})).await.unwrap();
    assert_eq!(next.result(), Some(&json!("ran")));
    assert_eq!(seen.ran.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waiting_for_approval_is_cancelled_without_running() {
    let seen = Arc::new(Seen::default());
    let engine = Engine::embedded();
    let _worker = worker(&engine, &seen).await;
    let run = engine.new_run();
    let call = run.request("pay", json!({"cents": 5})).await.unwrap();
    let requested = fact(&run, aaa_tools::event::APPROVAL_REQUESTED, &call).await;
    run.cancel(&call).await.unwrap();
    let outcome = within("the outcome", run.outcome(&call)).await.unwrap();
    let message = cancelled(&outcome);
    assert!(message.contains("waited for approval"), "{message}");
    // The approval is settled: a grant now is refused, and nothing runs.
    let requested: aaa_tools::event::ApprovalRequested = requested.into_data().unwrap();
    let granted = run.grant(ApprovalDecision::for_request(&requested)).await;
    assert!(
        matches!(granted, Err(EngineError::NotPending(_))),
        "{granted:?}"
    );
    assert_eq!(seen.ran.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_call_keeps_its_outcome_and_cancels_are_harmless() {
    let seen = Arc::new(Seen::default());
    let engine = Engine::embedded();
    let _worker = worker(&engine, &seen).await;
    let run = engine.new_run();
    let call = run.request("add", json!({"a": 2, "b": 3})).await.unwrap();
    assert_eq!(
        within("the outcome", run.outcome(&call))
            .await
            .unwrap()
            .result(),
        Some(&json!(5))
    );
    run.cancel(&call).await.unwrap();
    run.cancel(&call).await.unwrap();
    // An unknown call: nothing to cancel, and no error.
    run.cancel(&CallId::new("never-requested").unwrap())
        .await
        .unwrap();
    // The finished call's outcome stands (a later call on the same worker proves the
    // cancels were heard and handled first: facts are heard in order).
    let later = run.call("add", json!({"a": 1, "b": 1})).await.unwrap();
    assert_eq!(later.result(), Some(&json!(2)));
    let elsewhere = engine.sibling().run(run.run_id().clone());
    assert_eq!(
        within("the outcome, looked up", elsewhere.outcome(&call))
            .await
            .unwrap()
            .result(),
        Some(&json!(5))
    );
    // The twice-sent cancel is one fact, and the call has one outcome.
    let mut facts = run.facts().await.unwrap();
    let mut about = Vec::new();
    while let Some(event) = facts.next().await {
        let event = event.unwrap();
        let later_outcome = event.subject.as_deref() == Some(later.call_id().as_str())
            && event.kind.ends_with(".completed");
        if event.subject.as_deref() == Some(call.as_str()) {
            about.push(event.kind);
        }
        if later_outcome {
            break;
        }
    }
    let count = |kind: &str| about.iter().filter(|k| *k == kind).count();
    assert_eq!(count(TOOL_CANCELLED), 1, "{about:?}");
    assert_eq!(count("aaa.tool.completed"), 1, "{about:?}");
    assert_eq!(count(TOOL_FAILED), 0, "{about:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_sent_before_any_worker_listened_is_found() {
    let seen = Arc::new(Seen::default());
    let engine = Engine::embedded();
    let run = engine.new_run();
    let call = run.request("counted", json!({})).await.unwrap();
    run.cancel(&call).await.unwrap();
    // The worker starts after both: its request was stored before it listened, so
    // it looks for a cancel.
    let _worker = worker(&engine, &seen).await;
    let outcome = within("the outcome", run.outcome(&call)).await.unwrap();
    let message = cancelled(&outcome);
    assert!(message.contains("it did not run"), "{message}");
    assert_eq!(seen.ran.load(Ordering::SeqCst), 0);
    let next = run.call("counted", json!({})).await.unwrap();
    assert_eq!(next.result(), Some(&json!("ran")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_heard_by_a_worker_not_running_the_call_changes_nothing_there() {
    let seen = Arc::new(Seen::default());
    let engine = Engine::embedded();
    let _first = worker(&engine, &seen).await;
    // A second worker on the same bus and store: whichever runs the call stops it.
    let other = engine.sibling();
    let _second = worker(&other, &seen).await;
    let run = engine.new_run();
    let started = seen.started.notified();
    let call = run.request("polite", json!({})).await.unwrap();
    started.await;
    run.cancel(&call).await.unwrap();
    cancelled(&within("the outcome", run.outcome(&call)).await.unwrap());
    assert_eq!(seen.told.load(Ordering::SeqCst), 1);
    let kinds = kinds_of(&run, &call).await;
    assert_eq!(
        kinds.iter().filter(|k| *k == TOOL_FAILED).count(),
        1,
        "{kinds:?}"
    );
}
