//! What one `tools/call` costs in CPU instructions, aaa-mcp against rmcp's own server
//! with the same tool: client and server in one process over an in-memory duplex
//! (rmcp's client on one end, the server on the other), on a current-thread runtime,
//! so an instruction counter sees the whole round trip and nothing else.
//!
//! The wall-clock comparison is the `mcp_call` bench; this is its companion for a
//! shared, noisy machine, where instruction counts are stable and times are not.
//! Everything but the measured calls (runtime, engine, aging, the handshake, warm-up)
//! happens outside [`measured`], so callgrind can collect only that function:
//!
//! ```sh
//! cargo build --release -p aaa-mcp --example call_cost
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*call_cost::measured*' \
//!     target/release/examples/call_cost aaa 2000 1
//! callgrind_annotate --inclusive=no callgrind.out.<pid>
//! ```
//!
//! Arguments: the server (`aaa` or `rmcp`, or `engine` for our server's engine called
//! directly, without MCP), the number of calls, and how many are in flight at once
//! (calls go in batches of that many). Run it for two numbers of calls
//! and take the difference per call: what is left is the cost of one more call.
//!
//! Our server's engine is aged first, as the bench's is: it makes enough calls of its
//! own to fill its bus log and guard store to their limits, which are kept small here
//! ([`LOG_LIMIT`], [`RETIRED_LIMIT`]) so that aging is quick under an instruction
//! counter; a full log and store cost per call what the default-sized ones do.

use std::hint::black_box;

use aaa_mcp::McpServer;
use aaa_tools::bus::{MemoryBus, Retention};
use aaa_tools::{Engine, MemoryStore, RunHandle, ToolCall, ToolHandler, ToolRegistry, tools};
use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::runtime::Runtime;

/// The bus log's limit (messages) of the measured engine.
const LOG_LIMIT: usize = 4_000;
/// The guard store's limit (retired records) of the measured engine.
const RETIRED_LIMIT: usize = 1_000;
/// Calls the engine makes before it is measured: past both limits.
const AGE_CALLS: usize = 4 * LOG_LIMIT;
/// The size of the handler's pool: as in the `mcp_call` bench, room for the most calls
/// it puts in flight (rmcp's server has no such cap).
const POOL: usize = 64;
/// Calls through MCP before the measured ones (caches, buffers, the follower).
const WARM_UP: usize = 256;

/// Add two integers.
///
/// # Arguments
/// * `a` - The first addend.
/// * `b` - The second addend.
#[aaa_tools::tool]
async fn add(a: i64, b: i64) -> i64 {
    a + b
}

#[path = "../benches/support/rmcp_adder.rs"]
mod rmcp_adder;
use rmcp_adder::RmcpAdder;

type Client = RunningService<RoleClient, ()>;

/// What keeps a server alive while it is measured.
type Held = Box<dyn std::any::Any>;

/// Our server, aged, with the handler that runs its calls.
async fn aaa_server(in_flight: usize) -> (McpServer, Held) {
    let registry = ToolRegistry::new(tools![add]).expect("the tool");
    let bus = MemoryBus::with_retention(Retention::default().with_max_messages(LOG_LIMIT));
    let engine = Engine::new(bus, MemoryStore::new().with_retired_limit(RETIRED_LIMIT));
    let worker = ToolHandler::new(registry.clone())
        .pool("default", POOL)
        .attach(&engine)
        .await
        .expect("the handler attaches");
    let server = McpServer::builder(registry, engine)
        .build()
        .expect("the server");
    let run = server.run().clone();
    for batch in 0..AGE_CALLS / in_flight {
        let calls = (0..in_flight)
            .map(|i| ToolCall::new("add", serde_json::json!({"a": batch, "b": i})))
            .collect();
        run.call_all(calls).await.expect("aging calls");
    }
    (server, Box::new(worker))
}

/// Our server, aged, serving one end of a duplex; rmcp's client on the other.
async fn aaa_client(in_flight: usize) -> (Client, Held) {
    let (server, worker) = aaa_server(in_flight).await;
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        let _ = aaa_mcp::serve_io(server, tokio::io::split(theirs)).await;
    });
    let client = ().serve(tokio::io::split(ours)).await.expect("the client connects");
    (client, worker)
}

