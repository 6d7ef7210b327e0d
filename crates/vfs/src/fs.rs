//! [`Vfs`]: the operations of the model over the engine's sessions.
//!
//! Here: the model's state, composed of parts that own theirs — the sessions
//! (`sessions/`), the root's views (`history.rs`, `store_usage.rs`, `check.rs`,
//! `search.rs`, `files.rs`), the handles, the inode table, the listings a kernel may keep,
//! the errors log and the snapshots — and its requests on nodes and directories (lookup,
//! attributes, listings, links). Opening and reading are in `reads.rs`, the write side in
//! `writes.rs`, and what each node is in the modules by directory family (`lookup.rs`,
//! `listing.rs`, `shapes.rs`, `nodes.rs`, `paths.rs`); those import this module, never the
//! other way. A part reports to the model through a trait ([`Events`]) and never imports
//! this module.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use parking_lot::Mutex;

use super::errors::ErrorLog;
use super::handles::{Handle, Handles};
use super::history::HistoryView;
use super::inode::{InodeTable, Node, ROOT_INO};
use super::kept_listings::{KeptListing, KeptListings};
use super::sessions::{EntriesChanged, Events, SavedRenderings, Sessions};
use super::slots::{Listed, Loaded};
use super::store_usage::StoreUsageView;
use super::{Attr, DirEntry, ListedAttr, SessionSource, VfsError};
use gjcfs_engine::manager::{SessionError, SessionManager};
use gjcfs_engine::storage::SessionStorage;
use gjcfs_search::Store;

#[derive(Debug, Clone)]
pub struct VfsConfig {
    /// Where every file of the store is read and written (the disk: `FileStorage`; tests
    /// may give a `MemoryStorage`). The prompt history's database and the search index are
    /// SQLite files, opened by SQLite itself.
    pub storage: Arc<dyn SessionStorage>,
    pub source: SessionSource,
    /// The blob store managers resolve and write images through.
    pub blob_dir: PathBuf,
    pub read_only: bool,
    /// How many sessions stay loaded at once (least recently used ones are closed).
    pub max_loaded: usize,
    /// The agent's prompt history database (`history/`); never created by the model.
    pub history_db: PathBuf,
    /// The user whose store this is. Only they (and root) may write through the model,
    /// whatever a kernel lets through; `None` leaves access to the platform alone.
    pub owner_uid: Option<u32>,
    /// The directory of the full-text search index (`search/`), shared with `gjcfs
    /// search`; `None` keeps an index in memory.
    pub search_index: Option<PathBuf>,
    /// The store's saved usage, shared with `gjcfs usage` (`usage.json`, `index.html`);
    /// `None` keeps it in memory.
    pub saved_usage: Option<PathBuf>,
    /// The store's saved listing, shared with `gjcfs ls`: the first listing reads only the
    /// files changed since it was saved, and the listing is saved again after the first
    /// scan and at most every ten minutes after. `None` keeps it in memory.
    pub saved_listing: Option<PathBuf>,
    /// Where what was rendered of each session (the names and sizes of its files) is saved
    /// between runs, and what renders them: a lookup, `stat` or listing of a session
    /// rendered before for its transcript as it is loads and renders nothing. `None` keeps
    /// it for this run only.
    pub saved_renderings: Option<SavedRenderings>,
    /// Render the pages for people (`context.md`, `context.html`, `pages/`, `leaves/`,
    /// `tree.txt`, `tree.svg`, the store's `index.html`) with every secret redacted
    /// (`gjcfs_engine::redact`); the data (`session.jsonl`, `entries/`, `context.json`, …)
    /// stays as stored.
    pub redact: bool,
}

/// An opened file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened {
    pub fh: u64,
    pub caching: Caching,
}

/// An opened directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenedDir {
    pub fh: u64,
    /// What the kernel may keep of its listing.
    pub kept: KeptListing,
}

