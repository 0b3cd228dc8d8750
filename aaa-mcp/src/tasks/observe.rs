//! What became of one round of a task: its engine call, read from the bus by lookups
//! (its outcome through [`RunHandle::outcome_fact`](aaa_tools::RunHandle::outcome_fact),
//! the rest with [`Bus::first`](aaa_tools::bus::Bus::first)), never by reading the run. Each round is the only call on a run of its own, so the run's
//! approval and request subjects are the call's too.

use aaa_tools::event::{
    APPROVAL_DENIED, APPROVAL_GRANTED, APPROVAL_REQUESTED, ApprovalRequested, Event,
    TOOL_COMPLETED, TOOL_REQUESTED, subject,
};
use aaa_tools::{Engine, Outcome, RunId, TenantId};
use rmcp::ErrorData;

use crate::reply::engine_error;

/// The state of a round's call.
#[derive(Debug)]
pub(crate) enum Observed {
    /// Its request is not on the bus (the server stopped between recording the round
    /// and requesting its call).
    NotRequested,
    /// Requested, not finished, not waiting for approval.
    Running {
        /// When it was requested.
        since: Option<String>,
    },
    /// Waiting for a human's approval.
    AwaitingApproval {
        /// The approval request.
        requested: ApprovalRequested,
        /// When it was made.
        since: Option<String>,
    },
    /// Requested once, and none of its facts are on the bus any more (the bus's
    /// retention let them go).
    Forgotten,
    /// Finished.
    Finished {
        /// How.
        outcome: Outcome,
        /// When.
        at: Option<String>,
    },
}

/// What became of the call `call` on `run`.
pub(crate) async fn observe(
    engine: &Engine,
    tenant: &TenantId,
    run: &RunId,
    call: &aaa_tools::CallId,
) -> Result<Observed, ErrorData> {
    let handle = engine.run_for(tenant.clone(), run.clone());
    let finished = handle.outcome_fact(call).await.map_err(engine_error)?;
    let bus = engine.bus();
    let first = |filter: String| async move {
        let stored = bus
            .first(&filter)
            .await
            .map_err(|error| ErrorData::internal_error(format!("the bus failed: {error}"), None))?;
        Ok::<_, ErrorData>(stored.and_then(|stored| Event::from_bytes(&stored.payload).ok()))
    };
    if let Some(event) = finished {
        let at = event.time.clone();
        let outcome = if event.kind == TOOL_COMPLETED {
            event.into_data().map(Outcome::Completed)
        } else {
            event.into_data().map(Outcome::Failed)
        }
        .map_err(|error| {
            ErrorData::internal_error(
                format!("call {call}'s outcome is unreadable: {error}"),
                None,
            )
        })?;
        return Ok(Observed::Finished { outcome, at });
    }
    if let Some(event) = first(subject(tenant, run, APPROVAL_REQUESTED)).await? {
        let decided = first(subject(tenant, run, APPROVAL_GRANTED))
            .await?
            .is_some()
            || first(subject(tenant, run, APPROVAL_DENIED))
                .await?
                .is_some();
        if !decided {
            let since = event.time.clone();
            if let Ok(requested) = event.into_data::<ApprovalRequested>() {
                return Ok(Observed::AwaitingApproval { requested, since });
            }
        }
    }
    match first(subject(tenant, run, TOOL_REQUESTED)).await? {
        Some(event) => Ok(Observed::Running { since: event.time }),
        None => Ok(Observed::NotRequested),
    }
}
