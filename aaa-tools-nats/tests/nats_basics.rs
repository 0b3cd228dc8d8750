//! The JetStream bus and KV store against a real `nats-server`, in one process: the
//! same calls as on the embedded engine, bad input, and what only JetStream does (the
//! contracts every bus and store keep are the shared suite's: `bus_contract.rs` and
//! `store_contract.rs`). A client killed mid-replay, which takes a process of its own,
//! is in the workspace's `tests/tests/nats_faults.rs`.

use std::time::Duration;

use aaa_tests::NatsServer;
use aaa_tools::bus::{Bus, BusError, ConsumerSpec};
use aaa_tools::{FailureKind, GuardStore, RecordKind, ToolHandler, ToolRegistry, tool, tools};
use aaa_tools_nats::{NatsOptions, NatsStore};
use futures::StreamExt;
use serde_json::json;

/// Adds two numbers.
#[tool]
async fn add(a: i64, b: i64) -> i64 {
    a + b
}

/// Panics.
#[tool]
async fn boom() -> i64 {
    panic!("boom")
}

/// Sleeps far past its timeout.
#[tool(timeout_s = 0.2)]
async fn hang() -> i64 {
    tokio::time::sleep(Duration::from_secs(3600)).await;
    0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_run_end_to_end_and_bad_input_becomes_facts() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let options = NatsOptions::new(server.url());
    let worker = options.connect().await.expect("worker connects");
    let client = options.connect().await.expect("client connects");
    let registry = ToolRegistry::builder()
        .tools(tools![add, boom, hang])
        .build()
        .unwrap();
    let _handle = ToolHandler::new(registry).attach(&worker).await.unwrap();

    let run = client.new_run();
    let ok = run.call("add", json!({"a": 2, "b": 3})).await.unwrap();
    assert_eq!(ok.result(), Some(&json!(5)), "{ok:?}");

    let bad = run.call("add", json!({"a": "two", "b": 3})).await.unwrap();
    assert_eq!(bad.failure().unwrap().kind, FailureKind::BadArgs, "{bad:?}");
    let unknown = run.call("ad", json!({})).await.unwrap();
    let failure = unknown.failure().unwrap();
    assert_eq!(failure.kind, FailureKind::UnknownTool);
    assert!(failure.message.contains("add"), "{}", failure.message);
    let huge = "x".repeat(2 * 1024 * 1024);
    let oversized = run.call("add", json!({"a": 1, "b": 2, "pad": huge})).await;
    match oversized {
        Ok(outcome) => assert_eq!(outcome.failure().unwrap().kind, FailureKind::BadArgs),
        Err(error) => assert!(error.to_string().contains("payload"), "{error}"),
    }
    let panicked = run.call("boom", json!({})).await.unwrap();
    assert_eq!(panicked.failure().unwrap().kind, FailureKind::Panic);
    let hung = run.call("hang", json!({})).await.unwrap();
    assert_eq!(hung.failure().unwrap().kind, FailureKind::Timeout);

    // A turn of several calls comes back in call order.
    let turn = run
        .call_all(
            (0..8)
                .map(|i| aaa_tools::ToolCall::new("add", json!({"a": i, "b": 100})))
                .collect(),
        )
        .await
        .unwrap();
    let sums: Vec<_> = turn.iter().map(|o| o.result().cloned()).collect();
    let expected: Vec<_> = (0..8).map(|i| Some(json!(i + 100))).collect();
    assert_eq!(sums, expected);
}

