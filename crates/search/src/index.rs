//! [`SearchIndex`]: the index itself (one SQLite connection, what it knows of each file,
//! where the files are read), opening it, and the types its answers are made of ([`Hit`],
//! [`Change`], [`UpdateReport`], [`Progress`]). Its operations live beside it, one
//! concern a module (`update.rs`, `run.rs`, `touched.rs`, …).

use std::collections::HashSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use rusqlite::Connection;

use super::stamps::{Stamp, Stamps};
use super::{claim, file_rows, index_file, lock_wait, run, saved_listing, scan, update, watch};
use super::{Filters, Query, SearchError, Snippet, Store, Watching, INDEX_FILE};
use gjcfs_engine::format::blob::BlobStore;
use gjcfs_engine::read::load::{LoadError, ReadMark};
use gjcfs_engine::storage::{FileStorage, FileVersion, SessionStorage};

/// Whether an index file is in `dir` (a search built one there).
pub fn index_exists(dir: &Path) -> bool {
    FileStorage.exists(&dir.join(INDEX_FILE))
}

/// Removes the index in `dir` ([`INDEX_FILE`] with its `-wal` and `-shm` files), as
/// [`SearchIndex::discard`] does, for an index that could not even be opened.
pub fn remove_index(dir: &Path) -> std::io::Result<()> {
    index_file::remove_index_files(&dir.join(INDEX_FILE))
}

/// Each path once (in byte order).
pub(crate) fn distinct(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut paths = paths.to_vec();
    paths.sort_unstable_by(|a, b| a.as_os_str().cmp(b.as_os_str()));
    paths.dedup();
    paths
}

/// One matching document.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub path: PathBuf,
    pub session_id: String,
    pub title: Option<String>,
    /// The first line of the session's first user prompt, the title it is shown under
    /// without a title of its own ([`gjcfs_engine::store::discovery::shown_title`]), cut
    /// after [`PROMPT_CHARS`] characters that are neither whitespace nor controls.
    pub first_prompt: Option<String>,
    pub cwd: String,
    /// `None` for a session's title.
    pub entry_id: Option<String>,
    /// The record's `type` (`session` for a title).
    pub entry_type: String,
    /// The message role, the entry type of other entries, or `title`.
    pub kind: String,
    /// Milliseconds since the epoch.
    pub time_ms: Option<i64>,
    /// Whether the entry is on the path from the root to the session's leaf (always true
    /// for a title).
    pub on_leaf_path: bool,
    /// Relevance, lower is better: FTS5's bm25 when the query has at most
    /// [`rank::COMMON_FROM`] matches (or the limit), else the same formula over the window
    /// of its newest matches ([`rank`]).
    pub score: f64,
    pub snippet: Snippet,
}

/// What an update did to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A file not indexed before.
    Added,
    /// Complete lines appended to the file were indexed on their own: `records` new
    /// records, `edited` records whose message an entry patch replaced.
    Appended { records: usize, edited: usize },
    /// The file was read again whole (replaced, shrunk, rewritten, or appended to in a way
    /// that cannot be replayed on its own).
    Reindexed,
    /// The file is gone from the store.
    Removed,
}

/// A change to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionChange {
    pub path: PathBuf,
    pub change: Change,
}

/// What [`SearchIndex::update`] did.
#[derive(Debug, Default)]
pub struct UpdateReport {
    pub changes: Vec<SessionChange>,
    /// Files of the store that were not changed.
    pub unchanged: usize,
    /// Files that could not be read (they are tried again at the next update).
    pub failed: Vec<(PathBuf, LoadError)>,
    /// Whether a watcher kept the index fresh, so that no file was checked
    /// ([`SearchIndex::is_fresh`]; the other fields are then empty).
    pub trusted: bool,
    /// Whether another connection kept the index's write lock for longer than
    /// [`BUSY_TIMEOUT`]: files found changed were then not all brought up to date (the rest
    /// are at the next update), and a search answered from what the index held.
    pub busy: bool,
}

/// Progress of an update: files and bytes done of the files that need reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub files_done: usize,
    pub files_total: usize,
    pub bytes_done: u64,
    pub bytes_total: u64,
}

