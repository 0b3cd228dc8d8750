//! [`History`]: how much of its past an embedded engine keeps, for the benches that
//! tell what an aged engine's history costs from what its calls cost (`dispatch`,
//! `per_call`).

use aaa_tools::MemoryStore;
use aaa_tools::bus::{MemoryBus, Retention};

/// What an embedded engine keeps of its past: the bus's messages and the store's
/// settled calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct History {
    /// The messages the bus's log keeps ([`Retention::max_messages`]).
    pub messages: usize,
    /// The settled calls whose records the store keeps
    /// ([`MemoryStore::retired_limit`]).
    pub settled_calls: usize,
}

impl History {
    /// What the library keeps unless told otherwise.
    pub fn defaults() -> History {
        History {
            messages: Retention::default().max_messages(),
            settled_calls: MemoryStore::new().retired_limit(),
        }
    }

    /// The defaults, except what is given: `messages` for the log, `settled_calls`
    /// for the store.
    pub fn bounded(messages: Option<usize>, settled_calls: Option<usize>) -> History {
        let defaults = History::defaults();
        History {
            messages: messages.unwrap_or(defaults.messages),
            settled_calls: settled_calls.unwrap_or(defaults.settled_calls),
        }
    }

    /// A bus that keeps `messages`.
    pub fn bus(&self) -> MemoryBus {
        MemoryBus::with_retention(Retention::default().with_max_messages(self.messages))
    }

    /// A store that keeps the records of `settled_calls`.
    pub fn store(&self) -> MemoryStore {
        MemoryStore::new().with_retired_limit(self.settled_calls)
    }
}
