//! The attributes of each node before it has a number: its kind, size, mode and mtime.

use super::disk;
use super::errors::HISTORY_LOG;
use super::fs::Vfs;
use super::inode::Node;
use super::layout::{link_target, project_name};
use super::rendered_file::RenderedFile;
use super::{NodeKind, SessionSource, VfsError};

/// A node's attributes before it has a number.
pub(super) struct Shape {
    pub(super) kind: NodeKind,
    pub(super) size: u64,
    pub(super) perm: u16,
    pub(super) mtime_ms: i64,
    pub(super) stable: bool,
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
            SessionSource::Dir(dir) => disk::mtime_ms(self.storage(), dir),
            SessionSource::SessionsRoot(root) => disk::newest_dir_mtime_ms(self.storage(), root),
        }
    }

    /// The mtime of a session's files: the last change of the session, its transcript's
    /// as listed or the last move of its leaf through the mount.
    fn file_ms(&self, sid: &str) -> Option<i64> {
        let listed = self
            .sessions
            .with_listing(|l| l.get(sid).map(|l| l.modified_ms))?;
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

    /// The attributes of `node` before it has a number.
    pub(super) fn shape_of(&self, node: &Node) -> Result<Shape, VfsError> {
        // A project's link belongs to its session but lives in `projects/`.
        match node {
            Node::ProjectLink(..) => self.store_shape(node),
            _ if node.session().is_some() => self.session_shape(node),
            _ => self.store_shape(node),
        }
    }

    /// The shape of a node outside the sessions' directories.
    fn store_shape(&self, node: &Node) -> Result<Shape, VfsError> {
        Ok(match node {
            Node::Root
            | Node::SessionsDir
            | Node::ProjectsDir
            | Node::ByDateDir
            | Node::RecentDir => dir(self.source_mtime_ms()),
            Node::DateDir(day) => {
                let navigation = self.sessions.navigation();
                let sids = navigation.by_date.get(day).ok_or(VfsError::NotFound)?;
                let newest = self.sessions.with_listing(|listing| {
                    Ok::<_, VfsError>(
                        sids.values()
                            .filter_map(|sid| listing.get(sid).map(|l| l.modified_ms))
                            .max(),
                    )
                })?;
                dir(newest.unwrap_or(0))
            }
            Node::SearchRoot => dir(self.source_mtime_ms()),
            Node::IgnoreRules => file(super::ignore::IGNORE.len(), 0),
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
            // Looking a directory up asks its parent's names only.
            Node::FilesRoot | Node::FilesDir(_) => dir(self.source_mtime_ms()),
            Node::FilesTouches(d) => {
                file(self.files_touched(d)?.jsonl.len(), self.source_mtime_ms())
            }
            Node::FilesLink(d, name) => {
                symlink(self.files_link(d, name)?.len(), self.source_mtime_ms())
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
            Node::BlobsDir => dir(disk::blob_meta(self.storage(), &self.config.blob_dir, None)?.1),
            Node::HistoryDir | Node::SearchDir => dir(self.history.mtime_ms()),
            Node::ProjectDir(name) => {
                let newest = self.sessions.with_listing(|listing| {
                    listing
                        .values()
                        .filter(|l| project_name(&l.cwd) == *name)
                        .map(|l| l.modified_ms)
                        .max()
                });
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
                let (len, mtime) =
                    disk::blob_meta(self.storage(), &self.config.blob_dir, Some(hash))?;
                stable_file(len as usize, mtime)
            }
            Node::StorePage(page) => file(self.store_page(*page)?.len(), self.source_mtime_ms()),
            Node::CheckReport => file(self.check.bytes()?.len(), self.source_mtime_ms()),
            _ => return Err(VfsError::NotFound),
        })
    }

    /// The shape of a node in a session's directory: from what is kept of the session
    /// while its file is unchanged ([`Vfs::with_known`]), else from the loaded session.
    fn session_shape(&self, node: &Node) -> Result<Shape, VfsError> {
        let file_ms = || node.session().and_then(|s| self.file_ms(s)).unwrap_or(0);
        Ok(match node {
            Node::SessionDir(s) => dir(self.file_ms(s).ok_or(VfsError::NotFound)?),
            // Readable whatever state the session is in: it says why a session is refused.
            Node::Errors(s) => {
                let ms = self.file_ms(s).ok_or(VfsError::NotFound)?;
                file(self.errors.text(s).len(), ms)
            }
            Node::Header(_) | Node::EntriesDir(_) | Node::Entry(..) => self.entry_shape(node)?,
            Node::EntriesNew(s) => {
                let shape = || Shape {
                    perm: self.writable(0o200),
                    ..file(0, file_ms())
                };
                self.with_known(s, |_| Some(shape()), |_| Ok(shape()))?
            }
            Node::Leaf(s) => {
                let shape = |leaf: &[u8]| {
                    let len = if self.reset_pending(s) { 0 } else { leaf.len() };
                    Shape {
                        perm: self.writable(0o600),
                        ..file(len, file_ms())
                    }
                };
                self.with_known(s, |r| Some(shape(&r.leaf)), |l| Ok(shape(&l.rendered.leaf)))?
            }
            // The file as it is on disk now (a stat, no load): it grows as the agent appends.
            Node::Transcript(s) => {
                let listed = self.listed(s).ok_or(VfsError::NotFound)?;
                let stamp =
                    disk::version(self.storage(), &listed.path).ok_or(VfsError::NotFound)?;
                file(stamp.len as usize, stamp.modified_ms())
            }
            Node::Context(_)
            | Node::ContextMd(_)
            | Node::ContextHtml(_)
            | Node::Tree(_)
            | Node::TreeSvg(_)
            | Node::Usage(_)
            | Node::LeafPage(..)
            | Node::PageFile(..) => self.rendered_shape(node)?,
            Node::LabelsDir(s)
            | Node::LeavesDir(s)
            | Node::PagesDir(s)
            | Node::SessionBlobsDir(s) => {
                self.with_known(s, |_| Some(dir(file_ms())), |_| Ok(dir(file_ms())))?
            }
            Node::Label(s, label) => self.with_known(
                s,
                |r| Some(symlink(r.known_label_target(label)??.len(), file_ms())),
                |loaded| {
                    let target = loaded
                        .rendered
                        .label_target(&loaded.manager, label)
                        .ok_or(VfsError::NotFound)?;
                    Ok(symlink(target.len(), file_ms()))
                },
            )?,
            _ => return Err(VfsError::NotFound),
        })
    }

    /// The shape of the header, the entries directory or an entry.
    fn entry_shape(&self, node: &Node) -> Result<Shape, VfsError> {
        let file_ms = || node.session().and_then(|s| self.file_ms(s)).unwrap_or(0);
        Ok(match node {
            Node::Header(s) => self.with_known(
                s,
                |r| {
                    Some(file(
                        r.header.len(),
                        r.header_mtime_ms.unwrap_or_else(file_ms),
                    ))
                },
                |l| {
                    let r = &l.rendered;
                    Ok(file(
                        r.header.len(),
                        r.header_mtime_ms.unwrap_or_else(file_ms),
                    ))
                },
            )?,
            Node::EntriesDir(s) => self.with_known(
                s,
                |r| Some(dir(r.known_newest_entry_ms()?.unwrap_or_else(file_ms))),
                |loaded| {
                    let last = loaded.rendered.newest_entry_ms(&loaded.manager);
                    Ok(dir(last.unwrap_or_else(file_ms)))
                },
            )?,
            Node::Entry(s, id) => self.with_known(
                s,
                |r| {
                    let mtime = r.known_entry(id)??.mtime_ms;
                    let size = r.known_entry_size(id)?;
                    Some(stable_file(size as usize, mtime.unwrap_or_else(file_ms)))
                },
                |loaded| {
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
                },
            )?,
            _ => return Err(VfsError::NotFound),
        })
    }

    /// The shape of a view or page (what [`Vfs::rendered_shape`] gives) without its size,
    /// which takes rendering it: size 0. `None` for any other node. (The header, rendered
    /// from the transcript too, costs nothing past the load of the session, which the
    /// listing's leaf and directories take anyway.)
    pub(super) fn unsized_view_shape(&self, node: &Node) -> Option<Shape> {
        match (node, node.rendered_from_transcript()) {
            (Node::Header(_), _) | (_, None) => None,
            (_, Some(s)) => Some(file(0, self.file_ms(s).unwrap_or(0))),
        }
    }

    /// The shape of the context, a view or a page: its size as kept of the session (from
    /// this run or saved by an earlier one, nothing loaded or rendered), else rendered.
    fn rendered_shape(&self, node: &Node) -> Result<Shape, VfsError> {
        let file_ms = || node.session().and_then(|s| self.file_ms(s)).unwrap_or(0);
        let (sid, rendered) = RenderedFile::of(node).ok_or(VfsError::NotFound)?;
        let len = self.with_known(
            sid,
            |r| r.known_len(&rendered),
            |l| {
                let len = l.rendered.file_len(&l.manager, &rendered);
                len.ok_or(VfsError::NotFound)
            },
        )?;
        Ok(file(len as usize, file_ms()))
    }
}
