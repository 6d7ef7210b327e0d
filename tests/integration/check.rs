//! `gjcfs check [--repair]` on a store seeded with every kind of damage it knows, and the
//! mount's `check` file.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::mount::{ok, p, store, Mount, Store};
use crate::common::{gjcfs_bin, SessionText};
use gjcfs::engine::format::blob::{blob_ref, sha256_hex};
use gjcfs::engine::json::{self, Value};
use gjcfs::engine::load_session;
use gjcfs::engine::manager::{SessionManager, StorageConfig};

/// A session of `id` for workspace `cwd`, two messages.
fn session_text(id: &str, cwd: &str) -> SessionText {
    SessionText::with_header(&format!(
        r#"{{"type":"session","version":5,"id":"{id}","timestamp":"2026-01-01T00:00:00.000Z","cwd":"{cwd}"}}"#
    ))
    .message("q1", None, "user", "question")
    .message("a1", Some("q1"), "assistant", "answer")
}

fn write_private(path: &Path, bytes: &[u8]) {
    fs::write(path, bytes).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).unwrap();
}

/// What the damaged store holds, for the assertions.
struct Damaged {
    s: Store,
    scope: PathBuf,
    torn: PathBuf,
    torn_whole: Vec<u8>,
    blobs: PathBuf,
}

/// A store with one of each kind of damage `gjcfs check` knows.
fn damaged() -> Damaged {
    let s = store();
    let agent = s.tmp.path().join("agent");
    let sessions = agent.join("sessions");
    let scope = s.file.parent().unwrap().to_owned();
    let cwd = s.tmp.path().join("workspace");
    let cwd = cwd.to_str().unwrap();
    let blobs = agent.join("blobs");
    fs::create_dir_all(&blobs).unwrap();
    fs::set_permissions(&blobs, fs::Permissions::from_mode(0o700)).unwrap();

    // A torn last line (repairable), and one behind a malformed line (not).
    let torn = scope.join("torn.jsonl");
    let torn_whole = session_text("torn-1", cwd).text().into_bytes();
    let mut bytes = torn_whole.clone();
    bytes.extend_from_slice(br#"{"type":"message","id":"c"#);
    write_private(&torn, &bytes);
    let bad = session_text("torn-2", cwd)
        .line("this is not JSON")
        .message("q2", Some("a1"), "user", "again")
        .text()
        + r#"{"type":"mess"#;
    write_private(&scope.join("torn-bad.jsonl"), bad.as_bytes());
    // An entry whose parent is not in the session.
    let orphan = session_text("orphan-1", cwd)
        .message("q2", Some("gone0000"), "user", "lost its parent")
        .text();
    write_private(&scope.join("orphan.jsonl"), orphan.as_bytes());
    // A .jsonl that is not a session, and a file that is nothing.
    write_private(&scope.join("notsession.jsonl"), b"{\"hello\":1}\n");
    write_private(&scope.join("notes.txt"), b"shopping list\n");
    fs::write(sessions.join("stray.txt"), b"x").unwrap();
    // Rewrite leftovers: temp files (session intact / missing), backups (session missing /
    // present).
    write_private(
        &scope.join(".torn.jsonl.15e509ad4fde4d76.tmp"),
        b"half a rewrite",
    );
    write_private(
        &scope.join(".gone.jsonl.15e509ad4fde4d77.tmp"),
        b"the only copy?",
    );
    let lost = session_text("lost-1", cwd).text();
    write_private(
        &scope.join("lost.jsonl.15e509ad4fde4d78.bak"),
        lost.as_bytes(),
    );
    write_private(
        &scope.join("orphan.jsonl.15e509ad4fde4d79.bak"),
        orphan.as_bytes(),
    );
    // A transcript other users may read.
    let wide = scope.join("wide.jsonl");
    fs::write(&wide, session_text("wide-1", cwd).text()).unwrap();
    fs::set_permissions(&wide, fs::Permissions::from_mode(0o644)).unwrap();
    // Blobs: referenced and present, referenced and missing, damaged, unreferenced, and
    // the temp file of a write whose process is gone.
    let present = sha256_hex(b"present");
    let missing = sha256_hex(b"missing");
    let corrupt = sha256_hex(b"corrupt");
    let unreferenced = sha256_hex(b"nobody");
    write_private(&blobs.join(&present), b"present");
    write_private(&blobs.join(&corrupt), b"tampered");
    write_private(&blobs.join(&unreferenced), b"nobody");
    write_private(
        &blobs.join(format!("{present}.tmp.999999.1700000000000.0abc1234")),
        b"half",
    );
    let refs = session_text("blobs-1", cwd)
        .message("q2", Some("a1"), "user", &blob_ref(&present))
        .message("q3", Some("q2"), "user", &blob_ref(&missing))
        .message("q4", Some("q3"), "user", &blob_ref(&corrupt))
        .text();
    write_private(&scope.join("blobref.jsonl"), refs.as_bytes());
    // A migration lock its process (gone) never released.
    let locks = scope.join(".gjc-managed-session-internal/locks");
    fs::create_dir_all(&locks).unwrap();
    write_private(
        &locks.join("abc.lock"),
        br#"{"attemptId":"a","pid":999999,"processStartId":"x","createdAt":1,"heartbeatAt":1,"leaseExpiresAt":2}
"#,
    );
    // A scope whose binding is damaged, and one whose binding another user owns.
    let broken = sessions.join("v2-broken");
    fs::create_dir(&broken).unwrap();
    fs::set_permissions(&broken, fs::Permissions::from_mode(0o700)).unwrap();
    write_private(
        &broken.join(".gjc-managed-session-scope.v2.json"),
        b"{not json",
    );
    let other_ws = s.tmp.path().join("other-workspace");
    fs::create_dir(&other_ws).unwrap();
    let other =
        SessionManager::create_managed(&other_ws, &sessions, StorageConfig::files(&blobs)).unwrap();
    drop(other);
    let other_scope = fs::read_dir(&sessions)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir() && p != &scope && p != &broken && p.starts_with(&sessions))
        .unwrap();
    std::os::unix::fs::chown(
        other_scope.join(".gjc-managed-session-scope.v2.json"),
        Some(12345),
        None,
    )
    .unwrap();
    // Legacy sessions: one whose managed copy exists (same session id), one without.
    let legacy = sessions.join("--legacy-dir--");
    fs::create_dir(&legacy).unwrap();
    let copy_of = fs::read(&s.file).unwrap();
    fs::write(legacy.join("old-copy.jsonl"), &copy_of).unwrap();
    fs::write(
        legacy.join("old-only.jsonl"),
        session_text("legacy-1", cwd).text(),
    )
    .unwrap();
    Damaged {
        s,
        scope,
        torn,
        torn_whole,
        blobs,
    }
}

