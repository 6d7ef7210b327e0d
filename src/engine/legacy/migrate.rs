//! Copy-retain migration of a legacy candidate into the v2 scope, and the path to open a
//! candidate for writing with.

use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::ids::snowflake;
use crate::json::Value;
use crate::scope::{prepare_scope, verify_owner_only, INTERNAL_DIR};
use crate::storage::FileStorage;

use super::artifacts::{
    copy_artifacts, manifest, manifest_json, unpublish_dir, walk_tree, TreeEntry,
};
use super::capture::{capture, create_owner_only, sync_dir};
use super::listing::{inspect, revalidate, verify_existing_scope, Inspection};
use super::lock::MigrationLock;
use super::records::{identity_json, object, path_text, string, write_record, ScopeRecords};
use super::{
    absolute, artifacts_dir, conflict, invalid_candidate, io_err, why, Candidate, FileIdentity,
    LegacyError, MigrationPolicy, Provenance, Workspace, LOCKS, RECEIPTS,
};

/// What [`migrate_candidate`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationOutcome {
    /// The v2 copy, to be opened for writing.
    pub destination: PathBuf,
    /// The committed receipt.
    pub receipt: PathBuf,
    /// True when a committed receipt already named a live copy and nothing was done.
    pub already_migrated: bool,
}

/// Checks that `path` is a `*.jsonl` directly in a legacy directory of `root`.
pub(super) fn check_legacy_location(root: &Path, path: &Path) -> Result<(), LegacyError> {
    let dir_name = path
        .parent()
        .filter(|dir| dir.parent() == Some(root))
        .and_then(|dir| dir.file_name())
        .and_then(|n| n.to_str());
    let in_legacy_dir = dir_name.is_some_and(|n| n.starts_with('-') && !n.starts_with("v2-"));
    let is_transcript = path.as_os_str().as_bytes().ends_with(b".jsonl");
    if !in_legacy_dir || !is_transcript {
        return Err(why(
            path,
            invalid_candidate,
            format!(
                "not a transcript in a legacy directory of {}",
                root.display()
            ),
        ));
    }
    Ok(())
}

/// Whether the destination transcript must still be published (`true`), or already holds
/// exactly the source bytes from an interrupted attempt (`false`).
pub(super) fn check_destination_transcript(dest: &Path, sha256: &str) -> Result<bool, LegacyError> {
    let meta = match fs::symlink_metadata(dest) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(io_err(dest)(e)),
        Ok(meta) => meta,
    };
    if meta.file_type().is_symlink() {
        return Err(why(dest, conflict, "a symlink occupies the destination"));
    }
    if !meta.file_type().is_file() {
        return Err(why(dest, conflict, "the destination is not a regular file"));
    }
    match capture(dest) {
        Ok(s) if s.sha256 == sha256 && verify_owner_only(&FileStorage, dest, false).is_ok() => {
            Ok(false)
        }
        Ok(_) => Err(why(dest, conflict, "the destination holds another file")),
        Err(_) => Err(why(dest, conflict, "the destination cannot be read")),
    }
}

/// Whether the destination artifacts must still be published (`true`), are absent and not
/// needed, or already hold exactly the planned tree (`false`).
pub(super) fn check_destination_artifacts(
    dest: &Path,
    plan: Option<&[TreeEntry]>,
) -> Result<bool, LegacyError> {
    let meta = match fs::symlink_metadata(dest) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(plan.is_some()),
        Err(e) => return Err(io_err(dest)(e)),
        Ok(meta) => meta,
    };
    if !meta.file_type().is_dir() {
        return Err(why(
            dest,
            conflict,
            "the artifacts destination is not a real directory",
        ));
    }
    let Some(plan) = plan else {
        return Err(why(
            dest,
            conflict,
            "an artifacts directory exists but the source has none",
        ));
    };
    let existing = walk_tree(dest, true, &mut || Ok(())).map_err(|e| {
        why(
            dest,
            conflict,
            format!("the existing artifacts directory is unusable: {e}"),
        )
    })?;
    if manifest(&existing) == manifest(plan) {
        Ok(false)
    } else {
        Err(why(dest, conflict, "the destination holds other artifacts"))
    }
}

/// Publishes `bytes` at `dest` without replacing anything: a temp file in the same
/// directory, fsynced, then hard-linked into place.
pub(super) fn publish_file(dir: &Path, dest: &Path, bytes: &[u8]) -> Result<(), LegacyError> {
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(".{name}.{}.migrate.tmp", snowflake()));
    let written = create_owner_only(&temp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    let linked = written.and_then(|()| fs::hard_link(&temp, dest));
    let _ = fs::remove_file(&temp);
    match linked {
        Ok(()) => sync_dir(dir),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(why(
            dest,
            conflict,
            "the destination appeared during the migration",
        )),
        Err(e) => Err(io_err(dest)(e)),
    }
}

pub(super) fn file_json(path: &Path, session_id: &str, cwd: &str, id: &FileIdentity) -> Value {
    object(vec![
        ("path", string(path_text(path))),
        ("sessionId", string(session_id)),
        (
            "header",
            object(vec![("id", string(session_id)), ("cwd", string(cwd))]),
        ),
        ("identity", identity_json(id)),
        ("sha256", string(id.sha256.clone())),
    ])
}

