//! Several writers of one session file at once: `gjcfs append` processes, which order
//! their appends with the append lock (`StorageWriter::lock`).

use std::collections::HashMap;
use std::process::{Command, Stdio};

use crate::common::{gjcfs_bin, SessionText};
use gjcfs::engine::load_session;

/// `count` message lines of `size` bytes or more each, tagged `tag`.
fn long_lines(tag: &str, count: usize, size: usize) -> String {
    let padding = "x".repeat(size);
    (0..count)
        .map(|i| format!("{{\"role\":\"user\",\"content\":\"{tag} {i} {padding}\"}}\n"))
        .collect()
}

#[test]
fn two_gjcfs_appends_at_once_add_every_line_once_and_no_blank_line() {
    const LINES: usize = 150;
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("s.jsonl");
    let text = SessionText::new()
        .message("q0", None, "user", "q")
        .message("a0", Some("q0"), "assistant", "a")
        .text();
    std::fs::write(&file, text).unwrap();
    let agent = tmp.path().join("agent");
    // Lines of 300 KB: each takes a while to write, which a writer that checks the end
    // of the file without the lock would see half done, and end it with a newline.
    let inputs: Vec<_> = ["a", "b"]
        .iter()
        .map(|tag| {
            let path = tmp.path().join(format!("{tag}.in"));
            std::fs::write(&path, long_lines(tag, LINES, 300_000)).unwrap();
            path
        })
        .collect();
    let children: Vec<_> = inputs
        .iter()
        .map(|path| {
            Command::new(gjcfs_bin())
                .arg("append")
                .arg(&file)
                .arg("--agent-dir")
                .arg(&agent)
                .stdin(std::fs::File::open(path).unwrap())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    let bytes = std::fs::read_to_string(&file).unwrap();
    let blank = bytes.lines().filter(|l| l.is_empty()).count();
    assert_eq!(blank, 0, "blank lines in the file");
    let loaded = load_session(&file).unwrap();
    assert!(loaded.skipped.is_empty(), "{:?}", loaded.skipped);
    let mut counts: HashMap<String, usize> = HashMap::new();
    for entry in loaded.session.entries().skip(2) {
        let content = entry.message().unwrap().get_str("content").unwrap();
        let key: String = content.split(' ').take(2).collect::<Vec<_>>().join(" ");
        *counts.entry(key).or_default() += 1;
    }
    for tag in ["a", "b"] {
        for i in 0..LINES {
            assert_eq!(counts.get(&format!("{tag} {i}")), Some(&1), "{tag} {i}");
        }
    }
}
