//! Rendered files as one immutable version per inode number: every rendered file for a
//! platform whose kernel opens files without asking the model
//! ([`super::Vfs::serve_reads_by_node`]), and in every mount a session's views, whose
//! bytes come from its transcript alone ([`super::Vfs::is_versioned`]).
//!
//! With no open there is no handle to hold what a reader started reading, and the kernel
//! keeps a file's pages across opens and readers (through handles too, for the views:
//! they are opened with `FOPEN_KEEP_CACHE`). So every version of such a file gets a number
//! of its own:
//! - looking a file up finds its number: the one that holds bytes rendered from the
//!   transcript as it is now, known by the transcript's version without rendering, else
//!   the bytes are rendered, and bytes that differ from what its number holds get a new
//!   number, so a kernel sees a new file, with pages of its own; a view whose size was
//!   saved for the transcript's version (`sessions/saved_renderings.rs`) gets a number holding that
//!   size alone, and is rendered at its first read;
//! - the attributes and reads of a number serve what it holds, and only that: a file opened
//!   before a change reads whole as it was, never half old and half new.
//!
//! Entries, blobs and the transcript keep one number each and are read as they are now,
//! their changes announced as they are for reads through handles.
//!
//! A number's attributes and a digest of its bytes are kept until the kernel forgets it
//! (the model counts the references it hands out, `inode.rs`). The bytes themselves are
//! dropped, least recently asked first, once more than [`KEPT_MAX`] files or
//! [`KEPT_BYTES`] bytes are kept; a read then renders the file again, and serves it if it
//! still has the digest. Only a version that is gone reads as stale (`ESTALE`): a file
//! opened before it changed, read again after many other files were. Read through handles,
//! a file's bytes are kept only up to [`HANDLE_KEPT_MAX`]: an open holds what it read.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::content::Bytes;
use super::Attr;
use gjcfs_engine::storage::FileVersion;

/// How many rendered files keep their bytes.
pub const KEPT_MAX: usize = 1024;
/// The longest bytes kept while files are read through handles (which hold what they
/// read): a larger file is rendered for the open that reads it and let go with it.
pub const HANDLE_KEPT_MAX: usize = super::rendered_file::KEPT_MAX;
/// How many bytes they keep together.
pub const KEPT_BYTES: usize = 256 << 20;

#[derive(Debug, Default)]
pub(super) struct Snapshots {
    on: AtomicBool,
    kept: Mutex<Kept>,
}

#[derive(Debug, Default)]
struct Kept {
    by_ino: HashMap<u64, Version>,
    /// How many versions hold their bytes, and how many bytes.
    with_bytes: usize,
    bytes: usize,
    /// Counts every use: the order versions were last asked in.
    clock: u64,
}

/// What one number holds.
#[derive(Debug)]
struct Version {
    attr: Attr,
    /// The version of the session file its bytes were rendered from, when they are the
    /// session's alone ([`super::inode::Node::rendered_from_transcript`]): while the file
    /// keeps it, the bytes are the same without rendering them again.
    source: Option<FileVersion>,
    /// `None` for a version given its size alone (saved from an earlier rendering,
    /// [`Snapshots::take_sized`]), until its bytes are rendered.
    digest: Option<u64>,
    /// `None` once dropped to make room.
    bytes: Option<Bytes>,
    used: u64,
}

/// What a number holds next to bytes rendered now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Compared {
    /// Nothing is kept for it.
    Unknown,
    /// The same bytes: its attributes.
    Same(Attr),
    Different,
    /// Bytes rendered from the session file at the version it holds, of another size than
    /// the one it was given ([`Snapshots::take_sized`]): that size was saved wrong.
    Missized,
}

fn digest(bytes: &[u8]) -> u64 {
    let mut hasher = DefaultHasher::new();
    bytes.hash(&mut hasher);
    hasher.finish()
}

impl Snapshots {
    /// From now on files are read by node.
    pub fn enable(&self) {
        self.on.store(true, Ordering::SeqCst);
    }

    pub fn enabled(&self) -> bool {
        self.on.load(Ordering::SeqCst)
    }

    /// The attributes of number `ino`, if it holds a version.
    pub fn attr(&self, ino: u64) -> Option<Attr> {
        self.kept.lock().by_ino.get(&ino).map(|v| v.attr)
    }

    /// The bytes of number `ino`, if they are kept.
    pub fn bytes(&self, ino: u64) -> Option<Bytes> {
        let mut kept = self.kept.lock();
        kept.clock += 1;
        let clock = kept.clock;
        let version = kept.by_ino.get_mut(&ino)?;
        version.used = clock;
        version.bytes.clone()
    }

    /// The attributes of number `ino` if it holds bytes rendered from the session file at
    /// `source`.
    pub fn by_source(&self, ino: u64, source: &FileVersion) -> Option<Attr> {
        let kept = self.kept.lock();
        let version = kept.by_ino.get(&ino)?;
        (version.source.as_ref() == Some(source)).then_some(version.attr)
    }

