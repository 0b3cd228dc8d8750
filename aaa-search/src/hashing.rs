//! [`HashingEmbedder`]: an offline, deterministic embedder by feature hashing.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use tantivy::tokenizer::{TextAnalyzer, TokenStream};

use crate::analyzer::Analyzer;
use crate::error::SearchError;
use crate::vector::{EmbedFuture, Embedder};

/// The default dimension of [`HashingEmbedder`].
pub const DEFAULT_HASHING_DIMENSION: usize = 1024;

/// How much each kind of feature counts in a [`HashingEmbedder`] vector.
///
/// ```
/// use aaa_search::FeatureWeights;
///
/// let w = FeatureWeights::default();
/// assert_eq!((w.words, w.word_pairs, w.char_ngrams), (1.0, 0.5, 0.5));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FeatureWeights {
    /// Analyzed words (stemmed, stop words removed).
    pub words: f32,
    /// Pairs of consecutive analyzed words.
    pub word_pairs: f32,
    /// Character n-grams of each word.
    pub char_ngrams: f32,
}

impl Default for FeatureWeights {
    fn default() -> Self {
        FeatureWeights {
            words: 1.0,
            word_pairs: 0.5,
            char_ngrams: 0.5,
        }
    }
}

/// An embedder that needs no model: it hashes a text's words, word pairs and character
/// n-grams into a fixed number of signed buckets (the "hashing trick"), with
/// sub-linear term frequencies, and normalizes the result.
///
/// **What it is, honestly:** a lexical stand-in, not a semantic model. Two texts are
/// close when they share words, stems, word pairs or word fragments; synonyms and
/// paraphrases with no shared fragment ("car" and "automobile") are not close. It has
/// no corpus statistics (no IDF), so frequent words weigh as much as rare ones once stop
/// words are gone, and it ranks below BM25 on retrieval benchmarks. Character n-grams
/// give it some robustness to typos and inflections that BM25 lacks, which is what it
/// adds in a [`HybridIndex`](crate::HybridIndex).
///
/// What it is for: making [`VectorIndex`](crate::VectorIndex) and hybrid search work
/// and testable offline, deterministically (the same text gives the same vector on any
/// machine and in any release of this crate with the same settings), and as a fallback
/// where no model can be loaded. For semantic search, implement [`Embedder`] over a real
/// model (a sentence-transformer server, an embeddings API) and use that instead.
///
/// ```
/// use aaa_search::HashingEmbedder;
///
/// let e = HashingEmbedder::new(256).unwrap();
/// let a = e.embed_text("configuring the garbage collector");
/// let b = e.embed_text("garbage collection configuration");
/// let c = e.embed_text("lemon cake recipe");
/// let cos = |x: &[f32], y: &[f32]| x.iter().zip(y).map(|(p, q)| p * q).sum::<f32>();
/// assert_eq!(a.len(), 256);
/// assert!(cos(&a, &b) > 0.3 && cos(&a, &c) < 0.1);
/// assert_eq!(a, e.embed_text("configuring the garbage collector")); // deterministic
/// ```
#[derive(Clone)]
pub struct HashingEmbedder {
    dim: usize,
    analyzer: Analyzer,
    stemmed: TextAnalyzer,
    unstemmed: TextAnalyzer,
    char_ngrams: (usize, usize),
    weights: FeatureWeights,
    numbers: bool,
}

impl std::fmt::Debug for HashingEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HashingEmbedder")
            .field("dimension", &self.dim)
            .field("analyzer", &self.analyzer)
            .field("char_ngrams", &self.char_ngrams)
            .field("weights", &self.weights)
            .field("numbers", &self.numbers)
            .finish()
    }
}

impl Default for HashingEmbedder {
    /// Dimension [`DEFAULT_HASHING_DIMENSION`], English analyzer, character 3- to
    /// 5-grams, [`FeatureWeights::default`], numbers skipped.
    fn default() -> Self {
        Self::build(
            DEFAULT_HASHING_DIMENSION,
            Analyzer::english(),
            (3, 5),
            FeatureWeights::default(),
            false,
        )
    }
}

impl HashingEmbedder {
    /// An embedder of dimension `dimension` (at least 1) with the default settings.
    pub fn new(dimension: usize) -> Result<Self, SearchError> {
        if dimension == 0 {
            return Err(SearchError::InvalidConfig(
                "the hashing embedder needs a dimension of at least 1".into(),
            ));
        }
        Ok(Self::build(
            dimension,
            Analyzer::english(),
            (3, 5),
            FeatureWeights::default(),
            false,
        ))
    }

    fn build(
        dim: usize,
        analyzer: Analyzer,
        char_ngrams: (usize, usize),
        weights: FeatureWeights,
        numbers: bool,
    ) -> Self {
        HashingEmbedder {
            dim,
            stemmed: analyzer.text_analyzer(),
            unstemmed: analyzer.clone().with_stemmer(None).text_analyzer(),
            analyzer,
            char_ngrams,
            weights,
            numbers,
        }
    }

