//! A keyword index in a directory: persisted, reopened, guarded against mismatches.

use aaa_search::{Analyzer, Bm25, Document, KeywordIndex, SearchError};

fn docs() -> Vec<Document> {
    vec![
        Document::new("1", "Persistent storage of inverted indexes")
            .with_title("Storage")
            .with_source("notes/storage.md")
            .with_extra("year", 2024)
            .with_extra("tags", serde_json::json!(["index", "disk"])),
        Document::new("2", "Volatile caches live in memory"),
    ]
}

#[test]
fn documents_survive_a_reopen_with_their_metadata() {
    let dir = tempfile::tempdir().unwrap();
    {
        let index = KeywordIndex::open_or_create(dir.path()).unwrap();
        assert_eq!(index.add(docs()).unwrap(), 2);
    }
    let index = KeywordIndex::open_or_create(dir.path()).unwrap();
    assert_eq!(index.len(), 2);
    let hits = index.search_sync("persistent indexes", 5).unwrap();
    assert_eq!(hits[0].id, "1");
    assert_eq!(hits[0].metadata, docs()[0].metadata);
    assert_eq!(hits[0].text, docs()[0].text);

    // Changes after reopening are persisted too.
    assert!(index.delete("2").unwrap());
    index
        .add([Document::new("3", "A third note on caches")])
        .unwrap();
    drop(index);
    let index = KeywordIndex::open_or_create(dir.path()).unwrap();
    assert_eq!(index.len(), 2);
    assert_eq!(index.search_sync("caches", 5).unwrap()[0].id, "3");
}

#[test]
fn the_analyzer_is_stored_with_the_index() {
    let dir = tempfile::tempdir().unwrap();
    {
        let index = KeywordIndex::builder()
            .analyzer(Analyzer::simple())
            .open_or_create(dir.path())
            .unwrap();
        index.add(docs()).unwrap();
    }
    // Reopened without saying: the stored analyzer (no stemming) is used, so
    // "index" does not match "indexes".
    let index = KeywordIndex::open_or_create(dir.path()).unwrap();
    assert_eq!(index.analyzer(), &Analyzer::simple());
    assert!(index.search_sync("index", 5).unwrap().is_empty());
    assert_eq!(index.search_sync("indexes", 5).unwrap()[0].id, "1");
    drop(index);

    // Reopened with another analyzer: refused, not silently mismatched.
    let err = KeywordIndex::builder()
        .analyzer(Analyzer::english())
        .open_or_create(dir.path())
        .unwrap_err();
    assert!(matches!(err, SearchError::InvalidConfig(_)), "{err}");
}

#[test]
fn bm25_parameters_are_a_query_time_setting() {
    let dir = tempfile::tempdir().unwrap();
    {
        let index = KeywordIndex::builder()
            .bm25(Bm25::CLASSIC)
            .open_or_create(dir.path())
            .unwrap();
        index.add(docs()).unwrap();
    }
    let index = KeywordIndex::builder()
        .bm25(Bm25 { k1: 2.0, b: 0.1 })
        .open_or_create(dir.path())
        .unwrap();
    assert_eq!(index.bm25(), Bm25 { k1: 2.0, b: 0.1 });
    assert_eq!(index.search_sync("memory", 1).unwrap()[0].id, "2");
}

#[test]
fn a_foreign_tantivy_index_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    tantivy_foreign_index(dir.path());
    let err = KeywordIndex::open_or_create(dir.path()).unwrap_err();
    assert!(matches!(err, SearchError::InvalidConfig(_)), "{err}");
}

#[test]
fn a_second_writer_on_the_same_directory_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let first = KeywordIndex::open_or_create(dir.path()).unwrap();
    first.add(docs()).unwrap();
    // Opening is fine (searches work); writing needs the lock the first one holds.
    let second = KeywordIndex::open_or_create(dir.path()).unwrap();
    assert_eq!(second.len(), 2);
    let err = second.add([Document::new("x", "y")]).unwrap_err();
    assert!(matches!(err, SearchError::Tantivy(_)), "{err}");
    drop(first);
    second.add([Document::new("x", "y")]).unwrap();
    assert_eq!(second.len(), 3);
}

/// Creates an index with tantivy directly, as another program would.
fn tantivy_foreign_index(path: &std::path::Path) {
    use tantivy::schema::{STORED, Schema, TEXT};
    let mut builder = Schema::builder();
    let body = builder.add_text_field("body", TEXT | STORED);
    let index = tantivy::Index::create_in_dir(path, builder.build()).unwrap();
    let mut writer: tantivy::IndexWriter = index.writer(15_000_000).unwrap();
    writer
        .add_document(tantivy::doc!(body => "someone else's data"))
        .unwrap();
    writer.commit().unwrap();
}