/// What a kernel may keep of an opened file's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caching {
    /// Nothing: every read comes to the model (leaf, errors, the append point, history
    /// and store views: contents that change with every write or query).
    Direct,
    /// Cached while open, dropped at the next open (directories).
    UntilReopen,
    /// Kept across opens until the model announces a change (entries, blobs, the
    /// transcript), or for good (a session's views: one version a number).
    Keep,
}

/// Called with the inode numbers whose attributes or content changed, so the platform
/// can drop what its kernel cached of them. It must not block on the filesystem.
pub type Invalidator = Box<dyn Fn(&[u64]) + Send + Sync>;

/// The filesystem model. Each session has a lock of its own; the model's other state sits
/// behind short locks that are never held across disk I/O (see [`super::sessions`]).
pub struct Vfs {
    pub(super) config: VfsConfig,
    pub(super) inodes: Mutex<InodeTable>,
    /// The listing and the loaded sessions.
    pub(super) sessions: Sessions,
    pub(super) handles: Handles,
    /// What a kernel may keep of each directory's listing across opens.
    pub(super) kept_listings: KeptListings,
    pub(super) errors: ErrorLog,
    pub(super) history: HistoryView,
    pub(super) store_usage: StoreUsageView,
    pub(super) check: super::check::CheckView,
    pub(super) search: super::search::SearchView,
    /// `files/`'s answers, read from the index of `search`.
    pub(super) files: super::files::FilesView,
    invalidator: std::sync::OnceLock<Invalidator>,
    pub(super) stopped: AtomicBool,
    /// Held shared by every write to a session file while it runs, so that
    /// [`Vfs::stop_writes`] returns only once the writes under way are done.
    pub(super) write_gate: parking_lot::RwLock<()>,
    /// When each session's leaf was last moved through the mount (ms): its views' mtime.
    pub(super) leaf_moves: Mutex<HashMap<String, i64>>,
    /// `leaf` files truncated by path (no open file), and when: the reset waits a moment
    /// ([`RESET_GRACE`]) for the write that usually follows (an editor saving), which then
    /// gives the one move; meanwhile `leaf` reads as empty.
    pub(super) pending_resets: Mutex<HashMap<String, std::time::Instant>>,
    /// The rendered files' bytes, while reads are served by node.
    pub(super) snapshots: super::snapshots::Snapshots,
}

/// How long a `leaf` truncated by path waits for a write before it resets the leaf.
pub(super) const RESET_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// What a model serves ([`Vfs::summary`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub sessions: usize,
    pub workspaces: usize,
    /// Whether there is a prompt history database.
    pub history: bool,
}

/// A change to the fixed layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamespaceChange {
    /// create, mknod, mkdir, symlink.
    Create,
    /// unlink, rmdir.
    Remove,
    Rename,
    /// A hard link.
    Link,
}

/// What the sessions report reaches the kernel, the `errors` files and the search index.
impl Events for Vfs {
    fn changed(&self, sid: &str, entries: EntriesChanged<'_>) {
        self.announce(sid, entries);
    }

    fn failed(&self, sid: &str, message: &str, once: bool) {
        if once {
            self.errors.push_once(sid, message);
        } else {
            self.errors.push(sid, message);
        }
    }

    fn file_changed(&self, path: &std::path::Path) {
        self.search.session_changed(path);
        self.files.changed();
    }
}

