//! The POSIX calls every Unix has.

use std::ffi::CStr;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use super::{Create, Info, Open};
use crate::storage::{
    not_a_regular_file, EntryKind, EntryStat, Expected, FileId, FileStat, FileVersion,
};

/// The mode of every file the storage creates.
const FILE_MODE: u32 = 0o600;
/// The mode of every directory the storage creates.
const DIR_MODE: u32 = 0o700;

/// The flags of every file open: never follow a symlink at the final component, never
/// block (a FIFO), never leak the descriptor into a child.
pub const NO_FOLLOW: i32 = libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK;

/// Opens the file at `path` as `how` says with [`NO_FOLLOW`], creating it with mode `0600`,
/// and refuses it (closing it again) unless the descriptor is a regular file.
pub fn open(path: &Path, how: Open) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options
        .read(true)
        .write(how.write)
        .append(how.append)
        .custom_flags(NO_FOLLOW)
        .mode(FILE_MODE);
    match how.create {
        Create::Never => {}
        Create::IfMissing => {
            options.create(true);
        }
        Create::New => {
            options.create_new(true);
        }
    }
    let file = options.open(path)?;
    if !file.metadata()?.file_type().is_file() {
        return Err(not_a_regular_file());
    }
    Ok(file)
}

/// Writes some of `bytes` at the file offset (an appending descriptor's `O_APPEND` puts
/// them at the end).
pub fn write(file: &File, bytes: &[u8], _append: bool) -> io::Result<usize> {
    (&*file).write(bytes)
}

/// Takes the open `file`'s exclusive advisory lock on the whole file (`flock`) if no other
/// descriptor holds it (whether it was taken), or drops it (`exclusive` false). Writers
/// that never ask (the agent) are not held back, and closing the descriptor drops it.
pub fn lock_file(file: &File, exclusive: bool) -> io::Result<bool> {
    flock(
        file,
        if exclusive {
            libc::LOCK_EX | libc::LOCK_NB
        } else {
            libc::LOCK_UN
        },
    )
}

/// Whether another descriptor holds the exclusive lock of [`lock_file`] on the open
/// `file`: a shared lock is tried without waiting (and dropped when the descriptor is
/// closed), so askers never hold each other back.
pub fn probe_lock(file: &File) -> io::Result<bool> {
    flock(file, libc::LOCK_SH | libc::LOCK_NB).map(|taken| !taken)
}

/// `flock(operation)` on the open `file`, again when interrupted: whether it took effect
/// (false: another descriptor's lock stands in the way of a non-blocking one).
fn flock(file: &File, operation: i32) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: a descriptor this `File` owns; flock touches nothing else.
        if unsafe { libc::flock(file.as_raw_fd(), operation) } == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => {}
            io::ErrorKind::WouldBlock => return Ok(false),
            _ => return Err(e),
        }
    }
}

/// What `fstat` says about the open `file`.
pub fn info(file: &File) -> io::Result<Info> {
    let meta = file.metadata()?;
    Ok(Info {
        id: file_id(&meta),
        len: meta.len(),
        links: meta.nlink(),
        mtime_ns: mtime_ns(&meta),
        ctime_ns: ctime_ns(&meta),
    })
}

/// What `stat` (following symlinks) says about `path`.
pub fn stat(path: &Path) -> io::Result<FileStat> {
    let meta = fs::metadata(path)?;
    let mtime_ms = meta
        .modified()?
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    Ok(FileStat {
        id: file_id(&meta),
        len: meta.len(),
        mtime_ms,
        is_file: meta.is_file(),
    })
}

/// What `lstat` says about the entry at `path` itself.
pub fn lstat(path: &Path) -> io::Result<EntryStat> {
    fs::symlink_metadata(path).map(|meta| entry_stat(&meta))
}

fn entry_stat(meta: &Metadata) -> EntryStat {
    EntryStat {
        kind: entry_kind(meta.file_type()),
        id: file_id(meta),
        mode: mode(meta),
        owner: owner(meta),
        links: links(meta),
        len: meta.len(),
        mtime_ns: mtime_ns(meta),
        ctime_ns: ctime_ns(meta),
    }
}

