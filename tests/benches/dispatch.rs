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
//! engine's ratios against the others. The bench only measures and prints; it never
//! asserts a time.
//!
//! ## Where the caller runs
//!
//! The paths that send messages (rmcp duplex, the engine) hand each call to tasks on
//! the runtime and wait for the answer, so their latency depends on where the caller
//! itself runs ([`Caller`]):
//!
//! - **as a task on the runtime**, as an agent loop does when it is spawned or serves
//!   a request: a hand-off between tasks on one worker costs no thread wake-up. The
//!   criterion groups, the summary's main columns and the targets use this placement.
//! - **outside the runtime**, in `Runtime::block_on` (synchronous code, or the body of
//!   `#[tokio::main]`): every call then wakes a worker thread and is woken back, and
//!   on a virtual machine where a wake-up costs tens of microseconds this fixed cost
//!   is most of the latency of both messaging paths. The summary prints these figures
//!   too, with the same ratio against rmcp duplex.
//!
//! ## A long-running engine, not a young one
//!
//! A young engine is faster than one that has run for a while: until its log and its
//! store reach their retention limits (100 000 messages, 100 000 settled calls), a
//! call frees nothing, whereas a long-running engine's every call frees state written
//! tens of thousands of calls before, in memory no cache holds any more. And reaching
//! the limits is not yet the steady state: on some two-core virtual machines the
//! guarded engine kept slowing down for several hundred thousand calls after that
//! (from about 85k to about 60k calls/s over its first 400 000 calls), as the memory
//! it frees and reuses spreads out; on others it hardly slows at all. rmcp's paths
//! keep no state per call and do not age.
//!
//! A deployment's engine is a long-running one, so that is what this bench measures.
//! Before its first measurement each engine makes [`AGE_CALLS`] calls, in
//! [`AGE_STAGES`] stages ([`Subject::age`]), which takes its log and its store to
//! their limits and well past them. The summary prints each stage's throughput, so a
//! reader sees whether the engine had stopped slowing down before it was measured.
//! The summary builds, ages and closes a subject for each of its rounds, measures it
//! in every mode within that round, and closes it before the next path's turn, so one
//! path never runs beside another's state: rmcp's calls do not pay for an aged
//! engine's heap.
//!
//! ## What the history costs
//!
//! `DISPATCH_KEEP_LOG=N` and `DISPATCH_KEEP_STORE=N` in the environment make every
//! engine of a run keep `N` messages, or `N` settled calls' records, instead of the
//! defaults (the summary's second line says what was kept). They tell what an aged
//! engine pays for its history from what its calls cost. One sitting on a 2-core
//! virtual machine, the runs interleaved; the guarded engine at 64 in flight, the
//! caller a task, and its ratio to rmcp's client/server over a duplex in the same run:
//!
//! | kept: messages / settled calls | calls/s | ratio |
//! |---|---|---|
//! | 100 000 / 100 000 (the defaults) | 57.4k, 52.9k | 1.72, 1.50 |
//! | 1 000 / 100 000 | 85.7k, 78.0k, 86.2k, 80.8k | 2.24, 2.01, 2.27, 2.65 |
//! | 100 000 / 1 000 | 69.1k, 59.9k, 61.5k, 65.6k | 2.17, 1.83, 1.87, 1.74 |
//! | 1 000 / 1 000 | 90.5k, 93.0k, 96.8k | 2.48, 2.80, 2.69 |
//!
//! With both bounded the guarded engine does not age (about 98k calls/s over its
//! first 100 000 calls, 95k over its fourth), and the unguarded one, with a short
//! log, ran at 118k to 165k calls/s against 81k to 101k with the default log. So some
//! two fifths of an aged guarded engine's time went to its history, mostly the log's:
//! each call leaves about a dozen allocations behind (its request and arguments, its
//! facts, its outcome's subject, its record), and frees as many that calls 100 000
//! calls before left, in memory no cache holds any more.
//!
//! The cost is in the memory a call writes, not in the freeing. Counted with
//! valgrind's dhat at the peak of 150 000 guarded calls (`per_call --calls 150000`),
//! a call leaves about 1.5 KB in the log (its request, 350 bytes, with its
//! arguments, 310; its attempt and outcome facts, 320 and 350; its outcome's subject,
//! 120) and about 0.7 KB in the store (its record's JSON, 320, its key, 100, and its
//! slot). In an experiment, not kept, the log leaked the messages it trims instead of
//! freeing them: `per_call --calls 400000 --guard on --threads 2`, interleaved, ran at
//! 87.8k, 85.6k and 83.9k calls/s leaking against 76.1k, 94.8k and 79.4k freeing. So
//! freeing later, in batches or on another thread, buys nothing (batches were tried
//! too); only writing less a call, or reusing memory sooner (a shorter history), does.
//!
//! Profiled, the same: `perf record -e cpu-clock` on `per_call --bench --calls
//! 400000 --guard on` (one thread) took 5.58 s with the defaults and 4.84 s with
//! `--keep 1000`. Of the aged run's 1 440 extra samples, some 760 were glibc's
//! allocator on memory freed cold (`unlink_chunk`, coalescing a freed chunk with its
//! cold neighbours, 301; `cfree` 164; `malloc_consolidate` 129; `_int_malloc` 118),
//! about 300 the store forgetting settled calls, 148 the de-duplication ring and about
//! 300 dropping the payloads the log trims. The summary's aging lines agree: the
//! guarded engine slows when its store starts forgetting (from about 90k to about 70k
//! calls/s between its first and second 100 000 calls), while the unguarded one,
//! which keeps no records, does not slow at all (about 100k throughout).
//!
//! The allocator, then: the same summary with jemalloc or mimalloc in glibc's place
//! (Debian's `libjemalloc2` and `libmimalloc2.0`, by `LD_PRELOAD`, which stands in
//! for a `#[global_allocator]`), two runs each, interleaved, on one afternoon:
//!
//! | allocator | guarded engine, calls/s | over its first 400 000 calls | rmcp duplex | ratio |
//! |---|---|---|---|---|
//! | glibc | 68.3k, 63.7k | 88.9k → 63.7k, 88.6k → 63.6k | 34.2k, 33.3k | 2.00, 1.91 |
//! | jemalloc | 82.3k, 78.0k | 87.3k → 82.5k, 80.2k → 82.8k | 44.4k, 45.3k | 1.85, 1.72 |
//! | mimalloc | 92.1k, 74.8k | 80.1k → 87.3k, 78.4k → 85.5k | 46.5k, 42.2k | 1.98, 1.77 |
//!
//! Either one keeps a long-running engine from slowing with age and makes it 15 to
//! 25 % faster, but rmcp's client/server, which allocates as much and keeps nothing,
//! gains more (about 30 %): the ratio is no better. So the README advises such an
//! allocator for a long-running engine, and this bench keeps glibc's, the default a
//! user starts with.
//!
//! ## Against older code, in the same sitting
//!
//! A figure from another day says little on this machine, so older versions of this
//! bench were built from their commits and run alternately with this one, on an idle
//! 2-core virtual machine, the caller a task: d404d6e (before the wire checks, the
//! per-tenant outcome listener and cancels landed, and before the embedded bus was
//! split by job and the NATS backend moved out), seven summaries against seven of
//! this one's; then 14262b1 (the listener in, the bus not yet split), three against
//! three more. Each summary alone, as `<binary> --bench zzz_none` run from `tests/`
//! (the filter matches no criterion group):
//!
//! ```text
//! git worktree add ../older d404d6e && cd ../older
//! cargo bench -p aaa-tests --bench dispatch --no-run   # prints the binary's path
//! ```
//!
//! | code | guarded engine @64 | rmcp duplex @64 | ratio | unguarded @64 | latency @1 |
//! |---|---|---|---|---|---|
//! | d404d6e | 72.6k (56.7k–84.7k) | 32.8k | 2.31 (1.73–2.47) | 110.1k | 24.9 µs |
//! | 14262b1 | 54.3k (53.7k–62.2k) | 31.5k | 1.76 (1.70–1.87) | 80.0k | 29.6 µs |
//! | this | 72.0k (59.4k–82.2k) | 33.0k | 2.17 (1.80–2.51) | 95.2k | 33.6 µs |
//!
//! (Medians, this one's over its ten summaries, with the range where it matters; a
//! ratio is a summary's own, its two figures measured within one round.) Against
//! d404d6e the guarded engine's throughput is the same and the ratios are not told
//! apart by seven runs each (the older code's exceeds the newer's in 30 of the 49
//! pairs); both fall under 2 now and then. 14262b1 was under 2 in each of its three
//! summaries, and this one over it in each of the three paired with them (1.80 against
//! 1.70, 2.26 against 1.76, 2.42 against 1.87). The unguarded engine lost about an
//! eighth since d404d6e and a call at one in flight waits about a third longer, still
//! 0.28 to 0.42 of rmcp's.
//!
//! Instructions a call, counted as `per_call` says (guard on, 9 600 calls less
//! 3 200), follow the history: 36 056 at d404d6e; 39 136 with the wire checks
//! (f85e36e); 38 445 with the API's refusals (5bb9466); 50 653 once outcomes were
//! awaited through a listener per tenant, each on a subject of its call's own
//! (440ee46), which lets a NATS server hold ten thousand runs; 49 289 with the
//! embedded bus split by job (c226e7f) and 50 432 with its hand-built structures
//! replaced (bf6c55c); 44 131 after the work on publishes and outcome subjects
//! (0edfc35); 45 482 now. A call costs a quarter more instructions than at
//! d404d6e, and the same wall time at 64 in flight: what a call keeps in memory (see
//! above), not what it executes, sets that figure.
use std::cell::Cell;
use std::hint::black_box;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use aaa_tests::History;
use aaa_tools::bus::MemoryBus;
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
/// How long the summary runs each mode of an (aged) subject before measuring it.
const WARM_UP: Duration = Duration::from_millis(100);
/// The calls an engine makes before it is measured: four times as many as its store
/// keeps settled calls (its log, three messages a call, is at its limit by the first
/// quarter), so everything it keeps has been freed and written again several times.
const AGE_CALLS: i64 = 400_000;
/// The stages of [`AGE_CALLS`] whose throughput [`Subject::age`] reports.
const AGE_STAGES: usize = 4;

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

