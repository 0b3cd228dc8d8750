//! [`CallSet`]: a set of call ids that keeps a 128-bit fingerprint of each, not the id.
//!
//! A run handle remembers every call whose outcome it handed out, and a long run has
//! many: the set grows to hundreds of thousands of ids that nobody reads again. Keeping
//! the ids would keep each one's allocation alive for the life of the run (about a
//! hundred bytes a call, with its slot in the table); a fingerprint is 16 bytes held in
//! the table itself, and growing the table reads nothing else.
//!
//! A fingerprint is two independently seeded 64-bit hashes of the id. Two ids of one
//! run share one with a chance of about n² / 2¹²⁹ for n ids: for a run of a billion
//! calls, about one in 10²⁰. The seeds are random per set, so nobody can choose ids
//! that collide.

use std::collections::HashSet;
use std::hash::BuildHasher;

use crate::ids::CallId;

/// Call ids, each kept as its fingerprint.
#[derive(Default)]
pub(crate) struct CallSet {
    prints: HashSet<u128, foldhash::fast::RandomState>,
    high: foldhash::fast::RandomState,
    low: foldhash::fast::RandomState,
}

impl CallSet {
    fn print(&self, id: &CallId) -> u128 {
        (u128::from(self.high.hash_one(id)) << 64) | u128::from(self.low.hash_one(id))
    }

    /// Whether it holds `id`.
    pub(crate) fn contains(&self, id: &CallId) -> bool {
        self.prints.contains(&self.print(id))
    }

    /// Adds `id` (nothing changes if it holds it already).
    pub(crate) fn insert(&mut self, id: &CallId) {
        let print = self.print(id);
        self.prints.insert(print);
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
            set.insert(&id(i));
        }
        set.insert(&id(7));
        assert_eq!(set.prints.len(), 10_000, "a repeated id is held once");
        assert!((0..10_000).all(|i| set.contains(&id(i))));
        assert!(!set.contains(&id(10_000)));
    }
}
