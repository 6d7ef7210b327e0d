//! What each node is: its name in its directory, its attributes, its listing and its bytes.

use super::store_usage::StoreFile;
use std::sync::Arc;

use super::content::Bytes;
use super::disk;
use super::fs::Vfs;
use super::inode::Node;
use super::layout::{
    is_probe_name, kind_of, link_target, project_name, session_child, usable_name, view_of,
    SESSION_FILES,
};
use super::snapshots::Compared;
use super::SessionSource;
use super::{Attr, DirEntry, NodeKind, VfsError};
use gjcfs_engine::blob::{is_valid_hash, BlobStore};
use gjcfs_engine::storage::FileStorage;

/// The error log key of `history/errors` (no session id is empty).
const HISTORY_LOG: &str = "";

/// A node's attributes before it has a number.
struct Shape {
    kind: NodeKind,
    size: u64,
    perm: u16,
    mtime_ms: i64,
    stable: bool,
}

fn dir(mtime_ms: i64) -> Shape {
    Shape {
        kind: NodeKind::Directory,
        size: 0,
        perm: 0o700,
        mtime_ms,
        stable: false,
    }
}

/// A file that refuses writes: no write bit, so `test -w` and editors tell the truth.
fn file(size: usize, mtime_ms: i64) -> Shape {
    Shape {
        kind: NodeKind::File,
        size: size as u64,
        perm: 0o400,
        mtime_ms,
        stable: false,
    }
}

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

fn stable_file(size: usize, mtime_ms: i64) -> Shape {
    Shape {
        stable: true,
        ..file(size, mtime_ms)
    }
}

fn symlink(target_len: usize, mtime_ms: i64) -> Shape {
    Shape {
        kind: NodeKind::Symlink,
        size: target_len as u64,
        perm: 0o777,
        mtime_ms,
        stable: false,
    }
}

impl Vfs {
    /// When a session was last added or removed: the newest mtime of the source directory
    /// and (a sessions root) of the directories in it. No session file is read, so the
    /// root answers at once however large the store.
    fn source_mtime_ms(&self) -> i64 {
        match &self.config.source {
            SessionSource::Dir(dir) => disk::mtime_ms(dir),
            SessionSource::SessionsRoot(root) => disk::newest_dir_mtime_ms(root),
        }
    }