/// What only the JetStream bus refuses (the shared suite covers what every bus
/// refuses): a subject outside its stream's `aaa.>`, a consumer name the server cannot
/// take; and acks, sent without a receipt, land on the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bus_refuses_what_the_stream_cannot_hold_and_acks_land() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (bus, _) = NatsOptions::new(server.url())
        .connect_parts()
        .await
        .unwrap();
    // A confirmed publish and an emit follow the same subject rules.
    for subject in ["other.x"] {
        let published = bus.publish(subject, b"{}".to_vec().into(), None).await;
        let emitted = bus.emit(subject, b"{}".to_vec().into(), None).await;
        for error in [published.unwrap_err(), emitted.unwrap_err()] {
            assert!(
                matches!(error, BusError::Invalid { .. }),
                "{subject}: {error}"
            );
        }
    }
    let error = bus
        .subscribe(&ConsumerSpec::new("bad name", ["aaa.*.*.x"]))
        .await
        .err()
        .expect("an invalid consumer name is refused");
    assert!(matches!(error, BusError::Invalid { .. }), "{error}");

    bus.publish("aaa.t.r.x", b"1".to_vec().into(), Some("same"))
        .await
        .unwrap();
    bus.publish("aaa.t.r.x", b"2".to_vec().into(), Some("same"))
        .await
        .unwrap();
    bus.publish("aaa.t.r.x", b"3".to_vec().into(), Some("other"))
        .await
        .unwrap();
    // Competing consumers: a nak comes back with a higher delivery count; acked
    // messages never do.
    let spec =
        ConsumerSpec::new("test-consumer", ["aaa.t.r.x"]).with_ack_wait(Duration::from_secs(5));
    let mut sub = bus.subscribe(&spec).await.unwrap();
    let m1 = sub.next().await.unwrap();
    assert_eq!((m1.payload.to_vec(), m1.delivery_count), (b"1".to_vec(), 1));
    m1.nak(Duration::ZERO).await.unwrap();
    let mut seen = Vec::new();
    for _ in 0..2 {
        let message = sub.next().await.unwrap();
        seen.push((message.payload.to_vec(), message.delivery_count));
        message.ack().await.unwrap();
    }
    seen.sort();
    assert_eq!(seen, vec![(b"1".to_vec(), 2), (b"3".to_vec(), 1)]);
    // Acks are not confirmed one by one: wait for the server to have them all.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while bus.consumer_pending("test-consumer").await.unwrap() != (0, 0) {
        assert!(tokio::time::Instant::now() < deadline, "acks never landed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The store keeps a clock: how long ago a record was written, by the server's time
/// (its compare-and-set is the shared suite's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kv_store_keeps_a_clock() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (_, store): (_, NatsStore) = NatsOptions::new(server.url())
        .connect_parts()
        .await
        .unwrap();
    for kind in RecordKind::ALL {
        let rev = store
            .create(kind, "guard.t.r.c1", b"1".to_vec())
            .await
            .unwrap();
        let rev2 = store
            .update(kind, "guard.t.r.c1", b"2".to_vec(), rev)
            .await
            .unwrap();
        let (revision, age) = store.age(kind, "guard.t.r.c1").await.unwrap().unwrap();
        assert_eq!(revision, rev2, "{kind}");
        assert!(age < Duration::from_secs(60), "{kind}: {age:?}");
    }
}

