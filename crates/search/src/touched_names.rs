//! The names a directory of touched paths holds: the distinct next components of the
//! touches' resolved paths under a prefix, as a tree of the files the sessions touched is
//! drawn (the mount's `files/`).
//!
//! The index on `touches.resolved` is read as a skip scan: one seek for the first path of
//! the range, and from each path found one seek past it — past every path under it when it
//! has more components, past the path itself when it ends there — so the cost grows with
//! the names found, not with the touches under the prefix.

use std::collections::BTreeSet;
use std::path::MAIN_SEPARATOR;

use rusqlite::{params_from_iter, types::Value as Sql, Connection, OptionalExtension};

use super::matches::LIVE_COPY;
use super::{SearchError, SearchIndex};

/// The character after the separator: `dir` + it sorts after every path under `dir`.
fn after_separator() -> char {
    char::from(MAIN_SEPARATOR as u8 + 1)
}

/// Where the scan starts from: a path found, or a bound no path may be under.
enum From {
    /// Paths at or after this one.
    AtOrAfter(String),
    /// Paths after this one.
    After(String),
}

impl SearchIndex {
    /// The names that follow `parent` in the resolved paths of the touches: for each
    /// touched path `parent` + `rest`, the part of `rest` up to its first separator (all of
    /// it when it has none), each name once, in byte order. An empty name (a path with
    /// another separator right after `parent`, as every absolute path has when `parent` is
    /// empty) is left out. `parent` is empty (the first component of every path) or ends
    /// with the platform's separator (`/home/` names `/home/ann`'s `ann`); only the live
    /// copy of a session counts, as in [`SearchIndex::files_touched`]. Answered from the
    /// index as it is: a caller brings it up to date first.
    pub fn touched_names(&self, parent: &str) -> Result<Vec<String>, SearchError> {
        self.recovering(|| {
            let inner = self.inner.lock();
            names_after(&inner.conn, parent).map_err(|e| self.sql_error(e))
        })
    }
}

/// [`SearchIndex::touched_names`] on `conn`.
fn names_after(conn: &Connection, parent: &str) -> rusqlite::Result<Vec<String>> {
    // The paths under `parent` sort from `parent` itself up to `parent` with its last
    // separator replaced by the next character (none past them when it is empty).
    let end = parent
        .strip_suffix(MAIN_SEPARATOR)
        .map(|dir| format!("{dir}{}", after_separator()));
    let mut names = BTreeSet::new();
    let mut from = From::AtOrAfter(parent.to_owned());
    while let Some(path) = first_path(conn, &from, end.as_deref())? {
        let Some(rest) = path.strip_prefix(parent) else {
            break;
        };
        from = match rest.find(MAIN_SEPARATOR) {
            // The path ends with this name: the next path may be another of the name's
            // paths (`src.rs` sorts between `src` and `src/a.rs`).
            None => {
                names.insert(rest.to_owned());
                From::After(path)
            }
            Some(at) => {
                let name = &rest[..at];
                let past = format!("{parent}{name}{}", after_separator());
                names.insert(name.to_owned());
                From::AtOrAfter(past)
            }
        };
    }
    names.remove("");
    Ok(names.into_iter().collect())
}

/// The first resolved path of a live copy's touch from `from` on, before `end`.
fn first_path(
    conn: &Connection,
    from: &From,
    end: Option<&str>,
) -> rusqlite::Result<Option<String>> {
    let (op, start) = match from {
        From::AtOrAfter(path) => (">=", path),
        From::After(path) => (">", path),
    };
    let mut params = vec![Sql::Text(start.clone())];
    let bound = match end {
        Some(end) => {
            params.push(Sql::Text(end.to_owned()));
            " AND t.resolved < ?"
        }
        None => "",
    };
    let sql = format!(
        "SELECT t.resolved FROM touches t INDEXED BY touches_resolved \
         JOIN docs d ON d.id = t.doc JOIN files f ON f.id = d.file \
         WHERE t.resolved {op} ?{bound}{LIVE_COPY} ORDER BY t.resolved LIMIT 1"
    );
    conn.prepare_cached(&sql)?
        .query_row(params_from_iter(params), |row| row.get(0))
        .optional()
}
