//! [`Engine`] and [`RunHandle`]: requesting tool calls and reading their outcomes.

use std::sync::{Arc, Mutex, Weak};

use aaa_guard::{GuardStore, MemoryStore};
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::{Map, Value};

use crate::bus::{Bus, BusError, MemoryBus, Payload};
use crate::event::EventError;
use crate::event::{
    self, APPROVAL_DENIED, APPROVAL_GRANTED, ApprovalDecision, Draft, DraftId, Event,
    TOOL_CANCELLED, TOOL_REQUESTED, ToolCancelled, ToolRequested,
};
use crate::ids::{CallId, IdError, RunId, TenantId};
use crate::outcome::Outcome;
use crate::outcomes::{Claim, Outcomes, TenantOutcomes};

/// A failure of the engine itself (not of a tool: those are [`Outcome`]s).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The bus failed.
    #[error(transparent)]
    Bus(#[from] BusError),
    /// An invalid id.
    #[error(transparent)]
    Id(#[from] IdError),
    /// The run's fact stream ended.
    #[error("the run's facts stopped before the outcome of {0} arrived")]
    Closed(CallId),
    /// A call was requested twice with one id in one handle's `call_all`.
    #[error("call id {0} appears twice in one turn")]
    DuplicateCall(CallId),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] aaa_guard::StoreError),
    /// An approval decision on a call that is no longer pending: decided already, or
    /// finished. Nothing was sent.
    #[error("call {0} is not waiting for approval: it was decided already, or has finished")]
    NotPending(CallId),
    /// An approval decision names no fingerprint and does not say `any_arguments`.
    #[error(
        "the decision on call {0} is bound to no arguments: decide with \
         `ApprovalDecision::for_request(&requested)` (bound to the arguments the approver \
         saw), or say `.any_arguments()` explicitly"
    )]
    UnboundDecision(CallId),
}

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

/// Durable, guarded tool execution: a cheap-to-clone handle over a [`Bus`] and a
/// [`GuardStore`].
///
/// The engine is where programs request tool calls ([`RunHandle`]) and where a
/// [`ToolHandler`](crate::ToolHandler) attaches to execute them. One process can hold
/// several engines over one bus (each is a worker); each engine runs at most one tool
/// executor.
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
/// let outcome = run.call("add", serde_json::json!({"a": 2, "b": 3})).await?;
/// assert_eq!(outcome.result(), Some(&serde_json::json!(5)));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Engine {
    pub(crate) inner: Arc<EngineInner>,
}

pub(crate) struct EngineInner {
    pub(crate) bus: Arc<dyn Bus>,
    pub(crate) store: Arc<dyn GuardStore>,
    /// Shared by every event this engine drafts.
    pub(crate) source: Arc<str>,
    /// The engine's tool executor while one is attached (weak: the handler's handle
    /// owns it, and dropping that handle stops it).
    pub(crate) executor: Mutex<Weak<crate::handler::Executor>>,
    /// How this engine's run handles wait for outcomes.
    outcomes: Outcomes,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("source", &self.inner.source)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine on a fresh [`MemoryBus`] and [`MemoryStore`]: everything in this process.
    /// The bus keeps its default [`Retention`](crate::bus::Retention); build the engine
    /// with [`Engine::new`] over [`MemoryBus::with_retention`] to keep more or less.
    pub fn embedded() -> Engine {
        Engine::new(MemoryBus::new(), MemoryStore::new())
    }

    /// An engine over `bus` and `store`. Engines built over clones of one bus and one
    /// store act as separate workers of one system.
    pub fn new(bus: impl Bus, store: impl GuardStore) -> Engine {
        Engine::over(Arc::new(bus), Arc::new(store))
    }

    /// A new engine over the same bus and store: another worker of the same system
    /// (with its own executor).
    pub fn sibling(&self) -> Engine {
        Engine::over(self.inner.bus.clone(), self.inner.store.clone())
    }

    fn over(bus: Arc<dyn Bus>, store: Arc<dyn GuardStore>) -> Engine {
        let id = crate::event::fast_uuid().simple().to_string();
        Engine {
            inner: Arc::new(EngineInner {
                outcomes: Outcomes::new(bus.clone()),
                bus,
                store,
                source: Arc::from(format!("aaa-tools/engine/{}", &id[..12])),
                executor: Mutex::new(Weak::new()),
            }),
        }
    }

    /// The bus.
    pub fn bus(&self) -> &Arc<dyn Bus> {
        &self.inner.bus
    }

    /// The record store.
    pub fn store(&self) -> &Arc<dyn GuardStore> {
        &self.inner.store
    }

    /// This engine's worker id, as it appears in guard records and facts.
    pub fn worker_id(&self) -> &str {
        self.inner
            .source
            .rsplit('/')
            .next()
            .unwrap_or(&self.inner.source)
    }

    /// The CloudEvents `source` this engine publishes as.
    pub fn source(&self) -> &str {
        &self.inner.source
    }

