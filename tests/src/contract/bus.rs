//! The [`Bus`] contract: storing, de-duplicating and reading back (replay, listen,
//! first). The consumers' part is in [`consumers`](super::consumers).

use std::time::Duration;

use aaa_tools::bus::{Bus, BusError, Stored};
use futures::StreamExt;

use super::{Backend, DUPLICATE_WINDOW, PATIENCE, bytes, invalid, next_stored, publish, text};

/// `(subject, body)` of each stored message.
fn seen(stored: &[Stored]) -> Vec<(String, String)> {
    stored
        .iter()
        .map(|s| (s.subject.to_string(), text(&s.payload)))
        .collect()
}

/// `pairs` as owned strings.
fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(s, b)| ((*s).to_owned(), (*b).to_owned()))
        .collect()
}

/// A publish is stored in order: a replay reads what matches from the oldest, in log
/// order with growing sequence numbers, bodies as published (any bytes), then each new
/// match as it is stored, and nothing else.
pub async fn a_replay_reads_the_log_in_order_then_follows(bus: &dyn Bus) {
    publish(bus, "aaa.c.r1.tool.requested", "1").await;
    publish(bus, "aaa.c.r2.tool.requested", "other run").await;
    publish(bus, "aaa.c.r1.tool.completed.c1", "2").await;
    let binary: Vec<u8> = (0..=255).collect();
    bus.publish("aaa.c.r1.bytes", binary.clone().into(), None)
        .await
        .unwrap();
    bus.publish("aaa.c.r1.empty", Vec::new().into(), None)
        .await
        .unwrap();

    let mut run = bus.replay("aaa.c.r1.>").await.unwrap();
    let mut stored = Vec::new();
    for _ in 0..4 {
        stored.push(next_stored(&mut run).await);
    }
    assert_eq!(
        seen(&stored[..2]),
        owned(&[
            ("aaa.c.r1.tool.requested", "1"),
            ("aaa.c.r1.tool.completed.c1", "2")
        ])
    );
    assert_eq!(stored[2].payload.to_vec(), binary, "any bytes come back");
    assert!(stored[3].payload.is_empty(), "an empty body is a body");
    assert!(
        stored.windows(2).all(|w| w[0].seq < w[1].seq),
        "log order is sequence order: {:?}",
        stored.iter().map(|s| s.seq).collect::<Vec<_>>()
    );

    // New matches come as they are stored; others do not.
    publish(bus, "aaa.c.r2.tool.completed.c9", "other run").await;
    publish(bus, "aaa.c.r1.tool.failed.c3", "3").await;
    let next = next_stored(&mut run).await;
    assert_eq!(
        seen(std::slice::from_ref(&next)),
        owned(&[("aaa.c.r1.tool.failed.c3", "3")])
    );
    assert!(next.seq > stored[3].seq);

    // `*` stands for one token; a literal filter for one subject.
    let mut requests = bus.replay("aaa.c.*.tool.requested").await.unwrap();
    let (a, b) = (
        next_stored(&mut requests).await,
        next_stored(&mut requests).await,
    );
    assert_eq!(
        seen(&[a, b]),
        owned(&[
            ("aaa.c.r1.tool.requested", "1"),
            ("aaa.c.r2.tool.requested", "other run")
        ])
    );
    let mut one = bus.replay("aaa.c.r1.tool.completed.c1").await.unwrap();
    assert_eq!(text(&next_stored(&mut one).await.payload), "2");
}

/// Several filters at once: what any of them matches, in log order, once each;
/// a publish matching none of them does not end the wait for the next.
pub async fn replay_any_keeps_log_order(bus: &dyn Bus) {
    publish(bus, "aaa.t.r.tool.requested", "0").await;
    publish(bus, "aaa.t.r.tool.failed", "1").await;
    publish(bus, "aaa.t.r2.tool.completed", "other run").await;
    publish(bus, "aaa.t.r.tool.completed", "2").await;
    let filters = [
        "aaa.t.r.tool.completed".to_owned(),
        "aaa.t.r.tool.failed".to_owned(),
    ];
    let mut replay = bus.replay_any(&filters).await.unwrap();
    assert_eq!(text(&next_stored(&mut replay).await.payload), "1");
    assert_eq!(text(&next_stored(&mut replay).await.payload), "2");
    publish(bus, "aaa.t.r.tool.requested", "3").await;
    publish(bus, "aaa.t.r.tool.failed", "4").await;
    assert_eq!(text(&next_stored(&mut replay).await.payload), "4");

    // Overlapping filters hand out a message once.
    let both = [
        "aaa.t.r.tool.*".to_owned(),
        "aaa.t.*.tool.failed".to_owned(),
    ];
    let mut replay = bus.replay_any(&both).await.unwrap();
    let mut bodies = Vec::new();
    for _ in 0..5 {
        bodies.push(text(&next_stored(&mut replay).await.payload));
    }
    assert_eq!(bodies, ["0", "1", "2", "3", "4"]);

    assert!(bus.replay_any(&[]).await.is_err_and(|e| invalid(&e)));
    let bad = ["aaa.>.b".to_owned()];
    assert!(bus.replay_any(&bad).await.is_err_and(|e| invalid(&e)));
    assert!(bus.replay("aaa.t..x").await.is_err_and(|e| invalid(&e)));
}

