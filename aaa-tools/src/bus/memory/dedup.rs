//! De-duplication: a publish whose message id the bus saw within its window is
//! dropped.
//!
//! # The part of the [`Bus`](crate::bus::Bus) contract this carries
//!
//! A publish (or send, or emit) with a message id that an earlier stored publish had,
//! within the bus's de-duplication window, stores nothing and still succeeds: the
//! publisher cannot tell, and need not (JetStream's `Nats-Msg-Id`). That is what makes
//! a retried publish safe. A publish without an id is never a duplicate. Here the
//! window is [`Retention::duplicate_window`](crate::bus::Retention::duplicate_window),
//! and at most [`Retention::max_messages`](crate::bus::Retention::max_messages) ids are
//! remembered (the oldest are forgotten first).
//!
//! # [`RecentIds`]
//!
//! The ids in the order they were published, and a set of them to look a new id up
//! in: forgetting the oldest pops it from the front and takes it out of the set. Each
//! id's text is allocated once, shared by both. The set hashes with `foldhash`'s
//! randomly seeded hasher, as the rest of the embedded bus does.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use tokio::time::Instant;

use crate::bus::Retention;

/// Publish ids seen, oldest first, with a set to find them by.
pub(super) struct RecentIds {
    /// Every remembered id, oldest first, with when it was published.
    order: VecDeque<(Instant, Arc<str>)>,
    /// Every remembered id.
    ids: HashSet<Arc<str>, foldhash::fast::RandomState>,
}

impl RecentIds {
    pub(super) fn new() -> Self {
        RecentIds {
            order: VecDeque::new(),
            ids: HashSet::default(),
        }
    }

    /// Whether a publish with `msg_id`, at `now`, is to be stored: first forgets the
    /// ids older than `retention`'s window, then remembers `msg_id` unless it is one
    /// of those left (a duplicate: `false`). A publish without an id is stored.
    pub(super) fn admit(
        &mut self,
        msg_id: Option<&str>,
        now: Instant,
        retention: &Retention,
    ) -> bool {
        let window = retention.duplicate_window();
        self.forget_while(|at, _| now.duration_since(at) >= window);
        msg_id.is_none_or(|id| self.remember(id, now, retention.max_messages()))
    }

    /// Whether `id` is remembered.
    #[cfg(test)]
    fn contains(&self, id: &str) -> bool {
        self.ids.contains(id)
    }

    /// Remembers `id`, published at `at`, unless it does already: returns whether it
    /// was new. To make room it first forgets the oldest ids while it holds `limit` or
    /// more.
    fn remember(&mut self, id: &str, at: Instant, limit: usize) -> bool {
        if self.ids.contains(id) {
            return false;
        }
        self.forget_while(|_, held| held >= limit);
        let id: Arc<str> = Arc::from(id);
        self.ids.insert(id.clone());
        self.order.push_back((at, id));
        true
    }

    /// Forgets the oldest ids while `stale(published at, ids remembered)` says so.
    fn forget_while(&mut self, stale: impl Fn(Instant, usize) -> bool) {
        while let Some((at, _)) = self.order.front() {
            if !stale(*at, self.order.len()) {
                break;
            }
            if let Some((_, id)) = self.order.pop_front() {
                self.ids.remove(&id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Ids of every length from 0 to 40, so the text ring holds them unevenly.
    fn id(i: usize) -> String {
        format!("{i}-{}", "x".repeat(i % 41))
    }

    #[test]
    fn remembers_ids_until_they_are_forgotten_oldest_first() {
        let start = Instant::now();
        let mut ids = RecentIds::new();
        for i in 0..1_000 {
            assert!(ids.remember(&id(i), start + Duration::from_millis(i as u64), usize::MAX));
        }
        assert!(
            !ids.remember(&id(7), start, usize::MAX),
            "a remembered id is not new"
        );
        assert!((0..1_000).all(|i| ids.contains(&id(i))));
        assert!(!ids.contains("1000-"), "an id never inserted");
        assert!(
            !ids.contains("7-xxxxxx"),
            "a prefix of a remembered id is not it"
        );
        assert!(!ids.contains(""), "nor is the empty id");

        // By count: keep the newest 600.
        ids.forget_while(|_, held| held > 600);
        assert!((0..400).all(|i| !ids.contains(&id(i))));
        assert!((400..1_000).all(|i| ids.contains(&id(i))));

        // By age: everything published before the 900th millisecond.
        let cutoff = start + Duration::from_millis(900);
        ids.forget_while(|at, _| at < cutoff);
        assert!((0..900).all(|i| !ids.contains(&id(i))));
        assert!((900..1_000).all(|i| ids.contains(&id(i))));

        // Forgotten ids can be remembered again.
        for i in 0..50 {
            assert!(ids.remember(&id(i), cutoff, usize::MAX));
        }
        assert!((0..50).chain(900..1_000).all(|i| ids.contains(&id(i))));
        ids.forget_while(|_, _| true);
        assert!((0..1_000).all(|i| !ids.contains(&id(i))));
        assert!(ids.order.is_empty() && ids.ids.is_empty());
    }

    /// The bus drops a repeated id within its window (2 minutes by default, like
    /// JetStream's), and stores it again after.
    #[tokio::test(start_paused = true)]
    async fn publishes_dedupe_by_id_within_the_window() {
        use crate::bus::{Bus, MemoryBus};
        let bus = MemoryBus::new();
        bus.publish("q", b"1".to_vec().into(), Some("id-1"))
            .await
            .unwrap();
        bus.publish("q", b"1".to_vec().into(), Some("id-1"))
            .await
            .unwrap();
        assert_eq!(bus.len(), 1);
        tokio::time::sleep(Duration::from_secs(121)).await;
        bus.publish("q", b"1".to_vec().into(), Some("id-1"))
            .await
            .unwrap();
        assert_eq!(bus.len(), 2);
        assert!(bus.publish("q.*", Vec::new().into(), None).await.is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn publish_ids_are_remembered_within_the_limits() {
        use crate::bus::{Bus, MemoryBus, Retention};
        use futures::StreamExt;
        let retention = Retention::default()
            .with_max_messages(2)
            .with_duplicate_window(Duration::from_secs(5));
        let bus = MemoryBus::with_retention(retention);
        let kept_seqs = || bus.shared.lock().log.seqs();
        let publish_as = async |id: &str| {
            bus.publish("q", id.as_bytes().to_vec().into(), Some(id))
                .await
                .unwrap();
        };
        // The second `a` is a duplicate; then `c` makes `a` the third id back,
        // forgotten: the third `a` is stored, and the second `c` is a duplicate.
        for id in ["a", "b", "a", "c", "a", "c"] {
            publish_as(id).await;
        }
        let mut replay = bus.replay("q").await.unwrap();
        let mut bodies = Vec::new();
        for _ in 0..2 {
            bodies.push(replay.next().await.unwrap().unwrap().payload.to_vec());
        }
        assert_eq!(bodies, [b"c".to_vec(), b"a".to_vec()]);
        assert_eq!(kept_seqs(), [3, 4]);
        tokio::time::sleep(Duration::from_secs(6)).await;
        publish_as("c").await;
        assert_eq!(kept_seqs().last(), Some(&5), "past the window");
    }
}
