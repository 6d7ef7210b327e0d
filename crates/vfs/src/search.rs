//! `search/`: full-text search over every session of the store, through the engine's index
//! ([`gjcfs_search`]).
//!
//! ```text
//! search/<query>/NNN-<session-id>-<entry-id>.json   symlink to ../../sessions/<id>/entries/<entry-id>.json
//! search/<query>/NNN-<session-id>-title.json        symlink to ../../sessions/<id>/header.json (a title hit)
//! search/<query>/results.jsonl                      the hits, one JSON object a line, best first
//! ```
//!
//! A name is a query in the syntax of `gjcfs search` (plain words all match, "quoted
//! phrases"); `substring:<text>` searches for text anywhere. `ls search/` lists the last
//! queries asked. A query that cannot be searched is EINVAL.
//!
//! Invariants:
//! - The index is opened on the first search, in the user's cache directory (an index of
//!   its own in memory when that cannot be used), and brought up to date with the store's
//!   files before every search that is not served from the short-lived cache of answers;
//!   the engine re-checks the file of every hit, so no hit comes from a file as it was.
//! - Sessions the mount writes or sees change are re-indexed within about half a second,
//!   off the write ([`SearchView::session_changed`], [`SearchView::reindex_changed`]), so
//!   that the index follows the agent's appends without an append waiting for it.
//! - An answer is kept for [`ANSWER_TTL`]: listing a query's directory and reading its
//!   files see the same hits.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::recent::RecentQueries;
use super::VfsError;
use gjcfs_engine::json;
use gjcfs_engine::storage::SessionStorage;
use gjcfs_search::{hit_json, Filters, Hit, Query, SearchIndex, Store, Watching};

/// How long an answer is served again without searching anew.
pub const ANSWER_TTL: Duration = Duration::from_secs(1);
/// How many hits a query's directory holds.
pub const HITS_SHOWN: usize = 100;
/// The name prefix of a substring query.
pub const SUBSTRING_PREFIX: &str = "substring:";

/// Answers by name, each served again for [`ANSWER_TTL`]: the lookups and reads that
/// follow a listing see what it listed. Only fresh answers are kept, so a cache holds
/// the answers of the last second, not every one ever given.
pub(super) struct Answers<T> {
    kept: Mutex<HashMap<String, (Instant, Arc<T>)>>,
}

impl<T> Default for Answers<T> {
    fn default() -> Self {
        Answers {
            kept: Mutex::new(HashMap::new()),
        }
    }
}

impl<T> Answers<T> {
    /// The answer kept for `name`, while it is fresh.
    fn get(&self, name: &str) -> Option<Arc<T>> {
        let kept = self.kept.lock();
        let (at, answer) = kept.get(name)?;
        (at.elapsed() < ANSWER_TTL).then(|| answer.clone())
    }

    /// Keeps `answer` for `name`, dropping the answers no longer fresh.
    fn keep(&self, name: &str, answer: Arc<T>) {
        let mut kept = self.kept.lock();
        kept.retain(|_, (at, _)| at.elapsed() < ANSWER_TTL);
        kept.insert(name.to_owned(), (Instant::now(), answer));
    }

    /// The answer for `name`: the one kept, else `make`'s, kept from now on.
    pub(super) fn get_or(
        &self,
        name: &str,
        make: impl FnOnce() -> Result<Arc<T>, VfsError>,
    ) -> Result<Arc<T>, VfsError> {
        if let Some(answer) = self.get(name) {
            return Ok(answer);
        }
        let answer = make()?;
        self.keep(name, answer.clone());
        Ok(answer)
    }

    /// Drops every answer (the store changed).
    pub(super) fn clear(&self) {
        self.kept.lock().clear();
    }
}

/// One query's answer: the hits, their file names, and `results.jsonl`.
#[derive(Debug)]
pub struct Answer {
    /// Hit file name → (session id, where its link leads).
    pub links: Vec<(String, String)>,
    pub results: Arc<Vec<u8>>,
}

pub struct SearchView {
    /// Where the index lives (`None`: in memory).
    index_dir: Option<PathBuf>,
    /// The store's blob store (cold-spilled text is indexed from it).
    blob_dir: PathBuf,
    /// Where the store's files are read.
    storage: Arc<dyn SessionStorage>,
    /// The store the index covers.
    store: Store,
    /// Whether the index is to be watched ([`SearchView::watch`]), and the watcher that
    /// keeps it fresh once it runs.
    watch_wanted: AtomicBool,
    watching: Mutex<Option<Watching>>,
    index: Mutex<Option<Arc<SearchIndex>>>,
    answers: Answers<Answer>,
    queries: RecentQueries,
    /// Session files changed since they were last re-indexed.
    changed: Mutex<BTreeSet<PathBuf>>,
}

