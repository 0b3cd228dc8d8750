//! Measures the keyword, vector and hybrid indexes of `aaa-search` on test collections
//! with relevance judgments (CACM, Cranfield), and prints MAP, P@30 and nDCG@10 next to
//! the published figures.
//!
//! ```text
//! cargo run --release --example ir_eval -- DIR
//! ```
//!
//! `DIR` is a collection folder, or a folder of collection folders. A collection
//! folder holds `docs.tsv` (`doc_id<TAB>text`), `queries.tsv` (`query_id<TAB>text`)
//! and `qrels.txt` (`query_id doc_id grade`, or the four-column TREC form).
//!
//! Every query retrieves the top 1000 documents, as in the published runs; the
//! metrics are `trec_eval`'s (see `aaa_search::eval`).

use std::collections::HashMap;
use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use aaa_search::eval::{Metrics, Qrels, evaluate};
use aaa_search::{
    Bm25, Document, Fusion, HashingEmbedder, HybridIndex, Index, KeywordIndex, VectorIndex,
};

/// Hits per query, as in the published runs.
const DEPTH: usize = 1000;
/// The keyword index's share in the weighted hybrid.
const KEYWORD_WEIGHT: f32 = 0.8;
/// The vector index's share in the weighted hybrid.
const VECTOR_WEIGHT: f32 = 0.2;

/// A published result to print beside ours.
struct Published {
    collection: &'static str,
    index: &'static str,
    map: f64,
    p_at_30: f64,
    source: &'static str,
}

const PUBLISHED: &[Published] = &[Published {
    collection: "cacm",
    index: "keyword",
    map: 0.3123,
    p_at_30: 0.1942,
    source: "Anserini BM25 k1=0.9 b=0.4, Porter",
}];

/// One test collection.
struct Collection {
    name: String,
    docs: Vec<Document>,
    queries: Vec<(String, String)>,
    qrels: Qrels,
}

fn read_tsv(path: &Path) -> Result<Vec<(String, String)>, Box<dyn Error>> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| match line.split_once('\t') {
            Some((id, body)) => (id.trim().to_owned(), body.to_owned()),
            None => (line.trim().to_owned(), String::new()),
        })
        .collect())
}

fn load(dir: &Path) -> Result<Collection, Box<dyn Error>> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string());
    let docs = read_tsv(&dir.join("docs.tsv"))?
        .into_iter()
        .map(|(id, text)| Document::new(id, text))
        .collect();
    let queries = read_tsv(&dir.join("queries.tsv"))?;
    let qrels_path = dir.join("qrels.txt");
    let qrels_text = std::fs::read_to_string(&qrels_path)
        .map_err(|e| format!("{}: {e}", qrels_path.display()))?;
    let qrels = Qrels::parse(&qrels_text)?;
    Ok(Collection {
        name,
        docs,
        queries,
        qrels,
    })
}

/// The collection folders under `dir` (or `dir` itself).
fn collections(dir: &Path) -> Result<Vec<PathBuf>, Box<dyn Error>> {
    if dir.join("docs.tsv").is_file() {
        return Ok(vec![dir.to_path_buf()]);
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.join("docs.tsv").is_file())
        .collect();
    found.sort();
    if found.is_empty() {
        return Err(format!(
            "no collection (a folder with docs.tsv) in {}",
            dir.display()
        )
        .into());
    }
    Ok(found)
}

