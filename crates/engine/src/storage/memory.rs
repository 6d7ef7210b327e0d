//! An in-memory backend with fault injection.
//!
//! Every call — on the storage or on a writer it opened — is one numbered operation. A
//! [`Fault`] makes operation number `at` fail: with an errno, or, for a write, as a short
//! write that stores the first half of the bytes and then fails (a torn line). Several
//! faults may be armed at once. Tests count
//! the operations of a clean run, then replay the run failing each one in turn.
//!
//! Crash model: besides what is visible, the backend keeps a *durable image* — what a disk
//! holds after power loss. A file's contents become durable when a writer on it is fsynced;
//! a directory entry (a create, a rename, an unlink) when its directory is synced
//! ([`SessionStorage::sync_dir`]). [`MemoryStorage::crash`] replaces what is visible by the
//! durable image: entries never synced vanish (or come back, for an unsynced unlink or
//! rename), and contents fall back to their last fsync. Directories themselves, and files
//! put in place by [`MemoryStorage::put_file`] (test set-up), are durable at once; so are a
//! directory's rename (its files' entries move with it) and its removal.
//!
//! Other processes are simulated too: [`MemoryStorage::set_foreign_writers`] names pids
//! that hold a file open for writing ([`SessionStorage::writers_elsewhere`]). Advisory locks
//! ([`StorageWriter::lock`]) are real: a writer asking for a lock another writer of the
//! same file holds waits (on another thread) until it is dropped.
//!
//! Owners and modes: every entry belongs to [`MEMORY_USER`], the storage's effective user,
//! and is private — files `0600`, directories `0700` — unless a test changes it
//! ([`MemoryStorage::set_owner`], [`SessionStorage::set_mode`]). There are no symlinks, ACLs
//! or network filesystems, and directories have no identity (every one is inode 0). Modification
//! times come from a counter that every change advances (milliseconds, as far as the
//! engine can tell); change times are the modification times. Hard links share their file's identity (and its durable
//! contents) but not later writes: a write through one name is not seen through the other,
//! which the engine never relies on (it links only files it has finished writing).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::{
    EntryKind, EntryStat, FileEnd, FileId, FileStat, OpenMode, ReadAt, ReadFile, SessionStorage,
    StorageWriter,
};

/// The effective user of every [`MemoryStorage`], and the owner of what it creates.
pub const MEMORY_USER: u32 = 1000;

/// How an injected fault fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// The operation fails with this POSIX errno (on Windows the system error that means the
    /// same, for the errnos the engine tells apart) and changes nothing.
    Errno(i32),
    /// A write stores half of its bytes, then fails with ENOSPC; other operations fail with
    /// ENOSPC.
    ShortWrite,
}

/// Fail operation number `at` (0-based, counting every call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    pub at: u64,
    pub kind: FaultKind,
}

#[derive(Debug, Default)]
struct State {
    files: BTreeMap<PathBuf, Vec<u8>>,
    mtimes: BTreeMap<PathBuf, i64>,
    /// Each file's identity (its "inode"): new for a created or put file, moved by a rename.
    ids: BTreeMap<PathBuf, u64>,
    next_id: u64,
    dirs: BTreeSet<PathBuf>,
    ops: u64,
    clock: i64,
    faults: Vec<Fault>,
    /// The operations performed, by name, in order.
    log: Vec<&'static str>,
    /// Each file's contents as of its last fsync, by identity.
    durable_contents: BTreeMap<u64, Vec<u8>>,
    /// Each directory's entries (path → identity) as of its last sync.
    durable_entries: BTreeMap<PathBuf, BTreeMap<PathBuf, u64>>,
    /// Simulated other processes holding a file open for writing.
    foreign_writers: BTreeMap<PathBuf, Vec<u32>>,
    /// Modes other than the private default, by path.
    modes: BTreeMap<PathBuf, u32>,
    /// Owners other than [`MEMORY_USER`], by path.
    owners: BTreeMap<PathBuf, u32>,
    /// The writer holding each file's advisory lock ([`StorageWriter::lock`]), by identity.
    locks: BTreeMap<u64, u64>,
    /// The number of the next writer opened.
    next_writer: u64,
}

impl State {
    fn id_of(&self, path: &Path) -> u64 {
        self.ids.get(path).copied().unwrap_or_default()
    }

