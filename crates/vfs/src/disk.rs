//! The few facts the model reads from the disk itself rather than through a session: file
//! versions, directory mtimes, the blob store's names, through the storage the model is
//! configured with ([`super::VfsConfig::storage`]) like everything else. Nothing here
//! follows a symlink, and nothing opens a file (a FIFO cannot block a stat).

use std::path::Path;

use super::VfsError;
use gjcfs_engine::format::blob::is_valid_hash;
use gjcfs_engine::storage::{EntryKind, EntryStat, FileVersion, SessionStorage};

/// The version of the file at `path` (not following a symlink), if there is one: what
/// tells one state of it from another (a rewrite replaces the file, an append grows it).
pub(super) fn version(storage: &dyn SessionStorage, path: &Path) -> Option<FileVersion> {
    storage.lstat(path).ok().map(|stat| stat.version())
}

/// The mtime of `path` in milliseconds (0 when it cannot be read).
pub(super) fn mtime_ms(storage: &dyn SessionStorage, path: &Path) -> i64 {
    storage.lstat(path).map_or(0, |s| s.version().modified_ms())
}

/// The newest mtime of `root` and of the real directories in it.
pub(super) fn newest_dir_mtime_ms(storage: &dyn SessionStorage, root: &Path) -> i64 {
    let inner = storage
        .list_dirs(root)
        .map(|dirs| dirs.iter().map(|d| mtime_ms(storage, d)).max().unwrap_or(0))
        .unwrap_or(0);
    inner.max(mtime_ms(storage, root))
}

/// Whether the blob store directory is usable: missing (an empty store), or a real
/// directory. A symlink in its place is refused, never followed.
fn check_blob_dir(storage: &dyn SessionStorage, dir: &Path) -> Result<Option<EntryStat>, VfsError> {
    match storage.lstat(dir) {
        Ok(stat) if stat.kind == EntryKind::Dir => Ok(Some(stat)),
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
pub(super) fn blob_meta(
    storage: &dyn SessionStorage,
    dir: &Path,
    hash: Option<&str>,
) -> Result<(u64, i64), VfsError> {
    let Some(dir_meta) = check_blob_dir(storage, dir)? else {
        return match hash {
            None => Ok((0, 0)),
            Some(_) => Err(VfsError::NotFound),
        };
    };
    let Some(hash) = hash else {
        return Ok((0, dir_meta.version().modified_ms()));
    };
    match storage.lstat(&dir.join(hash)) {
        Ok(stat) if stat.kind == EntryKind::File => Ok((stat.len, stat.version().modified_ms())),
        Ok(_) => Err(VfsError::NotFound),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(VfsError::NotFound),
        Err(e) => Err(super::errors::from_io(&e, format!("blob {hash}: {e}"))),
    }
}

/// The names of the blobs in the store (regular files named by a valid hash), sorted.
pub(super) fn blob_names(
    storage: &dyn SessionStorage,
    dir: &Path,
) -> Result<Vec<String>, VfsError> {
    if check_blob_dir(storage, dir)?.is_none() {
        return Ok(Vec::new());
    }
    let mut names: Vec<String> = storage
        .list_files(dir)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|path| path.file_name()?.to_str().map(str::to_owned))
        .filter(|name| is_valid_hash(name))
        .collect();
    names.sort();
    Ok(names)
}

/// Whether the blob `hash` is a regular file in the store.
pub(super) fn has_blob(storage: &dyn SessionStorage, dir: &Path, hash: &str) -> bool {
    blob_meta(storage, dir, Some(hash)).is_ok()
}
