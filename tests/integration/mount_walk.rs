//! Walking a real mount as search tools do: ripgrep and fd read the root's `.ignore` and
//! search each session once, in `sessions/<id>/session.jsonl`; `rg -uu` and `fd
//! --no-ignore` still read the derived views. A walk that only stats (`du`) after a restart
//! gives each view the size it reads at, saved by the run before.

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

/// `du -ab` of the mount's sessions: every file and directory below with its size, the
/// paths relative to the mount, sorted.
fn du_all(root: &Path) -> Vec<String> {
    let out = ok("du", &["-ab", p(&root.join("sessions"))]);
    let mut lines: Vec<String> = out
        .lines()
        .map(|l| l.replace(&format!("{}/", p(root)), ""))
        .collect();
    lines.sort();
    lines
}

/// The saved sizes file under the server's cache directory `cache`.
fn saved_sizes(cache: &Path) -> Option<std::path::PathBuf> {
    let found = ok(
        "find",
        &[p(cache), "-name", gjcfs::vfs::SAVED_RENDERINGS_FILE],
    );
    found.lines().next().map(Into::into)
}

#[test]
fn a_stat_walk_after_a_restart_gives_every_file_its_size_from_what_the_run_before_saved() {
    require_fuse!();
    for mode in [&[][..], &["--read-only"][..]] {
        let store = tempfile::tempdir().unwrap();
        for seed in ["1", "2", "3"] {
            let file = store.path().join(format!("s{seed}.jsonl"));
            let args = ["generate", p(&file), "--size", "30KB", "--seed", seed];
            ok(env!("CARGO_BIN_EXE_gjcfs"), &args);
        }
        let cache = tempfile::tempdir().unwrap();
        let mut args = vec!["--session-dir", p(store.path())];
        args.extend_from_slice(mode);
        let mut mount = Mount::start_with_cache(&args, cache.path());
        let first = du_all(mount.path());
        assert!(
            first.iter().any(|l| l.ends_with("/context.html")),
            "{first:?}"
        );
        assert!(mount.stop().is_some_and(|s| s.success()), "{mode:?}");
        assert!(
            saved_sizes(cache.path()).is_some(),
            "{mode:?}: saved on unmount"
        );
        mount.restart(&args);
        let root = mount.path();
        assert_eq!(du_all(root), first, "{mode:?}: the same walk again");
        // Each view reads whole at the size the walk gave it.
        for line in first.iter().filter(|l| !l.contains("/entries/")) {
            let (size, rel) = line.split_once('\t').unwrap();
            let path = root.join(rel);
            if path.is_file() {
                let bytes = fs::read(&path).unwrap_or_else(|e| panic!("{mode:?}: {rel}: {e}"));
                assert_eq!(bytes.len().to_string(), size, "{mode:?}: {rel}");
            }
        }
    }
}
