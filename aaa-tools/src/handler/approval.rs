//! Approvals: pending records, decisions that arrive before their request, grants
//! that outlive the worker that asked, timeouts and cancels.

use std::sync::Arc;
use std::time::Duration;

use aaa_guard::{RecordKind, StoreError};
use serde_json::{Map, Value};

use super::call::{self, Call, Disposition};
use super::core::{Core, Entry};
use super::records::{self, ApprovalRecord, ApprovalState, approval_key};
use super::{bounds, guarded, lease};
use crate::bus::{Message, Payload};
use crate::event::{
    self, APPROVAL_DENIED, APPROVAL_GRANTED, APPROVAL_REFUSED, APPROVAL_REQUESTED,
    ApprovalDecision, ApprovalRefused, ApprovalRequested, Event, FailureKind,
};
use crate::names::{self, CallName};

pub(super) async fn request_approval(
    core: &Core,
    entry: &Arc<Entry>,
    call: &Call,
    arguments: Value,
    reason: Option<String>,
    message: &Message,
) -> Disposition {
    let retry = entry.handler.result_retry.clone();
    // The approval request carries the arguments whole (the human approves what they
    // see), so they must fit in one fact.
    let bus = &**core.engine.bus();
    if let Some(room) = bounds::fact_room(bus) {
        let size = crate::args::json_len(&arguments);
        if size > room {
            let text = format!(
                "the arguments ({size} bytes) are too large to ask a human for approval: an \
                 approval request shows them whole, and one message on this bus holds at most \
                 {room} bytes of them; the call did not run"
            );
            let outcome = call.failed(FailureKind::BadRequest, text, 0);
            return call::ack_if(call::publish_outcome(core, &retry, call, outcome).await);
        }
    }
    let store = &**core.engine.store();
    let key = approval_key(&call.tenant, &call.run, &call.call_id);
    let fingerprint = event::fingerprint(
        &call.tenant,
        &call.run,
        &call.call_id,
        &call.name,
        &arguments,
    );
    let pending = ApprovalRecord {
        state: ApprovalState::Pending,
        name: call.name.clone(),
        arguments: arguments.clone(),
        meta: call.meta.clone(),
        fingerprint: Some(fingerprint.clone()),
        deadline_ms: records::deadline_ms(entry.handler.approval_timeout),
        reason: None,
        granted_by: None,
    };
    // Marked for the timeout sweep before the record exists, so a crash between the two
    // writes cannot leave a pending approval that never times out.
    let due = records::approval_due_key(&call.tenant, &call.run, &call.call_id);
    match store
        .create(
            RecordKind::Handler,
            &due,
            records::encode(&pending.deadline_ms),
        )
        .await
    {
        Ok(_) | Err(StoreError::Exists { .. }) => {}
        Err(error) => return store_failed(&error, "request"),
    }
    loop {
        let current = match records::read::<ApprovalRecord>(store, RecordKind::Handler, &key).await
        {
            Ok(current) => current,
            Err(error) => return store_failed(&error, "request"),
        };
        let written = match current {
            None => store
                .create(RecordKind::Handler, &key, records::encode(&pending))
                .await
                .map(|_| Decision::AskHuman),
            Some((early, revision))
                if matches!(
                    early.state,
                    ApprovalState::EarlyGranted | ApprovalState::EarlyDenied
                ) && early.fingerprint.as_deref() != Some(fingerprint.as_str()) =>
            {
                // A decision that came first applies only to the request it names: one
                // without a fingerprint, or for other arguments, pre-approves nothing.
                tracing::warn!(call_id = %call.call_id, "a decision that came before its request names no fingerprint or other arguments; asking a human");
                store
                    .update(
                        RecordKind::Handler,
                        &key,
                        records::encode(&pending),
                        revision,
                    )
                    .await
                    .map(|_| Decision::AskHuman)
            }
            Some((early, revision)) if early.state == ApprovalState::EarlyGranted => {
                let granted = ApprovalRecord {
                    state: ApprovalState::Granted,
                    ..pending.clone()
                };
                store
                    .update(
                        RecordKind::Handler,
                        &key,
                        records::encode(&granted),
                        revision,
                    )
                    .await
                    .map(|r| Decision::Run(r, Box::new(granted)))
            }
            Some((early, revision)) if early.state == ApprovalState::EarlyDenied => {
                let done = ApprovalRecord {
                    state: ApprovalState::Done,
                    reason: early.reason.clone(),
                    ..pending.clone()
                };
                store
                    .update(RecordKind::Handler, &key, records::encode(&done), revision)
                    .await
                    .map(|_| Decision::Denied(early.reason))
            }
            // Recorded and still pending: this delivery may follow one whose write
            // succeeded unseen (a lost answer) and never asked anyone. Ask again: the
            // request fact's message id makes a second one a no-op.
            Some((recorded, _))
                if recorded.state == ApprovalState::Pending
                    && recorded.fingerprint.as_deref() == Some(fingerprint.as_str()) =>
            {
                Ok(Decision::AskHuman)
            }
            // Decided already: this is a duplicate delivery of the request.
            Some(_) => Ok(Decision::Duplicate),
        };
        match written {
            Ok(Decision::AskHuman) => break,
            Ok(Decision::Duplicate) => {
                return Disposition::Ack;
            }
            Ok(Decision::Denied(reason)) => {
                let outcome =
                    call.failed(FailureKind::Denied, denial_message(reason.as_deref()), 0);
                return call::ack_if(call::publish_outcome(core, &retry, call, outcome).await);
            }
            Ok(Decision::Run(revision, record)) => {
                return run_granted(core, entry, call, &key, revision, *record, message).await;
            }
            Err(StoreError::Conflict { .. } | StoreError::Exists { .. }) => continue,
            Err(error) => return store_failed(&error, "request"),
        }
    }
    let data = ApprovalRequested {
        call_id: call.call_id.clone(),
        name: call.name.clone(),
        arguments,
        fingerprint,
        reason,
    };
    let mut event = core.engine.event(
        APPROVAL_REQUESTED,
        &call.tenant,
        &call.run,
        Some(&call.call_id),
        serde_json::to_value(&data).unwrap_or(Value::Null),
    );
    event.id = CallName::ApprovalRequestedId.of(&call.tenant, &call.run, &call.call_id);
    let (subject, id) = (event.bus_subject(), event.id.clone());
    let payload = Payload::from(event.to_bytes());
    let published = retry
        .run(|| {
            core.engine
                .bus()
                .publish(&subject, payload.clone(), Some(&id))
        })
        .await
        .is_ok();
    call::ack_if(published)
}

