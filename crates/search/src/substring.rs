//! Substring queries, answered by the word index through its vocabulary.
//!
//! The index keeps every word it was given once ([`super::words`]; table `terms`), and
//! each word's distinct trigrams (`term_grams`). A substring query is split as the text
//! is: lower-cased, then into runs of word characters ([`pieces`]). Wherever the
//! substring occurs in a document, the document's lower-cased text holds those runs at the
//! same places, so each run names the words it must touch:
//! - a run with a separator on both sides within the substring is a whole word;
//! - the first run, if a separator follows it, ends a word; the last, if one precedes
//!   it, starts a word; a substring that is one run lies inside a word.
//!
//! Each run's words are looked up in the vocabulary (`terms_of`): a whole word by
//! itself, a start by a range of the sorted words, an end or an inside by the words that
//! hold all its trigrams, then checked. The documents to check are then those holding,
//! for every run, one of its words — an FTS5 query over the word index — and each is
//! checked against its text (the caller, [`super::snippet`]). A run that names no word
//! means no document holds the substring. A run too short or too common to name at most
//! [`MAX_TERMS`] words does not narrow the search; when none does (a substring of
//! separators alone, or of short pieces such as `e: c`), every document is checked,
//! newest first.
//!
//! The vocabulary holds the words of the documents indexed, and no other: a word is added
//! in the transaction of the first document that holds it ([`add_terms`]), and dropped, with
//! its trigrams, in the transaction that deletes the last one ([`drop_unused`]), so nothing
//! of a session's text outlives its documents.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::hash::{BuildHasherDefault, Hasher};

use rusqlite::{Connection, OptionalExtension};

use super::query::MIN_SUBSTRING;
use super::words::{fold, is_word_char};

/// The most words a run of a substring may name and still narrow the search.
pub const MAX_TERMS: usize = 64;
/// The most words holding a run's trigrams that are read to find the words holding the run.
const MAX_GRAM_CANDIDATES: usize = 4096;

/// Where a run of word characters lies in a substring, so which words it must touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Separators on both sides: the run is a whole word.
    Whole,
    /// First, followed by a separator: it ends a word.
    Ends,
    /// Last, after a separator: it starts a word.
    Starts,
    /// The whole substring: it lies inside a word.
    Inside,
}

impl Place {
    /// Whether `word` (of the index) is touched by `run` at this place.
    pub fn holds(self, word: &str, run: &str) -> bool {
        match self {
            Place::Whole => word == run,
            Place::Ends => word.ends_with(run),
            Place::Starts => word.starts_with(run),
            Place::Inside => word.contains(run),
        }
    }
}

/// The runs of word characters of the lower-cased `needle`, each with its place.
pub fn pieces(needle: &str) -> Vec<(String, Place)> {
    let folded: Vec<char> = fold(needle).chars().collect();
    let mut out = Vec::new();
    let mut at = 0;
    while at < folded.len() {
        if !is_word_char(folded[at]) {
            at += 1;
            continue;
        }
        let start = at;
        while at < folded.len() && is_word_char(folded[at]) {
            at += 1;
        }
        let place = match (start == 0, at == folded.len()) {
            (true, true) => Place::Inside,
            (true, false) => Place::Ends,
            (false, true) => Place::Starts,
            (false, false) => Place::Whole,
        };
        out.push((folded[start..at].iter().collect(), place));
    }
    out
}

/// Which documents a substring query must check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Candidates {
    /// Those matching this FTS5 expression over the word index.
    Matching(String),
    /// Every document.
    Every,
    /// None: a run of the substring names no word of the index.
    None,
}

