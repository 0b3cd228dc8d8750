//! What a [`GuardStore`](crate::GuardStore) hands back: revisions, entries, errors and
//! the future of every operation (shared by the store and its
//! [`FencedLog`](crate::FencedLog)).

/// A record's revision: changes on every write.
pub type Revision = u64;

/// The future of a store operation: its answer when the store has it at once, else a
/// boxed future (see [`OpFuture`](crate::OpFuture)).
pub type StoreFuture<'a, T> = crate::OpFuture<'a, Result<T, StoreError>>;

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