/// The threads an update of the index reads files on.
fn search_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().min(4))
}

/// The query a directory name asks.
fn parse_query(name: &str) -> Result<Query, VfsError> {
    let parsed = match name.strip_prefix(SUBSTRING_PREFIX) {
        Some(text) => Query::substring(text),
        None => Query::parse(name),
    };
    parsed.map_err(|e| VfsError::InvalidArgument(format!("{name:?}: {e}")))
}

/// `NNN-<session-id>-<entry-id>.json` and where it leads.
fn link_of(rank: usize, hit: &Hit) -> (String, String) {
    let sid = &hit.session_id;
    match &hit.entry_id {
        Some(entry) => (
            format!("{rank:03}-{sid}-{entry}.json"),
            format!("../../sessions/{sid}/entries/{entry}.json"),
        ),
        None => (
            format!("{rank:03}-{sid}-title.json"),
            format!("../../sessions/{sid}/header.json"),
        ),
    }
}

impl SearchView {
    pub fn new(
        index_dir: Option<PathBuf>,
        blob_dir: &Path,
        storage: Arc<dyn SessionStorage>,
        store: Store,
    ) -> Self {
        SearchView {
            index_dir,
            blob_dir: blob_dir.to_owned(),
            storage,
            store,
            watch_wanted: AtomicBool::new(false),
            watching: Mutex::new(None),
            index: Mutex::new(None),
            answers: Answers::default(),
            queries: RecentQueries::default(),
            changed: Mutex::new(BTreeSet::new()),
        }
    }

    /// The index, opened on first use.
    fn index(&self) -> Result<Arc<SearchIndex>, VfsError> {
        let mut index = self.index.lock();
        if let Some(index) = &*index {
            return Ok(index.clone());
        }
        let opened = match &self.index_dir {
            Some(dir) => SearchIndex::open(dir).or_else(|e| {
                if e.is_disk_full() {
                    let _ = gjcfs_search::remove_index(dir);
                }
                SearchIndex::open_in_memory()
            }),
            None => SearchIndex::open_in_memory(),
        }
        .map_err(index_error)?
        .with_storage(self.storage.clone())
        .with_blobs(&self.blob_dir);
        Ok(index.insert(Arc::new(opened)).clone())
    }

    /// Keeps the index fresh from the store's change events once it exists, so that a
    /// search (here or by `gjcfs search`) need not check the store's files: at once when
    /// a search built it before, else as soon as one does
    /// ([`SearchView::reindex_changed`] looks twice a second). The mount never builds an
    /// index nobody searched. An error when the storage cannot watch.
    pub fn watch(&self) -> Result<(), VfsError> {
        self.storage
            .watch()
            .map_err(|e| super::errors::from_io(&e, format!("watching the store: {e}")))?;
        self.watch_wanted.store(true, Ordering::Relaxed);
        self.watch_if_built();
        Ok(())
    }

    /// Starts the watcher if it is wanted and the index exists; one that cannot start is
    /// not tried again (the searches check the store instead).
    fn watch_if_built(&self) {
        if !self.watch_wanted.load(Ordering::Relaxed) || self.watching.lock().is_some() {
            return;
        }
        let built = self.index.lock().is_some()
            || self
                .index_dir
                .as_deref()
                .is_some_and(gjcfs_search::index_exists);
        if !built {
            return;
        }
        let started = self
            .index()
            .ok()
            .and_then(|index| index.watch(self.store.clone(), search_threads()).ok());
        match started {
            Some(watching) => *self.watching.lock() = Some(watching),
            None => self.watch_wanted.store(false, Ordering::Relaxed),
        }
    }

    /// Replaces the index on disk by one in memory, removing the file (a cache).
    fn keep_in_memory(&self) -> Result<Arc<SearchIndex>, VfsError> {
        // The watcher of the file's index stops: an index in memory is checked instead.
        drop(self.watching.lock().take());
        let in_memory = SearchIndex::open_in_memory()
            .map_err(index_error)?
            .with_storage(self.storage.clone())
            .with_blobs(&self.blob_dir);
        let in_memory = Arc::new(in_memory);
        *self.index.lock() = Some(in_memory.clone());
        if let Some(dir) = &self.index_dir {
            let _ = gjcfs_search::remove_index(dir);
        }
        Ok(in_memory)
    }

