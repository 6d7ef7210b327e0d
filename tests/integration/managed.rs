//! Sessions in managed scopes: owner-only files, identity-checked and fsynced appends.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use gjcfs::engine::json::{self, Value};
use gjcfs::engine::load_session;
use gjcfs::engine::manager::{SessionError, SessionManager, StorageConfig};
use gjcfs::engine::store::scope::{resolve_identity, scope_dir_name, BINDING_FILE};

fn message(role: &str, text: &str) -> Value {
    json::parse(&format!(
        r#"{{"role":"{role}","content":"{text}","provider":"p","model":"m","timestamp":1}}"#
    ))
    .unwrap()
}

fn setup(tmp: &Path) -> (std::path::PathBuf, SessionManager) {
    let ws = tmp.join("workspace");
    fs::create_dir_all(&ws).unwrap();
    let root = tmp.join("agent/sessions");
    let m =
        SessionManager::create_managed(&ws, &root, StorageConfig::files(tmp.join("agent/blobs")))
            .unwrap();
    m.append_message(message("user", "q")).unwrap();
    m.append_message(message("assistant", "a")).unwrap();
    (ws, m)
}

fn mode(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn managed_sessions_live_in_their_bound_scope_with_private_files() {
    let tmp = tempfile::tempdir().unwrap();
    let (ws, m) = setup(tmp.path());
    let file = m.session_file().unwrap();
    let scope = file.parent().unwrap();
    let identity = resolve_identity(&ws).unwrap();
    assert_eq!(
        scope.file_name().unwrap().to_str().unwrap(),
        scope_dir_name(&identity)
    );
    assert!(scope.join(BINDING_FILE).is_file());
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(scope), 0o700);
    // Appends are on disk when the call returns.
    let id = m.append_message(message("user", "more")).unwrap();
    assert_eq!(
        load_session(&file).unwrap().session.leaf_id(),
        Some(id.as_str())
    );
    // A reopen goes through the strict path and keeps appending.
    drop(m);
    let again =
        SessionManager::open_managed(&file, StorageConfig::files(tmp.path().join("agent/blobs")))
            .unwrap();
    again.append_message(message("assistant", "more")).unwrap();
    assert_eq!(load_session(&file).unwrap().session.entry_count(), 4);
}

#[test]
fn a_missing_transcript_is_not_recreated() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, m) = setup(tmp.path());
    let file = m.session_file().unwrap();
    fs::remove_file(&file).unwrap();
    let err = m.append_message(message("user", "x")).unwrap_err();
    assert!(err.to_string().contains("managed_append_missing"), "{err}");
    assert!(!file.exists());
    assert!(m.persist_error().is_some());
}

#[test]
fn unsafe_transcripts_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, m) = setup(tmp.path());
    let file = m.session_file().unwrap();
    fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
    let before = fs::read(&file).unwrap();
    assert!(matches!(
        m.append_message(message("user", "x")),
        Err(SessionError::Append { .. })
    ));
    assert_eq!(fs::read(&file).unwrap(), before);

    let (_, m2) = setup(&tmp.path().join("second"));
    let file2 = m2.session_file().unwrap();
    let decoy = tmp.path().join("decoy.jsonl");
    fs::copy(&file2, &decoy).unwrap();
    fs::set_permissions(&decoy, fs::Permissions::from_mode(0o600)).unwrap();
    fs::remove_file(&file2).unwrap();
    std::os::unix::fs::symlink(&decoy, &file2).unwrap();
    let decoy_before = fs::read(&decoy).unwrap();
    assert!(m2.append_message(message("user", "x")).is_err());
    assert_eq!(
        fs::read(&decoy).unwrap(),
        decoy_before,
        "nothing written through the symlink"
    );
    assert!(
        SessionManager::open_managed(&file2, StorageConfig::files(tmp.path().join("b"))).is_err()
    );
}

#[test]
fn a_transcript_replaced_by_another_writer_is_appended_to_as_it_now_is() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, m) = setup(tmp.path());
    m.append_message(message("user", "one")).unwrap();
    let file = m.session_file().unwrap();
    // Another process rewrites the file atomically (a new inode with the same content).
    let content = fs::read(&file).unwrap();
    let temp = file.with_extension("tmp");
    fs::write(&temp, &content).unwrap();
    fs::set_permissions(&temp, fs::Permissions::from_mode(0o600)).unwrap();
    fs::rename(&temp, &file).unwrap();
    let id = m.append_message(message("user", "two")).unwrap();
    let session = load_session(&file).unwrap().session;
    assert_eq!(session.leaf_id(), Some(id.as_str()));
    assert_eq!(session.entry_count(), 4);
}
