//! A three-node JetStream cluster under guarded load: the stream and the bucket at
//! three replicas, two worker processes on different nodes, 2 000 calls (half
//! `at_least_once`, half `at_most_once`) writing to a side-effect ledger, and a fault
//! in the middle. After each fault every call has exactly one outcome, none is lost,
//! no `at_most_once` call ran twice and no `at_least_once` call ran more than
//! `max_attempts` times. Each test prints how long calls were blocked (the longest gap
//! between two outcomes: the failover time).
//!
//! The tests take turns: three servers and two workers at a time are all a 2-core
//! machine holds while leases are measured.

use std::collections::HashMap;
use std::path::Path;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use aaa_tests::{Ledger, NatsCluster, WorkerProcess, WorkerSettings};
use aaa_tools::{CallId, Engine, FailureKind, ToolCall};
use aaa_tools_nats::{NatsBus, NatsOptions};
use serde_json::json;

static TURN: LazyLock<tokio::sync::Mutex<()>> = LazyLock::new(|| tokio::sync::Mutex::new(()));

const CALLS: usize = 2000;

/// A fault, applied once a quarter of the calls is requested.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// `kill -9` the stream's leader, then start it again.
    KillStreamLeader,
    /// `kill -9` the KV bucket's leader, then start it again.
    KillBucketLeader,
    /// SIGSTOP a node for longer than a lease, then SIGCONT.
    PauseNode,
    /// Restart every node, one at a time.
    RollingRestart,
}

/// The node leading `stream`, by the cluster's own account.
async fn leader_of(bus: &NatsBus, cluster: &NatsCluster, stream: &str) -> usize {
    let mut stream = bus
        .raw_jetstream()
        .get_stream(stream)
        .await
        .expect("the stream");
    let info = stream.info().await.expect("its info");
    let leader = info
        .cluster
        .as_ref()
        .and_then(|c| c.leader.clone())
        .expect("a leader");
    cluster.index_of(&leader).expect("a known node")
}

async fn apply(fault: Fault, cluster: &mut NatsCluster, bus: &NatsBus, lease: Duration) {
    match fault {
        Fault::KillStreamLeader => {
            let leader = leader_of(bus, cluster, "AAA").await;
            println!("killing the stream leader, node {}", leader + 1);
            cluster.signal(leader, "KILL");
            tokio::time::sleep(lease).await;
            tokio::task::block_in_place(|| cluster.restart(leader));
        }
        Fault::KillBucketLeader => {
            let leader = leader_of(bus, cluster, "KV_aaa_guard").await;
            println!("killing the bucket leader, node {}", leader + 1);
            cluster.signal(leader, "KILL");
            tokio::time::sleep(lease).await;
            tokio::task::block_in_place(|| cluster.restart(leader));
        }
        Fault::PauseNode => {
            let leader = leader_of(bus, cluster, "AAA").await;
            println!("pausing node {} for twice a lease", leader + 1);
            cluster.signal(leader, "STOP");
            tokio::time::sleep(lease * 2).await;
            cluster.signal(leader, "CONT");
        }
        Fault::RollingRestart => {
            for node in 0..3 {
                println!("restarting node {}", node + 1);
                cluster.signal(node, "TERM");
                tokio::task::block_in_place(|| cluster.restart(node));
            }
        }
    }
}

