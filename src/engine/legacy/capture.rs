//! Reading a file whole through one no-follow descriptor, with the identity it was read at,
//! and creating owner-only files and directories.

use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use super::{sha256_hex, LegacyError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stat {
    pub(super) dev: u64,
    pub(super) ino: u64,
    pub(super) size: u64,
    pub(super) mtime_ns: i128,
    pub(super) nlink: u64,
}

impl Stat {
    pub(super) fn of(meta: &Metadata) -> Self {
        Stat {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128,
            nlink: meta.nlink(),
        }
    }

    /// Same object, same size, same mtime.
    pub(super) fn same_version(&self, other: &Stat) -> bool {
        self.dev == other.dev
            && self.ino == other.ino
            && self.size == other.size
            && self.mtime_ns == other.mtime_ns
    }
}

pub(super) fn open_no_follow(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
}

pub(super) fn create_owner_only(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

pub(super) fn create_owner_only_dir(path: &Path) -> io::Result<()> {
    fs::DirBuilder::new().mode(0o700).create(path)
}

pub(super) fn sync_dir(dir: &Path) -> Result<(), LegacyError> {
    crate::storage::open_dir(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| LegacyError::DurabilityFailed {
            path: dir.to_owned(),
            why: e.to_string(),
        })
}

/// A whole file read through one no-follow descriptor.
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

pub(super) fn capture(path: &Path) -> Result<Snapshot, CaptureError> {
    let (file, before) = open_regular(path)?;
    finish_capture(path, file, &before, Vec::new())
}

/// Opens `path` without following a symlink; it must be a regular file.
pub(super) fn open_regular(path: &Path) -> Result<(File, Metadata), CaptureError> {
    let file = open_no_follow(path).map_err(|_| CaptureError::Unreadable)?;
    let before = file.metadata().map_err(|_| CaptureError::Unreadable)?;
    if !before.is_file() {
        return Err(CaptureError::Unreadable);
    }
    Ok((file, before))
}

/// Reads the rest of `file` after `bytes` (its start, already read) and checks that neither
/// the file nor the name changed meanwhile.
pub(super) fn finish_capture(
    path: &Path,
    mut file: File,
    before: &Metadata,
    mut bytes: Vec<u8>,
) -> Result<Snapshot, CaptureError> {
    let unreadable = |_| CaptureError::Unreadable;
    bytes.reserve((before.len() as usize).saturating_sub(bytes.len()));
    file.read_to_end(&mut bytes).map_err(unreadable)?;
    let after = Stat::of(&file.metadata().map_err(unreadable)?);
    let named = fs::symlink_metadata(path).map_err(unreadable)?;
    if !named.file_type().is_file()
        || !Stat::of(before).same_version(&after)
        || !after.same_version(&Stat::of(&named))
        || bytes.len() as u64 != after.size
    {
        return Err(CaptureError::Changed);
    }
    Ok(Snapshot {
        sha256: sha256_hex(&bytes),
        bytes,
        stat: after,
    })
}
