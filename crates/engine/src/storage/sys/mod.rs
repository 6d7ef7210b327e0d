//! The platform calls behind the storage seam, one module per platform, and nowhere else in
//! the engine: file identity, no-follow opens, modes and owners, ACLs, `statfs`, positional
//! I/O, the effective user, the terminal on stdin, which processes hold a file open, a
//! no-replace rename, what tells one run of a process (or of the system) from another, and
//! the advice that memory be backed by huge pages.
//!
//! - [`unix`]: what every POSIX system has (open flags, `fstat` fields, `pread`, `geteuid`,
//!   `ttyname`, a directory written into through its descriptor: `mkdirat`, `openat`,
//!   `renameat`).
//! - `linux`: the POSIX ACL attributes, the filesystem magic of `statfs`, `/proc`,
//!   `renameat2`; `inotify`: watching directories.
//! - `macos`: extended ACLs, `statfs`'s `f_fstypename` and `MNT_LOCAL`, `libproc`,
//!   `kern.bootsessionuuid`, `renamex_np`.
//! - `windows`: the same seam over Win32 (handles opened without following reparse points,
//!   volume serial and file index, owner-only DACLs, the final path of a handle, `MoveFileExW`).
//! - `unsupported` (the other Unixes): the checks Linux makes through its own interfaces
//!   are not implemented there; each one fails closed with an
//!   [`std::io::ErrorKind::Unsupported`] error, so the managed path refuses instead of
//!   passing unchecked.
//!
//! [`os`] names the module of the running platform's family (`unix` or `windows`); both
//! offer the same functions, so the backends call `sys::os::…` without a `cfg` of their own.

// The storage seam itself: the one place the engine touches the filesystem directly.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[cfg(target_os = "linux")]
mod inotify;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
mod local_path;
pub mod mountinfo;
#[cfg(unix)]
pub mod unix;
#[cfg(target_os = "linux")]
mod writers;
// Its pure parts are built for the tests everywhere, so that they run on Linux too.
#[cfg(any(target_os = "macos", test))]
mod macos;
#[cfg(windows)]
pub mod windows;

#[cfg(unix)]
pub use unix as os;
#[cfg(windows)]
pub use windows as os;
// Built everywhere so that its tests run on Linux too; used only elsewhere.
#[cfg_attr(
    any(target_os = "linux", target_os = "macos", windows),
    allow(dead_code)
)]
mod unsupported;

#[cfg(target_os = "linux")]
pub use linux::{
    boot_id, dir_times_tell_entries, has_posix_acl, is_network_fs, process_start_id,
    rename_no_replace,
};
#[cfg(target_os = "linux")]
pub use local_path::canonicalize_local;
#[cfg(target_os = "linux")]
pub use writers::writers_elsewhere;
// The seam's ACL check is the extended ACL there.
#[cfg(target_os = "macos")]
pub use macos::{
    boot_id, dir_times_tell_entries, has_extended_acl as has_posix_acl, is_network_fs,
    process_start_id, rename_no_replace, writers_elsewhere,
};
#[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
pub use unsupported::{
    boot_id, dir_times_tell_entries, has_posix_acl, is_network_fs, process_start_id,
    rename_no_replace, writers_elsewhere,
};
#[cfg(windows)]
pub use windows::{
    boot_id, has_posix_acl, is_network_fs, process_start_id, rename_no_replace, writers_elsewhere,
};

/// `path` with every symlink resolved as [`os::canonicalize`] does, where the platform can
/// tell which mounts another process or host serves (Linux) without stepping onto one.
#[cfg(not(target_os = "linux"))]
pub fn canonicalize_local(path: &std::path::Path) -> std::io::Result<std::path::PathBuf> {
    os::canonicalize(path)
}

/// Asks that `region` (starting on a page boundary) be backed by huge pages: Linux's
/// transparent huge pages; elsewhere nothing. Advice only: the memory works the same either
/// way.
pub fn advise_huge_pages(region: &mut [std::mem::MaybeUninit<u8>]) {
    #[cfg(target_os = "linux")]
    linux::advise_huge_pages(region);
    #[cfg(not(target_os = "linux"))]
    let _ = region;
}

/// Hands the memory the allocator holds free back to the system: glibc's `malloc_trim`
/// (glibc keeps what a large structure freed, so a long-running server would stay at its
/// peak); elsewhere nothing. Advice only, and it costs a walk of the allocator's free
/// lists: for after a large structure is let go, not for every call.
pub fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim has no preconditions; it only returns free pages to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// A new watch of directories' entries: inotify on Linux; elsewhere not supported yet
/// (macOS's FSEvents and Windows's `ReadDirectoryChangesW` would serve).
pub fn dir_watch() -> std::io::Result<Box<dyn crate::storage::DirWatch>> {
    #[cfg(target_os = "linux")]
    return inotify::Inotify::new().map(|w| Box::new(w) as Box<dyn crate::storage::DirWatch>);
    #[cfg(not(target_os = "linux"))]
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "watching directories is not supported on this system",
    ))
}

/// Runs `hook` when the process exits through `exit` (a return from `main` too): `atexit` on
/// Unix; elsewhere nothing is registered.
pub fn at_exit(hook: extern "C" fn()) {
    #[cfg(unix)]
    // SAFETY: registering a plain `extern "C"` function with no preconditions.
    unsafe {
        libc::atexit(hook);
    }
    #[cfg(not(unix))]
    let _ = hook;
}

/// Whether [`os::open`] may create the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Create {
    /// Open only what exists.
    Never,
    /// Create the file (owner-only) if it is missing.
    IfMissing,
    /// Create a new file (owner-only); fail if something is there.
    New,
}

/// How [`os::open`] opens a file: always for reading, not following a link at the final
/// component, refusing anything but a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Open {
    pub write: bool,
    /// Every write lands at the end of the file, whoever else appends.
    pub append: bool,
    pub create: Create,
}

impl Open {
    pub const READ: Open = Open {
        write: false,
        append: false,
        create: Create::Never,
    };
}

/// What the handle of an open file says about it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Info {
    pub id: crate::storage::FileId,
    pub len: u64,
    pub links: u64,
    /// Modification time, in nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// Change time (contents or metadata), in nanoseconds since the epoch.
    pub ctime_ns: i128,
}
