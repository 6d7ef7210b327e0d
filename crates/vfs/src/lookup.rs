//! Lookups: the node a name names in a directory, if it exists. Fixed names come from the
//! layout's table; the store-wide directories look in the listing (rescanning once when a
//! name is not there yet), a session's directories in what is kept of it or the loaded
//! session, the query
//! directories ask the search, `files/` the touched paths the index holds.

use super::files::{child_dir, may_be_link, TOUCHES_FILE};
use super::fs::Vfs;
use super::inode::Node;
use super::layout::{fixed_child, is_fixed_dir, is_probe_name, project_name};
use super::VfsError;
use gjcfs_engine::format::blob::is_valid_hash;

impl Vfs {
    /// The node `name` names in directory `dir`, if it exists.
    pub(super) fn child(&self, dir: &Node, name: &str) -> Result<Node, VfsError> {
        if is_fixed_dir(dir) {
            return fixed_child(dir, name).ok_or(VfsError::NotFound);
        }
        match dir {
            Node::SearchRoot | Node::SearchQuery(_) | Node::SearchDir => {
                self.query_child(dir, name)
            }
            Node::FilesRoot => self.files_child("", name),
            Node::FilesDir(at) => self.files_child(at, name),
            Node::SessionsDir
            | Node::ByDateDir
            | Node::DateDir(_)
            | Node::RecentDir
            | Node::ProjectsDir
            | Node::ProjectDir(_) => self.listed_child(dir, name),
            Node::PagesDir(_)
            | Node::LeavesDir(_)
            | Node::LabelsDir(_)
            | Node::SessionBlobsDir(_)
            | Node::EntriesDir(_) => self.session_part_child(dir, name),
            Node::BlobsDir if is_valid_hash(name) => Ok(Node::Blob(name.to_owned())),
            Node::BlobsDir => Err(VfsError::NotFound),
            _ => Err(VfsError::NotADirectory),
        }
    }

    /// A name in `search/`, a query's directory or `history/search/`: any name but a probe
    /// is a query.
    fn query_child(&self, dir: &Node, name: &str) -> Result<Node, VfsError> {
        Ok(match dir {
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
            Node::SearchDir => Node::Search(name.to_owned()),
            _ => return Err(VfsError::NotADirectory),
        })
    }

    /// A name in `files/<at>` (`at` empty for `files/` itself): its own files first, then
    /// the next components of the touched paths under it; any other name is not there.
    fn files_child(&self, at: &str, name: &str) -> Result<Node, VfsError> {
        if !at.is_empty() {
            if name == TOUCHES_FILE {
                return Ok(Node::FilesTouches(at.to_owned()));
            }
            if may_be_link(name) && self.files_touched(at)?.link(name).is_some() {
                return Ok(Node::FilesLink(at.to_owned(), name.to_owned()));
            }
        }
        if !self.files_names(at)?.0.contains_key(name) {
            return Err(VfsError::NotFound);
        }
        Ok(Node::FilesDir(child_dir(at, name)))
    }

    /// A name in a directory made from the store's listing: `sessions/`, `by-date/` and its
    /// days, `recent/`, `projects/` and its projects. A name not listed yet is looked for
    /// again after one rescan (a session the agent just started).
    fn listed_child(&self, dir: &Node, name: &str) -> Result<Node, VfsError> {
        let found = |v: &Vfs| -> Option<Node> {
            Some(match dir {
                Node::SessionsDir => {
                    v.listed(name)?;
                    Node::SessionDir(name.to_owned())
                }
                Node::ByDateDir => {
                    if !v.sessions.navigation().by_date.contains_key(name) {
                        return None;
                    }
                    Node::DateDir(name.to_owned())
                }
                Node::DateDir(day) => {
                    v.date_link(day, name)?;
                    Node::DateLink(day.clone(), name.to_owned())
                }
                Node::RecentDir => {
                    v.recent_link(name)?;
                    Node::RecentLink(name.to_owned())
                }
                Node::ProjectsDir => {
                    if !v.project_names().contains(name) {
                        return None;
                    }
                    Node::ProjectDir(name.to_owned())
                }
                Node::ProjectDir(project) => match v.listed(name) {
                    Some(l) if project_name(&l.cwd) == *project => {
                        Node::ProjectLink(project.clone(), name.to_owned())
                    }
                    _ => return None,
                },
                _ => return None,
            })
        };
        // A day's and a project's links come from the listing of their directory's lookup.
        let rescans = !matches!(dir, Node::DateDir(_) | Node::ProjectDir(_));
        if let Some(node) = found(self) {
            return Ok(node);
        }
        if rescans {
            self.rescan();
            if let Some(node) = found(self) {
                return Ok(node);
            }
        }
        Err(VfsError::NotFound)
    }

    /// A name in one of a session's directories: looked for in what is kept of the
    /// session while its file is unchanged ([`Vfs::with_known`]), else in the loaded
    /// session.
    fn session_part_child(&self, dir: &Node, name: &str) -> Result<Node, VfsError> {
        let found = |known: bool| {
            if known {
                Ok(())
            } else {
                Err(VfsError::NotFound)
            }
        };
        Ok(match dir {
            Node::PagesDir(s) => {
                let n: usize = name
                    .strip_suffix(".html")
                    .filter(|n| !n.starts_with('0') && n.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|n| n.parse().ok())
                    .ok_or(VfsError::NotFound)?;
                let pages = self.with_known(
                    s,
                    |r| r.known_page_count(),
                    |l| Ok(l.rendered.page_count(&l.manager)),
                )?;
                found(n != 0 && n < pages)?;
                Node::PageFile(s.clone(), n)
            }
            Node::LeavesDir(s) => {
                let id = name.strip_suffix(".html").ok_or(VfsError::NotFound)?;
                let is_end = |ends: &[String]| ends.iter().any(|end| end == id);
                found(self.with_known(
                    s,
                    |r| r.known_branch_ends().map(is_end),
                    |l| Ok(is_end(l.rendered.branch_ends(&l.manager))),
                )?)?;
                Node::LeafPage(s.clone(), id.to_owned())
            }
            Node::LabelsDir(s) => {
                found(self.with_known(
                    s,
                    |r| r.known_labels().map(|labels| labels.contains_key(name)),
                    |l| Ok(l.rendered.labels(&l.manager).contains_key(name)),
                )?)?;
                Node::Label(s.clone(), name.to_owned())
            }
            Node::SessionBlobsDir(s) => {
                let has = |refs: &[String]| refs.iter().any(|h| h == name);
                found(self.with_known(
                    s,
                    |r| r.known_blob_refs().map(has),
                    |l| Ok(has(l.rendered.blob_refs(&l.manager))),
                )?)?;
                Node::Blob(name.to_owned())
            }
            Node::EntriesDir(s) if name == "new" => Node::EntriesNew(s.clone()),
            Node::EntriesDir(s) => {
                let id = self.with_known(
                    s,
                    |r| Some(r.known_find_entry(name)?.map(|e| e.id.to_string())),
                    |l| {
                        Ok(l.rendered
                            .find_entry(&l.manager, name)
                            .map(|e| e.id.to_string()))
                    },
                )?;
                Node::Entry(s.clone(), id.ok_or(VfsError::NotFound)?)
            }
            _ => return Err(VfsError::NotADirectory),
        })
    }
}
