//! `continueRecent`: breadcrumb first, then the scope's sessions newest first, strict opens,
//! malformed sessions skipped, a new session last.

use std::fs;
use std::path::Path;

use gjcfs::engine::json::{self, Value};
use gjcfs::engine::manager::resume::{breadcrumb_dir, continue_recent};
use gjcfs::engine::manager::{SessionManager, StorageConfig};
use gjcfs::engine::store::agent_dir::{AgentDirs, Environment};
use gjcfs::engine::store::breadcrumb::write_breadcrumb;
use gjcfs::engine::store::legacy::MigrationPolicy;

use crate::common::set_mtime;

fn message(role: &str) -> Value {
    json::parse(&format!(
        r#"{{"role":"{role}","content":"x","provider":"p","model":"m","timestamp":1}}"#
    ))
    .unwrap()
}

fn dirs(agent: &Path) -> AgentDirs {
    AgentDirs::with_agent_dir(&Environment::current(), agent).unwrap()
}

fn session(ws: &Path, dirs: &AgentDirs) -> SessionManager {
    let m = SessionManager::create_managed(
        ws,
        &dirs.sessions_root(),
        StorageConfig::files(dirs.blob_dir()),
    )
    .unwrap();
    m.append_message(message("user")).unwrap();
    m.append_message(message("assistant")).unwrap();
    m.close().unwrap();
    m
}

#[test]
fn continue_prefers_the_breadcrumb_then_the_newest_valid_session() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    fs::create_dir(&ws).unwrap();
    let d = dirs(&tmp.path().join("agent"));
    let cfg = || StorageConfig::files(d.blob_dir());
    let older = session(&ws, &d);
    let newer = session(&ws, &d);
    let newest_broken = session(&ws, &d);
    fs::write(newest_broken.session_file().unwrap(), b"{ broken\n").unwrap();
    for (age, m) in [&older, &newer, &newest_broken].into_iter().enumerate() {
        set_mtime(&m.session_file().unwrap(), age as u64 * 10);
    }

    // No breadcrumb: the newest session that opens strictly.
    let m = continue_recent(&ws, &d, cfg(), None, MigrationPolicy::CopyRetain).unwrap();
    assert_eq!(m.session_id(), newer.session_id());

    // A breadcrumb for another workspace is ignored.
    let other = tmp.path().join("other");
    fs::create_dir(&other).unwrap();
    write_breadcrumb(
        &breadcrumb_dir(&d),
        "pts-8",
        other.to_str().unwrap(),
        &older.session_file().unwrap(),
    )
    .unwrap();
    assert_eq!(
        continue_recent(&ws, &d, cfg(), Some("pts-8"), MigrationPolicy::CopyRetain)
            .unwrap()
            .session_id(),
        newer.session_id()
    );

    // A breadcrumb for this workspace wins over newer sessions.
    write_breadcrumb(
        &breadcrumb_dir(&d),
        "pts-7",
        ws.to_str().unwrap(),
        &older.session_file().unwrap(),
    )
    .unwrap();
    let m = continue_recent(&ws, &d, cfg(), Some("pts-7"), MigrationPolicy::CopyRetain).unwrap();
    assert_eq!(m.session_id(), older.session_id());
    m.append_message(message("user")).unwrap();
    assert_eq!(
        gjcfs::engine::load_session(&older.session_file().unwrap())
            .unwrap()
            .session
            .entry_count(),
        3
    );
}

#[test]
fn continue_starts_a_new_session_and_leaves_a_breadcrumb() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    fs::create_dir(&ws).unwrap();
    let d = dirs(&tmp.path().join("agent"));
    let m = continue_recent(
        &ws,
        &d,
        StorageConfig::files(d.blob_dir()),
        Some("pts-1"),
        MigrationPolicy::CopyRetain,
    )
    .unwrap();
    let file = m.session_file().unwrap();
    assert!(
        !file.exists(),
        "nothing is written before the first assistant reply"
    );
    let crumb = fs::read_to_string(breadcrumb_dir(&d).join("pts-1")).unwrap();
    assert_eq!(crumb, format!("{}\n{}\n", ws.display(), file.display()));
    m.append_message(message("assistant")).unwrap();
    // The next continue in this terminal finds it through the breadcrumb.
    let again = continue_recent(
        &ws,
        &d,
        StorageConfig::files(d.blob_dir()),
        Some("pts-1"),
        MigrationPolicy::CopyRetain,
    )
    .unwrap();
    assert_eq!(again.session_id(), m.session_id());
}

#[test]
fn a_legacy_session_is_continued_through_a_copy_in_the_scope() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    fs::create_dir(&ws).unwrap();
    let canonical = fs::canonicalize(&ws).unwrap();
    let d = dirs(&tmp.path().join("agent"));
    let legacy_dir = d
        .sessions_root()
        .join(gjcfs::engine::store::legacy::encode_absolute(
            canonical.to_str().unwrap(),
        ));
    fs::create_dir_all(&legacy_dir).unwrap();
    let text = fs::read_to_string(crate::common::fixture("v1-minimal.jsonl"))
        .unwrap()
        .replace(
            "\"cwd\":\"/tmp\"",
            &format!("\"cwd\":\"{}\"", canonical.display()),
        );
    let source = legacy_dir.join("2025-01-01T00-00-00-000Z_sess-1.jsonl");
    fs::write(&source, &text).unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&source, fs::Permissions::from_mode(0o600)).unwrap();

    let err = continue_recent(
        &ws,
        &d,
        StorageConfig::files(d.blob_dir()),
        None,
        MigrationPolicy::Disabled,
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("legacy_migration_disabled")
            || err.to_string().contains("disabled"),
        "{err}"
    );

    let m = continue_recent(
        &ws,
        &d,
        StorageConfig::files(d.blob_dir()),
        None,
        MigrationPolicy::CopyRetain,
    )
    .unwrap();
    assert_eq!(m.session_id(), "sess-1");
    let copy = m.session_file().unwrap();
    assert_ne!(copy, source);
    assert!(copy
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .starts_with("v2-"));
    m.append_message(message("user")).unwrap();
    assert_eq!(
        fs::read_to_string(&source).unwrap(),
        text,
        "the legacy source is retained unchanged"
    );
    assert_eq!(
        gjcfs::engine::load_session(&copy)
            .unwrap()
            .session
            .entry_count(),
        3
    );
}
