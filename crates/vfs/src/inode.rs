//! The inode table: every node named gets one number. Numbers are never reused; a node
//! keeps its number for the life of the table, except the nodes of a query
//! (`history/search/<q>`, `search/<q>/` and what it holds) and those under `files/`, which
//! are forgotten once the kernel forgets them (with a directory, what it holds that the
//! kernel does not), so that the table does not grow with every query ever asked: any
//! name under `search/` is a query, and holds nothing in memory once the kernel lets it
//! go; a link under `files/` is renamed as new touches come.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};

use hashbrown::HashTable;

/// The root directory's inode number.
pub const ROOT_INO: u64 = 1;

/// A store-wide file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreFile {
    /// `usage.json`.
    UsageJson,
    /// `usage.svg`.
    UsageSvg,
    /// `index.html`; each session's title comes from the caller.
    Index,
}

/// A node of the layout, identified by what it shows (not by where it was found).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Node {
    Root,
    SessionsDir,
    /// `blobs/`: the agent's content-addressed blob store.
    BlobsDir,
    /// `blobs/<sha256>`.
    Blob(String),
    ProjectsDir,
    /// `by-date/`: one directory per day a session was started.
    ByDateDir,
    /// `by-date/<YYYY-MM-DD>/`.
    DateDir(String),
    /// `by-date/<YYYY-MM-DD>/<HH-MM title (id)>`: day, name.
    DateLink(String, String),
    /// `recent/`: the newest sessions, numbered.
    RecentDir,
    /// `recent/<NNN title (id)>`.
    RecentLink(String),
    /// `search/`: full-text search over every session.
    SearchRoot,
    /// `search/<query>/`.
    SearchQuery(String),
    /// `search/<query>/NNN-<session-id>-<entry-id>.json`: query, name.
    SearchHit(String, String),
    /// `search/<query>/results.jsonl`.
    SearchResults(String),
    /// `files/`: the files the sessions touched, by path.
    FilesRoot,
    /// `files/<a>/<b>/…/`: the components below `files/`, joined by `/`.
    FilesDir(String),
    /// `files/<path>/NNN-<session-id>-<entry-id>`: the directory (as in
    /// [`Node::FilesDir`]), the link's name.
    FilesLink(String, String),
    /// `files/<path>/touches.jsonl`: the directory, as in [`Node::FilesDir`].
    FilesTouches(String),
    /// `projects/<encoded-cwd>/`.
    ProjectDir(String),
    /// `projects/<encoded-cwd>/<session-id>`: project name, session id.
    ProjectLink(String, String),
    /// `.ignore` at the root: what tools that honour ignore files skip.
    IgnoreRules,
    HistoryDir,
    HistoryPrompts,
    /// `history/README`: how `history/` works.
    HistoryReadme,
    /// `history/errors`: why the last queries were refused.
    HistoryErrors,
    SearchDir,
    /// `history/search/<query>`.
    Search(String),
    SessionDir(String),
    Header(String),
    /// `sessions/<id>/session.jsonl`: the transcript's own bytes.
    Transcript(String),
    EntriesDir(String),
    /// An entry: session id, entry id.
    Entry(String, String),
    EntriesNew(String),
    Leaf(String),
    Context(String),
    Errors(String),
    /// `sessions/<id>/blobs/`: the blobs the session references (children are [`Node::Blob`]).
    SessionBlobsDir(String),
    /// `sessions/<id>/context.md`.
    ContextMd(String),
    /// `sessions/<id>/context.html`.
    ContextHtml(String),
    /// `sessions/<id>/tree.txt`.
    Tree(String),
    /// `sessions/<id>/tree.svg`.
    TreeSvg(String),
    /// `sessions/<id>/leaves/`: a page per branch end.
    LeavesDir(String),
    /// `sessions/<id>/leaves/<entry id>.html`: session id, entry id.
    LeafPage(String, String),
    /// `sessions/<id>/pages/`: the earlier pages of a long context.
    PagesDir(String),
    /// `sessions/<id>/pages/<n>.html`: session id, page number (from 1).
    PageFile(String, usize),
    /// `sessions/<id>/usage.json`.
    Usage(String),
    /// `sessions/<id>/labels/`.
    LabelsDir(String),
    /// `sessions/<id>/labels/<label>`: session id, label.
    Label(String, String),
    /// `usage.json` at the root: the whole store's usage.
    /// `usage.json`, `usage.svg`, `index.html` at the root.
    StorePage(StoreFile),
    /// `check` at the root: the report of a check of the store.
    CheckReport,
}

