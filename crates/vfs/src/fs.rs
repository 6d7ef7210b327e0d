//! [`Vfs`]: the operations of the model over the engine's sessions.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::errors::ErrorLog;
use super::handles::{Handle, Handles, LeafBuffer, LineBuffer, Part};
use super::history::HistoryView;
use super::inode::{InodeTable, Node, ROOT_INO};
use super::layout::safe_session_name;
use super::sessions::{Listed, SlotCache};
use super::snapshots::Compared;
use super::store_usage::StoreUsageView;
use super::{Attr, DirEntry, OpenMode, SessionSource, VfsError};
use gjcfs_engine::discovery::{list_all_cached, list_dir_cached, ListingCache, SessionInfo};
use gjcfs_engine::json::{self, Object, Value};
use gjcfs_engine::leaf_marker::persist_leaf;
use gjcfs_engine::storage::{FileStorage, ReadFile, SessionStorage};

#[derive(Debug, Clone)]
pub struct VfsConfig {
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
}

/// An opened file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened {
    pub fh: u64,
    pub caching: Caching,
}

/// What a kernel may keep of an opened file's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caching {
    /// Nothing: every read comes to the model (leaf, context, errors, the append point,
    /// history views: contents that change with every write or query).
    Direct,
    /// Cached while open, dropped at the next open (header.json).
    UntilReopen,
    /// Kept across opens until the model announces a change (entries, blobs).
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
    pub(super) listing: Mutex<HashMap<String, Listed>>,
    /// Held while the store is scanned, so that one scan serves everyone waiting; it holds
    /// what the last scan read, so that a scan reads only the files that changed.
    rescan: Mutex<ListingCache>,
    pub(super) cache: Mutex<SlotCache>,
    pub(super) handles: Handles,
    pub(super) errors: ErrorLog,
    /// Sessions left out of the listing, reported once each ([`Vfs::take_notices`]).
    notices: Mutex<(Vec<String>, HashSet<PathBuf>)>,
    pub(super) history: HistoryView,
    pub(super) store_usage: StoreUsageView,
    pub(super) check: super::check::CheckView,
    pub(super) search: super::search::SearchView,
    invalidator: std::sync::OnceLock<Invalidator>,
    stopped: AtomicBool,
    /// Held shared by every write to a session file while it runs, so that
    /// [`Vfs::stop_writes`] returns only once the writes under way are done.
    pub(super) write_gate: parking_lot::RwLock<()>,
    /// When each session's leaf was last moved through the mount (ms): its views' mtime.
    leaf_moves: Mutex<HashMap<String, i64>>,
    /// `leaf` files truncated by path (no open file), and when: the reset waits a moment
    /// ([`RESET_GRACE`]) for the write that usually follows (an editor saving), which then
    /// gives the one move; meanwhile `leaf` reads as empty.
    pending_resets: Mutex<HashMap<String, std::time::Instant>>,
    /// The rendered files' bytes, while reads are served by node.
    pub(super) snapshots: super::snapshots::Snapshots,
}

/// How long a `leaf` truncated by path waits for a write before it resets the leaf.
pub(super) const RESET_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// What a `leaf` content names.
enum Resolved {
    One(String),
    None,
    Many(Vec<String>),
}

/// The entry `name` names in a loaded session: an entry id, an entry file name (with or
/// without `.json`), a label's file name, or a unique prefix of an entry id.
fn resolve_leaf(loaded: &mut super::sessions::Loaded, name: &str) -> Resolved {
    let manager = loaded.manager.clone();
    if manager.read(|s| s.index_of(name).is_some()) {
        return Resolved::One(name.to_owned());
    }
    let file = if name.ends_with(".json") {
        name.to_owned()
    } else {
        format!("{name}.json")
    };
    if let Some(entry) = loaded.rendered.find_entry(&manager, &file) {
        return Resolved::One(entry.id.clone());
    }
    let label = loaded.rendered.labels(&manager).get(name).cloned();
    if let Some(id) = label.or_else(|| {
        let encoded = super::layout::label_file_name(name);
        loaded.rendered.labels(&manager).get(&encoded).cloned()
    }) {
        return Resolved::One(id);
    }
    let mut matching: Vec<String> = manager.read(|s| {
        s.entries()
            .filter_map(|r| r.id())
            .filter(|id| id.starts_with(name))
            .map(str::to_owned)
            .collect()
    });
    matching.sort();
    matching.dedup();
    match matching.len() {
        0 => Resolved::None,
        1 => Resolved::One(matching.remove(0)),
        _ => Resolved::Many(matching),
    }
}

