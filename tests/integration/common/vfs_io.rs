//! The engine's storage and a `Vfs` over a `MemoryStorage`, and whole-file reads and writes
//! through a `Vfs` as a kernel would issue them: open, read or write, release. Used by the
//! model tests and by the `vfs_ops` fuzz check (`fuzz/vfs_ops.rs`), so it needs nothing
//! else of the tests.

use std::path::PathBuf;
use std::sync::Arc;

use gjcfs::engine::format::blob::BlobStore;
use gjcfs::engine::manager::StorageConfig;
use gjcfs::engine::storage::{MemoryStorage, SessionStorage};
use gjcfs::vfs::{OpenMode, SessionSource, Vfs, VfsConfig, VfsError};

/// The managed sessions' root of every store in memory here.
pub const SESSIONS_ROOT: &str = "/agent/sessions";

/// The engine's storage and blob store (`/agent/blobs`) over `storage`.
pub fn config(storage: &MemoryStorage) -> StorageConfig {
    let shared: Arc<dyn SessionStorage> = Arc::new(storage.clone());
    StorageConfig {
        blobs: BlobStore::new("/agent/blobs", shared.clone()),
        storage: shared,
    }
}

/// A writable mount model over the managed sessions under [`SESSIONS_ROOT`] of `storage`,
/// with the blobs in `/agent/blobs` and at most four sessions loaded at once.
pub fn memory_vfs(storage: &MemoryStorage) -> Vfs {
    Vfs::new(memory_config(storage))
}

/// The configuration of [`memory_vfs`].
pub fn memory_config(storage: &MemoryStorage) -> VfsConfig {
    VfsConfig {
        storage: Arc::new(storage.clone()),
        source: SessionSource::SessionsRoot(PathBuf::from(SESSIONS_ROOT)),
        blob_dir: "/agent/blobs".into(),
        read_only: false,
        max_loaded: 4,
        history_db: "/agent/history.db".into(),
        owner_uid: None,
        search_index: None,
        saved_usage: None,
        saved_listing: None,
        saved_renderings: None,
        redact: false,
    }
}

/// Reads node `ino` whole (up to 1 MiB).
pub fn read_file(v: &Vfs, ino: u64) -> Result<Vec<u8>, VfsError> {
    let read = OpenMode {
        read: true,
        ..Default::default()
    };
    let o = v.open(ino, read)?;
    let bytes = v.read(o.fh, 0, 1 << 20);
    v.release(o.fh)?;
    bytes
}

/// Writes `pieces` one after another to `ino` opened for writing (truncated): the first
/// failure, the file released either way.
pub fn write_file(v: &Vfs, ino: u64, pieces: &[&[u8]]) -> Result<(), VfsError> {
    let mode = OpenMode {
        write: true,
        truncate: true,
        ..Default::default()
    };
    let o = v.open(ino, mode)?;
    let mut offset = 0;
    for piece in pieces {
        if let Err(e) = v.write(o.fh, offset, piece) {
            v.release(o.fh).ok();
            return Err(e);
        }
        offset += piece.len() as u64;
    }
    v.release(o.fh)
}
