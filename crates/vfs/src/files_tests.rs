//! `files/` over a model store in memory: what its directories list, what a lookup finds,
//! where its links lead and what `touches.jsonl` holds, against the sessions' tool calls.

use std::path::Path;
use std::sync::Arc;

use super::files::{LINKS_SHOWN, TOUCHES_FILE};
use super::{NodeKind, OpenMode, SessionSource, Vfs, VfsError, ROOT_INO};
use gjcfs_engine::json;
use gjcfs_engine::storage::{MemoryStorage, SessionStorage};

const STORE: &str = "/store";

/// One assistant message: its entry id, its second (of 2026-03-01T10:00) and its calls,
/// (tool, path as JSON string text).
type Message<'a> = (&'a str, u32, &'a [(&'a str, &'a str)]);

/// Session `sid` of `/w/proj` in the store, its messages each the child of the one before.
fn put_session(storage: &MemoryStorage, sid: &str, messages: &[Message<'_>]) {
    let mut lines = vec![format!(
        r#"{{"type":"session","version":5,"id":"{sid}","timestamp":"2026-03-01T10:00:00.000Z","cwd":"/w/proj"}}"#
    )];
    let mut parent = "null".to_owned();
    for (id, sec, calls) in messages {
        let blocks: Vec<String> = calls
            .iter()
            .map(|(tool, path)| {
                format!(r#"{{"type":"toolCall","name":"{tool}","arguments":{{"path":"{path}"}}}}"#)
            })
            .collect();
        let content = blocks.join(",");
        lines.push(format!(
            r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-03-01T10:00:{sec:02}.000Z","message":{{"role":"assistant","content":[{content}]}}}}"#
        ));
        parent = format!("\"{id}\"");
    }
    let file = format!("{STORE}/2026-03-01T10-00-00-000Z_{sid}.jsonl");
    storage.put_file(Path::new(&file), (lines.join("\n") + "\n").as_bytes());
}

/// Two sessions of `/w/proj`, and one whose id cannot name a directory.
fn store() -> (MemoryStorage, Vfs) {
    let storage = MemoryStorage::new();
    storage.ensure_dir(Path::new(STORE)).unwrap();
    let long = format!("src/{}", "x".repeat(300));
    let s1: [Message<'_>; 4] = [
        ("a1", 1, &[("read", "src/a.rs"), ("read", "src.rs")]),
        (
            "a2",
            2,
            &[("edit", "src/deep/c.rs"), ("write", "/tmp/out.txt")],
        ),
        // A component named as the directory's own file, and ones that are no names.
        (
            "a3",
            3,
            &[("read", "~/notes.md"), ("read", "src/touches.jsonl/x")],
        ),
        (
            "a4",
            4,
            &[("read", "src/nul\\u0000name.rs"), ("read", &long)],
        ),
    ];
    put_session(&storage, "s1", &s1);
    put_session(&storage, "s2", &[("b1", 5, &[("read", "src/a.rs")])]);
    put_session(&storage, "-bad", &[("z1", 6, &[("edit", "src/a.rs")])]);
    let source = SessionSource::Dir(STORE.into());
    let vfs = Vfs::new(crate::test_config(
        Arc::new(storage.clone()),
        source,
        Path::new("/agent"),
    ));
    (storage, vfs)
}

/// The names of directory `path` (below the root), as listed.
fn listed(vfs: &Vfs, path: &str) -> Vec<String> {
    let dir = vfs.resolve_path(path).unwrap();
    let mut names: Vec<String> = vfs
        .readdir(dir.ino)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    names.sort();
    names
}

fn read_all(vfs: &Vfs, ino: u64) -> Vec<u8> {
    let opened = vfs
        .open(
            ino,
            OpenMode {
                read: true,
                ..OpenMode::default()
            },
        )
        .unwrap();
    let bytes = vfs.read(opened.fh, 0, 1 << 24).unwrap();
    vfs.release(opened.fh).unwrap();
    bytes
}

/// The `entry` of each line of `files/<path>/touches.jsonl`.
fn touch_entries(vfs: &Vfs, path: &str) -> Vec<String> {
    let file = vfs
        .resolve_path(&format!("files/{path}/{TOUCHES_FILE}"))
        .unwrap();
    let bytes = read_all(vfs, file.ino);
    assert_eq!(
        file.size,
        bytes.len() as u64,
        "{path}: the size is the bytes'"
    );
    let text = String::from_utf8(bytes).unwrap();
    let entry = |line: &str| {
        json::parse(line)
            .ok()?
            .as_object()?
            .get_str("entry")
            .map(str::to_owned)
    };
    text.lines().map(|line| entry(line).unwrap()).collect()
}

/// A directory's names: `links`, `names` and `touches.jsonl`, in byte order.
fn with_own(links: &[&str], names: &[&str]) -> Vec<String> {
    let mut all: Vec<String> = links.iter().chain(names).map(|n| (*n).to_owned()).collect();
    all.push(TOUCHES_FILE.to_owned());
    all.sort();
    all
}

#[test]
fn files_lists_the_components_of_the_touched_paths_and_finds_nothing_else() {
    let (_storage, vfs) = store();
    assert!(listed(&vfs, "").contains(&"files".to_owned()));
    assert_eq!(listed(&vfs, "files"), ["tmp", "w", "~"]);
    assert_eq!(
        listed(&vfs, "files/~"),
        with_own(&["001-s1-a3"], &["notes.md"])
    );
    // Newest first: the unnamed session's z1 (a line, no link), s2's b1, s1's a4 (two
    // calls, the later first), a3, a2 and a1 (two calls).
    let links = [
        "002-s2-b1",
        "003-s1-a4",
        "004-s1-a4",
        "005-s1-a3",
        "006-s1-a2",
    ];
    let proj = [&links[..], &["007-s1-a1", "008-s1-a1"]].concat();
    assert_eq!(
        listed(&vfs, "files/w/proj"),
        with_own(&proj, &["src", "src.rs"])
    );
    // `touches.jsonl` is the directory's own file; no NUL and no name over 255 bytes.
    let src = [&links[..], &["007-s1-a1"]].concat();
    assert_eq!(
        listed(&vfs, "files/w/proj/src"),
        with_own(&src, &["a.rs", "deep"])
    );
    assert_eq!(
        touch_entries(&vfs, "w/proj/src"),
        ["z1", "b1", "a4", "a4", "a3", "a2", "a1"]
    );
    let src = vfs.resolve_path("files/w/proj/src").unwrap();
    assert_eq!(src.kind, NodeKind::Directory);
    let own = vfs.lookup(src.ino, TOUCHES_FILE).unwrap();
    assert_eq!(own.kind, NodeKind::File);
    for absent in [
        "b.rs",
        "a.r",
        "src",
        "008-s1-a1",
        "002-s1-a4",
        "001-s1-z1",
        ".",
        "nul",
    ] {
        assert_eq!(
            vfs.lookup(src.ino, absent),
            Err(VfsError::NotFound),
            "{absent}"
        );
    }
    let files = vfs.resolve_path("files").unwrap().ino;
    for absent in ["home", "Users", "touches.jsonl", "001-s1-a1"] {
        assert_eq!(
            vfs.lookup(files, absent),
            Err(VfsError::NotFound),
            "{absent}"
        );
    }
    // Every node listed has the path that resolves to it.
    for entry in vfs.readdir(src.ino).unwrap() {
        let path = vfs.path_of(entry.ino).unwrap();
        assert_eq!(path[..4], ["files", "w", "proj", "src"]);
        assert_eq!(path[4], entry.name);
        assert_eq!(vfs.resolve(&path).unwrap().ino, entry.ino);
    }
}

/// `dir`'s names followed by `target`'s, `..` folded.
fn followed(dir: &[String], target: &str) -> Vec<String> {
    let mut names = dir.to_vec();
    for part in target.split('/') {
        if part == ".." {
            names.pop();
        } else {
            names.push(part.to_owned());
        }
    }
    names
}

#[test]
fn each_link_leads_to_the_touching_entry_s_file() {
    let (_storage, vfs) = store();
    for dir in ["files/w/proj/src/deep/c.rs", "files/tmp", "files/w/proj"] {
        let at = vfs.resolve_path(dir).unwrap().ino;
        let names: Vec<String> = dir.split('/').map(str::to_owned).collect();
        let links: Vec<_> = vfs
            .readdir(at)
            .unwrap()
            .into_iter()
            .filter(|e| e.kind == NodeKind::Symlink)
            .collect();
        assert!(!links.is_empty(), "{dir}");
        for link in links {
            let target = vfs.readlink(link.ino).unwrap();
            let attr = vfs.lookup(at, &link.name).unwrap();
            assert_eq!(attr.kind, NodeKind::Symlink);
            assert_eq!(attr.size, target.len() as u64);
            let (sid, entry) = link.name[4..].split_once('-').unwrap();
            assert!(target.ends_with(&format!("sessions/{sid}/entries/{entry}.json")));
            let entry_file = vfs.resolve(&followed(&names, &target)).unwrap();
            let by_id = vfs
                .resolve_path(&format!("sessions/{sid}/entries/{entry}.json"))
                .unwrap();
            assert_eq!(entry_file.ino, by_id.ino, "{dir}/{}", link.name);
            let bytes = read_all(&vfs, entry_file.ino);
            assert!(String::from_utf8(bytes)
                .unwrap()
                .contains(&format!("\"id\": \"{entry}\"")));
        }
    }
    assert_eq!(
        vfs.readlink(vfs.resolve_path("files/tmp/out.txt/001-s1-a2").unwrap().ino),
        Ok("../../../sessions/s1/entries/a2.json".to_owned())
    );
}

#[test]
fn a_directory_links_the_newest_touches_and_follows_the_store() {
    let (storage, vfs) = store();
    let many: Vec<(&str, &str)> = vec![("read", "/w/many.rs"); LINKS_SHOWN + 5];
    put_session(&storage, "s3", &[("m1", 9, &many)]);
    let shown = listed(&vfs, "files/w/many.rs");
    assert_eq!(shown.len(), LINKS_SHOWN + 1, "the links and touches.jsonl");
    assert_eq!(shown[0], "001-s3-m1");
    assert_eq!(shown[LINKS_SHOWN - 1], format!("{LINKS_SHOWN:03}-s3-m1"));
    assert_eq!(touch_entries(&vfs, "w/many.rs").len(), LINKS_SHOWN + 5);
    // A session the agent started since: seen once the answers are no longer fresh.
    put_session(&storage, "s4", &[("n1", 10, &[("read", "/opt/new.rs")])]);
    std::thread::sleep(super::search::ANSWER_TTL);
    assert_eq!(listed(&vfs, "files"), ["opt", "tmp", "w", "~"]);
    assert_eq!(
        listed(&vfs, "files/opt/new.rs"),
        with_own(&["001-s4-n1"], &[])
    );
    let root = vfs.lookup(ROOT_INO, "files").unwrap();
    assert_eq!(root.kind, NodeKind::Directory);
}
