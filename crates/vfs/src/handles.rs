//! Open files: what each handle holds between `open` and `release`.
//!
//! Handles live in one table behind a short lock. A write handle's buffer has a lock of its
//! own, taken before the session's: writes through one handle apply in order, and the
//! table is never held while a session is loaded or written.
//!
//! An `entries/new` handle buffers bytes until they make whole lines ([`LineBuffer`]); a
//! request that may be continued ([`Part`]: the adapter tells from the kernel's request
//! sizes where a request stands in its `write(2)`) is held and appended with the rest of
//! its `write(2)`. A `leaf` handle holds what it will write ([`LeafBuffer`]). Each write
//! handle notes who last wrote through it ([`LastWriter`], from the platform's lock
//! owners), so that a close by a process that only inherited the descriptor (a child
//! after a fork) applies nothing.

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
    /// The bytes rendered for this open; `None` until the first read when the open kept the
    /// kernel's pages (which usually leaves nothing to read).
    pub bytes: Mutex<Option<Bytes>>,
    /// No read has been served yet: the first read from offset 0 serves the bytes the open
    /// rendered, instead of rendering them a second time.
    pub unread: std::sync::atomic::AtomicBool,
}

impl View {
    /// An open of `node` with its bytes rendered now (`None`: at the first read).
    pub fn new(node: Node, bytes: Option<Bytes>) -> Self {
        View {
            node,
            bytes: Mutex::new(bytes),
            unread: std::sync::atomic::AtomicBool::new(true),
        }
    }
}

/// An open version of a rendered file ([`Handle::Version`]).
#[derive(Debug)]
pub(super) struct Version {
    pub ino: u64,
    /// Its bytes, from the first read on (the kernel keeps the pages it read, so most
    /// opens never read).
    pub bytes: Mutex<Option<Bytes>>,
}

/// The longest content a `leaf` handle accepts.
pub const LEAF_MAX: usize = 4096;
/// The longest line `entries/new` accepts (an entry far beyond anything the agent writes;
/// its images go to the blob store). A longer line is refused with `EFBIG` and nothing of
/// it is kept.
pub const LINE_MAX: usize = 64 << 20;
/// The most bytes of lines an open `entries/new` holds for one `write(2)` that the kernel
/// sent in several requests (see [`LineBuffer`]); beyond it the write is refused with
/// `EFBIG` and nothing of it is appended.
pub const PENDING_MAX: usize = 64 << 20;

#[derive(Debug, Clone)]
pub(super) enum Handle {
    /// A snapshot taken at open (entries and blobs: they change only by being replaced).
    Read(Bytes),
    /// A rendered file that is not one version a number (the leaf, `errors`, the store's
    /// and the history's views…), and an entry (read lazily: the kernel keeps its pages):
    /// its bytes as of the last read from offset 0, which takes them afresh, so that a
    /// reader starting over sees what `stat` reports.
    View(Arc<View>),
    /// One version of a rendered file of a session: the bytes its inode number holds
    /// (`snapshots.rs`), which never change, so the kernel keeps its pages across opens;
    /// held from the first read until the release.
    Version(Arc<Version>),
    /// The transcript itself, read where it is: a growing file shows its growth.
    Transcript(Arc<dyn ReadFile>),
    /// A directory's entries, listed at open.
    Dir(Arc<Vec<DirEntry>>),
    Leaf(Arc<Mutex<LeafBuffer>>),
    New(Arc<Mutex<LineBuffer>>),
}

/// Who last wrote through a handle, as the platform names writers: FUSE sends with each
/// write the lock owner of the writer's descriptor table, and with each flush the closer's.
/// A process that inherited the descriptor across a fork and closes it without writing
/// is not the writer: its close must not cut short what the writer is still writing.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct LastWriter(Option<u64>);

impl LastWriter {
    /// Notes a write by `owner` (`None`: the platform does not say).
    pub fn note(&mut self, owner: Option<u64>) {
        if owner.is_some() {
            self.0 = owner;
        }
    }

    /// Whether a close by `closer` is another process's than the last writer's.
    pub fn foreign(&self, closer: Option<u64>) -> bool {
        matches!((self.0, closer), (Some(writer), Some(closer)) if writer != closer)
    }
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
    pub writer: LastWriter,
}