    /// Whether number `ino` holds `fresh` (rendered from the session file at `source`);
    /// when it does and its bytes were dropped, `fresh` is kept in their place.
    pub fn compare(&self, ino: u64, fresh: &Bytes, source: Option<FileVersion>) -> Compared {
        let mut kept = self.kept.lock();
        let Some(version) = kept.by_ino.get_mut(&ino) else {
            return Compared::Unknown;
        };
        let sized = version.attr.size == fresh.len() as u64;
        let same = match (&version.bytes, version.digest) {
            (Some(bytes), _) => Arc::ptr_eq(bytes, fresh) || bytes == fresh,
            (None, Some(kept)) => sized && kept == digest(fresh),
            // Given its size alone: these are its bytes if they have that size.
            (None, None) => sized,
        };
        if !same && version.digest.is_none() && source.is_some() && version.source == source {
            // A size saved wrong: its version no longer stands for the session file.
            version.source = None;
            return Compared::Missized;
        }
        if !same {
            return Compared::Different;
        }
        version.digest = version.digest.or_else(|| Some(digest(fresh)));
        version.source = source.or(version.source);
        let attr = version.attr;
        if version.bytes.is_none() && self.keeps(fresh) {
            kept.keep_bytes(ino, fresh.clone());
        }
        Compared::Same(attr)
    }

    /// Keeps `bytes` (rendered from the session file at `source`) as what the new number
    /// `attr.ino` holds.
    pub fn take(&self, bytes: Bytes, attr: Attr, source: Option<FileVersion>) {
        let mut kept = self.kept.lock();
        let version = Version {
            attr,
            source,
            digest: Some(digest(&bytes)),
            bytes: None,
            used: 0,
        };
        if let Some(old) = kept.by_ino.insert(attr.ino, version) {
            kept.uncount(&old);
        }
        if self.keeps(&bytes) {
            kept.keep_bytes(attr.ino, bytes);
        }
    }

    /// Gives the new number `attr.ino` the version of a file rendered from the session
    /// file at `source` whose size alone is known (`attr.size`, saved from an earlier
    /// rendering of that version): its bytes are rendered at its first read, and served if
    /// they have that size.
    pub fn take_sized(&self, attr: Attr, source: FileVersion) {
        let mut kept = self.kept.lock();
        let version = Version {
            attr,
            source: Some(source),
            digest: None,
            bytes: None,
            used: 0,
        };
        if let Some(old) = kept.by_ino.insert(attr.ino, version) {
            kept.uncount(&old);
        }
    }

    /// Whether `bytes` are kept: always while files are read by node (nothing else holds
    /// them), up to [`HANDLE_KEPT_MAX`] while they are read through handles.
    fn keeps(&self, bytes: &Bytes) -> bool {
        self.enabled() || bytes.len() <= HANDLE_KEPT_MAX
    }

    /// The kernel holds no reference to `ino` any more: nothing of it is kept.
    pub fn forget(&self, ino: u64) {
        let mut kept = self.kept.lock();
        if let Some(old) = kept.by_ino.remove(&ino) {
            kept.uncount(&old);
        }
    }
}

impl Kept {
    /// Gives the version of `ino` its bytes, and makes room if they are too many.
    fn keep_bytes(&mut self, ino: u64, bytes: Bytes) {
        self.clock += 1;
        let used = self.clock;
        let len = bytes.len();
        let version = self.by_ino.get_mut(&ino).expect("a kept version");
        version.used = used;
        match version.bytes.replace(bytes) {
            Some(old) => self.bytes = self.bytes - old.len() + len,
            None => {
                self.with_bytes += 1;
                self.bytes += len;
            }
        }
        if self.with_bytes > KEPT_MAX || self.bytes > KEPT_BYTES {
            self.drop_oldest_bytes(ino);
        }
    }

    fn uncount(&mut self, old: &Version) {
        if let Some(bytes) = &old.bytes {
            self.with_bytes -= 1;
            self.bytes -= bytes.len();
        }
    }