/// rmcp's server serving one end of a duplex; rmcp's client on the other.
async fn rmcp_client() -> (Client, Held) {
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        if let Ok(running) = RmcpAdder::new().serve(tokio::io::split(theirs)).await {
            let _ = running.waiting().await;
        }
    });
    let client = ().serve(tokio::io::split(ours)).await.expect("the client connects");
    (client, Box::new(()))
}

async fn call(client: &Client, i: i64) -> i64 {
    let mut arguments = JsonObject::new();
    arguments.insert("a".to_owned(), Value::from(i));
    arguments.insert("b".to_owned(), Value::from(1));
    let params = CallToolRequestParams::new("add").with_arguments(arguments);
    let result = client.call_tool(params).await.expect("the call succeeds");
    let sum = result.structured_content.as_ref().and_then(Value::as_i64);
    let sum = sum.unwrap_or_else(|| {
        let text = &result.content[0].as_text().expect("a text block").text;
        text.parse().expect("a number")
    });
    assert_eq!(sum, i + 1, "the server adds");
    sum
}

async fn calls(client: &Client, n: usize, in_flight: usize) {
    let mut done = 0;
    while done < n {
        let batch = in_flight.min(n - done);
        let batch = (0..batch).map(|i| call(client, (done + i) as i64));
        black_box(futures::future::join_all(batch).await);
        done += in_flight;
    }
}

/// The same calls made on our server's engine directly, without MCP.
async fn engine_calls(run: &RunHandle, n: usize, in_flight: usize) {
    let mut done = 0;
    while done < n {
        let batch = in_flight.min(n - done);
        let batch = (0..batch).map(|i| {
            let i = (done + i) as i64;
            async move {
                let outcome = run.call("add", json!({"a": i, "b": 1})).await;
                black_box(outcome.expect("the call"));
            }
        });
        futures::future::join_all(batch).await;
        done += in_flight;
    }
}

/// What is measured: MCP calls through a client, or the engine's calls alone.
enum Measured {
    Mcp(Client),
    Engine(RunHandle),
}

impl Measured {
    async fn calls(&self, n: usize, in_flight: usize) {
        match self {
            Measured::Mcp(client) => calls(client, n, in_flight).await,
            Measured::Engine(run) => engine_calls(run, n, in_flight).await,
        }
    }
}

/// The measured calls: the only function an instruction counter needs to collect.
#[inline(never)]
fn measured(runtime: &Runtime, what: &Measured, n: usize, in_flight: usize) {
    runtime.block_on(what.calls(n, in_flight));
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: call_cost aaa|rmcp|engine CALLS IN_FLIGHT";
    let [kind, n, in_flight] = args.as_slice() else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let (Ok(n), Ok(in_flight)) = (n.parse::<usize>(), in_flight.parse::<usize>()) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    if in_flight == 0 || !matches!(kind.as_str(), "aaa" | "rmcp" | "engine") {
        eprintln!("{usage}");
        std::process::exit(2);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let (what, _held) = runtime.block_on(async {
        match kind.as_str() {
            "aaa" => {
                let (client, held) = aaa_client(in_flight).await;
                (Measured::Mcp(client), held)
            }
            "rmcp" => {
                let (client, held) = rmcp_client().await;
                (Measured::Mcp(client), held)
            }
            _ => {
                let (server, held) = aaa_server(in_flight).await;
                (Measured::Engine(server.run().clone()), held)
            }
        }
    });
    runtime.block_on(what.calls(WARM_UP, in_flight));
    let start = std::time::Instant::now();
    measured(&runtime, &what, n, in_flight);
    let elapsed = start.elapsed();
    println!(
        "{kind}: {n} calls at {in_flight} in flight, {:.1} µs per call",
        elapsed.as_secs_f64() * 1e6 / n as f64
    );
    runtime.block_on(async move { drop(what) });
}
