//! Per-call latency and throughput of a trivial tool, `add(a, b)`, through five paths:
//!
//! 1. `direct`: the floor, decoding `{"a": .., "b": ..}` from a `serde_json::Value`
//!    into a struct and adding;
//! 2. `aaa-tool`: our `Tool::call` without the engine (schema validation and decode);
//! 3. `rmcp-router`: rmcp's `ToolRouter::call` in process, no messaging;
//! 4. `rmcp-duplex`: an rmcp client calling an rmcp server over `tokio::io::duplex`,
//!    request and result as messages;
//! 5. `engine`: our embedded engine end to end, from the request event to the
//!    completed fact awaited by the caller.
//!
//! Each is measured at 1 call in flight (latency) and at 64 in flight (throughput).
//! After the criterion groups, a summary measures every path again with a plain timed
//! loop, in rounds that alternate between the paths, and prints a table with the
//! engine's ratios against the others. The bench only
//! measures and prints; it never asserts a time.

use std::cell::Cell;
use std::hint::black_box;
use std::time::{Duration, Instant};

use aaa_tools::{
    Engine, HandlerHandle, RunHandle, Tool, ToolContext, ToolHandler, ToolRegistry, tools,
};
use criterion::{Criterion, Throughput};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, JsonObject, RequestId};
use rmcp::service::{RequestContext, RunningService};
use rmcp::{Peer, RoleClient, RoleServer, ServiceExt};
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio::runtime::Runtime;

/// Calls in flight for the throughput measurements.
const IN_FLIGHT: usize = 64;
/// Capacity of each direction of the in-memory duplex pipe.
const DUPLEX_BUFFER: usize = 64 * 1024;
/// How long the summary measures each path and mode, split into rounds.
const SUMMARY_ROUNDS: u32 = 9;
const SUMMARY_ROUND: Duration = Duration::from_millis(150);
/// How long a fresh subject runs before a summary round measures it.
const WARM_UP: Duration = Duration::from_millis(100);

/// Add two integers.
#[aaa_tools::tool]
async fn add(a: i64, b: i64) -> i64 {
    a + b
}

/// The arguments of `add`, for the direct call and for rmcp.
#[derive(Deserialize, schemars::JsonSchema)]
struct AddArgs {
    /// The first addend.
    a: i64,
    /// The second addend.
    b: i64,
}

/// The arguments of call `i`, as the JSON object a model would send.
fn arguments(i: i64) -> JsonObject {
    let mut object = Map::with_capacity(2);
    object.insert("a".to_owned(), Value::from(i));
    object.insert("b".to_owned(), Value::from(1));
    object
}

/// The rmcp server: one tool, `add`, on a router built once.
#[derive(Clone)]
struct RmcpAdder {
    tool_router: ToolRouter<Self>,
}

#[rmcp::tool_router]
impl RmcpAdder {
    fn new() -> Self {
        RmcpAdder {
            tool_router: Self::tool_router(),
        }
    }

    /// Add two integers.
    #[rmcp::tool]
    async fn add(&self, Parameters(AddArgs { a, b }): Parameters<AddArgs>) -> Json<i64> {
        Json(a + b)
    }
}

#[rmcp::tool_handler(router = self.tool_router)]
impl rmcp::ServerHandler for RmcpAdder {}

/// The integer result of an rmcp tool result: its structured content, or (for peers
/// that negotiated a protocol older than 2026-07-28, which get a non-object result only
/// as text) its text block.
fn rmcp_sum(result: &CallToolResult) -> i64 {
    if let Some(sum) = result.structured_content.as_ref().and_then(Value::as_i64) {
        return sum;
    }
    result
        .content
        .first()
        .and_then(|block| block.as_text())
        .and_then(|text| text.text.parse().ok())
        .expect("rmcp add returns an integer")
}

/// The paths under test.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Direct,
    AaaTool,
    RmcpRouter,
    RmcpDuplex,
    Engine,
    EngineUnguarded,
}

impl Kind {
    const ALL: [Kind; 6] = [
        Kind::Direct,
        Kind::AaaTool,
        Kind::RmcpRouter,
        Kind::RmcpDuplex,
        Kind::Engine,
        Kind::EngineUnguarded,
    ];