impl Vfs {
    /// The model over `config`'s store. Nothing is read yet: the sessions are listed when
    /// `sessions/` or `projects/` is first looked into.
    pub fn new(config: VfsConfig) -> Self {
        Vfs {
            history: HistoryView::new(&config.history_db, config.storage.clone()),
            store_usage: StoreUsageView::new(
                config.source.clone(),
                config.storage.clone(),
                config.saved_usage.clone(),
            ),
            check: super::check::CheckView::new(
                &config.source,
                &config.blob_dir,
                &config.history_db,
                config.storage.clone(),
            ),
            search: super::search::SearchView::new(
                config.search_index.clone(),
                &config.blob_dir,
                config.storage.clone(),
                match &config.source {
                    SessionSource::SessionsRoot(root) => Store::Root(root.clone()),
                    SessionSource::Dir(dir) => Store::Dir(dir.clone()),
                },
            ),
            files: super::files::FilesView::default(),
            sessions: Sessions::new(
                config.storage.clone(),
                config.source.clone(),
                config.blob_dir.clone(),
                (config.max_loaded, config.redact),
            )
            .saving_listing_at(config.saved_listing.clone())
            .saving_renderings(config.saved_renderings.clone()),
            config,
            inodes: Mutex::new(InodeTable::default()),
            handles: Handles::default(),
            kept_listings: KeptListings::default(),
            errors: ErrorLog::default(),
            invalidator: std::sync::OnceLock::new(),
            stopped: AtomicBool::new(false),
            write_gate: parking_lot::RwLock::new(()),
            leaf_moves: Mutex::new(HashMap::new()),
            pending_resets: Mutex::new(HashMap::new()),
            snapshots: Default::default(),
        }
    }

    /// The storage every file of the store goes through.
    pub(super) fn storage(&self) -> &dyn SessionStorage {
        self.config.storage.as_ref()
    }

    pub fn read_only(&self) -> bool {
        self.config.read_only
    }

    /// Installs the hook told about every change (once; later calls are ignored).
    pub fn set_invalidator(&self, invalidator: Invalidator) {
        let _ = self.invalidator.set(invalidator);
    }

    /// What the model left out and why, since the last call (the model never prints).
    pub fn take_notices(&self) -> Vec<String> {
        self.sessions.take_notices()
    }

    /// Announces that session `sid` changed: every node of it but the entries, and of the
    /// entries those `entries` names (an append or a branch only adds entries and moves the
    /// leaf; an outside change may patch entries or replace the file).
    pub(super) fn announce(&self, sid: &str, entries: EntriesChanged<'_>) {
        let Some(invalidate) = self.invalidator.get() else {
            return;
        };
        let inos: Vec<u64> = {
            let inodes = self.inodes.lock();
            let mut inos = inodes.of_session(sid).to_vec();
            match entries {
                EntriesChanged::None => {}
                EntriesChanged::These(ids) => inos.extend(
                    ids.iter()
                        .filter_map(|id| inodes.known(&Node::Entry(sid.to_owned(), id.clone()))),
                ),
                EntriesChanged::All => inos.extend_from_slice(inodes.entries_of(sid)),
            }
            inos
        };
        if !inos.is_empty() {
            invalidate(&inos);
        }
    }

    /// Lists the store again (one scan at a time, no other lock held meanwhile). Sessions
    /// whose id cannot name a directory are left out and reported once.
    pub(super) fn rescan(&self) {
        self.sessions.rescan(&|_, _| {});
    }

    /// The listing entry of `sid`.
    pub(super) fn listed(&self, sid: &str) -> Option<Listed> {
        self.sessions.listed(sid)
    }

    /// [`Sessions::with_known`], told what changed.
    pub(super) fn with_known<R>(
        &self,
        sid: &str,
        known: impl Fn(&super::content::Rendered) -> Option<R>,
        loaded: impl FnOnce(&mut Loaded) -> Result<R, VfsError>,
    ) -> Result<R, VfsError> {
        self.sessions.with_known(sid, self, known, loaded)
    }

    /// [`Sessions::with_session`], told what changed.
    pub(super) fn with_session<R>(
        &self,
        sid: &str,
        f: impl FnOnce(&mut Loaded) -> Result<R, VfsError>,
    ) -> Result<R, VfsError> {
        self.sessions.with_session(sid, self, f)
    }

