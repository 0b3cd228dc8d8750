//! Call records on the facts stream and the outcome log they make of it, against a real
//! `nats-server`: where records of each kind live, the conditional commit (from 2.11;
//! absent before), and a finished call whose record was left running never running
//! again.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aaa_guard::{
    Committed, Entry, GuardStore, OutcomeFact, OutcomeLog, RecordKind, Revision, StoreError,
    StoreFuture,
};
use aaa_tests::NatsServer;
use aaa_tools::bus::Bus;
use aaa_tools::event::{self, AttemptFact, Event};
use aaa_tools::{Engine, GuardConfig, ToolHandler, ToolRegistry, tool, tools};
use aaa_tools_nats::{NatsOptions, NatsStore};
use futures::StreamExt;
use serde_json::json;

/// Whether the server takes the conditional append (2.11 and later).
fn fences(server: &NatsServer) -> bool {
    // `nats-server: v2.15.1`
    let version = server.version();
    let number = version.split_whitespace().last().unwrap_or_default();
    let mut parts = number
        .trim_start_matches('v')
        .split('.')
        .map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) >= (2, 11)
}

const CALL: RecordKind = RecordKind::Call;
const HANDLER: RecordKind = RecordKind::Handler;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_records_live_on_the_facts_stream_and_other_records_in_the_bucket() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (bus, store) = NatsOptions::new(server.url())
        .connect_parts()
        .await
        .unwrap();
    let rev = store
        .create(CALL, "guard.t.r.c1", b"1".to_vec())
        .await
        .unwrap();
    let rev = store
        .update(CALL, "guard.t.r.c1", b"2".to_vec(), rev)
        .await
        .unwrap();
    store
        .create(HANDLER, "approval.t.r.c1", b"a".to_vec())
        .await
        .unwrap();
    let facts = bus.raw_jetstream().get_stream("AAA").await.unwrap();
    let last = facts
        .get_last_raw_message_by_subject("aaa.$g.guard.t.r.c1")
        .await
        .unwrap();
    assert_eq!((last.payload.to_vec(), last.sequence), (b"2".to_vec(), rev));
    let bucket = bus
        .raw_jetstream()
        .get_key_value("aaa_guard")
        .await
        .unwrap();
    assert!(bucket.get("guard.t.r.c1").await.unwrap().is_none());
    assert_eq!(
        bucket.get("approval.t.r.c1").await.unwrap().as_deref(),
        Some(&b"a"[..])
    );
    // The place follows the kind, not the key: a handler record named like a call
    // record goes to the bucket, a call record named like an approval to the stream.
    store
        .create(HANDLER, "guard.t.r.c1", b"h".to_vec())
        .await
        .unwrap();
    assert_eq!(
        bucket.get("guard.t.r.c1").await.unwrap().as_deref(),
        Some(&b"h"[..])
    );
    let on_stream = store
        .create(CALL, "approval.t.r.c1", b"c".to_vec())
        .await
        .unwrap();
    let last = facts
        .get_last_raw_message_by_subject("aaa.$g.approval.t.r.c1")
        .await
        .unwrap();
    assert_eq!(
        (last.payload.to_vec(), last.sequence),
        (b"c".to_vec(), on_stream)
    );
    assert_eq!(
        store
            .get(CALL, "guard.t.r.c1")
            .await
            .unwrap()
            .unwrap()
            .value,
        b"2"
    );
    // Keys are listed from the kind's place, by any prefix; the store's clock key
    // (written by `age`) is no record of either kind.
    assert!(
        store
            .age(HANDLER, "approval.t.r.c1")
            .await
            .unwrap()
            .is_some()
    );
    let all = ["approval.t.r.c1", "guard.t.r.c1"].map(str::to_owned);
    assert_eq!(store.keys(CALL, "").await.unwrap(), all);
    assert_eq!(store.keys(HANDLER, "").await.unwrap(), all);
    assert_eq!(store.keys(CALL, "g").await.unwrap(), all[1..]);
    assert_eq!(store.keys(CALL, "guard.t.").await.unwrap(), all[1..]);
    assert_eq!(store.keys(HANDLER, "a").await.unwrap(), all[..1]);
    store.delete(HANDLER, "guard.t.r.c1").await.unwrap();
    assert_eq!(store.keys(HANDLER, "").await.unwrap(), all[..1]);
    assert_eq!(store.keys(CALL, "").await.unwrap(), all);
    // No record is ever at revision 0 (which the server reads as "absent").
    assert!(matches!(
        store.update(CALL, "guard.t.r.c1", b"3".to_vec(), 0).await,
        Err(StoreError::Conflict { .. })
    ));
    assert!(matches!(
        store
            .update(CALL, "guard.t.r.nothing", b"3".to_vec(), rev)
            .await,
        Err(StoreError::Conflict { .. })
    ));
    // A record on the stream is no fact of any run: a run's replay never shows it.
    let run = Engine::new(bus, store.clone()).run(aaa_tools::RunId::new("r").unwrap());
    let mut replay = run.facts().await.unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(300), replay.next())
            .await
            .is_err()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_outcome_log_commits_only_while_the_record_is_unchanged() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (bus, store) = NatsOptions::new(server.url())
        .connect_parts()
        .await
        .unwrap();
    let Some(fence) = store.outcome_log() else {
        // Older servers ignore the header that makes a publish conditional: no log.
        assert!(!fences(&server), "{} should fence", server.version());
        return;
    };
    assert!(fences(&server), "{} cannot fence", server.version());
    let subjects = ["aaa.t.r.tool.completed".to_owned()];
    // Commits `payload` as `id` on the condition that `key` is still at `rev`.
    let append = async |key: &str, rev, payload: &[u8], id: &str| {
        let fact = OutcomeFact {
            address: &subjects[0],
            id,
            bytes: payload.to_vec(),
        };
        fence.commit_outcome(key, rev, fact).await
    };
    // An earlier call of the same run, with its outcome in the log before the next
    // call's record is first written.
    let earlier = "guard.t.r.c0";
    let rev0 = store
        .create(CALL, earlier, b"running".to_vec())
        .await
        .unwrap();
    assert_eq!(
        append(earlier, rev0, b"zero", "out-0").await.unwrap(),
        Committed::Stored
    );
    let key = "guard.t.r.c1";
    let rev = store.create(CALL, key, b"running".to_vec()).await.unwrap();

    assert_eq!(
        append(key, rev, b"first", "out-1").await.unwrap(),
        Committed::Stored
    );
    // The same id again is a duplicate, whatever the record says.
    assert_eq!(
        append(key, rev, b"again", "out-1").await.unwrap(),
        Committed::Duplicate
    );
    // A record that moved on refuses the old revision's append.
    store
        .update(CALL, key, b"taken".to_vec(), rev)
        .await
        .unwrap();
    let stale = append(key, rev, b"stale", "out-2").await;
    assert!(
        matches!(stale, Err(StoreError::Conflict { .. })),
        "{stale:?}"
    );
    // Bad input is refused before it reaches the server.
    for (key, subject) in [
        ("guard.t.r.c1", "aaa.t.r.>"),
        ("guard.t.r.c1", "other.t"),
        ("guard.t r", "aaa.t.r.x"),
        ("guard.t.r.never", "aaa.t.r.x"),
    ] {
        let fact = OutcomeFact {
            address: subject,
            id: "out-3",
            bytes: b"x".to_vec(),
        };
        let refused = fence.commit_outcome(key, rev, fact).await;
        assert!(refused.is_err(), "{key} {subject}");
    }

    // What was appended is found by its id, and only it.
    let found = async |key: &str, subjects: &[String], id: &str| {
        fence.find_outcome(key, subjects, id).await.unwrap()
    };
    let elsewhere = ["aaa.t.r.tool.failed".to_owned()];
    assert_eq!(
        found(key, &subjects, "out-1").await,
        Some(b"first".to_vec())
    );
    assert_eq!(found(key, &subjects, "out-2").await, None);
    assert_eq!(found(key, &elsewhere, "out-1").await, None);
    // A search starts at its record's first write: the earlier call's outcome is found
    // through its own record, not through a record written after it, and a record
    // never written has nothing to find.
    assert_eq!(
        found(earlier, &subjects, "out-0").await,
        Some(b"zero".to_vec())
    );
    assert_eq!(found(key, &subjects, "out-0").await, None);
    assert_eq!(found("guard.t.r.never", &subjects, "out-1").await, None);
    let mut replay = bus.replay("aaa.t.r.>").await.unwrap();
    let stored = replay.next().await.unwrap().unwrap();
    assert_eq!(stored.payload.as_ref(), b"zero");
    let stored = replay.next().await.unwrap().unwrap();
    assert_eq!(stored.payload.as_ref(), b"first");
}

