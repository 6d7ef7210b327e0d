//! All file I/O of the engine goes through [`SessionStorage`], so that tests can swap the disk
//! for memory and inject faults (ENOSPC, EIO, short writes, failing renames or fsyncs) at any
//! call.
//!
//! Contract of every backend:
//! - Files are created owner-only (`0600`), directories `0700` (on Windows: a protected DACL
//!   granting only the current user, which `lstat` reports as those modes). Opens do not
//!   follow a symlink (on Windows any reparse point) at the final path component, never block (a FIFO at a path is opened non-blocking), and
//!   refuse anything but a regular file ("not a regular file") before a byte is read or
//!   written.
//! - [`StorageWriter::write_all_counted`] either writes every byte or fails, saying how many
//!   bytes it wrote before failing; a write that makes no progress is an error ("short
//!   write"). The caller can take a partial write back with [`StorageWriter::truncate`].
//! - Nothing is durable until [`StorageWriter::fsync`] (or [`SessionStorage::sync_dir`] for
//!   directory entries) has returned.
//! - `rename` replaces its target atomically; `rename_no_replace` and `hard_link` never
//!   replace anything: they fail with [`io::ErrorKind::AlreadyExists`] when the target is
//!   taken.
//! - gjcfs's own writers of one file take turns through its append lock
//!   ([`StorageWriter::lock`]: `flock` on Unix, on Windows a `LockFileEx` byte past any end
//!   of the file), so that checking the file's end, taking in lines another process
//!   appended and appending are one step (the manager's appends, the cut of a torn tail, a
//!   rewrite's target); writers that never ask (the agent's) are not held back.
//!   [`SessionStorage::is_locked`] asks whether another holds it, with a shared lock tried
//!   and dropped.
//!
//! The disk backend is [`FileStorage`] (`file.rs`, with [`OutputDir`], a directory the
//! command writes whole files into), the memory backend [`MemoryStorage`] (`memory/`, with
//! faults and a crash model); the platform calls under the disk backend are `sys/`, and
//! what an I/O failure means is [`io_cause`]. Where gjcfs's own configuration and caches
//! live in the user's home is [`user_dirs`].

mod file;
pub mod io_cause;
mod memory;
pub(crate) mod sys;
pub mod user_dirs;

use std::io::{self, Read};
use std::path::{Path, PathBuf};

pub use file::{
    not_a_regular_file, open_dir, open_regular, path_from_bytes, path_to_bytes, DirLookup,
    FileStorage, OutputDir,
};
pub use memory::{Fault, FaultKind, MemoryStorage};
pub use sys::{mountinfo, return_freed_memory};

/// Why [`SessionStorage::canonicalize_local`] refused a path: it leads onto a filesystem
/// that another process or host serves (FUSE, a network filesystem), where a lookup waits as
/// long as that one does not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedElsewhere {
    /// The mount it would reach.
    pub point: PathBuf,
    /// That mount's filesystem type (`fuse.sshfs`, `nfs4`, …).
    pub fstype: String,
    /// Whether it is a network filesystem (not FUSE).
    pub network: bool,
}

impl std::fmt::Display for ServedElsewhere {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the path leads onto {} ({}), a filesystem served by another process or host, \
             which gjcfs never waits on",
            self.point.display(),
            self.fstype
        )
    }
}

impl std::error::Error for ServedElsewhere {}

/// The [`ServedElsewhere`] an error of [`SessionStorage::canonicalize_local`] carries, if
/// it is one.
pub fn served_elsewhere(error: &io::Error) -> Option<&ServedElsewhere> {
    error.get_ref()?.downcast_ref()
}

/// What [`SessionStorage::stat`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStat {
    /// The file's identity (device and inode).
    pub id: FileId,
    /// The length in bytes.
    pub len: u64,
    /// Modification time in milliseconds since the epoch.
    pub mtime_ms: i64,
    /// Whether it is a regular file (not a directory or anything else).
    pub is_file: bool,
}

