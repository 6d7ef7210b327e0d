//! The index file: where it lives, its schema, opening (and replacing what is not an index
//! of this format), and the search statement.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{
    params, params_from_iter, types::Value as Sql, Connection, OptionalExtension, Row, Transaction,
    TransactionBehavior,
};

use super::instances;
use super::listing::{stat_bytes, Listing};
use super::query::{words_match, Query};
use super::rank::{self, COMMON_FROM};
use super::scan::Look;
use super::snippet::Snippet;
use super::substring::{self, Candidates};
use super::{FileState, Filters, Hit, SearchError, Stamp, Stamps, Stat};
use gjcfs_engine::load::ReadMark;
use gjcfs_engine::storage::{
    path_from_bytes, path_to_bytes, FileId, FileStorage, OpenMode, SessionStorage,
};

/// The index format, in `PRAGMA user_version`; an index of another is rebuilt.
pub const FORMAT: i64 = 8;
/// `PRAGMA application_id` of an index ("gjcS").
pub const APPLICATION_ID: i32 = 0x676a_6353;
/// The index file's name in its directory.
pub const INDEX_FILE: &str = "search.sqlite";

const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

const SCHEMA: &str = "
CREATE TABLE files (
    id INTEGER PRIMARY KEY,
    path BLOB NOT NULL UNIQUE,
    dev INTEGER NOT NULL, ino INTEGER NOT NULL, len INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    mark_end INTEGER, mark_newlines INTEGER, mark_tail BLOB, patches_apply INTEGER,
    incremental INTEGER NOT NULL,
    next_seq INTEGER NOT NULL,
    leaf_seq INTEGER, leaf_id TEXT,
    session_id TEXT NOT NULL, cwd TEXT NOT NULL, title TEXT, created TEXT NOT NULL,
    first_prompt TEXT
);
CREATE INDEX files_cwd ON files(cwd);
-- The copies of one session (discovery::keep_live_copies), for the live-copy filter.
CREATE INDEX files_session ON files(session_id, mtime_ns);
-- What a check for changes reads of every file, in a few pages.
CREATE INDEX files_stamp ON files(path, id, dev, ino, len, mtime_ns);
CREATE TABLE docs (
    id INTEGER PRIMARY KEY,
    file INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    entry_id TEXT, parent_id TEXT,
    entry_type TEXT NOT NULL, kind TEXT NOT NULL,
    time_ms INTEGER,
    on_leaf INTEGER NOT NULL,
    text TEXT
);
CREATE INDEX docs_entry ON docs(file, entry_id);
-- Each document's words (words.rs), space-separated.
CREATE VIRTUAL TABLE words USING fts5(text, content='', contentless_delete=1,
    tokenize='ascii');
-- Every word the word index was given, once (substring.rs), and each word's distinct
-- trigrams as digest tokens, by the word's id.
CREATE TABLE terms (id INTEGER PRIMARY KEY, term TEXT NOT NULL UNIQUE);
CREATE VIRTUAL TABLE term_grams USING fts5(text, content='', tokenize='ascii', detail='none');
-- files_gen counts the transactions that may have changed files (update.rs): each adds
-- one first.
CREATE TABLE meta (id INTEGER PRIMARY KEY CHECK (id = 1), files_gen INTEGER NOT NULL);
INSERT INTO meta VALUES (1, 0);
-- What the last update saw of the store's directories (listing.rs), as of files_gen: it
-- agrees with files while files_gen is that of meta.
CREATE TABLE listing (id INTEGER PRIMARY KEY CHECK (id = 1), files_gen INTEGER NOT NULL,
    data BLOB NOT NULL);
";

