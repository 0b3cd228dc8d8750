//! How a keyword index lies in tantivy: its schema's fields, the analyzer's name, and
//! the commit payload that marks an index as ours (with the analyzer it was built
//! with).

use serde::{Deserialize, Serialize};
use tantivy::schema::{
    Field, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
};

use crate::analyzer::Analyzer;
use crate::error::SearchError;

/// The name the analyzer is registered under in the tantivy index.
pub(super) const TOKENIZER: &str = "aaa_search";
/// The version of the layout below, stored with the index.
pub(super) const FORMAT: u32 = 1;

/// What is stored in the commit payload of the index.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Payload {
    pub(super) aaa_search_format: u32,
    pub(super) analyzer: Analyzer,
}

/// The fields of the tantivy schema.
#[derive(Debug, Clone, Copy)]
pub(super) struct Fields {
    /// Raw id, indexed as one term (to replace and delete) and stored.
    pub(super) id: Field,
    /// Title and text, analyzed; not stored.
    pub(super) body: Field,
    /// Stored only.
    pub(super) text: Field,
    pub(super) title: Field,
    pub(super) source: Field,
    /// Extra metadata as a JSON object text; stored only.
    pub(super) extra: Field,
}

impl Fields {
    pub(super) fn schema() -> Schema {
        let mut builder = Schema::builder();
        builder.add_text_field("id", STRING | STORED);
        let body = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(TOKENIZER)
                .set_index_option(IndexRecordOption::WithFreqs)
                .set_fieldnorms(true),
        );
        builder.add_text_field("body", body);
        builder.add_text_field("text", STORED);
        builder.add_text_field("title", STORED);
        builder.add_text_field("source", STORED);
        builder.add_text_field("extra", STORED);
        builder.build()
    }

    pub(super) fn of(schema: &Schema) -> Result<Self, SearchError> {
        let field = |name: &str| {
            schema.get_field(name).map_err(|_| {
                SearchError::InvalidConfig(format!(
                    "the directory holds a tantivy index without the field `{name}`: not an aaa-search keyword index"
                ))
            })
        };
        Ok(Fields {
            id: field("id")?,
            body: field("body")?,
            text: field("text")?,
            title: field("title")?,
            source: field("source")?,
            extra: field("extra")?,
        })
    }
}
