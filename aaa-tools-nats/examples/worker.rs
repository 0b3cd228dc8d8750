//! A worker process: serves a few tools from a NATS JetStream server. Start several
//! (on one machine or many) and they share the calls; kill one mid-call and another
//! takes its calls over.
//!
//! ```sh
//! nats-server -js -sd /tmp/aaa-nats &          # the server (file storage)
//! cargo run --example worker                   # in three terminals
//! cargo run --example client                   # submits calls, prints outcomes
//! ```
//!
//! The server URL comes from `NATS_URL` (default `nats://127.0.0.1:4222`).

use std::time::Duration;

use aaa_tools::{GuardConfig, ToolContext, ToolError, ToolHandler, ToolRegistry, tool, tools};
use aaa_tools_nats::NatsOptions;
use serde_json::{Value, json};

/// The id of the worker running this call (so the client can show who ran what).
fn worker_of(ctx: &ToolContext) -> String {
    ctx.engine()
        .map(|engine| engine.worker_id().to_owned())
        .unwrap_or_default()
}

/// Adds two integers.
///
/// # Arguments
/// * `a` - The first addend.
/// * `b` - The second addend.
#[tool]
async fn add(ctx: ToolContext, a: i64, b: i64) -> Result<Value, ToolError> {
    let sum = a
        .checked_add(b)
        .ok_or_else(|| ToolError::new("the sum does not fit in 64 bits; use smaller numbers"))?;
    Ok(json!({"sum": sum, "worker": worker_of(&ctx)}))
}

/// Counts the words and characters of a text.
///
/// # Arguments
/// * `text` - The text to count.
#[tool]
async fn word_count(ctx: ToolContext, text: String) -> Value {
    json!({
        "words": text.split_whitespace().count(),
        "chars": text.chars().count(),
        "worker": worker_of(&ctx),
    })
}

/// Takes its time, then echoes the text back (a stand-in for slow work; kill the
/// worker while it runs to watch another one take it over).
///
/// # Arguments
/// * `text` - What to echo.
/// * `ms` - How long to work, in milliseconds (at most 60000).
#[tool(timeout_s = 90)]
async fn slow_echo(ctx: ToolContext, text: String, ms: u64) -> Result<Value, ToolError> {
    if ms > 60_000 {
        return Err(ToolError::new("ms must be at most 60000"));
    }
    tokio::time::sleep(Duration::from_millis(ms)).await;
    Ok(json!({"echo": text, "attempt": ctx.attempt(), "worker": worker_of(&ctx)}))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    let engine = NatsOptions::new(&url)
        .connection_name("aaa-tools example worker")
        .connect()
        .await?;
    let registry = ToolRegistry::new(tools![add, word_count, slow_echo])?;
    // A 6 s lease (the ack wait defaults to half of it): a dead worker's calls are
    // taken over about 6 s after its last renewal.
    let mut guard = GuardConfig::default();
    guard.lease_ttl_s = 6.0;
    let worker = ToolHandler::new(registry)
        .guard(guard)
        .attach(&engine)
        .await?;
    println!(
        "worker {} serving {:?} from {url}; Ctrl-C to stop",
        engine.worker_id(),
        worker.tools()
    );
    tokio::signal::ctrl_c().await?;
    println!("stopping: running calls get 10 s to finish, the rest go to other workers");
    worker.shutdown(Duration::from_secs(10)).await;
    Ok(())
}