/// Where the index of a store lives by default: `<cache>/gjcfs/search/<key>` where
/// `<cache>` is `$XDG_CACHE_HOME` (if absolute), else `~/.cache` (on Windows
/// `%LOCALAPPDATA%`), and `<key>` is the
/// store directory's name followed by a digest of its absolute path, so every agent
/// directory (or session directory) has its own.
pub fn default_index_dir(store: &Path) -> Option<PathBuf> {
    use sha2::{Digest, Sha256};
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            // Windows keeps caches in the local application data directory.
            #[cfg(windows)]
            let cache = std::env::var_os("LOCALAPPDATA").map(PathBuf::from);
            #[cfg(not(windows))]
            let cache = std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache"));
            cache.filter(|p| p.is_absolute())
        })?;
    let store = FileStorage
        .canonicalize(store)
        .unwrap_or_else(|_| store.to_owned());
    let digest = Sha256::digest(path_bytes(&store));
    let name = store
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let hex = gjcfs_engine::blob::hex(&digest[..8]);
    Some(
        cache
            .join("gjcfs")
            .join("search")
            .join(format!("{name}-{hex}")),
    )
}

/// The page size of a new index (an existing one keeps its own). Measured on 10,000
/// sessions against the 4 KB default (BENCHMARKS.md, "Search"): builds 5–20 % faster, an
/// index 5 % smaller, a scan of every document's text 30 % faster; warm queries of the word
/// index moved both ways within the host's noise (a phrase perhaps 1–2 ms slower). 64 KB
/// pages made those queries slower.
const PAGE_SIZE: i64 = 32 << 10;

fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "page_size", PAGE_SIZE)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    set_cache(conn, CacheFor::Queries)?;
    instances::register(conn)
}

/// What a connection's page cache is sized for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheFor {
    /// 512 KB (16 pages). A query reads most pages once, and a cache that grows takes fresh
    /// memory for each page it adds, a page fault per 4 KB (about 2 µs each on the machine
    /// of BENCHMARKS.md); a small one reuses its buffers. A phrase of common words, which
    /// reads 7 MB of word lists, took 13 ms instead of 16 ms with it.
    Queries,
    /// 32 MB: an update rewrites FTS5 segments and the documents' b-tree pages many times
    /// over.
    Update,
}

/// Sizes the page cache of `conn` for `what`.
pub fn set_cache(conn: &Connection, what: CacheFor) -> rusqlite::Result<()> {
    let kib: i64 = match what {
        CacheFor::Queries => 512,
        CacheFor::Update => 32 << 10,
    };
    // A negative size is in KiB.
    conn.pragma_update(None, "cache_size", -kib)
}

/// Whether `conn` holds an index of this format: the ids, then a read of every table.
/// Damage deeper in the file shows when it is read ([`is_corrupt`]).
fn is_current(conn: &Connection) -> rusqlite::Result<bool> {
    let app: i32 = conn.query_row("PRAGMA application_id", [], |r| r.get(0))?;
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if app != APPLICATION_ID || version != FORMAT {
        return Ok(false);
    }
    // Each table's first row: a count would read all of it.
    for table in [
        "files",
        "docs",
        "words",
        "terms",
        "term_grams",
        "meta",
        "listing",
    ] {
        conn.prepare(&format!("SELECT 1 FROM {table} LIMIT 1"))?
            .query([])?
            .next()?;
    }
    Ok(true)
}

/// FTS5's buffer of terms not yet written, per table: a transaction's worth of text
/// ([`super::update`] commits every 64 MB) becomes one segment instead of dozens to merge.
const FTS_HASH_SIZE: usize = 64 << 20;

fn create(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(&format!(
        "BEGIN; {SCHEMA} \
         INSERT INTO words(words, rank) VALUES ('hashsize', {FTS_HASH_SIZE}); \
         INSERT INTO term_grams(term_grams, rank) VALUES ('hashsize', {FTS_HASH_SIZE}); \
         PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {FORMAT}; COMMIT;"
    ))
}

/// Whether the file is a database with no tables (a new one).
fn is_empty(conn: &Connection) -> rusqlite::Result<bool> {
    let n: i64 = conn.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))?;
    Ok(n == 0)
}

