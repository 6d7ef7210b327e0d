//! Tree and leaf semantics (the original's tree-traversal and labels tests).

use crate::common::SessionText;
use gjcfs::engine::{Session, Tree};

fn ids(session: &Session, indices: &[usize]) -> Vec<String> {
    indices
        .iter()
        .map(|&i| session.record(i).id().unwrap().to_owned())
        .collect()
}

fn path_ids(session: &Session, from: Option<&str>) -> Vec<String> {
    session
        .branch_path(from)
        .unwrap()
        .iter()
        .map(|r| r.id().unwrap().to_owned())
        .collect()
}

/// Renders the tree as `id(child,child)` text for compact assertions.
fn render(session: &Session, tree: &Tree) -> String {
    fn node(session: &Session, tree: &Tree, i: usize, out: &mut String) {
        out.push_str(session.record(i).id().unwrap());
        if !tree.children[i].is_empty() {
            out.push('(');
            for (n, &c) in tree.children[i].iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                node(session, tree, c, out);
            }
            out.push(')');
        }
    }
    let mut out = String::new();
    for (n, &r) in tree.roots.iter().enumerate() {
        if n > 0 {
            out.push(' ');
        }
        node(session, tree, r, &mut out);
    }
    out
}

fn branched() -> Session {
    SessionText::new()
        .message("a", None, "user", "a")
        .message("b", Some("a"), "assistant", "b")
        .message("c", Some("b"), "user", "c")
        .message("d", Some("b"), "user", "d")
        .message("e", Some("a"), "user", "e")
        .message("f", Some("d"), "assistant", "f")
        .session()
}

#[test]
fn empty_session_has_no_branch_tree_or_leaf() {
    let session = SessionText::new().session();
    assert!(session.branch_path(None).unwrap().is_empty());
    let tree = session.tree();
    assert!(tree.roots.is_empty());
    assert_eq!(session.leaf_entry(), None);
    assert_eq!(session.get_entry("nope"), None);
}

#[test]
fn leaf_is_the_last_entry_and_branch_paths_run_root_first() {
    let session = branched();
    assert_eq!(session.leaf_id(), Some("f"));
    assert_eq!(path_ids(&session, None), ["a", "b", "d", "f"]);
    assert_eq!(path_ids(&session, Some("c")), ["a", "b", "c"]);
    assert_eq!(
        session.branch_path(Some("zzz")).unwrap_err().to_string(),
        "Entry zzz not found"
    );
}

#[test]
fn tree_puts_children_under_their_branch_point_in_time_order() {
    let session = branched();
    assert_eq!(render(&session, &session.tree()), "a(b(c,d(f)),e)");
}

#[test]
fn branch_moves_only_the_leaf_and_unknown_ids_fail() {
    let mut session = branched();
    let before: Vec<String> = session.entries().map(|r| r.to_line()).collect();
    session.branch("c").unwrap();
    assert_eq!(session.leaf_id(), Some("c"));
    assert_eq!(path_ids(&session, None), ["a", "b", "c"]);
    assert_eq!(
        session.branch("nope").unwrap_err().to_string(),
        "Entry nope not found"
    );
    assert_eq!(session.leaf_id(), Some("c"));
    let after: Vec<String> = session.entries().map(|r| r.to_line()).collect();
    assert_eq!(before, after);
    session.reset_leaf();
    assert_eq!(session.leaf_id(), None);
    assert!(session.build_context().messages.is_empty());
}

#[test]
fn orphans_self_parents_and_cycles_become_roots() {
    let session = SessionText::new()
        .message("o", Some("missing"), "user", "orphan")
        .message("s", Some("s"), "user", "self")
        .message("x", Some("y"), "user", "x")
        .message("y", Some("x"), "user", "y")
        .session();
    let tree = session.tree();
    // x is attached under y first; y's edge back to x would close the cycle, so y is a root.
    assert_eq!(render(&session, &tree), "o s y(x)");
}

#[test]
fn duplicate_ids_forming_a_cycle_give_a_finite_tree() {
    // a, then a second `a` whose parent is b, then b whose parent is a.
    let session = SessionText::new()
        .message("a", None, "user", "first a")
        .message("a", Some("b"), "user", "second a")
        .message("b", Some("a"), "user", "b")
        .session();
    let tree = session.tree();
    let listed: usize = tree.roots.len() + tree.children.iter().map(Vec::len).sum::<usize>();
    assert_eq!(listed, 2, "each indexed id appears once");
    // The second `a` hangs under b; b's edge to it would close the cycle.
    assert_eq!(render(&session, &tree), "b(a)");
    assert_eq!(path_ids(&session, None), ["a", "b"]);
}

#[test]
fn very_deep_trees_do_not_recurse() {
    let mut text = SessionText::new();
    let mut parent: Option<String> = None;
    for i in 0..100_000 {
        let id = format!("{i:08x}");
        text = text.entry("custom", &id, parent.as_deref(), r#""customType":"x""#);
        parent = Some(id);
    }
    let session = text.session();
    assert_eq!(session.branch_path(None).unwrap().len(), 100_000);
    let tree = session.tree();
    assert_eq!(tree.roots.len(), 1);
    assert_eq!(
        tree.children.iter().filter(|c| c.len() == 1).count(),
        99_999
    );
}

#[test]
fn labels_set_clear_and_last_wins() {
    let session = SessionText::new()
        .message("a", None, "user", "a")
        .entry(
            "label",
            "l1",
            Some("a"),
            r#""targetId":"a","label":"first""#,
        )
        .entry(
            "label",
            "l2",
            Some("l1"),
            r#""targetId":"a","label":"second""#,
        )
        .message("b", Some("l2"), "user", "b")
        .entry("label", "l3", Some("b"), r#""targetId":"b","label":"gone""#)
        .entry("label", "l4", Some("l3"), r#""targetId":"b""#)
        .message("c", Some("l4"), "user", "c")
        .entry("label", "l5", Some("c"), r#""targetId":"c","label":"x""#)
        .entry("label", "l6", Some("l5"), r#""targetId":"c","label":"""#)
        .session();
    assert_eq!(session.label("a"), Some("second"));
    assert_eq!(session.label("b"), None);
    assert_eq!(session.label("c"), None);
    assert_eq!(session.labels().len(), 1);
}

#[test]
fn tree_indices_name_the_indexed_entries() {
    let session = branched();
    let tree = session.tree();
    assert_eq!(ids(&session, &tree.roots), ["a"]);
    let b = session.index_of("b").unwrap();
    assert_eq!(ids(&session, &tree.children[b]), ["c", "d"]);
}
