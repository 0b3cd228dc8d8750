//! Keyword, vector and hybrid search indexes, and [`search_tool`] to hand any of them to
//! an agent as a tool.
//!
//! ```
//! use aaa_search::{Document, HashingEmbedder, HybridIndex, KeywordIndex, SearchTool, VectorIndex};
//! use aaa_tools::ToolContext;
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let docs = vec![
//!     Document::new("deploy", "Deploy with `make release`, then tag the commit.").with_title("Deploying"),
//!     Document::new("oncall", "The on-call engineer answers pages within 15 minutes.").with_title("On-call"),
//! ];
//! let keyword = KeywordIndex::in_memory()?;
//! keyword.add(docs.clone())?;
//! let vector = VectorIndex::new(HashingEmbedder::default());
//! vector.add(docs).await?;
//! let hybrid = HybridIndex::builder().index(keyword, 1.0).index(vector, 1.0).build()?;
//!
//! let tool = SearchTool::new(hybrid).name("search_handbook").build()?;
//! let answer = tool
//!     .call(ToolContext::builder().build(), json!({"query": "how do I deploy a release?", "k": 1}))
//!     .await?;
//! assert!(answer.as_str().unwrap().contains("[1] id: deploy | title: Deploying"));
//! # Ok(()) }
//! ```
//!
//! # What is here
//!
//! - [`Index`]: the one trait: `search(query, k)` gives the `k` best [`Hit`]s (id,
//!   score, text, [`Metadata`] with title and source). Adding documents belongs to each
//!   index type.
//! - [`KeywordIndex`]: BM25 on tantivy, in memory or in a directory, with an
//!   [`Analyzer`] (English stemming and stop words by default).
//! - [`VectorIndex`] over an [`Embedder`]: exact cosine search, or approximate (HNSW)
//!   with the `hnsw` feature. [`HashingEmbedder`] is an offline embedder.
//! - [`HybridIndex`]: any indexes merged by reciprocal rank fusion or a weighted
//!   combination of normalized scores ([`Fusion`]).
//! - [`SearchTool`] and [`search_tool`]: an index as an `aaa_tools::Tool`;
//!   [`render`] and [`dedup`] are the pieces it uses, public for programs.
//! - [`eval`]: MAP, P@k and nDCG@k as `trec_eval` defines them; the `ir_eval` example
//!   uses them on the CACM and Cranfield collections.
//!
//! # Design decisions
//!
//! **A dyn-compatible trait with boxed futures.** [`Index::search`] returns a
//! [`SearchFuture`] (a pinned box) instead of being an `async fn`, so `Arc<dyn Index>`
//! works: a hybrid index holds indexes of different types and a tool holds any index.
//! One allocation per query is noise next to a search. [`Embedder`] follows the same
//! pattern. Blanket impls cover `Arc<I>`, `Box<I>` and `&I`.
//!
//! **BM25 computed here, on tantivy's data.** tantivy provides the inverted index
//! (postings with term frequencies, document frequencies, per-document lengths as
//! field norms), storage in RAM or in a directory, commits and segment merges. Its own
//! BM25 scorer fixes k1 = 1.2 and b = 0.75; the published baselines use k1 = 0.9,
//! b = 0.4 and the best values depend on the collection. So [`KeywordIndex`] scores
//! itself, term at a time over each query term's postings, with Lucene's BM25 formula
//! and configurable [`Bm25`] parameters. For agent queries (a handful of terms) this
//! is fast: under 20 µs for a top-5 search over 50,000 documents, texts included. It
//! gives up tantivy's block-max WAND pruning, which would matter for long queries over
//! many millions of documents. With the same parameters and analysis it reproduces
//! the published CACM baseline (below).
//!
//! **No query language.** A model writes quotes, colons, `AND`, brackets and
//! half-finished syntax. tantivy's query parser would reject some of these or read
//! them as field names. The keyword index instead analyzes the query with the
//! documents' analyzer and scores the terms as a bag of words, so every string is a
//! valid query. Only an empty query is an error ([`SearchError::EmptyQuery`]), with a
//! message the tool passes to the model.
//!
//! **Analysis like the published baselines.** Words are split by the Unicode word
//! boundary rules (UAX #29, as Lucene's standard tokenizer), lowercased, stripped of
//! possessive `'s`, filtered by Lucene's 33 English stop words and stemmed with the
//! Snowball English stemmer ("Porter2"; Anserini uses the original Porter stemmer,
//! yet CACM MAP lands within 0.001 of its figure). Chinese and Japanese ideographs are
//! one term each, so text without spaces is searchable; very long words are cut into
//! pieces, never dropped.
//!
//! **Stored text uncompressed, in small blocks.** Each hit's text comes from tantivy's
//! document store. Its default (lz4 in 16 KB blocks) means decompressing a block per
//! hit, which was half the time of a top-5 keyword search over 50,000 documents. New
//! indexes store documents uncompressed in 2 KB blocks instead (a top-5 search then
//! takes under 20 µs); [`KeywordIndexBuilder::compress_store`] turns compression back
//! on when disk space matters more.
//!
//! **Exact vector search first.** Normalized vectors in one contiguous `Vec<f32>`, a
//! dot product written in eight independent lanes that the compiler vectorizes, and a
//! bounded heap for the top `k`: exact results, no build step, about 7 ms for 50,000
//! vectors of dimension 1024. HNSW (feature `hnsw`) is there for corpora where a linear
//! scan is too slow; it is an opt-in because it doubles memory, is approximate, and
//! its dependency tree is larger.
//!
//! **Hybrid fusion on ranks by default.** BM25 scores are unbounded, cosine scores are
//! not; reciprocal rank fusion (k = 60) needs no calibration. When one index is much
//! stronger (BM25 against the offline embedder), [`Fusion::Weighted`] with a higher
//! keyword weight keeps the strong ranking and lets the other add recall; `ir_eval`
//! reports both.
//!
//! **What the model reads.** The tool answers with numbered plain text: id, title,
//! source and score on one line, then the text cut at a character boundary with a
//! `[… truncated: N more characters]` marker, duplicates (same id, or same words)
//! removed before cutting to `k`, and a sentence when nothing matched.
//! [`SearchTool::run`] returns the same text with the structured hits. The tool asks
//! the index for exactly `k` hits and asks again only when duplicates were dropped;
//! checking the arguments, removing duplicates and rendering add about 3 µs a call
//! (the `search` benchmark prints the ratio): noise next to a vector or hybrid search,
//! about a fifth of a 16 µs keyword search over 50,000 documents.
//!
//! # Measured quality
//!
//! The `ir_eval` example runs the indexes on CACM and Cranfield (top 1000 per query,
//! `trec_eval` definitions in [`eval`]):
//!
//! | collection | index | MAP | P@30 | nDCG@10 |
//! |---|---|---|---|---|
//! | CACM | keyword, BM25 k1 = 0.9, b = 0.4 | 0.3131 | 0.1910 | 0.4552 |
//! | CACM | published (Anserini, same BM25, Porter stemmer) | 0.3123 | 0.1942 | |
//! | CACM | vector, [`HashingEmbedder`] | 0.2060 | 0.1506 | 0.3357 |
//! | CACM | hybrid, RRF k = 60, weights 1 : 1 | 0.2776 | 0.1936 | 0.4138 |
//! | CACM | hybrid, weighted, keyword 0.8 : vector 0.2 | 0.3184 | 0.1981 | 0.4660 |
//! | Cranfield | keyword | 0.2884 | 0.1148 | 0.3508 |
//! | Cranfield | vector | 0.2633 | 0.1040 | 0.3268 |
//! | Cranfield | hybrid, RRF 1 : 1 | 0.2920 | 0.1179 | 0.3575 |
//! | Cranfield | hybrid, weighted 0.8 : 0.2 | 0.2996 | 0.1161 | 0.3650 |
//!
//! Equal-weight RRF with this weak embedder loses to BM25 alone on CACM; the weighted
//! combination does not, on either collection.
//!
//! # The offline embedder is a lexical stand-in
//!
//! [`HashingEmbedder`] hashes words, word pairs and character n-grams into a fixed
//! number of dimensions. It needs no model download and is deterministic, which is
//! what tests, examples, CI and air-gapped deployments need, but it is **not a
//! semantic model**: texts are close when they share words or word fragments, and
//! synonyms without shared fragments are not close. It ranks below BM25 on the test
//! collections. Its use is to exercise the vector and hybrid paths end to end, and to
//! add some typo and inflection tolerance in a hybrid. For semantic retrieval,
//! implement [`Embedder`] over a real model or an embeddings API.
//!
//! # Dependencies, and why each
//!
//! - `tantivy`: the Rust full-text engine (a Lucene counterpart): inverted index,
//!   postings compression, field norms, document store, on-disk segments with atomic
//!   commits. Used without its query parser and scorer (see above), with default
//!   features trimmed to memory-mapped directories, stemmers, stop words and lz4.
//! - `unicode-segmentation`: UAX #29 word boundaries, the standard way to find words
//!   in any script (tantivy's simple tokenizer splits on non-alphanumeric characters,
//!   which cuts words at combining marks, as in Hindi, and keeps a whole Chinese
//!   sentence as one token).
//! - `hnsw_rs` (optional, feature `hnsw`): a maintained HNSW implementation with
//!   filtered search, used for approximate vector search. Its own unit-vector distance
//!   asserts that a dot product never exceeds 1, which rounding breaks, so this crate
//!   supplies its own clamped cosine distance.
//! - `futures`: `join_all`, to query a hybrid index's members concurrently.
//! - `serde`, `serde_json`: documents, hits and metadata are plain serializable data;
//!   the analyzer settings are stored with an index as JSON.
//! - `thiserror`: the error enum.
//! - `aaa-tools`: the `Tool` type the search tool is.
//!
//! # Features
//!
//! - `hnsw`: approximate vector search (`VectorIndex::with_hnsw`, `HnswParams`).

#![cfg_attr(docsrs, feature(doc_cfg))]

mod analyzer;
mod document;
mod error;
pub mod eval;
mod hashing;
mod hybrid;
mod index;
mod keyword;
mod tool;
mod topk;
mod vector;

pub use analyzer::{Analyzer, ENGLISH_STOP_WORDS, Language, MAX_TOKEN_CHARS};
pub use document::{Document, Hit, Metadata};
pub use error::SearchError;
pub use hashing::{DEFAULT_HASHING_DIMENSION, FeatureWeights, HashingEmbedder};
pub use hybrid::{DEFAULT_CANDIDATES, Fusion, HybridIndex, HybridIndexBuilder};
pub use index::{Index, SearchFuture};
pub use keyword::{
    Bm25, DEFAULT_WRITER_MEMORY, KeywordIndex, KeywordIndexBuilder, MAX_QUERY_TERMS,
};
pub use tool::{
    DEFAULT_K, DEFAULT_MAX_CHARS, DEFAULT_MAX_K, DEFAULT_TOOL_NAME, SearchOutput, SearchTool,
    dedup, render, search_tool,
};
#[cfg(feature = "hnsw")]
pub use vector::HnswParams;
pub use vector::{DEFAULT_BATCH_SIZE, EmbedFuture, Embedder, QueryEmbedFuture, VectorIndex};