/// `gjcfs check` with `extra` options, which must exit with `status`.
fn check_exiting(d: &Damaged, extra: &[&str], status: i32) -> Output {
    let out = check(d, extra);
    assert_eq!(
        out.status.code(),
        Some(status),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn check(d: &Damaged, extra: &[&str]) -> Output {
    let agent = d.s.agent_dir();
    std::process::Command::new(gjcfs_bin())
        .args(["check", "--agent-dir", &agent])
        .args(extra)
        .output()
        .unwrap()
}

/// The findings of a `--json` report, as (kind, file name) → (severity, repair offered,
/// repaired).
type Findings = BTreeMap<(String, String), (String, bool, Option<bool>)>;

fn findings(out: &Output) -> (Value, Findings) {
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    let value = json::parse(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    let mut found = BTreeMap::new();
    for f in value
        .as_object()
        .unwrap()
        .get("findings")
        .unwrap()
        .as_array()
        .unwrap()
    {
        let f = f.as_object().unwrap();
        let path = PathBuf::from(f.get_str("path").unwrap());
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        found.insert(
            (f.get_str("kind").unwrap().to_owned(), name),
            (
                f.get_str("severity").unwrap().to_owned(),
                !matches!(f.get("repair"), Some(Value::Null)),
                f.get("repaired").and_then(Value::as_bool),
            ),
        );
    }
    (value, found)
}

/// Every file under `dir` with its bytes and mode.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, u32)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path);
            } else {
                let mode = meta.permissions().mode() & 0o7777;
                out.insert(path.clone(), (fs::read(&path).unwrap_or_default(), mode));
            }
        }
    }
    out
}