/// The documents that may hold `needle` (see the module documentation).
pub fn candidates(conn: &Connection, needle: &str) -> rusqlite::Result<Candidates> {
    let mut groups = Vec::new();
    for (run, place) in pieces(needle) {
        match terms_of(conn, &run, place)? {
            Some(terms) if terms.is_empty() => return Ok(Candidates::None),
            Some(terms) => groups.push(terms),
            None => {}
        }
    }
    if groups.is_empty() {
        return Ok(Candidates::Every);
    }
    let mut expr = String::new();
    for (k, group) in groups.iter().enumerate() {
        if k > 0 {
            expr.push_str(" AND ");
        }
        expr.push('(');
        for (i, term) in group.iter().enumerate() {
            if i > 0 {
                expr.push_str(" OR ");
            }
            // Words hold letters and digits only: no quote to escape.
            let _ = write!(expr, "\"{term}\"");
        }
        expr.push(')');
    }
    Ok(Candidates::Matching(expr))
}

/// The words of the vocabulary that `run` touches at `place`; `None` when they cannot be
/// told or are more than [`MAX_TERMS`] (the run does not narrow the search).
fn terms_of(conn: &Connection, run: &str, place: Place) -> rusqlite::Result<Option<Vec<String>>> {
    let limit = (MAX_TERMS + 1) as i64;
    let found: Vec<String> = match place {
        Place::Whole => conn
            .prepare_cached("SELECT term FROM terms WHERE term = ?1")?
            .query_row([run], |r| r.get(0))
            .optional()?
            .into_iter()
            .collect(),
        Place::Starts => {
            // Every word starting with `run` sorts from `run` to `run` followed by the
            // last code point (no word character).
            let end = format!("{run}\u{10FFFF}");
            conn.prepare_cached(
                "SELECT term FROM terms WHERE term >= ?1 AND term < ?2 ORDER BY term LIMIT ?3",
            )?
            .query_map(rusqlite::params![run, end, limit], |r| r.get(0))?
            .collect::<Result<_, _>>()?
        }
        Place::Ends | Place::Inside => {
            if run.chars().count() < MIN_SUBSTRING {
                return Ok(None);
            }
            let mut grams: Vec<String> = trigrams(run).map(gram_token).collect();
            grams.sort();
            grams.dedup();
            let expr = grams
                .iter()
                .map(|g| format!("\"{g}\""))
                .collect::<Vec<_>>()
                .join(" AND ");
            let mut stmt = conn.prepare_cached(
                "SELECT t.term FROM term_grams g JOIN terms t ON t.id = g.rowid \
                 WHERE term_grams MATCH ?1 LIMIT ?2",
            )?;
            let mut rows = stmt.query(rusqlite::params![expr, MAX_GRAM_CANDIDATES as i64 + 1])?;
            let mut seen = 0;
            let mut found = Vec::new();
            while let Some(row) = rows.next()? {
                seen += 1;
                if seen > MAX_GRAM_CANDIDATES {
                    return Ok(None);
                }
                let term: String = row.get(0)?;
                if place.holds(&term, run) {
                    found.push(term);
                }
            }
            found
        }
    };
    Ok((found.len() <= MAX_TERMS).then_some(found))
}

/// Words known to be in the vocabulary.
pub type Known = HashSet<Box<str>, foldhash::fast::RandomState>;

/// The most words a [`Known`] holds (about 50 MB): a store's vocabulary grows with every
/// identifier, hash and number its sessions hold.
const KNOWN_MAX: usize = 1 << 20;

/// Adds the words of `terms` that the vocabulary lacks, with their trigrams; `known` holds
/// words this connection added or found before, within transactions that committed or
/// are the caller's (it is dropped with them on an error), and is extended.
pub fn add_terms<'a>(
    conn: &Connection,
    terms: impl IntoIterator<Item = &'a str>,
    known: &mut Known,
) -> rusqlite::Result<()> {
    for term in terms {
        if known.contains(term) {
            continue;
        }
        let added = conn
            .prepare_cached("INSERT OR IGNORE INTO terms(term) VALUES (?1)")?
            .execute([term])?;
        if added == 1 {
            conn.prepare_cached("INSERT INTO term_grams(rowid, text) VALUES (?1, ?2)")?
                .execute(rusqlite::params![conn.last_insert_rowid(), gram_text(term)])?;
        }
        if known.len() >= KNOWN_MAX {
            // Only a shortcut: what it forgets is looked up in the table again.
            known.clear();
        }
        known.insert(term.into());
    }
    Ok(())
}

