//! Random documents and queries (any Unicode) never make an index or the tool panic,
//! and the tool's output keeps its promises.

use aaa_search::{
    Document, HashingEmbedder, HybridIndex, Index, KeywordIndex, SearchError, SearchTool,
    VectorIndex,
};
use proptest::collection::vec;
use proptest::prelude::*;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

/// Text mixing scripts, punctuation, whitespace and arbitrary characters.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[a-zA-Z0-9 .,:;!?\"'()\\[\\]{}*~^+-]{0,60}",
        "[ \\t\\n東京タワー검색엔진поиск🦀é\u{301}\u{200b}]{0,40}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn any_documents_any_query(
        texts in vec(text(), 0..6),
        query in text(),
        k in 0usize..8,
        max_chars in 1usize..40,
    ) {
        runtime().block_on(async {
            let docs: Vec<Document> = texts
                .iter()
                .enumerate()
                .map(|(i, t)| Document::new(format!("d{i}"), t.clone()).with_title(t.clone()))
                .collect();
            let keyword = std::sync::Arc::new(KeywordIndex::in_memory().unwrap());
            keyword.add(docs.clone()).unwrap();
            let vector = std::sync::Arc::new(VectorIndex::new(HashingEmbedder::new(64).unwrap()));
            vector.add(docs).await.unwrap();
            let hybrid = HybridIndex::builder()
                .shared(keyword.clone(), 1.0)
                .shared(vector.clone(), 1.0)
                .build()
                .unwrap();
            let indexes: [&dyn Index; 3] = [&*keyword, &*vector, &hybrid];
            for index in indexes {
                match index.search(&query, k).await {
                    Ok(hits) => {
                        prop_assert!(!query.trim().is_empty());
                        prop_assert!(hits.len() <= k.min(texts.len()));
                        prop_assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
                    }
                    Err(SearchError::EmptyQuery) => prop_assert!(query.trim().is_empty()),
                    Err(other) => prop_assert!(false, "unexpected error {other}"),
                }
            }

            let search = SearchTool::shared(keyword.clone()).max_chars(max_chars);
            if let Ok(output) = search.run(&query, Some(k.max(1))).await {
                // Each shown text is at most `max_chars` characters; a cut says so.
                for hit in &output.hits {
                    let shown: String = hit.text.trim().chars().take(max_chars).collect();
                    prop_assert!(output.text.contains(&shown));
                    let cut = hit.text.trim().chars().count().saturating_sub(max_chars);
                    if cut > 0 {
                        let marker = format!("[… truncated: {cut} more characters]");
                        prop_assert!(output.text.contains(&marker));
                    }
                }
                if output.hits.is_empty() {
                    prop_assert!(output.text.starts_with("No documents matched"));
                }
            }
            Ok(())
        })?;
    }
}