/// Counts its runs.
#[tool]
async fn counted() -> usize {
    RUNS.fetch_add(1, Ordering::SeqCst) + 1
}

static RUNS: AtomicUsize = AtomicUsize::new(0);

/// The worker's store, whose fence does not find the first `hide` outcomes it is asked
/// for: the race where a holder's outcome lands just after a waiting delivery looked.
struct HidesFirstFinds {
    inner: NatsStore,
    hide: AtomicUsize,
    finds: Arc<AtomicUsize>,
}

impl GuardStore for HidesFirstFinds {
    fn create<'a>(
        &'a self,
        kind: RecordKind,
        key: &'a str,
        value: Vec<u8>,
    ) -> StoreFuture<'a, Revision> {
        self.inner.create(kind, key, value)
    }
    fn update<'a>(
        &'a self,
        kind: RecordKind,
        key: &'a str,
        value: Vec<u8>,
        expected: Revision,
    ) -> StoreFuture<'a, Revision> {
        self.inner.update(kind, key, value, expected)
    }
    fn get<'a>(&'a self, kind: RecordKind, key: &'a str) -> StoreFuture<'a, Option<Entry>> {
        self.inner.get(kind, key)
    }
    fn delete<'a>(&'a self, kind: RecordKind, key: &'a str) -> StoreFuture<'a, ()> {
        self.inner.delete(kind, key)
    }
    fn keys<'a>(&'a self, kind: RecordKind, prefix: &'a str) -> StoreFuture<'a, Vec<String>> {
        self.inner.keys(kind, prefix)
    }
    fn age<'a>(
        &'a self,
        kind: RecordKind,
        key: &'a str,
    ) -> StoreFuture<'a, Option<(Revision, Duration)>> {
        self.inner.age(kind, key)
    }
    fn outcome_log(&self) -> Option<&dyn OutcomeLog> {
        self.inner.outcome_log().map(|_| self as &dyn OutcomeLog)
    }
}

