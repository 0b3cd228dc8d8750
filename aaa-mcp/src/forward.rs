//! [`Forwarded`]: the progress notifications one `tools/call` sends its client.

use aaa_tools::{CallId, RunHandle, ToolProgress};
use rmcp::RoleServer;
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::RequestContext;

/// The progress notifications sent for one request: values only grow (as MCP asks),
/// and reports of a superseded attempt are dropped.
#[derive(Default)]
pub(crate) struct Forwarded {
    /// How many progress reports of the call arrived.
    pub(crate) reports: u32,
    attempt: u32,
    last: Option<f64>,
    told_waiting: bool,
}

impl Forwarded {
    /// Whether the call has reported progress.
    pub(crate) fn heard(&self) -> bool {
        self.reports > 0
    }

    pub(crate) async fn forward(
        &mut self,
        cx: &RequestContext<RoleServer>,
        token: &ProgressToken,
        report: &ToolProgress,
    ) {
        if report.attempt < self.attempt || self.last.is_some_and(|last| report.progress <= last) {
            return;
        }
        self.attempt = report.attempt;
        self.last = Some(report.progress);
        let mut note = ProgressNotificationParam::new(token.clone(), report.progress);
        if let Some(total) = report.total {
            note = note.with_total(total);
        }
        if let Some(message) = &report.message {
            note = note.with_message(message.clone());
        }
        if let Err(error) = cx.peer.notify_progress(note).await {
            tracing::debug!(%error, "a progress notification was not sent");
        }
    }

    /// Tells the client, once, that the call waits for an operator.
    pub(crate) async fn waiting_for_operator(
        &mut self,
        cx: &RequestContext<RoleServer>,
        token: &ProgressToken,
        run: &RunHandle,
        call: &CallId,
    ) {
        // Progress values must grow: once the tool has reported, its reports speak.
        if self.told_waiting || self.last.is_some() {
            return;
        }
        self.told_waiting = true;
        self.last = Some(0.0);
        let value = 0.0;
        let message = format!(
            "waiting for an operator's approval on the bus (run {}, call {call})",
            run.run_id()
        );
        let note = ProgressNotificationParam::new(token.clone(), value).with_message(message);
        if let Err(error) = cx.peer.notify_progress(note).await {
            tracing::debug!(%error, "a progress notification was not sent");
        }
    }
}
