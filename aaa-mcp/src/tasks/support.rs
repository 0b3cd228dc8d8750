//! [`TaskSupport`]: which tools' calls may become MCP tasks.

/// Whether a tool's calls may become MCP tasks
/// ([`McpServerBuilder::task_support`](crate::McpServerBuilder::task_support)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskSupport {
    /// A task for a client that declared the tasks extension, a plain result for
    /// any other.
    Optional,
    /// A task, always: a client that did not declare the extension gets JSON-RPC
    /// `-32021` (missing required client capability).
    Required,
    /// For a tool that asks for its input first and then works: its first round runs
    /// in the `tools/call` itself (an `input_required` result, or the result when it
    /// asks nothing), and the `tools/call` that brings the answers becomes the task
    /// (SEP-2663's MRTR-then-task composition). A plain call for a client without
    /// the extension.
    AfterInput,
}
