//! [`HybridIndex`]: several indexes, one ranking.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::join_all;

use crate::document::Hit;
use crate::error::SearchError;
use crate::index::{Index, SearchFuture, check_query};
use crate::topk::TopK;

/// How a [`HybridIndex`] merges the rankings of its indexes.
///
/// ```
/// use aaa_search::Fusion;
///
/// assert_eq!(Fusion::default(), Fusion::ReciprocalRank { k: 60.0 });
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fusion {
    /// Reciprocal rank fusion (Cormack, Clarke & Büttcher, 2009): a document scores
    /// `sum(weight / (k + rank))` over the rankings it appears in (ranks from 1).
    /// Uses ranks only, so it needs no score calibration between a BM25 index and a
    /// cosine one; `k = 60` is the paper's value and the default.
    ReciprocalRank {
        /// The rank offset; larger flattens the difference between top and lower ranks.
        k: f32,
    },
    /// A convex combination of normalized scores: each ranking's scores are min-max
    /// scaled to `[0, 1]` (a document missing from a ranking gets 0 there), and a
    /// document scores `sum(weight * scaled)` with the weights scaled to sum to 1.
    /// Uses how far apart the scores are, not just their order, which helps when one
    /// index is much stronger than another.
    Weighted,
}

impl Default for Fusion {
    fn default() -> Self {
        Fusion::ReciprocalRank { k: 60.0 }
    }
}

/// The default number of candidates a [`HybridIndex`] asks each index for.
pub const DEFAULT_CANDIDATES: usize = 50;

/// Settings for a [`HybridIndex`].
#[derive(Default)]
pub struct HybridIndexBuilder {
    members: Vec<(Arc<dyn Index>, f32)>,
    fusion: Fusion,
    candidates: Option<usize>,
}

impl std::fmt::Debug for HybridIndexBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HybridIndexBuilder")
            .field(
                "weights",
                &self.members.iter().map(|m| m.1).collect::<Vec<_>>(),
            )
            .field("fusion", &self.fusion)
            .field("candidates", &self.candidates)
            .finish()
    }
}

impl HybridIndexBuilder {
    /// Adds an index with a weight (finite, `>= 0`; 1.0 when all count the same). Any
    /// [`Index`] works, an `Arc<dyn Index>` included.
    pub fn index(mut self, index: impl Index + 'static, weight: f32) -> Self {
        self.members.push((Arc::new(index), weight));
        self
    }

    /// Adds a shared index with a weight, keeping it usable elsewhere.
    pub fn shared(mut self, index: Arc<dyn Index>, weight: f32) -> Self {
        self.members.push((index, weight));
        self
    }

    /// Sets the fusion (default reciprocal rank fusion with `k = 60`).
    pub fn fusion(mut self, fusion: Fusion) -> Self {
        self.fusion = fusion;
        self
    }

    /// Sets how many candidates each index is asked for (at least `k` of the query is
    /// always asked; default [`DEFAULT_CANDIDATES`]). Deeper lists let a document that
    /// is middling in every index surface, at the cost of longer searches.
    pub fn candidates(mut self, candidates: usize) -> Self {
        self.candidates = Some(candidates);
        self
    }

    /// The index. Fails without indexes, with a weight that is negative or not finite,
    /// with weights summing to 0, or with an RRF `k` that is negative or not finite.
    pub fn build(self) -> Result<HybridIndex, SearchError> {
        if self.members.is_empty() {
            return Err(SearchError::InvalidConfig(
                "a hybrid index needs at least one index".into(),
            ));
        }
        if let Some(w) = self
            .members
            .iter()
            .map(|m| m.1)
            .find(|w| !(w.is_finite() && *w >= 0.0))
        {
            return Err(SearchError::InvalidConfig(format!(
                "index weights must be finite and >= 0 (got {w})"
            )));
        }
        let total: f32 = self.members.iter().map(|m| m.1).sum();
        if total <= 0.0 {
            return Err(SearchError::InvalidConfig(
                "at least one index weight must be above 0".into(),
            ));
        }
        if let Fusion::ReciprocalRank { k } = self.fusion
            && !(k.is_finite() && k >= 0.0)
        {
            return Err(SearchError::InvalidConfig(format!(
                "the RRF k must be finite and >= 0 (got {k})"
            )));
        }
        let mut members = self.members;
        if self.fusion == Fusion::Weighted {
            members.iter_mut().for_each(|m| m.1 /= total);
        }
        Ok(HybridIndex {
            members,
            fusion: self.fusion,
            candidates: self.candidates.unwrap_or(DEFAULT_CANDIDATES),
        })
    }
}