/// `add(i, 1)` decoded from a `serde_json::Value` and added: the floor.
fn direct_add(i: i64) -> i64 {
    let AddArgs { a, b } =
        serde_json::from_value(Value::Object(arguments(i))).expect("valid arguments");
    a + b
}

/// `add(i, 1)` through our `Tool::call`.
async fn tool_add(tool: &Tool, i: i64) -> i64 {
    tool.call(ToolContext::builder().build(), Value::Object(arguments(i)))
        .await
        .expect("add succeeds")
        .as_i64()
        .expect("add returns an integer")
}

/// `add(i, 1)` through rmcp's router, in process.
async fn router_add(server: &RmcpAdder, peer: &Peer<RoleServer>, i: i64) -> i64 {
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

/// `add(i, 1)` from an rmcp client to an rmcp server over the duplex pipe.
async fn duplex_add(pair: &RmcpPair, i: i64) -> i64 {
    let params = CallToolRequestParams::new("add").with_arguments(arguments(i));
    let result = pair
        .client
        .call_tool(params)
        .await
        .expect("rmcp call succeeds");
    rmcp_sum(&result)
}

/// `add(i, 1)` through our embedded engine, end to end.
async fn engine_add(run: &RunHandle, i: i64) -> i64 {
    run.call("add", Value::Object(arguments(i)))
        .await
        .expect("engine call")
        .result()
        .and_then(Value::as_i64)
        .expect("add completes with an integer")
}

/// Evaluates `$body` with `$call` bound to the subject's own call: a closure from `i`
/// to the future of `add(i, 1)` on that path.
///
/// Each path's future has its own type and size, and every loop that makes calls is
/// generic over it. A single `async fn` matching on the subject would have one future
/// type for all paths, as large as the largest (rmcp's client call, about 5 KB, against
/// 0.5 KB for the engine's), and every path would pay for copying and allocating that
/// much per call in flight.
macro_rules! with_call {
    ($subject:expr, |$call:ident| $body:expr) => {
        match $subject {
            Subject::Direct => {
                let $call = |i| std::future::ready(direct_add(i));
                $body
            }
            Subject::AaaTool(tool) => {
                let $call = move |i| tool_add(tool, i);
                $body
            }
            Subject::RmcpRouter { server, peer, .. } => {
                let $call = move |i| router_add(server, peer, i);
                $body
            }
            Subject::RmcpDuplex(pair) => {
                let $call = move |i| duplex_add(pair, i);
                $body
            }
            Subject::Engine { run, .. } => {
                let $call = move |i| engine_add(run, i);
                $body
            }
        }
    };
}

/// Runs `IN_FLIGHT` of `call`s at once, from `first` on, and returns the sum of sums.
async fn batch_of<F: Future<Output = i64>>(call: &impl Fn(i64) -> F, first: i64) -> i64 {
    let calls = (first..first + IN_FLIGHT as i64).map(call);
    futures::future::join_all(calls).await.into_iter().sum()
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
        /// The engine's bus, to see when its log is full.
        bus: MemoryBus,
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
                let history = history();
                let bus = history.bus();
                let engine = Engine::new(bus.clone(), history.store());
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
                    bus,
                }
            }
        }
    }

    /// Brings an engine to the steady state of a long-running one: [`AGE_CALLS`] calls,
    /// and its log at its retention limit. Returns the throughput of each of the
    /// [`AGE_STAGES`] stages (calls per second), empty for the other paths, which keep
    /// no state per call, so there is nothing to age.
    async fn age(&self) -> Vec<f64> {
        let Subject::Engine { bus, .. } = self else {
            return Vec::new();
        };
        let stage = AGE_CALLS / AGE_STAGES as i64;
        let mut rates = Vec::with_capacity(AGE_STAGES);
        let mut first = 0;
        for n in 1..=AGE_STAGES {
            // The last stage also runs until the log is full.
            let log_to_fill = n == AGE_STAGES;
            let (start, from) = (Instant::now(), first);
            while first < n as i64 * stage
                || (log_to_fill && bus.len() < bus.retention().max_messages())
            {
                black_box(self.batch(first).await);
                first += IN_FLIGHT as i64;
            }
            rates.push((first - from) as f64 / start.elapsed().as_secs_f64());
        }
        rates
    }

    /// Calls `add(i, 1)` and returns the sum.
    async fn call(&self, i: i64) -> i64 {
        with_call!(self, |call| call(i).await)
    }

    /// Runs `IN_FLIGHT` calls at once, from `first` on, and returns the sum of sums.
    async fn batch(&self, first: i64) -> i64 {
        with_call!(self, |call| batch_of(&call, first).await)
    }

    async fn close(self) {
        match self {
            Subject::Direct | Subject::AaaTool(_) => {}
            Subject::RmcpRouter { service, .. } => service.close().await,
            Subject::RmcpDuplex(pair) => pair.close().await,
            Subject::Engine { run, worker, .. } => {
                drop(run);
                worker.shutdown(Duration::from_secs(5)).await;
            }
        }
    }
}

