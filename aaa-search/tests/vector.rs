//! `VectorIndex`: dimensions, embedder failures, batching, exactness, and HNSW.

use std::sync::Mutex;

use aaa_search::{Document, EmbedFuture, Embedder, Index, SearchError, VectorIndex};

/// Deterministic pseudo-random numbers (xorshift), so tests need no seed handling.
struct Rng(u64);

impl Rng {
    fn next_f32(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }

    fn vector(&mut self, dim: usize) -> Vec<f32> {
        (0..dim).map(|_| self.next_f32()).collect()
    }
}

/// Embeds by a fixed table; records the batch sizes it was called with.
struct Table {
    dim: usize,
    /// Vector returned for every text; its length may differ from `dim` on purpose.
    output_len: usize,
    /// Vectors returned per call, when not one per text.
    count: Option<usize>,
    fail: bool,
    batches: Mutex<Vec<usize>>,
}

impl Table {
    fn new(dim: usize) -> Self {
        Table {
            dim,
            output_len: dim,
            count: None,
            fail: false,
            batches: Mutex::new(Vec::new()),
        }
    }
}

impl Embedder for Table {
    fn dimension(&self) -> usize {
        self.dim
    }

    fn embed<'a>(&'a self, texts: &'a [&'a str]) -> EmbedFuture<'a> {
        Box::pin(async move {
            self.batches.lock().unwrap().push(texts.len());
            if self.fail {
                return Err(SearchError::embedder(std::io::Error::other(
                    "model offline",
                )));
            }
            let n = self.count.unwrap_or(texts.len());
            Ok((0..n)
                .map(|i| {
                    let mut v = vec![0.0; self.output_len];
                    if let Some(first) = v.first_mut() {
                        *first = 1.0 + i as f32;
                    }
                    v
                })
                .collect())
        })
    }
}

fn docs(n: usize) -> Vec<Document> {
    (0..n)
        .map(|i| Document::new(format!("d{i}"), format!("text {i}")))
        .collect()
}

#[tokio::test]
async fn an_embedder_of_the_wrong_dimension_adds_nothing() {
    let index = VectorIndex::new(Table {
        output_len: 3,
        ..Table::new(4)
    });
    let err = index.add(docs(2)).await.unwrap_err();
    assert!(
        matches!(
            err,
            SearchError::DimensionMismatch {
                expected: 4,
                got: 3
            }
        ),
        "{err}"
    );
    assert!(index.is_empty());
    // The query side is checked too.
    let err = index.search("text", 3).await.unwrap_err();
    assert!(
        matches!(err, SearchError::DimensionMismatch { .. }),
        "{err}"
    );
}

#[tokio::test]
async fn wrong_vector_counts_and_embedder_errors_are_reported() {
    let index = VectorIndex::new(Table {
        count: Some(1),
        ..Table::new(2)
    });
    let err = index.add(docs(3)).await.unwrap_err();
    assert!(
        matches!(
            err,
            SearchError::EmbeddingCount {
                expected: 3,
                got: 1
            }
        ),
        "{err}"
    );
    let index = VectorIndex::new(Table {
        fail: true,
        ..Table::new(2)
    });
    let err = index.add(docs(1)).await.unwrap_err();
    assert_eq!(err.to_string(), "the embedder failed: model offline");
    assert!(!err.is_query_error());
    assert_eq!(
        err.into_tool_error().message(),
        aaa_tools::ToolError::INTERNAL_MESSAGE
    );
}

#[tokio::test]
async fn documents_are_embedded_in_batches() {
    let index = VectorIndex::new(Table::new(2)).with_batch_size(4);
    index.add(docs(10)).await.unwrap();
    assert_eq!(*index.embedder().batches.lock().unwrap(), vec![4, 4, 2]);
    assert_eq!(index.len(), 10);
}