/// The first few candidates of an ambiguous name, for `errors`.
fn candidates(ids: &[String]) -> String {
    const SHOWN: usize = 8;
    let shown: Vec<&str> = ids.iter().take(SHOWN).map(String::as_str).collect();
    let more = ids.len().saturating_sub(SHOWN);
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

/// Up to `size` bytes of `bytes` at `offset` (fewer only at the end).
fn slice_at(bytes: &[u8], offset: u64, size: u32) -> Vec<u8> {
    let start = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(bytes.len());
    let end = start.saturating_add(size as usize).min(bytes.len());
    bytes[start..end].to_vec()
}

/// Up to `size` bytes of `file` at `offset` (fewer only at its end).
fn read_file_at(file: &dyn ReadFile, offset: u64, size: u32) -> Result<Vec<u8>, VfsError> {
    let mut buf = vec![0; size as usize];
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) => return Err(super::errors::from_io(&e, format!("session.jsonl: {e}"))),
        }
    }
    buf.truncate(done);
    Ok(buf)
}

/// What a model serves ([`Vfs::summary`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub sessions: usize,
    pub workspaces: usize,
    /// Whether there is a prompt history database.
    pub history: bool,
}

/// Which of a session's entries changed, for [`Vfs::announce`].
#[derive(Debug, Clone, Copy)]
pub(super) enum EntriesChanged<'a> {
    None,
    These(&'a [String]),
    All,
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

impl Vfs {
    /// The model over `config`'s store. Nothing is read yet: the sessions are listed when
    /// `sessions/` or `projects/` is first looked into.
    pub fn new(config: VfsConfig) -> Self {
        Vfs {
            history: HistoryView::new(&config.history_db),
            store_usage: StoreUsageView::new(config.source.clone()),
            check: super::check::CheckView::new(&config.source, &config.blob_dir),
            search: super::search::SearchView::new(config.search_index.clone(), &config.blob_dir),
            config,
            inodes: Mutex::new(InodeTable::default()),
            listing: Mutex::new(HashMap::new()),
            rescan: Mutex::new(ListingCache::default()),
            cache: Mutex::new(SlotCache::default()),
            handles: Handles::default(),
            errors: ErrorLog::default(),
            notices: Mutex::new((Vec::new(), HashSet::new())),
            invalidator: std::sync::OnceLock::new(),
            stopped: AtomicBool::new(false),
            write_gate: parking_lot::RwLock::new(()),
            leaf_moves: Mutex::new(HashMap::new()),
            pending_resets: Mutex::new(HashMap::new()),
            snapshots: Default::default(),
        }
    }

    pub fn read_only(&self) -> bool {
        self.config.read_only
    }

    /// Refuses every write from now on (`EROFS`), as a read-only mount does: the server is
    /// shutting down. A write already under way finishes before this returns.
    pub fn stop_writes(&self) {
        // Truncations already answered are applied first.
        self.apply_pending_resets(std::time::Duration::ZERO);
        self.stopped.store(true, Ordering::SeqCst);
        drop(self.write_gate.write());
    }

    /// Applies the resets of `leaf` files truncated by path at least `age` ago that no
    /// write took over (see [`Vfs::pending_resets`]).
    pub(super) fn apply_pending_resets(&self, age: std::time::Duration) {
        let due: Vec<String> = {
            let mut pending = self.pending_resets.lock();
            let due: Vec<String> = pending
                .iter()
                .filter(|(_, at)| at.elapsed() >= age)
                .map(|(sid, _)| sid.clone())
                .collect();
            for sid in &due {
                pending.remove(sid);
            }
            due
        };
        for sid in due {
            // A failure is in the session's errors file.
            let _ = self.set_leaf(&sid, b"");
        }
    }

    /// Whether `leaf` of `sid` was truncated by path and reads as empty until its reset.
    pub(super) fn reset_pending(&self, sid: &str) -> bool {
        self.pending_resets.lock().contains_key(sid)
    }

    /// Whether `caller` may write: the store's owner or root.
    fn check_writer(&self, caller: Option<u32>) -> Result<(), VfsError> {
        match (self.config.owner_uid, caller) {
            (Some(owner), Some(uid)) if uid != owner && uid != 0 => Err(VfsError::AccessDenied),
            _ => Ok(()),
        }
    }

    pub(super) fn writes_stopped(&self) -> bool {
        self.config.read_only || self.stopped.load(Ordering::SeqCst)
    }

    pub(super) fn leaf_moved_ms(&self, sid: &str) -> Option<i64> {
        self.leaf_moves.lock().get(sid).copied()
    }

    /// Installs the hook told about every change (once; later calls are ignored).
    pub fn set_invalidator(&self, invalidator: Invalidator) {
        let _ = self.invalidator.set(invalidator);
    }

    /// What the model left out and why, since the last call (the model never prints).
    pub fn take_notices(&self) -> Vec<String> {
        std::mem::take(&mut self.notices.lock().0)
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
        self.rescan_with(&|_, _| {});
    }

    /// [`Vfs::rescan`], calling `progress(done, total)` after each transcript file read.
    fn rescan_with(&self, progress: &dyn Fn(usize, usize)) {
        // One scan at a time, until its listing is in place (a slower scan never puts an
        // older listing over a newer one); what a scan read, the next one need not read.
        let mut cache = self.rescan.lock();
        let storage = FileStorage;
        let infos: Vec<SessionInfo> = match &self.config.source {
            SessionSource::SessionsRoot(root) => {
                list_all_cached(&storage, root, &mut cache, progress).unwrap_or_default()
            }
            SessionSource::Dir(dir) => {
                list_dir_cached(&storage, dir, &mut cache, progress).unwrap_or_default()
            }
        };
        let (usable, unsafe_ids): (Vec<SessionInfo>, Vec<SessionInfo>) = infos
            .into_iter()
            .partition(|info| safe_session_name(&info.id));
        {
            let mut notices = self.notices.lock();
            for info in unsafe_ids {
                if notices.1.insert(info.path.clone()) {
                    notices.0.push(format!(
                        "{}: left out: its session id {:?} cannot name a directory",
                        info.path.display(),
                        info.id
                    ));
                }
            }
        }
        // The titles the last listing found, for files unchanged since (a title may take a
        // read past the file's first 4 KiB): looked up before, never under, the lock.
        let known: HashMap<String, (PathBuf, i64, String)> = self
            .listing
            .lock()
            .iter()
            .map(|(id, l)| (id.clone(), (l.path.clone(), l.modified_ms, l.title.clone())))
            .collect();
        let fresh: Vec<(String, Listed)> = usable
            .into_iter()
            .map(|mut info| {
                let title = match known.get(&info.id) {
                    Some((path, ms, title)) if *path == info.path && *ms == info.modified_ms => {
                        title.clone()
                    }
                    _ => {
                        if info.message_count > 0 {
                            info.find_first_prompt(&storage);
                        }
                        info.shown_title().to_owned()
                    }
                };
                let listed = Listed {
                    path: info.path,
                    cwd: info.cwd,
                    modified_ms: info.modified_ms,
                    seen: None,
                    title,
                    created: info.created,
                };
                (info.id, listed)
            })
            .collect();
        let mut listing = self.listing.lock();
        let previous = std::mem::take(&mut *listing);
        *listing = fresh
            .into_iter()
            .map(|(id, mut listed)| {
                listed.seen = previous
                    .get(&id)
                    .filter(|old| old.path == listed.path)
                    .and_then(|old| old.seen);
                (id, listed)
            })
            .collect();
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
    /// number now, which may have changed since the listing.
    pub fn listed_entry(&self, dir: u64, entry: &DirEntry) -> Result<Attr, VfsError> {
        let renumbered = self.snapshots.enabled() && !self.inodes.lock().is_current(entry.ino);
        let node = if renumbered {
            self.child(&self.node(dir)?, &entry.name)?
        } else {
            self.node(entry.ino)?
        };
        self.entry_of(&node)
    }

    /// The kernel dropped `count` references to `ino` (FUSE `forget`): a query's node is
    /// forgotten when none is left, and so is an old version of a rendered file; a rendered
    /// file's bytes are dropped with the kernel's last reference.
    pub fn forget(&self, ino: u64, count: u64) {
        // Under the table's lock: a lookup counting a new reference to `ino` keeps its
        // version, or comes after and keeps one anew.
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
    /// 10,000 sessions quadratic.
    pub fn opendir(&self, ino: u64) -> Result<u64, VfsError> {
        let entries = Arc::new(self.list(ino)?);
        Ok(self.handles.insert(Handle::Dir(entries)))
    }

    /// The entries of an open directory, as listed at [`Vfs::opendir`].
    pub fn dir_entries(&self, fh: u64) -> Result<Arc<Vec<DirEntry>>, VfsError> {
        match self.handles.get(fh)? {
            Handle::Dir(entries) => Ok(entries),
            _ => Err(VfsError::BadHandle),
        }
    }

    pub fn open(&self, ino: u64, mode: OpenMode) -> Result<Opened, VfsError> {
        let node = self.node(ino)?;
        if node.is_dir() {
            return if mode.write {
                Err(VfsError::IsADirectory)
            } else {
                Ok(Opened {
                    fh: 0,
                    caching: Caching::UntilReopen,
                })
            };
        }
        if mode.write && self.writes_stopped() {
            return Err(VfsError::ReadOnly);
        }
        if mode.write {
            self.check_writer(mode.caller_uid)?;
        }
        let (handle, caching) = match &node {
            Node::Leaf(s) if mode.write => {
                // A truncation by path just before is this open's to finish.
                let truncated = mode.truncate || self.pending_resets.lock().remove(s).is_some();
                let current = self.with_session(s, |l| Ok(l.rendered.leaf.to_vec()))?;
                let buf = if truncated { Vec::new() } else { current };
                let leaf = LeafBuffer::new(s, buf, truncated);
                (Handle::Leaf(Arc::new(Mutex::new(leaf))), Caching::Direct)
            }
            Node::EntriesNew(s) => {
                self.with_session(s, |_| Ok(()))?;
                let line = LineBuffer::new(s);
                (Handle::New(Arc::new(Mutex::new(line))), Caching::Direct)
            }
            _ if mode.write => return Err(VfsError::AccessDenied),
            Node::Transcript(s) => (Handle::Transcript(self.transcript(s)?), Caching::Keep),
            Node::Entry(..) | Node::Blob(_) => (Handle::Read(self.content(&node)?), Caching::Keep),
            other => {
                let view = super::handles::View::new(other.clone(), self.content(other)?);
                (Handle::View(Arc::new(view)), Caching::Direct)
            }
        };
        let fh = self.handles.insert(handle);
        Ok(Opened { fh, caching })
    }

    /// Session `sid`'s transcript, opened for reading where it is.
    fn transcript(&self, sid: &str) -> Result<Arc<dyn ReadFile>, VfsError> {
        let path = self.with_session(sid, |loaded| Ok(loaded.path().to_owned()))?;
        let file = FileStorage
            .open_read_at(&path)
            .map_err(|e| super::errors::from_io(&e, format!("session.jsonl: {e}")))?;
        Ok(Arc::from(file))
    }

    /// Serves reads by node from now on, for a platform whose kernel opens files without
    /// asking (there are no handles): [`Vfs::read_node`] reads a file, and each inode number
    /// of a rendered file holds one version of its bytes (`snapshots.rs`;
    /// [`Attr::lookup_each_open`]). Only for a read-only model: writes need handles.
    pub fn serve_reads_by_node(&self) {
        debug_assert!(
            self.config.read_only,
            "reads by node are for read-only models"
        );
        self.snapshots.enable();
    }

    /// Up to `size` bytes of file `ino` at `offset`, without a handle
    /// ([`Vfs::serve_reads_by_node`]): the bytes a rendered file's number holds, an entry or
    /// a blob as it is now, the transcript where it is.
    pub fn read_node(&self, ino: u64, offset: u64, size: u32) -> Result<Vec<u8>, VfsError> {
        let node = self.node(ino)?;
        let bytes = match &node {
            _ if node.is_dir() => return Err(VfsError::IsADirectory),
            Node::Transcript(s) => return read_file_at(self.transcript(s)?.as_ref(), offset, size),
            Node::Entry(..) | Node::Blob(_) => self.content(&node)?,
            rendered => {
                // A version for a current number not kept yet is kept now.
                self.getattr(ino)?;
                match self.snapshots.bytes(ino) {
                    Some(bytes) => bytes,
                    // Dropped to make room: rendered again, served if still the same.
                    None => {
                        let fresh = self.content(rendered)?;
                        match self.snapshots.compare(ino, &fresh) {
                            Compared::Same(_) => fresh,
                            Compared::Different | Compared::Unknown => return Err(VfsError::Stale),
                        }
                    }
                }
            }
        };
        Ok(slice_at(&bytes, offset, size))
    }

    pub fn read(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>, VfsError> {
        let slice = |bytes: &[u8]| slice_at(bytes, offset, size);
        match self.handles.get(fh)? {
            Handle::Read(bytes) => Ok(slice(&bytes)),
            Handle::View(view) => {
                let first = view.unread.swap(false, Ordering::SeqCst);
                if offset == 0 && !first {
                    let mut held = view.bytes.lock();
                    // What was read before is let go first: a large file is held once.
                    drop(std::mem::take(&mut *held));
                    *held = self.content(&view.node)?;
                }
                let bytes = view.bytes.lock().clone();
                Ok(slice(&bytes))
            }
            Handle::Transcript(file) => read_file_at(file.as_ref(), offset, size),
            Handle::Dir(_) => Err(VfsError::IsADirectory),
            Handle::Leaf(leaf) => Ok(slice(&leaf.lock().buf)),
            Handle::New(_) => Ok(Vec::new()),
        }
    }

    /// Writes `data` at `offset` (`leaf`) or appends it (`entries/new`, offsets ignored:
    /// each complete line is one entry), as the whole of its `write(2)`. Returns the count
    /// of bytes taken.
    pub fn write(&self, fh: u64, offset: u64, data: &[u8]) -> Result<usize, VfsError> {
        self.write_part(fh, offset, data, Part::Last)
    }

    /// [`Vfs::write`] for one request of a `write(2)` the kernel may have split: the lines
    /// of a request that may continue are checked and held, and appended with the last
    /// request of their `write(2)` (or at the close), all together or not at all.
    pub fn write_part(
        &self,
        fh: u64,
        offset: u64,
        data: &[u8],
        part: Part,
    ) -> Result<usize, VfsError> {
        if self.writes_stopped() {
            return Err(VfsError::ReadOnly);
        }
        match self.handles.get(fh)? {
            Handle::Read(_) | Handle::View(_) | Handle::Transcript(_) | Handle::Dir(_) => {
                Err(VfsError::BadHandle)
            }
            Handle::Leaf(leaf) => {
                let mut leaf = leaf.lock();
                if let Err(e) = leaf.write_at(offset, data) {
                    self.errors.push(&leaf.sid, &format!("leaf: {e}"));
                    return Err(e);
                }
                if !leaf.buf.ends_with(b"\n") {
                    return Ok(data.len());
                }
                // A complete line is checked now, so the writer sees a bad id as a failed
                // write (shells do not check close); it takes effect at flush.
                let (sid, content) = (leaf.sid.clone(), leaf.buf.clone());
                if let Err(e) = self.check_leaf(&sid, &content) {
                    leaf.dirty = false;
                    return Err(e);
                }
                Ok(data.len())
            }
            Handle::New(line) => {
                let mut line = line.lock();
                if let Some(refused) = line.refused() {
                    return Err(refused.clone());
                }
                // Lines of earlier requests of this write(2), which the kernel counts as
                // written: dropping them must fail the handle for good.
                let misled = line.holds_lines();
                let done = line.push(data);
                let sid = line.sid.clone();
                let taken = if done.overflowed {
                    let limit = super::handles::LINE_MAX;
                    let reason = format!("a line longer than {limit} bytes was refused whole");
                    Err(VfsError::TooLarge(reason))
                } else {
                    self.check_lines(&sid, &done.lines)
                        .and_then(|()| line.hold(done.lines))
                };
                let refused = match taken {
                    Err(e) => {
                        self.note_refused_new(&sid, &e, misled);
                        e
                    }
                    Ok(()) if part == Part::MayContinue => return Ok(data.len()),
                    Ok(()) => {
                        let lines = line.take_lines();
                        // A failure is in `errors` already (the write's own reason).
                        match self.append_lines(&sid, &lines, false) {
                            Ok(()) => return Ok(data.len()),
                            Err(e) if misled => {
                                self.note_refused_new(&sid, &e, true);
                                e
                            }
                            Err(e) => e,
                        }
                    }
                };
                if misled {
                    line.refuse(refused.clone());
                } else {
                    line.drop_held();
                }
                Err(refused)
            }
        }
    }

    /// Records in `errors` what a refused write to `entries/new` cost: nothing of it is
    /// appended, and with `misled` (the kernel had been told its first part was written)
    /// the open file refuses everything until it is closed.
    fn note_refused_new(&self, sid: &str, error: &VfsError, misled: bool) {
        let tail = match misled {
            true => {
                "; nothing of that write is appended, and this open file refuses every \
                     write until it is closed"
            }
            false => "; nothing of that write is appended",
        };
        self.errors
            .push(sid, &format!("entries/new: {error}{tail}"));
        self.announce(sid, EntriesChanged::None);
    }

    /// Checks lines written to `entries/new` as the append will: each must be a JSON object
    /// the session takes as an entry (see [`gjcfs_engine::manager::external_entry`]).
    fn check_lines(&self, sid: &str, lines: &[Vec<u8>]) -> Result<(), VfsError> {
        let objects = parse_lines(lines)?;
        if objects.is_empty() {
            return Ok(());
        }
        self.with_session(sid, |loaded| {
            for (n, object) in &objects {
                loaded.manager.check_external(object).map_err(|e| {
                    VfsError::InvalidArgument(format!("line {n} of the write: {e}"))
                })?;
            }
            Ok(())
        })
    }

    /// Appends lines held by an `entries/new` handle all at once through the manager's
    /// validation: if any is not a valid entry none is appended. `accepted`: see
    /// [`Vfs::with_writer`].
    fn append_lines(&self, sid: &str, lines: &[Vec<u8>], accepted: bool) -> Result<(), VfsError> {
        let objects: Vec<Object> = match parse_lines(lines) {
            Ok(objects) => objects.into_iter().map(|(_, object)| object).collect(),
            Err(e) => {
                self.note_refused_new(sid, &e, false);
                return Err(e);
            }
        };
        if objects.is_empty() {
            return Ok(());
        }
        let appended = self.with_writer(sid, "entries/new", accepted, |manager| {
            manager.append_external_all(objects).map(drop)
        });
        self.announce(sid, EntriesChanged::None);
        appended
    }

    /// Records a refused write and answers `EINVAL`.
    fn refuse(&self, sid: &str, what: &str, reason: String) -> VfsError {
        self.errors.push(sid, &format!("{what}: {reason}"));
        self.announce(sid, EntriesChanged::None);
        VfsError::InvalidArgument(reason)
    }

    /// Applies what a handle holds: a `leaf` write moves the leaf, the lines written to
    /// `entries/new` are appended (all together). Errors are reported here (close's
    /// result). An fsync does the same.
    pub fn flush(&self, fh: u64) -> Result<(), VfsError> {
        self.apply(fh, false)
    }

    fn apply(&self, fh: u64, releasing: bool) -> Result<(), VfsError> {
        let Ok(handle) = self.handles.get(fh) else {
            return Ok(());
        };
        match handle {
            Handle::Read(_) | Handle::View(_) | Handle::Transcript(_) | Handle::Dir(_) => Ok(()),
            Handle::Leaf(leaf) => {
                let mut leaf = leaf.lock();
                if !leaf.dirty || !(leaf.written || releasing) {
                    return Ok(());
                }
                // An empty leaf (a reset) is applied at the close only: an editor that
                // truncates, flushes or fsyncs, then writes, makes one move, not two.
                if !releasing && leaf.buf.iter().all(u8::is_ascii_whitespace) {
                    return Ok(());
                }
                leaf.dirty = false;
                let (sid, buf) = (leaf.sid.clone(), leaf.buf.clone());
                self.set_leaf(&sid, &buf)
            }
            Handle::New(line) => {
                let mut line = line.lock();
                if let Some(refused) = line.refused() {
                    return Err(refused.clone());
                }
                let batch = line.take_batch();
                let sid = line.sid.clone();
                self.append_lines(&sid, &batch, true)
            }
        }
    }

    /// The entry a `leaf` content names (`None`: reset), or the recorded failure. A leaf is
    /// named as `ls entries` and `labels/` show it: the entry id, its file name (with or
    /// without `.json`), a label, or a unique prefix of an id.
    fn check_leaf(&self, sid: &str, buf: &[u8]) -> Result<Option<String>, VfsError> {
        let Ok(text) = std::str::from_utf8(buf) else {
            return Err(self.refuse(sid, "leaf", "not UTF-8".into()));
        };
        let name = text.strip_suffix('\n').unwrap_or(text).trim();
        if name.is_empty() {
            return Ok(None);
        }
        if name.contains('\n') {
            return Err(self.refuse(sid, "leaf", "more than one line".into()));
        }
        let found = self.with_session(sid, |loaded| Ok(resolve_leaf(loaded, name)))?;
        match found {
            Resolved::One(id) => Ok(Some(id)),
            Resolved::None => Err(self.refuse(sid, "leaf", format!("no entry is named {name:?}"))),
            Resolved::Many(ids) => Err(self.refuse(
                sid,
                "leaf",
                format!("{name:?} is ambiguous: it begins {}", candidates(&ids)),
            )),
        }
    }

    /// Moves the leaf and records the move in the session file (a leaf marker, see
    /// [`gjcfs_engine::leaf_marker`]), so that the agent, a remount and every tool find it.
    fn set_leaf(&self, sid: &str, buf: &[u8]) -> Result<(), VfsError> {
        let target = self.check_leaf(sid, buf)?;
        // Opened for writing, a legacy session is its managed copy: the same entries, with
        // the same ids.
        self.with_writer(sid, "leaf", true, |manager| {
            persist_leaf(manager, target.as_deref())
        })?;
        self.leaf_moves
            .lock()
            .insert(sid.to_owned(), gjcfs_engine::time::now_millis());
        self.announce(sid, EntriesChanged::None);
        Ok(())
    }

    /// Flushes what is still pending and forgets the handle.
    pub fn release(&self, fh: u64) -> Result<(), VfsError> {
        let flushed = self.apply(fh, true);
        self.handles.remove(fh);
        flushed
    }

    /// Truncation (`setattr` with a size). On an open `leaf` handle it truncates what the
    /// handle will write; without a handle, `leaf` truncated to 0 resets the leaf at once.
    pub fn set_size(
        &self,
        ino: u64,
        fh: Option<u64>,
        size: u64,
        caller_uid: Option<u32>,
    ) -> Result<Attr, VfsError> {
        if self.writes_stopped() {
            return Err(VfsError::ReadOnly);
        }
        self.check_writer(caller_uid)?;
        let node = self.node(ino)?;
        match &node {
            Node::Leaf(s) => {
                let handle = fh.and_then(|fh| self.handles.get(fh).ok());
                match handle {
                    Some(Handle::Leaf(leaf)) => leaf.lock().truncate(size)?,
                    _ if size == 0 => {
                        self.pending_resets
                            .lock()
                            .insert(s.clone(), std::time::Instant::now());
                        self.announce(s, EntriesChanged::None);
                    }
                    _ => return Err(VfsError::InvalidArgument("leaf: size must be 0".into())),
                }
            }
            Node::EntriesNew(_) if size == 0 => {}
            n if n.is_dir() => return Err(VfsError::IsADirectory),
            _ => return Err(VfsError::AccessDenied),
        }
        self.attr_of(&node)
    }

    /// Attribute changes other than size (mode, owner, times): never allowed.
    pub fn set_other_attr(&self, ino: u64) -> Result<Attr, VfsError> {
        self.node(ino)?;
        Err(if self.config.read_only {
            VfsError::ReadOnly
        } else {
            VfsError::NotPermitted
        })
    }

    /// Namespace changes (create, mkdir, unlink, rmdir, rename, link, symlink) in `parent`:
    /// the layout is fixed, so each is refused with the reason that fits.
    pub fn change_namespace(&self, parent: u64, change: NamespaceChange) -> VfsError {
        let Ok(dir) = self.node(parent) else {
            return VfsError::NotFound;
        };
        if !dir.is_dir() {
            return VfsError::NotADirectory;
        }
        if self.config.read_only {
            return VfsError::ReadOnly;
        }
        match change {
            NamespaceChange::Create => VfsError::AccessDenied,
            NamespaceChange::Remove | NamespaceChange::Rename | NamespaceChange::Link => {
                VfsError::NotPermitted
            }
        }
    }

    /// Closes every loaded manager (flushing its writes) and the history database; returns
    /// the failures (session id or `history`, reason).
    pub fn close_all(&self) -> Vec<(String, String)> {
        let mut failures = self.close_sessions();
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
        self.rescan_with(progress);
        let listing = self.listing.lock();
        let workspaces: HashSet<&str> = listing.values().map(|l| l.cwd.as_str()).collect();
        Summary {
            sessions: listing.len(),
            workspaces: workspaces.len(),
            history: self.history.exists(),
        }
    }

    /// Every transcript file of the store, unread.
    pub(super) fn transcript_paths(&self) -> Vec<PathBuf> {
        let storage = FileStorage;
        match &self.config.source {
            SessionSource::SessionsRoot(root) => {
                gjcfs_engine::discovery::all_transcript_paths(&storage, root).unwrap_or_default()
            }
            SessionSource::Dir(dir) => {
                gjcfs_engine::discovery::transcript_paths(&storage, dir).unwrap_or_default()
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

    /// The session `by-date/<day>/<name>` leads to.
    pub(super) fn date_link(&self, day: &str, name: &str) -> Option<String> {
        let listing = self.listing.lock();
        super::navigation::by_date(listing.iter())
            .get(day)?
            .get(name)
            .cloned()
    }

    /// The session `recent/<name>` leads to.
    pub(super) fn recent_link(&self, name: &str) -> Option<String> {
        let listing = self.listing.lock();
        super::navigation::recent(listing.iter()).get(name).cloned()
    }

    /// The project names of the listing.
    pub(super) fn project_names(&self) -> BTreeSet<String> {
        self.listing
            .lock()
            .values()
            .map(|l| super::layout::project_name(&l.cwd))
            .filter(|n| super::layout::usable_name(n))
            .collect()
    }
}

/// The JSON objects of lines written to `entries/new`, each with its line number in the
/// write (blank lines are skipped); the first line that is not one is refused.
fn parse_lines(lines: &[Vec<u8>]) -> Result<Vec<(usize, Object)>, VfsError> {
    let mut objects = Vec::with_capacity(lines.len());
    for (n, line) in lines.iter().enumerate() {
        let refused = |why: String| VfsError::InvalidArgument(format!("line {}: {why}", n + 1));
        let Ok(text) = std::str::from_utf8(line) else {
            return Err(refused("not UTF-8".into()));
        };
        if text.trim().is_empty() {
            continue;
        }
        match json::parse(text) {
            Ok(Value::Object(object)) => objects.push((n + 1, object)),
            Ok(_) => return Err(refused("not a JSON object".into())),
            Err(e) => return Err(refused(format!("invalid JSON: {e}"))),
        }
    }
    Ok(objects)
}
