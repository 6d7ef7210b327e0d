//! [`Vfs`]: the operations of the model over the engine's sessions.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::content::{Bytes, Generation, Rendered, View};
use super::history::HistoryView;
use super::inode::{InodeTable, Node, ROOT_INO};
use super::store_usage::StoreUsageView;
use super::{Attr, DirEntry, NodeKind, OpenMode, VfsError};
use crate::engine::blob::{is_valid_hash, BlobStore};
use crate::engine::discovery::{list_all, list_dir, SessionInfo};
use crate::engine::json::{self, Value};
use crate::engine::legacy::encode_absolute;
use crate::engine::manager::{Refresh, SessionError, SessionManager, StorageConfig};
use crate::engine::storage::FileStorage;
use crate::engine::time;

/// How many failed-write reasons a session's `errors` file keeps.
const ERRORS_KEPT: usize = 32;
/// The longest content a `leaf` handle accepts.
const LEAF_MAX: usize = 4096;

/// Where the sessions come from.
#[derive(Debug, Clone)]
pub enum SessionSource {
    /// `<agentDir>/sessions`: every scope and legacy directory under it.
    SessionsRoot(PathBuf),
    /// One directory of session files (`--session-dir`).
    Dir(PathBuf),
}

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

#[derive(Debug, Clone)]
struct Listed {
    path: PathBuf,
    cwd: String,
    modified_ms: i64,
    /// The file as the model last loaded it; a different file at the next load means the
    /// kernel's cached entries of the session are stale.
    seen: Option<FileStamp>,
}

struct Loaded {
    manager: Arc<SessionManager>,
    rendered: Rendered,
    /// The session file as this model last saw it (after loading or its own writes); a
    /// different file on disk means someone else wrote it and the session is reloaded.
    synced: Option<FileStamp>,
}

/// What tells one state of a file from another: size, mtime and inode (a rewrite replaces
/// the file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileStamp {
    len: u64,
    mtime: std::time::SystemTime,
    ino: u64,
}

impl FileStamp {
    pub(super) fn of(path: &Path) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok()?;
        Some(FileStamp {
            len: meta.len(),
            mtime: meta.modified().ok()?,
            ino: meta.ino(),
        })
    }

    fn millis(&self) -> i64 {
        self.mtime
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    }
}

#[derive(Debug)]
enum Handle {
    /// A snapshot taken at open.
    Read(Bytes),
    /// A directory's entries, listed at open.
    Dir(Arc<Vec<DirEntry>>),
    Leaf {
        sid: String,
        buf: Vec<u8>,
        /// The content differs from what was applied (a write, a truncate, O_TRUNC).
        dirty: bool,
        /// A write or a truncate through the handle happened (not just O_TRUNC): a flush
        /// applies the content. A bare O_TRUNC waits for release, because a shell's
        /// redirection flushes a duplicate descriptor before it writes.
        written: bool,
    },
    New {
        sid: String,
        partial: Vec<u8>,
    },
}

#[derive(Default)]
struct State {
    inodes: InodeTable,
    listing: HashMap<String, Listed>,
    loaded: HashMap<String, Loaded>,
    /// Loaded session ids, least recently used first.
    lru: VecDeque<String>,
    handles: HashMap<u64, Handle>,
    next_fh: u64,
    errors: HashMap<String, VecDeque<String>>,
}

/// The filesystem model. All operations are serialized by one lock.
pub struct Vfs {
    config: VfsConfig,
    state: Mutex<State>,
    history: HistoryView,
    store_usage: StoreUsageView,
    invalidator: std::sync::OnceLock<Invalidator>,
    /// Set by [`Vfs::stop_writes`]: every write is refused from then on.
    writes_stopped: std::sync::atomic::AtomicBool,
}

/// The names in a session's directory, in listing order.
const SESSION_FILES: [&str; 10] = [
    "header.json",
    "entries",
    "leaf",
    "context.json",
    "context.md",
    "tree.txt",
    "usage.json",
    "labels",
    "errors",
    "blobs",
];

/// The node `name` names in session `sid`'s directory.
fn session_child(sid: &str, name: &str) -> Option<Node> {
    let s = sid.to_owned();
    Some(match name {
        "header.json" => Node::Header(s),
        "entries" => Node::EntriesDir(s),
        "leaf" => Node::Leaf(s),
        "context.json" => Node::Context(s),
        "context.md" => Node::ContextMd(s),
        "tree.txt" => Node::Tree(s),
        "usage.json" => Node::Usage(s),
        "labels" => Node::LabelsDir(s),
        "errors" => Node::Errors(s),
        "blobs" => Node::SessionBlobsDir(s),
        _ => return None,
    })
}

/// The view a node shows, if it is one.
fn view_of(node: &Node) -> Option<(&str, View)> {
    match node {
        Node::ContextMd(s) => Some((s, View::ContextMd)),
        Node::Tree(s) => Some((s, View::Tree)),
        Node::Usage(s) => Some((s, View::Usage)),
        _ => None,
    }
}

fn usable_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('/') && !name.contains('\0')
}

fn kind_of(node: &Node) -> NodeKind {
    if node.is_dir() {
        NodeKind::Directory
    } else if matches!(node, Node::ProjectLink(..) | Node::Label(..)) {
        NodeKind::Symlink
    } else {
        NodeKind::File
    }
}

/// The `projects/` name of a workspace.
fn project_name(cwd: &str) -> String {
    encode_absolute(cwd)
}

fn link_target(sid: &str) -> String {
    format!("../../sessions/{sid}")
}