/// Several indexes searched together, their rankings merged by a [`Fusion`].
///
/// The indexes are searched concurrently (on the calling task), each for
/// `max(k, candidates)` hits; a document found by several keeps the text and metadata
/// of the first index listed that found it. If any index fails, the search fails (a
/// partial ranking would silently change what the model sees).
///
/// The usual pairing is a [`KeywordIndex`](crate::KeywordIndex) (exact words, names,
/// codes) with a [`VectorIndex`](crate::VectorIndex) (paraphrases, with a real
/// embedder). With the offline [`HashingEmbedder`](crate::HashingEmbedder), which is
/// weaker than BM25, weight the keyword index higher: the `ir_eval` example measures
/// this.
///
/// ```
/// use aaa_search::{Document, Fusion, HashingEmbedder, HybridIndex, Index, KeywordIndex, VectorIndex};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), aaa_search::SearchError> {
/// let docs = [
///     Document::new("1", "Resetting a forgotten password"),
///     Document::new("2", "Billing and invoices"),
/// ];
/// let keyword = KeywordIndex::in_memory()?;
/// keyword.add(docs.clone())?;
/// let vector = VectorIndex::new(HashingEmbedder::default());
/// vector.add(docs).await?;
///
/// let hybrid = HybridIndex::builder()
///     .index(keyword, 0.8)
///     .index(vector, 0.2)
///     .fusion(Fusion::Weighted)
///     .build()?;
/// // "passwrd" is a typo BM25 cannot match; the character n-grams still can.
/// let hits = hybrid.search("reset passwrd", 2).await?;
/// assert_eq!(hits[0].id, "1");
/// # Ok(()) }
/// ```
pub struct HybridIndex {
    members: Vec<(Arc<dyn Index>, f32)>,
    fusion: Fusion,
    candidates: usize,
}

impl std::fmt::Debug for HybridIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HybridIndex")
            .field(
                "weights",
                &self.members.iter().map(|m| m.1).collect::<Vec<_>>(),
            )
            .field("fusion", &self.fusion)
            .field("candidates", &self.candidates)
            .finish()
    }
}

impl HybridIndex {
    /// Settings for a hybrid index.
    pub fn builder() -> HybridIndexBuilder {
        HybridIndexBuilder::default()
    }

    /// The fusion.
    pub fn fusion(&self) -> Fusion {
        self.fusion
    }

    /// The weight of each index, in order (scaled to sum to 1 for [`Fusion::Weighted`]).
    pub fn weights(&self) -> Vec<f32> {
        self.members.iter().map(|m| m.1).collect()
    }

    async fn run(&self, query: &str, k: usize) -> Result<Vec<Hit>, SearchError> {
        check_query(query)?;
        if k == 0 {
            return Ok(Vec::new());
        }
        let depth = k.max(self.candidates);
        let rankings = join_all(
            self.members
                .iter()
                .map(|(index, _)| index.search(query, depth)),
        )
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
        Ok(fuse(
            rankings.into_iter().zip(self.members.iter().map(|m| m.1)),
            self.fusion,
            k,
        ))
    }
}

impl Index for HybridIndex {
    fn search<'a>(&'a self, query: &'a str, k: usize) -> SearchFuture<'a> {
        Box::pin(self.run(query, k))
    }
}