    /// Drops the bytes of the least recently asked versions until a quarter of the room is
    /// free, never those of `newest`.
    fn drop_oldest_bytes(&mut self, newest: u64) {
        let mut by_use: Vec<(u64, u64)> = self
            .by_ino
            .iter()
            .filter(|(&ino, v)| ino != newest && v.bytes.is_some())
            .map(|(&ino, v)| (v.used, ino))
            .collect();
        by_use.sort_unstable();
        for (_, ino) in by_use {
            if self.with_bytes <= KEPT_MAX * 3 / 4 && self.bytes <= KEPT_BYTES * 3 / 4 {
                break;
            }
            let version = self.by_ino.get_mut(&ino).expect("listed");
            let len = version.bytes.take().map_or(0, |b| b.len());
            self.with_bytes -= 1;
            self.bytes -= len;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(text: &str) -> Bytes {
        Arc::new(text.as_bytes().to_vec())
    }

    fn attr(ino: u64, size: usize) -> Attr {
        Attr {
            ino,
            kind: super::super::NodeKind::File,
            size: size as u64,
            perm: 0o400,
            nlink: 1,
            mtime_ms: 5,
            stable: false,
            lookup_each_open: true,
        }
    }

    #[test]
    fn a_number_holds_the_bytes_it_was_given() {
        let snapshots = Snapshots::default();
        assert_eq!(snapshots.compare(7, &bytes("abc"), None), Compared::Unknown);
        snapshots.take(bytes("abc"), attr(7, 3), None);
        assert_eq!(snapshots.attr(7), Some(attr(7, 3)));
        assert_eq!(&snapshots.bytes(7).unwrap()[..], b"abc");
        assert_eq!(
            snapshots.compare(7, &bytes("abc"), None),
            Compared::Same(attr(7, 3))
        );
        assert_eq!(
            snapshots.compare(7, &bytes("abd"), None),
            Compared::Different
        );
        snapshots.forget(7);
        assert_eq!(snapshots.attr(7), None);
        assert_eq!(snapshots.kept.lock().bytes, 0);
    }

    #[test]
    fn bytes_rendered_from_a_session_file_are_known_by_its_version() {
        let v = |len| FileVersion {
            id: gjcfs_engine::storage::FileId { dev: 1, ino: 2 },
            len,
            mtime_ns: 3,
            ctime_ns: 4,
        };
        let snapshots = Snapshots::default();
        snapshots.take(bytes("abc"), attr(7, 3), Some(v(10)));
        assert_eq!(snapshots.by_source(7, &v(10)), Some(attr(7, 3)));
        assert_eq!(snapshots.by_source(7, &v(11)), None, "another version");
        assert_eq!(snapshots.by_source(8, &v(10)), None, "another number");
        // The same bytes rendered from a later version: known by that one from now on.
        assert_eq!(
            snapshots.compare(7, &bytes("abc"), Some(v(11))),
            Compared::Same(attr(7, 3))
        );
        assert_eq!(snapshots.by_source(7, &v(11)), Some(attr(7, 3)));
        snapshots.take(bytes("x"), attr(9, 1), None);
        assert_eq!(
            snapshots.by_source(9, &v(11)),
            None,
            "not the session's alone"
        );
    }

    #[test]
    fn dropped_bytes_keep_the_attributes_and_come_back_only_unchanged() {
        let snapshots = Snapshots::default();
        for ino in 0..=KEPT_MAX as u64 {
            snapshots.take(bytes(&format!("v{ino}")), attr(ino, 2), None);
        }
        // The oldest lost their bytes, not their attributes.
        assert!(snapshots.bytes(0).is_none());
        assert_eq!(snapshots.attr(0), Some(attr(0, 2)));
        assert!(
            snapshots.bytes(KEPT_MAX as u64).is_some(),
            "the newest kept"
        );
        let kept = snapshots.kept.lock().with_bytes;
        assert!(kept <= KEPT_MAX * 3 / 4 + 1, "{kept}");
        // Rendered again: other bytes do not take their place, the same ones do.
        assert_eq!(
            snapshots.compare(0, &bytes("v9"), None),
            Compared::Different
        );
        assert!(snapshots.bytes(0).is_none());
        assert_eq!(
            snapshots.compare(0, &bytes("v0"), None),
            Compared::Same(attr(0, 2))
        );
        assert_eq!(&snapshots.bytes(0).unwrap()[..], b"v0");
    }

    #[test]
    fn the_bytes_kept_are_bounded_too() {
        let snapshots = Snapshots::default();
        assert!(!snapshots.enabled());
        snapshots.enable();
        assert!(snapshots.enabled());
        let big = Arc::new(vec![0u8; KEPT_BYTES / 3]);
        for ino in 0..4 {
            snapshots.take(big.clone(), attr(ino, big.len()), None);
        }
        assert!(snapshots.kept.lock().bytes <= KEPT_BYTES * 3 / 4);
        assert!(snapshots.bytes(0).is_none() && snapshots.bytes(1).is_none());
        assert!(snapshots.bytes(3).is_some());
        for ino in 0..4 {
            snapshots.forget(ino);
        }
        let kept = snapshots.kept.lock();
        assert_eq!((kept.bytes, kept.with_bytes), (0, 0));
    }

    #[test]
    fn read_through_handles_a_large_file_keeps_its_attributes_not_its_bytes() {
        let snapshots = Snapshots::default();
        let large = Arc::new(vec![1u8; HANDLE_KEPT_MAX + 1]);
        snapshots.take(large.clone(), attr(1, large.len()), None);
        assert!(snapshots.bytes(1).is_none(), "its open holds it");
        assert_eq!(snapshots.attr(1), Some(attr(1, large.len())));
        assert_eq!(
            snapshots.compare(1, &large, None),
            Compared::Same(attr(1, large.len()))
        );
        assert!(snapshots.bytes(1).is_none());
        snapshots.take(bytes("small"), attr(2, 5), None);
        assert!(snapshots.bytes(2).is_some());
    }
}