    /// Uses `analyzer` to find words (default [`Analyzer::english`]).
    pub fn with_analyzer(self, analyzer: Analyzer) -> Self {
        Self::build(
            self.dim,
            analyzer,
            self.char_ngrams,
            self.weights,
            self.numbers,
        )
    }

    /// Whether words without a letter (`42`, `3.14`, `1,000`) are features. Off by
    /// default: with no corpus statistics to tell them apart, numbers from page
    /// numbers, tables and citation lists would outweigh the words (on CACM, skipping
    /// them lifts this embedder's MAP from 0.18 to 0.21). Exact numbers are the
    /// keyword index's job.
    ///
    /// ```
    /// use aaa_search::HashingEmbedder;
    ///
    /// let e = HashingEmbedder::default();
    /// assert!(e.embed_text("1 2 3").iter().all(|x| *x == 0.0));
    /// assert!(e.with_numbers(true).embed_text("1 2 3").iter().any(|x| *x != 0.0));
    /// ```
    pub fn with_numbers(self, numbers: bool) -> Self {
        Self::build(
            self.dim,
            self.analyzer,
            self.char_ngrams,
            self.weights,
            numbers,
        )
    }

    /// Uses character n-grams of `min..=max` characters (word boundaries included);
    /// `(0, 0)` turns them off.
    pub fn with_char_ngrams(self, min: usize, max: usize) -> Result<Self, SearchError> {
        if min > max || (min == 0 && max != 0) {
            return Err(SearchError::InvalidConfig(format!(
                "character n-gram sizes must satisfy 1 <= min <= max, or be (0, 0) (got ({min}, {max}))"
            )));
        }
        Ok(Self::build(
            self.dim,
            self.analyzer,
            (min, max),
            self.weights,
            self.numbers,
        ))
    }

    /// Sets the feature weights (each finite and `>= 0`).
    pub fn with_weights(self, weights: FeatureWeights) -> Result<Self, SearchError> {
        let FeatureWeights {
            words,
            word_pairs,
            char_ngrams,
        } = weights;
        if [words, word_pairs, char_ngrams]
            .iter()
            .any(|w| !(w.is_finite() && *w >= 0.0))
        {
            return Err(SearchError::InvalidConfig(format!(
                "feature weights must be finite and >= 0 (got {weights:?})"
            )));
        }
        Ok(Self::build(
            self.dim,
            self.analyzer,
            self.char_ngrams,
            weights,
            self.numbers,
        ))
    }

    /// The vector of one text, computed now (unit length, or all zeros for a text with
    /// no words).
    pub fn embed_text(&self, text: &str) -> Vec<f32> {
        let mut vector = vec![0f32; self.dim];
        let mut group = vec![0f32; self.dim];
        let stems = words(&self.stemmed, text, self.numbers);

        let mut counts = Counts::default();
        for stem in &stems {
            counts.add(hash(1, &[stem.as_bytes()]));
        }
        self.add_group(&mut vector, &mut group, &counts, self.weights.words);

        counts.clear();
        for pair in stems.windows(2) {
            counts.add(hash(2, &[pair[0].as_bytes(), b" ", pair[1].as_bytes()]));
        }
        self.add_group(&mut vector, &mut group, &counts, self.weights.word_pairs);

        counts.clear();
        let (min, max) = self.char_ngrams;
        if max > 0 {
            let mut chars: Vec<char> = Vec::new();
            let mut buf = String::new();
            for word in words(&self.unstemmed, text, self.numbers) {
                chars.clear();
                chars.push('<');
                chars.extend(word.chars());
                chars.push('>');
                for n in min..=max.min(chars.len()) {
                    for gram in chars.windows(n) {
                        buf.clear();
                        buf.extend(gram);
                        counts.add(hash(3, &[buf.as_bytes()]));
                    }
                }
            }
        }
        self.add_group(&mut vector, &mut group, &counts, self.weights.char_ngrams);

        let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            vector.iter_mut().for_each(|x| *x /= norm);
        }
        vector
    }

    /// Adds one feature group, with `1 + ln(tf)` weights, normalized, times `weight`.
    fn add_group(&self, vector: &mut [f32], group: &mut [f32], counts: &Counts, weight: f32) {
        if weight == 0.0 || counts.map.is_empty() {
            return;
        }
        group.iter_mut().for_each(|x| *x = 0.0);
        let dim = self.dim as u64;
        for (&h, &tf) in &counts.map {
            let value = 1.0 + (tf as f32).ln();
            let slot = (h % dim) as usize;
            if h >> 63 == 0 {
                group[slot] += value;
            } else {
                group[slot] -= value;
            }
        }
        let norm = group.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            let scale = weight / norm;
            for (v, g) in vector.iter_mut().zip(group.iter()) {
                *v += g * scale;
            }
        }
    }
}

