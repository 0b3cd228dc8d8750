//! [`ToolContext`]: what a running tool knows about its call, and [`State`]: shared
//! application state injected into tools.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::engine::{Engine, EngineError, RunHandle};
use crate::outcome::Outcome;

use crate::error::ToolError;
use crate::ids::{CallId, RunId, TenantId};

/// Shared application state a tool receives by taking a `State<T>` parameter: a
/// database pool, an HTTP client, a configuration. Register the value once with
/// [`ToolRegistryBuilder::state`](crate::ToolRegistryBuilder::state); the registry
/// refuses to build when a tool needs a state that was not registered, so a missing
/// state is a startup error, never a failed call.
///
/// `State<T>` derefs to `T` and is cheap to clone (an `Arc`).
///
/// ```
/// use aaa_tools::{State, ToolError, ToolRegistry, tool};
///
/// struct Greeting(String);
///
/// /// Greet someone.
/// #[tool]
/// async fn greet(greeting: State<Greeting>, name: String) -> Result<String, ToolError> {
///     let Greeting(word) = &*greeting;
///     Ok(format!("{word}, {name}!"))
/// }
///
/// let registry = ToolRegistry::builder()
///     .tool(greet::tool())
///     .state(Greeting("Hello".into()))
///     .build()
///     .unwrap();
/// # drop(registry);
/// ```
pub struct State<T: ?Sized>(Arc<T>);

impl<T: ?Sized> State<T> {
    /// The shared value's `Arc`.
    pub fn arc(&self) -> &Arc<T> {
        &self.0
    }

    /// Unwraps into the `Arc`.
    pub fn into_arc(self) -> Arc<T> {
        self.0
    }
}

impl<T: ?Sized> Clone for State<T> {
    fn clone(&self) -> Self {
        State(self.0.clone())
    }
}

impl<T: ?Sized> Deref for State<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for State<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("State").field(&&*self.0).finish()
    }
}

/// A type-keyed map of shared state values. Empty, it holds no map at all: every call's
/// context starts with one, and most registries set no state.
#[derive(Clone, Default)]
pub(crate) struct StateMap(Option<Arc<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>>);

impl StateMap {
    pub(crate) fn insert<T: Send + Sync + 'static>(&mut self, value: Arc<T>) {
        let map = self.0.get_or_insert_with(Default::default);
        Arc::make_mut(map).insert(TypeId::of::<T>(), value);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|map| map.is_empty())
    }

    pub(crate) fn contains(&self, id: TypeId) -> bool {
        self.0.as_ref().is_some_and(|map| map.contains_key(&id))
    }

    pub(crate) fn get<T: Send + Sync + 'static>(&self) -> Option<State<T>> {
        let value = self.0.as_ref()?.get(&TypeId::of::<T>())?.clone();
        value.downcast::<T>().ok().map(State)
    }

    /// Adds every value of `other` this map does not hold.
    pub(crate) fn merge(&mut self, other: &StateMap) {
        let Some(theirs) = other.0.as_ref().filter(|map| !map.is_empty()) else {
            return;
        };
        let Some(ours) = self.0.as_mut() else {
            self.0 = Some(theirs.clone());
            return;
        };
        let map = Arc::make_mut(ours);
        for (k, v) in theirs.iter() {
            map.entry(*k).or_insert_with(|| v.clone());
        }
    }
}

/// What a running tool knows about its call. Take it as a parameter (by value or by
/// reference, anywhere in the list) and `#[tool]` injects it; it never appears in the
/// schema the model sees.
///
/// - [`run_id`](Self::run_id), [`call_id`](Self::call_id), [`tenant`](Self::tenant):
///   which call this is.
/// - [`attempt`](Self::attempt) and [`fence`](Self::fence): the attempt number, 1 for
///   the first execution. Hand the fence to downstream systems so they can reject writes
///   from an older attempt that is still running somewhere.
/// - [`idempotency_key`](Self::idempotency_key): stable across every attempt and worker
///   (`<tenant>/<run>/<call id>` unless the tool derives it from its arguments).
/// - [`cancelled`](Self::cancelled): resolves when the call is cancelled (timeout,
///   lost lease, shutdown); a long tool can stop early and cleanly.
/// - [`meta`](Self::meta): free-form metadata sent with the request.
///
/// Outside an engine (unit tests, direct calls) build one with
/// [`ToolContext::builder`].
#[derive(Clone)]
pub struct ToolContext {
    pub(crate) inner: Arc<ContextInner>,
}