impl Node {
    /// The session a node belongs to.
    /// The session whose file alone a rendered file's bytes come from: the header, the
    /// context and the views and pages made of it. (The `leaf` also shows a reset in
    /// progress, the `errors` what the model met: neither is the file's alone.)
    pub fn rendered_from_transcript(&self) -> Option<&str> {
        match self {
            Node::Header(s)
            | Node::Context(s)
            | Node::ContextMd(s)
            | Node::ContextHtml(s)
            | Node::Tree(s)
            | Node::TreeSvg(s)
            | Node::Usage(s)
            | Node::LeafPage(s, _)
            | Node::PageFile(s, _) => Some(s),
            _ => None,
        }
    }

    pub fn session(&self) -> Option<&str> {
        match self {
            Node::Root
            | Node::SessionsDir
            | Node::BlobsDir
            | Node::Blob(_)
            | Node::HistoryDir
            | Node::HistoryPrompts
            | Node::HistoryReadme
            | Node::IgnoreRules
            | Node::HistoryErrors
            | Node::SearchDir
            | Node::Search(_)
            | Node::ProjectsDir
            | Node::ProjectDir(_)
            | Node::ByDateDir
            | Node::DateDir(_)
            | Node::DateLink(..)
            | Node::SearchRoot
            | Node::SearchQuery(_)
            | Node::SearchHit(..)
            | Node::SearchResults(_)
            | Node::FilesRoot
            | Node::FilesDir(_)
            | Node::FilesLink(..)
            | Node::FilesTouches(_)
            | Node::RecentDir
            | Node::RecentLink(_)
            | Node::StorePage(_)
            | Node::CheckReport => None,
            Node::ProjectLink(_, s) => Some(s),
            Node::SessionDir(s)
            | Node::Header(s)
            | Node::Transcript(s)
            | Node::EntriesDir(s)
            | Node::Entry(s, _)
            | Node::EntriesNew(s)
            | Node::Leaf(s)
            | Node::Context(s)
            | Node::Errors(s)
            | Node::SessionBlobsDir(s)
            | Node::ContextMd(s)
            | Node::ContextHtml(s)
            | Node::Tree(s)
            | Node::TreeSvg(s)
            | Node::Usage(s)
            | Node::LabelsDir(s)
            | Node::LeavesDir(s)
            | Node::LeafPage(s, _)
            | Node::PagesDir(s)
            | Node::PageFile(s, _)
            | Node::Label(s, _) => Some(s),
        }
    }

    pub fn is_dir(&self) -> bool {
        matches!(
            self,
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
                | Node::PagesDir(_)
        )
    }
}

impl Node {
    /// Whether the kernel's references decide how long the node is kept: a query's nodes,
    /// and those under `files/` (its links are renamed as new touches come).
    pub fn forgettable(&self) -> bool {
        matches!(
            self,
            Node::Search(_)
                | Node::SearchQuery(_)
                | Node::SearchHit(..)
                | Node::SearchResults(_)
                | Node::FilesDir(_)
                | Node::FilesLink(..)
                | Node::FilesTouches(_)
        )
    }

