//! Copy-retain migration of a legacy candidate into the v2 scope, and the path to open a
//! candidate for writing with.

use std::io;
use std::path::{Path, PathBuf};

use crate::ids::snowflake;
use crate::json::Value;
use crate::scope::{prepare_scope_in, verify_owner_only, INTERNAL_DIR};
use crate::storage::{write_new_durable, EntryKind, FileId, SessionStorage};

use super::artifacts::{
    copy_artifacts, manifest, manifest_json, unpublish_dir, walk_tree, TreeEntry,
};
use super::capture::{capture, sync_dir, Stat};
use super::listing::{inspect, revalidate, verify_existing_scope, Inspection};
use super::lock::MigrationLock;
use super::records::{identity_json, object, path_text, put_record, string, ScopeRecords};
use super::{
    absolute, artifacts_dir, conflict, invalid_candidate, io_err, why, Candidate, FileIdentity,
    LegacyError, LegacyStore, MigrationPolicy, Provenance, Workspace, LOCKS, RECEIPTS,
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
    let is_transcript = path.as_os_str().as_encoded_bytes().ends_with(b".jsonl");
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
pub(super) fn check_destination_transcript(
    storage: &dyn SessionStorage,
    dest: &Path,
    sha256: &str,
) -> Result<bool, LegacyError> {
    let stat = match storage.lstat(dest) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(io_err(dest)(e)),
        Ok(stat) => stat,
    };
    if stat.kind == EntryKind::Symlink {
        return Err(why(dest, conflict, "a symlink occupies the destination"));
    }
    if stat.kind != EntryKind::File {
        return Err(why(dest, conflict, "the destination is not a regular file"));
    }
    match capture(storage, dest) {
        Ok(s) if s.sha256 == sha256 && verify_owner_only(storage, dest, false).is_ok() => Ok(false),
        Ok(_) => Err(why(dest, conflict, "the destination holds another file")),
        Err(_) => Err(why(dest, conflict, "the destination cannot be read")),
    }
}

