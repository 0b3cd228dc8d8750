//! [`Follower`]: reads one run's progress reports and approval facts from the bus and
//! hands each to the `tools/call` waiting on its call.
//!
//! One follower serves every call of a run (the server's own run holds all its
//! unkeyed calls), so a busy server reads the run once, not once per call. It reads
//! those kinds of fact only (by their subjects), never the run's requests and
//! outcomes: a call that reports nothing costs the follower nothing. A call
//! registers before it is requested, so nothing it would be told can slip past it;
//! facts about calls nobody waits for (a call requested elsewhere) are dropped.
//!
//! Why [`OUTCOME_SEEN`]: the follower reads the run's facts in log order, but a
//! `tools/call` gets its outcome from the engine on another path. A call that forwards
//! a tool's progress publishes `aaa.mcp.outcome_seen` once it has the outcome; when the
//! follower hands that mark over ([`Fact::Settled`]), it has handed over every report
//! and decision published before it, so the tool's last progress notifications precede
//! the result.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aaa_tools::event::{
    APPROVAL_DENIED, APPROVAL_GRANTED, APPROVAL_REQUESTED, ApprovalDecision, ApprovalRequested,
    Event,
};
use aaa_tools::{CallId, EngineError, RunHandle, TOOL_PROGRESS, ToolProgress};
use futures::StreamExt;
use tokio::sync::mpsc;

/// `aaa.mcp.outcome_seen` `{call_id}`: an MCP server has the call's outcome and is
/// about to send its result. Published on the call's run only for a call whose
/// progress the server forwards (or whose approval an operator decided): read back in
/// log order with the call's progress reports, it tells the server that every report
/// made before the outcome has reached it.
pub const OUTCOME_SEEN: &str = "aaa.mcp.outcome_seen";

/// A fact about one call that its `tools/call` acts on.
#[derive(Debug, Clone)]
pub(crate) enum Fact {
    /// The tool reported progress.
    Progress(ToolProgress),
    /// The call waits for a human's approval.
    ApprovalRequested(ApprovalRequested),
    /// Someone decided on the call's approval (`granted` or not).
    Decided {
        /// Whether it was a grant.
        granted: bool,
        /// The decision.
        decision: ApprovalDecision,
    },
    /// [`OUTCOME_SEEN`] for the call: every fact published before it has been handed
    /// over.
    Settled,
}

type Waiting = Arc<Mutex<HashMap<String, mpsc::UnboundedSender<Fact>>>>;

/// Reads a run's facts for its waiting calls; dropping it stops the reading.
pub(crate) struct Follower {
    waiting: Waiting,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One call's registration with a follower: its facts come out of
/// [`recv`](Self::recv); dropping it unregisters the call.
pub(crate) struct Watch {
    waiting: Waiting,
    call: String,
    facts: mpsc::UnboundedReceiver<Fact>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.call);
    }
}

impl Watch {
    /// The next fact about the call; `None` once the follower has stopped.
    pub(crate) async fn recv(&mut self) -> Option<Fact> {
        self.facts.recv().await
    }
}

impl Follower {
    /// Starts reading `run`'s facts, from the run's start.
    pub(crate) async fn start(run: &RunHandle) -> Result<Follower, EngineError> {
        let (tenant, id) = (run.tenant(), run.run_id());
        let subject = |kind| aaa_tools::event::subject(tenant, id, kind);
        let filters = [
            subject(TOOL_PROGRESS),
            subject(APPROVAL_REQUESTED),
            subject(APPROVAL_GRANTED),
            subject(APPROVAL_DENIED),
            subject(OUTCOME_SEEN),
        ];
        let mut stream = run.engine().bus().replay_any(&filters).await?;
        let waiting: Waiting = Arc::default();
        let shared = waiting.clone();
        let task = tokio::spawn(async move {
            while let Some(item) = stream.next().await {
                let Ok(stored) = item else {
                    continue;
                };
                let Some((call, fact)) = read(&stored.payload) else {
                    continue;
                };
                let waiting = shared.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(sender) = waiting.get(&call) {
                    let _ = sender.send(fact);
                }
            }
        });
        Ok(Follower { waiting, task })
    }

    /// Registers `call`: its facts from now on come out of the returned watch.
    pub(crate) fn watch(&self, call: &CallId) -> Watch {
        let (sender, facts) = mpsc::unbounded_channel();
        self.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(call.as_str().to_owned(), sender);
        Watch {
            waiting: self.waiting.clone(),
            call: call.as_str().to_owned(),
            facts,
        }
    }
}

/// The call a stored fact is about, and the fact; `None` for anything unreadable.
fn read(payload: &[u8]) -> Option<(String, Fact)> {
    let event = Event::from_bytes(payload).ok()?;
    let call = event.subject.clone()?;
    let fact = match event.kind.as_str() {
        TOOL_PROGRESS => Fact::Progress(event.into_data().ok()?),
        OUTCOME_SEEN => Fact::Settled,
        APPROVAL_REQUESTED => Fact::ApprovalRequested(event.into_data().ok()?),
        APPROVAL_GRANTED | APPROVAL_DENIED => Fact::Decided {
            granted: event.kind == APPROVAL_GRANTED,
            decision: event.into_data().ok()?,
        },
        _ => return None,
    };
    Some((call, fact))
}
