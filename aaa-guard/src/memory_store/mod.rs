//! [`MemoryStore`]: the in-process [`GuardStore`].
//!
//! Each [`RecordKind`] has a [`Space`] of its own: a [`Table`] of records keyed by
//! string, each slot holding its key's hash, so the store's busiest work, forgetting
//! the oldest settled call at nearly every call, reads no cold key (see the table's
//! docs). Listing by prefix reads an index of a space's keys by their first token,
//! built the first time that group is listed and kept from then on: groups nobody
//! lists (a long-running engine's call records) cost nothing to index, and the groups
//! a handler lists again and again (`approval-due.`, at every sweep) read only their
//! own keys.

mod table;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use hashbrown::HashTable;

use crate::store::{GuardStore, RecordKind, check_key};
use crate::store_future::StoreFuture;
use crate::written::{Entry, Revision, StoreError};
use table::{Slot, Table};

/// The in-process [`GuardStore`]: a map per [`RecordKind`] behind a mutex. Clones share
/// the same records, so several engines in one process (workers in tests) see one
/// store.
///
/// Every operation is done when it is called, and its [`StoreFuture`] is
/// [ready](StoreFuture::ready): a guarded call's several store operations allocate no
/// future.
///
/// ```
/// use aaa_guard::{GuardStore, MemoryStore, RecordKind, StoreError};
///
/// # futures_lite_block_on(async {
/// let kv = MemoryStore::new();
/// let call = RecordKind::Call;
/// let rev = kv.create(call, "a.b", b"1".to_vec()).await.unwrap();
/// let rev2 = kv.update(call, "a.b", b"2".to_vec(), rev).await.unwrap();
/// assert!(matches!(kv.update(call, "a.b", b"3".to_vec(), rev).await, Err(StoreError::Conflict { .. })));
/// assert_eq!(kv.get(call, "a.b").await.unwrap().unwrap().revision, rev2);
/// // The same key of the other kind is another record.
/// assert_eq!(kv.get(RecordKind::Handler, "a.b").await.unwrap(), None);
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
/// Every record stays until it is deleted, except the call records of settled calls
/// ([`retire`](GuardStore::retire)d): of those it keeps the most recent 100 000 by
/// default ([`with_retired_limit`](MemoryStore::with_retired_limit)), so a
/// long-running embedded engine's store levels off. A request that repeats a call
/// whose record was forgotten runs it as a new call; every other record (a call
/// running, waiting or with its outcome unknown, approvals, budgets) stays.
///
/// # Listing
///
/// [`keys`](GuardStore::keys) with a prefix that names its first token whole
/// (`approval-due.`) reads that group's index, made at the first such listing; a
/// shorter prefix (`appr`) reads every record of the kind.
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

/// The keys of one group (first token) of records, each with its hash.
type Group = HashTable<(u64, Arc<str>)>;

/// The records of one [`RecordKind`], and their listing index.
#[derive(Default)]
struct Space {
    records: Table,
    /// The keys of each group listed so far, by first token.
    groups: HashMap<String, Group, foldhash::fast::RandomState>,
}

#[derive(Default)]
struct MemoryInner {
    calls: Space,
    handler: Space,
    /// Shared by both spaces: a revision is written once in the whole store.
    last_revision: Revision,
    /// Settled calls' records, oldest first: the hash of the key and the revision it
    /// was retired at.
    retired: VecDeque<(u64, Revision)>,
}

impl MemoryInner {
    /// The space of `kind`, and the store's last revision.
    fn space(&mut self, kind: RecordKind) -> (&mut Space, &mut Revision) {
        let space = match kind {
            RecordKind::Call => &mut self.calls,
            RecordKind::Handler => &mut self.handler,
        };
        (space, &mut self.last_revision)
    }
}

impl Space {
    /// Takes a removed record out of its group's index.
    fn unindex(&mut self, slot: &Slot) {
        if !slot.indexed {
            return;
        }
        if let Some(group) = self.groups.get_mut(first_token(&slot.key))
            && let Ok(found) = group.find_entry(slot.hash, |(_, k)| Arc::ptr_eq(k, &slot.key))
        {
            found.remove();
        }
    }

