//! Query latency (top 5) of the keyword, vector and hybrid indexes on a synthetic
//! corpus of 50,000 documents, and the overhead of `search_tool` over a direct
//! `Index::search`.
//!
//! ```text
//! cargo bench -p aaa-search --bench search
//! ```
//!
//! The corpus is generated deterministically: a vocabulary of made-up words with a
//! Zipf-like frequency distribution, documents of 40 to 120 words, queries of two to
//! four words of middling frequency.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aaa_search::{
    Document, Fusion, HashingEmbedder, HybridIndex, Index, KeywordIndex, SearchTool, VectorIndex,
};
use aaa_tools::{Tool, ToolContext};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use tokio::runtime::Runtime;

const DOCS: usize = 50_000;
const VOCABULARY: usize = 20_000;
const QUERIES: usize = 64;
const K: usize = 5;

/// xorshift64*: deterministic and fast.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Made-up words from syllables: "tavomi", "reku", ...
fn vocabulary(rng: &mut Rng) -> Vec<String> {
    const SYLLABLES: [&str; 24] = [
        "ta", "vo", "mi", "re", "ku", "sa", "lo", "ne", "pi", "da", "fe", "go", "hu", "ji", "ka",
        "ly", "mo", "nu", "po", "ri", "se", "ti", "wa", "zo",
    ];
    let mut words = std::collections::BTreeSet::new();
    while words.len() < VOCABULARY {
        let len = 2 + rng.below(3);
        let word: String = (0..len)
            .map(|_| SYLLABLES[rng.below(SYLLABLES.len())])
            .collect();
        words.insert(word);
    }
    let mut words: Vec<String> = words.into_iter().collect();
    // Shuffle so that frequency rank is unrelated to spelling.
    for i in (1..words.len()).rev() {
        words.swap(i, rng.below(i + 1));
    }
    words
}

/// A word index drawn from a Zipf(1.0) distribution by inverting its (approximate)
/// cumulative distribution.
fn zipf(rng: &mut Rng, n: usize) -> usize {
    let h_n = (n as f64).ln() + 0.5772;
    let target = rng.unit() * h_n;
    ((target - 0.5772).exp().floor() as usize).min(n - 1)
}

