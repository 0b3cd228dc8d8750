//! What goes into an index ([`Document`]) and what comes out ([`Hit`]).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What is known about a document besides its text: a title, where it came from, and
/// any other fields the program wants back with each hit.
///
/// ```
/// use aaa_search::Metadata;
///
/// let meta = Metadata::default().with_title("Intro").with_source("book/ch1.md");
/// assert_eq!(meta.title.as_deref(), Some("Intro"));
/// assert_eq!(meta.source.as_deref(), Some("book/ch1.md"));
/// assert!(meta.extra.is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    /// The document's title. A keyword index searches it together with the text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Where the document came from: a path, a URL, a table row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Any other fields, returned as they were given. Not searched.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extra: Map<String, Value>,
}

impl Metadata {
    /// Sets the title.
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// Sets the source.
    pub fn with_source(mut self, source: impl Into<String>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// Adds (or replaces) an extra field.
    pub fn with_extra(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.extra.insert(key.into(), value.into());
        self
    }
}

/// One document to index: a unique id, its text and its [`Metadata`].
///
/// Adding a document whose id is already in an index replaces the old one.
///
/// ```
/// use aaa_search::Document;
///
/// let doc = Document::new("rfc-9110", "HTTP Semantics ...")
///     .with_title("HTTP Semantics")
///     .with_source("rfc9110.txt")
///     .with_extra("year", 2022);
/// assert_eq!(doc.id, "rfc-9110");
/// assert_eq!(doc.metadata.extra["year"], 2022);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Document {
    /// The document's id, unique within an index.
    pub id: String,
    /// The text that is searched and returned.
    pub text: String,
    /// Title, source and other fields.
    #[serde(default)]
    pub metadata: Metadata,
}

impl Document {
    /// A document with an id and a text and no metadata.
    pub fn new(id: impl Into<String>, text: impl Into<String>) -> Self {
        Document {
            id: id.into(),
            text: text.into(),
            metadata: Metadata::default(),
        }
    }

    /// Sets the title.
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.metadata.title = Some(title.into());
        self
    }

    /// Sets the source.
    pub fn with_source(mut self, source: impl Into<String>) -> Self {
        self.metadata.source = Some(source.into());
        self
    }

    /// Adds (or replaces) an extra metadata field.
    pub fn with_extra(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.metadata.extra.insert(key.into(), value.into());
        self
    }

    /// Replaces the whole metadata.
    pub fn with_metadata(mut self, metadata: Metadata) -> Self {
        self.metadata = metadata;
        self
    }

    /// The text a keyword index analyzes: the title (when there is one) and the text.
    pub(crate) fn searchable_text(&self) -> String {
        match &self.metadata.title {
            Some(title) if !title.is_empty() => format!("{title}\n{}", self.text),
            _ => self.text.clone(),
        }
    }
}

/// One search result: the document's id, text and metadata, and its score.
///
/// Scores are only comparable within one index and one query: BM25 scores are
/// unbounded, cosine scores lie in `[-1, 1]`, fused scores depend on the fusion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    /// The document's id.
    pub id: String,
    /// How well it matched; higher is better.
    pub score: f32,
    /// The document's text, whole.
    pub text: String,
    /// Title, source and other fields.
    pub metadata: Metadata,
}

impl Hit {
    /// A hit for `document` with `score`.
    ///
    /// ```
    /// use aaa_search::{Document, Hit};
    ///
    /// let hit = Hit::from_document(Document::new("a", "text").with_title("T"), 1.5);
    /// assert_eq!((hit.id.as_str(), hit.score), ("a", 1.5));
    /// assert_eq!(hit.metadata.title.as_deref(), Some("T"));
    /// ```
    pub fn from_document(document: Document, score: f32) -> Self {
        Hit {
            id: document.id,
            score,
            text: document.text,
            metadata: document.metadata,
        }
    }
}
