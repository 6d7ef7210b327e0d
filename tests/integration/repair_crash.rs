//! `check --repair` stopped at every point: the run is killed after each of its storage
//! operations (every later one fails, then the storage crashes), and what the disk keeps
//! must name every change made in the run's manifest, and the next check must report the
//! unfinished run with the changes it did not confirm.

use std::path::{Path, PathBuf};

use gjcfs::engine::check::{
    check_store, repair, CheckTarget, Finding, Repair, RepairOptions, Report, MANIFEST_NAME,
};
use gjcfs::engine::json::{self, Value};
use gjcfs::engine::storage::{Fault, FaultKind, MemoryStorage, SessionStorage};

use crate::common::memory::{managed_transcript, SESSIONS_ROOT};

const BASE: &str = "/agent";
const REPAIR_DIR: &str = "/agent/gjcfs-repairs/2026-01-01T00-00-00.000Z";

/// A managed scope with one damage of each repair: the scope's mode (a directory), a
/// transcript's mode, a torn last line, a rewrite's temp file and a backup of a missing
/// session.
fn damaged() -> MemoryStorage {
    let storage = MemoryStorage::new();
    storage.ensure_dir(Path::new("/w")).unwrap();
    let transcript = managed_transcript(&storage);
    let scope = transcript.parent().unwrap().to_owned();
    let whole = storage.file(&transcript).unwrap();
    let mut torn = whole.clone();
    torn.extend_from_slice(br#"{"type":"message","id":"c"#);
    storage.put_file(&scope.join("torn.jsonl"), &torn);
    storage.put_file(&scope.join("wide.jsonl"), &whole);
    storage.set_mode(&scope.join("wide.jsonl"), 0o644).unwrap();
    storage.put_file(&scope.join(".torn.jsonl.15e509ad4fde4d76.tmp"), b"partial");
    storage.put_file(&scope.join("lost.jsonl.15e509ad4fde4d79.bak"), &whole);
    storage.set_mode(&scope, 0o755).unwrap();
    storage
}

fn target() -> CheckTarget {
    CheckTarget {
        sessions_root: Some(PathBuf::from(SESSIONS_ROOT)),
        session_dir: None,
        blob_dir: PathBuf::from("/agent/blobs"),
        history_db: None,
        repair_base: Some(PathBuf::from(BASE)),
    }
}

fn checked(storage: &MemoryStorage) -> Report {
    check_store(storage, &target(), &|_| {}).unwrap()
}

/// What a repair of `finding` changes, as the storage holds it: the bytes and mode of its
/// path, and of the session a backup is renamed to.
fn state_of(storage: &MemoryStorage, finding: &Finding) -> Vec<Option<(Vec<u8>, u32)>> {
    let mut paths = vec![finding.path.clone()];
    if let Some(Repair::RestoreBackup { to }) = &finding.repair {
        paths.push(to.clone());
    }
    paths
        .iter()
        .map(|p| {
            let stat = storage.lstat(p).ok()?;
            Some((storage.file(p).unwrap_or_default(), stat.mode))
        })
        .collect()
}

/// The manifest's lines.
fn manifest(storage: &MemoryStorage) -> Option<Vec<Value>> {
    let bytes = storage.file(&Path::new(REPAIR_DIR).join(MANIFEST_NAME))?;
    let text = String::from_utf8(bytes).unwrap();
    Some(text.lines().filter_map(|l| json::parse(l).ok()).collect())
}

fn state_of_line(line: &Value) -> Option<&str> {
    line.as_object()?.get_str("state")
}

/// The step the manifest gave the change of `path`, and whether it was said done.
fn step_of(lines: &[Value], path: &Path) -> Option<(f64, bool)> {
    let begun = lines.iter().find(|l| {
        let l = l.as_object().unwrap();
        l.get_str("state") == Some("begun") && l.get_str("path") == path.to_str()
    })?;
    let step = begun.as_object()?.get("step")?.as_f64()?;
    let done = lines.iter().any(|l| {
        let l = l.as_object().unwrap();
        l.get_str("state") == Some("done") && l.get("step").and_then(Value::as_f64) == Some(step)
    });
    Some((step, done))
}

/// Runs the repair with every storage operation from number `kill` on failing (none when
/// `None`), then crashes the storage.
fn repair_killed_at(kill: Option<u64>) -> (MemoryStorage, Report) {
    let storage = damaged();
    let report = checked(&storage);
    if let Some(kill) = kill {
        let at = storage.op_count() + kill;
        let faults = (at..at + 10_000)
            .map(|at| Fault {
                at,
                kind: FaultKind::Errno(libc::EIO),
            })
            .collect();
        storage.set_faults(faults);
    }
    repair_all(&storage, &report);
    storage.set_faults(Vec::new());
    storage.crash();
    (storage, report)
}

#[test]
fn a_repair_killed_at_any_point_leaves_a_manifest_naming_its_changes_and_check_reports_it() {
    let storage = damaged();
    let report = checked(&storage);
    let offered: Vec<&Finding> = report
        .findings
        .iter()
        .filter(|f| f.repair.is_some())
        .collect();
    assert_eq!(offered.len(), 5, "{:#?}", report.findings);
    let before: Vec<_> = offered.iter().map(|f| state_of(&storage, f)).collect();
    let start = storage.op_count();
    repair_all(&storage, &report);
    let ops = storage.op_count() - start;

    let mut stopped_with_changes = 0;
    for kill in (0..ops).map(Some).chain([None]) {
        let (storage, report) = repair_killed_at(kill);
        let offered: Vec<&Finding> = report
            .findings
            .iter()
            .filter(|f| f.repair.is_some())
            .collect();
        let lines = manifest(&storage);
        let complete = lines
            .as_ref()
            .is_some_and(|l| l.iter().any(|l| state_of_line(l) == Some("complete")));
        let again = checked(&storage);
        let unfinished: Vec<&Finding> = again
            .findings
            .iter()
            .filter(|f| f.kind == "unfinished_repair")
            .collect();
        let mut changed = 0;
        for (finding, before) in offered.iter().zip(&before) {
            if state_of(&storage, finding) == *before {
                continue;
            }
            changed += 1;
            let path = &finding.path;
            let lines = lines
                .as_ref()
                .unwrap_or_else(|| panic!("killed at {kill:?}: {path:?} changed, no manifest"));
            let (_, done) = step_of(lines, path)
                .unwrap_or_else(|| panic!("killed at {kill:?}: {path:?} changed, not named"));
            if !complete && !done {
                let said = unfinished
                    .iter()
                    .any(|f| f.what.contains(path.to_str().unwrap()));
                assert!(
                    said,
                    "killed at {kill:?}: {path:?} unconfirmed: {unfinished:#?}"
                );
            }
        }
        match complete {
            true => assert!(unfinished.is_empty(), "killed at {kill:?}: {unfinished:#?}"),
            false if lines.is_some() => {
                assert_eq!(
                    unfinished.len(),
                    1,
                    "killed at {kill:?}: {:#?}",
                    again.findings
                );
                assert_eq!(unfinished[0].path, Path::new(REPAIR_DIR));
                if changed > 0 {
                    stopped_with_changes += 1;
                }
            }
            false => assert_eq!(changed, 0, "killed at {kill:?}"),
        }
        if kill.is_none() {
            assert!(complete, "a run that was not stopped is complete");
            assert_eq!(changed, 5, "every repair was made");
        }
    }
    assert!(
        stopped_with_changes > 5,
        "{stopped_with_changes} stops after a change"
    );
}

/// Every repair the report offers, backups of missing sessions included.
fn repair_all(storage: &MemoryStorage, report: &Report) {
    let options = RepairOptions {
        restore_deleted: true,
    };
    repair(
        storage,
        report,
        Path::new(BASE),
        Path::new(REPAIR_DIR),
        options,
    );
}
