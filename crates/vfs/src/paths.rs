//! Nodes by path, for platforms whose filesystem calls name a file by its path from the
//! mount root (Dokan on Windows) instead of by a parent's inode number and a name (FUSE).
//!
//! - [`Vfs::resolve`] walks the names of a path from the root. A name that is not found as
//!   written is looked for again ignoring case, as Windows expects of a filesystem: it
//!   matches when exactly one name of the directory equals it ignoring case (two names that
//!   differ only in case, both missing the spelling asked for, match neither).
//! - [`Vfs::resolve_path`] does the same for a path written with `\` or `/` between names.
//! - [`Vfs::path_of`] is the way back: the names from the root to a numbered node. A blob
//!   is reached both as `blobs/<sha256>` and through a session's `blobs/`; its path is the
//!   first.
//!
//! Resolving by path holds no kernel reference: a query's node (`history/search/<query>`)
//! reached this way keeps its number for the life of the model, like every other node.

use super::fs::Vfs;
use super::inode::{Node, ROOT_INO};
use super::layout::fixed_path;
use super::{Attr, VfsError};

/// Why a path did not resolve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    pub error: VfsError,
    /// Whether the failure is at the path's last name (the node itself is missing or
    /// refused), rather than on the way to it (a missing directory, a file used as one,
    /// even as the last name's directory).
    pub at_last: bool,
}

/// Whether two names are the same ignoring case (each character's uppercase form, as
/// Windows compares names).
pub fn same_ignoring_case(a: &str, b: &str) -> bool {
    a.chars()
        .flat_map(char::to_uppercase)
        .eq(b.chars().flat_map(char::to_uppercase))
}

impl Vfs {
    /// The node a path names: `names` from the mount root (empty: the root). `.` names the
    /// directory it is in; `..` is refused (a path from a platform comes normalized).
    pub fn resolve<S: AsRef<str>>(&self, names: &[S]) -> Result<Attr, Unresolved> {
        let mut attr = self.getattr(ROOT_INO).map_err(|error| Unresolved {
            error,
            at_last: names.is_empty(),
        })?;
        let names: Vec<&str> = names
            .iter()
            .map(AsRef::as_ref)
            .filter(|n| *n != ".")
            .collect();
        for (i, name) in names.iter().enumerate() {
            let at_last = i + 1 == names.len();
            let fail = |error| Unresolved { error, at_last };
            if *name == ".." {
                return Err(fail(VfsError::InvalidArgument("`..` in a path".into())));
            }
            attr = match self.lookup_child(attr.ino, name) {
                // The name's directory is a file: the way to it fails.
                Err(VfsError::NotADirectory) => {
                    return Err(Unresolved {
                        error: VfsError::NotADirectory,
                        at_last: false,
                    })
                }
                Err(VfsError::NotFound) => {
                    let folded = self.fold_case(attr.ino, name).map_err(fail)?;
                    self.lookup_child(attr.ino, &folded).map_err(fail)?
                }
                found => found.map_err(fail)?,
            };
        }
        Ok(attr)
    }

    /// The node a `\`- or `/`-separated path from the mount root names (empty names, as in
    /// `\` or `a\\b`, are skipped). A name holding `\` itself is reached through
    /// [`Vfs::resolve`].
    pub fn resolve_path(&self, path: &str) -> Result<Attr, Unresolved> {
        let names: Vec<&str> = path.split(['\\', '/']).filter(|n| !n.is_empty()).collect();
        self.resolve(&names)
    }

    /// [`Vfs::lookup`] without counting a kernel reference.
    fn lookup_child(&self, parent: u64, name: &str) -> Result<Attr, VfsError> {
        let dir = self.node(parent)?;
        let child = self.child(&dir, name)?;
        self.attr_of(&child)
    }

    /// The one name of directory `ino` equal to `name` ignoring case.
    fn fold_case(&self, ino: u64, name: &str) -> Result<String, VfsError> {
        let dir = self.node(ino)?;
        if !dir.is_dir() {
            return Err(VfsError::NotADirectory);
        }
        let names = self.names_as_listed(&dir, ino)?;
        let mut matching = names.into_iter().filter(|n| same_ignoring_case(n, name));
        match (matching.next(), matching.next()) {
            (Some(one), None) => Ok(one),
            _ => Err(VfsError::NotFound),
        }
    }

    /// The names of directory `dir`. The store-wide listings come from the scan the failed
    /// lookup just made, not from another one.
    fn names_as_listed(&self, dir: &Node, ino: u64) -> Result<Vec<String>, VfsError> {
        Ok(match dir {
            Node::SessionsDir => self
                .sessions
                .with_listing(|listing| listing.keys().cloned().collect()),
            Node::ProjectsDir => self.project_names().into_iter().collect(),
            Node::ByDateDir => self.sessions.navigation().by_date.keys().cloned().collect(),
            Node::RecentDir => self.sessions.navigation().recent.keys().cloned().collect(),
            _ => self.list(ino)?.into_iter().map(|e| e.name).collect(),
        })
    }

