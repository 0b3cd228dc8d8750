//! Guarded calls on NATS JetStream against the least a durable call costs on the same
//! server, and how fast a killed worker's call is taken over.
//!
//! - `raw/C`: C tasks, each looping over publish request (awaiting the server's ack),
//!   take a message from a durable pull consumer's prefetching stream, publish a result
//!   (awaiting its ack), ack the request (fire and forget): the least a durable call
//!   costs.
//! - `guarded/C`: C worker engines (one connection each) serving `add(a, b)` with the
//!   guard on, and a client keeping C calls in flight (request event to completed fact).
//! - `unguarded/1`: the same with the guard off, one worker (what the guard itself
//!   costs on top of the engine's messages).
//!
//! The summary prints calls/s and the ratio guarded/raw at C = 1 and 4 (target: at
//! least 0.50), then the takeover latency after SIGKILL of the worker process running a
//! call (p50/p99 over several kills, target: p99 within `lease_ttl_s + wait_poll_s +
//! 250 ms`). It starts its own `nats-server` (`AAA_NATS_SERVER` or `PATH`), measures
//! and prints; it never asserts a time. Without `--bench` it only checks that both paths
//! work (and skips when no server is found).

use std::path::Path;
use std::time::{Duration, Instant};

use aaa_tests::{Ledger, NatsServer, RawJetStream, WorkerProcess, WorkerSettings};
use aaa_tools::event::{self, AttemptFact, Event};
use aaa_tools::{Engine, HandlerHandle, RunHandle, ToolHandler, ToolRegistry, tools};
use aaa_tools_nats::NatsOptions;
use criterion::Criterion;
use futures::StreamExt;
use serde_json::json;
use tokio::runtime::Runtime;

/// Add two integers.
#[aaa_tools::tool]
async fn add(a: i64, b: i64) -> i64 {
    a + b
}

const SUMMARY: Duration = Duration::from_secs(6);
const ROUNDS: u32 = 5;

fn median(rates: &mut [f64]) -> f64 {
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}
const KILLS: usize = 10;

/// `workers` worker engines and a client.
struct Guarded {
    run: RunHandle,
    _workers: Vec<(Engine, HandlerHandle)>,
}

impl Guarded {
    async fn new(url: &str, workers: usize) -> Guarded {
        Self::with_guard(url, workers, true).await
    }

    async fn with_guard(url: &str, workers: usize, guard: bool) -> Guarded {
        let options = NatsOptions::new(url);
        let mut handles = Vec::new();
        for _ in 0..workers {
            let engine = options.connect().await.expect("worker connects");
            let registry = ToolRegistry::new(tools![add]).expect("registry");
            let mut config = aaa_tools::GuardConfig::default();
            config.enabled = guard;
            let handle = ToolHandler::new(registry)
                .guard(config)
                .attach(&engine)
                .await
                .expect("attach");
            handles.push((engine, handle));
        }
        let client = options.connect().await.expect("client connects");
        Guarded {
            run: client.new_run(),
            _workers: handles,
        }
    }

    async fn one(&self, i: u64) {
        let outcome = self
            .run
            .call("add", json!({"a": i, "b": 1}))
            .await
            .expect("call");
        assert_eq!(outcome.result(), Some(&json!(i + 1)));
    }
}

/// Runs `concurrency` loops of `one` for `duration`; calls per second.
async fn rate<F, Fut>(concurrency: usize, duration: Duration, one: F) -> f64
where
    F: Fn(u64) -> Fut + Clone,
    Fut: std::future::Future<Output = ()>,
{
    let start = Instant::now();
    let loops = (0..concurrency).map(|t| {
        let one = one.clone();
        async move {
            let mut done = 0u64;
            while start.elapsed() < duration {
                one(t as u64 * 1_000_000 + done).await;
                done += 1;
            }
            done
        }
    });
    let total: u64 = futures::future::join_all(loops).await.into_iter().sum();
    total as f64 / start.elapsed().as_secs_f64()
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// Benches `in_flight` calls of `one` at once per iteration, as `name`.
fn bench_calls<F, Fut>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    rt: &Runtime,
    name: &str,
    in_flight: u64,
    one: F,
) where
    F: Fn(u64) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    group.bench_function(name, |b| {
        let mut i = 0;
        b.iter(|| {
            i += in_flight;
            rt.block_on(futures::future::join_all(
                (0..in_flight).map(|k| one(i + k)),
            ))
        })
    });
}

fn criterion_groups(c: &mut Criterion, rt: &Runtime, url: &str) {
    let mut group = c.benchmark_group("nats");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    // Every engine serves the one requests consumer: each bench starts its own workers
    // and stops them before the next, so no bench's calls run on another's workers.
    let raw = rt.block_on(RawJetStream::new(url, 1000));
    bench_calls(&mut group, rt, "raw/1", 1, |i| raw.one(i));
    let guarded = rt.block_on(Guarded::new(url, 1));
    bench_calls(&mut group, rt, "guarded/1", 1, |i| guarded.one(i));
    drop(guarded);
    let unguarded = rt.block_on(Guarded::with_guard(url, 1, false));
    bench_calls(&mut group, rt, "unguarded/1", 1, |i| unguarded.one(i));
    drop(unguarded);
    bench_calls(&mut group, rt, "raw/4", 4, |i| raw.one(i));
    let guarded = rt.block_on(Guarded::new(url, 4));
    bench_calls(&mut group, rt, "guarded/4", 4, |i| guarded.one(i));
    drop(guarded);
    group.finish();
}

