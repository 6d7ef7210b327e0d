//! Reads served by node: the bytes of rendered files, one immutable version per inode
//! number, for a platform whose kernel opens files without asking the model
//! ([`super::Vfs::serve_reads_by_node`]).
//!
//! With no open there is no handle to hold what a reader started reading, and the kernel
//! keeps a file's pages across opens and readers. So every version of a rendered file gets
//! a number of its own:
//! - looking a rendered file up renders it; bytes that differ from what its number holds get
//!   a new number, so a kernel sees a new file, with pages of its own;
//! - the attributes and reads of a number serve the bytes kept for it, and only those: a
//!   file opened before a change reads whole as it was, never half old and half new.
//!
//! Entries, blobs and the transcript keep one number each and are read as they are now,
//! their changes announced as they are for reads through handles.
//!
//! A number's bytes are kept until the kernel forgets a number that is no longer current
//! (or a query), or until they are among the least recently asked once more than [`KEPT_MAX`] files or
//! [`KEPT_BYTES`] bytes are kept. A number dropped that way is retired: the next lookup of
//! its name gets a new one, and a file still open under it reads as stale (`ESTALE`).

use std::collections::HashMap;
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
    by_ino: HashMap<u64, Snapshot>,
    bytes: usize,
    /// Counts every use: the order numbers were last asked in.
    clock: u64,
}

/// The bytes one number holds, and its attributes.
#[derive(Debug, Clone)]
pub(super) struct Snapshot {
    pub bytes: Bytes,
    pub attr: Attr,
    used: u64,
}

impl Snapshots {
    /// From now on files are read by node.
    pub fn enable(&self) {
        self.on.store(true, Ordering::SeqCst);
    }

    pub fn enabled(&self) -> bool {
        self.on.load(Ordering::SeqCst)
    }

    /// What number `ino` holds, if it is kept.
    pub fn get(&self, ino: u64) -> Option<Snapshot> {
        let mut kept = self.kept.lock();
        kept.clock += 1;
        let clock = kept.clock;
        let snapshot = kept.by_ino.get_mut(&ino)?;
        snapshot.used = clock;
        Some(snapshot.clone())
    }

    /// Whether `ino` holds exactly `bytes`.
    pub fn holds(&self, ino: u64, bytes: &Bytes) -> Option<bool> {
        let kept = self.kept.lock();
        let snapshot = kept.by_ino.get(&ino)?;
        Some(Arc::ptr_eq(&snapshot.bytes, bytes) || snapshot.bytes == *bytes)
    }

    /// Keeps `bytes` as what the new number `attr.ino` holds; the numbers dropped to make
    /// room, to be retired.
    pub fn take(&self, bytes: Bytes, attr: Attr) -> Vec<u64> {
        let mut kept = self.kept.lock();
        kept.clock += 1;
        let used = kept.clock;
        kept.bytes += bytes.len();
        let ino = attr.ino;
        let snapshot = Snapshot { bytes, attr, used };
        if let Some(old) = kept.by_ino.insert(ino, snapshot) {
            kept.bytes -= old.bytes.len();
        }
        if kept.by_ino.len() > KEPT_MAX || kept.bytes > KEPT_BYTES {
            kept.drop_oldest(ino)
        } else {
            Vec::new()
        }
    }

    /// `ino` names nothing any more (the kernel forgot it).
    pub fn forget(&self, ino: u64) {
        let mut kept = self.kept.lock();
        if let Some(old) = kept.by_ino.remove(&ino) {
            kept.bytes -= old.bytes.len();
        }
    }
}

impl Kept {
    /// Drops the least recently asked until a quarter of the room is free, never `newest`;
    /// the numbers dropped.
    fn drop_oldest(&mut self, newest: u64) -> Vec<u64> {
        let mut by_use: Vec<(u64, u64, usize)> = self
            .by_ino
            .iter()
            .filter(|(&ino, _)| ino != newest)
            .map(|(&ino, s)| (s.used, ino, s.bytes.len()))
            .collect();
        by_use.sort_unstable();
        let mut dropped = Vec::new();
        for (_, ino, len) in by_use {
            if self.by_ino.len() <= KEPT_MAX * 3 / 4 && self.bytes <= KEPT_BYTES * 3 / 4 {
                break;
            }
            self.by_ino.remove(&ino);
            self.bytes -= len;
            dropped.push(ino);
        }
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(text: &str) -> Bytes {
        Arc::new(text.as_bytes().to_vec())
    }

    fn attr(ino: u64, mtime_ms: i64) -> Attr {
        Attr {
            ino,
            kind: super::super::NodeKind::File,
            size: 0,
            perm: 0o400,
            nlink: 1,
            mtime_ms,
            stable: false,
            lookup_each_open: true,
        }
    }

    #[test]
    fn a_number_holds_the_bytes_it_was_given() {
        let snapshots = Snapshots::default();
        assert!(snapshots.get(7).is_none());
        assert_eq!(snapshots.holds(7, &bytes("abc")), None);
        assert!(snapshots.take(bytes("abc"), attr(7, 5)).is_empty());
        let kept = snapshots.get(7).unwrap();
        assert_eq!((&kept.bytes[..], kept.attr), (&b"abc"[..], attr(7, 5)));
        assert_eq!(snapshots.holds(7, &bytes("abc")), Some(true));
        assert_eq!(snapshots.holds(7, &kept.bytes), Some(true));
        assert_eq!(snapshots.holds(7, &bytes("abd")), Some(false));
        snapshots.forget(7);
        assert!(snapshots.get(7).is_none());
        assert_eq!(snapshots.kept.lock().bytes, 0);
    }

    #[test]
    fn the_least_recently_asked_are_dropped_first() {
        let snapshots = Snapshots::default();
        for ino in 0..KEPT_MAX as u64 {
            assert!(snapshots.take(bytes("x"), attr(ino, 0)).is_empty());
        }
        snapshots.get(0);
        let dropped = snapshots.take(bytes("x"), attr(KEPT_MAX as u64, 0));
        assert_eq!(dropped.len(), KEPT_MAX - KEPT_MAX * 3 / 4 + 1);
        assert!(dropped.iter().all(|&ino| snapshots.get(ino).is_none()));
        assert_eq!(dropped[0], 1, "the oldest first");
        assert!(snapshots.get(0).is_some(), "asked again, kept");
        assert!(snapshots.get(KEPT_MAX as u64).is_some(), "the newest kept");
    }

    #[test]
    fn the_bytes_kept_are_bounded_too() {
        let snapshots = Snapshots::default();
        let big = Arc::new(vec![0u8; KEPT_BYTES / 3]);
        for ino in 0..3 {
            assert!(snapshots.take(big.clone(), attr(ino, 0)).is_empty());
        }
        assert_eq!(snapshots.take(big.clone(), attr(3, 0)), vec![0, 1]);
        assert!(snapshots.kept.lock().bytes <= KEPT_BYTES * 3 / 4);
        assert!(!snapshots.enabled());
        snapshots.enable();
        assert!(snapshots.enabled());
    }
}
