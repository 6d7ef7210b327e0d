//! The fixed layout: which names a directory holds and which node each name is.
//!
//! One table (`FIXED`) holds the names of the fixed directories in listing order — the
//! root, `history/` and a session's directory — and lookups (`lookup.rs`), listings
//! (`listing.rs`) and paths (`paths.rs`) all read it. Beside it: which names the store may
//! give (a session id that can name a directory, a label's file name, a workspace's
//! encoded name, a link's target) and `in_session_dir`, the nodes of a session's directory
//! that a kernel may keep while the store's changes are followed (`sessions/followed.rs`).

use super::inode::Node;
use super::inode::StoreFile;
use super::NodeKind;
use gjcfs_engine::store::legacy::encode_absolute;

/// The longest name a directory entry may have on the filesystems the mount serves to.
const NAME_MAX: usize = 255;

/// A directory whose names are fixed: the names it holds do not depend on the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FixedDir {
    /// The mount's root.
    Root,
    /// `history/`.
    History,
    /// `sessions/<id>/`.
    Session,
}

/// One name of a fixed directory and the node it is, made from the session id (empty
/// outside a session's directory).
struct FixedName {
    dir: FixedDir,
    name: &'static str,
    node: fn(&str) -> Node,
}

const fn fixed(dir: FixedDir, name: &'static str, node: fn(&str) -> Node) -> FixedName {
    FixedName { dir, name, node }
}

/// The fixed layout, in listing order: lookups, listings and paths all read this table.
const FIXED: [FixedName; 32] = [
    fixed(FixedDir::Root, "sessions", |_| Node::SessionsDir),
    fixed(FixedDir::Root, "blobs", |_| Node::BlobsDir),
    fixed(FixedDir::Root, "history", |_| Node::HistoryDir),
    fixed(FixedDir::Root, "projects", |_| Node::ProjectsDir),
    fixed(FixedDir::Root, "by-date", |_| Node::ByDateDir),
    fixed(FixedDir::Root, "recent", |_| Node::RecentDir),
    fixed(FixedDir::Root, "search", |_| Node::SearchRoot),
    fixed(FixedDir::Root, "files", |_| Node::FilesRoot),
    fixed(FixedDir::Root, "index.html", |_| {
        Node::StorePage(StoreFile::Index)
    }),
    fixed(FixedDir::Root, "usage.json", |_| {
        Node::StorePage(StoreFile::UsageJson)
    }),
    fixed(FixedDir::Root, "usage.svg", |_| {
        Node::StorePage(StoreFile::UsageSvg)
    }),
    fixed(FixedDir::Root, "check", |_| Node::CheckReport),
    fixed(FixedDir::Root, ".ignore", |_| Node::IgnoreRules),
    fixed(FixedDir::History, "README", |_| Node::HistoryReadme),
    fixed(FixedDir::History, "errors", |_| Node::HistoryErrors),
    fixed(FixedDir::History, "prompts.jsonl", |_| Node::HistoryPrompts),
    fixed(FixedDir::History, "search", |_| Node::SearchDir),
    fixed(FixedDir::Session, "header.json", |s| Node::Header(s.into())),
    fixed(FixedDir::Session, "session.jsonl", |s| {
        Node::Transcript(s.into())
    }),
    fixed(FixedDir::Session, "entries", |s| Node::EntriesDir(s.into())),
    fixed(FixedDir::Session, "leaf", |s| Node::Leaf(s.into())),
    fixed(FixedDir::Session, "context.json", |s| {
        Node::Context(s.into())
    }),
    fixed(FixedDir::Session, "context.md", |s| {
        Node::ContextMd(s.into())
    }),
    fixed(FixedDir::Session, "context.html", |s| {
        Node::ContextHtml(s.into())
    }),
    fixed(FixedDir::Session, "pages", |s| Node::PagesDir(s.into())),
    fixed(FixedDir::Session, "tree.txt", |s| Node::Tree(s.into())),
    fixed(FixedDir::Session, "tree.svg", |s| Node::TreeSvg(s.into())),
    fixed(FixedDir::Session, "leaves", |s| Node::LeavesDir(s.into())),
    fixed(FixedDir::Session, "usage.json", |s| Node::Usage(s.into())),
    fixed(FixedDir::Session, "labels", |s| Node::LabelsDir(s.into())),
    fixed(FixedDir::Session, "errors", |s| Node::Errors(s.into())),
    fixed(FixedDir::Session, "blobs", |s| {
        Node::SessionBlobsDir(s.into())
    }),
];

/// Which fixed directory `dir` is, with its session id (empty outside a session).
fn fixed_dir(dir: &Node) -> Option<(FixedDir, &str)> {
    match dir {
        Node::Root => Some((FixedDir::Root, "")),
        Node::HistoryDir => Some((FixedDir::History, "")),
        Node::SessionDir(sid) => Some((FixedDir::Session, sid)),
        _ => None,
    }
}

