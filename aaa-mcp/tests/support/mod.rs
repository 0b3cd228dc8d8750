//! What the integration tests share: the tools they serve (each counting its runs, so
//! a test sees whether a tool ran, and how often), a server of them on an embedded
//! engine, and waiting for a run's facts.

#![allow(dead_code, unreachable_pub)] // each test binary uses a part

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aaa_mcp::McpServer;
use aaa_tools::event::Event;
use aaa_tools::{
    CallId, Engine, HandlerHandle, Progress, RunHandle, State, Tool, ToolContext, ToolError,
    ToolHandler, ToolRegistry, tool, tools,
};
use futures::StreamExt;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};

/// How many times each kind of tool ran.
#[derive(Debug, Default)]
pub struct Runs {
    pub counted: AtomicUsize,
    pub payments: AtomicUsize,
    pub slow: AtomicUsize,
    /// Told each time `sleepy` starts sleeping (a permit is kept when nobody waits).
    pub asleep: tokio::sync::Notify,
}

impl Runs {
    pub fn counted(&self) -> usize {
        self.counted.load(Ordering::SeqCst)
    }
    pub fn payments(&self) -> usize {
        self.payments.load(Ordering::SeqCst)
    }
}

/// The sum of two integers.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Sum {
    /// a + b.
    pub sum: i64,
}

/// Add two integers.
///
/// # Arguments
/// * `a` - The first addend.
/// * `b` - The second addend.
#[tool]
async fn add(a: i64, b: i64) -> Result<Sum, ToolError> {
    let sum = a
        .checked_add(b)
        .ok_or_else(|| ToolError::new("the sum does not fit in 64 bits"))?;
    Ok(Sum { sum })
}

/// Greet someone.
///
/// # Arguments
/// * `name` - Who to greet.
#[tool]
async fn greet(name: String) -> String {
    format!("Hello, {name}!")
}

/// Always fails, with a message for the model.
#[tool]
async fn fail() -> Result<(), ToolError> {
    Err(ToolError::new("the ledger is closed on Sundays"))
}

/// Counts its runs (to tell a re-sent request from a new one).
///
/// # Arguments
/// * `note` - Anything.
#[tool]
async fn counted(runs: State<Runs>, note: String) -> Value {
    let n = runs.counted.fetch_add(1, Ordering::SeqCst) + 1;
    json!({"run": n, "note": note})
}

/// Works in steps, reporting progress after each.
///
/// # Arguments
/// * `steps` - How many steps (at most 20).
#[tool]
async fn stepwise(ctx: ToolContext, runs: State<Runs>, steps: u32) -> Result<String, ToolError> {
    runs.slow.fetch_add(1, Ordering::SeqCst);
    let steps = steps.min(20);
    for step in 1..=steps {
        ctx.report_progress(
            Progress::new(f64::from(step))
                .total(f64::from(steps))
                .message(format!("step {step} of {steps}")),
        )
        .await
        .map_err(ToolError::internal)?;
    }
    Ok(format!("{steps} steps done"))
}

/// Sends money; a human approves every payment.
///
/// # Arguments
/// * `to` - Who gets the money.
/// * `amount_cents` - How much, in cents.
#[tool(requires_approval = true, delivery = "at_most_once")]
async fn send_payment(runs: State<Runs>, to: String, amount_cents: u64) -> Value {
    let n = runs.payments.fetch_add(1, Ordering::SeqCst) + 1;
    json!({"paid": amount_cents, "to": to, "receipt": format!("r-{n}")})
}

/// Sleeps, then answers (for cancellation).
///
/// # Arguments
/// * `ms` - How long, in milliseconds.
#[tool(timeout_s = 30)]
async fn sleepy(ctx: ToolContext, runs: State<Runs>, ms: u64) -> Result<&'static str, ToolError> {
    runs.asleep.notify_one();
    tokio::select! {
        () = tokio::time::sleep(Duration::from_millis(ms)) => Ok("awake"),
        () = ctx.cancelled() => Err(ToolError::new("cancelled")),
    }
}

