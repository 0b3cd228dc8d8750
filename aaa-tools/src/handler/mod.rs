//! [`ToolHandler`]: executes the tool calls requested on an engine.
//!
//! Per request, in this order:
//!
//! 1. the event is read (an unreadable one is terminated and, when its call can be
//!    identified, answered with a `bad_request` failure);
//! 2. the tool is looked up (`unknown_tool`, naming the closest tools);
//! 3. the arguments are checked against the tool's schema (`bad_args`), including the
//!    size limit;
//! 4. the pre-call guardrails run (`policy`), then the run's budgets are counted;
//! 5. a call that needs approval is recorded as pending, `aaa.approval.requested` is
//!    published and the request is acknowledged: while it waits, it holds no pool
//!    permit and no bus message;
//! 6. the call waits for a permit of its pool, telling the bus it is in progress so the
//!    request is not redelivered meanwhile, and runs under its timeout;
//! 7. the post-call guardrails see the result;
//! 8. the outcome fact is published (retried on transient errors), and only then is the
//!    request acknowledged.
//!
//! From step 5 on, a cancel of the call ([`RunHandle::cancel`](crate::RunHandle::cancel))
//! reaches it (the `cancels` module): a call not started never runs, a running tool
//! is told and stopped, and the outcome is a `cancelled` failure committed like any
//! other.
//!
//! Every request gets exactly one outcome fact (`aaa.tool.completed` or
//! `aaa.tool.failed`): outcome facts carry a message id derived from the call, so a
//! republished outcome within the bus's de-duplication window is dropped, and the run
//! handle takes the first outcome of a call as its outcome.
//!
//! Without the guard, delivery is at least once: a request whose worker dies before it
//! acknowledges is delivered again and its tool runs again.

mod approval;
mod attempt;
mod bounds;
mod call;
mod cancels;
mod core;
mod executor;
mod fenced;
mod guarded;
mod lanes;
mod lease;
mod policy;
mod records;
mod request;
mod retry;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use aaa_guard::{ConfigError, GuardConfig};

pub(crate) use executor::Executor;
pub use executor::HandlerHandle;
pub(crate) use lease::{guard_key, read_record, write_record};
pub use policy::{GuardPolicy, PolicyCall, PostCall, PreCall};
pub(crate) use records::decidable;
pub use retry::RetryPolicy;

use crate::bus::BusError;
use crate::engine::Engine;
use crate::error::DefinitionError;
use crate::registry::ToolRegistry;
use crate::tool::{DEFAULT_POOL, Tool};

/// The size of the `default` pool unless set: 16 concurrent calls.
pub(crate) const DEFAULT_POOL_SIZE: usize = 16;

/// The default [`ToolHandler::max_result_bytes`]: 768 KiB.
pub(crate) const DEFAULT_MAX_RESULT_BYTES: usize = 768 * 1024;

/// The effective settings of one tool under one handler: the handler's defaults merged
/// with the tool's own options.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolConfig {
    /// The guard settings (with the tool's `delivery` and `guard(...)` applied).
    pub guard: GuardConfig,
    /// The timeout of one execution.
    pub timeout: Duration,
    /// The pool the tool runs in.
    pub pool: String,
    /// That pool's size.
    pub pool_size: usize,
    /// Whether each call waits for a human's approval.
    pub requires_approval: bool,
}

/// A handler that cannot attach.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum HandlerError {
    /// Two tools with one name across the handlers of an engine.
    #[error(transparent)]
    Definition(#[from] DefinitionError),
    /// A tool's merged guard settings are invalid.
    #[error("tool `{tool}`: {error}")]
    Config {
        /// The tool.
        tool: String,
        /// The invalid setting.
        error: ConfigError,
    },
    /// A tool runs in a pool that has no size.
    #[error(
        "tool `{tool}` runs in pool `{pool}`, which has no size; declare it with `ToolHandler::pool(\"{pool}\", n)`"
    )]
    UnknownPool {
        /// The tool.
        tool: String,
        /// The pool.
        pool: String,
    },
    /// A setting out of bounds.
    #[error("{0}")]
    Invalid(String),
    /// The bus refused a subscription.
    #[error(transparent)]
    Bus(#[from] BusError),
    /// A second handler attached to an engine asks for a setting other than the one
    /// the engine's executor runs with (its pools, `ack_wait`, `max_in_flight`): one
    /// executor serves every handler of an engine, so the handler's setting could not
    /// be honoured.
    #[error(
        "this engine's executor runs with {setting} = {in_force}, and a second handler \
         cannot change it to {asked}: use the same value, or attach the handler to an \
         engine of its own"
    )]
    Conflict {
        /// The setting, e.g. ``the size of pool `payments` ``.
        setting: String,
        /// What the executor runs with.
        in_force: String,
        /// What the handler asked for.
        asked: String,
    },
}

