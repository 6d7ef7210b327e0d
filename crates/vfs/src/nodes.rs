//! What each node is: its name in its directory, its attributes, its listing and its bytes.

use super::inode::StoreFile;
use std::sync::Arc;

use super::content::Bytes;
use super::disk;
use super::errors::HISTORY_LOG;
use super::fs::Vfs;
use super::inode::Node;
use super::layout::in_session_dir;
use super::rendered_file::RenderedFile;
use super::shapes::Shape;
use super::snapshots::Compared;
use super::{Attr, NodeKind, VfsError};
use gjcfs_engine::format::blob::BlobStore;

fn attr_from(ino: u64, shape: &Shape) -> Attr {
    Attr {
        ino,
        kind: shape.kind,
        size: shape.size,
        perm: shape.perm,
        nlink: if shape.kind == NodeKind::Directory {
            2
        } else {
            1
        },
        mtime_ms: shape.mtime_ms,
        stable: shape.stable,
        lookup_each_open: false,
    }
}

/// A file whose bytes the model renders (every file but the transcript, entries and
/// blobs).
fn is_rendered_file(node: &Node, shape: &Shape) -> bool {
    shape.kind == NodeKind::File && !shape.stable && !matches!(node, Node::Transcript(_))
}

impl Vfs {
    /// The attributes of `node` as it is now; it gets its inode number only if it exists.
    /// While files are read by node, a rendered file's bytes are kept under its number, and
    /// bytes that differ from what the number holds get a new one (`snapshots.rs`).
    pub(super) fn attr_of(&self, node: &Node) -> Result<Attr, VfsError> {
        self.attr_for(node, false)
    }

    /// [`Vfs::attr_of`] for an entry the kernel keeps (a lookup, an entry of a listing with
    /// attributes): the reference is counted for the numbers forgotten with the kernel
    /// (a query's nodes, and rendered files read by node), in the same step as a rendered file's
    /// version is chosen, so that a forget never drops a version just handed out.
    pub(super) fn entry_of(&self, node: &Node) -> Result<Attr, VfsError> {
        self.attr_for(node, true)
    }

    fn attr_for(&self, node: &Node, counted: bool) -> Result<Attr, VfsError> {
        // Read before the session is: a change after it is announced (`followed.rs`).
        let followed = in_session_dir(node)
            && node
                .session()
                .is_some_and(|sid| self.sessions.changes_followed(sid));
        let shape = self.shape_of(node)?;
        let versioned =
            self.is_versioned(node) || self.snapshots.enabled() && is_rendered_file(node, &shape);
        if versioned {
            return self.version_of(node, &shape, counted);
        }
        let mut inodes = self.inodes.lock();
        let ino = inodes.ino(node);
        if counted && node.forgettable() {
            inodes.remember(ino);
        }
        let attr = attr_from(ino, &shape);
        Ok(Attr {
            stable: attr.stable || followed,
            ..attr
        })
    }

    /// The number of rendered file `node` that holds its bytes as they are now: the one
    /// that holds bytes rendered from the session file as it is, without rendering them
    /// again, else the one that holds the same bytes, else a new one.
    fn version_of(&self, node: &Node, shape: &Shape, counted: bool) -> Result<Attr, VfsError> {
        let source = self.rendered_source(node);
        if let Some(source) = &source {
            let mut inodes = self.inodes.lock();
            let ino = inodes.ino(node);
            if let Some(attr) = self.snapshots.by_source(ino, source) {
                if counted {
                    inodes.remember(ino);
                }
                return Ok(attr);
            }
            drop(inodes);
            if let Some(attr) = self.sized_version(node, shape, source, counted) {
                return Ok(attr);
            }
        }
        let bytes = self.content(node)?;
        let mut inodes = self.inodes.lock();
        let mut ino = inodes.ino(node);
        let kept = match self.snapshots.compare(ino, &bytes, source) {
            Compared::Same(attr) => Some(attr),
            Compared::Different | Compared::Missized => {
                ino = inodes.renumber(node);
                None
            }
            Compared::Unknown => None,
        };
        let attr = kept.unwrap_or_else(|| {
            let attr = Attr {
                size: bytes.len() as u64,
                lookup_each_open: true,
                ..attr_from(ino, shape)
            };
            self.snapshots.take(bytes, attr, source);
            attr
        });
        if counted {
            inodes.remember(ino);
        }
        Ok(attr)
    }

