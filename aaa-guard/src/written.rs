//! What a [`GuardStore`](crate::GuardStore) hands back: revisions, entries and errors
//! (shared by the store and its [`OutcomeLog`](crate::OutcomeLog)).

/// A record's revision: changes on every write.
pub type Revision = u64;

/// A failed store operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// `create` found the key already present.
    #[error("record {key} already exists")]
    Exists {
        /// The key.
        key: String,
    },
    /// `update` found a different revision: someone else wrote first.
    #[error("record {key} changed (expected revision {expected}, found {found:?})")]
    Conflict {
        /// The key.
        key: String,
        /// The revision the caller read.
        expected: Revision,
        /// The revision found, `None` when the record is gone.
        found: Option<Revision>,
    },
    /// The store could not be reached or did not answer in time; the write may or may
    /// not have happened.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// A key the store cannot hold.
    #[error("invalid key {0:?}")]
    InvalidKey(String),
}

/// A record and its revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The value's bytes.
    pub value: Vec<u8>,
    /// The revision of this value.
    pub revision: Revision,
}
