//! Copy-retain migration of a legacy candidate into the v2 scope, and the path to open a
//! candidate for writing with.

use std::io;
use std::path::{Path, PathBuf};

use crate::format::ids::snowflake;
use crate::json::Value;
use crate::storage::{write_new_durable, EntryKind, FileId, SessionStorage};
use crate::store::scope::{prepare_scope_in, verify_owner_only, INTERNAL_DIR};

use super::artifacts::{
    copy_artifacts, manifest, manifest_json, unpublish_dir, walk_tree, ManifestEntry, TreeEntry,
};
use super::capture::{capture, sync_dir, Snapshot, Stat};
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

/// Where one candidate's migration goes: its scope, its copy and its receipt.
struct Target<'a> {
    storage: &'a dyn SessionStorage,
    candidate: &'a Candidate,
    /// The scope's digest, as receipts name it.
    scope: String,
    scope_dir: PathBuf,
    internal: PathBuf,
    /// The operation's name: the receipt's and the lock's file name.
    op: String,
    receipt: PathBuf,
    destination: PathBuf,
    source_artifacts: PathBuf,
    dest_artifacts: PathBuf,
}

/// Which parts an attempt still has to publish (an interrupted one may have published some).
struct ToPublish {
    transcript: bool,
    artifacts: bool,
}

impl<'a> Target<'a> {
    /// Prepares the scope of `ws` in `root` and names the paths of `candidate`'s copy.
    fn prepare(
        storage: &'a dyn SessionStorage,
        root: &Path,
        ws: &Workspace,
        candidate: &'a Candidate,
    ) -> Result<Self, LegacyError> {
        let scope_dir = prepare_scope_in(storage, root, &ws.identity)?;
        let internal = scope_dir.join(INTERNAL_DIR);
        let op = candidate.operation_name();
        let Some(file_name) = candidate.path.file_name() else {
            return Err(why(&candidate.path, invalid_candidate, "no file name"));
        };
        let destination = scope_dir.join(file_name);
        Ok(Target {
            storage,
            candidate,
            scope: ws.digest(),
            receipt: internal.join(RECEIPTS).join(format!("{op}.json")),
            source_artifacts: artifacts_dir(&candidate.path),
            dest_artifacts: artifacts_dir(&destination),
            destination,
            scope_dir,
            internal,
            op,
        })
    }

    /// Whether a committed receipt already names a live copy of the candidate.
    fn has_live_copy(&self, records: &ScopeRecords, ws: &Workspace) -> bool {
        let Some(done) = records.committed_receipt(self.candidate) else {
            return false;
        };
        done.path == self.destination
            && match inspect(
                self.storage,
                &self.destination,
                Provenance::V2,
                &ws.identity,
            ) {
                Inspection::Owned(found) => {
                    found.0.session_id == done.session_id && !records.retires(&found.0)
                }
                _ => false,
            }
    }

    /// Makes the receipt's directory durable and ends the migration.
    fn finish(
        self,
        lock: MigrationLock<'_>,
        already_migrated: bool,
    ) -> Result<MigrationOutcome, LegacyError> {
        sync_dir(
            self.storage,
            self.receipt.parent().unwrap_or(&self.internal),
        )?;
        lock.release()?;
        Ok(MigrationOutcome {
            destination: self.destination,
            receipt: self.receipt,
            already_migrated,
        })
    }

