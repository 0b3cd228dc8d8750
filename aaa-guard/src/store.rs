//! [`GuardStore`]: the small record store the guard, approvals and budgets live in, and
//! [`RecordKind`], the two kinds of record it keeps apart.
//!
//! Every state transition of a call is one atomic operation on one record:
//! create-if-absent, compare-and-set on the record's revision, read, delete, list by
//! key prefix. That is the whole contract, so it maps one to one onto JetStream KV
//! (`create`, `update` with the expected revision, `get`, `delete`, `keys`), onto a
//! stream's subjects with expected last sequences, and onto the in-process
//! [`MemoryStore`](crate::MemoryStore). A store may also offer an
//! [`OutcomeLog`](crate::OutcomeLog).
//!
//! Revisions are opaque, strictly increasing per store, and change on every write. A
//! write whose outcome is unknown (a timeout) surfaces as [`StoreError::Unavailable`];
//! callers re-read the record before deciding what happened.

use std::sync::Arc;
use std::time::Duration;

use crate::outcome_log::OutcomeLog;
use crate::store_future::StoreFuture;
use crate::written::{Entry, Revision, StoreError};

/// Which of the two kinds of record an operation is on. Each kind is a key space of
/// its own: the same key in both names two records, and listing one kind never shows
/// the other.
///
/// A store may keep the kinds in different places, and it learns a record's kind only
/// from this argument, never from its key: the NATS store keeps call records on the
/// facts stream (where an [`OutcomeLog`](crate::OutcomeLog) needs them) and handler
/// records in a KV bucket; [`MemoryStore`](crate::MemoryStore) keeps two tables.
///
/// No `#[non_exhaustive]`: every store handles every kind, so a new kind is a breaking
/// change that each store has to answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordKind {
    /// The guard's record of one logical call ([`CallRecord`](crate::CallRecord)): its
    /// attempt, lease and outcome. Written when a call starts, at every heartbeat while
    /// it runs and when it ends, so there are as many as calls, and most are soon
    /// settled ([`GuardStore::retire`]). Their revisions fence outcomes
    /// ([`OutcomeLog`](crate::OutcomeLog)), and [`LeaseWatch`](crate::LeaseWatch) reads
    /// their [`age`](GuardStore::age).
    Call,
    /// The handler's other records: pending approvals, their timeout marks, run
    /// budgets. Few, long-lived, never retired.
    Handler,
}

impl RecordKind {
    /// Both kinds, [`Call`](RecordKind::Call) first.
    pub const ALL: [RecordKind; 2] = [RecordKind::Call, RecordKind::Handler];

    /// The kind's name in lower case (`call`, `handler`), for messages and logs.
    ///
    /// ```
    /// assert_eq!(aaa_guard::RecordKind::Call.as_str(), "call");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            RecordKind::Call => "call",
            RecordKind::Handler => "handler",
        }
    }
}

