//! The event types (CloudEvents `type`) the engine publishes.

/// `aaa.tool.requested`.
pub const TOOL_REQUESTED: &str = "aaa.tool.requested";
/// `aaa.tool.completed`.
pub const TOOL_COMPLETED: &str = "aaa.tool.completed";
/// `aaa.tool.failed`.
pub const TOOL_FAILED: &str = "aaa.tool.failed";
/// `aaa.approval.requested`.
pub const APPROVAL_REQUESTED: &str = "aaa.approval.requested";
/// `aaa.approval.granted`.
pub const APPROVAL_GRANTED: &str = "aaa.approval.granted";
/// `aaa.approval.denied`.
pub const APPROVAL_DENIED: &str = "aaa.approval.denied";
/// `aaa.approval.refused`: a decision that could not apply, and why.
pub const APPROVAL_REFUSED: &str = "aaa.approval.refused";
/// `aaa.guard.attempt_started`.
pub const ATTEMPT_STARTED: &str = "aaa.guard.attempt_started";
/// `aaa.guard.taken_over`.
pub const TAKEN_OVER: &str = "aaa.guard.taken_over";
/// `aaa.guard.lease_lost`.
pub const LEASE_LOST: &str = "aaa.guard.lease_lost";
/// `aaa.tool.stale_result`.
pub const STALE_RESULT: &str = "aaa.tool.stale_result";
/// `aaa.tool.resolved`.
pub const TOOL_RESOLVED: &str = "aaa.tool.resolved";
/// `aaa.tool.cancelled`: the caller asked to cancel a call
/// ([`RunHandle::cancel`](crate::RunHandle::cancel)). Not an outcome: the call's
/// outcome is the `aaa.tool.failed` of kind `cancelled` that follows it (or whatever
/// outcome the call had already). Travels on a subject of its own call,
/// `aaa.<tenant>.<run>.tool.cancelled.<call>`.
pub const TOOL_CANCELLED: &str = "aaa.tool.cancelled";

/// Every event type the engine publishes.
pub const ALL_TYPES: [&str; 13] = [
    TOOL_REQUESTED,
    TOOL_COMPLETED,
    TOOL_FAILED,
    APPROVAL_REQUESTED,
    APPROVAL_GRANTED,
    APPROVAL_DENIED,
    APPROVAL_REFUSED,
    ATTEMPT_STARTED,
    TAKEN_OVER,
    LEASE_LOST,
    STALE_RESULT,
    TOOL_RESOLVED,
    TOOL_CANCELLED,
];
