//! Opening the model's files and reading them, by handle or by node.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::Mutex;

use super::fs::{Caching, Opened, Vfs};
use super::handles::{Handle, LeafBuffer, LineBuffer};
use super::inode::Node;
use super::snapshots::Compared;
use super::{OpenMode, VfsError};
use gjcfs_engine::storage::ReadFile;

impl Vfs {
    pub fn open(&self, ino: u64, mode: OpenMode) -> Result<Opened, VfsError> {
        let node = self.node(ino)?;
        if node.is_dir() {
            return if mode.write {
                Err(VfsError::IsADirectory)
            } else {
                Ok(Opened {
                    fh: 0,
                    caching: Caching::UntilReopen,
                })
            };
        }
        if mode.write && self.writes_stopped() {
            return Err(VfsError::ReadOnly);
        }
        if mode.write {
            self.check_writer(mode.caller_uid)?;
        }
        let (handle, caching) = match &node {
            Node::Leaf(s) if mode.write => {
                // A truncation by path just before is this open's to finish.
                let truncated = mode.truncate || self.pending_resets.lock().remove(s).is_some();
                let current = self.with_session(s, |l| Ok(l.rendered.leaf.to_vec()))?;
                let buf = if truncated { Vec::new() } else { current };
                let leaf = LeafBuffer::new(s, buf, truncated);
                (Handle::Leaf(Arc::new(Mutex::new(leaf))), Caching::Direct)
            }
            Node::EntriesNew(s) => {
                self.with_session(s, |_| Ok(()))?;
                let line = LineBuffer::new(s);
                (Handle::New(Arc::new(Mutex::new(line))), Caching::Direct)
            }
            _ if mode.write => return Err(VfsError::AccessDenied),
            Node::Transcript(s) => (Handle::Transcript(self.transcript(s)?), Caching::Keep),
            Node::Entry(..) | Node::Blob(_) => (Handle::Read(self.content(&node)?), Caching::Keep),
            other => {
                let view = super::handles::View::new(other.clone(), self.content(other)?);
                (Handle::View(Arc::new(view)), Caching::Direct)
            }
        };
        let fh = self.handles.insert(handle);
        Ok(Opened { fh, caching })
    }

    /// Session `sid`'s transcript, opened for reading where it is.
    fn transcript(&self, sid: &str) -> Result<Arc<dyn ReadFile>, VfsError> {
        let path = self.with_session(sid, |loaded| Ok(loaded.path().to_owned()))?;
        let file = self
            .storage()
            .open_read_at(&path)
            .map_err(|e| super::errors::from_io(&e, format!("session.jsonl: {e}")))?;
        Ok(Arc::from(file))
    }

    /// Serves reads by node from now on, for a platform whose kernel opens files without
    /// asking (there are no handles): [`Vfs::read_node`] reads a file, and each inode number
    /// of a rendered file holds one version of its bytes (`snapshots.rs`;
    /// [`Attr::lookup_each_open`]). Only for a read-only model: writes need handles.
    pub fn serve_reads_by_node(&self) {
        debug_assert!(
            self.config.read_only,
            "reads by node are for read-only models"
        );
        self.snapshots.enable();
    }

    /// Up to `size` bytes of file `ino` at `offset`, without a handle
    /// ([`Vfs::serve_reads_by_node`]): the bytes a rendered file's number holds, an entry or
    /// a blob as it is now, the transcript where it is.
    pub fn read_node(&self, ino: u64, offset: u64, size: u32) -> Result<Vec<u8>, VfsError> {
        let node = self.node(ino)?;
        let bytes = match &node {
            _ if node.is_dir() => return Err(VfsError::IsADirectory),
            Node::Transcript(s) => return read_file_at(self.transcript(s)?.as_ref(), offset, size),
            Node::Entry(..) | Node::Blob(_) => self.content(&node)?,
            rendered => {
                // A version for a current number not kept yet is kept now.
                self.getattr(ino)?;
                match self.snapshots.bytes(ino) {
                    Some(bytes) => bytes,
                    // Dropped to make room: rendered again, served if still the same.
                    None => {
                        let fresh = self.content(rendered)?;
                        match self.snapshots.compare(ino, &fresh) {
                            Compared::Same(_) => fresh,
                            Compared::Different | Compared::Unknown => return Err(VfsError::Stale),
                        }
                    }
                }
            }
        };
        Ok(slice_at(&bytes, offset, size))
    }

    pub fn read(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>, VfsError> {
        let slice = |bytes: &[u8]| slice_at(bytes, offset, size);
        match self.handles.get(fh)? {
            Handle::Read(bytes) => Ok(slice(&bytes)),
            Handle::View(view) => {
                let first = view.unread.swap(false, Ordering::SeqCst);
                if offset == 0 && !first {
                    let mut held = view.bytes.lock();
                    // What was read before is let go first: a large file is held once.
                    drop(std::mem::take(&mut *held));
                    *held = self.content(&view.node)?;
                }
                let bytes = view.bytes.lock().clone();
                Ok(slice(&bytes))
            }
            Handle::Transcript(file) => read_file_at(file.as_ref(), offset, size),
            Handle::Dir(_) => Err(VfsError::IsADirectory),
            Handle::Leaf(leaf) => Ok(slice(&leaf.lock().buf)),
            Handle::New(_) => Ok(Vec::new()),
        }
    }
}

/// Up to `size` bytes of `bytes` at `offset` (fewer only at the end).
fn slice_at(bytes: &[u8], offset: u64, size: u32) -> Vec<u8> {
    let start = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(bytes.len());
    let end = start.saturating_add(size as usize).min(bytes.len());
    bytes[start..end].to_vec()
}

/// Up to `size` bytes of `file` at `offset` (fewer only at its end).
fn read_file_at(file: &dyn ReadFile, offset: u64, size: u32) -> Result<Vec<u8>, VfsError> {
    let mut buf = vec![0; size as usize];
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) => return Err(super::errors::from_io(&e, format!("session.jsonl: {e}"))),
        }
    }
    buf.truncate(done);
    Ok(buf)
}
