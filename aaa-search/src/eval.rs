//! Retrieval metrics with `trec_eval`'s definitions: MAP, P@k, nDCG@k.
//!
//! A ranking is a list of document ids, best first; judgments map document ids to
//! graded relevance (`> 0` is relevant, as `trec_eval` counts by default). A document
//! id that appears twice in a ranking counts once, at its first position.
//!
//! ```
//! use aaa_search::eval::{Qrels, average_precision, evaluate};
//! use std::collections::HashMap;
//!
//! let qrels = Qrels::parse("q1 d1 1\nq1 d3 2\nq1 d9 0\n").unwrap();
//! let judged = qrels.judgments("q1").unwrap();
//! // d1 relevant at rank 1 (precision 1), d3 at rank 3 (precision 2/3): (1 + 2/3) / 2.
//! let ap = average_precision(&["d1", "d2", "d3"], judged);
//! assert!((ap - 5.0 / 6.0).abs() < 1e-12);
//!
//! let run = HashMap::from([("q1".to_string(), vec!["d1".to_string(), "d2".into(), "d3".into()])]);
//! let metrics = evaluate(&qrels, &run);
//! assert_eq!(metrics.queries, 1);
//! assert!((metrics.map - 5.0 / 6.0).abs() < 1e-12);
//! ```

use std::collections::{BTreeMap, HashMap, HashSet};

/// Relevance judgments: for each query, the grade of each judged document.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Qrels {
    judgments: BTreeMap<String, HashMap<String, i32>>,
}

/// A qrels line that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("qrels line {line}: {reason}")]
pub struct QrelsError {
    /// The 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

impl Qrels {
    /// Reads judgments in TREC form, one a line: `query doc grade`, or
    /// `query iteration doc grade` (the iteration column is ignored). Blank lines are
    /// skipped; a judgment given twice keeps the last grade.
    pub fn parse(text: &str) -> Result<Self, QrelsError> {
        let mut qrels = Qrels::default();
        for (i, line) in text.lines().enumerate() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (query, doc, grade) = match fields.as_slice() {
                [] => continue,
                [q, d, g] | [q, _, d, g] => (*q, *d, *g),
                _ => {
                    return Err(QrelsError {
                        line: i + 1,
                        reason: format!("expected 3 or 4 columns, found {}", fields.len()),
                    });
                }
            };
            let grade = grade.parse::<i32>().map_err(|e| QrelsError {
                line: i + 1,
                reason: format!("grade {grade:?}: {e}"),
            })?;
            qrels.insert(query, doc, grade);
        }
        Ok(qrels)
    }

    /// Adds (or replaces) one judgment.
    pub fn insert(&mut self, query: impl Into<String>, doc: impl Into<String>, grade: i32) {
        self.judgments
            .entry(query.into())
            .or_default()
            .insert(doc.into(), grade);
    }

    /// The judgments of one query.
    pub fn judgments(&self, query: &str) -> Option<&HashMap<String, i32>> {
        self.judgments.get(query)
    }

    /// The judged queries, in order.
    pub fn queries(&self) -> impl Iterator<Item = &str> {
        self.judgments.keys().map(String::as_str)
    }
}

/// The number of relevant (grade `> 0`) documents judged.
fn relevant_count(judgments: &HashMap<String, i32>) -> usize {
    judgments.values().filter(|g| **g > 0).count()
}

/// The ranking with repeated ids dropped (first occurrence kept).
fn distinct<S: AsRef<str>>(ranking: &[S]) -> impl Iterator<Item = &str> {
    let mut seen = HashSet::new();
    ranking
        .iter()
        .map(AsRef::as_ref)
        .filter(move |id| seen.insert(*id))
}

