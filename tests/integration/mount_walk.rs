//! Walking a real mount as search tools do: ripgrep and fd read the root's `.ignore` and
//! search each session once, in `sessions/<id>/session.jsonl`; `rg -uu` and `fd
//! --no-ignore` still read the derived views.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use crate::common::fixture;
use crate::common::mount::{ok, p, run, Mount};

/// A store of the two real transcripts in a session directory.
fn real_store(dir: &Path) {
    for name in ["before-compaction.jsonl", "large-session.jsonl"] {
        fs::copy(fixture(&format!("real/{name}")), dir.join(name)).unwrap();
    }
}

/// The files `rg ARGS… -l WORD .` lists in `root`, relative to it.
fn rg_files(root: &Path, args: &[&str], word: &str) -> BTreeSet<String> {
    let mut all = vec!["-l"];
    all.extend_from_slice(args);
    all.extend([word, "."]);
    let out = std::process::Command::new("rg")
        .args(&all)
        .current_dir(root)
        .output()
        .unwrap();
    // 0: found, 1: nothing found; 2 is an error.
    assert!(
        out.status.code().is_some_and(|c| c < 2),
        "rg {all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.trim_start_matches("./").to_owned())
        .collect()
}

#[test]
fn rg_and_fd_search_each_session_once_and_read_every_view_when_told() {
    require_fuse!();
    if !crate::common::tool_ready("rg") {
        return;
    }
    let store = tempfile::tempdir().unwrap();
    real_store(store.path());
    let mount = Mount::start(&["--session-dir", p(store.path()), "--read-only"]);
    let root = mount.path();
    assert!(ok("cat", &[p(&root.join(".ignore"))]).contains("/sessions/*/entries/"));
    // "AgentSession" is in both conversations, in entries, contexts and views.
    let word = "AgentSession";
    let found = rg_files(root, &[], word);
    let transcripts: BTreeSet<String> = fs::read_dir(root.join("sessions"))
        .unwrap()
        .map(|e| {
            format!(
                "sessions/{}/session.jsonl",
                e.unwrap().file_name().to_str().unwrap()
            )
        })
        .collect();
    assert!(!found.is_empty());
    assert!(
        found.is_subset(&transcripts),
        "rg reads only the transcripts: {found:?}"
    );
    // As many as rg finds in the store itself: one file per session.
    assert_eq!(rg_files(store.path(), &[], word).len(), found.len());
    // Told to, rg reads the views too.
    let everything = rg_files(root, &["-uu"], word);
    assert!(everything.is_superset(&found));
    for view in ["context.json", "context.md", "tree.txt"] {
        assert!(
            everything.iter().any(|f| f.ends_with(view)),
            "rg -uu reads {view}: {everything:?}"
        );
    }
    assert!(everything.iter().any(|f| f.contains("/entries/")));
    // fd (Debian's fdfind) walks past the same places.
    let fd = ["fdfind", "fd"].into_iter().find(|t| {
        run("sh", &["-c", &format!("command -v {t}")])
            .status
            .success()
    });
    let Some(fd) = fd else {
        crate::common::cannot_run("fd is not installed");
        return;
    };
    let listed = ok(fd, &["--type", "f", ".", p(root)]);
    assert!(listed.lines().any(|l| l.ends_with("session.jsonl")));
    for line in listed.lines() {
        let rel = line.trim_start_matches(p(root)).trim_start_matches('/');
        assert!(
            !rel.contains("/entries/")
                && !rel.starts_with("files/")
                && !rel.ends_with("context.json"),
            "fd lists a derived file: {rel}"
        );
    }
    let all = ok(fd, &["--no-ignore", "--type", "f", "context.json", p(root)]);
    assert_eq!(all.lines().count(), transcripts.len());
}
