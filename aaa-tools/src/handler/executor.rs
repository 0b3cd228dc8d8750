//! The executor: consumes requests and approval signals, runs calls, publishes
//! outcomes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::call::{self, Call, Disposition};
use super::core::{Core, Entry, Ticket};
use super::lanes::Lanes;
use super::policy::PreCall;
use super::{HandlerError, ToolConfig, ToolHandler, approval, guarded, records};
use crate::args;
use crate::bus::{ConsumerSpec, Message, Subscription};
use crate::engine::Engine;
use crate::error::{ArgProblem, ToolArgsError};
use crate::event::{FailureKind, Parsed, TOOL_REQUESTED, ToolRequested};
use crate::ids::{CallId, RunId, TenantId};
use crate::tool::Tool;

/// The durable consumer of tool requests.
pub(crate) const REQUESTS_CONSUMER: &str = "aaa-tool-requests";
/// The durable consumer of approval decisions.
pub(crate) const SIGNALS_CONSUMER: &str = "aaa-approval-signals";

/// The executor of one engine; stops its loops (and every call they run) when dropped.
pub(crate) struct Executor {
    core: Arc<Core>,
    loops: Mutex<Vec<JoinHandle<()>>>,
}

impl Drop for Executor {
    fn drop(&mut self) {
        for task in self
            .loops
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            task.abort();
        }
    }
}

/// A handler attached to an engine. Keep it alive while the worker should run.
///
/// Dropping the last handle of an engine's executor stops it at once, as a crash would:
/// calls in flight are abandoned unacknowledged and the bus delivers them again.
/// [`shutdown`](Self::shutdown) stops gracefully.
#[derive(Clone)]
pub struct HandlerHandle {
    executor: Arc<Executor>,
}

impl std::fmt::Debug for HandlerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tools = self
            .executor
            .core
            .order
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        f.debug_struct("HandlerHandle")
            .field("tools", &tools)
            .finish()
    }
}

impl HandlerHandle {
    /// The names of every tool the engine's executor serves.
    pub fn tools(&self) -> Vec<String> {
        self.executor
            .core
            .order
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Stops taking requests, lets running calls finish for up to `deadline`, then
    /// cancels the rest and leaves their requests unacknowledged for redelivery.
    pub async fn shutdown(self, deadline: Duration) {
        *self
            .executor
            .core
            .drain
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = deadline;
        self.executor.core.stop.cancel();
        let loops: Vec<JoinHandle<()>> = self
            .executor
            .loops
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
            .collect();
        for task in loops {
            let _ = task.await;
        }
    }
}

impl Executor {
    pub(crate) async fn attach(
        engine: &Engine,
        handler: Arc<ToolHandler>,
        tools: Vec<(Tool, ToolConfig)>,
    ) -> Result<HandlerHandle, HandlerError> {
        let existing = engine
            .inner
            .executor
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .upgrade()
            .and_then(|any| any.downcast::<Executor>().ok());
        if let Some(executor) = existing.filter(|e| !e.core.stop.is_cancelled()) {
            executor.core.add(handler, tools)?;
            return Ok(HandlerHandle { executor });
        }
        let core = Arc::new(Core::new(engine, handler.effective_ack_wait()));
        let max_in_flight = handler.max_in_flight;
        core.add(handler, tools)?;
        let requests = ConsumerSpec::new(REQUESTS_CONSUMER, ["aaa.*.*.tool.requested"])
            .with_ack_wait(core.ack_wait)
            .with_max_in_flight(max_in_flight);
        // One filter for every approval fact (servers before 2.10 take one filter per
        // consumer); the signal handler acknowledges the requests it does not need.
        let signals = ConsumerSpec::new(SIGNALS_CONSUMER, ["aaa.*.*.approval.*"])
            .with_ack_wait(core.ack_wait)
            .with_max_in_flight(max_in_flight);
        let request_sub = engine.bus().subscribe(&requests).await?;
        let signal_sub = engine.bus().subscribe(&signals).await?;
        let loops = vec![
            tokio::spawn(consume(
                core.clone(),
                request_sub,
                max_in_flight,
                Kind::Request,
            )),
            tokio::spawn(consume(
                core.clone(),
                signal_sub,
                max_in_flight,
                Kind::Signal,
            )),
            tokio::spawn(approval::sweep_approvals(core.clone())),
        ];
        let executor = Arc::new(Executor {
            core,
            loops: Mutex::new(loops),
        });
        *engine
            .inner
            .executor
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = {
            let any: Arc<dyn std::any::Any + Send + Sync> = executor.clone();
            Arc::downgrade(&any)
        };
        Ok(HandlerHandle { executor })
    }
}

/// What a consumer receives.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Tool requests.
    Request,
    /// Approval decisions.
    Signal,
}

/// Pulls messages while there is room and hands each to a lane.
async fn consume(
    core: Arc<Core>,
    mut subscription: Box<dyn Subscription>,
    max_in_flight: usize,
    kind: Kind,
) {
    let room = Arc::new(Semaphore::new(max_in_flight));
    let mut lanes = Lanes::new(core.clone(), kind);
    loop {
        let slot = tokio::select! {
            slot = room.clone().acquire_owned() => match slot { Ok(s) => s, Err(_) => break },
            _ = core.stop.cancelled() => break,
        };
        let Some(free) = core.wait_for_capacity().await else {
            break;
        };
        let batch = free.min(room.available_permits() + 1);
        let message = tokio::select! {
            message = subscription.next_with_room(batch) => message,
            _ = core.stop.cancelled() => break,
        };
        match message {
            Ok(message) => lanes.run(message, slot, Ticket::new(core.clone())),
            Err(error) => {
                tracing::warn!(%error, "the bus failed to deliver; retrying in 1 s");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    _ = core.stop.cancelled() => break,
                }
            }
        }
    }
    // Graceful stop: running calls get the drain deadline; the rest stay unacked.
    let deadline = *core.drain.lock().unwrap_or_else(|p| p.into_inner());
    lanes.drain(deadline).await;
    drop(subscription);
}