/// The history every engine of this run keeps: the library's defaults, unless the
/// environment's `DISPATCH_KEEP_LOG` or `DISPATCH_KEEP_STORE` bound one (see the module
/// docs). Read from the environment because criterion refuses arguments it does not
/// know.
fn history() -> History {
    static HISTORY: OnceLock<History> = OnceLock::new();
    *HISTORY.get_or_init(|| {
        let bound = |name: &str| {
            let value = std::env::var(name).ok()?;
            Some(
                value
                    .parse()
                    .unwrap_or_else(|_| panic!("{name} is a number, not {value:?}")),
            )
        };
        History::bounded(bound("DISPATCH_KEEP_LOG"), bound("DISPATCH_KEEP_STORE"))
    })
}

/// A runtime like a small deployment's: two worker threads (the machine's cores).
fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Where the measuring loop runs: see the module docs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Caller {
    /// A task spawned on the runtime, like an agent loop.
    Task,
    /// `Runtime::block_on` on a thread outside the runtime.
    Outside,
}

/// How long a timed loop runs.
#[derive(Clone, Copy)]
enum Span {
    /// This many calls (or batches).
    Rounds(u64),
    /// Chunks of 16 calls (or batches) until this much time has passed.
    AtLeast(Duration),
}

/// The calls one round makes: one, or a batch of `IN_FLIGHT`.
fn calls_per_round(batch: bool) -> i64 {
    if batch { IN_FLIGHT as i64 } else { 1 }
}

