//! Legacy session directories: candidate discovery by header identity, copy-retain migration
//! into the v2 scope, the lease lock, conflicts and unsafe artifacts, tombstones, and the
//! hand-over to `SessionManager::open`.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::common::fixture_text;
use gjcfs::engine::json::{self, Value};
use gjcfs::engine::manager::{SessionManager, StorageConfig};
use gjcfs::engine::store::legacy::{
    current_process_start_id, encode_absolute, list_candidates, migrate_candidate,
    path_for_writing, retire_candidate, Candidate, LegacyError, LegacyRoots, LegacyStore,
    MigrationPolicy, Provenance,
};
use gjcfs::engine::store::scope::{prepare_scope, resolve_identity, scope_dir_name, INTERNAL_DIR};

const V1: &str = "2025-01-01T00-00-00-000Z_sess-1.jsonl";
const V2: &str = "2025-01-02T00-00-00-000Z_sess-1.jsonl";
const V3: &str = "2026-01-01T00-00-00-000Z_old.jsonl";

/// A temp directory with an agent sessions root and a workspace.
struct Env {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
    ws: PathBuf,
    roots: LegacyRoots,
}

impl Env {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let base = fs::canonicalize(tmp.path()).unwrap();
        let ws = base.join("ws");
        fs::create_dir(&ws).unwrap();
        let root = base.join("agent/sessions");
        fs::create_dir_all(&root).unwrap();
        Env {
            roots: LegacyRoots {
                home: Some(base.join("home")),
                tmp: None,
            },
            _tmp: tmp,
            base,
            root,
            ws,
        }
    }

    fn ws_text(&self) -> &str {
        self.ws.to_str().unwrap()
    }

    /// `<root>/--<encoded workspace>--`, created with the modes the old agent used.
    fn legacy_dir(&self) -> PathBuf {
        let dir = self.root.join(encode_absolute(self.ws_text()));
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn scope_dir(&self) -> PathBuf {
        self.root
            .join(scope_dir_name(&resolve_identity(&self.ws).unwrap()))
    }

    fn list(&self) -> gjcfs::engine::store::legacy::CandidateListing {
        list_candidates(&self.root, &self.ws, &self.roots).unwrap()
    }

    fn owned(&self, name: &str) -> Candidate {
        self.list()
            .owned
            .into_iter()
            .find(|c| c.path.file_name().unwrap() == name)
            .unwrap_or_else(|| panic!("{name} is not listed"))
    }

    fn migrate(
        &self,
        c: &Candidate,
    ) -> Result<gjcfs::engine::store::legacy::MigrationOutcome, LegacyError> {
        migrate_candidate(&self.root, &self.ws, c)
    }

    /// [`Env::migrate`] giving up on a held lock after a short wait, for the tests of a
    /// busy lock.
    fn migrate_or_busy(
        &self,
        c: &Candidate,
    ) -> Result<gjcfs::engine::store::legacy::MigrationOutcome, LegacyError> {
        LegacyStore::on_disk()
            .with_lock_wait(std::time::Duration::from_millis(100))
            .migrate_candidate(&self.root, &self.ws, c)
    }
}

/// A fixture with its header cwd replaced.
fn with_cwd(fixture: &str, cwd: &str) -> String {
    let text = fixture_text(fixture);
    let (first, rest) = text.split_once('\n').unwrap();
    let mut header = json::parse(first).unwrap();
    header
        .as_object_mut()
        .unwrap()
        .insert("cwd", Value::string(cwd));
    format!("{}\n{rest}", json::to_compact(&header))
}

fn write(path: &Path, text: &str) {
    fs::write(path, text).unwrap();
}

/// Three real-shaped transcripts (v1, v2, v3) of the workspace in its legacy directory.
fn legacy_sessions(env: &Env) -> PathBuf {
    let dir = env.legacy_dir();
    write(&dir.join(V1), &with_cwd("v1-minimal.jsonl", env.ws_text()));
    write(
        &dir.join(V2),
        &with_cwd("v2-already-has-ids.jsonl", env.ws_text()),
    );
    write(
        &dir.join(V3),
        &with_cwd("v3-with-patches.jsonl", env.ws_text()),
    );
    dir
}

