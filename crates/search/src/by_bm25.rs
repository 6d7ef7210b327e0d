//! The ranker of a query with few matches: FTS5's bm25 over all of them.

use rusqlite::{params_from_iter, types::Value as Sql, Connection};

use super::matches::{hit_of, sql_count, Matches, HIT_COLUMNS};
use super::query::Query;
use super::snippet::Snippet;
use super::stored_text::text_of;
use super::{Filters, Hit};
use gjcfs_engine::storage::FileVersion;

/// The best hits by FTS5's bm25 over every match.
///
/// The ranking runs over the matches' ids, scores and times only, and the text of the
/// best is read afterwards: sorting every match with its text made a frequent word cost
/// its whole posting list in text. A substring's candidates are checked against their
/// text, so more are ranked than asked for, and more again while checks fail.
pub(super) fn ranked_by_bm25(
    conn: &Connection,
    query: &Query,
    filters: &Filters,
    matches: &Matches,
) -> rusqlite::Result<Vec<(Hit, FileVersion)>> {
    let Matches {
        from,
        params,
        score,
        ..
    } = matches;
    let inner = format!("SELECT d.id AS id, {score} AS score, d.time_ms AS time {from}");
    let sql = format!(
        "SELECT top.id, top.score, {HIT_COLUMNS} \
         FROM ({inner} ORDER BY score, time DESC, id DESC LIMIT ? OFFSET ?) top \
         JOIN docs d ON d.id = top.id JOIN files f ON f.id = d.file \
         ORDER BY top.score, top.time DESC, top.id DESC"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut hits = Vec::new();
    let mut offset = 0;
    let mut batch = match query {
        Query::Terms(_) => filters.limit,
        Query::Substring(_) => filters.limit.saturating_mul(4).max(64),
    };
    while hits.len() < filters.limit {
        let mut page = params.to_vec();
        page.push(Sql::Integer(sql_count(batch)));
        page.push(Sql::Integer(offset as i64));
        let mut rows = stmt.query(params_from_iter(page))?;
        let mut seen = 0;
        while let Some(row) = rows.next()? {
            seen += 1;
            if hits.len() >= filters.limit {
                break;
            }
            let text = text_of(row.get_ref(11)?)?.unwrap_or_default();
            // A substring's candidates hold words it touches; the text says whether they
            // hold the substring.
            let Some(snippet) = Snippet::of(&text, query) else {
                continue;
            };
            hits.push(hit_of(row, 2, row.get(1)?, snippet)?);
        }
        if seen < batch {
            break;
        }
        offset += batch;
        batch = batch.saturating_mul(2);
    }
    Ok(hits)
}
