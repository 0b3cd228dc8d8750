//! [`Table`]: the [`MemoryStore`](super::MemoryStore)'s records by key, each slot
//! holding its key's hash.
//!
//! A long-running store holds some 100 000 records, and at nearly every call forgets
//! the oldest settled one, written tens of thousands of calls before: its key and
//! value are cold by then. So the table keeps each key's hash in its slot. Forgetting
//! a record finds it by that hash and its revision (unique in the store), never
//! reading its key again, and the table rehashes from the stored hashes when it grows
//! or clears its tombstones. A `hashbrown` [`HashTable`] gives that control over what
//! is hashed and compared; `HashMap` would hash every key again on each of those
//! steps.
//!
//! What it buys, measured: a `HashMap<Arc<str>, Entry>` per record kind in its place
//! (with a queue of keys to forget), together with the same change to the embedded
//! bus's de-duplication ring, took the `dispatch` bench's aged, guarded engine at 64 in
//! flight from 1.75-1.79× rmcp's client/server over a duplex to 1.44-1.72× (three runs
//! each, one after the other), though `per_call` counted only 0.2% more instructions for
//! this table: the cost is in the cold keys an aged store forgets.

use std::hash::BuildHasher;
use std::sync::Arc;

use hashbrown::HashTable;

use crate::written::{Entry, Revision};

/// One record: its key (shared with the listing index, when its group has one), the
/// key's hash, and what was written.
pub(super) struct Slot {
    pub(super) hash: u64,
    pub(super) key: Arc<str>,
    pub(super) entry: Entry,
    /// Whether the listing index holds its key (so removing it needs no look at the
    /// key to learn its group).
    pub(super) indexed: bool,
}

/// Records by key.
#[derive(Default)]
pub(super) struct Table {
    slots: HashTable<Slot>,
    hasher: foldhash::fast::RandomState,
}

impl Table {
    /// The hash a key is found by.
    pub(super) fn hash(&self, key: &str) -> u64 {
        self.hasher.hash_one(key)
    }

    /// How many records it holds.
    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    /// The record of `key`, whose hash is `hash`.
    pub(super) fn get(&self, hash: u64, key: &str) -> Option<&Slot> {
        self.slots.find(hash, |s| s.hash == hash && *s.key == *key)
    }

    /// The record of `key`, to change.
    pub(super) fn get_mut(&mut self, hash: u64, key: &str) -> Option<&mut Slot> {
        self.slots
            .find_mut(hash, |s| s.hash == hash && *s.key == *key)
    }

    /// Adds a record for a key it does not hold.
    pub(super) fn insert_new(&mut self, slot: Slot) {
        self.slots.insert_unique(slot.hash, slot, |s| s.hash);
    }

    /// Removes the record of `key`.
    pub(super) fn remove(&mut self, hash: u64, key: &str) -> Option<Slot> {
        let found = self
            .slots
            .find_entry(hash, |s| s.hash == hash && *s.key == *key);
        found.ok().map(|entry| entry.remove().0)
    }

    /// Removes the record with hash `hash` if it is still at `revision` (no key is
    /// compared: a revision is written once in the whole store).
    pub(super) fn remove_at(&mut self, hash: u64, revision: Revision) -> Option<Slot> {
        let found = self
            .slots
            .find_entry(hash, |s| s.entry.revision == revision);
        found.ok().map(|entry| entry.remove().0)
    }

    /// Every record, in no order.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Slot> {
        self.slots.iter()
    }

    /// Every record, in no order, to change.
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Slot> {
        self.slots.iter_mut()
    }
}
