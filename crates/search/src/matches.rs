//! A query's matches: where they come from and the SQL that selects them under the filters,
//! which both rankers ([`super::by_bm25`], [`super::in_window`]) read.

use rusqlite::{types::Value as Sql, Row};

use super::file_rows::path_of;
use super::file_rows::version_of_row;
use super::snippet::Snippet;
use super::{Filters, Hit};
use gjcfs_engine::storage::FileVersion;

/// Where a query's matches come from.
pub(super) enum Source {
    /// The documents matching this FTS5 expression over the word index.
    Words(String),
    /// Every document with text (a substring that names no words to narrow by).
    Every,
}

/// A query's matches as SQL: documents `d` of files `f` under the filters.
pub(super) struct Matches {
    /// `FROM … WHERE …`.
    pub(super) from: String,
    pub(super) params: Vec<Sql>,
    /// The column that numbers matches in the order they were indexed.
    pub(super) order: &'static str,
    /// The relevance of a match (lower is better).
    pub(super) score: &'static str,
}

impl Matches {
    pub(super) fn of(source: &Source, filters: &Filters) -> Matches {
        let (mut from, mut params, order, score) = match source {
            Source::Words(expr) => (
                "FROM words JOIN docs d ON d.id = words.rowid JOIN files f ON f.id = d.file \
                 WHERE words MATCH ?"
                    .to_owned(),
                vec![Sql::Text(expr.clone())],
                "words.rowid",
                "bm25(words)",
            ),
            Source::Every => (
                "FROM docs d JOIN files f ON f.id = d.file WHERE d.text IS NOT NULL".to_owned(),
                Vec::new(),
                "d.id",
                "0.0",
            ),
        };
        let scope = Scope {
            cwd: filters.cwd.as_deref(),
            since_ms: filters.since_ms,
            until_ms: filters.until_ms,
        };
        scope.push_to(&mut from, &mut params);
        if let Some(role) = filters.role {
            let kinds = role.kinds();
            from.push_str(&format!(
                " AND {KIND} IN ({})",
                vec!["?"; kinds.len()].join(",")
            ));
            params.extend(kinds.iter().map(|k| Sql::Text((*k).to_owned())));
        }
        from.push_str(LIVE_COPY);
        if let Some(prefix) = &filters.session {
            from.push_str(" AND substr(f.session_id, 1, ?) = ?");
            params.push(Sql::Integer(prefix.chars().count() as i64));
            params.push(Sql::Text(prefix.clone()));
        }
        Matches {
            from,
            params,
            order,
            score,
        }
    }
}

/// The workspace and time range a question of the index is limited to, on the sessions'
/// files `f` and their documents `d`.
pub(super) struct Scope<'a> {
    /// Only sessions whose header `cwd` is this.
    pub(super) cwd: Option<&'a str>,
    /// Only documents at or after this time (milliseconds since the epoch).
    pub(super) since_ms: Option<i64>,
    /// Only documents before this time.
    pub(super) until_ms: Option<i64>,
}

impl Scope<'_> {
    /// Appends the conditions (each after `AND`) to `from`, and their values to `params`.
    pub(super) fn push_to(&self, from: &mut String, params: &mut Vec<Sql>) {
        if let Some(cwd) = self.cwd {
            from.push_str(" AND f.cwd = ?");
            params.push(Sql::Text(cwd.to_owned()));
        }
        if let Some(since) = self.since_ms {
            from.push_str(" AND d.time_ms >= ?");
            params.push(Sql::Integer(since));
        }
        if let Some(until) = self.until_ms {
            from.push_str(" AND d.time_ms < ?");
            params.push(Sql::Integer(until));
        }
    }
}

/// A condition on file `f` (after `AND`): it is the live copy of its session, which may be
/// in several files (a legacy session and its managed copy) — the newest by mtime (in ms),
/// then the first by path (as bytes), as `discovery::keep_live_copies` keeps it.
pub(super) const LIVE_COPY: &str = " AND NOT EXISTS (SELECT 1 FROM files g \
     WHERE g.session_id = f.session_id AND g.id != f.id \
     AND (g.mtime_ns / 1000000 > f.mtime_ns / 1000000 \
     OR (g.mtime_ns / 1000000 = f.mtime_ns / 1000000 AND g.path < f.path)))";

pub(super) fn sql_count(n: usize) -> i64 {
    n.min(i64::MAX as usize) as i64
}

/// A document's kind ([`super::doc_rows::held_kind`]), as a literal for [`HIT_COLUMNS`].
macro_rules! kind_sql {
    () => {
        "coalesce(d.kind, d.entry_type)"
    };
}

/// A document's kind ([`super::doc_rows::held_kind`]).
pub(super) const KIND: &str = kind_sql!();

/// The columns of a hit, after its id and score; the text as it is held
/// ([`super::stored_text`]).
pub(super) const HIT_COLUMNS: &str = concat!(
    "f.path, f.session_id, f.title, f.cwd, d.entry_id, d.entry_type, ",
    kind_sql!(),
    ", d.time_ms, d.on_leaf, d.text, f.dev, f.ino, f.len, f.mtime_ns, f.ctime_ns, f.first_prompt"
);

/// Where a word query's window has each row's [`instances::FUNCTION`]: after the document's
/// id and the 16 [`HIT_COLUMNS`].
pub(super) const COUNTS_AT: usize = 17;

/// A hit from a row holding [`HIT_COLUMNS`] from column `at` on, and the stat its file was
/// indexed at.
pub(super) fn hit_of(
    row: &Row,
    at: usize,
    score: f64,
    snippet: Snippet,
) -> rusqlite::Result<(Hit, FileVersion)> {
    let stat = version_of_row(row, at + 10)?;
    let hit = Hit {
        path: path_of(&row.get::<_, Vec<u8>>(at)?),
        session_id: row.get(at + 1)?,
        title: row.get(at + 2)?,
        cwd: row.get(at + 3)?,
        entry_id: row.get(at + 4)?,
        entry_type: row.get(at + 5)?,
        kind: row.get(at + 6)?,
        time_ms: row.get(at + 7)?,
        on_leaf_path: row.get(at + 8)?,
        first_prompt: row.get(at + 15)?,
        score,
        snippet,
    };
    Ok((hit, stat))
}
