//! The piece of a document a hit shows: a window of text around the first match, with
//! every match inside it marked.
//!
//! - Words match as the word index matches them ([`super::words`]); a phrase matches its
//!   words in a row. A substring matches anywhere,
//!   compared lower-cased (ASCII text byte for byte, other text character by character).
//! - The window starts up to [`CONTEXT_BEFORE`] characters before the first match and
//!   holds at most [`SNIPPET_CHARS`] characters; a terminal's control sequences are
//!   dropped ([`gjcfs_engine::views::terminal`]), whitespace runs and control characters
//!   become one space; `…` stands for text cut at either end.
//! - Highlights are byte ranges of [`Snippet::text`], in order, not overlapping.

use std::ops::ControlFlow;

use super::occurrences::for_each_occurrence;
use super::query::Query;
use super::words::fold;
use gjcfs_engine::views::terminal::Escapes;

/// The most characters of document text a snippet holds.
pub const SNIPPET_CHARS: usize = 160;
/// How many characters before the first match a snippet starts.
pub const CONTEXT_BEFORE: usize = 50;

/// A window of a document's text with the matches marked.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snippet {
    pub text: String,
    /// Byte ranges of `text` that match the query.
    pub highlights: Vec<(usize, usize)>,
}

impl Snippet {
    /// The snippet of `text` for `query`; `None` when a substring query does not occur in
    /// it. A word query whose words are not found shows the start of the text.
    pub fn of(text: &str, query: &Query) -> Option<Snippet> {
        let matches = match query {
            Query::Terms(terms) => {
                // The window ends at most SNIPPET_CHARS characters (of up to four bytes)
                // after the first match: a match beginning after that is not shown.
                let mut found = Vec::new();
                let mut shown_until = usize::MAX;
                for_each_occurrence(text, terms, |o| {
                    shown_until = shown_until.min(o.start.saturating_add(4 * SNIPPET_CHARS));
                    if o.start >= shown_until {
                        return ControlFlow::Break(());
                    }
                    found.push((o.start, o.end));
                    ControlFlow::Continue(())
                });
                found
            }
            Query::Substring(needle) => {
                let found = find_folded(text, needle);
                if found.is_empty() {
                    return None;
                }
                found
            }
        };
        Some(window(text, merged(matches)))
    }
}

