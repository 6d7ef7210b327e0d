//! `files/`: the files the sessions read or changed, as a tree of their paths, from the
//! touches the search index keeps ([`gjcfs_search::touches`]: what `gjcfs files` answers).
//!
//! ```text
//! files/<a>/<b>/…/<name>/                    a directory per component of a touched path
//! files/<path>/NNN-<session-id>-<entry-id>   a touch of the path or of one under it, newest
//!                                            first: symlink to ../…/sessions/<id>/entries/
//!                                            <entry-id>.json (a `..` per level)
//! files/<path>/touches.jsonl                 those touches as `gjcfs files --json` prints them
//! ```
//!
//! A directory's subdirectories are the next components of the touched paths under it:
//! `files/home/ann/src/` stands for `/home/ann/src`. The paths an entry wrote from a home
//! directory (`~/notes.md`, kept as written: the home of the machine the session ran on is
//! not known) are under `files/~/`, unless an absolute path's first component is `~` too.
//!
//! Invariants:
//! - Only what the index holds is there: a name no touched path has is not found, and a
//!   component that cannot be a file name (empty, `.`, `..`, holding `/` or NUL, over 255
//!   bytes) is never shown. Nothing is opened at a touched path.
//! - A directory names its own files first: a component named `touches.jsonl`, or named as
//!   one of the directory's links, is not shown as a directory there.
//! - A directory links at most [`LINKS_SHOWN`] touches, the newest, numbered from `001`
//!   as the lines of `touches.jsonl`, which holds up to [`TOUCHES_SHOWN`] of them. A touch
//!   whose session id or entry id cannot be a name is a line with no link.
//! - The index is the one `search/` reads ([`SearchView::fresh_index`]), brought up to date
//!   with the store as a search does it; an answer (a directory's names, a path's touches)
//!   is served again for [`ANSWER_TTL`](super::search::ANSWER_TTL), so that listing a
//!   directory and looking up or reading what it lists agree; a change of a session the
//!   mount sees drops them.

use std::collections::BTreeMap;
use std::path::{PathBuf, MAIN_SEPARATOR, MAIN_SEPARATOR_STR};
use std::sync::Arc;

use super::layout::{safe_session_name, usable_name};
use super::search::{index_error, Answers, SearchView};
use super::VfsError;
use gjcfs_engine::json;
use gjcfs_search::{touch_json, FileTouch, SearchIndex, TouchFilters};

/// How many touches a directory links.
pub const LINKS_SHOWN: usize = 100;
/// How many touches `touches.jsonl` holds.
pub const TOUCHES_SHOWN: usize = 10_000;
/// The name of a directory's list of touches.
pub const TOUCHES_FILE: &str = "touches.jsonl";

/// The names a directory of `files/` holds: each name, with the touched path it stands for.
#[derive(Debug, Default)]
pub struct Names(pub BTreeMap<String, String>);

/// The touches of a directory's path.
#[derive(Debug)]
pub struct Touched {
    /// Link name → where it leads, newest first.
    pub links: Vec<(String, String)>,
    /// `touches.jsonl`.
    pub jsonl: Arc<Vec<u8>>,
}

/// Whether `name` may be a link's: it starts with three digits and a dash, as every
/// link's number does (what a lookup of any other name need not ask the touches for).
pub fn may_be_link(name: &str) -> bool {
    let bytes = name.as_bytes();
    bytes.len() > 4 && bytes[..3].iter().all(u8::is_ascii_digit) && bytes[3] == b'-'
}

impl Touched {
    /// Where the link `name` leads, if the directory has it.
    pub fn link(&self, name: &str) -> Option<&str> {
        if !may_be_link(name) {
            return None;
        }
        self.links
            .iter()
            .find(|(link, _)| link == name)
            .map(|(_, target)| target.as_str())
    }
}

/// `files/<dir>/<name>`'s directory: `dir` holds the components below `files/` joined by
/// `/` (empty for `files/` itself).
pub fn child_dir(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}

