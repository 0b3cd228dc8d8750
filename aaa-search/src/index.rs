//! The [`Index`] trait every index implements.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::document::Hit;
use crate::error::SearchError;

/// The future [`Index::search`] returns.
pub type SearchFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Vec<Hit>, SearchError>> + Send + 'a>>;

/// Something that answers a text query with its best matching documents.
///
/// The method returns a boxed future rather than being an `async fn` so that the trait
/// stays dyn-compatible: a [`HybridIndex`](crate::HybridIndex) holds `Arc<dyn Index>`
/// values of different types, and a tool can hold any index behind one pointer. The box
/// costs one allocation per query, which is nothing next to the search itself.
///
/// Contract, which every index in this crate keeps and tests:
/// - at most `k` hits, best first, no id twice;
/// - `k == 0` gives no hits;
/// - a query that is empty or only whitespace is [`SearchError::EmptyQuery`];
/// - an index with no documents gives no hits, not an error;
/// - no query text (any script, any size, any punctuation) makes it panic or fail to
///   parse.
///
/// Adding documents is not part of the trait: each index takes documents in its own way
/// ([`KeywordIndex::add`](crate::KeywordIndex::add) is synchronous,
/// [`VectorIndex::add`](crate::VectorIndex::add) awaits an embedder).
///
/// Implementing it for your own store:
///
/// ```
/// use aaa_search::{Document, Hit, Index, SearchError, SearchFuture};
///
/// /// Finds documents containing the query as a substring.
/// struct Grep(Vec<Document>);
///
/// impl Index for Grep {
///     fn search<'a>(&'a self, query: &'a str, k: usize) -> SearchFuture<'a> {
///         Box::pin(async move {
///             let query = query.trim();
///             if query.is_empty() {
///                 return Err(SearchError::EmptyQuery);
///             }
///             Ok(self
///                 .0
///                 .iter()
///                 .filter(|d| d.text.contains(query))
///                 .take(k)
///                 .map(|d| Hit::from_document(d.clone(), 1.0))
///                 .collect())
///         })
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let index = Grep(vec![Document::new("1", "hello world")]);
/// let hits = index.search("world", 5).await.unwrap();
/// assert_eq!(hits[0].id, "1");
/// // Works through a pointer too.
/// let shared: std::sync::Arc<dyn Index> = std::sync::Arc::new(index);
/// assert_eq!(shared.search("hello", 5).await.unwrap().len(), 1);
/// # }
/// ```
pub trait Index: Send + Sync {
    /// The `k` best hits for `query`, best first.
    fn search<'a>(&'a self, query: &'a str, k: usize) -> SearchFuture<'a>;
}

impl<I: Index + ?Sized> Index for Arc<I> {
    fn search<'a>(&'a self, query: &'a str, k: usize) -> SearchFuture<'a> {
        (**self).search(query, k)
    }
}

impl<I: Index + ?Sized> Index for Box<I> {
    fn search<'a>(&'a self, query: &'a str, k: usize) -> SearchFuture<'a> {
        (**self).search(query, k)
    }
}

impl<I: Index + ?Sized> Index for &I {
    fn search<'a>(&'a self, query: &'a str, k: usize) -> SearchFuture<'a> {
        (**self).search(query, k)
    }
}

/// Rejects an empty query; the same check for every index.
pub(crate) fn check_query(query: &str) -> Result<(), SearchError> {
    if query.trim().is_empty() {
        Err(SearchError::EmptyQuery)
    } else {
        Ok(())
    }
}