enum Decision {
    AskHuman,
    Duplicate,
    Denied(Option<String>),
    Run(aaa_guard::Revision, Box<ApprovalRecord>),
}

fn denial_message(reason: Option<&str>) -> String {
    match reason {
        Some(reason) if !reason.trim().is_empty() => format!("a human denied this call: {reason}"),
        _ => "a human denied this call".to_owned(),
    }
}

/// Runs a granted call (under the guard), publishes its outcome, and marks the
/// approval done before the carrier (the grant, or the early-granted request) is acked.
async fn run_granted(
    core: &Core,
    entry: &Entry,
    call: &Call,
    key: &str,
    revision: aaa_guard::Revision,
    record: ApprovalRecord,
    carrier: &Message,
) -> Disposition {
    // A cancel that came while the call waited and that no worker could act on (none
    // listened, say) is looked for here: once per granted call.
    let watch = core.cancels.watch(core, call, carrier.seq, true).await;
    let disposition =
        guarded::run_call(core, entry, call, &record.arguments, carrier, &watch).await;
    drop(watch);
    if disposition == Disposition::Ack {
        let done = ApprovalRecord {
            state: ApprovalState::Done,
            ..record
        };
        match core
            .engine
            .store()
            .update(RecordKind::Handler, key, records::encode(&done), revision)
            .await
        {
            // The approval answers a repeated decision from now on: the call's own
            // record (if it ran under the guard) is settled.
            Ok(_) if entry.config.guard.enabled => lease::retire(core, call).await,
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(%error, key, "could not mark an approval done; its outcome is published");
            }
        }
    }
    disposition
}

