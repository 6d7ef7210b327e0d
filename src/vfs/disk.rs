//! The few facts the model reads from the disk itself rather than through a session: file
//! stamps, directory mtimes, the blob store's names. Nothing here follows a symlink, and
//! nothing opens a file (a FIFO cannot block a stat).

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use super::VfsError;
use gjcfs_engine::blob::is_valid_hash;

/// What tells one state of a file from another: size, mtime and inode (a rewrite replaces
/// the file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileStamp {
    len: u64,
    mtime: SystemTime,
    ino: u64,
}

impl FileStamp {
    /// The stamp of the file at `path` (not following a symlink), if there is one.
    pub(super) fn of(path: &Path) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::symlink_metadata(path).ok()?;
        Some(FileStamp {
            len: meta.len(),
            mtime: meta.modified().ok()?,
            ino: meta.ino(),
        })
    }

    pub(super) fn len(&self) -> u64 {
        self.len
    }

    pub(super) fn millis(&self) -> i64 {
        millis(self.mtime)
    }
}

fn millis(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The mtime of `path` in milliseconds (0 when it cannot be read).
pub(super) fn mtime_ms(path: &Path) -> i64 {
    std::fs::symlink_metadata(path)
        .ok()
        .and_then(|m| m.modified().ok())
        .map_or(0, millis)
}

/// The newest mtime of `root` and of the real directories in it.
pub(super) fn newest_dir_mtime_ms(root: &Path) -> i64 {
    let inner = std::fs::read_dir(root)
        .map(|dirs| {
            dirs.filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| mtime_ms(&e.path()))
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0);
    inner.max(mtime_ms(root))
}

/// Whether the blob store directory is usable: missing (an empty store), or a real
/// directory. A symlink in its place is refused, never followed.
fn check_blob_dir(dir: &Path) -> Result<Option<std::fs::Metadata>, VfsError> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_dir() => Ok(Some(meta)),
        Ok(_) => Err(VfsError::Refused(format!(
            "{}: the blob store is not a real directory",
            dir.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(super::errors::from_io(
            &e,
            format!("{}: {e}", dir.display()),
        )),
    }
}

/// Size and mtime (ms) of the blob store directory (`hash` none) or of one blob in it. A
/// blob is a regular file: a symlink, a FIFO or a directory by that name is no blob.
pub(super) fn blob_meta(dir: &Path, hash: Option<&str>) -> Result<(u64, i64), VfsError> {
    let Some(dir_meta) = check_blob_dir(dir)? else {
        return match hash {
            None => Ok((0, 0)),
            Some(_) => Err(VfsError::NotFound),
        };
    };
    let Some(hash) = hash else {
        return Ok((0, dir_meta.modified().map_or(0, millis)));
    };
    match std::fs::symlink_metadata(dir.join(hash)) {
        Ok(meta) if meta.file_type().is_file() => {
            Ok((meta.len(), meta.modified().map_or(0, millis)))
        }
        Ok(_) => Err(VfsError::NotFound),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(VfsError::NotFound),
        Err(e) => Err(super::errors::from_io(&e, format!("blob {hash}: {e}"))),
    }
}

/// The names of the blobs in the store (regular files named by a valid hash), sorted.
pub(super) fn blob_names(dir: &Path) -> Result<Vec<String>, VfsError> {
    if check_blob_dir(dir)?.is_none() {
        return Ok(Vec::new());
    }
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|name| is_valid_hash(name))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    Ok(names)
}

/// Whether the blob `hash` is a regular file in the store.
pub(super) fn has_blob(dir: &Path, hash: &str) -> bool {
    blob_meta(dir, Some(hash)).is_ok()
}
