//! Running a query: its matches ([`super::matches`]), ranked by one of the two rankers.

use rusqlite::Connection;

use super::by_bm25::ranked_by_bm25;
use super::in_window::ranked_in_window;
use super::matches::{Matches, Source};
use super::query::{words_match, Query};
use super::rank::COMMON_FROM;
use super::substring::{self, Candidates};
use super::{Filters, Hit};
use gjcfs_engine::storage::FileVersion;

/// The hits of a query, best first, with their snippets, each with the stat its file was
/// indexed at.
///
/// A query with at most [`COMMON_FROM`] matches (or the limit, if larger) is ranked by
/// FTS5's bm25 over all of them ([`ranked_by_bm25`]); one with more, over the window of
/// its newest matches ([`super::rank`]). The newest matches are read first, which costs
/// no scoring: whether there are more than the window tells which.
pub fn run_search(
    conn: &Connection,
    query: &Query,
    filters: &Filters,
) -> rusqlite::Result<Vec<(Hit, FileVersion)>> {
    let source = match query {
        Query::Terms(terms) => Source::Words(words_match(terms)),
        Query::Substring(needle) => match substring::candidates(conn, needle)? {
            Candidates::Matching(expr) => Source::Words(expr),
            Candidates::Every => Source::Every,
            Candidates::None => return Ok(Vec::new()),
        },
    };
    let matches = Matches::of(&source, filters);
    let window = COMMON_FROM.max(filters.limit);
    match ranked_in_window(conn, query, filters, window, &matches)? {
        Some(hits) => Ok(hits),
        None => ranked_by_bm25(conn, query, filters, &matches),
    }
}
