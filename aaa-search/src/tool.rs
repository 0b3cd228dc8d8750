//! [`SearchTool`]: any [`Index`] as a tool a model can call.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::Arc;

use aaa_tools::{DefinitionError, Tool, ToolAnnotations, ToolContext};
use serde::Serialize;
use serde_json::{Value, json};

use crate::document::Hit;
use crate::error::SearchError;
use crate::index::Index;

/// The default tool name.
pub const DEFAULT_TOOL_NAME: &str = "search_documents";
/// The default number of results.
pub const DEFAULT_K: usize = 5;
/// The default largest number of results a model may ask for.
pub const DEFAULT_MAX_K: usize = 20;
/// The default number of characters of each result's text shown to the model.
pub const DEFAULT_MAX_CHARS: usize = 800;
/// The longest query echoed back in the output, in characters.
const ECHO_CHARS: usize = 200;

/// A search index as a tool: settings, and the search the tool runs.
///
/// The tool takes `query` (required) and `k` (optional: the default is
/// [`k`](Self::k), values above [`max_k`](Self::max_k) are reduced to it, values
/// below 1 raised to 1). It answers with plain text for the model (see
/// [`render`]); [`run`](Self::run) gives a program the same text together with the
/// structured hits.
///
/// ```
/// use aaa_search::{Document, KeywordIndex, SearchTool};
/// use aaa_tools::ToolContext;
/// use serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let index = KeywordIndex::in_memory().unwrap();
/// index.add([Document::new("faq-1", "Refunds are issued within 14 days.").with_title("Refunds")]).unwrap();
///
/// let search = SearchTool::new(index).name("search_faq").k(3);
/// let tool = search.build().unwrap();
/// assert_eq!(tool.name(), "search_faq");
/// assert_eq!(tool.parameters()["required"], json!(["query"]));
///
/// // What the model gets:
/// let out = tool.call(ToolContext::builder().build(), json!({"query": "refund delay"})).await.unwrap();
/// let text = out.as_str().unwrap();
/// assert!(text.starts_with("1 result for \"refund delay\""));
/// assert!(text.contains("[1] id: faq-1 | title: Refunds | score: "));
///
/// // What the program gets: the same text and the hits.
/// let output = search.run("refund delay", None).await.unwrap();
/// assert_eq!(output.text, text);
/// assert_eq!(output.hits[0].id, "faq-1");
/// # }
/// ```
#[derive(Clone)]
pub struct SearchTool {
    index: Arc<dyn Index>,
    name: String,
    description: Option<String>,
    k: usize,
    max_k: usize,
    max_chars: usize,
}

impl std::fmt::Debug for SearchTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchTool")
            .field("name", &self.name)
            .field("k", &self.k)
            .field("max_k", &self.max_k)
            .field("max_chars", &self.max_chars)
            .finish_non_exhaustive()
    }
}

/// The result of one search through a [`SearchTool`]: the hits after duplicates were
/// removed and the list cut to `k`, and the text the model reads.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchOutput {
    /// The query as given.
    pub query: String,
    /// The hits, best first, texts whole.
    pub hits: Vec<Hit>,
    /// The text for the model (texts cut at the tool's `max_chars`).
    pub text: String,
}

impl SearchTool {
    /// A search tool over `index` with the defaults: name [`DEFAULT_TOOL_NAME`], `k`
    /// [`DEFAULT_K`], `max_k` [`DEFAULT_MAX_K`], `max_chars` [`DEFAULT_MAX_CHARS`].
    pub fn new(index: impl Index + 'static) -> Self {
        Self::shared(Arc::new(index))
    }

    /// A search tool over an index that is also used elsewhere.
    pub fn shared(index: Arc<dyn Index>) -> Self {
        SearchTool {
            index,
            name: DEFAULT_TOOL_NAME.to_owned(),
            description: None,
            k: DEFAULT_K,
            max_k: DEFAULT_MAX_K,
            max_chars: DEFAULT_MAX_CHARS,
        }
    }

    /// Sets the tool name (1 to 64 characters from `[a-zA-Z0-9_-]`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Replaces the description the model reads (say what the collection holds: it is
    /// how the model decides to search it).
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Sets the number of results when the model gives no `k` (at least 1).
    pub fn k(mut self, k: usize) -> Self {
        self.k = k;
        self
    }

    /// Sets the largest `k` a model may ask for (at least the default `k`).
    pub fn max_k(mut self, max_k: usize) -> Self {
        self.max_k = max_k;
        self
    }