/// Merges weighted rankings into the `k` best hits.
pub(crate) fn fuse<I>(rankings: I, fusion: Fusion, k: usize) -> Vec<Hit>
where
    I: IntoIterator<Item = (Vec<Hit>, f32)>,
{
    // Each document's fused score, and the hit first seen for it (in order of arrival,
    // which also breaks ties).
    let mut position: HashMap<String, usize> = HashMap::new();
    let mut fused: Vec<(f32, Hit)> = Vec::new();
    for (hits, weight) in rankings {
        let (min, max) = hits
            .iter()
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), h| {
                (lo.min(h.score), hi.max(h.score))
            });
        let mut seen_here: HashMap<&str, ()> = HashMap::with_capacity(hits.len());
        let mut rank = 0usize;
        for hit in &hits {
            if seen_here.insert(hit.id.as_str(), ()).is_some() {
                continue;
            }
            rank += 1;
            let contribution = match fusion {
                Fusion::ReciprocalRank { k } => weight / (k + rank as f32),
                Fusion::Weighted => {
                    let scaled = if max > min {
                        (hit.score - min) / (max - min)
                    } else {
                        1.0
                    };
                    weight * scaled
                }
            };
            match position.get(&hit.id) {
                Some(&i) => fused[i].0 += contribution,
                None => {
                    position.insert(hit.id.clone(), fused.len());
                    fused.push((contribution, hit.clone()));
                }
            }
        }
    }
    let mut top = TopK::new(k);
    for (i, (score, _)) in fused.iter().enumerate() {
        top.push(*score, i);
    }
    let mut slots: Vec<Option<(f32, Hit)>> = fused.into_iter().map(Some).collect();
    top.into_sorted()
        .into_iter()
        .filter_map(|(score, i)| {
            slots[i].take().map(|(_, mut hit)| {
                hit.score = score;
                hit
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::Document;

    fn ranking(ids_scores: &[(&str, f32)]) -> Vec<Hit> {
        ids_scores
            .iter()
            .map(|(id, s)| Hit::from_document(Document::new(*id, format!("text of {id}")), *s))
            .collect()
    }

    #[test]
    fn rrf_by_hand() {
        // a: ranks 1 and 3; b: rank 2 and 1; c: rank 3 only; d: rank 2 only.
        let first = ranking(&[("a", 9.0), ("b", 5.0), ("c", 1.0)]);
        let second = ranking(&[("b", 0.9), ("d", 0.8), ("a", 0.7)]);
        let hits = fuse(
            [(first, 1.0), (second, 1.0)],
            Fusion::ReciprocalRank { k: 60.0 },
            10,
        );
        let got: Vec<(&str, f32)> = hits.iter().map(|h| (h.id.as_str(), h.score)).collect();
        let a = 1.0 / 61.0 + 1.0 / 63.0;
        let b = 1.0 / 62.0 + 1.0 / 61.0;
        assert_eq!(
            got.iter().map(|g| g.0).collect::<Vec<_>>(),
            ["b", "a", "d", "c"]
        );
        assert!((got[0].1 - b).abs() < 1e-7 && (got[1].1 - a).abs() < 1e-7);
        assert!((got[2].1 - 1.0 / 62.0).abs() < 1e-7);
        assert!((got[3].1 - 1.0 / 63.0).abs() < 1e-7);
    }

    #[test]
    fn weighted_by_hand() {
        // First: a=1, b=0.5, c=0 after min-max; second: b=1, a=0.
        let first = ranking(&[("a", 10.0), ("b", 6.0), ("c", 2.0)]);
        let second = ranking(&[("b", 0.9), ("a", 0.1)]);
        let hits = fuse([(first, 0.75), (second, 0.25)], Fusion::Weighted, 3);
        let got: Vec<(&str, f32)> = hits.iter().map(|h| (h.id.as_str(), h.score)).collect();
        assert_eq!(got[0].0, "a");
        assert!((got[0].1 - 0.75).abs() < 1e-6);
        assert_eq!(got[1].0, "b");
        assert!((got[1].1 - (0.75 * 0.5 + 0.25)).abs() < 1e-6);
        assert_eq!(got[2].0, "c");
        assert_eq!(got[2].1, 0.0);
    }

    #[test]
    fn equal_scores_scale_to_one_and_k_cuts() {
        let only = ranking(&[("x", 3.0), ("y", 3.0)]);
        let hits = fuse([(only, 1.0)], Fusion::Weighted, 1);
        assert_eq!(hits.len(), 1);
        assert_eq!((hits[0].id.as_str(), hits[0].score), ("x", 1.0));
    }

    #[test]
    fn builder_checks_settings() {
        struct Nothing;
        impl Index for Nothing {
            fn search<'a>(&'a self, _: &'a str, _: usize) -> SearchFuture<'a> {
                Box::pin(async { Ok(Vec::new()) })
            }
        }
        assert!(HybridIndex::builder().build().is_err());
        assert!(HybridIndex::builder().index(Nothing, -1.0).build().is_err());
        assert!(HybridIndex::builder().index(Nothing, 0.0).build().is_err());
        assert!(
            HybridIndex::builder()
                .index(Nothing, 1.0)
                .fusion(Fusion::ReciprocalRank { k: f32::NAN })
                .build()
                .is_err()
        );
        let h = HybridIndex::builder()
            .index(Nothing, 3.0)
            .index(Nothing, 1.0)
            .fusion(Fusion::Weighted)
            .build()
            .unwrap();
        assert_eq!(h.weights(), vec![0.75, 0.25]);
    }
}
