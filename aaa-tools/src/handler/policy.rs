//! [`GuardPolicy`]: guardrails enforced outside the model's control.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;

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
    pub tool: Arc<str>,
    /// The checked arguments.
    pub arguments: Value,
}

/// What a pre-call check decides.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
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
#[non_exhaustive]
pub enum PostCall {
    /// Pass the result on.
    Pass,
    /// Replace the result (e.g. with secrets masked).
    Redact(Value),
    /// Withhold the result; the reason reaches the model as a `policy` failure.
    Reject(String),
}

type SyncPre = dyn Fn(&PolicyCall) -> PreCall + Send + Sync;
type AsyncPre = dyn Fn(PolicyCall) -> BoxFuture<'static, PreCall> + Send + Sync;
type SyncPost = dyn Fn(&PolicyCall, &Value) -> PostCall + Send + Sync;
type AsyncPost = dyn Fn(PolicyCall, Value) -> BoxFuture<'static, PostCall> + Send + Sync;

/// A pre-call check: a plain closure, or one that returns a future (a policy that
/// asks a service).
#[derive(Clone)]
enum PreCheck {
    Sync(Arc<SyncPre>),
    Async(Arc<AsyncPre>),
}

/// A post-call check, likewise.
#[derive(Clone)]
enum PostCheck {
    Sync(Arc<SyncPost>),
    Async(Arc<AsyncPost>),
}

/// How long an async check may take by default.
const CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// Guardrails: checks on arguments before a call, on results after it, and per-run
/// call budgets. The model cannot see or skip them: they run in the handler.
///
/// Policies compose: pre-call checks run in order and the first rejection wins (a
/// demand for approval from any check holds unless another rejects); post-call checks
/// run in order, each on the result the previous one passed on; budgets of composed
/// policies all apply (the smaller limit binds).
///
/// A check that must ask a service (a budget server, a permissions API) is an async fn
/// or a closure returning a future ([`before_async`](Self::before_async),
/// [`after_async`](Self::after_async)); it has [`check_timeout`](Self::check_timeout)
/// to answer (10 s by default). A check that does not answer in time fails closed: the
/// call is refused, or its result withheld, as a `policy` failure saying so.
///
/// Budgets count calls admitted past the argument check and the pre-call checks,
/// including ones then waiting for approval; they are kept in the engine's store, so
/// every worker of a run counts against one budget. A call counts once, by its id:
/// its request delivered again, or sent again, uses no more of the budget.
///
/// ```
/// use aaa_tools::{GuardPolicy, PostCall, PreCall};
/// use serde_json::json;
///
/// let policy = GuardPolicy::new()
///     .before(|call| {
///         if &*call.tool == "send_payment" && call.arguments["amount_cents"].as_u64() > Some(100_000) {
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
///
/// A check that asks a service:
///
/// ```
/// use aaa_tools::{GuardPolicy, PolicyCall, PreCall};
/// use std::time::Duration;
///
/// async fn within_budget(call: PolicyCall) -> PreCall {
///     // e.g. `budget_client.allows(&call.tenant, &call.tool).await`
///     if call.tenant.as_str() == "frozen" {
///         PreCall::Reject("this tenant's budget is frozen".into())
///     } else {
///         PreCall::Allow
///     }
/// }
///
/// let policy = GuardPolicy::new()
///     .before_async(within_budget)
///     .check_timeout(Duration::from_secs(2));
/// # drop(policy);
/// ```
#[derive(Clone)]
pub struct GuardPolicy {
    pre: Vec<PreCheck>,
    post: Vec<PostCheck>,
    max_calls_per_run: Option<u32>,
    max_calls_per_tool: BTreeMap<String, u32>,
    check_timeout: Duration,
}

impl Default for GuardPolicy {
    fn default() -> Self {
        GuardPolicy {
            pre: Vec::new(),
            post: Vec::new(),
            max_calls_per_run: None,
            max_calls_per_tool: BTreeMap::new(),
            check_timeout: CHECK_TIMEOUT,
        }
    }
}

impl std::fmt::Debug for GuardPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardPolicy")
            .field("pre_checks", &self.pre.len())
            .field("post_checks", &self.post.len())
            .field("max_calls_per_run", &self.max_calls_per_run)
            .field("max_calls_per_tool", &self.max_calls_per_tool)
            .field("check_timeout", &self.check_timeout)
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
        self.pre.push(PreCheck::Sync(Arc::new(check)));
        self
    }

    /// Adds a pre-call check that answers later: an async fn or a closure returning a
    /// future, given its own copy of the call. Bounded by
    /// [`check_timeout`](Self::check_timeout).
    pub fn before_async<F, Fut>(mut self, check: F) -> Self
    where
        F: Fn(PolicyCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = PreCall> + Send + 'static,
    {
        self.pre
            .push(PreCheck::Async(Arc::new(move |call| check(call).boxed())));
        self
    }

    /// Adds a post-call check.
    pub fn after(
        mut self,
        check: impl Fn(&PolicyCall, &Value) -> PostCall + Send + Sync + 'static,
    ) -> Self {
        self.post.push(PostCheck::Sync(Arc::new(check)));
        self
    }

    /// Adds a post-call check that answers later, given its own copy of the call and of
    /// the result. Bounded by [`check_timeout`](Self::check_timeout).
    pub fn after_async<F, Fut>(mut self, check: F) -> Self
    where
        F: Fn(PolicyCall, Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = PostCall> + Send + 'static,
    {
        self.post
            .push(PostCheck::Async(Arc::new(move |call, result| {
                check(call, result).boxed()
            })));
        self
    }

    /// How long one async check may take (default 10 s). One that takes longer fails
    /// closed: the call is refused, or its result withheld.
    pub fn check_timeout(mut self, timeout: Duration) -> Self {
        self.check_timeout = timeout;
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
    pub async fn check_before(&self, call: &PolicyCall) -> PreCall {
        let mut approval: Option<String> = None;
        for check in &self.pre {
            let decision = match check {
                PreCheck::Sync(check) => check(call),
                PreCheck::Async(check) => self
                    .bounded(check(call.clone()))
                    .await
                    .unwrap_or_else(|why| PreCall::Reject(format!("{why}; the call did not run"))),
            };
            match decision {
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
    pub async fn check_after(&self, call: &PolicyCall, result: Value) -> Result<Value, String> {
        let mut current = result;
        for check in &self.post {
            let decision = match check {
                PostCheck::Sync(check) => check(call, &current),
                PostCheck::Async(check) => self
                    .bounded(check(call.clone(), current.clone()))
                    .await
                    .unwrap_or_else(|why| {
                        PostCall::Reject(format!("{why}; the result is withheld"))
                    }),
            };
            match decision {
                PostCall::Pass => {}
                PostCall::Redact(replacement) => current = replacement,
                PostCall::Reject(reason) => return Err(reason),
            }
        }
        Ok(current)
    }

    /// An async check's answer, or why there is none in time.
    async fn bounded<T>(&self, check: BoxFuture<'static, T>) -> Result<T, String> {
        tokio::time::timeout(self.check_timeout, check)
            .await
            .map_err(|_| {
                format!(
                    "a guardrail did not answer within {:.1} s",
                    self.check_timeout.as_secs_f64()
                )
            })
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
}