impl std::fmt::Display for RecordKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A store of records with compare-and-set: what guard records, pending approvals and
/// run budgets live in.
///
/// Every state transition of a call is one atomic operation on one record:
/// create-if-absent, compare-and-set on the record's revision, read, delete, list by
/// key prefix. That maps one to one onto JetStream KV (`create`, `update` with the
/// expected revision, `get`, `delete`, `keys`) and onto the in-process
/// [`MemoryStore`](crate::MemoryStore). Revisions change on every write. A write whose
/// outcome is unknown (a timeout) surfaces as [`StoreError::Unavailable`]; callers read
/// the record back before deciding what happened.
///
/// Every record is of a [`RecordKind`], given with every operation: the guard's call
/// records and the handler's other records are two key spaces, which a store may keep
/// in different places. Keys are `.`-separated tokens of `[A-Za-z0-9_-]` (valid NATS
/// KV keys), such as `guard.default.run-1.call_7`; a store reads nothing into them.
///
/// Every operation returns a [`StoreFuture`]: a store that answers at once returns
/// [`StoreFuture::ready`] (no allocation), one that has to wait [`StoreFuture::new`].
/// An operation may be done when it is called, before its future is polled, so call
/// one only to have it done.
///
/// ```
/// use aaa_guard::{GuardStore, MemoryStore, RecordKind};
///
/// # block_on(async {
/// let store = MemoryStore::new();
/// store.create(RecordKind::Call, "t.r.c", b"call".to_vec()).await.unwrap();
/// store.create(RecordKind::Handler, "t.r.c", b"approval".to_vec()).await.unwrap();
/// let call = store.get(RecordKind::Call, "t.r.c").await.unwrap().unwrap();
/// assert_eq!(call.value, b"call");
/// assert_eq!(store.keys(RecordKind::Handler, "t.").await.unwrap(), ["t.r.c"]);
/// # });
/// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     use std::task::{Context, Poll, Waker};
/// #     let mut f = std::pin::pin!(f);
/// #     let mut cx = Context::from_waker(Waker::noop());
/// #     loop { if let Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
/// # }
/// ```
pub trait GuardStore: Send + Sync + 'static {
    /// Creates `key` of `kind` if absent; [`StoreError::Exists`] otherwise.
    fn create<'a>(
        &'a self,
        kind: RecordKind,
        key: &'a str,
        value: Vec<u8>,
    ) -> StoreFuture<'a, Revision>;
    /// Replaces `key` of `kind` if its revision is still `expected`;
    /// [`StoreError::Conflict`] otherwise.
    fn update<'a>(
        &'a self,
        kind: RecordKind,
        key: &'a str,
        value: Vec<u8>,
        expected: Revision,
    ) -> StoreFuture<'a, Revision>;
    /// Reads `key` of `kind`.
    fn get<'a>(&'a self, kind: RecordKind, key: &'a str) -> StoreFuture<'a, Option<Entry>>;
    /// Deletes `key` of `kind` (no error when absent).
    fn delete<'a>(&'a self, kind: RecordKind, key: &'a str) -> StoreFuture<'a, ()>;
    /// Every key of `kind` starting with `prefix`, in key order.
    fn keys<'a>(&'a self, kind: RecordKind, prefix: &'a str) -> StoreFuture<'a, Vec<String>>;

    /// How long ago, by the store's own clock, `key` of `kind` was written at its
    /// current revision: `Some((revision, age))`, or `None` when the key is absent or
    /// the store keeps no clock of its own (observers then rely on theirs; see
    /// [`LeaseWatch`](crate::LeaseWatch)). [`MemoryStore`](crate::MemoryStore) keeps none.
    fn age<'a>(
        &'a self,
        kind: RecordKind,
        key: &'a str,
    ) -> StoreFuture<'a, Option<(Revision, Duration)>> {
        let _ = (kind, key);
        StoreFuture::ready(Ok(None))
    }

    /// Tells the store that the call whose record is `call` (a key of
    /// [`RecordKind::Call`]) is settled: its outcome is published and the message that
    /// carried it acknowledged, so the record now only answers requests that repeat the
    /// call (which it still runs at most once). A store that bounds what it keeps
    /// forgets such records first, oldest first, and only while they stay finished and
    /// unchanged. The default keeps everything (the NATS store keeps records for its
    /// stream's `max_age`); [`MemoryStore`](crate::MemoryStore) keeps the last
    /// [`retired_limit`](crate::MemoryStore::with_retired_limit) of them.
    fn retire<'a>(&'a self, call: &'a str) -> StoreFuture<'a, ()> {
        let _ = call;
        StoreFuture::ready(Ok(()))
    }

    /// The store's [`OutcomeLog`], when its call records share an ordered log with the
    /// outcomes they fence, so that an outcome can be committed and published in one
    /// write. `None` (the default, and [`MemoryStore`](crate::MemoryStore)'s answer)
    /// means outcomes are committed on the record first and published after.
    fn outcome_log(&self) -> Option<&dyn OutcomeLog> {
        None
    }
}

