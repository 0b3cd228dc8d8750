//! The log: every message the bus keeps, in publish order, with an index by run, and
//! the trimming that [`Retention`] asks for.
//!
//! # The part of the [`Bus`](crate::bus::Bus) contract this carries
//!
//! - A publish that returns `Ok` is **stored**: every later replay, consumer and
//!   lookup can see it, under the next sequence number. Sequence numbers grow by one
//!   per stored message and are never reused, so log order is sequence order.
//! - A publish on a subject that is not one (see [`subject`])
//!   fails and stores nothing.
//! - What a bus keeps is its own business (a JetStream stream has its limits, this
//!   log its [`Retention`]), with one promise of this bus beyond the contract: a
//!   message a consumer has not settled, or a live replay has not read, stays.
//!
//! # How it is laid out
//!
//! The messages sit in a `VecDeque`, oldest first: `kept[i]` has sequence number
//! `first_seq + i`, so a lookup by sequence number is an index. Trimming pops from the
//! front only, so a message still held keeps everything newer with it.
//!
//! The engine's subjects start with their run (`aaa.<tenant>.<run>.…`), and whoever
//! reads a run's facts reads only those: each run has a [`RunIndex`] of its sequence
//! numbers, so a replay or lookup of one run reads that run's messages, not the whole
//! log. The index also keeps one shared copy of each subject the run publishes on
//! again and again (its requests, approvals: not its outcomes, whose subjects end in
//! a call's id), with the [`Wakes`] worked out for it: a run uses a handful of
//! subjects, so a long log holds one allocation less per message, and a publish on a
//! known subject is neither checked nor matched against every filter again. The runs
//! are a `hashbrown` map (the table std's map is built on) for its `entry_ref`: one
//! lookup by the borrowed run name finds the run or the place for it, and a key is
//! allocated only for a new run.

use std::collections::VecDeque;
use std::sync::Arc;

use hashbrown::HashMap;
use hashbrown::hash_map::EntryRef;
use smallvec::SmallVec;
use tokio::time::Instant;

use super::Hasher;
use super::filters::Wakes;
use crate::bus::{BusError, Payload, Retention, Stored, subject};

/// The messages kept, oldest first, and the index of each run's messages.
pub(super) struct Log {
    /// The messages kept, oldest first: `kept[i]` has sequence number `first_seq + i`.
    kept: VecDeque<Kept>,
    /// The sequence number of `kept[0]` (of the next publish while the log is empty).
    first_seq: u64,
    /// The messages kept, by their subject's first three tokens (`aaa.<tenant>.<run>`).
    runs: HashMap<String, RunIndex, Hasher>,
}

/// A message in the log, and when it was published (for [`Retention::max_age`]).
struct Kept {
    stored: Stored,
    at: Instant,
}

/// What the log holds of one run (one subject prefix).
pub(super) struct RunIndex {
    /// The sequence numbers of its messages, oldest first, so replaying one run reads
    /// that run's messages, not the whole log.
    seqs: VecDeque<u64>,
    /// The subjects its messages were published on (a run uses a handful, again and
    /// again): its messages share them instead of holding a copy each, so a long log
    /// holds, and later frees, one allocation less per message.
    subjects: SmallVec<[Interned; 4]>,
}

/// A subject a run publishes on: the copy its messages share, and whom a publish on
/// it wakes, once worked out.
pub(super) struct Interned {
    subject: Arc<str>,
    /// Whom a publish on it wakes, as last worked out ([`Wakes::remembered`]).
    pub(super) wakes: Option<Wakes>,
}

impl RunIndex {
    /// Where this run keeps `subject`, if it published on it before.
    fn known(&self, subject: &str) -> Option<usize> {
        self.subjects.iter().position(|s| *s.subject == *subject)
    }

    /// Keeps a copy of `subject` (which it does not know yet) for this run's messages
    /// to share; returns where.
    fn intern(&mut self, subject: &str) -> usize {
        self.subjects.push(Interned {
            subject: Arc::from(subject),
            wakes: None,
        });
        self.subjects.len() - 1
    }
}

/// A message just appended: its sequence number, and its subject's shared copy when
/// its run keeps one (with the wakes remembered for it).
pub(super) struct Appended<'a> {
    pub(super) seq: u64,
    pub(super) interned: Option<&'a mut Interned>,
}