/// The words of the documents a transaction deleted: those the word index may no longer
/// hold ([`drop_unused`]).
#[derive(Debug, Default)]
pub struct Dropped {
    words: HashSet<Box<str>, foldhash::fast::RandomState>,
    /// Whether a document's text (or a path it touched) was deleted.
    any: bool,
}

impl Dropped {
    /// Notes that rows holding a session's text other than words were deleted (the paths
    /// an entry touched): the write-ahead log must be scrubbed as after a document.
    pub fn note_erased(&mut self) {
        self.any = true;
    }

    /// Notes `words`, what the word index held of a deleted document (space-separated).
    pub fn add_words(&mut self, words: &str) {
        self.any = true;
        for word in words.split(' ').filter(|w| !w.is_empty()) {
            if !self.words.contains(word) {
                self.words.insert(word.into());
            }
        }
    }
}

/// Removes from the vocabulary the words of `dropped` that no document of the word index
/// holds any more (with their trigrams, and from `known`), in the caller's transaction,
/// after the documents it deleted and those it added are written. Returns whether any
/// document's text was deleted.
pub fn drop_unused(
    conn: &Connection,
    dropped: Dropped,
    known: &mut Known,
) -> rusqlite::Result<bool> {
    for word in &dropped.words {
        // Words hold letters and digits only: no quote to escape.
        let held: bool = conn
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM words WHERE words MATCH ?1)")?
            .query_row([format!("\"{word}\"")], |r| r.get(0))?;
        if held {
            continue;
        }
        let id: Option<i64> = conn
            .prepare_cached("DELETE FROM terms WHERE term = ?1 RETURNING id")?
            .query_row([&**word], |r| r.get(0))
            .optional()?;
        if let Some(id) = id {
            // As it was given them ([`add_terms`]): contentless, secure-delete.
            conn.prepare_cached(
                "INSERT INTO term_grams(term_grams, rowid, text) VALUES ('delete', ?1, ?2)",
            )?
            .execute(rusqlite::params![id, gram_text(word)])?;
        }
        known.remove(&**word);
    }
    Ok(dropped.any)
}

/// The trigrams of a lower-cased word, each as the 40-bit FNV-1a digest of its UTF-8
/// bytes: what `term_grams` holds of it.
fn trigrams(word: &str) -> impl Iterator<Item = u64> + '_ {
    // Where each character starts, then the word's end.
    let mut starts: Vec<usize> = word.char_indices().map(|(at, _)| at).collect();
    starts.push(word.len());
    let windows = starts.len().saturating_sub(MIN_SUBSTRING);
    (0..windows).map(move |i| fnv40(&word.as_bytes()[starts[i]..starts[i + MIN_SUBSTRING]]))
}

fn fnv40(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    hash & ((1 << 40) - 1)
}

const GRAM_DIGITS: &[u8; 32] = b"0123456789abcdefghijklmnopqrstuv";

/// The token of a trigram digest: 8 characters of `0-9a-v`, which FTS5's `ascii`
/// tokenizer keeps whole.
fn gram_token(gram: u64) -> String {
    (0..8)
        .rev()
        .map(|k| GRAM_DIGITS[((gram >> (5 * k)) & 31) as usize] as char)
        .collect()
}

