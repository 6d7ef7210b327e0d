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
//! or network filesystems, and directories have no identity (every one is inode 0). A file's
//! times come from a counter that every change advances (milliseconds, as far as the
//! engine can tell): a write, a truncation or opening a writer sets both its modification
//! and its change time; a rename, a mode or owner change, a new hard link and
//! [`MemoryStorage::set_modified_ms`] (which puts a modification time back, as `utimes`
//! does) set its change time alone. Hard links share their file's identity (and its durable
//! contents) but not later writes: a write through one name is not seen through the other,
//! which the engine never relies on (it links only files it has finished writing).

use std::collections::{BTreeMap, BTreeSet};
use std::io;
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
    /// The number of the operation that fails, as [`MemoryStorage::op_count`] counts them
    /// (0-based).
    pub at: u64,
    /// How the operation fails: with an errno, or as a short write.
    pub kind: FaultKind,
}

/// A file's times, in the counter's milliseconds.
#[derive(Debug, Default, Clone, Copy)]
struct Times {
    modified: i64,
    changed: i64,
}

#[derive(Debug, Default)]
struct State {
    files: BTreeMap<PathBuf, Vec<u8>>,
    times: BTreeMap<PathBuf, Times>,
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
    /// How many times [`MemoryStorage::crash`] was called.
    crashes: u64,
}

impl State {
    fn id_of(&self, path: &Path) -> u64 {
        self.ids.get(path).copied().unwrap_or_default()
    }

    /// How many names the file with identity `id` has.
    fn links_of(&self, id: u64) -> u64 {
        self.ids.values().filter(|&&i| i == id).count() as u64
    }

    /// The times of the file at `path` (zero for anything else).
    fn times_of(&self, path: &Path) -> Times {
        self.times.get(path).copied().unwrap_or_default()
    }

    /// Advances the counter and sets the modification and change times of `path` to it: its
    /// contents changed.
    fn touch(&mut self, path: &Path) {
        self.clock += 1;
        let now = self.clock;
        self.times.insert(
            path.to_owned(),
            Times {
                modified: now,
                changed: now,
            },
        );
    }

    /// Advances the counter and sets the change time of `path` to it: its entry or its
    /// attributes changed.
    fn mark_changed(&mut self, path: &Path) {
        self.clock += 1;
        let now = self.clock;
        self.times.entry(path.to_owned()).or_default().changed = now;
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
    /// An empty storage: no files, no directories, no faults armed.
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
        s.files.insert(path.to_owned(), bytes.to_vec());
        s.touch(path);
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
        let times = s.times.remove(from).unwrap_or_default();
        let id = s.ids.remove(from).unwrap_or_default();
        s.forget(to);
        if let Some(mode) = s.modes.remove(from) {
            s.modes.insert(to.to_owned(), mode);
        }
        if let Some(owner) = s.owners.remove(from) {
            s.owners.insert(to.to_owned(), owner);
        }
        s.files.insert(to.to_owned(), bytes);
        s.times.insert(to.to_owned(), times);
        s.ids.insert(to.to_owned(), id);
        s.mark_changed(to);
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
        let mut s = self.lock();
        s.owners.insert(path.to_owned(), uid);
        if s.files.contains_key(path) {
            s.mark_changed(path);
        }
    }

    /// Sets the modification time of the file at `path` to `ms` (a time the counter gave,
    /// as [`crate::storage::FileVersion::modified_ms`] reports it), as `utimes` does: its
    /// change time moves on (test set-up, not counted).
    pub fn set_modified_ms(&self, path: &Path, ms: i64) -> io::Result<()> {
        let mut s = self.lock();
        if !s.files.contains_key(path) {
            return Err(not_found(path));
        }
        s.mark_changed(path);
        s.times.entry(path.to_owned()).or_default().modified = ms;
        Ok(())
    }

    /// Simulates a power loss: what is visible becomes the durable image (see the module
    /// docs), and the processes that ran are gone: every writer opened before fails each
    /// later call (EIO) without reaching the files, and the locks they held are free.
    pub fn crash(&self) {
        let mut s = self.lock();
        s.crashes += 1;
        s.locks.clear();
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
        s.times.retain(|p, _| files.contains_key(p));
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

/// A time of the counter, in nanoseconds.
fn time_ns(ms: i64) -> i128 {
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
        FaultKind::Errno(e) => crate::storage::sys::os::errno_error(e),
        FaultKind::ShortWrite => crate::storage::sys::os::errno_error(libc::ENOSPC),
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

mod calls;
mod handles;
#[cfg(test)]
mod tests;

use handles::{MemoryReadFile, MemoryWriter};
