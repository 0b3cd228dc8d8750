//! The [`Index`] contract, checked on every index type: hostile queries, any script,
//! huge documents, empty indexes, `k` bounds, no duplicate ids.

use std::sync::Arc;

use aaa_search::{
    Document, Fusion, HashingEmbedder, HybridIndex, Index, KeywordIndex, SearchError, VectorIndex,
};

/// A small multilingual corpus.
fn corpus() -> Vec<Document> {
    vec![
        Document::new(
            "en-rust",
            "Rust is a systems programming language focused on safety.",
        )
        .with_title("Rust")
        .with_source("wiki/rust.md"),
        Document::new(
            "en-tokio",
            "Tokio is an asynchronous runtime for the Rust language.",
        ),
        Document::new(
            "de",
            "Größenänderung von Fenstern in der Benutzeroberfläche.",
        ),
        Document::new("ja", "東京タワーは東京都港区にある電波塔です。"),
        Document::new("zh", "搜索引擎是一种信息检索系统。"),
        Document::new("ru", "Поисковая система ищет документы по ключевым словам."),
        Document::new("hi", "हिन्दी भारत की राजभाषा है।"),
        Document::new("emoji", "Ferris 🦀 the crab 🦀 is the Rust mascot 🎉"),
        Document::new("empty", ""),
    ]
}

/// Every kind of index, filled with `docs`.
async fn indexes(docs: Vec<Document>) -> Vec<(&'static str, Arc<dyn Index>)> {
    let keyword = Arc::new(KeywordIndex::in_memory().unwrap());
    keyword.add(docs.clone()).unwrap();
    #[cfg(feature = "hnsw")]
    let docs_for_hnsw = docs.clone();
    let vector = Arc::new(VectorIndex::new(HashingEmbedder::new(256).unwrap()));
    vector.add(docs).await.unwrap();
    let rrf = HybridIndex::builder()
        .shared(keyword.clone(), 1.0)
        .shared(vector.clone(), 1.0)
        .build()
        .unwrap();
    let weighted = HybridIndex::builder()
        .shared(keyword.clone(), 0.8)
        .shared(vector.clone(), 0.2)
        .fusion(Fusion::Weighted)
        .build()
        .unwrap();
    #[allow(unused_mut)]
    let mut all = vec![
        ("keyword", keyword as Arc<dyn Index>),
        ("vector", vector as Arc<dyn Index>),
        ("hybrid-rrf", Arc::new(rrf) as Arc<dyn Index>),
        ("hybrid-weighted", Arc::new(weighted) as Arc<dyn Index>),
    ];
    #[cfg(feature = "hnsw")]
    {
        let approximate = VectorIndex::new(HashingEmbedder::new(256).unwrap())
            .with_hnsw(aaa_search::HnswParams {
                exact_below: 0,
                ..aaa_search::HnswParams::default()
            })
            .unwrap();
        approximate.add(docs_for_hnsw).await.unwrap();
        all.push(("vector-hnsw", Arc::new(approximate) as Arc<dyn Index>));
    }
    all
}

/// Queries a model might send, with no guarantee of sense.
fn hostile_queries() -> Vec<String> {
    let mut queries: Vec<String> = [
        r#""unterminated quote"#,
        "title:rust AND (safety OR",
        "rust^2 ~fuzzy~ +must -not",
        "[brackets] {braces} <angles>",
        "AND OR NOT",
        "the of and",
        "*",
        "\\",
        "?",
        "\"\"",
        ":::",
        "SELECT * FROM docs; DROP TABLE docs;--",
        "\u{0}\u{1}\u{7f}",
        "\u{200b}\u{feff}zero width",
        "東京",
        "검색 엔진",
        "🦀",
        "e\u{301}\u{301}\u{301}",
        "مرحبا بالعالم",
        "\n\t rust \r\n",
    ]
    .iter()
    .map(|q| (*q).to_owned())
    .collect();
    queries.push("rust ".repeat(5_000));
    queries.push("x".repeat(100_000));
    queries.push("語".repeat(20_000));
    queries
}

fn assert_well_formed(name: &str, query: &str, hits: &[aaa_search::Hit], k: usize) {
    assert!(
        hits.len() <= k,
        "{name} {query:?}: {} hits for k={k}",
        hits.len()
    );
    let mut ids: Vec<&str> = hits.iter().map(|h| h.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), hits.len(), "{name} {query:?}: duplicate ids");
    assert!(
        hits.windows(2).all(|w| w[0].score >= w[1].score),
        "{name} {query:?}: not sorted by score"
    );
    assert!(
        hits.iter().all(|h| h.score.is_finite()),
        "{name}: non-finite score"
    );
}

#[tokio::test]
async fn hostile_queries_never_fail_or_panic() {
    for (name, index) in indexes(corpus()).await {
        for query in hostile_queries() {
            let hits = index
                .search(&query, 5)
                .await
                .unwrap_or_else(|e| panic!("{name} failed on {query:?}: {e}"));
            assert_well_formed(name, &query, &hits, 5);
        }
    }
}

#[tokio::test]
async fn empty_queries_are_a_clear_error() {
    for (name, index) in indexes(corpus()).await {
        for query in ["", " ", "\n\t  \r\n", "\u{3000}"] {
            let err = index.search(query, 5).await.unwrap_err();
            assert!(
                matches!(err, SearchError::EmptyQuery),
                "{name} {query:?}: {err}"
            );
            assert!(err.is_query_error());
        }
    }
}