/// Logs a failed approval-store operation; the message is delivered again.
fn store_failed(error: &StoreError, what: &str) -> Disposition {
    tracing::warn!(%error, "the approval store failed; the {what} will be delivered again");
    Disposition::Nak
}

/// Handles one approval decision and settles its message.
pub(super) async fn handle_signal(core: &Core, message: Message) {
    let disposition = decide(core, &message).await;
    call::settle(&message, disposition).await;
}

async fn decide(core: &Core, message: &Message) -> Disposition {
    let parsed = Event::from_bytes(&message.payload).and_then(|event| {
        if event.kind != APPROVAL_GRANTED && event.kind != APPROVAL_DENIED {
            return Ok(None);
        }
        event
            .data_as::<ApprovalDecision>()
            .map(|decision| Some((event, decision)))
    });
    let (event, decision) = match parsed {
        Ok(Some(ok)) => ok,
        // The consumer sees every approval fact (one filter works on every server
        // version); requests are not decisions.
        Ok(None) => return Disposition::Ack,
        Err(error) => {
            tracing::error!(subject = %message.subject, %error, "unreadable approval decision; terminating it");
            return Disposition::Term;
        }
    };
    let granted = event.kind == APPROVAL_GRANTED;
    // The subject decides the tenant and the run (see `handle_request`).
    let Some((tenant, run)) = names::run_of_subject(&message.subject) else {
        tracing::error!(subject = %message.subject, "an approval decision outside the run subjects; dropping it");
        return Disposition::Term;
    };
    let mut call = Call {
        tenant,
        run,
        call_id: decision.call_id.clone(),
        name: Arc::default(),
        meta: Map::new(),
    };
    if event.aaatenant != call.tenant || event.aaarunid != call.run {
        let why = format!(
            "its attributes name tenant `{}` and run `{}`, but it was published on the subject \
             of tenant `{}` and run `{}`, and the subject decides",
            event.aaatenant, event.aaarunid, call.tenant, call.run
        );
        return refuse_decision(core, &call, &event, why).await;
    }
    let store = &**core.engine.store();
    let key = approval_key(&call.tenant, &call.run, &decision.call_id);
    loop {
        let current = match records::read::<ApprovalRecord>(store, RecordKind::Handler, &key).await
        {
            Ok(current) => current,
            Err(error) => return store_failed(&error, "decision"),
        };
        let Some((record, revision)) = current else {
            // The decision came first: keep it for when the request arrives, which
            // applies it only if it names that request's fingerprint.
            let early = ApprovalRecord {
                state: if granted {
                    ApprovalState::EarlyGranted
                } else {
                    ApprovalState::EarlyDenied
                },
                name: Arc::default(),
                arguments: Value::Null,
                meta: Map::new(),
                fingerprint: decision.fingerprint.clone(),
                deadline_ms: 0,
                reason: decision.reason.clone(),
                granted_by: granted.then(|| event.id.clone()),
            };
            match store
                .create(RecordKind::Handler, &key, records::encode(&early))
                .await
            {
                Ok(_) => return Disposition::Ack,
                Err(StoreError::Exists { .. }) => continue,
                Err(error) => return store_failed(&error, "decision"),
            }
        };
        call.name = record.name.clone();
        call.meta = record.meta.clone();
        let resumed = record.state == ApprovalState::Granted
            && granted
            && record.granted_by.as_deref() == Some(event.id.as_str());
        if record.state != ApprovalState::Pending && !resumed {
            let why = match record.state {
                ApprovalState::EarlyGranted | ApprovalState::EarlyDenied => {
                    "a decision for this call is already waiting for its request"
                }
                _ => "the call is no longer pending: it was decided already, or has finished",
            };
            return refuse_decision(core, &call, &event, why.to_owned()).await;
        }
        if let Err(why) = binds(&decision, record.fingerprint.as_deref()) {
            return refuse_decision(core, &call, &event, why).await;
        }
        if !granted {
            let done = ApprovalRecord {
                state: ApprovalState::Done,
                reason: decision.reason.clone(),
                ..record
            };
            match store
                .update(RecordKind::Handler, &key, records::encode(&done), revision)
                .await
            {
                Ok(_) => {}
                Err(StoreError::Conflict { .. }) => continue,
                Err(error) => return store_failed(&error, "decision"),
            }
            let outcome = call.failed(
                FailureKind::Denied,
                denial_message(decision.reason.as_deref()),
                0,
            );
            let published =
                call::publish_outcome(core, &core.retry_for(&call.name), &call, outcome).await;
            return call::ack_if(published);
        }
        let Some(entry) = core.entry(&call.name) else {
            // A worker that does not serve this tool leaves the grant for one that does.
            return Disposition::Nak;
        };
        if resumed {
            // The same grant delivered again: its worker died mid-call; resume it.
            return run_granted(core, &entry, &call, &key, revision, record, message).await;
        }
        let granted_record = ApprovalRecord {
            state: ApprovalState::Granted,
            granted_by: Some(event.id.clone()),
            ..record
        };
        match store
            .update(
                RecordKind::Handler,
                &key,
                records::encode(&granted_record),
                revision,
            )
            .await
        {
            Ok(revision) => {
                return run_granted(core, &entry, &call, &key, revision, granted_record, message)
                    .await;
            }
            Err(StoreError::Conflict { .. }) => continue,
            Err(error) => return store_failed(&error, "decision"),
        }
    }
}

