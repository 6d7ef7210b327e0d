//! `history/`: the agent's prompt history database, read through the engine.
//!
//! The database is opened on first use and only if it exists (the mount never creates
//! one). `prompts.jsonl` holds every prompt, oldest first, rendered once per state of the
//! database files (their sizes and mtimes) and kept; `search/<query>` the prompts matching
//! `<query>` as the agent's search ranks them (at most [`MAX_LIMIT`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::recent::RecentQueries;
use super::VfsError;
use gjcfs_engine::history::{tokenize as crate_tokenize, HistoryEntry, HistoryStorage, MAX_LIMIT};
use gjcfs_engine::storage::{EntryKind, SessionStorage};

/// `history/README`.
pub const README: &str = "\
history/ holds the agent's prompt history (history.db), read-only.

prompts.jsonl      every prompt, oldest first: {\"id\",\"prompt\",\"created_at\",\"cwd\"}, one a line
search/<query>     the prompts matching <query>, best first, as the agent's search finds
                   them: every word of the query must occur (as a word prefix, or
                   anywhere in the prompt); punctuation only separates words, so no
                   query with a word in it is invalid (one without: EINVAL, and the
                   reason in errors). Any name is a query — but dot names and desktop files
                   (.git, desktop.ini): cat \"history/search/fix parser\".
                   `ls search/` shows the last queries read (a lookup records none).
errors             why the last queries were refused
";

pub struct HistoryView {
    path: PathBuf,
    /// What the database's files are looked at through (SQLite opens them itself).
    files: Arc<dyn SessionStorage>,
    /// The last queries asked, newest last.
    queries: RecentQueries,
    storage: Mutex<Option<HistoryStorage>>,
    /// `prompts.jsonl` and the state of the database files it was rendered from.
    prompts: Mutex<Option<(DbStamp, Arc<Vec<u8>>)>>,
}

/// Size and mtime (ns) of the database and of its write-ahead log: a commit by any process
/// changes one of them.
type DbStamp = [(u64, i128); 2];

/// Size and mtime (ns) of the file at `path` (zero when there is none).
fn size_and_mtime(storage: &dyn SessionStorage, path: &Path) -> (u64, i128) {
    storage
        .lstat(path)
        .map_or((0, 0), |stat| (stat.len, stat.mtime_ns))
}

fn lines<'a>(entries: impl Iterator<Item = &'a HistoryEntry>) -> Vec<u8> {
    let mut out = Vec::new();
    for entry in entries {
        entry.write_json_line(&mut out);
    }
    out
}

impl HistoryView {
    pub fn new(path: impl Into<PathBuf>, files: Arc<dyn SessionStorage>) -> Self {
        HistoryView {
            path: path.into(),
            files,
            queries: RecentQueries::default(),
            storage: Mutex::new(None),
            prompts: Mutex::new(None),
        }
    }

    /// Runs `f` on the open database; `None` when there is no database.
    fn with<R>(
        &self,
        f: impl FnOnce(&HistoryStorage) -> Result<R, VfsError>,
    ) -> Result<Option<R>, VfsError> {
        let mut storage = self.storage.lock();
        if storage.is_none() {
            if !self.exists() {
                return Ok(None);
            }
            let opened = HistoryStorage::open(&self.path)
                .map_err(|e| VfsError::Unreadable(e.to_string()))?;
            *storage = Some(opened);
        }
        match storage.as_ref() {
            Some(s) => f(s).map(Some),
            None => Ok(None),
        }
    }

    fn wal_path(&self) -> PathBuf {
        PathBuf::from(format!("{}-wal", self.path.display()))
    }

    fn stamp(&self) -> DbStamp {
        [
            size_and_mtime(self.files.as_ref(), &self.path),
            size_and_mtime(self.files.as_ref(), &self.wal_path()),
        ]
    }

    /// `prompts.jsonl`: every prompt, oldest first.
    pub fn prompts(&self) -> Result<Arc<Vec<u8>>, VfsError> {
        let stamp = self.stamp();
        if let Some((seen, bytes)) = &*self.prompts.lock() {
            if *seen == stamp {
                return Ok(bytes.clone());
            }
        }
        let mut out = Vec::new();
        self.with(|s| {
            s.for_each_oldest_first(|entry| entry.write_json_line(&mut out))
                .map_err(|e| VfsError::Unreadable(e.to_string()))
        })?;
        let bytes = Arc::new(out);
        *self.prompts.lock() = Some((stamp, bytes.clone()));
        Ok(bytes)
    }

    /// Whether the database exists.
    pub fn exists(&self) -> bool {
        self.files
            .lstat(&self.path)
            .is_ok_and(|stat| stat.kind == EntryKind::File)
    }

    /// Notes a query asked, for [`HistoryView::recent_queries`].
    pub fn note_query(&self, query: &str) {
        self.queries.note(query);
    }

    /// The last queries asked, oldest first.
    pub fn recent_queries(&self) -> Vec<String> {
        self.queries.list()
    }

    /// The prompts matching `query`. A query without a word to search for (only
    /// punctuation and spaces) is refused.
    pub fn search(&self, query: &str) -> Result<Vec<u8>, VfsError> {
        if crate_tokenize(query).is_empty() {
            return Err(VfsError::InvalidArgument(format!(
                "{query:?} holds no word to search for"
            )));
        }
        let entries = self.with(|s| {
            s.search(query, MAX_LIMIT, None)
                .map_err(|e| VfsError::Unreadable(e.to_string()))
        })?;
        Ok(entries.map_or_else(Vec::new, |e| lines(e.iter())))
    }

    /// The newest mtime of the database and its write-ahead log, ms since the epoch.
    pub fn mtime_ms(&self) -> i64 {
        let newest = size_and_mtime(self.files.as_ref(), &self.path)
            .1
            .max(size_and_mtime(self.files.as_ref(), &self.wal_path()).1);
        (newest / 1_000_000).try_into().unwrap_or(0)
    }

    /// Closes the database if it was opened.
    pub fn close(&self) -> Result<(), String> {
        match self.storage.lock().take() {
            Some(storage) => storage.close().map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }
}