/// Makes calls (or batches of `IN_FLIGHT`, with `batch`) one after another from `first`
/// on, for `span`, from where `caller` says; returns the time they took and how many.
fn timed_calls(
    rt: &Runtime,
    subject: &Arc<Subject>,
    caller: Caller,
    batch: bool,
    first: i64,
    span: Span,
) -> (Duration, u64) {
    let subject = subject.clone();
    let calls =
        async move { with_call!(&*subject, |call| rounds(&call, batch, first, span).await) };
    match caller {
        Caller::Task => rt.block_on(async { tokio::spawn(calls).await.expect("calls") }),
        Caller::Outside => rt.block_on(calls),
    }
}

/// Makes `call`s (or batches of `IN_FLIGHT`, with `batch`) one after another from
/// `first` on, for `span`; returns the time they took and how many.
async fn rounds<F: Future<Output = i64>>(
    call: &impl Fn(i64) -> F,
    batch: bool,
    first: i64,
    span: Span,
) -> (Duration, u64) {
    let step = calls_per_round(batch);
    let mut next = first;
    let mut one = async || {
        let i = next;
        next += step;
        if batch {
            black_box(batch_of(call, i).await);
        } else {
            black_box(call(i).await);
        }
    };
    let start = Instant::now();
    match span {
        Span::Rounds(rounds) => {
            for _ in 0..rounds {
                one().await;
            }
            (start.elapsed(), rounds)
        }
        Span::AtLeast(length) => {
            let mut rounds = 0;
            while start.elapsed() < length {
                for _ in 0..16 {
                    one().await;
                }
                rounds += 16;
            }
            (start.elapsed(), rounds)
        }
    }
}

