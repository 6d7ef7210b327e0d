//! Open files: what each handle holds between `open` and `release`.
//!
//! Handles live in one table behind a short lock. A write handle's buffer has a lock of its
//! own, taken before the session's: writes through one handle apply in order, and the
//! table is never held while a session is loaded or written.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::content::Bytes;
use super::inode::Node;
use super::{DirEntry, VfsError};
use gjcfs_engine::storage::ReadFile;

/// A rendered file open for reading.
#[derive(Debug)]
pub(super) struct View {
    pub node: Node,
    pub bytes: Mutex<Bytes>,
}

/// The longest content a `leaf` handle accepts.
pub const LEAF_MAX: usize = 4096;
/// The longest line `entries/new` accepts (an entry far beyond anything the agent writes;
/// its images go to the blob store). A longer line is refused with `EFBIG` and nothing of
/// it is kept.
pub const LINE_MAX: usize = 64 << 20;

#[derive(Debug, Clone)]
pub(super) enum Handle {
    /// A snapshot taken at open (entries and blobs: they change only by being replaced).
    Read(Bytes),
    /// A rendered file (a view, the header, the leaf, `errors`…): its bytes as of the
    /// last read from offset 0, which takes them afresh, so that a reader starting over
    /// sees what `stat` reports.
    View(Arc<View>),
    /// The transcript itself, read where it is: a growing file shows its growth.
    Transcript(Arc<dyn ReadFile>),
    /// A directory's entries, listed at open.
    Dir(Arc<Vec<DirEntry>>),
    Leaf(Arc<Mutex<LeafBuffer>>),
    New(Arc<Mutex<LineBuffer>>),
}

/// What a `leaf` handle will write.
#[derive(Debug)]
pub(super) struct LeafBuffer {
    pub sid: String,
    pub buf: Vec<u8>,
    /// The content differs from what was applied (a write, a truncate, O_TRUNC).
    pub dirty: bool,
    /// A write or a truncate through the handle happened (not just O_TRUNC): a flush
    /// applies the content. A bare O_TRUNC waits for release, because a shell's
    /// redirection flushes a duplicate descriptor before it writes.
    pub written: bool,
}

impl LeafBuffer {
    pub fn new(sid: &str, buf: Vec<u8>, truncated: bool) -> Self {
        LeafBuffer {
            sid: sid.to_owned(),
            buf,
            dirty: truncated,
            written: false,
        }
    }

    /// Writes `data` at `offset`.
    pub fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<(), VfsError> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let end = start.saturating_add(data.len());
        if end > LEAF_MAX {
            return Err(VfsError::TooLarge(format!(
                "a leaf is an entry id, at most {LEAF_MAX} bytes"
            )));
        }
        if self.buf.len() < end {
            self.buf.resize(end, 0);
        }
        self.buf[start..end].copy_from_slice(data);
        self.dirty = true;
        self.written = true;
        Ok(())
    }

    pub fn truncate(&mut self, size: u64) -> Result<(), VfsError> {
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        if size > LEAF_MAX {
            return Err(VfsError::TooLarge("leaf too long".into()));
        }
        self.buf.resize(size, 0);
        self.dirty = true;
        self.written = true;
        Ok(())
    }
}

/// The bytes written to `entries/new` that do not end a line yet.
#[derive(Debug)]
pub(super) struct LineBuffer {
    pub sid: String,
    partial: Vec<u8>,
    /// A line grew beyond [`LINE_MAX`]: its bytes are dropped up to its newline.
    overflowed: bool,
}

/// What a write to `entries/new` completed.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Completed {
    /// Whole lines, each without its newline, in order.
    pub lines: Vec<Vec<u8>>,
    /// A line that was too long ended or is still going (nothing of it is kept).
    pub overflowed: bool,
}

impl LineBuffer {
    pub fn new(sid: &str) -> Self {
        LineBuffer {
            sid: sid.to_owned(),
            partial: Vec::new(),
            overflowed: false,
        }
    }