impl LeafBuffer {
    pub fn new(sid: &str, buf: Vec<u8>, truncated: bool) -> Self {
        LeafBuffer {
            sid: sid.to_owned(),
            buf,
            dirty: truncated,
            written: false,
            writer: LastWriter::default(),
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

/// What an open `entries/new` holds between writes: the bytes that do not end a line yet,
/// and the checked lines of a `write(2)` that the kernel may still be sending (it splits a
/// long write into requests, the last one shorter than the rest: [`Part`]). Those are
/// appended together with the rest of their `write(2)`, at its last request or at the
/// close, or not at all: when a later request of it is refused, what was held is dropped,
/// and because the kernel then tells the writer that the first part was written, every
/// later write through the handle and its close fail with the same error
/// ([`LineBuffer::refuse`]).
#[derive(Debug)]
pub(super) struct LineBuffer {
    pub sid: String,
    partial: Vec<u8>,
    /// Complete lines, checked, not appended yet (each without its newline).
    pending: Vec<Vec<u8>>,
    /// The bytes of `pending` and `partial`.
    held: usize,
    /// A line grew beyond [`LINE_MAX`]: its bytes are dropped up to its newline.
    overflowed: bool,
    /// Why a write through this handle was refused after the kernel had been told part of
    /// it was taken: answered to every later write and to the close.
    refused: Option<VfsError>,
    pub writer: LastWriter,
}

/// Where a write request stands in its `write(2)`, as far as the platform can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The last (or only) request of its `write(2)`.
    Last,
    /// A request as long as the kernel makes them: more of the same `write(2)` may follow.
    MayContinue,
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
            pending: Vec::new(),
            held: 0,
            overflowed: false,
            refused: None,
            writer: LastWriter::default(),
        }
    }

    /// The refusal every write and the close answer, once a write was refused.
    pub fn refused(&self) -> Option<&VfsError> {
        self.refused.as_ref()
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
                self.held -= self.partial.len();
                self.partial.clear();
            } else {
                let mut line = std::mem::take(&mut self.partial);
                line.extend_from_slice(piece);
                self.held -= line.len() - piece.len();
                lines.push(line);
            }
            rest = after;
        }
        if self.overflowed || self.partial.len() + rest.len() > LINE_MAX {
            overflowed = true;
            self.overflowed = true;
            self.held -= self.partial.len();
            self.partial = Vec::new();
        } else {
            self.partial.extend_from_slice(rest);
            self.held += rest.len();
        }
        Completed { lines, overflowed }
    }

    /// Holds `lines` (checked) until they are appended; refused with `EFBIG` when the
    /// handle would hold more than [`PENDING_MAX`] bytes.
    pub fn hold(&mut self, lines: Vec<Vec<u8>>) -> Result<(), VfsError> {
        let bytes: usize = lines.iter().map(Vec::len).sum();
        if self.held + bytes > PENDING_MAX {
            return Err(VfsError::TooLarge(format!(
                "one write of more than {PENDING_MAX} bytes of lines"
            )));
        }
        self.held += bytes;
        self.pending.extend(lines);
        Ok(())
    }

    /// Whether complete lines of earlier requests are held.
    pub fn holds_lines(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The complete lines held: what the last request of a `write(2)` appends. The bytes
    /// of an unterminated line stay.
    pub fn take_lines(&mut self) -> Vec<Vec<u8>> {
        let lines = std::mem::take(&mut self.pending);
        self.held -= lines.iter().map(Vec::len).sum::<usize>();
        lines
    }

    /// Every line held, the unterminated last one included: what a close or an fsync
    /// appends. The handle holds nothing after.
    pub fn take_batch(&mut self) -> Vec<Vec<u8>> {
        let mut batch = std::mem::take(&mut self.pending);
        self.overflowed = false;
        if !self.partial.is_empty() {
            batch.push(std::mem::take(&mut self.partial));
        }
        self.held = 0;
        batch
    }

    /// Drops everything held (after a failed write).
    pub fn drop_held(&mut self) {
        self.pending.clear();
        self.partial.clear();
        self.held = 0;
    }

    /// Drops everything held and refuses every later write, and the close, with `error`.
    pub fn refuse(&mut self, error: VfsError) {
        self.drop_held();
        self.refused = Some(error);
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

    /// Takes handle `fh` out of the table.
    pub fn remove(&self, fh: u64) -> Option<Handle> {
        self.table.lock().remove(&fh)
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
        b.hold(done.lines).unwrap();
        assert_eq!(
            b.take_batch(),
            [
                b"{\"a\":1}".to_vec(),
                b"{\"b\":2}".to_vec(),
                b"{\"c\"".to_vec()
            ]
        );
        assert!(b.take_batch().is_empty());
    }

    #[test]
    fn what_a_handle_holds_is_bounded_and_a_refusal_drops_it_and_stays() {
        let mut b = LineBuffer::new("s");
        let line = vec![b'x'; PENDING_MAX / 2];
        b.hold(vec![line.clone()]).unwrap();
        let done = b.push(b"{}\npart");
        b.hold(done.lines).unwrap();
        assert_eq!(b.held, PENDING_MAX / 2 + 2 + 4);
        assert!(matches!(b.hold(vec![line]), Err(VfsError::TooLarge(_))));
        assert!(b.holds_lines());
        assert_eq!(b.take_lines().len(), 2, "the complete lines");
        assert_eq!(b.held, 4, "the unterminated one stays");
        b.refuse(VfsError::InvalidArgument("bad".into()));
        assert!(b.take_batch().is_empty(), "nothing held is appended");
        assert_eq!(b.refused(), Some(&VfsError::InvalidArgument("bad".into())));
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
        assert!(b.take_batch().is_empty());
        assert_eq!(b.held, 0);
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