/// Executes tool calls requested on an [`Engine`]: build it from a registry, set
/// options, [`attach`](Self::attach) it.
///
/// ```
/// use std::time::Duration;
/// use aaa_tools::{Delivery, Engine, GuardConfig, GuardPolicy, RetryPolicy, ToolHandler, ToolRegistry, tool, tools};
///
/// /// Charge a card.
/// #[tool(pool = "payments", delivery = "at_most_once")]
/// async fn charge(cents: u64) -> String { format!("charged {cents}") }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let handler = ToolHandler::new(ToolRegistry::new(tools![charge])?)
///     .pool("payments", 2)
///     .guard(GuardConfig::default().with_max_attempts(5))
///     .result_retry(RetryPolicy::default())
///     .guards(GuardPolicy::new().max_calls_per_run(20))
///     .approval_timeout(Duration::from_secs(600));
///
/// let config = handler.config_for(&charge::tool())?;
/// assert_eq!(config.guard.delivery, Delivery::AtMostOnce);
/// assert_eq!(config.pool_size, 2);
///
/// let engine = Engine::embedded();
/// let worker = handler.attach(&engine).await?;
/// worker.shutdown(Duration::from_secs(5)).await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ToolHandler {
    pub(crate) registry: ToolRegistry,
    pub(crate) pools: BTreeMap<String, usize>,
    pub(crate) guard: GuardConfig,
    pub(crate) result_retry: RetryPolicy,
    pub(crate) guards: GuardPolicy,
    pub(crate) approval_timeout: Duration,
    ack_wait: Option<Duration>,
    pub(crate) max_in_flight: usize,
    pub(crate) max_result_bytes: usize,
}

impl ToolHandler {
    /// The size of a pool no handler declared, `default` included: 16.
    pub const DEFAULT_POOL_SIZE: usize = DEFAULT_POOL_SIZE;
    /// The largest result a tool may return by default, in bytes of JSON: 768 KiB.
    pub const DEFAULT_MAX_RESULT_BYTES: usize = DEFAULT_MAX_RESULT_BYTES;

    /// A handler for the tools of `registry`, with default settings.
    pub fn new(registry: ToolRegistry) -> Self {
        let mut pools = BTreeMap::new();
        pools.insert(DEFAULT_POOL.to_owned(), DEFAULT_POOL_SIZE);
        ToolHandler {
            registry,
            pools,
            guard: GuardConfig::default(),
            result_retry: RetryPolicy::default(),
            guards: GuardPolicy::default(),
            approval_timeout: Duration::from_secs(15 * 60),
            ack_wait: None,
            max_in_flight: 1024,
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
        }
    }

    /// Declares pool `name` with room for `size` concurrent calls.
    pub fn pool(mut self, name: impl Into<String>, size: usize) -> Self {
        self.pools.insert(name.into(), size);
        self
    }

    /// Declares several pools.
    pub fn pools(mut self, pools: impl IntoIterator<Item = (impl Into<String>, usize)>) -> Self {
        for (name, size) in pools {
            self.pools.insert(name.into(), size);
        }
        self
    }

    /// The guard settings tools inherit.
    pub fn guard(mut self, guard: GuardConfig) -> Self {
        self.guard = guard;
        self
    }

    /// How outcome publishing is retried.
    pub fn result_retry(mut self, retry: RetryPolicy) -> Self {
        self.result_retry = retry;
        self
    }

    /// Guardrails and budgets.
    pub fn guards(mut self, guards: GuardPolicy) -> Self {
        self.guards = guards;
        self
    }

    /// How long a call waits for approval before it fails as `approval_timeout`
    /// (default 15 minutes).
    pub fn approval_timeout(mut self, timeout: Duration) -> Self {
        self.approval_timeout = timeout;
        self
    }

