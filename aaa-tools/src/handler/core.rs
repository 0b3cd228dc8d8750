//! [`Core`]: what the executor's tasks share (served tools, pools, capacity, stop and
//! drain), and the [`Ticket`] that counts a received call as waiting for a permit.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

use super::{HandlerError, ToolConfig, ToolHandler};
use crate::engine::Engine;
use crate::error::DefinitionError;
use crate::tool::Tool;

/// One served tool with its settings.
pub(super) struct Entry {
    pub(super) tool: Tool,
    pub(super) config: ToolConfig,
    pub(super) handler: Arc<ToolHandler>,
}

/// What is shared by the executor's tasks.
pub(super) struct Core {
    pub(super) engine: Engine,
    /// This worker's id in guard records and facts.
    pub(super) worker: Arc<str>,
    pub(super) tools: RwLock<HashMap<String, Arc<Entry>, foldhash::fast::RandomState>>,
    pub(super) order: RwLock<Vec<String>>,
    pools: Mutex<HashMap<String, Arc<Semaphore>, foldhash::fast::RandomState>>,
    /// The size each declared pool was made with.
    pool_sizes: Mutex<HashMap<String, usize, foldhash::fast::RandomState>>,
    pub(super) stop: CancellationToken,
    /// Told when pool capacity frees up (a permit given back, a queued call gone).
    pub(super) capacity: Arc<Notify>,
    /// Calls received that hold no pool permit yet and have not ended.
    queued: AtomicUsize,
    pub(super) drain: Mutex<Duration>,
    pub(super) ack_wait: Duration,
    origin: tokio::time::Instant,
    /// The calls this worker handles, for the cancels it hears.
    pub(super) cancels: super::cancels::Cancels,
}

impl Core {
    /// A core for `engine` whose requests come back after `ack_wait` without progress.
    pub(super) fn new(engine: &Engine, ack_wait: Duration) -> Core {
        Core {
            engine: engine.clone(),
            worker: Arc::from(engine.worker_id()),
            origin: tokio::time::Instant::now(),
            tools: RwLock::new(HashMap::default()),
            order: RwLock::new(Vec::new()),
            pools: Mutex::new(HashMap::default()),
            pool_sizes: Mutex::new(HashMap::default()),
            stop: CancellationToken::new(),
            capacity: Arc::new(Notify::new()),
            queued: AtomicUsize::new(0),
            drain: Mutex::new(Duration::ZERO),
            ack_wait,
            cancels: super::cancels::Cancels::default(),
        }
    }
}

impl Core {
    pub(super) fn add(
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
        let mut sizes = self.pool_sizes.lock().unwrap_or_else(|p| p.into_inner());
        for (name, size) in &handler.pools {
            if let Some(in_force) = sizes.get(name).filter(|s| **s != *size) {
                return Err(HandlerError::Conflict {
                    setting: format!("the size of pool `{name}`"),
                    in_force: in_force.to_string(),
                    asked: size.to_string(),
                });
            }
        }
        for (name, size) in &handler.pools {
            sizes.insert(name.clone(), *size);
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

    pub(super) fn entry(&self, name: &str) -> Option<Arc<Entry>> {
        self.tools
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }

    pub(super) fn pool(&self, name: &str) -> Arc<Semaphore> {
        let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        // Every call looks its pool up; the name is copied only for a new pool.
        if let Some(pool) = pools.get(name) {
            return pool.clone();
        }
        pools
            .entry(name.to_owned())
            .or_insert_with(|| Arc::new(Semaphore::new(super::DEFAULT_POOL_SIZE)))
            .clone()
    }

    pub(super) fn unknown_tool_message(&self, name: &str) -> String {
        let order = self.order.read().unwrap_or_else(|p| p.into_inner());
        crate::registry::unknown_tool_message(name, order.iter().map(String::as_str))
    }

    /// The result retry policy of the tool `name` (the default for unknown tools).
    pub(super) fn retry_for(&self, name: &str) -> super::RetryPolicy {
        self.entry(name)
            .map(|e| e.handler.result_retry.clone())
            .unwrap_or_default()
    }

    pub(super) fn heartbeat(&self) -> Duration {
        self.ack_wait / 3
    }

    /// Pool permits free now, less the calls already received that wait for one.
    fn free_slots(&self) -> usize {
        let pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        let free: usize = pools.values().map(|p| p.available_permits()).sum();
        free.saturating_sub(self.queued.load(Ordering::SeqCst))
    }

    /// Waits until a pool has room for one more call (so a worker pulls a message only
    /// for a free pool slot, and leaves the rest to other workers). Returns `None`
    /// when the executor stops first; else how many slots are free.
    pub(super) async fn wait_for_capacity(&self) -> Option<usize> {
        loop {
            let notified = self.capacity.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            let free = self.free_slots();
            if free > 0 {
                return Some(free);
            }
            tokio::select! {
                _ = notified => {}
                _ = self.stop.cancelled() => return None,
            }
        }
    }

    /// Monotonic time since this executor started (for lease watches).
    pub(super) fn now(&self) -> Duration {
        tokio::time::Instant::now().duration_since(self.origin)
    }
}

tokio::task_local! {
    /// The queue ticket of the call a task handles.
    pub(super) static TICKET: Ticket;
}

/// Counts a received call as queued for a pool permit until it gets one
/// ([`spend_current`](Ticket::spend_current)) or its task ends.
pub(super) struct Ticket {
    core: Arc<Core>,
    spent: AtomicBool,
}

impl Ticket {
    pub(super) fn new(core: Arc<Core>) -> Ticket {
        core.queued.fetch_add(1, Ordering::SeqCst);
        Ticket {
            core,
            spent: AtomicBool::new(false),
        }
    }

    /// Stops counting the call as queued; true when it still was.
    fn spend(&self) -> bool {
        let was_queued = !self.spent.swap(true, Ordering::SeqCst);
        if was_queued {
            self.core.queued.fetch_sub(1, Ordering::SeqCst);
        }
        was_queued
    }

    /// The current task's call holds a permit now: it no longer counts as queued. (The
    /// permit it took and the queue place it left cancel out: no capacity is freed, so
    /// nobody is told.)
    pub(super) fn spend_current() {
        let _ = TICKET.try_with(Ticket::spend);
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // A call that ends without a permit frees the place it held in the queue.
        if self.spend() {
            self.core.capacity.notify_waiters();
        }
    }
}
