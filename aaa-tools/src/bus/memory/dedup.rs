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
//! A long-running bus remembers up to `max_messages` ids, and forgets the oldest at
//! nearly every publish. By then that id is cold: it was written tens of thousands of
//! calls ago. So forgetting one must touch as little memory as it can. The ids' text
//! lies end to end in one ring of bytes (no allocation per id, nothing to free), and
//! the index is a `hashbrown` [`HashTable`] of `(hash, ordinal)` pairs: removing an
//! entry finds it by its stored hash and its ordinal, never reading the text again,
//! and growing the table rehashes from the stored hashes. The text is read only when a
//! new id's full hash equals a remembered one's, which is when it really is a repeat.
//!
//! What it buys, measured: a `VecDeque` of ids in publish order beside a `HashSet` of
//! them (each id one `Arc<str>`), together with the same change to the guard's
//! `MemoryStore` table, took the `dispatch` bench's aged, guarded engine at 64 in flight
//! from 1.75-1.79× rmcp's client/server over a duplex to 1.44-1.72× (three runs each,
//! same machine, one after the other), though `per_call` counted only 1.7% more
//! instructions with the guard on (+815 a call for this ring alone): the cost is in
//! the cold memory an aged engine frees, which instruction counts do not see.

use std::collections::VecDeque;
use std::hash::BuildHasher;

use hashbrown::HashTable;
use tokio::time::Instant;

use crate::bus::Retention;

/// One remembered id: when it was published, its hash, and where its text is.
struct Seen {
    at: Instant,
    hash: u64,
    /// Where its text starts, counted from the first byte ever written.
    start: u64,
    len: usize,
}

/// Publish ids seen, oldest first, with an index by hash.
pub(super) struct RecentIds {
    /// Every remembered id's text, oldest first, end to end.
    text: VecDeque<u8>,
    /// Every remembered id, oldest first: `order[i]` has ordinal `first + i`.
    order: VecDeque<Seen>,
    /// The ordinal of `order[0]`.
    first: u64,
    /// Where `text[0]` is, counted from the first byte ever written.
    text_start: u64,
    /// `(hash, ordinal)` of each remembered id.
    index: HashTable<(u64, u64)>,
    hasher: foldhash::fast::RandomState,
}

impl RecentIds {
    pub(super) fn new() -> Self {
        RecentIds {
            text: VecDeque::new(),
            order: VecDeque::new(),
            first: 0,
            text_start: 0,
            index: HashTable::new(),
            hasher: foldhash::fast::RandomState::default(),
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
        self.holds(self.hasher.hash_one(id), id)
    }

    /// Whether `id`, whose hash is `hash`, is remembered.
    fn holds(&self, hash: u64, id: &str) -> bool {
        self.index
            .find(hash, |&(h, ordinal)| {
                h == hash && self.text_of(ordinal).eq(id.bytes())
            })
            .is_some()
    }

    /// Remembers `id`, published at `at`, unless it does already: returns whether it
    /// was new. To make room it first forgets the oldest ids while it holds `limit` or
    /// more.
    fn remember(&mut self, id: &str, at: Instant, limit: usize) -> bool {
        let hash = self.hasher.hash_one(id);
        if self.holds(hash, id) {
            return false;
        }
        self.forget_while(|_, held| held >= limit);
        let ordinal = self.first + self.order.len() as u64;
        let start = self.text_start + self.text.len() as u64;
        self.text.extend(id.as_bytes());
        self.order.push_back(Seen {
            at,
            hash,
            start,
            len: id.len(),
        });
        self.index
            .insert_unique(hash, (hash, ordinal), |&(hash, _)| hash);
        true
    }

    /// Forgets the oldest ids while `stale(published at, ids remembered)` says so.
    fn forget_while(&mut self, stale: impl Fn(Instant, usize) -> bool) {
        while let Some(oldest) = self.order.front() {
            if !stale(oldest.at, self.order.len()) {
                break;
            }
            let (hash, len, ordinal) = (oldest.hash, oldest.len, self.first);
            self.order.pop_front();
            self.first += 1;
            self.text.drain(..len);
            self.text_start += len as u64;
            if let Ok(entry) = self.index.find_entry(hash, |&(_, o)| o == ordinal) {
                entry.remove();
            }
        }
    }

    /// The text of the id with `ordinal` (which is remembered).
    fn text_of(&self, ordinal: u64) -> impl Iterator<Item = u8> + '_ {
        let seen = &self.order[(ordinal - self.first) as usize];
        let start = (seen.start - self.text_start) as usize;
        self.text.range(start..start + seen.len).copied()
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

        // Forgotten ids can be remembered again, and the ring keeps their text apart.
        for i in 0..50 {
            assert!(ids.remember(&id(i), cutoff, usize::MAX));
        }
        assert!((0..50).chain(900..1_000).all(|i| ids.contains(&id(i))));
        ids.forget_while(|_, _| true);
        assert!((0..1_000).all(|i| !ids.contains(&id(i))));
        assert!(ids.text.is_empty() && ids.index.is_empty());
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