/// Sets the mode of the entry at `path` through one descriptor (`fstat`, then `fchmod`),
/// opened with [`NO_FOLLOW`] (and `O_NOCTTY`), if it is still what `expected` describes.
pub fn set_mode_if(path: &Path, expected: &Expected, mode: u32) -> io::Result<bool> {
    let entry = OpenOptions::new()
        .read(true)
        .custom_flags(NO_FOLLOW | libc::O_NOCTTY)
        .open(path)?;
    if !expected.holds(&entry_stat(&entry.metadata()?)) {
        return Ok(false);
    }
    entry
        .set_permissions(fs::Permissions::from_mode(mode))
        .map(|()| true)
}

/// What a directory entry of type `kind` is.
pub fn entry_kind(kind: fs::FileType) -> EntryKind {
    if kind.is_file() {
        EntryKind::File
    } else if kind.is_dir() {
        EntryKind::Dir
    } else if kind.is_symlink() {
        EntryKind::Symlink
    } else {
        EntryKind::Other
    }
}

/// Creates `dir` and its missing parents with mode `0700`.
pub fn ensure_dir(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)
}

/// Creates the one directory `dir` with mode `0700`.
pub fn create_dir(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new().mode(DIR_MODE).create(dir)
}

/// Sets the permission bits of the entry at `path`, refusing a symlink there.
pub fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    if fs::symlink_metadata(path)?.file_type().is_symlink() {
        return Err(io::Error::from_raw_os_error(libc::ELOOP));
    }
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}

/// `realpath`.
pub fn canonicalize(path: &Path) -> io::Result<PathBuf> {
    fs::canonicalize(path)
}

/// Makes the entries of the directory `dir` durable (an fsync of the directory).
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    open_dir(dir)?.sync_all()
}

/// Makes the contents of the regular file at `path` durable.
pub fn sync_file(path: &Path) -> io::Result<()> {
    open(path, Open::READ)?.sync_all()
}

/// The identity, length, modification and change times of `path` (following symlinks).
pub fn version(path: &Path) -> io::Result<FileVersion> {
    fs::metadata(path).map(|meta| version_of(&meta))
}

fn version_of(meta: &fs::Metadata) -> FileVersion {
    FileVersion {
        id: file_id(meta),
        len: meta.len(),
        mtime_ns: mtime_ns(meta),
        ctime_ns: ctime_ns(meta),
    }
}

/// An open directory whose entries are looked up by name (`fstatat`).
#[derive(Debug)]
pub struct DirLookup {
    dir: File,
    path: PathBuf,
}

impl DirLookup {
    pub fn open(dir: &Path) -> io::Result<DirLookup> {
        Ok(DirLookup {
            dir: File::open(dir)?,
            path: dir.to_owned(),
        })
    }

