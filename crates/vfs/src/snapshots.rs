//! Reads served by node: the bytes of rendered files, one immutable version per inode
//! number, for a platform whose kernel opens files without asking the model
//! ([`super::Vfs::serve_reads_by_node`]).
//!
//! With no open there is no handle to hold what a reader started reading, and the kernel
//! keeps a file's pages across opens and readers. So every version of a rendered file gets
//! a number of its own:
//! - looking a rendered file up renders it; bytes that differ from what its number holds get
//!   a new number, so a kernel sees a new file, with pages of its own;
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
//! opened before it changed, read again after many other files were.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::content::Bytes;
use super::Attr;

/// How many rendered files keep their bytes.
pub const KEPT_MAX: usize = 1024;
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
    digest: u64,
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

    /// Whether number `ino` holds `fresh`; when it does and its bytes were dropped, `fresh`
    /// is kept in their place.
    pub fn compare(&self, ino: u64, fresh: &Bytes) -> Compared {
        let mut kept = self.kept.lock();
        let Some(version) = kept.by_ino.get(&ino) else {
            return Compared::Unknown;
        };
        let same = match &version.bytes {
            Some(bytes) => Arc::ptr_eq(bytes, fresh) || bytes == fresh,
            None => version.attr.size == fresh.len() as u64 && version.digest == digest(fresh),
        };
        if !same {
            return Compared::Different;
        }
        let attr = version.attr;
        if version.bytes.is_none() {
            kept.keep_bytes(ino, fresh.clone());
        }
        Compared::Same(attr)
    }

    /// Keeps `bytes` as what the new number `attr.ino` holds.
    pub fn take(&self, bytes: Bytes, attr: Attr) {
        let mut kept = self.kept.lock();
        let version = Version {
            attr,
            digest: digest(&bytes),
            bytes: None,
            used: 0,
        };
        if let Some(old) = kept.by_ino.insert(attr.ino, version) {
            kept.uncount(&old);
        }
        kept.keep_bytes(attr.ino, bytes);
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
        assert_eq!(snapshots.compare(7, &bytes("abc")), Compared::Unknown);
        snapshots.take(bytes("abc"), attr(7, 3));
        assert_eq!(snapshots.attr(7), Some(attr(7, 3)));
        assert_eq!(&snapshots.bytes(7).unwrap()[..], b"abc");
        assert_eq!(
            snapshots.compare(7, &bytes("abc")),
            Compared::Same(attr(7, 3))
        );
        assert_eq!(snapshots.compare(7, &bytes("abd")), Compared::Different);
        snapshots.forget(7);
        assert_eq!(snapshots.attr(7), None);
        assert_eq!(snapshots.kept.lock().bytes, 0);
    }

    #[test]
    fn dropped_bytes_keep_the_attributes_and_come_back_only_unchanged() {
        let snapshots = Snapshots::default();
        for ino in 0..=KEPT_MAX as u64 {
            snapshots.take(bytes(&format!("v{ino}")), attr(ino, 2));
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
        assert_eq!(snapshots.compare(0, &bytes("v9")), Compared::Different);
        assert!(snapshots.bytes(0).is_none());
        assert_eq!(
            snapshots.compare(0, &bytes("v0")),
            Compared::Same(attr(0, 2))
        );
        assert_eq!(&snapshots.bytes(0).unwrap()[..], b"v0");
    }

    #[test]
    fn the_bytes_kept_are_bounded_too() {
        let snapshots = Snapshots::default();
        let big = Arc::new(vec![0u8; KEPT_BYTES / 3]);
        for ino in 0..4 {
            snapshots.take(big.clone(), attr(ino, big.len()));
        }
        assert!(snapshots.kept.lock().bytes <= KEPT_BYTES * 3 / 4);
        assert!(snapshots.bytes(0).is_none() && snapshots.bytes(1).is_none());
        assert!(snapshots.bytes(3).is_some());
        for ino in 0..4 {
            snapshots.forget(ino);
        }
        let kept = snapshots.kept.lock();
        assert_eq!((kept.bytes, kept.with_bytes), (0, 0));
        drop(kept);
        assert!(!snapshots.enabled());
        snapshots.enable();
        assert!(snapshots.enabled());
    }
}
