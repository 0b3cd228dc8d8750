//! Running a call under the stalled-worker guard.
//!
//! Per logical call (tenant, run, call id) the guard keeps one [`CallRecord`] in the
//! engine's [`GuardStore`] under `guard.<tenant>.<run>.<call>`. A worker that receives a
//! call:
//!
//! 1. reads the record and decides ([`CallRecord::on_delivery`]): start attempt 1, wait
//!    for a live holder (re-checking every `wait_poll_s` and reporting progress on its
//!    message), take over a lapsed attempt, abandon the call, declare its outcome
//!    unknown, or republish a recorded outcome;
//! 2. claims its attempt with one compare-and-set and emits
//!    `aaa.guard.attempt_started` (and `aaa.guard.taken_over`) without waiting for the
//!    bus to store them (records for the log, never read by a decision);
//! 3. renews the lease every `heartbeat_s` while the tool waits for a permit and runs;
//!    a failed renewal means a newer attempt exists: under `LostLease::Cancel` the tool
//!    is cancelled and nothing is recorded, under `Finish` it runs on;
//! 4. commits the outcome by compare-and-set on its attempt (the fence); a superseded
//!    attempt's result is dropped and audited as `aaa.tool.stale_result`;
//! 5. publishes the outcome and only then acks. A later delivery of the finished call
//!    runs nothing: it publishes the recorded outcome again under the same message id
//!    (the bus drops it when the fact is already there; after the bus's
//!    de-duplication window the same fact is stored a second time), records that it
//!    did, and acks.
//!
//! When the store has an [`OutcomeLog`](aaa_guard::OutcomeLog) (NATS from 2.11), steps 4
//! and 5 are one write: the outcome is published only if the attempt still holds the
//! call, and the record is left as it was (see the `fenced` module). Whoever fences
//! that attempt out later, and any delivery that would wait for it, first looks for its
//! outcome in the log.
//!
//! A superseded worker never acks, naks or reports progress on its message: JetStream
//! matches acks by sequence, so a stale ack would settle the message its successor is
//! working on.
//!
//! A store write that fails ambiguously is resolved by reading the record back. Under
//! `at_most_once`, a worker that cannot tell whether its attempt started does not start
//! one: the call is left to a later delivery, which finds the attempt lapsed and
//! declares the outcome unknown.

use std::sync::{Arc, Mutex};

use aaa_guard::{
    CallRecord, GuardStore, LeaseWatch, OnDelivery, RecordKind, RecordedOutcome, Revision,
    StoreError,
};
use serde_json::Value;

use super::attempt::{self, Executed};
use super::call::{self, Call, Disposition, Outcome};
use super::cancels::Watch;
use super::core::{Core, Entry};
use super::fenced;
use super::lease::{Lease, commit_base, guard_key, new_claim, superseded, write_record};
use super::records::read;
use crate::bus::Message;
use crate::event::{ATTEMPT_STARTED, AttemptFact, FailureKind, TAKEN_OVER};

/// What the claim loop decided.
enum Claimed {
    /// Run `attempt`; the lease is ours.
    Run {
        attempt: u32,
        record: CallRecord,
        revision: Revision,
        previous: Option<(u32, Arc<str>)>,
    },
    /// Nothing to run: settle the message so.
    Settled(Disposition),
}

