//! The executor: consumes requests and approval signals, runs calls, publishes
//! outcomes.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use aaa_guard::StoreError;
use serde_json::{Map, Value};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::policy::{PolicyCall, PreCall};
use super::records::{self, ApprovalRecord, ApprovalState, approval_key};
use super::{HandlerError, ToolConfig, ToolHandler};
use crate::args;
use crate::bus::{ConsumerSpec, Message, Subscription};
use crate::context::{PermitSlot, ToolContext};
use crate::engine::Engine;
use crate::error::{ArgProblem, CallError, DefinitionError, ToolArgsError};
use crate::event::{
    self, APPROVAL_DENIED, APPROVAL_GRANTED, APPROVAL_REQUESTED, ApprovalDecision,
    ApprovalRequested, Event, FailureKind, TOOL_COMPLETED, TOOL_FAILED, TOOL_REQUESTED,
    ToolCompleted, ToolFailed, ToolRequested,
};
use crate::ids::{CallId, RunId, TenantId};
use crate::tool::Tool;

/// The durable consumer of tool requests.
pub(crate) const REQUESTS_CONSUMER: &str = "aaa-tool-requests";
/// The durable consumer of approval decisions.
pub(crate) const SIGNALS_CONSUMER: &str = "aaa-approval-signals";

/// One served tool with its settings.
struct Entry {
    tool: Tool,
    config: ToolConfig,
    handler: Arc<ToolHandler>,
}

/// What is shared by the executor's tasks.
struct Core {
    engine: Engine,
    tools: RwLock<HashMap<String, Arc<Entry>>>,
    order: RwLock<Vec<String>>,
    pools: Mutex<HashMap<String, Arc<Semaphore>>>,
    stop: CancellationToken,
    drain: Mutex<Duration>,
    ack_wait: Duration,
}

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
            .upgrade();
        if let Some(executor) = existing.filter(|e| !e.core.stop.is_cancelled()) {
            executor.core.add(handler, tools)?;
            return Ok(HandlerHandle { executor });
        }
        let core = Arc::new(Core {
            engine: engine.clone(),
            tools: RwLock::new(HashMap::new()),
            order: RwLock::new(Vec::new()),
            pools: Mutex::new(HashMap::new()),
            stop: CancellationToken::new(),
            drain: Mutex::new(Duration::ZERO),
            ack_wait: handler.ack_wait,
        });
        let max_in_flight = handler.max_in_flight;
        core.add(handler, tools)?;
        let requests = ConsumerSpec::new(REQUESTS_CONSUMER, ["aaa.*.*.tool.requested"])
            .with_ack_wait(core.ack_wait);
        let signals = ConsumerSpec::new(
            SIGNALS_CONSUMER,
            ["aaa.*.*.approval.granted", "aaa.*.*.approval.denied"],
        )
        .with_ack_wait(core.ack_wait);
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
            tokio::spawn(sweep_approvals(core.clone())),
        ];
        let executor = Arc::new(Executor {
            core,
            loops: Mutex::new(loops),
        });
        *engine
            .inner
            .executor
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Arc::downgrade(&executor);
        Ok(HandlerHandle { executor })
    }
}

impl Core {
    fn add(
        &self,
        handler: Arc<ToolHandler>,
        tools: Vec<(Tool, ToolConfig)>,
    ) -> Result<(), HandlerError> {
        let mut map = self.tools.write().unwrap_or_else(|p| p.into_inner());
        let mut order = self.order.write().unwrap_or_else(|p| p.into_inner());
        for (tool, _) in &tools {
            if let Some(first) = order.iter().position(|n| n == tool.name()) {
                return Err(DefinitionError::DuplicateName {
                    name: tool.name().to_owned(),
                    first,
                    second: order.len(),
                }
                .into());
            }
        }
        let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        for (name, size) in &handler.pools {
            // The first handler to declare a pool sets its size.
            pools
                .entry(name.clone())
                .or_insert_with(|| Arc::new(Semaphore::new(*size)));
        }
        for (tool, config) in tools {
            order.push(tool.name().to_owned());
            map.insert(
                tool.name().to_owned(),
                Arc::new(Entry {
                    tool,
                    config,
                    handler: handler.clone(),
                }),
            );
        }
        Ok(())
    }

    fn entry(&self, name: &str) -> Option<Arc<Entry>> {
        self.tools
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }

    fn pool(&self, name: &str) -> Arc<Semaphore> {
        let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        pools
            .entry(name.to_owned())
            .or_insert_with(|| Arc::new(Semaphore::new(super::DEFAULT_POOL_SIZE)))
            .clone()
    }

    fn unknown_tool_message(&self, name: &str) -> String {
        let order = self.order.read().unwrap_or_else(|p| p.into_inner());
        let lowered = name.to_lowercase();
        let mut scored: Vec<(f64, &String)> = order
            .iter()
            .map(|n| (strsim::jaro_winkler(&lowered, &n.to_lowercase()), n))
            .filter(|(s, _)| *s >= 0.7)
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        let shown = args::cut(name, 64);
        if scored.is_empty() {
            format!(
                "there is no tool named `{shown}`; the tools are: {}",
                order.join(", ")
            )
        } else {
            let names: Vec<String> = scored
                .iter()
                .take(3)
                .map(|(_, n)| format!("`{n}`"))
                .collect();
            format!(
                "there is no tool named `{shown}`; did you mean {}?",
                names.join(" or ")
            )
        }
    }

    fn heartbeat(&self) -> Duration {
        self.ack_wait / 3
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Request,
    Signal,
}

/// Pulls messages while there is room, one task per message.
async fn consume(
    core: Arc<Core>,
    mut subscription: Box<dyn Subscription>,
    max_in_flight: usize,
    kind: Kind,
) {
    let room = Arc::new(Semaphore::new(max_in_flight));
    let mut tasks = JoinSet::new();
    loop {
        while tasks.try_join_next().is_some() {}
        let slot = tokio::select! {
            slot = room.clone().acquire_owned() => match slot { Ok(s) => s, Err(_) => break },
            _ = core.stop.cancelled() => break,
        };
        let message = tokio::select! {
            message = subscription.next() => message,
            _ = core.stop.cancelled() => break,
        };
        match message {
            Ok(message) => {
                let core = core.clone();
                tasks.spawn(async move {
                    match kind {
                        Kind::Request => handle_request(&core, message).await,
                        Kind::Signal => handle_signal(&core, message).await,
                    }
                    drop(slot);
                });
            }
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
    let _ = tokio::time::timeout(deadline, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
    drop(subscription);
}

/// Runs `fut`, telling the bus every heartbeat that `message` is still being worked on.
async fn with_progress<F: Future>(core: &Core, message: &Message, fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut ticker = tokio::time::interval(core.heartbeat());
    ticker.tick().await;
    loop {
        tokio::select! {
            out = &mut fut => return out,
            _ = ticker.tick() => {
                if let Err(error) = message.in_progress().await {
                    tracing::warn!(%error, seq = message.seq, "could not report progress");
                }
            }
        }
    }
}

/// A call being handled.
struct Call {
    tenant: TenantId,
    run: RunId,
    call_id: CallId,
    name: String,
    meta: Map<String, Value>,
}

impl Call {
    fn policy(&self, arguments: &Value) -> PolicyCall {
        PolicyCall {
            tenant: self.tenant.clone(),
            run: self.run.clone(),
            call_id: self.call_id.clone(),
            tool: self.name.clone(),
            arguments: arguments.clone(),
        }
    }

    fn failed(&self, kind: FailureKind, message: impl Into<String>, attempt: u32) -> Outcome {
        Outcome::Failed(ToolFailed {
            call_id: self.call_id.clone(),
            name: self.name.clone(),
            kind,
            message: message.into(),
            attempt,
        })
    }
}

enum Outcome {
    Completed(ToolCompleted),
    Failed(ToolFailed),
}

impl Outcome {
    fn label(&self) -> &'static str {
        match self {
            Outcome::Completed(_) => "completed",
            Outcome::Failed(f) => f.kind.as_str(),
        }
    }
}

/// Publishes the outcome of `call` with the handler's retry policy. The message id is
/// derived from the call, so a repeat within the de-duplication window is dropped.
async fn publish_outcome(
    core: &Core,
    retry: &super::RetryPolicy,
    call: &Call,
    outcome: &Outcome,
) -> bool {
    let (kind, data) = match outcome {
        Outcome::Completed(c) => (TOOL_COMPLETED, serde_json::to_value(c)),
        Outcome::Failed(f) => (TOOL_FAILED, serde_json::to_value(f)),
    };
    let data = data.unwrap_or(Value::Null);
    let mut event = core
        .engine
        .event(kind, &call.tenant, &call.run, Some(&call.call_id), data);
    event.id = format!("outcome-{}-{}-{}", call.tenant, call.run, call.call_id);
    let subject = event.bus_subject();
    let bytes = event.to_bytes();
    let id = event.id.clone();
    match retry
        .run(|| {
            core.engine
                .bus()
                .publish(&subject, bytes.clone(), Some(&id))
        })
        .await
    {
        Ok(()) => true,
        Err(error) => {
            tracing::error!(%error, call_id = %call.call_id, "could not publish the outcome; leaving the request for redelivery");
            false
        }
    }
}

/// Settles the carrier message after its outcome was (or was not) published.
async fn settle(message: &Message, published: bool) {
    let result = if published {
        message.ack().await
    } else {
        message.nak(Duration::from_secs(1)).await
    };
    if let Err(error) = result {
        tracing::warn!(%error, seq = message.seq, "could not settle a message; it will be delivered again");
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
    let parsed = Event::from_bytes(&message.payload)
        .and_then(|event| event.data_as::<ToolRequested>().map(|data| (event, data)));
    let (event, request) = match parsed {
        Ok(ok) if ok.0.kind == TOOL_REQUESTED => ok,
        Ok((event, _)) => {
            tracing::error!(subject = %message.subject, kind = %event.kind, "not a tool request; terminating it");
            let _ = message.term().await;
            return;
        }
        Err(error) => {
            tracing::error!(subject = %message.subject, %error, "unreadable tool request; terminating it");
            if let Some(call) = salvage(&message.payload) {
                let outcome = call.failed(
                    FailureKind::BadRequest,
                    format!("the request could not be read: {error}"),
                    0,
                );
                publish_outcome(core, &super::RetryPolicy::default(), &call, &outcome).await;
            }
            let _ = message.term().await;
            return;
        }
    };
    let call = Call {
        tenant: event.aaatenant,
        run: event.aaarunid,
        call_id: request.call_id,
        name: request.name,
        meta: request.meta,
    };
    let Some(entry) = core.entry(&call.name) else {
        let outcome = call.failed(
            FailureKind::UnknownTool,
            core.unknown_tool_message(&call.name),
            0,
        );
        let published =
            publish_outcome(core, &super::RetryPolicy::default(), &call, &outcome).await;
        settle(&message, published).await;
        return;
    };
    let retry = entry.handler.result_retry.clone();
    let arguments = match checked_arguments(&entry, request.arguments) {
        Ok(arguments) => arguments,
        Err(error) => {
            let outcome = call.failed(FailureKind::BadArgs, error.to_string(), 0);
            let published = publish_outcome(core, &retry, &call, &outcome).await;
            settle(&message, published).await;
            return;
        }
    };
    let policy_call = call.policy(&arguments);
    let mut approval_reason = None;
    match entry.handler.guards.check_before(&policy_call) {
        PreCall::Allow => {}
        PreCall::Reject(reason) => {
            let outcome = call.failed(FailureKind::Policy, reason, 0);
            let published = publish_outcome(core, &retry, &call, &outcome).await;
            settle(&message, published).await;
            return;
        }
        PreCall::RequireApproval(reason) => approval_reason = Some(reason),
    }
    if message.delivery_count == 1 {
        match records::consume_budget(
            &**core.engine.store(),
            &entry.handler.guards,
            &call.tenant,
            &call.run,
            &call.name,
        )
        .await
        {
            Ok(None) => {}
            Ok(Some(reason)) => {
                let outcome = call.failed(FailureKind::Policy, reason, 0);
                let published = publish_outcome(core, &retry, &call, &outcome).await;
                settle(&message, published).await;
                return;
            }
            Err(error) => {
                tracing::warn!(%error, "the budget store failed; the request will be delivered again");
                let _ = message.nak(Duration::from_secs(1)).await;
                return;
            }
        }
    }
    if entry.config.requires_approval || approval_reason.is_some() {
        request_approval(core, &entry, &call, arguments, approval_reason, &message).await;
        return;
    }
    let outcome = execute(core, &entry, &call, arguments, &message).await;
    let published = publish_outcome(core, &retry, &call, &outcome).await;
    settle(&message, published).await;
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
    entry.tool.check_args(&arguments)?;
    Ok(arguments)
}

/// Runs one call: pool permit, timeout, panics, post-call guardrails.
async fn execute(
    core: &Core,
    entry: &Entry,
    call: &Call,
    arguments: Value,
    carrier: &Message,
) -> Outcome {
    let attempt = 1;
    let default_key = || format!("{}/{}", call.run, call.call_id);
    let key = match entry.tool.idempotency_key(&arguments, default_key) {
        Ok(key) => key,
        Err(error) => return call.failed(FailureKind::BadArgs, error.to_string(), 0),
    };
    let prepared = match entry.tool.prepare(arguments.clone()) {
        Ok(prepared) => prepared,
        Err(error) => return call.failed(FailureKind::BadArgs, error.to_string(), 0),
    };
    let pool = core.pool(&entry.config.pool);
    let permit: OwnedSemaphorePermit =
        match with_progress(core, carrier, pool.clone().acquire_owned()).await {
            Ok(permit) => permit,
            Err(_) => return call.failed(FailureKind::Error, "the tool's pool is closed", 0),
        };
    let slot = Arc::new(PermitSlot::new(pool, permit));
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
        .build();
    let ctx = entry.handler.registry.inject_state(ctx);
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
    let run = with_progress(
        core,
        carrier,
        tokio::time::timeout(timeout, prepared.run(ctx)),
    )
    .instrument(span.clone());
    let result = run.await;
    slot.release();
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
        Ok(Ok(value)) => match entry
            .handler
            .guards
            .check_after(&call.policy(&arguments), value)
        {
            Ok(result) => Outcome::Completed(ToolCompleted {
                call_id: call.call_id.clone(),
                name: call.name.clone(),
                result,
                attempt,
            }),
            Err(reason) => call.failed(FailureKind::Policy, reason, attempt),
        },
    };
    span.record("outcome", outcome.label());
    outcome
}

/// Records a pending approval (or applies a decision that arrived first), publishes
/// `aaa.approval.requested`, and acknowledges the request.
async fn request_approval(
    core: &Core,
    entry: &Arc<Entry>,
    call: &Call,
    arguments: Value,
    reason: Option<String>,
    message: &Message,
) {
    let store = &**core.engine.store();
    let key = approval_key(&call.tenant, &call.run, &call.call_id);
    let fingerprint = event::fingerprint(
        &call.tenant,
        &call.run,
        &call.call_id,
        &call.name,
        &arguments,
    );
    let retry = entry.handler.result_retry.clone();
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
    loop {
        let current = match records::read::<ApprovalRecord>(store, &key).await {
            Ok(current) => current,
            Err(error) => {
                tracing::warn!(%error, "the approval store failed; the request will be delivered again");
                let _ = message.nak(Duration::from_secs(1)).await;
                return;
            }
        };
        let written = match current {
            None => store
                .create(&key, records::encode(&pending))
                .await
                .map(|_| Decision::AskHuman),
            Some((early, revision)) if early.state == ApprovalState::EarlyGranted => {
                if early
                    .fingerprint
                    .as_ref()
                    .is_some_and(|f| *f != fingerprint)
                {
                    tracing::warn!(call_id = %call.call_id, "an early grant was for other arguments; asking a human");
                    store
                        .update(&key, records::encode(&pending), revision)
                        .await
                        .map(|_| Decision::AskHuman)
                } else {
                    let granted = ApprovalRecord {
                        state: ApprovalState::Granted,
                        ..pending.clone()
                    };
                    store
                        .update(&key, records::encode(&granted), revision)
                        .await
                        .map(|r| Decision::Run(r, granted))
                }
            }
            Some((early, revision)) if early.state == ApprovalState::EarlyDenied => {
                let done = ApprovalRecord {
                    state: ApprovalState::Done,
                    reason: early.reason.clone(),
                    ..pending.clone()
                };
                store
                    .update(&key, records::encode(&done), revision)
                    .await
                    .map(|_| Decision::Denied(early.reason))
            }
            // Already recorded: this is a duplicate delivery of the request.
            Some(_) => Ok(Decision::Duplicate),
        };
        match written {
            Ok(Decision::AskHuman) => break,
            Ok(Decision::Duplicate) => {
                settle(message, true).await;
                return;
            }
            Ok(Decision::Denied(reason)) => {
                let outcome =
                    call.failed(FailureKind::Denied, denial_message(reason.as_deref()), 0);
                let published = publish_outcome(core, &retry, call, &outcome).await;
                settle(message, published).await;
                return;
            }
            Ok(Decision::Run(revision, record)) => {
                run_granted(core, entry, call, &key, revision, record, message).await;
                return;
            }
            Err(StoreError::Conflict { .. } | StoreError::Exists { .. }) => continue,
            Err(error) => {
                tracing::warn!(%error, "the approval store failed; the request will be delivered again");
                let _ = message.nak(Duration::from_secs(1)).await;
                return;
            }
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
    event.id = format!(
        "approval-requested-{}-{}-{}",
        call.tenant, call.run, call.call_id
    );
    let (subject, bytes, id) = (event.bus_subject(), event.to_bytes(), event.id.clone());
    let published = retry
        .run(|| {
            core.engine
                .bus()
                .publish(&subject, bytes.clone(), Some(&id))
        })
        .await
        .is_ok();
    settle(message, published).await;
}

enum Decision {
    AskHuman,
    Duplicate,
    Denied(Option<String>),
    Run(aaa_guard::Revision, ApprovalRecord),
}

fn denial_message(reason: Option<&str>) -> String {
    match reason {
        Some(reason) if !reason.trim().is_empty() => format!("a human denied this call: {reason}"),
        _ => "a human denied this call".to_owned(),
    }
}

/// Runs a granted call, publishes its outcome, marks the approval done, settles the
/// message that carried the grant (or the early-granted request).
async fn run_granted(
    core: &Core,
    entry: &Entry,
    call: &Call,
    key: &str,
    revision: aaa_guard::Revision,
    record: ApprovalRecord,
    carrier: &Message,
) {
    let outcome = execute(core, entry, call, record.arguments.clone(), carrier).await;
    let published = publish_outcome(core, &entry.handler.result_retry, call, &outcome).await;
    if published {
        let done = ApprovalRecord {
            state: ApprovalState::Done,
            ..record
        };
        if let Err(error) = core
            .engine
            .store()
            .update(key, records::encode(&done), revision)
            .await
        {
            tracing::warn!(%error, key, "could not mark an approval done; its outcome is published");
        }
    }
    settle(carrier, published).await;
}

async fn handle_signal(core: &Core, message: Message) {
    let parsed = Event::from_bytes(&message.payload).and_then(|event| {
        event
            .data_as::<ApprovalDecision>()
            .map(|decision| (event, decision))
    });
    let (event, decision) = match parsed {
        Ok(ok) => ok,
        Err(error) => {
            tracing::error!(subject = %message.subject, %error, "unreadable approval decision; terminating it");
            let _ = message.term().await;
            return;
        }
    };
    let granted = event.kind == APPROVAL_GRANTED;
    if !granted && event.kind != APPROVAL_DENIED {
        let _ = message.term().await;
        return;
    }
    let store = &**core.engine.store();
    let key = approval_key(&event.aaatenant, &event.aaarunid, &decision.call_id);
    loop {
        let current = match records::read::<ApprovalRecord>(store, &key).await {
            Ok(current) => current,
            Err(error) => {
                tracing::warn!(%error, "the approval store failed; the decision will be delivered again");
                let _ = message.nak(Duration::from_secs(1)).await;
                return;
            }
        };
        let Some((record, revision)) = current else {
            // The decision came first: keep it for when the request arrives.
            let early = ApprovalRecord {
                state: if granted {
                    ApprovalState::EarlyGranted
                } else {
                    ApprovalState::EarlyDenied
                },
                name: String::new(),
                arguments: Value::Null,
                meta: Map::new(),
                fingerprint: decision.fingerprint.clone(),
                deadline_ms: 0,
                reason: decision.reason.clone(),
                granted_by: granted.then(|| event.id.clone()),
            };
            match store.create(&key, records::encode(&early)).await {
                Ok(_) => {
                    settle(&message, true).await;
                    return;
                }
                Err(StoreError::Exists { .. }) => continue,
                Err(error) => {
                    tracing::warn!(%error, "the approval store failed; the decision will be delivered again");
                    let _ = message.nak(Duration::from_secs(1)).await;
                    return;
                }
            }
        };
        let call = Call {
            tenant: event.aaatenant.clone(),
            run: event.aaarunid.clone(),
            call_id: decision.call_id.clone(),
            name: record.name.clone(),
            meta: record.meta.clone(),
        };
        match record.state {
            ApprovalState::Pending => {
                if decision
                    .fingerprint
                    .as_ref()
                    .is_some_and(|f| Some(f) != record.fingerprint.as_ref())
                {
                    tracing::warn!(call_id = %call.call_id, "an approval decision named other arguments; ignoring it");
                    settle(&message, true).await;
                    return;
                }
                if !granted {
                    let done = ApprovalRecord {
                        state: ApprovalState::Done,
                        reason: decision.reason.clone(),
                        ..record
                    };
                    match store.update(&key, records::encode(&done), revision).await {
                        Ok(_) => {}
                        Err(StoreError::Conflict { .. }) => continue,
                        Err(error) => {
                            tracing::warn!(%error, "the approval store failed; the decision will be delivered again");
                            let _ = message.nak(Duration::from_secs(1)).await;
                            return;
                        }
                    }
                    let outcome = call.failed(
                        FailureKind::Denied,
                        denial_message(decision.reason.as_deref()),
                        0,
                    );
                    let retry = core
                        .entry(&call.name)
                        .map(|e| e.handler.result_retry.clone())
                        .unwrap_or_default();
                    let published = publish_outcome(core, &retry, &call, &outcome).await;
                    settle(&message, published).await;
                    return;
                }
                let Some(entry) = core.entry(&call.name) else {
                    // A worker that does not serve this tool leaves the grant for one that does.
                    let _ = message.nak(Duration::from_secs(1)).await;
                    return;
                };
                let granted_record = ApprovalRecord {
                    state: ApprovalState::Granted,
                    granted_by: Some(event.id.clone()),
                    ..record
                };
                match store
                    .update(&key, records::encode(&granted_record), revision)
                    .await
                {
                    Ok(revision) => {
                        run_granted(
                            core,
                            &entry,
                            &call,
                            &key,
                            revision,
                            granted_record,
                            &message,
                        )
                        .await;
                        return;
                    }
                    Err(StoreError::Conflict { .. }) => continue,
                    Err(error) => {
                        tracing::warn!(%error, "the approval store failed; the decision will be delivered again");
                        let _ = message.nak(Duration::from_secs(1)).await;
                        return;
                    }
                }
            }
            // The same grant delivered again: its worker died mid-call; resume it.
            ApprovalState::Granted
                if granted && record.granted_by.as_deref() == Some(event.id.as_str()) =>
            {
                let Some(entry) = core.entry(&call.name) else {
                    let _ = message.nak(Duration::from_secs(1)).await;
                    return;
                };
                run_granted(core, &entry, &call, &key, revision, record, &message).await;
                return;
            }
            // A second decision, or one for a settled call: nothing to do.
            _ => {
                settle(&message, true).await;
                return;
            }
        }
    }
}

/// Fails pending approvals whose deadline passed. Every worker sweeps; the
/// compare-and-set on the record lets exactly one of them publish the failure.
async fn sweep_approvals(core: Arc<Core>) {
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
        let Ok(keys) = store.keys("approval.").await else {
            continue;
        };
        let now = records::now_ms();
        for key in keys {
            let Ok(Some((record, revision))) = records::read::<ApprovalRecord>(&*store, &key).await
            else {
                continue;
            };
            if record.state != ApprovalState::Pending || record.deadline_ms > now {
                continue;
            }
            let mut parts = key.splitn(4, '.').skip(1);
            let (Some(tenant), Some(run), Some(call_id)) =
                (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let (Ok(tenant), Ok(run), Ok(call_id)) =
                (TenantId::new(tenant), RunId::new(run), CallId::new(call_id))
            else {
                continue;
            };
            let done = ApprovalRecord {
                state: ApprovalState::Done,
                ..record.clone()
            };
            if store
                .update(&key, records::encode(&done), revision)
                .await
                .is_err()
            {
                continue;
            }
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
            let retry = core
                .entry(&call.name)
                .map(|e| e.handler.result_retry.clone())
                .unwrap_or_default();
            publish_outcome(&core, &retry, &call, &outcome).await;
        }
    }
}