#[test]
fn precomputed_vectors_are_checked_before_anything_is_added() {
    let index = VectorIndex::new(Table::new(3));
    let err = index
        .add_embedded([
            (Document::new("ok", ""), vec![1.0, 0.0, 0.0]),
            (Document::new("bad", ""), vec![f32::INFINITY, 0.0, 0.0]),
        ])
        .unwrap_err();
    assert!(
        matches!(err, SearchError::NonFiniteVector { ref id } if id == "bad"),
        "{err}"
    );
    assert!(index.is_empty());
    assert!(matches!(
        index.search_sync(&[1.0, 0.0], 1),
        Err(SearchError::DimensionMismatch {
            expected: 3,
            got: 2
        })
    ));
    // A zero query vector matches nothing rather than everything.
    index
        .add_embedded([(Document::new("ok", ""), vec![1.0, 0.0, 0.0])])
        .unwrap();
    assert!(index.search_sync(&[0.0; 3], 5).unwrap().is_empty());
}

/// The exact top `k` by brute force.
fn brute_force(vectors: &[Vec<f32>], query: &[f32], k: usize) -> Vec<(usize, f32)> {
    let unit = |v: &[f32]| {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / n).collect::<Vec<f32>>()
    };
    let q = unit(query);
    let mut scored: Vec<(usize, f32)> = vectors
        .iter()
        .enumerate()
        .map(|(i, v)| (i, unit(v).iter().zip(&q).map(|(a, b)| a * b).sum()))
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1));
    scored.truncate(k);
    scored
}

#[test]
fn exact_search_equals_brute_force_cosine() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let dim = 37; // not a multiple of the 8 lanes
    let vectors: Vec<Vec<f32>> = (0..500).map(|_| rng.vector(dim)).collect();
    let index = VectorIndex::new(Table::new(dim));
    index
        .add_embedded(
            vectors
                .iter()
                .enumerate()
                .map(|(i, v)| (Document::new(format!("{i}"), ""), v.clone())),
        )
        .unwrap();
    for _ in 0..20 {
        let query = rng.vector(dim);
        let hits = index.search_sync(&query, 10).unwrap();
        let expected = brute_force(&vectors, &query, 10);
        let got: Vec<String> = hits.iter().map(|h| h.id.clone()).collect();
        let want: Vec<String> = expected.iter().map(|(i, _)| i.to_string()).collect();
        assert_eq!(got, want);
        for (hit, (_, score)) in hits.iter().zip(&expected) {
            assert!((hit.score - score).abs() < 1e-5);
        }
    }
}

#[test]
fn deleting_moves_no_vector_to_the_wrong_document() {
    let mut rng = Rng(42);
    let dim = 16;
    let vectors: Vec<Vec<f32>> = (0..50).map(|_| rng.vector(dim)).collect();
    let index = VectorIndex::new(Table::new(dim));
    index
        .add_embedded(
            vectors
                .iter()
                .enumerate()
                .map(|(i, v)| (Document::new(format!("{i}"), ""), v.clone())),
        )
        .unwrap();
    for i in (0..50).step_by(3) {
        assert!(index.delete(&i.to_string()));
    }
    assert!(!index.delete("0"));
    // Each remaining document is still its own nearest neighbour, with cosine 1.
    for (i, v) in vectors.iter().enumerate().filter(|(i, _)| i % 3 != 0) {
        let hits = index.search_sync(v, 1).unwrap();
        assert_eq!(hits[0].id, i.to_string());
        assert!((hits[0].score - 1.0).abs() < 1e-5);
    }
}

#[cfg(feature = "hnsw")]
mod hnsw {
    use super::*;
    use aaa_search::HnswParams;

    /// Clustered data, where approximate search is realistic.
    fn clustered(rng: &mut Rng, n: usize, dim: usize) -> Vec<Vec<f32>> {
        let centers: Vec<Vec<f32>> = (0..20).map(|_| rng.vector(dim)).collect();
        (0..n)
            .map(|i| {
                centers[i % centers.len()]
                    .iter()
                    .map(|c| c + 0.3 * rng.next_f32())
                    .collect()
            })
            .collect()
    }

