//! The ranker of a common query: the formula of [`super::rank`] over the window of its
//! newest matches.

use rusqlite::{
    params_from_iter, types::Value as Sql, Connection, Transaction, TransactionBehavior,
};

use super::instances;
use super::matches::{hit_of, sql_count, Matches, COUNTS_AT, HIT_COLUMNS};
use super::query::Query;
use super::rank;
use super::snippet::Snippet;
use super::stored_text::{len_of, text_of};
use super::{Filters, Hit};
use gjcfs_engine::storage::FileVersion;

/// The best hits of a common query among its newest `window` matches ([`super::rank`]);
/// a substring's window grows while it holds fewer than `limit` true matches. `None` when
/// the query has no more than `window` matches: it is not common.
///
/// A word query's counts come from the word index ([`instances`]) and each document's
/// length from its stored text's size or frame header ([`super::stored_text::len_of`]), so
/// only the text of the hits shown is decoded (for their snippets); a substring's are
/// counted in each candidate's text, which says whether it matches. (A length column would
/// spare nothing: a compressed text of less than 8 KB sits in its row's page, which the
/// window reads anyway, and it cost the index 0.4 % of its size.)
pub(super) fn ranked_in_window(
    conn: &Connection,
    query: &Query,
    filters: &Filters,
    mut window: usize,
    matches: &Matches,
) -> rusqlite::Result<Option<Vec<(Hit, FileVersion)>>> {
    let Matches {
        from,
        params,
        order,
        ..
    } = matches;
    // The row's counts: (columns of the select, from the row).
    let (columns, phrases) = match query {
        Query::Terms(terms) => (
            format!("{}, {}(words)", HIT_COLUMNS, instances::FUNCTION),
            terms.len(),
        ),
        Query::Substring(_) => (HIT_COLUMNS.to_owned(), 0),
    };
    let sql = format!("SELECT d.id, {columns} {from} ORDER BY {order} DESC LIMIT ?");
    // One read transaction, so that the text read for a hit shown is that of the row
    // ranked (dropped unfinished, it only ends the read).
    let _read = conn
        .is_autocommit()
        .then(|| Transaction::new_unchecked(conn, TransactionBehavior::Deferred))
        .transpose()?;
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut first = true;
    loop {
        let mut page = params.to_vec();
        page.push(Sql::Integer(sql_count(window.saturating_add(1))));
        let mut rows = stmt.query(params_from_iter(page))?;
        let mut found = Vec::new();
        let mut seen = 0;
        while let Some(row) = rows.next()? {
            seen += 1;
            if seen > window {
                break;
            }
            if let Some(candidate) = candidate_of(row, query, phrases)? {
                found.push(candidate);
            }
        }
        let more = seen > window;
        if first && !more {
            return Ok(None);
        }
        first = false;
        if found.len() < filters.limit && more {
            window = window.saturating_mul(4);
            continue;
        }
        drop(rows);
        return best_with_snippets(conn, query, found, filters.limit).map(Some);
    }
}

/// A match of the window before it is ranked: its document's id, its hit without score
/// and snippet, its text if it was read, and its counts.
struct Candidate {
    id: i64,
    hit: (Hit, FileVersion),
    text: Option<String>,
    counts: rank::Counts,
}

/// The candidate of a row of the window; `None` for a substring's candidate whose text
/// does not hold it. A word query's row holds its counts ([`COUNTS_AT`]) and its text's
/// length; a substring's its text.
fn candidate_of(
    row: &rusqlite::Row,
    query: &Query,
    phrases: usize,
) -> rusqlite::Result<Option<Candidate>> {
    let (counts, text) = match query {
        Query::Terms(_) => {
            let tf = instances::decode(&row.get::<_, Vec<u8>>(COUNTS_AT)?, phrases).ok_or_else(
                || {
                    rusqlite::Error::InvalidColumnType(
                        COUNTS_AT,
                        instances::FUNCTION.to_owned(),
                        rusqlite::types::Type::Blob,
                    )
                },
            )?;
            let len = u32::try_from(len_of(row.get_ref(10)?)?).unwrap_or(u32::MAX);
            (rank::Counts { tf, len }, None)
        }
        Query::Substring(needle) => {
            let text = text_of(row.get_ref(10)?)?.unwrap_or_default();
            let Some(counts) = rank::substring_counts(&text, needle) else {
                return Ok(None);
            };
            (counts, Some(text))
        }
    };
    Ok(Some(Candidate {
        id: row.get(0)?,
        hit: hit_of(row, 1, 0.0, Snippet::default())?,
        text,
        counts,
    }))
}

/// The best `limit` of `found` by their scores, newest first among equals, each with its
/// snippet: only the hits shown have their text read.
fn best_with_snippets(
    conn: &Connection,
    query: &Query,
    mut found: Vec<Candidate>,
    limit: usize,
) -> rusqlite::Result<Vec<(Hit, FileVersion)>> {
    let counts: Vec<rank::Counts> = found
        .iter_mut()
        .map(|c| std::mem::take(&mut c.counts))
        .collect();
    for (c, score) in found.iter_mut().zip(rank::scores(&counts)) {
        c.hit.0.score = score;
    }
    found.sort_by(|a, b| {
        a.hit
            .0
            .score
            .total_cmp(&b.hit.0.score)
            .then(b.hit.0.time_ms.cmp(&a.hit.0.time_ms))
            .then(b.id.cmp(&a.id))
    });
    found.truncate(limit);
    let mut text_by_id = conn.prepare_cached("SELECT text FROM docs WHERE id = ?1")?;
    let mut hits = Vec::with_capacity(found.len());
    for Candidate {
        id,
        hit: (mut hit, stat),
        text,
        ..
    } in found
    {
        let text = match text {
            Some(text) => text,
            None => text_by_id
                .query_row([id], |r| text_of(r.get_ref(0)?))?
                .unwrap_or_default(),
        };
        hit.snippet = Snippet::of(&text, query).unwrap_or_default();
        hits.push((hit, stat));
    }
    Ok(hits)
}
