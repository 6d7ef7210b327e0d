//! The platform calls behind the storage seam, one module per platform, and nowhere else in
//! the engine: file identity, no-follow opens, modes and owners, ACLs, `statfs`, positional
//! I/O, the effective user, the terminal on stdin, which processes hold a file open, a
//! no-replace rename, and what tells one run of a process (or of the system) from another.
//!
//! - [`unix`]: what every POSIX system has (open flags, `fstat` fields, `pread`, `geteuid`,
//!   `ttyname`).
//! - `linux`: the POSIX ACL attributes, the filesystem magic of `statfs`, `/proc`,
//!   `renameat2`.
//! - `macos`: extended ACLs, `statfs`'s `f_fstypename` and `MNT_LOCAL`, `libproc`,
//!   `kern.bootsessionuuid`, `renamex_np`.
//! - `unsupported` (the other Unixes, Windows): the checks Linux makes through its
//!   own interfaces are not implemented there; each one fails closed with an
//!   [`std::io::ErrorKind::Unsupported`] error, so the managed path refuses instead of
//!   passing unchecked. (The rest of the engine's storage is POSIX-only today.)

// The storage seam itself: the one place the engine touches the filesystem directly.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[cfg(target_os = "linux")]
mod linux;
#[cfg(unix)]
pub mod unix;
// Its pure parts are built for the tests everywhere, so that they run on Linux too.
#[cfg(any(target_os = "macos", test))]
mod macos;
// Built everywhere so that its tests run on Linux too; used only elsewhere.
#[cfg_attr(any(target_os = "linux", target_os = "macos"), allow(dead_code))]
mod unsupported;

#[cfg(target_os = "linux")]
pub use linux::{
    boot_id, has_posix_acl, is_network_fs, process_start_id, rename_no_replace, writers_elsewhere,
};
// The seam's ACL check is the extended ACL there.
#[cfg(target_os = "macos")]
pub use macos::{
    boot_id, has_extended_acl as has_posix_acl, is_network_fs, process_start_id, rename_no_replace,
    writers_elsewhere,
};
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub use unsupported::{
    boot_id, has_posix_acl, is_network_fs, process_start_id, rename_no_replace, writers_elsewhere,
};