/// What tells whether a file on disk changed without reading it: its identity, length,
/// modification time and change time (in nanoseconds since the epoch), following symlinks.
///
/// The change time is what makes it honest: a rewrite that keeps the length and puts the
/// modification time back (`touch -r`, `utimes`, a redaction in place, two writes within
/// one tick of the clock followed by a `utimes`) still sets it, for no call sets it to a
/// chosen time. It also moves on a rename, a mode or owner change and a new hard link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileVersion {
    /// The file's identity (device and inode).
    pub id: FileId,
    /// The length in bytes.
    pub len: u64,
    /// Modification time in nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// Change time (of the contents or of the inode: `st_ctime`; on Windows the
    /// `ChangeTime`) in nanoseconds since the epoch.
    pub ctime_ns: i128,
}

impl FileVersion {
    /// The modification time in whole milliseconds since the epoch (0 out of range).
    pub fn modified_ms(&self) -> i64 {
        (self.mtime_ns / 1_000_000).try_into().unwrap_or(0)
    }
}

/// What tells one file from another while both exist (device and inode on disk). A file
/// replaced through a rename has a new identity; appends keep it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId {
    /// The device the file is on (on Windows the volume serial number).
    pub dev: u64,
    /// The file's inode number (on Windows the 64-bit file index).
    pub ino: u64,
}

/// What a directory entry is, not following a symlink ([`SessionStorage::lstat`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (on Windows, to [`SessionStorage::lstat`], any reparse point).
    Symlink,
    /// A FIFO, a device, a socket.
    Other,
}

/// What [`SessionStorage::lstat`] reports about the entry at a path itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryStat {
    /// Whether the entry is a file, a directory, a symlink or something else.
    pub kind: EntryKind,
    /// The entry's identity (device and inode).
    pub id: FileId,
    /// The permission bits, with the set-id and sticky bits.
    pub mode: u32,
    /// The owner's user id.
    pub owner: u32,
    /// The number of hard links.
    pub links: u64,
    /// The length in bytes (of a file; what the platform says for the rest).
    pub len: u64,
    /// Modification time in nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// Change time (of the contents or of the inode) in nanoseconds since the epoch.
    pub ctime_ns: i128,
}

/// What an entry must still be for [`SessionStorage::set_mode_if`] to change it: the
/// entry a check looked at, not another one put in its place since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expected {
    /// A file or a directory.
    pub kind: EntryKind,
    /// Its identity.
    pub id: FileId,
    /// Its owner.
    pub owner: u32,
    /// Its permission bits.
    pub mode: u32,
}

impl Expected {
    /// The entry `stat` describes, as it is now.
    pub fn of(stat: &EntryStat) -> Expected {
        Expected {
            kind: stat.kind,
            id: stat.id,
            owner: stat.owner,
            mode: stat.mode,
        }
    }

    /// Whether `stat` is still this entry: the same kind, identity, owner and mode, and a
    /// file no other name shares (one link: a change of its mode would change another
    /// file's).
    pub fn holds(&self, stat: &EntryStat) -> bool {
        stat.kind == self.kind
            && stat.id == self.id
            && stat.owner == self.owner
            && stat.mode == self.mode
            && (stat.kind != EntryKind::File || stat.links == 1)
    }
}

impl EntryStat {
    /// The entry's version: its identity, length, modification and change times.
    pub fn version(&self) -> FileVersion {
        FileVersion {
            id: self.id,
            len: self.len,
            mtime_ns: self.mtime_ns,
            ctime_ns: self.ctime_ns,
        }
    }
}

/// Bytes that can be read at any offset, from several threads at once.
pub trait ReadAt: Sync {
    /// Reads up to `buf.len()` bytes starting at `offset`; 0 means the end of the data.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
}

impl ReadAt for [u8] {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(self.len());
        let n = buf.len().min(self.len() - start);
        buf[..n].copy_from_slice(&self[start..start + n]);
        Ok(n)
    }
}

/// A file open for positional reads ([`SessionStorage::open_read_at`]).
pub trait ReadFile: ReadAt + Send + std::fmt::Debug {
    /// The open file's length now.
    fn size(&self) -> io::Result<u64>;
    /// The open file's identity.
    fn id(&self) -> FileId;
    /// How many hard links the open file has now.
    fn links(&self) -> io::Result<u64>;
    /// The open file's modification time now, in nanoseconds since the epoch.
    fn mtime_ns(&self) -> io::Result<i128>;
    /// The open file's change time now, in nanoseconds since the epoch.
    fn ctime_ns(&self) -> io::Result<i128>;
    /// Every byte of the file, from the start to its end now.
    fn read_all(&self) -> io::Result<Vec<u8>> {
        let mut bytes = vec![0; usize::try_from(self.size()?).unwrap_or(usize::MAX)];
        let mut at = 0;
        while at < bytes.len() {
            match self.read_at(&mut bytes[at..], at as u64)? {
                0 => break,
                n => at += n,
            }
        }
        bytes.truncate(at);
        Ok(bytes)
    }
}