    /// [`Sessions::with_writer`] while writes are allowed. `accepted` says the bytes were
    /// taken before writes stopped (a line completed by a close): those are still written
    /// while the server shuts down.
    pub(super) fn with_writer<R>(
        &self,
        sid: &str,
        what: &str,
        accepted: bool,
        f: impl FnOnce(&SessionManager) -> Result<R, SessionError>,
    ) -> Result<R, VfsError> {
        let _gate = self.write_gate.read();
        if self.config.read_only || (self.writes_stopped() && !accepted) {
            return Err(VfsError::ReadOnly);
        }
        self.sessions.with_writer(sid, what, self, f)
    }

    /// Keeps the search index fresh from the store's change events once a search built it:
    /// searches here and by `gjcfs search` need not check the store's files. An error when
    /// the storage cannot watch (only the disk on Linux can).
    pub fn watch_search(&self) -> Result<(), VfsError> {
        self.search.watch()
    }

    /// Announces the sessions whose file changed since the last call, as the watch of the
    /// store's directories reported it (`sessions/followed.rs`): while one covers the
    /// store, a kernel keeps a session's fixed nodes until such an announcement. The mount
    /// calls it ten times a second.
    pub fn follow_store_events(&self) {
        self.sessions.follow_store_events(self);
    }

    /// Checks every loaded session's file and follows changes made outside (the agent
    /// appending), announcing them. The mount calls it about twice a second, so cached
    /// views follow the agent's writes even when nobody asks the model.
    pub fn poll_outside_changes(&self) {
        self.search.reindex_changed();
        self.apply_pending_resets(RESET_GRACE);
        self.sessions.poll(self);
    }

    pub(super) fn node(&self, ino: u64) -> Result<Node, VfsError> {
        self.inodes
            .lock()
            .node(ino)
            .cloned()
            .ok_or(VfsError::NotFound)
    }

    /// The node `name` in directory `parent`. A name that does not exist is given no
    /// inode number (absent names cost no memory).
    pub fn lookup(&self, parent: u64, name: &str) -> Result<Attr, VfsError> {
        let dir = self.node(parent)?;
        let child = self.child(&dir, name)?;
        self.entry_of(&child)
    }

    /// The attributes of `entry`, listed by [`Vfs::opendir`] of directory `dir`, as an entry
    /// the kernel keeps (FUSE `readdirplus`; one the reply has no room for is given back with
    /// [`Vfs::forget`]). While files are read by node, a rendered file's number is its name's
    /// number now, which may have changed since the listing. A view not rendered for its
    /// session as it is now is not rendered for a listing ([`ListedAttr::Unrendered`]): a
    /// listing of sessions' directories (`find`, `ls`) would otherwise render every view of
    /// each session.
    pub fn listed_entry(&self, dir: u64, entry: &DirEntry) -> Result<ListedAttr, VfsError> {
        let renumbered = self.snapshots.enabled() && !self.inodes.lock().is_current(entry.ino);
        let node = if renumbered {
            self.child(&self.node(dir)?, &entry.name)?
        } else {
            self.node(entry.ino)?
        };
        match self.unrendered_view(&node) {
            Some(attr) => Ok(ListedAttr::Unrendered(attr)),
            None => self.entry_of(&node).map(ListedAttr::Known),
        }
    }

    /// The kernel dropped `count` references to `ino` (FUSE `forget`): a query's node is
    /// forgotten when none is left, and so is an old version of a rendered file; a rendered
    /// file's bytes are dropped with the kernel's last reference.
    pub fn forget(&self, ino: u64, count: u64) {
        // Under the table's lock: a lookup counting a new reference to `ino` keeps its
        // version, or comes after and keeps one anew.
        self.kept_listings.forgotten(ino);
        let mut inodes = self.inodes.lock();
        if inodes.forget(ino, count) {
            self.snapshots.forget(ino);
        }
    }

