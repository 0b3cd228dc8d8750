//! Outcomes committed through the store's [`OutcomeLog`]: the outcome fact is
//! published only if the attempt still holds its call, in one write, and the record is
//! left as it was.
//!
//! The record of a call finished this way still says "running" (its last renewal): the
//! outcome lives in the log. So whoever fences that attempt out (a takeover, an
//! abandon, an outcome declared unknown) looks for its outcome right after its own
//! compare-and-set, and a delivery that would wait for a live holder looks first; a
//! found outcome finishes the call, and nothing runs again. See [`aaa_guard::OutcomeLog`]
//! for why looking after the compare-and-set cannot miss one.

use std::sync::Arc;

use aaa_guard::{
    CallRecord, Committed, GuardStore, OutcomeFact, OutcomeLog, RecordKind, RecordedOutcome,
    Revision, StoreError,
};
use serde_json::value::RawValue;

use super::call::{self, Call, Disposition};
use super::core::{Core, Entry};
use super::lease::{commit_base, superseded, write_record};
use super::records::read;
use crate::bus::BusError;
use crate::event::{TOOL_COMPLETED, TOOL_FAILED};
use crate::names::event_subject;

/// The attempt whose result is being committed.
pub(super) struct Holder<'a> {
    /// The call's record.
    pub(super) key: &'a str,
    /// The attempt.
    pub(super) attempt: u32,
    /// The record as the lease last wrote it, tried before reading.
    pub(super) known: Option<(CallRecord, Revision)>,
}

/// Commits `recorded`, the result of `holder`'s attempt, by publishing it through
/// `fence`, the store's outcome log.
pub(super) async fn commit(
    core: &Core,
    entry: &Entry,
    call: &Call,
    holder: Holder<'_>,
    recorded: &RecordedOutcome,
    fence: &dyn OutcomeLog,
) -> Disposition {
    let Holder {
        key,
        attempt,
        mut known,
    } = holder;
    let store = &**core.engine.store();
    // A lease known lost has been reported; one found lost here has not.
    let unreported = known.is_some().then_some(entry.config.guard.lost_lease);
    let event = call.outcome_draft(core, recorded.kind.to_string(), &*recorded.data);
    let (subject, id) = (event.bus_subject(), event.id.text());
    loop {
        let (current, revision) = match commit_base(store, key, known.take()).await {
            Ok(base) => base,
            Err(disposition) => return disposition,
        };
        if !current.is_held_by(attempt) {
            return superseded(core, call, attempt, &current, unreported).await;
        }
        let appended = entry
            .handler
            .result_retry
            .run(|| async {
                let fact = OutcomeFact {
                    address: &subject,
                    id: &id,
                    bytes: event.to_bytes(),
                };
                match fence.commit_outcome(key, revision, fact).await {
                    Err(StoreError::Unavailable(why)) => Err(BusError::Unavailable(why)),
                    other => Ok(other),
                }
            })
            .await;
        match appended {
            Ok(Ok(Committed::Stored)) => return Disposition::Ack,
            // The call's outcome is already in the log: this attempt's own (an append
            // that timed out but was stored) while the attempt still holds the call,
            // another's otherwise.
            Ok(Ok(Committed::Duplicate)) => {
                return match read::<CallRecord>(store, RecordKind::Call, key).await {
                    Ok(Some((current, _))) if current.is_held_by(attempt) => Disposition::Ack,
                    Ok(Some((current, _))) => {
                        superseded(core, call, attempt, &current, unreported).await
                    }
                    _ => Disposition::Nak,
                };
            }
            // The record moved: a renewal of this attempt (read and try again) or a
            // newer attempt (dropped above).
            Ok(Err(StoreError::Conflict { .. })) => continue,
            Ok(Err(error)) => return gave_up(key, &error),
            Err(error) => return gave_up(key, &error),
        }
    }
}

fn gave_up(key: &str, error: &dyn std::fmt::Display) -> Disposition {
    tracing::warn!(%error, key, "could not commit an outcome; the call will be delivered again");
    Disposition::Nak
}

/// The outcome of `call` already in the log, as the guard records outcomes.
pub(super) async fn logged_outcome(
    fence: &dyn OutcomeLog,
    call: &Call,
    key: &str,
) -> Result<Option<RecordedOutcome>, StoreError> {
    #[derive(serde::Deserialize)]
    struct Logged {
        #[serde(rename = "type")]
        kind: Arc<str>,
        data: Box<RawValue>,
    }
    let subjects = [TOOL_COMPLETED, TOOL_FAILED]
        .map(|kind| event_subject(&call.tenant, &call.run, kind, Some(&call.call_id)));
    let Some(payload) = fence
        .find_outcome(key, &subjects, &call::outcome_id(call))
        .await?
    else {
        return Ok(None);
    };
    let logged: Logged = serde_json::from_slice(&payload).map_err(|error| {
        StoreError::Unavailable(format!("the logged outcome does not parse: {error}"))
    })?;
    Ok(Some(RecordedOutcome {
        kind: logged.kind,
        data: logged.data,
    }))
}

/// Under a fence, after this worker's compare-and-set fenced the call's last attempt
/// out (the record is now `record` at `revision`), or before it republishes a recorded
/// outcome: `Some(Ack)` when an outcome is already in the log (the call is recorded
/// finished with it), `Some(Nak)` when the log cannot be read, `None` when there is no
/// such outcome, or no fence.
pub(super) async fn settled_before(
    store: &dyn GuardStore,
    call: &Call,
    key: &str,
    record: &CallRecord,
    revision: Revision,
) -> Option<Disposition> {
    let fence = store.outcome_log()?;
    match logged_outcome(fence, call, key).await {
        Ok(None) => None,
        Ok(Some(outcome)) => {
            // Losing this write changes nothing: the outcome is in the log, and a later
            // delivery finds it again.
            let finished = record.clone().finished(outcome).marked_published();
            let _ = write_record(store, key, &finished, Some(revision)).await;
            Some(Disposition::Ack)
        }
        Err(error) => {
            tracing::warn!(%error, key, "could not look for the call's outcome; the call will be delivered again");
            Some(Disposition::Nak)
        }
    }
}
