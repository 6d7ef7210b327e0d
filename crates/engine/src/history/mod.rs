//! Prompt history: the agent's SQLite store of submitted prompts, `<agentDir>/history.db`.
//! It is separate from sessions: it serves prompt recall and search only.
//!
//! Schema (created on open if missing, exactly as the agent creates it):
//! - `history(id INTEGER PRIMARY KEY AUTOINCREMENT, prompt TEXT NOT NULL, created_at INTEGER
//!   NOT NULL DEFAULT (CAST(strftime('%s','now') AS INTEGER)), cwd TEXT)`, with indexes
//!   `idx_history_created_at(created_at DESC)` and `idx_history_cwd_created_at(cwd,
//!   created_at DESC)`;
//! - `history_fts`, an external-content FTS5 table over `prompt` (default `unicode61`
//!   tokenizer), kept in sync by the `history_ai` after-insert trigger. Rows are only ever
//!   inserted, never updated or deleted, so there are no other triggers.
//!
//! Invariants:
//! - A database gjcfs creates is owner-only (`0600`; on Windows a DACL for the owner): the
//!   file is created empty that way before SQLite opens it, and SQLite gives its `-wal`,
//!   `-shm` and `-journal` files the database file's mode. The agent creates it under the
//!   umask (`0644` under the usual `022`), so every user who can enter the agent directory
//!   could read every prompt. The mode of an existing database is never changed; `gjcfs
//!   check` reports one that group or others may read or write (`wide_history`).
//! - Every connection runs in WAL mode with `synchronous=NORMAL` and a 5 s busy timeout, so
//!   the agent and any number of gjcfs processes can read and write the same file at once.
//! - Opening never damages a file: a file that is not a SQLite database, or is corrupt, gives
//!   [`HistoryError::NotADatabase`] or [`HistoryError::Corrupt`] before anything is written.
//! - [`HistoryStorage::add`] never touches SQLite on the caller's thread. A background writer
//!   inserts what was queued 100 ms after the first queued prompt, in one transaction per
//!   batch. Queued prompts are written by [`HistoryStorage::flush`], [`HistoryStorage::close`],
//!   drop, and by [`flush_all`], which writes what every open storage holds. On Unix an
//!   `atexit` hook calls it, so even an exit through `std::process::exit` loses nothing. On
//!   Windows there is no such hook: `ExitProcess` ends the other threads (the writers)
//!   before exit handlers run, so a flush there would wait for a writer that is gone; a
//!   Windows program closes its storages, or calls [`flush_all`], before it exits (the
//!   `gjcfs` command does both).
//! - A batch that fails stays queued and is retried (after [`RETRY_DELAY`]); the error is
//!   returned by the next [`HistoryStorage::flush`]. Only a failure of the final write on
//!   close loses rows, and [`HistoryStorage::close`] reports it.
//! - A database whose `history` table was created with a `unixepoch(` default (an older
//!   agent) is migrated on open, in one transaction (see [`migrate_legacy_schema`]).
//!
//! Differences from the agent, all deliberate:
//! - The agent keeps one storage per process; here each [`HistoryStorage`] is independent
//!   (and has its own "last prompt"), so a program should open one per database.
//! - SQL errors of [`HistoryStorage::get_recent`] and of the substring step of
//!   [`HistoryStorage::search`] are returned; the agent logs them and returns no rows. An
//!   error of the full-text step is swallowed, as in the agent.
//! - A search reads one snapshot, and computes the agent's result without sorting every
//!   match (the [`search`](mod@search) module explains how).
//! - Write transactions start `IMMEDIATE`, and the busy timeout is set before switching the
//!   journal mode, so that opening or writing beside another writer waits instead of failing.
//! - Limits are `usize` (see [`normalize_limit`] for the agent's handling of any number).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::types::ValueRef;
use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, Row};

use crate::format::js_text::js_trim;
use crate::json::{self, Object, Value};

