//! A platform-neutral model of the mounted session store: nodes, attributes, handles and
//! the semantics of every filesystem operation, with no kernel types. Platform adapters
//! (`platform/fuse/`, `platform/dokan/`) only translate calls and map [`VfsError`] to error
//! codes. A platform that names files by path resolves them with [`Vfs::resolve`] and finds a
//! node's path with [`Vfs::path_of`].
//!
//! Layout:
//! ```text
//! /sessions/<session-id>/header.json        the header, pretty JSON
//! /sessions/<session-id>/session.jsonl      the transcript's own bytes, growing as it grows
//! /sessions/<session-id>/entries/NNNNNN-<id>.json   each entry in file order (also `<id>.json`)
//! /sessions/<session-id>/entries/new        write-only append point (one JSON object a line)
//! /sessions/<session-id>/leaf               the current leaf id; writable
//! /sessions/<session-id>/context.json       the context at the leaf, blobs resolved
//! /sessions/<session-id>/context.md         the context at the leaf as Markdown
//! /sessions/<session-id>/context.html       the same as one HTML page (no script)
//! /sessions/<session-id>/tree.txt           the entry tree, one line per entry
//! /sessions/<session-id>/usage.json         usage statistics, with a breakdown per model
//! /sessions/<session-id>/labels/<label>     symlink to ../entries/NNNNNN-<id>.json
//! /sessions/<session-id>/errors             the last failed writes' reasons
//! /sessions/<session-id>/blobs/<sha256>      the blobs the session references (same inodes
//!                                             as under /blobs)
//! /blobs/<sha256>                             the blob store's contents (checked on read)
//! /projects/<encoded-cwd>/<session-id>        symlink to ../../sessions/<session-id>; the
//!                                             workspace path encoded as the agent's legacy
//!                                             directory names are (`--home-u-proj--`)
//! /by-date/<YYYY-MM-DD>/<HH-MM title (id8)>   symlink to ../../sessions/<session-id>, by the
//!                                             day and time (UTC) the session started
//! /recent/<NNN title (id8)>                   symlink to ../sessions/<session-id>, the 100
//!                                             newest sessions, 001 the newest
//! /search/<query>/NNN-<sid>-<entry>.json      symlink to the hit's entry (../../sessions/…)
//! /search/<query>/results.jsonl               the hits, best first, one JSON object a line
//! /files/<a>/<b>/…/                           a directory per component of a path the
//!                                             sessions read or changed (the index's touches)
//! /files/<path>/NNN-<sid>-<entry>             symlink to the entry that touched the path or
//!                                             one under it (../…/sessions/<sid>/entries/
//!                                             <entry>.json), newest first
//! /files/<path>/touches.jsonl                 those touches, as `gjcfs files --json` prints
//! /history/prompts.jsonl                      the prompt history, one JSON object a line
//! /history/search/<query>                     the prompts matching <query>
//! /usage.json                                 the store's usage, replies copied into forks
//!                                             counted once, by day, project and model
//! ```
//!
//! Invariants:
//! - An inode number, once given to a node, names that node for the life of the [`Vfs`]
//!   (lookup and readdir agree; numbers are never reused). A name that does not exist gets
//!   no number, and a query's node (and a node under `files/`) is forgotten once the
//!   kernel forgets it, so the table does not grow with lookups of absent names or with
//!   every query ever asked.
//! - While reads are served by node (a read-only mount whose kernel opens files without
//!   asking, [`Vfs::serve_reads_by_node`]), a rendered file's number holds one version of
//!   its bytes: a change gives the file a new number, and the old one, which still reads as
//!   it was, is forgotten with the kernel (`snapshots.rs`). A file read through a handle
//!   never changes number.
//! - Every file's size is the exact length of the bytes a read returns at that moment; the
//!   bytes are computed by the engine and cached per session generation. A listing that
//!   gives attributes renders no view: a view not rendered for its session as it is now is
//!   listed with no size ([`ListedAttr::Unrendered`]), which a kernel must not keep, so
//!   that the size any caller sees comes from a lookup, which renders the view.
//! - Reading never writes: a session is loaded leniently for reading, migrations and the
//!   load-time sanitizer run in memory only. The first write opens it for writing through
//!   the engine's write rules (strict checks; a legacy transcript is copied into its
//!   workspace's managed scope first). A write either takes effect through the
//!   [`SessionManager`] or fails with a [`VfsError`] that keeps its cause (ENOSPC stays
//!   ENOSPC); nothing is ever accepted and dropped. The lines one write completes are
//!   appended all together or not at all. Failed writes and refused sessions are recorded
//!   in the session's `errors` file, which stays readable whatever state the session is in.
//! - A failed write latches nothing in the model: the next write opens the session afresh,
//!   so a fault that went away (a full disk, a mode briefly wrong) stops failing writes.
//! - No lock that other requests need is held across disk I/O: each session has a lock of
//!   its own (see `sessions/`), so loading a 300 MB session or computing the store's
//!   `usage.json` never stops `ls sessions/` or the reads of another session.
//! - A session is loaded on first touch and kept in an LRU of managers; on every access its
//!   file is compared (size, mtime, inode) with what the model last saw. Lines appended from
//!   outside (the agent) are read on their own through the manager's
//!   [`refresh_from_file`](gjcfs_engine::manager::SessionManager::refresh_from_file), so
//!   the view is fresh at once without reading the file again; a file replaced, shortened
//!   or changed in place is loaded afresh on the next touch, and a deleted one is gone.
//!   [`Vfs::poll_outside_changes`] makes the same check for every loaded session without
//!   waiting for an access.
//! - Kernel caches: every change the model makes or notices (an append, a branch, a failed
//!   write's reason, an outside change, a reload) is announced through the invalidation hook
//!   with the inode numbers of the session's nodes — its entries too when their content may
//!   have changed (an outside change, which may carry entry patches). Stable nodes
//!   ([`Attr::stable`]: entries, blobs) may therefore be cached long; the others briefly.
//!   While a watch covers every directory of the store, a session's fixed files and
//!   directories count as stable too (not its views, whose numbers hold one version
//!   each): each change of a listed session's file is announced as the watch reports it
//!   ([`Vfs::follow_store_events`]; a lost event announces every session).
//!   A directory's listing may be kept across opens only as [`Vfs::opendir`] tells
//!   ([`KeptListing`]): each open compares what the directory lists now with the copy's,
//!   so a listing is never served from before a change once the handles that listed the
//!   old entries are closed.
//! - A leaf moved through `leaf` lives in the loaded session, as in the agent: the file
//!   records it only through the next append. A session closed by the LRU or reloaded
//!   after an outside change comes back with the file's leaf (its last entry).
//! - Nothing from the store is followed or blocked on: the blob store and its blobs are
//!   checked to be a real directory and regular files before they are read, a session id
//!   that cannot name a directory (a newline, `/`, a leading `-`, over 255 bytes) is left
//!   out of the listing and reported through [`Vfs::take_notices`].
//! - The model never prints; callers log.
//!
//! [`SessionManager`]: gjcfs_engine::manager::SessionManager
// A library never prints: it returns errors and emits events; the programs decide.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