/// The link of the touch numbered `rank` (from 1) in `files/<dir>/`, and where it leads:
/// `None` when its session or entry cannot be named.
fn link_of(dir: &str, rank: usize, touch: &FileTouch) -> Option<(String, String)> {
    let sid = &touch.session_id;
    let entry = touch.entry_id.as_deref()?;
    let name = format!("{rank:03}-{sid}-{entry}");
    if !safe_session_name(sid) || !usable_name(entry) || !usable_name(&name) {
        return None;
    }
    // Up through each component of `dir` and `files/` itself.
    let up = "../".repeat(dir.split('/').count() + 1);
    Some((name, format!("{up}sessions/{sid}/entries/{entry}.json")))
}

/// Where `files/` reads its answers: the index of `search/`, brought up to date with the
/// files `paths` lists (the store's transcripts).
pub struct Source<'a> {
    pub search: &'a SearchView,
    pub paths: &'a dyn Fn() -> Vec<PathBuf>,
}

/// The answers of `files/`, kept a moment.
#[derive(Default)]
pub struct FilesView {
    names: Answers<Names>,
    touched: Answers<Touched>,
    /// The index as last brought up to date, while that is fresh: walking down a path
    /// checks the store once, not at each directory.
    fresh: Answers<SearchIndex>,
}

impl FilesView {
    /// The index, up to date with the store.
    fn index(&self, from: &Source<'_>) -> Result<Arc<SearchIndex>, VfsError> {
        self.fresh
            .get_or("", || from.search.fresh_index(from.paths))
    }

    /// The names `files/<dir>` holds (`dir` as [`child_dir`] makes it).
    pub fn names(&self, from: &Source<'_>, dir: &str) -> Result<Arc<Names>, VfsError> {
        self.names.get_or(dir, || {
            let index = self.index(from)?;
            let named = |parent: &str, names: &mut Names| -> Result<(), VfsError> {
                let found = index.touched_names(parent).map_err(index_error)?;
                for name in found.into_iter().filter(|n| usable_name(n)) {
                    let path = format!("{parent}{name}");
                    names.0.entry(name).or_insert(path);
                }
                Ok(())
            };
            let mut names = Names::default();
            if dir.is_empty() {
                // Absolute paths first: a name both begin with stands for the absolute one.
                named(MAIN_SEPARATOR_STR, &mut names)?;
                named("", &mut names)?;
            } else {
                let path = self.touched_path(from, dir)?;
                named(&format!("{path}{MAIN_SEPARATOR}"), &mut names)?;
            }
            Ok(Arc::new(names))
        })
    }

    /// The touched path `files/<dir>` stands for.
    fn touched_path(&self, from: &Source<'_>, dir: &str) -> Result<String, VfsError> {
        let (top, below) = match dir.split_once('/') {
            Some((top, below)) => (top, Some(below)),
            None => (dir, None),
        };
        let roots = self.names(from, "")?;
        let top = roots.0.get(top).ok_or(VfsError::NotFound)?;
        // No component holds `/` (it could not be a name).
        Ok(match below {
            Some(below) => format!(
                "{top}{MAIN_SEPARATOR}{}",
                below.replace('/', MAIN_SEPARATOR_STR)
            ),
            None => top.clone(),
        })
    }

    /// The touches of the path `files/<dir>` stands for, newest first.
    pub fn touched(&self, from: &Source<'_>, dir: &str) -> Result<Arc<Touched>, VfsError> {
        self.touched.get_or(dir, || {
            let path = self.touched_path(from, dir)?;
            let index = self.index(from)?;
            let filters = TouchFilters {
                limit: TOUCHES_SHOWN,
                ..TouchFilters::default()
            };
            let found = index.files_touched(&path, &filters).map_err(index_error)?;
            let mut jsonl = Vec::new();
            let mut links = Vec::new();
            for (at, touch) in found.touches.iter().enumerate() {
                json::write_compact(&touch_json(touch), &mut jsonl);
                jsonl.push(b'\n');
                if at < LINKS_SHOWN {
                    links.extend(link_of(dir, at + 1, touch));
                }
            }
            Ok(Arc::new(Touched {
                links,
                jsonl: Arc::new(jsonl),
            }))
        })
    }

    /// A session file changed: every answer is dropped.
    pub fn changed(&self) {
        self.names.clear();
        self.touched.clear();
        self.fresh.clear();
    }
}
