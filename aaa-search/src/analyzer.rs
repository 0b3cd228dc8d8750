//! [`Analyzer`]: how text becomes the terms a keyword index stores and a query looks up.

use serde::{Deserialize, Serialize};
use tantivy::tokenizer::{Stemmer, StopWordFilter, TextAnalyzer, Token, TokenStream, Tokenizer};
use unicode_segmentation::UnicodeSegmentation;

pub use tantivy::tokenizer::Language;

/// Lucene's English stop words (`EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`), the list the
/// published BM25 baselines were measured with: short enough to keep words such as
/// "about" or "system" that carry meaning in queries.
pub const ENGLISH_STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
];

/// Longer words are cut into pieces of this many characters (as Lucene's standard
/// tokenizer does), so that a run of letters with no break, such as a base64 blob or a
/// long Thai sentence, neither hits the engine's term-length limit nor vanishes.
pub const MAX_TOKEN_CHARS: usize = 255;

/// The analysis chain of a keyword index: words by Unicode rules, lowercased, stop words
/// removed, stemmed.
///
/// - Words are found by the Unicode word-boundary rules (UAX #29), the rules Lucene's
///   standard tokenizer follows: `don't` and `3.14` are one word each, punctuation and
///   whitespace are dropped, and each Chinese or Japanese ideograph is a word of its
///   own, so text in scripts written without spaces is still searchable.
/// - Words are lowercased; with [`Analyzer::english`] a trailing possessive `'s` is
///   removed.
/// - Stop words are removed, then words are stemmed (Snowball).
///
/// The same analyzer must read the documents and the queries; a
/// [`KeywordIndex`](crate::KeywordIndex) stores its analyzer with the index and uses it
/// for both.
///
/// ```
/// use aaa_search::{Analyzer, Language};
///
/// let english = Analyzer::english();
/// assert_eq!(english.analyze("The engine's RUNNING tests, don't stop!"), ["engin", "run", "test", "don't", "stop"]);
///
/// let plain = Analyzer::simple();
/// assert_eq!(plain.analyze("The running tests"), ["the", "running", "tests"]);
///
/// let french = Analyzer::simple().with_stemmer(Some(Language::French)).with_stop_words(["le", "la"]);
/// assert_eq!(french.analyze("la maison"), ["maison"]);
///
/// // Chinese: one term per ideograph.
/// assert_eq!(plain.analyze("搜索引擎"), ["搜", "索", "引", "擎"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Analyzer {
    stemmer: Option<Language>,
    stop_words: Vec<String>,
    strip_possessive: bool,
}

impl Default for Analyzer {
    /// [`Analyzer::english`].
    fn default() -> Self {
        Analyzer::english()
    }
}

impl Analyzer {
    /// English: Snowball English stemmer, Lucene's English stop words
    /// ([`ENGLISH_STOP_WORDS`]), possessive `'s` removed. The default.
    pub fn english() -> Self {
        Analyzer {
            stemmer: Some(Language::English),
            stop_words: ENGLISH_STOP_WORDS.iter().map(|w| (*w).to_owned()).collect(),
            strip_possessive: true,
        }
    }

    /// Words lowercased, nothing removed, nothing stemmed: for identifiers, code, or
    /// languages without a stemmer.
    pub fn simple() -> Self {
        Analyzer {
            stemmer: None,
            stop_words: Vec::new(),
            strip_possessive: false,
        }
    }

    /// Sets the stemmer (`None`: no stemming).
    pub fn with_stemmer(mut self, stemmer: Option<Language>) -> Self {
        self.stemmer = stemmer;
        self
    }

    /// Replaces the stop words (compared after lowercasing; an empty list removes none).
    pub fn with_stop_words<I, S>(mut self, words: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut words: Vec<String> = words
            .into_iter()
            .map(|w| w.as_ref().to_lowercase())
            .collect();
        words.sort();
        words.dedup();
        self.stop_words = words;
        self
    }

    /// Sets whether a trailing `'s` is removed from words.
    pub fn with_possessive_stripping(mut self, strip: bool) -> Self {
        self.strip_possessive = strip;
        self
    }

    /// The stemmer, if any.
    pub fn stemmer(&self) -> Option<Language> {
        self.stemmer
    }

    /// The stop words.
    pub fn stop_words(&self) -> &[String] {
        &self.stop_words
    }

    /// The terms of `text`, in order, repeats kept.
    pub fn analyze(&self, text: &str) -> Vec<String> {
        let mut analyzer = self.text_analyzer();
        let mut stream = analyzer.token_stream(text);
        let mut terms = Vec::new();
        while let Some(token) = stream.next() {
            terms.push(token.text.clone());
        }
        terms
    }

