//! Reading the log: replays, listeners and lookups.
//!
//! # The part of the [`Bus`](crate::bus::Bus) contract this carries
//!
//! - [`replay`](crate::bus::Bus::replay) and
//!   [`replay_any`](crate::bus::Bus::replay_any): every message the bus keeps that
//!   matches, **in log order**, from the oldest, then each new one as it is stored. The
//!   stream does not end while the bus lives. Without a filter, or with a bad one, the
//!   call fails with [`BusError::Invalid`].
//! - [`listen`](crate::bus::Bus::listen): a replay that starts at the end of the log:
//!   nothing stored before it returned, everything stored after, in log order. In
//!   process nothing can be missed, so this bus never yields an error item (a bus
//!   whose listener can drop, a NATS connection, says so with one). Nor does this bus
//!   ever close: a stream holds it, so a listener runs until it is dropped.
//! - [`first`](crate::bus::Bus::first): the oldest message kept that matches, or
//!   `None`; one lookup, not a stream.
//!
//! # How it works here
//!
//! A replay reads in two parts, split at the sequence number the log had reached when
//! it was opened. The *backlog* before it is read from the log, through a cursor (the
//! first sequence number not looked at) that trimming respects, up to [`REPLAY_BATCH`]
//! matching messages under one lock of the bus; when every filter names one run
//! (`aaa.<tenant>.<run>.…`), from that run's index (see [`log`](super::log)) instead of
//! the whole log. What is published *after* it opened, each publish hands to it
//! directly, in its inbox: a publish matches its subject against every replay anyway
//! to know whom to wake, so the replay does not match it again, nor look for it in the
//! log: the engine's outcome listener cost a guarded call 1,650 instructions less so
//! (`per_call`, 64 in flight: 46,170 to 44,520), most of what it cost. With the
//! append's single search for a subject's dots (see [`log`](super::log)), it took the
//! guarded engine in `dispatch` (64 in flight) from a median 1.76× rmcp's
//! client/server over a duplex to 1.90× (four alternating runs each, on a shared
//! two-core machine). The inbox is read once the backlog is, so the
//! stream keeps log order, and a message in an inbox stays in the log until it is
//! read, as a cursor would keep it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use futures::stream::{self, BoxStream};
use smallvec::SmallVec;
use tokio::sync::Notify;

use super::Shared;
use super::filters::{Filters, Wakes};
use super::log::{Log, run_of_filter};
use crate::bus::{BusError, Stored, subject};

/// The most messages a replay takes from the log's backlog under one lock.
pub(super) const REPLAY_BATCH: usize = 64;

/// A replay stream as the bus sees it: what wakes it, how far it has read its
/// backlog, and what publishes handed it since it opened; all of which the log keeps
/// while it has not read it.
pub(super) struct Replay {
    pub(super) filters: Filters,
    wake: Arc<Notify>,
    /// Where the backlog ends: the first sequence number published after it opened.
    live: u64,
    /// The first sequence number of the backlog not looked at (changed under the bus's
    /// lock).
    next: AtomicU64,
    /// The matching messages published since it opened, not read yet (pushed under the
    /// bus's lock).
    inbox: Mutex<VecDeque<Stored>>,
}

impl Replay {
    /// Whether this replay has yet to read message `seq`, on `subject`, and wants it.
    pub(super) fn holds(&self, seq: u64, subject: &str) -> bool {
        if seq >= self.live {
            return self.inbox().front().is_some_and(|s| s.seq == seq);
        }
        self.next.load(Ordering::Relaxed) <= seq && self.filters.matches(subject)
    }