/// Average precision: the mean, over all relevant documents, of the precision at the
/// rank each is retrieved (0 for those not retrieved). 0 when nothing is relevant.
pub fn average_precision<S: AsRef<str>>(ranking: &[S], judgments: &HashMap<String, i32>) -> f64 {
    let relevant = relevant_count(judgments);
    if relevant == 0 {
        return 0.0;
    }
    let mut found = 0usize;
    let mut sum = 0.0;
    for (i, id) in distinct(ranking).enumerate() {
        if judgments.get(id).is_some_and(|g| *g > 0) {
            found += 1;
            sum += found as f64 / (i + 1) as f64;
        }
    }
    sum / relevant as f64
}

/// Precision at `k`: relevant documents among the first `k`, divided by `k` (even when
/// fewer than `k` were retrieved, as `trec_eval`'s `P.k`). 0 for `k == 0`.
pub fn precision_at<S: AsRef<str>>(
    ranking: &[S],
    judgments: &HashMap<String, i32>,
    k: usize,
) -> f64 {
    if k == 0 {
        return 0.0;
    }
    let hits = distinct(ranking)
        .take(k)
        .filter(|id| judgments.get(*id).is_some_and(|g| *g > 0))
        .count();
    hits as f64 / k as f64
}

/// nDCG at `k` as `trec_eval`'s `ndcg_cut.k`: gain is the grade itself (negative
/// grades count 0), discounted by `log2(rank + 1)`, divided by the same sum over the
/// judged grades in the best order. 0 when nothing is relevant.
pub fn ndcg_at<S: AsRef<str>>(ranking: &[S], judgments: &HashMap<String, i32>, k: usize) -> f64 {
    let discount = |i: usize| ((i + 2) as f64).log2();
    let dcg: f64 = distinct(ranking)
        .take(k)
        .enumerate()
        .map(|(i, id)| f64::from(judgments.get(id).copied().unwrap_or(0).max(0)) / discount(i))
        .sum();
    let mut ideal: Vec<i32> = judgments.values().copied().filter(|g| *g > 0).collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let idcg: f64 = ideal
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, g)| f64::from(*g) / discount(i))
        .sum();
    if idcg == 0.0 { 0.0 } else { dcg / idcg }
}

/// Mean metrics over a set of queries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Metrics {
    /// Mean average precision.
    pub map: f64,
    /// Mean precision at 30.
    pub p_at_30: f64,
    /// Mean nDCG at 10.
    pub ndcg_at_10: f64,
    /// The number of queries averaged.
    pub queries: usize,
}