async fn survives(fault: Fault) {
    let _turn = TURN.lock().await;
    let Some(mut cluster) = NatsCluster::start() else {
        return;
    };
    let urls = cluster.urls();
    let options = NatsOptions::new(&urls[0])
        .server(&urls[1])
        .server(&urls[2])
        .replicas(3);
    let (bus, store) = options.connect_parts().await.expect("the client connects");
    let client = Engine::new(bus.clone(), store);
    let ledger = Ledger::new();
    let settings = WorkerSettings {
        replicas: 3,
        more_servers: urls.clone(),
        ..WorkerSettings::default()
    };
    let binary = Path::new(env!("CARGO_BIN_EXE_aaa-test-worker"));
    let _workers = [
        WorkerProcess::spawn(binary, &urls[1], &ledger, &settings).await,
        WorkerProcess::spawn(binary, &urls[2], &ledger, &settings).await,
    ];
    let lease = Duration::from_secs_f64(settings.lease_ttl_s);
    let run = client.new_run();
    let calls: Vec<(&str, CallId)> = (0..CALLS)
        .map(|i| {
            let tool = if i % 2 == 0 { "work" } else { "work_once" };
            (tool, CallId::new(format!("c{i}")).unwrap())
        })
        .collect();

    // Requests go out while the fault happens; one the bus does not confirm is asked
    // again under the same id (the guard runs a call id once).
    let requesting = {
        let (run, calls) = (run.clone(), calls.clone());
        tokio::spawn(async move {
            for (tool, id) in calls {
                let call = ToolCall::new(tool, json!({"ms": 2, "tag": "cluster"})).with_id(id);
                let deadline = Instant::now() + Duration::from_secs(60);
                while let Err(error) = run.request_call(call.clone()).await {
                    assert!(Instant::now() < deadline, "{error}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        })
    };
    // The fault, once a quarter of the calls has an outcome.
    let mut finished: Vec<Instant> = Vec::with_capacity(CALLS);
    let mut kinds: HashMap<String, usize> = HashMap::new();
    let mut faulted = false;
    let mut completed: std::collections::HashSet<CallId> = std::collections::HashSet::new();
    for (n, (tool, id)) in calls.iter().enumerate() {
        if n == CALLS / 4 && !faulted {
            faulted = true;
            apply(fault, &mut cluster, &bus, lease).await;
        }
        let outcome = tokio::time::timeout(Duration::from_secs(120), run.outcome(id))
            .await
            .unwrap_or_else(|_| panic!("{fault:?}: {tool} {id} has no outcome within 120 s"))
            .unwrap_or_else(|e| panic!("{fault:?}: {tool} {id}: {e}"));
        finished.push(Instant::now());
        let kind = match outcome.failure() {
            None => {
                completed.insert(id.clone());
                "completed".to_owned()
            }
            Some(failure) => {
                let allowed = failure.kind == FailureKind::OutcomeUnknown && *tool == "work_once"
                    || failure.kind == FailureKind::Abandoned && *tool == "work";
                assert!(allowed, "{fault:?}: {tool} {id}: {failure:?}");
                failure.kind.to_string()
            }
        };
        *kinds.entry(format!("{tool} {kind}")).or_default() += 1;
    }
    requesting.await.expect("every request was published");

    // Effects, by idempotency key. A completed call ran to its end; an at-most-once
    // call started at most once; an at-least-once call at most `max_attempts` times. A
    // call whose attempt was lost before its tool began (`outcome_unknown`,
    // `abandoned`) may not have started at all: that is what those outcomes say.
    let counts = ledger.counts();
    let mut most_starts = 0;
    for (tool, id) in &calls {
        let key = format!("{}/{}/{id}", run.tenant(), run.run_id());
        let (starts, dones) = counts.get(&key).copied().unwrap_or_default();
        most_starts = most_starts.max(starts);
        if completed.contains(id) {
            assert!(
                starts >= 1 && dones >= 1,
                "{fault:?}: {key} completed without running"
            );
        }
        let most = if *tool == "work_once" {
            1
        } else {
            settings.max_attempts as usize
        };
        assert!(
            starts <= most,
            "{fault:?}: {tool} {key} started {starts} times"
        );
    }
    // Exactly one outcome fact per call in the run.
    let mut outcomes: HashMap<String, usize> = HashMap::new();
    for fact in aaa_tests::facts_until_now(&run).await {
        if fact.kind == aaa_tools::event::TOOL_COMPLETED
            || fact.kind == aaa_tools::event::TOOL_FAILED
        {
            *outcomes
                .entry(fact.subject.unwrap_or_default())
                .or_default() += 1;
        }
    }
    for (_, id) in &calls {
        assert_eq!(
            outcomes.get(id.as_str()),
            Some(&1),
            "{fault:?}: outcomes of {id}"
        );
    }
    let blocked = finished
        .windows(2)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or_default();
    println!(
        "{fault:?}: {CALLS} calls, {kinds:?}; the most starts of one call {most_starts}; calls were blocked for at most {:.0} ms",
        blocked.as_secs_f64() * 1e3
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_stream_leader_loses_nothing() {
    survives(Fault::KillStreamLeader).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_bucket_leader_loses_nothing() {
    survives(Fault::KillBucketLeader).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pausing_a_node_past_a_lease_loses_nothing() {
    survives(Fault::PauseNode).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_loses_nothing() {
    survives(Fault::RollingRestart).await;
}