    /// How many names the file with identity `id` has.
    fn links_of(&self, id: u64) -> u64 {
        self.ids.values().filter(|&&i| i == id).count() as u64
    }

    /// Forgets what was set about the entry at `path` (it is gone or replaced).
    fn forget(&mut self, path: &Path) {
        self.modes.remove(path);
        self.owners.remove(path);
    }

    /// The entries of `dir` now.
    fn entries_of(&self, dir: &Path) -> BTreeMap<PathBuf, u64> {
        self.files
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .map(|p| (p.clone(), self.id_of(p)))
            .collect()
    }
}

/// A filesystem held in memory; clones share the same files.
#[derive(Debug, Default, Clone)]
pub struct MemoryStorage {
    state: Arc<Mutex<State>>,
    /// Signalled whenever a file's advisory lock is dropped.
    unlocked: Arc<Condvar>,
}

impl MemoryStorage {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Arms one fault (replacing any others); `None` disarms.
    pub fn set_fault(&self, fault: Option<Fault>) {
        self.lock().faults = fault.into_iter().collect();
    }

    /// Arms several faults (replacing any others).
    pub fn set_faults(&self, faults: Vec<Fault>) {
        self.lock().faults = faults;
    }

    /// How many operations have run.
    pub fn op_count(&self) -> u64 {
        self.lock().ops
    }

    /// The names of the operations run so far.
    pub fn op_log(&self) -> Vec<&'static str> {
        self.lock().log.clone()
    }

    /// The bytes of a file, if it exists.
    pub fn file(&self, path: &Path) -> Option<Vec<u8>> {
        self.lock().files.get(path).cloned()
    }

    /// Every file path.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.lock().files.keys().cloned().collect()
    }

    /// Puts a new file in place (replacing any file there, as a rename would) without
    /// counting an operation (test set-up). It is durable at once.
    pub fn put_file(&self, path: &Path, bytes: &[u8]) {
        let mut s = self.lock();
        s.clock += 1;
        let now = s.clock;
        s.files.insert(path.to_owned(), bytes.to_vec());
        s.mtimes.insert(path.to_owned(), now);
        s.forget(path);
        new_identity(&mut s, path);
        let id = s.id_of(path);
        s.durable_contents.insert(id, bytes.to_vec());
        if let Some(dir) = path.parent() {
            s.durable_entries
                .entry(dir.to_owned())
                .or_default()
                .insert(path.to_owned(), id);
        }
    }

    /// Moves the file at `from` to `to`, replacing any file there (the operation is counted
    /// by the caller).
    fn rename_unchecked(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.lock();
        let bytes = s.files.remove(from).ok_or_else(|| not_found(from))?;
        let mtime = s.mtimes.remove(from).unwrap_or(0);
        let id = s.ids.remove(from).unwrap_or_default();
        s.forget(to);
        if let Some(mode) = s.modes.remove(from) {
            s.modes.insert(to.to_owned(), mode);
        }
        if let Some(owner) = s.owners.remove(from) {
            s.owners.insert(to.to_owned(), owner);
        }
        s.files.insert(to.to_owned(), bytes);
        s.mtimes.insert(to.to_owned(), mtime);
        s.ids.insert(to.to_owned(), id);
        Ok(())
    }

    /// Counts operation `name` and checks that something is at `path`.
    fn existing(&self, name: &'static str, path: &Path) -> io::Result<()> {
        let mut s = self.lock();
        check(&mut s, name)?;
        if s.files.contains_key(path) || s.dirs.contains(path) {
            Ok(())
        } else {
            Err(not_found(path))
        }
    }

    /// Makes the entry at `path` belong to `uid` (test set-up, not counted).
    pub fn set_owner(&self, path: &Path, uid: u32) {
        self.lock().owners.insert(path.to_owned(), uid);
    }

    /// Simulates a power loss: what is visible becomes the durable image (see the module
    /// docs). Writers opened before are not to be used again.
    pub fn crash(&self) {
        let mut s = self.lock();
        let mut files = BTreeMap::new();
        let mut ids = BTreeMap::new();
        // A directory never synced keeps the entries it had when last synced: none.
        for entries in s.durable_entries.values() {
            for (path, id) in entries {
                let bytes = s.durable_contents.get(id).cloned().unwrap_or_default();
                files.insert(path.clone(), bytes);
                ids.insert(path.clone(), *id);
            }
        }
        s.mtimes.retain(|p, _| files.contains_key(p));
        s.files = files;
        s.ids = ids;
    }

    /// Makes the storage report `pids` as other processes holding `path` open for writing
    /// (none: an empty list).
    pub fn set_foreign_writers(&self, path: &Path, pids: Vec<u32>) {
        let mut s = self.lock();
        if pids.is_empty() {
            s.foreign_writers.remove(path);
        } else {
            s.foreign_writers.insert(path.to_owned(), pids);
        }
    }
}