fn corpus() -> (Vec<Document>, Vec<String>) {
    let mut rng = Rng(0x5eed_1234_abcd_0042);
    let words = vocabulary(&mut rng);
    let docs = (0..DOCS)
        .map(|i| {
            let len = 40 + rng.below(81);
            let text: Vec<&str> = (0..len)
                .map(|_| words[zipf(&mut rng, VOCABULARY)].as_str())
                .collect();
            let title = format!(
                "{} {}",
                words[zipf(&mut rng, VOCABULARY)],
                words[rng.below(VOCABULARY)]
            );
            Document::new(format!("doc-{i}"), text.join(" "))
                .with_title(title)
                .with_source(format!("synthetic/{}.txt", i % 100))
        })
        .collect();
    // Queries: 2 to 4 words from ranks 50..5000 (neither stop-word-like nor unseen).
    let queries = (0..QUERIES)
        .map(|_| {
            let n = 2 + rng.below(3);
            (0..n)
                .map(|_| words[50 + rng.below(4950)].as_str())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    (docs, queries)
}

struct Setup {
    keyword: Arc<KeywordIndex>,
    vector: Arc<VectorIndex<HashingEmbedder>>,
    hybrid: Arc<HybridIndex>,
    queries: Vec<String>,
}

fn setup(rt: &Runtime) -> Setup {
    let (docs, queries) = corpus();
    let started = Instant::now();
    let keyword = Arc::new(KeywordIndex::in_memory().expect("keyword index"));
    keyword.add(docs.iter().cloned()).expect("indexing");
    println!(
        "keyword index: {DOCS} documents in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    let vector = Arc::new(VectorIndex::new(HashingEmbedder::default()));
    rt.block_on(vector.add(docs)).expect("embedding");
    println!(
        "vector index: {DOCS} documents, dimension {}, in {:.1} s",
        vector.dimension(),
        started.elapsed().as_secs_f64()
    );
    let hybrid = Arc::new(
        HybridIndex::builder()
            .shared(keyword.clone(), 1.0)
            .shared(vector.clone(), 1.0)
            .build()
            .expect("hybrid"),
    );
    Setup {
        keyword,
        vector,
        hybrid,
        queries,
    }
}

/// The time per call of `direct` searches and of the same searches through `tool`:
/// batches of each alternate, and the fastest batch of each counts, so that other
/// work on the machine (which only ever slows a batch down) distorts the ratio least.
fn overhead(
    rt: &Runtime,
    index: Arc<dyn Index>,
    tool: &Tool,
    queries: &[String],
    batches: usize,
    per_batch: usize,
) -> (Duration, Duration) {
    let mut best_direct = Duration::MAX;
    let mut best_tool = Duration::MAX;
    rt.block_on(async {
        for batch in 0..batches {
            let started = Instant::now();
            for i in 0..per_batch {
                let q = &queries[(batch * per_batch + i) % queries.len()];
                black_box(index.search(q, K).await.expect("search"));
            }
            best_direct = best_direct.min(started.elapsed() / per_batch as u32);
            let started = Instant::now();
            for i in 0..per_batch {
                let q = &queries[(batch * per_batch + i) % queries.len()];
                black_box(
                    tool.call(ToolContext::builder().build(), json!({"query": q}))
                        .await
                        .expect("tool"),
                );
            }
            best_tool = best_tool.min(started.elapsed() / per_batch as u32);
        }
    });
    (best_direct, best_tool)
}

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let s = setup(&rt);

    let mut group = c.benchmark_group("search_top5_50k");
    let indexes: [(&str, Arc<dyn Index>); 3] = [
        ("keyword", s.keyword.clone()),
        ("vector", s.vector.clone()),
        ("hybrid_rrf", s.hybrid.clone()),
    ];
    for (name, index) in &indexes {
        let mut i = 0usize;
        group.bench_function(*name, |b| {
            b.to_async(&rt).iter(|| {
                i += 1;
                let q = &s.queries[i % QUERIES];
                let index = index.clone();
                async move { black_box(index.search(q, K).await.expect("search")) }
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("search_tool_50k");
    let keyword_tool = SearchTool::shared(s.keyword.clone()).build().expect("tool");
    let mut i = 0usize;
    group.bench_function("keyword_direct", |b| {
        b.to_async(&rt).iter(|| {
            i += 1;
            let q = &s.queries[i % QUERIES];
            let index = s.keyword.clone();
            async move { black_box(index.search(q, K).await.expect("search")) }
        })
    });
    let mut i = 0usize;
    group.bench_function("keyword_via_tool", |b| {
        b.to_async(&rt).iter(|| {
            i += 1;
            let q = &s.queries[i % QUERIES];
            let tool = keyword_tool.clone();
            async move {
                black_box(
                    tool.call(ToolContext::builder().build(), json!({"query": q}))
                        .await
                        .expect("tool"),
                )
            }
        })
    });
    group.finish();

    // The overhead ratio, measured directly (criterion reports each side on its own).
    println!(
        "\nsearch_tool overhead over Index::search (top {K}; per call, fastest of alternating batches):"
    );
    let weighted = Arc::new(
        HybridIndex::builder()
            .shared(s.keyword.clone(), 0.8)
            .shared(s.vector.clone(), 0.2)
            .fusion(Fusion::Weighted)
            .build()
            .expect("hybrid"),
    );
    let cases: [(&str, Arc<dyn Index>, usize, usize); 4] = [
        ("keyword", s.keyword.clone(), 40, 128),
        ("vector", s.vector.clone(), 24, 4),
        ("hybrid_rrf", s.hybrid.clone(), 24, 4),
        ("hybrid_weighted", weighted, 24, 4),
    ];
    for (name, index, batches, per_batch) in cases {
        let tool = SearchTool::shared(index.clone()).build().expect("tool");
        let (direct, via_tool) = overhead(&rt, index, &tool, &s.queries, batches, per_batch);
        let ratio = via_tool.as_secs_f64() / direct.as_secs_f64();
        println!(
            "  {name:<16} direct {:>9.1} µs   via tool {:>9.1} µs   added {:>+7.1} µs   ratio {ratio:.3} ({:+.1}%)",
            direct.as_secs_f64() * 1e6,
            via_tool.as_secs_f64() * 1e6,
            (via_tool.as_secs_f64() - direct.as_secs_f64()) * 1e6,
            (ratio - 1.0) * 100.0
        );
    }
}

criterion_group! {
    name = search;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = benches
}
criterion_main!(search);
