//! The index's schema: its tables, its ids (format and application), how a connection is
//! configured, and creating the tables in a new file.

use std::time::Duration;

use rusqlite::Connection;

use super::instances;

/// The index format, in `PRAGMA user_version`; an index of another is rebuilt.
pub const FORMAT: i64 = 13;
/// `PRAGMA application_id` of an index ("gjcS").
pub const APPLICATION_ID: i32 = 0x676a_6353;

/// How long a connection waits for another to let the index's write lock go.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

const SCHEMA: &str = "
CREATE TABLE files (
    id INTEGER PRIMARY KEY,
    path BLOB NOT NULL UNIQUE,
    dev INTEGER NOT NULL, ino INTEGER NOT NULL, len INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    ctime_ns INTEGER NOT NULL,
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
CREATE INDEX files_stamp ON files(path, id, dev, ino, len, mtime_ns, ctime_ns);
CREATE TABLE docs (
    id INTEGER PRIMARY KEY,
    file INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    entry_id TEXT, parent_id TEXT,
    -- NULL where the kind is the entry type (doc_rows::held_kind).
    entry_type TEXT NOT NULL, kind TEXT,
    time_ms INTEGER,
    on_leaf INTEGER NOT NULL,
    -- TEXT, or a BLOB of zstd (stored_text.rs).
    text
);
CREATE INDEX docs_entry ON docs(file, entry_id);
-- The files each document's entry read or changed (touches.rs), in the order it names them:
-- the path as written, and resolved against the session's cwd.
CREATE TABLE touches (
    doc INTEGER NOT NULL,
    -- 'read' or 'changed'.
    action TEXT NOT NULL,
    -- The tool's name, or the record's type.
    source TEXT NOT NULL,
    written TEXT NOT NULL,
    resolved TEXT NOT NULL
);
CREATE INDEX touches_resolved ON touches(resolved);
CREATE INDEX touches_doc ON touches(doc);
-- Each document's words (words.rs), space-separated.
-- Contentless: a row is deleted by giving its words again (doc_rows::delete_text), so
-- that with the secure-delete option its entries are removed from the file, not hidden.
CREATE VIRTUAL TABLE words USING fts5(text, content='', tokenize='ascii');
-- Every word the word index was given, once (substring.rs), and each word's distinct
-- trigrams as digest tokens, by the word's id.
CREATE TABLE terms (id INTEGER PRIMARY KEY, term TEXT NOT NULL UNIQUE);
CREATE VIRTUAL TABLE term_grams USING fts5(text, content='', tokenize='ascii', detail='none');
-- files_gen counts the transactions that may have changed files (update.rs): each adds
-- one first. stamp names this index among every index made (trust.rs).
CREATE TABLE meta (id INTEGER PRIMARY KEY CHECK (id = 1), files_gen INTEGER NOT NULL,
    stamp TEXT NOT NULL);
INSERT INTO meta VALUES (1, 0, lower(hex(randomblob(16))));
-- What the last update saw of the store's directories (listing.rs), as of files_gen: it
-- agrees with files while files_gen is that of meta.
CREATE TABLE listing (id INTEGER PRIMARY KEY CHECK (id = 1), files_gen INTEGER NOT NULL,
    data BLOB NOT NULL);
";

/// The page size of a new index (an existing one keeps its own). Measured on 10,000
/// sessions against the 4 KB default (docs/benchmarks-archive.md, "Search"): builds 5–20 %
/// faster, an index 5 % smaller, a scan of every document's text 30 % faster; warm queries
/// of the word index moved both ways within the host's noise (a phrase perhaps 1–2 ms
/// slower). 64 KB pages made those queries slower.
const PAGE_SIZE: i64 = 32 << 10;

pub(super) fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "page_size", PAGE_SIZE)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "secure_delete", "ON")?;
    set_cache(conn, CacheFor::Queries)?;
    instances::register(conn)
}

/// What a connection's page cache is sized for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheFor {
    /// 512 KB (16 pages). A query reads most pages once, and a cache that grows takes fresh
    /// memory for each page it adds, a page fault per 4 KB (about 2 µs each on the machine
    /// of docs/benchmarks-archive.md); a small one reuses its buffers. A phrase of common
    /// words, which reads 7 MB of word lists, took 13 ms instead of 16 ms with it.
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
pub(super) fn is_current(conn: &Connection) -> rusqlite::Result<bool> {
    let app: i32 = conn.query_row("PRAGMA application_id", [], |r| r.get(0))?;
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if app != APPLICATION_ID || version != FORMAT {
        return Ok(false);
    }
    // Each table's first row: a count would read all of it.
    for table in [
        "files",
        "docs",
        "touches",
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

pub(super) fn create(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(&format!(
        "BEGIN; {SCHEMA} \
         INSERT INTO words(words, rank) VALUES ('hashsize', {FTS_HASH_SIZE}); \
         INSERT INTO words(words, rank) VALUES ('secure-delete', 1); \
         INSERT INTO term_grams(term_grams, rank) VALUES ('secure-delete', 1); \
         INSERT INTO term_grams(term_grams, rank) VALUES ('hashsize', {FTS_HASH_SIZE}); \
         PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {FORMAT}; COMMIT;"
    ))
}

/// Whether the file is a database with no tables (a new one).
pub(super) fn is_empty(conn: &Connection) -> rusqlite::Result<bool> {
    let n: i64 = conn.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))?;
    Ok(n == 0)
}