/// A modification time of the counter, in nanoseconds.
fn mtime_ns(ms: i64) -> i128 {
    i128::from(ms) * 1_000_000
}

/// Where `path` goes when the directory `from` is renamed to `to`, if it is in it.
fn moved(path: &Path, from: &Path, to: &Path) -> Option<PathBuf> {
    let rest = path.strip_prefix(from).ok()?;
    Some(if rest.as_os_str().is_empty() {
        to.to_owned()
    } else {
        to.join(rest)
    })
}

/// Moves every key of `map` inside the directory `from` to the same place inside `to`.
fn move_keys<V>(map: &mut BTreeMap<PathBuf, V>, from: &Path, to: &Path) {
    let inside: Vec<PathBuf> = map
        .keys()
        .filter(|p| p.starts_with(from))
        .cloned()
        .collect();
    for old in inside {
        if let (Some(value), Some(new)) = (map.remove(&old), moved(&old, from, to)) {
            map.insert(new, value);
        }
    }
}

fn new_identity(state: &mut State, path: &Path) {
    state.next_id += 1;
    let id = state.next_id;
    state.ids.insert(path.to_owned(), id);
}

/// Counts an operation and decides whether it fails.
fn begin(state: &mut State, name: &'static str) -> Option<FaultKind> {
    let n = state.ops;
    state.ops += 1;
    state.log.push(name);
    state.faults.iter().find(|f| f.at == n).map(|f| f.kind)
}

fn errno(kind: FaultKind) -> io::Error {
    match kind {
        FaultKind::Errno(e) => super::sys::os::errno_error(e),
        FaultKind::ShortWrite => super::sys::os::errno_error(libc::ENOSPC),
    }
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such file", path.display()),
    )
}

fn check(state: &mut State, name: &'static str) -> io::Result<()> {
    match begin(state, name) {
        Some(kind) => Err(errno(kind)),
        None => Ok(()),
    }
}

