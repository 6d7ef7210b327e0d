//! The `files` table's rows: the state of each indexed file and the stamps of all.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, Row};

use super::{FileState, Stamp, Stamps};
use gjcfs_engine::read::load::ReadMark;
use gjcfs_engine::storage::{path_from_bytes, path_to_bytes, FileId, FileVersion};

pub fn path_of(bytes: &[u8]) -> PathBuf {
    path_from_bytes(bytes).into_owned()
}

pub fn path_bytes(path: &Path) -> &[u8] {
    path_to_bytes(path)
}

/// The version of a file read from five columns of a row from `at` on: `dev`, `ino`,
/// `len`, `mtime_ns`, `ctime_ns`, as [`version_columns`] writes them.
pub fn version_of_row(row: &Row, at: usize) -> rusqlite::Result<FileVersion> {
    Ok(FileVersion {
        id: FileId {
            dev: row.get::<_, i64>(at)? as u64,
            ino: row.get::<_, i64>(at + 1)? as u64,
        },
        len: row.get::<_, i64>(at + 2)? as u64,
        mtime_ns: i128::from(row.get::<_, i64>(at + 3)?),
        ctime_ns: i128::from(row.get::<_, i64>(at + 4)?),
    })
}

/// The columns `dev`, `ino`, `len`, `mtime_ns` and `ctime_ns` of a version (SQLite
/// integers are 64-bit: the bits of the unsigned numbers, and the times in nanoseconds,
/// which fit until the year 2262).
pub fn version_columns(version: &FileVersion) -> [i64; 5] {
    [
        version.id.dev as i64,
        version.id.ino as i64,
        version.len as i64,
        version.mtime_ns as i64,
        version.ctime_ns as i64,
    ]
}

/// Columns of `files` read into a [`FileState`], in this order.
pub const FILE_COLUMNS: &str = "id, dev, ino, len, mtime_ns, ctime_ns, mark_end, mark_newlines, \
     mark_tail, patches_apply, incremental, next_seq, leaf_seq, leaf_id";

pub fn file_state(row: &Row, at: usize) -> rusqlite::Result<FileState> {
    let stat = version_of_row(row, at + 1)?;
    let mark = match row.get::<_, Option<i64>>(at + 6)? {
        Some(end) => Some(ReadMark {
            id: stat.id,
            end: end as u64,
            newlines: row.get::<_, i64>(at + 7)? as usize,
            tail: row.get(at + 8)?,
            patches_apply: row.get(at + 9)?,
        }),
        None => None,
    };
    let leaf = match (row.get::<_, Option<i64>>(at + 12)?, row.get(at + 13)?) {
        (Some(seq), Some(id)) => Some((seq, id)),
        _ => None,
    };
    Ok(FileState {
        id: row.get(at)?,
        stat,
        mark,
        incremental: row.get(at + 10)?,
        next_seq: row.get(at + 11)?,
        leaf,
    })
}

/// The state of file `id`.
pub fn load_state(conn: &Connection, id: i64) -> rusqlite::Result<FileState> {
    conn.prepare_cached(&format!("SELECT {FILE_COLUMNS} FROM files WHERE id = ?1"))?
        .query_row([id], |r| file_state(r, 0))
}

/// The stamp of every indexed file, read from the `files_stamp` index alone.
pub fn read_stamps(conn: &Connection) -> rusqlite::Result<Stamps> {
    let mut stmt = conn.prepare_cached(
        "SELECT path, id, dev, ino, len, mtime_ns, ctime_ns FROM files INDEXED BY files_stamp",
    )?;
    let mut rows = stmt.query([])?;
    let mut stamps = Stamps::default();
    while let Some(row) = rows.next()? {
        let stat = version_of_row(row, 2)?;
        let path = path_from_bytes(row.get_ref(0)?.as_blob()?);
        stamps.insert(
            &path,
            Stamp {
                id: row.get(1)?,
                stat,
            },
        );
    }
    Ok(stamps)
}