#[derive(Clone)]
pub(crate) struct ContextInner {
    pub(crate) run_id: RunId,
    pub(crate) call_id: CallId,
    pub(crate) tenant: TenantId,
    pub(crate) tool: Arc<str>,
    pub(crate) attempt: u32,
    pub(crate) fence: u64,
    /// Set when the context is built with a key; otherwise made from the run and call
    /// ids when a tool first asks (most never do).
    pub(crate) idempotency_key: OnceLock<String>,
    pub(crate) meta: Map<String, Value>,
    pub(crate) cancel: CancellationToken,
    pub(crate) state: StateMap,
    pub(crate) engine: Option<Engine>,
    pub(crate) permit: Option<Arc<PermitSlot>>,
}

/// The pool permit a running call holds, which it gives back while it waits on a child
/// run (so a chain of delegations deeper than the pool still completes).
pub(crate) struct PermitSlot {
    pool: Arc<Semaphore>,
    held: std::sync::Mutex<Option<OwnedSemaphorePermit>>,
    /// Told whenever the permit is given back (the executor pulls more work then).
    freed: Arc<tokio::sync::Notify>,
}

impl PermitSlot {
    pub(crate) fn new(
        pool: Arc<Semaphore>,
        permit: OwnedSemaphorePermit,
        freed: Arc<tokio::sync::Notify>,
    ) -> Self {
        PermitSlot {
            pool,
            held: std::sync::Mutex::new(Some(permit)),
            freed,
        }
    }

    /// Gives the permit back (when the call ends, or while it waits).
    pub(crate) fn release(&self) {
        // The permit (a temporary of the condition) is back before anyone is told.
        if self
            .held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .is_some()
        {
            self.freed.notify_waiters();
        }
    }

    async fn reacquire(&self) {
        if let Ok(permit) = self.pool.clone().acquire_owned().await {
            *self.held.lock().unwrap_or_else(|p| p.into_inner()) = Some(permit);
        }
    }
}

impl ToolContext {
    /// A builder for a context outside an engine, with defaults: run `local`, a fresh
    /// call id, tenant `default`, attempt and fence 1, key `<tenant>/<run>/<call id>`.
    pub fn builder() -> ToolContextBuilder {
        ToolContextBuilder::default()
    }

    /// The run this call belongs to.
    pub fn run_id(&self) -> &RunId {
        &self.inner.run_id
    }

    /// This call's id.
    pub fn call_id(&self) -> &CallId {
        &self.inner.call_id
    }

    /// The tenant of the run.
    pub fn tenant(&self) -> &TenantId {
        &self.inner.tenant
    }

    /// The name of the tool being called.
    pub fn tool_name(&self) -> &str {
        &self.inner.tool
    }

    /// The attempt number: 1 for the first execution, 2 after a takeover, ...
    pub fn attempt(&self) -> u32 {
        self.inner.attempt
    }

    /// The fence of this attempt. Downstream systems that remember the highest fence
    /// they saw for a key can reject writes from a superseded attempt.
    pub fn fence(&self) -> u64 {
        self.inner.fence
    }

    /// The idempotency key, stable across every attempt and worker of this call.
    pub fn idempotency_key(&self) -> &str {
        let inner = &self.inner;
        inner.idempotency_key.get_or_init(|| {
            crate::names::idempotency_key(&inner.tenant, &inner.run_id, &inner.call_id)
        })
    }

    /// Free-form metadata sent with the request.
    pub fn meta(&self) -> &Map<String, Value> {
        &self.inner.meta
    }

