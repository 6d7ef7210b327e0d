//! Drives the manager through appends, a batch, a rename and rewrites while failing each
//! storage operation in turn, and checks that nothing acknowledged is lost, no torn partial
//! line is left and no file is ever half-replaced — for a session in an explicit directory
//! and for a managed transcript. Then the same for a new managed session, from the
//! preparation of its scope (directories created or re-secured, the binding published
//! without replacing) to its first appends: the binding is never half-written, a retry
//! prepares the scope, and what was acknowledged is durable. Then a copy-retain migration of
//! a legacy session with artifacts: the legacy files stay byte-identical, the copy is whole
//! with its receipt or not there at all, and a retry completes it. Then the in-memory backend's
//! crash model: a managed append is durable when it is acknowledged (file fsync, then
//! directory fsync), and so is a managed full rewrite.

use std::path::{Path, PathBuf};
use std::time::Duration;

use gjcfs::engine::json::{self, Object, Value};
use gjcfs::engine::manager::{SessionError, SessionManager};
use gjcfs::engine::read::replay::parse_session_entries;
use gjcfs::engine::storage::{Fault, FaultKind, MemoryStorage, SessionStorage};
use gjcfs::engine::store::legacy::{
    artifacts_dir, Candidate, LegacyRoots, LegacyStore, Provenance,
};
use gjcfs::engine::store::scope::{
    binding_bytes, scope_dir_name, verify_owner_only, verify_transcript_scope, Identity,
    BINDING_FILE, INTERNAL_DIR,
};

use crate::common::memory::{config, managed_transcript, SESSIONS_ROOT};

/// How each operation is made to fail in turn.
const KINDS: [FaultKind; 3] = [
    FaultKind::Errno(libc::EIO),
    FaultKind::Errno(libc::ENOSPC),
    FaultKind::ShortWrite,
];

fn message(role: &str, text: &str) -> Value {
    let extra = if role == "assistant" {
        r#","provider":"p","model":"m""#
    } else {
        ""
    };
    json::parse(&format!(
        r#"{{"role":"{role}","content":"{text}","timestamp":1{extra}}}"#
    ))
    .unwrap()
}

fn object(text: &str) -> Object {
    json::parse(text).unwrap().as_object().unwrap().clone()
}