/// Whether `decision` applies to a pending call whose request had `fingerprint`: it
/// must name that fingerprint, or say explicitly that it approves any arguments.
fn binds(decision: &ApprovalDecision, fingerprint: Option<&str>) -> Result<(), String> {
    match (&decision.fingerprint, fingerprint) {
        (Some(named), Some(pending)) if named == pending => Ok(()),
        (Some(_), _) => Err(
            "it names the fingerprint of other arguments than the pending \
             call's; the call stays pending"
                .to_owned(),
        ),
        (None, _) if decision.any_arguments => Ok(()),
        (None, _) => Err(
            "it names no fingerprint and does not say `any_arguments`; a decision \
             is bound to the arguments it saw (the fingerprint of `aaa.approval.requested`), \
             and the call stays pending"
                .to_owned(),
        ),
    }
}

/// Drops a decision that cannot apply, with a warning and an `aaa.approval.refused`
/// fact on the subject's own run saying why; nothing else changes.
async fn refuse_decision(core: &Core, call: &Call, event: &Event, reason: String) -> Disposition {
    tracing::warn!(
        call_id = %call.call_id, tenant = %call.tenant, run = %call.run, %reason,
        "an approval decision was refused"
    );
    let data = ApprovalRefused {
        call_id: call.call_id.clone(),
        decision: event.kind.clone(),
        decision_id: event.id.clone(),
        reason,
    };
    call::publish_fact(core, call, APPROVAL_REFUSED, data).await;
    Disposition::Ack
}

