//! The Dokan adapter (Windows): translates Dokan's path-based filesystem calls to the
//! platform-neutral [`Vfs`](gjcfs_vfs::Vfs). Like the FUSE adapter it decides nothing: every
//! answer comes from the model, every error code from [`to_ntstatus`].
//!
//! Split in two so that all of the translation builds and is tested on every platform:
//! - plain Rust: [`Adapter`] (paths, create dispositions, reads, writes, listings, change
//!   notification paths), [`names`] (names Windows forbids, written reversibly),
//!   [`security`] (owner-only security descriptors, attributes), [`status`] (the NTSTATUS
//!   mapping);
//! - `windows.rs` (Windows only): the `dokan` crate's `FileSystemHandler`, converting
//!   Dokan's types and calling the [`Adapter`], and the mount itself. It links Dokan's
//!   library (`dokan2.dll`), so it is built into its own executable, `gjcfs-dokan.exe`,
//!   which `gjcfs mount` starts: the `gjcfs` command itself does not need Dokan installed.
//!
//! # Paths and names
//! Dokan names a file by its path from the mount root (`\sessions\<id>\leaf`). Each name is
//! decoded ([`names::decode`]) and the path resolved by the model
//! ([`Vfs::resolve`](gjcfs_vfs::Vfs::resolve)), which finds a name given in another case when
//! exactly one name of the directory folds to it, as Windows expects of a filesystem.
//!
//! # Links
//! Windows has no symlinks a user can rely on (creating one needs a privilege, and many
//! programs do not follow them), so the model's links (`labels/<label>`, `projects/<p>/<id>`,
//! `by-date/…`, `recent/…`, `search/<q>/…`) are shown as read-only files holding their
//! target: the relative Windows path to the node they lead to, as the FUSE mount's
//! `readlink` gives it, with `\` between names and each name written as [`names::encode`]
//! does (`labels\checkpoint` holds `..\entries\000002-<id>.json`). Plain files, rather than
//! `.lnk` shortcuts: a shortcut's name needs a `.lnk` suffix that the layout's names do not
//! have, its content is a binary format only the shell reads, and a file holding the path
//! is read the same way by every tool, script and the agent itself.
//!
//! # Writes
//! The model's rules hold: `leaf` is written at the offsets given (or at its end for an
//! append), `entries/new` appends whatever the write offset (each complete line is one
//! entry), every other file is read-only. Creating, deleting (`DeleteFile`, delete on close)
//! and renaming are refused with the model's reason, as NTSTATUS (`STATUS_ACCESS_DENIED`,
//! `STATUS_CANNOT_DELETE` for a removal, `STATUS_MEDIA_WRITE_PROTECTED` on a read-only
//! mount). Attributes, times and security descriptors cannot be changed.
//!
//! # Security
//! Only the mounting user may open anything: every node's security descriptor allows them
//! alone ([`security`]), and every open by another user is refused, since Dokan leaves
//! access checks to the filesystem. The mount is made for the current logon session only.
//!
//! # Change notification
//! Every change the model announces (an append, a leaf move, a change made outside) names
//! the changed nodes; their paths ([`Adapter::changed_paths`]) are given to Dokan's change
//! notification, so Explorer and directory watchers see them.
// A library never prints: it returns errors and emits events; the programs decide.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod adapter;
pub mod names;
pub mod security;
pub mod status;
#[cfg(windows)]
pub mod windows;

pub use adapter::{Adapter, CreateRequest, Found, Handle, Info};
pub use security::Sid;
pub use status::{path_status, to_ntstatus, NtStatus};

#[cfg(test)]
mod tests;