fn names(candidates: &[Candidate]) -> Vec<(String, Provenance)> {
    candidates
        .iter()
        .map(|c| {
            (
                c.path.file_name().unwrap().to_string_lossy().into_owned(),
                c.provenance,
            )
        })
        .collect()
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

/// Every directory under `dir` (itself included) is 0700 and every file 0600.
fn assert_owner_only_tree(dir: &Path) {
    assert_eq!(mode(dir), 0o700, "{}", dir.display());
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let meta = fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            assert_owner_only_tree(&path);
        } else {
            assert!(meta.is_file(), "{} is not a regular file", path.display());
            assert_eq!(mode(&path), 0o600, "{}", path.display());
        }
    }
}

/// The entries of the v2 scope besides the binding and the internal directory.
fn scope_payload(env: &Env) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(env.scope_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != INTERNAL_DIR && n != ".gjc-managed-session-scope.v2.json")
        .collect();
    names.sort();
    names
}

fn receipt_value(path: &Path) -> Value {
    let text = fs::read_to_string(path).unwrap();
    assert!(text.ends_with('\n'));
    json::parse(text.trim_end()).unwrap()
}

fn user(text: &str) -> Value {
    json::parse(&format!(
        r#"{{"role":"user","content":"{text}","timestamp":1}}"#
    ))
    .unwrap()
}

#[test]
fn legacy_transcripts_are_owned_candidates_and_others_are_skipped() {
    let env = Env::new();
    let dir = legacy_sessions(&env);
    let other = env.base.join("other");
    fs::create_dir(&other).unwrap();
    write(
        &dir.join("2025-03-01T00-00-00-000Z_foreign.jsonl"),
        &with_cwd("v1-minimal.jsonl", other.to_str().unwrap()),
    );
    let gone = env.base.join("gone");
    fs::create_dir(&gone).unwrap();
    write(
        &dir.join("2025-03-02T00-00-00-000Z_gone.jsonl"),
        &with_cwd("v1-minimal.jsonl", gone.to_str().unwrap()),
    );
    fs::remove_dir(&gone).unwrap();
    write(&dir.join("broken.jsonl"), "{not json\n");
    std::os::unix::fs::symlink(dir.join(V1), dir.join("link.jsonl")).unwrap();
    write(
        &dir.join("notes.txt"),
        &with_cwd("v1-minimal.jsonl", env.ws_text()),
    );

    let listing = env.list();
    assert_eq!(
        names(&listing.owned),
        [
            (V1.to_owned(), Provenance::Legacy),
            (V2.to_owned(), Provenance::Legacy),
            (V3.to_owned(), Provenance::Legacy),
        ]
    );
    let v1 = &listing.owned[0];
    assert_eq!(v1.session_id, "sess-1");
    assert_eq!(v1.cwd, env.ws_text());
    assert_eq!(v1.identity.size, fs::metadata(dir.join(V1)).unwrap().len());
    assert_eq!(listing.owned[2].session_id, "old");
    assert_eq!(
        listing.foreign,
        [dir.join("2025-03-01T00-00-00-000Z_foreign.jsonl")]
    );
    let mut invalid: Vec<(String, &str)> = listing
        .invalid
        .iter()
        .map(|i| {
            (
                i.path.file_name().unwrap().to_string_lossy().into_owned(),
                i.code,
            )
        })
        .collect();
    invalid.sort();
    assert_eq!(
        invalid,
        [
            (
                "2025-03-02T00-00-00-000Z_gone.jsonl".to_owned(),
                "cwd_not_found"
            ),
            ("broken.jsonl".to_owned(), "invalid_header"),
            ("link.jsonl".to_owned(), "unreadable_candidate"),
        ]
    );
    // Listing is read-only: no v2 scope appears.
    assert!(!env.scope_dir().exists());

    // A legacy directory of the workspace that is a symlink fails the listing closed.
    let real = env.base.join("real-legacy");
    fs::rename(&dir, &real).unwrap();
    std::os::unix::fs::symlink(&real, &dir).unwrap();
    let err = list_candidates(&env.root, &env.ws, &env.roots).unwrap_err();
    assert_eq!(err.code(), "unsafe_root", "{err}");
}

#[test]
fn an_absent_root_lists_nothing_and_creates_nothing() {
    let env = Env::new();
    let absent = env.base.join("nowhere/sessions");
    let listing = list_candidates(&absent, &env.ws, &env.roots).unwrap();
    assert!(listing.owned.is_empty() && listing.foreign.is_empty());
    assert!(!env.base.join("nowhere").exists());
}

