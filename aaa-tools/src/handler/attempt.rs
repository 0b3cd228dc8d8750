//! Running one attempt of a call: its pool permit, its timeout, panics and post-call
//! guardrails, with progress reports (and lease renewals under the guard) every
//! heartbeat while it waits and runs.

use std::future::Future;
use std::sync::Arc;

use aaa_guard::LostLease;
use serde_json::Value;
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::call::{Call, Outcome};
use super::cancels::Watch;
use super::core::{Core, Entry};
use super::lease::Lease;
use crate::bus::Message;
use crate::context::{PermitSlot, ToolContext};
use crate::error::CallError;
use crate::event::{FailureKind, ToolCompleted};

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
                // enlarge: unboxed, a message's handling grows from 3,928 to 4,512
                // bytes (`lanes::tests::a_messages_handling_stays_small`).
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
    still_working(message).await;
    None
}

/// Sleeps one `poll` of a delivery that waits for a live holder, telling the bus every
/// heartbeat that `message` is still being worked on. `reported` is when it last did:
/// the heartbeat counts across polls, which are often shorter than one (a timer started
/// afresh each poll would never tick, and the bus would hand the message out again at
/// its ack deadline while this delivery still waits).
pub(super) async fn wait_a_poll(
    core: &Core,
    message: &Message,
    poll: std::time::Duration,
    reported: &mut tokio::time::Instant,
) {
    let until = tokio::time::Instant::now() + poll;
    loop {
        let beat = *reported + core.heartbeat();
        if beat >= until {
            tokio::time::sleep_until(until).await;
            return;
        }
        tokio::time::sleep_until(beat).await;
        still_working(message).await;
        *reported = tokio::time::Instant::now();
    }
}

/// Tells the bus that `message` is still being worked on, so that it is not handed out
/// again at its ack deadline.
async fn still_working(message: &Message) {
    if let Err(error) = message.in_progress().await {
        tracing::warn!(%error, seq = message.seq, "could not report progress");
    }
}

/// How running a tool ended.
pub(super) enum Executed {
    /// It produced an outcome (possibly after losing its lease, under `Finish`).
    Done(Outcome),
    /// It lost its lease under `Cancel` and was cancelled: nothing is recorded.
    Cancelled,
}

/// How a tool's run ended, with the caller's cancel in play.
enum Ran<T> {
    /// It finished (or timed out) on its own.
    Finished(T),
    /// The caller cancelled it; `returned` when it returned within its grace after
    /// being told (else it was dropped).
    Cancelled { returned: bool },
}

/// Runs `fut` until it finishes or the caller cancels the call: then the tool is
/// told (`ctx` fires) and gets `grace` to return before it is dropped. Whatever it
/// returns after the cancel is not its outcome: the caller asked for the call to
/// stop, and is told it did (with what it may have done).
async fn unless_cancelled<F: Future>(
    fut: F,
    watch: &Watch<'_>,
    ctx: &CancellationToken,
    grace: std::time::Duration,
) -> Ran<F::Output> {
    let mut fut = std::pin::pin!(fut);
    tokio::select! {
        biased;
        out = &mut fut => Ran::Finished(out),
        () = watch.cancelled() => {
            ctx.cancel();
            let returned = tokio::time::timeout(grace, &mut fut).await.is_ok();
            Ran::Cancelled { returned }
        }
    }
}

/// A `cancelled` failure of a call that never ran.
fn cancelled_before(call: &Call, watch: &Watch<'_>, attempt: u32) -> Executed {
    let text = super::approval::cancelled_message(
        "the caller cancelled this call before it ran; it did not run",
        watch.reason().as_deref(),
    );
    Executed::Done(call.failed(FailureKind::Cancelled, text, attempt))
}

/// Runs one attempt: pool permit, timeout, panics, post-call guardrails, and the
/// caller's cancel (which ends the attempt as a `cancelled` failure: before it
/// starts, while it waits for a permit, or while the tool runs, after telling the
/// tool and giving it one heartbeat to return).
#[allow(
    clippy::too_many_arguments,
    reason = "one attempt's parts, each borrowed from a different owner"
)]
pub(super) async fn execute(
    core: &Core,
    entry: &Entry,
    call: &Call,
    arguments: &Value,
    carrier: &Message,
    attempt: u32,
    lease: Option<&Lease<'_>>,
    watch: &Watch<'_>,
) -> Executed {
    if watch.is_cancelled() {
        return cancelled_before(call, watch, attempt);
    }
    let key = match entry.tool.custom_idempotency_key(arguments) {
        Ok(key) => key,
        Err(error) => {
            return Executed::Done(call.failed(FailureKind::BadArgs, error.to_string(), attempt));
        }
    };
    // The arguments were checked at admission (and, for approvals, before they were
    // recorded): decode only.
    let prepared = match entry.tool.prepare_checked(arguments) {
        Ok(prepared) => prepared,
        Err(error) => {
            return Executed::Done(call.failed(FailureKind::BadArgs, error.to_string(), attempt));
        }
    };
    let pool = core.pool(&entry.config.pool);
    let waiting = async {
        tokio::select! {
            biased;
            permit = pool.clone().acquire_owned() => Some(permit),
            () = watch.cancelled() => None,
        }
    };
    let permit: OwnedSemaphorePermit =
        match with_progress(core, carrier, lease, None, waiting).await {
            None => return Executed::Cancelled,
            Some(None) => return cancelled_before(call, watch, attempt),
            Some(Some(Ok(permit))) => permit,
            Some(Some(Err(_))) => {
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
        .tool_name(entry.tool.shared_name())
        .attempt(attempt)
        .idempotency_key_if_any(key)
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
    let running = unless_cancelled(running, watch, &cancel, core.heartbeat());
    let result = with_progress(core, carrier, lease, Some(&cancel), running)
        .instrument(span.clone())
        .await;
    slot.release();
    let result = match result {
        None => {
            span.record("outcome", "lease_lost");
            return Executed::Cancelled;
        }
        Some(Ran::Finished(result)) => result,
        Some(Ran::Cancelled { returned }) => {
            let what = if returned {
                "the caller cancelled this call while it ran, and the tool stopped when told; \
                 what it did before it stopped is not undone, and what it returned is dropped"
            } else {
                "the caller cancelled this call while it ran, and the tool was stopped; \
                 what it did before it stopped is not undone"
            };
            let text = super::approval::cancelled_message(what, watch.reason().as_deref());
            span.record("outcome", FailureKind::Cancelled.as_str());
            return Executed::Done(call.failed(FailureKind::Cancelled, text, attempt));
        }
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
            let guards = &entry.handler.guards;
            let checked = if guards.has_post_checks() {
                guards.check_after(&call.policy(arguments), value).await
            } else {
                Ok(value)
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