/// The scenario; pushes the id of every acknowledged append.
fn scenario(m: &SessionManager, acked: &mut Vec<String>) -> Result<(), SessionError> {
    acked.push(m.append_message(message("user", "q1"))?);
    acked.push(m.append_message(message("assistant", "a1"))?);
    acked.push(m.append_message(message("user", "q2"))?);
    m.set_session_name("a title", true)?;
    acked.push(m.append_message(message("assistant", "a2"))?);
    acked.extend(m.append_external_all(vec![
        object(r#"{"role":"user","content":"batch 1"}"#),
        object(r#"{"type":"custom","customType":"batch"}"#),
    ])?);
    m.rewrite_entries()?;
    acked.push(m.append_custom_entry("ext", Some(Value::string("data")))?);
    m.flush()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// A new session in an explicit directory (its first write is a full rewrite).
    Explicit,
    /// An existing managed transcript (appends fsynced with their directory).
    Managed,
}

/// A fresh storage and manager; the entries already on disk.
fn fresh(mode: Mode) -> (MemoryStorage, SessionManager, Vec<String>) {
    let storage = MemoryStorage::new();
    match mode {
        Mode::Explicit => {
            storage.ensure_dir(Path::new("/s")).unwrap();
            let manager = SessionManager::create("/w", "/s", config(&storage));
            (storage, manager, Vec::new())
        }
        Mode::Managed => {
            let path = managed_transcript(&storage);
            let manager = SessionManager::open_managed(&path, config(&storage)).unwrap();
            (storage, manager, vec!["q0".into(), "a0".into()])
        }
    }
}

/// The entry ids in the file, after checking that every line is complete and valid JSON
/// (no torn partial, never half-replaced).
fn ids_on_disk(storage: &MemoryStorage, file: &Path, context: &str) -> Option<Vec<String>> {
    let text = String::from_utf8(storage.file(file)?).unwrap();
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "{context}: a torn partial is left: {:?}",
        &text[text.rfind('\n').map_or(0, |i| i + 1)..]
    );
    for line in text.lines() {
        json::parse(line).unwrap_or_else(|e| panic!("{context}: {e} in {line}"));
    }
    let records = parse_session_entries(&text).unwrap().records;
    assert!(records[0].is_header(), "{context}");
    Some(
        records
            .iter()
            .skip(1)
            .filter_map(|r| r.id().map(str::to_owned))
            .collect(),
    )
}

fn sweep(mode: Mode) {
    let (storage, manager, _) = fresh(mode);
    let base = storage.op_count();
    scenario(&manager, &mut Vec::new()).unwrap();
    let total = storage.op_count() - base;
    assert!(
        total > 10,
        "the scenario exercises storage ({total} operations)"
    );

    let mut failures_seen = 0;
    for k in 0..total {
        for kind in KINDS {
            let (storage, manager, before) = fresh(mode);
            let file = manager.session_file().unwrap();
            storage.set_fault(Some(Fault {
                at: storage.op_count() + k,
                kind,
            }));
            let mut acked = Vec::new();
            let outcome = scenario(&manager, &mut acked);
            let context = format!("{mode:?}: fault {kind:?} at operation {k}");
            match &outcome {
                Ok(()) => {}
                // A rewrite refused because the manager no longer knows the file on disk is
                // the one it wrote (it could not read its identity back): nothing was
                // written, nothing is latched.
                Err(SessionError::ChangedOnDisk { .. }) => failures_seen += 1,
                Err(_) => {
                    failures_seen += 1;
                    // The error is latched: nothing more is accepted.
                    assert!(manager.append_custom_entry("x", None).is_err(), "{context}");
                }
            }
            // Memory holds exactly the acknowledged entries.
            let expected: Vec<String> = before.iter().chain(&acked).cloned().collect();
            let in_memory: Vec<String> =
                manager.read(|s| s.entries().map(|e| e.id().unwrap().to_owned()).collect());
            assert_eq!(in_memory, expected, "{context}");
            storage.set_fault(None);
            let Some(on_disk) = ids_on_disk(&storage, &file, &context) else {
                // Only the deferred start may be missing from disk.
                assert!(
                    acked.len() <= 1,
                    "{context}: {} acknowledged, no file",
                    acked.len()
                );
                continue;
            };
            // Everything acknowledged once the session reached disk is there, in order, and
            // nothing that was not.
            assert_eq!(on_disk, expected, "{context}");
            if mode == Mode::Managed {
                // Managed appends are durable when acknowledged.
                drop(manager);
                storage.crash();
                let durable = ids_on_disk(&storage, &file, &context);
                assert_eq!(
                    durable.as_ref(),
                    Some(&expected),
                    "{context}: after a crash"
                );
            }
            // The file can be reopened (strictly, when managed) and appended to.
            let reopened = match mode {
                Mode::Explicit => SessionManager::open(&file, "/w", config(&storage)),
                Mode::Managed => SessionManager::open_managed(&file, config(&storage)),
            }
            .unwrap_or_else(|e| panic!("{context}: reopen: {e}"));
            let id = reopened.append_custom_entry("after", None).unwrap();
            reopened.close().unwrap();
            let again = ids_on_disk(&storage, &file, &context).unwrap();
            assert_eq!(again.last(), Some(&id), "{context}");
        }
    }
    assert!(
        failures_seen as u64 >= total,
        "every fault point was hit at least once"
    );
}

#[test]
fn every_storage_failure_leaves_a_loadable_file_with_everything_acknowledged() {
    sweep(Mode::Explicit);
}

#[test]
fn every_storage_failure_of_a_managed_session_keeps_everything_acknowledged_durable() {
    sweep(Mode::Managed);
}

/// A storage holding the workspace `/w` and a sessions root whose mode lets the group in
/// (`0750`), which preparing a scope re-secures.
fn workspace() -> MemoryStorage {
    let storage = MemoryStorage::new();
    storage.ensure_dir(Path::new("/w")).unwrap();
    storage.ensure_dir(Path::new(SESSIONS_ROOT)).unwrap();
    storage.set_mode(Path::new(SESSIONS_ROOT), 0o750).unwrap();
    storage
}

fn workspace_identity() -> Identity {
    Identity {
        platform: "posix",
        canonical_path: "/w".into(),
    }
}

/// A new managed session: its scope prepared, then a question, its answer (the first
/// persistence) and a follow-up. Pushes the id of every acknowledged append.
fn new_managed_scenario(
    storage: &MemoryStorage,
    acked: &mut Vec<String>,
    file: &mut Option<PathBuf>,
) -> Result<(), SessionError> {
    let m = SessionManager::create_managed(Path::new("/w"), Path::new(SESSIONS_ROOT), {
        config(storage)
    })?;
    acked.push(m.append_message(message("user", "q1"))?);
    acked.push(m.append_message(message("assistant", "a1"))?);
    *file = m.session_file();
    acked.push(m.append_message(message("user", "q2"))?);
    m.close()
}

#[test]
fn every_storage_failure_while_preparing_a_scope_and_starting_a_managed_session_is_safe() {
    let scope = Path::new(SESSIONS_ROOT).join(scope_dir_name(&workspace_identity()));
    let binding = scope.join(BINDING_FILE);
    let clean = workspace();
    let base = clean.op_count();
    new_managed_scenario(&clean, &mut Vec::new(), &mut None).unwrap();
    let total = clean.op_count() - base;
    let log = clean.op_log();
    for op in [
        "create_dir",
        "set_mode",
        "hard_link",
        "sync_dir",
        "write",
        "fsync",
    ] {
        assert!(log.contains(&op), "the scenario runs {op}: {log:?}");
    }

    let mut failures_seen = 0;
    for k in 0..total {
        for kind in KINDS {
            let storage = workspace();
            storage.set_fault(Some(Fault {
                at: storage.op_count() + k,
                kind,
            }));
            let (mut acked, mut file) = (Vec::new(), None);
            let outcome = new_managed_scenario(&storage, &mut acked, &mut file);
            let context = format!("fault {kind:?} at operation {k} ({outcome:?})");
            failures_seen += usize::from(outcome.is_err());
            storage.set_fault(None);

            // The binding is there whole or not at all: never half-written or replaced.
            if let Some(bytes) = storage.file(&binding) {
                assert_eq!(bytes, binding_bytes(&workspace_identity()), "{context}");
            }
            // What was acknowledged after the first persistence is on disk, and durable.
            if let Some(file) = &file {
                let on_disk = ids_on_disk(&storage, file, &context).unwrap();
                assert_eq!(on_disk, acked, "{context}");
                storage.crash();
                let durable = ids_on_disk(&storage, file, &context);
                assert_eq!(durable.as_ref(), Some(&acked), "{context}: after a crash");
            } else {
                assert!(acked.len() <= 1, "{context}: {} acknowledged", acked.len());
            }
            // A retry prepares the scope: owner-only, bound, and its sessions verify.
            let (mut again, mut file) = (Vec::new(), None);
            new_managed_scenario(&storage, &mut again, &mut file)
                .unwrap_or_else(|e| panic!("{context}: retry: {e}"));
            for dir in [Path::new(SESSIONS_ROOT), &scope, &scope.join(INTERNAL_DIR)] {
                verify_owner_only(&storage, dir, true).unwrap_or_else(|e| panic!("{context}: {e}"));
            }
            let file = file.unwrap();
            verify_transcript_scope(&storage, &file).unwrap_or_else(|e| panic!("{context}: {e}"));
            assert_eq!(ids_on_disk(&storage, &file, &context), Some(again));
        }
    }
    assert!(
        failures_seen as u64 >= total,
        "every fault point was hit at least once"
    );
}

/// The positions of `wanted`, in order, as a subsequence of `log`.
fn in_order(log: &[&str], wanted: &[&str]) -> bool {
    let mut rest = log.iter();
    wanted.iter().all(|w| rest.any(|op| op == w))
}

#[test]
fn a_managed_append_writes_then_fsyncs_the_file_then_its_directory_and_survives_a_crash() {
    let storage = MemoryStorage::new();
    let path = managed_transcript(&storage);
    for i in 0..3 {
        let m = SessionManager::open_managed(&path, config(&storage)).unwrap();
        let from = storage.op_log().len();
        let id = m
            .append_message(message("user", &format!("durable {i}")))
            .unwrap();
        let log = storage.op_log();
        assert!(
            in_order(
                &log[from..],
                &["lstat", "has_acl", "end", "write", "fsync", "sync_dir"]
            ),
            "{:?}",
            &log[from..]
        );
        // Power is lost the moment the append returns.
        drop(m);
        storage.crash();
        let ids = ids_on_disk(&storage, &path, "after a crash").unwrap();
        assert_eq!(ids.last(), Some(&id), "append {i}");
        assert_eq!(ids.len(), 3 + i);
    }
}

#[test]
fn a_managed_full_rewrite_survives_a_crash_and_an_unsynced_one_does_not_replace_the_file() {
    let storage = MemoryStorage::new();
    let path = managed_transcript(&storage);
    let m = SessionManager::open_managed(&path, config(&storage)).unwrap();
    m.set_session_name("before the rewrite", true).unwrap();
    m.rewrite_entries().unwrap();
    let rewritten = storage.file(&path).unwrap();
    assert!(!String::from_utf8_lossy(&rewritten).contains("header_patch"));
    drop(m);
    storage.crash();
    assert_eq!(storage.file(&path).unwrap(), rewritten);
    assert_eq!(storage.paths().len(), 2, "the binding and the transcript");

    // The same rewrite in an explicit directory does not sync the directory: after a
    // crash the old file (durable) is back, whole.
    let dir = Path::new("/explicit");
    storage.ensure_dir(dir).unwrap();
    let explicit = dir.join("e.jsonl");
    storage.put_file(&explicit, &rewritten);
    let m = SessionManager::open(&explicit, "/w", config(&storage)).unwrap();
    m.set_session_name("renamed", true).unwrap();
    m.rewrite_entries().unwrap();
    drop(m);
    storage.crash();
    assert_eq!(storage.file(&explicit).unwrap(), rewritten);
}

/// The legacy transcript of the migration sweep, in `/w`'s legacy directory.
const LEGACY_TRANSCRIPT: &str = "/agent/sessions/--w--/2025-01-01T00-00-00-000Z_s.jsonl";

/// [`workspace`] with a legacy session of `/w`: its transcript and an artifacts directory
/// holding a file and a subdirectory with another.
fn legacy_workspace() -> MemoryStorage {
    let storage = workspace();
    let transcript = Path::new(LEGACY_TRANSCRIPT);
    let artifacts = artifacts_dir(transcript);
    storage.ensure_dir(&artifacts.join("sub")).unwrap();
    let text = crate::common::SessionText::new()
        .message("q0", None, "user", "q")
        .message("a0", Some("q0"), "assistant", "a")
        .text()
        .replacen("\"cwd\":\"/work\"", "\"cwd\":\"/w\"", 1);
    assert!(
        text.contains("\"cwd\":\"/w\""),
        "the header names /w: {text}"
    );
    storage.put_file(transcript, text.as_bytes());
    storage.put_file(&artifacts.join("tool-1.txt"), b"first artifact\n");
    storage.put_file(&artifacts.join("sub/tool-2.bin"), &[0, 1, 2, 3, 255]);
    storage
}

/// Every file below `dir` with its bytes and modification time.
fn tree(storage: &MemoryStorage, dir: &Path) -> Vec<(PathBuf, Vec<u8>, i128)> {
    storage
        .paths()
        .into_iter()
        .filter(|p| p.starts_with(dir))
        .map(|p| {
            let mtime = storage.lstat(&p).unwrap().mtime_ns;
            (p.clone(), storage.file(&p).unwrap(), mtime)
        })
        .collect()
}

/// The files below `dir` by their path inside it, with their bytes.
fn relative_files(storage: &MemoryStorage, dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    tree(storage, dir)
        .into_iter()
        .map(|(p, bytes, _)| (p.strip_prefix(dir).unwrap().to_owned(), bytes))
        .collect()
}

/// The store the sweep migrates through; a held lock is given up on at once.
fn legacy_store(storage: &MemoryStorage) -> LegacyStore<'_> {
    LegacyStore::new(storage).with_lock_wait(Duration::from_millis(20))
}