    /// Whether the call has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancel.is_cancelled()
    }

    /// Resolves when the call is cancelled.
    pub async fn cancelled(&self) {
        self.inner.cancel.cancelled().await
    }

    /// A clone of the call's cancellation token (to hand to spawned work).
    pub fn cancellation_token(&self) -> CancellationToken {
        self.inner.cancel.clone()
    }

    /// Shared state of type `T`, when registered.
    pub fn state<T: Send + Sync + 'static>(&self) -> Option<State<T>> {
        self.inner.state.get::<T>()
    }

    /// The engine running this call, when it runs under one.
    pub fn engine(&self) -> Option<&Engine> {
        self.inner.engine.as_ref()
    }

    /// Awaits `fut` without holding the call's pool permit, then takes a permit again.
    /// Use it around any wait on other calls (a child run), so that calls waiting on
    /// calls cannot starve their own pool.
    pub async fn wait_released<F: std::future::Future>(&self, fut: F) -> F::Output {
        match &self.inner.permit {
            None => fut.await,
            Some(slot) => {
                slot.release();
                let out = fut.await;
                slot.reacquire().await;
                out
            }
        }
    }

    /// A new child run of this call's tenant on the same engine; `None` outside an
    /// engine.
    pub fn child_run(&self) -> Option<RunHandle> {
        let engine = self.inner.engine.as_ref()?;
        Some(engine.run_for(self.inner.tenant.clone(), crate::engine::new_run_id()))
    }

    /// Delegates: calls `name` in a new child run and waits for its outcome, giving
    /// back this call's pool permit while it waits.
    pub async fn call_child(&self, name: &str, arguments: Value) -> Result<Outcome, ToolError> {
        let run = self.child_run().ok_or_else(|| {
            ToolError::new("delegation needs an engine; this call runs outside one")
        })?;
        let outcome: Result<Outcome, EngineError> =
            self.wait_released(run.call(name, arguments)).await;
        outcome.map_err(ToolError::internal)
    }

    /// The same context with registry state added (the caller's state wins).
    pub(crate) fn with_registry_state(self, state: &StateMap) -> ToolContext {
        if state.is_empty() {
            return self;
        }
        let mut inner = (*self.inner).clone();
        inner.state.merge(state);
        ToolContext {
            inner: Arc::new(inner),
        }
    }
}

impl fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("run_id", &self.inner.run_id)
            .field("call_id", &self.inner.call_id)
            .field("tenant", &self.inner.tenant)
            .field("tool", &self.inner.tool)
            .field("attempt", &self.inner.attempt)
            .field("fence", &self.inner.fence)
            .field("idempotency_key", &self.idempotency_key())
            .finish_non_exhaustive()
    }
}

/// Builds a [`ToolContext`] for calls outside an engine.
///
/// ```
/// use aaa_tools::{CallId, ToolContext};
///
/// let ctx = ToolContext::builder().call_id(CallId::new("call_1").unwrap()).attempt(2).build();
/// assert_eq!(ctx.idempotency_key(), "default/local/call_1");
/// assert_eq!(ctx.fence(), 2);
/// ```
#[derive(Default)]
pub struct ToolContextBuilder {
    run_id: Option<RunId>,
    call_id: Option<CallId>,
    tenant: Option<TenantId>,
    tool: Arc<str>,
    attempt: Option<u32>,
    fence: Option<u64>,
    idempotency_key: Option<String>,
    meta: Map<String, Value>,
    cancel: Option<CancellationToken>,
    state: StateMap,
    engine: Option<Engine>,
    permit: Option<Arc<PermitSlot>>,
}

impl ToolContextBuilder {
    /// Sets the run id (default `local`).
    pub fn run_id(mut self, run_id: RunId) -> Self {
        self.run_id = Some(run_id);
        self
    }

    /// Sets the call id (default: a fresh `call-N`).
    pub fn call_id(mut self, call_id: CallId) -> Self {
        self.call_id = Some(call_id);
        self
    }

    /// Sets the tenant (default `default`).
    pub fn tenant(mut self, tenant: TenantId) -> Self {
        self.tenant = Some(tenant);
        self
    }

    /// Sets the tool name.
    pub fn tool_name(mut self, tool: impl Into<Arc<str>>) -> Self {
        self.tool = tool.into();
        self
    }

