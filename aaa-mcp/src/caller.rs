//! What a tool knows of the MCP request that called it: [`McpRequest`] (carried with
//! the engine's call, so it reaches the tool wherever it runs) and [`McpCaller`] (the
//! live MCP session, for a tool that runs in the server's own process).
//!
//! Logging, sampling and roots are deprecated by the protocol (SEP-2577) and still
//! served to the clients of the protocols that have them, so this module uses them.

#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use aaa_tools::{CallId, RunId, TenantId, ToolContext};
use rmcp::model::{
    ClientCapabilities, InputResponses, LoggingLevel, LoggingMessageNotificationParam,
    ProtocolVersion,
};
use rmcp::service::ServiceError;
use rmcp::{Peer, RoleServer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The key of the call's metadata ([`ToolContext::meta`]) under which the server puts
/// the [`McpRequest`].
pub const REQUEST_META_KEY: &str = "aaa-mcp/request";

/// What the MCP request that called a tool said, beyond the arguments: the client's
/// answers to an [`input_required`](crate::McpReply::input_required) result and the
/// tool's state from it, the client's capabilities, the protocol version, the log level
/// it asked for. The server sends it with the engine's call, so a tool reads it
/// wherever it runs (on a worker on another machine too).
///
/// ```
/// use aaa_mcp::McpRequest;
/// use aaa_tools::ToolContext;
///
/// // Outside an MCP call there is none.
/// assert!(McpRequest::of(&ToolContext::builder().build()).is_none());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct McpRequest {
    /// The client's answers to the input this tool asked for, by the keys it used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_responses: Option<InputResponses>,
    /// The state the tool sent with its `input_required` result, verified by the
    /// server (the client cannot forge or change it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Value>,
    /// The client's capabilities, when it declared them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_capabilities: Option<ClientCapabilities>,
    /// The protocol version of the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<ProtocolVersion>,
    /// The log level the client asked for on this request (protocol `2026-07-28`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level: Option<LoggingLevel>,
}

impl McpRequest {
    /// The MCP request of the call `ctx` runs; `None` when it was not called over MCP.
    pub fn of(ctx: &ToolContext) -> Option<McpRequest> {
        serde_json::from_value(ctx.meta().get(REQUEST_META_KEY)?.clone()).ok()
    }

    /// The answer the client gave to the input request `key`, when it is an object
    /// (an elicitation, sampling or roots result); anything else counts as no answer.
    pub fn input(&self, key: &str) -> Option<&serde_json::Map<String, Value>> {
        self.input_responses.as_ref()?.get(key)?.as_object()
    }
}

/// The MCP session of the client whose request is running, for a tool that runs in the
/// server's own process (the embedded engine): send it log messages, ask it to sample
/// a model, to elicit input from its user, or for its roots, through rmcp's
/// [`Peer`].
///
/// The server shares its sessions this way only when built with
/// [`share_sessions(true)`](crate::McpServerBuilder::share_sessions).
/// A tool running on another machine (a worker of a NATS gateway) has no session to
/// talk to: [`McpCaller::of`] is `None` there, as it is outside an MCP call. Progress,
/// which reaches the client from anywhere, goes through
/// [`ToolContext::report_progress`] instead. Protocol `2026-07-28` has no requests from
/// server to client: a tool asks for input there with
/// [`McpReply::input_required`](crate::McpReply::input_required).
///
/// ```
/// use aaa_mcp::McpCaller;
/// use aaa_tools::ToolContext;
///
/// assert!(McpCaller::of(&ToolContext::builder().build()).is_none());
/// ```
#[derive(Debug, Clone)]
pub struct McpCaller {
    peer: Peer<RoleServer>,
    log_level: Option<LoggingLevel>,
}

type CallKey = (String, String, String);

/// The sessions registered for one call, each under its registration's token.
type Sessions = Vec<(u64, McpCaller)>;

/// The sessions of the calls running in this process, by tenant, run and call. A call
/// re-sent while it runs (same idempotency key) has two; the latest answers.
static CALLERS: LazyLock<Mutex<HashMap<CallKey, Sessions>>> = LazyLock::new(Default::default);

impl McpCaller {
    /// The session of the MCP request running `ctx`'s call, when it runs in this
    /// process.
    pub fn of(ctx: &ToolContext) -> Option<McpCaller> {
        let key = (
            ctx.tenant().as_str().to_owned(),
            ctx.run_id().as_str().to_owned(),
            ctx.call_id().as_str().to_owned(),
        );
        let callers = CALLERS.lock().unwrap_or_else(|p| p.into_inner());
        callers.get(&key)?.last().map(|(_, caller)| caller.clone())
    }

    /// rmcp's handle on the client.
    pub fn peer(&self) -> &Peer<RoleServer> {
        &self.peer
    }

    /// Sends a `notifications/message` log message from `logger`.
    pub async fn log(
        &self,
        level: LoggingLevel,
        logger: &str,
        data: Value,
    ) -> Result<(), ServiceError> {
        let message = LoggingMessageNotificationParam::new(level, data).with_logger(logger);
        self.peer.notify_logging_message(message).await
    }

    /// The log level the client asked for on this request, if it did.
    pub fn log_level(&self) -> Option<LoggingLevel> {
        self.log_level
    }
}

/// A running call's registration; dropping it unregisters the call.
pub(crate) struct Registered {
    key: CallKey,
    token: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut callers = CALLERS.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(list) = callers.get_mut(&self.key) {
            list.retain(|(token, _)| *token != self.token);
            if list.is_empty() {
                callers.remove(&self.key);
            }
        }
    }
}

/// Registers the session running a call.
pub(crate) fn register(
    tenant: &TenantId,
    run: &RunId,
    call: &CallId,
    peer: Peer<RoleServer>,
    log_level: Option<LoggingLevel>,
) -> Registered {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let token = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let key = (
        tenant.as_str().to_owned(),
        run.as_str().to_owned(),
        call.as_str().to_owned(),
    );
    CALLERS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(key.clone())
        .or_default()
        .push((token, McpCaller { peer, log_level }));
    Registered { key, token }
}