    /// The source's artifacts to copy, walked under the lock; none without artifacts.
    fn artifact_plan(
        &self,
        lock: &mut MigrationLock,
    ) -> Result<Option<Vec<TreeEntry>>, LegacyError> {
        match self.storage.lstat(&self.source_artifacts) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(&self.source_artifacts)(e)),
            Ok(_) => Ok(Some(walk_tree(
                self.storage,
                &self.source_artifacts,
                true,
                &mut || lock.heartbeat(),
            )?)),
        }
    }

    /// Publishes what is missing, checks the copy and puts the committed receipt in place;
    /// what it published is recorded in `published`.
    fn commit(
        &self,
        source: &Snapshot,
        plan: Option<&[TreeEntry]>,
        to_publish: ToPublish,
        lock: &mut MigrationLock,
        published: &mut Published,
    ) -> Result<(), LegacyError> {
        let storage = self.storage;
        if let (true, Some(plan)) = (to_publish.artifacts, plan) {
            lock.assert_owned()?;
            published.artifacts = Some(copy_artifacts(
                storage,
                &self.source_artifacts,
                plan,
                &self.scope_dir,
                &self.dest_artifacts,
                &self.op,
                lock,
            )?);
        }
        if to_publish.transcript {
            lock.assert_owned()?;
            published.transcript = Some(publish_file(
                storage,
                &self.scope_dir,
                &self.destination,
                &source.bytes,
            )?);
        }
        let copy = self.checked_copy(&source.sha256)?;
        let entries = plan.map(manifest).unwrap_or_default();
        let value = self.receipt_json(&lock.record.attempt_id, &copy, &entries);
        lock.assert_owned()?;
        put_record(storage, &self.receipt, &value)
    }

    /// The published copy's identity, once it reads back as the source's bytes and is
    /// owner-only.
    fn checked_copy(&self, source_sha256: &str) -> Result<FileIdentity, LegacyError> {
        let failed = |why: &str| LegacyError::DurabilityFailed {
            path: self.destination.clone(),
            why: why.into(),
        };
        let copied = capture(self.storage, &self.destination)
            .map_err(|_| failed("the published copy cannot be read back"))?;
        if copied.sha256 != source_sha256 {
            return Err(failed("the published copy differs from the source"));
        }
        verify_owner_only(self.storage, &self.destination, false)?;
        Ok(copied.stat.identity(copied.sha256))
    }

    /// The committed receipt of this migration.
    fn receipt_json(
        &self,
        attempt_id: &str,
        copy: &FileIdentity,
        entries: &[ManifestEntry],
    ) -> Value {
        let c = self.candidate;
        object(vec![
            ("schemaVersion", Value::number(2.0)),
            ("state", string("committed")),
            ("policy", string("copy-retain")),
            ("attemptId", string(attempt_id)),
            ("scope", string(self.scope.clone())),
            (
                "source",
                file_json(&c.path, &c.session_id, &c.cwd, &c.identity),
            ),
            (
                "destination",
                file_json(&self.destination, &c.session_id, &c.cwd, copy),
            ),
            ("artifactManifest", manifest_json(entries)),
        ])
    }

    /// Removes what a failed attempt published.
    fn take_back(&self, published: &Published) {
        if let Some(id) = published.transcript {
            unpublish_file(self.storage, &self.scope_dir, &self.destination, id);
        }
        if let Some(stat) = &published.artifacts {
            unpublish_dir(self.storage, &self.dest_artifacts, stat);
            let _ = self.storage.sync_dir(&self.scope_dir);
        }
    }
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
        let target = Target::prepare(storage, &root, &ws, candidate)?;
        let mut lock = MigrationLock::acquire(
            storage,
            &target.internal.join(LOCKS),
            &target.op,
            &candidate.path,
            self.lock_wait,
        )?;
        let records = ScopeRecords::load(storage, &target.scope_dir, &target.scope);
        if records.retires(candidate) {
            return Err(LegacyError::MigrationRetired {
                path: candidate.path.clone(),
            });
        }
        if target.has_live_copy(&records, &ws) {
            // An earlier attempt may have failed to make the receipt durable.
            return target.finish(lock, true);
        }
        let source = revalidate(storage, candidate, &ws.identity)?;
        let plan = target.artifact_plan(&mut lock)?;
        let to_publish = ToPublish {
            transcript: check_destination_transcript(storage, &target.destination, &source.sha256)?,
            artifacts: check_destination_artifacts(
                storage,
                &target.dest_artifacts,
                plan.as_deref(),
            )?,
        };
        let mut published = Published::default();
        let committed = target.commit(
            &source,
            plan.as_deref(),
            to_publish,
            &mut lock,
            &mut published,
        );
        if let Err(e) = committed {
            target.take_back(&published);
            return Err(e);
        }
        // The receipt is in place: from here on the copy stands, whatever fails.
        target.finish(lock, false)
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