/// Runs a call whose arguments passed every check; publishes its outcome. Returns what
/// to do with the carrier message.
pub(super) async fn run_call(
    core: &Core,
    entry: &Entry,
    call: &Call,
    arguments: &Value,
    carrier: &Message,
    watch: &Watch<'_>,
) -> Disposition {
    let retry = &entry.handler.result_retry;
    let config = &entry.config.guard;
    if !config.enabled {
        return match attempt::execute(core, entry, call, arguments, carrier, 1, None, watch).await {
            Executed::Done(outcome) => {
                call::ack_if(call::publish_outcome(core, retry, call, outcome).await)
            }
            Executed::Cancelled => Disposition::Nak,
        };
    }
    let key = guard_key(&call.tenant, &call.run, &call.call_id);
    let (attempt, record, revision, previous) = match claim(core, entry, call, &key, carrier).await
    {
        Claimed::Settled(disposition) => return disposition,
        Claimed::Run {
            attempt,
            record,
            revision,
            previous,
        } => (attempt, record, revision, previous),
    };
    let started = AttemptFact {
        call_id: call.call_id.clone(),
        name: call.name.clone(),
        attempt,
        worker: core.worker.clone(),
        previous_attempt: previous.as_ref().map(|(a, _)| *a),
        previous_worker: previous.as_ref().map(|(_, w)| w.clone()),
    };
    if previous.is_some() {
        call::emit_fact(core, call, ATTEMPT_STARTED, started.clone()).await;
        call::emit_fact(core, call, TAKEN_OVER, started).await;
    } else {
        call::emit_fact(core, call, ATTEMPT_STARTED, started).await;
    }
    let lease = Lease {
        key: &key,
        attempt,
        config,
        current: Mutex::new((record, revision)),
        lost: std::sync::atomic::AtomicBool::new(false),
        store: &**core.engine.store(),
        call,
        worker: &core.worker,
    };
    // The outcome is written as JSON once, here, for the record; the typed outcome is
    // what gets published (see `publish_recorded`).
    let outcome = match attempt::execute(
        core,
        entry,
        call,
        arguments,
        carrier,
        attempt,
        Some(&lease),
        watch,
    )
    .await
    {
        Executed::Cancelled => return Disposition::Leave,
        Executed::Done(outcome) => outcome,
    };
    let recorded = outcome.recorded();
    // The lease's last write is the likely current record: try it before reading.
    let known = (!lease.is_lost()).then(|| {
        lease
            .current
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
    });
    match core.engine.store().outcome_log() {
        Some(fence) if config.fence_results => {
            let holder = fenced::Holder {
                key: &key,
                attempt,
                known,
            };
            Box::pin(fenced::commit(core, entry, call, holder, &recorded, fence)).await
        }
        _ => commit(core, entry, call, &key, attempt, (recorded, outcome), known).await,
    }
}