/// The first three tokens of a subject, when it has more: the run whose index holds
/// it. Every publish and every trimmed message asks, so the dots are found with memchr,
/// the well-kept vectorised byte search (the long ids come first, and a byte-by-byte
/// scan of them cost a publish hundreds of instructions).
pub(super) fn run_of(subject: &str) -> Option<&str> {
    let third = memchr::memchr_iter(b'.', subject.as_bytes()).nth(2)?;
    Some(&subject[..third])
}

/// The run whose index holds every subject `filter` matches: its first three tokens,
/// when they are literal and the filter has more.
pub(super) fn run_of_filter(filter: &str) -> Option<&str> {
    run_of(filter).filter(|run| !run.split('.').any(|t| t == "*" || t == ">"))
}

impl Log {
    pub(super) fn new() -> Self {
        Log {
            kept: VecDeque::new(),
            first_seq: 1,
            runs: HashMap::default(),
        }
    }

    /// The number of messages kept.
    pub(super) fn len(&self) -> usize {
        self.kept.len()
    }

    /// The sequence number of the oldest message kept (of the next publish when none).
    pub(super) fn first_seq(&self) -> u64 {
        self.first_seq
    }

    /// The sequence number the next publish gets.
    pub(super) fn next_seq(&self) -> u64 {
        self.first_seq + self.kept.len() as u64
    }

    /// Message `seq`, if the log still holds it.
    pub(super) fn get(&self, seq: u64) -> Option<&Stored> {
        let index = usize::try_from(seq.checked_sub(self.first_seq)?).ok()?;
        self.kept.get(index).map(|kept| &kept.stored)
    }

    /// The sequence numbers of the messages kept, oldest first.
    #[cfg(test)]
    pub(super) fn seqs(&self) -> Vec<u64> {
        self.kept.iter().map(|kept| kept.stored.seq).collect()
    }

    /// The sequence numbers of run `run`'s messages from `from` on, oldest first;
    /// `None` when the log holds nothing of that run.
    pub(super) fn run_from(&self, run: &str, from: u64) -> Option<impl Iterator<Item = u64>> {
        let seqs = &self.runs.get(run)?.seqs;
        let start = seqs.partition_point(|seq| *seq < from);
        Some(seqs.range(start..).copied())
    }