#[tokio::test]
async fn every_script_is_found_by_its_own_words() {
    let expectations = [
        ("Größenänderung Fenstern", "de"),
        ("東京タワー", "ja"),
        ("信息检索", "zh"),
        ("поисковая система", "ru"),
        ("हिन्दी", "hi"),
        ("crab mascot", "emoji"),
    ];
    for (name, index) in indexes(corpus()).await {
        for (query, id) in expectations {
            let hits = index.search(query, 3).await.unwrap();
            assert_eq!(
                hits.first().map(|h| h.id.as_str()),
                Some(id),
                "{name}: {query:?} gave {:?}",
                hits.iter().map(|h| &h.id).collect::<Vec<_>>()
            );
            assert!(hits[0].text.is_char_boundary(hits[0].text.len()));
        }
    }
}

#[tokio::test]
async fn metadata_comes_back_with_hits() {
    for (name, index) in indexes(corpus()).await {
        let hits = index.search("systems programming safety", 1).await.unwrap();
        assert_eq!(hits[0].id, "en-rust", "{name}");
        assert_eq!(hits[0].metadata.title.as_deref(), Some("Rust"), "{name}");
        assert_eq!(
            hits[0].metadata.source.as_deref(),
            Some("wiki/rust.md"),
            "{name}"
        );
        assert_eq!(hits[0].text, corpus()[0].text, "{name}");
    }
}

#[tokio::test]
async fn indexes_with_no_documents_answer_with_no_hits() {
    for (name, index) in indexes(Vec::new()).await {
        for query in ["rust", "東京", "the"] {
            let hits = index.search(query, 10).await.unwrap();
            assert!(hits.is_empty(), "{name}: {hits:?}");
        }
        assert!(matches!(
            index.search("", 10).await,
            Err(SearchError::EmptyQuery)
        ));
    }
}

#[tokio::test]
async fn k_bounds_the_hits() {
    for (name, index) in indexes(corpus()).await {
        assert!(index.search("rust", 0).await.unwrap().is_empty(), "{name}");
        assert_eq!(index.search("rust", 1).await.unwrap().len(), 1, "{name}");
        let many = index.search("rust language", usize::MAX).await.unwrap();
        assert!(
            many.len() >= 2 && many.len() <= corpus().len(),
            "{name}: {}",
            many.len()
        );
        assert_well_formed(name, "rust language", &many, usize::MAX);
    }
}

#[tokio::test]
async fn huge_documents_are_indexed_and_returned_whole() {
    // About 6 MB of mixed scripts in one document, plus one long run of letters with
    // no break and a multi-byte run longer than any term.
    let mut huge = String::new();
    for i in 0..60_000 {
        huge.push_str(&format!("paragraph {i} über größe 東京 данные "));
    }
    huge.push_str("needleinahaystack ");
    huge.push_str(&"a".repeat(300_000));
    huge.push(' ');
    huge.push_str(&"é".repeat(10_000));
    let docs = vec![
        Document::new("huge", huge.clone()),
        Document::new("small", "a short note about haystacks"),
    ];
    for (name, index) in indexes(docs).await {
        let hits = index.search("needleinahaystack", 2).await.unwrap();
        assert!(hits.iter().any(|h| h.id == "huge"), "{name}");
        let huge_hit = hits.iter().find(|h| h.id == "huge").unwrap();
        assert_eq!(
            huge_hit.text.len(),
            huge.len(),
            "{name}: text not returned whole"
        );
        let hits = index.search("short note", 1).await.unwrap();
        assert_eq!(hits[0].id, "small", "{name}");
    }
}

#[tokio::test]
async fn replaced_documents_are_found_by_their_new_text_only() {
    let keyword = KeywordIndex::in_memory().unwrap();
    let vector = VectorIndex::new(HashingEmbedder::new(256).unwrap());
    let old = Document::new("doc", "original wording about volcanoes");
    let new = Document::new("doc", "revised wording about glaciers");
    keyword.add([old.clone()]).unwrap();
    keyword.add([new.clone()]).unwrap();
    vector.add([old]).await.unwrap();
    vector.add([new]).await.unwrap();
    assert_eq!((keyword.len(), vector.len()), (1, 1));
    let indexes: [(&str, &dyn Index); 2] = [("keyword", &keyword), ("vector", &vector)];
    for (name, index) in indexes {
        let hits = index.search("glaciers", 5).await.unwrap();
        assert_eq!(hits.len(), 1, "{name}");
        assert_eq!(hits[0].text, "revised wording about glaciers", "{name}");
        let hits = index.search("volcanoes", 5).await.unwrap();
        assert!(
            hits.iter().all(|h| !h.text.contains("volcanoes")),
            "{name}: old text still found"
        );
    }
}

#[tokio::test]
async fn pointer_types_are_indexes() {
    let keyword = KeywordIndex::in_memory().unwrap();
    keyword.add(corpus()).unwrap();
    let boxed: Box<dyn Index> = Box::new(keyword);
    let by_ref: &dyn Index = &boxed;
    assert_eq!(by_ref.search("tokio", 1).await.unwrap()[0].id, "en-tokio");
    let arc: Arc<Box<dyn Index>> = Arc::new(boxed);
    assert_eq!(arc.search("tokio", 1).await.unwrap()[0].id, "en-tokio");
}
