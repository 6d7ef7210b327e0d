//! One session, one identity, on every surface: the ids of a file without ids, through the
//! CLI, the search index and real mounts.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::gjcfs_bin;
use crate::common::mount::{ok, p, run, Mount};
use gjcfs::engine::json;
use gjcfs::engine::load_session;

/// A directory holding one generated v1 session (no ids in the file); its path.
fn v1_store(dir: &Path) -> PathBuf {
    let file = dir.join("legacy.jsonl");
    let out = Command::new(gjcfs_bin())
        .args(["generate", p(&file), "--entries", "40", "--version", "1"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    file
}

/// The entry ids `gjcfs entries` shows for `file`, in file order.
fn shown_ids(file: &Path) -> Vec<String> {
    ok(p(&gjcfs_bin()), &["entries", p(file)])
        .lines()
        .skip(1)
        .map(|line| {
            let value = json::parse(line).unwrap();
            value.as_object().unwrap().get_str("id").unwrap().to_owned()
        })
        .collect()
}

#[test]
#[cfg_attr(fuse_unavailable, ignore = "needs FUSE: /dev/fuse and fusermount3")]
fn a_file_without_ids_shows_the_same_ids_everywhere_and_its_first_write_keeps_them() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    fs::create_dir(&store).unwrap();
    let file = v1_store(&store);
    let ids = shown_ids(&file);
    assert_eq!(ids, shown_ids(&file), "another process, the same ids");
    let header = fs::read_to_string(&file).unwrap();
    let header = json::parse(header.lines().next().unwrap()).unwrap();
    let sid = header
        .as_object()
        .unwrap()
        .get_str("id")
        .unwrap()
        .to_owned();
    let args = ["--session-dir", p(&store)];

    // The mount names the entries the same, and so do remounts.
    let mount = Mount::start(&args);
    let dir = mount.session_dir(&sid);
    let tree = ok("cat", &[p(&dir.join("tree.txt"))]);
    let listed = ok("ls", &[p(&dir.join("entries"))]);
    for (n, id) in ids.iter().enumerate() {
        assert!(listed.contains(&format!("{n:06}-{id}.json")), "{id}");
    }
    drop(mount);
    let mount = Mount::start(&args);
    let dir = mount.session_dir(&sid);
    assert_eq!(
        ok("cat", &[p(&dir.join("tree.txt"))]),
        tree,
        "a remount, the same tree"
    );

    // What a search finds is an entry of the mount and of the CLI.
    let index = tmp.path().join("index");
    let hits = ok(
        p(&gjcfs_bin()),
        &[
            "search",
            "the",
            "--json",
            "--session-dir",
            p(&store),
            "--index",
            p(&index),
        ],
    );
    let hit = json::parse(hits.lines().next().expect("a hit")).unwrap();
    let hit_id = hit
        .as_object()
        .unwrap()
        .get_str("entry")
        .unwrap()
        .to_owned();
    assert!(ids.contains(&hit_id), "{hit_id} is one of {ids:?}");
    let at = ok(p(&gjcfs_bin()), &["context", p(&file), "--leaf", &hit_id]);
    assert!(json::parse(&at).is_ok());
    let query = mount.path().join("search/the");
    let links: Vec<String> = ok("ls", &[p(&query)])
        .lines()
        .filter(|name| name.ends_with(".json"))
        .map(str::to_owned)
        .collect();
    assert!(!links.is_empty());
    for link in &links {
        let out = run("cat", &[p(&query.join(link))]);
        assert!(out.status.success(), "{link} dangles");
    }

    // A leaf chosen by that id reads back as that id, and the write that persisted the
    // migration wrote the ids shown before it.
    let out = run(
        "sh",
        &["-c", &format!("echo {hit_id} > {}", p(&dir.join("leaf")))],
    );
    assert!(out.status.success(), "{out:?}: {}", mount.log_text());
    assert_eq!(ok("cat", &[p(&dir.join("leaf"))]).trim(), hit_id);
    drop(mount);
    let written: Vec<String> = load_session(&file)
        .unwrap()
        .session
        .entries()
        .map(|e| e.id().unwrap().to_owned())
        .collect();
    assert_eq!(
        written[..ids.len()],
        ids[..],
        "the migration kept the ids shown"
    );
    let header = fs::read_to_string(&file).unwrap();
    assert!(header.lines().next().unwrap().contains("\"version\":5"));
}
