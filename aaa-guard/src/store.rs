//! [`GuardStore`]: the small record store the guard, approvals and budgets live in.
//!
//! Every state transition of a call is one atomic operation on one record:
//! create-if-absent, compare-and-set on the record's revision, read, delete, list by
//! key prefix. That is the whole contract, so it maps one to one onto JetStream KV
//! (`create`, `update` with the expected revision, `get`, `delete`, `keys`), onto a
//! stream's subjects with expected last sequences, and onto the in-process
//! [`MemoryStore`]. A store may also offer a [`FencedLog`](crate::FencedLog).
//!
//! Revisions are opaque, strictly increasing per store, and change on every write. A
//! write whose outcome is unknown (a timeout) surfaces as [`StoreError::Unavailable`];
//! callers re-read the record before deciding what happened.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::fence::FencedLog;
use crate::written::{Entry, Revision, StoreError, StoreFuture};

/// A store of records with compare-and-set: what guard records, pending approvals and
/// run budgets live in.
///
/// Every state transition of a call is one atomic operation on one record:
/// create-if-absent, compare-and-set on the record's revision, read, delete, list by
/// key prefix. That maps one to one onto JetStream KV (`create`, `update` with the
/// expected revision, `get`, `delete`, `keys`) and onto the in-process
/// [`MemoryStore`]. Revisions change on every write. A write whose outcome is unknown
/// (a timeout) surfaces as [`StoreError::Unavailable`]; callers read the record back
/// before deciding what happened.
///
/// Keys are `.`-separated tokens of `[A-Za-z0-9_-]` (valid NATS KV keys), such as
/// `guard.default.run-1.call_7`.
pub trait GuardStore: Send + Sync + 'static {
    /// Creates `key` if absent; [`StoreError::Exists`] otherwise.
    fn create<'a>(&'a self, key: &'a str, value: Vec<u8>) -> StoreFuture<'a, Revision>;
    /// Replaces `key` if its revision is still `expected`; [`StoreError::Conflict`]
    /// otherwise.
    fn update<'a>(
        &'a self,
        key: &'a str,
        value: Vec<u8>,
        expected: Revision,
    ) -> StoreFuture<'a, Revision>;
    /// Reads `key`.
    fn get<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Option<Entry>>;
    /// Deletes `key` (no error when absent).
    fn delete<'a>(&'a self, key: &'a str) -> StoreFuture<'a, ()>;
    /// Every key starting with `prefix`, in key order.
    fn keys<'a>(&'a self, prefix: &'a str) -> StoreFuture<'a, Vec<String>>;

    /// How long ago, by the store's own clock, `key` was written at its current
    /// revision: `Some((revision, age))`, or `None` when the key is absent or the store
    /// keeps no clock of its own (observers then rely on theirs; see
    /// [`LeaseWatch`](crate::LeaseWatch)). [`MemoryStore`] keeps none.
    fn age<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Option<(Revision, Duration)>> {
        let _ = key;
        Box::pin(async { Ok(None) })
    }

    /// Tells the store that the call whose record is `key` is settled: its outcome is
    /// published and the message that carried it acknowledged, so the record now only
    /// answers requests that repeat the call (which it still runs at most once). A store
    /// that bounds what it keeps forgets such records first, oldest first, and only
    /// while they stay finished and unchanged. The default keeps everything (the NATS
    /// store keeps records for its stream's `max_age`); [`MemoryStore`] keeps the last
    /// [`retired_limit`](MemoryStore::with_retired_limit) of them.
    fn retire<'a>(&'a self, key: &'a str) -> StoreFuture<'a, ()> {
        let _ = key;
        Box::pin(async { Ok(()) })
    }

    /// The store's [`FencedLog`], when its records share an ordered log with the facts
    /// they fence, so that an outcome can be committed and published in one write.
    /// `None` (the default, and [`MemoryStore`]'s answer) means outcomes are committed
    /// on the record first and published after.
    fn fence(&self) -> Option<&dyn FencedLog> {
        None
    }
}

