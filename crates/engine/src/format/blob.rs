//! The content-addressed blob store.
//!
//! Invariants:
//! - A blob lives at `<dir>/<hex>`, where `<hex>` is the lower-case SHA-256 of its bytes.
//!   The directory is `0700`, files `0600`.
//! - A hash is checked against `^[0-9a-f]{64}$` before any path is built from it, so a
//!   reference read from a session file can never name a path outside the store.
//! - [`BlobStore::put`] writes a temp file in the store, fsyncs it, renames it into place and
//!   fsyncs the directory: when it returns, the blob is durable, so a line that references it
//!   can be written next.
//! - A reference in a session is the string `blob:sha256:<hex>`.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::storage::{write_new_durable, SessionStorage};

/// The prefix of a blob reference.
pub const BLOB_REF_PREFIX: &str = "blob:sha256:";

/// A failure of the blob store.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    /// A hash (given here) is not 64 lower-case hex digits; no path was built from it.
    #[error("invalid blob hash {0:?} (expected 64 lower-case hex digits)")]
    InvalidHash(String),
    /// Reading or writing the store failed.
    #[error("blob store {path}: {source}")]
    Io {
        /// The store's directory (not the blob's own path).
        path: PathBuf,
        /// The failure underneath.
        source: io::Error,
    },
    /// A blob's bytes do not hash to its name.
    #[error("blob {hash} is corrupt: its content hashes to {actual}")]
    Corrupt {
        /// The hash the blob is stored under (64 lower-case hex digits).
        hash: String,
        /// The lower-case hex SHA-256 of the bytes it holds.
        actual: String,
    },
}

/// Whether `hash` is 64 lower-case hex digits.
pub fn is_valid_hash(hash: &str) -> bool {
    hash.len() == 64 && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The hash named by a `blob:sha256:<hex>` reference, if `text` is a valid one.
pub fn parse_blob_ref(text: &str) -> Option<&str> {
    text.strip_prefix(BLOB_REF_PREFIX)
        .filter(|h| is_valid_hash(h))
}

/// The reference string for a hash.
pub fn blob_ref(hash: &str) -> String {
    format!("{BLOB_REF_PREFIX}{hash}")
}

/// `bytes` as lower-case hex: the one hex encoding of the engine (hashes, ids, digests in
/// names).
pub fn hex(bytes: &[u8]) -> String {
    data_encoding::HEXLOWER.encode(bytes)
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// A blob store directory.
#[derive(Debug, Clone)]
pub struct BlobStore {
    dir: PathBuf,
    storage: Arc<dyn SessionStorage>,
}

impl BlobStore {
    /// The store in directory `dir`, reached through `storage`. Nothing is touched on disk:
    /// the directory is created (`0700`) by the first [`BlobStore::put`].
    pub fn new(dir: impl Into<PathBuf>, storage: Arc<dyn SessionStorage>) -> Self {
        BlobStore {
            dir: dir.into(),
            storage,
        }
    }

    /// The store's directory, which holds each blob under its hash.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn io_error(&self, source: io::Error) -> BlobError {
        BlobError::Io {
            path: self.dir.clone(),
            source,
        }
    }

    /// The path of a blob; the hash is validated first.
    pub fn path_of(&self, hash: &str) -> Result<PathBuf, BlobError> {
        if is_valid_hash(hash) {
            Ok(self.dir.join(hash))
        } else {
            Err(BlobError::InvalidHash(hash.to_owned()))
        }
    }

    /// Stores `bytes` durably and returns their hash.
    pub fn put(&self, bytes: &[u8]) -> Result<String, BlobError> {
        let hash = sha256_hex(bytes);
        let target = self.path_of(&hash)?;
        if self.get_checked(&hash).is_ok_and(|b| b.is_some()) {
            return Ok(hash);
        }
        self.storage
            .ensure_dir(&self.dir)
            .map_err(|e| self.io_error(e))?;
        let temp = self.dir.join(format!(
            "{hash}.tmp.{}.{}.{:08x}",
            std::process::id(),
            crate::format::time::now_millis(),
            rand::random::<u32>()
        ));
        let written = write_new_durable(self.storage.as_ref(), &temp, bytes)
            .and_then(|()| self.storage.rename(&temp, &target))
            .and_then(|()| self.storage.sync_dir(&self.dir));
        if let Err(e) = written {
            let _ = self.storage.unlink(&temp);
            return Err(self.io_error(e));
        }
        Ok(hash)
    }

    /// The bytes of a blob, `None` if it does not exist.
    pub fn get(&self, hash: &str) -> Result<Option<Vec<u8>>, BlobError> {
        let path = self.path_of(hash)?;
        match self.storage.read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io_error(e)),
        }
    }

    /// The bytes of a blob after checking they hash to `hash`.
    pub fn get_checked(&self, hash: &str) -> Result<Option<Vec<u8>>, BlobError> {
        let Some(bytes) = self.get(hash)? else {
            return Ok(None);
        };
        let actual = sha256_hex(&bytes);
        if actual != hash {
            return Err(BlobError::Corrupt {
                hash: hash.to_owned(),
                actual,
            });
        }
        Ok(Some(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{FileStorage, MemoryStorage};

    #[test]
    fn put_get_and_hash_validation() {
        let tmp = tempfile::tempdir().unwrap();
        let store = BlobStore::new(tmp.path().join("blobs"), Arc::new(FileStorage));
        let hash = store.put(b"hello").unwrap();
        assert_eq!(hash, sha256_hex(b"hello"));
        assert_eq!(store.get(&hash).unwrap().unwrap(), b"hello");
        assert_eq!(store.put(b"hello").unwrap(), hash);
        let mode = |p: &Path| FileStorage.lstat(p).unwrap().mode;
        assert_eq!(mode(store.dir()), 0o700);
        assert_eq!(mode(&store.path_of(&hash).unwrap()), 0o600);
        assert_eq!(
            FileStorage.list_files(store.dir()).unwrap().len(),
            1,
            "no temp files left"
        );
        for bad in ["../etc/passwd", "ABCDEF", &hash.to_uppercase(), &hash[..63]] {
            assert!(
                matches!(store.get(bad), Err(BlobError::InvalidHash(_))),
                "{bad}"
            );
        }
        let missing = sha256_hex(b"absent");
        assert_eq!(store.get(&missing).unwrap(), None);
        assert_eq!(parse_blob_ref(&blob_ref(&hash)), Some(hash.as_str()));
        assert_eq!(parse_blob_ref("blob:sha256:../../x"), None);
    }

    #[test]
    fn checked_read_detects_corruption() {
        let storage = MemoryStorage::new();
        let store = BlobStore::new("/blobs", Arc::new(storage.clone()));
        let hash = store.put(b"payload").unwrap();
        storage.put_file(&store.path_of(&hash).unwrap(), b"tampered");
        assert!(matches!(
            store.get_checked(&hash),
            Err(BlobError::Corrupt { .. })
        ));
        // A put of the real bytes repairs it.
        store.put(b"payload").unwrap();
        assert_eq!(store.get_checked(&hash).unwrap().unwrap(), b"payload");
    }
}
