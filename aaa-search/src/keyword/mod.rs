//! [`KeywordIndex`]: BM25 over a tantivy index, in memory or in a directory.
//!
//! - this module: the index, adding and deleting documents, and ranking;
//! - `bm25`: [`Bm25`], the ranking's parameters;
//! - `builder`: [`KeywordIndexBuilder`], the settings, and opening an index;
//! - `layout`: how an index lies in tantivy (its fields, its commit payload).

mod bm25;
mod builder;
mod layout;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use serde_json::{Map, Value};
use tantivy::collector::Count;
use tantivy::fieldnorm::FieldNormReader;
use tantivy::postings::Postings;
use tantivy::query::TermQuery;
use tantivy::schema::{Field, IndexRecordOption, Value as _};
use tantivy::store::Compressor;
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{
    DocAddress, DocSet, IndexReader, IndexWriter, ReloadPolicy, Searcher, TERMINATED,
    TantivyDocument, Term,
};

use crate::analyzer::Analyzer;
use crate::document::{Document, Hit, Metadata};
use crate::error::SearchError;
use crate::index::{Index, SearchFuture, check_query};
use crate::topk::TopK;

pub use bm25::Bm25;
pub use builder::KeywordIndexBuilder;
use layout::{FORMAT, Fields, Payload, TOKENIZER};

/// A query with more distinct terms than this is cut to its first terms: a model that
/// pastes a whole page as a query still gets an answer in bounded time.
pub const MAX_QUERY_TERMS: usize = 1024;
/// The default memory budget of the index writer: 64 MB.
pub const DEFAULT_WRITER_MEMORY: usize = 64 * 1024 * 1024;

/// A keyword index: BM25 ranking over tantivy's inverted index, in memory or in a
/// directory.
///
/// - Documents are analyzed with an [`Analyzer`] (English stemming and stop words by
///   default); the title is searched with the text.
/// - Queries are analyzed with the same analyzer and scored as a bag of words: every
///   query term is optional, a document's score is the sum of its terms' BM25 scores,
///   and a term given twice counts twice. There is no query syntax, so nothing a model
///   writes (quotes, colons, brackets, `AND`/`OR`, any script) can fail to parse;
///   operators are just words, and stop words among them (`and`, `or`, `not`) are
///   dropped. An empty query is [`SearchError::EmptyQuery`]; a query whose words are all
///   stop words or punctuation matches nothing.
/// - BM25 is computed here from tantivy's postings, document frequencies and
///   field norms, with Lucene's formula (`idf = ln(1 + (N - df + 0.5) / (df + 0.5))`),
///   because tantivy's own scorer fixes k1 and b. See [`Bm25`].
///
/// Adding and deleting are synchronous and commit before they return (the change is
/// then visible to searches and, for a directory, durable); batch documents into few
/// [`add`](Self::add) calls, and call them from `spawn_blocking` inside an async
/// runtime when the batches are large. Searching runs on the calling task: a query
/// costs in proportion to the postings of its terms (well under a millisecond for
/// short queries over tens of thousands of documents).
///
/// ```
/// use aaa_search::{Document, Index, KeywordIndex};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), aaa_search::SearchError> {
/// let index = KeywordIndex::in_memory()?;
/// index.add([
///     Document::new("1", "Tokio is an asynchronous runtime for Rust.").with_title("Tokio"),
///     Document::new("2", "Serde serializes and deserializes Rust data structures."),
/// ])?;
/// let hits = index.search("async runtimes", 5).await?;
/// assert_eq!(hits[0].id, "1");
/// assert_eq!(hits[0].metadata.title.as_deref(), Some("Tokio"));
///
/// // Model-written syntax is just words.
/// let hits = index.search(r#"title:"serde" AND (data OR "#, 5).await?;
/// assert_eq!(hits[0].id, "2");
/// # Ok(()) }
/// ```
pub struct KeywordIndex {
    index: tantivy::Index,
    reader: IndexReader,
    writer: Mutex<Option<IndexWriter<TantivyDocument>>>,
    fields: Fields,
    analyzer: Analyzer,
    text_analyzer: TextAnalyzer,
    bm25: Bm25,
    writer_memory: usize,
}

impl std::fmt::Debug for KeywordIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeywordIndex")
            .field("documents", &self.len())
            .field("analyzer", &self.analyzer)
            .field("bm25", &self.bm25)
            .finish_non_exhaustive()
    }
}

impl KeywordIndex {
    /// Settings for a new or reopened index.
    pub fn builder() -> KeywordIndexBuilder {
        KeywordIndexBuilder::default()
    }

