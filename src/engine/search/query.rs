//! Search queries: words, "exact phrases" and substrings.
//!
//! Syntax ([`Query::parse`]):
//! - plain words: every word must occur in the document as a whole word, in any order;
//! - `"exact phrase"`: its words must occur one right after the other;
//! - words and phrases mix: `parser "torn line"` needs both.
//!
//! Words are what the word index splits text into: runs of Unicode letters and digits
//! (anything else separates), compared case-insensitively; accents count. So `foo.bar` in
//! a query is the phrase `"foo bar"`, and it finds `foo_bar` and `foo-bar` as well.
//!
//! A substring query ([`Query::substring`]) matches the text anywhere, case-insensitively
//! (ASCII and Unicode case folding), separators included: `rror: can` finds
//! `Error: cannot`. It needs at least three characters, the width of the trigram index.
//!
//! A query that cannot be searched — empty, an unbalanced quote, a phrase or word without
//! any letter or digit, a substring shorter than three characters — is a [`QueryError`].

use std::fmt::Write as _;

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

/// The words of `text` as the word index splits it, each with its byte range, not
/// lower-cased: runs of alphanumeric characters.
pub fn words(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut rest = text.char_indices().peekable();
    std::iter::from_fn(move || {
        while let Some(&(_, c)) = rest.peek() {
            if is_word_char(c) {
                break;
            }
            rest.next();
        }
        let (start, _) = *rest.peek()?;
        let mut end = start;
        while let Some(&(i, c)) = rest.peek() {
            if !is_word_char(c) {
                break;
            }
            end = i + c.len_utf8();
            rest.next();
        }
        Some((start, &text[start..end]))
    })
}

/// Whether the word index keeps `c` inside words (the unicode61 tokenizer's letters,
/// numbers and private-use characters).
pub fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || ('\u{E000}'..='\u{F8FF}').contains(&c)
}

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
            let words: Vec<String> = words(phrase).map(|(_, w)| w.to_lowercase()).collect();
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
                let chars: Vec<char> = text.chars().collect();
                let mut grams: Vec<String> = chars
                    .windows(MIN_SUBSTRING)
                    .map(|w| format!("\"{}\"", w.iter().collect::<String>().replace('"', "\"\"")))
                    .collect();
                grams.sort();
                grams.dedup();
                grams.join(" AND ")
            }
        }
    }
}

/// The terms of unquoted text: each whitespace-separated piece is a word, or a phrase of
/// the words inside it (`foo.bar`).
fn word_terms(text: &str) -> Result<Vec<Term>, QueryError> {
    text.split_whitespace()
        .map(|piece| {
            let words: Vec<String> = words(piece).map(|(_, w)| w.to_lowercase()).collect();
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
        let q = Query::substring("a\"bca\"b").unwrap();
        assert_eq!(
            q.fts_match(),
            "\"\"\"bc\" AND \"a\"\"b\" AND \"bca\" AND \"ca\"\"\""
        );
        assert!(matches!(
            Query::substring("ab").unwrap_err(),
            QueryError::SubstringTooShort { chars: 2, .. }
        ));
    }

    #[test]
    fn word_ranges() {
        let w: Vec<_> = words("  héllo, w0rld_x!").collect();
        assert_eq!(w, [(2, "héllo"), (10, "w0rld"), (16, "x")]);
    }
}