    /// Appends a message on `subject`, published `now`, if `admit` lets it in (it is
    /// asked once the subject is known to be good: the de-duplication of message ids).
    /// `Ok(None)`: not admitted, nothing stored.
    pub(super) fn append(
        &mut self,
        subject: &str,
        payload: Payload,
        now: Instant,
        admit: impl FnOnce() -> bool,
    ) -> Result<Option<Appended<'_>>, BusError> {
        let seq = self.next_seq();
        // The subject's dots are found once, for both questions below (each search for
        // a dot is a call of memchr: asking each question from the start cost a guarded
        // call 540 more instructions in `per_call`).
        let mut dots = memchr::memchr_iter(b'.', subject.as_bytes());
        // One lookup of the run (as `run_of` finds it), kept until the message is in:
        // most publishes extend a run already indexed, and allocate no key.
        let run = dots
            .nth(2)
            .map(|third| self.runs.entry_ref(&subject[..third]));
        // A run publishes on a handful of subjects again and again, and on one subject
        // per call once (an outcome's, which ends in the call's id): only the first
        // kind (up to five tokens) is worth keeping for the run's messages to share.
        let shared = dots.nth(1).is_none();
        // A subject this run published on before was checked then.
        let known = match &run {
            Some(EntryRef::Occupied(run)) if shared => run.get().known(subject),
            _ => None,
        };
        if known.is_none() {
            subject::check_publish_subject(subject)?;
        }
        if !admit() {
            return Ok(None);
        }
        let run = run.map(|entry| match entry {
            EntryRef::Occupied(run) => {
                let run = run.into_mut();
                run.seqs.push_back(seq);
                run
            }
            EntryRef::Vacant(vacant) => vacant.insert(RunIndex {
                seqs: VecDeque::from([seq]),
                subjects: SmallVec::new(),
            }),
        });
        let (shared_subject, interned) = match run.filter(|_| shared) {
            Some(run) => {
                let at = known.unwrap_or_else(|| run.intern(subject));
                let interned = &mut run.subjects[at];
                (interned.subject.clone(), Some(interned))
            }
            None => (Arc::from(subject), None),
        };
        self.kept.push_back(Kept {
            stored: Stored {
                seq,
                subject: shared_subject,
                payload,
            },
            at: now,
        });
        Ok(Some(Appended { seq, interned }))
    }

    /// Removes the oldest messages while the log is over `retention`'s limits and
    /// `held` says nobody needs the oldest; returns them, to be dropped once the bus's
    /// lock is released (their memory is cold by then, and freeing it takes a while).
    pub(super) fn trim(
        &mut self,
        now: Instant,
        retention: &Retention,
        held: impl Fn(&Stored) -> bool,
    ) -> SmallVec<[Stored; 2]> {
        let mut removed = SmallVec::new();
        while let Some(front) = self.kept.front() {
            let too_old = retention
                .max_age()
                .is_some_and(|age| now.duration_since(front.at) > age);
            if !(self.kept.len() > retention.max_messages() || too_old) || held(&front.stored) {
                break;
            }
            let Some(kept) = self.kept.pop_front() else {
                break;
            };
            self.first_seq += 1;
            // The oldest message is the oldest of its run too.
            if let Some(name) = run_of(&kept.stored.subject)
                && let Some(run) = self.runs.get_mut(name)
            {
                run.seqs.pop_front();
                if run.seqs.is_empty() {
                    self.runs.remove(name);
                }
            }
            removed.push(kept.stored);
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::StreamExt;

    use super::super::publish;
    use crate::bus::{Bus, ConsumerSpec, MemoryBus, Retention};

    fn kept_seqs(bus: &MemoryBus) -> Vec<u64> {
        bus.shared.lock().log.seqs()
    }

    #[test]
    fn runs_are_found_by_their_first_three_tokens() {
        assert_eq!(super::run_of("aaa.t.r.tool.x"), Some("aaa.t.r"));
        assert_eq!(super::run_of("aaa.t.r"), None);
        assert_eq!(super::run_of_filter("aaa.t.r.>"), Some("aaa.t.r"));
        assert_eq!(super::run_of_filter("aaa.*.r.>"), None);
    }

    #[tokio::test(start_paused = true)]
    async fn released_messages_beyond_the_limit_are_removed_oldest_first() {
        let bus = MemoryBus::with_retention(Retention::default().with_max_messages(3));
        let spec = ConsumerSpec::new("work", ["aaa.t.*.q"]);
        let mut sub = bus.subscribe(&spec).await.unwrap();
        for i in 1..=10 {
            publish(&bus, &format!("aaa.t.r{}.q", i % 2), &i.to_string()).await;
            sub.next().await.unwrap().ack().await.unwrap();
        }
        assert_eq!(kept_seqs(&bus), [8, 9, 10]);
        // A replay starts at the oldest message kept, whole-log or one run's.
        let mut all = bus.replay("aaa.>").await.unwrap();
        assert_eq!(all.next().await.unwrap().unwrap().seq, 8);
        let mut run = bus.replay("aaa.t.r1.q").await.unwrap();
        assert_eq!(&run.next().await.unwrap().unwrap().payload[..], b"9");
        drop((all, run));
        // A run's index goes with its last message.
        for i in 11..=13 {
            publish(&bus, "aaa.t.r2.q", &i.to_string()).await;
            sub.next().await.unwrap().ack().await.unwrap();
        }
        assert_eq!(kept_seqs(&bus), [11, 12, 13]);
        let state = bus.shared.lock();
        let runs: Vec<&String> = state.log.runs.keys().collect();
        assert_eq!(runs, ["aaa.t.r2"]);
        assert_eq!(state.log.runs["aaa.t.r2"].seqs, [11, 12, 13]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_message_a_consumer_still_needs_is_kept() {
        let bus = MemoryBus::with_retention(Retention::default().with_max_messages(2));
        let spec = ConsumerSpec::new("work", ["q"]).with_ack_wait(Duration::from_secs(10));
        let mut sub = bus.subscribe(&spec).await.unwrap();
        publish(&bus, "q", "held").await;
        let held = sub.next().await.unwrap();
        // Not delivered yet (matched), and not looked at yet by a new consumer: kept.
        for i in 0..5 {
            publish(&bus, "q", &i.to_string()).await;
        }
        assert_eq!(kept_seqs(&bus), [1, 2, 3, 4, 5, 6]);
        let mut late = bus
            .subscribe(&ConsumerSpec::new("late", ["q"]))
            .await
            .unwrap();
        assert_eq!(
            late.next().await.unwrap().seq,
            1,
            "a new consumer reads the oldest kept"
        );
        // Past its deadline the held message comes back whole.
        tokio::time::sleep(Duration::from_secs(11)).await;
        let again = sub.next().await.unwrap();
        assert_eq!(again.delivery_count, 2);
        drop(held);
        assert_eq!((again.seq, &again.payload[..]), (1, &b"held"[..]));
        again.ack().await.unwrap();
        while let Ok(Ok(message)) = tokio::time::timeout(Duration::from_secs(1), sub.next()).await {
            message.ack().await.unwrap();
        }
        // `late` took seq 1 and holds it: nothing can go yet.
        publish(&bus, "other", "x").await;
        assert_eq!(kept_seqs(&bus).first(), Some(&1));
        drop(late);
        let mut late = bus
            .subscribe(&ConsumerSpec::new("late", ["q"]))
            .await
            .unwrap();
        loop {
            let message = late.next().await.unwrap();
            message.ack().await.unwrap();
            if message.seq == 6 {
                break;
            }
        }
        // Everything is settled: the next publish trims the log to its limit.
        publish(&bus, "other", "y").await;
        assert_eq!(kept_seqs(&bus), [7, 8]);
        assert_eq!(bus.ack_pending("work") + bus.ack_pending("late"), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_live_replay_keeps_what_it_has_not_read() {
        let bus = MemoryBus::with_retention(Retention::default().with_max_messages(1));
        let mut replay = bus.replay("aaa.t.a.>").await.unwrap();
        publish(&bus, "aaa.t.a.x", "1").await;
        publish(&bus, "aaa.t.a.x", "2").await;
        publish(&bus, "aaa.t.b.x", "other run").await;
        assert_eq!(kept_seqs(&bus), [1, 2, 3], "nothing is read yet");
        // The replay takes both its messages under one lock: the log holds neither
        // for it any more, and it still hands out the second.
        assert_eq!(&replay.next().await.unwrap().unwrap().payload[..], b"1");
        publish(&bus, "aaa.t.b.x", "other run").await;
        assert_eq!(kept_seqs(&bus), [4]);
        assert_eq!(&replay.next().await.unwrap().unwrap().payload[..], b"2");
        publish(&bus, "aaa.t.a.x", "5").await;
        publish(&bus, "aaa.t.b.x", "other run").await;
        assert_eq!(kept_seqs(&bus), [5, 6], "5 is not read yet");
        assert_eq!(&replay.next().await.unwrap().unwrap().payload[..], b"5");
        // Read up to date (and then beyond what it matches): nothing is held for it.
        publish(&bus, "aaa.t.b.x", "other run").await;
        assert_eq!(kept_seqs(&bus), [7]);
        // A dropped replay holds nothing.
        let unread = bus.replay("aaa.t.b.>").await.unwrap();
        publish(&bus, "aaa.t.b.x", "8").await;
        assert_eq!(kept_seqs(&bus), [7, 8]);
        drop(unread);
        publish(&bus, "aaa.t.b.x", "9").await;
        assert_eq!(kept_seqs(&bus), [9]);
    }

    #[tokio::test(start_paused = true)]
    async fn old_released_messages_are_removed_at_the_next_publish() {
        let retention = Retention::unlimited().with_max_age(Duration::from_secs(60));
        let bus = MemoryBus::with_retention(retention);
        publish(&bus, "q", "old").await;
        tokio::time::sleep(Duration::from_secs(30)).await;
        publish(&bus, "q", "newer").await;
        tokio::time::sleep(Duration::from_secs(31)).await;
        assert_eq!(
            kept_seqs(&bus),
            [1, 2],
            "nothing is removed between publishes"
        );
        publish(&bus, "q", "new").await;
        assert_eq!(kept_seqs(&bus), [2, 3]);
    }
}
