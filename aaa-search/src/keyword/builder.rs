//! [`KeywordIndexBuilder`]: the settings of a new or reopened [`KeywordIndex`], and
//! opening one.

use std::path::Path;

use tantivy::IndexSettings;
use tantivy::directory::MmapDirectory;
use tantivy::store::Compressor;

use super::layout::{FORMAT, Fields, Payload};
use super::{Bm25, KeywordIndex};
use crate::analyzer::Analyzer;
use crate::error::SearchError;

/// Settings for a new or reopened [`KeywordIndex`].
///
/// ```
/// use aaa_search::{Analyzer, Bm25, KeywordIndex};
///
/// let index = KeywordIndex::builder()
///     .analyzer(Analyzer::simple())
///     .bm25(Bm25::CLASSIC)
///     .in_memory()
///     .unwrap();
/// assert_eq!(index.bm25(), Bm25::CLASSIC);
/// assert_eq!(index.analyzer(), &Analyzer::simple());
/// ```
#[derive(Debug, Clone, Default)]
pub struct KeywordIndexBuilder {
    analyzer: Option<Analyzer>,
    pub(super) bm25: Bm25,
    pub(super) writer_memory: Option<usize>,
    compress: bool,
}

impl KeywordIndexBuilder {
    /// The analyzer. A new index uses [`Analyzer::english`] when none is given; a
    /// reopened index uses the one it was built with, and refuses to open with a
    /// different one (its terms would not match the queries).
    pub fn analyzer(mut self, analyzer: Analyzer) -> Self {
        self.analyzer = Some(analyzer);
        self
    }

    /// The BM25 parameters (a query-time setting: any value works with any index).
    pub fn bm25(mut self, bm25: Bm25) -> Self {
        self.bm25 = bm25;
        self
    }

    /// The index writer's memory budget in bytes (at least 15 MB, tantivy's minimum;
    /// default [`DEFAULT_WRITER_MEMORY`](crate::DEFAULT_WRITER_MEMORY)).
    pub fn writer_memory(mut self, bytes: usize) -> Self {
        self.writer_memory = Some(bytes);
        self
    }

    /// Whether a new index compresses the stored documents (lz4, in 16 KB blocks).
    /// Off by default: documents are stored as they are, in 2 KB blocks, so that
    /// fetching a hit's text reads a couple of kilobytes instead of decompressing a
    /// block (on 50,000 short documents this halves the time of a top-5 search). With
    /// compression the stored text takes about half the space. Only a new index takes
    /// this setting; a reopened one keeps its own.
    pub fn compress_store(mut self, compress: bool) -> Self {
        self.compress = compress;
        self
    }

    fn settings(&self) -> IndexSettings {
        if self.compress {
            IndexSettings {
                docstore_compression: Compressor::Lz4,
                ..IndexSettings::default()
            }
        } else {
            IndexSettings {
                docstore_compression: Compressor::None,
                docstore_blocksize: 2048,
                ..IndexSettings::default()
            }
        }
    }

    /// A new index held in memory; gone when dropped.
    pub fn in_memory(self) -> Result<KeywordIndex, SearchError> {
        self.bm25.check()?;
        let index = tantivy::IndexBuilder::new()
            .schema(Fields::schema())
            .settings(self.settings())
            .create_in_ram()?;
        let analyzer = self.analyzer.clone().unwrap_or_default();
        KeywordIndex::assemble(index, analyzer, &self, true)
    }

    /// The index in directory `path`: opened if the directory holds one, created
    /// (with the directory) otherwise. Everything added is on disk when
    /// [`KeywordIndex::add`] returns.
    ///
    /// Only one `KeywordIndex` (in any process) may write to a directory at a time;
    /// opening is fine, the first write takes the directory's lock.
    pub fn open_or_create(self, path: impl AsRef<Path>) -> Result<KeywordIndex, SearchError> {
        self.bm25.check()?;
        let path = path.as_ref();
        std::fs::create_dir_all(path)?;
        let directory = MmapDirectory::open(path).map_err(tantivy::TantivyError::from)?;
        let exists = tantivy::Index::exists(&directory).map_err(tantivy::TantivyError::from)?;
        if exists {
            let index = tantivy::Index::open(directory)?;
            let payload = index.load_metas()?.payload;
            let stored = match payload.as_deref().map(serde_json::from_str::<Payload>) {
                Some(Ok(p)) if p.aaa_search_format == FORMAT => p.analyzer,
                _ => {
                    return Err(SearchError::InvalidConfig(
                        "the directory holds a tantivy index that aaa-search did not create".into(),
                    ));
                }
            };
            if let Some(asked) = &self.analyzer
                && asked != &stored
            {
                return Err(SearchError::InvalidConfig(format!(
                    "the index was built with the analyzer {stored:?}, not {asked:?}; \
                     reopen it without an analyzer, or rebuild it"
                )));
            }
            KeywordIndex::assemble(index, stored, &self, false)
        } else {
            let index = tantivy::Index::create(directory, Fields::schema(), self.settings())?;
            let analyzer = self.analyzer.clone().unwrap_or_default();
            KeywordIndex::assemble(index, analyzer, &self, true)
        }
    }
}