/// Opens the index at `path`, replacing it when it is not a current index.
pub fn open_file(dir: &Path, path: &Path) -> Result<Connection, SearchError> {
    FileStorage
        .ensure_dir(dir)
        .map_err(|source| SearchError::CreateDir {
            path: dir.to_owned(),
            source,
        })?;
    let sql = |source| SearchError::Sqlite {
        path: path.to_owned(),
        source,
    };
    create_owner_only(path);
    let attempt = || -> rusqlite::Result<Option<Connection>> {
        let conn = Connection::open(path)?;
        configure(&conn)?;
        if is_empty(&conn)? {
            create(&conn)?;
            return Ok(Some(conn));
        }
        Ok(is_current(&conn)?.then_some(conn))
    };
    match attempt() {
        Ok(Some(conn)) => return Ok(conn),
        // Another format or application, or damaged: it is a cache, so it is replaced.
        Ok(None) => {}
        Err(rusqlite::Error::SqliteFailure(e, _))
            if matches!(
                e.code,
                rusqlite::ErrorCode::NotADatabase
                    | rusqlite::ErrorCode::DatabaseCorrupt
                    | rusqlite::ErrorCode::SchemaChanged
                    | rusqlite::ErrorCode::Unknown
            ) => {}
        Err(e @ rusqlite::Error::SqliteFailure(..)) if !is_permission(&e) => {}
        Err(e) => return Err(sql(e)),
    }
    recreate(path)
}

/// Creates the index file empty and owner-only (0600, or a DACL for the owner on Windows) if
/// it is missing: SQLite would create it readable by everyone (0644), and it gives its
/// write-ahead log and shared-memory files the database file's mode. An empty file is an
/// empty database. When the file cannot be made here, SQLite's open says why.
fn create_owner_only(path: &Path) {
    let _ = FileStorage.open_writer(path, OpenMode::CreateNew);
}

/// Whether an error says the file is damaged or not a database.
pub fn is_corrupt(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if matches!(
        f.code,
        rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase
    ))
}

/// Replaces the index file by a new empty index.
pub fn recreate(path: &Path) -> Result<Connection, SearchError> {
    let sql = |source| SearchError::Sqlite {
        path: path.to_owned(),
        source,
    };
    remove_index_files(path).map_err(|source| SearchError::Replace {
        path: path.to_owned(),
        source,
    })?;
    create_owner_only(path);
    let conn = Connection::open(path).map_err(sql)?;
    configure(&conn).map_err(sql)?;
    create(&conn).map_err(sql)?;
    Ok(conn)
}

/// Whether SQLite could not open or write the file because of where it is (read-only
/// directory or file, no permission), which replacing it would not cure.
fn is_permission(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if matches!(
        f.code,
        rusqlite::ErrorCode::ReadOnly
            | rusqlite::ErrorCode::CannotOpen
            | rusqlite::ErrorCode::PermissionDenied
            | rusqlite::ErrorCode::DatabaseBusy
            | rusqlite::ErrorCode::DatabaseLocked
    ))
}