/// The legacy candidate of `/w`, as listed.
fn legacy_candidate(storage: &MemoryStorage) -> Candidate {
    let listing = legacy_store(storage)
        .list_candidates(
            Path::new(SESSIONS_ROOT),
            Path::new("/w"),
            &LegacyRoots::default(),
        )
        .unwrap();
    let mut legacy = listing
        .owned
        .into_iter()
        .filter(|c| c.provenance == Provenance::Legacy);
    let candidate = legacy.next().expect("the legacy session is listed");
    assert!(legacy.next().is_none());
    candidate
}

/// Checks that the migration of `source` is either complete — the transcript and its
/// artifacts copied whole, and a committed receipt naming the copy — or absent, with nothing
/// of it left in the scope (no half-published copy, no staging directory, no temp file).
/// Returns whether it is complete.
fn complete_or_absent(storage: &MemoryStorage, source: &Candidate, context: &str) -> bool {
    let scope = Path::new(SESSIONS_ROOT).join(scope_dir_name(&workspace_identity()));
    let dest = scope.join(source.path.file_name().unwrap());
    let dest_artifacts = artifacts_dir(&dest);
    let receipt = scope
        .join(INTERNAL_DIR)
        .join("receipts")
        .join(format!("{}.json", source.operation_name()));
    if storage.exists(&scope) {
        let leftovers: Vec<_> = storage
            .list_entries(&scope)
            .unwrap()
            .into_iter()
            .map(|(p, _)| p)
            .filter(|p| {
                let name = p.file_name().unwrap().to_string_lossy();
                name.starts_with(".gjc-migrate-") || name.ends_with(".migrate.tmp")
            })
            .collect();
        assert!(leftovers.is_empty(), "{context}: left behind {leftovers:?}");
    }
    let Some(bytes) = storage.file(&receipt) else {
        assert!(
            storage.file(&dest).is_none(),
            "{context}: a copy without a receipt"
        );
        assert!(
            !storage.exists(&dest_artifacts),
            "{context}: artifacts without a receipt"
        );
        return false;
    };
    let value = json::parse(std::str::from_utf8(&bytes).unwrap()).unwrap();
    let o = value.as_object().unwrap();
    assert_eq!(o.get_str("state"), Some("committed"), "{context}");
    let named = o.get("destination").and_then(Value::as_object).unwrap();
    assert_eq!(named.get_str("path"), dest.to_str(), "{context}");
    assert_eq!(
        storage.file(&dest).as_deref(),
        storage.file(&source.path).as_deref(),
        "{context}: the copy is the source's bytes"
    );
    verify_owner_only(storage, &dest, false).unwrap_or_else(|e| panic!("{context}: {e}"));
    assert_eq!(
        relative_files(storage, &dest_artifacts),
        relative_files(storage, &artifacts_dir(&source.path)),
        "{context}: the artifacts are copied whole"
    );
    true
}