/// How a writer opens its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Append to the file, creating it if missing.
    Append,
    /// Append to the file, which must exist (`NotFound` otherwise; nothing is created).
    AppendExisting,
    /// Create a new file; fail if it exists.
    CreateNew,
}

/// The filesystem operations the engine uses.
pub trait SessionStorage: Send + Sync + std::fmt::Debug {
    /// Creates `dir` and missing parents with mode `0700`.
    fn ensure_dir(&self, dir: &Path) -> io::Result<()>;
    /// Whether anything is at `path`, not following a symlink (a dangling one counts); a
    /// failed lookup counts as nothing there.
    fn exists(&self, path: &Path) -> bool;
    /// The identity, length, modification time and type of what `path` names, following
    /// symlinks.
    fn stat(&self, path: &Path) -> io::Result<FileStat>;
    /// The version of what `path` names, following symlinks: what tells whether it changed
    /// without reading it.
    fn version(&self, path: &Path) -> io::Result<FileVersion>;
    /// `dir` open for looking up its entries' versions by name, where the backend has such
    /// handles (the disk: one `fstatat` a name instead of a walk of the whole path); `None`
    /// where it has not, and [`SessionStorage::version`] is asked for each path instead.
    fn dir_lookup(&self, _dir: &Path) -> Option<io::Result<DirLookup>> {
        None
    }
    /// A reader over the whole file.
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn Read + Send>>;
    /// The file, open for positional reads (one operation; the reads themselves are not
    /// counted or faulted by test backends).
    fn open_read_at(&self, path: &Path) -> io::Result<Box<dyn ReadFile>>;
    /// The whole file.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        self.open_read(path)?.read_to_end(&mut bytes)?;
        Ok(bytes)
    }
    /// At most `max` bytes from the start of the file.
    fn read_prefix(&self, path: &Path, max: usize) -> io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        self.open_read(path)?
            .take(max as u64)
            .read_to_end(&mut bytes)?;
        Ok(bytes)
    }
    /// At most `max` bytes from the end of the file.
    fn read_tail(&self, path: &Path, max: usize) -> io::Result<Vec<u8>>;
    /// Opens the file at `path` for writing as `mode` says, not following a symlink and
    /// refusing anything but a regular file.
    fn open_writer(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn StorageWriter>>;
    /// Renames the file at `from` to `to`, atomically replacing a file at `to`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes the file at `path` (a symlink there is removed, not what it points at).
    fn unlink(&self, path: &Path) -> io::Result<()>;
    /// The regular files directly in `dir`.
    fn list_files(&self, dir: &Path) -> io::Result<Vec<PathBuf>>;
    /// The directories directly in `dir` (not following symlinks).
    fn list_dirs(&self, dir: &Path) -> io::Result<Vec<PathBuf>>;
    /// Makes the directory entries of `dir` durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// The other processes that hold the file at `path` open for writing (by pid; this
    /// process is never listed). On Linux a scan of `/proc/*/fd`; on Windows a sharing probe
    /// that sees any handle with write access, and names it pid 0; where the platform cannot
    /// tell, an error (the caller refuses what needed the answer).
    fn writers_elsewhere(&self, path: &Path) -> io::Result<Vec<u32>>;
    /// The entry at `path` itself, not following a symlink.
    fn lstat(&self, path: &Path) -> io::Result<EntryStat>;
    /// The effective user of this process: the owner private files must have.
    fn user(&self) -> u32;
    /// Whether the entry at `path` (not following a symlink) carries a POSIX ACL (macOS: an
    /// extended ACL with any entry; Windows: a DACL wider than owner-only); an error where
    /// the platform cannot tell.
    fn has_acl(&self, path: &Path) -> io::Result<bool>;
    /// Whether `path` is on a network filesystem; an error where the platform cannot tell.
    fn is_network_fs(&self, path: &Path) -> io::Result<bool>;
    /// The absolute path of `path` with every symlink, `.` and `..` resolved.
    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf>;
    /// [`SessionStorage::canonicalize`] for a path outside the store (a workspace): on
    /// Linux it never steps onto a FUSE or network filesystem, where a lookup can wait as
    /// long as another process or host does not answer; such a path is an
    /// [`io::ErrorKind::Unsupported`] error that names the mount.
    fn canonicalize_local(&self, path: &Path) -> io::Result<PathBuf> {
        self.canonicalize(path)
    }
    /// Creates the one directory `dir` with mode `0700`; fails with
    /// [`io::ErrorKind::AlreadyExists`] if something is there.
    fn create_dir(&self, dir: &Path) -> io::Result<()>;
    /// Sets the permission bits of the entry at `path` (following nothing at the final
    /// component: a symlink there is refused).
    fn set_mode(&self, path: &Path, mode: u32) -> io::Result<()>;
    /// Sets the permission bits of the entry at `path` to `mode` if it is still the entry
    /// `expected` describes ([`Expected::holds`]); false, changing nothing, when it is not.
    /// On Unix the entry is looked at and changed through one descriptor, opened without
    /// following a symlink at the final component (never blocking on a FIFO), so nothing
    /// put in its place in between is changed; elsewhere it is looked at, then changed.
    fn set_mode_if(&self, path: &Path, expected: &Expected, mode: u32) -> io::Result<bool> {
        if !expected.holds(&self.lstat(path)?) {
            return Ok(false);
        }
        self.set_mode(path, mode).map(|()| true)
    }
    /// Publishes the file at `from` also at `to` (a hard link), never replacing what is at
    /// `to`: [`io::ErrorKind::AlreadyExists`] then.
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Makes the contents of the regular file at `path` durable.
    fn sync_file(&self, path: &Path) -> io::Result<()>;
    /// Every entry directly in `dir` with what it is (not following symlinks), by name.
    fn list_entries(&self, dir: &Path) -> io::Result<Vec<(PathBuf, EntryKind)>>;
    /// Renames the file or directory at `from` to `to`, never replacing what is at `to`:
    /// [`io::ErrorKind::AlreadyExists`] then (or `DirectoryNotEmpty`, where the platform
    /// can only refuse to replace a non-empty directory).
    fn rename_no_replace(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes the empty directory `dir` (a symlink there is refused).
    fn remove_dir(&self, dir: &Path) -> io::Result<()>;
    /// Whether another open file holds the lock [`StorageWriter::lock`] takes on the file at
    /// `path` (false when nothing is there). Asking takes no lock that outlives the call and
    /// holds back no other asker.
    fn is_locked(&self, path: &Path) -> io::Result<bool>;
    /// A new watch of directories' entries ([`DirWatch`]); an
    /// [`io::ErrorKind::Unsupported`] error where the backend cannot watch (the disk
    /// outside Linux, memory).
    fn watch(&self) -> io::Result<Box<dyn DirWatch>> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "watching directories is not supported here",
        ))
    }
}