    /// The node `name` names in directory `dir`, if it exists.
    pub(super) fn child(&self, dir: &Node, name: &str) -> Result<Node, VfsError> {
        Ok(match dir {
            Node::Root => match name {
                "sessions" => Node::SessionsDir,
                "blobs" => Node::BlobsDir,
                "history" => Node::HistoryDir,
                "projects" => Node::ProjectsDir,
                "by-date" => Node::ByDateDir,
                "recent" => Node::RecentDir,
                "search" => Node::SearchRoot,
                "usage.json" => Node::StorePage(StoreFile::UsageJson),
                "usage.svg" => Node::StorePage(StoreFile::UsageSvg),
                "index.html" => Node::StorePage(StoreFile::Index),
                "check" => Node::CheckReport,
                _ => return Err(VfsError::NotFound),
            },
            Node::SearchRoot | Node::SearchDir if is_probe_name(name) => {
                return Err(VfsError::NotFound)
            }
            Node::SearchRoot => {
                self.search.check(name)?;
                Node::SearchQuery(name.to_owned())
            }
            Node::SearchQuery(query) if name == "results.jsonl" => {
                Node::SearchResults(query.clone())
            }
            Node::SearchQuery(query) => {
                self.search_link(query, name)?;
                Node::SearchHit(query.clone(), name.to_owned())
            }
            Node::ByDateDir => {
                let known = |v: &Vfs| {
                    let listing = v.listing.lock();
                    super::navigation::by_date(listing.iter()).contains_key(name)
                };
                if !known(self) {
                    self.rescan();
                }
                if !known(self) {
                    return Err(VfsError::NotFound);
                }
                Node::DateDir(name.to_owned())
            }
            Node::DateDir(day) => {
                self.date_link(day, name).ok_or(VfsError::NotFound)?;
                Node::DateLink(day.clone(), name.to_owned())
            }
            Node::RecentDir => {
                if self.recent_link(name).is_none() {
                    self.rescan();
                }
                self.recent_link(name).ok_or(VfsError::NotFound)?;
                Node::RecentLink(name.to_owned())
            }
            Node::SessionsDir => {
                if self.listed(name).is_none() {
                    self.rescan();
                }
                if self.listed(name).is_none() {
                    return Err(VfsError::NotFound);
                }
                Node::SessionDir(name.to_owned())
            }
            Node::SessionDir(s) => session_child(s, name).ok_or(VfsError::NotFound)?,
            Node::PagesDir(s) => {
                let n: usize = name
                    .strip_suffix(".html")
                    .filter(|n| !n.starts_with('0') && n.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|n| n.parse().ok())
                    .ok_or(VfsError::NotFound)?;
                let pages = self.with_session(s, |l| Ok(l.rendered.page_count(&l.manager)))?;
                if n == 0 || n >= pages {
                    return Err(VfsError::NotFound);
                }
                Node::PageFile(s.clone(), n)
            }
            Node::LeavesDir(s) => {
                let id = name.strip_suffix(".html").ok_or(VfsError::NotFound)?;
                let known = self.with_session(s, |loaded| {
                    Ok(loaded
                        .rendered
                        .branch_ends(&loaded.manager)
                        .iter()
                        .any(|end| end == id))
                })?;
                if !known {
                    return Err(VfsError::NotFound);
                }
                Node::LeafPage(s.clone(), id.to_owned())
            }
            Node::LabelsDir(s) => {
                let known = self.with_session(s, |loaded| {
                    Ok(loaded.rendered.labels(&loaded.manager).contains_key(name))
                })?;
                if !known {
                    return Err(VfsError::NotFound);
                }
                Node::Label(s.clone(), name.to_owned())
            }
            Node::HistoryDir => match name {
                "prompts.jsonl" => Node::HistoryPrompts,
                "README" => Node::HistoryReadme,
                "errors" => Node::HistoryErrors,
                "search" => Node::SearchDir,
                _ => return Err(VfsError::NotFound),
            },
            Node::SearchDir => Node::Search(name.to_owned()),
            Node::ProjectsDir => {
                if !self.project_names().contains(name) {
                    self.rescan();
                }
                if !self.project_names().contains(name) {
                    return Err(VfsError::NotFound);
                }
                Node::ProjectDir(name.to_owned())
            }
            Node::ProjectDir(project) => match self.listed(name) {
                Some(l) if project_name(&l.cwd) == *project => {
                    Node::ProjectLink(project.clone(), name.to_owned())
                }
                _ => return Err(VfsError::NotFound),
            },
            Node::SessionBlobsDir(s) => {
                let referenced = self.with_session(s, |loaded| {
                    Ok(loaded
                        .rendered
                        .blob_refs(&loaded.manager)
                        .iter()
                        .any(|h| h == name))
                })?;
                if !referenced {
                    return Err(VfsError::NotFound);
                }
                Node::Blob(name.to_owned())
            }
            Node::BlobsDir if is_valid_hash(name) => Node::Blob(name.to_owned()),
            Node::BlobsDir => return Err(VfsError::NotFound),
            Node::EntriesDir(s) if name == "new" => Node::EntriesNew(s.clone()),
            Node::EntriesDir(s) => {
                let id = self.with_session(s, |loaded| {
                    Ok(loaded
                        .rendered
                        .find_entry(&loaded.manager, name)
                        .map(|e| e.id.clone()))
                })?;
                Node::Entry(s.clone(), id.ok_or(VfsError::NotFound)?)
            }
            _ => return Err(VfsError::NotADirectory),
        })
    }

    /// The mtime of a session's files: the last change of the session, its transcript's
    /// as listed or the last move of its leaf through the mount.
    fn file_ms(&self, sid: &str) -> Option<i64> {
        let listed = self.listed(sid)?.modified_ms;
        let moved = self.leaf_moved_ms(sid).unwrap_or(0);
        Some(listed.max(moved))
    }