impl OutcomeLog for HidesFirstFinds {
    fn commit_outcome<'a>(
        &'a self,
        call: &'a str,
        revision: Revision,
        outcome: OutcomeFact<'a>,
    ) -> StoreFuture<'a, Committed> {
        let log = self.inner.outcome_log().expect("an outcome log");
        log.commit_outcome(call, revision, outcome)
    }
    fn find_outcome<'a>(
        &'a self,
        call: &'a str,
        addresses: &'a [String],
        id: &'a str,
    ) -> StoreFuture<'a, Option<Vec<u8>>> {
        self.finds.fetch_add(1, Ordering::SeqCst);
        let hidden = self
            .hide
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if hidden {
            return StoreFuture::ready(Ok(None));
        }
        self.inner
            .outcome_log()
            .expect("an outcome log")
            .find_outcome(call, addresses, id)
    }
}

/// A request delivered again after its call finished (here: published again outside
/// the de-duplication window) finds the call's record still showing its attempt
/// running when the outcome was committed through the fence. It waits for the lease to
/// lapse, takes the call over, finds the outcome in the log and runs nothing. On older
/// servers the record says finished and the same delivery is acked at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_call_delivered_again_never_runs_again() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let window = Duration::from_millis(500);
    let options = NatsOptions::new(server.url()).duplicate_window(window);
    let (bus, inner) = options.connect_parts().await.unwrap();
    let finds = Arc::new(AtomicUsize::new(0));
    let store = HidesFirstFinds {
        inner,
        hide: AtomicUsize::new(1),
        finds: finds.clone(),
    };
    let worker = Engine::new(bus, store);
    let guard = GuardConfig::default()
        .with_lease_ttl_s(1.0)
        .with_wait_poll_s(0.1);
    let registry = ToolRegistry::new(tools![counted]).unwrap();
    let _handle = ToolHandler::new(registry)
        .guard(guard)
        .attach(&worker)
        .await
        .unwrap();
    let client = options.connect().await.unwrap();
    let run = client.new_run();
    let outcome = run.call("counted", json!({})).await.unwrap();
    assert_eq!(outcome.result(), Some(&json!(1)));
    let mut facts = run.facts().await.unwrap();
    let request = loop {
        let fact: Event = facts.next().await.unwrap().unwrap();
        if fact.kind == event::TOOL_REQUESTED {
            break fact;
        }
    };
    tokio::time::sleep(window + Duration::from_millis(300)).await;
    client.publish(&request).await.unwrap();

    let (probe, _) = options.connect_parts().await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while probe.consumer_pending("aaa-tool-requests").await.unwrap() != (0, 0) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the second delivery was never settled"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(RUNS.load(Ordering::SeqCst), 1, "the tool ran again");
    // One attempt; one outcome under a fence. Before 2.11 the finished record's outcome
    // is published again for the second request, under the same id (outside the
    // window the server keeps it): the same fact twice, which the run reads once.
    let mut outcomes = Vec::new();
    let mut attempts = Vec::new();
    let mut replay = run.facts().await.unwrap();
    while let Ok(Some(fact)) = tokio::time::timeout(Duration::from_millis(500), replay.next()).await
    {
        let fact = fact.unwrap();
        if fact.kind == event::TOOL_COMPLETED || fact.kind == event::TOOL_FAILED {
            outcomes.push((fact.id.clone(), fact.data.clone()));
        }
        if fact.kind == event::ATTEMPT_STARTED {
            attempts.push(fact.data_as::<AttemptFact>().unwrap().attempt);
        }
    }
    assert_eq!(attempts, [1]);
    if fences(&server) {
        assert_eq!(outcomes.len(), 1, "{outcomes:?}");
    } else {
        assert_eq!(outcomes.len(), 2, "{outcomes:?}");
        assert_eq!(outcomes[0], outcomes[1]);
    }
    // Under a fence: the hidden look while waiting, then the one after taking the call
    // over, which found the outcome. Before 2.11 the finished record settles it.
    let expected = if fences(&server) { 2 } else { 0 };
    assert_eq!(finds.load(Ordering::SeqCst), expected);
}