    /// A number for `node` that holds the size kept of its rendering from the session file
    /// at `source` (in this run, or saved by an earlier one: `sessions/saved_renderings.rs`),
    /// if its session is not loaded: nothing is loaded or rendered, the bytes are rendered at the first read ([`Snapshots::take_sized`]).
    ///
    /// [`Snapshots::take_sized`]: super::snapshots::Snapshots::take_sized
    fn sized_version(
        &self,
        node: &Node,
        shape: &Shape,
        source: &gjcfs_engine::storage::FileVersion,
        counted: bool,
    ) -> Option<Attr> {
        let (sid, file) = RenderedFile::of(node)?;
        let size = self.sessions.kept_size(sid, &file, Some(source))?;
        let mut inodes = self.inodes.lock();
        let mut ino = inodes.ino(node);
        if self.snapshots.attr(ino).is_some() {
            // It holds another version.
            ino = inodes.renumber(node);
        }
        let attr = Attr {
            size,
            lookup_each_open: true,
            ..attr_from(ino, shape)
        };
        self.snapshots.take_sized(attr, *source);
        if counted {
            inodes.remember(ino);
        }
        Some(attr)
    }

    /// For a listing that gives attributes: `node`'s number now and the attributes that
    /// number holds, when `node` is a view whose bytes are not rendered for its session
    /// file as it is (its size would take rendering it); `None` when its attributes are
    /// known (rendered, or its size kept for that version), or it is no such view. The
    /// reference is counted as [`Vfs::entry_of`] counts it. A number that holds no bytes yet gets size 0: the kernel is told to keep
    /// neither these attributes nor the name, so the name's first use looks it up, and the
    /// lookup renders the view and gives its number as [`Vfs::entry_of`] chooses it.
    pub(super) fn unrendered_view(&self, node: &Node) -> Option<Attr> {
        let shape = self.unsized_view_shape(node)?;
        let source = self.rendered_source(node);
        let mut inodes = self.inodes.lock();
        let ino = inodes.ino(node);
        if let Some(source) = &source {
            if self.snapshots.by_source(ino, source).is_some() {
                return None;
            }
        }
        drop(inodes);
        // Its size is kept: a lookup gives it without rendering.
        let saved = RenderedFile::of(node).is_some_and(|(sid, file)| {
            self.sessions
                .kept_size(sid, &file, source.as_ref())
                .is_some()
        });
        if saved {
            return None;
        }
        let mut inodes = self.inodes.lock();
        let ino = inodes.ino(node);
        inodes.remember(ino);
        Some(self.snapshots.attr(ino).unwrap_or(Attr {
            lookup_each_open: true,
            ..attr_from(ino, &shape)
        }))
    }

    /// Whether `node` gets an inode number per version of its bytes in every mount
    /// (`snapshots.rs`): the files whose bytes come from their session file alone
    /// ([`Node::rendered_from_transcript`]). The kernel keeps their pages across opens,
    /// since a number's bytes never change, and a reader reads one version whole however
    /// the file changes meanwhile. (Read by node, every rendered file has numbers so.)
    pub(super) fn is_versioned(&self, node: &Node) -> bool {
        node.rendered_from_transcript().is_some()
    }

    /// The version of the session file that `node`'s bytes alone come from
    /// ([`Node::rendered_from_transcript`]), taken before they are rendered: bytes rendered
    /// after it are those of this version or a later one.
    pub(super) fn rendered_source(
        &self,
        node: &Node,
    ) -> Option<gjcfs_engine::storage::FileVersion> {
        let sid = node.rendered_from_transcript()?;
        self.sessions.transcript_version(sid)
    }

    /// The bytes of a store-wide file; the index titles sessions as the listing does.
    pub(super) fn store_page(&self, page: StoreFile) -> Result<Bytes, VfsError> {
        // The titles are asked for only when the index is rendered anew (the store changed):
        // the listing is brought up to date then, once, not on every read.
        let listed_now = std::cell::Cell::new(false);
        self.store_usage.bytes(page, &|id| {
            if !listed_now.replace(true) {
                self.rescan();
            }
            let title = self.listed(id).map(|l| l.title)?;
            Some(match self.config.redact {
                // A title is a session's own text: what it holds is redacted in its pages.
                true => {
                    let mut report = gjcfs_engine::redact::Report::default();
                    gjcfs_engine::redact::redact_text(&title, &mut report).into_owned()
                }
                false => title,
            })
        })
    }