/// Publishes through `send`, waiting for its confirmation too.
async fn sent(bus: &dyn Bus, subject: &str, body: &str, id: Option<&str>) -> Result<(), BusError> {
    bus.send(subject, bytes(body), id).await?.await
}

/// What is not a subject is refused by `publish`, `send` (at once or in its
/// confirmation: a bus may find out either way) and `emit`, and nothing is stored.
pub async fn bad_subjects_are_refused_and_not_stored(bus: &dyn Bus) {
    for subject in ["aaa.t.*.x", "aaa.t.>", "aaa.t r.x", "aaa..x", "aaa.x.", ""] {
        let published = bus.publish(subject, bytes("{}"), None).await;
        let emitted = bus.emit(subject, bytes("{}"), None).await;
        let sent = sent(bus, subject, "{}", None).await;
        for error in [published, emitted, sent] {
            let error = error.expect_err(subject);
            assert!(invalid(&error), "{subject:?}: {error}");
        }
    }
    publish(bus, "aaa.t.r.marker", "marker").await;
    let oldest = bus.first("aaa.>").await.unwrap().expect("the marker");
    assert_eq!(text(&oldest.payload), "marker", "nothing else was stored");
}

/// `publish`, `send` and `emit` store in the order they are called, and drop a message
/// whose id was stored within the window (still succeeding); once the window has
/// passed, the id is new again.
pub async fn duplicates_within_the_window_are_dropped(bus: &dyn Bus) {
    let subject = "aaa.t.d.x";
    bus.publish(subject, bytes("1"), Some("d-1")).await.unwrap();
    bus.publish(subject, bytes("again"), Some("d-1"))
        .await
        .unwrap();
    bus.emit(subject, bytes("again"), Some("d-1"))
        .await
        .unwrap();
    sent(bus, subject, "again", Some("d-1")).await.unwrap();
    bus.emit("aaa.t.d.y", bytes("2"), Some("e-2"))
        .await
        .unwrap();
    bus.emit("aaa.t.d.y", bytes("again"), Some("e-2"))
        .await
        .unwrap();
    bus.emit("aaa.t.d.y", bytes("2b"), None).await.unwrap();
    sent(bus, subject, "3", Some("s-3")).await.unwrap();
    sent(bus, subject, "again", Some("s-3")).await.unwrap();
    bus.publish(subject, bytes("4"), None).await.unwrap();
    bus.publish(subject, bytes("5"), None).await.unwrap();
    let started = tokio::time::Instant::now();
    publish(bus, "aaa.t.d.marker", "marker").await;

    let mut replay = bus.replay("aaa.t.d.>").await.unwrap();
    let mut stored = Vec::new();
    for _ in 0..7 {
        stored.push(next_stored(&mut replay).await);
    }
    assert_eq!(
        seen(&stored),
        owned(&[
            (subject, "1"),
            ("aaa.t.d.y", "2"),
            ("aaa.t.d.y", "2b"),
            (subject, "3"),
            (subject, "4"),
            (subject, "5"),
            ("aaa.t.d.marker", "marker"),
        ]),
        "no id without repeats is dropped, every repeat is"
    );

    // Past the window (and a margin for a server's timer), the id is new.
    tokio::time::sleep_until(started + DUPLICATE_WINDOW + Duration::from_secs(2)).await;
    bus.publish(subject, bytes("later"), Some("d-1"))
        .await
        .unwrap();
    assert_eq!(text(&next_stored(&mut replay).await.payload), "later");
}

/// The outcome subjects a listener is asked for (all the JetStream bus listens to).
const OUTCOMES: &str = "aaa.c.r.tool.*.*";

