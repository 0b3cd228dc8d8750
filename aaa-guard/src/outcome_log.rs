//! [`OutcomeLog`]: a store whose call records share an ordered log with the calls'
//! outcomes, so that an outcome is committed and published in one write.

use crate::store_future::StoreFuture;
use crate::written::Revision;

/// What [`OutcomeLog::commit_outcome`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Committed {
    /// The outcome was stored: the call record was at the expected revision.
    Stored,
    /// An outcome with the same id is already in the log (within the log's
    /// de-duplication window): nothing was stored, and the record was not checked.
    Duplicate,
}

/// A call's outcome as the log holds it: its bytes, where it goes and the id that makes
/// a second commit of it a no-op.
///
/// The guard does not name outcomes: the engine does (on NATS, `address` is the
/// subject the outcome fact is published on and `id` its message id), and an
/// [`OutcomeLog`] stores the bytes under them as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeFact<'a> {
    /// Where in the log the outcome goes; one of the addresses
    /// [`find_outcome`](OutcomeLog::find_outcome) is later asked about.
    pub address: &'a str,
    /// The outcome's id: a second commit under the same id is
    /// [`Committed::Duplicate`].
    pub id: &'a str,
    /// The outcome, as its readers read it.
    pub bytes: Vec<u8>,
}

/// Committing a call's outcome on the condition that the call's record is unchanged,
/// in one write; and finding such an outcome again.
///
/// Without an outcome log, finishing a call takes two writes in sequence: the
/// compare-and-set that commits the outcome on the call's record (the fence), then the
/// publication of the outcome. A store whose [`RecordKind::Call`](crate::RecordKind::Call)
/// records live in the same ordered log as the outcomes (a JetStream stream from
/// nats-server 2.11, whose publish can be made conditional on another subject's last
/// sequence) can do both in one write: the outcome is stored **only if the call's
/// record is still at the revision its attempt holds**. The record then says nothing
/// about the outcome; the log does. So whoever fences an attempt out (a takeover, an
/// abandon, an outcome declared unknown) looks for that attempt's outcome *after* its
/// own compare-and-set: the log is totally ordered, so an outcome committed under the
/// old revision is already there, and none can be committed later.
///
/// ```
/// use aaa_guard::{GuardStore, MemoryStore};
///
/// // The in-process store's records share no log with the outcomes: outcomes are
/// // committed on the record first, then published.
/// assert!(MemoryStore::new().outcome_log().is_none());
/// ```
///
/// A record that changed makes the commit fail with
/// [`StoreError::Conflict`](crate::StoreError::Conflict); a commit whose result is
/// unknown (a timeout) fails with [`StoreError::Unavailable`](crate::StoreError::Unavailable)
/// and is resolved by committing again under the same id, which reports
/// [`Committed::Duplicate`] when the first one was stored.
pub trait OutcomeLog: Send + Sync {
    /// Stores `outcome` only if the call record `call` (a key of
    /// [`RecordKind::Call`](crate::RecordKind::Call)) is still at `revision`.
    fn commit_outcome<'a>(
        &'a self,
        call: &'a str,
        revision: Revision,
        outcome: OutcomeFact<'a>,
    ) -> StoreFuture<'a, Committed>;

    /// The bytes of the outcome committed under `id` at one of `addresses` on the
    /// condition of the call record `call`, looking at everything in the log up to now.
    ///
    /// Such an outcome follows the record's first write in the log (a commit needs the
    /// record to exist), so an implementation may start looking there: a search then
    /// costs the outcomes stored at `addresses` since the call began, not every one
    /// they ever held. A record that was never written has no such outcome.
    fn find_outcome<'a>(
        &'a self,
        call: &'a str,
        addresses: &'a [String],
        id: &'a str,
    ) -> StoreFuture<'a, Option<Vec<u8>>>;
}