/// Fails pending approvals whose deadline passed. Every worker sweeps; the
/// compare-and-set on the record lets exactly one of them publish the failure.
pub(super) async fn sweep_approvals(core: Arc<Core>) {
    let interval = {
        let tools = core.tools.read().unwrap_or_else(|p| p.into_inner());
        let shortest = tools
            .values()
            .map(|e| e.handler.approval_timeout)
            .min()
            .unwrap_or(Duration::from_secs(60));
        (shortest / 4).clamp(Duration::from_millis(10), Duration::from_secs(1))
    };
    let store = core.engine.store().clone();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = core.stop.cancelled() => return,
        }
        let Ok(keys): Result<Vec<String>, _> = store
            .keys(RecordKind::Handler, &CallName::ApprovalDueKey.prefix())
            .await
        else {
            continue;
        };
        let now = records::now_ms();
        for due in keys {
            let Some((tenant, run, call_id)) = CallName::ApprovalDueKey.parse(&due) else {
                continue;
            };
            let key = approval_key(&tenant, &run, &call_id);
            let found =
                match records::read::<ApprovalRecord>(&*store, RecordKind::Handler, &key).await {
                    Ok(found) => found,
                    Err(_) => continue,
                };
            let (record, revision) = match found {
                Some((record, _)) if record.state != ApprovalState::Pending => {
                    // Decided: nothing left to time out.
                    let _ = store.delete(RecordKind::Handler, &due).await;
                    continue;
                }
                Some(found) => found,
                None => {
                    // The request's worker died between the two writes: forget the mark
                    // once its deadline has passed.
                    if let Ok(Some((deadline, _))) =
                        records::read::<u64>(&*store, RecordKind::Handler, &due).await
                        && deadline <= now
                    {
                        let _ = store.delete(RecordKind::Handler, &due).await;
                    }
                    continue;
                }
            };
            if record.deadline_ms > now {
                continue;
            }
            let done = ApprovalRecord {
                state: ApprovalState::Done,
                ..record.clone()
            };
            if store
                .update(RecordKind::Handler, &key, records::encode(&done), revision)
                .await
                .is_err()
            {
                continue;
            }
            let _ = store.delete(RecordKind::Handler, &due).await;
            let call = Call {
                tenant,
                run,
                call_id,
                name: record.name.clone(),
                meta: Map::new(),
            };
            let outcome = call.failed(
                FailureKind::ApprovalTimeout,
                "nobody approved this call in time; it did not run",
                0,
            );
            let retry = core.retry_for(&call.name);
            call::publish_outcome(&core, &retry, &call, outcome).await;
        }
    }
}

/// Fails the call `key` as `cancelled` if it is waiting for approval (a cancel heard
/// for a call no worker handles). Every worker that hears the cancel tries; the
/// compare-and-set on the approval record lets exactly one of them publish the
/// failure. Anything else (no approval, decided already) is left as it is.
pub(super) async fn cancel_pending(
    core: &Core,
    (tenant, run, call_id): (crate::TenantId, crate::RunId, crate::CallId),
    reason: Option<&str>,
) {
    let store = &**core.engine.store();
    let key = approval_key(&tenant, &run, &call_id);
    let record = loop {
        let (record, revision) = match records::read::<ApprovalRecord>(
            store,
            RecordKind::Handler,
            &key,
        )
        .await
        {
            Ok(Some(found)) if found.0.state == ApprovalState::Pending => found,
            Ok(_) => return,
            Err(error) => {
                tracing::warn!(%error, %call_id, "could not read an approval to cancel it; it stays pending");
                return;
            }
        };
        let done = ApprovalRecord {
            state: ApprovalState::Done,
            ..record.clone()
        };
        match store
            .update(RecordKind::Handler, &key, records::encode(&done), revision)
            .await
        {
            Ok(_) => break record,
            Err(StoreError::Conflict { .. }) => continue,
            Err(error) => {
                tracing::warn!(%error, %call_id, "could not cancel a pending approval; it stays pending");
                return;
            }
        }
    };
    let _ = store
        .delete(
            RecordKind::Handler,
            &records::approval_due_key(&tenant, &run, &call_id),
        )
        .await;
    let call = Call {
        tenant,
        run,
        call_id,
        name: record.name.clone(),
        meta: Map::new(),
    };
    let text = cancelled_message(
        "the caller cancelled this call while it waited for approval; it did not run",
        reason,
    );
    let outcome = call.failed(FailureKind::Cancelled, text, 0);
    call::publish_outcome(core, &core.retry_for(&call.name), &call, outcome).await;
}

/// The message of a `cancelled` failure: `what` happened, and the caller's reason.
pub(super) fn cancelled_message(what: &str, reason: Option<&str>) -> String {
    match reason {
        Some(reason) if !reason.trim().is_empty() => format!("{what} (the caller said: {reason})"),
        _ => what.to_owned(),
    }
}