/// What the index holds of a file (the `files` row).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FileState {
    pub(crate) id: i64,
    pub(crate) stat: FileVersion,
    /// `None` for a file that is not a session.
    pub(crate) mark: Option<ReadMark>,
    pub(crate) incremental: bool,
    pub(crate) next_seq: i64,
    pub(crate) leaf: Option<(i64, String)>,
}

impl FileState {
    pub(crate) fn stamp(&self) -> Stamp {
        Stamp {
            id: self.id,
            stat: self.stat,
        }
    }
}

/// Where the indexed files are read: the storage the store is on ([`FileStorage`] unless
/// [`SearchIndex::with_storage`] says otherwise) and the store's blob store, whose text a
/// compaction moved out of an entry is read back and indexed as the entry's
/// ([`SearchIndex::with_blobs`]).
#[derive(Clone)]
pub(crate) struct Source {
    pub(crate) storage: Arc<dyn SessionStorage>,
    pub(crate) blobs: Option<BlobStore>,
}

pub(crate) struct Inner {
    pub(crate) conn: Connection,
    pub(crate) source: Source,
    /// The stamps of the `files` table, as of `data_version`, with this connection's
    /// changes since.
    pub(crate) files: Stamps,
    /// SQLite's `PRAGMA data_version` when `files` was read: another connection's commit
    /// changes it.
    pub(crate) data_version: i64,
    /// What the operation under way may still wait for the write lock.
    pub(crate) lock_wait: lock_wait::LockWait,
    /// Whether this connection deleted text whose pages the write-ahead log may still hold
    /// ([`update::scrub_log`]).
    pub(crate) erased: bool,
}

