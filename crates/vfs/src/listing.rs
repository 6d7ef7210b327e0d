//! Listings: the nodes a directory holds, with their names, in listing order. Fixed
//! directories list the layout's table; the store-wide directories rescan the store first;
//! a session's directories list what is kept of it or the loaded session; the query directories list the queries
//! asked last; `files/` lists the touched paths the index holds.

use super::content::EntryFile;
use super::disk;
use super::files::{child_dir, TOUCHES_FILE};
use super::fs::Vfs;
use super::inode::Node;
use super::layout::{fixed_children, is_fixed_dir, kind_of, project_name, usable_name};
use super::{DirEntry, VfsError};

impl Vfs {
    /// The entries of directory `ino`, each with its number.
    pub(super) fn list(&self, ino: u64) -> Result<Vec<DirEntry>, VfsError> {
        let dir = self.node(ino)?;
        let children = match &dir {
            Node::SessionDir(s) if self.listed(s).is_none() => return Err(VfsError::NotFound),
            _ if is_fixed_dir(&dir) => fixed_children(&dir),
            Node::SearchRoot | Node::SearchQuery(_) | Node::SearchDir => self.queries(&dir)?,
            Node::FilesRoot => self.touched_tree("")?,
            Node::FilesDir(at) => self.touched_tree(at)?,
            Node::SessionsDir
            | Node::ByDateDir
            | Node::DateDir(_)
            | Node::RecentDir
            | Node::ProjectsDir
            | Node::ProjectDir(_) => self.listed_children(&dir)?,
            Node::PagesDir(_)
            | Node::LeavesDir(_)
            | Node::LabelsDir(_)
            | Node::SessionBlobsDir(_)
            | Node::EntriesDir(_) => self.session_part_children(&dir)?,
            Node::BlobsDir => disk::blob_names(self.storage(), &self.config.blob_dir)?
                .into_iter()
                .map(|h| (Node::Blob(h.clone()), h))
                .collect(),
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

    /// `search/` and `history/search/` list the last queries asked; a query's directory
    /// lists its hits and `results.jsonl` (and so counts as asked).
    fn queries(&self, dir: &Node) -> Result<Vec<(Node, String)>, VfsError> {
        Ok(match dir {
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
            // Any name is a query; the last ones asked are listed.
            Node::SearchDir => self
                .history
                .recent_queries()
                .into_iter()
                .filter(|q| usable_name(q))
                .map(|q| (Node::Search(q.clone()), q))
                .collect(),
            _ => return Err(VfsError::NotADirectory),
        })
    }

    /// `files/<at>` (`at` empty for `files/` itself): the next components of the touched
    /// paths under it and, below `files/` itself, its links and `touches.jsonl`, whose
    /// names no component takes.
    fn touched_tree(&self, at: &str) -> Result<Vec<(Node, String)>, VfsError> {
        let names = self.files_names(at)?;
        let touched = if at.is_empty() {
            None
        } else {
            Some(self.files_touched(at)?)
        };
        let own = |name: &str| {
            touched
                .as_ref()
                .is_some_and(|t| name == TOUCHES_FILE || t.link(name).is_some())
        };
        let mut out: Vec<(Node, String)> = names
            .0
            .keys()
            .filter(|name| !own(name))
            .map(|name| (Node::FilesDir(child_dir(at, name)), name.clone()))
            .collect();
        if let Some(touched) = touched {
            out.extend(
                touched
                    .links
                    .iter()
                    .map(|(name, _)| (Node::FilesLink(at.to_owned(), name.clone()), name.clone())),
            );
            out.push((Node::FilesTouches(at.to_owned()), TOUCHES_FILE.to_owned()));
        }
        Ok(out)
    }

    /// The directories made from the store's listing. The top ones rescan the store; a
    /// day's and a project's directory list from the scan of their parent's listing.
    fn listed_children(&self, dir: &Node) -> Result<Vec<(Node, String)>, VfsError> {
        if matches!(
            dir,
            Node::SessionsDir | Node::ByDateDir | Node::RecentDir | Node::ProjectsDir
        ) {
            self.rescan();
        }
        if let Node::ProjectsDir = dir {
            return Ok(self
                .project_names()
                .into_iter()
                .map(|n| (Node::ProjectDir(n.clone()), n))
                .collect());
        }
        match dir {
            Node::ByDateDir => {
                let days = self.sessions.navigation();
                return Ok(days
                    .by_date
                    .keys()
                    .map(|day| (Node::DateDir(day.clone()), day.clone()))
                    .collect());
            }
            Node::DateDir(day) => {
                let days = self.sessions.navigation();
                let names = days.by_date.get(day).ok_or(VfsError::NotFound)?;
                return Ok(names
                    .keys()
                    .map(|name| (Node::DateLink(day.clone(), name.clone()), name.clone()))
                    .collect());
            }
            Node::RecentDir => {
                let recent = self.sessions.navigation();
                return Ok(recent
                    .recent
                    .keys()
                    .map(|name| (Node::RecentLink(name.clone()), name.clone()))
                    .collect());
            }
            _ => {}
        }
        self.sessions.with_listing(|listing| {
            Ok(match dir {
                Node::SessionsDir => {
                    let mut ids: Vec<&String> = listing.keys().collect();
                    ids.sort();
                    ids.into_iter()
                        .map(|id| (Node::SessionDir(id.clone()), id.clone()))
                        .collect()
                }
                Node::ProjectDir(project) => {
                    let mut ids: Vec<&String> = listing
                        .iter()
                        .filter(|(_, l)| project_name(&l.cwd) == *project)
                        .map(|(id, _)| id)
                        .collect();
                    ids.sort();
                    ids.into_iter()
                        .map(|id| (Node::ProjectLink(project.clone(), id.clone()), id.clone()))
                        .collect()
                }
                _ => return Err(VfsError::NotADirectory),
            })
        })
    }

    /// A session's directories: from what is kept of the session while its file is
    /// unchanged ([`Vfs::with_known`]), else from the loaded session.
    fn session_part_children(&self, dir: &Node) -> Result<Vec<(Node, String)>, VfsError> {
        match dir {
            Node::SessionBlobsDir(s) => {
                let refs = self.with_known(
                    s,
                    |r| r.known_blob_refs().map(<[String]>::to_vec),
                    |loaded| Ok(loaded.rendered.blob_refs(&loaded.manager).to_vec()),
                )?;
                // Referenced blobs missing from the store are not listed.
                Ok(refs
                    .into_iter()
                    .filter(|h| disk::has_blob(self.storage(), &self.config.blob_dir, h))
                    .map(|h| (Node::Blob(h.clone()), h))
                    .collect())
            }
            Node::PagesDir(s) => {
                let pages = self.with_known(
                    s,
                    |r| r.known_page_count(),
                    |loaded| Ok(loaded.rendered.page_count(&loaded.manager)),
                )?;
                Ok((1..pages)
                    .map(|n| (Node::PageFile(s.clone(), n), format!("{n}.html")))
                    .collect())
            }
            Node::LeavesDir(s) => {
                let page =
                    |id: &String| (Node::LeafPage(s.clone(), id.clone()), format!("{id}.html"));
                self.with_known(
                    s,
                    |r| Some(r.known_branch_ends()?.iter().map(page).collect()),
                    |loaded| {
                        Ok(loaded
                            .rendered
                            .branch_ends(&loaded.manager)
                            .iter()
                            .map(page)
                            .collect())
                    },
                )
            }
            Node::LabelsDir(s) => {
                let link = |label: &String| (Node::Label(s.clone(), label.clone()), label.clone());
                self.with_known(
                    s,
                    |r| Some(r.known_labels()?.keys().map(link).collect()),
                    |loaded| {
                        Ok(loaded
                            .rendered
                            .labels(&loaded.manager)
                            .keys()
                            .map(link)
                            .collect())
                    },
                )
            }
            Node::EntriesDir(s) => {
                let files = |entries: &[EntryFile]| {
                    let mut out: Vec<(Node, String)> = entries
                        .iter()
                        .filter(|e| usable_name(&e.id))
                        .map(|e| (Node::Entry(s.clone(), e.id.to_string()), e.name()))
                        .collect();
                    out.push((Node::EntriesNew(s.clone()), "new".to_owned()));
                    out
                };
                self.with_known(
                    s,
                    |r| r.known_entries().map(files),
                    |loaded| Ok(files(loaded.rendered.entries(&loaded.manager))),
                )
            }
            _ => Err(VfsError::NotADirectory),
        }
    }
}
