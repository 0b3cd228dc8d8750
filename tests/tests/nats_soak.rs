//! A soak: 10,000 calls (`AAA_SOAK_CALLS` to change it) across 3 worker processes on a
//! real `nats-server`, with a worker SIGKILLed and replaced every 2 seconds. The ledger
//! the tool writes (keyed by idempotency key) must show no lost call and no duplicate
//! effect beyond what each call's delivery policy allows.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use aaa_tests::{Ledger, NatsServer, WorkerProcess, WorkerSettings};
use aaa_tools::{FailureKind, ToolCall};
use aaa_tools_nats::NatsOptions;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_calls_with_random_kills_lose_nothing() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let calls: usize = std::env::var("AAA_SOAK_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let binary = Path::new(env!("CARGO_BIN_EXE_aaa-test-worker"));
    let ledger = Arc::new(Ledger::new());
    let settings = WorkerSettings::default();
    let url = server.url();
    let client = NatsOptions::new(&url).connect().await.unwrap();
    let mut workers = Vec::new();
    for _ in 0..3 {
        workers.push(WorkerProcess::spawn(binary, &url, &ledger, &settings).await);
    }

    // Kill a random worker every 2 s and start a replacement, until the calls are done.
    let done = Arc::new(AtomicBool::new(false));
    let kills = Arc::new(AtomicUsize::new(0));
    let killer = {
        let (done, kills, ledger, url) = (done.clone(), kills.clone(), ledger.clone(), url.clone());
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            | 1;
        println!("soak: kill schedule seed {seed}");
        tokio::spawn(async move {
            let mut state = seed;
            while !done.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_secs(2)).await;
                if done.load(Ordering::SeqCst) {
                    break;
                }
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let victim = workers.remove((state % workers.len() as u64) as usize);
                victim.kill().await;
                kills.fetch_add(1, Ordering::SeqCst);
                workers.push(WorkerProcess::spawn(binary, &url, &ledger, &settings).await);
            }
            workers
        })
    };

    let started = Instant::now();
    let run = client.new_run();
    let batch: Vec<ToolCall> = (0..calls)
        .map(|i| {
            let tool = if i % 2 == 0 { "work" } else { "work_once" };
            ToolCall::new(tool, json!({"ms": 5, "tag": format!("s{i}")}))
        })
        .collect();
    let outcomes = tokio::time::timeout(Duration::from_secs(600), run.call_all(batch))
        .await
        .expect("every call has an outcome within 10 minutes")
        .unwrap();
    let elapsed = started.elapsed();
    done.store(true, Ordering::SeqCst);
    let _workers = killer.await.unwrap();

    assert_eq!(outcomes.len(), calls, "no call lost");
    let counts = ledger.counts();
    let mut kinds: HashMap<String, usize> = HashMap::new();
    let (mut reran, mut most_starts) = (0, 0);
    for outcome in &outcomes {
        let once = outcome.name() == "work_once";
        let kind = match outcome.failure() {
            None => "completed".to_owned(),
            Some(failure) => {
                let allowed = if once {
                    failure.kind == FailureKind::OutcomeUnknown
                } else {
                    failure.kind == FailureKind::Abandoned
                };
                assert!(allowed, "{outcome:?}");
                failure.kind.to_string()
            }
        };
        *kinds
            .entry(format!("{} {kind}", outcome.name()))
            .or_default() += 1;
        // The default idempotency key is `<tenant>/<run>/<call id>`.
        let key = format!("{}/{}/{}", run.tenant(), run.run_id(), outcome.call_id());
        let (starts, dones) = counts.get(&key).copied().unwrap_or_default();
        most_starts = most_starts.max(starts);
        if outcome.is_ok() {
            assert!(dones >= 1, "{key} completed without running");
        }
        if once {
            assert!(
                starts <= 1,
                "{key}: an at-most-once call ran {starts} times"
            );
        } else {
            assert!(starts <= 3, "{key}: ran {starts} times, over max_attempts");
            reran += usize::from(starts > 1);
        }
    }
    println!(
        "soak: {calls} calls in {:.1} s ({:.0} calls/s), {} kills, outcomes {kinds:?}, {reran} at-least-once calls re-run after a kill, at most {most_starts} starts for one call",
        elapsed.as_secs_f64(),
        calls as f64 / elapsed.as_secs_f64(),
        kills.load(Ordering::SeqCst),
    );
    assert!(kills.load(Ordering::SeqCst) >= 1 || elapsed < Duration::from_secs(2));
}
