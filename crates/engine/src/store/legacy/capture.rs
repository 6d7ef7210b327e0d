//! Reading a file whole through one no-follow open, with the identity it was read at.

use std::io;
use std::path::Path;

use crate::storage::{EntryKind, EntryStat, FileId, FileVersion, ReadFile, SessionStorage};

use super::{FileIdentity, LegacyError};
use crate::format::blob::sha256_hex;

/// What the legacy code holds of a file: its version, and its number of hard links (a
/// file with more than one is not taken).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stat {
    pub(super) version: FileVersion,
    pub(super) nlink: u64,
}

impl Stat {
    /// What `lstat` said about an entry.
    pub(super) fn of(entry: &EntryStat) -> Self {
        Stat {
            version: entry.version(),
            nlink: entry.links,
        }
    }

    /// What an open file is now.
    pub(super) fn of_open(file: &dyn ReadFile) -> io::Result<Self> {
        Ok(Stat {
            version: FileVersion {
                id: file.id(),
                len: file.size()?,
                mtime_ns: file.mtime_ns()?,
                ctime_ns: file.ctime_ns()?,
            },
            nlink: file.links()?,
        })
    }

    pub(super) fn id(&self) -> FileId {
        self.version.id
    }

    pub(super) fn size(&self) -> u64 {
        self.version.len
    }

    /// Same object, same size, same modification and change times.
    pub(super) fn same_version(&self, other: &Stat) -> bool {
        self.version == other.version
    }

    /// The identity a listing or a receipt records of this version, with the file's hash.
    pub(super) fn identity(&self, sha256: String) -> FileIdentity {
        FileIdentity {
            dev: self.version.id.dev,
            ino: self.version.id.ino,
            size: self.version.len,
            mtime_ns: self.version.mtime_ns,
            sha256,
        }
    }
}

/// Makes the entries of `dir` durable; a failure is `durability_failed`.
pub(super) fn sync_dir(storage: &dyn SessionStorage, dir: &Path) -> Result<(), LegacyError> {
    storage
        .sync_dir(dir)
        .map_err(|e| LegacyError::DurabilityFailed {
            path: dir.to_owned(),
            why: e.to_string(),
        })
}

/// A whole file read through one no-follow open.
pub(super) struct Snapshot {
    pub(super) bytes: Vec<u8>,
    pub(super) stat: Stat,
    pub(super) sha256: String,
}

pub(super) enum CaptureError {
    /// Missing, a symlink, not a regular file, or a read error.
    Unreadable,
    /// The file changed while it was read, or the name now points at another file.
    Changed,
}

/// A regular file open for reading, and what it was when opened.
pub(super) struct Opened {
    pub(super) file: Box<dyn ReadFile>,
    pub(super) before: Stat,
}

pub(super) fn capture(storage: &dyn SessionStorage, path: &Path) -> Result<Snapshot, CaptureError> {
    let opened = open_regular(storage, path)?;
    finish_capture(storage, path, opened, Vec::new())
}

/// Opens `path` without following a symlink; it must be a regular file (the storage refuses
/// anything else before a byte is read).
pub(super) fn open_regular(
    storage: &dyn SessionStorage,
    path: &Path,
) -> Result<Opened, CaptureError> {
    let file = storage
        .open_read_at(path)
        .map_err(|_| CaptureError::Unreadable)?;
    let before = Stat::of_open(file.as_ref()).map_err(|_| CaptureError::Unreadable)?;
    Ok(Opened { file, before })
}

/// Appends to `bytes` what `file` holds from `bytes.len()` on, at most `max` bytes in all.
pub(super) fn read_on(file: &dyn ReadFile, bytes: &mut Vec<u8>, max: usize) -> io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    while bytes.len() < max {
        let want = buf.len().min(max - bytes.len());
        match file.read_at(&mut buf[..want], bytes.len() as u64)? {
            0 => break,
            n => bytes.extend_from_slice(&buf[..n]),
        }
    }
    Ok(())
}

/// Reads the rest of the open file after `bytes` (its start, already read) and checks that
/// neither the file nor the name changed meanwhile.
pub(super) fn finish_capture(
    storage: &dyn SessionStorage,
    path: &Path,
    opened: Opened,
    mut bytes: Vec<u8>,
) -> Result<Snapshot, CaptureError> {
    let unreadable = |_| CaptureError::Unreadable;
    let Opened { file, before } = opened;
    bytes.reserve((before.size() as usize).saturating_sub(bytes.len()));
    read_on(file.as_ref(), &mut bytes, usize::MAX).map_err(unreadable)?;
    let after = Stat::of_open(file.as_ref()).map_err(unreadable)?;
    let named = storage.lstat(path).map_err(unreadable)?;
    if named.kind != EntryKind::File
        || !before.same_version(&after)
        || !after.same_version(&Stat::of(&named))
        || bytes.len() as u64 != after.size()
    {
        return Err(CaptureError::Changed);
    }
    Ok(Snapshot {
        sha256: sha256_hex(&bytes),
        bytes,
        stat: after,
    })
}