/// Whether the destination artifacts must still be published (`true`), are absent and not
/// needed, or already hold exactly the planned tree (`false`).
pub(super) fn check_destination_artifacts(
    storage: &dyn SessionStorage,
    dest: &Path,
    plan: Option<&[TreeEntry]>,
) -> Result<bool, LegacyError> {
    let stat = match storage.lstat(dest) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(plan.is_some()),
        Err(e) => return Err(io_err(dest)(e)),
        Ok(stat) => stat,
    };
    if stat.kind != EntryKind::Dir {
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
    let existing = walk_tree(storage, dest, true, &mut || Ok(())).map_err(|e| {
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
/// directory, fsynced, hard-linked into place, its temp name removed and the directory
/// synced. Returns the published file's identity. When it fails, what it published is
/// removed again.
pub(super) fn publish_file(
    storage: &dyn SessionStorage,
    dir: &Path,
    dest: &Path,
    bytes: &[u8],
) -> Result<FileId, LegacyError> {
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(".{name}.{}.migrate.tmp", snowflake()));
    let linked = write_new_durable(storage, &temp, bytes)
        .and_then(|()| storage.lstat(&temp))
        .and_then(|stat| storage.hard_link(&temp, dest).map(|()| stat.id));
    let unlinked = storage.unlink(&temp);
    let id = match linked {
        Ok(id) => id,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            return Err(why(
                dest,
                conflict,
                "the destination appeared during the migration",
            ))
        }
        Err(e) => return Err(io_err(dest)(e)),
    };
    // A copy still linked under its temp name has two links: it would never be trusted.
    let published = unlinked
        .map_err(io_err(&temp))
        .and_then(|()| sync_dir(storage, dir));
    if let Err(e) = published {
        unpublish_file(storage, dir, dest, id);
        let _ = storage.unlink(&temp);
        return Err(e);
    }
    Ok(id)
}

/// Removes a transcript this migration published, if it is still that file.
fn unpublish_file(storage: &dyn SessionStorage, dir: &Path, dest: &Path, id: FileId) {
    if storage.lstat(dest).is_ok_and(|s| s.id == id) {
        let _ = storage.unlink(dest);
        let _ = storage.sync_dir(dir);
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
/// copied again. The source is only read. When it fails before the receipt is in place,
/// what this attempt published is removed again.
pub fn migrate_candidate(
    sessions_root: &Path,
    cwd: &Path,
    candidate: &Candidate,
) -> Result<MigrationOutcome, LegacyError> {
    LegacyStore::on_disk().migrate_candidate(sessions_root, cwd, candidate)
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
    LegacyStore::on_disk().path_for_writing(sessions_root, cwd, candidate, policy)
}

/// What one migration attempt published, to be taken back if it fails.
#[derive(Default)]
struct Published {
    artifacts: Option<Stat>,
    transcript: Option<FileId>,
}

impl LegacyStore<'_> {
    /// [`migrate_candidate`] in this store.
    pub fn migrate_candidate(
        &self,
        sessions_root: &Path,
        cwd: &Path,
        candidate: &Candidate,
    ) -> Result<MigrationOutcome, LegacyError> {
        let storage = self.storage;
        if candidate.provenance != Provenance::Legacy {
            return Err(why(
                &candidate.path,
                invalid_candidate,
                "not a legacy candidate",
            ));
        }
        let ws = Workspace::resolve_in(storage, cwd)?;
        let root = absolute(sessions_root)?;
        check_legacy_location(&root, &candidate.path)?;
        let scope_dir = prepare_scope_in(storage, &root, &ws.identity)?;
        let internal = scope_dir.join(INTERNAL_DIR);
        let op = candidate.operation_name();
        let receipt = internal.join(RECEIPTS).join(format!("{op}.json"));
        let Some(file_name) = candidate.path.file_name() else {
            return Err(why(&candidate.path, invalid_candidate, "no file name"));
        };
        let destination = scope_dir.join(file_name);
        let mut lock = MigrationLock::acquire(
            storage,
            &internal.join(LOCKS),
            &op,
            &candidate.path,
            self.lock_wait,
        )?;
        let records = ScopeRecords::load(storage, &scope_dir, &ws.digest());
        if records.retires(candidate) {
            return Err(LegacyError::MigrationRetired {
                path: candidate.path.clone(),
            });
        }
        if let Some(done) = records.committed_receipt(candidate) {
            let live = done.path == destination
                && match inspect(storage, &destination, Provenance::V2, &ws.identity) {
                    Inspection::Owned(found) => {
                        found.0.session_id == done.session_id && !records.retires(&found.0)
                    }
                    _ => false,
                };
            if live {
                // An earlier attempt may have failed to make the receipt durable.
                sync_dir(storage, receipt.parent().unwrap_or(&internal))?;
                lock.release()?;
                return Ok(MigrationOutcome {
                    destination,
                    receipt,
                    already_migrated: true,
                });
            }
        }
        let source = revalidate(storage, candidate, &ws.identity)?;

        let source_artifacts = artifacts_dir(&candidate.path);
        let plan = match storage.lstat(&source_artifacts) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(io_err(&source_artifacts)(e)),
            Ok(_) => Some(walk_tree(storage, &source_artifacts, true, &mut || {
                lock.heartbeat()
            })?),
        };
        let dest_artifacts = artifacts_dir(&destination);
        let publish_transcript =
            check_destination_transcript(storage, &destination, &source.sha256)?;
        let publish_artifacts =
            check_destination_artifacts(storage, &dest_artifacts, plan.as_deref())?;

        let mut published = Published::default();
        let mut commit = || -> Result<(), LegacyError> {
            if let (true, Some(plan)) = (publish_artifacts, plan.as_deref()) {
                lock.assert_owned()?;
                published.artifacts = Some(copy_artifacts(
                    storage,
                    &source_artifacts,
                    plan,
                    &scope_dir,
                    &dest_artifacts,
                    &op,
                    &mut lock,
                )?);
            }
            if publish_transcript {
                lock.assert_owned()?;
                published.transcript = Some(publish_file(
                    storage,
                    &scope_dir,
                    &destination,
                    &source.bytes,
                )?);
            }
            let copied =
                capture(storage, &destination).map_err(|_| LegacyError::DurabilityFailed {
                    path: destination.clone(),
                    why: "the published copy cannot be read back".into(),
                })?;
            if copied.sha256 != source.sha256 {
                return Err(LegacyError::DurabilityFailed {
                    path: destination.clone(),
                    why: "the published copy differs from the source".into(),
                });
            }
            verify_owner_only(storage, &destination, false)?;

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
            put_record(storage, &receipt, &value)
        };
        if let Err(e) = commit() {
            if let Some(id) = published.transcript {
                unpublish_file(storage, &scope_dir, &destination, id);
            }
            if let Some(stat) = &published.artifacts {
                unpublish_dir(storage, &dest_artifacts, stat);
                let _ = storage.sync_dir(&scope_dir);
            }
            return Err(e);
        }
        // The receipt is in place: from here on the copy stands, whatever fails.
        sync_dir(storage, receipt.parent().unwrap_or(&internal))?;
        lock.release()?;
        Ok(MigrationOutcome {
            destination,
            receipt,
            already_migrated: false,
        })
    }

    /// [`path_for_writing`] in this store.
    pub fn path_for_writing(
        &self,
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
            return self
                .migrate_candidate(sessions_root, cwd, candidate)
                .map(|o| o.destination);
        }
        let ws = Workspace::resolve_in(self.storage, cwd)?;
        let scope_dir = ws.scope_dir(&absolute(sessions_root)?);
        if candidate.path.parent() != Some(scope_dir.as_path()) {
            return Err(why(
                &candidate.path,
                invalid_candidate,
                format!("not a transcript of the v2 scope {}", scope_dir.display()),
            ));
        }
        verify_existing_scope(self.storage, &scope_dir, &ws.identity)?;
        if ScopeRecords::load(self.storage, &scope_dir, &ws.digest()).retires(candidate) {
            return Err(LegacyError::MigrationRetired {
                path: candidate.path.clone(),
            });
        }
        Ok(candidate.path.clone())
    }
}