#[test]
fn home_relative_and_discovered_directories_are_scanned_by_header_identity() {
    let env = Env::new();
    let home = env.base.join("home");
    let proj = home.join("proj");
    fs::create_dir_all(&proj).unwrap();
    let text = with_cwd("v1-minimal.jsonl", proj.to_str().unwrap());
    // The historical home-relative name, and an unrelated `-*` name found by discovery.
    for dir in ["-proj", "---proj--", "-renamed-by-hand"] {
        fs::create_dir(env.root.join(dir)).unwrap();
        write(&env.root.join(dir).join(format!("x{dir}.jsonl")), &text);
    }
    // Directories that are never legacy: another v2 scope, a symlink, a plain name.
    for dir in ["v2-aaaa", "plain"] {
        fs::create_dir(env.root.join(dir)).unwrap();
        write(&env.root.join(dir).join("y.jsonl"), &text);
    }
    let linked = env.base.join("linked");
    fs::create_dir(&linked).unwrap();
    write(&linked.join("z.jsonl"), &text);
    std::os::unix::fs::symlink(&linked, env.root.join("-linked")).unwrap();

    let listing = list_candidates(&env.root, &proj, &env.roots).unwrap();
    let mut found: Vec<String> = listing
        .owned
        .iter()
        .map(|c| c.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    found.sort();
    assert_eq!(
        found,
        [
            "x---proj--.jsonl",
            "x-proj.jsonl",
            "x-renamed-by-hand.jsonl"
        ]
    );
    assert!(listing
        .owned
        .iter()
        .all(|c| c.provenance == Provenance::Legacy));

    // The workspace `ws` sees the same files only as foreign.
    let theirs = env.list();
    assert!(theirs.owned.is_empty());
    assert_eq!(theirs.foreign.len(), 3);
}

#[test]
fn colliding_workspaces_share_a_legacy_directory_but_not_its_sessions() {
    let env = Env::new();
    let a = env.base.join("x/a-b/c");
    let b = env.base.join("x/a/b-c");
    fs::create_dir_all(&a).unwrap();
    fs::create_dir_all(&b).unwrap();
    let shared = env.root.join(encode_absolute(a.to_str().unwrap()));
    assert_eq!(shared, env.root.join(encode_absolute(b.to_str().unwrap())));
    fs::create_dir(&shared).unwrap();
    write(
        &shared.join("a.jsonl"),
        &with_cwd("v1-minimal.jsonl", a.to_str().unwrap()),
    );
    write(
        &shared.join("b.jsonl"),
        &with_cwd("v1-minimal.jsonl", b.to_str().unwrap()),
    );
    for (ws, mine, theirs) in [(&a, "a.jsonl", "b.jsonl"), (&b, "b.jsonl", "a.jsonl")] {
        let listing = list_candidates(&env.root, ws, &env.roots).unwrap();
        assert_eq!(
            names(&listing.owned),
            [(mine.to_owned(), Provenance::Legacy)]
        );
        assert_eq!(listing.foreign, [shared.join(theirs)]);
    }
    assert_ne!(
        scope_dir_name(&resolve_identity(&a).unwrap()),
        scope_dir_name(&resolve_identity(&b).unwrap())
    );
}

#[test]
fn an_alias_spelling_keeps_its_own_legacy_directory_and_the_same_scope() {
    let env = Env::new();
    let alias = env.base.join("alias");
    std::os::unix::fs::symlink(&env.ws, &alias).unwrap();
    let alias_dir = env.root.join(encode_absolute(alias.to_str().unwrap()));
    fs::create_dir(&alias_dir).unwrap();
    // Written by the old agent while it ran in the alias.
    write(
        &alias_dir.join(V1),
        &with_cwd("v1-minimal.jsonl", alias.to_str().unwrap()),
    );
    let listing = list_candidates(&env.root, &alias, &env.roots).unwrap();
    assert_eq!(names(&listing.owned), [(V1.to_owned(), Provenance::Legacy)]);
    let out = migrate_candidate(&env.root, &alias, &listing.owned[0]).unwrap();
    assert_eq!(out.destination, env.scope_dir().join(V1));
}

#[test]
fn migration_copies_into_the_scope_and_the_manager_takes_over() {
    let env = Env::new();
    let dir = legacy_sessions(&env);
    let source = dir.join(V1);
    let source_bytes = fs::read(&source).unwrap();
    let source_mtime = fs::metadata(&source).unwrap().modified().unwrap();
    let legacy = env.owned(V1);

    let path = path_for_writing(&env.root, &env.ws, &legacy, MigrationPolicy::CopyRetain).unwrap();
    let dest = env.scope_dir().join(V1);
    assert_eq!(path, dest);
    assert_eq!(fs::read(&dest).unwrap(), source_bytes);
    assert_eq!(fs::metadata(&dest).unwrap().nlink(), 1);
    assert_eq!(scope_payload(&env), [V1]);

    // The receipt.
    let op = legacy.operation_name();
    let receipt_path = env
        .scope_dir()
        .join(INTERNAL_DIR)
        .join("receipts")
        .join(format!("{op}.json"));
    let receipt = receipt_value(&receipt_path);
    let r = receipt.as_object().unwrap();
    assert_eq!(r.get("schemaVersion").and_then(Value::as_f64), Some(2.0));
    assert_eq!(r.get_str("state"), Some("committed"));
    assert_eq!(r.get_str("policy"), Some("copy-retain"));
    let digest = &scope_dir_name(&resolve_identity(&env.ws).unwrap())[3..];
    assert_eq!(r.get_str("scope"), Some(digest));
    assert_eq!(r.get_str("attemptId").map(str::len), Some(36));
    let src = r.get("source").unwrap().as_object().unwrap();
    assert_eq!(src.get_str("path"), source.to_str());
    assert_eq!(src.get_str("sessionId"), Some("sess-1"));
    assert_eq!(src.get_str("sha256"), Some(legacy.identity.sha256.as_str()));
    let dst = r.get("destination").unwrap().as_object().unwrap();
    assert_eq!(dst.get_str("path"), dest.to_str());
    assert_eq!(dst.get_str("sha256"), Some(legacy.identity.sha256.as_str()));
    assert_eq!(
        r.get("artifactManifest")
            .and_then(Value::as_array)
            .map(<[_]>::len),
        Some(0)
    );
    let lock = env
        .scope_dir()
        .join(INTERNAL_DIR)
        .join("locks")
        .join(format!("{op}.lock"));
    let lock_value = receipt_value(&lock);
    assert_eq!(
        lock_value.as_object().unwrap().get("released"),
        Some(&Value::Bool(true))
    );
    assert_owner_only_tree(&env.scope_dir());

    // The listing coalesces to the v2 copy.
    assert_eq!(
        names(&env.list().owned),
        [
            (V1.to_owned(), Provenance::MigratedV2),
            (V2.to_owned(), Provenance::Legacy),
            (V3.to_owned(), Provenance::Legacy),
        ]
    );

    // The manager opens the copy; the first append rewrites it as v5.
    let m = SessionManager::open(
        &dest,
        env.ws_text(),
        StorageConfig::files(env.base.join("agent/blobs")),
    )
    .unwrap();
    assert!(m.read(|s| s.entries().all(|e| e.id().is_some())));
    m.append_message(user("again")).unwrap();
    m.flush().unwrap();
    let text = fs::read_to_string(&dest).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4);
    assert!(lines[0].contains(r#""version":5"#), "{}", lines[0]);
    assert_eq!(mode(&dest), 0o600);

    // The legacy source is untouched, bytes and mtime.
    assert_eq!(fs::read(&source).unwrap(), source_bytes);
    assert_eq!(
        fs::metadata(&source).unwrap().modified().unwrap(),
        source_mtime
    );

    // Still one session, and migrating the same source again is a no-op.
    assert_eq!(
        names(&env.list().owned)[0],
        (V1.to_owned(), Provenance::MigratedV2)
    );
    let again = env.migrate(&legacy).unwrap();
    assert!(again.already_migrated);
    assert_eq!(again.destination, dest);
    assert_eq!(fs::read_to_string(&dest).unwrap(), text);
    assert_eq!(
        path_for_writing(&env.root, &env.ws, &legacy, MigrationPolicy::CopyRetain).unwrap(),
        dest
    );
}

#[test]
fn every_fixture_version_migrates_byte_for_byte() {
    let env = Env::new();
    let dir = legacy_sessions(&env);
    for c in env.list().owned {
        let out = env.migrate(&c).unwrap();
        assert!(!out.already_migrated);
        assert_eq!(
            fs::read(&out.destination).unwrap(),
            fs::read(&c.path).unwrap()
        );
    }
    assert_eq!(scope_payload(&env), [V1, V2, V3]);
    assert!(env
        .list()
        .owned
        .iter()
        .all(|c| c.provenance == Provenance::MigratedV2));
    assert_eq!(
        fs::read_dir(&dir).unwrap().count(),
        3,
        "nothing added to the legacy dir"
    );
}

#[test]
fn an_occupied_destination_fails_closed() {
    let env = Env::new();
    legacy_sessions(&env);
    let v1 = env.owned(V1);
    let scope = prepare_scope(&env.root, &resolve_identity(&env.ws).unwrap()).unwrap();

    // Other content.
    write(&scope.join(V1), "something else\n");
    let err = env.migrate(&v1).unwrap_err();
    assert_eq!(err.code(), "destination_conflict", "{err}");
    assert_eq!(
        fs::read_to_string(scope.join(V1)).unwrap(),
        "something else\n"
    );
    assert!(fs::read_dir(scope.join(INTERNAL_DIR).join("receipts"))
        .unwrap()
        .next()
        .is_none());

    // A symlink, even to identical bytes.
    fs::remove_file(scope.join(V1)).unwrap();
    let decoy = env.base.join("decoy.jsonl");
    fs::copy(&v1.path, &decoy).unwrap();
    std::os::unix::fs::symlink(&decoy, scope.join(V1)).unwrap();
    let err = env.migrate(&v1).unwrap_err();
    assert_eq!(err.code(), "destination_conflict", "{err}");
    assert!(fs::symlink_metadata(scope.join(V1))
        .unwrap()
        .file_type()
        .is_symlink());

    // An artifacts directory the source does not have.
    fs::remove_file(scope.join(V1)).unwrap();
    fs::create_dir(scope.join(V1.trim_end_matches(".jsonl"))).unwrap();
    let err = env.migrate(&v1).unwrap_err();
    assert_eq!(err.code(), "destination_conflict", "{err}");
    assert!(!scope.join(V1).exists());

    // Exactly the source bytes (an interrupted earlier attempt) is completed.
    fs::remove_dir(scope.join(V1.trim_end_matches(".jsonl"))).unwrap();
    fs::copy(&v1.path, scope.join(V1)).unwrap();
    fs::set_permissions(scope.join(V1), fs::Permissions::from_mode(0o644)).unwrap();
    let err = env.migrate(&v1).unwrap_err();
    assert_eq!(err.code(), "destination_conflict", "not owner-only: {err}");
    fs::set_permissions(scope.join(V1), fs::Permissions::from_mode(0o600)).unwrap();
    let out = env.migrate(&v1).unwrap();
    assert!(!out.already_migrated);
    assert!(out.receipt.exists());
    assert_eq!(
        names(&env.list().owned)[0],
        (V1.to_owned(), Provenance::MigratedV2)
    );
}

#[test]
fn a_source_changed_after_listing_is_refused() {
    let env = Env::new();
    let dir = legacy_sessions(&env);
    let v1 = env.owned(V1);
    let mut text = fs::read_to_string(dir.join(V1)).unwrap();
    text.push_str(r#"{"type":"custom","customType":"x","timestamp":"2025-01-01T00:00:03Z"}"#);
    text.push('\n');
    write(&dir.join(V1), &text);
    let err = env.migrate(&v1).unwrap_err();
    assert_eq!(err.code(), "source_changed", "{err}");
    assert!(!env.scope_dir().join(V1).exists());

    // Same bytes, but a different file put in its place.
    let v2 = env.owned(V2);
    let bytes = fs::read(dir.join(V2)).unwrap();
    fs::remove_file(dir.join(V2)).unwrap();
    fs::write(dir.join(V2), &bytes).unwrap();
    let err = env.migrate(&v2).unwrap_err();
    assert_eq!(err.code(), "source_changed", "{err}");

    // A header that now names another workspace.
    let v3 = env.owned(V3);
    let other = env.base.join("other");
    fs::create_dir(&other).unwrap();
    write(
        &dir.join(V3),
        &with_cwd("v3-with-patches.jsonl", other.to_str().unwrap()),
    );
    assert_eq!(env.migrate(&v3).unwrap_err().code(), "source_changed");
    assert!(scope_payload(&env).is_empty());
}

#[test]
fn artifacts_are_copied_bounded_and_unsafe_ones_refused() {
    let env = Env::new();
    let dir = legacy_sessions(&env);
    let artifacts = dir.join(V1.trim_end_matches(".jsonl"));
    fs::create_dir_all(artifacts.join("nested/deeper")).unwrap();
    write(&artifacts.join("draft.txt"), "draft");
    write(&artifacts.join("nested/deeper/out.log"), "log line\n");
    fs::create_dir(artifacts.join("empty")).unwrap();
    let v1 = env.owned(V1);

    // A symlink anywhere in the tree: refused, nothing published.
    std::os::unix::fs::symlink("/etc/hostname", artifacts.join("nested/link")).unwrap();
    let err = env.migrate(&v1).unwrap_err();
    assert_eq!(err.code(), "unsafe_artifacts", "{err}");
    assert!(err.to_string().contains("nested/link"), "{err}");
    assert!(scope_payload(&env).is_empty(), "{:?}", scope_payload(&env));
    fs::remove_file(artifacts.join("nested/link")).unwrap();

    // A hard-linked file: refused, nothing published.
    let outside = env.base.join("outside.txt");
    write(&outside, "shared");
    fs::hard_link(&outside, artifacts.join("shared.txt")).unwrap();
    let err = env.migrate(&v1).unwrap_err();
    assert_eq!(err.code(), "unsafe_artifacts", "{err}");
    assert!(scope_payload(&env).is_empty());
    fs::remove_file(artifacts.join("shared.txt")).unwrap();

    // The artifacts directory itself a symlink: refused.
    let v2 = env.owned(V2);
    let elsewhere = env.base.join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, dir.join(V2.trim_end_matches(".jsonl"))).unwrap();
    assert_eq!(env.migrate(&v2).unwrap_err().code(), "unsafe_artifacts");
    assert!(scope_payload(&env).is_empty());

    // A clean tree is copied with a manifest; the source tree stays.
    let v1 = env.owned(V1);
    let out = env.migrate(&v1).unwrap();
    let copied = env.scope_dir().join(V1.trim_end_matches(".jsonl"));
    assert_eq!(
        fs::read_to_string(copied.join("draft.txt")).unwrap(),
        "draft"
    );
    assert_eq!(
        fs::read_to_string(copied.join("nested/deeper/out.log")).unwrap(),
        "log line\n"
    );
    assert!(copied.join("empty").is_dir());
    assert_eq!(
        fs::read_to_string(artifacts.join("draft.txt")).unwrap(),
        "draft"
    );
    let receipt = receipt_value(&out.receipt);
    let manifest: Vec<(String, String)> = receipt
        .as_object()
        .unwrap()
        .get("artifactManifest")
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let e = e.as_object().unwrap();
            (
                e.get_str("kind").unwrap().to_owned(),
                e.get_str("path").unwrap().to_owned(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("directory", ""),
        ("file", "draft.txt"),
        ("directory", "empty"),
        ("directory", "nested"),
        ("directory", "nested/deeper"),
        ("file", "nested/deeper/out.log"),
    ]
    .iter()
    .map(|(k, p)| (k.to_string(), p.to_string()))
    .collect();
    assert_eq!(manifest, expected);
    assert_owner_only_tree(&env.scope_dir());
    assert_eq!(scope_payload(&env), [V1.trim_end_matches(".jsonl"), V1]);
}

#[test]
fn too_deep_an_artifact_tree_is_refused() {
    let env = Env::new();
    let dir = legacy_sessions(&env);
    let mut deep = dir.join(V1.trim_end_matches(".jsonl"));
    for _ in 0..34 {
        deep = deep.join("d");
    }
    fs::create_dir_all(&deep).unwrap();
    let err = env.migrate(&env.owned(V1)).unwrap_err();
    assert_eq!(err.code(), "unsafe_artifacts", "{err}");
    assert!(scope_payload(&env).is_empty());
}

#[test]
fn the_disabled_policy_lists_read_only_and_refuses_to_open_for_writing() {
    let env = Env::new();
    legacy_sessions(&env);
    let listing = env.list();
    assert_eq!(listing.owned.len(), 3);
    let err = path_for_writing(
        &env.root,
        &env.ws,
        &listing.owned[0],
        MigrationPolicy::Disabled,
    )
    .unwrap_err();
    assert_eq!(err.code(), "legacy_migration_disabled", "{err}");
    assert!(!env.scope_dir().exists(), "nothing was prepared");

    // A v2 session opens under either policy.
    let v1 = &listing.owned[0];
    env.migrate(v1).unwrap();
    let copy = env.list().owned.remove(0);
    assert_eq!(
        path_for_writing(&env.root, &env.ws, &copy, MigrationPolicy::Disabled).unwrap(),
        copy.path
    );
}

fn plant_lock(env: &Env, c: &Candidate, record: &str) -> PathBuf {
    let scope = prepare_scope(&env.root, &resolve_identity(&env.ws).unwrap()).unwrap();
    let lock = scope
        .join(INTERNAL_DIR)
        .join("locks")
        .join(format!("{}.lock", c.operation_name()));
    write(&lock, record);
    fs::set_permissions(&lock, fs::Permissions::from_mode(0o600)).unwrap();
    lock
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn lock_record(pid: u32, start_id: &str, lease_expires_at: i64) -> String {
    format!(
        "{{\"attemptId\":\"other\",\"pid\":{pid},\"processStartId\":\"{start_id}\",\"createdAt\":0,\"heartbeatAt\":0,\"leaseExpiresAt\":{lease_expires_at}}}\n"
    )
}

#[test]
fn a_live_lock_makes_migration_busy() {
    let env = Env::new();
    legacy_sessions(&env);
    let v1 = env.owned(V1);
    let lock = plant_lock(
        &env,
        &v1,
        &lock_record(
            std::process::id(),
            current_process_start_id(),
            now_ms() + 600_000,
        ),
    );
    let err = env.migrate_or_busy(&v1).unwrap_err();
    assert!(matches!(err, LegacyError::MigrationBusy { .. }), "{err}");
    assert_eq!(err.code(), "migration_busy");
    assert!(scope_payload(&env).is_empty());
    assert!(fs::read_to_string(&lock)
        .unwrap()
        .contains("\"attemptId\":\"other\""));
}

#[test]
fn an_expired_lease_of_a_live_holder_is_not_stolen() {
    let env = Env::new();
    legacy_sessions(&env);
    let v1 = env.owned(V1);
    plant_lock(
        &env,
        &v1,
        &lock_record(std::process::id(), current_process_start_id(), now_ms() - 1),
    );
    assert_eq!(
        env.migrate_or_busy(&v1).unwrap_err().code(),
        "migration_busy"
    );
}

#[test]
fn an_unexpired_lease_is_honoured_even_when_its_holder_is_gone() {
    let env = Env::new();
    legacy_sessions(&env);
    let v1 = env.owned(V1);
    plant_lock(
        &env,
        &v1,
        &lock_record(
            std::process::id(),
            "a-process-that-ended",
            now_ms() + 600_000,
        ),
    );
    assert_eq!(
        env.migrate_or_busy(&v1).unwrap_err().code(),
        "migration_busy"
    );
}

#[test]
fn a_stale_lock_is_taken_over() {
    let env = Env::new();
    legacy_sessions(&env);
    let v1 = env.owned(V1);
    // Our pid, but another process's start id: the holder is gone, and its lease expired.
    let lock = plant_lock(
        &env,
        &v1,
        &lock_record(std::process::id(), "a-process-that-ended", now_ms() - 1),
    );
    let out = env.migrate(&v1).unwrap();
    assert!(!out.already_migrated);
    let record = receipt_value(&lock);
    let record = record.as_object().unwrap();
    assert_ne!(record.get_str("attemptId"), Some("other"));
    assert_eq!(record.get("released"), Some(&Value::Bool(true)));
    assert_eq!(
        record.get("pid").and_then(Value::as_f64),
        Some(std::process::id() as f64)
    );
    assert_eq!(mode(&lock), 0o600);
    let locks: Vec<_> = fs::read_dir(lock.parent().unwrap()).unwrap().collect();
    assert_eq!(locks.len(), 1, "the stale lock is not left behind");
}

#[test]
fn a_released_lock_is_taken_even_when_no_wait_is_left() {
    let env = Env::new();
    legacy_sessions(&env);
    let v1 = env.owned(V1);
    // What a failed attempt leaves: its lock, marked released. Reclaiming it is not waiting
    // for a holder, so a wait that is already over (a slow machine) must not make it busy.
    let released = lock_record(std::process::id(), current_process_start_id(), now_ms())
        .replace("}\n", ",\"released\":true}\n");
    plant_lock(&env, &v1, &released);
    let out = LegacyStore::on_disk()
        .with_lock_wait(std::time::Duration::ZERO)
        .migrate_candidate(&env.root, &env.ws, &v1)
        .unwrap();
    assert!(!out.already_migrated);
}

#[test]
fn concurrent_migrations_of_one_source_serialise() {
    let env = Env::new();
    legacy_sessions(&env);
    let v1 = env.owned(V1);
    let outcomes: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2).map(|_| s.spawn(|| env.migrate(&v1))).collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap().unwrap())
            .collect()
    });
    assert_eq!(outcomes[0].destination, outcomes[1].destination);
    let fresh = outcomes.iter().filter(|o| !o.already_migrated).count();
    assert_eq!(fresh, 1, "{outcomes:?}");
    assert_eq!(scope_payload(&env), [V1]);
}

