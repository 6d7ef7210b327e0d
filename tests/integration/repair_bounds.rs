//! `gjcfs check --repair` never changes anything outside the store: not what a symlink
//! swapped in for a store directory leads to, not a file that shares a transcript's bytes
//! through a hard link, not where a `gjcfs-repairs` symlink points; and `check` reports the
//! store's directories other users can write.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use crate::common::gjcfs_bin;
use crate::common::mount::{store, Store};
use gjcfs::engine::check::{check_store, repair, repairs_dir, CheckTarget, RepairOptions};
use gjcfs::engine::json::{self, Value};
use gjcfs::engine::FileStorage;

fn mode_of(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

fn set_mode(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

fn agent(s: &Store) -> PathBuf {
    s.tmp.path().join("agent")
}

fn scope(s: &Store) -> PathBuf {
    s.file.parent().unwrap().to_owned()
}

/// `gjcfs check --json` over the store of `s`, with `extra` options.
fn check(s: &Store, extra: &[&str]) -> Output {
    std::process::Command::new(gjcfs_bin())
        .args(["check", "--json", "--agent-dir", agent(s).to_str().unwrap()])
        .args(extra)
        .output()
        .unwrap()
}

/// Each finding of a `--json` report: (kind, path, what became of its repair).
fn findings(out: &Output) -> Vec<(String, PathBuf, Option<String>)> {
    let text = String::from_utf8_lossy(&out.stdout);
    let value = json::parse(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    let list = value.as_object().unwrap().get("findings").unwrap();
    list.as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let f = f.as_object().unwrap();
            let result = f.get("result").and_then(Value::as_str).map(str::to_owned);
            (
                f.get_str("kind").unwrap().to_owned(),
                PathBuf::from(f.get_str("path").unwrap()),
                result,
            )
        })
        .collect()
}

/// A root-owned directory outside the store, mode `0755`, holding a file named like the
/// store's transcript (mode `0644`): what a swapped symlink would lead a repair to.
fn victim(s: &Store) -> PathBuf {
    let victim = s.tmp.path().join("victim");
    fs::create_dir(&victim).unwrap();
    set_mode(&victim, 0o755);
    let file = victim.join(s.file.file_name().unwrap());
    fs::write(&file, "not the store's\n").unwrap();
    set_mode(&file, 0o644);
    victim
}

#[test]
fn a_scope_swapped_for_a_symlink_after_the_check_leads_no_repair_outside_the_store() {
    let s = store();
    let victim = victim(&s);
    let scope = scope(&s);
    let sessions = scope.parent().unwrap().to_owned();
    set_mode(&s.file, 0o644);
    // Other users can write the sessions root, and so put anything in place of a scope.
    set_mode(&sessions, 0o777);
    let target = CheckTarget {
        sessions_root: Some(sessions.clone()),
        session_dir: None,
        blob_dir: agent(&s).join("blobs"),
        repair_base: Some(agent(&s)),
        history_db: None,
    };
    let report = check_store(&FileStorage, &target, &|_| {}).unwrap();
    assert!(report
        .findings
        .iter()
        .any(|f| f.kind == "wide_mode" && f.path == s.file));
    // Between the check and the repair the scope becomes a symlink to the victim, which
    // holds a file of the transcript's name and mode.
    let moved = sessions.join("moved-away");
    fs::rename(&scope, &moved).unwrap();
    symlink(&victim, &scope).unwrap();
    let base = agent(&s);
    let outcome = repair(
        &FileStorage,
        &report,
        &base,
        &repairs_dir(&base),
        RepairOptions::default(),
    );
    let file = victim.join(s.file.file_name().unwrap());
    assert_eq!(mode_of(&file), 0o644, "the victim's file keeps its mode");
    assert_eq!(mode_of(&victim), 0o755, "the victim keeps its mode");
    let index = report
        .findings
        .iter()
        .position(|f| f.path == s.file)
        .unwrap();
    let left = outcome.of(index).unwrap().as_ref().unwrap_err();
    assert!(left.starts_with("left:"), "{left}");
    fs::remove_file(&scope).unwrap();
    fs::rename(&moved, &scope).unwrap();
}

/// Another user's loop swapping names beside the repairs (an atomic exchange: Linux).
#[cfg(target_os = "linux")]
mod swapping {
    use super::*;
    use crate::common::swap::exchange;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Instant;

    /// Ends a loop when the test does, even when it fails.
    struct StopOnDrop(Arc<AtomicBool>);

    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }

    #[test]
    fn repairs_beside_a_loop_swapping_a_scope_for_a_symlink_never_change_what_it_leads_to() {
        let s = store();
        let victim = victim(&s);
        let scope = scope(&s);
        let sessions = scope.parent().unwrap().to_owned();
        set_mode(&sessions, 0o777);
        let base = agent(&s);
        let target = CheckTarget {
            sessions_root: Some(sessions.clone()),
            session_dir: None,
            blob_dir: base.join("blobs"),
            repair_base: Some(base.clone()),
            history_db: None,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let _stops = StopOnDrop(stop.clone());
        // Another user's loop: the scope and a symlink to the victim exchange names, again and
        // again (`renameat2(RENAME_EXCHANGE)`): at any moment the scope's name is one of them.
        let swapper = {
            let link = sessions.join("swap-link");
            symlink(&victim, &link).unwrap();
            let (stop, scope) = (stop.clone(), scope.clone());
            std::thread::spawn(move || {
                let a = std::ffi::CString::new(scope.as_os_str().as_encoded_bytes()).unwrap();
                let b = std::ffi::CString::new(link.as_os_str().as_encoded_bytes()).unwrap();
                while !stop.load(Ordering::Relaxed) {
                    assert!(exchange(&a, &b), "{}", std::io::Error::last_os_error());
                }
            })
        };
        let started = Instant::now();
        let mut runs = 0;
        while runs < 3000 && started.elapsed() < Duration::from_secs(10) {
            set_mode(&victim, 0o755);
            // The scope wide again, under whichever name it has now.
            for name in [&scope, &sessions.join("swap-link")] {
                if fs::symlink_metadata(name).is_ok_and(|m| m.is_dir()) {
                    let _ = fs::set_permissions(name, fs::Permissions::from_mode(0o755));
                }
            }
            if let Ok(report) = check_store(&FileStorage, &target, &|_| {}) {
                let _ = repair(
                    &FileStorage,
                    &report,
                    &base,
                    &repairs_dir(&base),
                    RepairOptions::default(),
                );
            }
            assert_eq!(
                mode_of(&victim),
                0o755,
                "run {runs}: the victim was changed"
            );
            runs += 1;
        }
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
        if fs::symlink_metadata(&scope).is_ok_and(|m| m.file_type().is_symlink()) {
            fs::remove_file(&scope).unwrap();
            fs::rename(sessions.join("swap-link"), &scope).unwrap();
        }
        assert!(runs >= 10, "only {runs} runs");
    }
}

#[test]
fn a_transcript_with_another_link_keeps_its_mode_and_so_does_the_other_name() {
    let s = store();
    set_mode(&s.file, 0o644);
    let outside = s.tmp.path().join("outside.jsonl");
    fs::hard_link(&s.file, &outside).unwrap();
    let out = check(&s, &["--repair"]);
    let found = findings(&out);
    let wide = found
        .iter()
        .find(|(kind, path, _)| kind == "wide_mode" && *path == s.file)
        .expect("the wide mode is reported");
    assert_eq!(wide.2, None, "no repair is offered: {found:?}");
    assert!(found
        .iter()
        .any(|(kind, path, _)| kind == "unsafe_file" && *path == s.file));
    assert_eq!(mode_of(&outside), 0o644, "the other name keeps its mode");
}

#[test]
fn a_gjcfs_repairs_symlink_is_never_followed() {
    let s = store();
    set_mode(&s.file, 0o644);
    let elsewhere = s.tmp.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    symlink(&elsewhere, agent(&s).join("gjcfs-repairs")).unwrap();
    let out = check(&s, &["--repair"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let found = findings(&out);
    let (_, _, result) = found
        .iter()
        .find(|(kind, path, _)| kind == "wide_mode" && *path == s.file)
        .unwrap();
    let result = result.as_deref().unwrap_or_default();
    assert!(result.contains("gjcfs-repairs"), "{result}");
    assert_eq!(
        fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "nothing lands there"
    );
    assert_eq!(mode_of(&s.file), 0o644, "nothing is changed unrecorded");
}

#[test]
fn store_directories_other_users_can_write_are_reported_and_the_repair_closes_them() {
    let s = store();
    let sessions = agent(&s).join("sessions");
    set_mode(&agent(&s), 0o777);
    set_mode(&sessions, 0o775);
    set_mode(&s.file, 0o644);
    let out = check(&s, &[]);
    let found = findings(&out);
    for dir in [agent(&s), sessions.clone()] {
        assert!(
            found
                .iter()
                .any(|(kind, path, _)| kind == "writable_by_others" && *path == dir),
            "{}: {found:?}",
            dir.display()
        );
    }
    // While the agent directory is open, nothing is repaired: the repair says how to close it.
    let out = check(&s, &["--repair"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    for (kind, path, result) in findings(&out) {
        assert!(
            result.is_none_or(|r| r.contains("chmod go-w")),
            "{kind} {}",
            path.display()
        );
    }
    assert_eq!(mode_of(&agent(&s)), 0o777);
    assert_eq!(mode_of(&s.file), 0o644);
    set_mode(&agent(&s), 0o755);
    let out = check(&s, &["--repair"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(mode_of(&sessions), 0o755);
    assert_eq!(
        mode_of(&s.file),
        0o600,
        "repairs below them go on once they are closed"
    );
    // A sticky directory others can write is no finding: they cannot move what is ours.
    set_mode(&agent(&s), 0o1777);
    let found = findings(&check(&s, &[]));
    assert!(!found.iter().any(|(kind, ..)| kind == "writable_by_others"));
}

/// The run directories in the store's `gjcfs-repairs`.
fn runs(s: &Store) -> Vec<PathBuf> {
    let mut runs: Vec<PathBuf> = fs::read_dir(agent(s).join("gjcfs-repairs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    runs.sort();
    runs
}

#[test]
fn repairs_keep_the_newest_complete_runs_and_prune_keeps_what_did_not_finish() {
    let s = store();
    for _ in 0..12 {
        set_mode(&s.file, 0o644);
        let out = check(&s, &["--repair"]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        // A fixed wait: each run is named by the millisecond it starts at.
        std::thread::sleep(Duration::from_millis(2));
    }
    let kept = runs(&s);
    assert_eq!(kept.len(), 10, "the newest ten complete runs: {kept:?}");
    let found = findings(&check(&s, &[]));
    assert!(
        found.iter().any(|(kind, ..)| kind == "repair_copies"),
        "{found:?}"
    );
    // A run that did not finish stays through every prune.
    let stopped = agent(&s).join("gjcfs-repairs/2000-01-01T00-00-00.000Z");
    fs::create_dir(&stopped).unwrap();
    fs::write(stopped.join("manifest.jsonl"), "").unwrap();
    let out = check(&s, &["--prune-repairs", "1"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("removed 9 repair run(s)"));
    assert_eq!(runs(&s), [stopped.clone(), kept[9].clone()]);
    check(&s, &["--prune-repairs", "0"]);
    assert_eq!(runs(&s), [stopped]);
}