    fn name(self) -> &'static str {
        match self {
            Kind::Direct => "direct",
            Kind::AaaTool => "aaa-tool",
            Kind::RmcpRouter => "rmcp-router",
            Kind::RmcpDuplex => "rmcp-duplex",
            Kind::Engine => "engine",
            Kind::EngineUnguarded => "engine-no-guard",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Kind::Direct => "(1) direct serde decode + add",
            Kind::AaaTool => "(1b) aaa Tool::call (no engine)",
            Kind::RmcpRouter => "(2a) rmcp ToolRouter in process",
            Kind::RmcpDuplex => "(2b) rmcp client/server, duplex",
            Kind::Engine => "(3) aaa embedded engine",
            Kind::EngineUnguarded => "(3b) embedded engine, guard off",
        }
    }
}

/// One path, set up and ready to call.
enum Subject {
    Direct,
    AaaTool(Tool),
    RmcpRouter {
        server: RmcpAdder,
        peer: Peer<RoleServer>,
        // Owns the service the peer belongs to (its client side is inside).
        service: Box<RmcpPair>,
    },
    RmcpDuplex(Box<RmcpPair>),
    Engine {
        run: RunHandle,
        worker: HandlerHandle,
    },
}

/// An rmcp server and client connected by an in-memory duplex pipe.
struct RmcpPair {
    server: RunningService<RoleServer, RmcpAdder>,
    client: RunningService<RoleClient, ()>,
}

impl RmcpPair {
    async fn connect() -> RmcpPair {
        let (server_io, client_io) = tokio::io::duplex(DUPLEX_BUFFER);
        let (server, client) = tokio::join!(RmcpAdder::new().serve(server_io), ().serve(client_io));
        RmcpPair {
            server: server.expect("rmcp server starts"),
            client: client.expect("rmcp client connects"),
        }
    }

    async fn close(self) {
        let _ = self.client.cancel().await;
        let _ = self.server.cancel().await;
    }
}

impl Subject {
    async fn new(kind: Kind) -> Subject {
        match kind {
            Kind::Direct => Subject::Direct,
            Kind::AaaTool => Subject::AaaTool(add::tool()),
            Kind::RmcpRouter => {
                let service = RmcpPair::connect().await;
                Subject::RmcpRouter {
                    server: RmcpAdder::new(),
                    peer: service.server.peer().clone(),
                    service: Box::new(service),
                }
            }
            Kind::RmcpDuplex => Subject::RmcpDuplex(Box::new(RmcpPair::connect().await)),
            Kind::Engine | Kind::EngineUnguarded => {
                let engine = Engine::embedded();
                let guard = aaa_tools::GuardConfig::default().with_enabled(kind == Kind::Engine);
                let worker = ToolHandler::new(ToolRegistry::new(tools![add]).expect("registry"))
                    .pool("default", IN_FLIGHT)
                    .guard(guard)
                    .attach(&engine)
                    .await
                    .expect("handler attaches");
                Subject::Engine {
                    run: engine.new_run(),
                    worker,
                }
            }
        }
    }

    /// Calls `add(i, 1)` and returns the sum.
    async fn call(&self, i: i64) -> i64 {
        match self {
            Subject::Direct => {
                let AddArgs { a, b } =
                    serde_json::from_value(Value::Object(arguments(i))).expect("valid arguments");
                a + b
            }
            Subject::AaaTool(tool) => tool
                .call(ToolContext::builder().build(), Value::Object(arguments(i)))
                .await
                .expect("add succeeds")
                .as_i64()
                .expect("add returns an integer"),
            Subject::RmcpRouter { server, peer, .. } => {
                let params = CallToolRequestParams::new("add").with_arguments(arguments(i));
                let context = RequestContext::new(RequestId::Number(i), peer.clone());
                let response = server
                    .tool_router
                    .call(ToolCallContext::new(server, params, context))
                    .await
                    .expect("rmcp add succeeds");
                match response {
                    CallToolResponse::Complete(result) => rmcp_sum(&result),
                    _ => panic!("rmcp add completes at once"),
                }
            }
            Subject::RmcpDuplex(pair) => {
                let params = CallToolRequestParams::new("add").with_arguments(arguments(i));
                let result = pair
                    .client
                    .call_tool(params)
                    .await
                    .expect("rmcp call succeeds");
                rmcp_sum(&result)
            }
            Subject::Engine { run, .. } => run
                .call("add", Value::Object(arguments(i)))
                .await
                .expect("engine call")
                .result()
                .and_then(Value::as_i64)
                .expect("add completes with an integer"),
        }
    }