#[test]
fn every_kind_of_damage_is_found_with_its_severity_and_the_check_changes_nothing() {
    let d = damaged();
    let agent = d.s.tmp.path().join("agent");
    let before = snapshot(&agent);
    let out = check_exiting(&d, &["--json"], 4);
    let (value, found) = findings(&out);
    let expect = |kind: &str, name: &str, severity: &str, repairable: bool| {
        let got = found.get(&(kind.to_owned(), name.to_owned()));
        assert_eq!(
            got.map(|(s, r, _)| (s.as_str(), *r)),
            Some((severity, repairable)),
            "{kind} {name}: {found:#?}"
        );
    };
    let blob = |bytes: &[u8]| sha256_hex(bytes);
    expect("torn_tail", "torn.jsonl", "error", true);
    expect("torn_tail", "torn-bad.jsonl", "error", false);
    expect("malformed_line", "torn-bad.jsonl", "error", false);
    expect("missing_parent", "orphan.jsonl", "error", false);
    expect("not_a_session", "notsession.jsonl", "error", false);
    expect("stray_file", "notes.txt", "warning", false);
    expect("stray_file", "stray.txt", "warning", false);
    expect(
        "orphaned_temp",
        ".torn.jsonl.15e509ad4fde4d76.tmp",
        "warning",
        true,
    );
    expect(
        "orphaned_temp",
        ".gone.jsonl.15e509ad4fde4d77.tmp",
        "warning",
        false,
    );
    expect(
        "orphaned_backup",
        "lost.jsonl.15e509ad4fde4d78.bak",
        "error",
        true,
    );
    expect(
        "orphaned_backup",
        "orphan.jsonl.15e509ad4fde4d79.bak",
        "warning",
        false,
    );
    expect("wide_mode", "wide.jsonl", "warning", true);
    expect("missing_blob", &blob(b"missing"), "error", false);
    expect("corrupt_blob", &blob(b"corrupt"), "error", false);
    expect("unreferenced_blob", &blob(b"nobody"), "note", false);
    expect(
        "orphaned_temp",
        &format!("{}.tmp.999999.1700000000000.0abc1234", blob(b"present")),
        "warning",
        true,
    );
    expect("stale_lock", "abc.lock", "warning", true);
    expect(
        "broken_binding",
        ".gjc-managed-session-scope.v2.json",
        "error",
        false,
    );
    expect(
        "foreign_owner",
        ".gjc-managed-session-scope.v2.json",
        "error",
        false,
    );
    expect("legacy_with_copy", "old-copy.jsonl", "note", false);
    expect("legacy_without_copy", "old-only.jsonl", "note", false);
    // The healthy session has nothing to say, and neither has the blob it references.
    let healthy = d.s.file.file_name().unwrap().to_string_lossy().into_owned();
    assert!(found.keys().all(|(_, name)| name != &healthy), "{found:#?}");
    assert!(!found.contains_key(&("unreferenced_blob".to_owned(), blob(b"present"))));
    let counts = value.as_object().unwrap();
    assert_eq!(counts.get("sessions").unwrap().as_f64(), Some(9.0));
    assert_eq!(counts.get("blobs").unwrap().as_f64(), Some(3.0));
    // Reading changed nothing.
    assert_eq!(snapshot(&agent), before, "the check wrote");

    // The text report says the same, one block a finding, and what --repair would do.
    let text = String::from_utf8(check(&d, &[]).stdout).unwrap();
    assert!(text.contains("error     torn_tail"), "{text}");
    assert!(text.contains("--repair would cut off the"), "{text}");
    assert!(text.contains("left for a person"), "{text}");
    assert!(
        text.contains("`gjcfs check --repair` repairs 6 of them"),
        "{text}"
    );
}