/// MAP, P@30 and nDCG@10 of `run` (query id to ranking), averaged over the queries of
/// `qrels` that have at least one relevant document. A judged query missing from the
/// run counts as 0, as with `trec_eval -c`; queries of the run without judgments are
/// ignored.
pub fn evaluate<S: AsRef<str>>(qrels: &Qrels, run: &HashMap<String, Vec<S>>) -> Metrics {
    let mut sums = (0.0, 0.0, 0.0);
    let mut queries = 0usize;
    for (query, judgments) in &qrels.judgments {
        if relevant_count(judgments) == 0 {
            continue;
        }
        queries += 1;
        let empty: Vec<S> = Vec::new();
        let ranking = run.get(query).unwrap_or(&empty);
        sums.0 += average_precision(ranking, judgments);
        sums.1 += precision_at(ranking, judgments, 30);
        sums.2 += ndcg_at(ranking, judgments, 10);
    }
    let n = queries.max(1) as f64;
    Metrics {
        map: sums.0 / n,
        p_at_30: sums.1 / n,
        ndcg_at_10: sums.2 / n,
        queries,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(pairs: &[(&str, i32)]) -> HashMap<String, i32> {
        pairs.iter().map(|(d, g)| ((*d).to_owned(), *g)).collect()
    }

    #[test]
    fn average_precision_by_hand() {
        // 3 relevant; retrieved at ranks 2 and 4; the third never.
        // AP = (1/2 + 2/4) / 3 = 1/3.
        let j = judged(&[("a", 1), ("b", 1), ("c", 1), ("x", 0)]);
        let ap = average_precision(&["x", "a", "y", "b", "z"], &j);
        assert!((ap - 1.0 / 3.0).abs() < 1e-12);
        // Perfect ranking.
        assert!((average_precision(&["a", "b", "c"], &j) - 1.0).abs() < 1e-12);
        // Nothing relevant judged, or nothing retrieved.
        assert_eq!(average_precision(&["a"], &judged(&[("a", 0)])), 0.0);
        assert_eq!(average_precision::<&str>(&[], &j), 0.0);
    }

    #[test]
    fn duplicates_count_once() {
        let j = judged(&[("a", 1), ("b", 1)]);
        // Without dedup "a" twice would give (1 + 2/2 + ...) > 1.
        let ap = average_precision(&["a", "a", "b"], &j);
        assert!((ap - 1.0).abs() < 1e-12);
        assert!((precision_at(&["a", "a", "c"], &j, 2) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn precision_divides_by_k() {
        let j = judged(&[("a", 1), ("b", 2)]);
        assert!((precision_at(&["a", "b"], &j, 30) - 2.0 / 30.0).abs() < 1e-12);
        assert!((precision_at(&["a", "x", "b"], &j, 2) - 0.5).abs() < 1e-12);
        assert_eq!(precision_at(&["a"], &j, 0), 0.0);
    }

    #[test]
    fn ndcg_by_hand() {
        // Grades: a=3, b=2, c=1 (c not retrieved). Ranking: b, x, a.
        // DCG@3 = 2/log2(2) + 0 + 3/log2(4) = 2 + 1.5 = 3.5
        // IDCG@3 = 3/1 + 2/log2(3) + 1/2 = 3.5 + 1.2618595071429148
        let j = judged(&[("a", 3), ("b", 2), ("c", 1), ("z", -1)]);
        let got = ndcg_at(&["b", "x", "a"], &j, 3);
        let ideal = 3.0 + 2.0 / 3f64.log2() + 0.5;
        assert!((got - 3.5 / ideal).abs() < 1e-12);
        // Cut at 1: b (2) against a (3).
        assert!((ndcg_at(&["b", "x", "a"], &j, 1) - 2.0 / 3.0).abs() < 1e-12);
        assert!((ndcg_at(&["a", "b", "c"], &j, 10) - 1.0).abs() < 1e-12);
        assert_eq!(ndcg_at(&["a"], &judged(&[("a", 0)]), 10), 0.0);
    }

    #[test]
    fn evaluate_averages_over_judged_queries_and_counts_missing_runs_as_zero() {
        let qrels = Qrels::parse("q1 0 a 1\nq2 0 b 1\nq3 0 c 0\n\n").unwrap();
        let run: HashMap<String, Vec<&str>> = HashMap::from([
            ("q1".to_owned(), vec!["a"]),
            ("q3".to_owned(), vec!["c"]),
            ("q9".to_owned(), vec!["a"]),
        ]);
        let m = evaluate(&qrels, &run);
        // q3 has nothing relevant (skipped), q2 has no run (0), q1 is perfect.
        assert_eq!(m.queries, 2);
        assert!((m.map - 0.5).abs() < 1e-12);
        assert!((m.ndcg_at_10 - 0.5).abs() < 1e-12);
        assert!((m.p_at_30 - 1.0 / 60.0).abs() < 1e-12);
    }

    #[test]
    fn qrels_parse_errors_name_the_line() {
        let err = Qrels::parse("q1 a 1\nq1 b\n").unwrap_err();
        assert_eq!(err.line, 2);
        let err = Qrels::parse("q1 a high\n").unwrap_err();
        assert!(err.reason.contains("high"));
        let q = Qrels::parse("q1 a 1\nq1 a 2\n").unwrap();
        assert_eq!(q.judgments("q1").unwrap()["a"], 2);
        assert_eq!(q.queries().collect::<Vec<_>>(), ["q1"]);
    }
}