fn session_err(e: &SessionError) -> VfsError {
    match e {
        SessionError::EntryNotFound(_) | SessionError::InvalidEntry(_) => {
            VfsError::InvalidArgument(e.to_string())
        }
        _ => VfsError::Io(e.to_string()),
    }
}

impl Vfs {
    /// The model over `config`'s store. Nothing is read yet: the sessions are listed when
    /// `sessions/` or `projects/` is first looked into.
    pub fn new(config: VfsConfig) -> Self {
        Vfs {
            history: HistoryView::new(&config.history_db),
            store_usage: StoreUsageView::new(config.source.clone()),
            config,
            state: Mutex::new(State::default()),
            invalidator: std::sync::OnceLock::new(),
            writes_stopped: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Refuses every write from now on, as a read-only mount does (a server shutting
    /// down). A write already under way finishes before this returns; what open handles
    /// hold from earlier writes is still applied when they are released.
    pub fn stop_writes(&self) {
        self.writes_stopped
            .store(true, std::sync::atomic::Ordering::SeqCst);
        drop(self.state.lock());
    }

    /// Whether writes are refused (checked under the state lock).
    fn refuses_writes(&self) -> bool {
        self.config.read_only
            || self
                .writes_stopped
                .load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn read_only(&self) -> bool {
        self.config.read_only
    }

    /// Installs the hook told about every change (once; later calls are ignored).
    pub fn set_invalidator(&self, invalidator: Invalidator) {
        let _ = self.invalidator.set(invalidator);
    }

    /// Announces that session `sid` changed: every node of it but the entries, and of the
    /// entries those `entries` names (an append or a branch only adds entries and moves the
    /// leaf; an outside change may patch entries or replace the file).
    fn announce(&self, state: &State, sid: &str, entries: EntriesChanged<'_>) {
        let Some(invalidate) = self.invalidator.get() else {
            return;
        };
        let mut inos: Vec<u64> = state.inodes.of_session(sid).to_vec();
        match entries {
            EntriesChanged::None => {}
            EntriesChanged::These(ids) => inos.extend(
                ids.iter()
                    .filter_map(|id| state.inodes.known(&Node::Entry(sid.to_owned(), id.clone()))),
            ),
            EntriesChanged::All => inos.extend_from_slice(state.inodes.entries_of(sid)),
        }
        if !inos.is_empty() {
            invalidate(&inos);
        }
    }

    /// Checks every loaded session's file and drops the ones changed from outside (the
    /// agent appending), announcing the change. The mount calls it about twice a second,
    /// so cached views follow the agent's writes even when nobody asks the model.
    pub fn poll_outside_changes(&self) {
        let mut state = self.state.lock();
        let sids: Vec<String> = state.loaded.keys().cloned().collect();
        for sid in sids {
            self.follow_outside_changes(&mut state, &sid);
        }
    }

    fn refresh_listing(&self, state: &mut State) {
        let storage = FileStorage;
        let infos: Vec<SessionInfo> = match &self.config.source {
            SessionSource::SessionsRoot(root) => list_all(&storage, root).unwrap_or_default(),
            SessionSource::Dir(dir) => list_dir(&storage, dir).unwrap_or_default(),
        };
        let previous = std::mem::take(&mut state.listing);
        state.listing = infos
            .into_iter()
            .filter(|info| usable_name(&info.id))
            .map(|info| {
                let seen = previous
                    .get(&info.id)
                    .filter(|old| old.path == info.path)
                    .and_then(|old| old.seen);
                (
                    info.id,
                    Listed {
                        path: info.path,
                        cwd: info.cwd,
                        modified_ms: info.modified_ms,
                        seen,
                    },
                )
            })
            .collect();
    }

    fn open_manager(&self, listed: &Listed) -> Result<SessionManager, SessionError> {
        let config = StorageConfig::files(&self.config.blob_dir);
        let managed = listed
            .path
            .parent()
            .and_then(Path::file_name)
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("v2-"));
        if managed {
            SessionManager::open_managed(&listed.path, config)
        } else {
            SessionManager::open(&listed.path, &listed.cwd, config)
        }
    }

    /// The loaded session `sid`, loading it on first touch and re-rendering when its
    /// generation changed.
    fn loaded<'s>(&self, state: &'s mut State, sid: &str) -> Result<&'s mut Loaded, VfsError> {
        self.follow_outside_changes(state, sid);
        if !state.loaded.contains_key(sid) {
            let listed = state.listing.get(sid).ok_or(VfsError::NotFound)?.clone();
            // The stamp is taken before the load: an append landing in between then shows
            // as a change on the next access. Taken after, it would hide that append for
            // good (the stamp would match a file newer than the loaded session).
            let before = FileStamp::of(&listed.path);
            // A reload comes back with the file's leaf; a file changed while not loaded
            // also makes what the kernel kept of its entries stale.
            let stale = listed.seen.is_some() && listed.seen != before;
            let entries = if stale {
                EntriesChanged::All
            } else {
                EntriesChanged::None
            };
            self.announce(state, sid, entries);
            let manager = self
                .open_manager(&listed)
                .map_err(|e| VfsError::Io(e.to_string()))?;
            let rendered = manager.read(Rendered::new);
            let synced = before;
            state.loaded.insert(
                sid.to_owned(),
                Loaded {
                    manager: Arc::new(manager),
                    rendered,
                    synced,
                },
            );
            Self::note_stamp(state, sid, synced);
            state.lru.push_back(sid.to_owned());
            while state.lru.len() > self.config.max_loaded.max(1) {
                let Some(old) = state.lru.pop_front() else {
                    break;
                };
                Self::unload(state, &old);
            }
        } else if let Some(pos) = state.lru.iter().position(|s| s == sid) {
            let id = state.lru.remove(pos).unwrap_or_default();
            state.lru.push_back(id);
        }
        let loaded = state.loaded.get_mut(sid).ok_or(VfsError::NotFound)?;
        let now = loaded.manager.read(Generation::of);
        if now != loaded.rendered.generation {
            loaded.rendered = loaded.manager.read(Rendered::new);
        }
        Ok(loaded)
    }

    /// Closes a loaded session (its manager flushes); a failure goes to `errors`.
    fn unload(state: &mut State, sid: &str) {
        state.lru.retain(|s| s != sid);
        if let Some(loaded) = state.loaded.remove(sid) {
            if let Err(e) = loaded.manager.close() {
                push_error(state, sid, &format!("close: {e}"));
            }
        }
    }

    /// Unloads `sid` when its file changed since the model last saw it (the agent appended
    /// outside the mount), so the next touch loads it afresh.
    fn follow_outside_changes(&self, state: &mut State, sid: &str) {
        let Some(loaded) = state.loaded.get_mut(sid) else {
            return;
        };
        let Some(path) = loaded.manager.session_file() else {
            return;
        };
        // Taken before reading: lines landing during the refresh show as a change next time.
        let now = FileStamp::of(&path);
        if now == loaded.synced {
            return;
        }
        match loaded.manager.refresh_from_file() {
            Ok(Refresh::Unchanged) => loaded.synced = now,
            Ok(Refresh::Appended { edited, .. }) => {
                loaded.synced = now;
                // Patched messages keep the record count: render afresh, not by generation.
                loaded.rendered = loaded.manager.read(Rendered::new);
                let ids: Vec<String> = loaded.manager.read(|session| {
                    edited
                        .iter()
                        .filter_map(|&i| session.record(i).id().map(str::to_owned))
                        .collect()
                });
                Self::note_stamp(state, sid, now);
                self.announce(state, sid, EntriesChanged::These(&ids));
            }
            // Replaced, shortened or unreadable: load it afresh on the next touch.
            Ok(Refresh::NeedsReload(_)) | Err(_) => {
                Self::unload(state, sid);
                self.announce(state, sid, EntriesChanged::All);
            }
        }
    }

    /// Records the file as it is after this model's own write.
    fn resync(state: &mut State, sid: &str) {
        let Some(loaded) = state.loaded.get_mut(sid) else {
            return;
        };
        let stamp = loaded
            .manager
            .session_file()
            .as_deref()
            .and_then(FileStamp::of);
        loaded.synced = stamp;
        Self::note_stamp(state, sid, stamp);
    }

    fn note_stamp(state: &mut State, sid: &str, stamp: Option<FileStamp>) {
        if let (Some(listed), Some(stamp)) = (state.listing.get_mut(sid), stamp) {
            listed.modified_ms = stamp.millis();
            listed.seen = Some(stamp);
        }
    }

    /// Size and mtime (ms) of the blob store directory, or of one blob in it.
    fn blob_meta(&self, hash: Option<&str>) -> Result<(u64, i64), VfsError> {
        let path = match hash {
            Some(h) => self.config.blob_dir.join(h),
            None => self.config.blob_dir.clone(),
        };
        match std::fs::metadata(&path) {
            Ok(meta) => {
                let ms = meta
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_millis() as i64);
                Ok((meta.len(), ms))
            }
            // A store not created yet is an empty directory.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && hash.is_none() => Ok((0, 0)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(VfsError::NotFound),
            Err(e) => Err(VfsError::Io(e.to_string())),
        }
    }

