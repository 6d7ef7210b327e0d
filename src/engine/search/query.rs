//! Search queries: words, "exact phrases" and substrings.
//!
//! Syntax ([`Query::parse`]):
//! - plain words: every word must occur in the document as a whole word, in any order;
//! - `"exact phrase"`: its words must occur one right after the other;
//! - words and phrases mix: `parser "torn line"` needs both.
//!
//! Words are what the word index splits text into ([`super::words`]): runs of Unicode
//! letters and digits (anything else separates), compared case-insensitively; accents
//! count. So `foo.bar` in a query is the phrase `"foo bar"`, and it finds `foo_bar` and
//! `foo-bar` as well.
//!
//! A substring query ([`Query::substring`]) matches the text anywhere, case-insensitively
//! (ASCII and Unicode case folding), separators included: `rror: can` finds
//! `Error: cannot`. It needs at least three characters, the width of the trigram index.
//!
//! A query that cannot be searched — empty, an unbalanced quote, a phrase or word without
//! any letter or digit, a substring shorter than three characters — is a [`QueryError`].

use std::collections::HashSet;
use std::fmt::Write as _;
use std::hash::{BuildHasherDefault, Hasher};

use super::words::word_list;

/// What to look for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Query {
    /// Documents holding every term.
    Terms(Vec<Term>),
    /// Documents holding this text (case-insensitively).
    Substring(String),
}

/// A word, or a phrase of words in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    /// Lower-cased words, at least one.
    pub words: Vec<String>,
}

/// Why a query cannot be searched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("empty query: give at least one word")]
    Empty,
    #[error("unbalanced quote: a phrase opened with \" at character {at} is not closed")]
    UnbalancedQuote { at: usize },
    #[error("{term:?} holds no letter or digit to search for")]
    NoWords { term: String },
    #[error("a substring needs at least {MIN_SUBSTRING} characters, {text:?} has {chars}")]
    SubstringTooShort { text: String, chars: usize },
}

/// The shortest substring the trigram index can find.
pub const MIN_SUBSTRING: usize = 3;

impl Query {
    /// Parses words and "phrases" (see the module documentation).
    pub fn parse(text: &str) -> Result<Query, QueryError> {
        let mut terms = Vec::new();
        let mut rest = text;
        let mut offset = 0;
        while let Some(quote) = rest.find('"') {
            terms.extend(word_terms(&rest[..quote])?);
            let after = &rest[quote + 1..];
            let Some(close) = after.find('"') else {
                return Err(QueryError::UnbalancedQuote {
                    at: text[..offset + quote].chars().count() + 1,
                });
            };
            let phrase = &after[..close];
            let words = word_list(phrase);
            if words.is_empty() {
                return Err(QueryError::NoWords {
                    term: format!("\"{phrase}\""),
                });
            }
            terms.push(Term { words });
            offset += quote + 1 + close + 1;
            rest = &after[close + 1..];
        }
        terms.extend(word_terms(rest)?);
        if terms.is_empty() {
            return Err(QueryError::Empty);
        }
        Ok(Query::Terms(terms))
    }

    /// A substring query for `text` as given.
    pub fn substring(text: &str) -> Result<Query, QueryError> {
        let chars = text.chars().count();
        if chars == 0 {
            return Err(QueryError::Empty);
        }
        if chars < MIN_SUBSTRING {
            return Err(QueryError::SubstringTooShort {
                text: text.to_owned(),
                chars,
            });
        }
        Ok(Query::Substring(text.to_owned()))
    }

    /// The FTS5 `MATCH` expression: each term a quoted phrase, all of them required.
    pub(super) fn fts_match(&self) -> String {
        match self {
            Query::Terms(terms) => {
                let mut out = String::new();
                for term in terms {
                    if !out.is_empty() {
                        out.push_str(" AND ");
                    }
                    let _ = write!(out, "\"{}\"", term.words.join(" ").replace('"', "\"\""));
                }
                out
            }
            // The trigram index keeps no positions, so it is asked for documents holding
            // every trigram of the text; the caller checks that they hold the text.
            Query::Substring(text) => {
                let mut grams: Vec<String> = trigrams(text)
                    .map(|g| format!("\"{}\"", gram_token(g)))
                    .collect();
                grams.sort();
                grams.dedup();
                grams.join(" AND ")
            }
        }
    }
}

/// The trigrams of `text` lower-cased one character at a time (as a substring query
/// compares it), separators included: what the trigram index is made of, each as the
/// 40-bit FNV-1a digest of its UTF-8 bytes.
pub fn trigrams(text: &str) -> impl Iterator<Item = u64> + '_ {
    let lowered: std::borrow::Cow<str> = if text.is_ascii() {
        text.to_ascii_lowercase().into()
    } else {
        let mut out = String::with_capacity(text.len());
        for c in text.chars() {
            if c.is_ascii() {
                out.push(c.to_ascii_lowercase());
            } else {
                out.extend(c.to_lowercase());
            }
        }
        out.into()
    };
    // Where each character starts (every byte, for ASCII text), then the text's end.
    let starts: Option<Vec<usize>> = (!lowered.is_ascii()).then(|| {
        let mut starts: Vec<usize> = lowered.char_indices().map(|(at, _)| at).collect();
        starts.push(lowered.len());
        starts
    });
    let chars = starts.as_ref().map_or(lowered.len(), |s| s.len() - 1);
    (0..chars.saturating_sub(MIN_SUBSTRING - 1)).map(move |i| {
        let (from, to) = match &starts {
            None => (i, i + MIN_SUBSTRING),
            Some(starts) => (starts[i], starts[i + MIN_SUBSTRING]),
        };
        fnv40(lowered.as_bytes()[from..to].iter().copied())
    })
}