    /// [`version`] of `name` in the directory: one lookup of one name instead of a walk of
    /// the whole path.
    pub fn version(&self, name: &std::ffi::OsStr) -> io::Result<FileVersion> {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::io::AsRawFd;
        // A name of the usual length is made NUL-terminated on the stack: a search checks
        // every file of the store this way.
        let mut buf = [0u8; 256];
        let bytes = name.as_bytes();
        let owned;
        let name = match buf.get_mut(..bytes.len()) {
            Some(head) if bytes.len() < 256 && !bytes.contains(&0) => {
                head.copy_from_slice(bytes);
                std::ffi::CStr::from_bytes_with_nul(&buf[..=bytes.len()])
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?
            }
            _ => {
                owned = std::ffi::CString::new(bytes)?;
                owned.as_c_str()
            }
        };
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: `name` is NUL-terminated and outlives the call; `st` is valid for writes
        // and is read only after `fstatat` reported that it wrote it.
        let st = unsafe {
            if libc::fstatat(self.dir.as_raw_fd(), name.as_ptr(), st.as_mut_ptr(), 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            st.assume_init()
        };
        Ok(FileVersion {
            id: FileId {
                dev: st.st_dev as u64,
                ino: st.st_ino as u64,
            },
            len: st.st_size as u64,
            mtime_ns: st.st_mtime as i128 * 1_000_000_000 + st.st_mtime_nsec as i128,
            ctime_ns: st.st_ctime as i128 * 1_000_000_000 + st.st_ctime_nsec as i128,
        })
    }

    /// The directory's own version (`fstat`), where every create, remove or rename of an
    /// entry sets its modification time for every process at once (local filesystems of
    /// known kinds, [`super::dir_times_tell_entries`]); `None` on any other.
    pub fn listing_version(&self) -> io::Result<Option<FileVersion>> {
        if !super::dir_times_tell_entries(&self.path).unwrap_or(false) {
            return Ok(None);
        }
        self.dir.metadata().map(|meta| Some(version_of(&meta)))
    }
}

/// A directory open by descriptor, into which files and subdirectories are written by name
/// (`mkdirat`, `openat`, `renameat`, `unlinkat` on that descriptor): once it is open, nothing
/// renamed or swapped in at its path, or at any path above it, can redirect a write.
#[derive(Debug)]
pub struct OutputDir {
    dir: File,
}

/// The flags of every directory open of [`OutputDir`]: a directory only, never blocking,
/// never leaked into a child.
const DIR_FLAGS: i32 = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC | libc::O_NONBLOCK;

impl OutputDir {
    /// Opens the directory at `dir`, following a symlink there (the caller named it).
    pub fn open(dir: &Path) -> io::Result<OutputDir> {
        open_dir(dir).map(|dir| OutputDir { dir })
    }

    /// Creates the directory `name` (mode `0700`) in this one unless it is there, and opens
    /// it without following a symlink: anything but a directory itself (a symlink to one
    /// too) is refused with [`io::ErrorKind::NotADirectory`].
    pub fn create_dir(&self, name: &str) -> io::Result<OutputDir> {
        use std::os::fd::{AsRawFd, FromRawFd};
        let name = c_name(name)?;
        // SAFETY: `name` is NUL-terminated and outlives the call; the descriptor is ours.
        if unsafe {
            libc::mkdirat(
                self.dir.as_raw_fd(),
                name.as_ptr(),
                DIR_MODE as libc::mode_t,
            )
        } != 0
        {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::AlreadyExists {
                return Err(e);
            }
        }
        // SAFETY: as above; openat returns a new descriptor or -1.
        let fd = unsafe {
            libc::openat(
                self.dir.as_raw_fd(),
                name.as_ptr(),
                DIR_FLAGS | libc::O_NOFOLLOW,
            )
        };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::ELOOP) | Some(libc::ENOTDIR) => not_a_directory(),
                _ => e,
            });
        }
        // SAFETY: `fd` is a descriptor openat just returned, owned by nothing else.
        let dir = unsafe { File::from_raw_fd(fd) };
        Ok(OutputDir { dir })
    }

    /// Writes `bytes` as `name` in this directory: into the temp file `temp`, created new
    /// (`O_CREAT | O_EXCL | O_NOFOLLOW`, mode `0600`, or `0644` unless `private`), made
    /// durable, then renamed onto `name`; the temp file is removed when a step fails.
    pub fn write_replacing(
        &self,
        temp: &str,
        name: &str,
        bytes: &[u8],
        private: bool,
    ) -> io::Result<()> {
        use std::os::fd::{AsRawFd, FromRawFd};
        let (temp, name) = (c_name(temp)?, c_name(name)?);
        let dir = self.dir.as_raw_fd();
        let mode: libc::c_uint = if private { FILE_MODE } else { 0o644 };
        // SAFETY: `temp` is NUL-terminated and outlives the call; the mode is passed as the
        // variadic argument O_CREAT reads.
        let fd = unsafe {
            libc::openat(
                dir,
                temp.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | NO_FOLLOW,
                mode,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a descriptor openat just returned, owned by nothing else.
        let mut file = unsafe { File::from_raw_fd(fd) };
        let written = file.write_all(bytes).and_then(|()| file.sync_all());
        drop(file);
        let renamed = written.and_then(|()| {
            // SAFETY: both names are NUL-terminated and outlive the call; both are looked
            // up in the one directory this descriptor is.
            if unsafe { libc::renameat(dir, temp.as_ptr(), dir, name.as_ptr()) } == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        });
        if renamed.is_err() {
            // SAFETY: as above; removes the temp file this call created, if still there.
            unsafe { libc::unlinkat(dir, temp.as_ptr(), 0) };
        }
        renamed
    }
}

/// `name` NUL-terminated, refused if it holds a NUL.
fn c_name(name: &str) -> io::Result<std::ffi::CString> {
    std::ffi::CString::new(name).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

/// The error for a name that is not a directory itself (a symlink, even to one, included).
fn not_a_directory() -> io::Error {
    io::Error::new(
        io::ErrorKind::NotADirectory,
        "not a directory (a symlink is not followed)",
    )
}

/// The bytes of a path, as stored in an index (the raw bytes on Unix).
pub fn path_to_bytes(path: &Path) -> &[u8] {
    path.as_os_str().as_encoded_bytes()
}

/// The path whose [`path_to_bytes`] are `bytes`.
pub fn path_from_bytes(bytes: &[u8]) -> std::borrow::Cow<'_, Path> {
    use std::os::unix::ffi::OsStrExt;
    std::borrow::Cow::Borrowed(Path::new(std::ffi::OsStr::from_bytes(bytes)))
}

/// The error of an EPERM (the only error whose rename failure the rewrite works around by
/// moving the target aside first).
pub fn is_rename_refused(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::EPERM)
}