#[test]
fn tombstones_hide_candidates_and_stay_bound_to_one_version() {
    let env = Env::new();
    let dir = legacy_sessions(&env);
    let v3 = env.owned(V3);
    let tombstone = retire_candidate(&env.root, &env.ws, &v3).unwrap();
    assert_eq!(mode(&tombstone), 0o600);
    let value = receipt_value(&tombstone);
    let t = value.as_object().unwrap();
    assert_eq!(t.get_str("state"), Some("retired"));
    assert_eq!(t.get("schemaVersion").and_then(Value::as_f64), Some(2.0));
    let targets = t.get("targets").unwrap().as_array().unwrap();
    assert_eq!(targets.len(), 1);
    let target = targets[0].as_object().unwrap();
    assert_eq!(target.get_str("path"), v3.path.to_str());
    assert_eq!(target.get_str("sessionId"), Some("old"));
    assert_eq!(target.get_str("provenance"), Some("legacy"));
    assert_eq!(target.get_str("cwd"), Some(env.ws_text()));

    assert_eq!(names(&env.list().owned).len(), 2);
    assert_eq!(
        retire_candidate(&env.root, &env.ws, &v3).unwrap(),
        tombstone,
        "idempotent"
    );
    let err = path_for_writing(&env.root, &env.ws, &v3, MigrationPolicy::CopyRetain).unwrap_err();
    assert_eq!(err.code(), "migration_retired", "{err}");
    assert!(dir.join(V3).exists(), "retiring deletes nothing");

    // A new version at the same path is a new session file: the tombstone does not apply.
    let mut text = fs::read_to_string(dir.join(V3)).unwrap();
    text.push_str(r#"{"type":"header_patch","patch":{"title":"later"}}"#);
    text.push('\n');
    write(&dir.join(V3), &text);
    assert!(names(&env.list().owned).contains(&(V3.to_owned(), Provenance::Legacy)));

    // Retiring a migrated copy retires its legacy source with it.
    env.migrate(&env.owned(V1)).unwrap();
    let copy = env.owned(V1);
    assert_eq!(copy.provenance, Provenance::MigratedV2);
    let tombstone = retire_candidate(&env.root, &env.ws, &copy).unwrap();
    let value = receipt_value(&tombstone);
    let targets = value
        .as_object()
        .unwrap()
        .get("targets")
        .unwrap()
        .as_array()
        .unwrap()
        .to_vec();
    let provenances: Vec<&str> = targets
        .iter()
        .map(|t| t.as_object().unwrap().get_str("provenance").unwrap())
        .collect();
    assert_eq!(provenances, ["v2", "legacy"]);
    assert_eq!(
        names(&env.list().owned),
        [
            (V2.to_owned(), Provenance::Legacy),
            (V3.to_owned(), Provenance::Legacy)
        ]
    );
    assert_owner_only_tree(&env.scope_dir());
}

#[test]
fn a_symlinked_receipt_is_not_trusted() {
    let env = Env::new();
    legacy_sessions(&env);
    let v1 = env.owned(V1);
    let out = env.migrate(&v1).unwrap();
    let kept = env.base.join("receipt-copy.json");
    fs::copy(&out.receipt, &kept).unwrap();
    fs::set_permissions(&kept, fs::Permissions::from_mode(0o600)).unwrap();
    fs::remove_file(&out.receipt).unwrap();
    std::os::unix::fs::symlink(&kept, &out.receipt).unwrap();
    let listing = env.list();
    assert_eq!(
        names(&listing.owned),
        [
            (V1.to_owned(), Provenance::V2),
            (V1.to_owned(), Provenance::Legacy),
            (V2.to_owned(), Provenance::Legacy),
            (V3.to_owned(), Provenance::Legacy),
        ]
    );
    // Migrating again finds the same bytes at the destination, completes, and replaces the
    // symlink with a real receipt.
    let again = env.migrate(&v1).unwrap();
    assert!(!again.already_migrated);
    assert!(fs::symlink_metadata(&out.receipt).unwrap().is_file());
    assert_eq!(
        names(&env.list().owned)[0],
        (V1.to_owned(), Provenance::MigratedV2)
    );
}

#[test]
fn candidates_from_elsewhere_are_refused() {
    let env = Env::new();
    legacy_sessions(&env);
    let mut v1 = env.owned(V1);
    let stray = env.base.join("stray.jsonl");
    fs::copy(&v1.path, &stray).unwrap();
    v1.path = stray;
    assert_eq!(env.migrate(&v1).unwrap_err().code(), "invalid_candidate");
    let mut v2 = env.owned(V2);
    v2.provenance = Provenance::V2;
    assert_eq!(
        path_for_writing(&env.root, &env.ws, &v2, MigrationPolicy::CopyRetain)
            .unwrap_err()
            .code(),
        "invalid_candidate"
    );
}
