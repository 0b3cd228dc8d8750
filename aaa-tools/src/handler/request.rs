//! Handling one tool request: read it, look the tool up, check the arguments and the
//! guardrails, then ask for approval or run the call.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::call::{self, Call, Disposition};
use super::core::{Core, Entry};
use super::policy::PreCall;
use super::{approval, bounds, guarded, lease, records};
use crate::args;
use crate::bus::Message;
use crate::error::ToolArgsError;
use crate::event::{FailureKind, Parsed, TOOL_REQUESTED, ToolRequested};
use crate::ids::{CallId, RunId, TenantId};
use crate::names;

/// Reads what a malformed request still tells: its call id and name. The tenant and
/// run are the subject's, never the body's.
fn salvage(tenant: TenantId, run: RunId, payload: &[u8]) -> Option<Call> {
    let raw: Value = serde_json::from_slice(payload).ok()?;
    Some(Call {
        tenant,
        run,
        call_id: CallId::new(raw.pointer("/data/call_id")?.as_str()?).ok()?,
        name: bounds::echoed_name(
            raw.pointer("/data/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .into(),
        ),
        meta: Map::new(),
    })
}

pub(super) async fn handle_request(core: &Core, message: Message) {
    // Borrowed: the arguments are read where they lie in the payload, never copied
    // whole (only an approval, which records them, takes a copy).
    let parsed = Parsed::<ToolRequested>::borrow_payload(&message.payload);
    // The subject decides the tenant and the run: a server's permissions bound who may
    // publish on it, while anyone may write anything in a body. Checked in place when
    // the attributes agree (every request), with ids built only when they do not.
    let (tenant, run, request) = match parsed {
        Ok(parsed)
            if parsed.kind == TOOL_REQUESTED
                && names::in_run(&message.subject, &parsed.tenant, &parsed.run) =>
        {
            (parsed.tenant, parsed.run, parsed.data)
        }
        other => {
            return refuse_or_drop(core, &message, other).await;
        }
    };
    let (call_id, name, meta, arguments) = match request {
        Cow::Borrowed(request) => (
            request.call_id.clone(),
            request.name.clone(),
            request.meta.clone(),
            Cow::Borrowed(&*request.arguments),
        ),
        Cow::Owned(request) => (
            request.call_id,
            request.name,
            request.meta,
            Cow::Owned(Arc::unwrap_or_clone(request.arguments)),
        ),
    };
    let call = Call {
        tenant,
        run,
        call_id,
        name: bounds::echoed_name(name),
        meta,
    };
    let (disposition, guarded) = admit_and_run(core, &call, arguments, &message).await;
    if call::settle(&message, disposition).await && disposition == Disposition::Ack && guarded {
        lease::retire(core, &call).await;
    }
}

/// A request that is not one of its subject's run's: refused on the subject's run
/// when it names a call, dropped otherwise.
async fn refuse_or_drop(
    core: &Core,
    message: &Message,
    parsed: Result<Parsed<Cow<'_, ToolRequested>>, crate::event::EventError>,
) {
    let Some((tenant, run)) = names::run_of_subject(&message.subject) else {
        tracing::error!(subject = %message.subject, "a tool request outside the run subjects; terminating it");
        let _ = message.term().await;
        return;
    };
    match parsed {
        Ok(parsed) if parsed.kind == TOOL_REQUESTED => {
            let said = (&parsed.tenant, &parsed.run);
            let call = Call {
                tenant,
                run,
                call_id: parsed.data.call_id.clone(),
                name: bounds::echoed_name(parsed.data.name.clone()),
                meta: Map::new(),
            };
            refuse_misaddressed(core, &call, said, message).await;
        }
        Ok(parsed) => {
            let kind = parsed.kind;
            tracing::error!(subject = %message.subject, %kind, "not a tool request; terminating it");
            let _ = message.term().await;
        }
        Err(error) => {
            tracing::error!(subject = %message.subject, %error, "unreadable tool request; terminating it");
            if let Some(call) = salvage(tenant, run, &message.payload) {
                let text = format!("the request could not be read: {error}");
                let outcome = call.failed(FailureKind::BadRequest, text, 0);
                call::publish_outcome(core, &super::RetryPolicy::default(), &call, outcome).await;
            }
            let _ = message.term().await;
        }
    }
}

/// Refuses a request whose attributes name another tenant or run than its subject:
/// a `bad_request` fact on the subject's own run, naming both.
async fn refuse_misaddressed(
    core: &Core,
    call: &Call,
    said: (&TenantId, &RunId),
    message: &Message,
) {
    tracing::warn!(
        subject = %message.subject, tenant = %said.0, run = %said.1,
        "a tool request whose attributes disagree with its subject; refusing it"
    );
    let text = format!(
        "the request was refused: its attributes name tenant `{}` and run `{}`, but it was \
         published on the subject of tenant `{}` and run `{}`, and the subject decides",
        said.0, said.1, call.tenant, call.run
    );
    let retry = super::RetryPolicy::default();
    let refused = refuse(core, &retry, call, FailureKind::BadRequest, text).await;
    call::settle(message, refused).await;
}

/// Fails `call` with `kind` before any attempt: publishes the failure.
async fn refuse(
    core: &Core,
    retry: &super::RetryPolicy,
    call: &Call,
    kind: FailureKind,
    message: String,
) -> Disposition {
    let outcome = call.failed(kind, message, 0);
    call::ack_if(call::publish_outcome(core, retry, call, outcome).await)
}

/// The checks before a call runs, then the run (or the approval request). Returns what
/// to do with the message, and whether the call ran under the guard (so has a record
/// to retire once the message is acknowledged).
async fn admit_and_run(
    core: &Core,
    call: &Call,
    arguments: Cow<'_, Value>,
    message: &Message,
) -> (Disposition, bool) {
    let Some(entry) = core.entry(&call.name) else {
        let text = core.unknown_tool_message(&call.name);
        let retry = super::RetryPolicy::default();
        let refused = refuse(core, &retry, call, FailureKind::UnknownTool, text).await;
        return (refused, false);
    };
    let retry = entry.handler.result_retry.clone();
    let arguments = match checked_arguments(&entry, arguments) {
        Ok(arguments) => arguments,
        Err(error) => {
            return (
                refuse(core, &retry, call, FailureKind::BadArgs, error.to_string()).await,
                false,
            );
        }
    };
    let mut approval_reason = None;
    let guards = &entry.handler.guards;
    let decision = if guards.has_pre_checks() {
        guards.check_before(&call.policy(&arguments)).await
    } else {
        PreCall::Allow
    };
    match decision {
        PreCall::Allow => {}
        PreCall::Reject(reason) => {
            return (
                refuse(core, &retry, call, FailureKind::Policy, reason).await,
                false,
            );
        }
        PreCall::RequireApproval(reason) => approval_reason = Some(reason),
    }
    match records::consume_budget(
        &**core.engine.store(),
        &entry.handler.guards,
        &call.tenant,
        &call.run,
        &call.call_id,
        &call.name,
    )
    .await
    {
        Ok(None) => {}
        Ok(Some(reason)) => {
            return (
                refuse(core, &retry, call, FailureKind::Policy, reason).await,
                false,
            );
        }
        Err(error) => {
            tracing::warn!(%error, "the budget store failed; the request will be delivered again");
            return (Disposition::Nak, false);
        }
    }
    // From here until the message is settled a cancel of the call reaches it.
    let watch = core.cancels.watch(core, call, message.seq, false).await;
    if entry.config.requires_approval || approval_reason.is_some() {
        if watch.is_cancelled() {
            let text = approval::cancelled_message(
                "the caller cancelled this call before it ran; it did not run",
                watch.reason().as_deref(),
            );
            return (
                refuse(core, &retry, call, FailureKind::Cancelled, text).await,
                false,
            );
        }
        // Boxed: the approval path is rare and would enlarge every call's task, from
        // 3,928 to 5,888 bytes (`lanes::tests::a_messages_handling_stays_small`).
        let requested = Box::pin(approval::request_approval(
            core,
            &entry,
            call,
            arguments.into_owned(),
            approval_reason,
            message,
        ))
        .await;
        if watch.is_cancelled() {
            // Cancelled while the approval was being asked for: the listener may have
            // looked for a pending approval before there was one.
            let key = (call.tenant.clone(), call.run.clone(), call.call_id.clone());
            Box::pin(approval::cancel_pending(
                core,
                key,
                watch.reason().as_deref(),
            ))
            .await;
        }
        return (requested, false);
    }
    let disposition = guarded::run_call(core, &entry, call, &arguments, message, &watch).await;
    (disposition, entry.config.guard.enabled)
}

/// The arguments as an object, parsed from text when a provider sent a string, within
/// the size limit, checked against the schema.
fn checked_arguments<'a>(
    entry: &Entry,
    arguments: Cow<'a, Value>,
) -> Result<Cow<'a, Value>, ToolArgsError> {
    let limit = entry.handler.registry.max_args_bytes();
    let name = entry.tool.name();
    let arguments = match &*arguments {
        Value::String(text) => Cow::Owned(entry.handler.registry.parse_args(name, text)?),
        Value::Null => Cow::Owned(Value::Object(Map::new())),
        other => {
            args::check_size(name, args::json_len(other), limit)?;
            arguments
        }
    };
    entry.tool.normalize_and_check(arguments)
}
