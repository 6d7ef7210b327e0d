//! What the model keeps of each session: its row in the listing, and its slot (the loaded
//! session behind its own lock, or the last failure to load it), with the cache of slots
//! that keeps the most recently used ones.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::content::{Bytes, Rendered};
use super::inode::Node;
use super::rendered_file::RenderedFile;
use super::VfsError;
use gjcfs_engine::manager::SessionManager;
use gjcfs_engine::storage::FileVersion;

/// A session as the listing found it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Listed {
    pub(super) path: PathBuf,
    pub cwd: String,
    pub modified_ms: i64,
    /// The file as the model last loaded it; a different file at the next load means the
    /// kernel's cached entries of the session are stale.
    pub seen: Option<FileVersion>,
    /// The title, else the first user message (empty without either).
    pub title: String,
    /// The header's ISO timestamp.
    pub created: String,
}

pub(super) struct Loaded {
    pub manager: Arc<SessionManager>,
    /// Whether `manager` was opened for writing.
    pub(super) writable: bool,
    pub rendered: Rendered,
    /// The session file as this model last saw it (after loading or its own writes); a
    /// different file on disk means someone else wrote it.
    pub(super) synced: Option<FileVersion>,
    /// The file `manager` reads.
    pub(super) path: PathBuf,
}

impl Loaded {
    /// The transcript the session is read from.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// The bytes of `node`, a rendered file of the session (context, the views and the
    /// leaf pages).
    pub(super) fn rendered_bytes(&mut self, node: &Node) -> Result<Bytes, VfsError> {
        let (_, file) = RenderedFile::of(node).ok_or(VfsError::NotFound)?;
        self.rendered
            .file_bytes(&self.manager, &file)
            .ok_or(VfsError::NotFound)
    }

    /// Renders the session as it is now, keeping the entry names (see
    /// [`Rendered::advance`]). `same_session`: the manager is the one rendered before,
    /// `edited` its records a patch replaced.
    pub(super) fn rerender(&mut self, same_session: bool, edited: &[usize]) {
        let rendered = &mut self.rendered;
        self.manager
            .read(|session| rendered.advance(session, same_session, edited));
    }
}

#[derive(Default)]
pub(super) struct SlotState {
    pub(super) loaded: Option<Loaded>,
    /// The last failure to read the file's content, with the state of the file it was
    /// made on: answered again while the file is unchanged (refusals by a safety check are
    /// not kept: a mode put right must take effect at once).
    pub(super) failed: Option<(Option<FileVersion>, VfsError)>,
    /// What was rendered of a session dropped to be loaded again: its entry names carry
    /// over to the reload while the file holds those entries at the same places.
    pub(super) dropped: Option<Rendered>,
}

pub(super) type Slot = Mutex<SlotState>;

/// The slots, and which sessions were used last.
#[derive(Default)]
pub(super) struct SlotCache {
    pub(super) slots: HashMap<String, Arc<Slot>>,
    /// Session ids, least recently used first.
    pub(super) lru: VecDeque<String>,
}

impl SlotCache {
    /// The slot of `sid`, marked most recently used, and the slots pushed out to keep at
    /// most `max` (to be closed outside every lock).
    pub(super) fn get(&mut self, sid: &str, max: usize) -> (Arc<Slot>, Vec<(String, Arc<Slot>)>) {
        if let Some(pos) = self.lru.iter().position(|s| s == sid) {
            if let Some(id) = self.lru.remove(pos) {
                self.lru.push_back(id);
            }
        } else {
            self.lru.push_back(sid.to_owned());
        }
        let slot = self.slots.entry(sid.to_owned()).or_default().clone();
        let mut evicted = Vec::new();
        while self.lru.len() > max.max(1) {
            let Some(old) = self.lru.pop_front() else {
                break;
            };
            if let Some(slot) = self.slots.remove(&old) {
                evicted.push((old, slot));
            }
        }
        (slot, evicted)
    }
}
