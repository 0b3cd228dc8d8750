//! An MCP server of a few guarded tools: what an MCP host (Claude Desktop, Claude Code,
//! Cursor, VS Code) launches, or a Streamable HTTP endpoint, or a gateway to workers on
//! NATS. Every call goes through the aaa-tools engine.
//!
//! ```sh
//! cargo run --example mcp_server                                  # stdio
//! cargo run --example mcp_server -- --http 127.0.0.1:8080         # http://127.0.0.1:8080/mcp
//! cargo run --example mcp_server -- --http 0.0.0.0:8080 --token s3cret
//! cargo run --example mcp_server -- --nats nats://127.0.0.1:4222 --worker   # a worker
//! cargo run --example mcp_server -- --nats nats://127.0.0.1:4222            # the gateway
//! ```
//!
//! `send_payment` needs a human's approval. A client that can show a form
//! (elicitation) asks its user; otherwise the call waits for an operator. Over HTTP (or
//! as a gateway) this program is that operator's console: it prints each approval
//! request on stderr and reads `approve <call>` or `deny <call> [reason]` from stdin.
//! Over stdio, stdin is the MCP channel: run it with `--nats` and approve from another
//! program on the bus (`RunHandle::grant`) instead.
//!
//! `count_slowly` becomes an MCP task for a client that declared the tasks extension
//! (`tasks/get` follows it, from this process or another gateway of the same bus).
//!
//! The token can also come from `AAA_MCP_TOKEN`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aaa_mcp::{HttpOptions, HttpServer, McpServer, TaskSupport};
use aaa_tools::event::{APPROVAL_REQUESTED, ApprovalDecision, ApprovalRequested};
use aaa_tools::{
    CallId, Engine, Progress, ToolContext, ToolError, ToolHandler, ToolRegistry, tool, tools,
};
use aaa_tools_nats::NatsOptions;
use futures::StreamExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Unit {
    Celsius,
    Fahrenheit,
}

/// The weather in one city.
#[derive(Debug, Serialize, JsonSchema)]
struct Weather {
    /// The city.
    city: String,
    /// The temperature, in the unit asked for.
    temperature: f64,
    /// The sky, in words.
    sky: String,
}

/// Get the current weather for a city.
///
/// # Arguments
/// * `city` - City name, e.g. "Paris".
/// * `unit` - Temperature unit; Celsius when left out.
#[tool(timeout_s = 10)]
async fn get_weather(city: String, unit: Option<Unit>) -> Result<Weather, ToolError> {
    if city.trim().is_empty() {
        return Err(ToolError::new("name a city, e.g. \"Paris\""));
    }
    // A stand-in for a weather service: a temperature derived from the name.
    let celsius = 5.0 + (city.bytes().map(u32::from).sum::<u32>() % 25) as f64;
    let temperature = match unit {
        Some(Unit::Fahrenheit) => celsius * 9.0 / 5.0 + 32.0,
        _ => celsius,
    };
    Ok(Weather {
        city,
        temperature,
        sky: "partly cloudy".into(),
    })
}

/// Add two integers.
///
/// # Arguments
/// * `a` - The first addend.
/// * `b` - The second addend.
#[tool]
async fn add(a: i64, b: i64) -> Result<i64, ToolError> {
    a.checked_add(b)
        .ok_or_else(|| ToolError::new("the sum does not fit in 64 bits; use smaller numbers"))
}

/// Count to a number, slowly, reporting progress on the way.
///
/// # Arguments
/// * `to` - Where to stop (at most 50).
#[tool(timeout_s = 30)]
async fn count_slowly(ctx: ToolContext, to: u32) -> Result<String, ToolError> {
    if to > 50 {
        return Err(ToolError::new("`to` must be at most 50"));
    }
    for n in 1..=to {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let report = Progress::new(f64::from(n))
            .total(f64::from(to))
            .message(format!("counted to {n}"));
        let _ = ctx.report_progress(report).await;
    }
    Ok(format!("counted to {to} (attempt {})", ctx.attempt()))
}

/// Send money to someone. A human approves every payment; it runs at most once.
///
/// # Arguments
/// * `to` - Who gets the money.
/// * `amount_cents` - How much, in cents.
#[tool(requires_approval = true, delivery = "at_most_once", timeout_s = 30)]
async fn send_payment(ctx: ToolContext, to: String, amount_cents: u64) -> Value {
    json!({
        "paid_cents": amount_cents,
        "to": to,
        "receipt": format!("rcpt-{}", ctx.call_id()),
        "idempotency_key": ctx.idempotency_key(),
    })
}

fn registry() -> Result<ToolRegistry, aaa_tools::DefinitionError> {
    ToolRegistry::new(tools![get_weather, add, count_slowly, send_payment])
}

/// What the command line asks for.
#[derive(Default)]
struct Args {
    http: Option<SocketAddr>,
    token: Option<String>,
    nats: Option<String>,
    worker: bool,
}