    /// The forgettable directory a forgettable node lies in, forgotten with it: a query's
    /// (`search/<query>/…`), a directory of `files/` (not `files/` itself).
    fn forgotten_with(&self) -> Option<Node> {
        match self {
            Node::SearchHit(query, _) | Node::SearchResults(query) => {
                Some(Node::SearchQuery(query.clone()))
            }
            Node::FilesLink(dir, _) | Node::FilesTouches(dir) => Some(Node::FilesDir(dir.clone())),
            Node::FilesDir(dir) => dir
                .rsplit_once('/')
                .map(|(parent, _)| Node::FilesDir(parent.to_owned())),
            _ => None,
        }
    }
}

/// Node ↔ inode number. Numbers start at [`ROOT_INO`] and are never reused.
#[derive(Debug)]
pub struct InodeTable {
    /// Node by number; a forgotten number is not here.
    nodes: HashMap<u64, Node>,
    /// The last number given.
    last: u64,
    /// The kernel's references to each forgettable node (lookups not yet forgotten).
    lookups: HashMap<u64, u64>,
    /// The number each node has now, found by its node: the table holds only numbers,
    /// hashed by the node `nodes` has for them, so a node is kept once (a session of a
    /// million entries has a million of them). Every number in it is in `nodes`.
    numbers: HashTable<u64>,
    hasher: RandomState,
    /// Session id → the numbers of its nodes other than entries, in the order they were
    /// given (few: an append announces them all).
    by_session: HashMap<String, Vec<u64>>,
    /// Session id → the numbers of its entries (possibly many).
    entries_of: HashMap<String, Vec<u64>>,
    /// A forgettable directory → the numbers of the nodes in it (forgotten with it).
    in_dir: HashMap<Node, Vec<u64>>,
}

impl Default for InodeTable {
    fn default() -> Self {
        let mut table = InodeTable {
            nodes: HashMap::new(),
            last: 0,
            lookups: HashMap::new(),
            numbers: HashTable::new(),
            hasher: RandomState::new(),
            by_session: HashMap::new(),
            entries_of: HashMap::new(),
            in_dir: HashMap::new(),
        };
        table.ino(&Node::Root);
        table
    }
}

impl InodeTable {
    /// The number of `node`, assigned on first use.
    pub fn ino(&mut self, node: &Node) -> u64 {
        if let Some(ino) = self.known(node) {
            return ino;
        }
        self.last += 1;
        let ino = self.last;
        self.nodes.insert(ino, node.clone());
        let (nodes, hasher) = (&self.nodes, &self.hasher);
        self.numbers
            .insert_unique(hasher.hash_one(node), ino, |number| {
                hasher.hash_one(&nodes[number])
            });
        if let Some(sid) = node.session() {
            let by = if matches!(node, Node::Entry(..)) {
                &mut self.entries_of
            } else {
                &mut self.by_session
            };
            by.entry(sid.to_owned()).or_default().push(ino);
        }
        if let Some(dir) = node.forgotten_with() {
            self.in_dir.entry(dir).or_default().push(ino);
        }
        ino
    }

    /// The numbers given so far to the nodes of session `sid` other than its entries.
    pub fn of_session(&self, sid: &str) -> &[u64] {
        self.by_session.get(sid).map_or(&[], Vec::as_slice)
    }

    /// The numbers given so far to the entries of session `sid`.
    pub fn entries_of(&self, sid: &str) -> &[u64] {
        self.entries_of.get(sid).map_or(&[], Vec::as_slice)
    }

    /// The number of `node` if it has one.
    pub fn known(&self, node: &Node) -> Option<u64> {
        let nodes = &self.nodes;
        self.numbers
            .find(self.hasher.hash_one(node), |number| {
                nodes.get(number) == Some(node)
            })
            .copied()
    }

    pub fn node(&self, ino: u64) -> Option<&Node> {
        self.nodes.get(&ino)
    }

    /// Counts a reference the kernel takes to `ino` with an entry (a lookup, an entry of a
    /// listing with attributes). Counted for the numbers that are forgotten with the kernel:
    /// queries, and rendered files read by node (`snapshots.rs`).
    pub fn remember(&mut self, ino: u64) {
        *self.lookups.entry(ino).or_default() += 1;
    }

