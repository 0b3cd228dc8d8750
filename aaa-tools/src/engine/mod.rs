//! [`Engine`]: durable, guarded tool execution over a bus and a store, and the
//! errors of its requests.
//!
//! - this module: the engine (what a [`ToolHandler`](crate::ToolHandler) attaches
//!   to, and where runs are opened), [`EngineError`], fresh run and call ids;
//! - `call`: [`ToolCall`], one call to request;
//! - `run`: [`RunHandle`], one run's requests, outcomes, facts, cancels and
//!   approval decisions.

mod call;
mod run;

use std::sync::{Arc, Mutex, Weak};

use aaa_guard::{GuardStore, MemoryStore};
use serde_json::Value;

use crate::bus::{Bus, BusError, MemoryBus};
use crate::event::Event;
use crate::ids::{CallId, IdError, RunId, TenantId};
use crate::outcomes::Outcomes;

pub use call::ToolCall;
pub use run::{FactError, RunHandle};

/// A failure of the engine itself (not of a tool: those are [`Outcome`](crate::Outcome)s).
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
    pub(super) outcomes: Outcomes,
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
        RunHandle::new(self.clone(), tenant, run)
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
