//! One call being handled: running its tool with progress reports and lease renewals,
//! publishing its outcome, settling the message that carried it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use aaa_guard::{LostLease, RecordedOutcome};
use serde_json::{Map, Value};
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::RetryPolicy;
use super::core::{Core, Entry};
use super::guarded::Lease;
use super::policy::PolicyCall;
use crate::bus::Message;
use crate::context::{PermitSlot, ToolContext};
use crate::error::CallError;
use crate::event::{Draft, FailureKind, TOOL_COMPLETED, TOOL_FAILED, ToolCompleted, ToolFailed};
use crate::ids::{CallId, RunId, TenantId};

/// A call being handled.
pub(super) struct Call {
    pub(super) tenant: TenantId,
    pub(super) run: RunId,
    pub(super) call_id: CallId,
    pub(super) name: String,
    pub(super) meta: Map<String, Value>,
}

/// How a call ended.
pub(super) enum Outcome {
    Completed(ToolCompleted),
    Failed(ToolFailed),
}

/// What to do with the message that carried a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Disposition {
    /// The outcome is durable: acknowledge.
    Ack,
    /// Try again later: the bus delivers it again.
    Nak,
    /// This worker was superseded: touch nothing (an ack would settle the message its
    /// successor holds).
    Leave,
    /// The message can never be handled (unreadable): never deliver it again.
    Term,
}

impl Call {
    pub(super) fn policy(&self, arguments: &Value) -> PolicyCall {
        PolicyCall {
            tenant: self.tenant.clone(),
            run: self.run.clone(),
            call_id: self.call_id.clone(),
            tool: self.name.clone(),
            arguments: arguments.clone(),
        }
    }

    pub(super) fn failed(
        &self,
        kind: FailureKind,
        message: impl Into<String>,
        attempt: u32,
    ) -> Outcome {
        Outcome::Failed(ToolFailed {
            call_id: self.call_id.clone(),
            name: self.name.clone(),
            kind,
            message: message.into(),
            attempt,
        })
    }

    /// An event of `kind` about this call, to send.
    pub(super) fn draft<'a, T: serde::Serialize>(
        &'a self,
        core: &'a Core,
        kind: &'a str,
        data: T,
    ) -> Draft<'a, T> {
        Draft::new(
            kind,
            core.engine.source(),
            &self.tenant,
            &self.run,
            Some(&self.call_id),
            data,
        )
    }
}

impl Outcome {
    pub(super) fn label(&self) -> &'static str {
        match self {
            Outcome::Completed(_) => "completed",
            Outcome::Failed(f) => f.kind.as_str(),
        }
    }

    /// The outcome as the guard records it: its event type and its data written as
    /// JSON once, to be stored and published as they are.
    pub(super) fn recorded(&self) -> RecordedOutcome {
        let written = match self {
            Outcome::Completed(data) => RecordedOutcome::new(TOOL_COMPLETED, data),
            Outcome::Failed(data) => RecordedOutcome::new(TOOL_FAILED, data),
        };
        // Ids, strings, numbers and a JSON value always serialize.
        written.expect("an outcome serializes to JSON")
    }
}

/// Publishes `event` with `retry`, de-duplicated by its id.
pub(super) async fn publish<T: serde::Serialize>(
    core: &Core,
    retry: &RetryPolicy,
    event: &Draft<'_, T>,
) -> bool {
    let (subject, id) = (event.bus_subject(), &event.id);
    // The first attempt takes the bytes; a retry (rare) writes them again.
    let mut first = Some(event.to_bytes());
    match retry
        .run(|| {
            let bytes = first.take().unwrap_or_else(|| event.to_bytes());
            core.engine.bus().publish(&subject, bytes, Some(id))
        })
        .await
    {
        Ok(()) => true,
        Err(error) => {
            tracing::error!(%error, kind = %event.kind(), "could not publish a fact");
            false
        }
    }
}

/// The message id of a call's outcome fact: one per call, so a republished outcome
/// within the de-duplication window is dropped.
pub(super) fn outcome_id(call: &Call) -> String {
    let (tenant, run, call) = (
        call.tenant.as_str(),
        call.run.as_str(),
        call.call_id.as_str(),
    );
    crate::ids::concat(&["outcome-", tenant, "-", run, "-", call])
}

/// Publishes an outcome fact of type `kind` with `data`, under the call's outcome id.
pub(super) async fn publish_outcome_parts<T: serde::Serialize>(
    core: &Core,
    retry: &RetryPolicy,
    call: &Call,
    kind: &str,
    data: T,
) -> bool {
    let mut event = call.draft(core, kind, data);
    event.id = outcome_id(call);
    publish(core, retry, &event).await
}

/// Publishes the outcome of `call`.
pub(super) async fn publish_outcome(
    core: &Core,
    retry: &RetryPolicy,
    call: &Call,
    outcome: &Outcome,
) -> bool {
    match outcome {
        Outcome::Completed(data) => {
            publish_outcome_parts(core, retry, call, TOOL_COMPLETED, data).await
        }
        Outcome::Failed(data) => publish_outcome_parts(core, retry, call, TOOL_FAILED, data).await,
    }
}

