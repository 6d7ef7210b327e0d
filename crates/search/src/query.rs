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
//! `Error: cannot` ([`super::substring`]). It needs at least three characters.
//!
//! A query that cannot be searched — empty, an unbalanced quote, a phrase or word without
//! any letter or digit, a substring shorter than three characters — is a [`QueryError`].

use std::fmt::Write as _;

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

/// The shortest substring searched for (the width of the vocabulary's trigrams).
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
}

/// The FTS5 `MATCH` expression of word terms over the word index: each term a quoted
/// phrase, all of them required.
pub(super) fn words_match(terms: &[Term]) -> String {
    let mut out = String::new();
    for term in terms {
        if !out.is_empty() {
            out.push_str(" AND ");
        }
        let _ = write!(out, "\"{}\"", term.words.join(" ").replace('"', "\"\""));
    }
    out
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
        let Query::Terms(terms) = Query::parse("a \"b c\"").unwrap() else {
            unreachable!()
        };
        assert_eq!(words_match(&terms), "\"a\" AND \"b c\"");
        assert!(matches!(
            Query::substring("ab").unwrap_err(),
            QueryError::SubstringTooShort { chars: 2, .. }
        ));
    }
}
