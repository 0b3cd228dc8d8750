//! [`Embedder`]: what turns texts into the vectors a [`VectorIndex`](crate::VectorIndex)
//! compares.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::error::SearchError;

/// The future [`Embedder::embed`] returns.
pub type EmbedFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Vec<Vec<f32>>, SearchError>> + Send + 'a>>;

/// The future [`Embedder::embed_query`] returns.
pub type QueryEmbedFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Vec<f32>, SearchError>> + Send + 'a>>;

/// Turns texts into vectors of a fixed dimension.
///
/// Batch-first and async, because real embedders are a model server or an HTTP API
/// where one call for many texts is what is fast. Like [`Index`](crate::Index), it returns boxed
/// futures so that `Arc<dyn Embedder>` works.
///
/// [`HashingEmbedder`](crate::HashingEmbedder) is the offline one shipped here; a
/// neural embedder plugs in by implementing this trait:
///
/// ```
/// use aaa_search::{EmbedFuture, Embedder, SearchError};
///
/// /// Calls some embedding service (here: the text's length, for the example).
/// struct MyService;
///
/// impl Embedder for MyService {
///     fn dimension(&self) -> usize {
///         2
///     }
///
///     fn embed<'a>(&'a self, texts: &'a [&'a str]) -> EmbedFuture<'a> {
///         Box::pin(async move {
///             // e.g. `client.post(url).json(texts).send().await.map_err(SearchError::embedder)?`
///             Ok(texts.iter().map(|t| vec![t.len() as f32, 1.0]).collect())
///         })
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let vectors = MyService.embed(&["ab", "abc"]).await.unwrap();
/// assert_eq!(vectors, vec![vec![2.0, 1.0], vec![3.0, 1.0]]);
/// assert_eq!(MyService.embed_query("abcd").await.unwrap(), vec![4.0, 1.0]);
/// # }
/// ```
pub trait Embedder: Send + Sync {
    /// The length of every vector it returns.
    fn dimension(&self) -> usize;

    /// One vector per text, in order.
    fn embed<'a>(&'a self, texts: &'a [&'a str]) -> EmbedFuture<'a>;

    /// The vector of a query. The default embeds it like a document; override it for
    /// models that embed queries differently (an instruction or a `query:` prefix).
    fn embed_query<'a>(&'a self, query: &'a str) -> QueryEmbedFuture<'a> {
        Box::pin(async move {
            let texts = [query];
            let vectors = self.embed(&texts).await?;
            let got = vectors.len();
            match <[Vec<f32>; 1]>::try_from(vectors) {
                Ok([vector]) => Ok(vector),
                Err(_) => Err(SearchError::EmbeddingCount { expected: 1, got }),
            }
        })
    }
}

impl<E: Embedder + ?Sized> Embedder for Arc<E> {
    fn dimension(&self) -> usize {
        (**self).dimension()
    }
    fn embed<'a>(&'a self, texts: &'a [&'a str]) -> EmbedFuture<'a> {
        (**self).embed(texts)
    }
    fn embed_query<'a>(&'a self, query: &'a str) -> QueryEmbedFuture<'a> {
        (**self).embed_query(query)
    }
}

impl<E: Embedder + ?Sized> Embedder for Box<E> {
    fn dimension(&self) -> usize {
        (**self).dimension()
    }
    fn embed<'a>(&'a self, texts: &'a [&'a str]) -> EmbedFuture<'a> {
        (**self).embed(texts)
    }
    fn embed_query<'a>(&'a self, query: &'a str) -> QueryEmbedFuture<'a> {
        (**self).embed_query(query)
    }
}
