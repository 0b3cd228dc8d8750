//! [`RunHandle`]: one run's side of the engine. Requesting calls, waiting for their
//! outcomes, reading the run's facts, cancelling, and deciding approvals.

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::Value;

use super::{Engine, EngineError, ToolCall, new_call_id};
use crate::bus::{BusError, Payload};
use crate::event::{
    self, APPROVAL_DENIED, APPROVAL_GRANTED, ApprovalDecision, Draft, DraftId, Event, EventError,
    TOOL_CANCELLED, TOOL_REQUESTED, ToolCancelled, ToolRequested,
};
use crate::ids::{CallId, RunId, TenantId};
use crate::outcome::Outcome;
use crate::outcomes::{Claim, TenantOutcomes};

/// A fact of a run that could not be read (see [`RunHandle::facts`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FactError {
    /// The bus failed while replaying the run.
    #[error(transparent)]
    Bus(#[from] BusError),
    /// A message on the run's subjects that is not a valid event (someone else's
    /// publish): the replay goes on past it.
    #[error("{subject}: {error}")]
    Unreadable {
        /// The subject it was found on.
        subject: String,
        /// Why it is not an event.
        error: EventError,
    },
}

/// A handle on one run: request calls, await their outcomes, read the run's facts,
/// signal approvals. Cheap to clone.
#[derive(Clone)]
pub struct RunHandle {
    inner: Arc<RunInner>,
}

struct RunInner {
    engine: Engine,
    tenant: TenantId,
    run: RunId,
    /// The tenant's outcome waits, listening: set by the first request or wait
    /// through this handle, which registers the run with them.
    outcomes: tokio::sync::OnceCell<Arc<TenantOutcomes>>,
}

impl Drop for RunInner {
    fn drop(&mut self) {
        if let Some(outcomes) = self.outcomes.get() {
            outcomes.close_run(&self.run);
        }
    }
}

impl std::fmt::Debug for RunHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunHandle")
            .field("tenant", &self.inner.tenant)
            .field("run", &self.inner.run)
            .finish()
    }
}

impl RunHandle {
    /// A handle on run `run` of `tenant`, through `engine`.
    pub(super) fn new(engine: Engine, tenant: TenantId, run: RunId) -> RunHandle {
        RunHandle {
            inner: Arc::new(RunInner {
                engine,
                tenant,
                run,
                outcomes: tokio::sync::OnceCell::new(),
            }),
        }
    }

    /// The run id.
    pub fn run_id(&self) -> &RunId {
        &self.inner.run
    }