/// Handles one received message of `kind`.
pub(super) async fn handle(kind: Kind, core: &Core, message: Message) {
    match kind {
        Kind::Request => handle_request(core, message).await,
        Kind::Signal => approval::handle_signal(core, message).await,
    }
}

/// Reads what a malformed request still tells: tenant, run, call id and name.
fn salvage(payload: &[u8]) -> Option<Call> {
    let raw: Value = serde_json::from_slice(payload).ok()?;
    Some(Call {
        tenant: TenantId::new(raw.get("aaatenant")?.as_str()?).ok()?,
        run: RunId::new(raw.get("aaarunid")?.as_str()?).ok()?,
        call_id: CallId::new(raw.pointer("/data/call_id")?.as_str()?).ok()?,
        name: raw
            .pointer("/data/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        meta: Map::new(),
    })
}

async fn handle_request(core: &Core, message: Message) {
    let parsed = Parsed::<ToolRequested>::from_payload(&message.payload);
    let (tenant, run, request) = match parsed {
        Ok(parsed) if parsed.kind == TOOL_REQUESTED => (parsed.tenant, parsed.run, parsed.data),
        Ok(parsed) => {
            let kind = parsed.kind;
            tracing::error!(subject = %message.subject, %kind, "not a tool request; terminating it");
            let _ = message.term().await;
            return;
        }
        Err(error) => {
            tracing::error!(subject = %message.subject, %error, "unreadable tool request; terminating it");
            if let Some(call) = salvage(&message.payload) {
                let text = format!("the request could not be read: {error}");
                let outcome = call.failed(FailureKind::BadRequest, text, 0);
                call::publish_outcome(core, &super::RetryPolicy::default(), &call, outcome).await;
            }
            let _ = message.term().await;
            return;
        }
    };
    let call = Call {
        tenant,
        run,
        call_id: request.call_id,
        name: request.name,
        meta: request.meta,
    };
    let disposition = admit_and_run(core, &call, request.arguments, &message).await;
    call::settle(&message, disposition).await;
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

/// The checks before a call runs, then the run (or the approval request).
async fn admit_and_run(
    core: &Core,
    call: &Call,
    arguments: Value,
    message: &Message,
) -> Disposition {
    let Some(entry) = core.entry(&call.name) else {
        let text = core.unknown_tool_message(&call.name);
        return refuse(
            core,
            &super::RetryPolicy::default(),
            call,
            FailureKind::UnknownTool,
            text,
        )
        .await;
    };
    let retry = entry.handler.result_retry.clone();
    let arguments = match checked_arguments(&entry, arguments) {
        Ok(arguments) => arguments,
        Err(error) => {
            return refuse(core, &retry, call, FailureKind::BadArgs, error.to_string()).await;
        }
    };
    let mut approval_reason = None;
    let guards = &entry.handler.guards;
    let decision = if guards.has_pre_checks() {
        guards.check_before(&call.policy(&arguments))
    } else {
        PreCall::Allow
    };
    match decision {
        PreCall::Allow => {}
        PreCall::Reject(reason) => {
            return refuse(core, &retry, call, FailureKind::Policy, reason).await;
        }
        PreCall::RequireApproval(reason) => approval_reason = Some(reason),
    }
    if message.delivery_count == 1 {
        let store = &**core.engine.store();
        match records::consume_budget(
            store,
            &entry.handler.guards,
            &call.tenant,
            &call.run,
            &call.name,
        )
        .await
        {
            Ok(None) => {}
            Ok(Some(reason)) => {
                return refuse(core, &retry, call, FailureKind::Policy, reason).await;
            }
            Err(error) => {
                tracing::warn!(%error, "the budget store failed; the request will be delivered again");
                return Disposition::Nak;
            }
        }
    }
    if entry.config.requires_approval || approval_reason.is_some() {
        // Boxed: the approval path is rare and would enlarge every call's task.
        return Box::pin(approval::request_approval(
            core,
            &entry,
            call,
            arguments,
            approval_reason,
            message,
        ))
        .await;
    }
    guarded::run_call(core, &entry, call, arguments, message).await
}

/// The arguments as an object, parsed from text when a provider sent a string, within
/// the size limit, checked against the schema.
fn checked_arguments(entry: &Entry, arguments: Value) -> Result<Value, ToolArgsError> {
    let limit = entry.handler.registry.max_args_bytes();
    let name = entry.tool.name();
    let arguments = match arguments {
        Value::String(text) => entry.handler.registry.parse_args(name, &text)?,
        Value::Null => Value::Object(Map::new()),
        other => {
            let len = args::json_len(&other);
            if len > limit {
                return Err(ToolArgsError::single(
                    name,
                    ArgProblem::ROOT,
                    format!("are {len} bytes; the limit is {limit} bytes. Send less data"),
                ));
            }
            other
        }
    };
    let mut arguments = arguments;
    entry.tool.normalize_and_check(&mut arguments)?;
    Ok(arguments)
}