    fn node(state: &State, ino: u64) -> Result<Node, VfsError> {
        state.inodes.node(ino).cloned().ok_or(VfsError::NotFound)
    }

    /// When a session was last added or removed: the newest mtime of the source directory
    /// and (a sessions root) of the directories in it. No session file is read, so the
    /// root answers at once however large the store.
    fn source_mtime_ms(&self) -> i64 {
        let mtime = |path: &Path| {
            std::fs::metadata(path)
                .ok()
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_millis() as i64)
        };
        match &self.config.source {
            SessionSource::Dir(dir) => mtime(dir),
            SessionSource::SessionsRoot(root) => std::fs::read_dir(root)
                .map(|dirs| {
                    dirs.filter_map(|e| e.ok())
                        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                        .map(|e| mtime(&e.path()))
                        .max()
                        .unwrap_or(0)
                })
                .unwrap_or(0)
                .max(mtime(root)),
        }
    }

    fn attr_of(&self, state: &mut State, node: &Node) -> Result<Attr, VfsError> {
        let ino = state.inodes.ino(node);
        let dir = |mtime_ms| Attr {
            ino,
            kind: NodeKind::Directory,
            size: 0,
            perm: 0o700,
            nlink: 2,
            mtime_ms,
            stable: false,
        };
        let file = |size: usize, mtime_ms| Attr {
            ino,
            kind: NodeKind::File,
            size: size as u64,
            perm: 0o600,
            nlink: 1,
            mtime_ms,
            stable: false,
        };
        let file_ms = node
            .session()
            .and_then(|s| state.listing.get(s))
            .map(|l| l.modified_ms);
        let attr = match node {
            Node::Root | Node::SessionsDir => dir(self.source_mtime_ms()),
            Node::BlobsDir => dir(self.blob_meta(None)?.1),
            Node::SessionBlobsDir(s) => {
                self.loaded(state, s)?;
                dir(file_ms.unwrap_or(0))
            }
            Node::HistoryDir | Node::SearchDir => dir(self.history.mtime_ms()),
            Node::ProjectsDir => dir(self.source_mtime_ms()),
            Node::ProjectDir(name) => {
                let newest = state
                    .listing
                    .values()
                    .filter(|l| project_name(&l.cwd) == *name)
                    .map(|l| l.modified_ms)
                    .max();
                dir(newest.ok_or(VfsError::NotFound)?)
            }
            Node::ProjectLink(_, s) => Attr {
                ino,
                kind: NodeKind::Symlink,
                size: link_target(s).len() as u64,
                perm: 0o777,
                nlink: 1,
                mtime_ms: file_ms.ok_or(VfsError::NotFound)?,
                stable: false,
            },
            Node::HistoryPrompts => file(self.history.prompts()?.len(), self.history.mtime_ms()),
            Node::Search(query) => file(self.history.search(query)?.len(), self.history.mtime_ms()),
            Node::Blob(hash) => {
                let (len, mtime) = self.blob_meta(Some(hash))?;
                Attr {
                    stable: true,
                    ..file(len as usize, mtime)
                }
            }
            Node::SessionDir(_) => dir(file_ms.ok_or(VfsError::NotFound)?),
            Node::Header(s) => {
                let r = &self.loaded(state, s)?.rendered;
                file(r.header.len(), r.header_mtime_ms.or(file_ms).unwrap_or(0))
            }
            Node::EntriesDir(s) => {
                let loaded = self.loaded(state, s)?;
                let entries = loaded.rendered.entries(&loaded.manager);
                let last = entries.iter().filter_map(|e| e.mtime_ms).max();
                dir(last.or(file_ms).unwrap_or(0))
            }
            Node::Entry(s, id) => {
                let loaded = self.loaded(state, s)?;
                let mtime = loaded
                    .rendered
                    .entry(&loaded.manager, id)
                    .ok_or(VfsError::NotFound)?
                    .mtime_ms;
                let size = loaded
                    .rendered
                    .entry_size(&loaded.manager, id)
                    .ok_or(VfsError::NotFound)?;
                Attr {
                    stable: true,
                    ..file(size as usize, mtime.or(file_ms).unwrap_or(0))
                }
            }
            Node::EntriesNew(s) => {
                self.loaded(state, s)?;
                file(0, file_ms.unwrap_or(0))
            }
            Node::Leaf(s) => {
                let r = &self.loaded(state, s)?.rendered;
                file(r.leaf.len(), file_ms.unwrap_or(0))
            }
            Node::Context(s) => {
                let loaded = self.loaded(state, s)?;
                let bytes = loaded
                    .rendered
                    .context_bytes(&loaded.manager)
                    .map_err(|e| VfsError::Io(e.to_string()))?;
                file(bytes.len(), file_ms.unwrap_or(0))
            }
            Node::Errors(s) => {
                self.loaded(state, s)?;
                file(errors_text(state, s).len(), file_ms.unwrap_or(0))
            }
            Node::ContextMd(s) | Node::Tree(s) | Node::Usage(s) => {
                let (_, view) = view_of(node).ok_or(VfsError::NotFound)?;
                let loaded = self.loaded(state, s)?;
                let bytes = loaded.rendered.view_bytes(&loaded.manager, view);
                file(bytes.len(), file_ms.unwrap_or(0))
            }
            Node::LabelsDir(s) => {
                self.loaded(state, s)?;
                dir(file_ms.unwrap_or(0))
            }
            Node::Label(s, label) => {
                let loaded = self.loaded(state, s)?;
                let target = loaded
                    .rendered
                    .label_target(&loaded.manager, label)
                    .ok_or(VfsError::NotFound)?;
                Attr {
                    ino,
                    kind: NodeKind::Symlink,
                    size: target.len() as u64,
                    perm: 0o777,
                    nlink: 1,
                    mtime_ms: file_ms.unwrap_or(0),
                    stable: false,
                }
            }
            Node::StoreUsage => file(self.store_usage.bytes()?.len(), self.source_mtime_ms()),
        };
        Ok(attr)
    }

    /// The node `name` in directory `parent`.
    pub fn lookup(&self, parent: u64, name: &str) -> Result<Attr, VfsError> {
        let mut state = self.state.lock();
        let dir = Self::node(&state, parent)?;
        let child = match &dir {
            Node::Root => match name {
                "sessions" => Node::SessionsDir,
                "blobs" => Node::BlobsDir,
                "history" => Node::HistoryDir,
                "projects" => Node::ProjectsDir,
                "usage.json" => Node::StoreUsage,
                _ => return Err(VfsError::NotFound),
            },
            Node::SessionsDir => {
                if !state.listing.contains_key(name) {
                    self.refresh_listing(&mut state);
                }
                if !state.listing.contains_key(name) {
                    return Err(VfsError::NotFound);
                }
                Node::SessionDir(name.to_owned())
            }
            Node::SessionDir(s) => session_child(s, name).ok_or(VfsError::NotFound)?,
            Node::LabelsDir(s) => {
                let s = s.clone();
                let loaded = self.loaded(&mut state, &s)?;
                if !loaded.rendered.labels(&loaded.manager).contains_key(name) {
                    return Err(VfsError::NotFound);
                }
                Node::Label(s, name.to_owned())
            }
            Node::HistoryDir => match name {
                "prompts.jsonl" => Node::HistoryPrompts,
                "search" => Node::SearchDir,
                _ => return Err(VfsError::NotFound),
            },
            Node::SearchDir => Node::Search(name.to_owned()),
            Node::ProjectsDir => {
                let known =
                    |state: &State| state.listing.values().any(|l| project_name(&l.cwd) == name);
                if !known(&state) {
                    self.refresh_listing(&mut state);
                }
                if !known(&state) {
                    return Err(VfsError::NotFound);
                }
                Node::ProjectDir(name.to_owned())
            }
            Node::ProjectDir(project) => match state.listing.get(name) {
                Some(l) if project_name(&l.cwd) == *project => {
                    Node::ProjectLink(project.clone(), name.to_owned())
                }
                _ => return Err(VfsError::NotFound),
            },
            Node::SessionBlobsDir(s) => {
                let s = s.clone();
                let loaded = self.loaded(&mut state, &s)?;
                let refs = loaded.rendered.blob_refs(&loaded.manager);
                if !refs.iter().any(|h| h == name) {
                    return Err(VfsError::NotFound);
                }
                Node::Blob(name.to_owned())
            }
            Node::BlobsDir if is_valid_hash(name) => Node::Blob(name.to_owned()),
            Node::BlobsDir => return Err(VfsError::NotFound),
            Node::EntriesDir(s) => {
                let s = s.clone();
                if name == "new" {
                    Node::EntriesNew(s)
                } else {
                    let loaded = self.loaded(&mut state, &s)?;
                    let id = loaded
                        .rendered
                        .find_entry(&loaded.manager, name)
                        .ok_or(VfsError::NotFound)?
                        .id
                        .clone();
                    Node::Entry(s, id)
                }
            }
            _ => return Err(VfsError::NotADirectory),
        };
        self.attr_of(&mut state, &child)
    }

    pub fn getattr(&self, ino: u64) -> Result<Attr, VfsError> {
        let mut state = self.state.lock();
        let node = Self::node(&state, ino)?;
        self.attr_of(&mut state, &node)
    }

    /// The entries of directory `ino` (without `.` and `..`), the session listing rescanned.
    pub fn readdir(&self, ino: u64) -> Result<Vec<DirEntry>, VfsError> {
        let mut state = self.state.lock();
        self.list(&mut state, ino)
    }

    /// Opens directory `ino`: its entries are listed now (the session listing rescanned)
    /// and [`Vfs::dir_entries`] serves them from this snapshot until [`Vfs::release`]. The
    /// kernel reads a large directory a buffer at a time; one scan per call made listing
    /// 10,000 sessions quadratic.
    pub fn opendir(&self, ino: u64) -> Result<u64, VfsError> {
        let mut state = self.state.lock();
        let entries = Arc::new(self.list(&mut state, ino)?);
        state.next_fh += 1;
        let fh = state.next_fh;
        state.handles.insert(fh, Handle::Dir(entries));
        Ok(fh)
    }

    /// The entries of an open directory, as listed at [`Vfs::opendir`].
    pub fn dir_entries(&self, fh: u64) -> Result<Arc<Vec<DirEntry>>, VfsError> {
        match self.state.lock().handles.get(&fh) {
            Some(Handle::Dir(entries)) => Ok(entries.clone()),
            _ => Err(VfsError::BadHandle),
        }
    }

    fn list(&self, state: &mut State, ino: u64) -> Result<Vec<DirEntry>, VfsError> {
        let dir = Self::node(state, ino)?;
        let children: Vec<(Node, String)> = match &dir {
            Node::Root => vec![
                (Node::SessionsDir, "sessions".to_owned()),
                (Node::BlobsDir, "blobs".to_owned()),
                (Node::HistoryDir, "history".to_owned()),
                (Node::ProjectsDir, "projects".to_owned()),
                (Node::StoreUsage, "usage.json".to_owned()),
            ],
            Node::ProjectsDir => {
                self.refresh_listing(state);
                let names: std::collections::BTreeSet<String> = state
                    .listing
                    .values()
                    .map(|l| project_name(&l.cwd))
                    .filter(|n| usable_name(n))
                    .collect();
                names
                    .into_iter()
                    .map(|n| (Node::ProjectDir(n.clone()), n))
                    .collect()
            }
            Node::ProjectDir(project) => {
                let mut ids: Vec<String> = state
                    .listing
                    .iter()
                    .filter(|(_, l)| project_name(&l.cwd) == *project)
                    .map(|(id, _)| id.clone())
                    .collect();
                ids.sort();
                ids.into_iter()
                    .map(|id| (Node::ProjectLink(project.clone(), id.clone()), id))
                    .collect()
            }
            Node::HistoryDir => vec![
                (Node::HistoryPrompts, "prompts.jsonl".to_owned()),
                (Node::SearchDir, "search".to_owned()),
            ],
            Node::SessionBlobsDir(s) => {
                let loaded = self.loaded(state, s)?;
                let refs = loaded.rendered.blob_refs(&loaded.manager).to_vec();
                // Referenced blobs missing from the store are not listed.
                refs.into_iter()
                    .filter(|h| self.config.blob_dir.join(h).is_file())
                    .map(|h| (Node::Blob(h.clone()), h))
                    .collect()
            }
            // Any name is a query; none is listed.
            Node::SearchDir => Vec::new(),
            Node::BlobsDir => {
                let mut hashes: Vec<String> = std::fs::read_dir(&self.config.blob_dir)
                    .map(|dir| {
                        dir.filter_map(|e| e.ok()?.file_name().into_string().ok())
                            .filter(|name| is_valid_hash(name))
                            .collect()
                    })
                    .unwrap_or_default();
                hashes.sort();
                hashes
                    .into_iter()
                    .map(|h| (Node::Blob(h.clone()), h))
                    .collect()
            }
            Node::SessionsDir => {
                self.refresh_listing(state);
                let mut ids: Vec<String> = state.listing.keys().cloned().collect();
                ids.sort();
                ids.into_iter()
                    .map(|id| (Node::SessionDir(id.clone()), id))
                    .collect()
            }
            Node::SessionDir(s) => {
                if !state.listing.contains_key(s) {
                    return Err(VfsError::NotFound);
                }
                SESSION_FILES
                    .iter()
                    .filter_map(|name| Some((session_child(s, name)?, (*name).to_owned())))
                    .collect()
            }
            Node::LabelsDir(s) => {
                let loaded = self.loaded(state, s)?;
                loaded
                    .rendered
                    .labels(&loaded.manager)
                    .keys()
                    .map(|label| (Node::Label(s.clone(), label.clone()), label.clone()))
                    .collect()
            }
            Node::EntriesDir(s) => {
                let loaded = self.loaded(state, s)?;
                let mut out: Vec<(Node, String)> = loaded
                    .rendered
                    .entries(&loaded.manager)
                    .iter()
                    .filter(|e| usable_name(&e.id))
                    .map(|e| (Node::Entry(s.clone(), e.id.clone()), e.name.clone()))
                    .collect();
                out.push((Node::EntriesNew(s.clone()), "new".to_owned()));
                out
            }
            _ => return Err(VfsError::NotADirectory),
        };
        Ok(children
            .into_iter()
            .map(|(node, name)| DirEntry {
                ino: state.inodes.ino(&node),
                kind: kind_of(&node),
                name,
            })
            .collect())
    }

    pub fn open(&self, ino: u64, mode: OpenMode) -> Result<Opened, VfsError> {
        let mut state = self.state.lock();
        let node = Self::node(&state, ino)?;
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
        if mode.write && self.refuses_writes() {
            return Err(VfsError::ReadOnly);
        }
        let (handle, caching) = match &node {
            Node::Leaf(s) if mode.write => {
                let current = self.loaded(&mut state, s)?.rendered.leaf.to_vec();
                let buf = if mode.truncate { Vec::new() } else { current };
                let handle = Handle::Leaf {
                    sid: s.clone(),
                    buf,
                    dirty: mode.truncate,
                    written: false,
                };
                (handle, Caching::Direct)
            }
            Node::EntriesNew(s) => {
                self.loaded(&mut state, s)?;
                let handle = Handle::New {
                    sid: s.clone(),
                    partial: Vec::new(),
                };
                (handle, Caching::Direct)
            }
            _ if mode.write => return Err(VfsError::AccessDenied),
            other => {
                let caching = match other {
                    Node::Entry(..) | Node::Blob(_) => Caching::Keep,
                    Node::Header(_) => Caching::UntilReopen,
                    _ => Caching::Direct,
                };
                (Handle::Read(self.content(&mut state, other)?), caching)
            }
        };
        state.next_fh += 1;
        let fh = state.next_fh;
        state.handles.insert(fh, handle);
        Ok(Opened { fh, caching })
    }

    /// The bytes of a readable file now.
    fn content(&self, state: &mut State, node: &Node) -> Result<Bytes, VfsError> {
        match node {
            Node::Header(s) => Ok(self.loaded(state, s)?.rendered.header.clone()),
            Node::Leaf(s) => Ok(self.loaded(state, s)?.rendered.leaf.clone()),
            Node::Entry(s, id) => {
                let loaded = self.loaded(state, s)?;
                loaded
                    .rendered
                    .entry_bytes(&loaded.manager, id)
                    .ok_or(VfsError::NotFound)
            }
            Node::Context(s) => {
                let loaded = self.loaded(state, s)?;
                loaded
                    .rendered
                    .context_bytes(&loaded.manager)
                    .map_err(|e| VfsError::Io(e.to_string()))
            }
            Node::Errors(s) => Ok(Arc::new(errors_text(state, s).into_bytes())),
            Node::ContextMd(s) | Node::Tree(s) | Node::Usage(s) => {
                let (_, view) = view_of(node).ok_or(VfsError::NotFound)?;
                let loaded = self.loaded(state, s)?;
                Ok(loaded.rendered.view_bytes(&loaded.manager, view))
            }
            Node::StoreUsage => self.store_usage.bytes(),
            Node::EntriesNew(_) => Ok(Arc::new(Vec::new())),
            Node::HistoryPrompts => self.history.prompts(),
            // The kernel follows links; a link itself is never opened.
            Node::ProjectLink(..) | Node::Label(..) => Err(VfsError::NotFound),
            Node::Search(query) => Ok(Arc::new(self.history.search(query)?)),
            Node::Blob(hash) => {
                let store = BlobStore::new(&self.config.blob_dir, Arc::new(FileStorage));
                match store.get_checked(hash) {
                    Ok(Some(bytes)) => Ok(Arc::new(bytes)),
                    Ok(None) => Err(VfsError::NotFound),
                    Err(e) => Err(VfsError::Io(e.to_string())),
                }
            }
            Node::Root
            | Node::SessionsDir
            | Node::BlobsDir
            | Node::HistoryDir
            | Node::SearchDir
            | Node::ProjectsDir
            | Node::ProjectDir(_)
            | Node::SessionDir(_)
            | Node::SessionBlobsDir(_)
            | Node::EntriesDir(_)
            | Node::LabelsDir(_) => Err(VfsError::IsADirectory),
        }
    }

    pub fn read(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>, VfsError> {
        let state = self.state.lock();
        let bytes: &[u8] = match state.handles.get(&fh).ok_or(VfsError::BadHandle)? {
            Handle::Read(bytes) => bytes,
            Handle::Dir(_) => return Err(VfsError::IsADirectory),
            Handle::Leaf { buf, .. } => buf,
            Handle::New { .. } => &[],
        };
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(bytes.len());
        let end = start.saturating_add(size as usize).min(bytes.len());
        Ok(bytes[start..end].to_vec())
    }

    /// Writes `data` at `offset` (`leaf`) or appends it (`entries/new`, offsets ignored:
    /// each complete line is one entry). Returns the count of bytes taken.
    pub fn write(&self, fh: u64, offset: u64, data: &[u8]) -> Result<usize, VfsError> {
        let mut state = self.state.lock();
        if self.refuses_writes() {
            return Err(VfsError::ReadOnly);
        }
        match state.handles.get_mut(&fh).ok_or(VfsError::BadHandle)? {
            Handle::Read(_) | Handle::Dir(_) => Err(VfsError::BadHandle),
            Handle::Leaf {
                sid,
                buf,
                dirty,
                written,
            } => {
                let start = usize::try_from(offset).unwrap_or(usize::MAX);
                let end = start.saturating_add(data.len());
                if end > LEAF_MAX {
                    let sid = sid.clone();
                    return Err(self.fail(&mut state, &sid, "leaf", "content too long".into()));
                }
                if buf.len() < end {
                    buf.resize(end, 0);
                }
                buf[start..end].copy_from_slice(data);
                *dirty = true;
                *written = true;
                if !buf.ends_with(b"\n") {
                    return Ok(data.len());
                }
                // A complete line is checked now, so the writer sees a bad id as a failed
                // write (shells do not check close); it takes effect at flush.
                let (sid, content) = (sid.clone(), buf.clone());
                if let Err(e) = self.check_leaf(&mut state, &sid, &content) {
                    if let Some(Handle::Leaf { dirty, .. }) = state.handles.get_mut(&fh) {
                        *dirty = false;
                    }
                    return Err(e);
                }
                Ok(data.len())
            }
            Handle::New { sid, partial } => {
                partial.extend_from_slice(data);
                let Some(last_newline) = partial.iter().rposition(|&b| b == b'\n') else {
                    return Ok(data.len());
                };
                let complete: Vec<u8> = partial.drain(..=last_newline).collect();
                let sid = sid.clone();
                match self.append_lines(&mut state, &sid, &complete) {
                    Ok(()) => Ok(data.len()),
                    Err(e) => {
                        if let Some(Handle::New { partial, .. }) = state.handles.get_mut(&fh) {
                            partial.clear();
                        }
                        Err(e)
                    }
                }
            }
        }
    }

    /// Parses every line of `text` first (a malformed line appends nothing), then appends
    /// them in order through the manager's validation.
    fn append_lines(&self, state: &mut State, sid: &str, text: &[u8]) -> Result<(), VfsError> {
        let mut objects = Vec::new();
        for line in text.split(|&b| b == b'\n') {
            let Ok(line) = std::str::from_utf8(line) else {
                return Err(self.fail(state, sid, "entries/new", "not UTF-8".into()));
            };
            if line.trim().is_empty() {
                continue;
            }
            match json::parse(line) {
                Ok(Value::Object(object)) => objects.push(object),
                Ok(_) => {
                    return Err(self.fail(state, sid, "entries/new", "not a JSON object".into()))
                }
                Err(e) => {
                    return Err(self.fail(state, sid, "entries/new", format!("invalid JSON: {e}")))
                }
            }
        }
        let manager = self.loaded(state, sid)?.manager.clone();
        let mut result = Ok(());
        for object in objects {
            let appended = manager.append_external(object);
            Self::resync(state, sid);
            if let Err(e) = appended {
                push_error(state, sid, &format!("entries/new: {e}"));
                result = Err(session_err(&e));
                break;
            }
        }
        self.announce(state, sid, EntriesChanged::None);
        result
    }

    fn fail(&self, state: &mut State, sid: &str, what: &str, reason: String) -> VfsError {
        push_error(state, sid, &format!("{what}: {reason}"));
        self.announce(state, sid, EntriesChanged::None);
        VfsError::InvalidArgument(reason)
    }

    /// Applies what a handle holds: a `leaf` write moves the leaf, the last unterminated
    /// line of `entries/new` is appended. Errors are reported here (close's result).
    pub fn flush(&self, fh: u64) -> Result<(), VfsError> {
        self.apply(fh, false)
    }

    fn apply(&self, fh: u64, releasing: bool) -> Result<(), VfsError> {
        let mut state = self.state.lock();
        let pending = match state.handles.get_mut(&fh) {
            None => return Ok(()),
            Some(Handle::Read(_) | Handle::Dir(_)) => return Ok(()),
            Some(Handle::Leaf {
                sid,
                buf,
                dirty,
                written,
            }) => {
                if !*dirty || !(*written || releasing) {
                    return Ok(());
                }
                *dirty = false;
                (sid.clone(), Pending::Leaf(buf.clone()))
            }
            Some(Handle::New { sid, partial }) => {
                if partial.is_empty() {
                    return Ok(());
                }
                (sid.clone(), Pending::Line(std::mem::take(partial)))
            }
        };
        match pending {
            (sid, Pending::Leaf(buf)) => self.set_leaf(&mut state, &sid, &buf),
            (sid, Pending::Line(line)) => self.append_lines(&mut state, &sid, &line),
        }
    }

    /// The entry a `leaf` content names (`None`: reset), or the recorded failure.
    fn check_leaf(
        &self,
        state: &mut State,
        sid: &str,
        buf: &[u8],
    ) -> Result<Option<String>, VfsError> {
        let Ok(text) = std::str::from_utf8(buf) else {
            return Err(self.fail(state, sid, "leaf", "not UTF-8".into()));
        };
        let id = text.strip_suffix('\n').unwrap_or(text);
        if id.is_empty() {
            return Ok(None);
        }
        if id.contains('\n') {
            return Err(self.fail(state, sid, "leaf", "more than one line".into()));
        }
        let known = self
            .loaded(state, sid)?
            .manager
            .read(|s| s.index_of(id).is_some());
        if !known {
            return Err(self.fail(state, sid, "leaf", format!("unknown entry id {id:?}")));
        }
        Ok(Some(id.to_owned()))
    }

    fn set_leaf(&self, state: &mut State, sid: &str, buf: &[u8]) -> Result<(), VfsError> {
        let target = self.check_leaf(state, sid, buf)?;
        let manager = self.loaded(state, sid)?.manager.clone();
        let moved = match target {
            None => {
                manager.reset_leaf();
                Ok(())
            }
            Some(id) => manager
                .branch(&id)
                .map_err(|e| self.fail(state, sid, "leaf", e.to_string())),
        };
        self.announce(state, sid, EntriesChanged::None);
        moved
    }

    /// Flushes what is still pending and forgets the handle.
    pub fn release(&self, fh: u64) -> Result<(), VfsError> {
        let flushed = self.apply(fh, true);
        self.state.lock().handles.remove(&fh);
        flushed
    }

    /// Truncation (`setattr` with a size). On an open `leaf` handle it truncates what the
    /// handle will write; without a handle, `leaf` truncated to 0 resets the leaf at once.
    pub fn set_size(&self, ino: u64, fh: Option<u64>, size: u64) -> Result<Attr, VfsError> {
        let mut state = self.state.lock();
        if self.refuses_writes() {
            return Err(VfsError::ReadOnly);
        }
        let node = Self::node(&state, ino)?;
        match &node {
            Node::Leaf(s) => {
                let handle = fh.and_then(|fh| state.handles.get_mut(&fh));
                match handle {
                    Some(Handle::Leaf {
                        buf,
                        dirty,
                        written,
                        ..
                    }) => {
                        let size = usize::try_from(size).unwrap_or(usize::MAX);
                        if size > LEAF_MAX {
                            return Err(VfsError::InvalidArgument("leaf too long".into()));
                        }
                        buf.resize(size, 0);
                        *dirty = true;
                        *written = true;
                    }
                    _ if size == 0 => self.set_leaf(&mut state, s, b"")?,
                    _ => return Err(VfsError::InvalidArgument("leaf: size must be 0".into())),
                }
            }
            Node::EntriesNew(_) if size == 0 => {}
            n if n.is_dir() => return Err(VfsError::IsADirectory),
            _ => return Err(VfsError::AccessDenied),
        }
        self.attr_of(&mut state, &node)
    }

    /// Attribute changes other than size (mode, owner, times): never allowed.
    pub fn set_other_attr(&self, ino: u64) -> Result<Attr, VfsError> {
        let state = self.state.lock();
        Self::node(&state, ino)?;
        Err(if self.config.read_only {
            VfsError::ReadOnly
        } else {
            VfsError::NotPermitted
        })
    }

    /// Namespace changes (create, mkdir, unlink, rmdir, rename, link, symlink) in `parent`:
    /// the layout is fixed, so each is refused with the reason that fits.
    pub fn change_namespace(&self, parent: u64, change: NamespaceChange) -> VfsError {
        let state = self.state.lock();
        let Ok(dir) = Self::node(&state, parent) else {
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
        let mut state = self.state.lock();
        state.lru.clear();
        let mut failures = Vec::new();
        for (sid, loaded) in state.loaded.drain() {
            if let Err(e) = loaded.manager.close() {
                failures.push((sid, e.to_string()));
            }
        }
        if let Err(e) = self.history.close() {
            failures.push(("history".to_owned(), e));
        }
        failures
    }

    /// The target of symlink `ino`.
    pub fn readlink(&self, ino: u64) -> Result<String, VfsError> {
        let mut state = self.state.lock();
        match Self::node(&state, ino)? {
            Node::ProjectLink(_, sid) if state.listing.contains_key(&sid) => Ok(link_target(&sid)),
            Node::ProjectLink(..) => Err(VfsError::NotFound),
            Node::Label(sid, label) => {
                let loaded = self.loaded(&mut state, &sid)?;
                loaded
                    .rendered
                    .label_target(&loaded.manager, &label)
                    .ok_or(VfsError::NotFound)
            }
            _ => Err(VfsError::InvalidArgument("not a symlink".into())),
        }
    }

    /// The root's inode number.
    pub fn root(&self) -> u64 {
        ROOT_INO
    }
}

/// Which of a session's entries changed, for [`Vfs::announce`].
#[derive(Debug, Clone, Copy)]
enum EntriesChanged<'a> {
    None,
    These(&'a [String]),
    All,
}

enum Pending {
    Leaf(Vec<u8>),
    Line(Vec<u8>),
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

fn push_error(state: &mut State, sid: &str, reason: &str) {
    let log = state.errors.entry(sid.to_owned()).or_default();
    let line = format!(
        "{} {}\n",
        time::format_iso_millis(time::now_millis()),
        reason.replace('\n', " ")
    );
    log.push_back(line);
    while log.len() > ERRORS_KEPT {
        log.pop_front();
    }
}

fn errors_text(state: &State, sid: &str) -> String {
    state
        .errors
        .get(sid)
        .map(|log| log.iter().map(String::as_str).collect())
        .unwrap_or_default()
}