    /// The tenant.
    pub fn tenant(&self) -> &TenantId {
        &self.inner.tenant
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// Requests a call of `name`; returns its (fresh) call id without waiting.
    pub async fn request(&self, name: &str, arguments: Value) -> Result<CallId, EngineError> {
        self.request_call(ToolCall::new(name, arguments)).await
    }

    /// Requests a call; returns its call id without waiting.
    ///
    /// The call's outcome is expected from here on, so [`outcome`](Self::outcome)
    /// finds it however long after it is asked, while a handle on the run is open,
    /// even once the bus no longer holds the fact (see
    /// [`Retention`](crate::bus::Retention)). A call id of the caller's may name a call
    /// that already finished (the guard runs it once): its first outcome is looked up
    /// when waited for, since a repeated request stores nothing new.
    pub async fn request_call(&self, call: ToolCall) -> Result<CallId, EngineError> {
        let outcomes = self.outcomes().await?;
        let reused = call.call_id.is_some() && !call.fresh;
        // Built before the await and apart from it: a call's future (which a caller
        // running many at once allocates one of each) holds only what the publish needs.
        let (call_id, subject, payload) = self.request_event(call);
        outcomes.expect(&self.inner.run, &call_id, reused);
        // No de-duplication id: the event's id is fresh, so no other publish can repeat
        // it (a retry of this request is a new event), and the guard already takes a
        // call id once however often its request arrives.
        let bus = &self.inner.engine.inner.bus;
        bus.publish(&subject, payload, None).await?;
        Ok(call_id)
    }

    /// The request event of `call`: its call id, its subject and its payload.
    fn request_event(&self, call: ToolCall) -> (CallId, String, Payload) {
        let call_id = call.call_id.unwrap_or_else(new_call_id);
        let data = ToolRequested {
            call_id: call_id.clone(),
            name: call.name,
            arguments: call.arguments,
            meta: call.meta,
            attachment: call.attachment,
        };
        let event = Draft::new(
            DraftId::fresh(),
            TOOL_REQUESTED,
            self.inner.engine.shared_source(),
            &self.inner.tenant,
            &self.inner.run,
            Some(&call_id),
            data,
        );
        // Carried unwritten: an executor in this process reads the request as it is.
        (call_id, event.bus_subject(), event.into_payload())
    }

    /// Requests a call and waits for its outcome.
    pub async fn call(&self, name: &str, arguments: Value) -> Result<Outcome, EngineError> {
        let call_id = self.request_call(ToolCall::new(name, arguments)).await?;
        self.outcome(&call_id).await
    }

    /// Requests every call of one model turn at once, and returns their outcomes in the
    /// order of `calls` (whatever order they finish in).
    pub async fn call_all(&self, calls: Vec<ToolCall>) -> Result<Vec<Outcome>, EngineError> {
        let mut ids = Vec::with_capacity(calls.len());
        let mut seen = std::collections::HashSet::new();
        for call in calls {
            let call = match call.call_id {
                Some(_) => call,
                None => call.with_new_id(),
            };
            let id = call.call_id.clone().expect("set above");
            if !seen.insert(id.clone()) {
                return Err(EngineError::DuplicateCall(id));
            }
            self.request_call(call).await?;
            ids.push(id);
        }
        futures::future::try_join_all(ids.iter().map(|id| self.outcome(id))).await
    }

    /// Waits for the outcome of `call_id` (which may already have arrived).
    ///
    /// An outcome of a call requested through a handle on this run is kept until
    /// somebody asks for it, while a handle on the run is open. Any other call (one
    /// requested elsewhere, or one whose outcome was handed out before) is looked up
    /// on the bus by its subject, one lookup however long the run: its first outcome,
    /// while the bus holds it, or the next one stored. Waiting costs the bus's server
    /// nothing per run or per call: an engine listens once per tenant.
    pub async fn outcome(&self, call_id: &CallId) -> Result<Outcome, EngineError> {
        let outcomes = self.outcomes().await?;
        let (receiver, look_up) = match outcomes.claim(&self.inner.run, call_id) {
            Claim::Ready(outcome) => return Ok(outcome),
            Claim::Waiting { receiver, look_up } => (receiver, look_up),
            Claim::Ended => return Err(EngineError::Closed(call_id.clone())),
        };
        let mut receiver = receiver;
        if look_up {
            // Until the lookup answers (it retries while the bus is unavailable), the
            // outcome may also arrive through the listener. Boxed: rare, and it would
            // enlarge every call's future from 456 to 872 bytes (`tests/future_sizes.rs`).
            let looking = Box::pin(outcomes.look_up(&self.inner.run, call_id));
            tokio::select! {
                looked = looking => looked?,
                outcome = &mut receiver => {
                    return outcome.map_err(|_| EngineError::Closed(call_id.clone()));
                }
            }
        }
        receiver
            .await
            .map_err(|_| EngineError::Closed(call_id.clone()))
    }

    /// The tenant's outcome waits, listening, with this run registered.
    async fn outcomes(&self) -> Result<&Arc<TenantOutcomes>, EngineError> {
        if let Some(outcomes) = self.inner.outcomes.get() {
            return Ok(outcomes);
        }
        // Boxed: it happens once per handle, and would enlarge every call's future
        // from 456 to 688 bytes (`tests/future_sizes.rs`).
        Box::pin(self.inner.outcomes.get_or_try_init(|| async {
            let outcomes = self.inner.engine.inner.outcomes.tenant(&self.inner.tenant);
            outcomes.listening().await?;
            outcomes.open_run(&self.inner.run);
            Ok::<_, EngineError>(outcomes)
        }))
        .await
    }

    /// The fact that ended call `call_id` of this run (`aaa.tool.completed` or
    /// `aaa.tool.failed`, its time included), when the bus holds it: `None` while the
    /// call has not ended, or once the bus's retention let the fact go. One lookup on
    /// the call's outcome subjects and no waiting, where [`outcome`](Self::outcome)
    /// waits; for a caller that polls (an MCP task's `tasks/get`).
    ///
    /// ```
    /// use aaa_tools::{Engine, ToolHandler, ToolRegistry, tool, tools};
    ///
    /// /// Add two integers.
    /// #[tool]
    /// async fn add(a: i64, b: i64) -> i64 { a + b }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let engine = Engine::embedded();
    /// let _worker = ToolHandler::new(ToolRegistry::new(tools![add])?).attach(&engine).await?;
    /// let run = engine.new_run();
    /// let call = run.request("add", serde_json::json!({"a": 2, "b": 3})).await?;
    /// run.outcome(&call).await?;
    /// let fact = run.outcome_fact(&call).await?.expect("the bus holds it");
    /// assert_eq!(fact.kind, "aaa.tool.completed");
    /// # Ok(()) }
    /// ```
    pub async fn outcome_fact(&self, call_id: &CallId) -> Result<Option<Event>, EngineError> {
        let bus = &*self.inner.engine.inner.bus;
        let stored =
            crate::outcomes::first_outcome(bus, &self.inner.tenant, &self.inner.run, call_id)
                .await?;
        // A message on an outcome subject that is no event is no outcome, as for `outcome`.
        Ok(stored.and_then(|stored| Event::from_bytes(&stored.payload).ok()))
    }

    /// Every fact of the run, from its start, then new ones as they happen. Messages
    /// on the run's subjects that are not valid events come out as errors.
    pub async fn facts(&self) -> Result<BoxStream<'static, Result<Event, FactError>>, EngineError> {
        let stream = self
            .inner
            .engine
            .inner
            .bus
            .replay(&event::run_filter(&self.inner.tenant, &self.inner.run))
            .await?;
        Ok(Box::pin(stream.map(|item| match item {
            Ok(stored) => {
                Event::from_bytes(&stored.payload).map_err(|error| FactError::Unreadable {
                    subject: stored.subject.to_string(),
                    error,
                })
            }
            Err(error) => Err(FactError::Bus(error)),
        })))
    }