    /// Gives `node` a new number (a new version of a rendered file, see `snapshots.rs`);
    /// the old one names the node until the kernel forgets it.
    pub fn renumber(&mut self, node: &Node) -> u64 {
        if let Some(ino) = self.known(node) {
            self.unnumber(node, ino);
        }
        self.ino(node)
    }

    /// Whether `ino` is the number its node has now.
    pub fn is_current(&self, ino: u64) -> bool {
        self.node(ino)
            .is_some_and(|node| self.known(node) == Some(ino))
    }

    /// The kernel dropped `count` references to `ino`; whether it holds none now. A query's
    /// node then is forgotten (with a query directory, the nodes in it that the kernel
    /// holds no reference to), and so is an old number of a renumbered node (no number is
    /// given again); other nodes keep theirs. Numbers never counted are left alone.
    pub fn forget(&mut self, ino: u64, count: u64) -> bool {
        let Some(left) = self.lookups.get_mut(&ino) else {
            return false;
        };
        *left = left.saturating_sub(count);
        if *left > 0 {
            return false;
        }
        self.lookups.remove(&ino);
        let current = self.is_current(ino);
        let forgettable = self.nodes.get(&ino).is_some_and(Node::forgettable);
        if current && !forgettable {
            return true;
        }
        self.drop_number(ino);
        true
    }

    /// Forgets number `ino` and what only it kept.
    fn drop_number(&mut self, ino: u64) {
        let Some(node) = self.nodes.remove(&ino) else {
            return;
        };
        self.lookups.remove(&ino);
        self.unnumber(&node, ino);
        if let Some(sid) = node.session() {
            if let Some(numbers) = self.by_session.get_mut(sid) {
                numbers.retain(|&n| n != ino);
            }
        }
        if let Some(dir) = node.forgotten_with() {
            if let Some(numbers) = self.in_dir.get_mut(&dir) {
                numbers.retain(|&n| n != ino);
                if numbers.is_empty() {
                    self.in_dir.remove(&dir);
                }
            }
        }
        // A directory's nodes go with its last number (an old one leaves them).
        let last = self.known(&node).is_none();
        let inside = if last {
            self.in_dir.remove(&node).unwrap_or_default()
        } else {
            Vec::new()
        };
        for number in inside {
            if self.lookups.contains_key(&number) {
                // Still the kernel's: forgotten with its own last reference.
                self.in_dir.entry(node.clone()).or_default().push(number);
            } else {
                self.drop_number(number);
            }
        }
    }

    /// Takes `ino` out of the current numbers, if it is the one `node` has.
    fn unnumber(&mut self, node: &Node, ino: u64) {
        if let Ok(current) = self
            .numbers
            .find_entry(self.hasher.hash_one(node), |&number| number == ino)
        {
            current.remove();
        }
    }