/// Reads the record until this worker may run an attempt, or the call needs nothing
/// more from it.
async fn claim(core: &Core, entry: &Entry, call: &Call, key: &str, carrier: &Message) -> Claimed {
    let store = &**core.engine.store();
    let config = &entry.config.guard;
    // A store with its own clock lets a late observer decide sooner, once it has seen
    // the record unchanged for longer than a live holder's heartbeat.
    let mut watch = LeaseWatch::new(config.lease_ttl()).confirming_for(config.heartbeat() * 3 / 2);
    // A first delivery is usually a new call: try to start it before reading (a create
    // that finds the record falls back to reading it).
    let mut assume_new = carrier.delivery_count == 1;
    // Whether this delivery looked in the log for an outcome while waiting, and when it
    // last told the bus it still works on the message (see `attempt::wait_a_poll`).
    let mut looked = false;
    let mut reported = tokio::time::Instant::now();
    loop {
        let found = if std::mem::take(&mut assume_new) {
            Ok(None)
        } else {
            read::<CallRecord>(store, RecordKind::Call, key).await
        };
        let current = match found {
            Ok(current) => current,
            Err(error) => {
                tracing::warn!(%error, key, "the guard store failed; the call will be delivered again");
                return Claimed::Settled(Disposition::Nak);
            }
        };
        let lapsed = current
            .as_ref()
            .is_some_and(|(_, revision)| watch.observe(*revision, core.now()));
        let mut decision = CallRecord::on_delivery(current.as_ref().map(|(r, _)| r), lapsed);
        if let (OnDelivery::Wait, Some((record, revision))) = (&decision, &current)
            && let Ok(Some((aged, age))) = store.age(RecordKind::Call, key).await
            && aged == *revision
            && watch.observe_aged(*revision, core.now(), Some(age))
        {
            decision = CallRecord::on_delivery(Some(record), true);
        }
        match decision {
            OnDelivery::Start => {
                let record = CallRecord::start(
                    call.name.clone(),
                    core.worker.clone(),
                    config.delivery,
                    config.max_attempts,
                )
                .with_claim(new_claim());
                match write_record(store, key, &record, None).await {
                    Ok(revision) => {
                        return Claimed::Run {
                            attempt: 1,
                            record,
                            revision,
                            previous: None,
                        };
                    }
                    Err(StoreError::Exists { .. } | StoreError::Conflict { .. }) => continue,
                    Err(error) => {
                        tracing::warn!(%error, key, "could not record the attempt; the call will be delivered again");
                        return Claimed::Settled(Disposition::Nak);
                    }
                }
            }
            OnDelivery::Wait => {
                // Under a fence a finished call's record still shows its last attempt
                // running: its outcome may already be in the log. One look per delivery:
                // an outcome the holder commits later is found when its lease lapses
                // and this delivery takes the call over. Looking at every poll would
                // make each waiting delivery read the log several times a second, which
                // is what a worker's death sets off for every call it held.
                if !looked && let Some(fence) = store.outcome_log() {
                    looked = true;
                    match Box::pin(fenced::logged_outcome(fence, call, key)).await {
                        Ok(Some(_)) => return Claimed::Settled(Disposition::Ack),
                        Ok(None) => {}
                        Err(error) => {
                            tracing::warn!(%error, key, "could not look for the call's outcome")
                        }
                    }
                }
                attempt::wait_a_poll(core, carrier, config.wait_poll(), &mut reported).await;
            }
            OnDelivery::TakeOver { next } => {
                let Some((old, revision)) = current else {
                    continue;
                };
                let record = old.taken_over(core.worker.clone()).with_claim(new_claim());
                match write_record(store, key, &record, Some(revision)).await {
                    Ok(revision) => {
                        if let Some(settled) =
                            Box::pin(fenced::settled_before(store, call, key, &record, revision))
                                .await
                        {
                            return Claimed::Settled(settled);
                        }
                        return Claimed::Run {
                            attempt: next,
                            record,
                            revision,
                            previous: Some((old.attempt, old.holder)),
                        };
                    }
                    Err(StoreError::Conflict { .. }) => continue,
                    Err(error) => {
                        tracing::warn!(%error, key, "could not take the call over; it will be delivered again");
                        return Claimed::Settled(Disposition::Nak);
                    }
                }
            }
            OnDelivery::Abandon | OnDelivery::OutcomeUnknown => {
                let Some((old, revision)) = current else {
                    continue;
                };
                let abandon = old.delivery == aaa_guard::Delivery::AtLeastOnce;
                let outcome = if abandon {
                    call.failed(
                        FailureKind::Abandoned,
                        format!(
                            "the call was lost with its worker {} times (the limit); it did not complete",
                            old.attempt
                        ),
                        old.attempt,
                    )
                } else {
                    call.failed(
                        FailureKind::OutcomeUnknown,
                        "the worker running this call was lost; it may or may not have taken effect, and it will not be retried. An operator will reconcile it",
                        old.attempt,
                    )
                };
                let recorded = outcome.recorded();
                let record = if abandon {
                    old.finished(recorded)
                } else {
                    old.unknown(recorded)
                };
                match write_record(store, key, &record, Some(revision)).await {
                    Ok(revision) => {
                        if let Some(settled) =
                            Box::pin(fenced::settled_before(store, call, key, &record, revision))
                                .await
                        {
                            return Claimed::Settled(settled);
                        }
                        let disposition = Box::pin(publish_recorded(
                            core,
                            entry,
                            call,
                            key,
                            &record,
                            revision,
                            Publish::Recorded,
                        ))
                        .await;
                        return Claimed::Settled(disposition);
                    }
                    Err(StoreError::Conflict { .. }) => continue,
                    Err(_) => return Claimed::Settled(Disposition::Nak),
                }
            }
            OnDelivery::Finished { republish } => {
                let Some((record, revision)) = current else {
                    continue;
                };
                if !republish {
                    return Claimed::Settled(Disposition::Ack);
                }
                if let Some(settled) =
                    Box::pin(fenced::settled_before(store, call, key, &record, revision)).await
                {
                    return Claimed::Settled(settled);
                }
                return Claimed::Settled(
                    Box::pin(publish_recorded(
                        core,
                        entry,
                        call,
                        key,
                        &record,
                        revision,
                        Publish::RecordedThenMark,
                    ))
                    .await,
                );
            }
        }
    }
}