/// Runs a copy-retain migration of a legacy session (transcript and artifacts) failing each
/// of its storage operations in turn with each fault kind.
#[test]
fn every_storage_failure_of_a_legacy_migration_leaves_the_source_and_a_whole_copy_or_none() {
    let clean = legacy_workspace();
    let source = legacy_candidate(&clean);
    let base = clean.op_count();
    let store = legacy_store(&clean);
    store
        .migrate_candidate(Path::new(SESSIONS_ROOT), Path::new("/w"), &source)
        .unwrap();
    let total = clean.op_count() - base;
    let log = clean.op_log()[base as usize..].to_vec();
    for op in [
        "create_dir",
        "open_read_at",
        "list_entries",
        "rename_no_replace",
        "hard_link",
        "rename",
        "write",
        "write_at",
        "fsync",
        "sync_dir",
    ] {
        assert!(log.contains(&op), "the migration runs {op}: {log:?}");
    }
    assert!(complete_or_absent(&clean, &source, "clean run"));

    let legacy_dir = source.path.parent().unwrap().to_owned();
    let mut tolerated: Vec<(u64, &str)> = Vec::new();
    for k in 0..total {
        for kind in KINDS {
            let storage = legacy_workspace();
            let source = legacy_candidate(&storage);
            let original = tree(&storage, &legacy_dir);
            storage.set_fault(Some(Fault {
                at: storage.op_count() + k,
                kind,
            }));
            let outcome = legacy_store(&storage).migrate_candidate(
                Path::new(SESSIONS_ROOT),
                Path::new("/w"),
                &source,
            );
            storage.set_fault(None);
            let op = log[k as usize];
            let context = format!("fault {kind:?} at operation {k} ({op}): {outcome:?}");
            if outcome.is_ok() && tolerated.last() != Some(&(k, op)) {
                tolerated.push((k, op));
            }

            // The legacy files are never written: byte-identical, mtimes included.
            assert_eq!(tree(&storage, &legacy_dir), original, "{context}");
            let complete = complete_or_absent(&storage, &source, &context);
            assert!(outcome.is_err() || complete, "{context}");

            // A retry completes the migration, durably, and the listing shows the copy.
            let retried = legacy_store(&storage)
                .migrate_candidate(Path::new(SESSIONS_ROOT), Path::new("/w"), &source)
                .unwrap_or_else(|e| panic!("{context}: retry: {e}"));
            assert!(complete_or_absent(&storage, &source, &context));
            assert_eq!(tree(&storage, &legacy_dir), original, "{context}");
            storage.crash();
            assert!(
                complete_or_absent(&storage, &source, &context),
                "{context}: after a crash"
            );
            let listing = legacy_store(&storage)
                .list_candidates(
                    Path::new(SESSIONS_ROOT),
                    Path::new("/w"),
                    &LegacyRoots::default(),
                )
                .unwrap();
            let listed: Vec<_> = listing
                .owned
                .iter()
                .map(|c| (c.path.clone(), c.provenance))
                .collect();
            assert_eq!(
                listed,
                [(retried.destination.clone(), Provenance::MigratedV2)],
                "{context}"
            );
        }
    }
    // Every fault fails the migration but those of three reads that find nothing to do: the
    // binding's stale-link check, the listing of the scope's tombstones and the trust check
    // of the receipt (there is none yet), each of which reads as "nothing there".
    let survived: Vec<&str> = tolerated.iter().map(|(_, op)| *op).collect();
    assert_eq!(survived, ["lstat", "list_files", "lstat"], "{tolerated:?}");
}