impl<S: GuardStore + ?Sized> GuardStore for Arc<S> {
    fn create<'a>(&'a self, key: &'a str, value: Vec<u8>) -> StoreFuture<'a, Revision> {
        (**self).create(key, value)
    }
    fn update<'a>(
        &'a self,
        key: &'a str,
        value: Vec<u8>,
        expected: Revision,
    ) -> StoreFuture<'a, Revision> {
        (**self).update(key, value, expected)
    }
    fn get<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Option<Entry>> {
        (**self).get(key)
    }
    fn delete<'a>(&'a self, key: &'a str) -> StoreFuture<'a, ()> {
        (**self).delete(key)
    }
    fn keys<'a>(&'a self, prefix: &'a str) -> StoreFuture<'a, Vec<String>> {
        (**self).keys(prefix)
    }
    fn age<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Option<(Revision, Duration)>> {
        (**self).age(key)
    }
    fn retire<'a>(&'a self, key: &'a str) -> StoreFuture<'a, ()> {
        (**self).retire(key)
    }
    fn fence(&self) -> Option<&dyn FencedLog> {
        (**self).fence()
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

/// The in-process [`GuardStore`]: a map behind a mutex. Clones share the same records, so
/// several engines in one process (workers in tests) see one store.
///
/// ```
/// use aaa_guard::{GuardStore, MemoryStore, StoreError};
///
/// # futures_lite_block_on(async {
/// let kv = MemoryStore::new();
/// let rev = kv.create("a.b", b"1".to_vec()).await.unwrap();
/// let rev2 = kv.update("a.b", b"2".to_vec(), rev).await.unwrap();
/// assert!(matches!(kv.update("a.b", b"3".to_vec(), rev).await, Err(StoreError::Conflict { .. })));
/// assert_eq!(kv.get("a.b").await.unwrap().unwrap().revision, rev2);
/// # });
/// # fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     use std::task::{Context, Poll, Waker};
/// #     let mut f = std::pin::pin!(f);
/// #     let mut cx = Context::from_waker(Waker::noop());
/// #     loop { if let Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
/// # }
/// ```
///
/// # What it keeps
///
/// Every record stays until it is deleted, except the records of settled calls
/// ([`retire`](GuardStore::retire)d): of those it keeps the most recent 100 000 by
/// default ([`with_retired_limit`](MemoryStore::with_retired_limit)), so a
/// long-running embedded engine's store levels off. A request that repeats a call
/// whose record was forgotten runs it as a new call; every other record (a call
/// running, waiting or with its outcome unknown, approvals, budgets) stays.
#[derive(Clone)]
pub struct MemoryStore {
    inner: Arc<Mutex<MemoryInner>>,
    retired_limit: usize,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore {
            inner: Arc::default(),
            retired_limit: 100_000,
        }
    }
}

/// Records by key for the point operations every call makes (a hash map: keys share
/// long prefixes, which an ordered map would compare over and over), and each key also
/// under its first token, so listing one kind of record (`approval-due.`) reads only
/// those.
#[derive(Default)]
struct MemoryInner {
    records: HashMap<Arc<str>, Entry, foldhash::fast::RandomState>,
    groups: HashMap<
        String,
        HashSet<Arc<str>, foldhash::fast::RandomState>,
        foldhash::fast::RandomState,
    >,
    last_revision: Revision,
    /// Settled calls' records, oldest first, at the revision they were retired at.
    retired: VecDeque<(Arc<str>, Revision)>,
}

impl MemoryInner {
    fn remove(&mut self, key: &str) {
        if self.records.remove(key).is_some()
            && let Some(group) = self.groups.get_mut(first_token(key))
        {
            group.remove(key);
        }
    }
}

/// The first token of a key (or of a prefix).
fn first_token(key: &str) -> &str {
    key.split('.').next().unwrap_or(key)
}