/// Whether `node` is a file or directory of a session's directory that is one node for
/// good and whose attributes change only with the session's file or through the model:
/// what a kernel may keep while the session's changes are followed
/// (`sessions/followed.rs`). Not `errors` (a failure to load changes it), not the views
/// ([`Node::rendered_from_transcript`]: each version of their bytes has a number of its
/// own, looked up at every open), and not the session directory's own entry (the session
/// may go away).
pub(super) fn in_session_dir(node: &Node) -> bool {
    matches!(
        node,
        Node::Transcript(_)
            | Node::EntriesDir(_)
            | Node::Leaf(_)
            | Node::PagesDir(_)
            | Node::LeavesDir(_)
            | Node::LabelsDir(_)
            | Node::SessionBlobsDir(_)
    )
}

/// Whether `dir` holds fixed names only (the root, `history/`, a session's directory).
pub(super) fn is_fixed_dir(dir: &Node) -> bool {
    fixed_dir(dir).is_some()
}

/// The node `name` names in fixed directory `dir`; `None` when `dir` is not one or holds
/// no such name.
pub(super) fn fixed_child(dir: &Node, name: &str) -> Option<Node> {
    let (kind, sid) = fixed_dir(dir)?;
    FIXED
        .iter()
        .find(|f| f.dir == kind && f.name == name)
        .map(|f| (f.node)(sid))
}

/// The nodes of fixed directory `dir` with their names, in listing order (empty when
/// `dir` is not one).
pub(super) fn fixed_children(dir: &Node) -> Vec<(Node, String)> {
    let Some((kind, sid)) = fixed_dir(dir) else {
        return Vec::new();
    };
    FIXED
        .iter()
        .filter(|f| f.dir == kind)
        .map(|f| ((f.node)(sid), f.name.to_owned()))
        .collect()
}

/// The path from the root of a node with a fixed name: `None` for any other node.
pub(super) fn fixed_path(node: &Node) -> Option<Vec<String>> {
    let sid = node.session().unwrap_or("");
    let f = FIXED.iter().find(|f| (f.node)(sid) == *node)?;
    let mut path = match f.dir {
        FixedDir::Root => Vec::new(),
        FixedDir::History => vec!["history".to_owned()],
        FixedDir::Session => vec!["sessions".to_owned(), sid.to_owned()],
    };
    path.push(f.name.to_owned());
    Some(path)
}

/// A rendering of the session for people ([`gjcfs_engine::views`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum View {
    /// `context.md`; its image links point into the session's `blobs/`.
    ContextMd,
    /// `context.html`; its images are the session's `blobs/`.
    ContextHtml,
    /// `tree.txt`.
    Tree,
    /// `tree.svg`; its branch ends link into `leaves/`.
    TreeSvg,
    /// `usage.json`.
    Usage,
}

impl View {
    /// Every view, in the order of their numbers (`view as usize`).
    pub const ALL: [View; 5] = [
        View::ContextMd,
        View::ContextHtml,
        View::Tree,
        View::TreeSvg,
        View::Usage,
    ];
}

/// The view a node shows, if it is one.
pub(super) fn view_of(node: &Node) -> Option<(&str, View)> {
    match node {
        Node::ContextMd(s) => Some((s, View::ContextMd)),
        Node::ContextHtml(s) => Some((s, View::ContextHtml)),
        Node::Tree(s) => Some((s, View::Tree)),
        Node::TreeSvg(s) => Some((s, View::TreeSvg)),
        Node::Usage(s) => Some((s, View::Usage)),
        _ => None,
    }
}

/// Whether `name` can be a file name in a directory of the mount.
pub(crate) fn usable_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= NAME_MAX
        && name != "."
        && name != ".."
        && !name.contains(['/', '\0'])
}

/// Whether a name looked up in a directory of queries (`search/`, `history/search/`) is
/// one that tools probe every directory for, not a query a person asks: a dot name
/// (`.git`, `.ignore`, `.DS_Store`, `.hidden`, …) or a file a desktop looks for
/// (`desktop.ini`, `Thumbs.db`, `folder.jpg`, `autorun.inf`, …). Such a name is not there.
pub(super) fn is_probe_name(name: &str) -> bool {
    const DESKTOP: [&str; 7] = [
        "desktop.ini",
        "thumbs.db",
        "ehthumbs.db",
        "folder.jpg",
        "folder.gif",
        "autorun.inf",
        "icon\r",
    ];
    name.starts_with('.') || DESKTOP.iter().any(|d| d.eq_ignore_ascii_case(name))
}