impl<S: GuardStore + ?Sized> GuardStore for Arc<S> {
    fn create<'a>(
        &'a self,
        kind: RecordKind,
        key: &'a str,
        value: Vec<u8>,
    ) -> StoreFuture<'a, Revision> {
        (**self).create(kind, key, value)
    }
    fn update<'a>(
        &'a self,
        kind: RecordKind,
        key: &'a str,
        value: Vec<u8>,
        expected: Revision,
    ) -> StoreFuture<'a, Revision> {
        (**self).update(kind, key, value, expected)
    }
    fn get<'a>(&'a self, kind: RecordKind, key: &'a str) -> StoreFuture<'a, Option<Entry>> {
        (**self).get(kind, key)
    }
    fn delete<'a>(&'a self, kind: RecordKind, key: &'a str) -> StoreFuture<'a, ()> {
        (**self).delete(kind, key)
    }
    fn keys<'a>(&'a self, kind: RecordKind, prefix: &'a str) -> StoreFuture<'a, Vec<String>> {
        (**self).keys(kind, prefix)
    }
    fn age<'a>(
        &'a self,
        kind: RecordKind,
        key: &'a str,
    ) -> StoreFuture<'a, Option<(Revision, Duration)>> {
        (**self).age(kind, key)
    }
    fn retire<'a>(&'a self, call: &'a str) -> StoreFuture<'a, ()> {
        (**self).retire(call)
    }
    fn outcome_log(&self) -> Option<&dyn OutcomeLog> {
        (**self).outcome_log()
    }
}

/// Checks that a key is `.`-separated tokens of `[A-Za-z0-9_-]`.
pub fn check_key(key: &str) -> Result<(), StoreError> {
    // Every store operation checks its key. Two passes without a table, an early exit or
    // state carried from byte to byte, which the compiler turns into vector code: every
    // byte allowed, no dot after a dot. A dot may not start or end the key either.
    let bytes = key.as_bytes();
    let dot = |b: u8| b == b'.';
    let refused = bytes.iter().fold(0_u8, |refused, &b| {
        let letter = (b | 0x20).wrapping_sub(b'a') < 26;
        let digit = b.wrapping_sub(b'0') < 10;
        refused | u8::from(!(letter | digit | (b == b'_') | (b == b'-') | dot(b)))
    });
    let double_dot = bytes
        .iter()
        .zip(bytes.get(1..).unwrap_or_default())
        .fold(0_u8, |found, (&a, &b)| found | u8::from(dot(a) & dot(b)));
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) if (refused | double_dot) == 0 && !dot(first) && !dot(last) => {
            Ok(())
        }
        _ => Err(StoreError::InvalidKey(key.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_dot_separated_tokens_of_safe_bytes() {
        for good in ["a", "guard.default.run-1.call_2", "A.b-c.D_9"] {
            assert!(check_key(good).is_ok(), "{good}");
        }
        for bad in ["", ".a", "a.", "a..b", "a b", "a.*", "a.>", "é", "a/b"] {
            assert!(check_key(bad).is_err(), "{bad:?}");
        }
    }

    /// The check agrees with a plain reading of the rule over every string of up to
    /// five characters from an alphabet of the cases that matter (`@`, `[`, `` ` `` and
    /// `{` sit next to the letters' ranges).
    #[test]
    fn the_key_check_agrees_with_the_rule() {
        let rule = |key: &str| {
            key.split('.').all(|token| {
                !token.is_empty()
                    && token
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            })
        };
        let alphabet = [
            'a', 'Z', '0', '9', '_', '-', '.', '@', '[', '`', '{', '/', ' ', 'é',
        ];
        let (mut keys, mut longest) = (vec![String::new()], vec![String::new()]);
        for _ in 0..5 {
            longest = longest
                .iter()
                .flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}")))
                .collect();
            keys.extend(longest.iter().cloned());
        }
        for key in &keys {
            assert_eq!(check_key(key).is_ok(), rule(key), "{key:?}");
        }
    }
}