    /// A new in-memory index with the default settings.
    pub fn in_memory() -> Result<Self, SearchError> {
        Self::builder().in_memory()
    }

    /// The index in directory `path` with the default settings (see
    /// [`KeywordIndexBuilder::open_or_create`]).
    ///
    /// ```
    /// use aaa_search::{Document, KeywordIndex};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// {
    ///     let index = KeywordIndex::open_or_create(dir.path()).unwrap();
    ///     index.add([Document::new("a", "persisted text")]).unwrap();
    /// }
    /// let reopened = KeywordIndex::open_or_create(dir.path()).unwrap();
    /// assert_eq!(reopened.len(), 1);
    /// assert_eq!(reopened.search_sync("persisted", 1).unwrap()[0].id, "a");
    /// ```
    pub fn open_or_create(path: impl AsRef<Path>) -> Result<Self, SearchError> {
        Self::builder().open_or_create(path)
    }

    fn assemble(
        index: tantivy::Index,
        analyzer: Analyzer,
        settings: &KeywordIndexBuilder,
        new: bool,
    ) -> Result<Self, SearchError> {
        let fields = Fields::of(&index.schema())?;
        let text_analyzer = analyzer.text_analyzer();
        index
            .tokenizers()
            .register(TOKENIZER, text_analyzer.clone());
        // Caching blocks of an uncompressed store would only copy them.
        let cached_blocks = match index.settings().docstore_compression {
            Compressor::None => 0,
            _ => 100,
        };
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .doc_store_cache_num_blocks(cached_blocks)
            .try_into()?;
        let keyword = KeywordIndex {
            index,
            reader,
            writer: Mutex::new(None),
            fields,
            analyzer,
            text_analyzer,
            bm25: settings.bm25,
            writer_memory: settings.writer_memory.unwrap_or(DEFAULT_WRITER_MEMORY),
        };
        if new {
            // The first commit records the analyzer with the index.
            let mut guard = keyword.lock_writer();
            let writer = keyword.writer(&mut guard)?;
            keyword.commit(writer)?;
        }
        Ok(keyword)
    }

    /// The analyzer documents and queries go through.
    pub fn analyzer(&self) -> &Analyzer {
        &self.analyzer
    }

    /// The BM25 parameters.
    pub fn bm25(&self) -> Bm25 {
        self.bm25
    }

    /// Changes the BM25 parameters (no re-indexing needed).
    pub fn set_bm25(&mut self, bm25: Bm25) -> Result<(), SearchError> {
        bm25.check()?;
        self.bm25 = bm25;
        Ok(())
    }

    /// The number of documents.
    pub fn len(&self) -> usize {
        usize::try_from(self.reader.searcher().num_docs()).unwrap_or(usize::MAX)
    }