pub mod search;

pub use search::{fts_query, like_pattern, tokenize};

/// How long after the first queued prompt a batch is written.
pub const BATCH_DELAY: Duration = Duration::from_millis(100);
/// How long SQLite waits for another connection's lock before giving up.
pub const BUSY_TIMEOUT: Duration = Duration::from_millis(5000);
/// How long the writer waits before retrying a batch that failed.
pub const RETRY_DELAY: Duration = Duration::from_secs(1);
/// The largest number of rows a query returns.
pub const MAX_LIMIT: usize = 1000;

/// The table and its two indexes: run on every open, and again by the legacy migration
/// (step 3; its cwd index's name is then still taken by the renamed table, as in the agent).
const HISTORY_TABLE: &str = "
CREATE TABLE IF NOT EXISTS history (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    prompt TEXT NOT NULL,
    created_at INTEGER NOT NULL DEFAULT (CAST(strftime('%s','now') AS INTEGER)),
    cwd TEXT
);
CREATE INDEX IF NOT EXISTS idx_history_created_at ON history(created_at DESC);
CREATE INDEX IF NOT EXISTS idx_history_cwd_created_at ON history(cwd, created_at DESC);
";

/// The full-text index and the trigger that feeds it: run on every open, and by the legacy
/// migration after the copy.
const HISTORY_FTS: &str = "
CREATE VIRTUAL TABLE IF NOT EXISTS history_fts USING fts5(prompt, content='history', content_rowid='id');
CREATE TRIGGER IF NOT EXISTS history_ai AFTER INSERT ON history BEGIN
    INSERT INTO history_fts(rowid, prompt) VALUES (new.id, new.prompt);
END;
";

/// Creates what is missing of the schema.
fn create_schema(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(HISTORY_TABLE)?;
    conn.execute_batch(HISTORY_FTS)
}

const INSERT: &str = "INSERT INTO history (prompt, cwd) VALUES (?1, ?2)";
const RECENT: &str =
    "SELECT id, prompt, created_at, cwd FROM history ORDER BY created_at DESC, id DESC LIMIT ?1";
const RECENT_BY_CWD: &str = "SELECT id, prompt, created_at, cwd FROM history WHERE cwd = ?1 \
     ORDER BY created_at DESC, id DESC LIMIT ?2";
const ALL_OLDEST_FIRST: &str =
    "SELECT id, prompt, created_at, cwd FROM history ORDER BY created_at ASC, id ASC";
const LAST_PROMPT: &str = "SELECT prompt FROM history ORDER BY id DESC LIMIT 1";

/// One prompt as stored. `created_at` is in seconds since the epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    /// The row id SQLite assigned (`AUTOINCREMENT`: increasing in insertion order).
    pub id: i64,
    /// The prompt's text (trimmed when added through [`HistoryStorage::add`]).
    pub prompt: String,
    /// When the row was inserted, in seconds since the epoch: the column default,
    /// from the database's clock at the batch's write, not when the prompt was queued.
    pub created_at: i64,
    /// The working directory the prompt was submitted in, when one was recorded.
    pub cwd: Option<String>,
}

impl HistoryEntry {
    /// Appends the entry as one JSON line to `out`:
    /// `{"id":…,"prompt":…,"created_at":…,"cwd":…}` and a newline, `cwd` only when recorded.
    pub fn write_json_line(&self, out: &mut Vec<u8>) {
        let mut obj = Object::new();
        obj.insert("id", Value::number(self.id as f64));
        obj.insert("prompt", Value::string(self.prompt.as_str()));
        obj.insert("created_at", Value::number(self.created_at as f64));
        if let Some(cwd) = &self.cwd {
            obj.insert("cwd", Value::string(cwd.as_str()));
        }
        json::write_object_compact(&obj, out);
        out.push(b'\n');
    }
}