    /// The attributes of `ino`. While files are read by node, those of a rendered file's
    /// number, kept with its bytes (`snapshots.rs`).
    pub fn getattr(&self, ino: u64) -> Result<Attr, VfsError> {
        let node = self.node(ino)?;
        if let Some(attr) = self.snapshots.attr(ino) {
            return Ok(attr);
        }
        if !self.inodes.lock().is_current(ino) {
            // An old version of a rendered file the kernel let go.
            return Err(VfsError::Stale);
        }
        let attr = self.attr_of(&node)?;
        if attr.ino != ino {
            return Err(VfsError::Stale);
        }
        Ok(attr)
    }

    /// The entries of directory `ino` (without `.` and `..`), the session listing rescanned.
    pub fn readdir(&self, ino: u64) -> Result<Vec<DirEntry>, VfsError> {
        self.list(ino)
    }

    /// Opens directory `ino`: its entries are listed now (the session listing rescanned)
    /// and [`Vfs::dir_entries`] serves them from this snapshot until [`Vfs::release`]. The
    /// kernel reads a large directory a buffer at a time; one scan per call made listing
    /// 10,000 sessions quadratic. A kernel that keeps listings across opens is told
    /// whether the copy it kept is this listing (`kept_listings.rs`).
    pub fn opendir(&self, ino: u64) -> Result<OpenedDir, VfsError> {
        let entries = Arc::new(self.list(ino)?);
        let fh = self.handles.insert(Handle::Dir(entries.clone()));
        let kept = self.kept_listings.opened(ino, fh, &entries);
        Ok(OpenedDir { fh, kept })
    }

    /// The entries of an open directory, as listed at [`Vfs::opendir`].
    pub fn dir_entries(&self, fh: u64) -> Result<Arc<Vec<DirEntry>>, VfsError> {
        match self.handles.get(fh)? {
            Handle::Dir(entries) => Ok(entries),
            _ => Err(VfsError::BadHandle),
        }
    }

    /// Closes every loaded manager (flushing its writes) and the history database; returns
    /// the failures (session id or `history`, reason).
    pub fn close_all(&self) -> Vec<(String, String)> {
        let mut failures = self.sessions.close_all();
        if let Err(e) = self.history.close() {
            failures.push(("history".to_owned(), e));
        }
        failures
    }

    /// The target of symlink `ino`.
    pub fn readlink(&self, ino: u64) -> Result<String, VfsError> {
        match self.node(ino)? {
            Node::ProjectLink(_, sid) if self.listed(&sid).is_some() => {
                Ok(super::layout::link_target(&sid))
            }
            Node::ProjectLink(..) => Err(VfsError::NotFound),
            Node::DateLink(day, name) => {
                let sid = self.date_link(&day, &name).ok_or(VfsError::NotFound)?;
                Ok(format!("../../sessions/{sid}"))
            }
            Node::RecentLink(name) => {
                let sid = self.recent_link(&name).ok_or(VfsError::NotFound)?;
                Ok(format!("../sessions/{sid}"))
            }
            Node::SearchHit(query, name) => self.search_link(&query, &name),
            Node::FilesLink(dir, name) => self.files_link(&dir, &name),
            Node::Label(sid, label) => self.with_session(&sid, |loaded| {
                loaded
                    .rendered
                    .label_target(&loaded.manager, &label)
                    .ok_or(VfsError::NotFound)
            }),
            _ => Err(VfsError::InvalidArgument("not a symlink".into())),
        }
    }

    /// The root's inode number.
    pub fn root(&self) -> u64 {
        ROOT_INO
    }

    /// What the store holds now, listing it again; `progress(done, total)` is called after
    /// each transcript file read (the first listing of a large store takes a while).
    pub fn summary(&self, progress: &dyn Fn(usize, usize)) -> Summary {
        self.sessions.rescan(progress);
        let (sessions, workspaces) = self.sessions.with_listing(|listing| {
            let workspaces: HashSet<&str> = listing.values().map(|l| l.cwd.as_str()).collect();
            (listing.len(), workspaces.len())
        });
        Summary {
            sessions,
            workspaces,
            history: self.history.exists(),
        }
    }