impl Embedder for HashingEmbedder {
    fn dimension(&self) -> usize {
        self.dim
    }

    /// Computes the vectors on the calling task (about a millisecond per page of
    /// text); there is nothing to wait for.
    fn embed<'a>(&'a self, texts: &'a [&'a str]) -> EmbedFuture<'a> {
        Box::pin(async move { Ok(texts.iter().map(|t| self.embed_text(t)).collect()) })
    }
}

/// The terms `analyzer` finds in `text` (without those that have no letter, unless
/// `numbers`).
fn words(analyzer: &TextAnalyzer, text: &str, numbers: bool) -> Vec<String> {
    let mut analyzer = analyzer.clone();
    let mut stream = analyzer.token_stream(text);
    let mut out = Vec::new();
    while stream.advance() {
        let term = std::mem::take(&mut stream.token_mut().text);
        if numbers || term.chars().any(char::is_alphabetic) {
            out.push(term);
        }
    }
    out
}

/// Feature counts keyed by the feature's hash (already uniform, so not hashed again).
#[derive(Default)]
struct Counts {
    map: HashMap<u64, u32, BuildHasherDefault<PassThrough>>,
}

impl Counts {
    fn add(&mut self, h: u64) {
        *self.map.entry(h).or_insert(0) += 1;
    }

    fn clear(&mut self) {
        self.map.clear();
    }
}

/// A hasher for keys that are hashes already.
#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// 64-bit FNV-1a over a tag and some byte strings, then a finalizer that spreads the
/// bits (SplitMix64's), so that both `h % dim` and the top bit are well mixed. Fixed,
/// so vectors are the same on every platform and run.
fn hash(tag: u8, parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |b: u8| {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    };
    feed(tag);
    for part in parts {
        for &b in *part {
            feed(b);
        }
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cos(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn vectors_are_unit_length_or_zero() {
        let e = HashingEmbedder::new(64).unwrap();
        let v = e.embed_text("some words here");
        assert!((cos(&v, &v) - 1.0).abs() < 1e-5);
        assert!(e.embed_text("").iter().all(|x| *x == 0.0));
        assert!(e.embed_text("  ... !!! ").iter().all(|x| *x == 0.0));
    }

    #[test]
    fn the_hash_is_fixed() {
        // Changing these changes every stored vector: it must be deliberate.
        assert_eq!(hash(1, &[b"rust"]), hash(1, &[b"ru", b"st"]));
        assert_ne!(hash(1, &[b"rust"]), hash(2, &[b"rust"]));
        assert_eq!(hash(1, &[b"rust"]), 0xcc58_39fe_d08e_fe0e);
    }

    #[test]
    fn shared_fragments_make_texts_close() {
        let e = HashingEmbedder::default();
        let q = e.embed_text("tokenizer");
        // Same stem and shared n-grams beat an unrelated word.
        assert!(
            cos(&q, &e.embed_text("tokenizers and tokenization"))
                > cos(&q, &e.embed_text("database"))
        );
        // A typo shares no word but most character n-grams.
        let typo = cos(&q, &e.embed_text("tokeniser"));
        let unrelated = cos(&q, &e.embed_text("database"));
        assert!(typo > 0.08 && unrelated.abs() < 0.04, "{typo} {unrelated}");
    }

    #[test]
    fn each_feature_group_can_be_switched_off() {
        let words_only = HashingEmbedder::new(128)
            .unwrap()
            .with_char_ngrams(0, 0)
            .unwrap()
            .with_weights(FeatureWeights {
                words: 1.0,
                word_pairs: 0.0,
                char_ngrams: 0.0,
            })
            .unwrap();
        // No shared word: orthogonal up to hash collisions, which for two words in 128
        // buckets means exactly 0 or +-1.
        let a = words_only.embed_text("tokenizer");
        let b = words_only.embed_text("tokeniser");
        let c = cos(&a, &b);
        assert!(c == 0.0 || (c.abs() - 1.0).abs() < 1e-6);
        assert!((cos(&a, &words_only.embed_text("tokenizers")) - 1.0).abs() < 1e-6);
    }

    #[test]
    fn bad_settings_are_refused() {
        assert!(HashingEmbedder::new(0).is_err());
        assert!(HashingEmbedder::default().with_char_ngrams(4, 3).is_err());
        assert!(HashingEmbedder::default().with_char_ngrams(0, 3).is_err());
        assert!(
            HashingEmbedder::default()
                .with_weights(FeatureWeights {
                    words: f32::NAN,
                    ..FeatureWeights::default()
                })
                .is_err()
        );
    }
}
