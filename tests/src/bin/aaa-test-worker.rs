//! A worker process for the NATS fault tests: connects to the server at
//! `AAA_NATS_URL`, serves the test tools, prints `ready <worker id>` and runs until it
//! is killed. Every tool appends what it does to the ledger file `AAA_LEDGER`, one line
//! per event (`start|done <idempotency key> <attempt> <worker>`), so a test can count
//! executions across processes and crashes.

use std::io::Write;
use std::time::Duration;

use aaa_tools::{
    GuardConfig, LostLease, State, ToolContext, ToolHandler, ToolRegistry, tool, tools,
};
use aaa_tools_nats::NatsOptions;
use serde_json::{Value, json};

/// The ledger file shared by every worker of a test.
struct Ledger {
    path: String,
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
        // One write(2) of a short line to a file opened for appending: lines from
        // several processes never interleave.
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .expect("the ledger opens");
        file.write_all(line.as_bytes())
            .expect("the ledger is written");
    }
}

async fn run_for(ledger: &Ledger, ctx: &ToolContext, ms: u64) -> Value {
    ledger.record("start", ctx);
    tokio::time::sleep(Duration::from_millis(ms)).await;
    ledger.record("done", ctx);
    json!({"worker": ledger.worker, "attempt": ctx.attempt(), "key": ctx.idempotency_key()})
}

/// Works for `ms` milliseconds (at least once).
#[tool]
async fn work(ctx: ToolContext, ledger: State<Ledger>, ms: u64, tag: String) -> Value {
    let _ = tag;
    run_for(&ledger, &ctx, ms).await
}

/// Works for `ms` milliseconds (at most once).
#[tool(delivery = "at_most_once")]
async fn work_once(ctx: ToolContext, ledger: State<Ledger>, ms: u64, tag: String) -> Value {
    let _ = tag;
    run_for(&ledger, &ctx, ms).await
}

/// Crashes the worker process (a poison call).
#[tool]
async fn crash(ctx: ToolContext, ledger: State<Ledger>, tag: String) -> Value {
    let _ = tag;
    ledger.record("start", &ctx);
    std::process::abort();
}

/// Needs a human's approval, then works for `ms` milliseconds.
#[tool(requires_approval = true)]
async fn approved(ctx: ToolContext, ledger: State<Ledger>, ms: u64, tag: String) -> Value {
    let _ = tag;
    run_for(&ledger, &ctx, ms).await
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn env_f64(name: &str, default: f64) -> f64 {
    env(name).map_or(default, |v| v.parse().expect("a number"))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Warnings go to stderr, tagged with the process id, so a failing fault test shows
    // what its workers saw.
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_writer(std::io::stderr)
        .init();
    let url = env("AAA_NATS_URL").ok_or("AAA_NATS_URL is required")?;
    let ledger_path = env("AAA_LEDGER").ok_or("AAA_LEDGER is required")?;
    let lease_ttl = env_f64("AAA_LEASE_TTL_S", 2.0);
    let ack_wait = Duration::from_secs_f64(env_f64("AAA_ACK_WAIT_S", lease_ttl / 2.0));
    let lost_lease = match env("AAA_LOST_LEASE").as_deref() {
        Some("finish") => LostLease::Finish,
        _ => LostLease::Cancel,
    };
    let mut guard = GuardConfig::default();
    guard.lease_ttl_s = lease_ttl;
    guard.max_attempts = env_f64("AAA_MAX_ATTEMPTS", 3.0) as u32;
    guard.lost_lease = lost_lease;
    guard.wait_poll_s = env_f64("AAA_WAIT_POLL_S", 0.2);

    let mut options = NatsOptions::new(url).replicas(env_f64("AAA_REPLICAS", 1.0) as usize);
    for more in env("AAA_MORE_SERVERS").iter().flat_map(|s| s.split(',')) {
        options = options.server(more);
    }
    // A worker outlives a cluster that is still electing leaders: it tries to connect
    // (and open the stream and bucket) and to attach for up to 30 s before it gives up.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let engine = loop {
        match options.connect().await {
            Ok(engine) => break engine,
            Err(error) if std::time::Instant::now() < deadline => {
                tracing::warn!(%error, "cannot connect yet; trying again");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(error) => return Err(error.into()),
        }
    };
    let worker = engine.worker_id().to_owned();
    let registry = ToolRegistry::builder()
        .tools(tools![work, work_once, crash, approved])
        .state(Ledger {
            path: ledger_path,
            worker: worker.clone(),
        })
        .build()?;
    let handler = ToolHandler::new(registry)
        .guard(guard)
        .ack_wait(ack_wait)
        .max_in_flight(env_f64("AAA_MAX_IN_FLIGHT", 64.0) as usize);
    // Attaching creates the workers' consumer, which a cluster still settling may time
    // out on: tried again until the same deadline.
    let _handle = loop {
        match handler.clone().attach(&engine).await {
            Ok(handle) => break handle,
            Err(error) if std::time::Instant::now() < deadline => {
                tracing::warn!(%error, "cannot attach yet; trying again");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(error) => return Err(error.into()),
        }
    };
    println!("ready {worker}");
    std::io::stdout().flush()?;
    std::future::pending::<()>().await;
    Ok(())
}
