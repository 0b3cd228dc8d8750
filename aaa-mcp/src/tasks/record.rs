//! A task's record in the engine's store: what the task is (its tool, arguments and
//! the MCP request that made it), which round of the tool it is on, the answers given
//! so far to that round's input requests, whether the client cancelled it, and once
//! it has ended, how.
//!
//! It is a [`RecordKind::Handler`] record of the engine's [`GuardStore`] (in JetStream
//! KV on NATS), keyed `mcp-task.<tenant>.<task>`. Every change is a compare-and-set on
//! its revision, so two servers answering the same task never both advance it; a
//! write that conflicts reads the record again and retries.

use aaa_guard::{Revision, StoreError};
use aaa_tools::{GuardStore, RecordKind, TenantId};
use rmcp::ErrorData;
use rmcp::model::InputResponses;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::caller::McpRequest;

/// How often a change that conflicts is tried again before the request fails.
const ATTEMPTS: usize = 8;

/// What the store holds of one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TaskRecord {
    /// The tool.
    pub(crate) tool: String,
    /// Its arguments.
    pub(crate) arguments: Value,
    /// When the task was created (RFC 3339).
    pub(crate) created: String,
    /// When the record last changed (RFC 3339).
    pub(crate) updated: String,
    /// The round the task is on, from 1: each round is one engine call of the tool.
    pub(crate) round: u32,
    /// What the current round's call is requested with: the MCP request, and from the
    /// second round the client's answers and the tool's state.
    pub(crate) request: McpRequest,
    /// The answers given so far to the current round's input requests.
    #[serde(default)]
    pub(crate) answers: InputResponses,
    /// Whether the client cancelled the task.
    #[serde(default)]
    pub(crate) cancelled: bool,
    /// Whether the current round's call was requested (a round is recorded before its
    /// call is requested when `tasks/update` moves the task on).
    #[serde(default)]
    pub(crate) requested: bool,
    /// The task as `tasks/get` showed it once it ended (a `DetailedTask`): kept here
    /// so that the answer outlasts the bus's retention of the call's facts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ended: Option<Value>,
}

/// The store key of `task`'s record.
pub(crate) fn key(tenant: &TenantId, task: &str) -> String {
    format!("mcp-task.{}.{task}", tenant.as_str())
}

/// The current time, RFC 3339 in UTC.
pub(crate) fn now() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// A store failure as the JSON-RPC error the client gets.
fn store_error(error: StoreError) -> ErrorData {
    ErrorData::internal_error(format!("the task store failed: {error}"), None)
}

/// Creates the record of `task`; `false` when it exists already (a re-sent request
/// with the same idempotency key).
pub(crate) async fn create(
    store: &dyn GuardStore,
    tenant: &TenantId,
    task: &str,
    record: &TaskRecord,
) -> Result<bool, ErrorData> {
    let value = serde_json::to_vec(record).expect("a task record serializes");
    match store
        .create(RecordKind::Handler, &key(tenant, task), value)
        .await
    {
        Ok(_) => Ok(true),
        Err(StoreError::Exists { .. }) => Ok(false),
        Err(error) => Err(store_error(error)),
    }
}

/// Reads `task`'s record and its revision; `None` when there is no such task.
pub(crate) async fn load(
    store: &dyn GuardStore,
    tenant: &TenantId,
    task: &str,
) -> Result<Option<(TaskRecord, Revision)>, ErrorData> {
    let Some(entry) = store
        .get(RecordKind::Handler, &key(tenant, task))
        .await
        .map_err(store_error)?
    else {
        return Ok(None);
    };
    let record = serde_json::from_slice(&entry.value).map_err(|error| {
        ErrorData::internal_error(format!("task {task}'s record is unreadable: {error}"), None)
    })?;
    Ok(Some((record, entry.revision)))
}

/// Changes `task`'s record with `change` (which sees the latest record and says
/// whether to write it, and what to answer), compare-and-set, tried again on a
/// conflict. `None` when there is no such task.
pub(crate) async fn change<T>(
    store: &dyn GuardStore,
    tenant: &TenantId,
    task: &str,
    mut change: impl FnMut(&mut TaskRecord) -> Result<(bool, T), ErrorData>,
) -> Result<Option<T>, ErrorData> {
    for _ in 0..ATTEMPTS {
        let Some((mut record, revision)) = load(store, tenant, task).await? else {
            return Ok(None);
        };
        let (write, answer) = change(&mut record)?;
        if !write {
            return Ok(Some(answer));
        }
        record.updated = now();
        let value = serde_json::to_vec(&record).expect("a task record serializes");
        match store
            .update(RecordKind::Handler, &key(tenant, task), value, revision)
            .await
        {
            Ok(_) => return Ok(Some(answer)),
            Err(StoreError::Conflict { .. }) => continue,
            Err(error) => return Err(store_error(error)),
        }
    }
    Err(ErrorData::internal_error(
        format!("task {task} changed {ATTEMPTS} times while this request changed it; try again"),
        None,
    ))
}
