//! Retiring a candidate with a tombstone.

use std::path::{Path, PathBuf};

use crate::json::Value;
use crate::store::scope::{prepare_scope_in, INTERNAL_DIR};

use super::listing::revalidate;
use super::lock::MigrationLock;
use super::migrate::check_legacy_location;
use super::records::{
    object, path_text, string, trusted_record, write_record, RecordedFile, ScopeRecords,
};
use super::{
    absolute, invalid_candidate, why, Candidate, LegacyError, LegacyStore, Provenance, Workspace,
    LOCKS, TOMBSTONES,
};

pub(super) fn target_json(file: &RecordedFile, provenance: &str) -> Value {
    let id = &file.identity;
    object(vec![
        ("path", string(file.path.clone())),
        ("sessionId", string(file.session_id.clone())),
        ("cwd", string(file.cwd.clone())),
        ("provenance", string(provenance)),
        (
            "identity",
            object(vec![
                ("canonicalPath", string(file.path.clone())),
                ("dev", string(id.dev.to_string())),
                ("ino", string(id.ino.to_string())),
                ("size", Value::number(id.size as f64)),
                ("mtimeMs", Value::number(id.mtime_ns as f64 / 1e6)),
                ("mtimeNs", string(id.mtime_ns.to_string())),
                ("sha256", string(id.sha256.clone())),
            ]),
        ),
    ])
}

/// Retires `candidate` (this exact version) by publishing `tombstones/<op>.json`; a retired
/// candidate is hidden from listings and cannot be opened for writing. Retiring a migrated
/// copy retires the legacy sources whose receipts name it too, so the session does not
/// reappear from its legacy original. Nothing is deleted. Retiring twice is a no-op.
/// Returns the tombstone's path.
pub fn retire_candidate(
    sessions_root: &Path,
    cwd: &Path,
    candidate: &Candidate,
) -> Result<PathBuf, LegacyError> {
    LegacyStore::on_disk().retire_candidate(sessions_root, cwd, candidate)
}

impl LegacyStore<'_> {
    /// [`retire_candidate`] in this store.
    pub fn retire_candidate(
        &self,
        sessions_root: &Path,
        cwd: &Path,
        candidate: &Candidate,
    ) -> Result<PathBuf, LegacyError> {
        retire(self, sessions_root, cwd, candidate)
    }
}

fn retire(
    store: &LegacyStore<'_>,
    sessions_root: &Path,
    cwd: &Path,
    candidate: &Candidate,
) -> Result<PathBuf, LegacyError> {
    let storage = store.storage;
    let ws = Workspace::resolve_in(storage, cwd)?;
    let root = absolute(sessions_root)?;
    let scope_dir = ws.scope_dir(&root);
    if candidate.provenance == Provenance::Legacy {
        check_legacy_location(&root, &candidate.path)?;
    } else if candidate.path.parent() != Some(scope_dir.as_path()) {
        return Err(why(
            &candidate.path,
            invalid_candidate,
            format!("not a transcript of the v2 scope {}", scope_dir.display()),
        ));
    }
    let scope_dir = prepare_scope_in(storage, &root, &ws.identity)?;
    let internal = scope_dir.join(INTERNAL_DIR);
    let op = candidate.operation_name();
    let tombstone = internal.join(TOMBSTONES).join(format!("{op}.json"));
    let mut lock = MigrationLock::acquire(
        storage,
        &internal.join(LOCKS),
        &op,
        &candidate.path,
        store.lock_wait,
    )?;
    let records = ScopeRecords::load(storage, &scope_dir, &ws.digest());
    let this = RecordedFile {
        path: path_text(&candidate.path),
        session_id: candidate.session_id.clone(),
        cwd: candidate.cwd.clone(),
        identity: candidate.identity.clone(),
    };
    let already = trusted_record(storage, &tombstone)
        .map(|v| records.tombstone_targets(&v))
        .is_some_and(|targets| targets.iter().any(|t| t.is(candidate)));
    if already {
        lock.release()?;
        return Ok(tombstone);
    }
    revalidate(storage, candidate, &ws.identity)?;
    let mut targets = vec![target_json(
        &this,
        if candidate.provenance == Provenance::Legacy {
            "legacy"
        } else {
            "v2"
        },
    )];
    if candidate.provenance != Provenance::Legacy {
        for source in records.sources_copied_to(&candidate.path, &candidate.session_id) {
            targets.push(target_json(&source, "legacy"));
        }
    }
    let value = object(vec![
        ("schemaVersion", Value::number(2.0)),
        ("state", string("retired")),
        ("scope", string(ws.digest())),
        ("targets", Value::Array(targets)),
    ]);
    lock.assert_owned()?;
    write_record(storage, &tombstone, &value)?;
    lock.release()?;
    Ok(tombstone)
}
