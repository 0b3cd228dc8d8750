//! [`CallSet`]: a set of call ids that keeps each id's hash.
//!
//! A run handle remembers every call whose outcome it handed out, and a long run has
//! many: the set grows to hundreds of thousands of ids that nobody reads again. A
//! `HashSet` would hash every one of them again each time it grows, reading ids
//! written long ago from cold memory. This set keeps the hash next to the id in a
//! `hashbrown` [`HashTable`], so growing reads only the table, and an id is compared
//! only with ids of the same full hash.

use std::hash::BuildHasher;

use hashbrown::HashTable;
use hashbrown::hash_table::Entry;

use crate::ids::CallId;

/// Call ids, each with its hash.
#[derive(Default)]
pub(crate) struct CallSet {
    ids: HashTable<(u64, CallId)>,
    hasher: foldhash::fast::RandomState,
}

impl CallSet {
    /// Whether it holds `id`.
    pub(crate) fn contains(&self, id: &CallId) -> bool {
        let hash = self.hasher.hash_one(id);
        self.ids
            .find(hash, |(h, held)| *h == hash && held == id)
            .is_some()
    }

    /// Adds `id` (nothing changes if it holds it already).
    pub(crate) fn insert(&mut self, id: CallId) {
        let hash = self.hasher.hash_one(&id);
        if let Entry::Vacant(vacant) =
            self.ids
                .entry(hash, |(h, held)| *h == hash && *held == id, |(h, _)| *h)
        {
            vacant.insert((hash, id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_what_was_inserted_once() {
        let mut set = CallSet::default();
        let id = |i: u32| CallId::new(format!("call-{i}")).unwrap();
        for i in 0..10_000 {
            set.insert(id(i));
        }
        set.insert(id(7));
        assert_eq!(set.ids.len(), 10_000, "a repeated id is held once");
        assert!((0..10_000).all(|i| set.contains(&id(i))));
        assert!(!set.contains(&id(10_000)));
    }
}