/// What a [`DirWatch`] saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changes {
    /// The entries of watched directories that were created, written, closed after writing,
    /// had their times or modes set, were moved in or out or removed, and watched
    /// directories that were moved or removed themselves: in the order it happened, a path
    /// as often as it changed.
    Paths(Vec<PathBuf>),
    /// Changes were lost (the platform's queue of them overflowed): anything in the watched
    /// directories may have changed.
    Lost,
}

/// A watch of directories' entries ([`SessionStorage::watch`]): every change of an entry
/// directly in a watched directory is reported, in order, by whoever made it.
pub trait DirWatch: Send + std::fmt::Debug {
    /// Watches the directory `dir` too (again: nothing changes). A directory that is removed
    /// or moved stops being watched.
    fn add(&mut self, dir: &Path) -> io::Result<()>;
    /// Waits up to `timeout` for changes: the paths that changed since the last call (none
    /// when the time ran out), or [`Changes::Lost`].
    fn wait(&mut self, timeout: std::time::Duration) -> io::Result<Changes>;
}

/// `path` spelled without a Windows `\\?\` (verbatim) prefix: `\\?\C:\x` is `C:\x`,
/// `\\?\UNC\s\h` is `\\s\h`. Every other path (every path on Unix) is returned as it is.
pub fn without_verbatim_prefix(path: &Path) -> PathBuf {
    #[cfg(windows)]
    return sys::os::strip_verbatim(path.to_owned());
    #[cfg(not(windows))]
    path.to_owned()
}