fn fnv40(bytes: impl Iterator<Item = u8>) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    hash & ((1 << 40) - 1)
}

const GRAM_DIGITS: &[u8; 32] = b"0123456789abcdefghijklmnopqrstuv";

/// Appends the token of a trigram digest in the trigram index: 8 characters of `0-9a-v`,
/// which FTS5's `ascii` tokenizer keeps whole.
fn push_gram_token(out: &mut String, gram: u64) {
    for k in (0..8).rev() {
        out.push(GRAM_DIGITS[((gram >> (5 * k)) & 31) as usize] as char);
    }
}

/// The token of a trigram digest ([`push_gram_token`]).
pub fn gram_token(gram: u64) -> String {
    let mut out = String::with_capacity(8);
    push_gram_token(&mut out, gram);
    out
}

/// What the trigram index holds of a document: each distinct trigram's token once,
/// space-separated (the index keeps which documents hold a trigram, not where or how
/// often, so once is all of it).
pub fn gram_text(text: &str) -> String {
    let mut seen: HashSet<u64, BuildHasherDefault<Digest>> =
        HashSet::with_capacity_and_hasher(text.len(), Default::default());
    let mut out = String::new();
    for gram in trigrams(text) {
        if seen.insert(gram) {
            if !out.is_empty() {
                out.push(' ');
            }
            push_gram_token(&mut out, gram);
        }
    }
    out
}

/// Hashes a trigram digest as itself: it is a hash already.
#[derive(Default)]
struct Digest(u64);

impl Hasher for Digest {
    fn finish(&self) -> u64 {
        // Spread the 40 bits over the high ones, which the table's probing reads.
        self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// The terms of unquoted text: each whitespace-separated piece is a word, or a phrase of
/// the words inside it (`foo.bar`).
fn word_terms(text: &str) -> Result<Vec<Term>, QueryError> {
    text.split_whitespace()
        .map(|piece| {
            let words = word_list(piece);
            if words.is_empty() {
                return Err(QueryError::NoWords {
                    term: piece.to_owned(),
                });
            }
            Ok(Term { words })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(q: &str) -> Vec<Vec<String>> {
        match Query::parse(q).unwrap() {
            Query::Terms(t) => t.into_iter().map(|t| t.words).collect(),
            Query::Substring(_) => unreachable!(),
        }
    }

    #[test]
    fn words_and_phrases() {
        assert_eq!(terms("Foo bar"), [vec!["foo"], vec!["bar"]]);
        assert_eq!(
            terms("a \"Torn LINE\" b"),
            [vec!["a"], vec!["torn", "line"], vec!["b"]]
        );
        assert_eq!(terms("foo.bar"), [vec!["foo", "bar"]]);
        assert_eq!(terms("\"x\"\"y\""), [vec!["x"], vec!["y"]]);
        assert_eq!(
            Query::parse("foo \"bar").unwrap_err(),
            QueryError::UnbalancedQuote { at: 5 }
        );
        assert_eq!(Query::parse("  ").unwrap_err(), QueryError::Empty);
        assert!(matches!(
            Query::parse("foo --").unwrap_err(),
            QueryError::NoWords { .. }
        ));
        assert!(matches!(
            Query::parse("\" \"").unwrap_err(),
            QueryError::NoWords { .. }
        ));
    }

    #[test]
    fn fts_expression_quotes_every_term() {
        let q = Query::parse("a \"b c\"").unwrap();
        assert_eq!(q.fts_match(), "\"a\" AND \"b c\"");
        let q = Query::substring("a\"BCa\"b").unwrap();
        let mut grams: Vec<String> = ["a\"b", "\"bc", "bca", "ca\""]
            .iter()
            .map(|g| format!("\"{}\"", gram_token(trigrams(g).next().unwrap())))
            .collect();
        grams.sort();
        assert_eq!(q.fts_match(), grams.join(" AND "));
        assert!(matches!(
            Query::substring("ab").unwrap_err(),
            QueryError::SubstringTooShort { chars: 2, .. }
        ));
    }

    #[test]
    fn trigrams_are_lower_cased_and_distinct_in_the_index_text() {
        let grams: Vec<u64> = trigrams("AbcAbc").collect();
        assert_eq!(grams.len(), 4);
        assert_eq!(grams[0], grams[3]);
        assert_eq!(trigrams("abc").collect::<Vec<_>>(), [grams[0]]);
        assert_eq!(gram_text("abcabc").split(' ').count(), 3);
        assert!(gram_text("ab").is_empty());
        assert!(gram_token(u64::MAX >> 24)
            .chars()
            .all(|c| c.is_ascii_alphanumeric()));
        assert_eq!(
            trigrams("İab").count(),
            2,
            "İ lower-cases to two characters"
        );
        // ASCII text and other text give the same digests.
        assert_eq!(trigrams("AbC").next(), trigrams("abcé").next());
    }
}