/// Why the history database could not be used. The SQLite or I/O error, where there is
/// one, is the error's source.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// The parent directories of the database file could not be created.
    #[error("cannot create the directory for {path}")]
    CreateDir {
        /// The database file (not the directory).
        path: PathBuf,
        /// The error creating the directories.
        source: io::Error,
    },
    /// SQLite says the file is not a database (`SQLITE_NOTADB`).
    #[error("{path}: not a SQLite database (left unchanged)")]
    NotADatabase {
        /// The database file.
        path: PathBuf,
    },
    /// SQLite found the database corrupt (`SQLITE_CORRUPT`).
    #[error("{path}: the database is corrupt (left unchanged)")]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// Any other SQLite error, a lock still held after [`BUSY_TIMEOUT`] among them.
    #[error("{path}: database error")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// The background writer thread could not be started, or it panicked (found on
    /// close).
    #[error("{path}: the history writer thread failed")]
    WriterFailed {
        /// The database file.
        path: PathBuf,
    },
}

impl HistoryError {
    fn sqlite(path: &Path, source: rusqlite::Error) -> Self {
        let path = path.to_owned();
        match source.sqlite_error_code() {
            Some(ErrorCode::NotADatabase) => HistoryError::NotADatabase { path },
            Some(ErrorCode::DatabaseCorrupt) => HistoryError::Corrupt { path, source },
            _ => HistoryError::Sqlite { path, source },
        }
    }
}

/// The agent's limit handling for any number: non-finite is 0, otherwise floored and
/// clamped to `[0, MAX_LIMIT]`.
pub fn normalize_limit(limit: f64) -> usize {
    if !limit.is_finite() {
        return 0;
    }
    limit.floor().clamp(0.0, MAX_LIMIT as f64) as usize
}

/// The prompt history database.
///
/// `add` only queues; reads see what has been written (by this storage's writer or by any
/// other process). The storage is `Send + Sync`.
pub struct HistoryStorage {
    shared: Arc<Shared>,
    reader: Mutex<Connection>,
    writer: Option<JoinHandle<()>>,
}

/// What the caller's side and the writer thread share.
struct Shared {
    path: PathBuf,
    state: Mutex<State>,
    /// Wakes the writer: something was queued, a flush was requested, or closing.
    wake: Condvar,
    /// Wakes flushers: a write attempt finished.
    written: Condvar,
}

struct State {
    queue: Vec<QueuedPrompt>,
    /// When the current batch's delay ends.
    due: Option<Instant>,
    /// Callers waiting in `flush`; while non-zero the writer does not wait for `due`.
    flushers: usize,
    writing: bool,
    /// Write attempts finished so far.
    attempts: u64,
    /// The error of the last attempt, if it failed; cleared by a later success.
    error: Option<HistoryError>,
    closing: bool,
    /// The last prompt accepted (or the newest row's at open), for the duplicate check.
    last_prompt: Option<String>,
}

struct QueuedPrompt {
    prompt: String,
    cwd: Option<String>,
}

