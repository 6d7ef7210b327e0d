//! Ranking the matches of a common query.
//!
//! FTS5's `bm25()` scores every match of a query and, for each term, first counts the
//! documents that hold it: a word in most entries costs a pass over its whole posting list
//! and then a score per match (about 100 ms for 100,000 matches), a phrase of common words
//! more. So a query matching more than [`COMMON_FROM`] documents is ranked over the
//! [`COMMON_FROM`] matches indexed last (the index's newest: files are indexed oldest
//! first, and appended entries after them) with the same formula computed here: for each
//! term, its occurrences `tf` in the document (as whole words, a phrase's words in a row;
//! for a word query the word index counts them (`instances.rs`), for a substring its
//! text, [`substring_counts`]) and the document's length in bytes against the window's
//! mean, `tf·(k1+1) / (tf + k1·(1 − b + b·len/mean))` with FTS5's `k1 = 1.2`, `b = 0.75`,
//! summed over the terms with equal weights (every term of such a query is common, so their
//! inverse document frequencies are all near zero and alike). The score is negated, lower
//! is better, as FTS5's.

use super::snippet::count_folded;

/// A query with more matches than this is ranked over the window of its newest matches.
pub const COMMON_FROM: usize = 128;

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// What the ranking needs of one document.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counts {
    /// Occurrences of each term (a substring query has one).
    pub tf: Vec<u32>,
    /// Length in bytes (what bm25 compares with the mean is proportional to it).
    pub len: u32,
}

/// The counts of a substring query in `text`; `None` when it does not occur in it (its
/// candidates hold words it touches, not always the substring). A word query's come from
/// the word index (`instances.rs`).
pub fn substring_counts(text: &str, needle: &str) -> Option<Counts> {
    let found = count_folded(text, needle);
    (found > 0).then(|| Counts {
        tf: vec![found as u32],
        len: text.len() as u32,
    })
}

/// The score of each document of a window (lower is better).
pub fn scores(window: &[Counts]) -> Vec<f64> {
    let mean = window.iter().map(|c| f64::from(c.len)).sum::<f64>() / window.len().max(1) as f64;
    let mean = mean.max(1.0);
    window
        .iter()
        .map(|c| {
            let norm = K1 * (1.0 - B + B * f64::from(c.len) / mean);
            -c.tf
                .iter()
                .map(|&tf| {
                    let tf = f64::from(tf);
                    tf * (K1 + 1.0) / (tf + norm)
                })
                .sum::<f64>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::occurrences::for_each_occurrence;
    use crate::query::Query;
    use std::ops::ControlFlow;

    /// The counts of a word query in `text` as its occurrences give them.
    fn word_counts(text: &str, q: &str) -> Counts {
        let Query::Terms(terms) = Query::parse(q).unwrap() else {
            unreachable!()
        };
        let mut tf = vec![0; terms.len()];
        for_each_occurrence(text, &terms, |o| {
            tf[o.term] += 1;
            ControlFlow::Continue(())
        });
        Counts {
            tf,
            len: text.len() as u32,
        }
    }

    #[test]
    fn more_occurrences_and_shorter_documents_rank_first() {
        let texts = [
            "the parser failed",
            "the parser failed and the parser failed again",
            "a parser",
            "a long text where the parser is mentioned once among many other words",
        ];
        let counts: Vec<Counts> = texts.iter().map(|t| word_counts(t, "parser")).collect();
        assert_eq!(counts[1].tf, [2]);
        assert_eq!(counts[2].len, 8);
        let s = scores(&counts);
        assert!(s[2] < s[0] && s[0] < s[3]);
        assert!(s[1] < s[0]);
    }

    #[test]
    fn substrings_are_counted_where_they_occur() {
        let c = substring_counts("Error: cannot; error: cause", "rror: c").unwrap();
        assert_eq!((c.tf, c.len), (vec![2], 27));
        assert_eq!(substring_counts("Error cannot", "rror: c"), None);
    }
}