    /// Runs `IN_FLIGHT` calls at once, from `first` on, and returns the sum of sums.
    async fn batch(&self, first: i64) -> i64 {
        let calls = (first..first + IN_FLIGHT as i64).map(|i| self.call(i));
        futures::future::join_all(calls).await.into_iter().sum()
    }

    async fn close(self) {
        match self {
            Subject::Direct | Subject::AaaTool(_) => {}
            Subject::RmcpRouter { service, .. } => service.close().await,
            Subject::RmcpDuplex(pair) => pair.close().await,
            Subject::Engine { run, worker } => {
                drop(run);
                worker.shutdown(Duration::from_secs(5)).await;
            }
        }
    }
}

/// A runtime like a small deployment's: two worker threads (the machine's cores).
fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// The criterion groups: latency at 1 in flight, throughput at 64.
fn criterion_groups(c: &mut Criterion, rt: &Runtime) {
    let mut group = c.benchmark_group("dispatch/1_in_flight");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    for kind in Kind::ALL {
        let subject = rt.block_on(Subject::new(kind));
        let next = Cell::new(0_i64);
        let subject_ref = &subject;
        group.bench_function(kind.name(), |b| {
            b.to_async(rt).iter(|| {
                let i = next.get();
                next.set(i + 1);
                subject_ref.call(i)
            })
        });
        rt.block_on(subject.close());
    }
    group.finish();

    let mut group = c.benchmark_group("dispatch/64_in_flight");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2))
        .throughput(Throughput::Elements(IN_FLIGHT as u64));
    for kind in Kind::ALL {
        let subject = rt.block_on(Subject::new(kind));
        let next = Cell::new(0_i64);
        let subject_ref = &subject;
        group.bench_function(kind.name(), |b| {
            b.to_async(rt).iter(|| {
                let i = next.get();
                next.set(i + IN_FLIGHT as i64);
                subject_ref.batch(i)
            })
        });
        rt.block_on(subject.close());
    }
    group.finish();
}

