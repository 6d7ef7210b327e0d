//! The POSIX calls every Unix has.

use std::ffi::CStr;
use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use crate::storage::FileId;

/// The flags of every file open: never follow a symlink at the final component, never
/// block (a FIFO), never leak the descriptor into a child.
pub const NO_FOLLOW: i32 = libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK;

/// Adds [`NO_FOLLOW`] to `options`.
pub fn no_follow(options: &mut OpenOptions) -> &mut OpenOptions {
    options.custom_flags(NO_FOLLOW)
}

/// Opens the directory at `dir` read-only (for an fsync), never blocking on what is there
/// instead.
pub fn open_dir(dir: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(dir)
}

/// Sets the permission bits of new files opened through `options`.
pub fn create_mode(options: &mut OpenOptions, mode: u32) -> &mut OpenOptions {
    options.mode(mode)
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