/// Sleeps for `ms` milliseconds and says which worker ran it.
#[tool]
async fn nap(ctx: aaa_tools::ToolContext, ms: u64) -> String {
    tokio::time::sleep(Duration::from_millis(ms)).await;
    ctx.engine()
        .map(|e| e.worker_id().to_owned())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_pulls_only_for_free_pool_slots_and_leaves_the_rest_to_others() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let options = NatsOptions::new(server.url());
    let client = options.connect().await.unwrap();
    let serve = |engine: aaa_tools::Engine| async move {
        let registry = ToolRegistry::new(tools![nap]).unwrap();
        let handle = ToolHandler::new(registry)
            .pool(aaa_tools::Tool::DEFAULT_POOL, 2)
            .attach(&engine)
            .await
            .unwrap();
        (engine, handle)
    };
    let first = serve(options.connect().await.unwrap()).await;
    let run = client.new_run();
    let mut facts = run.facts().await.unwrap();
    let calls: Vec<_> = (0..4)
        .map(|_| aaa_tools::ToolCall::new("nap", json!({"ms": 1500})))
        .collect();
    let pending = {
        let run = run.clone();
        tokio::spawn(async move { run.call_all(calls).await })
    };
    // The first worker starts two calls (its pool is full) and pulls no more.
    let mut started = 0;
    while started < 2 {
        let fact = facts.next().await.unwrap().unwrap();
        started += usize::from(fact.kind == aaa_tools::event::ATTEMPT_STARTED);
    }
    let second = serve(options.connect().await.unwrap()).await;
    let outcomes = pending.await.unwrap().unwrap();
    let by: Vec<String> = outcomes
        .iter()
        .map(|o| o.result().unwrap().as_str().unwrap().to_owned())
        .collect();
    let ran_first = by.iter().filter(|w| *w == first.0.worker_id()).count();
    let ran_second = by.iter().filter(|w| *w == second.0.worker_id()).count();
    assert_eq!((ran_first, ran_second), (2, 2), "{by:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_or_stream_set_up_otherwise_is_a_clear_error() {
    // No JetStream on the server.
    let Some(plain) = NatsServer::start_configured(aaa_tests::WITHOUT_JETSTREAM) else {
        return;
    };
    let error = NatsOptions::new(plain.url()).connect().await.unwrap_err();
    assert!(
        error
            .to_string()
            .contains("is JetStream enabled on the server?"),
        "{error}"
    );
    drop(plain);

    let Some(server) = NatsServer::start() else {
        return;
    };
    // Three replicas asked of a server outside a cluster.
    let error = NatsOptions::new(server.url())
        .replicas(3)
        .connect()
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("need a JetStream cluster"),
        "{error}"
    );
    // A stream of that name made otherwise: named, never reconfigured.
    let client = async_nats::connect(server.url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    js.create_stream(async_nats::jetstream::stream::Config {
        name: "AAA".into(),
        subjects: vec!["other.>".into()],
        storage: async_nats::jetstream::stream::StorageType::Memory,
        ..Default::default()
    })
    .await
    .unwrap();
    let error = NatsOptions::new(server.url()).connect().await.unwrap_err();
    let text = error.to_string();
    assert!(
        matches!(error, aaa_tools_nats::NatsError::Mismatch { .. }),
        "{text}"
    );
    for expected in [
        "stream AAA exists with another configuration",
        r#"subjects: it has ["other.>"], the options ask ["aaa.>"]"#,
        "storage: it has Memory, the options ask File",
        "republish: it has none, the options ask aaa.*.*.tool.*.* -> aaa-stored.",
    ] {
        assert!(text.contains(expected), "{text}");
    }
    let info = js.get_stream("AAA").await.unwrap().cached_info().clone();
    assert_eq!(info.config.subjects, ["other.>"], "left as it was");
    // The same options on a stream of another name work.
    let engine = NatsOptions::new(server.url())
        .stream("AAA2")
        .connect()
        .await
        .unwrap();
    drop(engine);
}

/// Waiting costs the server nothing per run or per call: 200 runs of two calls each,
/// waited on at once, leave the stream with the consumers it had (the workers'), and
/// a replay's consumer is gone once the replay is dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_for_outcomes_holds_no_consumer_and_a_dropped_replay_none() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let options = NatsOptions::new(server.url());
    let worker = options.connect().await.unwrap();
    let (bus, store) = options.connect_parts().await.unwrap();
    let client = aaa_tools::Engine::new(bus.clone(), store);
    let registry = ToolRegistry::new(tools![add]).unwrap();
    let _handle = ToolHandler::new(registry).attach(&worker).await.unwrap();
    let before = aaa_tests::stream_consumers(&bus).await;

    let runs: Vec<_> = (0..200).map(|_| client.new_run()).collect();
    let calls = runs.iter().enumerate().map(|(i, run)| async move {
        let first = run.call("add", json!({"a": i, "b": 1})).await.unwrap();
        let second = run.call("add", json!({"a": i, "b": 2})).await.unwrap();
        (first.result().cloned(), second.result().cloned())
    });
    let results = futures::future::join_all(calls).await;
    for (i, (first, second)) in results.into_iter().enumerate() {
        assert_eq!(first, Some(json!(i + 1)));
        assert_eq!(second, Some(json!(i + 2)));
    }
    assert_eq!(
        aaa_tests::stream_consumers(&bus).await,
        before,
        "no consumer per run or per call"
    );

    // A call's outcome asked for again, from a fresh handle: looked up, not replayed.
    let again = client.run(runs[7].run_id().clone());
    let id = {
        let mut facts = runs[7].facts().await.unwrap();
        let mut id = None;
        while let Some(fact) = facts.next().await {
            let fact = fact.unwrap();
            if fact.kind == aaa_tools::event::TOOL_COMPLETED {
                id = fact.subject.clone();
                break;
            }
        }
        id.unwrap()
    };
    let outcome = again
        .outcome(&aaa_tools::CallId::new(id).unwrap())
        .await
        .unwrap();
    assert_eq!(outcome.result(), Some(&json!(8)));

    // The replay above is dropped: its consumer goes (deleted, not left to expire).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while aaa_tests::stream_consumers(&bus).await != before {
        assert!(
            std::time::Instant::now() < deadline,
            "the replay's consumer was not deleted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An account whose consumer limit the workers' two consumers fill: calls still run
/// (waiting makes no consumer), and what does need one (a replay, a third worker
/// consumer) fails at once with the server's reason, never hangs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_consumer_limit_stops_no_call_and_says_why_elsewhere() {
    let config = "accounts { APP: { jetstream: { max_consumers: 2 }, \
                  users: [{ user: app, password: app }] } }";
    let Some(server) = NatsServer::start_configured(config) else {
        return;
    };
    let options = NatsOptions::new(server.url()).user_and_password("app", "app");
    let worker = options.connect().await.unwrap();
    let client = options.connect().await.unwrap();
    let registry = ToolRegistry::new(tools![add]).unwrap();
    let _handle = ToolHandler::new(registry).attach(&worker).await.unwrap();

    let runs: Vec<_> = (0..20).map(|_| client.new_run()).collect();
    for (i, run) in runs.iter().enumerate() {
        let outcome = run.call("add", json!({"a": i, "b": 1})).await.unwrap();
        assert_eq!(outcome.result(), Some(&json!(i + 1)));
    }
    let replay = tokio::time::timeout(Duration::from_secs(10), runs[0].facts()).await;
    let error = replay
        .expect("answered at once")
        .err()
        .expect("no room for a consumer");
    assert!(error.to_string().contains("maximum consumers"), "{error}");
}
