//! A `tools/call` round trip over MCP, aaa-mcp against rmcp's own server with the same
//! tool, in the same run, over both transports:
//!
//! - **stdio**: the server is a child process (this bench binary run again with
//!   `--serve-stdio aaa|rmcp`), the client talks to its stdin and stdout, as an MCP
//!   host does;
//! - **Streamable HTTP**: the server listens on 127.0.0.1 in this process (ours through
//!   [`HttpServer`], rmcp's through its `StreamableHttpService` under axum), the client
//!   is rmcp's Streamable HTTP client.
//!
//! The client is rmcp's in every case, so the servers are the only difference. The
//! tool is `add(a, b)`. Ours runs every call through the embedded engine with a
//! `ToolHandler` attached and the guard on (its default): the request is a fact, the
//! guard takes a lease and records the attempt, the outcome is a fact the server
//! waits for. rmcp's calls the function.
//!
//! Measured at 1 call in flight (latency) and 64 in flight (throughput), first as
//! criterion groups, then in a summary that measures each pair again in alternating
//! rounds and prints the ratios against the targets: at most 1.2 times rmcp's latency
//! at 1 in flight, at least its throughput at 64. The bench measures and prints; it
//! asserts no time.
//!
//! Before it is measured, our server's engine makes [`AGE_CALLS`] calls of its own, so
//! its log and its guard store are at their retention limits, as a long-running
//! server's are (a young engine frees nothing and is faster than a deployed one).
//!
//! ```sh
//! cargo bench -p aaa-mcp --bench mcp_call
//! ```

use std::hint::black_box;
use std::process::Stdio;
use std::time::{Duration, Instant};

use aaa_mcp::{HttpOptions, HttpServer, McpServer};
use aaa_tools::{Engine, HandlerHandle, ToolCall, ToolHandler, ToolRegistry, tools};
use criterion::{Criterion, Throughput};
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{
    StreamableHttpClientTransport, StreamableHttpServerConfig, StreamableHttpService,
};
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;
use tokio::runtime::Runtime;

/// Calls in flight for the throughput measurements.
const IN_FLIGHT: usize = 64;
/// Calls our server's engine makes before it is measured.
const AGE_CALLS: usize = 200_000;
/// Rounds of the summary, alternating between the servers.
const ROUNDS: usize = 7;
/// How long the summary measures one server in one mode, per round.
const ROUND: Duration = Duration::from_millis(400);

/// Add two integers.
///
/// # Arguments
/// * `a` - The first addend.
/// * `b` - The second addend.
#[aaa_tools::tool]
async fn add(a: i64, b: i64) -> i64 {
    a + b
}

#[path = "support/rmcp_adder.rs"]
mod rmcp_adder;
use rmcp_adder::RmcpAdder;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Aaa,
    Rmcp,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Aaa => "aaa-mcp",
            Kind::Rmcp => "rmcp",
        }
    }
}

/// Our server, aged, with the handler that runs its calls.
async fn aaa_server() -> (McpServer, HandlerHandle) {
    let registry = ToolRegistry::new(tools![add]).expect("the tool");
    let engine = Engine::embedded();
    // Room for every call in flight: rmcp's server runs all 64 at once, and the
    // default pool (16) would cap ours. (Measured in instructions with
    // `examples/call_cost.rs` the cap costs little, 0.4% per call at 64 in flight on one
    // thread; it is taken off so that the servers differ only in what they do.)
    let worker = ToolHandler::new(registry.clone())
        .pool("default", IN_FLIGHT)
        .attach(&engine)
        .await
        .expect("the handler attaches");
    let server = McpServer::builder(registry, engine)
        .build()
        .expect("the server");
    // Age the engine on the server's own run: its log and store reach their limits.
    let run = server.run().clone();
    for batch in 0..AGE_CALLS / IN_FLIGHT {
        let calls = (0..IN_FLIGHT)
            .map(|i| ToolCall::new("add", serde_json::json!({"a": batch, "b": i})))
            .collect();
        run.call_all(calls).await.expect("aging calls");
    }
    (server, worker)
}

/// Serves `kind` on stdin/stdout (the child process of the stdio measurements).
fn serve_stdio(kind: &str) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        if kind == "aaa" {
            let (server, _worker) = aaa_server().await;
            aaa_mcp::serve_stdio(server).await.expect("stdio ends");
        } else {
            let running = RmcpAdder::new()
                .serve(rmcp::transport::stdio_pipes())
                .await
                .expect("stdio starts");
            let _ = running.waiting().await;
        }
    });
}