    /// Brings `index` up to date with the files `paths` lists (the store's transcripts):
    /// the index to search, in memory from now on when the cache's filesystem is full.
    fn update(
        &self,
        mut index: Arc<SearchIndex>,
        paths: &dyn Fn() -> Vec<PathBuf>,
    ) -> Result<Arc<SearchIndex>, VfsError> {
        let paths = paths();
        let threads = search_threads();
        if let Err(e) = index.update(&paths, threads, &|_| {}) {
            if !(e.is_disk_full() && index.path().is_some()) {
                return Err(index_error(e));
            }
            // A full cache filesystem: the index gives its space back, and the mount
            // searches an index in memory from now on.
            index = self.keep_in_memory()?;
            index
                .update(&paths, threads, &|_| {})
                .map_err(index_error)?;
        }
        Ok(index)
    }

    /// The index brought up to date with the files `paths` lists (the store's transcripts),
    /// which are checked unless a watcher keeps the index fresh: what every answer is read
    /// from (`search/`, `files/`).
    pub(super) fn fresh_index(
        &self,
        paths: &dyn Fn() -> Vec<PathBuf>,
    ) -> Result<Arc<SearchIndex>, VfsError> {
        let index = self.index()?;
        let fresh = self
            .store
            .dirs(self.storage.as_ref())
            .is_ok_and(|dirs| index.is_fresh(&dirs));
        if fresh {
            Ok(index)
        } else {
            self.update(index, paths)
        }
    }

    /// The answer to the query `name` over the files `paths` lists (the store's
    /// transcripts), from [`SearchView::fresh_index`]. The store is listed only when the
    /// answer is not served from the cache: listing a query's directory looks up each of
    /// its hits, and each lookup asks again.
    pub fn answer(
        &self,
        name: &str,
        paths: &dyn Fn() -> Vec<PathBuf>,
    ) -> Result<Arc<Answer>, VfsError> {
        self.answers.get_or(name, || {
            let query = parse_query(name)?;
            let index = self.fresh_index(paths)?;
            let filters = Filters {
                limit: HITS_SHOWN,
                ..Filters::default()
            };
            let hits = index
                .search(&query, &filters)
                .map_err(|e| VfsError::InvalidArgument(format!("{name:?}: {e}")))?;
            let mut results = Vec::new();
            let mut links = Vec::with_capacity(hits.len());
            for (rank, hit) in hits.iter().enumerate() {
                json::write_compact(&hit_json(hit), &mut results);
                results.push(b'\n');
                links.push(link_of(rank + 1, hit));
            }
            Ok(Arc::new(Answer {
                links,
                results: Arc::new(results),
            }))
        })
    }

    /// Whether `name` is a query that can be searched (without searching).
    pub fn check(&self, name: &str) -> Result<(), VfsError> {
        parse_query(name).map(drop)
    }

    /// Notes a query a person listed or read, for `ls search/` (a lookup alone does not).
    pub fn note_query(&self, query: &str) {
        self.queries.note(query);
    }

    /// The last queries asked, oldest first.
    pub fn recent_queries(&self) -> Vec<String> {
        self.queries.list()
    }

    /// Notes a session file the mount wrote or saw change: its answers are dropped now,
    /// and it is re-indexed by [`SearchView::reindex_changed`] (the poller's, twice a
    /// second), off the write that changed it.
    pub fn session_changed(&self, path: &Path) {
        if self.index.lock().is_some() {
            self.changed.lock().insert(path.to_owned());
            self.answers.clear();
        }
    }

    /// Re-indexes the session files noted changed since the last call, if the index is
    /// open (a search brings the whole index up to date first anyway), and starts the
    /// watcher once the index exists ([`SearchView::watch`]).
    pub fn reindex_changed(&self) {
        let changed = std::mem::take(&mut *self.changed.lock());
        let index = self.index.lock().clone();
        if let Some(index) = index {
            for path in changed {
                let _ = index.update_session(&path);
            }
        }
        self.watch_if_built();
    }
}

/// An error of the search index, as the views give it.
pub(crate) fn index_error(e: gjcfs_search::SearchError) -> VfsError {
    VfsError::Unreadable(format!("the search index: {e}"))
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    #[test]
    fn a_cached_answer_does_not_list_the_store_again() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Arc::new(gjcfs_engine::storage::MemoryStorage::new());
        let store = Store::Dir(dir.path().join("sessions"));
        let view = SearchView::new(None, &dir.path().join("blobs"), storage, store);
        let listed = Cell::new(0);
        let paths = || {
            listed.set(listed.get() + 1);
            Vec::new()
        };
        let first = view.answer("parser", &paths).unwrap();
        // The lookups of a listed directory's hits ask for the same answer again.
        for _ in 0..100 {
            let again = view.answer("parser", &paths).unwrap();
            assert!(Arc::ptr_eq(&first, &again));
        }
        assert_eq!(listed.get(), 1);
        // A query that cannot be searched is refused before the store is listed.
        assert!(view.answer("substring:ab", &paths).is_err());
        assert_eq!(listed.get(), 1);
    }
}