    /// Whether the index holds no document.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock_writer(&self) -> MutexGuard<'_, Option<IndexWriter<TantivyDocument>>> {
        // A panic while holding the lock leaves at worst uncommitted operations, which
        // the next commit or rollback settles.
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn writer<'g>(
        &self,
        guard: &'g mut MutexGuard<'_, Option<IndexWriter<TantivyDocument>>>,
    ) -> Result<&'g mut IndexWriter<TantivyDocument>, SearchError> {
        if guard.is_none() {
            let writer = self
                .index
                .writer_with_num_threads(1, self.writer_memory.max(15_000_000))?;
            **guard = Some(writer);
        }
        match guard.as_mut() {
            Some(writer) => Ok(writer),
            None => Err(SearchError::Corrupt("the index writer vanished".into())),
        }
    }

    fn commit(&self, writer: &mut IndexWriter<TantivyDocument>) -> Result<(), SearchError> {
        let payload = serde_json::to_string(&Payload {
            aaa_search_format: FORMAT,
            analyzer: self.analyzer.clone(),
        })
        .map_err(|e| SearchError::Corrupt(e.to_string()))?;
        let mut prepared = writer.prepare_commit()?;
        prepared.set_payload(&payload);
        prepared.commit()?;
        self.reader.reload()?;
        Ok(())
    }

    /// Adds documents and commits; returns how many were added. A document whose id is
    /// already in the index replaces it (within one call, the last one wins). On error
    /// nothing of the call is kept.
    pub fn add<I>(&self, documents: I) -> Result<usize, SearchError>
    where
        I: IntoIterator<Item = Document>,
    {
        let mut guard = self.lock_writer();
        let writer = self.writer(&mut guard)?;
        let mut added = 0;
        let write = |writer: &mut IndexWriter<TantivyDocument>| -> Result<(), SearchError> {
            for document in documents {
                writer.delete_term(Term::from_field_text(self.fields.id, &document.id));
                writer.add_document(self.to_tantivy(&document)?)?;
                added += 1;
            }
            self.commit(writer)
        };
        if let Err(error) = write(writer) {
            // Drop whatever this call queued; the error is what the caller needs.
            let _ = writer.rollback();
            return Err(error);
        }
        Ok(added)
    }

    /// Deletes the document with id `id`; returns whether there was one.
    ///
    /// ```
    /// use aaa_search::{Document, KeywordIndex};
    ///
    /// let index = KeywordIndex::in_memory().unwrap();
    /// index.add([Document::new("a", "text")]).unwrap();
    /// assert!(index.delete("a").unwrap());
    /// assert!(!index.delete("a").unwrap());
    /// assert!(index.is_empty());
    /// ```
    pub fn delete(&self, id: &str) -> Result<bool, SearchError> {
        let term = Term::from_field_text(self.fields.id, id);
        let present = self.reader.searcher().search(
            &TermQuery::new(term.clone(), IndexRecordOption::Basic),
            &Count,
        )? > 0;
        if !present {
            return Ok(false);
        }
        let mut guard = self.lock_writer();
        let writer = self.writer(&mut guard)?;
        writer.delete_term(term);
        if let Err(error) = self.commit(writer) {
            let _ = writer.rollback();
            return Err(error);
        }
        Ok(true)
    }

    fn to_tantivy(&self, document: &Document) -> Result<TantivyDocument, SearchError> {
        let f = &self.fields;
        let mut doc = TantivyDocument::new();
        doc.add_text(f.id, &document.id);
        doc.add_text(f.body, document.searchable_text());
        doc.add_text(f.text, &document.text);
        if let Some(title) = &document.metadata.title {
            doc.add_text(f.title, title);
        }
        if let Some(source) = &document.metadata.source {
            doc.add_text(f.source, source);
        }
        if !document.metadata.extra.is_empty() {
            let extra = serde_json::to_string(&document.metadata.extra)
                .map_err(|e| SearchError::Corrupt(e.to_string()))?;
            doc.add_text(f.extra, extra);
        }
        Ok(doc)
    }

    fn to_hit(&self, doc: &TantivyDocument, score: f32) -> Result<Hit, SearchError> {
        let f = &self.fields;
        let text_of = |field: Field| {
            doc.get_first(field)
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        };
        let extra = match text_of(f.extra) {
            Some(json) => serde_json::from_str::<Map<String, Value>>(&json)
                .map_err(|e| SearchError::Corrupt(format!("stored metadata: {e}")))?,
            None => Map::new(),
        };
        Ok(Hit {
            id: text_of(f.id).unwrap_or_default(),
            score,
            text: text_of(f.text).unwrap_or_default(),
            metadata: Metadata {
                title: text_of(f.title),
                source: text_of(f.source),
                extra,
            },
        })
    }

    /// The distinct terms of a query with their counts, in order of first appearance.
    fn query_terms(&self, query: &str) -> Vec<(Term, f32)> {
        let mut analyzer = self.text_analyzer.clone();
        let mut stream = analyzer.token_stream(query);
        let mut order: Vec<(Term, f32)> = Vec::new();
        let mut seen: HashMap<String, usize> = HashMap::new();
        while let Some(token) = stream.next() {
            match seen.get(&token.text) {
                Some(&i) => order[i].1 += 1.0,
                None if order.len() < MAX_QUERY_TERMS => {
                    seen.insert(token.text.clone(), order.len());
                    order.push((Term::from_field_text(self.fields.body, &token.text), 1.0));
                }
                None => {}
            }
        }
        order
    }

    /// [`Index::search`] without the future: the `k` best hits for `query`, computed on
    /// the calling thread.
    pub fn search_sync(&self, query: &str, k: usize) -> Result<Vec<Hit>, SearchError> {
        check_query(query)?;
        if k == 0 {
            return Ok(Vec::new());
        }
        let searcher = self.reader.searcher();
        let ranked = self.rank(&searcher, query, k)?;
        ranked
            .into_iter()
            .map(|(score, address)| {
                let doc: TantivyDocument = searcher.doc(address)?;
                self.to_hit(&doc, score)
            })
            .collect()
    }

    /// The `k` best documents' addresses and scores.
    fn rank(
        &self,
        searcher: &Searcher,
        query: &str,
        k: usize,
    ) -> Result<Vec<(f32, DocAddress)>, SearchError> {
        let terms = self.query_terms(query);
        let num_docs = searcher.num_docs();
        if terms.is_empty() || num_docs == 0 {
            return Ok(Vec::new());
        }
        let Bm25 { k1, b } = self.bm25;

        // Collection statistics: N, average length (tokens over documents, deleted ones
        // included, as Lucene and tantivy count them), and each term's weight.
        let mut total_tokens = 0u64;
        let mut total_docs = 0u64;
        for segment in searcher.segment_readers() {
            total_tokens += segment.inverted_index(self.fields.body)?.total_num_tokens();
            total_docs += u64::from(segment.max_doc());
        }
        let avg_len = if total_tokens == 0 || total_docs == 0 {
            1.0
        } else {
            total_tokens as f32 / total_docs as f32
        };
        let n = num_docs as f32;
        let mut weighted = Vec::with_capacity(terms.len());
        for (term, count) in terms {
            let df = (searcher.doc_freq(&term)? as f32).min(n);
            if df == 0.0 {
                continue;
            }
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5))
                .ln()
                .max(f32::MIN_POSITIVE);
            weighted.push((term, idf * (k1 + 1.0) * count));
        }
        if weighted.is_empty() {
            return Ok(Vec::new());
        }
        // k1 * (1 - b + b * len / avg_len) for each of the 256 encoded lengths.
        let mut norm = [0f32; 256];
        for (id, slot) in norm.iter_mut().enumerate() {
            let len = FieldNormReader::id_to_fieldnorm(id as u8) as f32;
            *slot = k1 * (1.0 - b + b * len / avg_len);
        }

        let mut top = TopK::new(k);
        let mut scores: Vec<f32> = Vec::new();
        let mut touched: Vec<u32> = Vec::new();
        for (ord, segment) in searcher.segment_readers().iter().enumerate() {
            let inverted = segment.inverted_index(self.fields.body)?;
            let fieldnorms = segment.get_fieldnorms_reader(self.fields.body)?;
            let alive = segment.alive_bitset();
            scores.clear();
            scores.resize(segment.max_doc() as usize, 0.0);
            touched.clear();
            for (term, weight) in &weighted {
                let Some(mut postings) =
                    inverted.read_postings(term, IndexRecordOption::WithFreqs)?
                else {
                    continue;
                };
                let mut doc = postings.doc();
                while doc != TERMINATED {
                    if alive.is_none_or(|a| a.is_alive(doc)) {
                        let tf = postings.term_freq() as f32;
                        let denominator = tf + norm[fieldnorms.fieldnorm_id(doc) as usize];
                        let slot = &mut scores[doc as usize];
                        if *slot == 0.0 {
                            touched.push(doc);
                        }
                        *slot += weight * tf / denominator;
                    }
                    doc = postings.advance();
                }
            }
            let ord = ord as u32;
            for &doc in &touched {
                top.push(scores[doc as usize], DocAddress::new(ord, doc));
            }
        }
        Ok(top.into_sorted())
    }
}