/// Kills the worker running a call, `KILLS` times; the latencies from the kill to the
/// successor's `attempt_started`.
async fn takeover(url: &str, settings: &WorkerSettings) -> Vec<Duration> {
    let binary = Path::new(env!("CARGO_BIN_EXE_aaa-test-worker"));
    let ledger = Ledger::new();
    let client = NatsOptions::new(url).connect().await.expect("client");
    let mut workers = vec![
        WorkerProcess::spawn(binary, url, &ledger, settings).await,
        WorkerProcess::spawn(binary, url, &ledger, settings).await,
    ];
    let mut latencies = Vec::new();
    for k in 0..KILLS {
        let run = client.new_run();
        let mut facts = run.facts().await.expect("facts");
        let call = run
            .request("work", json!({"ms": 30_000, "tag": format!("t{k}")}))
            .await
            .expect("request");
        let mut killed_at = None;
        while let Some(fact) = facts.next().await {
            let fact: Event = fact.expect("a fact");
            if fact.kind != event::ATTEMPT_STARTED {
                continue;
            }
            let attempt: AttemptFact = fact.data_as().expect("attempt data");
            if attempt.call_id != call {
                continue;
            }
            match killed_at {
                None => {
                    let at = workers
                        .iter()
                        .position(|w| w.id() == &*attempt.worker)
                        .expect("a known worker");
                    let victim = workers.remove(at);
                    killed_at = Some(Instant::now());
                    victim.kill().await;
                }
                Some(at) => {
                    latencies.push(at.elapsed());
                    break;
                }
            }
        }
        workers.push(WorkerProcess::spawn(binary, url, &ledger, settings).await);
    }
    latencies
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn summary(rt: &Runtime, server: &NatsServer) {
    let url = server.url();
    println!();
    println!(
        "nats summary ({}; file storage; median of {ROUNDS} alternating rounds of {} ms)",
        server.version(),
        (SUMMARY / ROUNDS).as_millis()
    );
    println!(
        "{:<12} {:>14} {:>14} {:>10}",
        "in flight", "raw calls/s", "guarded/s", "ratio"
    );
    for concurrency in [1, 4] {
        let raw = rt.block_on(RawJetStream::new(&url, 1000));
        let guarded = rt.block_on(Guarded::new(&url, concurrency));
        // Alternate the two, round by round, and keep the medians: a noisy neighbour
        // slows both alike.
        let (mut raw_rates, mut guarded_rates) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            raw_rates.push(rt.block_on(rate(concurrency, SUMMARY / ROUNDS, |i| raw.one(i))));
            guarded_rates
                .push(rt.block_on(rate(concurrency, SUMMARY / ROUNDS, |i| guarded.one(i))));
        }
        drop(guarded);
        let (raw_rate, guarded_rate) = (median(&mut raw_rates), median(&mut guarded_rates));
        println!(
            "{:<12} {:>14.0} {:>14.0} {:>9.2}×",
            format!(
                "{concurrency} ({concurrency} worker{})",
                if concurrency == 1 { "" } else { "s" }
            ),
            raw_rate,
            guarded_rate,
            guarded_rate / raw_rate
        );
    }
    println!("target: guarded/raw ≥ 0.50× at equal concurrency");

    let settings = WorkerSettings::default();
    let ttl = Duration::from_secs_f64(settings.lease_ttl_s);
    let poll = Duration::from_millis(200);
    let mut latencies = rt.block_on(takeover(&url, &settings));
    latencies.sort();
    let (p50, p99) = (percentile(&latencies, 50.0), percentile(&latencies, 99.0));
    let bound = ttl + poll + Duration::from_millis(250);
    println!();
    println!(
        "takeover after SIGKILL ({} kills, lease_ttl_s {:.1}, ack_wait {:.1} s, wait_poll_s {:.1}): p50 {:.0} ms, p99 {:.0} ms; target p99 ≤ {:.0} ms ({:.2}× of it)",
        latencies.len(),
        settings.lease_ttl_s,
        settings.lease_ttl_s / 2.0,
        poll.as_secs_f64(),
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        bound.as_secs_f64() * 1e3,
        p99.as_secs_f64() / bound.as_secs_f64(),
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let benchmarking = args.iter().any(|arg| arg == "--bench");
    let Some(server) = NatsServer::start() else {
        return;
    };
    let rt = runtime();
    if !benchmarking {
        // Under `cargo test --benches`: both paths work.
        let raw = rt.block_on(RawJetStream::new(&server.url(), 1000));
        rt.block_on(raw.one(1));
        let guarded = rt.block_on(Guarded::new(&server.url(), 1));
        rt.block_on(guarded.one(1));
        return;
    }
    let mut criterion = Criterion::default().configure_from_args();
    criterion_groups(&mut criterion, &rt, &server.url());
    criterion.final_summary();
    // `--profile-time` runs the chosen benches for a profiler: no summary then.
    if !args.iter().any(|arg| arg.starts_with("--profile-time")) {
        summary(&rt, &server);
    }
}
