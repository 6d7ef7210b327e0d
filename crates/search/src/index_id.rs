//! What names one index file, so that a claim ([`super::claim`]) vouches for that file and
//! no other: its identity on the disk (device and inode) and the stamp written into its
//! `meta` row when its tables were made (16 random bytes, in hex).
//!
//! An index file is named only while a connection has it open and it is still the file at
//! the index's path: the stamp the connection reads must be the one a connection opened at
//! the path now reads, between two `stat`s of the path that agree. A file removed, replaced
//! (a new identity, or a new index made in it with a new stamp), truncated or damaged (no
//! stamp can be read) is not the one a connection opened before: whoever holds that
//! connection can no longer name, or vouch for, the file at the path.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use super::index_file::HEADER_LEN;
use super::schema::BUSY_TIMEOUT;
use gjcfs_engine::storage::{FileId, FileStorage, SessionStorage};

/// What names one index file: its identity and its stamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexId {
    pub file: FileId,
    pub stamp: String,
}

impl IndexId {
    /// `DEV INO STAMP`, as a claim holds it.
    pub fn line(&self) -> String {
        format!("{} {} {}", self.file.dev, self.file.ino, self.stamp)
    }
}

/// The stamp of the index `conn` has open.
fn stamp(conn: &Connection) -> rusqlite::Result<String> {
    conn.query_row("SELECT stamp FROM meta WHERE id = 1", [], |r| r.get(0))
}

/// The stamp of the index file at `path` as a new read-only connection reads it.
fn stamp_at(path: &Path) -> rusqlite::Result<String> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    stamp(&conn)
}

/// The name of the index file at `path` when `conn` has that file open; `None` when the
/// path names no file, another one, or one whose stamp cannot be read.
pub fn open_file_id(conn: &Connection, path: &Path) -> Option<IndexId> {
    let held = stamp(conn).ok()?;
    let before = FileStorage.version(path).ok()?;
    // A connection opened on an empty file would remove its write-ahead log.
    if before.len < HEADER_LEN {
        return None;
    }
    let at_path = stamp_at(path).ok()?;
    let after = FileStorage.version(path).ok()?;
    (before.id == after.id && at_path == held).then_some(IndexId {
        file: after.id,
        stamp: held,
    })
}