impl Index for KeywordIndex {
    fn search<'a>(&'a self, query: &'a str, k: usize) -> SearchFuture<'a> {
        Box::pin(async move { self.search_sync(query, k) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus() -> Vec<Document> {
        vec![
            Document::new("d1", "the cat sat on the mat"),
            Document::new("d2", "dogs and cats living together"),
            Document::new(
                "d3",
                "a treatise on the economics of mats and rugs, mats everywhere",
            ),
            Document::new("d4", "nothing relevant here at all"),
        ]
    }

    /// BM25 by the book, over the analyzed corpus, for checking the engine.
    fn reference_scores(docs: &[Document], query: &str, bm25: Bm25) -> Vec<(String, f32)> {
        let analyzer = Analyzer::english();
        let analyzed: Vec<Vec<String>> = docs.iter().map(|d| analyzer.analyze(&d.text)).collect();
        let n = docs.len() as f32;
        let avg = analyzed.iter().map(Vec::len).sum::<usize>() as f32 / n;
        let mut q = analyzer.analyze(query);
        q.sort();
        let mut scores: Vec<(String, f32)> = docs
            .iter()
            .zip(&analyzed)
            .map(|(d, terms)| {
                let mut s = 0.0;
                let mut seen = Vec::new();
                for t in &q {
                    let qtf = q.iter().filter(|x| *x == t).count() as f32;
                    if seen.contains(t) {
                        continue;
                    }
                    seen.push(t.clone());
                    let df = analyzed.iter().filter(|a| a.contains(t)).count() as f32;
                    let tf = terms.iter().filter(|x| *x == t).count() as f32;
                    if df == 0.0 || tf == 0.0 {
                        continue;
                    }
                    let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                    let len = terms.len() as f32;
                    s += qtf * idf * (bm25.k1 + 1.0) * tf
                        / (tf + bm25.k1 * (1.0 - bm25.b + bm25.b * len / avg));
                }
                (d.id.clone(), s)
            })
            .filter(|(_, s)| *s > 0.0)
            .collect();
        scores.sort_by(|a, b| b.1.total_cmp(&a.1));
        scores
    }

    #[test]
    fn scores_match_the_bm25_formula_for_several_parameters() {
        for bm25 in [Bm25::default(), Bm25::CLASSIC, Bm25 { k1: 2.0, b: 0.0 }] {
            let index = KeywordIndex::builder().bm25(bm25).in_memory().unwrap();
            index.add(corpus()).unwrap();
            for query in ["mat", "cats mats", "mat mat cat rugs", "economics"] {
                let hits = index.search_sync(query, 10).unwrap();
                let expected = reference_scores(&corpus(), query, bm25);
                assert_eq!(hits.len(), expected.len(), "{query}");
                for (hit, (id, score)) in hits.iter().zip(&expected) {
                    assert_eq!(&hit.id, id, "{query} {bm25:?}");
                    assert!(
                        (hit.score - score).abs() < 1e-4,
                        "{query}: {} vs {score}",
                        hit.score
                    );
                }
            }
        }
    }

    #[test]
    fn parameters_change_the_ranking() {
        // A short document with one match against a long one with two: strong length
        // normalization favours the short one, none favours the long one.
        let docs = vec![
            Document::new("short", "kernel"),
            Document::new(
                "long",
                "kernel kernel plus many other unrelated words that make this document much longer than the other one",
            ),
        ];
        let index = KeywordIndex::builder()
            .bm25(Bm25 { k1: 1.2, b: 1.0 })
            .in_memory()
            .unwrap();
        index.add(docs.clone()).unwrap();
        assert_eq!(index.search_sync("kernel", 1).unwrap()[0].id, "short");
        let index = KeywordIndex::builder()
            .bm25(Bm25 { k1: 1.2, b: 0.0 })
            .in_memory()
            .unwrap();
        index.add(docs).unwrap();
        assert_eq!(index.search_sync("kernel", 1).unwrap()[0].id, "long");
    }

    #[test]
    fn replacing_and_deleting_by_id() {
        let index = KeywordIndex::in_memory().unwrap();
        index.add(corpus()).unwrap();
        index
            .add([Document::new("d4", "now all about mats")])
            .unwrap();
        assert_eq!(index.len(), 4);
        let hits = index.search_sync("mats", 10).unwrap();
        assert!(
            hits.iter()
                .any(|h| h.id == "d4" && h.text == "now all about mats")
        );
        assert!(index.delete("d3").unwrap());
        let hits = index.search_sync("mats", 10).unwrap();
        assert!(hits.iter().all(|h| h.id != "d3"));
        assert_eq!(index.len(), 3);
        // Same id twice in one batch: the last wins.
        index
            .add([
                Document::new("x", "first version"),
                Document::new("x", "second version"),
            ])
            .unwrap();
        let hits = index.search_sync("version", 10).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].text, "second version");
    }

    #[test]
    fn compressed_and_plain_stores_give_the_same_hits() {
        let plain = KeywordIndex::in_memory().unwrap();
        let packed = KeywordIndex::builder()
            .compress_store(true)
            .in_memory()
            .unwrap();
        for index in [&plain, &packed] {
            index.add(corpus()).unwrap();
        }
        assert!(matches!(
            plain.index.settings().docstore_compression,
            Compressor::None
        ));
        assert!(matches!(
            packed.index.settings().docstore_compression,
            Compressor::Lz4
        ));
        let (a, b) = (
            plain.search_sync("mats cat", 10).unwrap(),
            packed.search_sync("mats cat", 10).unwrap(),
        );
        assert_eq!(a.len(), 3);
        assert_eq!(a, b);
    }

    #[test]
    fn invalid_parameters_are_refused() {
        assert!(
            KeywordIndex::builder()
                .bm25(Bm25 { k1: -1.0, b: 0.5 })
                .in_memory()
                .is_err()
        );
        assert!(
            KeywordIndex::builder()
                .bm25(Bm25 {
                    k1: f32::NAN,
                    b: 0.5
                })
                .in_memory()
                .is_err()
        );
        let mut index = KeywordIndex::in_memory().unwrap();
        assert!(index.set_bm25(Bm25 { k1: 1.0, b: -0.1 }).is_err());
        assert!(index.set_bm25(Bm25 { k1: 1.0, b: 0.1 }).is_ok());
    }
}
