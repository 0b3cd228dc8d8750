//! Pending approvals and run budgets, kept in the engine's [`GuardStore`] so that any
//! worker can continue a call and every worker counts against one budget.
//!
//! Keys (see [`names`](crate::names)): `approval.<tenant>.<run>.<call>`,
//! `approval-due.<tenant>.<run>.<call>` and `budget.<tenant>.<run>`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aaa_guard::{GuardStore, RecordKind, Revision, StoreError};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::policy::GuardPolicy;
use crate::ids::{CallId, RunId, TenantId};
use crate::names::CallName;

/// Where an approval stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ApprovalState {
    /// Asked, waiting for a human.
    Pending,
    /// Granted; the call runs (or ran and its outcome is being published).
    Granted,
    /// A grant that arrived before the request was seen.
    EarlyGranted,
    /// A denial that arrived before the request was seen.
    EarlyDenied,
    /// Settled: the outcome fact was published.
    Done,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ApprovalRecord {
    pub(crate) state: ApprovalState,
    #[serde(default)]
    pub(crate) name: Arc<str>,
    #[serde(default)]
    pub(crate) arguments: Value,
    #[serde(default)]
    pub(crate) meta: Map<String, Value>,
    #[serde(default)]
    pub(crate) fingerprint: Option<String>,
    /// Unix milliseconds after which a pending approval times out.
    #[serde(default)]
    pub(crate) deadline_ms: u64,
    #[serde(default)]
    pub(crate) reason: Option<String>,
    /// The signal event that granted the call (a redelivery of it may resume the call;
    /// another grant may not run it twice).
    #[serde(default)]
    pub(crate) granted_by: Option<String>,
}

pub(crate) fn approval_key(tenant: &TenantId, run: &RunId, call: &CallId) -> String {
    CallName::ApprovalKey.of(tenant, run, call)
}

/// The key that marks a pending approval for the timeout sweep (its value: the
/// deadline in ms). The sweep lists only these, not every approval ever recorded.
pub(crate) fn approval_due_key(tenant: &TenantId, run: &RunId, call: &CallId) -> String {
    CallName::ApprovalDueKey.of(tenant, run, call)
}

/// Whether call `call` of the run can still be decided: pending, or not asked for yet
/// (a decision may come first). `false` once it was decided or has finished.
pub(crate) async fn decidable(
    store: &dyn GuardStore,
    tenant: &TenantId,
    run: &RunId,
    call: &CallId,
) -> Result<bool, StoreError> {
    let key = approval_key(tenant, run, call);
    Ok(
        match read::<ApprovalRecord>(store, RecordKind::Handler, &key).await? {
            None => true,
            Some((record, _)) => record.state == ApprovalState::Pending,
        },
    )
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

pub(crate) fn deadline_ms(timeout: Duration) -> u64 {
    now_ms().saturating_add(timeout.as_millis() as u64)
}

/// Reads a JSON record with its revision.
pub(crate) async fn read<T: DeserializeOwned>(
    store: &dyn GuardStore,
    kind: RecordKind,
    key: &str,
) -> Result<Option<(T, Revision)>, StoreError> {
    match store.get(kind, key).await? {
        None => Ok(None),
        Some(entry) => {
            let value = serde_json::from_slice(&entry.value)
                .map_err(|e| StoreError::Unavailable(format!("record {key} is unreadable: {e}")))?;
            Ok(Some((value, entry.revision)))
        }
    }
}

pub(crate) fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    match serde_json::to_writer(&mut out, value) {
        Ok(()) => out,
        Err(_) => Vec::new(),
    }
}

/// Calls counted for a run, and which calls they were.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Budget {
    total: u32,
    per_tool: BTreeMap<String, u32>,
    /// The ids of the calls counted: only calls some limit applies to are, and a call
    /// past its limit is refused, not counted, so there are at most the run's limit
    /// or, without one, the tools' limits together. Absent from records written
    /// before calls were counted by id.
    #[serde(default)]
    counted: BTreeSet<CallId>,
}