    /// Sets how many characters of each result's text the model sees (at least 1).
    pub fn max_chars(mut self, max_chars: usize) -> Self {
        self.max_chars = max_chars;
        self
    }

    fn description_text(&self) -> String {
        self.description.clone().unwrap_or_else(|| {
            format!(
                "Search the document collection for passages that match a query. Returns the best \
                 matches first, each with its id, title or source, relevance score and text \
                 (long texts are cut). Write the query as plain keywords or a short question; \
                 no special syntax is needed. Returns {} results unless `k` asks for another \
                 number (at most {}).",
                self.k, self.max_k
            )
        })
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "What to look for: keywords or a short question in plain words."
                },
                "k": {
                    "type": ["integer", "null"],
                    "description": format!(
                        "How many results to return, 1 to {}; {} when left out.",
                        self.max_k, self.k
                    )
                }
            },
            "required": ["query"],
            "additionalProperties": false
        })
    }

    /// The tool. Fails on an invalid name, `k` or `max_chars` of 0, or `max_k < k`.
    pub fn build(&self) -> Result<Tool, DefinitionError> {
        let invalid = |reason: String| DefinitionError::InvalidOption {
            tool: self.name.clone(),
            reason,
        };
        if self.k == 0 || self.max_chars == 0 {
            return Err(invalid(format!(
                "`k` and `max_chars` must be at least 1 (got {} and {})",
                self.k, self.max_chars
            )));
        }
        if self.max_k < self.k {
            return Err(invalid(format!(
                "`max_k` ({}) must be at least `k` ({})",
                self.max_k, self.k
            )));
        }
        let search = Arc::new(self.clone());
        Tool::from_json_fn(
            self.name.clone(),
            self.description_text(),
            self.parameters(),
            move |_ctx: ToolContext, args: Value| {
                let search = search.clone();
                async move {
                    let query = args
                        .get("query")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    let k = requested_k(args.get("k"), search.max_k);
                    search
                        .run(query, k)
                        .await
                        .map(|output| output.text)
                        .map_err(SearchError::into_tool_error)
                }
            },
        )
        .map(|tool| {
            tool.with_annotations(
                ToolAnnotations::default()
                    .with_title("Search documents")
                    .with_read_only(true)
                    .with_idempotent(true)
                    .with_open_world(false),
            )
        })
    }

    /// Runs one search as the tool does: `k` (the default when `None`) clamped to
    /// `1..=max_k`; duplicates (same id, or same words, see [`dedup`]) dropped
    /// before cutting to `k`, then rendered with [`render`].
    ///
    /// It asks the index for `k` hits; only when duplicates were dropped from a full
    /// list does it ask again for more (twice as many each time, up to 8 `k`), so the
    /// usual search without duplicates costs exactly one `Index::search` of `k`.
    pub async fn run(&self, query: &str, k: Option<usize>) -> Result<SearchOutput, SearchError> {
        let k = k.unwrap_or(self.k).clamp(1, self.max_k.max(1));
        let mut fetch = k;
        let mut hits = loop {
            let found = self.index.search(query, fetch).await?;
            let complete = found.len() < fetch;
            let unique = dedup(found);
            if unique.len() >= k || complete || fetch >= k.saturating_mul(8) {
                break unique;
            }
            fetch = fetch.saturating_mul(2);
        };
        hits.truncate(k);
        let text = render(query, &hits, self.max_chars);
        Ok(SearchOutput {
            query: query.to_owned(),
            hits,
            text,
        })
    }
}

/// The `k` a model asked for: `None` when absent or null, clamped to `1..=max_k`.
fn requested_k(value: Option<&Value>, max_k: usize) -> Option<usize> {
    let value = value.filter(|v| !v.is_null())?;
    let k = match (value.as_i64(), value.as_u64()) {
        (Some(n), _) if n < 1 => 1,
        (Some(n), _) => usize::try_from(n).unwrap_or(max_k),
        (None, Some(_)) => max_k,
        (None, None) => return None,
    };
    Some(k.min(max_k.max(1)))
}

