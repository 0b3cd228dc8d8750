//! Tools, an engine with a handler, and readers of a run's facts, for the loop tests.

#![allow(dead_code, unreachable_pub)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aaa_loop::{ArgumentsOrProblem, ProviderCall};
use aaa_tools::event::{APPROVAL_REQUESTED, ApprovalRequested, Event};
use aaa_tools::{
    Engine, HandlerHandle, RunHandle, State, Tool, ToolHandler, ToolRegistry, tool, tools,
};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::{Barrier, Notify};

/// What the tools did.
pub struct Seen {
    pub adds: AtomicUsize,
    pub paid: AtomicUsize,
    pub running: AtomicUsize,
    pub max_running: AtomicUsize,
    pub steps: Mutex<Vec<u32>>,
    pub gate: Notify,
    pub meeting: Barrier,
}

impl Default for Seen {
    fn default() -> Self {
        Seen {
            adds: AtomicUsize::new(0),
            paid: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            max_running: AtomicUsize::new(0),
            steps: Mutex::new(Vec::new()),
            gate: Notify::new(),
            meeting: Barrier::new(2),
        }
    }
}

impl Seen {
    pub fn adds(&self) -> usize {
        self.adds.load(Ordering::SeqCst)
    }

    pub fn paid(&self) -> usize {
        self.paid.load(Ordering::SeqCst)
    }
}

/// Add two integers.
///
/// # Arguments
/// * `a` - The first.
/// * `b` - The second.
#[tool]
async fn add(a: i64, b: i64, seen: State<Seen>) -> i64 {
    seen.adds.fetch_add(1, Ordering::SeqCst);
    a + b
}

/// Pay someone; a human approves it first.
///
/// # Arguments
/// * `to` - The payee.
/// * `cents` - How much.
#[tool(requires_approval = true)]
async fn pay(to: String, cents: u64, seen: State<Seen>) -> String {
    seen.paid.fetch_add(1, Ordering::SeqCst);
    format!("paid {cents} to {to}")
}

/// One step of a job whose steps must not overlap.
///
/// # Arguments
/// * `n` - The step.
#[tool]
async fn step(n: u32, seen: State<Seen>) -> u32 {
    let now = seen.running.fetch_add(1, Ordering::SeqCst) + 1;
    seen.max_running.fetch_max(now, Ordering::SeqCst);
    seen.steps.lock().unwrap().push(n);
    // The step's work: long enough for an overlapping step to be seen.
    tokio::time::sleep(Duration::from_millis(30)).await;
    seen.running.fetch_sub(1, Ordering::SeqCst);
    n
}

/// Meet the other `meet` call: finishes only when both run at once.
#[tool]
async fn meet(seen: State<Seen>) -> String {
    seen.meeting.wait().await;
    "met".into()
}

/// Wait until the test opens the gate.
#[tool]
async fn wait_gate(seen: State<Seen>) -> String {
    seen.gate.notified().await;
    "waited".into()
}

/// Answer at once.
#[tool]
async fn ping() -> String {
    "pong".into()
}

/// The tools the model is told about.
pub fn all_tools() -> Vec<Tool> {
    tools![add, pay, step, meet, wait_gate, ping]
}

/// An embedded engine running [`all_tools`].
pub struct World {
    pub engine: Engine,
    pub seen: Arc<Seen>,
    _worker: HandlerHandle,
}

pub async fn world() -> World {
    let seen = Arc::new(Seen::default());
    let engine = Engine::embedded();
    let registry = ToolRegistry::builder()
        .tools(all_tools())
        .state_arc(seen.clone())
        .build()
        .unwrap();
    let worker = ToolHandler::new(registry)
        .approval_timeout(Duration::from_secs(3600))
        .attach(&engine)
        .await
        .unwrap();
    World {
        engine,
        seen,
        _worker: worker,
    }
}

/// A call as a provider would send it, with arguments `arguments`.
pub fn call(id: &str, name: &str, arguments: Value) -> ProviderCall {
    ProviderCall::new(id, name, ArgumentsOrProblem::from_value(arguments))
}

/// `add(a, b)` under provider id `id`.
pub fn add_call(id: &str, a: i64, b: i64) -> ProviderCall {
    call(id, "add", json!({"a": a, "b": b}))
}

/// The run's facts up to now: read until a marker published now comes back.
pub async fn facts_now(run: &RunHandle) -> Vec<Event> {
    let mut facts = run.facts().await.unwrap();
    let marker = Event::new(
        "test.marker",
        "test",
        run.tenant(),
        run.run_id(),
        None,
        json!({}),
    );
    run.engine().publish(&marker).await.unwrap();
    let mut seen = Vec::new();
    while let Some(fact) = facts.next().await {
        let fact = fact.unwrap();
        if fact.id == marker.id {
            return seen;
        }
        seen.push(fact);
    }
    panic!("the run's facts ended before the marker")
}

/// The run's facts of type `kind` up to now.
pub async fn facts_of(run: &RunHandle, kind: &str) -> Vec<Event> {
    let mut facts = facts_now(run).await;
    facts.retain(|fact| fact.kind == kind);
    facts
}

/// The first approval request of the run, waiting for it.
pub async fn next_approval(run: &RunHandle) -> ApprovalRequested {
    let mut facts = run.facts().await.unwrap();
    let wait = async {
        while let Some(fact) = facts.next().await {
            let fact = fact.unwrap();
            if fact.kind == APPROVAL_REQUESTED {
                return fact.data_as().unwrap();
            }
        }
        panic!("the run ended without an approval request")
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .expect("no approval was requested")
}

/// Fails a test that would hang.
pub async fn within<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), future)
        .await
        .expect("the test hung")
}