impl MemoryStore {
    /// An empty store that keeps the records of the last 100 000 settled calls.
    pub fn new() -> Self {
        Self::default()
    }

    /// Keeps the records of the last `limit` settled calls (`usize::MAX`: all of them).
    pub fn with_retired_limit(mut self, limit: usize) -> Self {
        self.retired_limit = limit;
        self
    }

    /// How many settled calls' records it keeps.
    pub fn retired_limit(&self) -> usize {
        self.retired_limit
    }

    fn with<T>(&self, f: impl FnOnce(&mut MemoryInner) -> T) -> T {
        // A panic while holding the lock cannot leave a record half-written (every
        // operation is a single map write), so a poisoned lock is safe to reuse.
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let len = self.with(|m| m.records.len());
        f.debug_struct("MemoryStore")
            .field("records", &len)
            .finish()
    }
}

impl GuardStore for MemoryStore {
    fn create<'a>(&'a self, key: &'a str, value: Vec<u8>) -> StoreFuture<'a, Revision> {
        Box::pin(async move {
            check_key(key)?;
            self.with(|m| {
                if m.records.contains_key(key) {
                    return Err(StoreError::Exists {
                        key: key.to_owned(),
                    });
                }
                m.last_revision += 1;
                let revision = m.last_revision;
                let shared: Arc<str> = Arc::from(key);
                // Most creates join a group that exists: no key to allocate then.
                let group = first_token(key);
                match m.groups.get_mut(group) {
                    Some(keys) => {
                        keys.insert(shared.clone());
                    }
                    None => {
                        let keys = HashSet::from_iter([shared.clone()]);
                        m.groups.insert(group.to_owned(), keys);
                    }
                }
                m.records.insert(shared, Entry { value, revision });
                Ok(revision)
            })
        })
    }