type Client = RunningService<RoleClient, ()>;

/// A client of `kind`'s server over stdio (a child process).
async fn stdio_client(kind: Kind) -> (Client, tokio::process::Child) {
    let me = std::env::current_exe().expect("this binary");
    let which = if kind == Kind::Aaa { "aaa" } else { "rmcp" };
    let mut child = tokio::process::Command::new(me)
        .args(["--serve-stdio", which])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("the server process starts");
    let (stdin, stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
    let client = ().serve((stdout, stdin)).await.expect("the client connects");
    (client, child)
}

/// What keeps an HTTP server alive while it is measured.
#[derive(Default)]
struct Held {
    _http: Option<HttpServer>,
    _worker: Option<HandlerHandle>,
    _task: Option<tokio::task::JoinHandle<()>>,
}

/// A client of `kind`'s server over Streamable HTTP (in this process).
async fn http_client(kind: Kind) -> (Client, Held) {
    let (url, held) = match kind {
        Kind::Aaa => {
            let (server, worker) = aaa_server().await;
            let http = HttpServer::start(server, HttpOptions::new(0))
                .await
                .expect("our server starts");
            let url = http.url();
            let held = Held {
                _http: Some(http),
                _worker: Some(worker),
                ..Held::default()
            };
            (url, held)
        }
        Kind::Rmcp => {
            let service = StreamableHttpService::new(
                || Ok(RmcpAdder::new()),
                LocalSessionManager::default().into(),
                StreamableHttpServerConfig::default(),
            );
            let router = axum::Router::new().route_service("/mcp", service);
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("a port");
            let url = format!("http://{}/mcp", listener.local_addr().unwrap());
            let task = tokio::spawn(async move {
                let _ = axum::serve(listener, router).await;
            });
            let held = Held {
                _task: Some(task),
                ..Held::default()
            };
            (url, held)
        }
    };
    // Where a workspace build turns on aaa-loop's `http` feature, reqwest is built with
    // rustls and no crypto provider: a client needs one, even for `http://`.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let transport = StreamableHttpClientTransport::from_uri(url);
    let client = ().serve(transport).await.expect("the client connects");
    (client, held)
}

fn arguments(i: i64) -> JsonObject {
    let mut object = JsonObject::new();
    object.insert("a".to_owned(), Value::from(i));
    object.insert("b".to_owned(), Value::from(1));
    object
}

/// The sum in a result: its structured content, or its text.
fn sum(result: &CallToolResult) -> i64 {
    if let Some(sum) = result.structured_content.as_ref().and_then(Value::as_i64) {
        return sum;
    }
    let text = &result.content[0].as_text().expect("a text block").text;
    text.parse().expect("a number")
}

async fn call(client: &Client, i: i64) -> i64 {
    let params = CallToolRequestParams::new("add").with_arguments(arguments(i));
    sum(&client.call_tool(params).await.expect("the call succeeds"))
}

async fn call_many(client: &Client, n: usize) {
    let calls = (0..n as i64).map(|i| call(client, i));
    black_box(futures::future::join_all(calls).await);
}

/// The mean time of one call at 1 in flight, over `ROUND`.
async fn latency(client: &Client) -> Duration {
    let start = Instant::now();
    let mut n = 0_u32;
    while start.elapsed() < ROUND {
        black_box(call(client, i64::from(n)).await);
        n += 1;
    }
    start.elapsed() / n
}

/// Calls per second at `IN_FLIGHT` in flight, over `ROUND`.
async fn throughput(client: &Client) -> f64 {
    let start = Instant::now();
    let mut n = 0_usize;
    while start.elapsed() < ROUND {
        call_many(client, IN_FLIGHT).await;
        n += IN_FLIGHT;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// One transport's measurements: criterion groups, then the summary row.
fn transport(
    criterion: &mut Criterion,
    runtime: &Runtime,
    name: &str,
    clients: &[(Kind, &Client)],
) -> String {
    for (kind, client) in clients {
        assert_eq!(
            runtime.block_on(call(client, 41)),
            42,
            "{} adds",
            kind.name()
        );
    }
    let mut group = criterion.benchmark_group(format!("{name}/1 in flight"));
    for (kind, client) in clients {
        group.bench_function(kind.name(), |b| {
            b.to_async(runtime).iter(|| call(client, 1));
        });
    }
    group.finish();
    let mut group = criterion.benchmark_group(format!("{name}/{IN_FLIGHT} in flight"));
    group.throughput(Throughput::Elements(IN_FLIGHT as u64));
    for (kind, client) in clients {
        group.bench_function(kind.name(), |b| {
            b.to_async(runtime).iter(|| call_many(client, IN_FLIGHT));
        });
    }
    group.finish();

    // The summary: both servers in alternating rounds, medians of the rounds.
    let (mut lat, mut thr) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
    for round in 0..ROUNDS {
        let order: Vec<usize> = if round % 2 == 0 {
            vec![0, 1]
        } else {
            vec![1, 0]
        };
        for i in order {
            let client = clients[i].1;
            lat[i].push(runtime.block_on(latency(client)).as_secs_f64() * 1e6);
            thr[i].push(runtime.block_on(throughput(client)));
        }
    }
    let (ours_lat, rmcp_lat) = (median(lat[0].clone()), median(lat[1].clone()));
    let (ours_thr, rmcp_thr) = (median(thr[0].clone()), median(thr[1].clone()));
    let lat_ratio = ours_lat / rmcp_lat;
    let thr_ratio = ours_thr / rmcp_thr;
    format!(
        "{name:<6} | {ours_lat:>9.1} µs | {rmcp_lat:>9.1} µs | {lat_ratio:>5.2}x {} | {ours_thr:>9.0}/s | {rmcp_thr:>9.0}/s | {thr_ratio:>5.2}x {}",
        if lat_ratio <= 1.2 {
            "(met)    "
        } else {
            "(MISSED) "
        },
        if thr_ratio >= 1.0 {
            "(met)"
        } else {
            "(MISSED)"
        },
    )
}

/// The engine alone, no MCP: our server's (aged) engine called in process, at 1 and
/// at [`IN_FLIGHT`] in flight, to show how much of our round trip is the engine's.
fn engine_alone(runtime: &Runtime) -> String {
    let (server, _worker) = runtime.block_on(aaa_server());
    let run = server.run().clone();
    let one = |i: i64| {
        let run = run.clone();
        async move {
            let outcome = run
                .call("add", serde_json::json!({"a": i, "b": 1}))
                .await
                .expect("the call");
            black_box(outcome);
        }
    };
    let (mut lat, mut thr) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        lat.push(runtime.block_on(async {
            let start = Instant::now();
            let mut n = 0_u32;
            while start.elapsed() < ROUND {
                one(i64::from(n)).await;
                n += 1;
            }
            start.elapsed().as_secs_f64() * 1e6 / f64::from(n)
        }));
        thr.push(runtime.block_on(async {
            let start = Instant::now();
            let mut n = 0_usize;
            while start.elapsed() < ROUND {
                futures::future::join_all((0..IN_FLIGHT as i64).map(one)).await;
                n += IN_FLIGHT;
            }
            n as f64 / start.elapsed().as_secs_f64()
        }));
    }
    format!(
        "engine alone (no MCP, in process): {:.1} µs at 1 in flight, {:.0} calls/s at {IN_FLIGHT}",
        median(lat),
        median(thr)
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--serve-stdio") {
        serve_stdio(args.get(at + 1).map(String::as_str).unwrap_or("aaa"));
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20)
        .configure_from_args();
    let mut rows = Vec::new();

    let (ours, _ours_child) = runtime.block_on(stdio_client(Kind::Aaa));
    let (theirs, _theirs_child) = runtime.block_on(stdio_client(Kind::Rmcp));
    rows.push(transport(
        &mut criterion,
        &runtime,
        "stdio",
        &[(Kind::Aaa, &ours), (Kind::Rmcp, &theirs)],
    ));
    drop((ours, theirs));

    let (ours, _ours_held) = runtime.block_on(http_client(Kind::Aaa));
    let (theirs, _theirs_held) = runtime.block_on(http_client(Kind::Rmcp));
    rows.push(transport(
        &mut criterion,
        &runtime,
        "http",
        &[(Kind::Aaa, &ours), (Kind::Rmcp, &theirs)],
    ));
    criterion.final_summary();
    let engine = engine_alone(&runtime);

    println!();
    println!(
        "tools/call round trip, aaa-mcp (engine, guard on) vs rmcp, medians of {ROUNDS} alternating rounds"
    );
    println!(
        "{:<6} | {:>12} | {:>12} | {:<15} | {:>11} | {:>11} | ratio at {IN_FLIGHT}",
        "", "aaa-mcp, 1", "rmcp, 1", "ratio (≤1.2)", "aaa-mcp", "rmcp"
    );
    for row in rows {
        println!("{row}");
    }
    println!("{engine}");
}