    /// How many nodes have a number now.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.numbers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_stable_and_distinct() {
        let mut t = InodeTable::default();
        assert_eq!(t.ino(&Node::Root), ROOT_INO);
        let a = t.ino(&Node::Leaf("s".into()));
        let b = t.ino(&Node::Header("s".into()));
        assert_ne!(a, b);
        assert_eq!(t.ino(&Node::Leaf("s".into())), a);
        assert_eq!(t.node(a), Some(&Node::Leaf("s".into())));
        assert_eq!(t.node(0), None);
        assert_eq!(t.node(99), None);
        let other = t.ino(&Node::Leaf("t".into()));
        let entry = t.ino(&Node::Entry("s".into(), "e1".into()));
        assert_eq!(t.of_session("s"), &[a, b]);
        assert_eq!(t.entries_of("s"), &[entry]);
        assert_eq!(t.known(&Node::Entry("s".into(), "e1".into())), Some(entry));
        assert_eq!(t.known(&Node::Entry("s".into(), "e2".into())), None);
        assert_eq!(t.of_session("t"), &[other]);
        assert!(t.of_session("u").is_empty());
    }

    #[test]
    fn queries_are_forgotten_with_the_kernel_s_last_reference() {
        let mut t = InodeTable::default();
        let q = t.ino(&Node::Search("x".into()));
        t.remember(q);
        t.remember(q);
        let before = t.len();
        assert!(!t.forget(q, 1));
        assert_eq!(t.node(q), Some(&Node::Search("x".into())));
        assert!(t.forget(q, 1));
        assert_eq!(t.node(q), None);
        assert_eq!(t.len(), before - 1);
        let again = t.ino(&Node::Search("x".into()));
        assert!(again > q, "numbers are never reused");
        // Other nodes keep their numbers.
        let leaf = t.ino(&Node::Leaf("s".into()));
        t.remember(leaf);
        assert!(t.forget(leaf, 5));
        assert_eq!(t.node(leaf), Some(&Node::Leaf("s".into())));
        assert_eq!(t.ino(&Node::Leaf("s".into())), leaf);
        // A number never counted is not the kernel's to forget.
        let header = t.ino(&Node::Header("s".into()));
        assert!(!t.forget(header, 1));
    }

    #[test]
    fn an_old_number_is_forgotten_with_the_kernel_s_last_reference() {
        let mut t = InodeTable::default();
        let node = Node::Context("s".into());
        let first = t.ino(&node);
        t.remember(first);
        t.remember(first);
        let second = t.renumber(&node);
        assert!(second > first);
        assert_eq!(t.ino(&node), second);
        assert!(!t.is_current(first) && t.is_current(second));
        assert_eq!(t.of_session("s"), &[first, second]);
        // A partial forget (a revalidation's) leaves the old number naming the node.
        assert!(!t.forget(first, 1));
        assert_eq!(t.node(first), Some(&node), "still names the node");
        assert!(t.forget(first, 1));
        assert_eq!(t.node(first), None);
        assert_eq!(t.of_session("s"), &[second], "no longer announced");
        // The current number stays when the kernel lets it go.
        t.remember(second);
        assert!(t.forget(second, 1));
        assert_eq!(t.node(second), Some(&node));
        assert_eq!(t.ino(&node), second);
    }

    #[test]
    fn an_old_number_of_a_query_is_forgotten_with_its_count() {
        let mut t = InodeTable::default();
        let node = Node::Search("x".into());
        let first = t.ino(&node);
        t.remember(first);
        let second = t.renumber(&node);
        t.remember(second);
        assert!(t.forget(first, 1));
        assert_eq!(t.node(first), None);
        assert_eq!(t.node(second), Some(&node));
        assert!(t.forget(second, 1));
        assert_eq!(t.node(second), None, "the current query's number too");
    }

    #[test]
    fn a_files_directory_is_forgotten_with_what_it_holds_that_the_kernel_does_not() {
        let mut t = InodeTable::default();
        let root = t.ino(&Node::FilesRoot);
        t.remember(root);
        let dir = t.ino(&Node::FilesDir("w/proj".into()));
        t.remember(dir);
        // Listed only: never the kernel's.
        let sub = t.ino(&Node::FilesDir("w/proj/src".into()));
        let deeper = t.ino(&Node::FilesTouches("w/proj/src".into()));
        let touches = t.ino(&Node::FilesTouches("w/proj".into()));
        let link = t.ino(&Node::FilesLink("w/proj".into(), "001-s-e".into()));
        t.remember(link);
        let other = t.ino(&Node::FilesDir("w/other".into()));
        let before = t.len();
        assert!(t.forget(dir, 1));
        for gone in [dir, sub, deeper, touches] {
            assert_eq!(t.node(gone), None, "{gone}");
        }
        assert!(t.node(link).is_some(), "still the kernel's");
        assert!(t.node(other).is_some(), "not in the directory");
        assert_eq!(t.len(), before - 4);
        assert!(t.forget(link, 1));
        assert_eq!(t.node(link), None);
        // `files/` itself keeps its number.
        assert!(t.forget(root, 1));
        assert_eq!(t.node(root), Some(&Node::FilesRoot));
    }
}
