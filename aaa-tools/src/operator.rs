//! The operator's side of the guard: calls whose outcome is unknown, and resolving them.

use std::sync::Arc;

use aaa_guard::{CallRecord, CallState, RecordKind, RecordedOutcome, StoreError};
use serde_json::Value;

use crate::bus::BusError;
use crate::engine::Engine;
use crate::event::{Resolved, TOOL_RESOLVED};
use crate::handler::{guard_key, read_record, write_record};
use crate::ids::{CallId, RunId, TenantId};
use crate::names::CallName;

/// A call left in `outcome_unknown`: an `at_most_once` attempt was lost, and nobody
/// knows whether it took effect.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UnknownCall {
    /// The tenant.
    pub tenant: TenantId,
    /// The run.
    pub run: RunId,
    /// The call.
    pub call_id: CallId,
    /// The tool.
    pub name: Arc<str>,
    /// The lost attempt.
    pub attempt: u32,
    /// The worker that ran it.
    pub worker: Arc<str>,
}

/// What an operator found out about an `outcome_unknown` call.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Resolution {
    /// It took effect, with this result.
    Completed(Value),
    /// It did not take effect, or failed: what happened.
    Failed(String),
}

/// A failed operator action.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum OperatorError {
    /// The call is not in `outcome_unknown` (resolved already, or never lost); nothing
    /// changed.
    #[error("call {0} is not in outcome_unknown")]
    NotUnknown(CallId),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The bus failed (the resolution is recorded; its fact was not published).
    #[error(transparent)]
    Bus(#[from] BusError),
}

/// What an operator does with the guard: list the calls left in `outcome_unknown` (an
/// `at_most_once` attempt lost, nobody knows whether it took effect) and record what
/// happened to each. Get one with [`Engine::operator`].
///
/// ```
/// use aaa_tools::Engine;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let engine = Engine::embedded();
/// let operator = engine.operator();
/// assert!(operator.outcome_unknown_calls().await.unwrap().is_empty());
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Operator {
    engine: Engine,
}

impl Engine {
    /// The operator's view of this engine's guard store.
    pub fn operator(&self) -> Operator {
        Operator {
            engine: self.clone(),
        }
    }
}

impl Operator {
    /// Every call in `outcome_unknown`, in key order.
    pub async fn outcome_unknown_calls(&self) -> Result<Vec<UnknownCall>, OperatorError> {
        let store = &**self.engine.store();
        let keys = store
            .keys(RecordKind::Call, &CallName::GuardKey.prefix())
            .await?;
        let mut found = Vec::new();
        for key in keys {
            let Some((record, _)) = read_record(store, &key).await? else {
                continue;
            };
            if record.state != CallState::OutcomeUnknown {
                continue;
            }
            let Some((tenant, run, call_id)) = CallName::GuardKey.parse(&key) else {
                continue;
            };
            found.push(UnknownCall {
                tenant,
                run,
                call_id,
                name: record.name.clone(),
                attempt: record.attempt,
                worker: record.holder.clone(),
            });
        }
        Ok(found)
    }

    /// Records what happened to an `outcome_unknown` call and publishes it as
    /// `aaa.tool.resolved`. The call's record becomes finished, so a later delivery of
    /// it republishes nothing new and runs nothing.
    pub async fn resolve(
        &self,
        call: &UnknownCall,
        resolution: Resolution,
        resolved_by: &str,
    ) -> Result<(), OperatorError> {
        let store = &**self.engine.store();
        let key = guard_key(&call.tenant, &call.run, &call.call_id);
        let Some((record, revision)) = read_record(store, &key).await? else {
            return Err(OperatorError::NotUnknown(call.call_id.clone()));
        };
        if record.state != CallState::OutcomeUnknown {
            return Err(OperatorError::NotUnknown(call.call_id.clone()));
        }
        let data = match &resolution {
            Resolution::Completed(result) => Resolved {
                call_id: call.call_id.clone(),
                name: record.name.clone(),
                outcome: "completed".into(),
                result: Some(result.clone()),
                message: None,
                resolved_by: resolved_by.to_owned(),
            },
            Resolution::Failed(message) => Resolved {
                call_id: call.call_id.clone(),
                name: record.name.clone(),
                outcome: "failed".into(),
                result: None,
                message: Some(message.clone()),
                resolved_by: resolved_by.to_owned(),
            },
        };
        // Strings and a JSON value always serialize.
        let outcome = RecordedOutcome::new(TOOL_RESOLVED, &data).expect("a resolution is JSON");
        let data = outcome.data_value();
        let resolved: CallRecord = record.finished(outcome);
        match write_record(store, &key, &resolved.marked_published(), Some(revision)).await {
            Ok(_) => {}
            Err(StoreError::Conflict { .. }) => {
                return Err(OperatorError::NotUnknown(call.call_id.clone()));
            }
            Err(error) => return Err(error.into()),
        }
        let mut event = self.engine.event(
            TOOL_RESOLVED,
            &call.tenant,
            &call.run,
            Some(&call.call_id),
            data,
        );
        event.id = CallName::ResolvedId.of(&call.tenant, &call.run, &call.call_id);
        self.engine.publish(&event).await?;
        Ok(())
    }
}