/// Whether a failed rename is the refusal the full rewrite works around by moving the
/// target aside first: EPERM on Unix; on Windows an access-denied or sharing-violation
/// error (a target that is read-only, or open without delete sharing).
pub fn is_rename_refused(error: &io::Error) -> bool {
    sys::os::is_rename_refused(error)
}

/// Removes the directory `dir` and everything in it, not following symlinks (a symlink in
/// the tree is removed, not what it points at).
pub fn remove_tree(storage: &dyn SessionStorage, dir: &Path) -> io::Result<()> {
    for (path, kind) in storage.list_entries(dir)? {
        match kind {
            EntryKind::Dir => remove_tree(storage, &path)?,
            _ => storage.unlink(&path)?,
        }
    }
    storage.remove_dir(dir)
}

/// Why a path is not private ([`check_owner_only`]).
#[derive(Debug, thiserror::Error)]
pub enum PrivacyError {
    /// It could not be examined.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// It is not private: the reason.
    #[error("{0}")]
    Exposed(Exposure),
}

/// Why a path that must be private is not.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Exposure {
    /// It is a symlink (on Windows any reparse point).
    #[error("is a symlink")]
    Symlink,
    /// It is not what was asked for: not a directory, or not a regular file.
    #[error("has the wrong file type")]
    WrongType,
    /// It belongs to another user, whose user id is given.
    #[error("owned by uid {0}")]
    Owner(u32),
    /// Its permission bits; the only exposure that setting the mode repairs.
    #[error("mode {mode:o}, expected {want:o}")]
    Mode {
        /// The permission bits it has, with the set-id and sticky bits.
        mode: u32,
        /// The bits it must have: `0o700` for a directory, `0o600` for a file.
        want: u32,
    },
    /// It is a file with more than one hard link.
    #[error("has more than one hard link")]
    HardLinks,
    /// It carries an ACL: a POSIX ACL (on macOS an extended ACL; on Windows a DACL wider than
    /// owner-only).
    #[error("has {}", if cfg!(target_os = "macos") { "an extended ACL" } else { "a POSIX ACL" })]
    Acl,
}

/// Checks that `path` is a real directory (`dir`) or regular file, not a symlink, owned by
/// the effective user with mode exactly `0700` (directories) or `0600` (files), with one
/// link (files) and no ACL.
pub fn check_owner_only(
    storage: &dyn SessionStorage,
    path: &Path,
    dir: bool,
) -> Result<(), PrivacyError> {
    let stat = storage.lstat(path)?;
    let exposed = |why: Exposure| Err(PrivacyError::Exposed(why));
    let want_kind = if dir { EntryKind::Dir } else { EntryKind::File };
    if stat.kind != want_kind {
        return exposed(if stat.kind == EntryKind::Symlink {
            Exposure::Symlink
        } else {
            Exposure::WrongType
        });
    }
    if stat.owner != storage.user() {
        return exposed(Exposure::Owner(stat.owner));
    }
    let want = if dir { 0o700 } else { 0o600 };
    if stat.mode != want {
        return exposed(Exposure::Mode {
            mode: stat.mode,
            want,
        });
    }
    if !dir && stat.links > 1 {
        return exposed(Exposure::HardLinks);
    }
    if storage.has_acl(path)? {
        return exposed(Exposure::Acl);
    }
    Ok(())
}

/// Checks that `path` is a private file ([`check_owner_only`]); a file that is not is a
/// [`io::ErrorKind::PermissionDenied`] error naming it and why.
pub fn check_private_file(storage: &dyn SessionStorage, path: &Path) -> io::Result<()> {
    check_owner_only(storage, path, false).map_err(|e| match e {
        PrivacyError::Io(e) => e,
        PrivacyError::Exposed(why) => io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{}: unsafe: {why}", path.display()),
        ),
    })
}

/// Where an open file ends, as [`StorageWriter::end`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileEnd {
    /// The file's length.
    pub size: u64,
    /// Its last byte, if it is not empty.
    pub last_byte: Option<u8>,
}

