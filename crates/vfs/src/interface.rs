//! The types the model's operations take and give: where the sessions come from, a
//! node's kind and attributes, what a listing tells of an entry, a directory entry, how a
//! file is opened.

use std::path::PathBuf;

#[cfg(doc)]
use super::{Vfs, VfsConfig};

/// Where the sessions come from.
#[derive(Debug, Clone)]
pub enum SessionSource {
    /// `<agentDir>/sessions`: every scope and legacy directory under it.
    SessionsRoot(PathBuf),
    /// One directory of session files (`--session-dir`).
    Dir(PathBuf),
}

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    Directory,
    File,
    Symlink,
}

/// A node's attributes (ownership is the adapter's: the mounting user).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr {
    pub ino: u64,
    pub kind: NodeKind,
    pub size: u64,
    /// Permission bits (0o600 files, 0o700 directories, 0o777 symlinks).
    pub perm: u16,
    pub nlink: u32,
    /// Modification time, milliseconds since the epoch.
    pub mtime_ms: i64,
    /// The node's attributes and content change only in ways the model announces through
    /// its invalidation hook (entries, blobs; a session's fixed files and directories while
    /// the store's change events are followed, [`Vfs::follow_store_events`]): a kernel may
    /// cache them long. Other nodes' attributes are cached briefly.
    pub stable: bool,
    /// While files are read by node ([`Vfs::serve_reads_by_node`]), a rendered file: each
    /// number holds one version of its bytes, and a change gives its name a new number,
    /// which only a lookup tells. A kernel must look its name up at every open.
    pub lookup_each_open: bool,
}

/// What a listing tells of one entry ([`Vfs::listed_entry`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListedAttr {
    /// Its attributes, as a lookup gives them.
    Known(Attr),
    /// A view not rendered for its session as it is now: the number its name has now, and
    /// the attributes that number holds (size 0 when it holds no bytes yet). A kernel must
    /// keep neither the attributes nor the name: the name's first use looks it up, which
    /// renders the view and may give it another number.
    Unrendered(Attr),
}

/// One directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub ino: u64,
    pub kind: NodeKind,
    pub name: String,
}

/// How a file is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpenMode {
    pub read: bool,
    pub write: bool,
    pub truncate: bool,
    /// The user opening it, when the platform says (see [`VfsConfig::owner_uid`]).
    pub caller_uid: Option<u32>,
}