    /// The tantivy analyzer that does the same.
    pub(crate) fn text_analyzer(&self) -> TextAnalyzer {
        let mut builder = TextAnalyzer::builder(WordTokenizer {
            strip_possessive: self.strip_possessive,
        })
        .dynamic();
        if !self.stop_words.is_empty() {
            builder = builder.filter_dynamic(StopWordFilter::remove(self.stop_words.clone()));
        }
        if let Some(language) = self.stemmer {
            builder = builder.filter_dynamic(Stemmer::new(language));
        }
        builder.build()
    }
}

/// Splits text into lowercased Unicode words (see [`Analyzer`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct WordTokenizer {
    strip_possessive: bool,
}

impl Tokenizer for WordTokenizer {
    type TokenStream<'a> = VecTokenStream;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> VecTokenStream {
        let mut tokens = Vec::new();
        for (offset, word) in text.unicode_word_indices() {
            let mut lower = word.to_lowercase();
            if self.strip_possessive {
                strip_possessive(&mut lower);
            }
            push_pieces(&mut tokens, offset, offset + word.len(), &lower);
        }
        VecTokenStream {
            tokens,
            next: 0,
            current: Token::default(),
        }
    }
}

/// Removes a trailing `'s` (with a straight or curly apostrophe) from a word longer than it.
fn strip_possessive(word: &mut String) {
    for suffix in ["'s", "\u{2019}s", "\u{ff07}s"] {
        if word.len() > suffix.len() && word.ends_with(suffix) {
            word.truncate(word.len() - suffix.len());
            return;
        }
    }
}

/// Pushes `word` as one token, or as pieces of [`MAX_TOKEN_CHARS`] characters.
fn push_pieces(tokens: &mut Vec<Token>, from: usize, to: usize, word: &str) {
    let mut rest = word;
    while !rest.is_empty() {
        let cut = rest
            .char_indices()
            .nth(MAX_TOKEN_CHARS)
            .map_or(rest.len(), |(i, _)| i);
        let (piece, tail) = rest.split_at(cut);
        tokens.push(Token {
            offset_from: from,
            offset_to: to,
            position: tokens.len(),
            text: piece.to_owned(),
            position_length: 1,
        });
        rest = tail;
    }
}

/// A token stream over tokens found up front.
#[derive(Debug)]
pub(crate) struct VecTokenStream {
    tokens: Vec<Token>,
    next: usize,
    current: Token,
}

impl TokenStream for VecTokenStream {
    fn advance(&mut self) -> bool {
        match self.tokens.get_mut(self.next) {
            Some(token) => {
                self.current = std::mem::take(token);
                self.next += 1;
                true
            }
            None => false,
        }
    }

    fn token(&self) -> &Token {
        &self.current
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.current
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_stems_and_drops_stop_words() {
        let a = Analyzer::english();
        assert_eq!(
            a.analyze("The computers are computing"),
            ["comput", "comput"]
        );
        assert_eq!(a.analyze("the of and"), Vec::<String>::new());
        assert_eq!(a.analyze("user's manuals"), ["user", "manual"]);
    }

    #[test]
    fn punctuation_and_syntax_only_separate_words() {
        let a = Analyzer::english();
        assert_eq!(
            a.analyze(r#"title:"rust" AND (async OR [await]) -x ~2 ^3 \ / *"#),
            ["titl", "rust", "async", "await", "x", "2", "3"]
        );
        assert!(a.analyze("!!! ??? ... --- \"\" :: ()").is_empty());
        assert!(a.analyze("").is_empty());
    }

    #[test]
    fn numbers_keep_their_decimal_point() {
        assert_eq!(
            Analyzer::simple().analyze("pi is 3.14, e 2,718"),
            ["pi", "is", "3.14", "e", "2,718"]
        );
    }

    #[test]
    fn multibyte_scripts() {
        let a = Analyzer::english();
        assert_eq!(a.analyze("Größe café"), ["größe", "café"]);
        assert_eq!(a.analyze("東京タワー"), ["東", "京", "タワー"]);
        assert_eq!(a.analyze("Привет мир"), ["привет", "мир"]);
        assert_eq!(a.analyze("🦀 rust 🦀"), ["rust"]);
        // Devanagari with combining marks stays one word.
        assert_eq!(a.analyze("हिन्दी भाषा"), ["हिन्दी", "भाषा"]);
    }

    #[test]
    fn very_long_words_are_cut_into_pieces() {
        let word = "é".repeat(MAX_TOKEN_CHARS * 2 + 3);
        let terms = Analyzer::simple().analyze(&word);
        let lengths: Vec<usize> = terms.iter().map(|t| t.chars().count()).collect();
        assert_eq!(lengths, [MAX_TOKEN_CHARS, MAX_TOKEN_CHARS, 3]);
    }

    #[test]
    fn stop_words_are_lowercased_and_deduplicated() {
        let a = Analyzer::simple().with_stop_words(["The", "the", "A"]);
        assert_eq!(a.stop_words(), ["a", "the"]);
        assert_eq!(a.analyze("The cat a dog"), ["cat", "dog"]);
    }
}