/// Counts call `call` of `tool` in the run against `policy`'s budgets: `Ok(None)` when
/// admitted, `Ok(Some(reason))` when a budget is exhausted.
///
/// A call is counted once, by its id, however many times its request is delivered:
/// a request sent again after the bus's duplicate window, or handed to another
/// worker by a server that did not count the delivery (see
/// [`Message::delivery_count`](crate::bus::Message::delivery_count)), is admitted
/// without counting again.
pub(crate) async fn consume_budget(
    store: &dyn GuardStore,
    policy: &GuardPolicy,
    tenant: &TenantId,
    run: &RunId,
    call: &CallId,
    tool: &str,
) -> Result<Option<String>, StoreError> {
    // A call no limit applies to is not counted: the ids kept stay within the limits.
    if policy.run_limit().is_none() && policy.tool_limit(tool).is_none() {
        return Ok(None);
    }
    let key = crate::names::budget_key(tenant, run);
    loop {
        let current: Option<(Budget, Revision)> = read(store, RecordKind::Handler, &key).await?;
        let (mut budget, revision) = match current {
            Some((b, r)) => (b, Some(r)),
            None => (Budget::default(), None),
        };
        if budget.counted.contains(call) {
            return Ok(None);
        }
        if let Some(limit) = policy.run_limit()
            && budget.total >= limit
        {
            return Ok(Some(format!(
                "this run has used its budget of {limit} tool calls; finish without more calls"
            )));
        }
        let used = budget.per_tool.get(tool).copied().unwrap_or(0);
        if let Some(limit) = policy.tool_limit(tool)
            && used >= limit
        {
            return Ok(Some(format!(
                "`{tool}` may be called at most {limit} times in this run; it has been"
            )));
        }
        budget.total += 1;
        budget.per_tool.insert(tool.to_owned(), used + 1);
        budget.counted.insert(call.clone());
        let written = match revision {
            Some(r) => {
                store
                    .update(RecordKind::Handler, &key, encode(&budget), r)
                    .await
            }
            None => {
                store
                    .create(RecordKind::Handler, &key, encode(&budget))
                    .await
            }
        };
        match written {
            Ok(_) => return Ok(None),
            Err(StoreError::Conflict { .. } | StoreError::Exists { .. }) => continue,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aaa_guard::MemoryStore;

    /// A call counted once stays counted once: delivered again (uncounted by the
    /// bus, or sent again after the duplicate window) it is admitted without using
    /// the budget a second time.
    #[tokio::test]
    async fn a_call_counts_once_however_often_it_is_delivered() {
        let store = MemoryStore::new();
        let policy = GuardPolicy::new().max_calls_per_run(2);
        let (tenant, run) = (TenantId::default(), RunId::new("r").unwrap());
        let id = |text: &str| CallId::new(text).unwrap();
        let count = |call: CallId| {
            let (store, policy, tenant, run) = (&store, &policy, &tenant, &run);
            async move {
                consume_budget(store, policy, tenant, run, &call, "t")
                    .await
                    .unwrap()
            }
        };
        for _ in 0..3 {
            assert_eq!(count(id("a")).await, None, "`a` is admitted each time");
        }
        assert_eq!(count(id("b")).await, None, "`a` used one call of two");
        let refused = count(id("c")).await.expect("the run's two calls are used");
        assert!(refused.contains("budget of 2"), "{refused}");
        assert_eq!(
            count(id("b")).await,
            None,
            "a counted call is still admitted"
        );
    }

    /// Only calls a limit applies to are counted, so the ids kept stay within the
    /// limits however long the run.
    #[tokio::test]
    async fn calls_no_limit_applies_to_are_not_kept() {
        let store = MemoryStore::new();
        let policy = GuardPolicy::new().max_calls_per_tool("limited", 1);
        let (tenant, run) = (TenantId::default(), RunId::new("r").unwrap());
        for i in 0..5 {
            let call = CallId::new(format!("free-{i}")).unwrap();
            let counted = consume_budget(&store, &policy, &tenant, &run, &call, "free");
            assert_eq!(counted.await.unwrap(), None);
        }
        let key = crate::names::budget_key(&tenant, &run);
        assert_eq!(store.get(RecordKind::Handler, &key).await.unwrap(), None);
        let call = CallId::new("limited-0").unwrap();
        let counted = consume_budget(&store, &policy, &tenant, &run, &call, "limited");
        assert_eq!(counted.await.unwrap(), None);
        let (budget, _) = read::<Budget>(&store, RecordKind::Handler, &key)
            .await
            .unwrap()
            .expect("the limited call was counted");
        assert_eq!(budget.counted.len(), 1);
    }
}