#[test]
fn repair_fixes_only_what_is_safe_keeps_copies_and_deletes_no_session() {
    let d = damaged();
    let agent = d.s.tmp.path().join("agent");
    let transcripts_before: Vec<PathBuf> = snapshot(&agent)
        .into_keys()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    let torn_bytes = fs::read(&d.torn).unwrap();
    // Errors are left for a person.
    let out = check_exiting(&d, &["--repair", "--restore-deleted", "--json"], 4);
    let (value, found) = findings(&out);
    let repaired: Vec<&(String, String)> = found
        .iter()
        .filter(|(_, (_, _, r))| *r == Some(true))
        .map(|(k, _)| k)
        .collect();
    assert_eq!(repaired.len(), 6, "{found:#?}");
    assert!(found
        .values()
        .all(|(_, offered, done)| !offered || *done == Some(true)));

    // The torn line is cut: the session is whole again, and the file as it was is kept.
    assert_eq!(fs::read(&d.torn).unwrap(), d.torn_whole);
    assert!(load_session(&d.torn).unwrap().skipped.is_empty());
    let kept_in = PathBuf::from(
        value
            .as_object()
            .unwrap()
            .get_str("repairDir")
            .expect("a repair directory"),
    );
    assert!(
        kept_in.starts_with(agent.join("gjcfs-repairs")),
        "{kept_in:?}"
    );
    let copy = kept_in.join(d.torn.strip_prefix(&agent).unwrap());
    assert_eq!(fs::read(&copy).unwrap(), torn_bytes);
    // The temp file of an intact session and the blob temp are moved there; the one whose
    // session is missing stays.
    assert!(!d.scope.join(".torn.jsonl.15e509ad4fde4d76.tmp").exists());
    assert!(kept_in
        .join(d.scope.strip_prefix(&agent).unwrap())
        .join(".torn.jsonl.15e509ad4fde4d76.tmp")
        .exists());
    assert!(d.scope.join(".gone.jsonl.15e509ad4fde4d77.tmp").exists());
    assert_eq!(
        fs::read_dir(&d.blobs).unwrap().count(),
        3,
        "the blob temp is moved away, the blobs stay"
    );
    // The backup of the missing session is the session again.
    assert!(load_session(&d.scope.join("lost.jsonl")).is_ok());
    assert!(d.scope.join("orphan.jsonl.15e509ad4fde4d79.bak").exists());
    // Owner-only again; the stale lock is gone.
    let mode = fs::metadata(d.scope.join("wide.jsonl"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(!d
        .scope
        .join(".gjc-managed-session-internal/locks/abc.lock")
        .exists());
    // The manifest names each change, begun then done, and the run complete.
    let manifest = fs::read_to_string(kept_in.join("manifest.jsonl")).unwrap();
    let states: Vec<String> = manifest
        .lines()
        .map(|line| {
            let line = json::parse(line).unwrap();
            line.as_object()
                .unwrap()
                .get_str("state")
                .unwrap()
                .to_owned()
        })
        .collect();
    let mut expected = ["begun", "done"].repeat(6);
    expected.push("complete");
    assert_eq!(states, expected, "{manifest}");
    // No session was deleted; the backup came back as one.
    let after = snapshot(&agent);
    for path in &transcripts_before {
        assert!(after.contains_key(path), "{path:?} is gone");
    }
    // A second check finds only what is left for a person.
    let again = check(&d, &["--json"]);
    let (_, left) = findings(&again);
    assert!(left.values().all(|(_, offered, _)| !offered), "{left:#?}");
    assert!(left.contains_key(&("missing_parent".to_owned(), "orphan.jsonl".to_owned())));
    assert_eq!(again.status.code(), Some(4));
}

#[test]
fn a_backup_whose_session_is_missing_is_renamed_back_only_when_asked() {
    let d = damaged();
    let backup = d.scope.join("lost.jsonl.15e509ad4fde4d78.bak");
    assert!(backup.exists());
    let out = check_exiting(&d, &["--repair", "--json"], 4);
    let (_, found) = findings(&out);
    let key = (
        "orphaned_backup".to_owned(),
        "lost.jsonl.15e509ad4fde4d78.bak".to_owned(),
    );
    assert_eq!(found[&key], ("error".to_owned(), true, Some(false)));
    assert!(String::from_utf8_lossy(&out.stdout).contains("--restore-deleted renames"));
    assert!(backup.exists() && !d.scope.join("lost.jsonl").exists());
    check_exiting(&d, &["--repair", "--restore-deleted", "--json"], 4);
    assert!(!backup.exists());
    assert!(load_session(&d.scope.join("lost.jsonl")).is_ok());
    // The option means nothing without --repair.
    check_exiting(&d, &["--restore-deleted"], 2);
}

#[test]
fn a_clean_store_checks_clean_and_a_missing_one_is_an_error() {
    let s = store();
    let out = std::process::Command::new(gjcfs_bin())
        .args(["check", "--agent-dir", &s.agent_dir()])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("checked 1 session file and 0 blobs: 0 errors, 0 warnings, 0 notes"),
        "{text}"
    );
    let missing = std::process::Command::new(gjcfs_bin())
        .args(["check", "--agent-dir", "/nonexistent/agent"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(1));
    // Only warnings: status 3.
    fs::write(s.tmp.path().join("agent/sessions/stray.txt"), b"x").unwrap();
    let warned = std::process::Command::new(gjcfs_bin())
        .args(["check", "--agent-dir", &s.agent_dir()])
        .output()
        .unwrap();
    assert_eq!(warned.status.code(), Some(3));
}

#[test]
fn a_prompt_history_others_may_read_is_reported_and_left_as_it_is() {
    let s = store();
    let history = s.tmp.path().join("agent/history.db");
    let run = |extra: &[&str]| {
        std::process::Command::new(gjcfs_bin())
            .args(["check", "--json", "--agent-dir", &s.agent_dir()])
            .args(extra)
            .output()
            .unwrap()
    };
    // (file name, severity, repair offered) of each `wide_history`.
    let wide = |out: &Output| -> Vec<(String, String, bool)> {
        let (_, findings) = findings(out);
        findings
            .into_iter()
            .filter(|((kind, _), _)| kind == "wide_history")
            .map(|((_, name), (severity, offered, _))| (name, severity, offered))
            .collect()
    };
    // As the agent creates it under the umask 022, with its write-ahead log.
    gjcfs::engine::HistoryStorage::open(&history)
        .unwrap()
        .close()
        .unwrap();
    let wal = s.tmp.path().join("agent/history.db-wal");
    fs::write(&wal, b"").unwrap();
    for file in [&history, &wal] {
        fs::set_permissions(file, fs::Permissions::from_mode(0o644)).unwrap();
    }
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(3), "warnings only");
    let expected = vec![
        ("history.db".to_owned(), "warning".to_owned(), false),
        ("history.db-wal".to_owned(), "warning".to_owned(), false),
    ];
    assert_eq!(wide(&out), expected);
    // Not the repair's to change: the agent's file keeps its mode.
    let repaired = run(&["--repair"]);
    assert_eq!(wide(&repaired), expected);
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!((mode(&history), mode(&wal)), (0o644, 0o644));
    // Owner-only: nothing to report.
    for file in [&history, &wal] {
        fs::set_permissions(file, fs::Permissions::from_mode(0o600)).unwrap();
    }
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(0));
    assert!(wide(&out).is_empty());
}

