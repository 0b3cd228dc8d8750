//! `search_tool` as a model sees it: arguments, output text, errors.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use aaa_search::{
    DEFAULT_MAX_K, Document, Hit, Index, KeywordIndex, SearchError, SearchFuture, SearchTool,
    search_tool,
};
use aaa_tools::{CallError, ToolContext};
use serde_json::{Value, json};

fn ctx() -> ToolContext {
    ToolContext::builder().build()
}

/// An index that returns fixed hits (cut to the `k` asked) and counts calls and `k`s.
struct Fixed {
    hits: Vec<Hit>,
    asked: Arc<AtomicUsize>,
}

impl Index for Fixed {
    fn search<'a>(&'a self, query: &'a str, k: usize) -> SearchFuture<'a> {
        Box::pin(async move {
            if query.trim().is_empty() {
                return Err(SearchError::EmptyQuery);
            }
            self.asked.store(k, Ordering::SeqCst);
            Ok(self.hits.iter().take(k).cloned().collect())
        })
    }
}

fn hit(id: &str, text: &str, score: f32) -> Hit {
    Hit::from_document(Document::new(id, text), score)
}

fn fixed(hits: Vec<Hit>) -> (Fixed, Arc<AtomicUsize>) {
    let asked = Arc::new(AtomicUsize::new(0));
    (
        Fixed {
            hits,
            asked: asked.clone(),
        },
        asked,
    )
}

async fn call(tool: &aaa_tools::Tool, args: Value) -> String {
    tool.call(ctx(), args)
        .await
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn defaults_and_schema() {
    let tool = search_tool(KeywordIndex::in_memory().unwrap()).unwrap();
    assert_eq!(tool.name(), "search_documents");
    let params = tool.parameters();
    assert_eq!(params["required"], json!(["query"]));
    assert_eq!(params["properties"]["query"]["type"], "string");
    assert_eq!(
        params["properties"]["k"]["type"],
        json!(["integer", "null"])
    );
    assert!(
        params["properties"]["k"]["description"]
            .as_str()
            .unwrap()
            .contains(&format!("1 to {DEFAULT_MAX_K}; 5 when left out"))
    );
    assert!(tool.annotations().unwrap().read_only_hint == Some(true));
}

#[tokio::test]
async fn numbered_hits_with_id_title_source_and_score() {
    let index = KeywordIndex::in_memory().unwrap();
    index
        .add([
            Document::new("a", "Alpha text about rust.")
                .with_title("Alpha")
                .with_source("docs/a.md"),
            Document::new("b", "Beta text about rust and more rust."),
        ])
        .unwrap();
    let search = SearchTool::new(index);
    let tool = search.build().unwrap();
    let text = call(&tool, json!({"query": "rust"})).await;
    let output = search.run("rust", None).await.unwrap();
    assert_eq!(text, output.text);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "2 results for \"rust\":");
    let first = &output.hits[0];
    let second = &output.hits[1];
    let check_header = |line: &str, n: usize, h: &Hit| {
        let mut prefix = format!("[{n}] id: {}", h.id);
        if let Some(t) = &h.metadata.title {
            prefix += &format!(" | title: {t}");
        }
        if let Some(s) = &h.metadata.source {
            prefix += &format!(" | source: {s}");
        }
        prefix += " | score: ";
        let score = line
            .strip_prefix(&prefix)
            .unwrap_or_else(|| panic!("{line:?}"));
        assert_eq!(
            score.split_once('.').map(|(_, d)| d.len()),
            Some(4),
            "{score}"
        );
        assert!((score.parse::<f32>().unwrap() - h.score).abs() <= 5e-5);
    };
    check_header(lines[2], 1, first);
    assert_eq!(lines[3], first.text);
    check_header(lines[5], 2, second);
    assert!(text.contains("[1] id: ") && text.contains("[2] id: "));
    assert!(text.contains("| title: Alpha | source: docs/a.md | score: "));
}

#[tokio::test]
async fn nothing_matched_is_said_explicitly() {
    let index = KeywordIndex::in_memory().unwrap();
    index.add([Document::new("a", "something")]).unwrap();
    let tool = search_tool(index).unwrap();
    let text = call(&tool, json!({"query": "unrelated"})).await;
    assert_eq!(
        text,
        "No documents matched \"unrelated\". Try other words, or fewer of them.\n"
    );
    // Same for an index with no documents at all.
    let empty = search_tool(KeywordIndex::in_memory().unwrap()).unwrap();
    assert!(
        call(&empty, json!({"query": "anything"}))
            .await
            .starts_with("No documents matched")
    );
}