fn args() -> Result<Args, String> {
    let mut parsed = Args {
        token: std::env::var("AAA_MCP_TOKEN")
            .ok()
            .filter(|t| !t.is_empty()),
        ..Args::default()
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |what: &str| args.next().ok_or(format!("{arg} needs {what}"));
        match arg.as_str() {
            "--http" => {
                let address = value("an address, e.g. 127.0.0.1:8080")?;
                parsed.http = Some(
                    address
                        .parse()
                        .map_err(|e| format!("--http {address}: {e}"))?,
                );
            }
            "--token" => parsed.token = Some(value("a token")?),
            "--nats" => parsed.nats = Some(value("a URL, e.g. nats://127.0.0.1:4222")?),
            "--worker" => parsed.worker = true,
            other => {
                return Err(format!(
                    "unknown argument {other:?}; use --http ADDRESS [--token T], --nats URL [--worker]"
                ));
            }
        }
    }
    if parsed.worker && parsed.nats.is_none() {
        return Err("--worker needs --nats URL: a worker serves calls from the bus".into());
    }
    Ok(parsed)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = args()?;
    let registry = registry()?;
    let (engine, embedded) = match &args.nats {
        Some(url) => {
            let name = if args.worker {
                "mcp_server worker"
            } else {
                "mcp_server gateway"
            };
            let engine = NatsOptions::new(url)
                .connection_name(name)
                .connect()
                .await?;
            (engine, false)
        }
        None => (Engine::embedded(), true),
    };
    // The tools run here when the engine is embedded, or when this is a worker; a
    // gateway only requests calls, which workers on the bus run.
    let worker = if embedded || args.worker {
        Some(ToolHandler::new(registry.clone()).attach(&engine).await?)
    } else {
        None
    };
    if args.worker {
        eprintln!(
            "worker {} serving {} tools; ctrl-c stops it",
            engine.worker_id(),
            registry.len()
        );
        tokio::signal::ctrl_c().await?;
        if let Some(worker) = worker {
            worker.shutdown(Duration::from_secs(10)).await;
        }
        return Ok(());
    }
    let server = McpServer::builder(registry, engine)
        .name("aaa-tools example", env!("CARGO_PKG_VERSION"))
        .instructions("Weather, arithmetic, a slow counter and payments (a human approves each).")
        .output_schema::<Weather>("get_weather")
        .reports_progress("count_slowly")
        // A client that declared the tasks extension gets a task it polls; it
        // outlives this process (the task is an engine call, recorded in the store).
        .task_support("count_slowly", TaskSupport::Optional)
        .build()?;
    match args.http {
        None => {
            eprintln!("serving over stdio (run {})", server.run().run_id());
            aaa_mcp::serve_stdio(server).await?;
        }
        Some(address) => {
            let mut options = HttpOptions::bind(address);
            if let Some(token) = &args.token {
                options = options.token(token.clone());
            }
            let run = server.run().clone();
            let http = HttpServer::start(server, options).await?;
            eprintln!("serving on {} (run {})", http.url(), run.run_id());
            tokio::spawn(operator_console(run));
            tokio::signal::ctrl_c().await?;
            http.shutdown().await?;
        }
    }
    if let Some(worker) = worker {
        worker.shutdown(Duration::from_secs(10)).await;
    }
    Ok(())
}

/// Prints each approval request of `run` and takes an operator's decisions from stdin.
async fn operator_console(run: aaa_tools::RunHandle) {
    let pending: Arc<Mutex<HashMap<CallId, ApprovalRequested>>> = Arc::default();
    let waiting = pending.clone();
    let facts_run = run.clone();
    tokio::spawn(async move {
        let Ok(mut facts) = facts_run.facts().await else {
            return;
        };
        while let Some(Ok(fact)) = facts.next().await {
            if fact.kind != APPROVAL_REQUESTED {
                continue;
            }
            let Ok(request) = fact.into_data::<ApprovalRequested>() else {
                continue;
            };
            eprintln!(
                "approval needed: {} {} (call {}); type `approve {}` or `deny {} [reason]`",
                request.name, request.arguments, request.call_id, request.call_id, request.call_id
            );
            waiting
                .lock()
                .unwrap()
                .insert(request.call_id.clone(), request);
        }
    });
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let mut words = line.split_whitespace();
        let (Some(verb), Some(call)) = (words.next(), words.next()) else {
            continue;
        };
        let Ok(call) = CallId::new(call) else {
            eprintln!("{call:?} is not a call id");
            continue;
        };
        let Some(request) = pending.lock().unwrap().remove(&call) else {
            eprintln!("no approval is pending for {call}");
            continue;
        };
        let decision = ApprovalDecision::for_request(&request).with_approver("console operator");
        let sent = match verb {
            "approve" => run.grant(decision).await,
            "deny" => {
                let reason = words.collect::<Vec<_>>().join(" ");
                let reason = if reason.is_empty() {
                    "the operator denied it".into()
                } else {
                    reason
                };
                run.deny(decision.with_reason(reason)).await
            }
            other => {
                eprintln!("unknown command {other:?}: approve <call> or deny <call> [reason]");
                pending.lock().unwrap().insert(call, request);
                continue;
            }
        };
        match sent {
            Ok(()) => eprintln!("{verb}d {call}"),
            Err(error) => eprintln!("could not {verb} {call}: {error}"),
        }
    }
}
