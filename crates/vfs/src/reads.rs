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
                // The session must be readable; a write loads it anyway.
                self.with_known(s, |_| Some(()), |_| Ok(()))?;
                let line = LineBuffer::new(s);
                (Handle::New(Arc::new(Mutex::new(line))), Caching::Direct)
            }
            _ if mode.write => return Err(VfsError::AccessDenied),
            Node::Transcript(s) => (Handle::Transcript(self.transcript(s)?), Caching::Keep),
            // An entry's bytes never change but by a patch, which the model announces: the
            // kernel keeps its pages, and they are rendered only if it reads after all.
            Node::Entry(..) => {
                let view = super::handles::View::new(node.clone(), None);
                (Handle::View(Arc::new(view)), Caching::Keep)
            }
            Node::Blob(_) => (Handle::Read(self.content(&node)?), Caching::Keep),
            // One version of the file: its bytes never change, the kernel keeps its pages,
            // and nothing is rendered (or loaded) unless a read comes after all.
            other if self.is_versioned(other) => {
                let version = super::handles::Version {
                    ino,
                    bytes: Mutex::new(None),
                };
                (Handle::Version(Arc::new(version)), Caching::Keep)
            }
            other => {
                let view = super::handles::View::new(other.clone(), Some(self.content(other)?));
                (Handle::View(Arc::new(view)), Caching::Direct)
            }
        };
        let fh = self.handles.insert(handle);
        Ok(Opened { fh, caching })
    }

    /// Session `sid`'s transcript, opened for reading where it is. A session read before
    /// whose file is unchanged is not loaded again for it.
    fn transcript(&self, sid: &str) -> Result<Arc<dyn ReadFile>, VfsError> {
        let path = self.with_known(
            sid,
            |_| Some(self.listed(sid)?.path),
            |loaded| Ok(loaded.path().to_owned()),
        )?;
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
            rendered => self.version_bytes(ino, rendered)?,
        };
        Ok(slice_at(&bytes, offset, size))
    }

    /// The bytes number `ino` of rendered file `node` holds: kept, or rendered again and
    /// served if still the same; a version that is gone is stale.
    fn version_bytes(&self, ino: u64, node: &Node) -> Result<super::content::Bytes, VfsError> {
        // A version for a current number not kept yet is kept now.
        self.getattr(ino)?;
        match self.snapshots.bytes(ino) {
            Some(bytes) => Ok(bytes),
            // Dropped to make room: rendered again, served if still the same.
            None => {
                let source = self.rendered_source(node);
                let fresh = self.content(node)?;
                match self.snapshots.compare(ino, &fresh, source) {
                    Compared::Same(_) => Ok(fresh),
                    Compared::Different | Compared::Unknown => Err(VfsError::Stale),
                    // Opened again, it is rendered and sized anew.
                    Compared::Missized => {
                        if let Some(sid) = node.session() {
                            self.sessions.forget_saved(sid);
                        }
                        Err(VfsError::Stale)
                    }
                }
            }
        }
    }

    pub fn read(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>, VfsError> {
        let slice = |bytes: &[u8]| slice_at(bytes, offset, size);
        match self.handles.get(fh)? {
            Handle::Read(bytes) => Ok(slice(&bytes)),
            Handle::View(view) => {
                let first = view.unread.swap(false, Ordering::SeqCst);
                let mut held = view.bytes.lock();
                if held.is_none() || (offset == 0 && !first) {
                    // What was read before is let go first: a large file is held once.
                    drop(held.take());
                    *held = Some(self.content(&view.node)?);
                }
                let bytes = held.clone().unwrap_or_default();
                drop(held);
                Ok(slice(&bytes))
            }
            Handle::Version(version) => {
                let mut held = version.bytes.lock();
                if held.is_none() {
                    let node = self.node(version.ino)?;
                    *held = Some(self.version_bytes(version.ino, &node)?);
                }
                Ok(held
                    .as_deref()
                    .map(|bytes| slice(bytes))
                    .unwrap_or_default())
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
