//! A call's guard record in the store, and the lease an attempt holds on it: reading and
//! writing the record, renewing the lease, reporting it lost, dropping a superseded
//! attempt's result, retiring the record once the call is settled.

use std::sync::Mutex;
use std::time::Duration;

use aaa_guard::{CallRecord, GuardConfig, GuardStore, LostLease, RecordKind, Revision, StoreError};

use super::call::{self, Call, Disposition};
use super::core::Core;
use super::records::read;
use crate::event::{AttemptFact, LEASE_LOST, STALE_RESULT, StaleResult};
use crate::ids::{CallId, RunId, TenantId};

/// The key of a call's guard record.
pub(crate) fn guard_key(tenant: &TenantId, run: &RunId, call: &CallId) -> String {
    crate::names::CallName::GuardKey.of(tenant, run, call)
}

/// Tells the store that `call` is settled (see [`GuardStore::retire`]): its outcome is
/// published and the message that carried it acknowledged. Only a call that ran under
/// the guard has a record to retire.
///
/// [`GuardStore::retire`]: aaa_guard::GuardStore::retire
pub(super) async fn retire(core: &Core, call: &Call) {
    let key = guard_key(&call.tenant, &call.run, &call.call_id);
    if let Err(error) = core.engine.store().retire(&key).await {
        tracing::debug!(%error, key = &*key, "could not retire a settled call's record");
    }
}

/// Reads a call's guard record.
pub(crate) async fn read_record(
    store: &dyn GuardStore,
    key: &str,
) -> Result<Option<(CallRecord, Revision)>, StoreError> {
    read::<CallRecord>(store, RecordKind::Call, key).await
}

/// A number for a claim of a call ([`CallRecord::claim`]): no other claim of this
/// process draws it, nor (but by a one in 2^64 chance) one of another process.
pub(super) fn new_claim() -> u64 {
    static NEXT: std::sync::LazyLock<std::sync::atomic::AtomicU64> =
        std::sync::LazyLock::new(|| {
            std::sync::atomic::AtomicU64::new(uuid::Uuid::new_v4().as_u64_pair().0)
        });
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Writes a call's guard `record`, resolving an ambiguous failure by reading it back:
/// the write happened when the store holds this very record, which a claim's number
/// ([`CallRecord::claim`]) tells from a claim another delivery wrote.
pub(crate) async fn write_record(
    store: &dyn GuardStore,
    key: &str,
    record: &CallRecord,
    expected: Option<Revision>,
) -> Result<Revision, StoreError> {
    let bytes = record.to_json();
    let result = match expected {
        Some(revision) => store.update(RecordKind::Call, key, bytes, revision).await,
        None => store.create(RecordKind::Call, key, bytes).await,
    };
    match result {
        Err(StoreError::Unavailable(reason)) => {
            match read::<CallRecord>(store, RecordKind::Call, key).await {
                Ok(Some((found, revision))) if found == *record => Ok(revision),
                _ => Err(StoreError::Unavailable(reason)),
            }
        }
        other => other,
    }
}

/// The record a commit starts from: `known` (the lease's last write) when there is
/// one, else the store's. `Err(Nak)` when there is none or it cannot be read: the call
/// is left to a later delivery.
pub(super) async fn commit_base(
    store: &dyn GuardStore,
    key: &str,
    known: Option<(CallRecord, Revision)>,
) -> Result<(CallRecord, Revision), Disposition> {
    if let Some(known) = known {
        return Ok(known);
    }
    match read::<CallRecord>(store, RecordKind::Call, key).await {
        Ok(Some(found)) => Ok(found),
        Ok(None) => Err(Disposition::Nak),
        Err(error) => {
            tracing::warn!(%error, key, "could not read the record to commit; the call will be delivered again");
            Err(Disposition::Nak)
        }
    }
}

/// The lease an attempt holds while it runs.
pub(super) struct Lease<'a> {
    pub(super) key: &'a str,
    pub(super) attempt: u32,
    pub(super) config: &'a GuardConfig,
    pub(super) current: Mutex<(CallRecord, Revision)>,
    pub(super) lost: std::sync::atomic::AtomicBool,
    pub(super) store: &'a dyn GuardStore,
    pub(super) call: &'a Call,
    pub(super) worker: &'a str,
}

impl Lease<'_> {
    pub(super) fn heartbeat(&self) -> Duration {
        self.config.heartbeat()
    }

    pub(super) fn policy(&self) -> LostLease {
        self.config.lost_lease
    }

    pub(super) fn is_lost(&self) -> bool {
        self.lost.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn snapshot(&self) -> (CallRecord, Revision) {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Renews the lease; `false` when a newer attempt holds the call.
    pub(super) async fn renew(&self) -> bool {
        let (record, revision) = self.snapshot();
        let renewed = record.renewed();
        match write_record(self.store, self.key, &renewed, Some(revision)).await {
            Ok(revision) => {
                *self.current.lock().unwrap_or_else(|p| p.into_inner()) = (renewed, revision);
                true
            }
            Err(StoreError::Conflict { .. }) => {
                match read::<CallRecord>(self.store, RecordKind::Call, self.key).await {
                    Ok(Some((found, revision)))
                        if found.is_held_by(self.attempt) && *found.holder == *self.worker =>
                    {
                        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = (found, revision);
                        true
                    }
                    Ok(_) => {
                        self.lost.store(true, std::sync::atomic::Ordering::SeqCst);
                        false
                    }
                    // Cannot tell: keep going; the next renewal or the commit will know.
                    Err(_) => true,
                }
            }
            // The store is away: the lease may lapse meanwhile, which the commit detects.
            Err(error) => {
                tracing::warn!(%error, key = %self.key, "could not renew a lease");
                true
            }
        }
    }

    /// Publishes `aaa.guard.lease_lost`.
    pub(super) async fn report_lost(&self, core: &Core) {
        report_lost(core, self.call, self.attempt, self.config.lost_lease).await;
    }
}

/// Publishes `aaa.guard.lease_lost` for `attempt` of `call`, run by this worker.
async fn report_lost(core: &Core, call: &Call, attempt: u32, policy: LostLease) {
    let fact = AttemptFact {
        call_id: call.call_id.clone(),
        name: call.name.clone(),
        attempt,
        worker: core.worker.clone(),
        previous_attempt: None,
        previous_worker: None,
    };
    tracing::warn!(call_id = %call.call_id, attempt, %policy, "lease lost");
    call::publish_fact(core, call, LEASE_LOST, fact).await;
}

/// Drops the result of `attempt`, which no longer holds the call, auditing it as
/// `aaa.tool.stale_result` when a newer attempt does. Touches nothing else: `Leave`.
/// `unreported`: the lost lease's policy when no renewal found the lease lost before
/// the commit did (it is reported first, so the log says the same whichever of the
/// tool's end and the next renewal came first).
pub(super) async fn superseded(
    core: &Core,
    call: &Call,
    attempt: u32,
    current: &CallRecord,
    unreported: Option<LostLease>,
) -> Disposition {
    if current.attempt != attempt {
        if let Some(policy) = unreported {
            report_lost(core, call, attempt, policy).await;
        }
        let stale = StaleResult {
            call_id: call.call_id.clone(),
            name: call.name.clone(),
            attempt,
            current_attempt: current.attempt,
        };
        tracing::warn!(call_id = %call.call_id, attempt, current = current.attempt, "dropping a stale result");
        Box::pin(call::publish_fact(core, call, STALE_RESULT, stale)).await;
    }
    Disposition::Leave
}