/// What [`publish_recorded`] publishes, and whether it marks the record published.
enum Publish {
    /// The outcome an attempt just committed, as the attempt produced it: published
    /// typed (a watcher in this process reads it without parsing); its JSON is what
    /// the record holds. Not marked: a later duplicate delivery publishes again under
    /// the same message id, which the bus drops, and marks it then.
    Committed(Outcome),
    /// The record's outcome, not marked.
    Recorded,
    /// The record's outcome, then the record marked published.
    RecordedThenMark,
}

/// Publishes a recorded outcome (see [`Publish`]).
async fn publish_recorded(
    core: &Core,
    entry: &Entry,
    call: &Call,
    key: &str,
    record: &CallRecord,
    revision: Revision,
    how: Publish,
) -> Disposition {
    let Some(outcome) = &record.outcome else {
        return Disposition::Ack;
    };
    let retry = &entry.handler.result_retry;
    let mark = matches!(how, Publish::RecordedThenMark);
    let published = match how {
        Publish::Committed(typed) => call::publish_outcome(core, retry, call, typed).await,
        Publish::Recorded | Publish::RecordedThenMark => {
            let (kind, data) = (outcome.kind.to_string(), outcome.data.clone());
            call::publish_outcome_parts(core, retry, call, kind, data).await
        }
    };
    if !published {
        return Disposition::Nak;
    }
    if !mark {
        return Disposition::Ack;
    }
    // Losing this race is fine: whoever wrote first also published.
    let _ = write_record(
        &**core.engine.store(),
        key,
        &record.clone().marked_published(),
        Some(revision),
    )
    .await;
    Disposition::Ack
}

/// Commits an attempt's outcome by compare-and-set on its fence.
async fn commit(
    core: &Core,
    entry: &Entry,
    call: &Call,
    key: &str,
    attempt: u32,
    (recorded, typed): (RecordedOutcome, Outcome),
    mut known: Option<(CallRecord, Revision)>,
) -> Disposition {
    let store = &**core.engine.store();
    let fence = entry.config.guard.fence_results;
    // A lease known lost has been reported; one found lost here has not.
    let unreported = known.is_some().then_some(entry.config.guard.lost_lease);
    let mut recorded = Some(recorded);
    loop {
        let (current, revision) = match commit_base(store, key, known.take()).await {
            Ok(base) => base,
            Err(disposition) => return disposition,
        };
        if !current.accepts_result_of(attempt, fence) {
            if !fence {
                return Disposition::Leave;
            }
            return superseded(core, call, attempt, &current, unreported).await;
        }
        // The first try takes the outcome; a conflict's retry reads it back.
        let outcome = match recorded.take() {
            Some(outcome) => outcome,
            None => return Disposition::Nak,
        };
        let finished = current.finished(outcome);
        match write_record(store, key, &finished, Some(revision)).await {
            Ok(revision) => {
                let how = Publish::Committed(typed);
                return publish_recorded(core, entry, call, key, &finished, revision, how).await;
            }
            Err(StoreError::Conflict { .. }) => {
                recorded = finished.outcome;
                continue;
            }
            Err(error) => {
                tracing::warn!(%error, key, "could not commit an outcome; the call will be delivered again");
                return Disposition::Nak;
            }
        }
    }
}