    /// The index of group `token`, made from the records now if nobody listed it yet.
    fn group(&mut self, token: &str) -> &Group {
        if !self.groups.contains_key(token) {
            let mut group = Group::new();
            for slot in self.records.iter_mut() {
                if first_token(&slot.key) == token {
                    slot.indexed = true;
                    add_key(&mut group, slot.hash, &slot.key);
                }
            }
            self.groups.insert(token.to_owned(), group);
        }
        &self.groups[token]
    }
}

/// Adds `key`, whose hash is `hash`, to a group's index.
fn add_key(group: &mut Group, hash: u64, key: &Arc<str>) {
    group.insert_unique(hash, (hash, key.clone()), |(h, _)| *h);
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
        let (calls, handler) = self.with(|m| (m.calls.records.len(), m.handler.records.len()));
        f.debug_struct("MemoryStore")
            .field("call_records", &calls)
            .field("handler_records", &handler)
            .finish()
    }
}

impl GuardStore for MemoryStore {
    fn create<'a>(
        &'a self,
        kind: RecordKind,
        key: &'a str,
        value: Vec<u8>,
    ) -> StoreFuture<'a, Revision> {
        if let Err(error) = check_key(key) {
            return StoreFuture::ready(Err(error));
        }
        StoreFuture::ready(self.with(|m| {
            let (space, last_revision) = m.space(kind);
            let hash = space.records.hash(key);
            if space.records.get(hash, key).is_some() {
                return Err(StoreError::Exists {
                    key: key.to_owned(),
                });
            }
            *last_revision += 1;
            let revision = *last_revision;
            let key: Arc<str> = Arc::from(key);
            let indexed = match space.groups.get_mut(first_token(&key)) {
                Some(group) => {
                    add_key(group, hash, &key);
                    true
                }
                None => false,
            };
            space.records.insert_new(Slot {
                hash,
                key,
                entry: Entry { value, revision },
                indexed,
            });
            Ok(revision)
        }))
    }

    fn update<'a>(
        &'a self,
        kind: RecordKind,
        key: &'a str,
        value: Vec<u8>,
        expected: Revision,
    ) -> StoreFuture<'a, Revision> {
        // A key that holds a record was checked when the record was created: only a miss
        // needs the check (to tell a bad key from a missing record).
        StoreFuture::ready(self.with(|m| {
            let (space, last_revision) = m.space(kind);
            let next = *last_revision + 1;
            let hash = space.records.hash(key);
            match space.records.get_mut(hash, key) {
                Some(slot) if slot.entry.revision == expected => {
                    slot.entry = Entry {
                        value,
                        revision: next,
                    };
                    *last_revision = next;
                    Ok(next)
                }
                found => {
                    let found = found.map(|s| s.entry.revision);
                    if found.is_none() {
                        check_key(key)?;
                    }
                    Err(StoreError::Conflict {
                        key: key.to_owned(),
                        expected,
                        found,
                    })
                }
            }
        }))
    }

    fn get<'a>(&'a self, kind: RecordKind, key: &'a str) -> StoreFuture<'a, Option<Entry>> {
        StoreFuture::ready(Ok(self.with(|m| {
            let (space, _) = m.space(kind);
            let hash = space.records.hash(key);
            space.records.get(hash, key).map(|slot| slot.entry.clone())
        })))
    }

    fn delete<'a>(&'a self, kind: RecordKind, key: &'a str) -> StoreFuture<'a, ()> {
        let removed = self.with(|m| {
            let (space, _) = m.space(kind);
            let hash = space.records.hash(key);
            let removed = space.records.remove(hash, key);
            if let Some(slot) = &removed {
                space.unindex(slot);
            }
            removed
        });
        drop(removed);
        StoreFuture::ready(Ok(()))
    }

    fn retire<'a>(&'a self, call: &'a str) -> StoreFuture<'a, ()> {
        let forgotten = self.with(|m| {
            let calls = &mut m.calls;
            let hash = calls.records.hash(call);
            let slot = calls.records.get(hash, call)?;
            if !crate::record::is_finished_json(&slot.entry.value) {
                return None;
            }
            let revision = slot.entry.revision;
            m.retired.push_back((hash, revision));
            if m.retired.len() <= self.retired_limit {
                return None;
            }
            let (hash, revision) = m.retired.pop_front()?;
            // Rewritten since (a repeated request recorded its answer): that write
            // was retired again, and is forgotten in its turn.
            let forgotten = calls.records.remove_at(hash, revision)?;
            calls.unindex(&forgotten);
            Some(forgotten)
        });
        // Freed after the lock is released: its memory is cold by now.
        drop(forgotten);
        StoreFuture::ready(Ok(()))
    }

    fn keys<'a>(&'a self, kind: RecordKind, prefix: &'a str) -> StoreFuture<'a, Vec<String>> {
        StoreFuture::ready(Ok(self.with(|m| {
            let (space, _) = m.space(kind);
            let matching = |key: &Arc<str>| key.starts_with(prefix).then(|| key.to_string());
            let mut keys: Vec<String> = if prefix.contains('.') {
                let group = space.group(first_token(prefix));
                group.iter().filter_map(|(_, key)| matching(key)).collect()
            } else {
                space
                    .records
                    .iter()
                    .filter_map(|s| matching(&s.key))
                    .collect()
            };
            keys.sort_unstable();
            keys
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CALL: RecordKind = RecordKind::Call;

    fn now<F: Future>(f: F) -> F::Output {
        use std::task::{Context, Poll, Waker};
        let mut f = std::pin::pin!(f);
        match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(v) => v,
            Poll::Pending => panic!("the memory store never waits"),
        }
    }

    #[test]
    fn an_update_tells_a_bad_key_from_a_missing_record() {
        let kv = MemoryStore::new();
        let revision = now(kv.create(CALL, "guard.t.r.c", b"1".to_vec())).unwrap();
        assert!(matches!(
            now(kv.update(CALL, "guard.t.r..c", b"2".to_vec(), revision)),
            Err(StoreError::InvalidKey(key)) if key == "guard.t.r..c"
        ));
        assert!(matches!(
            now(kv.update(CALL, "guard.t.r.other", b"2".to_vec(), revision)),
            Err(StoreError::Conflict { found: None, .. })
        ));
        assert!(matches!(
            now(kv.update(CALL, "guard.t.r.c", b"2".to_vec(), revision + 1)),
            Err(StoreError::Conflict { found: Some(found), .. }) if found == revision
        ));
        let next = now(kv.update(CALL, "guard.t.r.c", b"2".to_vec(), revision)).unwrap();
        assert_eq!(
            now(kv.get(CALL, "guard.t.r.c")).unwrap().unwrap().revision,
            next
        );
    }

    #[test]
    fn only_the_oldest_settled_finished_records_are_forgotten() {
        use crate::{CallRecord, Delivery, RecordedOutcome};
        let kv = MemoryStore::new().with_retired_limit(2);
        let running = CallRecord::start("t", "w", Delivery::AtLeastOnce, 3);
        let done = running
            .clone()
            .finished(RecordedOutcome::new("k", &1).unwrap());
        let unknown = running
            .clone()
            .unknown(RecordedOutcome::new("k", &1).unwrap());
        // Writes call `name`'s record and retires it; returns the revision.
        let settle = |name: &str, record: &CallRecord| {
            let key = format!("guard.t.r.{name}");
            let revision = now(kv.create(CALL, &key, record.to_json())).unwrap();
            now(kv.retire(&key)).unwrap();
            revision
        };
        let kept = || -> Vec<String> {
            let keys = now(kv.keys(CALL, "guard.t.r.")).unwrap();
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
        let again = done.clone().marked_published().to_json();
        now(kv.update(CALL, "guard.t.r.c4", again, revisions[4])).unwrap();
        settle("c6", &done);
        assert_eq!(kept(), ["c2", "c3", "c4", "c5", "c6"]);
        settle("c7", &done);
        assert_eq!(kept(), ["c2", "c3", "c4", "c6", "c7"]);
        assert_eq!(MemoryStore::new().retired_limit(), 100_000);
    }

    #[test]
    fn keys_lists_by_prefix_in_order_across_groups() {
        let kv = MemoryStore::new();
        for key in ["b.2", "a.x.1", "b.1", "ab.1", "a.y", "b2.1"] {
            now(kv.create(CALL, key, vec![])).unwrap();
        }
        assert_eq!(now(kv.keys(CALL, "b.")).unwrap(), ["b.1", "b.2"]);
        assert_eq!(now(kv.keys(CALL, "a.x")).unwrap(), ["a.x.1"]);
        assert_eq!(now(kv.keys(CALL, "a")).unwrap(), ["a.x.1", "a.y", "ab.1"]);
        assert_eq!(now(kv.keys(CALL, "")).unwrap().len(), 6);
        now(kv.delete(CALL, "b.1")).unwrap();
        assert_eq!(now(kv.keys(CALL, "b")).unwrap(), ["b.2", "b2.1"]);
        assert!(now(kv.keys(CALL, "c.")).unwrap().is_empty());
        // A deleted key can be created again; an update keeps it listed once.
        let rev = now(kv.create(CALL, "b.1", vec![1])).unwrap();
        now(kv.update(CALL, "b.1", vec![2], rev)).unwrap();
        assert_eq!(now(kv.keys(CALL, "b.")).unwrap(), ["b.1", "b.2"]);
    }

    #[test]
    fn the_two_kinds_are_two_key_spaces() {
        use crate::{CallRecord, Delivery, RecordedOutcome};
        let kv = MemoryStore::new().with_retired_limit(0);
        let handler = RecordKind::Handler;
        let call = now(kv.create(CALL, "a.b", b"call".to_vec())).unwrap();
        let other = now(kv.create(handler, "a.b", b"other".to_vec())).unwrap();
        assert_ne!(call, other, "revisions are unique in the store");
        assert_eq!(now(kv.get(CALL, "a.b")).unwrap().unwrap().value, b"call");
        assert_eq!(
            now(kv.get(handler, "a.b")).unwrap().unwrap().value,
            b"other"
        );
        // A write of one kind leaves the other's revision as it was.
        now(kv.update(handler, "a.b", b"2".to_vec(), other)).unwrap();
        assert!(matches!(
            now(kv.update(CALL, "a.b", b"x".to_vec(), other)),
            Err(StoreError::Conflict { found: Some(found), .. }) if found == call
        ));
        now(kv.create(handler, "c.d", vec![])).unwrap();
        assert_eq!(now(kv.keys(CALL, "")).unwrap(), ["a.b"]);
        assert_eq!(now(kv.keys(handler, "")).unwrap(), ["a.b", "c.d"]);
        assert!(now(kv.keys(CALL, "c.")).unwrap().is_empty());
        now(kv.delete(CALL, "a.b")).unwrap();
        assert!(now(kv.get(CALL, "a.b")).unwrap().is_none());
        assert!(now(kv.get(handler, "a.b")).unwrap().is_some());
        // `retire` names a call record: a handler record under that key, even one that
        // reads as a finished call, is never forgotten by it.
        let finished = CallRecord::start("t", "w", Delivery::AtLeastOnce, 3)
            .finished(RecordedOutcome::new("k", &1).unwrap());
        now(kv.create(handler, "f.g", finished.to_json())).unwrap();
        now(kv.retire("f.g")).unwrap();
        assert!(now(kv.get(handler, "f.g")).unwrap().is_some());
        now(kv.create(CALL, "f.g", finished.to_json())).unwrap();
        now(kv.retire("f.g")).unwrap();
        assert!(
            now(kv.get(CALL, "f.g")).unwrap().is_none(),
            "a limit of 0 keeps none"
        );
        assert!(now(kv.get(handler, "f.g")).unwrap().is_some());
        let shown = format!("{kv:?}");
        assert_eq!(shown, "MemoryStore { call_records: 0, handler_records: 3 }");
    }
}