    /// Sets the attempt (default 1); the fence follows it unless set.
    pub fn attempt(mut self, attempt: u32) -> Self {
        self.attempt = Some(attempt);
        self
    }

    /// Sets the fence (default: the attempt).
    pub fn fence(mut self, fence: u64) -> Self {
        self.fence = Some(fence);
        self
    }

    /// Sets the idempotency key (default `<tenant>/<run>/<call id>`).
    pub fn idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    /// Sets the idempotency key when there is one; otherwise the default is made
    /// when a tool first asks for it.
    pub(crate) fn idempotency_key_if_any(mut self, key: Option<String>) -> Self {
        if key.is_some() {
            self.idempotency_key = key;
        }
        self
    }

    /// Sets the metadata.
    pub fn meta(mut self, meta: Map<String, Value>) -> Self {
        self.meta = meta;
        self
    }

    /// Uses `token` as the call's cancellation signal.
    pub fn cancellation_token(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// Adds a shared state value.
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.state.insert(Arc::new(value));
        self
    }

    /// Runs the call under `engine` (enables delegation).
    pub fn engine(mut self, engine: Engine) -> Self {
        self.engine = Some(engine);
        self
    }

    /// Adds every value of a registry's state (values set on the builder win).
    pub(crate) fn registry_state(mut self, state: &StateMap) -> Self {
        self.state.merge(state);
        self
    }

    pub(crate) fn permit(mut self, slot: Arc<PermitSlot>) -> Self {
        self.permit = Some(slot);
        self
    }

    /// Builds the context.
    pub fn build(self) -> ToolContext {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let run_id = self
            .run_id
            .unwrap_or_else(|| RunId::new("local").expect("valid id"));
        let call_id = self.call_id.unwrap_or_else(|| {
            CallId::new(format!("call-{}", NEXT.fetch_add(1, Ordering::Relaxed))).expect("valid id")
        });
        let attempt = self.attempt.unwrap_or(1);
        let idempotency_key = OnceLock::new();
        if let Some(key) = self.idempotency_key {
            let _ = idempotency_key.set(key);
        }
        ToolContext {
            inner: Arc::new(ContextInner {
                run_id,
                call_id,
                tenant: self.tenant.unwrap_or_default(),
                tool: self.tool,
                attempt,
                fence: self.fence.unwrap_or(u64::from(attempt)),
                idempotency_key,
                meta: self.meta,
                cancel: self.cancel.unwrap_or_default(),
                state: self.state,
                engine: self.engine,
                permit: self.permit,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Label {
        text: &'static str,
    }
    struct Count {
        n: u32,
    }

    fn label(ctx: &ToolContext) -> Option<&'static str> {
        ctx.state::<Label>().map(|label| label.text)
    }

    #[test]
    fn registry_state_fills_in_what_the_builder_did_not_set() {
        let mut registry = StateMap::default();
        assert!(registry.is_empty());
        registry.insert(Arc::new(Label { text: "registry" }));
        registry.insert(Arc::new(Count { n: 7 }));

        // Nothing set on the builder: the registry's values, all of them.
        let bare = ToolContext::builder().registry_state(&registry).build();
        assert_eq!(label(&bare), Some("registry"));
        assert_eq!(bare.state::<Count>().map(|c| c.n), Some(7));

        // A value set on the builder wins; the others come from the registry.
        let set = ToolContext::builder()
            .state(Label { text: "builder" })
            .registry_state(&registry)
            .build();
        assert_eq!(label(&set), Some("builder"));
        assert_eq!(set.state::<Count>().map(|c| c.n), Some(7));

        // An empty registry changes nothing; a context without state has none.
        let empty = ToolContext::builder()
            .state(Label { text: "builder" })
            .registry_state(&StateMap::default())
            .build();
        assert_eq!(label(&empty), Some("builder"));
        assert!(empty.state::<Count>().is_none());
        assert!(label(&ToolContext::builder().build()).is_none());
        // The registry's map is shared, not changed, by the contexts made from it.
        assert!(!registry.contains(TypeId::of::<u64>()));
        assert_eq!(registry.get::<Label>().map(|l| l.text), Some("registry"));
    }
}
