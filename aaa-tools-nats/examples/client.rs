//! A client: submits one model turn of calls to the workers on a NATS JetStream server
//! and prints each outcome as the model would read it, with the worker that ran it.
//! Start a server and some workers first (see `worker.rs` beside this file).
//!
//! ```sh
//! cargo run --example client            # NATS_URL, default nats://127.0.0.1:4222
//! ```

use std::time::Duration;

use aaa_tools::ToolCall;
use aaa_tools_nats::NatsOptions;
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    let engine = NatsOptions::new(&url).connect().await?;
    let run = engine.new_run();
    println!("run {} on {url}", run.run_id());

    let mut calls = Vec::new();
    for i in 0..6 {
        calls.push(ToolCall::new("add", json!({"a": i, "b": i * 10})));
        calls.push(ToolCall::new(
            "slow_echo",
            json!({"text": format!("job {i}"), "ms": 500 + 250 * i}),
        ));
    }
    calls.push(ToolCall::new(
        "word_count",
        json!({"text": "durable, guarded tool execution"}),
    ));
    // Mistakes a model makes come back as facts it can act on.
    calls.push(ToolCall::new("add", json!({"a": "two", "b": 2})));
    calls.push(ToolCall::new("ad", json!({"a": 1, "b": 2})));

    let outcomes = tokio::time::timeout(Duration::from_secs(120), run.call_all(calls))
        .await
        .map_err(
            |_| "no outcome within 120 s: are workers running? (cargo run --example worker)",
        )??;
    for outcome in &outcomes {
        println!("{:<11} {}", outcome.name(), outcome.for_model());
    }
    Ok(())
}