/// A tool named [`DEFAULT_TOOL_NAME`] over `index`, with the default `k`
/// ([`DEFAULT_K`]), `max_k` ([`DEFAULT_MAX_K`]) and `max_chars`
/// ([`DEFAULT_MAX_CHARS`]). Use [`SearchTool`] for other settings.
///
/// ```
/// use aaa_search::{KeywordIndex, search_tool};
///
/// let tool = search_tool(KeywordIndex::in_memory().unwrap()).unwrap();
/// assert_eq!(tool.name(), "search_documents");
/// assert!(tool.description().contains("Returns 5 results"));
/// ```
pub fn search_tool(index: impl Index + 'static) -> Result<Tool, DefinitionError> {
    SearchTool::new(index).build()
}

/// Drops hits whose id, or whose non-blank text, was seen earlier in the list; keeps
/// the order. Texts are the same when their words are, whatever (ASCII) whitespace
/// separates them.
///
/// Texts are compared in full only when their first 32 bytes of words match, so a
/// list without duplicates costs a few dozen bytes read per hit, whatever the texts'
/// length.
///
/// ```
/// use aaa_search::{Document, Hit, dedup};
///
/// let hit = |id: &str, text: &str| Hit::from_document(Document::new(id, text), 1.0);
/// let kept = dedup(vec![hit("a", "x  y"), hit("a", "other"), hit("b", "x\ny "), hit("c", "z")]);
/// assert_eq!(kept.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(), ["a", "c"]);
/// ```
pub fn dedup(mut hits: Vec<Hit>) -> Vec<Hit> {
    if hits.len() < 2 {
        return hits;
    }
    let mut keep = Vec::with_capacity(hits.len());
    {
        let mut ids: HashSet<&str> = HashSet::with_capacity(hits.len());
        let mut by_prefix: HashMap<([u8; PREFIX], usize), Vec<&str>> =
            HashMap::with_capacity(hits.len());
        for hit in &hits {
            let unique = ids.insert(hit.id.as_str())
                && match words_prefix(&hit.text) {
                    (_, 0) => true,
                    prefix => {
                        let same_prefix = by_prefix.entry(prefix).or_default();
                        let seen = same_prefix.iter().any(|t| same_words(t, &hit.text));
                        if !seen {
                            same_prefix.push(&hit.text);
                        }
                        !seen
                    }
                };
            keep.push(unique);
        }
    }
    let mut flags = keep.into_iter();
    hits.retain(|_| flags.next().unwrap_or(true));
    hits
}

/// How many bytes of a text's words [`dedup`] compares before comparing whole texts.
const PREFIX: usize = 32;

/// The first [`PREFIX`] bytes of the text with ASCII whitespace left out, and how many
/// there are (fewer only for short texts; 0 for blank ones).
fn words_prefix(text: &str) -> ([u8; PREFIX], usize) {
    let mut prefix = [0u8; PREFIX];
    let mut len = 0;
    for byte in text.bytes().filter(|b| !b.is_ascii_whitespace()) {
        prefix[len] = byte;
        len += 1;
        if len == PREFIX {
            break;
        }
    }
    (prefix, len)
}

/// Whether two texts have the same words.
fn same_words(a: &str, b: &str) -> bool {
    a.split_ascii_whitespace().eq(b.split_ascii_whitespace())
}

/// The text a model reads for `hits`: a header line, then each hit numbered from 1
/// with its id, title, source and score, and its text cut at `max_chars` characters
/// (never inside a character) with a visible marker saying how much was cut. When
/// there are no hits, one line says so.
///
/// ```
/// use aaa_search::{Document, Hit, render};
///
/// let hits = [Hit::from_document(Document::new("a", "héllo wörld").with_source("x.md"), 2.5)];
/// assert_eq!(
///     render("hello", &hits, 5),
///     "1 result for \"hello\":\n\n[1] id: a | source: x.md | score: 2.5000\nhéllo\n[… truncated: 6 more characters]\n"
/// );
/// assert_eq!(
///     render("zzz", &[], 5),
///     "No documents matched \"zzz\". Try other words, or fewer of them.\n"
/// );
/// ```
pub fn render(query: &str, hits: &[Hit], max_chars: usize) -> String {
    let echo = cut(query.trim(), ECHO_CHARS).0;
    if hits.is_empty() {
        return format!("No documents matched {echo:?}. Try other words, or fewer of them.\n");
    }
    // Texts are the bulk of the output: reserve for them up front.
    let capacity: usize = hits
        .iter()
        .map(|h| h.text.len().min(max_chars.saturating_mul(4)) + 160)
        .sum();
    let mut out = String::with_capacity(capacity + 64);
    let noun = if hits.len() == 1 { "result" } else { "results" };
    let _ = writeln!(out, "{} {noun} for {echo:?}:", hits.len());
    for (i, hit) in hits.iter().enumerate() {
        let _ = write!(out, "\n[{}] id: ", i + 1);
        push_one_line(&mut out, &hit.id);
        if let Some(title) = non_blank(&hit.metadata.title) {
            out.push_str(" | title: ");
            push_one_line(&mut out, title);
        }
        if let Some(source) = non_blank(&hit.metadata.source) {
            out.push_str(" | source: ");
            push_one_line(&mut out, source);
        }
        out.push_str(" | score: ");
        push_score(&mut out, hit.score);
        out.push('\n');
        let (text, rest) = cut(hit.text.trim(), max_chars);
        if !text.is_empty() {
            out.push_str(text);
            out.push('\n');
        }
        if rest > 0 {
            let _ = writeln!(out, "[… truncated: {rest} more characters]");
        }
    }
    out
}

