//! Subject filters: which consumers and replays a message goes to.
//!
//! # The part of the [`Bus`](crate::bus::Bus) contract this carries
//!
//! A consumer delivers, and a replay or listener hands out, exactly the messages whose
//! subject one of its filters matches, by the one rule of
//! [`subject_matches`] (NATS's). Filters are checked when
//! the consumer, replay or lookup is made: a bad one fails then with
//! [`BusError::Invalid`](crate::bus::BusError::Invalid), never later.
//!
//! # What a publish wakes
//!
//! A task waiting for a message is woken only by a publish it matches: every needless
//! wake-up costs a call a task switch, often onto another thread. So each publish
//! matches its subject against every consumer's and live replay's filters. A run
//! publishes on a handful of subjects again and again, so the answer, [`Wakes`], is
//! kept with the run's copy of the subject (see [`log`](super::log)) and read back at
//! the next publish on it, until a consumer or replay comes or goes (the bus's
//! *generation* then changes, and it is worked out again).

use crate::bus::subject_matches;

/// The filters of a consumer or replay, checked when it was made.
pub(super) struct Filters {
    all: Vec<String>,
}

impl Filters {
    /// `all`, each checked already.
    pub(super) fn new(all: Vec<String>) -> Self {
        Filters { all }
    }

    /// The filters, as given.
    pub(super) fn all(&self) -> &[String] {
        &self.all
    }

    /// Whether any of them matches `subject`.
    pub(super) fn matches(&self, subject: &str) -> bool {
        self.all
            .iter()
            .any(|filter| subject_matches(filter, subject))
    }
}

/// Which consumers and replays a subject matches, as bits in the order of the bus's
/// consumer map and replay list, which hold still within one generation.
#[derive(Clone, Copy)]
pub(super) struct Wakes {
    generation: u64,
    consumers: u64,
    replays: u64,
}

impl Wakes {
    /// Whom a publish wakes: read from `remembered` (the run's copy of the subject,
    /// when it keeps one) if that was worked out in this `generation`, else worked
    /// out now with `work_out` (and remembered there).
    pub(super) fn remembered(
        remembered: Option<&mut Option<Wakes>>,
        generation: u64,
        work_out: impl FnOnce() -> Option<Wakes>,
    ) -> Option<Wakes> {
        match remembered {
            Some(Some(wakes)) if wakes.generation == generation => Some(*wakes),
            Some(slot) => {
                *slot = work_out();
                *slot
            }
            None => work_out(),
        }
    }

    /// The wakes of `generation` from whether each consumer and each replay matches,
    /// in the order of the bus's consumer map and replay list. `None` when there are
    /// too many of either for the bits: each publish then matches them itself.
    pub(super) fn of(
        generation: u64,
        consumers: impl ExactSizeIterator<Item = bool>,
        replays: impl ExactSizeIterator<Item = bool>,
    ) -> Option<Wakes> {
        if consumers.len() > 64 || replays.len() > 64 {
            return None;
        }
        Some(Wakes {
            generation,
            consumers: bits(consumers),
            replays: bits(replays),
        })
    }

    /// Whether the `i`th consumer matches.
    pub(super) fn consumer(&self, i: usize) -> bool {
        self.consumers >> i & 1 == 1
    }

    /// Whether the `i`th replay matches.
    pub(super) fn replay(&self, i: usize) -> bool {
        self.replays >> i & 1 == 1
    }
}

/// `matched` as bits, the first one lowest.
fn bits(matched: impl Iterator<Item = bool>) -> u64 {
    matched
        .enumerate()
        .fold(0, |bits, (i, m)| bits | (u64::from(m) << i))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::StreamExt;

    use super::super::publish;
    use crate::bus::{Bus, ConsumerSpec, MemoryBus};

    /// A run remembers whom a publish on each of its subjects wakes; a consumer and a
    /// replay that come later still get the next publish on a subject it knows.
    #[tokio::test(start_paused = true)]
    async fn a_late_consumer_and_replay_get_publishes_on_a_known_subject() {
        let bus = MemoryBus::new();
        let subject = "aaa.t.r.tool.requested";
        publish(&bus, subject, "1").await;
        let spec = ConsumerSpec::new("late", ["aaa.*.*.tool.requested"]);
        let mut sub = bus.subscribe(&spec).await.unwrap();
        let mut replay = bus.replay(subject).await.unwrap();
        // Both have read the whole log: the next publish is matched as it is made.
        let first = sub.next().await.unwrap();
        let replayed = replay.next().await.unwrap().unwrap();
        assert_eq!(
            (&first.payload[..], &replayed.payload[..]),
            (&b"1"[..], &b"1"[..])
        );
        publish(&bus, subject, "2").await;
        let wait = Duration::from_secs(1);
        let second = tokio::time::timeout(wait, sub.next())
            .await
            .expect("the late consumer gets the publish")
            .unwrap();
        let replayed = tokio::time::timeout(wait, replay.next())
            .await
            .expect("the late replay gets the publish")
            .unwrap()
            .unwrap();
        assert_eq!(
            (&second.payload[..], &replayed.payload[..]),
            (&b"2"[..], &b"2"[..])
        );
    }
}
