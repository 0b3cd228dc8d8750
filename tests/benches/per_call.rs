//! The work one call costs the embedded engine, without the scheduler's noise: `add(a, b)`
//! calls through `Engine::embedded()` on a current-thread runtime (no thread wake-ups,
//! no other thread competing), a fixed number of them, `--in-flight` at a time.
//!
//! Wall time on a shared machine varies by tens of percent from run to run; instruction
//! counts do not. Count them with valgrind, twice with different `--calls`, and divide
//! the difference by the difference of the call counts (which cancels the setup):
//!
//! ```text
//! cargo bench -p aaa-tests --bench per_call --no-run   # prints the binary's path
//! valgrind --tool=callgrind <binary> --bench --calls 3200 --guard on
//! valgrind --tool=callgrind <binary> --bench --calls 9600 --guard on
//! ```
//!
//! Run plainly (`cargo bench -p aaa-tests --bench per_call`), it prints calls per second
//! with the guard on and off. `--threads N` runs the engine on a multi-thread runtime with
//! `N` workers instead, the caller in `block_on` as in `dispatch`'s columns for a caller
//! outside the runtime: the difference to one thread is what thread wake-ups cost.
//! `--keep N` bounds the bus's log to `N` messages and the store's finished records to
//! `N` (100 000 each by default): what a long-running engine's history costs it.
//! `--keep-log N` and `--keep-store N` bound one of them (the other keeps its default,
//! or `--keep`'s), to tell which history costs what. Without
//! `--bench` (as under `cargo test --benches`) it runs a few calls and checks their sums.

use std::time::Instant;

use aaa_tests::History;
use aaa_tools::{Engine, GuardConfig, ToolHandler, ToolRegistry, tools};
use serde_json::json;

/// Add two integers.
#[aaa_tools::tool]
async fn add(a: i64, b: i64) -> i64 {
    a + b
}

/// What to run.
struct Settings {
    calls: usize,
    in_flight: usize,
    /// `None`: both, one after the other.
    guard: Option<bool>,
    /// `None`: a current-thread runtime; `Some(n)`: a multi-thread runtime with `n`
    /// workers, the caller in `block_on` (as `dispatch` measures a caller outside the
    /// runtime).
    threads: Option<usize>,
    /// How much history the engine keeps.
    keep: History,
}

fn settings(args: &[String]) -> Settings {
    let value = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    Settings {
        calls: value("--calls").map_or(64_000, |v| v.parse().expect("--calls N")),
        in_flight: value("--in-flight").map_or(64, |v| v.parse().expect("--in-flight N")),
        guard: value("--guard").map(|v| v == "on"),
        threads: value("--threads").map(|v| v.parse().expect("--threads N")),
        keep: {
            let both = value("--keep").map(|v| v.parse().expect("--keep N"));
            let log = value("--keep-log").map(|v| v.parse().expect("--keep-log N"));
            let store = value("--keep-store").map(|v| v.parse().expect("--keep-store N"));
            History::bounded(log.or(both), store.or(both))
        },
    }
}

/// Runs `calls` calls, `in_flight` at a time, and returns calls per second.
fn run(calls: usize, in_flight: usize, guard: bool, threads: Option<usize>, keep: History) -> f64 {
    let rt = match threads {
        None => tokio::runtime::Builder::new_current_thread(),
        Some(n) => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(n);
            builder
        }
    }
    .enable_all()
    .build()
    .expect("tokio runtime");
    rt.block_on(async {
        let engine = Engine::new(keep.bus(), keep.store());
        let worker = ToolHandler::new(ToolRegistry::new(tools![add]).expect("registry"))
            .pool("default", in_flight)
            .guard(GuardConfig::default().with_enabled(guard))
            .attach(&engine)
            .await
            .expect("handler attaches");
        let run = engine.new_run();
        let start = Instant::now();
        let mut done = 0;
        while done < calls {
            let batch = in_flight.min(calls - done);
            let outcomes = futures::future::join_all(
                (0..batch).map(|i| run.call("add", json!({"a": (done + i) as i64, "b": 1}))),
            )
            .await;
            for (i, outcome) in outcomes.into_iter().enumerate() {
                let sum = outcome
                    .expect("engine call")
                    .result()
                    .and_then(|v| v.as_i64());
                assert_eq!(sum, Some((done + i) as i64 + 1), "add adds");
            }
            done += batch;
        }
        let rate = calls as f64 / start.elapsed().as_secs_f64();
        drop(run);
        worker.shutdown(std::time::Duration::from_secs(5)).await;
        rate
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") {
        run(128, 16, true, None, History::defaults());
        let short = History {
            messages: 64,
            settled_calls: 64,
        };
        run(128, 16, false, Some(2), short);
        return;
    }
    let settings = settings(&args);
    let modes = match settings.guard {
        Some(guard) => vec![guard],
        None => vec![true, false],
    };
    for guard in modes {
        let rate = run(
            settings.calls,
            settings.in_flight,
            guard,
            settings.threads,
            settings.keep,
        );
        println!(
            "per_call: {} calls, {} in flight, guard {}: {:.1}k calls/s ({})",
            settings.calls,
            settings.in_flight,
            if guard { "on" } else { "off" },
            rate / 1e3,
            match settings.threads {
                None => "one thread".to_string(),
                Some(n) => format!("{n} worker threads, caller in block_on"),
            }
        );
    }
}