    /// The names from the mount root to node `ino` (empty for the root).
    pub fn path_of(&self, ino: u64) -> Result<Vec<String>, VfsError> {
        let node = self.node(ino)?;
        let owned = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect();
        let session = |sid: &str, rest: &[&str]| {
            let mut names = vec!["sessions".to_owned(), sid.to_owned()];
            names.extend(rest.iter().map(|n| (*n).to_owned()));
            names
        };
        let files = |dir: &str, rest: &[&str]| {
            let mut names = vec!["files".to_owned()];
            names.extend(dir.split('/').map(str::to_owned));
            names.extend(rest.iter().map(|n| (*n).to_owned()));
            names
        };
        if let Some(path) = fixed_path(&node) {
            return Ok(path);
        }
        Ok(match &node {
            Node::Root => Vec::new(),
            Node::SessionDir(sid) => session(sid, &[]),
            Node::Blob(hash) => owned(&["blobs", hash]),
            Node::ProjectDir(project) => owned(&["projects", project]),
            Node::ProjectLink(project, sid) => owned(&["projects", project, sid]),
            Node::DateDir(day) => owned(&["by-date", day]),
            Node::DateLink(day, name) => owned(&["by-date", day, name]),
            Node::RecentLink(name) => owned(&["recent", name]),
            Node::SearchQuery(query) => owned(&["search", query]),
            Node::SearchHit(query, name) => owned(&["search", query, name]),
            Node::SearchResults(query) => owned(&["search", query, "results.jsonl"]),
            Node::Search(query) => owned(&["history", "search", query]),
            Node::FilesDir(dir) => files(dir, &[]),
            Node::FilesLink(dir, name) => files(dir, &[name]),
            Node::FilesTouches(dir) => files(dir, &[super::files::TOUCHES_FILE]),
            Node::EntriesNew(sid) => session(sid, &["entries", "new"]),
            Node::Label(sid, label) => session(sid, &["labels", label]),
            Node::LeafPage(sid, id) => session(sid, &["leaves", &format!("{id}.html")]),
            Node::PageFile(sid, n) => session(sid, &["pages", &format!("{n}.html")]),
            Node::Entry(sid, id) => {
                let name = self.with_session(sid, |loaded| {
                    Ok(loaded.rendered.entry(&loaded.manager, id).map(|e| e.name()))
                })?;
                session(sid, &["entries", &name.ok_or(VfsError::NotFound)?])
            }
            // Every fixed name is in the layout's table.
            _ => return Err(VfsError::NotFound),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SessionSource;
    use gjcfs_engine::json;
    use gjcfs_engine::manager::{SessionManager, StorageConfig};
    use gjcfs_engine::storage::SessionStorage;
    use std::path::Path;

    /// A store with one managed session of a question and its answer, the answer labelled
    /// `Mixed`.
    fn store(tmp: &Path) -> (Vfs, String) {
        let ws = tmp.join("workspace");
        gjcfs_engine::storage::FileStorage
            .ensure_dir(&ws)
            .expect("workspace");
        let manager = SessionManager::create_managed(
            &ws,
            &tmp.join("agent/sessions"),
            StorageConfig::files(tmp.join("agent/blobs")),
        )
        .expect("session");
        let message = |role: &str, text: &str| {
            json::parse(&format!(
                r#"{{"role":"{role}","content":"{text}","provider":"p","model":"m","timestamp":1}}"#
            ))
            .expect("json")
        };
        manager
            .append_message(message("user", "one"))
            .expect("append");
        let second = manager
            .append_message(message("assistant", "two"))
            .expect("append");
        manager
            .append_label_change(&second, Some("Mixed"))
            .expect("label");
        manager.close().expect("close");
        let vfs = Vfs::new(crate::test_config(
            std::sync::Arc::new(gjcfs_engine::storage::FileStorage),
            SessionSource::SessionsRoot(tmp.join("agent/sessions")),
            &tmp.join("agent"),
        ));
        (vfs, manager.session_id())
    }

    #[test]
    fn a_path_resolves_to_the_node_lookups_reach() {
        let tmp = tempfile::tempdir().expect("tmp");
        let (vfs, sid) = store(tmp.path());
        let sessions = vfs.lookup(ROOT_INO, "sessions").expect("sessions").ino;
        let sdir = vfs.lookup(sessions, &sid).expect("session").ino;
        let leaf = vfs.lookup(sdir, "leaf").expect("leaf");
        for path in [
            format!("sessions/{sid}/leaf"),
            format!("\\sessions\\{sid}\\leaf"),
            format!("sessions\\{sid}/./leaf"),
            format!("\\\\sessions\\\\{sid}\\leaf\\"),
        ] {
            assert_eq!(vfs.resolve_path(&path), Ok(leaf), "{path}");
        }
        assert_eq!(vfs.resolve_path("").map(|a| a.ino), Ok(ROOT_INO));
        assert_eq!(vfs.resolve_path("\\").map(|a| a.ino), Ok(ROOT_INO));
        assert_eq!(vfs.resolve(&["sessions", &sid, "leaf"]), Ok(leaf));
    }

    #[test]
    fn a_failure_says_whether_the_node_or_the_way_to_it_is_missing() {
        let tmp = tempfile::tempdir().expect("tmp");
        let (vfs, sid) = store(tmp.path());
        let missing = |error| {
            Err(Unresolved {
                error,
                at_last: true,
            })
        };
        let on_the_way = |error| {
            Err(Unresolved {
                error,
                at_last: false,
            })
        };
        assert_eq!(
            vfs.resolve_path(&format!("sessions/{sid}/nothing")),
            missing(VfsError::NotFound)
        );
        assert_eq!(
            vfs.resolve_path("sessions/no-such-session/leaf"),
            on_the_way(VfsError::NotFound)
        );
        assert_eq!(
            vfs.resolve_path(&format!("sessions/{sid}/leaf/x")),
            on_the_way(VfsError::NotADirectory)
        );
        assert_eq!(
            vfs.resolve_path(&format!("sessions/{sid}/leaf/x/y")),
            on_the_way(VfsError::NotADirectory)
        );
        assert!(matches!(
            vfs.resolve_path(&format!("sessions/{sid}/../{sid}")),
            Err(Unresolved {
                error: VfsError::InvalidArgument(_),
                at_last: false
            })
        ));
    }

    #[test]
    fn a_name_in_another_case_resolves_to_the_one_name_it_folds_to() {
        let tmp = tempfile::tempdir().expect("tmp");
        let (vfs, sid) = store(tmp.path());
        let exact = vfs
            .resolve_path(&format!("sessions/{sid}/context.json"))
            .expect("exact");
        let upper = sid.to_uppercase();
        assert_ne!(upper, sid, "the id has letters");
        assert_eq!(
            vfs.resolve_path(&format!("SESSIONS/{upper}/Context.JSON")),
            Ok(exact)
        );
        let label = vfs
            .resolve_path(&format!("sessions/{sid}/labels/Mixed"))
            .expect("label");
        assert_eq!(
            vfs.resolve_path(&format!("sessions/{sid}/LABELS/mIXED")),
            Ok(label)
        );
        assert_eq!(
            vfs.resolve_path(&format!("sessions/{sid}/labels/mixe")),
            Err(Unresolved {
                error: VfsError::NotFound,
                at_last: true
            })
        );
        assert!(same_ignoring_case("straße", "STRASSE"));
        assert!(!same_ignoring_case("a", "b"));
    }

    #[test]
    fn every_listed_node_has_the_path_that_resolves_to_it() {
        let tmp = tempfile::tempdir().expect("tmp");
        let (vfs, sid) = store(tmp.path());
        // Every node reachable from the root by listing, depth first, but `history/search`
        // (any name is a query there).
        let mut pending = vec![(ROOT_INO, Vec::<String>::new())];
        let mut seen = 0;
        while let Some((ino, path)) = pending.pop() {
            assert_eq!(vfs.path_of(ino), Ok(path.clone()), "{path:?}");
            assert_eq!(vfs.resolve(&path).map(|a| a.ino), Ok(ino), "{path:?}");
            seen += 1;
            if vfs.getattr(ino).expect("attr").kind != crate::NodeKind::Directory {
                continue;
            }
            for entry in vfs.readdir(ino).expect("list") {
                let mut child = path.clone();
                child.push(entry.name);
                pending.push((entry.ino, child));
            }
        }
        // The root's 8, the session's directory and its 11 names, 2 entries and `new`, a
        // label, a project and its link, a day and its link, a recent link, history's files.
        assert!(seen >= 30, "{seen} nodes");
        let query = vfs
            .resolve_path("history/search/some query")
            .expect("a query");
        assert_eq!(
            vfs.path_of(query.ino),
            Ok(vec!["history".into(), "search".into(), "some query".into()])
        );
        let entries = vfs
            .resolve_path(&format!("sessions/{sid}/entries"))
            .expect("entries");
        let first = vfs.readdir(entries.ino).expect("entries")[0].clone();
        assert_eq!(
            vfs.path_of(first.ino).expect("path").last(),
            Some(&first.name)
        );
        assert_eq!(vfs.path_of(9_999_999), Err(VfsError::NotFound));
    }
}