/// `listen` hears what is stored after it returns, and only that, once each (a
/// dropped duplicate is not heard), with the sequence numbers the log gives: what a
/// replay of the same filters reads. What one filter matches comes in log order;
/// across several filters the order is not promised (the JetStream bus listens with
/// a subscription per filter).
pub async fn listen_hears_only_what_is_stored_after_it_returns(bus: &dyn Bus) {
    publish(bus, "aaa.c.r.tool.completed.c0", "before").await;
    let other = "aaa.c.other.tool.failed.*";
    let filters = [OUTCOMES.to_owned(), other.to_owned()];
    let mut heard = bus.listen(&filters).await.unwrap();
    publish(bus, "aaa.c.r.tool.completed.c1", "1").await;
    publish(
        bus,
        "aaa.c.r.tool.requested",
        "not an outcome of the filter",
    )
    .await;
    publish(bus, "aaa.c.r2.tool.completed.c2", "another run").await;
    bus.publish("aaa.c.r.tool.failed.c3", bytes("3"), Some("o-3"))
        .await
        .unwrap();
    bus.publish("aaa.c.r.tool.failed.c3", bytes("again"), Some("o-3"))
        .await
        .unwrap();
    publish(bus, "aaa.c.other.tool.failed.c4", "4").await;
    publish(bus, "aaa.c.r.tool.completed.c5", "5").await;

    let mut got = Vec::new();
    for _ in 0..4 {
        got.push(next_stored(&mut heard).await);
    }
    let (mine, others): (Vec<Stored>, Vec<Stored>) = got
        .iter()
        .cloned()
        .partition(|s| aaa_tools::bus::subject_matches(OUTCOMES, &s.subject));
    assert_eq!(
        seen(&mine),
        owned(&[
            ("aaa.c.r.tool.completed.c1", "1"),
            ("aaa.c.r.tool.failed.c3", "3"),
            ("aaa.c.r.tool.completed.c5", "5"),
        ]),
        "one filter's matches in log order, nothing from before, no duplicate"
    );
    assert_eq!(seen(&others), owned(&[("aaa.c.other.tool.failed.c4", "4")]));
    let mut replay = bus.replay_any(&filters).await.unwrap();
    let before = next_stored(&mut replay).await;
    assert_eq!(text(&before.payload), "before");
    let mut replayed = Vec::new();
    for _ in 0..4 {
        replayed.push(next_stored(&mut replay).await);
    }
    let at = |stored: &[Stored]| {
        let mut at: Vec<(u64, String)> = stored
            .iter()
            .map(|s| (s.seq, s.subject.to_string()))
            .collect();
        at.sort();
        at
    };
    assert_eq!(
        at(&got),
        at(&replayed),
        "a listener and a replay agree on what was stored, and where"
    );
    // It goes on hearing.
    publish(bus, "aaa.c.r.tool.completed.c6", "6").await;
    assert_eq!(text(&next_stored(&mut heard).await.payload), "6");
    assert!(bus.listen(&[]).await.is_err_and(|e| invalid(&e)));
}

/// A listener's stream ends once its bus is closed (after error items, if the bus
/// has something to say). A backend whose bus cannot be closed has nothing to show:
/// this case fails for it, so it is not in its list.
pub async fn listen_ends_when_the_bus_closes(backend: &dyn Backend) {
    let bus = backend.bus().await;
    let filters = [OUTCOMES.to_owned()];
    let mut heard = bus.listen(&filters).await.unwrap();
    publish(&*bus, "aaa.c.r.tool.completed.c1", "1").await;
    assert_eq!(text(&next_stored(&mut heard).await.payload), "1");
    assert!(
        backend.close().await,
        "{} has no bus to close",
        backend.name()
    );
    let ended = tokio::time::timeout(PATIENCE, async {
        while let Some(item) = heard.next().await {
            assert!(item.is_err(), "nothing is stored after the close: {item:?}");
        }
    });
    ended.await.expect("the listener's stream ends");
}

/// `first` is the oldest message kept that matches, or `None`; a bad filter is
/// refused.
pub async fn first_is_the_oldest_match(bus: &dyn Bus) {
    assert_eq!(bus.first("aaa.c.r.>").await.unwrap(), None);
    publish(bus, "aaa.c.r.tool.requested", "request").await;
    publish(bus, "aaa.c.r.tool.completed.c1", "1").await;
    publish(bus, "aaa.c.r.tool.completed.c2", "2").await;
    publish(bus, "aaa.c.r.tool.completed.c1", "1 again").await;
    publish(bus, "aaa.c.s.tool.failed.c3", "3").await;
    let first = |filter: &'static str| async move {
        bus.first(filter).await.unwrap().map(|stored| {
            (
                stored.seq,
                stored.subject.to_string(),
                text(&stored.payload),
            )
        })
    };
    let c1 = first("aaa.c.r.tool.completed.c1").await.expect("c1");
    assert_eq!(
        (c1.1.as_str(), c1.2.as_str()),
        ("aaa.c.r.tool.completed.c1", "1")
    );
    let c2 = first("aaa.c.r.tool.completed.c2").await.expect("c2");
    assert!(c1.0 < c2.0);
    assert_eq!(first("aaa.c.r.tool.*.*").await, Some(c1.clone()));
    assert_eq!(
        first("aaa.c.*.tool.failed.*").await.map(|f| f.2),
        Some("3".into())
    );
    assert_eq!(
        first("aaa.c.r.>").await.map(|f| f.2),
        Some("request".into())
    );
    assert_eq!(first("aaa.c.r.tool.completed.c9").await, None);
    assert_eq!(first("aaa.c.none.>").await, None);
    // The same answer from the replay it stands for.
    let mut replay = bus.replay("aaa.c.r.tool.*.*").await.unwrap();
    assert_eq!(next_stored(&mut replay).await.seq, c1.0);
    let refused = bus.first("aaa.c.>.x").await;
    assert!(refused.is_err_and(|e| invalid(&e)));
}
