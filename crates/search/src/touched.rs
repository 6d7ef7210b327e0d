//! Which sessions touched a file: the touches ([`super::touches`]) of one path, or of every
//! path under a directory, newest first — the agent-session view of `git blame`.

use std::path::{PathBuf, MAIN_SEPARATOR};

use rusqlite::{params_from_iter, types::Value as Sql, Connection, Row};

use super::answer::Answer;
use super::file_rows::{path_of, version_of_row};
use super::matches::{sql_count, Scope, LIVE_COPY};
use super::touches::{resolve, Action};
use super::{Progress, SearchError, SearchIndex, UpdateReport};
use gjcfs_engine::storage::FileVersion;

/// Which touches a question considers, and how many it returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TouchFilters {
    /// Only sessions whose header `cwd` is this.
    pub cwd: Option<String>,
    /// Only entries at or after this time (milliseconds since the epoch).
    pub since_ms: Option<i64>,
    /// Only entries before this time.
    pub until_ms: Option<i64>,
    pub limit: usize,
}

impl Default for TouchFilters {
    fn default() -> Self {
        TouchFilters {
            cwd: None,
            since_ms: None,
            until_ms: None,
            limit: 20,
        }
    }
}

/// One entry of a session that read or changed a file.
#[derive(Debug, Clone, PartialEq)]
pub struct FileTouch {
    /// The session file.
    pub path: PathBuf,
    pub session_id: String,
    pub title: Option<String>,
    /// The first line of the session's first prompt, as [`super::Hit::first_prompt`].
    pub first_prompt: Option<String>,
    /// The session header's cwd, which `written` was resolved against.
    pub cwd: String,
    pub entry_id: Option<String>,
    /// The entry's time, milliseconds since the epoch.
    pub time_ms: Option<i64>,
    pub action: Action,
    /// The tool's name (`read`, `edit`, `write`), or the record's type (`compaction`,
    /// `branch_summary`).
    pub source: String,
    /// Whether the entry is on the path from the root to the session's leaf.
    pub on_leaf_path: bool,
    /// The touched file's path as the entry has it.
    pub written: String,
    /// That path resolved against `cwd` and normalized ([`super::touches::resolve`]).
    pub resolved: String,
}

/// The touches of a path: the newest ones, and how many there are in all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Touches {
    /// Newest first, at most the limit asked for.
    pub touches: Vec<FileTouch>,
    /// Every touch the question matched, those past the limit included.
    pub total: usize,
}

/// Touches read from the index, each with the stat its file was indexed at.
#[derive(Clone)]
struct TouchRows {
    rows: Vec<(FileTouch, FileVersion)>,
    total: usize,
}

impl Answer for TouchRows {
    type Out = Touches;

    fn sources(&self) -> Vec<(&std::path::Path, &FileVersion)> {
        self.rows
            .iter()
            .map(|(touch, stat)| (touch.path.as_path(), stat))
            .collect()
    }

    fn output(self) -> Touches {
        Touches {
            touches: self.rows.into_iter().map(|(touch, _)| touch).collect(),
            total: self.total,
        }
    }
}

impl SearchIndex {
    /// The entries that read or changed the file at `path`, or any file under it when it
    /// names a directory, newest first (by the entry's time, then the later entry and the
    /// later call of one entry first), under `filters`. `path` is matched against each
    /// touch's resolved path after the same lexical normalization; a relative `path` is
    /// taken as it is (a caller resolves it against its own current directory first). Only
    /// the live copy of a session in several files counts. Every touch's file is checked
    /// first: a file changed since it was indexed is indexed again and the question asked
    /// again.
    pub fn files_touched(
        &self,
        path: &str,
        filters: &TouchFilters,
    ) -> Result<Touches, SearchError> {
        let ask = |conn: &Connection| touches_of(conn, path, filters);
        self.recovering(|| self.answer_once(&ask, None))
            .map(|(touches, _)| touches)
    }