/// Seconds per unit of work over one timed round of `length`.
fn timed_round(
    rt: &Runtime,
    subject: &Subject,
    batch: bool,
    next: &mut i64,
    length: Duration,
) -> f64 {
    rt.block_on(async {
        let mut step = async || {
            let i = *next;
            if batch {
                *next += IN_FLIGHT as i64;
                black_box(subject.batch(i).await);
            } else {
                *next += 1;
                black_box(subject.call(i).await);
            }
        };
        let start = Instant::now();
        let mut units = 0_u64;
        while start.elapsed() < length {
            for _ in 0..16 {
                step().await;
            }
            units += 16;
        }
        start.elapsed().as_secs_f64() / units as f64
    })
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// One row of the summary.
struct Figures {
    kind: Kind,
    /// Seconds per call, 1 in flight.
    latency: f64,
    /// Calls per second, 64 in flight.
    throughput: f64,
}

fn format_latency(seconds: f64) -> String {
    if seconds < 1e-6 {
        format!("{:.0} ns", seconds * 1e9)
    } else if seconds < 1e-3 {
        format!("{:.2} µs", seconds * 1e6)
    } else {
        format!("{:.2} ms", seconds * 1e3)
    }
}

fn format_rate(per_second: f64) -> String {
    if per_second >= 1e6 {
        format!("{:.2}M/s", per_second / 1e6)
    } else {
        format!("{:.1}k/s", per_second / 1e3)
    }
}

/// Measures every path with a plain timed loop and prints the table and the ratios.
/// The rounds alternate between the paths, so a slow spell of a shared machine falls on
/// every path alike instead of on whichever ran then. Every measurement gets a fresh
/// subject (an engine's log grows with every call, and a heap holding it slows every
/// path's allocations).
fn summary(rt: &Runtime) {
    let measure = |kind: Kind, batch: bool| {
        let subject = rt.block_on(Subject::new(kind));
        let mut next = 0_i64;
        // Warm the fresh subject up (connections, caches, the allocator) first.
        timed_round(rt, &subject, batch, &mut next, WARM_UP);
        let seconds = timed_round(rt, &subject, batch, &mut next, SUMMARY_ROUND);
        rt.block_on(subject.close());
        seconds
    };
    let mut latencies = vec![Vec::new(); Kind::ALL.len()];
    let mut per_batch = vec![Vec::new(); Kind::ALL.len()];
    // The first round warms up and is not counted.
    for round in 0..=SUMMARY_ROUNDS {
        for (i, &kind) in Kind::ALL.iter().enumerate() {
            let (latency, batch) = (measure(kind, false), measure(kind, true));
            if round > 0 {
                latencies[i].push(latency);
                per_batch[i].push(batch);
            }
        }
    }
    let rows: Vec<Figures> = Kind::ALL
        .iter()
        .enumerate()
        .map(|(i, &kind)| Figures {
            kind,
            latency: median(std::mem::take(&mut latencies[i])),
            throughput: IN_FLIGHT as f64 / median(std::mem::take(&mut per_batch[i])),
        })
        .collect();
    let figures = |kind: Kind| {
        rows.iter()
            .find(|row| row.kind == kind)
            .expect("every kind is measured")
    };

    println!();
    println!(
        "dispatch summary (median of {SUMMARY_ROUNDS} alternating rounds of {} ms each)",
        SUMMARY_ROUND.as_millis()
    );
    println!("{:<34} {:>14} {:>16}", "path", "latency @1", "calls/s @64");
    for row in &rows {
        println!(
            "{:<34} {:>14} {:>16}",
            row.kind.label(),
            format_latency(row.latency),
            format_rate(row.throughput)
        );
    }
    let engine = figures(Kind::Engine);
    println!();
    println!(
        "{:<34} {:>14} {:>16}",
        "engine vs", "latency ×", "throughput ×"
    );
    for kind in [
        Kind::Direct,
        Kind::AaaTool,
        Kind::RmcpRouter,
        Kind::RmcpDuplex,
    ] {
        let other = figures(kind);
        println!(
            "{:<34} {:>14.2} {:>16.3}",
            format!("engine/{}", kind.name()),
            engine.latency / other.latency,
            engine.throughput / other.throughput
        );
    }
    let unguarded = figures(Kind::EngineUnguarded);
    println!();
    println!(
        "guard cost: guarded/unguarded latency {:.2}×, throughput {:.2}× (target: throughput ≥ 0.70×)",
        engine.latency / unguarded.latency,
        engine.throughput / unguarded.throughput
    );
    let duplex = figures(Kind::RmcpDuplex);
    println!();
    println!(
        "targets vs rmcp-duplex: latency ≤ 0.50× (is {:.2}×), throughput ≥ 2.00× (is {:.2}×)",
        engine.latency / duplex.latency,
        engine.throughput / duplex.throughput
    );
}

/// Without `--bench` (as under `cargo test --benches`): check that every path adds.
fn smoke(rt: &Runtime) {
    for kind in Kind::ALL {
        let subject = rt.block_on(Subject::new(kind));
        assert_eq!(rt.block_on(subject.call(2)), 3, "{}", kind.name());
        let expected: i64 = (10..10 + IN_FLIGHT as i64).map(|i| i + 1).sum();
        assert_eq!(rt.block_on(subject.batch(10)), expected, "{}", kind.name());
        rt.block_on(subject.close());
    }
}

fn main() {
    let rt = runtime();
    let args: Vec<String> = std::env::args().collect();
    let benchmarking = args.iter().any(|arg| arg == "--bench");
    // `--profile-time` runs the chosen benches for a profiler: no summary then.
    let profiling = args.iter().any(|arg| arg.starts_with("--profile-time"));
    let mut criterion = Criterion::default().configure_from_args();
    criterion_groups(&mut criterion, &rt);
    criterion.final_summary();
    if !benchmarking {
        smoke(&rt);
    } else if !profiling {
        summary(&rt);
    }
}