/// Sorted, non-overlapping ranges.
fn merged(mut ranges: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    ranges.sort_unstable();
    let mut out: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
    for (s, e) in ranges {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// Whether `text` contains `needle`, compared lower-cased (see the module documentation).
pub fn contains_folded(text: &str, needle: &str) -> bool {
    !find_folded_limit(text, needle, 1).is_empty()
}

/// How many times `text` contains `needle`, compared lower-cased.
pub fn count_folded(text: &str, needle: &str) -> usize {
    find_folded(text, needle).len()
}

fn find_folded(text: &str, needle: &str) -> Vec<(usize, usize)> {
    find_folded_limit(text, needle, usize::MAX)
}

fn find_folded_limit(text: &str, needle: &str, limit: usize) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    if needle.is_empty() {
        return found;
    }
    if needle.is_ascii() {
        // A needle without letters matches the text as it is: no lower-cased copy.
        let hay: std::borrow::Cow<[u8]> = if needle.bytes().any(|b| b.is_ascii_alphabetic()) {
            text.as_bytes().to_ascii_lowercase().into()
        } else {
            text.as_bytes().into()
        };
        let needle = needle.to_ascii_lowercase();
        for at in memchr::memmem::find_iter(&hay, needle.as_bytes()) {
            found.push((at, at + needle.len()));
            if found.len() >= limit {
                break;
            }
        }
        return found;
    }
    let needle: Vec<char> = fold(needle).chars().collect();
    for (start, _) in text.char_indices() {
        let mut want = needle.iter();
        let mut end = start;
        let mut chars = text[start..].char_indices();
        let matched = loop {
            let Some(&w) = want.next() else { break true };
            // Compare the lower-cased text, one lower-cased character at a time.
            let Some((i, c)) = chars.next() else {
                break false;
            };
            let mut lower = c.to_lowercase();
            if lower.next() != Some(w) {
                break false;
            }
            let mut ok = true;
            for l in lower {
                if want.next() != Some(&l) {
                    ok = false;
                    break;
                }
            }
            if !ok {
                break false;
            }
            end = start + i + c.len_utf8();
        };
        if matched {
            found.push((start, end));
            if found.len() >= limit {
                break;
            }
        }
    }
    found
}

/// The window around the first match, whitespace collapsed, matches marked.
fn window(text: &str, matches: Vec<(usize, usize)>) -> Snippet {
    let first = matches.first().map_or(0, |m| m.0);
    let before: Vec<usize> = text[..first]
        .char_indices()
        .rev()
        .take(CONTEXT_BEFORE)
        .map(|(i, _)| i)
        .collect();
    let start = before.last().copied().unwrap_or(first);
    let end = text[start..]
        .char_indices()
        .nth(SNIPPET_CHARS)
        .map_or(text.len(), |(i, _)| start + i);
    let mut out = String::with_capacity(end - start + 8);
    let mut highlights = Vec::new();
    if start > 0 {
        out.push('…');
    }
    let mut open: Option<usize> = None;
    let mut next = matches
        .iter()
        .filter(|m| m.0 < end && m.1 > start)
        .peekable();
    let mut space = false;
    let mut escapes = Escapes::default();
    for (i, c) in text[start..end].char_indices() {
        let at = start + i;
        let hidden = escapes.hides(c);
        if open.is_none() {
            if let Some(&&(s, e)) = next.peek() {
                if at >= s && at < e {
                    if space {
                        out.push(' ');
                        space = false;
                    }
                    open = Some(out.len());
                }
            }
        }
        if hidden {
        } else if c.is_whitespace() || c.is_control() {
            space = !out.is_empty() && !out.ends_with(' ') && !out.ends_with('…');
            if open.is_some() && space {
                out.push(' ');
                space = false;
            }
        } else {
            if space {
                out.push(' ');
                space = false;
            }
            out.push(c);
        }
        if let (Some(s), Some(&&(_, e))) = (open, next.peek()) {
            if at + c.len_utf8() >= e {
                highlights.push((s, out.len()));
                open = None;
                next.next();
            }
        }
    }
    if let Some(s) = open {
        highlights.push((s, out.len()));
    }
    let trimmed = out.trim_end().len();
    out.truncate(trimmed);
    if end < text.len() {
        out.push('…');
    }
    for h in &mut highlights {
        h.1 = h.1.min(trimmed);
    }
    highlights.retain(|h| h.0 < h.1);
    Snippet {
        text: out,
        highlights,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn marked(s: &Snippet) -> String {
        let mut out = String::new();
        let mut at = 0;
        for &(a, b) in &s.highlights {
            out.push_str(&s.text[at..a]);
            out.push('[');
            out.push_str(&s.text[a..b]);
            out.push(']');
            at = b;
        }
        out.push_str(&s.text[at..]);
        out
    }

    #[test]
    fn a_terminals_colour_codes_are_not_shown() {
        let query = Query::parse("failed").unwrap();
        let s = Snippet::of(
            "\u{1b}[31m✗\u{1b}[0m failed: \u{1b}[1mboom\u{1b}[0m",
            &query,
        )
        .unwrap();
        assert_eq!(s.text, "✗ failed: boom");
        assert_eq!(marked(&s), "✗ [failed]: boom");
    }

    #[test]
    fn words_and_phrases_are_marked() {
        let q = Query::parse("torn \"LINE was\"").unwrap();
        let s = Snippet::of("A torn\n\n line was  read; torn again", &q).unwrap();
        assert_eq!(marked(&s), "A [torn] [line was] read; [torn] again");
        let q = Query::parse("absent").unwrap();
        assert_eq!(marked(&Snippet::of("x  y", &q).unwrap()), "x y");
    }

    #[test]
    fn substrings_are_verified_and_marked() {
        let q = Query::substring("RROR: c").unwrap();
        let s = Snippet::of("Error: cannot; error: CAN", &q).unwrap();
        assert_eq!(marked(&s), "E[rror: c]annot; e[rror: C]AN");
        assert!(Snippet::of("error:x", &q).is_none());
        let q = Query::substring("ÜBER").unwrap();
        assert_eq!(marked(&Snippet::of("das über", &q).unwrap()), "das [über]");
    }

    #[test]
    fn long_text_is_cut_around_the_first_match() {
        let text = format!("{} needle {}", "a ".repeat(200), "b ".repeat(200));
        let s = Snippet::of(&text, &Query::parse("needle").unwrap()).unwrap();
        assert!(
            s.text.starts_with('…') && s.text.ends_with('…'),
            "{}",
            s.text
        );
        assert_eq!(&s.text[s.highlights[0].0..s.highlights[0].1], "needle");
        assert!(s.text.chars().count() <= SNIPPET_CHARS + 2);
    }

    proptest! {
        /// A snippet that stops looking after the window is the one of every match.
        #[test]
        fn the_snippet_is_that_of_every_match(
            pieces in proptest::collection::vec(
                prop_oneof![
                    Just("a "), Just("b "), Just("A b "), Just("ä "), Just("— "),
                    Just("filler text that is long enough to move the window along. "),
                ],
                0..80,
            ),
            q in prop_oneof![Just("a"), Just("\"a b\""), Just("b \"b a\""), Just("ä a")],
        ) {
            let text: String = pieces.concat();
            let q = Query::parse(q).unwrap();
            let Query::Terms(terms) = &q else { unreachable!() };
            let mut every = Vec::new();
            for_each_occurrence(&text, terms, |o| {
                every.push((o.start, o.end));
                ControlFlow::Continue(())
            });
            prop_assert_eq!(Snippet::of(&text, &q), Some(window(&text, merged(every))));
        }
    }
}