/// Removes the index file at `path` with SQLite's `-wal` and `-shm` files (those missing
/// are no error).
pub(super) fn remove_index_files(path: &Path) -> std::io::Result<()> {
    for suffix in ["", "-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        match FileStorage.unlink(Path::new(&name)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

pub fn open_memory() -> Result<Connection, SearchError> {
    let sql = |source| SearchError::Sqlite {
        path: PathBuf::from(":memory:"),
        source,
    };
    let conn = Connection::open_in_memory().map_err(sql)?;
    instances::register(&conn).map_err(sql)?;
    create(&conn).map_err(sql)?;
    Ok(conn)
}

pub fn path_of(bytes: &[u8]) -> PathBuf {
    path_from_bytes(bytes).into_owned()
}

pub fn path_bytes(path: &Path) -> &[u8] {
    path_to_bytes(path)
}

/// Columns of `files` read into a [`FileState`], in this order.
pub const FILE_COLUMNS: &str = "id, dev, ino, len, mtime_ns, mark_end, mark_newlines, mark_tail, \
     patches_apply, incremental, next_seq, leaf_seq, leaf_id";

pub fn file_state(row: &Row, at: usize) -> rusqlite::Result<FileState> {
    let stat = Stat {
        dev: row.get::<_, i64>(at + 1)? as u64,
        ino: row.get::<_, i64>(at + 2)? as u64,
        len: row.get::<_, i64>(at + 3)? as u64,
        mtime_ns: row.get(at + 4)?,
    };
    let mark = match row.get::<_, Option<i64>>(at + 5)? {
        Some(end) => Some(ReadMark {
            id: FileId {
                dev: stat.dev,
                ino: stat.ino,
            },
            end: end as u64,
            newlines: row.get::<_, i64>(at + 6)? as usize,
            tail: row.get(at + 7)?,
            patches_apply: row.get(at + 8)?,
        }),
        None => None,
    };
    let leaf = match (row.get::<_, Option<i64>>(at + 11)?, row.get(at + 12)?) {
        (Some(seq), Some(id)) => Some((seq, id)),
        _ => None,
    };
    Ok(FileState {
        id: row.get(at)?,
        stat,
        mark,
        incremental: row.get(at + 9)?,
        next_seq: row.get(at + 10)?,
        leaf,
    })
}

/// The state of file `id`.
pub fn load_state(conn: &Connection, id: i64) -> rusqlite::Result<FileState> {
    conn.prepare_cached(&format!("SELECT {FILE_COLUMNS} FROM files WHERE id = ?1"))?
        .query_row([id], |r| file_state(r, 0))
}

/// The stamp of every indexed file, read from the `files_stamp` index alone.
pub fn read_stamps(conn: &Connection) -> rusqlite::Result<Stamps> {
    let mut stmt = conn.prepare_cached(
        "SELECT path, id, dev, ino, len, mtime_ns FROM files INDEXED BY files_stamp",
    )?;
    let mut rows = stmt.query([])?;
    let mut stamps = Stamps::default();
    while let Some(row) = rows.next()? {
        let stat = Stat {
            dev: row.get::<_, i64>(2)? as u64,
            ino: row.get::<_, i64>(3)? as u64,
            len: row.get::<_, i64>(4)? as u64,
            mtime_ns: row.get(5)?,
        };
        let path = path_from_bytes(row.get_ref(0)?.as_blob()?);
        stamps.insert(
            &path,
            Stamp {
                id: row.get(1)?,
                stat,
            },
        );
    }
    Ok(stamps)
}

/// The listing recorded by the last update ([`Listing`]) if it still agrees with `files`
/// (no transaction changed `files` since); `None` otherwise, or when it does not decode.
///
/// The bytes are read with SQLite's blob reads straight into one buffer (a column read of a
/// listing of 10,000 files first assembled it in another, a third of the read's time), in
/// one read transaction with the check that it agrees.
pub fn read_listing(conn: &Connection) -> rusqlite::Result<Option<Listing>> {
    let tx = Transaction::new_unchecked(conn, TransactionBehavior::Deferred)?;
    let len: Option<i64> = tx
        .prepare_cached(
            "SELECT length(l.data) FROM listing l \
             JOIN meta m ON m.id = 1 AND l.files_gen = m.files_gen WHERE l.id = 1",
        )?
        .query_row([], |r| r.get(0))
        .optional()?;
    let Some(len) = len.and_then(|n| usize::try_from(n).ok()) else {
        return Ok(None);
    };
    let blob = tx.blob_open(rusqlite::MAIN_DB, c"listing", c"data", 1, true)?;
    let mut data = vec![0; len];
    let read = blob.read_at(&mut data, 0)?;
    drop(blob);
    tx.commit()?;
    Ok((read == len).then(|| Listing::decode(data)).flatten())
}

/// Records the listing of `look` with the stats of `files`, the stamps read when
/// `PRAGMA data_version` was `files_version` and kept up to date with this connection's
/// changes since. Nothing is recorded when another connection changed the index since then
/// (its changes may not be in `files`): the listing must agree with the table. `last` is
/// the listing read before this connection's changes: when the new one has its shape, only
/// the stats that changed are written into it, not the whole listing again.
pub fn write_listing(
    conn: &Connection,
    look: &Look,
    last: Option<&Listing>,
    files: &Stamps,
    files_version: i64,
) -> rusqlite::Result<()> {
    // The write lock first: no other connection commits until this one does.
    let tx = Transaction::new_unchecked(conn, TransactionBehavior::Immediate)?;
    let version: i64 = tx.query_row("PRAGMA data_version", [], |r| r.get(0))?;
    if version != files_version {
        return Ok(());
    }
    let gen: i64 = tx.query_row("SELECT files_gen FROM meta WHERE id = 1", [], |r| r.get(0))?;
    match last.and_then(|l| look.patches(l, files)) {
        Some(writes) => {
            // `last` is still the row: only this connection wrote since it was read.
            let mut blob = tx.blob_open(rusqlite::MAIN_DB, c"listing", c"data", 1, false)?;
            for (at, stat) in writes {
                blob.write_at(&stat_bytes(&stat), at)?;
            }
            drop(blob);
            tx.prepare_cached("UPDATE listing SET files_gen = ?1 WHERE id = 1")?
                .execute([gen])?;
        }
        None => {
            tx.prepare_cached(
                "INSERT OR REPLACE INTO listing(id, files_gen, data) VALUES (1, ?1, ?2)",
            )?
            .execute(params![gen, look.listing(files)])?;
        }
    }
    tx.commit()
}

/// Replaces the listing by the encoded listing `new`, if it still agrees with `files`.
pub fn replace_listing(conn: &Connection, new: &[u8]) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "UPDATE listing SET data = ?1 WHERE id = 1 \
         AND files_gen = (SELECT files_gen FROM meta WHERE id = 1)",
    )?
    .execute([new])?;
    Ok(())
}

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
) -> rusqlite::Result<Vec<(Hit, Stat)>> {
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

/// Where a query's matches come from.
enum Source {
    /// The documents matching this FTS5 expression over the word index.
    Words(String),
    /// Every document with text (a substring that names no words to narrow by).
    Every,
}

/// A query's matches as SQL: documents `d` of files `f` under the filters.
struct Matches {
    /// `FROM … WHERE …`.
    from: String,
    params: Vec<Sql>,
    /// The column that numbers matches in the order they were indexed.
    order: &'static str,
    /// The relevance of a match (lower is better).
    score: &'static str,
}

impl Matches {
    fn of(source: &Source, filters: &Filters) -> Matches {
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
        if let Some(cwd) = &filters.cwd {
            from.push_str(" AND f.cwd = ?");
            params.push(Sql::Text(cwd.clone()));
        }
        if let Some(since) = filters.since_ms {
            from.push_str(" AND d.time_ms >= ?");
            params.push(Sql::Integer(since));
        }
        if let Some(until) = filters.until_ms {
            from.push_str(" AND d.time_ms < ?");
            params.push(Sql::Integer(until));
        }
        if let Some(role) = filters.role {
            let kinds = role.kinds();
            from.push_str(&format!(
                " AND d.kind IN ({})",
                vec!["?"; kinds.len()].join(",")
            ));
            params.extend(kinds.iter().map(|k| Sql::Text((*k).to_owned())));
        }
        // Only the live copy of a session that is in several files (a legacy session and
        // its managed copy): the newest by mtime (in ms), then the first by path (as bytes), as
        // `discovery::keep_live_copies` keeps it.
        from.push_str(
            " AND NOT EXISTS (SELECT 1 FROM files g WHERE g.session_id = f.session_id \
             AND g.id != f.id AND (g.mtime_ns / 1000000 > f.mtime_ns / 1000000 \
             OR (g.mtime_ns / 1000000 = f.mtime_ns / 1000000 AND g.path < f.path)))",
        );
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

fn sql_count(n: usize) -> i64 {
    n.min(i64::MAX as usize) as i64
}

/// The columns of a hit, after its id and score.
const HIT_COLUMNS: &str = "f.path, f.session_id, f.title, f.cwd, d.entry_id, d.entry_type, \
     d.kind, d.time_ms, d.on_leaf, d.text, f.dev, f.ino, f.len, f.mtime_ns, f.first_prompt";

/// Where a word query's window has each row's [`instances::FUNCTION`]: after the document's
/// id and the 15 [`HIT_COLUMNS`].
const COUNTS_AT: usize = 16;

/// A hit from a row holding [`HIT_COLUMNS`] from column `at` on, and the stat its file was
/// indexed at.
fn hit_of(row: &Row, at: usize, score: f64, snippet: Snippet) -> rusqlite::Result<(Hit, Stat)> {
    let stat = Stat {
        dev: row.get::<_, i64>(at + 10)? as u64,
        ino: row.get::<_, i64>(at + 11)? as u64,
        len: row.get::<_, i64>(at + 12)? as u64,
        mtime_ns: row.get(at + 13)?,
    };
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
        first_prompt: row.get(at + 14)?,
        score,
        snippet,
    };
    Ok((hit, stat))
}

/// The best hits by FTS5's bm25 over every match.
///
/// The ranking runs over the matches' ids, scores and times only, and the text of the
/// best is read afterwards: sorting every match with its text made a frequent word cost
/// its whole posting list in text. A substring's candidates are checked against their
/// text, so more are ranked than asked for, and more again while checks fail.
fn ranked_by_bm25(
    conn: &Connection,
    query: &Query,
    filters: &Filters,
    matches: &Matches,
) -> rusqlite::Result<Vec<(Hit, Stat)>> {
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
            let text: String = row.get(11)?;
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

/// The best hits of a common query among its newest `window` matches ([`super::rank`]);
/// a substring's window grows while it holds fewer than `limit` true matches. `None` when
/// the query has no more than `window` matches: it is not common.
///
/// A word query's counts come from the word index ([`instances`]) and each document's
/// length from its size, so only the text of the hits shown is read (for their snippets);
/// a substring's are counted in each candidate's text, which says whether it matches.
fn ranked_in_window(
    conn: &Connection,
    query: &Query,
    filters: &Filters,
    mut window: usize,
    matches: &Matches,
) -> rusqlite::Result<Option<Vec<(Hit, Stat)>>> {
    let Matches {
        from,
        params,
        order,
        ..
    } = matches;
    // The row's counts: (columns of the select, from the row).
    let (columns, phrases) = match query {
        Query::Terms(terms) => (
            format!(
                "{}, {}(words)",
                HIT_COLUMNS.replace("d.text", "octet_length(d.text)"),
                instances::FUNCTION
            ),
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
        // (id, the row's hit without its score and snippet, its text if read), and its
        // counts.
        let mut found = Vec::new();
        let mut counts = Vec::new();
        let mut seen = 0;
        while let Some(row) = rows.next()? {
            seen += 1;
            if seen > window {
                break;
            }
            let (c, text) = match query {
                Query::Terms(_) => {
                    let tf = instances::decode(&row.get::<_, Vec<u8>>(COUNTS_AT)?, phrases)
                        .ok_or_else(|| {
                            rusqlite::Error::InvalidColumnType(
                                COUNTS_AT,
                                instances::FUNCTION.to_owned(),
                                rusqlite::types::Type::Blob,
                            )
                        })?;
                    let len = row.get::<_, Option<i64>>(10)?.unwrap_or(0);
                    (
                        rank::Counts {
                            tf,
                            len: u32::try_from(len).unwrap_or(u32::MAX),
                        },
                        None,
                    )
                }
                Query::Substring(needle) => {
                    let text: String = row.get(10)?;
                    let Some(c) = rank::substring_counts(&text, needle) else {
                        continue;
                    };
                    (c, Some(text))
                }
            };
            let id: i64 = row.get(0)?;
            found.push((id, hit_of(row, 1, 0.0, Snippet::default())?, text));
            counts.push(c);
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
        for ((_, (hit, _), _), score) in found.iter_mut().zip(rank::scores(&counts)) {
            hit.score = score;
        }
        found.sort_by(|(a_id, (a, _), _), (b_id, (b, _), _)| {
            a.score
                .total_cmp(&b.score)
                .then(b.time_ms.cmp(&a.time_ms))
                .then(b_id.cmp(a_id))
        });
        found.truncate(filters.limit);
        drop(rows);
        // Only the hits shown need their snippet.
        let mut text_of = conn.prepare_cached("SELECT text FROM docs WHERE id = ?1")?;
        let mut hits = Vec::with_capacity(found.len());
        for (id, (mut hit, stat), text) in found {
            let text = match text {
                Some(text) => text,
                None => text_of
                    .query_row([id], |r| r.get::<_, Option<String>>(0))?
                    .unwrap_or_default(),
            };
            hit.snippet = Snippet::of(&text, query).unwrap_or_default();
            hits.push((hit, stat));
        }
        return Ok(Some(hits));
    }
}