fn non_blank(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|v| !v.trim().is_empty())
}

/// The first `max` characters of `text` and how many characters were left out.
fn cut(text: &str, max: usize) -> (&str, usize) {
    if text.len() <= max {
        // No more bytes than `max`, so no more characters.
        return (text, 0);
    }
    match text.char_indices().nth(max) {
        Some((byte, _)) => (&text[..byte], text[byte..].chars().count()),
        None => (text, 0),
    }
}

/// Appends a score with four decimals, as `{:.4}` does but without the cost of
/// formatting a float at a given precision (the integer path is several times faster,
/// and the tool formats a score per hit).
fn push_score(out: &mut String, score: f32) {
    let scaled = (f64::from(score) * 10_000.0).round();
    if scaled.is_finite() && scaled.abs() < 1e15 {
        let scaled = scaled as i64;
        let sign = if scaled < 0 { "-" } else { "" };
        let magnitude = scaled.unsigned_abs();
        let _ = write!(
            out,
            "{sign}{}.{:04}",
            magnitude / 10_000,
            magnitude % 10_000
        );
    } else {
        let _ = write!(out, "{score:.4}");
    }
}

/// Appends a header value on one line (control characters become spaces), cut at
/// 200 characters with an ellipsis.
fn push_one_line(out: &mut String, value: &str) {
    let (short, rest) = cut(value.trim(), ECHO_CHARS);
    if short.chars().any(char::is_control) {
        out.extend(short.chars().map(|c| if c.is_control() { ' ' } else { c }));
    } else {
        out.push_str(short);
    }
    if rest > 0 {
        out.push('…');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::Document;

    #[test]
    fn cut_counts_characters_not_bytes() {
        assert_eq!(cut("日本語のテキスト", 3), ("日本語", 5));
        assert_eq!(cut("abc", 3), ("abc", 0));
        assert_eq!(cut("", 3), ("", 0));
        assert_eq!(cut("👍🏽ok", 1), ("👍", 3));
    }

    #[test]
    fn scores_have_four_decimals() {
        let show = |score: f32| {
            let mut out = String::new();
            push_score(&mut out, score);
            out
        };
        assert_eq!(show(2.5), "2.5000");
        assert_eq!(show(0.016393442), "0.0164");
        assert_eq!(show(12.34567), "12.3457");
        assert_eq!(show(-0.25), "-0.2500");
        assert_eq!(show(-0.00001), "0.0000");
        assert_eq!(show(0.0), "0.0000");
        assert_eq!(show(1e20), format!("{:.4}", 1e20f32));
        assert_eq!(show(f32::INFINITY), "inf");
    }

    #[test]
    fn requested_k_is_clamped() {
        assert_eq!(requested_k(None, 20), None);
        assert_eq!(requested_k(Some(&Value::Null), 20), None);
        assert_eq!(requested_k(Some(&json!(3)), 20), Some(3));
        assert_eq!(requested_k(Some(&json!(0)), 20), Some(1));
        assert_eq!(requested_k(Some(&json!(-7)), 20), Some(1));
        assert_eq!(requested_k(Some(&json!(500)), 20), Some(20));
        assert_eq!(requested_k(Some(&json!(u64::MAX)), 20), Some(20));
    }

    #[test]
    fn header_values_are_single_lines() {
        let hit = Hit::from_document(Document::new("a\nb", "t").with_title("line1\nline2"), 1.0);
        let text = render("q", &[hit], 10);
        assert!(text.contains("[1] id: a b | title: line1 line2 | score: 1.0000\n"));
    }
}
