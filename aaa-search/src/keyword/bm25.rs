//! [`Bm25`]: the ranking's two parameters, checked.

use serde::{Deserialize, Serialize};

use crate::error::SearchError;

/// The BM25 parameters: `k1` (term-frequency saturation) and `b` (length normalization).
///
/// The default is k1 = 0.9, b = 0.4, the values the Anserini toolkit uses for its
/// published baselines (and a good choice for short and mid-length passages); classic
/// Robertson/Lucene values are [`Bm25::CLASSIC`] (k1 = 1.2, b = 0.75).
///
/// ```
/// use aaa_search::Bm25;
///
/// assert_eq!(Bm25::default(), Bm25 { k1: 0.9, b: 0.4 });
/// assert!(Bm25::new(1.2, 0.75).is_ok());
/// assert!(Bm25::new(1.2, 1.5).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bm25 {
    /// Term-frequency saturation, `>= 0`.
    pub k1: f32,
    /// Length normalization, in `[0, 1]`.
    pub b: f32,
}

impl Default for Bm25 {
    fn default() -> Self {
        Bm25 { k1: 0.9, b: 0.4 }
    }
}

impl Bm25 {
    /// Robertson's (and Lucene's, and tantivy's) k1 = 1.2, b = 0.75.
    pub const CLASSIC: Bm25 = Bm25 { k1: 1.2, b: 0.75 };

    /// Checked parameters.
    pub fn new(k1: f32, b: f32) -> Result<Self, SearchError> {
        let bm25 = Bm25 { k1, b };
        bm25.check()?;
        Ok(bm25)
    }

    pub(super) fn check(&self) -> Result<(), SearchError> {
        if !(self.k1.is_finite() && self.k1 >= 0.0) {
            return Err(SearchError::InvalidConfig(format!(
                "BM25 k1 must be a finite number >= 0 (got {})",
                self.k1
            )));
        }
        if !(0.0..=1.0).contains(&self.b) {
            return Err(SearchError::InvalidConfig(format!(
                "BM25 b must lie in [0, 1] (got {})",
                self.b
            )));
        }
        Ok(())
    }
}