    /// [`SearchIndex::update_dirs`], then [`SearchIndex::files_touched`], as
    /// [`SearchIndex::search_dirs`] does with a search.
    pub fn files_touched_dirs(
        &self,
        dirs: &[PathBuf],
        threads: usize,
        progress: &dyn Fn(Progress),
        path: &str,
        filters: &TouchFilters,
    ) -> Result<(UpdateReport, Touches), SearchError> {
        let ask = |conn: &Connection| touches_of(conn, path, filters);
        self.answer_dirs(dirs, threads, progress, &ask)
    }
}

/// The resolved paths `path` names, as an SQL condition on `t.resolved` and its
/// parameters: the path itself, and the range of the paths under it.
fn under(path: &str) -> (&'static str, Vec<Sql>) {
    let path = resolve(path, "");
    // The paths under it start with `dir` + separator; they sort before `dir` + the next
    // character (a range the index on `resolved` reads).
    let dir = path.strip_suffix(MAIN_SEPARATOR).unwrap_or(&path);
    let next = char::from(MAIN_SEPARATOR as u8 + 1);
    let params = vec![
        Sql::Text(path.clone()),
        Sql::Text(format!("{dir}{MAIN_SEPARATOR}")),
        Sql::Text(format!("{dir}{next}")),
    ];
    (
        "(t.resolved = ? OR (t.resolved >= ? AND t.resolved < ?))",
        params,
    )
}

/// The columns of a touch: its file's path and stat from 12 on.
const TOUCH_COLUMNS: &str = "f.path, f.session_id, f.title, f.first_prompt, f.cwd, d.entry_id, \
     d.time_ms, d.on_leaf, t.action, t.source, t.written, t.resolved, \
     f.dev, f.ino, f.len, f.mtime_ns, f.ctime_ns";

/// The touches of `path` under `filters`, newest first, with how many there are in all.
fn touches_of(
    conn: &Connection,
    path: &str,
    filters: &TouchFilters,
) -> rusqlite::Result<TouchRows> {
    let (condition, mut params) = under(path);
    let mut from = format!(
        "FROM touches t JOIN docs d ON d.id = t.doc JOIN files f ON f.id = d.file \
         WHERE {condition}"
    );
    let scope = Scope {
        cwd: filters.cwd.as_deref(),
        since_ms: filters.since_ms,
        until_ms: filters.until_ms,
    };
    scope.push_to(&mut from, &mut params);
    from.push_str(LIVE_COPY);
    if filters.limit == 0 {
        let total: i64 = conn
            .prepare_cached(&format!("SELECT count(*) {from}"))?
            .query_row(params_from_iter(params), |r| r.get(0))?;
        return Ok(TouchRows {
            rows: Vec::new(),
            total: total as usize,
        });
    }
    // The count of every match rides on each row returned. An entry without a time comes
    // last (SQLite sorts NULL lowest).
    let sql = format!(
        "SELECT {TOUCH_COLUMNS}, count(*) OVER () {from} \
         ORDER BY d.time_ms DESC, d.file DESC, d.seq DESC, t.rowid DESC LIMIT ?"
    );
    params.push(Sql::Integer(sql_count(filters.limit)));
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut rows = stmt.query(params_from_iter(params))?;
    let mut found = TouchRows {
        rows: Vec::new(),
        total: 0,
    };
    while let Some(row) = rows.next()? {
        found.total = row.get::<_, i64>(17)? as usize;
        found.rows.push((touch_of(row)?, version_of_row(row, 12)?));
    }
    Ok(found)
}

fn touch_of(row: &Row) -> rusqlite::Result<FileTouch> {
    let action: String = row.get(8)?;
    let action = Action::parse(&action).ok_or_else(|| {
        let unknown = format!("unknown action {action:?}");
        rusqlite::Error::FromSqlConversionFailure(8, rusqlite::types::Type::Text, unknown.into())
    })?;
    Ok(FileTouch {
        path: path_of(&row.get::<_, Vec<u8>>(0)?),
        session_id: row.get(1)?,
        title: row.get(2)?,
        first_prompt: row.get(3)?,
        cwd: row.get(4)?,
        entry_id: row.get(5)?,
        time_ms: row.get(6)?,
        on_leaf_path: row.get(7)?,
        action,
        source: row.get(9)?,
        written: row.get(10)?,
        resolved: row.get(11)?,
    })
}