mod check;
mod content;
mod disk;
mod errors;
mod files;
// The sessions' paths are Unix paths, resolved with `/` (the touches keep the platform's).
#[cfg(all(test, unix))]
mod files_tests;
mod fs;
mod handles;
mod history;
mod ignore;
mod inode;
mod interface;
mod kept_listings;
mod layout;
mod listing;
mod lookup;
mod navigation;
mod nodes;
mod paths;
mod reads;
mod recent;
mod rendered_file;
// As `files_tests`: a store of Unix paths in memory.
#[cfg(all(test, unix))]
mod saved_renderings_tests;
mod search;
mod sessions;
mod shapes;
mod slots;
mod snapshots;
mod store_usage;
mod writes;

#[cfg(test)]
pub(crate) use fs::test_config;
pub use gjcfs_engine::io_cause::IoCause;
/// Secret redaction, for a mount server that loads its rules (`--redact-rules`).
pub use gjcfs_engine::redact;
/// The storages a model can be configured with ([`VfsConfig::storage`]).
pub use gjcfs_engine::storage::{mountinfo, FileStorage, SessionStorage};
pub use gjcfs_engine::store::discovery::SAVED_LISTING_FILE;
pub use gjcfs_engine::store::usage::SAVED_USAGE_FILE;
pub use handles::{Part, LEAF_MAX, LINE_MAX, PENDING_MAX};
pub use layout::{label_file_name, safe_session_name};
pub use writes::AttrChange;

pub use errors::VfsError;
pub use fs::{Caching, Invalidator, NamespaceChange, Opened, OpenedDir, Summary, Vfs, VfsConfig};
pub use inode::{Node, StoreFile, ROOT_INO};
pub use interface::{Attr, DirEntry, ListedAttr, NodeKind, OpenMode, SessionSource};
pub use kept_listings::{KeptListing, KEPT_MAX};
pub use paths::{same_ignoring_case, Unresolved};
pub use sessions::SavedRenderings;
/// The file in a store's cache directory that keeps what was rendered of its sessions
/// between runs: the names and sizes of their files ([`SavedRenderings`]).
pub const SAVED_RENDERINGS_FILE: &str = "renderings";
