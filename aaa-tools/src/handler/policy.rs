//! [`GuardPolicy`]: guardrails enforced outside the model's control.

use std::collections::BTreeMap;
use std::sync::Arc;

use aaa_guard::SharedStr;
use serde_json::Value;

use crate::ids::{CallId, RunId, TenantId};

/// A call as guardrails see it: who asks for which tool with which arguments.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PolicyCall {
    /// The tenant.
    pub tenant: TenantId,
    /// The run.
    pub run: RunId,
    /// The call.
    pub call_id: CallId,
    /// The tool.
    pub tool: SharedStr,
    /// The checked arguments.
    pub arguments: Value,
}

/// What a pre-call check decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreCall {
    /// Go ahead.
    Allow,
    /// Refuse; the reason reaches the model as a `policy` failure.
    Reject(String),
    /// Run only after a human approves (the reason is shown with the approval request).
    RequireApproval(String),
}

/// What a post-call check decides about a result, before the model sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum PostCall {
    /// Pass the result on.
    Pass,
    /// Replace the result (e.g. with secrets masked).
    Redact(Value),
    /// Withhold the result; the reason reaches the model as a `policy` failure.
    Reject(String),
}

type PreCheck = Arc<dyn Fn(&PolicyCall) -> PreCall + Send + Sync>;
type PostCheck = Arc<dyn Fn(&PolicyCall, &Value) -> PostCall + Send + Sync>;

/// Guardrails: checks on arguments before a call, on results after it, and per-run
/// call budgets. The model cannot see or skip them: they run in the handler.
///
/// Policies compose: pre-call checks run in order and the first rejection wins (a
/// demand for approval from any check holds unless another rejects); post-call checks
/// run in order, each on the result the previous one passed on; budgets of composed
/// policies all apply (the smaller limit binds).
///
/// Budgets count calls admitted past the argument check and the pre-call checks,
/// including ones then waiting for approval; they are kept in the engine's store, so
/// every worker of a run counts against one budget.
///
/// ```
/// use aaa_tools::{GuardPolicy, PostCall, PreCall};
/// use serde_json::json;
///
/// let policy = GuardPolicy::new()
///     .before(|call| {
///         if call.tool == "send_payment" && call.arguments["amount_cents"].as_u64() > Some(100_000) {
///             PreCall::RequireApproval("payments above 1000 EUR need a human".into())
///         } else {
///             PreCall::Allow
///         }
///     })
///     .after(|_call, result| match result.as_str() {
///         Some(text) if text.contains("BEGIN PRIVATE KEY") => PostCall::Redact(json!("[redacted]")),
///         _ => PostCall::Pass,
///     })
///     .max_calls_per_run(50)
///     .max_calls_per_tool("send_payment", 3);
/// # drop(policy);
/// ```
#[derive(Clone, Default)]
pub struct GuardPolicy {
    pre: Vec<PreCheck>,
    post: Vec<PostCheck>,
    max_calls_per_run: Option<u32>,
    max_calls_per_tool: BTreeMap<String, u32>,
}

impl std::fmt::Debug for GuardPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardPolicy")
            .field("pre_checks", &self.pre.len())
            .field("post_checks", &self.post.len())
            .field("max_calls_per_run", &self.max_calls_per_run)
            .field("max_calls_per_tool", &self.max_calls_per_tool)
            .finish()
    }
}

impl GuardPolicy {
    /// A policy that allows everything.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a pre-call check.
    pub fn before(
        mut self,
        check: impl Fn(&PolicyCall) -> PreCall + Send + Sync + 'static,
    ) -> Self {
        self.pre.push(Arc::new(check));
        self
    }

    /// Adds a post-call check.
    pub fn after(
        mut self,
        check: impl Fn(&PolicyCall, &Value) -> PostCall + Send + Sync + 'static,
    ) -> Self {
        self.post.push(Arc::new(check));
        self
    }

    /// Limits the calls of one run, all tools together.
    pub fn max_calls_per_run(mut self, limit: u32) -> Self {
        self.max_calls_per_run = Some(self.max_calls_per_run.map_or(limit, |l| l.min(limit)));
        self
    }

    /// Limits the calls of `tool` in one run.
    pub fn max_calls_per_tool(mut self, tool: impl Into<String>, limit: u32) -> Self {
        let entry = self.max_calls_per_tool.entry(tool.into()).or_insert(limit);
        *entry = (*entry).min(limit);
        self
    }

    /// This policy and `other`, together.
    pub fn and(mut self, other: GuardPolicy) -> Self {
        self.pre.extend(other.pre);
        self.post.extend(other.post);
        if let Some(limit) = other.max_calls_per_run {
            self = self.max_calls_per_run(limit);
        }
        for (tool, limit) in other.max_calls_per_tool {
            self = self.max_calls_per_tool(tool, limit);
        }
        self
    }

    /// Runs the pre-call checks.
    pub fn check_before(&self, call: &PolicyCall) -> PreCall {
        let mut approval: Option<String> = None;
        for check in &self.pre {
            match check(call) {
                PreCall::Allow => {}
                PreCall::Reject(reason) => return PreCall::Reject(reason),
                PreCall::RequireApproval(reason) => {
                    approval.get_or_insert(reason);
                }
            }
        }
        approval.map_or(PreCall::Allow, PreCall::RequireApproval)
    }

    /// Runs the post-call checks: the result the model may see, or the reason it may not.
    pub fn check_after(&self, call: &PolicyCall, result: Value) -> Result<Value, String> {
        let mut current = result;
        for check in &self.post {
            match check(call, &current) {
                PostCall::Pass => {}
                PostCall::Redact(replacement) => current = replacement,
                PostCall::Reject(reason) => return Err(reason),
            }
        }
        Ok(current)
    }

    /// The per-run limit, if any.
    pub fn run_limit(&self) -> Option<u32> {
        self.max_calls_per_run
    }

    /// The per-tool limit, if any.
    pub fn tool_limit(&self, tool: &str) -> Option<u32> {
        self.max_calls_per_tool.get(tool).copied()
    }

    pub(crate) fn has_pre_checks(&self) -> bool {
        !self.pre.is_empty()
    }

    pub(crate) fn has_post_checks(&self) -> bool {
        !self.post.is_empty()
    }

    pub(crate) fn has_budgets(&self) -> bool {
        self.max_calls_per_run.is_some() || !self.max_calls_per_tool.is_empty()
    }
}