    /// Takes `data`: returns the lines it completes. Only `data` is scanned (the bytes kept
    /// from earlier writes hold no newline), so a long line costs linear time.
    pub fn push(&mut self, data: &[u8]) -> Completed {
        let mut lines = Vec::new();
        let mut overflowed = false;
        let mut rest = data;
        while let Some(at) = memchr::memchr(b'\n', rest) {
            let (piece, after) = (&rest[..at], &rest[at + 1..]);
            if self.overflowed || self.partial.len() + piece.len() > LINE_MAX {
                overflowed = true;
                self.overflowed = false;
                self.partial.clear();
            } else {
                let mut line = std::mem::take(&mut self.partial);
                line.extend_from_slice(piece);
                lines.push(line);
            }
            rest = after;
        }
        if self.overflowed || self.partial.len() + rest.len() > LINE_MAX {
            overflowed = true;
            self.overflowed = true;
            self.partial = Vec::new();
        } else {
            self.partial.extend_from_slice(rest);
        }
        Completed { lines, overflowed }
    }

    /// The unterminated last line, taken (what a close applies).
    pub fn take_partial(&mut self) -> Option<Vec<u8>> {
        self.overflowed = false;
        (!self.partial.is_empty()).then(|| std::mem::take(&mut self.partial))
    }

    /// Forgets what is pending (after a failed write).
    pub fn clear(&mut self) {
        self.partial.clear();
    }
}

/// Every open handle.
#[derive(Default)]
pub(super) struct Handles {
    table: Mutex<HashMap<u64, Handle>>,
    next: AtomicU64,
}

impl Handles {
    pub fn insert(&self, handle: Handle) -> u64 {
        let fh = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.table.lock().insert(fh, handle);
        fh
    }

    pub fn get(&self, fh: u64) -> Result<Handle, VfsError> {
        self.table
            .lock()
            .get(&fh)
            .cloned()
            .ok_or(VfsError::BadHandle)
    }

    pub fn remove(&self, fh: u64) {
        self.table.lock().remove(&fh);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(c: &Completed) -> Vec<&[u8]> {
        c.lines.iter().map(Vec::as_slice).collect()
    }

    #[test]
    fn lines_are_cut_at_newlines_across_writes() {
        let mut b = LineBuffer::new("s");
        assert!(b.push(b"{\"a\"").lines.is_empty());
        let done = b.push(b":1}\n{\"b\":2}\n{\"c\"");
        assert_eq!(lines(&done), [&b"{\"a\":1}"[..], b"{\"b\":2}"]);
        assert!(!done.overflowed);
        assert_eq!(b.take_partial(), Some(b"{\"c\"".to_vec()));
        assert_eq!(b.take_partial(), None);
    }

    #[test]
    fn an_overlong_line_is_dropped_whole_and_the_next_one_kept() {
        let mut b = LineBuffer::new("s");
        let chunk = vec![b'x'; LINE_MAX / 2 + 1];
        assert!(!b.push(&chunk).overflowed);
        assert!(b.push(&chunk).overflowed, "the line passed the limit");
        assert!(b.partial.is_empty(), "nothing of it is kept");
        assert!(b.push(&chunk).overflowed, "still the same line");
        let done = b.push(b"tail\n{}\n");
        assert!(done.overflowed);
        assert_eq!(lines(&done), [&b"{}"[..]]);
        assert_eq!(b.take_partial(), None);
    }

    #[test]
    fn leaf_writes_are_bounded() {
        let mut leaf = LeafBuffer::new("s", Vec::new(), true);
        leaf.write_at(0, b"abc\n").unwrap();
        assert_eq!(leaf.buf, b"abc\n");
        assert!(matches!(
            leaf.write_at(LEAF_MAX as u64, b"x"),
            Err(VfsError::TooLarge(_))
        ));
        leaf.truncate(1).unwrap();
        assert_eq!(leaf.buf, b"a");
    }
}
