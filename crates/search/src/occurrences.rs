//! Where the terms of a word query occur in a text, found in one pass over its words
//! ([`super::words`]): a term occurs where its words are the text's words in a row, and
//! occurrences may overlap (`"a a"` occurs twice in `a a a`).
//!
//! Ranking counts the occurrences ([`super::rank`]) and a snippet marks them
//! ([`super::snippet`]); both walk the words once, holding no more than the phrases begun
//! and not yet complete or broken.

use std::ops::ControlFlow;

use super::query::Term;
use super::words::try_for_each_word;

/// One occurrence: the term's index among the terms, and the byte range of the text from
/// the start of its first word to the end of its last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Occurrence {
    pub term: usize,
    pub start: usize,
    pub end: usize,
}

/// Calls `found` with each occurrence of `terms` in `text`, in the order they end (for
/// occurrences ending together, in the order of the terms, then of their starts). `found`
/// may stop the walk: no occurrence that begins after the word it was told of is reported
/// then, but phrases begun before it are still followed to their end or break.
pub fn for_each_occurrence(
    text: &str,
    terms: &[Term],
    mut found: impl FnMut(Occurrence) -> ControlFlow<()>,
) {
    // The phrases begun: term, words matched so far, start.
    let mut open: Vec<(usize, usize, usize)> = Vec::new();
    let mut stopped = false;
    try_for_each_word(text, |start, end, word| {
        let mut complete = Vec::new();
        open.retain_mut(|(t, k, s)| {
            let words = &terms[*t].words;
            if words[*k] != word {
                return false;
            }
            *k += 1;
            if *k == words.len() {
                complete.push(Occurrence {
                    term: *t,
                    start: *s,
                    end,
                });
                return false;
            }
            true
        });
        if !stopped {
            for (t, term) in terms.iter().enumerate() {
                if term.words[0] != word {
                    continue;
                }
                if term.words.len() == 1 {
                    complete.push(Occurrence {
                        term: t,
                        start,
                        end,
                    });
                } else {
                    open.push((t, 1, start));
                }
            }
        }
        complete.sort_by_key(|o| (o.term, o.start));
        for o in complete {
            if found(o).is_break() {
                stopped = true;
            }
        }
        if stopped && open.is_empty() {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::Query;
    use crate::words::words;
    use proptest::prelude::*;

    fn terms(q: &str) -> Vec<Term> {
        match Query::parse(q).unwrap() {
            Query::Terms(t) => t,
            Query::Substring(_) => unreachable!(),
        }
    }

    fn all(text: &str, terms: &[Term]) -> Vec<(usize, usize, usize)> {
        let mut out = Vec::new();
        for_each_occurrence(text, terms, |o| {
            out.push((o.term, o.start, o.end));
            ControlFlow::Continue(())
        });
        out
    }

    /// Every run of the text's words that is a term's words, by comparing them at each
    /// word.
    fn by_definition(text: &str, terms: &[Term]) -> Vec<(usize, usize, usize)> {
        let tokens = words(text);
        let mut out = Vec::new();
        for i in 0..tokens.len() {
            for (t, term) in terms.iter().enumerate() {
                let n = term.words.len();
                if i + 1 >= n && (0..n).all(|k| tokens[i + 1 - n + k].2 == term.words[k]) {
                    out.push((t, tokens[i + 1 - n].0, tokens[i].1));
                }
            }
        }
        out
    }

    #[test]
    fn words_and_phrases_occur_where_their_words_are_in_a_row() {
        let q = terms("\"torn line\" Parser");
        assert_eq!(
            all("Torn line, torn-line; PARSER torn", &q),
            [(0, 0, 9), (0, 11, 20), (1, 22, 28)]
        );
        assert_eq!(all("torn lines, xtorn line, torn  line", &q), [(0, 24, 34)]);
        assert_eq!(all("a a a, b a", &terms("\"a a\"")), [(0, 0, 3), (0, 2, 5)]);
        // Words compare lower-cased: STRASSE is not straße, straßen is another word.
        assert_eq!(
            all("Straße, STRASSE; straßen straße", &terms("straße")),
            [(0, 0, 7), (0, 27, 34)]
        );
    }

    #[test]
    fn a_stop_reports_no_later_start_but_ends_the_phrases_begun() {
        let stop_at = |text: &str, q: &str, last: usize| {
            let mut seen = Vec::new();
            for_each_occurrence(text, &terms(q), |o| {
                seen.push((o.term, o.start, o.end));
                if o.start >= last {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            });
            seen
        };
        // Nothing begun at the stop: the walk ends there.
        let text = "a b x c a b c x a b c";
        assert_eq!(stop_at(text, "x \"a b c\"", 0), [(0, 4, 5)]);
        assert_eq!(stop_at(text, "x \"a b c\"", 8), [(0, 4, 5), (1, 8, 13)]);
        // A phrase begun before the stop is followed to its end, and none begins after.
        assert_eq!(
            stop_at("a x b a x b", "\"a x b\" x", 0),
            [(1, 2, 3), (0, 0, 5)]
        );
        assert_eq!(stop_at("a x c x", "\"a x b\" x", 0), [(1, 2, 3)]);
    }

    proptest! {
        #[test]
        fn the_occurrences_are_the_definitions(
            text in "[abAB .,é-]{0,40}",
            q in prop_oneof![
                Just("a"), Just("b"), Just("\"a a\""), Just("\"a b\" a"), Just("\"b a b\""),
                Just("é \"a é\""), Just("\"a a a\" \"a a\""),
            ],
        ) {
            let q = terms(q);
            let mut want = by_definition(&text, &q);
            let mut got = all(&text, &q);
            want.sort();
            got.sort();
            prop_assert_eq!(got, want);
        }
    }
}