/// Runs every query and scores the run; returns the metrics and the mean query time.
async fn measure(
    index: &dyn Index,
    collection: &Collection,
) -> Result<(Metrics, f64), Box<dyn Error>> {
    let mut run: HashMap<String, Vec<String>> = HashMap::new();
    let started = Instant::now();
    for (id, text) in &collection.queries {
        let hits = match index.search(text, DEPTH).await {
            Ok(hits) => hits,
            Err(aaa_search::SearchError::EmptyQuery) => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        run.insert(id.clone(), hits.into_iter().map(|h| h.id).collect());
    }
    let per_query_ms =
        started.elapsed().as_secs_f64() * 1000.0 / collection.queries.len().max(1) as f64;
    Ok((evaluate(&collection.qrels, &run), per_query_ms))
}

fn published(collection: &str, index: &str) -> String {
    PUBLISHED
        .iter()
        .find(|p| p.collection == collection && p.index == index)
        .map(|p| format!("MAP {:.4} P@30 {:.4} ({})", p.map, p.p_at_30, p.source))
        .unwrap_or_else(|| "-".to_owned())
}

async fn evaluate_collection(collection: &Collection) -> Result<(), Box<dyn Error>> {
    let started = Instant::now();
    let keyword = Arc::new(KeywordIndex::in_memory()?);
    keyword.add(collection.docs.iter().cloned())?;
    let keyword_secs = started.elapsed().as_secs_f64();

    let mut classic = KeywordIndex::in_memory()?;
    classic.set_bm25(Bm25::CLASSIC)?;
    classic.add(collection.docs.iter().cloned())?;

    let started = Instant::now();
    let vector = Arc::new(VectorIndex::new(HashingEmbedder::default()));
    vector.add(collection.docs.iter().cloned()).await?;
    let vector_secs = started.elapsed().as_secs_f64();

    let rrf = HybridIndex::builder()
        .shared(keyword.clone(), 1.0)
        .shared(vector.clone(), 1.0)
        .candidates(DEPTH)
        .build()?;
    let weighted_rrf = HybridIndex::builder()
        .shared(keyword.clone(), KEYWORD_WEIGHT)
        .shared(vector.clone(), VECTOR_WEIGHT)
        .candidates(DEPTH)
        .build()?;
    let weighted = HybridIndex::builder()
        .shared(keyword.clone(), KEYWORD_WEIGHT)
        .shared(vector.clone(), VECTOR_WEIGHT)
        .fusion(Fusion::Weighted)
        .candidates(DEPTH)
        .build()?;

    println!(
        "\n{}: {} documents, {} queries, {} judged with a relevant document (indexing: keyword {:.2} s, vector {:.2} s)",
        collection.name,
        collection.docs.len(),
        collection.queries.len(),
        collection
            .qrels
            .queries()
            .filter(|q| collection
                .qrels
                .judgments(q)
                .is_some_and(|j| j.values().any(|g| *g > 0)))
            .count(),
        keyword_secs,
        vector_secs,
    );
    println!(
        "{:<46} {:>7} {:>7} {:>8} {:>9}  published",
        "index", "MAP", "P@30", "nDCG@10", "ms/query"
    );
    let rows: [(&str, &str, &dyn Index); 6] = [
        ("keyword", "keyword: BM25 k1=0.9 b=0.4 (default)", &*keyword),
        ("keyword-classic", "keyword: BM25 k1=1.2 b=0.75", &classic),
        (
            "vector",
            "vector: HashingEmbedder (lexical stand-in)",
            &*vector,
        ),
        ("hybrid-rrf", "hybrid: RRF k=60, weights 1 : 1", &rrf),
        (
            "hybrid-wrrf",
            "hybrid: RRF k=60, weights 0.8 : 0.2",
            &weighted_rrf,
        ),
        (
            "hybrid-weighted",
            "hybrid: weighted min-max, 0.8 : 0.2",
            &weighted,
        ),
    ];
    let mut keyword_map = 0.0;
    for (key, label, index) in rows {
        let (m, ms) = measure(index, collection).await?;
        if key == "keyword" {
            keyword_map = m.map;
        }
        let delta = if key.starts_with("hybrid") {
            format!(" ({:+.4} vs keyword)", m.map - keyword_map)
        } else {
            String::new()
        };
        println!(
            "{label:<46} {:>7.4} {:>7.4} {:>8.4} {:>9.2}  {}{delta}",
            m.map,
            m.p_at_30,
            m.ndcg_at_10,
            ms,
            published(&collection.name, key),
        );
    }
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let Some(dir) = std::env::args_os().nth(1) else {
        eprintln!("usage: ir_eval DIR  (a collection folder, or a folder of them)");
        std::process::exit(2);
    };
    for path in collections(Path::new(&dir))? {
        let collection = load(&path)?;
        evaluate_collection(&collection).await?;
    }
    Ok(())
}