#[test]
fn the_mount_shows_the_report_in_its_check_file_and_changes_nothing() {
    require_fuse!();
    let d = damaged();
    let agent = d.s.tmp.path().join("agent");
    let before = snapshot(&agent);
    let mount = Mount::start(&["--agent-dir", &d.s.agent_dir()]);
    let text = ok("cat", &[p(&mount.path().join("check"))]);
    assert!(text.contains("torn_tail"), "{text}");
    assert!(text.contains("stale_lock"), "{text}");
    assert!(ok("ls", &[p(mount.path())]).lines().any(|l| l == "check"));
    drop(mount);
    assert_eq!(snapshot(&agent), before, "reading the check file wrote");
}

#[test]
fn the_command_reports_a_repair_that_did_not_finish() {
    let s = store();
    let run = s
        .tmp
        .path()
        .join("agent/gjcfs-repairs/2026-01-01T00-00-00.000Z");
    fs::create_dir_all(&run).unwrap();
    let wide = s.file.to_str().unwrap();
    fs::write(
        run.join("manifest.jsonl"),
        format!(
            "{{\"step\":1,\"state\":\"begun\",\"path\":\"{wide}\",\"kind\":\"wide_mode\",\
             \"repair\":\"set its mode from 644 to 600\"}}\n"
        ),
    )
    .unwrap();
    let out = std::process::Command::new(gjcfs_bin())
        .args(["check", "--agent-dir", &s.agent_dir()])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(text.contains("unfinished_repair"), "{text}");
    assert!(text.contains(run.to_str().unwrap()), "{text}");
    assert!(
        text.contains(&format!("{wide}: set its mode from 644 to 600")),
        "{text}"
    );
    // Once the run says it is complete, nothing is reported.
    let mut manifest = fs::read(run.join("manifest.jsonl")).unwrap();
    manifest.extend_from_slice(b"{\"state\":\"complete\",\"steps\":1}\n");
    fs::write(run.join("manifest.jsonl"), manifest).unwrap();
    let out = std::process::Command::new(gjcfs_bin())
        .args(["check", "--agent-dir", &s.agent_dir()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn the_command_reports_a_record_the_strict_checks_refuse_with_its_line() {
    let s = store();
    let mut bytes = fs::read(&s.file).unwrap();
    let lines = bytes.iter().filter(|&&b| b == b'\n').count();
    bytes.extend_from_slice(
        br#"{"type":"message","id":"late","parentId":null,"message":{"role":"user","content":"x"}}"#,
    );
    bytes.push(b'\n');
    write_private(&s.file, &bytes);
    let out = std::process::Command::new(gjcfs_bin())
        .args(["check", "--agent-dir", &s.agent_dir()])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(4), "{text}");
    assert!(
        text.contains(&format!("error     refused_record  {}", s.file.display())),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "line {} is refused by the strict checks (an entry needs a string timestamp)",
            lines + 1
        )),
        "{text}"
    );
}