/// The criterion groups: latency at 1 in flight, throughput at 64, the caller a task.
/// With `age`, each engine is aged first ([`Subject::age`]); criterion's test mode
/// (`cargo test --benches`) only checks that each path runs.
fn criterion_groups(c: &mut Criterion, rt: &Runtime, age: bool) {
    for batch in [false, true] {
        let mut group = if batch {
            let mut group = c.benchmark_group("dispatch/64_in_flight");
            group
                .measurement_time(Duration::from_secs(2))
                .throughput(Throughput::Elements(IN_FLIGHT as u64));
            group
        } else {
            let mut group = c.benchmark_group("dispatch/1_in_flight");
            group.measurement_time(Duration::from_secs(1));
            group
        };
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(300));
        for kind in Kind::ALL {
            let subject = Arc::new(rt.block_on(Subject::new(kind)));
            let next = Cell::new(0_i64);
            // Aged at its first use, so a bench the command line filters out costs
            // nothing. Aged before `iter_custom`, whose wall clock criterion's warm-up
            // reads: aged inside, the engine's first iteration seemed to take seconds,
            // and criterion measured it by ten lone rounds of 64 calls, each starting
            // from idle workers.
            let aged = Cell::new(!age);
            group.bench_function(kind.name(), |b| {
                if !aged.replace(true) {
                    age_as_task(rt, &subject);
                }
                b.iter_custom(|rounds| {
                    let first = next.get();
                    next.set(first + rounds as i64 * calls_per_round(batch));
                    timed_calls(
                        rt,
                        &subject,
                        Caller::Task,
                        batch,
                        first,
                        Span::Rounds(rounds),
                    )
                    .0
                })
            });
            close(rt, subject);
        }
        group.finish();
    }
}

