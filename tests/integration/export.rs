//! What `gjcfs export` writes, and where it never writes: nothing outside `--out`, even
//! when a directory inside it is swapped for a symlink while the export runs, and nothing
//! into the session store.

use std::fs;
use std::path::Path;
use std::process::Output;

use crate::common::mount::p;

fn export(session: &str, format: &str, out: &Path, agent: &Path) -> Output {
    std::process::Command::new(crate::common::gjcfs_bin())
        .args(["export", session, "--format", format, "--out", p(out)])
        .args(["--agent-dir", p(agent)])
        .output()
        .unwrap()
}

/// Every entry under `dir` (not following symlinks), as paths relative to it.
fn tree(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for entry in fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            found.push(path.strip_prefix(dir).unwrap().display().to_string());
            if entry.file_type().unwrap().is_dir() {
                todo.push(path);
            }
        }
    }
    found.sort();
    found
}

/// A directory inside `--out` swapped for a symlink while the export runs (an atomic
/// exchange: Linux).
#[cfg(target_os = "linux")]
mod swapped {
    use super::*;
    use crate::common::swap::exchange;

    /// Messages of the session's trunk: more than a page (1,000), so that it has an earlier page.
    const TRUNK: usize = 1_200;
    /// Every this many trunk messages a side branch ends, each with its own leaf page.
    const BRANCH_EVERY: usize = 40;

    /// An agent directory with the session `race`: a trunk of [`TRUNK`] messages and a branch
    /// end off every [`BRANCH_EVERY`]th, so that its export has leaf pages and earlier pages.
    fn branched_long_store(tmp: &Path) -> std::path::PathBuf {
        let agent = tmp.join("agent");
        let scope = agent.join("sessions/--w--");
        fs::create_dir_all(&scope).unwrap();
        let header = r#"{"type":"session","version":5,"id":"race","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#;
        let mut text = crate::common::SessionText::with_header(header);
        let mut parent: Option<String> = None;
        for i in 0..TRUNK {
            let id = format!("m{i:05}");
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            text = text.message(&id, parent.as_deref(), role, &format!("message {i}"));
            if i % 2 == 1 && i % BRANCH_EVERY == 1 {
                text = text.message(&format!("b{i:05}"), Some(&id), "user", "a side question");
            }
            parent = Some(id);
        }
        fs::write(
            scope.join("2026-01-01T00-00-00-000Z_race.jsonl"),
            text.text(),
        )
        .unwrap();
        agent
    }

    #[test]
    fn a_directory_swapped_for_a_symlink_during_the_export_is_never_written_through() {
        use std::ffi::CString;
        use std::os::unix::ffi::OsStrExt;
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

        const EXPORTS: usize = 30;
        let tmp = tempfile::tempdir().unwrap();
        let agent = branched_long_store(tmp.path());
        let out = tmp.path().join("out");
        let victim = tmp.path().join("victim");
        fs::create_dir_all(&out).unwrap();
        fs::create_dir_all(&victim).unwrap();
        // Beside each directory the export writes into, a symlink to the victim, which a
        // thread exchanges with it again and again.
        let pairs: Vec<(CString, CString)> = ["leaves", "pages"]
            .iter()
            .map(|kind| {
                let link = out.join(format!("swap.{kind}"));
                std::os::unix::fs::symlink(&victim, &link).unwrap();
                let c = |path: &Path| CString::new(path.as_os_str().as_bytes()).unwrap();
                (c(&out.join(format!("race.{kind}"))), c(&link))
            })
            .collect();
        let stop = AtomicBool::new(false);
        let swaps = AtomicUsize::new(0);
        let (mut exported, mut refused) = (0usize, 0usize);
        // What went wrong, said once the swapping thread has stopped (a panic inside the
        // scope would wait for it forever).
        let mut wrong: Option<String> = None;
        std::thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    for (dir, link) in &pairs {
                        if exchange(dir, link) {
                            swaps.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
            for _ in 0..EXPORTS {
                let said = export("race", "html", &out, &agent);
                let stderr = String::from_utf8_lossy(&said.stderr);
                match said.status.code() {
                    Some(0) => exported += 1,
                    Some(1) if stderr.contains("not a directory (a symlink is not followed)") => {
                        refused += 1
                    }
                    _ => wrong = Some(format!("neither exported nor refused clearly: {said:?}")),
                }
                let escaped = tree(&victim);
                if !escaped.is_empty() {
                    wrong = Some(format!("written through a swap: {escaped:?}"));
                }
                if wrong.is_some() {
                    break;
                }
            }
            stop.store(true, Ordering::Relaxed);
        });
        assert_eq!(wrong, None, "{exported} exported, {refused} refused first");
        eprintln!(
            "{exported} exported, {refused} refused, {} swaps",
            swaps.load(Ordering::Relaxed)
        );
        assert!(swaps.load(Ordering::Relaxed) > 0);
        // With the directories back in place, the same export writes both kinds of page.
        for (dir, link) in &pairs {
            if fs::symlink_metadata(Path::new(std::ffi::OsStr::from_bytes(dir.as_bytes())))
                .unwrap()
                .is_symlink()
            {
                assert!(exchange(dir, link));
            }
        }
        let said = export("race", "html", &out, &agent);
        assert!(said.status.success(), "{said:?}");
        let pages = tree(&out);
        for page in ["race.html", "race.leaves/b00001.html", "race.pages/1.html"] {
            assert!(pages.iter().any(|p| p == page), "{page}: {pages:?}");
        }
        assert_eq!(tree(&victim), Vec::<String>::new());
    }
}

/// Every entry under `dir` (not following symlinks) with its bytes (a directory: none).
fn snapshot(dir: &Path) -> Vec<(String, Option<Vec<u8>>)> {
    tree(dir)
        .into_iter()
        .map(|name| {
            let path = dir.join(&name);
            let meta = fs::symlink_metadata(&path).unwrap();
            let bytes = meta.is_file().then(|| fs::read(&path).unwrap());
            (name, bytes)
        })
        .collect()
}

#[test]
fn an_out_directory_that_overlaps_the_store_is_refused_and_nothing_is_written() {
    let (tmp, agent, sid) = crate::common::pages::branched_store();
    let agent = Path::new(&agent);
    let before = snapshot(agent);
    let scope = agent.join("sessions/--branched--");
    let via_link = tmp.path().join("link-to-sessions");
    std::os::unix::fs::symlink(agent.join("sessions"), &via_link).unwrap();
    for out in [
        scope.clone(),
        agent.join("sessions"),
        agent.join("exports"),
        agent.to_owned(),
        agent.join("blobs/new"),
        via_link.join("--branched--"),
        // Holding the store is overlapping it too.
        tmp.path().to_owned(),
    ] {
        for format in ["jsonl", "html"] {
            let said = export(&sid, format, &out, agent);
            assert_eq!(said.status.code(), Some(2), "{out:?} {format}: {said:?}");
            let stderr = String::from_utf8_lossy(&said.stderr);
            assert!(stderr.contains("overlaps the session store"), "{stderr}");
            assert_eq!(snapshot(agent), before, "{out:?} {format}");
        }
    }
    assert!(fs::symlink_metadata(agent.join("exports")).is_err());
    // Beside the store, the same export is written.
    let out = tmp.path().join("out");
    let said = export(&sid, "jsonl", &out, agent);
    assert!(said.status.success(), "{said:?}");
    assert_eq!(
        fs::read(out.join(format!("{sid}.jsonl"))).unwrap(),
        fs::read(scope.join("2026-01-01T00-00-00-000Z_branched.jsonl")).unwrap()
    );
    assert_eq!(snapshot(agent), before);
}