/// A search index over a session store, in one SQLite file or in memory.
pub struct SearchIndex {
    pub(crate) inner: Mutex<Inner>,
    /// The index file; `None` in memory.
    pub(crate) path: Option<PathBuf>,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SearchIndex {
    /// Opens the index in `dir` ([`INDEX_FILE`]), creating the directory and the index if
    /// missing, and replacing an index of another format, application or a damaged one.
    pub fn open(dir: &Path) -> Result<Self, SearchError> {
        let path = dir.join(INDEX_FILE);
        let conn = index_file::open_file(dir, &path)?;
        Self::with_connection(conn, Some(path))
    }

    /// A new empty index in memory.
    pub fn open_in_memory() -> Result<Self, SearchError> {
        let conn = index_file::open_memory()?;
        Self::with_connection(conn, None)
    }

    pub(crate) fn with_connection(
        conn: Connection,
        path: Option<PathBuf>,
    ) -> Result<Self, SearchError> {
        // The stamps are read when first needed: a check that finds the store as the last
        // update listed it needs none.
        Ok(SearchIndex {
            inner: Mutex::new(Inner {
                source: Source {
                    storage: Arc::new(FileStorage),
                    blobs: None,
                },
                conn,
                files: Stamps::default(),
                data_version: -1,
                lock_wait: lock_wait::LockWait::new(),
                erased: false,
            }),
            path,
        })
    }

    /// Closes the index and removes its file with SQLite's `-wal` and `-shm` files: what a
    /// full filesystem needs back after an update failed on it. The index is a cache; the
    /// next search builds it again. An index in memory has nothing to remove.
    pub fn discard(self) -> std::io::Result<()> {
        let Some(path) = self.path.clone() else {
            return Ok(());
        };
        drop(self);
        index_file::remove_index_files(&path)
    }

    /// Reads the text a compaction moved into the blob store at `dir` back, so that it is
    /// indexed as the text of the entry it belongs to (a missing or damaged blob leaves the
    /// notice the file holds).
    pub fn with_blobs(self, dir: impl Into<PathBuf>) -> Self {
        let mut inner = self.inner.lock();
        let blobs = BlobStore::new(dir, inner.source.storage.clone());
        inner.source.blobs = Some(blobs);
        drop(inner);
        self
    }

    /// Reads the store's files (the session files, and the blobs of
    /// [`SearchIndex::with_blobs`] after this) through `storage` instead of the disk's
    /// [`FileStorage`]. The index itself is an SQLite file, or in memory.
    pub fn with_storage(self, storage: Arc<dyn SessionStorage>) -> Self {
        self.inner.lock().source.storage = storage;
        self
    }

    /// The index file, `None` for an index in memory.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The storage the store's files are read through.
    pub fn storage(&self) -> Arc<dyn SessionStorage> {
        self.inner.lock().source.storage.clone()
    }

    /// Keeps this index up to date with `store` from the storage's change events on a
    /// thread of its own, and tells every process that it does ([`SearchIndex::is_fresh`]),
    /// until the [`Watching`] is dropped. An error when the storage cannot watch (only the
    /// disk on Linux can) or the index is in memory.
    pub fn watch(self: &Arc<Self>, store: Store, threads: usize) -> std::io::Result<Watching> {
        watch::start(self.clone(), store, threads)
    }

    /// Whether a watcher ([`SearchIndex::watch`], in this process or another) keeps this
    /// index up to date with the store made of `dirs` and has taken in every change made
    /// before this call: the index can then be searched without checking a file. Costs a
    /// lock probe and a round trip to the watcher, which is given a quarter of a second.
    pub fn is_fresh(&self, dirs: &[PathBuf]) -> bool {
        match (self.path.as_deref(), self.file_id()) {
            (Some(path), Some(id)) => claim::is_fresh(path, &distinct(dirs), &id),
            _ => false,
        }
    }

    pub(crate) fn sql_error(&self, source: rusqlite::Error) -> SearchError {
        SearchError::Sqlite {
            path: self
                .path
                .clone()
                .unwrap_or_else(|| PathBuf::from(":memory:")),
            source,
        }
    }

    /// Reads the stamps of the `files` table, unless they were read and no other connection
    /// committed since.
    pub(crate) fn sync_files(&self, inner: &mut Inner) -> Result<(), SearchError> {
        let version: i64 = inner
            .conn
            .query_row("PRAGMA data_version", [], |r| r.get(0))
            .map_err(|e| self.sql_error(e))?;
        if version != inner.data_version {
            inner.files = file_rows::read_stamps(&inner.conn).map_err(|e| self.sql_error(e))?;
            inner.data_version = version;
        }
        Ok(())
    }

    /// Brings the index up to date with the store made of `paths` (every transcript file of
    /// it): new and changed files are indexed, files not in `paths` dropped. Files that
    /// need reading whole are read on `threads − 1` threads (at least one) while this one
    /// writes them into the index. Nothing is read of a file whose
    /// stat is the one indexed, so a call that finds nothing changed costs a `stat` per
    /// file (on `threads` threads and this one for a large store).
    pub fn update(
        &self,
        paths: &[PathBuf],
        threads: usize,
        progress: &dyn Fn(Progress),
    ) -> Result<UpdateReport, SearchError> {
        let paths = distinct(paths);
        self.recovering(|| {
            let mut inner = self.inner.lock();
            let found = scan::stat_all(inner.source.storage.as_ref(), paths.clone(), threads);
            self.update_found(&mut inner, &found, threads, progress)
        })
    }

    /// [`SearchIndex::update`] for the store made of the transcript files directly in
    /// `dirs` (regular files whose name [`is_transcript_name`] accepts, as
    /// [`transcript_paths`] lists them); a directory that cannot be listed holds none. A
    /// call that finds nothing changed costs a `stat` per file, and a listing of each
    /// directory whose version changed since the last update.
    ///
    /// [`is_transcript_name`]: gjcfs_engine::store::discovery::is_transcript_name
    /// [`transcript_paths`]: gjcfs_engine::store::discovery::transcript_paths
    pub fn update_dirs(
        &self,
        dirs: &[PathBuf],
        threads: usize,
        progress: &dyn Fn(Progress),
    ) -> Result<UpdateReport, SearchError> {
        self.update_dirs_while(dirs, threads, progress, &|_| Ok(()))
            .map(|(report, _)| report)
    }

    /// [`SearchIndex::update_dirs`], then [`SearchIndex::search`]: the search runs while the
    /// files are stat'ed, and again after the update if any file changed. An index a watcher
    /// keeps fresh ([`SearchIndex::is_fresh`]) is searched at once, with no file checked
    /// but the hits'.
    pub fn search_dirs(
        &self,
        dirs: &[PathBuf],
        threads: usize,
        progress: &dyn Fn(Progress),
        query: &Query,
        filters: &Filters,
    ) -> Result<(UpdateReport, Vec<Hit>), SearchError> {
        let run = |conn: &Connection| run::run_search(conn, query, filters);
        self.answer_dirs(dirs, threads, progress, &run)
    }

    /// [`SearchIndex::update_dirs`], running `during` on the index while the files are
    /// stat'ed; its answer is returned when nothing had changed, so it is the answer of the
    /// index as it is after the update.
    pub(crate) fn update_dirs_while<R>(
        &self,
        dirs: &[PathBuf],
        threads: usize,
        progress: &dyn Fn(Progress),
        during: &dyn Fn(&Connection) -> rusqlite::Result<R>,
    ) -> Result<(UpdateReport, Option<R>), SearchError> {
        let dirs = distinct(dirs);
        self.recovering(|| {
            let mut inner = self.inner.lock();
            let last = saved_listing::read_listing(&inner.conn).map_err(|e| self.sql_error(e))?;
            let storage = inner.source.storage.clone();
            let (look, answer) =
                scan::look_while(storage.as_ref(), &dirs, last.as_ref(), threads, || {
                    during(&inner.conn)
                });
            let answer = answer.map_err(|e| self.sql_error(e))?;
            if let Some(last) = &last {
                if look.same_files(last) {
                    if look.versions_differ(last) {
                        // Only whether a directory's version is trusted changed. Recording it
                        // is for the next check's speed: a failure loses nothing.
                        let _ = saved_listing::replace_listing(
                            &inner.conn,
                            &look.listing_of_same(last),
                        );
                    }
                    let report = UpdateReport {
                        unchanged: look.len(),
                        ..UpdateReport::default()
                    };
                    return Ok((report, Some(answer)));
                }
            }
            let report = self.update_found(&mut inner, &look.found(), threads, progress)?;
            if report.failed.is_empty() && !report.busy {
                // For the next check's speed, as above.
                let _ = saved_listing::write_listing(
                    &inner.conn,
                    &look,
                    last.as_ref(),
                    &inner.files,
                    inner.data_version,
                );
            }
            Ok((report, None))
        })
    }

    /// Runs `op`; if it finds the index file damaged, replaces the file by a new index and
    /// runs `op` again on it.
    pub(crate) fn recovering<T>(
        &self,
        op: impl Fn() -> Result<T, SearchError>,
    ) -> Result<T, SearchError> {
        match op() {
            Err(SearchError::Sqlite { source, .. }) if index_file::is_corrupt(&source) => {
                let Some(path) = &self.path else {
                    return Err(self.sql_error(source));
                };
                let mut inner = self.inner.lock();
                // The old connection must be closed before its files are removed.
                inner.conn = Connection::open_in_memory().map_err(|e| self.sql_error(e))?;
                inner.conn = index_file::recreate(path)?;
                inner.files.clear();
                inner.data_version = -1;
                drop(inner);
                op()
            }
            other => other,
        }
    }

    /// Updates the index from `found`: every file of the store (each path once) with its
    /// stat taken now.
    pub(crate) fn update_found(
        &self,
        inner: &mut Inner,
        found: &[scan::Found],
        threads: usize,
        progress: &dyn Fn(Progress),
    ) -> Result<UpdateReport, SearchError> {
        inner.lock_wait.restart();
        self.sync_files(inner)?;
        let mut report = UpdateReport::default();
        let mut changed = Vec::new();
        // Indexed files no longer in the store, dropped in one transaction.
        let mut gone = Vec::new();
        // Indexed files found in the store: when they are all of them, none is gone.
        let mut indexed_found = 0;
        for (path, stat) in found {
            match stat {
                Ok(stat) => match inner.files.get(path) {
                    Some(stamp) => {
                        indexed_found += 1;
                        if stamp.stat == *stat {
                            report.unchanged += 1
                        } else {
                            changed.push((path.clone(), *stat))
                        }
                    }
                    None => changed.push((path.clone(), *stat)),
                },
                // Gone since it was listed: dropped like a removed file.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    if inner.files.contains(path) {
                        gone.push(path.clone());
                    }
                }
                Err(source) => {
                    indexed_found += usize::from(inner.files.contains(path));
                    report.failed.push((
                        path.clone(),
                        LoadError::Io {
                            path: path.clone(),
                            source: scan::copy_error(source),
                        },
                    ))
                }
            }
        }
        if indexed_found < inner.files.len() {
            let keep: HashSet<&OsStr> = found.iter().map(|(p, _)| p.as_os_str()).collect();
            gone.extend(
                inner
                    .files
                    .paths()
                    .filter(|p| !keep.contains(p.as_os_str()))
                    .map(Path::to_owned),
            );
        }
        update::remove_unless_busy(inner, gone, &mut report).map_err(|e| self.sql_error(e))?;
        if let Err(e) = update::apply(inner, changed, threads, progress, &mut report) {
            // Part of it may be committed: the files are read again at the next call.
            inner.data_version = -1;
            report.busy = index_file::is_busy(&e);
            if !report.busy {
                return Err(self.sql_error(e));
            }
        }
        update::scrub_log(inner).map_err(|e| self.sql_error(e))?;
        // `data_version` stays the one the stamps were read at: this connection's commits do
        // not change it, and another's during the update must make the next call read them.
        Ok(report)
    }

    /// Brings one file up to date (indexing it if new, dropping it if gone); `None` when it
    /// had not changed.
    pub fn update_session(&self, path: &Path) -> Result<Option<SessionChange>, SearchError> {
        self.recovering(|| {
            let mut inner = self.inner.lock();
            inner.lock_wait.restart();
            self.sync_files(&mut inner)?;
            let change = self.refresh_one(&mut inner, path)?;
            update::scrub_log(&mut inner).map_err(|e| self.sql_error(e))?;
            Ok(change)
        })
    }

    pub(crate) fn refresh_one(
        &self,
        inner: &mut Inner,
        path: &Path,
    ) -> Result<Option<SessionChange>, SearchError> {
        let stat = match inner.source.storage.version(path) {
            Ok(stat) => stat,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !inner.files.contains(path) {
                    return Ok(None);
                }
                update::remove(inner, path).map_err(|e| self.sql_error(e))?;
                return Ok(Some(SessionChange {
                    path: path.to_owned(),
                    change: Change::Removed,
                }));
            }
            // Unreadable now: its hits are dropped rather than trusted.
            Err(_) => {
                update::remove(inner, path).map_err(|e| self.sql_error(e))?;
                return Ok(Some(SessionChange {
                    path: path.to_owned(),
                    change: Change::Removed,
                }));
            }
        };
        if inner.files.get(path).is_some_and(|f| f.stat == stat) {
            return Ok(None);
        }
        let mut report = UpdateReport::default();
        update::apply(
            inner,
            vec![(path.to_owned(), stat)],
            1,
            &|_| {},
            &mut report,
        )
        .map_err(|e| {
            inner.data_version = -1;
            self.sql_error(e)
        })?;
        if report.changes.is_empty() && !report.failed.is_empty() {
            // It cannot be read: nothing of it is kept.
            update::remove(inner, path).map_err(|e| self.sql_error(e))?;
            return Ok(Some(SessionChange {
                path: path.to_owned(),
                change: Change::Removed,
            }));
        }
        Ok(report.changes.pop())
    }

    /// The best hits for `query` under `filters`: by relevance (bm25; for a query with more
    /// than [`rank::COMMON_FROM`] matches, among its newest matches), then newest first.
    /// Every hit's file is checked first: a file changed since it was indexed is indexed
    /// again and the search repeated.
    pub fn search(&self, query: &Query, filters: &Filters) -> Result<Vec<Hit>, SearchError> {
        let run = |conn: &Connection| run::run_search(conn, query, filters);
        self.recovering(|| self.answer_once(&run, None))
            .map(|(hits, _)| hits)
    }

    /// Whether a session indexed has an id starting with `prefix` (what `--session`
    /// narrows a search to).
    pub fn has_session(&self, prefix: &str) -> Result<bool, SearchError> {
        let inner = self.inner.lock();
        inner
            .conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM files WHERE substr(session_id, 1, ?1) = ?2)",
                rusqlite::params![prefix.chars().count() as i64, prefix],
                |row| row.get(0),
            )
            .map_err(|e| self.sql_error(e))
    }
}