impl SessionStorage for MemoryStorage {
    fn ensure_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.lock();
        check(&mut s, "ensure_dir")?;
        for ancestor in dir.ancestors() {
            s.dirs.insert(ancestor.to_owned());
        }
        Ok(())
    }

    fn exists(&self, path: &Path) -> bool {
        let s = self.lock();
        s.files.contains_key(path) || s.dirs.contains(path)
    }

    fn stat(&self, path: &Path) -> io::Result<FileStat> {
        let mut s = self.lock();
        check(&mut s, "stat")?;
        if let Some(bytes) = s.files.get(path) {
            return Ok(FileStat {
                id: FileId {
                    dev: 0,
                    ino: s.id_of(path),
                },
                len: bytes.len() as u64,
                mtime_ms: s.mtimes.get(path).copied().unwrap_or(0),
                is_file: true,
            });
        }
        if s.dirs.contains(path) {
            return Ok(FileStat {
                id: FileId { dev: 0, ino: 0 },
                len: 0,
                mtime_ms: 0,
                is_file: false,
            });
        }
        Err(not_found(path))
    }

    fn open_read(&self, path: &Path) -> io::Result<Box<dyn Read + Send>> {
        let mut s = self.lock();
        check(&mut s, "open_read")?;
        let bytes = s.files.get(path).cloned().ok_or_else(|| not_found(path))?;
        Ok(Box::new(io::Cursor::new(bytes)))
    }

    fn open_read_at(&self, path: &Path) -> io::Result<Box<dyn ReadFile>> {
        let mut s = self.lock();
        check(&mut s, "open_read_at")?;
        let bytes = s.files.get(path).cloned().ok_or_else(|| not_found(path))?;
        let ino = s.ids.get(path).copied().unwrap_or_default();
        Ok(Box::new(MemoryReadFile {
            bytes,
            id: FileId { dev: 0, ino },
            links: s.links_of(ino),
            mtime_ns: mtime_ns(s.mtimes.get(path).copied().unwrap_or(0)),
        }))
    }

    fn read_tail(&self, path: &Path, max: usize) -> io::Result<Vec<u8>> {
        let mut s = self.lock();
        check(&mut s, "read_tail")?;
        let bytes = s.files.get(path).ok_or_else(|| not_found(path))?;
        Ok(bytes[bytes.len().saturating_sub(max)..].to_vec())
    }

    fn open_writer(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn StorageWriter>> {
        let mut s = self.lock();
        check(&mut s, "open_writer")?;
        let exists = s.files.contains_key(path);
        if mode == OpenMode::CreateNew && exists {
            return Err(super::sys::os::errno_error(libc::EEXIST));
        }
        if mode == OpenMode::AppendExisting && !exists {
            return Err(not_found(path));
        }
        if let Some(parent) = path.parent() {
            if !parent.as_os_str().is_empty() && !s.dirs.contains(parent) {
                return Err(not_found(parent));
            }
        }
        if !exists {
            s.files.insert(path.to_owned(), Vec::new());
            new_identity(&mut s, path);
        }
        s.clock += 1;
        let now = s.clock;
        s.mtimes.insert(path.to_owned(), now);
        s.next_writer += 1;
        Ok(Box::new(MemoryWriter {
            storage: self.clone(),
            path: path.to_owned(),
            position: 0,
            number: s.next_writer,
            locked: None,
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        check(&mut self.lock(), "rename")?;
        self.rename_unchecked(from, to)
    }

    fn unlink(&self, path: &Path) -> io::Result<()> {
        let mut s = self.lock();
        check(&mut s, "unlink")?;
        s.forget(path);
        s.mtimes.remove(path);
        s.ids.remove(path);
        s.files
            .remove(path)
            .map(drop)
            .ok_or_else(|| not_found(path))
    }

    fn list_files(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let mut s = self.lock();
        check(&mut s, "list_files")?;
        if !s.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        Ok(s.files
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .cloned()
            .collect())
    }

    fn list_dirs(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let mut s = self.lock();
        check(&mut s, "list_dirs")?;
        if !s.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        Ok(s.dirs
            .iter()
            .filter(|p| p.parent() == Some(dir))
            .cloned()
            .collect())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.lock();
        check(&mut s, "sync_dir")?;
        let entries = s.entries_of(dir);
        s.durable_entries.insert(dir.to_owned(), entries);
        Ok(())
    }

    fn writers_elsewhere(&self, path: &Path) -> io::Result<Vec<u32>> {
        let mut s = self.lock();
        check(&mut s, "writers_elsewhere")?;
        Ok(s.foreign_writers.get(path).cloned().unwrap_or_default())
    }

    fn lstat(&self, path: &Path) -> io::Result<EntryStat> {
        let mut s = self.lock();
        check(&mut s, "lstat")?;
        let (kind, ino, mode, len) = if let Some(bytes) = s.files.get(path) {
            (EntryKind::File, s.id_of(path), 0o600, bytes.len() as u64)
        } else if s.dirs.contains(path) {
            (EntryKind::Dir, 0, 0o700, 0)
        } else {
            return Err(not_found(path));
        };
        Ok(EntryStat {
            kind,
            id: FileId { dev: 0, ino },
            mode: s.modes.get(path).copied().unwrap_or(mode),
            owner: s.owners.get(path).copied().unwrap_or(MEMORY_USER),
            links: if kind == EntryKind::File {
                s.links_of(ino)
            } else {
                1
            },
            len,
            mtime_ns: mtime_ns(s.mtimes.get(path).copied().unwrap_or(0)),
            ctime_ns: mtime_ns(s.mtimes.get(path).copied().unwrap_or(0)),
        })
    }

    fn user(&self) -> u32 {
        MEMORY_USER
    }

    /// Memory has no ACLs.
    fn has_acl(&self, path: &Path) -> io::Result<bool> {
        self.existing("has_acl", path).map(|()| false)
    }

    /// Memory is a local filesystem.
    fn is_network_fs(&self, path: &Path) -> io::Result<bool> {
        self.existing("is_network_fs", path).map(|()| false)
    }

    /// Memory has no symlinks: an existing absolute path without `.` or `..` is its own
    /// canonical path.
    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        let mut s = self.lock();
        check(&mut s, "canonicalize")?;
        // Rooted: `/a` (and on Windows `C:\a` or `\a`), without `.` or `..`.
        let plain = path.has_root()
            && path.components().all(|c| {
                matches!(
                    c,
                    std::path::Component::Prefix(_)
                        | std::path::Component::RootDir
                        | std::path::Component::Normal(_)
                )
            });
        if !plain {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: not an absolute plain path", path.display()),
            ));
        }
        if s.files.contains_key(path) || s.dirs.contains(path) {
            Ok(path.to_owned())
        } else {
            Err(not_found(path))
        }
    }

    fn create_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.lock();
        check(&mut s, "create_dir")?;
        if s.files.contains_key(dir) || s.dirs.contains(dir) {
            return Err(super::sys::os::errno_error(libc::EEXIST));
        }
        if let Some(parent) = dir.parent() {
            if !parent.as_os_str().is_empty() && !s.dirs.contains(parent) {
                return Err(not_found(parent));
            }
        }
        s.dirs.insert(dir.to_owned());
        Ok(())
    }

    fn set_mode(&self, path: &Path, mode: u32) -> io::Result<()> {
        let mut s = self.lock();
        check(&mut s, "set_mode")?;
        if !s.files.contains_key(path) && !s.dirs.contains(path) {
            return Err(not_found(path));
        }
        s.modes.insert(path.to_owned(), mode & 0o7777);
        Ok(())
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.lock();
        check(&mut s, "hard_link")?;
        let bytes = s.files.get(from).cloned().ok_or_else(|| not_found(from))?;
        if s.files.contains_key(to) || s.dirs.contains(to) {
            return Err(super::sys::os::errno_error(libc::EEXIST));
        }
        if let Some(parent) = to.parent() {
            if !parent.as_os_str().is_empty() && !s.dirs.contains(parent) {
                return Err(not_found(parent));
            }
        }
        let id = s.id_of(from);
        let mtime = s.mtimes.get(from).copied().unwrap_or(0);
        s.files.insert(to.to_owned(), bytes);
        s.ids.insert(to.to_owned(), id);
        s.mtimes.insert(to.to_owned(), mtime);
        let state = &mut *s;
        for table in [&mut state.modes, &mut state.owners] {
            if let Some(v) = table.get(from).copied() {
                table.insert(to.to_owned(), v);
            }
        }
        Ok(())
    }

    fn list_entries(&self, dir: &Path) -> io::Result<Vec<(PathBuf, EntryKind)>> {
        let mut s = self.lock();
        check(&mut s, "list_entries")?;
        if !s.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        let files = s.files.keys().map(|p| (p.clone(), EntryKind::File));
        let dirs = s.dirs.iter().map(|p| (p.clone(), EntryKind::Dir));
        let mut entries: Vec<_> = files
            .chain(dirs)
            .filter(|(p, _)| p.parent() == Some(dir))
            .collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(entries)
    }

    fn rename_no_replace(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.lock();
        check(&mut s, "rename_no_replace")?;
        let is_dir = s.dirs.contains(from);
        if !is_dir && !s.files.contains_key(from) {
            return Err(not_found(from));
        }
        if s.files.contains_key(to) || s.dirs.contains(to) {
            return Err(super::sys::os::errno_error(libc::EEXIST));
        }
        if let Some(parent) = to.parent() {
            if !parent.as_os_str().is_empty() && !s.dirs.contains(parent) {
                return Err(not_found(parent));
            }
        }
        if !is_dir {
            drop(s);
            // A rename of a file to a free name: what `rename` does.
            return self.rename_unchecked(from, to);
        }
        if to.starts_with(from) {
            return Err(super::sys::os::errno_error(libc::EINVAL));
        }
        let state = &mut *s;
        let dirs: Vec<PathBuf> = state
            .dirs
            .iter()
            .filter(|p| p.starts_with(from))
            .cloned()
            .collect();
        for dir in dirs {
            state.dirs.remove(&dir);
            state.dirs.extend(moved(&dir, from, to));
        }
        move_keys(&mut state.files, from, to);
        move_keys(&mut state.mtimes, from, to);
        move_keys(&mut state.ids, from, to);
        move_keys(&mut state.modes, from, to);
        move_keys(&mut state.owners, from, to);
        move_keys(&mut state.foreign_writers, from, to);
        move_keys(&mut state.durable_entries, from, to);
        for entries in state.durable_entries.values_mut() {
            move_keys(entries, from, to);
        }
        Ok(())
    }

    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.lock();
        check(&mut s, "remove_dir")?;
        if s.files.contains_key(dir) {
            return Err(super::sys::os::errno_error(libc::ENOTDIR));
        }
        if !s.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        let occupied = s.files.keys().any(|p| p.parent() == Some(dir))
            || s.dirs.iter().any(|p| p.parent() == Some(dir));
        if occupied {
            return Err(super::sys::os::errno_error(libc::ENOTEMPTY));
        }
        s.dirs.remove(dir);
        s.forget(dir);
        s.durable_entries.remove(dir);
        Ok(())
    }

    fn sync_file(&self, path: &Path) -> io::Result<()> {
        let mut s = self.lock();
        check(&mut s, "sync_file")?;
        let bytes = s.files.get(path).cloned().ok_or_else(|| not_found(path))?;
        let id = s.id_of(path);
        s.durable_contents.insert(id, bytes);
        Ok(())
    }
}