    /// Every transcript file of the store, unread.
    pub(super) fn transcript_paths(&self) -> Vec<PathBuf> {
        let storage = self.storage();
        match &self.config.source {
            SessionSource::SessionsRoot(root) => {
                gjcfs_engine::store::discovery::all_transcript_paths(storage, root)
                    .unwrap_or_default()
            }
            SessionSource::Dir(dir) => {
                gjcfs_engine::store::discovery::transcript_paths(storage, dir).unwrap_or_default()
            }
        }
    }

    /// The answer to the search `query`.
    pub(super) fn search_answer(
        &self,
        query: &str,
    ) -> Result<Arc<super::search::Answer>, VfsError> {
        self.search.answer(query, &|| self.transcript_paths())
    }

    /// Where the hit `name` of `query` leads.
    pub(super) fn search_link(&self, query: &str, name: &str) -> Result<String, VfsError> {
        let answer = self.search_answer(query)?;
        answer
            .links
            .iter()
            .find(|(file, _)| file == name)
            .map(|(_, target)| target.clone())
            .ok_or(VfsError::NotFound)
    }

    /// `ask` of `files/`'s answers, read from the index of `search/` over the store's
    /// transcripts.
    fn ask_files<R>(&self, ask: impl FnOnce(&super::files::Source<'_>) -> R) -> R {
        let paths = || self.transcript_paths();
        ask(&super::files::Source {
            search: &self.search,
            paths: &paths,
        })
    }

    /// The names `files/<dir>` holds (`dir`: the components below `files/`, joined by `/`).
    pub(super) fn files_names(&self, dir: &str) -> Result<Arc<super::files::Names>, VfsError> {
        self.ask_files(|from| self.files.names(from, dir))
    }

    /// The touches of the path `files/<dir>` stands for.
    pub(super) fn files_touched(&self, dir: &str) -> Result<Arc<super::files::Touched>, VfsError> {
        self.ask_files(|from| self.files.touched(from, dir))
    }

    /// Where the link `files/<dir>/<name>` leads.
    pub(super) fn files_link(&self, dir: &str, name: &str) -> Result<String, VfsError> {
        let touched = self.files_touched(dir)?;
        touched
            .link(name)
            .map(str::to_owned)
            .ok_or(VfsError::NotFound)
    }

    /// The session `by-date/<day>/<name>` leads to.
    pub(super) fn date_link(&self, day: &str, name: &str) -> Option<String> {
        self.sessions
            .navigation()
            .by_date
            .get(day)?
            .get(name)
            .cloned()
    }

    /// The session `recent/<name>` leads to.
    pub(super) fn recent_link(&self, name: &str) -> Option<String> {
        self.sessions.navigation().recent.get(name).cloned()
    }

    /// The project names of the listing.
    pub(super) fn project_names(&self) -> BTreeSet<String> {
        self.sessions.with_listing(|listing| {
            listing
                .values()
                .map(|l| super::layout::project_name(&l.cwd))
                .filter(|n| super::layout::usable_name(n))
                .collect()
        })
    }
}

/// The model's tests' configuration: the store `source` on `storage`, its blobs and history
/// in `agent`, writable, four sessions loaded, the search index and saved usage in memory.
#[cfg(test)]
pub(crate) fn test_config(
    storage: std::sync::Arc<dyn SessionStorage>,
    source: SessionSource,
    agent: &std::path::Path,
) -> VfsConfig {
    VfsConfig {
        storage,
        source,
        blob_dir: agent.join("blobs"),
        read_only: false,
        max_loaded: 4,
        history_db: agent.join("history.db"),
        owner_uid: None,
        search_index: None,
        saved_usage: None,
        saved_listing: None,
        saved_renderings: None,
        redact: false,
    }
}
