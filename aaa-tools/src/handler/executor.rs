//! The executor: one per engine, it consumes tool requests and approval signals (and
//! hears cancels: the `cancels` module) and hands each message to a lane (the `lanes` module); what happens to a request is in
//! the `request` module.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::core::{Core, Ticket};
use super::lanes::{Kind, Lanes};
use super::{HandlerError, ToolConfig, ToolHandler, approval};
use crate::bus::{ConsumerSpec, Subscription};
use crate::engine::Engine;
use crate::tool::Tool;

/// The durable consumer of tool requests.
pub(crate) const REQUESTS_CONSUMER: &str = "aaa-tool-requests";
/// The durable consumer of approval decisions.
pub(crate) const SIGNALS_CONSUMER: &str = "aaa-approval-signals";

/// The executor of one engine; stops its loops (and every call they run) when dropped.
pub(crate) struct Executor {
    core: Arc<Core>,
    loops: Mutex<Vec<JoinHandle<()>>>,
    /// The `max_in_flight` its consumers were made with.
    max_in_flight: usize,
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
/// calls in flight are abandoned unacknowledged and the bus delivers them again (so
/// `let _ = handler.attach(&engine).await?;` stops the worker as soon as it starts).
/// [`shutdown`](Self::shutdown) stops gracefully.
#[derive(Clone)]
#[must_use = "dropping the last handle stops the executor at once, as a crash would; keep it, and stop with `shutdown().await`"]
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
            let conflict = |setting: &str, in_force: String, asked: String| {
                Err(HandlerError::Conflict {
                    setting: setting.to_owned(),
                    in_force,
                    asked,
                })
            };
            let ack_wait = handler.effective_ack_wait();
            if ack_wait != executor.core.ack_wait {
                let shown = |d: Duration| format!("{:?}", d);
                return conflict("ack_wait", shown(executor.core.ack_wait), shown(ack_wait));
            }
            if handler.max_in_flight != executor.max_in_flight {
                return conflict(
                    "max_in_flight",
                    executor.max_in_flight.to_string(),
                    handler.max_in_flight.to_string(),
                );
            }
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
        // Listening before the first request is taken: a cancel of a call this
        // worker takes is heard, or looked up (see the `cancels` module).
        let cancels = super::cancels::listen(&core).await?;
        let request_sub = engine.bus().subscribe(&requests).await?;
        let signal_sub = engine.bus().subscribe(&signals).await?;
        let loops = vec![
            tokio::spawn(super::cancels::hear_cancels(core.clone(), cancels)),
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
            max_in_flight,
        });
        *engine
            .inner
            .executor
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Arc::downgrade(&executor);
        Ok(HandlerHandle { executor })
    }
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