/// A snapshot of a file taken when it was opened.
#[derive(Debug)]
struct MemoryReadFile {
    bytes: Vec<u8>,
    id: FileId,
    links: u64,
    mtime_ns: i128,
}

impl ReadAt for MemoryReadFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.bytes.read_at(buf, offset)
    }
}

impl ReadFile for MemoryReadFile {
    fn size(&self) -> io::Result<u64> {
        Ok(self.bytes.len() as u64)
    }

    fn id(&self) -> FileId {
        self.id
    }

    fn links(&self) -> io::Result<u64> {
        Ok(self.links)
    }

    fn mtime_ns(&self) -> io::Result<i128> {
        Ok(self.mtime_ns)
    }

    /// Memory keeps no separate change time: it is the modification time.
    fn ctime_ns(&self) -> io::Result<i128> {
        Ok(self.mtime_ns)
    }
}

#[derive(Debug)]
struct MemoryWriter {
    storage: MemoryStorage,
    path: PathBuf,
    /// The length of the file right after this writer's last write.
    position: u64,
    /// This writer's number, which the lock it holds is kept under.
    number: u64,
    /// The identity of the file whose lock this writer holds.
    locked: Option<u64>,
}

impl MemoryWriter {
    /// Drops the lock this writer holds, if any, waking writers waiting for it.
    fn release(&mut self, s: &mut State) {
        if let Some(id) = self.locked.take() {
            if s.locks.get(&id) == Some(&self.number) {
                s.locks.remove(&id);
            }
            self.storage.unlocked.notify_all();
        }
    }

