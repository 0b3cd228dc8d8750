//! Cancelling calls across processes' worth of connections on a real `nats-server`:
//! the caller's engine and the worker's engine share nothing but the server.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use aaa_tests::{NatsServer, cancelled, within};
use aaa_tools::event::{TOOL_CANCELLED, TOOL_FAILED};
use aaa_tools::{State, ToolContext, ToolHandler, ToolRegistry, tool, tools};
use aaa_tools_nats::NatsOptions;
use futures::StreamExt;
use serde_json::json;
use tokio::sync::Notify;

#[derive(Default)]
struct Seen {
    started: Notify,
    told: AtomicUsize,
    ran: AtomicUsize,
}

/// Waits until cancelled.
#[tool]
async fn polite(ctx: ToolContext, seen: State<Seen>) -> String {
    seen.started.notify_one();
    ctx.cancelled().await;
    seen.told.fetch_add(1, Ordering::SeqCst);
    "noticed".into()
}

/// Counts its runs.
#[tool]
async fn counted(seen: State<Seen>) -> String {
    seen.ran.fetch_add(1, Ordering::SeqCst);
    "ran".into()
}

fn handler(seen: &Arc<Seen>) -> ToolHandler {
    let registry = ToolRegistry::builder()
        .tools(tools![polite, counted])
        .state_arc(seen.clone())
        .build()
        .unwrap();
    ToolHandler::new(registry)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_on_another_connection_stops_a_running_tool() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let options = NatsOptions::new(server.url());
    let worker = options.connect().await.expect("worker connects");
    let caller = options.connect().await.expect("caller connects");
    let seen = Arc::new(Seen::default());
    let _handle = handler(&seen).attach(&worker).await.unwrap();

    let run = caller.new_run();
    let started = seen.started.notified();
    let call = run.request("polite", json!({})).await.unwrap();
    within("the tool's start", started).await;
    run.cancel_with_reason(&call, "not needed").await.unwrap();
    let outcome = within("the outcome", run.outcome(&call)).await.unwrap();
    let message = cancelled(&outcome);
    assert!(message.contains("not needed"), "{message}");
    assert_eq!(seen.told.load(Ordering::SeqCst), 1);

    // The run's facts on the stream: the cancel, then the failure.
    let mut facts = run.facts().await.unwrap();
    let mut kinds = Vec::new();
    while let Some(event) = within("the run's facts", facts.next()).await {
        let event = event.unwrap();
        if event.subject.as_deref() == Some(call.as_str()) {
            kinds.push(event.kind.clone());
            if event.kind == TOOL_FAILED {
                break;
            }
        }
    }
    let cancel_at = kinds.iter().position(|k| k == TOOL_CANCELLED);
    assert!(
        cancel_at.is_some_and(|at| at < kinds.len() - 1),
        "{kinds:?}"
    );
    // Another caller finds the outcome by its subject, past the cancel before it.
    let other = options.connect().await.expect("another caller connects");
    let looked_up = within(
        "the outcome, looked up",
        other.run(run.run_id().clone()).outcome(&call),
    )
    .await
    .unwrap();
    cancelled(&looked_up);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_stored_before_the_worker_started_is_found() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let options = NatsOptions::new(server.url());
    let caller = options.connect().await.expect("caller connects");
    let run = caller.new_run();
    let call = run.request("counted", json!({})).await.unwrap();
    run.cancel(&call).await.unwrap();
    // A cancel of a call nobody requested is harmless too.
    run.cancel(&aaa_tools::new_call_id()).await.unwrap();

    let worker = options.connect().await.expect("worker connects");
    let seen = Arc::new(Seen::default());
    let _handle = handler(&seen).attach(&worker).await.unwrap();
    let outcome = within("the outcome", run.outcome(&call)).await.unwrap();
    let message = cancelled(&outcome);
    assert!(message.contains("did not run"), "{message}");
    assert_eq!(seen.ran.load(Ordering::SeqCst), 0);
    // The worker goes on: a call requested after it listened runs, with no lookup.
    let next = within("the next outcome", run.call("counted", json!({})))
        .await
        .unwrap();
    assert_eq!(next.result(), Some(&json!("ran")));
}