    /// A handle on run `run` of the default tenant.
    pub fn run(&self, run: RunId) -> RunHandle {
        self.run_for(TenantId::default(), run)
    }

    /// A handle on run `run` of `tenant`.
    pub fn run_for(&self, tenant: TenantId, run: RunId) -> RunHandle {
        RunHandle {
            inner: Arc::new(RunInner {
                engine: self.clone(),
                tenant,
                run,
                outcomes: tokio::sync::OnceCell::new(),
            }),
        }
    }

    /// A handle on a new run of the default tenant, with a fresh id.
    pub fn new_run(&self) -> RunHandle {
        self.run(new_run_id())
    }

    /// Publishes an event on its subject, de-duplicated by its id.
    pub async fn publish(&self, event: &Event) -> Result<(), BusError> {
        self.inner
            .bus
            .publish(
                &event.bus_subject(),
                event.to_bytes().into(),
                Some(&event.id),
            )
            .await
    }

    /// The CloudEvents `source`, shared (for drafting events).
    pub(crate) fn shared_source(&self) -> &Arc<str> {
        &self.inner.source
    }

    pub(crate) fn event(
        &self,
        kind: &str,
        tenant: &TenantId,
        run: &RunId,
        call: Option<&CallId>,
        data: Value,
    ) -> Event {
        Event::new(kind, &self.inner.source, tenant, run, call, data)
    }
}

/// A fresh run id.
pub fn new_run_id() -> RunId {
    fresh_id("run-", |text| RunId::new(text))
}

/// A fresh call id.
pub fn new_call_id() -> CallId {
    fresh_id("call-", |text| CallId::new(text))
}

/// `prefix` followed by a random UUID in simple form (32 hex digits), written on the
/// stack: the id type copies it once into its shared text.
fn fresh_id<T>(prefix: &str, id: impl FnOnce(&str) -> Result<T, IdError>) -> T {
    let mut text = [0_u8; 40];
    let (head, tail) = text.split_at_mut(prefix.len());
    head.copy_from_slice(prefix.as_bytes());
    let uuid = crate::event::fast_uuid().simple().encode_lower(tail);
    let len = prefix.len() + uuid.len();
    let text = std::str::from_utf8(&text[..len]).expect("a prefix and hex digits are text");
    id(text).expect("a uuid is a valid id")
}

/// One tool call of a model turn.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolCall {
    /// The call id (the provider's, when it gave one); a fresh one when `None`.
    pub call_id: Option<CallId>,
    /// The tool's name as the model sent it.
    pub name: Arc<str>,
    /// The arguments: an object, or a string of JSON as providers send them. Shared:
    /// the request on the bus takes this allocation, so a caller that keeps the
    /// arguments too (an agent loop records them with the model's turn) copies none:
    /// 2 000 instructions less a turn in aaa-loop's `loop_overhead` bench, whose
    /// per-turn ratio to a direct call went from 1.088 to 1.049 in instructions.
    pub arguments: Arc<Value>,
    /// Metadata for the tool (`ToolContext::meta`).
    pub meta: Map<String, Value>,
    /// Whether `call_id` was made by [`with_new_id`](Self::with_new_id): no earlier
    /// call can have it.
    fresh: bool,
}

impl ToolCall {
    /// A call of `name` with `arguments` (a [`Value`], or an `Arc<Value>` to share).
    pub fn new(name: impl Into<Arc<str>>, arguments: impl Into<Arc<Value>>) -> Self {
        ToolCall {
            call_id: None,
            name: name.into(),
            arguments: arguments.into(),
            meta: Map::new(),
            fresh: false,
        }
    }

    /// Uses the provider's call id. It may name a call requested before (a model turn
    /// replayed after a crash): the guard runs that call once, and waiting for the
    /// outcome finds the first one.
    pub fn with_id(mut self, call_id: CallId) -> Self {
        self.call_id = Some(call_id);
        self.fresh = false;
        self
    }

    /// Says that no call with this call's id was requested before: the caller knows,
    /// having read the run (as an agent loop that resumes does) or made the id itself.
    /// Waiting for the outcome then never asks the bus whether the call finished before
    /// (for an id given with [`with_id`](Self::with_id), it does: one lookup per call).
    /// Said wrongly, the outcome is still found, by the engine's periodic sweep.
    pub fn first_request(mut self) -> Self {
        self.fresh = true;
        self
    }

    /// Gives the call a fresh id now, to know it before the call is requested (the
    /// engine gives one when it is requested otherwise). Unlike an id given with
    /// [`with_id`](Self::with_id), no earlier call can have it, so waiting for its
    /// outcome never asks the bus whether the call finished before.
    pub fn with_new_id(mut self) -> Self {
        self.call_id = Some(new_call_id());
        self.fresh = true;
        self
    }

    /// Adds metadata.
    pub fn with_meta(mut self, meta: Map<String, Value>) -> Self {
        self.meta = meta;
        self
    }
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