    /// Cancels call `call_id` of this run: publishes an `aaa.tool.cancelled` fact on
    /// `aaa.<tenant>.<run>.tool.cancelled.<call>`, which every attached worker hears.
    /// Returns once the fact is stored; the call's outcome follows as usual
    /// ([`outcome`](Self::outcome)).
    ///
    /// What becomes of the call:
    ///
    /// - **running** on a worker: its [`ToolContext::cancelled`](crate::ToolContext::cancelled)
    ///   fires; a tool that returns within one heartbeat (a third of the handler's
    ///   [`ack_wait`](crate::ToolHandler::ack_wait)) ends there, any other is dropped
    ///   then (a sync tool's thread runs on, unobserved). Either way the outcome is
    ///   `aaa.tool.failed` of kind [`cancelled`](crate::FailureKind::Cancelled),
    ///   whatever the tool returned after the cancel, committed through the guard as
    ///   any failure (fenced, recorded once) and never retried;
    /// - **not started** (waiting for a pool permit, for a live holder, in the bus, or
    ///   for approval): it never runs, and fails as `cancelled`;
    /// - **finished**, or **unknown**: nothing changes. Cancelling twice is cancelling
    ///   once (the fact carries a message id derived from the call, so the bus drops a
    ///   repeat within its de-duplication window, and a worker acts on a call once).
    ///
    /// A cancel published before any worker listened is still found: a worker looks
    /// for one when it starts a call whose request was stored before it listened (and
    /// when a granted approval starts a call). A cancel is for a call already
    /// requested; one sent before its call's request may or may not stop it.
    ///
    /// ```
    /// use aaa_tools::{Engine, FailureKind, ToolContext, ToolHandler, ToolRegistry, tool, tools};
    ///
    /// /// Wait until cancelled.
    /// #[tool]
    /// async fn wait(ctx: ToolContext) -> String {
    ///     ctx.cancelled().await;
    ///     "stopped".to_owned()
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let engine = Engine::embedded();
    /// let _worker = ToolHandler::new(ToolRegistry::new(tools![wait])?).attach(&engine).await?;
    /// let run = engine.new_run();
    /// let call = run.request("wait", serde_json::json!({})).await?;
    /// run.cancel(&call).await?;
    /// let outcome = run.outcome(&call).await?;
    /// assert_eq!(outcome.failure().map(|f| f.kind), Some(FailureKind::Cancelled));
    /// # Ok(()) }
    /// ```
    pub async fn cancel(&self, call_id: &CallId) -> Result<(), EngineError> {
        self.send_cancel(call_id, None).await
    }