/// Copies the legacy `candidate` into the v2 scope of `cwd` (copy-retain) and commits a
/// receipt; returns the copy. A source whose committed receipt names a live copy is not
/// copied again. The source is only read.
pub fn migrate_candidate(
    sessions_root: &Path,
    cwd: &Path,
    candidate: &Candidate,
) -> Result<MigrationOutcome, LegacyError> {
    if candidate.provenance != Provenance::Legacy {
        return Err(why(
            &candidate.path,
            invalid_candidate,
            "not a legacy candidate",
        ));
    }
    let ws = Workspace::resolve(cwd)?;
    let root = absolute(sessions_root)?;
    check_legacy_location(&root, &candidate.path)?;
    let scope_dir = prepare_scope(&root, &ws.identity)?;
    let internal = scope_dir.join(INTERNAL_DIR);
    let op = candidate.operation_name();
    let receipt = internal.join(RECEIPTS).join(format!("{op}.json"));
    let Some(file_name) = candidate.path.file_name() else {
        return Err(why(&candidate.path, invalid_candidate, "no file name"));
    };
    let destination = scope_dir.join(file_name);
    let mut lock = MigrationLock::acquire(&internal.join(LOCKS), &op, &candidate.path)?;
    let records = ScopeRecords::load(&scope_dir, &ws.digest());
    if records.retires(candidate) {
        return Err(LegacyError::MigrationRetired {
            path: candidate.path.clone(),
        });
    }
    if let Some(done) = records.committed_receipt(candidate) {
        let live = done.path == destination
            && match inspect(&destination, Provenance::V2, &ws.identity) {
                Inspection::Owned(found) => {
                    found.0.session_id == done.session_id && !records.retires(&found.0)
                }
                _ => false,
            };
        if live {
            lock.release()?;
            return Ok(MigrationOutcome {
                destination,
                receipt,
                already_migrated: true,
            });
        }
    }
    let source = revalidate(candidate, &ws.identity)?;

    let source_artifacts = artifacts_dir(&candidate.path);
    let plan = match fs::symlink_metadata(&source_artifacts) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_err(&source_artifacts)(e)),
        Ok(_) => Some(walk_tree(&source_artifacts, true, &mut || {
            lock.heartbeat()
        })?),
    };
    let dest_artifacts = artifacts_dir(&destination);
    let publish_transcript = check_destination_transcript(&destination, &source.sha256)?;
    let publish_artifacts = check_destination_artifacts(&dest_artifacts, plan.as_deref())?;

    let mut published_artifacts = None;
    if let (true, Some(plan)) = (publish_artifacts, plan.as_deref()) {
        lock.assert_owned()?;
        published_artifacts = Some(copy_artifacts(
            &source_artifacts,
            plan,
            &scope_dir,
            &dest_artifacts,
            &op,
            &mut lock,
        )?);
    }
    let unpublish = |e: LegacyError| {
        if let Some(stat) = &published_artifacts {
            unpublish_dir(&dest_artifacts, stat);
        }
        e
    };
    if publish_transcript {
        lock.assert_owned().map_err(unpublish)?;
        publish_file(&scope_dir, &destination, &source.bytes).map_err(unpublish)?;
    }
    let copied = capture(&destination).map_err(|_| LegacyError::DurabilityFailed {
        path: destination.clone(),
        why: "the published copy cannot be read back".into(),
    })?;
    if copied.sha256 != source.sha256 {
        return Err(LegacyError::DurabilityFailed {
            path: destination,
            why: "the published copy differs from the source".into(),
        });
    }
    verify_owner_only(&FileStorage, &destination, false)?;

    let dest_identity = FileIdentity {
        dev: copied.stat.dev,
        ino: copied.stat.ino,
        size: copied.stat.size,
        mtime_ns: copied.stat.mtime_ns,
        sha256: copied.sha256,
    };
    let entries = plan.as_deref().map(manifest).unwrap_or_default();
    let value = object(vec![
        ("schemaVersion", Value::number(2.0)),
        ("state", string("committed")),
        ("policy", string("copy-retain")),
        ("attemptId", string(lock.record.attempt_id.clone())),
        ("scope", string(ws.digest())),
        (
            "source",
            file_json(
                &candidate.path,
                &candidate.session_id,
                &candidate.cwd,
                &candidate.identity,
            ),
        ),
        (
            "destination",
            file_json(
                &destination,
                &candidate.session_id,
                &candidate.cwd,
                &dest_identity,
            ),
        ),
        ("artifactManifest", manifest_json(&entries)),
    ]);
    lock.assert_owned()?;
    write_record(&receipt, &value)?;
    lock.release()?;
    Ok(MigrationOutcome {
        destination,
        receipt,
        already_migrated: false,
    })
}

/// The path to open `candidate` for writing with, suitable for
/// [`SessionManager::open`](crate::manager::SessionManager::open): a v2 candidate's own path,
/// or — for a legacy candidate — its v2 copy, migrating first. Under
/// [`MigrationPolicy::Disabled`] a legacy candidate fails with `legacy_migration_disabled`.
pub fn path_for_writing(
    sessions_root: &Path,
    cwd: &Path,
    candidate: &Candidate,
    policy: MigrationPolicy,
) -> Result<PathBuf, LegacyError> {
    if candidate.provenance == Provenance::Legacy {
        if policy == MigrationPolicy::Disabled {
            return Err(LegacyError::MigrationDisabled {
                path: candidate.path.clone(),
            });
        }
        return migrate_candidate(sessions_root, cwd, candidate).map(|o| o.destination);
    }
    let ws = Workspace::resolve(cwd)?;
    let scope_dir = ws.scope_dir(&absolute(sessions_root)?);
    if candidate.path.parent() != Some(scope_dir.as_path()) {
        return Err(why(
            &candidate.path,
            invalid_candidate,
            format!("not a transcript of the v2 scope {}", scope_dir.display()),
        ));
    }
    verify_existing_scope(&scope_dir, &ws.identity)?;
    if ScopeRecords::load(&scope_dir, &ws.digest()).retires(candidate) {
        return Err(LegacyError::MigrationRetired {
            path: candidate.path.clone(),
        });
    }
    Ok(candidate.path.clone())
}
