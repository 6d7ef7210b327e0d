//! Managed v2 scopes: the digest vectors, the binding file, and the owner-only boundary under
//! attack (symlinks, modes, foreign owners, ACLs, conflicting bindings).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use crate::common::fixture_text;
use gjcfs::engine::json::{self, Value};
use gjcfs::engine::storage::FileStorage;
use gjcfs::engine::store::scope::{
    binding_bytes, digest, prepare_scope, resolve_identity, scope_dir_name, verify_owner_only,
    Identity, ScopeError, BINDING_FILE, INTERNAL_DIR,
};

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn digest_vectors_match() {
    let vectors = json::parse(&fixture_text("managed-scope-digest-vectors.json")).unwrap();
    let obj = vectors.as_object().unwrap();
    let mut checked = 0;
    for list in ["vectors", "extraVectorsComputedIndependently"] {
        for v in obj.get(list).unwrap().as_array().unwrap() {
            let v = v.as_object().unwrap();
            let got = digest(
                v.get_str("platform").unwrap(),
                v.get_str("canonicalPath").unwrap(),
            );
            assert_eq!(Some(got.as_str()), v.get_str("digest"));
            if let Some(dir) = v.get_str("directoryName") {
                let id = Identity {
                    platform: "posix",
                    canonical_path: v.get_str("canonicalPath").unwrap().into(),
                };
                assert_eq!(scope_dir_name(&id), dir);
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 4);
}

#[test]
fn legacy_colliding_paths_get_distinct_scopes() {
    let name = |p: &str| {
        scope_dir_name(&Identity {
            platform: "posix",
            canonical_path: p.into(),
        })
    };
    for (a, b) in [("/x/a-b/c", "/x/a/b-c"), ("/x/a--b/c", "/x/a/b--c")] {
        assert_ne!(name(a), name(b));
        for n in [name(a), name(b)] {
            assert_eq!(n.len(), 55);
            assert!(n[3..]
                .bytes()
                .all(|c| c.is_ascii_lowercase() || (b'2'..=b'7').contains(&c)));
        }
    }
}

#[test]
fn identity_is_the_realpath_and_aliases_share_a_scope() {
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("project");
    fs::create_dir(&real).unwrap();
    let alias = tmp.path().join("alias");
    std::os::unix::fs::symlink(&real, &alias).unwrap();
    let a = resolve_identity(&real).unwrap();
    let b = resolve_identity(&alias).unwrap();
    assert_eq!(a, b);
    assert_eq!(
        a.canonical_path,
        fs::canonicalize(&real).unwrap().to_str().unwrap()
    );
    assert!(matches!(
        resolve_identity(&tmp.path().join("gone")),
        Err(ScopeError::InvalidWorkspace { .. })
    ));
    let file = tmp.path().join("file");
    fs::write(&file, "").unwrap();
    assert!(matches!(
        resolve_identity(&file),
        Err(ScopeError::InvalidWorkspace { .. })
    ));
}

fn workspace(tmp: &Path) -> Identity {
    let ws = tmp.join("ws");
    fs::create_dir_all(&ws).unwrap();
    resolve_identity(&ws).unwrap()
}

#[test]
fn prepare_creates_an_owner_only_bound_scope_and_is_idempotent() {
    let tmp = tempfile::tempdir().unwrap();
    let id = workspace(tmp.path());
    let root = tmp.path().join("agent/sessions");
    fs::create_dir_all(root.parent().unwrap()).unwrap();
    let scope = prepare_scope(&root, &id).unwrap();
    assert_eq!(scope, root.join(scope_dir_name(&id)));
    assert_eq!(mode(&root), 0o700);
    assert_eq!(mode(&scope), 0o700);
    let binding = scope.join(BINDING_FILE);
    assert_eq!(fs::read(&binding).unwrap(), binding_bytes(&id));
    assert_eq!(mode(&binding), 0o600);
    for sub in ["locks", "receipts", "tombstones"] {
        assert_eq!(mode(&scope.join(INTERNAL_DIR).join(sub)), 0o700);
    }
    let listing: Vec<_> = fs::read_dir(&scope)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        listing.len(),
        2,
        "binding and internal dir only, no temp files: {listing:?}"
    );
    assert_eq!(prepare_scope(&root, &id).unwrap(), scope);
    let parsed = json::parse(
        std::str::from_utf8(&fs::read(&binding).unwrap())
            .unwrap()
            .trim_end(),
    )
    .unwrap();
    assert_eq!(
        parsed.as_object().unwrap().get("canonicalPath"),
        Some(&Value::string(id.canonical_path.as_str()))
    );
}

#[test]
fn symlinked_roots_and_scopes_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let id = workspace(tmp.path());
    let elsewhere = tmp.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    fs::set_permissions(&elsewhere, fs::Permissions::from_mode(0o700)).unwrap();
    let root = tmp.path().join("sessions");
    std::os::unix::fs::symlink(&elsewhere, &root).unwrap();
    assert!(matches!(
        prepare_scope(&root, &id),
        Err(ScopeError::Exposed { .. })
    ));

    let real_root = tmp.path().join("real-sessions");
    fs::create_dir(&real_root).unwrap();
    fs::set_permissions(&real_root, fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::symlink(&elsewhere, real_root.join(scope_dir_name(&id))).unwrap();
    assert!(matches!(
        prepare_scope(&real_root, &id),
        Err(ScopeError::Exposed { .. })
    ));
}

#[test]
fn a_binding_for_another_workspace_or_a_planted_symlink_fails_closed() {
    let tmp = tempfile::tempdir().unwrap();
    let id = workspace(tmp.path());
    let root = tmp.path().join("sessions");
    let scope = prepare_scope(&root, &id).unwrap();
    let binding = scope.join(BINDING_FILE);
    let other = Identity {
        platform: "posix",
        canonical_path: "/somewhere/else".into(),
    };
    fs::write(&binding, binding_bytes(&other)).unwrap();
    assert!(matches!(
        prepare_scope(&root, &id),
        Err(ScopeError::BindingConflict { .. })
    ));

    fs::remove_file(&binding).unwrap();
    let decoy = tmp.path().join("decoy.json");
    fs::write(&decoy, binding_bytes(&id)).unwrap();
    std::os::unix::fs::symlink(&decoy, &binding).unwrap();
    assert!(matches!(
        prepare_scope(&root, &id),
        Err(ScopeError::BindingInvalid { .. })
    ));

    fs::remove_file(&binding).unwrap();
    fs::write(&decoy, binding_bytes(&id)).unwrap();
    fs::hard_link(&decoy, &binding).unwrap();
    assert!(matches!(
        prepare_scope(&root, &id),
        Err(ScopeError::BindingInvalid { .. })
    ));
}

#[test]
fn drifted_group_and_other_bits_are_resecured_but_foreign_owners_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let id = workspace(tmp.path());
    let root = tmp.path().join("sessions");
    let scope = prepare_scope(&root, &id).unwrap();
    fs::set_permissions(&scope, fs::Permissions::from_mode(0o755)).unwrap();
    prepare_scope(&root, &id).unwrap();
    assert_eq!(mode(&scope), 0o700);

    let binding = scope.join(BINDING_FILE);
    fs::set_permissions(&binding, fs::Permissions::from_mode(0o644)).unwrap();
    assert!(matches!(
        verify_owner_only(&FileStorage, &binding, false),
        Err(ScopeError::Exposed {
            exposure: gjcfs::engine::storage::Exposure::Mode {
                mode: 0o644,
                want: 0o600
            },
            ..
        })
    ));
    fs::set_permissions(&binding, fs::Permissions::from_mode(0o600)).unwrap();
    verify_owner_only(&FileStorage, &binding, false).unwrap();

    if crate::common::root_for("the foreign-owner case (a chown)") {
        let c = std::ffi::CString::new(binding.to_str().unwrap()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::chown(c.as_ptr(), 65534, 65534) }, 0);
        let err = verify_owner_only(&FileStorage, &binding, false).unwrap_err();
        assert!(err.to_string().contains("owned by uid 65534"), "{err}");
    }
}