    /// One write operation named `name`: `store` puts what the armed fault lets through of
    /// `bytes` (all, half for a short write, nothing for an errno) into the file. Returns how
    /// many bytes were stored, the file's length after, and the fault.
    fn write_op(
        &mut self,
        name: &'static str,
        bytes: &[u8],
        store: impl FnOnce(&mut Vec<u8>, &[u8]),
    ) -> io::Result<(u64, u64, Option<FaultKind>)> {
        let mut s = self.storage.lock();
        let fault = begin(&mut s, name);
        let stored = match fault {
            Some(FaultKind::ShortWrite) => &bytes[..bytes.len() / 2],
            Some(FaultKind::Errno(_)) => &bytes[..0],
            None => bytes,
        };
        s.clock += 1;
        let now = s.clock;
        s.mtimes.insert(self.path.clone(), now);
        let file = s
            .files
            .get_mut(&self.path)
            .ok_or_else(|| not_found(&self.path))?;
        store(file, stored);
        Ok((stored.len() as u64, file.len() as u64, fault))
    }
}

impl StorageWriter for MemoryWriter {
    fn write_all_counted(&mut self, bytes: &[u8], written: &mut u64) -> io::Result<()> {
        *written = 0;
        let (stored, len, fault) = self.write_op("write", bytes, |file, stored| {
            file.extend_from_slice(stored)
        })?;
        self.position = len;
        *written = stored;
        fault.map_or(Ok(()), |kind| Err(errno(kind)))
    }