/// Asks for a first and a last name (an `input_required` reply with both), then
/// greets; the state it sends with the question comes back with the answers.
#[tool]
async fn ask_name(ctx: ToolContext) -> aaa_mcp::McpReply {
    use rmcp::model::{ContentBlock, ElicitRequest, ElicitRequestParams, InputRequest};
    let request = aaa_mcp::McpRequest::of(&ctx).unwrap_or_default();
    let answer = |key| {
        request
            .input(key)?
            .get("content")?
            .get("name")?
            .as_str()
            .map(str::to_owned)
    };
    if let (Some(first), Some(last)) = (answer("first"), answer("last")) {
        let state = request.state.unwrap_or_default();
        return aaa_mcp::McpReply::content(vec![ContentBlock::text(format!(
            "Hello, {first} {last} (state {state})"
        ))]);
    }
    let question = |message: &str| {
        let schema = serde_json::from_value(json!({
            "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]
        }))
        .expect("a form");
        InputRequest::Elicitation(ElicitRequest::new(
            ElicitRequestParams::FormElicitationParams {
                meta: None,
                message: message.to_owned(),
                requested_schema: schema,
            },
        ))
    };
    let requests = [("first", "First name?"), ("last", "Last name?")]
        .into_iter()
        .map(|(key, message)| (key.to_owned(), question(message)))
        .collect();
    aaa_mcp::McpReply::input_required(requests, Some(json!("asked")))
}

/// Every test tool.
pub fn tools() -> Vec<Tool> {
    tools![
        add,
        greet,
        fail,
        counted,
        stepwise,
        send_payment,
        sleepy,
        ask_name
    ]
}

/// A registry of the test tools, counting into `runs`.
pub fn registry(runs: &Arc<Runs>) -> ToolRegistry {
    ToolRegistry::builder()
        .tools(tools())
        .state_arc(runs.clone())
        .build()
        .expect("the test tools")
}

/// A server of the test tools on an embedded engine with a handler attached. Keep
/// `worker` while calls are made: dropping it stops the handler.
pub struct TestServer {
    pub server: McpServer,
    pub runs: Arc<Runs>,
    pub engine: Engine,
    pub worker: HandlerHandle,
}

/// A server of the test tools; `configure` adjusts its builder.
pub async fn server_with(
    configure: impl FnOnce(aaa_mcp::McpServerBuilder) -> aaa_mcp::McpServerBuilder,
) -> TestServer {
    let runs = Arc::new(Runs::default());
    let registry = registry(&runs);
    let engine = Engine::embedded();
    let worker = ToolHandler::new(registry.clone())
        .attach(&engine)
        .await
        .expect("the handler attaches");
    let builder = McpServer::builder(registry, engine.clone())
        .name("aaa-mcp-tests", "0.0.0")
        .output_schema::<Sum>("add")
        .reports_progress("stepwise");
    let server = configure(builder).build().expect("the server builds");
    TestServer {
        server,
        runs,
        engine,
        worker,
    }
}

/// A server of the test tools with the default settings.
pub async fn server() -> TestServer {
    server_with(|b| b).await
}

/// A Python interpreter that can import `module`: `AAA_PYTHON` (a venv), else
/// `python3`. `None` (printing why) when there is none; a panic instead when
/// `AAA_REQUIRE_PYTHON=1`, so CI cannot skip these tests.
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
        "{} cannot import {module} (make a venv with `pip install mcp==1.x` and set AAA_PYTHON)",
        python.display()
    );
    if std::env::var("AAA_REQUIRE_PYTHON").as_deref() == Ok("1") {
        panic!("AAA_REQUIRE_PYTHON=1 but {reason}");
    }
    say_skipped(&reason);
    None
}

/// Says once per test binary, on the real stderr (past the harness's capture), that
/// tests were skipped and why.
pub fn say_skipped(reason: &str) {
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

/// `fut`, or a panic naming `what` once a broken cancel would have shown.
pub async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), fut)
        .await
        .unwrap_or_else(|_| panic!("{what} did not happen"))
}

/// The first fact of `kind` on the run (about `call`, when given), waiting for it.
pub async fn fact(run: &RunHandle, kind: &str, call: Option<&CallId>) -> Event {
    let mut facts = run.facts().await.unwrap();
    while let Some(event) = within(kind, facts.next()).await {
        let event = event.unwrap();
        let about = call.is_none_or(|c| event.subject.as_deref() == Some(c.as_str()));
        if event.kind == kind && about {
            return event;
        }
    }
    panic!("the run's facts ended before a {kind}");
}
