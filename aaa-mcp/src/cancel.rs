//! Cancelled requests: a `tools/call` the client cancels cancels its engine call
//! ([`RunHandle::cancel`]), so the tool stops wherever it runs and the call's outcome
//! is a `cancelled` failure on its run.
//!
//! What counts as a cancel, as the MCP spec has it:
//!
//! - `notifications/cancelled` naming the request, on any transport and in every
//!   protocol era. rmcp stops the request's handler and sends no response (the spec:
//!   a receiver should not answer a cancelled request); a per-session map takes the
//!   request id to its engine call, so the handler's
//!   [`on_cancelled`](rmcp::ServerHandler::on_cancelled) cancels that call.
//! - On Streamable HTTP with protocol `2026-07-28`, the client closing the request's
//!   response stream: that era's spec makes a disconnect the cancel (no notification
//!   is sent). rmcp stops the handler, which cancels the call.
//!
//! Not a cancel: a session that ends (stdio closed, an HTTP session deleted), a
//! dropped stream in the eras before `2026-07-28` (their spec says a disconnect is not
//! a cancel, and a client may resume or send the request again), and the server
//! shutting down. The request stops waiting; the call goes on, and its outcome stays
//! on its run (sent again with the same idempotency key, the request gets it).
//!
//! Request ids are unique within a session only, so each session has its own
//! map of requests in flight: a clone of an [`McpServer`](crate::McpServer) starts with an empty
//! one, and every transport serves each session (each stateless request) with a clone
//! of its own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aaa_tools::{CallId, RunHandle};
use rmcp::RoleServer;
use rmcp::model::{CancelledNotificationParam, ProtocolVersion, RequestId};
use rmcp::service::RequestContext;
use tokio_util::sync::CancellationToken;

/// The reason a cancel carries when the client gave none.
const NO_REASON: &str = "the MCP client cancelled the request";

/// The `tools/call` requests of one session whose engine calls are in flight, by
/// request id.
#[derive(Default)]
pub(crate) struct InFlight {
    calls: Mutex<HashMap<RequestId, (RunHandle, CallId)>>,
}

/// One request's entry in [`InFlight`]; removed when dropped, unless the request was
/// cancelled (its `notifications/cancelled` is handled after rmcp has stopped the
/// request: the entry waits for it).
pub(crate) struct Registered<'a> {
    in_flight: &'a InFlight,
    id: RequestId,
    ct: CancellationToken,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        if !self.ct.is_cancelled() {
            self.in_flight.lock().remove(&self.id);
        }
    }
}

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, (RunHandle, CallId)>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers request `cx.id` as engine call `call` of `run`.
    pub(crate) fn register(
        &self,
        cx: &RequestContext<RoleServer>,
        run: &RunHandle,
        call: &CallId,
    ) -> Registered<'_> {
        self.lock()
            .insert(cx.id.clone(), (run.clone(), call.clone()));
        Registered {
            in_flight: self,
            id: cx.id.clone(),
            ct: cx.ct.clone(),
        }
    }

    /// The client cancelled a request: cancels its engine call, if it names one in
    /// flight (the spec lets a receiver ignore any other).
    pub(crate) async fn cancelled(&self, notification: &CancelledNotificationParam) {
        let Some(id) = &notification.request_id else {
            return;
        };
        let Some((run, call)) = self.lock().remove(id) else {
            return;
        };
        let reason = notification.reason.as_deref().unwrap_or(NO_REASON);
        cancel(&run, &call, reason).await;
    }
}

/// Cancels the engine call; a failure is logged (the call then runs to its end).
pub(crate) async fn cancel(run: &RunHandle, call: &CallId, reason: &str) {
    if let Err(error) = run.cancel_with_reason(call, reason).await {
        tracing::warn!(%error, %call, "could not cancel the engine call of a cancelled request");
    }
}

/// Whether rmcp stopping the request `cx` means the client cancelled it: true for a
/// stateless request of protocol `2026-07-28` or later over HTTP (its stream closed)
/// while the server is not stopping. A `notifications/cancelled` is handled apart
/// ([`InFlight::cancelled`]).
pub(crate) fn disconnect_is_cancel(
    cx: &RequestContext<RoleServer>,
    stopping: Option<&CancellationToken>,
) -> bool {
    let over_http = cx.extensions.get::<axum::http::request::Parts>().is_some();
    let modern = cx
        .meta
        .protocol_version()
        .or_else(|| cx.protocol_version())
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
    let stopping = stopping.is_some_and(CancellationToken::is_cancelled);
    over_http && modern && !stopping
}

/// A session's view of the server: its requests in flight, and whether the
/// transport serving it is stopping.
#[derive(Clone, Default)]
pub(crate) struct Session {
    pub(crate) in_flight: Arc<InFlight>,
    /// Cancelled when the HTTP server stops (a stream it closes is no cancel).
    pub(crate) stopping: Option<CancellationToken>,
}