/// Ages `subject` ([`Subject::age`]), the caller a task on the runtime as in the
/// measurements that follow; returns each stage's throughput.
fn age_as_task(rt: &Runtime, subject: &Arc<Subject>) -> Vec<f64> {
    let subject = subject.clone();
    rt.block_on(async { tokio::spawn(async move { subject.age().await }).await })
        .expect("aging")
}

/// Closes a subject no round holds any more.
fn close(rt: &Runtime, subject: Arc<Subject>) {
    let subject = Arc::into_inner(subject).expect("no round holds the subject");
    rt.block_on(subject.close());
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// What the summary measures of a path, from one caller placement.
#[derive(Clone, Copy, Default)]
struct Figures {
    /// Seconds per call, 1 in flight.
    latency: f64,
    /// Calls per second, 64 in flight.
    throughput: f64,
}

/// One row of the summary.
struct Row {
    kind: Kind,
    /// The caller a task on the runtime.
    task: Figures,
    /// The caller outside the runtime, in `block_on`.
    outside: Figures,
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
/// every path alike instead of on whichever ran then. Each round gets a fresh subject
/// per path, aged as the criterion groups age theirs ([`Subject::age`]), measures it in
/// every mode and closes it before the next path's turn: an aged engine's heap would
/// slow every other path's allocations.
fn summary(rt: &Runtime) {
    // Measures one mode from call `first` on; returns seconds per call (or per batch)
    // and the next call's index.
    let measure = |subject: &Arc<Subject>, caller: Caller, batch: bool, first: i64| {
        // Warm the mode up (connections, caches, the allocator) first.
        let (_, warm) = timed_calls(rt, subject, caller, batch, first, Span::AtLeast(WARM_UP));
        let first = first + warm as i64 * calls_per_round(batch);
        let span = Span::AtLeast(SUMMARY_ROUND);
        let (elapsed, rounds) = timed_calls(rt, subject, caller, batch, first, span);
        let next = first + rounds as i64 * calls_per_round(batch);
        (elapsed.as_secs_f64() / rounds as f64, next)
    };
    // Per path and placement: seconds per call, and per batch, one entry per round.
    let mut samples = vec![[(); 4].map(|()| Vec::new()); Kind::ALL.len()];
    // Per path and aging stage: calls per second, one entry per round.
    let mut aging = vec![vec![Vec::new(); AGE_STAGES]; Kind::ALL.len()];
    let modes = [
        (Caller::Task, false),
        (Caller::Task, true),
        (Caller::Outside, false),
        (Caller::Outside, true),
    ];
    // The first round warms up and is not counted.
    for round in 0..=SUMMARY_ROUNDS {
        for (i, &kind) in Kind::ALL.iter().enumerate() {
            let subject = Arc::new(rt.block_on(Subject::new(kind)));
            let rates = age_as_task(rt, &subject);
            let mut next = AGE_CALLS;
            for (m, &(caller, batch)) in modes.iter().enumerate() {
                let (seconds, after) = measure(&subject, caller, batch, next);
                next = after;
                if round > 0 {
                    samples[i][m].push(seconds);
                }
            }
            close(rt, subject);
            if round > 0 {
                for (stage, rate) in rates.into_iter().enumerate() {
                    aging[i][stage].push(rate);
                }
            }
        }
    }
    let rows: Vec<Row> = Kind::ALL
        .iter()
        .zip(samples)
        .map(|(&kind, [call, batch, call_outside, batch_outside])| Row {
            kind,
            task: Figures {
                latency: median(call),
                throughput: IN_FLIGHT as f64 / median(batch),
            },
            outside: Figures {
                latency: median(call_outside),
                throughput: IN_FLIGHT as f64 / median(batch_outside),
            },
        })
        .collect();
    let row = |kind: Kind| {
        rows.iter()
            .find(|row| row.kind == kind)
            .expect("every kind is measured")
    };

    println!();
    println!(
        "dispatch summary (median of {SUMMARY_ROUNDS} alternating rounds of {} ms each; engines aged by {}k calls)",
        SUMMARY_ROUND.as_millis(),
        AGE_CALLS / 1000
    );
    let history = history();
    println!(
        "engines keep {} messages and {} settled calls ({})",
        history.messages,
        history.settled_calls,
        if history == History::defaults() {
            "the defaults"
        } else {
            "DISPATCH_KEEP_LOG / DISPATCH_KEEP_STORE"
        }
    );
    println!(
        "{:<34} {:>31} {:>31}",
        "", "caller a task on the runtime", "caller outside (block_on)"
    );
    println!(
        "{:<34} {:>14} {:>16} {:>14} {:>16}",
        "path", "latency @1", "calls/s @64", "latency @1", "calls/s @64"
    );
    for row in &rows {
        println!(
            "{:<34} {:>14} {:>16} {:>14} {:>16}",
            row.kind.label(),
            format_latency(row.task.latency),
            format_rate(row.task.throughput),
            format_latency(row.outside.latency),
            format_rate(row.outside.throughput)
        );
    }
    println!();
    println!(
        "aging, the caller a task, 64 in flight: calls/s over each {}k of the first {}k calls (medians)",
        AGE_CALLS / AGE_STAGES as i64 / 1000,
        AGE_CALLS / 1000
    );
    for (&kind, stages) in Kind::ALL.iter().zip(aging) {
        if stages.iter().all(Vec::is_empty) {
            continue;
        }
        let rates: Vec<String> = stages
            .into_iter()
            .map(|rates| format_rate(median(rates)))
            .collect();
        println!("{:<34} {}", kind.label(), rates.join(" → "));
    }
    let engine = row(Kind::Engine);
    println!();
    println!(
        "{:<34} {:>14} {:>16} {:>14} {:>16}",
        "engine vs", "latency ×", "throughput ×", "latency ×", "throughput ×"
    );
    for kind in [
        Kind::Direct,
        Kind::AaaTool,
        Kind::RmcpRouter,
        Kind::RmcpDuplex,
    ] {
        let other = row(kind);
        println!(
            "{:<34} {:>14.2} {:>16.3} {:>14.2} {:>16.3}",
            format!("engine/{}", kind.name()),
            engine.task.latency / other.task.latency,
            engine.task.throughput / other.task.throughput,
            engine.outside.latency / other.outside.latency,
            engine.outside.throughput / other.outside.throughput
        );
    }
    let unguarded = row(Kind::EngineUnguarded);
    println!();
    println!(
        "guard cost, guarded/unguarded (target: throughput ≥ 0.70×): the caller a task: latency {:.2}×, throughput {:.2}×; from outside: latency {:.2}×, throughput {:.2}×",
        engine.task.latency / unguarded.task.latency,
        engine.task.throughput / unguarded.task.throughput,
        engine.outside.latency / unguarded.outside.latency,
        engine.outside.throughput / unguarded.outside.throughput
    );
    let duplex = row(Kind::RmcpDuplex);
    println!();
    println!(
        "targets vs rmcp-duplex, the caller a task: latency ≤ 0.50× (is {:.2}×), throughput ≥ 2.00× (is {:.2}×)",
        engine.task.latency / duplex.task.latency,
        engine.task.throughput / duplex.task.throughput
    );
    println!(
        "the same from outside the runtime: latency {:.2}×, throughput {:.2}× (each call also pays two thread wake-ups)",
        engine.outside.latency / duplex.outside.latency,
        engine.outside.throughput / duplex.outside.throughput
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
    criterion_groups(&mut criterion, &rt, benchmarking);
    criterion.final_summary();
    if !benchmarking {
        smoke(&rt);
    } else if !profiling {
        summary(&rt);
    }
}
