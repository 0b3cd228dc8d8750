//! [`VectorIndex`]: cosine similarity over embeddings.
//!
//! - this module: the index, its rows and exact search;
//! - `embedder`: [`Embedder`], what turns texts into vectors;
//! - `ann`: the HNSW graph for approximate search (with the `hnsw` feature).

#[cfg(feature = "hnsw")]
mod ann;
mod embedder;

use std::collections::HashMap;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::document::{Document, Hit};
use crate::error::SearchError;
use crate::index::{Index, SearchFuture, check_query};
use crate::topk::TopK;

pub use embedder::{EmbedFuture, Embedder, QueryEmbedFuture};

/// The dot product, written so the compiler vectorizes it: eight independent lanes
/// over contiguous `f32`s, then the tail.
#[inline]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 8;
    let mut acc = [0f32; LANES];
    let a_chunks = a.chunks_exact(LANES);
    let b_chunks = b.chunks_exact(LANES);
    let tail: f32 = a_chunks
        .remainder()
        .iter()
        .zip(b_chunks.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in a_chunks.zip(b_chunks) {
        for lane in 0..LANES {
            acc[lane] += x[lane] * y[lane];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// Scales `v` to unit length (a zero vector stays zero). Fails on NaN or infinity.
pub(crate) fn normalize(v: &mut [f32], id: &str) -> Result<(), SearchError> {
    if v.iter().any(|x| !x.is_finite()) {
        return Err(SearchError::NonFiniteVector { id: id.to_owned() });
    }
    let norm = v
        .iter()
        .map(|x| f64::from(*x) * f64::from(*x))
        .sum::<f64>()
        .sqrt();
    if norm > 0.0 {
        let inv = (1.0 / norm) as f32;
        v.iter_mut().for_each(|x| *x *= inv);
    }
    Ok(())
}

/// Settings of the approximate (HNSW) search; see [`VectorIndex::with_hnsw`].
///
/// ```
/// # #[cfg(feature = "hnsw")] {
/// use aaa_search::HnswParams;
///
/// let params = HnswParams { ef_search: 128, ..HnswParams::default() };
/// assert_eq!(params.max_connections, 16);
/// # }
/// ```
#[cfg(feature = "hnsw")]
#[cfg_attr(docsrs, doc(cfg(feature = "hnsw")))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HnswParams {
    /// Links kept per node and layer (HNSW's `M`), 2 to 256. Default 16.
    pub max_connections: usize,
    /// Candidates explored while inserting. Default 200.
    pub ef_construction: usize,
    /// Candidates explored while searching (at least `k` is used). Higher is slower
    /// and more exact. Default 64.
    pub ef_search: usize,
    /// Maximum number of layers, at most 16. Default 16.
    pub max_layers: usize,
    /// Up to this many documents, searches scan exactly instead (exact, and as fast
    /// at that size). Default 2048.
    pub exact_below: usize,
}

#[cfg(feature = "hnsw")]
impl Default for HnswParams {
    fn default() -> Self {
        HnswParams {
            max_connections: 16,
            ef_construction: 200,
            ef_search: 64,
            max_layers: 16,
            exact_below: 2048,
        }
    }
}

#[cfg(feature = "hnsw")]
impl HnswParams {
    fn check(&self) -> Result<(), SearchError> {
        if !(2..=256).contains(&self.max_connections) {
            return Err(SearchError::InvalidConfig(format!(
                "HNSW max_connections must lie in 2..=256 (got {})",
                self.max_connections
            )));
        }
        if self.ef_construction == 0 || self.ef_search == 0 || self.max_layers == 0 {
            return Err(SearchError::InvalidConfig(
                "HNSW ef_construction, ef_search and max_layers must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// The stored vectors and documents.
#[derive(Debug, Default)]
struct Store {
    /// Row-major, `rows * dim` unit vectors.
    vectors: Vec<f32>,
    /// The document of each row.
    docs: Vec<Document>,
    /// Row of each id.
    rows: HashMap<String, usize>,
    /// The graph, when approximate search is on.
    #[cfg(feature = "hnsw")]
    ann: Option<ann::Ann>,
}

impl Store {
    #[cfg(any(feature = "hnsw", test))]
    fn row(&self, row: usize, dim: usize) -> &[f32] {
        &self.vectors[row * dim..(row + 1) * dim]
    }

    fn upsert(&mut self, document: Document, vector: &[f32], dim: usize) {
        let row = match self.rows.get(&document.id) {
            Some(&row) => {
                self.vectors[row * dim..(row + 1) * dim].copy_from_slice(vector);
                self.docs[row] = document;
                row
            }
            None => {
                let row = self.docs.len();
                self.rows.insert(document.id.clone(), row);
                self.vectors.extend_from_slice(vector);
                self.docs.push(document);
                row
            }
        };
        #[cfg(feature = "hnsw")]
        if let Some(ann) = &mut self.ann {
            ann.set_row(row, vector);
        }
        #[cfg(not(feature = "hnsw"))]
        let _ = row;
    }

    fn remove(&mut self, id: &str, dim: usize) -> bool {
        let Some(row) = self.rows.remove(id) else {
            return false;
        };
        let last = self.docs.len() - 1;
        self.docs.swap_remove(row);
        if row != last {
            self.vectors
                .copy_within(last * dim..(last + 1) * dim, row * dim);
            self.rows.insert(self.docs[row].id.clone(), row);
        }
        self.vectors.truncate(last * dim);
        #[cfg(feature = "hnsw")]
        if let Some(ann) = &mut self.ann {
            ann.remove_row(row, last);
            if ann.needs_rebuild() {
                let rows: Vec<&[f32]> = self.vectors.chunks_exact(dim.max(1)).collect();
                ann.rebuild(&rows);
            }
        }
        true
    }
}

/// A vector index: documents embedded by an [`Embedder`], searched by cosine
/// similarity.
///
/// Vectors are normalized when added, so cosine similarity is a dot product, and kept
/// in one contiguous `Vec<f32>`: an exact search is a linear scan whose inner loop the
/// compiler turns into SIMD, with a heap keeping the `k` best: about 7 ms for 50,000
/// vectors of dimension 1024 on one core, bound by reading the 200 MB of vectors.
/// That is exact and fast enough up to a few hundred thousand vectors; beyond, enable
/// the `hnsw` feature and `with_hnsw` for an approximate graph search.
///
/// Every vector must have the embedder's dimension: a mismatch is
/// [`SearchError::DimensionMismatch`], never a truncation. Scores are cosine
/// similarities in `[-1, 1]`. Adding a document whose id is present replaces it.
///
/// ```
/// use aaa_search::{Document, HashingEmbedder, Index, VectorIndex};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), aaa_search::SearchError> {
/// let index = VectorIndex::new(HashingEmbedder::default());
/// index.add([
///     Document::new("1", "Configuring the garbage collector"),
///     Document::new("2", "A recipe for lemon cake"),
/// ]).await?;
/// let hits = index.search("garbage collection settings", 1).await?;
/// assert_eq!(hits[0].id, "1");
///
/// // Precomputed vectors must fit the dimension.
/// let err = index.add_embedded([(Document::new("3", "x"), vec![1.0, 2.0])]).unwrap_err();
/// assert!(matches!(err, aaa_search::SearchError::DimensionMismatch { got: 2, .. }));
/// # Ok(()) }
/// ```
pub struct VectorIndex<E> {
    embedder: E,
    dim: usize,
    batch_size: usize,
    store: RwLock<Store>,
}

impl<E> std::fmt::Debug for VectorIndex<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let store = self.store.read().unwrap_or_else(|e| e.into_inner());
        let mut s = f.debug_struct("VectorIndex");
        s.field("dimension", &self.dim)
            .field("documents", &store.docs.len());
        #[cfg(feature = "hnsw")]
        s.field("approximate", &store.ann.is_some());
        s.finish_non_exhaustive()
    }
}

/// The default number of texts sent to the embedder in one call.
pub const DEFAULT_BATCH_SIZE: usize = 64;

impl<E: Embedder> VectorIndex<E> {
    /// An empty exact index over `embedder`'s vectors.
    pub fn new(embedder: E) -> Self {
        let dim = embedder.dimension();
        VectorIndex {
            embedder,
            dim,
            batch_size: DEFAULT_BATCH_SIZE,
            store: RwLock::new(Store::default()),
        }
    }

    /// Sets how many texts go to the embedder per call (at least 1; default
    /// [`DEFAULT_BATCH_SIZE`]).
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size.max(1);
        self
    }

    /// Switches to approximate search with an HNSW graph (Malkov & Yashunin), built by
    /// the `hnsw_rs` crate. Vectors already added are inserted in the graph.
    ///
    /// Hits are still scored exactly (the graph only chooses the candidates), but a
    /// true neighbour can be missed: recall is typically above 0.95 with the default
    /// parameters. Small indexes (see [`HnswParams::exact_below`]) and searches for a
    /// large share of the documents (`k` above a tenth) scan exactly instead. The graph keeps its own copy of each vector, so memory doubles.
    /// Replaced or deleted documents are masked in the graph, which is rebuilt once
    /// masked nodes outnumber live ones.
    ///
    /// ```
    /// use aaa_search::{Document, HashingEmbedder, HnswParams, VectorIndex};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), aaa_search::SearchError> {
    /// let index = VectorIndex::new(HashingEmbedder::default()).with_hnsw(HnswParams::default())?;
    /// index.add([Document::new("1", "approximate nearest neighbours")]).await?;
    /// assert!(index.is_approximate());
    /// assert_eq!(index.search_sync(&index.embedder().embed_text("nearest neighbours"), 1)?[0].id, "1");
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "hnsw")]
    #[cfg_attr(docsrs, doc(cfg(feature = "hnsw")))]
    pub fn with_hnsw(self, params: HnswParams) -> Result<Self, SearchError> {
        params.check()?;
        if self.dim == 0 {
            return Err(SearchError::InvalidConfig(
                "an HNSW graph needs vectors of dimension at least 1".into(),
            ));
        }
        {
            let mut store = self.write();
            let mut graph = ann::Ann::new(params);
            let rows: Vec<&[f32]> = (0..store.docs.len())
                .map(|r| store.row(r, self.dim))
                .collect();
            graph.rebuild(&rows);
            store.ann = Some(graph);
        }
        Ok(self)
    }

    /// Whether searches use the approximate graph.
    pub fn is_approximate(&self) -> bool {
        #[cfg(feature = "hnsw")]
        {
            self.read().ann.is_some()
        }
        #[cfg(not(feature = "hnsw"))]
        {
            false
        }
    }

    /// The embedder.
    pub fn embedder(&self) -> &E {
        &self.embedder
    }

    /// The dimension of every vector.
    pub fn dimension(&self) -> usize {
        self.dim
    }

    /// The number of documents.
    pub fn len(&self) -> usize {
        self.read().docs.len()
    }

    /// Whether the index holds no document.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn read(&self) -> RwLockReadGuard<'_, Store> {
        // The store is only changed by complete, non-panicking steps; a poisoned lock
        // still guards consistent data.
        self.store.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Store> {
        self.store.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Embeds the documents (title and text) in batches and adds them; returns how
    /// many were added. All or nothing: if the embedder fails or returns a vector of
    /// the wrong dimension, nothing is added.
    pub async fn add<I>(&self, documents: I) -> Result<usize, SearchError>
    where
        I: IntoIterator<Item = Document>,
    {
        let documents: Vec<Document> = documents.into_iter().collect();
        let texts: Vec<String> = documents.iter().map(Document::searchable_text).collect();
        let mut vectors = Vec::with_capacity(documents.len());
        for batch in texts.chunks(self.batch_size) {
            let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
            let embedded = self.embedder.embed(&refs).await?;
            if embedded.len() != batch.len() {
                return Err(SearchError::EmbeddingCount {
                    expected: batch.len(),
                    got: embedded.len(),
                });
            }
            vectors.extend(embedded);
        }
        self.add_embedded(documents.into_iter().zip(vectors))
    }

    /// Adds documents with vectors computed elsewhere; returns how many were added.
    /// All or nothing: every vector is checked (dimension, finite values) before any
    /// is added.
    pub fn add_embedded<I>(&self, items: I) -> Result<usize, SearchError>
    where
        I: IntoIterator<Item = (Document, Vec<f32>)>,
    {
        let mut items: Vec<(Document, Vec<f32>)> = items.into_iter().collect();
        for (document, vector) in &mut items {
            if vector.len() != self.dim {
                return Err(SearchError::DimensionMismatch {
                    expected: self.dim,
                    got: vector.len(),
                });
            }
            normalize(vector, &document.id)?;
        }
        let added = items.len();
        let mut store = self.write();
        store.vectors.reserve(added * self.dim);
        for (document, vector) in items {
            store.upsert(document, &vector, self.dim);
        }
        Ok(added)
    }

    /// Deletes the document with id `id`; returns whether there was one.
    pub fn delete(&self, id: &str) -> bool {
        self.write().remove(id, self.dim)
    }

    /// The `k` documents most similar to `vector` (which need not be normalized).
    pub fn search_sync(&self, vector: &[f32], k: usize) -> Result<Vec<Hit>, SearchError> {
        if vector.len() != self.dim {
            return Err(SearchError::DimensionMismatch {
                expected: self.dim,
                got: vector.len(),
            });
        }
        let mut query = vector.to_vec();
        normalize(&mut query, "(query)")?;
        if k == 0 || query.iter().all(|x| *x == 0.0) {
            return Ok(Vec::new());
        }
        let store = self.read();
        let ranked = self.rank(&store, &query, k);
        Ok(ranked
            .into_iter()
            .map(|(score, row)| Hit::from_document(store.docs[row].clone(), score))
            .collect())
    }

    fn rank(&self, store: &Store, query: &[f32], k: usize) -> Vec<(f32, usize)> {
        #[cfg(feature = "hnsw")]
        if let Some(ann) = &store.ann
            && ann.worth_it(k, store.docs.len())
        {
            let mut top = TopK::new(k);
            for row in ann.candidates(query, k) {
                top.push(dot(query, store.row(row, self.dim)), row);
            }
            return top.into_sorted();
        }
        exact_top_k(&store.vectors, self.dim, query, k)
    }
}

/// The `k` rows of `vectors` (row-major, `dim` wide) with the highest dot product with
/// `query`.
pub(crate) fn exact_top_k(
    vectors: &[f32],
    dim: usize,
    query: &[f32],
    k: usize,
) -> Vec<(f32, usize)> {
    let mut top = TopK::new(k);
    if dim == 0 {
        return Vec::new();
    }
    for (row, vector) in vectors.chunks_exact(dim).enumerate() {
        let score = dot(query, vector);
        if top.threshold().is_none_or(|t| score >= t) {
            top.push(score, row);
        }
    }
    top.into_sorted()
}

impl<E: Embedder> Index for VectorIndex<E> {
    fn search<'a>(&'a self, query: &'a str, k: usize) -> SearchFuture<'a> {
        Box::pin(async move {
            check_query(query)?;
            if k == 0 {
                return Ok(Vec::new());
            }
            let vector = self.embedder.embed_query(query).await?;
            self.search_sync(&vector, k)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_matches_the_naive_sum_for_all_tail_lengths() {
        for len in 0..40 {
            let a: Vec<f32> = (0..len).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..len).map(|i| (i as f32 * 0.11).cos()).collect();
            let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert!((dot(&a, &b) - naive).abs() < 1e-4, "len {len}");
        }
    }

    #[test]
    fn normalize_scales_to_unit_length_and_rejects_nan() {
        let mut v = vec![3.0, 4.0];
        normalize(&mut v, "x").unwrap();
        assert_eq!(v, vec![0.6, 0.8]);
        let mut zero = vec![0.0; 3];
        normalize(&mut zero, "x").unwrap();
        assert_eq!(zero, vec![0.0; 3]);
        assert!(matches!(
            normalize(&mut [1.0, f32::NAN], "doc"),
            Err(SearchError::NonFiniteVector { id }) if id == "doc"
        ));
    }

    #[test]
    fn exact_top_k_ranks_by_dot_product() {
        let vectors = [1.0, 0.0, 0.0, 1.0, 0.6, 0.8, -1.0, 0.0];
        let top = exact_top_k(&vectors, 2, &[0.6, 0.8], 3);
        let rows: Vec<usize> = top.iter().map(|(_, r)| *r).collect();
        assert_eq!(rows, vec![2, 1, 0]);
        assert!((top[0].0 - 1.0).abs() < 1e-6);
    }

    #[test]
    fn store_remove_keeps_rows_consistent() {
        let mut store = Store::default();
        for (i, v) in [[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]].iter().enumerate() {
            store.upsert(Document::new(format!("d{i}"), ""), v, 2);
        }
        assert!(store.remove("d0", 2));
        assert!(!store.remove("d0", 2));
        assert_eq!(store.docs.len(), 2);
        // d2 moved into row 0; its vector moved with it.
        assert_eq!(store.rows["d2"], 0);
        assert_eq!(store.row(0, 2), &[0.6, 0.8]);
        assert_eq!(store.rows["d1"], 1);
        assert_eq!(store.vectors.len(), 4);
    }
}