    /// How long a delivered request may go without a sign of life before the bus
    /// delivers it again (the handler reports progress every third of it). The default
    /// is half the guard's `lease_ttl_s` (7.5 s by default): when a worker dies, its
    /// calls come back to another worker in time for it to take them over as soon as
    /// the lease lapses.
    pub fn ack_wait(mut self, ack_wait: Duration) -> Self {
        self.ack_wait = Some(ack_wait);
        self
    }

    /// The largest result a tool may return, in bytes of JSON (default 768 KiB, which
    /// leaves room for the event around it under NATS's default 1 MiB message limit).
    /// A larger result becomes a failure of kind `error` that tells the model to ask
    /// for less, instead of an outcome no bus could carry.
    pub fn max_result_bytes(mut self, max: usize) -> Self {
        self.max_result_bytes = max;
        self
    }

    /// The ack wait in effect (see [`ack_wait`](Self::ack_wait)).
    pub fn effective_ack_wait(&self) -> Duration {
        self.ack_wait.unwrap_or_else(|| self.guard.lease_ttl() / 2)
    }

    /// How many requests this worker holds at once, running or waiting for a pool
    /// permit (default 1024). Besides, it takes a request from the bus only while its
    /// pools have a free permit not already promised to a request it holds, so a busy
    /// worker leaves new calls to idle ones. A call waiting on a child run gives its
    /// permit back, which lets the child in (delegation deeper than a pool completes);
    /// `max_in_flight` bounds how deep such chains can go on one worker.
    pub fn max_in_flight(mut self, max: usize) -> Self {
        self.max_in_flight = max;
        self
    }

    /// The registry.
    pub fn registry(&self) -> &ToolRegistry {
        &self.registry
    }

    /// The effective settings of `tool` under this handler, validated.
    pub fn config_for(&self, tool: &Tool) -> Result<ToolConfig, HandlerError> {
        let mut overrides = tool.guard_overrides().clone();
        if let Some(delivery) = tool.delivery() {
            overrides.delivery = Some(delivery);
        }
        let guard = self
            .guard
            .merged(&overrides)
            .map_err(|error| HandlerError::Config {
                tool: tool.name().to_owned(),
                error,
            })?;
        let pool_size = *self
            .pools
            .get(tool.pool())
            .ok_or_else(|| HandlerError::UnknownPool {
                tool: tool.name().to_owned(),
                pool: tool.pool().to_owned(),
            })?;
        Ok(ToolConfig {
            guard,
            timeout: tool.timeout(),
            pool: tool.pool().to_owned(),
            pool_size,
            requires_approval: tool.requires_approval(),
        })
    }

    fn validate(&self) -> Result<(), HandlerError> {
        if let Some((name, _)) = self.pools.iter().find(|(_, size)| **size == 0) {
            return Err(HandlerError::Invalid(format!(
                "pool `{name}` has size 0; a pool needs room for one call"
            )));
        }
        if self.effective_ack_wait() < Duration::from_millis(10) {
            return Err(HandlerError::Invalid(
                "`ack_wait` must be at least 10 ms".into(),
            ));
        }
        if self.max_in_flight == 0 {
            return Err(HandlerError::Invalid(
                "`max_in_flight` must be at least 1".into(),
            ));
        }
        self.guard
            .validate()
            .map_err(|error| HandlerError::Config {
                tool: "(handler default)".into(),
                error,
            })?;
        Ok(())
    }

    /// Starts executing this handler's tools on `engine`. The first handler attached to
    /// an engine starts its executor; a later one adds its tools to it (a name already
    /// served there is an error, never a silent override).
    ///
    /// One executor serves every handler of an engine, with one set of pools, one
    /// `ack_wait` and one `max_in_flight`: a later handler must ask for the same values
    /// (each handler carries the `default` pool, so its size too), or attach fails with
    /// [`HandlerError::Conflict`] naming the setting and both values. So what
    /// [`config_for`](Self::config_for) reports is what is in force. Handlers that need
    /// other settings go on engines of their own (one process may hold several).
    ///
    /// Dropping every returned handle stops the executor at once, leaving unfinished
    /// requests to be delivered again; [`HandlerHandle::shutdown`] stops gracefully.
    pub async fn attach(self, engine: &Engine) -> Result<HandlerHandle, HandlerError> {
        self.validate()?;
        let mut entries = Vec::with_capacity(self.registry.len());
        for tool in &self.registry {
            entries.push((tool.clone(), self.config_for(tool)?));
        }
        Executor::attach(engine, Arc::new(self), entries).await
    }
}