/// The error `errno` stands for (the platform's own numbers already are errnos).
pub fn errno_error(errno: i32) -> io::Error {
    io::Error::from_raw_os_error(errno)
}

/// Opens the directory at `dir` read-only (for an fsync), never blocking on what is there
/// instead.
pub fn open_dir(dir: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(dir)
}

/// The identity (device and inode) of what `meta` describes.
pub fn file_id(meta: &Metadata) -> FileId {
    FileId {
        dev: meta.dev(),
        ino: meta.ino(),
    }
}

/// The permission bits (with set-id and sticky bits) of what `meta` describes.
pub fn mode(meta: &Metadata) -> u32 {
    meta.mode() & 0o7777
}

/// The owner of what `meta` describes.
pub fn owner(meta: &Metadata) -> u32 {
    meta.uid()
}

/// The number of hard links to what `meta` describes.
pub fn links(meta: &Metadata) -> u64 {
    meta.nlink()
}

/// The change time of what `meta` describes, in nanoseconds since the epoch.
pub fn ctime_ns(meta: &Metadata) -> i128 {
    meta.ctime() as i128 * 1_000_000_000 + meta.ctime_nsec() as i128
}

/// The modification time of what `meta` describes, in nanoseconds since the epoch.
pub fn mtime_ns(meta: &Metadata) -> i128 {
    meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128
}

/// Reads at `offset` without moving the descriptor's offset (`pread`), retrying on EINTR.
pub fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    loop {
        match file.read_at(buf, offset) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

/// Writes every byte of `bytes` at `offset` without moving the descriptor's offset
/// (`pwrite`, retried on EINTR and short writes).
pub fn write_all_at(file: &File, bytes: &[u8], offset: u64) -> io::Result<()> {
    file.write_all_at(bytes, offset)
}

/// The effective user id of this process.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The path of the terminal on stdin, if stdin is one.
pub fn stdin_tty() -> Option<String> {
    // SAFETY: isatty and ttyname only read the descriptor; ttyname's buffer is copied at once.
    unsafe {
        if libc::isatty(0) != 1 {
            return None;
        }
        let name = libc::ttyname(0);
        if name.is_null() {
            return None;
        }
        Some(CStr::from_ptr(name).to_string_lossy().into_owned())
    }
}

/// Whether a process with id `pid` exists (`kill(pid, 0)`; one we may not signal exists).
pub fn process_exists(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}