    fn update<'a>(
        &'a self,
        key: &'a str,
        value: Vec<u8>,
        expected: Revision,
    ) -> StoreFuture<'a, Revision> {
        Box::pin(async move {
            check_key(key)?;
            self.with(|m| {
                let next = m.last_revision + 1;
                match m.records.get_mut(key) {
                    Some(entry) if entry.revision == expected => {
                        *entry = Entry {
                            value,
                            revision: next,
                        };
                        m.last_revision = next;
                        Ok(next)
                    }
                    found => Err(StoreError::Conflict {
                        key: key.to_owned(),
                        expected,
                        found: found.map(|e| e.revision),
                    }),
                }
            })
        })
    }

    fn get<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Option<Entry>> {
        Box::pin(async move { Ok(self.with(|m| m.records.get(key).cloned())) })
    }

    fn delete<'a>(&'a self, key: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.with(|m| m.remove(key));
            Ok(())
        })
    }

    fn retire<'a>(&'a self, key: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.with(|m| {
                let Some((shared, entry)) = m.records.get_key_value(key) else {
                    return;
                };
                if !crate::record::is_finished_json(&entry.value) {
                    return;
                }
                m.retired.push_back((shared.clone(), entry.revision));
                while m.retired.len() > self.retired_limit {
                    let Some((key, revision)) = m.retired.pop_front() else {
                        break;
                    };
                    // Rewritten since (a repeated request recorded its answer): that
                    // write was retired again, and is forgotten in its turn.
                    if m.records.get(&key).is_some_and(|e| e.revision == revision) {
                        m.remove(&key);
                    }
                }
            });
            Ok(())
        })
    }

    fn keys<'a>(&'a self, prefix: &'a str) -> StoreFuture<'a, Vec<String>> {
        Box::pin(async move {
            Ok(self.with(|m| {
                // A prefix that names its first token whole reads one group; a shorter
                // one reads every group it could match.
                let whole = prefix.contains('.');
                let first = first_token(prefix);
                let mut keys: Vec<String> = m
                    .groups
                    .iter()
                    .filter(|(token, _)| {
                        if whole {
                            token.as_str() == first
                        } else {
                            token.starts_with(first)
                        }
                    })
                    .flat_map(|(_, group)| group.iter())
                    .filter(|k| k.starts_with(prefix))
                    .map(|k| k.to_string())
                    .collect();
                keys.sort_unstable();
                keys
            }))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now<F: Future>(f: F) -> F::Output {
        use std::task::{Context, Poll, Waker};
        let mut f = std::pin::pin!(f);
        match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(v) => v,
            Poll::Pending => panic!("the memory store never waits"),
        }
    }

    #[test]
    fn only_the_oldest_settled_finished_records_are_forgotten() {
        use crate::{CallRecord, Delivery, RecordedOutcome};
        let kv = MemoryStore::new().with_retired_limit(2);
        let running = CallRecord::start("t", "w", Delivery::AtLeastOnce, 3);
        let done = running.finished(RecordedOutcome::new("k", &1).unwrap());
        let unknown = running.unknown(RecordedOutcome::new("k", &1).unwrap());
        // Writes call `name`'s record and retires it; returns the revision.
        let settle = |name: &str, record: &CallRecord| {
            let key = format!("guard.t.r.{name}");
            let revision = now(kv.create(&key, record.to_json())).unwrap();
            now(kv.retire(&key)).unwrap();
            revision
        };
        let kept = || -> Vec<String> {
            let keys = now(kv.keys("guard.t.r.")).unwrap();
            keys.iter()
                .map(|k| k["guard.t.r.".len()..].to_owned())
                .collect()
        };
        // c0 and c1 finished, c2 running, c3 outcome unknown, c4 and c5 finished.
        let written = [&done, &done, &running, &unknown, &done, &done];
        let revisions: Vec<Revision> = (0..)
            .zip(written)
            .map(|(i, record)| settle(&format!("c{i}"), record))
            .collect();
        now(kv.retire("guard.t.r.absent")).unwrap();
        assert_eq!(
            kept(),
            ["c2", "c3", "c4", "c5"],
            "the two oldest finished records went; running and unknown ones stay"
        );
        // A record rewritten after it was retired is not forgotten for that retirement
        // (only a retirement of its new revision would let it go).
        let again = done.marked_published().to_json();
        now(kv.update("guard.t.r.c4", again, revisions[4])).unwrap();
        settle("c6", &done);
        assert_eq!(kept(), ["c2", "c3", "c4", "c5", "c6"]);
        settle("c7", &done);
        assert_eq!(kept(), ["c2", "c3", "c4", "c6", "c7"]);
        assert_eq!(MemoryStore::new().retired_limit(), 100_000);
    }

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

    #[test]
    fn keys_lists_by_prefix_in_order_across_groups() {
        let kv = MemoryStore::new();
        for key in ["b.2", "a.x.1", "b.1", "ab.1", "a.y", "b2.1"] {
            now(kv.create(key, vec![])).unwrap();
        }
        assert_eq!(now(kv.keys("b.")).unwrap(), ["b.1", "b.2"]);
        assert_eq!(now(kv.keys("a.x")).unwrap(), ["a.x.1"]);
        assert_eq!(now(kv.keys("a")).unwrap(), ["a.x.1", "a.y", "ab.1"]);
        assert_eq!(now(kv.keys("")).unwrap().len(), 6);
        now(kv.delete("b.1")).unwrap();
        assert_eq!(now(kv.keys("b")).unwrap(), ["b.2", "b2.1"]);
        assert!(now(kv.keys("c.")).unwrap().is_empty());
        // A deleted key can be created again; an update keeps it listed once.
        let rev = now(kv.create("b.1", vec![1])).unwrap();
        now(kv.update("b.1", vec![2], rev)).unwrap();
        assert_eq!(now(kv.keys("b.")).unwrap(), ["b.1", "b.2"]);
    }
}