    fn inbox(&self) -> std::sync::MutexGuard<'_, VecDeque<Stored>> {
        // Nothing panics while the inbox is locked.
        self.inbox.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Forgets the replays whose streams were dropped; a change of the list's order moves
/// the bus to a new generation (see [`Wakes`]).
pub(super) fn forget_dropped(replays: &mut Vec<Weak<Replay>>, generation: &mut u64) {
    let replaying = replays.len();
    replays.retain(|replay| replay.strong_count() > 0);
    if replays.len() != replaying {
        *generation += 1;
    }
}

/// Hands `stored`, just published, to the replays it matches, and adds them to `wake`
/// (woken once the bus's lock is released).
pub(super) fn published(
    replays: &[Weak<Replay>],
    stored: &Stored,
    wakes: Option<Wakes>,
    wake: &mut SmallVec<[Arc<Notify>; 4]>,
) {
    for (i, replay) in replays.iter().enumerate() {
        let known = wakes.map(|wakes| wakes.replay(i));
        if known != Some(false)
            && let Some(replay) = replay.upgrade()
            && (known == Some(true) || replay.filters.matches(&stored.subject))
        {
            replay.inbox().push_back(stored.clone());
            wake.push(replay.wake.clone());
        }
    }
}

/// Where a replay starts.
#[derive(Clone, Copy)]
pub(super) enum ReplayFrom {
    /// At the oldest message the log holds.
    Oldest,
    /// After the newest: only what is published later.
    Now,
}

/// Moves the messages from `from` up to (not including) `to` that match `filters`
/// (among the messages of run `run` when the filters name one run, in the whole log
/// otherwise) into `into`, up to `most`; returns the first sequence number not looked
/// at.
fn take_matches(
    log: &Log,
    filters: &Filters,
    run: Option<&str>,
    (from, to): (u64, u64),
    most: usize,
    into: &mut VecDeque<Stored>,
) -> u64 {
    let mut take = |seqs: &mut dyn Iterator<Item = u64>| {
        for seq in seqs {
            if into.len() == most || seq >= to {
                return seq;
            }
            if let Some(stored) = log.get(seq).filter(|s| filters.matches(&s.subject)) {
                into.push_back(stored.clone());
            }
        }
        to
    };
    match run {
        Some(run) => match log.run_from(run, from) {
            Some(mut seqs) => take(&mut seqs),
            None => to,
        },
        None => take(&mut (from..to)),
    }
}

/// The run every one of `filters` stays within, if they share one.
fn common_run(filters: &[String]) -> Option<String> {
    let run = run_of_filter(filters.first()?)?;
    filters
        .iter()
        .all(|f| run_of_filter(f) == Some(run))
        .then(|| run.to_owned())
}

/// The messages matching any of `filters`, from `start` on; the stream is woken only
/// by publishes that match, and what it has yet to read stays in the log while it
/// lives. It takes what it reads in batches: up to [`REPLAY_BATCH`] messages of the
/// backlog under one lock of the bus, then its whole inbox at once, so a reader that
/// keeps up with a busy run (a run handle's watcher, following its outcomes) does not
/// take a lock per message.
pub(super) fn open(
    shared: Arc<Shared>,
    filters: Vec<String>,
    start: ReplayFrom,
) -> Result<BoxStream<'static, Result<Stored, BusError>>, BusError> {
    if filters.is_empty() {
        return Err(subject::no_filters());
    }
    for filter in &filters {
        subject::check_filter(filter)?;
    }
    let run = common_run(&filters);
    let replay = {
        let mut state = shared.lock();
        let live = state.log.next_seq();
        let replay = Arc::new(Replay {
            filters: Filters::new(filters),
            wake: Arc::new(Notify::new()),
            live,
            next: AtomicU64::new(match start {
                ReplayFrom::Oldest => 0,
                ReplayFrom::Now => live,
            }),
            inbox: Mutex::default(),
        });
        state.replays.push(Arc::downgrade(&replay));
        state.generation += 1;
        replay
    };
    // Taken from the backlog or the inbox and not yet handed out: the log may drop
    // these, but the stream holds them.
    let taken = VecDeque::with_capacity(REPLAY_BATCH);
    let stream = stream::unfold(
        (shared, replay, run, taken),
        |(shared, replay, run, mut taken)| async move {
            loop {
                if let Some(found) = taken.pop_front() {
                    return Some((Ok(found), (shared, replay, run, taken)));
                }
                let changed = replay.wake.notified();
                if replay.next.load(Ordering::Relaxed) < replay.live {
                    let state = shared.lock();
                    let from = replay
                        .next
                        .load(Ordering::Relaxed)
                        .max(state.log.first_seq());
                    let (log, filters, run) = (&state.log, &replay.filters, run.as_deref());
                    let span = (from, replay.live);
                    let next = take_matches(log, filters, run, span, REPLAY_BATCH, &mut taken);
                    replay.next.store(next, Ordering::Relaxed);
                }
                if taken.is_empty() {
                    // Swapped, so the inbox and the stream keep their buffers.
                    std::mem::swap(&mut taken, &mut *replay.inbox());
                }
                if taken.is_empty() {
                    changed.await;
                }
            }
        },
    );
    Ok(Box::pin(stream) as BoxStream<'static, Result<Stored, BusError>>)
}

/// The oldest message kept that matches `filter`: read from the run's index when the
/// filter names one run (as a call's outcome filter does), from the whole log
/// otherwise.
pub(super) fn first(shared: &Shared, filter: &str) -> Result<Option<Stored>, BusError> {
    subject::check_filter(filter)?;
    let filters = Filters::new(vec![filter.to_owned()]);
    let run = run_of_filter(filter);
    let state = shared.lock();
    let mut found = VecDeque::with_capacity(1);
    let (mut from, to) = (state.log.first_seq(), state.log.next_seq());
    while found.is_empty() && from < to {
        from = take_matches(&state.log, &filters, run, (from, to), 1, &mut found);
    }
    Ok(found.pop_front())
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::super::publish;
    use super::REPLAY_BATCH;
    use crate::bus::{Bus, MemoryBus};

    #[tokio::test(start_paused = true)]
    async fn replaying_one_run_reads_only_its_messages_in_order() {
        let bus = MemoryBus::new();
        for i in 0..50 {
            publish(&bus, &format!("aaa.t.run-{}.tool.x", i % 5), &i.to_string()).await;
        }
        let mut replay = bus.replay("aaa.t.run-3.>").await.unwrap();
        let mut seen = Vec::new();
        for _ in 0..10 {
            seen.push(
                String::from_utf8(replay.next().await.unwrap().unwrap().payload.to_vec()).unwrap(),
            );
        }
        let expected: Vec<String> = (0..50)
            .filter(|i| i % 5 == 3)
            .map(|i| i.to_string())
            .collect();
        assert_eq!(seen, expected);
        publish(&bus, "aaa.t.run-3.tool.y", "late").await;
        assert_eq!(&replay.next().await.unwrap().unwrap().payload[..], b"late");
    }

    #[tokio::test]
    async fn a_replay_takes_a_long_backlog_in_batches_and_loses_none() {
        let bus = MemoryBus::new();
        let total = REPLAY_BATCH * 3 + 5;
        for i in 0..total {
            publish(&bus, "aaa.t.a.x", &i.to_string()).await;
            publish(&bus, "aaa.t.a.y", "skipped").await;
        }
        let mut replay = bus.replay("aaa.t.a.x").await.unwrap();
        for i in 0..total {
            let stored = replay.next().await.unwrap().unwrap();
            assert_eq!(&stored.payload[..], i.to_string().as_bytes());
        }
        publish(&bus, "aaa.t.a.x", "live").await;
        assert_eq!(&replay.next().await.unwrap().unwrap().payload[..], b"live");
    }

    /// What is published while a replay still reads its backlog comes after the
    /// backlog, in log order, whether the replay reads one run's index or the log.
    #[tokio::test]
    async fn publishes_during_the_backlog_come_after_it_in_order() {
        let bus = MemoryBus::new();
        let backlog = REPLAY_BATCH + 3;
        for i in 0..backlog {
            publish(&bus, "aaa.t.a.x", &i.to_string()).await;
            publish(&bus, "aaa.t.c.x", &i.to_string()).await;
        }
        for (filter, subject) in [("aaa.t.a.>", "aaa.t.a.x"), ("aaa.*.c.x", "aaa.t.c.x")] {
            let mut replay = bus.replay(filter).await.unwrap();
            let (mut seen, mut expected) = (Vec::new(), Vec::new());
            for i in 0..backlog {
                expected.push(i.to_string().into_bytes());
                if i % (REPLAY_BATCH / 2) == 1 {
                    publish(&bus, subject, &format!("live {i}")).await;
                    publish(&bus, "aaa.t.b.x", "another run").await;
                }
                seen.push(replay.next().await.unwrap().unwrap().payload.to_vec());
            }
            for i in (0..backlog).filter(|i| i % (REPLAY_BATCH / 2) == 1) {
                expected.push(format!("live {i}").into_bytes());
                seen.push(replay.next().await.unwrap().unwrap().payload.to_vec());
            }
            assert_eq!(seen, expected, "{filter}");
        }
    }

    /// `first` reads one run's index when its filter names a run, the whole log
    /// otherwise, and finds the oldest match either way, past many that do not match.
    #[tokio::test]
    async fn first_finds_the_oldest_match_by_the_run_or_the_whole_log() {
        let bus = MemoryBus::new();
        for i in 0..3 * REPLAY_BATCH {
            publish(&bus, &format!("aaa.t.r{}.tool.x", i % 3), &i.to_string()).await;
        }
        publish(&bus, "aaa.t.r1.tool.y", "y1").await;
        publish(&bus, "aaa.t.r2.tool.y", "y2").await;
        let first = |filter: &'static str| {
            let bus = bus.clone();
            async move { bus.first(filter).await.unwrap().map(|s| s.payload.to_vec()) }
        };
        assert_eq!(first("aaa.t.r1.tool.y").await.as_deref(), Some(&b"y1"[..]));
        assert_eq!(first("aaa.t.*.tool.y").await.as_deref(), Some(&b"y1"[..]));
        assert_eq!(first("aaa.t.r2.>").await.as_deref(), Some(&b"2"[..]));
        assert_eq!(first("aaa.t.r3.>").await, None);
        assert_eq!(first("aaa.*.*.tool.z").await, None);
    }
}