/// A scope prepared for a workspace in `tmp`.
#[cfg(any(target_os = "linux", target_os = "macos"))]
fn prepared_scope(tmp: &Path) -> std::path::PathBuf {
    let id = workspace(tmp);
    prepare_scope(&tmp.join("sessions"), &id).unwrap()
}

// POSIX ACLs (setfacl) are Linux's; macOS has its own test below.
#[cfg(target_os = "linux")]
#[test]
fn a_real_posix_acl_is_a_failure() {
    let tmp = tempfile::tempdir().unwrap();
    let scope = prepared_scope(tmp.path());
    let status = Command::new("setfacl")
        .args(["-m", "u:65534:r"])
        .arg(scope.join(BINDING_FILE))
        .status();
    match status {
        Ok(s) if s.success() => {}
        _ => {
            crate::common::cannot_run(
                "setfacl is missing (apt-get install acl) or not supported here",
            );
            return;
        }
    }
    // The ACL mask widens the group bits; restore the mode so only the ACL remains.
    fs::set_permissions(scope.join(BINDING_FILE), fs::Permissions::from_mode(0o600)).unwrap();
    let err = verify_owner_only(&FileStorage, &scope.join(BINDING_FILE), false).unwrap_err();
    assert!(err.to_string().contains("POSIX ACL"), "{err}");
}

#[cfg(target_os = "macos")]
#[test]
fn a_real_extended_acl_is_a_failure() {
    let tmp = tempfile::tempdir().unwrap();
    let binding = prepared_scope(tmp.path()).join(BINDING_FILE);
    verify_owner_only(&FileStorage, &binding, false).unwrap();
    // An extended ACL entry leaves the mode bits as they were.
    let status = Command::new("chmod")
        .args(["+a", "everyone allow read"])
        .arg(&binding)
        .status()
        .unwrap();
    assert!(status.success(), "chmod +a failed: {status}");
    assert_eq!(
        fs::metadata(&binding).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let err = verify_owner_only(&FileStorage, &binding, false).unwrap_err();
    assert!(err.to_string().contains("extended ACL"), "{err}");
    // Removing the entry makes it private again.
    let status = Command::new("chmod")
        .arg("-N")
        .arg(&binding)
        .status()
        .unwrap();
    assert!(status.success());
    verify_owner_only(&FileStorage, &binding, false).unwrap();
}