    /// [`cancel`](Self::cancel), saying why: the reason reaches the model in the
    /// failure's message.
    pub async fn cancel_with_reason(
        &self,
        call_id: &CallId,
        reason: impl Into<String>,
    ) -> Result<(), EngineError> {
        self.send_cancel(call_id, Some(reason.into())).await
    }

    async fn send_cancel(
        &self,
        call_id: &CallId,
        reason: Option<String>,
    ) -> Result<(), EngineError> {
        let (tenant, run) = (&self.inner.tenant, &self.inner.run);
        let data = ToolCancelled {
            call_id: call_id.clone(),
            reason,
        };
        let data = serde_json::to_value(&data).unwrap_or(Value::Null);
        let mut event = self
            .inner
            .engine
            .event(TOOL_CANCELLED, tenant, run, Some(call_id), data);
        event.id = crate::names::CallName::CancelId.of(tenant, run, call_id);
        self.inner.engine.publish(&event).await?;
        Ok(())
    }

    /// Grants a pending approval. Only this path (a program's signal into the run) can
    /// approve a call: nothing a tool or a model produces reaches it.
    ///
    /// The decision must be bound to the arguments the approver saw
    /// ([`ApprovalDecision::for_request`]), or say explicitly that it approves any
    /// ([`ApprovalDecision::any_arguments`]); otherwise this is
    /// [`EngineError::UnboundDecision`] and nothing is sent. A call decided already or
    /// finished is [`EngineError::NotPending`], checked in the store before sending
    /// (where this client may read it). A
    /// decision that cannot apply when it arrives (other arguments, a call decided in
    /// the meantime) changes nothing and is answered on the run with an
    /// `aaa.approval.refused` fact saying why.
    pub async fn grant(&self, decision: ApprovalDecision) -> Result<(), EngineError> {
        self.signal(APPROVAL_GRANTED, decision).await
    }

    /// Denies a pending approval; the reason reaches the model. Bound like
    /// [`grant`](Self::grant).
    pub async fn deny(&self, decision: ApprovalDecision) -> Result<(), EngineError> {
        self.signal(APPROVAL_DENIED, decision).await
    }

    async fn signal(&self, kind: &str, decision: ApprovalDecision) -> Result<(), EngineError> {
        let call_id = decision.call_id.clone();
        if decision.fingerprint.is_none() && !decision.any_arguments {
            return Err(EngineError::UnboundDecision(call_id));
        }
        // A courtesy check before sending; the worker decides (and refuses a decision
        // that cannot apply). A client that may not read the store (a tenant bounded by
        // the server's permissions) sends without it.
        let (tenant, run) = (&self.inner.tenant, &self.inner.run);
        let store = &**self.inner.engine.store();
        match crate::handler::decidable(store, tenant, run, &call_id).await {
            Ok(true) => {}
            Ok(false) => return Err(EngineError::NotPending(call_id)),
            Err(error) => {
                tracing::debug!(%error, "could not read the approval record; sending the decision");
            }
        }
        let data = serde_json::to_value(&decision).unwrap_or(Value::Null);
        let event = self.inner.engine.event(
            kind,
            &self.inner.tenant,
            &self.inner.run,
            Some(&call_id),
            data,
        );
        self.inner.engine.publish(&event).await?;
        Ok(())
    }
}