/// Whether a session id can name its directory: a usable name without control characters
/// (a newline in a name breaks every tool that reads `ls`), and not starting with `-` (a
/// tool would read it as an option).
pub fn safe_session_name(id: &str) -> bool {
    usable_name(id) && !id.starts_with('-') && !id.chars().any(char::is_control)
}

pub(super) fn kind_of(node: &Node) -> NodeKind {
    if node.is_dir() {
        NodeKind::Directory
    } else if matches!(
        node,
        Node::ProjectLink(..)
            | Node::Label(..)
            | Node::DateLink(..)
            | Node::RecentLink(_)
            | Node::SearchHit(..)
            | Node::FilesLink(..)
    ) {
        NodeKind::Symlink
    } else {
        NodeKind::File
    }
}

/// The `projects/` name of a workspace.
pub(super) fn project_name(cwd: &str) -> String {
    encode_absolute(cwd)
}

/// How many bytes of a label over [`NAME_MAX`] bytes its file name keeps.
const LONG_LABEL_KEPT: usize = 200;

/// The file name of a label under `labels/`: the label itself when it can be one, else the
/// label with `%`, `/`, control characters (and the dots of `.` and `..`) written as `%XX`
/// — reversible, so every label shows, and distinct labels get distinct names. A name that
/// would pass 255 bytes keeps its first 200 and ends in `%~` and 16 hex digits of the
/// label's SHA-256.
pub fn label_file_name(label: &str) -> String {
    let mut name = String::with_capacity(label.len());
    if label == "." || label == ".." {
        name.push_str(&"%2E".repeat(label.len()));
    } else {
        for c in label.chars() {
            if c == '%' || c == '/' || c.is_control() {
                let mut buf = [0; 4];
                for byte in c.encode_utf8(&mut buf).bytes() {
                    name.push_str(&format!("%{byte:02X}"));
                }
            } else {
                name.push(c);
            }
        }
    }
    if name.len() <= NAME_MAX {
        return name;
    }
    use sha2::{Digest, Sha256};
    let mut cut = LONG_LABEL_KEPT;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    let digest = Sha256::digest(label.as_bytes());
    let hex = gjcfs_engine::format::blob::hex(&digest[..8]);
    format!("{}%~{hex}", &name[..cut])
}

/// Where `projects/<name>/<sid>` leads.
pub(super) fn link_target(sid: &str) -> String {
    format!("../../sessions/{sid}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sessions_kept_nodes_are_its_fixed_names_but_errors_and_the_views() {
        let kept: Vec<String> = fixed_children(&Node::SessionDir("s".into()))
            .into_iter()
            .filter(|(node, _)| in_session_dir(node))
            .map(|(_, name)| name)
            .collect();
        let mut expected: Vec<String> = FIXED
            .iter()
            .filter(|f| f.dir == FixedDir::Session && f.name != "errors")
            .filter(|f| (f.node)("s").rendered_from_transcript().is_none())
            .map(|f| f.name.to_owned())
            .collect();
        expected.sort();
        let mut sorted = kept.clone();
        sorted.sort();
        assert_eq!(sorted, expected);
        assert!(!in_session_dir(&Node::SessionDir("s".into())));
        assert!(!in_session_dir(&Node::Errors("s".into())));
    }

    #[test]
    fn every_label_gets_a_distinct_usable_file_name() {
        let labels = [
            "checkpoint",
            "a b",
            ".hidden",
            "..x",
            ".",
            "..",
            "a/b",
            "a%2Fb",
            "line\nbreak",
            "日本",
        ];
        let names: Vec<String> = labels.iter().map(|l| label_file_name(l)).collect();
        assert_eq!(names[..4], ["checkpoint", "a b", ".hidden", "..x"]);
        assert_eq!(
            names[4..9],
            ["%2E", "%2E%2E", "a%2Fb", "a%252Fb", "line%0Abreak"]
        );
        assert_eq!(names[9], "日本");
        for name in &names {
            assert!(usable_name(name), "{name:?}");
        }
        let long = "é".repeat(300);
        let name = label_file_name(&long);
        assert!(name.len() <= NAME_MAX && usable_name(&name));
        assert_ne!(name, label_file_name(&"é".repeat(301)));
    }

    #[test]
    fn unsafe_session_ids_are_recognised() {
        assert!(safe_session_name("0194f1a2-7c3e-7000-8000-000000000000"));
        for bad in ["", ".", "..", "a/b", "a\nb", "a\rb", "-rf", "x\u{1b}[31m"] {
            assert!(!safe_session_name(bad), "{bad:?}");
        }
        assert!(!safe_session_name(&"a".repeat(256)));
        assert!(safe_session_name(&"a".repeat(255)));
    }
}