/// What `term_grams` holds of a word: each distinct trigram's token once, space-separated.
fn gram_text(word: &str) -> String {
    let mut seen: HashSet<u64, BuildHasherDefault<Digest>> = HashSet::default();
    let mut out = String::new();
    for gram in trigrams(word) {
        if seen.insert(gram) {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(&gram_token(gram));
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

#[cfg(test)]
mod tests {
    use super::super::index_file::open_memory;
    use super::*;

    #[test]
    fn runs_and_their_places() {
        use Place::*;
        let p = |n: &str| pieces(n);
        assert_eq!(p("okkabore"), [("okkabore".into(), Inside)]);
        assert_eq!(
            p("rror: Cann"),
            [("rror".into(), Ends), ("cann".into(), Starts)]
        );
        assert_eq!(
            p("a b.c d"),
            [
                ("a".into(), Ends),
                ("b".into(), Whole),
                ("c".into(), Whole),
                ("d".into(), Starts)
            ]
        );
        assert_eq!(p(" parser "), [("parser".into(), Whole)]);
        assert_eq!(p("://"), []);
        // Lower-cased first: İ becomes i and a combining dot, which separates.
        assert_eq!(p("xİy"), [("xi".into(), Ends), ("y".into(), Starts)]);
    }

    #[test]
    fn trigrams_are_distinct_in_the_index_text() {
        let grams: Vec<u64> = trigrams("abcabc").collect();
        assert_eq!(grams.len(), 4);
        assert_eq!(grams[0], grams[3]);
        assert_eq!(trigrams("abc").collect::<Vec<_>>(), [grams[0]]);
        assert_eq!(gram_text("abcabc").split(' ').count(), 3);
        assert!(gram_text("ab").is_empty());
        assert_eq!(trigrams("éab").count(), 1);
        assert!(gram_token(u64::MAX >> 24)
            .chars()
            .all(|c| c.is_ascii_alphanumeric()));
    }

    fn vocabulary(words: &[&str]) -> Connection {
        let conn = open_memory().unwrap();
        let mut known = Known::default();
        add_terms(&conn, words.iter().copied(), &mut known).unwrap();
        // A word added again is not added twice, even by a fresh `known`.
        add_terms(&conn, words.iter().copied(), &mut Known::default()).unwrap();
        conn
    }

    #[test]
    fn runs_name_the_words_they_touch() {
        let conn = vocabulary(&["error", "terror", "cannot", "can", "parser", "rror"]);
        let terms = |run: &str, place| {
            terms_of(&conn, run, place).unwrap().map(|mut t| {
                t.sort();
                t
            })
        };
        assert_eq!(
            terms("rror", Place::Ends).unwrap(),
            ["error", "rror", "terror"]
        );
        assert_eq!(terms("can", Place::Starts).unwrap(), ["can", "cannot"]);
        assert_eq!(terms("can", Place::Whole).unwrap(), ["can"]);
        assert_eq!(terms("arse", Place::Inside).unwrap(), ["parser"]);
        assert_eq!(terms("rro", Place::Ends).unwrap(), Vec::<String>::new());
        assert_eq!(terms("ca", Place::Whole).unwrap(), Vec::<String>::new());
        // Too short to look up by trigrams: no narrowing.
        assert_eq!(terms("or", Place::Ends), None);
        assert_eq!(
            candidates(&conn, "rror: can").unwrap(),
            Candidates::Matching(
                "(\"error\" OR \"terror\" OR \"rror\") AND (\"can\" OR \"cannot\")".into()
            )
        );
        assert_eq!(candidates(&conn, "xyzzy").unwrap(), Candidates::None);
        assert_eq!(candidates(&conn, " -> ").unwrap(), Candidates::Every);
        // "r" is too short to narrow; "c" starts two words.
        assert_eq!(
            candidates(&conn, "r: c").unwrap(),
            Candidates::Matching("(\"can\" OR \"cannot\")".into())
        );
    }

    #[test]
    fn a_run_naming_too_many_words_does_not_narrow() {
        let many: Vec<String> = (0..=MAX_TERMS).map(|i| format!("pre{i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let conn = vocabulary(&refs);
        assert_eq!(terms_of(&conn, "pre", Place::Starts).unwrap(), None);
        assert_eq!(
            terms_of(&conn, "pre6", Place::Starts)
                .unwrap()
                .unwrap()
                .len(),
            6
        );
        assert_eq!(candidates(&conn, "pre").unwrap(), Candidates::Every);
    }
}

#[cfg(test)]
mod properties {
    use super::super::index_file::open_memory;
    use super::super::snippet::contains_folded;
    use super::super::words::index_text;
    use super::*;
    use proptest::prelude::*;

    /// Characters that fold in every way: ASCII of both cases, digits, separators, and
    /// characters whose lower case is longer, not a word character, or ASCII.
    const CHARS: &[char] = &[
        'a', 'B', 'c', 'D', 'e', 'r', 'R', 'o', '0', '7', ' ', ' ', '.', ':', '-', '_', 'İ', 'Σ',
        'σ', 'ς', 'ß', 'ẞ', 'é', 'É', '\u{212A}', 'k', 'ﬁ', '\u{307}', '中', '\u{E000}',
    ];

    fn text() -> impl Strategy<Value = String> {
        proptest::collection::vec(proptest::sample::select(CHARS), 0..40)
            .prop_map(|cs| cs.into_iter().collect())
    }

    /// The candidates of `needle` over an index of `docs` (ids 1…), as the ids they name;
    /// `None` for every document.
    fn candidate_ids(docs: &[String], needle: &str) -> Option<Vec<i64>> {
        let conn = open_memory().unwrap();
        let mut known = Known::default();
        for (id, doc) in docs.iter().enumerate() {
            let words = index_text(doc);
            conn.execute(
                "INSERT INTO words(rowid, text) VALUES (?1, ?2)",
                rusqlite::params![id as i64 + 1, words],
            )
            .unwrap();
            add_terms(
                &conn,
                words.split(' ').filter(|w| !w.is_empty()),
                &mut known,
            )
            .unwrap();
        }
        match candidates(&conn, needle).unwrap() {
            Candidates::Every => None,
            Candidates::None => Some(Vec::new()),
            Candidates::Matching(expr) => {
                let mut stmt = conn
                    .prepare("SELECT rowid FROM words WHERE words MATCH ?1")
                    .unwrap();
                let ids = stmt.query_map([expr], |r| r.get(0)).unwrap();
                Some(ids.collect::<Result<_, _>>().unwrap())
            }
        }
    }

    proptest! {
        /// Every document holding a substring is among its candidates.
        #[test]
        fn the_candidates_hold_every_match(
            docs in proptest::collection::vec(text(), 1..5),
            pick in any::<prop::sample::Index>(),
            range in any::<(prop::sample::Index, prop::sample::Index)>(),
            flips in proptest::collection::vec(any::<bool>(), 40),
        ) {
            // A piece of one document, its case changed here and there.
            let doc: Vec<char> = pick.get(&docs).chars().collect();
            prop_assume!(doc.len() >= MIN_SUBSTRING);
            let from = range.0.index(doc.len() - MIN_SUBSTRING + 1);
            let to = from + MIN_SUBSTRING + range.1.index(doc.len() - from - MIN_SUBSTRING + 1);
            let needle: String = doc[from..to]
                .iter()
                .zip(&flips)
                .flat_map(|(&c, &flip)| {
                    let upper: Vec<char> = c.to_uppercase().collect();
                    if flip && upper.len() == 1 { upper } else { vec![c] }
                })
                .collect();
            prop_assume!(needle.chars().count() >= MIN_SUBSTRING);
            if let Some(ids) = candidate_ids(&docs, &needle) {
                for (id, doc) in docs.iter().enumerate() {
                    if contains_folded(doc, &needle) {
                        prop_assert!(
                            ids.contains(&(id as i64 + 1)),
                            "{doc:?} holds {needle:?}: candidates {ids:?}"
                        );
                    }
                }
            }
        }
    }
}