#[tokio::test]
async fn empty_query_is_an_error_the_model_reads() {
    let tool = search_tool(KeywordIndex::in_memory().unwrap()).unwrap();
    for query in ["", "   "] {
        match tool.call(ctx(), json!({"query": query})).await {
            Err(CallError::Tool(e)) => {
                assert_eq!(
                    e.message(),
                    "the query is empty: write a few words that describe what to look for"
                );
            }
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn bad_arguments_are_rejected_before_searching() {
    let (index, asked) = fixed(vec![hit("a", "x", 1.0)]);
    let tool = search_tool(index).unwrap();
    for args in [
        json!({}),
        json!({"query": 3}),
        json!({"query": "x", "k": "five"}),
        json!({"query": "x", "limit": 3}),
    ] {
        assert!(
            matches!(
                tool.call(ctx(), args.clone()).await,
                Err(CallError::BadArgs(_))
            ),
            "{args}"
        );
    }
    assert_eq!(asked.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn k_defaults_and_is_clamped() {
    let hits: Vec<Hit> = (0..50)
        .map(|i| hit(&format!("d{i}"), &format!("text {i}"), 50.0 - i as f32))
        .collect();
    let (index, _) = fixed(hits);
    let search = SearchTool::new(index).k(3).max_k(10);
    let tool = search.build().unwrap();
    let count = |text: &str| {
        text.lines()
            .filter(|l| l.starts_with('[') && l.contains("] id: "))
            .count()
    };
    assert_eq!(count(&call(&tool, json!({"query": "x"})).await), 3);
    assert_eq!(
        count(&call(&tool, json!({"query": "x", "k": null})).await),
        3
    );
    assert_eq!(count(&call(&tool, json!({"query": "x", "k": 7})).await), 7);
    assert_eq!(
        count(&call(&tool, json!({"query": "x", "k": 1000})).await),
        10
    );
    assert_eq!(count(&call(&tool, json!({"query": "x", "k": 0})).await), 1);
    assert_eq!(count(&call(&tool, json!({"query": "x", "k": -4})).await), 1);
    assert_eq!(search.run("x", Some(99)).await.unwrap().hits.len(), 10);
}

#[tokio::test]
async fn duplicates_are_removed_before_cutting_to_k() {
    // Ranked: a, a (same id), b (same text as a, spacing aside), c, d.
    let (index, asked) = fixed(vec![
        hit("a", "same  text", 5.0),
        hit("a", "other text", 4.0),
        hit("b", " same text ", 3.0),
        hit("c", "third", 2.0),
        hit("d", "fourth", 1.0),
    ]);
    let search = SearchTool::new(index).k(3);
    let output = search.run("q", None).await.unwrap();
    let ids: Vec<&str> = output.hits.iter().map(|h| h.id.as_str()).collect();
    assert_eq!(ids, ["a", "c", "d"]);
    // It asked again for more than k, to replace the duplicates.
    assert_eq!(asked.load(Ordering::SeqCst), 6);
    assert!(output.text.contains("[3] id: d"));
}

#[tokio::test]
async fn without_duplicates_one_search_of_k_is_enough() {
    let hits: Vec<Hit> = (0..10)
        .map(|i| hit(&format!("d{i}"), &format!("text {i}"), 10.0 - i as f32))
        .collect();
    let (index, asked) = fixed(hits);
    let output = SearchTool::new(index).k(4).run("q", None).await.unwrap();
    assert_eq!(output.hits.len(), 4);
    assert_eq!(asked.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn long_texts_are_cut_on_a_character_boundary_with_a_marker() {
    let long = "€".repeat(1000) + &"x".repeat(500);
    let (index, _) = fixed(vec![hit("long", &long, 1.0), hit("short", "brief", 0.5)]);
    let search = SearchTool::new(index).max_chars(800);
    let output = search.run("q", None).await.unwrap();
    let text = &output.text;
    let expected_cut = format!("{}\n[… truncated: 700 more characters]\n", "€".repeat(800));
    assert!(text.contains(&expected_cut), "{text}");
    // Short texts get no marker; structured hits keep the whole text.
    assert!(text.contains("brief\n") && text.matches("truncated").count() == 1);
    assert_eq!(output.hits[0].text, long);
}

#[tokio::test]
async fn names_and_settings_are_checked() {
    let make = || SearchTool::new(KeywordIndex::in_memory().unwrap());
    assert!(make().name("has space").build().is_err());
    assert!(make().k(0).build().is_err());
    assert!(make().max_chars(0).build().is_err());
    assert!(make().k(10).max_k(5).build().is_err());
    let tool = make()
        .name("search_wiki")
        .description("Search the team wiki.")
        .build()
        .unwrap();
    assert_eq!(tool.name(), "search_wiki");
    assert_eq!(tool.description(), "Search the team wiki.");
}

#[tokio::test]
async fn multibyte_queries_and_documents_through_the_tool() {
    let index = KeywordIndex::in_memory().unwrap();
    index
        .add([Document::new("ja", "東京タワーは".repeat(400)).with_title("東京")])
        .unwrap();
    let tool = SearchTool::new(index).max_chars(10).build().unwrap();
    let text = call(&tool, json!({"query": "東京タワー"})).await;
    assert!(text.starts_with("1 result for \"東京タワー\":"));
    assert!(text.contains("[1] id: ja | title: 東京 | score: "));
    assert!(text.contains("東京タワーは東京タワ\n[… truncated: 2390 more characters]"));
}