/// Settles a message.
pub(super) async fn settle(message: &Message, disposition: Disposition) {
    let result = match disposition {
        Disposition::Ack => message.ack().await,
        Disposition::Nak => message.nak(Duration::from_secs(1)).await,
        Disposition::Leave => Ok(()),
        Disposition::Term => message.term().await,
    };
    if let Err(error) = result {
        tracing::warn!(%error, seq = message.seq, "could not settle a message; it will be delivered again");
    }
}

/// `Ack` when `published`, else `Nak`.
pub(super) fn ack_if(published: bool) -> Disposition {
    if published {
        Disposition::Ack
    } else {
        Disposition::Nak
    }
}

/// Runs `fut`, telling the bus every heartbeat that `message` is still being worked on,
/// and renewing `lease` first when there is one. Returns `None` when the lease was lost
/// under [`LostLease::Cancel`] (the future is dropped: the tool is cancelled).
pub(super) async fn with_progress<F: Future>(
    core: &Core,
    message: &Message,
    lease: Option<&Lease<'_>>,
    cancel: Option<&CancellationToken>,
    fut: F,
) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    // Most futures here finish on their first poll (a free permit, a quick tool): they
    // need no heartbeat timer.
    if let std::task::Poll::Ready(out) = futures::poll!(fut.as_mut()) {
        return Some(out);
    }
    let period = match lease {
        Some(lease) => lease.heartbeat().min(core.heartbeat()),
        None => core.heartbeat(),
    };
    // The first tick is one period away: an immediate first tick would cost a timer
    // round trip on every call.
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    loop {
        tokio::select! {
            out = &mut fut => return Some(out),
            _ = ticker.tick() => {
                // Boxed: a heartbeat is rare next to the calls it would otherwise
                // enlarge (every call's task carries this future's state).
                if Box::pin(beat(core, message, lease)).await == Some(LostLease::Cancel) {
                    // Signal the tool, give it a heartbeat to stop cleanly, then drop
                    // it. Whatever it returns is not recorded.
                    if let (Some(cancel), Some(lease)) = (cancel, lease) {
                        cancel.cancel();
                        let _ = tokio::time::timeout(lease.heartbeat(), &mut fut).await;
                    }
                    return None;
                }
            }
        }
    }
}

/// One heartbeat: renews the lease (reporting it lost, with the policy, when a newer
/// attempt holds the call), then tells the bus the message is still being worked on.
/// A worker that lost its lease touches the message no more.
async fn beat(core: &Core, message: &Message, lease: Option<&Lease<'_>>) -> Option<LostLease> {
    if let Some(lease) = lease {
        if lease.is_lost() {
            return None;
        }
        if !lease.renew().await {
            lease.report_lost(core).await;
            return Some(lease.policy());
        }
    }
    if let Err(error) = message.in_progress().await {
        tracing::warn!(%error, seq = message.seq, "could not report progress");
    }
    None
}

/// How running a tool ended.
pub(super) enum Executed {
    /// It produced an outcome (possibly after losing its lease, under `Finish`).
    Done(Outcome),
    /// It lost its lease under `Cancel` and was cancelled: nothing is recorded.
    Cancelled,
}

