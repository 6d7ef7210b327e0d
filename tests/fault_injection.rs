//! Drives the manager through appends, a rename and rewrites while failing each storage
//! operation in turn, and checks that nothing acknowledged is lost and no file is ever
//! half-replaced.

mod common;

use std::path::Path;
use std::sync::Arc;

use gjcfs::engine::blob::BlobStore;
use gjcfs::engine::json::{self, Value};
use gjcfs::engine::manager::{SessionError, SessionManager, StorageConfig};
use gjcfs::engine::replay::parse_session_entries;
use gjcfs::engine::storage::{Fault, FaultKind, MemoryStorage, SessionStorage};

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

/// The scenario; pushes the id of every acknowledged append.
fn scenario(m: &SessionManager, acked: &mut Vec<String>) -> Result<(), SessionError> {
    acked.push(m.append_message(message("user", "q1"))?);
    acked.push(m.append_message(message("assistant", "a1"))?);
    acked.push(m.append_message(message("user", "q2"))?);
    m.set_session_name("a title", true)?;
    acked.push(m.append_message(message("assistant", "a2"))?);
    m.rewrite_entries()?;
    acked.push(m.append_custom_entry("ext", Some(Value::string("data")))?);
    m.flush()
}

fn fresh() -> (MemoryStorage, SessionManager) {
    let storage = MemoryStorage::new();
    storage.ensure_dir(Path::new("/s")).unwrap();
    let shared: Arc<dyn SessionStorage> = Arc::new(storage.clone());
    let config = StorageConfig {
        blobs: BlobStore::new("/blobs", shared.clone()),
        storage: shared,
    };
    let manager = SessionManager::create("/w", "/s", config);
    (storage, manager)
}

#[test]
fn every_storage_failure_leaves_a_loadable_file_with_everything_acknowledged() {
    let (storage, manager) = fresh();
    let base = storage.op_count();
    scenario(&manager, &mut Vec::new()).unwrap();
    let total = storage.op_count() - base;
    assert!(
        total > 10,
        "the scenario exercises storage ({total} operations)"
    );

    let kinds = [
        FaultKind::Errno(libc::EIO),
        FaultKind::Errno(libc::ENOSPC),
        FaultKind::ShortWrite,
    ];
    let mut failures_seen = 0;
    for k in 0..total {
        for kind in kinds {
            let (storage, manager) = fresh();
            let file = manager.session_file().unwrap();
            storage.set_fault(Some(Fault {
                at: storage.op_count() + k,
                kind,
            }));
            let mut acked = Vec::new();
            let outcome = scenario(&manager, &mut acked);
            let context = format!("fault {kind:?} at operation {k}");
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
            let in_memory: Vec<String> =
                manager.read(|s| s.entries().map(|e| e.id().unwrap().to_owned()).collect());
            assert_eq!(in_memory, acked, "{context}");
            storage.set_fault(None);
            let Some(bytes) = storage.file(&file) else {
                // Only the deferred start may be missing from disk.
                assert!(
                    acked.len() <= 1,
                    "{context}: {} acknowledged, no file",
                    acked.len()
                );
                continue;
            };
            let text = String::from_utf8(bytes).unwrap();
            // Never half-replaced: every complete line is valid JSON, only a torn tail may not be.
            let complete: Vec<&str> = text
                .split_inclusive('\n')
                .filter(|l| l.ends_with('\n'))
                .collect();
            for line in &complete {
                json::parse(line.trim_end()).unwrap_or_else(|e| panic!("{context}: {e} in {line}"));
            }
            let records = parse_session_entries(&text).unwrap().records;
            assert!(records[0].is_header(), "{context}");
            let on_disk: Vec<&str> = records.iter().skip(1).filter_map(|r| r.id()).collect();
            // Everything acknowledged once the session reached disk is there, in order.
            let expected: Vec<&str> = acked.iter().map(String::as_str).collect();
            assert_eq!(on_disk, expected, "{context}");
            // The file can be reopened and appended to.
            let reopened = SessionManager::open(
                &file,
                "/w",
                StorageConfig {
                    blobs: BlobStore::new("/blobs", Arc::new(storage.clone())),
                    storage: Arc::new(storage.clone()),
                },
            )
            .unwrap_or_else(|e| panic!("{context}: reopen: {e}"));
            let id = reopened.append_custom_entry("after", None).unwrap();
            reopened.close().unwrap();
            let again = String::from_utf8(storage.file(&file).unwrap()).unwrap();
            let last = parse_session_entries(&again)
                .unwrap()
                .records
                .pop()
                .unwrap();
            assert_eq!(last.id(), Some(id.as_str()), "{context}");
        }
    }
    assert!(
        failures_seen as u64 >= total,
        "every fault point was hit at least once"
    );
}
