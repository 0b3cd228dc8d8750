//! [`FencedLog`]: a store whose records share a log with the facts they fence.

use crate::written::{Revision, StoreFuture};

/// What a fenced append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    /// The fact was appended: the record was at the expected revision.
    Stored,
    /// A fact with the same de-duplication id is already in the log (within the log's
    /// de-duplication window): nothing was appended, and the record was not checked.
    Duplicate,
}

/// Appending a fact on the condition that a record is unchanged, in one write; and
/// finding such a fact again.
///
/// Without a fenced log, finishing a call takes two writes in sequence: the compare-and-set that
/// commits the outcome on the call's record (the fence), then the outcome fact. A store
/// whose records live in the same ordered log as the facts (a JetStream stream from
/// nats-server 2.11, whose publish can be made conditional on another subject's last
/// sequence) can do both in one write: the fact is appended **only if the record is
/// still at the revision its attempt holds**. The record then says nothing about the
/// outcome; the fact in the log does. So whoever fences an attempt out (a takeover, an
/// abandon, an outcome declared unknown) looks for that attempt's fact *after* its own
/// compare-and-set: the log is totally ordered, so a fact appended under the old
/// revision is already there, and none can be appended later.
///
/// ```
/// use aaa_guard::{GuardStore, MemoryStore};
///
/// // The in-process store's records share no log with the facts: outcomes are
/// // committed on the record first, then published.
/// assert!(MemoryStore::new().fence().is_none());
/// ```
///
/// A record that changed makes the append fail with
/// [`StoreError::Conflict`](crate::StoreError::Conflict); an append whose outcome is
/// unknown (a timeout) fails with [`StoreError::Unavailable`](crate::StoreError::Unavailable)
/// and is resolved by appending again under the same id, which reports
/// [`Appended::Duplicate`] when the first one was stored.
pub trait FencedLog: Send + Sync {
    /// Appends `payload` at `subject` under the de-duplication id `msg_id`, only if the
    /// record `key` is still at `revision`.
    fn append_if_current<'a>(
        &'a self,
        key: &'a str,
        revision: Revision,
        subject: &'a str,
        payload: Vec<u8>,
        msg_id: &'a str,
    ) -> StoreFuture<'a, Appended>;

    /// The payload of the fact appended under `msg_id` at one of `subjects` on the
    /// condition of the record `key`, looking at everything in the log up to now.
    ///
    /// Such a fact follows the record's first write in the log (an append needs the
    /// record to exist), so an implementation may start looking there: a search then
    /// costs the facts appended at `subjects` since the call began, not every fact they
    /// ever held. A record that was never written has no such fact.
    fn find<'a>(
        &'a self,
        key: &'a str,
        subjects: &'a [String],
        msg_id: &'a str,
    ) -> StoreFuture<'a, Option<Vec<u8>>>;
}