/// Runs one attempt: pool permit, timeout, panics, post-call guardrails.
pub(super) async fn execute(
    core: &Core,
    entry: &Entry,
    call: &Call,
    arguments: Value,
    carrier: &Message,
    attempt: u32,
    lease: Option<&Lease<'_>>,
) -> Executed {
    let default_key = || crate::ids::concat(&[call.run.as_str(), "/", call.call_id.as_str()]);
    let key = match entry.tool.idempotency_key_checked(&arguments, default_key) {
        Ok(key) => key,
        Err(error) => {
            return Executed::Done(call.failed(FailureKind::BadArgs, error.to_string(), attempt));
        }
    };
    // The arguments were checked at admission (and, for approvals, before they were
    // recorded): decode only.
    // Post-call guardrails see the arguments; keep a copy only when there are some.
    let post_args = entry
        .handler
        .guards
        .has_post_checks()
        .then(|| arguments.clone());
    let prepared = match entry.tool.prepare_checked(arguments) {
        Ok(prepared) => prepared,
        Err(error) => {
            return Executed::Done(call.failed(FailureKind::BadArgs, error.to_string(), attempt));
        }
    };
    let pool = core.pool(&entry.config.pool);
    let permit: OwnedSemaphorePermit =
        match with_progress(core, carrier, lease, None, pool.clone().acquire_owned()).await {
            None => return Executed::Cancelled,
            Some(Ok(permit)) => permit,
            Some(Err(_)) => {
                return Executed::Done(call.failed(
                    FailureKind::Error,
                    "the tool's pool is closed",
                    attempt,
                ));
            }
        };
    super::core::Ticket::spend_current();
    let slot = Arc::new(PermitSlot::new(pool, permit, core.capacity.clone()));
    let cancel = CancellationToken::new();
    let ctx = ToolContext::builder()
        .run_id(call.run.clone())
        .call_id(call.call_id.clone())
        .tenant(call.tenant.clone())
        .tool_name(entry.tool.name())
        .attempt(attempt)
        .idempotency_key(key)
        .meta(call.meta.clone())
        .cancellation_token(cancel.clone())
        .engine(core.engine.clone())
        .permit(slot.clone())
        .registry_state(&entry.handler.registry.state)
        .build();
    let span = tracing::info_span!(
        "execute_tool",
        otel.name = %format!("execute_tool {}", entry.tool.name()),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %entry.tool.name(),
        gen_ai.tool.call.id = %call.call_id,
        attempt,
        fence = attempt,
        pool = %entry.config.pool,
        outcome = tracing::field::Empty,
    );
    let timeout = entry.config.timeout;
    let running = tokio::time::timeout(timeout, prepared.run(ctx));
    let result = with_progress(core, carrier, lease, Some(&cancel), running)
        .instrument(span.clone())
        .await;
    slot.release();
    let Some(result) = result else {
        span.record("outcome", "lease_lost");
        return Executed::Cancelled;
    };
    let outcome = match result {
        Err(_) => {
            cancel.cancel();
            call.failed(
                FailureKind::Timeout,
                format!(
                    "the tool did not finish within {:.1} s and was stopped",
                    timeout.as_secs_f64()
                ),
                attempt,
            )
        }
        Ok(Err(CallError::BadArgs(error))) => {
            call.failed(FailureKind::BadArgs, error.to_string(), attempt)
        }
        Ok(Err(CallError::Tool(error))) => {
            if let Some(detail) = error.detail() {
                tracing::warn!(parent: &span, detail, "tool error");
            }
            call.failed(FailureKind::Error, error.message(), attempt)
        }
        Ok(Err(CallError::Panic(message))) => {
            tracing::error!(parent: &span, panic = %message, "tool panicked");
            call.failed(
                FailureKind::Panic,
                format!("the tool crashed: {message}"),
                attempt,
            )
        }
        Ok(Ok(value)) if crate::args::json_len(&value) > entry.handler.max_result_bytes => {
            let (len, limit) = (
                crate::args::json_len(&value),
                entry.handler.max_result_bytes,
            );
            call.failed(
                FailureKind::Error,
                format!("the result is {len} bytes; the limit is {limit} bytes. Ask for less data"),
                attempt,
            )
        }
        Ok(Ok(value)) => {
            let checked = match &post_args {
                Some(arguments) => entry
                    .handler
                    .guards
                    .check_after(&call.policy(arguments), value),
                None => Ok(value),
            };
            match checked {
                Ok(result) => Outcome::Completed(ToolCompleted {
                    call_id: call.call_id.clone(),
                    name: call.name.clone(),
                    result,
                    attempt,
                }),
                Err(reason) => call.failed(FailureKind::Policy, reason, attempt),
            }
        }
    };
    span.record("outcome", outcome.label());
    Executed::Done(outcome)
}

/// Emits a guard fact for the record ([`Bus::emit`](crate::bus::Bus::emit)): nobody
/// waits for it to be stored, it goes out ahead of everything this worker publishes
/// later (so it precedes the call's outcome), and a bus that cannot take it loses it
/// with a warning here at most. The guard's decisions never read these facts. Sent
/// once and never again, they carry no de-duplication id (which would cost the bus an
/// entry in its de-duplication window per fact for nothing).
pub(super) async fn emit_fact(core: &Core, call: &Call, kind: &str, data: impl serde::Serialize) {
    let event = call.draft(core, kind, data);
    let (subject, bytes) = (event.bus_subject(), event.to_bytes());
    if let Err(error) = core.engine.bus().emit(&subject, bytes, None).await {
        tracing::warn!(%error, kind, "could not send a fact");
    }
}

/// Publishes a guard fact (best effort: the guard's decisions do not wait on it).
pub(super) async fn publish_fact(
    core: &Core,
    call: &Call,
    kind: &str,
    data: impl serde::Serialize,
) {
    let event = call.draft(core, kind, data);
    publish(core, &RetryPolicy::default(), &event).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn outcome_data_is_what_serde_writes_for_the_fact() {
        let call_id = CallId::new("c-1").unwrap();
        let completed = ToolCompleted {
            call_id: call_id.clone(),
            name: "add".into(),
            result: json!({"sum": 5}),
            attempt: 2,
        };
        let failed = ToolFailed {
            call_id,
            name: "add".into(),
            kind: FailureKind::OutcomeUnknown,
            message: "lost".into(),
            attempt: 1,
        };
        let expected = serde_json::to_string(&completed).unwrap();
        let recorded = Outcome::Completed(completed).recorded();
        assert_eq!(
            (recorded.kind.as_str(), recorded.data.get()),
            (TOOL_COMPLETED, expected.as_str())
        );
        let expected = serde_json::to_string(&failed).unwrap();
        let recorded = Outcome::Failed(failed).recorded();
        assert_eq!(
            (recorded.kind.as_str(), recorded.data.get()),
            (TOOL_FAILED, expected.as_str())
        );
    }
}