    fn recall(
        exact: &VectorIndex<Table>,
        approx: &VectorIndex<Table>,
        queries: &[Vec<f32>],
    ) -> f64 {
        let mut found = 0usize;
        let mut total = 0usize;
        for q in queries {
            let want: Vec<String> = exact
                .search_sync(q, 10)
                .unwrap()
                .into_iter()
                .map(|h| h.id)
                .collect();
            let got: Vec<String> = approx
                .search_sync(q, 10)
                .unwrap()
                .into_iter()
                .map(|h| h.id)
                .collect();
            found += want.iter().filter(|id| got.contains(id)).count();
            total += want.len();
        }
        found as f64 / total as f64
    }

    #[test]
    fn hnsw_recall_against_exact_search() {
        let mut rng = Rng(7);
        let dim = 32;
        let vectors = clustered(&mut rng, 3000, dim);
        let items = || {
            vectors
                .iter()
                .enumerate()
                .map(|(i, v)| (Document::new(format!("{i}"), ""), v.clone()))
        };
        let exact = VectorIndex::new(Table::new(dim));
        exact.add_embedded(items()).unwrap();
        // Always through the graph, even once deletes leave few documents.
        let graph_only = HnswParams {
            exact_below: 0,
            ..HnswParams::default()
        };
        let approx = VectorIndex::new(Table::new(dim))
            .with_hnsw(graph_only)
            .unwrap();
        approx.add_embedded(items()).unwrap();
        assert!(approx.is_approximate() && !exact.is_approximate());
        let queries: Vec<Vec<f32>> = (0..50).map(|_| rng.vector(dim)).collect();
        let r = recall(&exact, &approx, &queries);
        assert!(r >= 0.9, "recall@10 {r}");

        // Deleting and replacing keep the graph in step with the store.
        for i in 0..2000 {
            exact.delete(&i.to_string());
            approx.delete(&i.to_string());
        }
        let replaced: Vec<(Document, Vec<f32>)> = (2000..2100)
            .map(|i| (Document::new(i.to_string(), "new"), rng.vector(dim)))
            .collect();
        exact.add_embedded(replaced.clone()).unwrap();
        approx.add_embedded(replaced.clone()).unwrap();
        assert_eq!(approx.len(), 1000);
        let r = recall(&exact, &approx, &queries);
        assert!(r >= 0.9, "recall@10 after deletes {r}");
        for (doc, v) in &replaced {
            let hit = &approx.search_sync(v, 1).unwrap()[0];
            assert_eq!((&hit.id, hit.text.as_str()), (&doc.id, "new"));
        }
        for q in &queries {
            assert!(
                approx
                    .search_sync(q, 10)
                    .unwrap()
                    .iter()
                    .all(|h| h.id.parse::<usize>().unwrap() >= 2000)
            );
        }
    }

    #[test]
    fn identical_vectors_do_not_trip_the_distance() {
        // Dot products of a unit vector with itself can round above 1.
        let graph_only = HnswParams {
            exact_below: 0,
            ..HnswParams::default()
        };
        let index = VectorIndex::new(Table::new(3))
            .with_hnsw(graph_only)
            .unwrap();
        let v = vec![0.1, 0.7, 0.3];
        index
            .add_embedded((0..100).map(|i| (Document::new(i.to_string(), ""), v.clone())))
            .unwrap();
        assert_eq!(index.search_sync(&v, 5).unwrap().len(), 5);
        // A `k` beyond the corpus (a hybrid asks for `usize::MAX` when told to) scans
        // exactly, and so finds every document.
        assert_eq!(index.search_sync(&v, usize::MAX).unwrap().len(), 100);
    }

    #[test]
    fn bad_parameters_are_refused() {
        let bad = HnswParams {
            max_connections: 1000,
            ..HnswParams::default()
        };
        assert!(VectorIndex::new(Table::new(3)).with_hnsw(bad).is_err());
        assert!(
            VectorIndex::new(Table::new(0))
                .with_hnsw(HnswParams::default())
                .is_err()
        );
    }
}