    /// The mode of a file that takes writes: `perm`, or no write bit once writes stop.
    fn writable(&self, perm: u16) -> u16 {
        if self.writes_stopped() {
            perm & 0o444 | 0o400
        } else {
            perm
        }
    }

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
        let shape = self.shape_of(node)?;
        if self.snapshots.enabled() && is_rendered_file(node, &shape) {
            return self.version_of(node, &shape, counted);
        }
        let mut inodes = self.inodes.lock();
        let ino = inodes.ino(node);
        if counted && node.forgettable() {
            inodes.remember(ino);
        }
        Ok(attr_from(ino, &shape))
    }

    /// The number of rendered file `node` that holds its bytes as they are now.
    fn version_of(&self, node: &Node, shape: &Shape, counted: bool) -> Result<Attr, VfsError> {
        let bytes = self.content(node)?;
        let mut inodes = self.inodes.lock();
        let mut ino = inodes.ino(node);
        let kept = match self.snapshots.compare(ino, &bytes) {
            Compared::Same(attr) => Some(attr),
            Compared::Different => {
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
            self.snapshots.take(bytes, attr);
            attr
        });
        if counted {
            inodes.remember(ino);
        }
        Ok(attr)
    }

    fn shape_of(&self, node: &Node) -> Result<Shape, VfsError> {
        let file_ms = || node.session().and_then(|s| self.file_ms(s)).unwrap_or(0);
        Ok(match node {
            Node::Root
            | Node::SessionsDir
            | Node::ProjectsDir
            | Node::ByDateDir
            | Node::RecentDir => dir(self.source_mtime_ms()),
            Node::DateDir(day) => {
                let listing = self.listing.lock();
                let days = super::navigation::by_date(listing.iter());
                let newest = days
                    .get(day)
                    .ok_or(VfsError::NotFound)?
                    .values()
                    .filter_map(|sid| listing.get(sid).map(|l| l.modified_ms))
                    .max();
                dir(newest.unwrap_or(0))
            }
            Node::SearchRoot => dir(self.source_mtime_ms()),
            // Looking a query up runs nothing: listing it or reading its results does.
            Node::SearchQuery(_) => dir(self.source_mtime_ms()),
            Node::SearchResults(query) => {
                let answer = self.search_answer(query)?;
                file(answer.results.len(), self.source_mtime_ms())
            }
            Node::SearchHit(query, name) => {
                let target = self.search_link(query, name)?;
                symlink(target.len(), self.source_mtime_ms())
            }
            Node::DateLink(day, name) => {
                let sid = self.date_link(day, name).ok_or(VfsError::NotFound)?;
                symlink(
                    format!("../../sessions/{sid}").len(),
                    self.file_ms(&sid).unwrap_or(0),
                )
            }
            Node::RecentLink(name) => {
                let sid = self.recent_link(name).ok_or(VfsError::NotFound)?;
                symlink(
                    format!("../sessions/{sid}").len(),
                    self.file_ms(&sid).unwrap_or(0),
                )
            }
            Node::BlobsDir => dir(disk::blob_meta(&self.config.blob_dir, None)?.1),
            Node::HistoryDir | Node::SearchDir => dir(self.history.mtime_ms()),
            Node::ProjectDir(name) => {
                let newest = self
                    .listing
                    .lock()
                    .values()
                    .filter(|l| project_name(&l.cwd) == *name)
                    .map(|l| l.modified_ms)
                    .max();
                dir(newest.ok_or(VfsError::NotFound)?)
            }
            Node::ProjectLink(_, s) => symlink(
                link_target(s).len(),
                self.file_ms(s).ok_or(VfsError::NotFound)?,
            ),
            Node::HistoryPrompts => file(self.history.prompts()?.len(), self.history.mtime_ms()),
            Node::HistoryReadme => file(super::history::README.len(), self.history.mtime_ms()),
            Node::HistoryErrors => {
                file(self.errors.text(HISTORY_LOG).len(), self.history.mtime_ms())
            }
            Node::Search(query) => {
                let found = self.history.search(query).inspect_err(|e| {
                    self.errors
                        .push(HISTORY_LOG, &format!("search/{query}: {e}"));
                })?;
                file(found.len(), self.history.mtime_ms())
            }
            Node::Blob(hash) => {
                let (len, mtime) = disk::blob_meta(&self.config.blob_dir, Some(hash))?;
                stable_file(len as usize, mtime)
            }
            Node::SessionDir(s) => dir(self.file_ms(s).ok_or(VfsError::NotFound)?),
            // Readable whatever state the session is in: it says why a session is refused.
            Node::Errors(s) => {
                let ms = self.file_ms(s).ok_or(VfsError::NotFound)?;
                file(self.errors.text(s).len(), ms)
            }
            Node::Header(s) => self.with_session(s, |l| {
                let r = &l.rendered;
                Ok(file(
                    r.header.len(),
                    r.header_mtime_ms.unwrap_or_else(file_ms),
                ))
            })?,
            Node::EntriesDir(s) => self.with_session(s, |loaded| {
                let last = loaded.rendered.newest_entry_ms(&loaded.manager);
                Ok(dir(last.unwrap_or_else(file_ms)))
            })?,
            Node::Entry(s, id) => self.with_session(s, |loaded| {
                let mtime = loaded
                    .rendered
                    .entry(&loaded.manager, id)
                    .ok_or(VfsError::NotFound)?
                    .mtime_ms;
                let size = loaded
                    .rendered
                    .entry_size(&loaded.manager, id)
                    .ok_or(VfsError::NotFound)?;
                Ok(stable_file(size as usize, mtime.unwrap_or_else(file_ms)))
            })?,
            Node::EntriesNew(s) => self.with_session(s, |_| {
                Ok(Shape {
                    perm: self.writable(0o200),
                    ..file(0, file_ms())
                })
            })?,
            Node::Leaf(s) => self.with_session(s, |l| {
                let len = if self.reset_pending(s) {
                    0
                } else {
                    l.rendered.leaf.len()
                };
                Ok(Shape {
                    perm: self.writable(0o600),
                    ..file(len, file_ms())
                })
            })?,
            // The file as it is on disk now (a stat, no load): it grows as the agent appends.
            Node::Transcript(s) => {
                let listed = self.listed(s).ok_or(VfsError::NotFound)?;
                let stamp = disk::FileStamp::of(&listed.path).ok_or(VfsError::NotFound)?;
                file(stamp.len() as usize, stamp.millis())
            }
            Node::Context(s) => {
                let len = self.with_session(s, |l| Ok(l.rendered.context_len(&l.manager)))?;
                file(len as usize, file_ms())
            }
            Node::ContextMd(s)
            | Node::ContextHtml(s)
            | Node::Tree(s)
            | Node::TreeSvg(s)
            | Node::Usage(s)
            | Node::LeafPage(s, _)
            | Node::PageFile(s, _) => {
                let bytes = self.session_content(s, node)?;
                file(bytes.len(), file_ms())
            }
            Node::LabelsDir(s)
            | Node::LeavesDir(s)
            | Node::PagesDir(s)
            | Node::SessionBlobsDir(s) => self.with_session(s, |_| Ok(dir(file_ms())))?,
            Node::Label(s, label) => self.with_session(s, |loaded| {
                let target = loaded
                    .rendered
                    .label_target(&loaded.manager, label)
                    .ok_or(VfsError::NotFound)?;
                Ok(symlink(target.len(), file_ms()))
            })?,
            Node::StorePage(page) => file(self.store_page(*page)?.len(), self.source_mtime_ms()),
            Node::CheckReport => file(self.check.bytes()?.len(), self.source_mtime_ms()),
        })
    }

    /// The bytes of a store-wide file; the index titles sessions as the listing does.
    fn store_page(&self, page: StoreFile) -> Result<Bytes, VfsError> {
        // The titles are asked for only when the index is rendered anew (the store changed):
        // the listing is brought up to date then, once, not on every read.
        let listed_now = std::cell::Cell::new(false);
        self.store_usage.bytes(page, &|id| {
            if !listed_now.replace(true) {
                self.rescan();
            }
            self.listed(id).map(|l| l.title)
        })
    }

    /// The bytes of a session's rendered file (context, the views and the leaf pages).
    fn session_content(&self, sid: &str, node: &Node) -> Result<Bytes, VfsError> {
        self.with_session(sid, |loaded| {
            Ok(match (view_of(node), node) {
                (Some((_, view)), _) => loaded.rendered.view_bytes(&loaded.manager, view),
                (None, Node::LeafPage(_, id)) => loaded
                    .rendered
                    .leaf_page(&loaded.manager, id)
                    .ok_or(VfsError::NotFound)?,
                (None, Node::PageFile(_, n)) => loaded
                    .rendered
                    .earlier_page(&loaded.manager, *n)
                    .ok_or(VfsError::NotFound)?,
                (None, _) => loaded.rendered.context_bytes(&loaded.manager),
            })
        })
    }

    pub(super) fn list(&self, ino: u64) -> Result<Vec<DirEntry>, VfsError> {
        let dir_node = self.node(ino)?;
        let children: Vec<(Node, String)> = match &dir_node {
            Node::Root => vec![
                (Node::SessionsDir, "sessions".to_owned()),
                (Node::BlobsDir, "blobs".to_owned()),
                (Node::HistoryDir, "history".to_owned()),
                (Node::ProjectsDir, "projects".to_owned()),
                (Node::ByDateDir, "by-date".to_owned()),
                (Node::RecentDir, "recent".to_owned()),
                (Node::SearchRoot, "search".to_owned()),
                (Node::StorePage(StoreFile::Index), "index.html".to_owned()),
                (
                    Node::StorePage(StoreFile::UsageJson),
                    "usage.json".to_owned(),
                ),
                (Node::StorePage(StoreFile::UsageSvg), "usage.svg".to_owned()),
                (Node::CheckReport, "check".to_owned()),
            ],
            Node::SearchRoot => self
                .search
                .recent_queries()
                .into_iter()
                .filter(|q| usable_name(q))
                .map(|q| (Node::SearchQuery(q.clone()), q))
                .collect(),
            Node::SearchQuery(query) => {
                let answer = self.search_answer(query)?;
                self.search.note_query(query);
                let mut out: Vec<(Node, String)> = answer
                    .links
                    .iter()
                    .map(|(file, _)| (Node::SearchHit(query.clone(), file.clone()), file.clone()))
                    .collect();
                out.push((
                    Node::SearchResults(query.clone()),
                    "results.jsonl".to_owned(),
                ));
                out
            }
            Node::ByDateDir => {
                self.rescan();
                let listing = self.listing.lock();
                super::navigation::by_date(listing.iter())
                    .into_keys()
                    .map(|day| (Node::DateDir(day.clone()), day))
                    .collect()
            }
            Node::DateDir(day) => {
                let listing = self.listing.lock();
                super::navigation::by_date(listing.iter())
                    .remove(day)
                    .ok_or(VfsError::NotFound)?
                    .into_keys()
                    .map(|name| (Node::DateLink(day.clone(), name.clone()), name))
                    .collect()
            }
            Node::RecentDir => {
                self.rescan();
                let listing = self.listing.lock();
                super::navigation::recent(listing.iter())
                    .into_keys()
                    .map(|name| (Node::RecentLink(name.clone()), name))
                    .collect()
            }
            Node::ProjectsDir => {
                self.rescan();
                self.project_names()
                    .into_iter()
                    .map(|n| (Node::ProjectDir(n.clone()), n))
                    .collect()
            }
            Node::ProjectDir(project) => {
                let mut ids: Vec<String> = self
                    .listing
                    .lock()
                    .iter()
                    .filter(|(_, l)| project_name(&l.cwd) == *project)
                    .map(|(id, _)| id.clone())
                    .collect();
                ids.sort();
                ids.into_iter()
                    .map(|id| (Node::ProjectLink(project.clone(), id.clone()), id))
                    .collect()
            }
            Node::HistoryDir => vec![
                (Node::HistoryReadme, "README".to_owned()),
                (Node::HistoryErrors, "errors".to_owned()),
                (Node::HistoryPrompts, "prompts.jsonl".to_owned()),
                (Node::SearchDir, "search".to_owned()),
            ],
            Node::SessionBlobsDir(s) => {
                let refs = self.with_session(s, |loaded| {
                    Ok(loaded.rendered.blob_refs(&loaded.manager).to_vec())
                })?;
                // Referenced blobs missing from the store are not listed.
                refs.into_iter()
                    .filter(|h| disk::has_blob(&self.config.blob_dir, h))
                    .map(|h| (Node::Blob(h.clone()), h))
                    .collect()
            }
            // Any name is a query; the last ones asked are listed.
            Node::SearchDir => self
                .history
                .recent_queries()
                .into_iter()
                .filter(|q| usable_name(q))
                .map(|q| (Node::Search(q.clone()), q))
                .collect(),
            Node::BlobsDir => disk::blob_names(&self.config.blob_dir)?
                .into_iter()
                .map(|h| (Node::Blob(h.clone()), h))
                .collect(),
            Node::SessionsDir => {
                self.rescan();
                let mut ids: Vec<String> = self.listing.lock().keys().cloned().collect();
                ids.sort();
                ids.into_iter()
                    .map(|id| (Node::SessionDir(id.clone()), id))
                    .collect()
            }
            Node::SessionDir(s) => {
                if self.listed(s).is_none() {
                    return Err(VfsError::NotFound);
                }
                SESSION_FILES
                    .iter()
                    .filter_map(|name| Some((session_child(s, name)?, (*name).to_owned())))
                    .collect()
            }
            Node::PagesDir(s) => self.with_session(s, |loaded| {
                let pages = loaded.rendered.page_count(&loaded.manager);
                Ok((1..pages)
                    .map(|n| (Node::PageFile(s.clone(), n), format!("{n}.html")))
                    .collect())
            })?,
            Node::LeavesDir(s) => self.with_session(s, |loaded| {
                Ok(loaded
                    .rendered
                    .branch_ends(&loaded.manager)
                    .iter()
                    .map(|id| (Node::LeafPage(s.clone(), id.clone()), format!("{id}.html")))
                    .collect())
            })?,
            Node::LabelsDir(s) => self.with_session(s, |loaded| {
                Ok(loaded
                    .rendered
                    .labels(&loaded.manager)
                    .keys()
                    .map(|label| (Node::Label(s.clone(), label.clone()), label.clone()))
                    .collect())
            })?,
            Node::EntriesDir(s) => self.with_session(s, |loaded| {
                let mut out: Vec<(Node, String)> = loaded
                    .rendered
                    .entries(&loaded.manager)
                    .iter()
                    .filter(|e| usable_name(&e.id))
                    .map(|e| (Node::Entry(s.clone(), e.id.clone()), e.name.clone()))
                    .collect();
                out.push((Node::EntriesNew(s.clone()), "new".to_owned()));
                Ok(out)
            })?,
            _ => return Err(VfsError::NotADirectory),
        };
        let mut inodes = self.inodes.lock();
        Ok(children
            .into_iter()
            .map(|(node, name)| DirEntry {
                ino: inodes.ino(&node),
                kind: kind_of(&node),
                name,
            })
            .collect())
    }

    /// The bytes of a readable file now.
    pub(super) fn content(&self, node: &Node) -> Result<Bytes, VfsError> {
        match node {
            Node::Header(s) => self.with_session(s, |l| Ok(l.rendered.header.clone())),
            // Read where it is (`Vfs::open` gives it a handle of its own).
            Node::Transcript(_) => Err(VfsError::NotFound),
            Node::Leaf(s) if self.reset_pending(s) => Ok(Arc::new(Vec::new())),
            Node::Leaf(s) => self.with_session(s, |l| Ok(l.rendered.leaf.clone())),
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
            Node::HistoryErrors => Ok(Arc::new(self.errors.text(HISTORY_LOG).into_bytes())),
            // The kernel follows links; a link itself is never opened.
            Node::ProjectLink(..)
            | Node::Label(..)
            | Node::DateLink(..)
            | Node::RecentLink(_)
            | Node::SearchHit(..) => Err(VfsError::NotFound),
            // Read: a query a person asked, which `ls search/` shows from now on.
            Node::SearchResults(query) => {
                let results = self.search_answer(query)?.results.clone();
                self.search.note_query(query);
                Ok(results)
            }
            Node::Search(query) => {
                let found = self.history.search(query)?;
                self.history.note_query(query);
                Ok(Arc::new(found))
            }
            Node::Blob(hash) => {
                // A blob is a regular file of a real blob directory: checked before the
                // open (which does not follow a symlink either).
                disk::blob_meta(&self.config.blob_dir, Some(hash))?;
                let store = BlobStore::new(&self.config.blob_dir, Arc::new(FileStorage));
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
            | Node::SessionDir(_)
            | Node::SessionBlobsDir(_)
            | Node::EntriesDir(_)
            | Node::LabelsDir(_)
            | Node::LeavesDir(_)
            | Node::PagesDir(_) => Err(VfsError::IsADirectory),
        }
    }
}
