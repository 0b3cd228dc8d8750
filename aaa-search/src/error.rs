//! [`SearchError`]: everything that can go wrong while indexing or searching.

use std::error::Error as StdError;

use aaa_tools::ToolError;

/// A failure of an index, an embedder or the search tool.
///
/// Only [`SearchError::EmptyQuery`] is the model's doing; [`SearchError::into_tool_error`]
/// turns it into a message the model can act on and every other variant into an
/// internal error whose text goes to the logs, not to the model.
///
/// ```
/// use aaa_search::SearchError;
///
/// let err = SearchError::EmptyQuery;
/// assert!(err.is_query_error());
/// assert!(err.into_tool_error().message().contains("empty"));
///
/// let err = SearchError::DimensionMismatch { expected: 384, got: 768 };
/// assert_eq!(err.to_string(), "vector dimension mismatch: expected 384, got 768");
/// assert!(!err.is_query_error());
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SearchError {
    /// The query was empty or only whitespace.
    #[error("the query is empty: write a few words that describe what to look for")]
    EmptyQuery,
    /// A vector (from an embedder or given directly) does not have the index's dimension.
    #[error("vector dimension mismatch: expected {expected}, got {got}")]
    DimensionMismatch {
        /// The dimension the index holds.
        expected: usize,
        /// The dimension that arrived.
        got: usize,
    },
    /// A vector holds a NaN or an infinity.
    #[error("the vector for {id:?} holds a value that is not finite")]
    NonFiniteVector {
        /// The document (or `"(query)"`) the vector belongs to.
        id: String,
    },
    /// An embedder returned a different number of vectors than texts it was given.
    #[error("the embedder returned {got} vectors for {expected} texts")]
    EmbeddingCount {
        /// How many texts were sent.
        expected: usize,
        /// How many vectors came back.
        got: usize,
    },
    /// The embedder itself failed (a network call, a model, ...).
    #[error("the embedder failed: {0}")]
    Embedder(#[source] Box<dyn StdError + Send + Sync>),
    /// A setting outside its bounds, or an index opened with settings it was not built with.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// The keyword engine (tantivy) failed.
    #[error("keyword index error: {0}")]
    Tantivy(#[from] tantivy::TantivyError),
    /// Reading or writing files failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// Stored data could not be read back (for instance metadata that is not valid JSON).
    #[error("corrupt index data: {0}")]
    Corrupt(String),
}

impl SearchError {
    /// An [`SearchError::Embedder`] from any error.
    ///
    /// ```
    /// let err = aaa_search::SearchError::embedder(std::io::Error::other("model not loaded"));
    /// assert_eq!(err.to_string(), "the embedder failed: model not loaded");
    /// ```
    pub fn embedder(error: impl Into<Box<dyn StdError + Send + Sync>>) -> Self {
        SearchError::Embedder(error.into())
    }

    /// Whether the error is about the query itself (so the model can fix it), rather than
    /// about the index.
    pub fn is_query_error(&self) -> bool {
        matches!(self, SearchError::EmptyQuery)
    }

    /// The error as the search tool reports it: query errors are shown to the model word
    /// for word; anything else is an internal error (the model sees a generic message,
    /// the detail goes to the logs).
    pub fn into_tool_error(self) -> ToolError {
        if self.is_query_error() {
            ToolError::new(self.to_string())
        } else {
            ToolError::from(self)
        }
    }
}
