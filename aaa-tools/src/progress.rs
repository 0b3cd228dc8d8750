//! Progress reports: a running tool says how far it has got
//! ([`ToolContext::report_progress`]), and the report becomes a fact of its run,
//! `aaa.tool.progress` ([`ToolProgress`]), which whoever follows the run reads: an MCP
//! server forwards it to its client as `notifications/progress`, a UI draws a bar.
//!
//! A report is a record, not a signal the engine acts on: nothing waits for one, a
//! lost one changes no outcome, and the tool goes on whether or not it was stored.
//! Reports travel on the run's subject like every other fact
//! (`aaa.<tenant>.<run>.tool.progress`), so they reach a reader on another machine
//! exactly as a call's outcome does.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::bus::BusError;
use crate::context::ToolContext;
use crate::event::Event;
use crate::ids::CallId;

/// `aaa.tool.progress`: a running tool's report of how far it has got.
pub const TOOL_PROGRESS: &str = "aaa.tool.progress";

/// `data` of `aaa.tool.progress`.
///
/// `attempt` tells reports of a superseded attempt from the current one's: a reader
/// that shows one call's progress keeps to the highest attempt it has seen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolProgress {
    /// The call.
    pub call_id: CallId,
    /// The tool.
    pub name: Arc<str>,
    /// The attempt that reported it.
    pub attempt: u32,
    /// How far the call has got, in the tool's own unit (a count, a percentage); it
    /// should grow from one report to the next.
    pub progress: f64,
    /// The value `progress` reaches when the work is done, when the tool knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    /// What the tool is doing, in words a person reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One progress report, as a tool makes it: [`Progress::new`], then
/// [`total`](Self::total) and [`message`](Self::message) when there are any.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Progress {
    /// How far the call has got.
    pub progress: f64,
    /// Where `progress` ends, when known.
    pub total: Option<f64>,
    /// What the tool is doing.
    pub message: Option<String>,
}

impl Progress {
    /// A report that the call has got to `progress`.
    pub fn new(progress: f64) -> Progress {
        Progress {
            progress,
            total: None,
            message: None,
        }
    }

    /// Says where `progress` ends.
    pub fn total(mut self, total: f64) -> Progress {
        self.total = Some(total);
        self
    }

    /// Says what the tool is doing.
    pub fn message(mut self, message: impl Into<String>) -> Progress {
        self.message = Some(message.into());
        self
    }
}

impl ToolContext {
    /// Reports how far this call has got, as an `aaa.tool.progress` fact of its run
    /// ([`ToolProgress`]). Returns `Ok(true)` once the fact is published, `Ok(false)`
    /// when the call runs outside an engine (a direct call in a unit test: there is no
    /// run to record it in), and the bus's error when publishing fails; a tool that
    /// does not care whether its report arrived ignores the result.
    ///
    /// ```
    /// use aaa_tools::{Progress, ToolContext, ToolError, tool};
    ///
    /// /// Count to three, slowly.
    /// #[tool]
    /// async fn count(ctx: ToolContext) -> Result<u32, ToolError> {
    ///     for step in 1..=3 {
    ///         let _ = ctx.report_progress(Progress::new(step as f64).total(3.0)).await;
    ///     }
    ///     Ok(3)
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// // Outside an engine nothing is recorded, and the tool runs as ever.
    /// let ctx = ToolContext::builder().build();
    /// assert_eq!(ctx.report_progress(Progress::new(1.0)).await, Ok(false));
    /// assert_eq!(count(ctx).await.unwrap(), 3);
    /// # }
    /// ```
    pub async fn report_progress(&self, report: Progress) -> Result<bool, BusError> {
        let Some(engine) = self.engine() else {
            return Ok(false);
        };
        let data = ToolProgress {
            call_id: self.call_id().clone(),
            name: self.inner.tool.clone(),
            attempt: self.attempt(),
            progress: report.progress,
            total: report.total,
            message: report.message,
        };
        let event = Event::new(
            TOOL_PROGRESS,
            engine.source(),
            self.tenant(),
            self.run_id(),
            Some(self.call_id()),
            serde_json::to_value(&data).unwrap_or_default(),
        );
        engine.publish(&event).await?;
        Ok(true)
    }
}
