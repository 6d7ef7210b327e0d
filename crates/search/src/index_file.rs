//! The index file: where it lives, opening it (and replacing what is not an index of this
//! format), removing it, and an index in memory.

use std::path::{Path, PathBuf};

use rusqlite::Connection;

use super::file_rows::path_bytes;
use super::instances;
use super::schema::{configure, create, is_current, is_empty};
use super::SearchError;
use gjcfs_engine::storage::{FileStorage, OpenMode, SessionStorage};

/// The index file's name in its directory.
pub const INDEX_FILE: &str = "search.sqlite";

/// Where the index of a store lives by default: `<cache>/gjcfs/search/<key>` where
/// `<cache>` is the user's cache directory ([`cache_dir`]: `$XDG_CACHE_HOME` if absolute,
/// else `~/.cache`; on Windows `%LOCALAPPDATA%`), and `<key>` is the store directory's name
/// followed by a digest of its absolute path, so every agent directory (or session
/// directory) has its own. `None` when there is no cache directory.
///
/// [`cache_dir`]: gjcfs_engine::storage::user_dirs::cache_dir
pub fn default_index_dir(store: &Path) -> Option<PathBuf> {
    use sha2::{Digest, Sha256};
    let cache = gjcfs_engine::storage::user_dirs::cache_dir()?;
    let store = FileStorage
        .canonicalize(store)
        .unwrap_or_else(|_| store.to_owned());
    let digest = Sha256::digest(path_bytes(&store));
    let name = store
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let hex = gjcfs_engine::format::blob::hex(&digest[..8]);
    Some(
        cache
            .join("gjcfs")
            .join("search")
            .join(format!("{name}-{hex}")),
    )
}

/// Opens the index at `path`, replacing it when it is not a current index.
pub fn open_file(dir: &Path, path: &Path) -> Result<Connection, SearchError> {
    FileStorage
        .ensure_dir(dir)
        .map_err(|source| SearchError::CreateDir {
            path: dir.to_owned(),
            source,
        })?;
    let sql = |source| SearchError::Sqlite {
        path: path.to_owned(),
        source,
    };
    if lost_its_pages(path) {
        return recreate(path);
    }
    create_owner_only(path);
    let attempt = || -> rusqlite::Result<Option<Connection>> {
        let conn = Connection::open(path)?;
        configure(&conn)?;
        if is_empty(&conn)? {
            create(&conn)?;
            return Ok(Some(conn));
        }
        Ok(is_current(&conn)?.then_some(conn))
    };
    match attempt() {
        Ok(Some(conn)) => return Ok(conn),
        // Another format or application, or damaged: it is a cache, so it is replaced.
        Ok(None) => {}
        Err(rusqlite::Error::SqliteFailure(e, _))
            if matches!(
                e.code,
                rusqlite::ErrorCode::NotADatabase
                    | rusqlite::ErrorCode::DatabaseCorrupt
                    | rusqlite::ErrorCode::SchemaChanged
                    | rusqlite::ErrorCode::Unknown
            ) => {}
        Err(e @ rusqlite::Error::SqliteFailure(..)) if !is_permission(&e) => {}
        Err(e) => return Err(sql(e)),
    }
    recreate(path)
}

/// The length of SQLite's file header: a shorter file holds no page of a database.
pub(super) const HEADER_LEN: u64 = 100;

/// Whether the file at `path` is shorter than SQLite's header while a write-ahead log lies
/// beside it: an index truncated (a new one is empty with no log, and has its first page
/// before it writes a log). SQLite would apply the log to the empty file, or wait for the
/// connections that still have it open, so the three files are replaced.
fn lost_its_pages(path: &Path) -> bool {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    FileStorage.version(path).is_ok_and(|v| v.len < HEADER_LEN)
        && FileStorage.exists(Path::new(&wal))
}

/// Creates the index file empty and owner-only (0600, or a DACL for the owner on Windows) if
/// it is missing: SQLite would create it readable by everyone (0644), and it gives its
/// write-ahead log and shared-memory files the database file's mode. An empty file is an
/// empty database. When the file cannot be made here, SQLite's open says why.
fn create_owner_only(path: &Path) {
    let _ = FileStorage.open_writer(path, OpenMode::CreateNew);
}

/// Whether an error says the file is damaged or not a database.
pub fn is_corrupt(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if matches!(
        f.code,
        rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase
    ))
}

/// Whether an error says another connection kept the write lock past the busy timeout.
pub fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if matches!(
        f.code,
        rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
    ))
}

/// Replaces the index file by a new empty index.
pub fn recreate(path: &Path) -> Result<Connection, SearchError> {
    let sql = |source| SearchError::Sqlite {
        path: path.to_owned(),
        source,
    };
    remove_index_files(path).map_err(|source| SearchError::Replace {
        path: path.to_owned(),
        source,
    })?;
    create_owner_only(path);
    let conn = Connection::open(path).map_err(sql)?;
    configure(&conn).map_err(sql)?;
    create(&conn).map_err(sql)?;
    Ok(conn)
}

/// Whether SQLite could not open or write the file because of where it is (read-only
/// directory or file, no permission), which replacing it would not cure.
fn is_permission(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if matches!(
        f.code,
        rusqlite::ErrorCode::ReadOnly
            | rusqlite::ErrorCode::CannotOpen
            | rusqlite::ErrorCode::PermissionDenied
            | rusqlite::ErrorCode::DatabaseBusy
            | rusqlite::ErrorCode::DatabaseLocked
    ))
}

/// Removes the index file at `path` with SQLite's `-wal` and `-shm` files (those missing
/// are no error).
pub(super) fn remove_index_files(path: &Path) -> std::io::Result<()> {
    for suffix in ["", "-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        match FileStorage.unlink(Path::new(&name)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

pub fn open_memory() -> Result<Connection, SearchError> {
    let sql = |source| SearchError::Sqlite {
        path: PathBuf::from(":memory:"),
        source,
    };
    let conn = Connection::open_in_memory().map_err(sql)?;
    instances::register(&conn).map_err(sql)?;
    create(&conn).map_err(sql)?;
    Ok(conn)
}

// The test looks at the index file with the standard library, by its Unix inode.
#[cfg(all(test, unix))]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn an_index_another_connection_keeps_locked_is_never_replaced_on_opening() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("index");
        let path = dir.join(INDEX_FILE);
        drop(open_file(&dir, &path).unwrap());
        let before = std::fs::read(&path).unwrap();
        let ino = |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
        let inode = ino(&path);
        // A connection that keeps every lock of the file: opening waits, then is busy.
        let holder = Connection::open(&path).unwrap();
        holder
            .execute_batch("PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE; UPDATE meta SET files_gen = files_gen + 1")
            .unwrap();
        let opened = open_file(&dir, &path);
        assert!(
            matches!(&opened, Err(SearchError::Sqlite { source, .. }) if is_busy(source)),
            "{:?}",
            opened.map(drop)
        );
        holder.execute_batch("ROLLBACK").unwrap();
        drop(holder);
        assert_eq!(ino(&path), inode, "the same file");
        assert_eq!(std::fs::read(&path).unwrap(), before, "left as it was");
        assert!(open_file(&dir, &path).is_ok());
    }
}