    /// The bytes of a session's rendered file (context, the views and the leaf pages).
    pub(super) fn session_content(&self, sid: &str, node: &Node) -> Result<Bytes, VfsError> {
        self.with_session(sid, |loaded| loaded.rendered_bytes(node))
    }

    /// The bytes of a readable file now.
    pub(super) fn content(&self, node: &Node) -> Result<Bytes, VfsError> {
        match node {
            Node::Header(s) => self.with_known(
                s,
                |r| Some(r.header.clone()),
                |l| Ok(l.rendered.header.clone()),
            ),
            // Read where it is (`Vfs::open` gives it a handle of its own).
            Node::Transcript(_) => Err(VfsError::NotFound),
            Node::Leaf(s) if self.reset_pending(s) => Ok(Arc::new(Vec::new())),
            Node::Leaf(s) => {
                self.with_known(s, |r| Some(r.leaf.clone()), |l| Ok(l.rendered.leaf.clone()))
            }
            Node::Entry(s, id) => self.with_session(s, |loaded| {
                loaded
                    .rendered
                    .entry_bytes(&loaded.manager, id)
                    .ok_or(VfsError::NotFound)
            }),
            Node::Context(s)
            | Node::ContextMd(s)
            | Node::ContextHtml(s)
            | Node::Tree(s)
            | Node::TreeSvg(s)
            | Node::Usage(s)
            | Node::LeafPage(s, _)
            | Node::PageFile(s, _) => self.session_content(s, node),
            Node::Errors(s) => Ok(Arc::new(self.errors.text(s).into_bytes())),
            Node::StorePage(page) => self.store_page(*page),
            Node::CheckReport => self.check.bytes(),
            Node::EntriesNew(_) => Ok(Arc::new(Vec::new())),
            Node::HistoryPrompts => self.history.prompts(),
            Node::HistoryReadme => Ok(Arc::new(super::history::README.as_bytes().to_vec())),
            Node::IgnoreRules => Ok(Arc::new(super::ignore::IGNORE.as_bytes().to_vec())),
            Node::HistoryErrors => Ok(Arc::new(self.errors.text(HISTORY_LOG).into_bytes())),
            // The kernel follows links; a link itself is never opened.
            Node::ProjectLink(..)
            | Node::Label(..)
            | Node::DateLink(..)
            | Node::RecentLink(_)
            | Node::SearchHit(..)
            | Node::FilesLink(..) => Err(VfsError::NotFound),
            // Read: a query a person asked, which `ls search/` shows from now on.
            Node::SearchResults(query) => {
                let results = self.search_answer(query)?.results.clone();
                self.search.note_query(query);
                Ok(results)
            }
            Node::FilesTouches(dir) => Ok(self.files_touched(dir)?.jsonl.clone()),
            Node::Search(query) => {
                let found = self.history.search(query)?;
                self.history.note_query(query);
                Ok(Arc::new(found))
            }
            Node::Blob(hash) => {
                // A blob is a regular file of a real blob directory: checked before the
                // open (which does not follow a symlink either).
                disk::blob_meta(self.storage(), &self.config.blob_dir, Some(hash))?;
                let store = BlobStore::new(&self.config.blob_dir, self.config.storage.clone());
                match store.get_checked(hash) {
                    Ok(Some(bytes)) => Ok(Arc::new(bytes)),
                    Ok(None) => Err(VfsError::NotFound),
                    Err(e) => Err(super::errors::from_blob(&e)),
                }
            }
            // Every directory, named so that a new node cannot fall through unnoticed.
            Node::Root
            | Node::SessionsDir
            | Node::BlobsDir
            | Node::HistoryDir
            | Node::SearchDir
            | Node::ProjectsDir
            | Node::ProjectDir(_)
            | Node::ByDateDir
            | Node::DateDir(_)
            | Node::RecentDir
            | Node::SearchRoot
            | Node::SearchQuery(_)
            | Node::FilesRoot
            | Node::FilesDir(_)
            | Node::SessionDir(_)
            | Node::SessionBlobsDir(_)
            | Node::EntriesDir(_)
            | Node::LabelsDir(_)
            | Node::LeavesDir(_)
            | Node::PagesDir(_) => Err(VfsError::IsADirectory),
        }
    }
}