impl HistoryStorage {
    /// Opens (creating if needed, with its parent directories, owner-only) the history
    /// database at `path`, bringing its schema up to date.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, HistoryError> {
        use crate::storage::{FileStorage, OpenMode, SessionStorage};
        let path = path.as_ref();
        // SQLite itself opens and writes the database file (and its WAL); what gjcfs does
        // around it goes through the storage seam.
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            FileStorage
                .ensure_dir(parent)
                .map_err(|source| HistoryError::CreateDir {
                    path: path.to_owned(),
                    source,
                })?;
        }
        // A missing database is created empty and owner-only (an empty file is an empty
        // database): SQLite would create it under the umask, and gives its companions the
        // database file's mode. One that exists (or appears meanwhile) is left as it is;
        // when the file cannot be made here, SQLite's open says why.
        let _ = FileStorage.open_writer(path, OpenMode::CreateNew);
        let err = |e| HistoryError::sqlite(path, e);
        let reader = retry_busy(|| {
            let conn = connect(path)?;
            prepare_schema(&conn)?;
            Ok(conn)
        })
        .map_err(err)?;
        let last_prompt: Option<String> = reader
            .query_row(LAST_PROMPT, [], |row| Ok(text(row.get_ref(0)?)))
            .optional()
            .map_err(err)?;
        let writer_conn = retry_busy(|| connect(path)).map_err(err)?;

        let shared = Arc::new(Shared {
            path: path.to_owned(),
            state: Mutex::new(State {
                queue: Vec::new(),
                due: None,
                flushers: 0,
                writing: false,
                attempts: 0,
                error: None,
                closing: false,
                last_prompt,
            }),
            wake: Condvar::new(),
            written: Condvar::new(),
        });
        let thread_shared = Arc::clone(&shared);
        let writer = std::thread::Builder::new()
            .name("gjcfs-history-writer".into())
            .spawn(move || run_writer(&thread_shared, writer_conn))
            .map_err(|_| HistoryError::WriterFailed {
                path: path.to_owned(),
            })?;
        register_for_exit(&shared);
        Ok(HistoryStorage {
            shared,
            reader: Mutex::new(reader),
            writer: Some(writer),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Queues a prompt. It is trimmed; an empty prompt, or one equal to the last prompt
    /// accepted (across all cwds), is ignored. Returns whether it was queued.
    pub fn add(&self, prompt: &str, cwd: Option<&str>) -> bool {
        let trimmed = js_trim(prompt);
        if trimmed.is_empty() {
            return false;
        }
        let mut state = self.shared.lock();
        if state.last_prompt.as_deref() == Some(trimmed) {
            return false;
        }
        state.last_prompt = Some(trimmed.to_owned());
        state.queue.push(QueuedPrompt {
            prompt: trimmed.to_owned(),
            cwd: cwd.map(str::to_owned),
        });
        if state.due.is_none() {
            state.due = Some(Instant::now() + BATCH_DELAY);
            self.shared.wake.notify_one();
        }
        true
    }

    /// Writes everything queued now, and waits for it. Returns the error of the write if it
    /// failed (the prompts then stay queued and are retried).
    pub fn flush(&self) -> Result<(), HistoryError> {
        self.shared.flush()
    }

    /// Writes everything queued and closes the database. An error means the final write
    /// failed and the prompts it held are lost.
    pub fn close(mut self) -> Result<(), HistoryError> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<(), HistoryError> {
        let Some(writer) = self.writer.take() else {
            return Ok(());
        };
        {
            let mut state = self.shared.lock();
            state.closing = true;
            self.shared.wake.notify_all();
        }
        let joined = writer.join();
        let error = self.shared.lock().error.take();
        if joined.is_err() {
            return Err(HistoryError::WriterFailed {
                path: self.shared.path.clone(),
            });
        }
        error.map_or(Ok(()), Err)
    }

    /// The newest `limit` prompts (at most [`MAX_LIMIT`]), newest first, optionally only
    /// those recorded in `cwd`.
    pub fn get_recent(
        &self,
        limit: usize,
        cwd: Option<&str>,
    ) -> Result<Vec<HistoryEntry>, HistoryError> {
        let limit = limit.min(MAX_LIMIT);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let conn = self.reader();
        let rows = match cwd {
            None => query_entries(&conn, RECENT, rusqlite::params![limit as i64]),
            Some(cwd) => query_entries(&conn, RECENT_BY_CWD, rusqlite::params![cwd, limit as i64]),
        };
        rows.map_err(|e| HistoryError::sqlite(&self.shared.path, e))
    }

    /// Every prompt, oldest first (the reverse of [`HistoryStorage::get_recent`]'s order,
    /// without its limit), each passed to `f` as it is read.
    pub fn for_each_oldest_first(
        &self,
        mut f: impl FnMut(HistoryEntry),
    ) -> Result<(), HistoryError> {
        let conn = self.reader();
        let result = (|| {
            let mut stmt = conn.prepare_cached(ALL_OLDEST_FIRST)?;
            let mut rows = stmt.query([])?;
            while let Some(row) = rows.next()? {
                f(entry(row)?);
            }
            Ok(())
        })();
        result.map_err(|e| HistoryError::sqlite(&self.shared.path, e))
    }

    /// Searches prompts (the [`search`](mod@search) module says how): full-text
    /// prefix matches of every token first, then rows that contain every token as a
    /// substring (ASCII case-insensitively), newest first within each group, at most
    /// `limit` (at most [`MAX_LIMIT`]) rows, each once.
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        cwd: Option<&str>,
    ) -> Result<Vec<HistoryEntry>, HistoryError> {
        let limit = limit.min(MAX_LIMIT);
        if limit == 0 {
            return Ok(Vec::new());
        }
        search::search(&self.reader(), query, limit, cwd, search::Plan::Streaming)
            .map_err(|e| HistoryError::sqlite(&self.shared.path, e))
    }

    fn reader(&self) -> MutexGuard<'_, Connection> {
        self.reader.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for HistoryStorage {
    fn drop(&mut self) {
        // Errors cannot be reported from a drop; `close` reports them.
        let _ = self.shutdown();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn flush(&self) -> Result<(), HistoryError> {
        let mut state = self.lock();
        if state.queue.is_empty() && !state.writing {
            return state.error.take().map_or(Ok(()), Err);
        }
        let start = state.attempts;
        state.flushers += 1;
        self.wake.notify_all();
        loop {
            let settled = state.queue.is_empty() && !state.writing;
            let failed = state.error.is_some() && state.attempts > start;
            if settled || failed {
                break;
            }
            state = self.written.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        state.flushers -= 1;
        state.error.take().map_or(Ok(()), Err)
    }
}

/// The writer thread: waits for a batch to come due (or a flush, or closing), writes it in
/// one transaction, and repeats until closing with nothing queued.
fn run_writer(shared: &Shared, mut conn: Connection) {
    let mut state = shared.lock();
    loop {
        if state.queue.is_empty() {
            if state.closing {
                break;
            }
            state = shared.wake.wait(state).unwrap_or_else(|e| e.into_inner());
            continue;
        }
        let now = Instant::now();
        let due = state.due.unwrap_or(now);
        let retrying = state.error.is_some();
        let urgent = state.closing || (state.flushers > 0 && !retrying);
        if !urgent && now < due {
            state = shared
                .wake
                .wait_timeout(state, due - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            continue;
        }
        let mut batch = std::mem::take(&mut state.queue);
        state.due = None;
        state.writing = true;
        drop(state);
        let result = insert_batch(&mut conn, &batch);
        state = shared.lock();
        state.writing = false;
        state.attempts += 1;
        match result {
            Ok(()) => state.error = None,
            Err(e) => {
                state.error = Some(HistoryError::sqlite(&shared.path, e));
                if !state.closing {
                    // Keep the batch, ahead of anything queued meanwhile, and retry later.
                    batch.append(&mut state.queue);
                    state.queue = batch;
                    state.due = Some(Instant::now() + RETRY_DELAY);
                }
            }
        }
        shared.written.notify_all();
    }
    shared.written.notify_all();
}

fn insert_batch(conn: &mut Connection, batch: &[QueuedPrompt]) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    {
        let mut insert = tx.prepare_cached(INSERT)?;
        for row in batch {
            insert.execute(rusqlite::params![row.prompt, row.cwd])?;
        }
    }
    tx.commit()
}

/// Opens a connection with the agent's settings.
/// Runs `step` again while it fails with SQLITE_BUSY, for up to the busy timeout. Opening a
/// database that another process is creating at the same moment can be refused at once
/// (SQLite's deadlock avoidance skips the busy handler when two connections both need to
/// upgrade their locks, e.g. one switching to WAL while the other creates the schema).
fn retry_busy<T>(mut step: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    let mut pause = std::time::Duration::from_millis(2);
    loop {
        match step() {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

fn connect(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // Reading the schema first makes a file that is not a database fail before the journal
    // mode is touched.
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))?;
    conn.pragma_update_and_check(None, "journal_mode", "WAL", |_| Ok(()))?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    Ok(conn)
}

/// The open-time schema work: create what is missing, migrate a legacy table, and rebuild
/// the full-text index if it was just created.
fn prepare_schema(conn: &Connection) -> rusqlite::Result<()> {
    let had_fts = conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='history_fts'",
            [],
            |_| Ok(()),
        )
        .optional()?
        .is_some();
    create_schema(conn)?;
    if uses_unixepoch(conn)? {
        migrate_legacy_schema(conn)?;
    }
    if !had_fts {
        // As in the agent, a failed rebuild does not stop the open; searches then miss the
        // rows written before the index existed.
        let _ = conn.execute_batch("INSERT INTO history_fts(history_fts) VALUES('rebuild')");
    }
    Ok(())
}

fn uses_unixepoch(conn: &Connection) -> rusqlite::Result<bool> {
    let sql: Option<Option<String>> = conn
        .query_row(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'history'",
            [],
            |row| row.get(0),
        )
        .optional()?;
    Ok(sql.flatten().is_some_and(|s| s.contains("unixepoch(")))
}

/// Moves rows of a table whose `created_at` default uses `unixepoch()` (an older agent's)
/// into a table with the current definition, in one transaction:
/// 1. rename `history` to `history_legacy` (its indexes follow it, keeping their names);
/// 2. drop `idx_history_created_at`, the trigger and the FTS table;
/// 3. create the table and both indexes `IF NOT EXISTS` (the cwd index name still belongs
///    to the legacy table, so that one is not created);
/// 4. copy the rows, keeping id, `created_at` and cwd;
/// 5. drop the legacy table (and with it the cwd index);
/// 6. recreate the FTS table and trigger, and rebuild the index.
///
/// As in the agent, the database then lacks `idx_history_cwd_created_at` until the next
/// open creates it again. The condition is checked again inside the transaction, so two
/// processes opening the same legacy database migrate it once.
pub fn migrate_legacy_schema(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let result = (|| {
        if !uses_unixepoch(conn)? {
            return Ok(());
        }
        conn.execute_batch(
            "ALTER TABLE history RENAME TO history_legacy;
             DROP INDEX IF EXISTS idx_history_created_at;
             DROP TRIGGER IF EXISTS history_ai;
             DROP TABLE IF EXISTS history_fts;",
        )?;
        conn.execute_batch(HISTORY_TABLE)?;
        conn.execute_batch(
            "INSERT INTO history (id, prompt, created_at, cwd)
                 SELECT id, prompt, created_at, cwd FROM history_legacy;
             DROP TABLE history_legacy;",
        )?;
        conn.execute_batch(HISTORY_FTS)?;
        conn.execute_batch("INSERT INTO history_fts(history_fts) VALUES('rebuild')")
    })();
    match result {
        Ok(()) => conn.execute_batch("COMMIT"),
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

fn query_entries(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> rusqlite::Result<Vec<HistoryEntry>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map(params, entry)?;
    rows.collect()
}

/// A row `(id, prompt, created_at, cwd)`. Values of unexpected types (possible only if
/// another program wrote them) are converted rather than rejected.
fn entry(row: &Row<'_>) -> rusqlite::Result<HistoryEntry> {
    Ok(HistoryEntry {
        id: row.get(0)?,
        prompt: text(row.get_ref(1)?),
        created_at: match row.get_ref(2)? {
            ValueRef::Integer(i) => i,
            ValueRef::Real(f) => f as i64,
            other => text(other).trim().parse().unwrap_or(0),
        },
        cwd: match row.get_ref(3)? {
            ValueRef::Null => None,
            other => Some(text(other)),
        },
    })
}

/// A column value as text; invalid UTF-8 is replaced.
fn text(value: ValueRef<'_>) -> String {
    match value {
        ValueRef::Null => String::new(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(f) => f.to_string(),
        ValueRef::Text(bytes) | ValueRef::Blob(bytes) => {
            String::from_utf8_lossy(bytes).into_owned()
        }
    }
}

/// Every open storage, for the exit hook.
static OPEN_STORAGES: Mutex<Vec<Weak<Shared>>> = Mutex::new(Vec::new());

fn register_for_exit(shared: &Arc<Shared>) {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| crate::storage::sys::at_exit(flush_all_at_exit));
    let mut open = OPEN_STORAGES.lock().unwrap_or_else(|e| e.into_inner());
    open.retain(|w| w.strong_count() > 0);
    open.push(Arc::downgrade(shared));
}

/// Writes what every open storage of this process still has queued, and waits for it: the
/// explicit close path of a process about to exit. Returns the first failure (every storage
/// is flushed regardless).
pub fn flush_all() -> Result<(), HistoryError> {
    let open: Vec<Arc<Shared>> = OPEN_STORAGES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter_map(Weak::upgrade)
        .collect();
    let mut first = Ok(());
    for shared in open {
        let flushed = shared.flush();
        if first.is_ok() {
            first = flushed;
        }
    }
    first
}

/// Runs at process exit on Unix: [`flush_all`]. The writer threads are still running at
/// that point, so this is an ordinary flush.
extern "C" fn flush_all_at_exit() {
    let _ = std::panic::catch_unwind(flush_all);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_one_json_line_with_its_cwd_when_recorded() {
        let entry = HistoryEntry {
            id: 7,
            prompt: "fix \"it\"\nnow\u{1}".into(),
            created_at: 1_767_225_600,
            cwd: Some("/w".into()),
        };
        let mut line = Vec::new();
        entry.write_json_line(&mut line);
        assert_eq!(
            String::from_utf8(line).unwrap(),
            "{\"id\":7,\"prompt\":\"fix \\\"it\\\"\\nnow\\u0001\",\"created_at\":1767225600,\"cwd\":\"/w\"}\n"
        );
        let mut line = Vec::new();
        HistoryEntry { cwd: None, ..entry }.write_json_line(&mut line);
        assert!(!String::from_utf8(line).unwrap().contains("cwd"));
    }

    #[test]
    fn bundled_sqlite_has_fts5() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE VIRTUAL TABLE t USING fts5(x); INSERT INTO t VALUES ('hello world');",
        )
        .unwrap();
        let n: i64 = conn
            .query_row("SELECT count(*) FROM t WHERE t MATCH '\"wor\"*'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(n, 1);
    }

    #[test]
    fn flush_all_writes_what_open_storages_hold() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("history.db");
        let storage = HistoryStorage::open(&path).unwrap();
        assert!(storage.add("queued, not yet written", Some("/w")));
        flush_all().unwrap();
        // Another connection sees it while the first storage is still open.
        let other = HistoryStorage::open(&path).unwrap();
        let recent = other.get_recent(10, None).unwrap();
        assert_eq!(recent.len(), 1);
        assert_eq!(recent[0].prompt, "queued, not yet written");
        other.close().unwrap();
        storage.close().unwrap();
        flush_all().unwrap();
    }

    #[test]
    fn limits_like_the_agent() {
        assert_eq!(normalize_limit(f64::NAN), 0);
        assert_eq!(normalize_limit(f64::INFINITY), 0);
        assert_eq!(normalize_limit(-3.0), 0);
        assert_eq!(normalize_limit(2.9), 2);
        assert_eq!(normalize_limit(5000.0), 1000);
    }
}