impl FileEnd {
    /// Whether the last line has no newline yet (a torn line, or one still being written).
    pub fn torn(&self) -> bool {
        self.last_byte.is_some_and(|b| b != b'\n')
    }
}

/// How long [`StorageWriter::lock`] waits for a lock another writer holds.
pub const LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// What [`StorageWriter::lock`] answers when the lock stayed taken for [`LOCK_PATIENCE`].
pub(crate) fn lock_timed_out() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "another writer held the file's lock too long",
    )
}

/// An open file being written.
pub trait StorageWriter: Send + std::fmt::Debug {
    /// Writes every byte of `bytes`, or fails; `written` is set to how many bytes were
    /// written (all of them on success, what landed before the failure otherwise).
    fn write_all_counted(&mut self, bytes: &[u8], written: &mut u64) -> io::Result<()>;
    /// Writes every byte of `bytes`, or fails.
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.write_all_counted(bytes, &mut 0)
    }
    /// The open file's length and last byte, read through this writer's own descriptor
    /// (`fstat` and a positional read), whoever wrote them.
    fn end(&self) -> io::Result<FileEnd>;
    /// Writes every byte of `bytes` at `offset` (not for an appending writer, whose writes
    /// always land at the end), or fails; the file offset of later writes is left alone.
    fn write_at(&mut self, bytes: &[u8], offset: u64) -> io::Result<()>;
    /// Cuts the open file to `len` bytes.
    fn truncate(&mut self, len: u64) -> io::Result<()>;
    /// Makes what was written durable.
    fn fsync(&mut self) -> io::Result<()>;
    /// The file offset just past the last byte written. For an appending writer that is
    /// where its last write ended, whatever other writers appended before or after it.
    fn position(&self) -> io::Result<u64>;
    /// Takes this writer's exclusive advisory lock on its file, waiting while another
    /// writer holds it, at most [`LOCK_PATIENCE`] (then [`io::ErrorKind::TimedOut`]: a
    /// holder that hangs never hangs this one); [`StorageWriter::unlock`] (or closing)
    /// drops it. Writers that never lock (the agent's) are not held back: the lock orders
    /// gjcfs's own writers, so that checking the file's end and appending are one step for
    /// them.
    fn lock(&mut self) -> io::Result<()>;
    /// Drops the lock [`StorageWriter::lock`] took.
    fn unlock(&mut self) -> io::Result<()>;
    /// Whether `path` still names the file this writer writes (not replaced or removed).
    fn is_file_at(&self, path: &Path) -> io::Result<bool>;
    /// Closes the file (without an fsync).
    fn close(self: Box<Self>) -> io::Result<()>;
}

/// Writes `bytes` to a new file at `path` with a full fsync, then closes it.
pub fn write_new_durable(
    storage: &dyn SessionStorage,
    path: &Path,
    bytes: &[u8],
) -> io::Result<()> {
    let mut writer = storage.open_writer(path, OpenMode::CreateNew)?;
    let written = writer.write_all(bytes).and_then(|()| writer.fsync());
    let closed = writer.close();
    written.and(closed)
}

/// What every backend's [`SessionStorage::is_locked`] must answer, checked in a directory
/// `dir` of `storage`.
#[cfg(test)]
pub(crate) fn check_is_locked(storage: &dyn SessionStorage, dir: &Path) {
    let path = dir.join("claim");
    assert!(!storage.is_locked(&path).unwrap(), "nothing is there");
    let mut holder = storage.open_writer(&path, OpenMode::Append).unwrap();
    assert!(!storage.is_locked(&path).unwrap(), "open, not locked");
    holder.lock().unwrap();
    assert!(storage.is_locked(&path).unwrap());
    // Asking again, from anywhere, keeps the answer and takes nothing from the holder.
    assert!(storage.is_locked(&path).unwrap());
    holder.unlock().unwrap();
    assert!(!storage.is_locked(&path).unwrap());
    // Asking left no lock behind: another writer takes it at once.
    let mut other = storage.open_writer(&path, OpenMode::Append).unwrap();
    other.lock().unwrap();
    assert!(storage.is_locked(&path).unwrap());
    other.close().unwrap();
    assert!(!storage.is_locked(&path).unwrap(), "closing drops the lock");
    holder.close().unwrap();
}