    fn end(&self) -> io::Result<FileEnd> {
        let mut s = self.storage.lock();
        check(&mut s, "end")?;
        let file = s
            .files
            .get(&self.path)
            .ok_or_else(|| not_found(&self.path))?;
        Ok(FileEnd {
            size: file.len() as u64,
            last_byte: file.last().copied(),
        })
    }

    fn write_at(&mut self, bytes: &[u8], offset: u64) -> io::Result<()> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let (_, _, fault) = self.write_op("write_at", bytes, |file, stored| {
            let end = start.saturating_add(stored.len());
            if file.len() < end {
                file.resize(end, 0);
            }
            file[start..end].copy_from_slice(stored);
        })?;
        fault.map_or(Ok(()), |kind| Err(errno(kind)))
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        let mut s = self.storage.lock();
        check(&mut s, "truncate")?;
        let file = s
            .files
            .get_mut(&self.path)
            .ok_or_else(|| not_found(&self.path))?;
        file.truncate(len as usize);
        Ok(())
    }

    fn fsync(&mut self) -> io::Result<()> {
        let mut s = self.storage.lock();
        check(&mut s, "fsync")?;
        let id = s.id_of(&self.path);
        if let Some(bytes) = s.files.get(&self.path).cloned() {
            s.durable_contents.insert(id, bytes);
        }
        Ok(())
    }

    fn position(&self) -> io::Result<u64> {
        check(&mut self.storage.lock(), "position")?;
        Ok(self.position)
    }

    fn lock(&mut self) -> io::Result<()> {
        let storage = self.storage.clone();
        let mut s = storage.lock();
        check(&mut s, "lock")?;
        let id = s.id_of(&self.path);
        let started = std::time::Instant::now();
        loop {
            match s.locks.get(&id) {
                Some(&holder) if holder != self.number => {
                    let left = super::LOCK_PATIENCE.saturating_sub(started.elapsed());
                    if left.is_zero() {
                        return Err(super::lock_timed_out());
                    }
                    s = storage
                        .unlocked
                        .wait_timeout(s, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                _ => break,
            }
        }
        s.locks.insert(id, self.number);
        self.locked = Some(id);
        Ok(())
    }

    fn unlock(&mut self) -> io::Result<()> {
        let storage = self.storage.clone();
        let mut s = storage.lock();
        check(&mut s, "unlock")?;
        self.release(&mut s);
        Ok(())
    }

    fn is_file_at(&self, path: &Path) -> io::Result<bool> {
        Ok(path == self.path && self.storage.lock().files.contains_key(path))
    }

    fn close(mut self: Box<Self>) -> io::Result<()> {
        let storage = self.storage.clone();
        let mut s = storage.lock();
        self.release(&mut s);
        check(&mut s, "close")
    }
}

impl Drop for MemoryWriter {
    /// A writer dropped without [`StorageWriter::close`] lets its lock go too, as closing a
    /// descriptor does.
    fn drop(&mut self) {
        let storage = self.storage.clone();
        let mut s = storage.lock();
        self.release(&mut s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appending_to_a_file_that_must_exist_creates_nothing() {
        let storage = MemoryStorage::new();
        storage.ensure_dir(Path::new("/d")).unwrap();
        let file = Path::new("/d/f");
        let err = storage
            .open_writer(file, OpenMode::AppendExisting)
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert_eq!(storage.file(file), None);
        storage.put_file(file, b"a");
        let mut w = storage.open_writer(file, OpenMode::AppendExisting).unwrap();
        w.write_all(b"b").unwrap();
        assert_eq!(storage.file(file).unwrap(), b"ab");
    }

    #[test]
    fn faults_fail_the_numbered_operation_and_short_writes_tear() {
        let storage = MemoryStorage::new();
        let dir = Path::new("/d");
        storage.ensure_dir(dir).unwrap();
        let file = dir.join("f");
        let mut w = storage.open_writer(&file, OpenMode::Append).unwrap();
        w.write_all(b"line\n").unwrap();
        storage.set_fault(Some(Fault {
            at: storage.op_count(),
            kind: FaultKind::ShortWrite,
        }));
        let err = w.write_all(b"abcdef\n").unwrap_err();
        let native = |errno| super::super::sys::os::errno_error(errno).raw_os_error();
        assert_eq!(err.raw_os_error(), native(libc::ENOSPC));
        assert_eq!(storage.file(&file).unwrap(), b"line\nabc");
        storage.set_fault(Some(Fault {
            at: storage.op_count(),
            kind: FaultKind::Errno(libc::EIO),
        }));
        assert_eq!(
            storage
                .rename(&file, &dir.join("g"))
                .unwrap_err()
                .raw_os_error(),
            native(libc::EIO)
        );
        assert!(storage.file(&file).is_some());
        assert_eq!(
            storage.op_log(),
            ["ensure_dir", "open_writer", "write", "write", "rename"]
        );
    }

    #[test]
    fn entries_are_private_until_a_test_says_otherwise_and_links_are_counted() {
        use crate::storage::check_private_file;
        let storage = MemoryStorage::new();
        let dir = Path::new("/d");
        storage.ensure_dir(dir).unwrap();
        let (a, b) = (dir.join("a"), dir.join("b"));
        storage.put_file(&a, b"x");
        check_private_file(&storage, &a).unwrap();
        storage.hard_link(&a, &b).unwrap();
        assert_eq!(storage.lstat(&a).unwrap().links, 2);
        let err = check_private_file(&storage, &a).unwrap_err();
        assert!(err.to_string().contains("more than one hard link"), "{err}");
        assert_eq!(
            storage.hard_link(&a, &b).unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        storage.unlink(&b).unwrap();
        storage.set_owner(&a, 0);
        assert!(check_private_file(&storage, &a).is_err());
        storage.set_owner(&a, MEMORY_USER);
        storage.set_mode(&a, 0o644).unwrap();
        assert!(check_private_file(&storage, &a).is_err());
    }

    #[test]
    fn directories_move_whole_never_over_anything_and_leave_only_when_empty() {
        let storage = MemoryStorage::new();
        let (a, b) = (Path::new("/d/a"), Path::new("/d/b"));
        storage.ensure_dir(&a.join("sub")).unwrap();
        storage.put_file(&a.join("sub/f"), b"x");
        storage.ensure_dir(Path::new("/d/c")).unwrap();
        assert_eq!(
            storage
                .rename_no_replace(a, Path::new("/d/c"))
                .unwrap_err()
                .kind(),
            io::ErrorKind::AlreadyExists
        );
        storage.rename_no_replace(a, b).unwrap();
        assert!(!storage.exists(a));
        assert_eq!(storage.file(&b.join("sub/f")).unwrap(), b"x");
        assert_eq!(
            storage.list_entries(b).unwrap(),
            [(b.join("sub"), EntryKind::Dir)]
        );
        // The moved file's entry is as durable as it was before the move.
        storage.crash();
        assert_eq!(storage.file(&b.join("sub/f")).unwrap(), b"x");
        assert_eq!(
            storage
                .remove_dir(&b.join("sub"))
                .unwrap_err()
                .raw_os_error(),
            super::super::sys::os::errno_error(libc::ENOTEMPTY).raw_os_error()
        );
        crate::storage::remove_tree(&storage, b).unwrap();
        assert!(!storage.exists(b) && storage.paths().is_empty());
    }

    #[test]
    fn positional_writes_overwrite_in_place() {
        let storage = MemoryStorage::new();
        storage.ensure_dir(Path::new("/d")).unwrap();
        let file = Path::new("/d/f");
        let mut w = storage.open_writer(file, OpenMode::CreateNew).unwrap();
        w.write_all(b"abcdef").unwrap();
        w.write_at(b"XY", 1).unwrap();
        w.truncate(4).unwrap();
        assert_eq!(storage.file(file).unwrap(), b"aXYd");
        let stat = storage.lstat(file).unwrap();
        assert_eq!(stat.len, 4);
        let open = storage.open_read_at(file).unwrap();
        assert_eq!(open.mtime_ns().unwrap(), stat.mtime_ns);
    }
}
