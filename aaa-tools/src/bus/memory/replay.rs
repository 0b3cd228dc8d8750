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
//! A replay is a cursor into the log (the first sequence number it has not looked
//! at), registered with the bus so a matching publish wakes it and so trimming leaves
//! it what it has yet to read. It takes what matches under the bus's lock, up to
//! [`REPLAY_BATCH`] messages at a time, and hands them out without the lock. When
//! every filter names one run (`aaa.<tenant>.<run>.…`), it reads that run's index
//! (see [`log`](super::log)) instead of the whole log.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use futures::stream::{self, BoxStream};
use smallvec::SmallVec;
use tokio::sync::Notify;

use super::Shared;
use super::filters::{Filters, Wakes};
use super::log::{Log, run_of_filter};
use crate::bus::{BusError, Stored, subject};

/// The most messages a replay takes from the log under one lock.
pub(super) const REPLAY_BATCH: usize = 64;

/// A replay stream as the bus sees it: what wakes it, and how far it has read, which
/// keeps the messages it has yet to read in the log.
pub(super) struct Replay {
    pub(super) filters: Filters,
    wake: Arc<Notify>,
    /// The first sequence number it has not looked at (changed under the bus's lock).
    next: AtomicU64,
}

impl Replay {
    /// Whether this replay has yet to read message `seq`, on `subject`, and wants it.
    pub(super) fn holds(&self, seq: u64, subject: &str) -> bool {
        self.next.load(Ordering::Relaxed) <= seq && self.filters.matches(subject)
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

/// Adds the replays a publish on `subject` wakes to `wake` (woken once the bus's lock
/// is released).
pub(super) fn published(
    replays: &[Weak<Replay>],
    subject: &str,
    wakes: Option<Wakes>,
    wake: &mut SmallVec<[Arc<Notify>; 4]>,
) {
    for (i, replay) in replays.iter().enumerate() {
        let known = wakes.map(|wakes| wakes.replay(i));
        if known != Some(false)
            && let Some(replay) = replay.upgrade()
            && (known == Some(true) || replay.filters.matches(subject))
        {
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

/// Moves the messages from `from` on that match `filters` (among the messages of run
/// `run` when the filters name one run, in the whole log otherwise) into `into`, up
/// to `most`; returns the first sequence number not looked at.
fn take_matches(
    log: &Log,
    filters: &Filters,
    run: Option<&str>,
    from: u64,
    most: usize,
    into: &mut VecDeque<Stored>,
) -> u64 {
    let mut take = |seqs: &mut dyn Iterator<Item = u64>| {
        for seq in seqs {
            if into.len() == most {
                return seq;
            }
            if let Some(stored) = log.get(seq).filter(|s| filters.matches(&s.subject)) {
                into.push_back(stored.clone());
            }
        }
        log.next_seq()
    };
    match run {
        Some(run) => match log.run_from(run, from) {
            Some(mut seqs) => take(&mut seqs),
            None => log.next_seq(),
        },
        None => take(&mut (from..log.next_seq())),
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
/// by publishes that match, and what it has yet to take from the log stays there
/// while it lives. It takes what matches in batches, one lock of the bus for up to
/// [`REPLAY_BATCH`] messages: a reader that keeps up with a busy run (a run handle's
/// watcher, following its outcomes) would otherwise take the lock, and search the
/// run's index, once per message.
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
    let replay = Arc::new(Replay {
        filters: Filters::new(filters),
        wake: Arc::new(Notify::new()),
        next: AtomicU64::new(0),
    });
    {
        let mut state = shared.lock();
        if let ReplayFrom::Now = start {
            replay.next.store(state.log.next_seq(), Ordering::Relaxed);
        }
        state.replays.push(Arc::downgrade(&replay));
        state.generation += 1;
    }
    // Taken from the log and not yet handed out: these are past `replay.next`, so the
    // log may drop them, but the stream holds them.
    let taken = VecDeque::with_capacity(REPLAY_BATCH);
    let stream = stream::unfold(
        (shared, replay, run, taken),
        |(shared, replay, run, mut taken)| async move {
            loop {
                if let Some(found) = taken.pop_front() {
                    return Some((Ok(found), (shared, replay, run, taken)));
                }
                let changed = replay.wake.notified();
                {
                    let state = shared.lock();
                    let from = replay
                        .next
                        .load(Ordering::Relaxed)
                        .max(state.log.first_seq());
                    let (filters, run) = (&replay.filters, run.as_deref());
                    let next =
                        take_matches(&state.log, filters, run, from, REPLAY_BATCH, &mut taken);
                    replay.next.store(next, Ordering::Relaxed);
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
    let mut from = state.log.first_seq();
    while found.is_empty() && from < state.log.next_seq() {
        from = take_matches(&state.log, &filters, run, from, 1, &mut found);
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
