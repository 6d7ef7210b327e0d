//! Legacy session directories, managed candidates, copy-retain migration into the v2 scope,
//! and tombstones.
//!
//! Before v2 scopes the agent kept a workspace's sessions in a sessions-root directory named
//! by encoding the workspace path (`--home-alice-proj--`, plus a few home- and temp-relative
//! spellings). Those encodings collide (`/x/a-b/c` and `/x/a/b-c` share `--x-a-b-c--`), so a
//! directory name never decides ownership: every transcript's header `cwd` is resolved, and
//! only one with the workspace's canonical identity is a candidate of that workspace.
//!
//! Invariants:
//! - Listing is read-only. It creates nothing, never follows a symlink to a transcript, and
//!   offers only *owned* candidates: a transcript whose header cwd resolves to another
//!   workspace is *foreign*, one whose header is malformed or whose cwd cannot be resolved is
//!   *invalid*; both are reported and skipped.
//! - Legacy files are never written, renamed or removed. Migration copies a legacy transcript
//!   and its artifacts directory (the transcript path minus `.jsonl`) into the v2 scope under
//!   the same base name, never replacing anything there, and then commits a receipt. The
//!   source stays byte-identical, mtime included.
//! - An operation on a candidate is named by the exact file version it was listed with:
//!   `op` = SHA-256 of `path␀dev␀ino␀size␀mtimeNs␀sha256`. Migrations and retirements run
//!   under the lease lock `locks/<op>.lock`; receipts are `receipts/<op>.json`, tombstones
//!   `tombstones/<op>.json`. A file replaced at the same path is a new version with a new
//!   `op`, so an old receipt or tombstone never applies to it.
//! - Everything is checked against what was listed and fails closed: a source that changed
//!   since is `source_changed`; an occupied destination (other content, a symlink, a special
//!   file) is `destination_conflict`; an artifact tree holding a symlink, a hard-linked or
//!   special file, or beyond the bounds (depth 32, 50,000 files, 64 MiB a file, 512 MiB in
//!   all) is `unsafe_artifacts` / `artifact_capacity_exceeded`. All of this is found before
//!   anything is published. Artifacts are staged in a hidden directory of the scope and
//!   published by a no-replace rename before the transcript; if anything fails before the
//!   receipt is in place, what this attempt made is removed again, so a failed migration
//!   leaves no copy behind.
//! - Every file operation goes through a [`SessionStorage`] ([`LegacyStore`]; the free
//!   functions use the local filesystem), so migrations run on the in-memory backend too,
//!   with its fault injection.
//! - Receipts and tombstones are trusted only as owner-only (`0600`, one link, no ACL)
//!   regular files of the scope; anything else is ignored, never followed.
//! - Everything created is owner-only: directories `0700`, files `0600`.
//!
//! A destination transcript that already holds exactly the source's bytes as an owner-only
//! file with one link (and, when the source has artifacts, an artifacts directory with
//! exactly the same manifest) is taken as the result of an interrupted earlier attempt of
//! the same operation and completed with a receipt instead of failing.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::storage::{FileStorage, SessionStorage};
use crate::store::agent_dir::normalize;
use crate::store::scope::{digest, resolve_identity_in, scope_dir_name, Identity, ScopeError};

mod artifacts;
mod capture;
mod listing;
mod lock;
mod migrate;
mod names;
mod records;
mod retire;

pub use artifacts::artifacts_dir;
pub use listing::list_candidates;
pub use lock::{current_process_start_id, lock_state, LockState};
pub use migrate::{migrate_candidate, path_for_writing, MigrationOutcome};
pub use names::{encode_absolute, legacy_dir_names, legacy_dirs};
pub use retire::retire_candidate;

/// How much of a transcript's start may hold its header line.
pub const HEADER_MAX_BYTES: usize = 64 * 1024;
/// How many other `-*` directories of the sessions root are scanned.
pub const MAX_DISCOVERED_LEGACY_DIRS: usize = 256;
/// Artifact copy bounds: how many directory levels an artifacts tree may nest below its
/// root (deeper is `unsafe_artifacts`).
pub const ARTIFACT_MAX_DEPTH: usize = 32;
/// How many files an artifacts tree may hold in all (more is `artifact_capacity_exceeded`).
pub const ARTIFACT_MAX_FILES: usize = 50_000;
/// How large one artifact file may be, in bytes (larger is `unsafe_artifacts`).
pub const ARTIFACT_MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;
/// How many bytes the files of an artifacts tree may hold in all (more is
/// `artifact_capacity_exceeded`).
pub const ARTIFACT_MAX_TOTAL_BYTES: u64 = 512 * 1024 * 1024;
/// Lock lease, in milliseconds: a lock whose lease ran out and whose holder no longer runs
/// (or an unreadable lock older than this) is stale and may be taken over.
pub const LOCK_LEASE_MS: i64 = 60_000;
/// Lock renewal margin, in milliseconds: a holder renews its lease once less than this is
/// left of it.
pub const LOCK_HEARTBEAT_MS: i64 = 10_000;
/// How long to wait for a live holder of a lock by default ([`LegacyStore::lock_wait`]), in
/// milliseconds.
pub const LOCK_WAIT_MS: u64 = 5_000;
/// How often to retry a held lock.
const LOCK_POLL: Duration = Duration::from_millis(50);
/// How often a long copy re-checks (and renews) its lock.
const LOCK_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// Where legacy operations run: the storage every file operation goes through, and how long
/// a migration or retirement waits for a live holder of its lock. The free functions of this
/// module are those of [`LegacyStore::on_disk`].
#[derive(Debug, Clone, Copy)]
pub struct LegacyStore<'a> {
    /// The storage every file operation goes through.
    pub storage: &'a dyn SessionStorage,
    /// How long to wait for a live holder of an operation's lock before failing with
    /// `migration_busy` ([`LOCK_WAIT_MS`] unless set).
    pub lock_wait: Duration,
}

impl LegacyStore<'static> {
    /// The local filesystem, waiting the default time for a lock.
    pub fn on_disk() -> Self {
        LegacyStore::new(&FileStorage)
    }
}

impl<'a> LegacyStore<'a> {
    /// `storage`, waiting the default time for a lock.
    pub fn new(storage: &'a dyn SessionStorage) -> Self {
        LegacyStore {
            storage,
            lock_wait: Duration::from_millis(LOCK_WAIT_MS),
        }
    }

    /// The same store waiting `lock_wait` for a live holder of a lock.
    pub fn with_lock_wait(self, lock_wait: Duration) -> Self {
        LegacyStore { lock_wait, ..self }
    }
}

const LOCKS: &str = "locks";
const RECEIPTS: &str = "receipts";
const TOMBSTONES: &str = "tombstones";

/// Why listing, migrating or retiring legacy candidates failed; [`LegacyError::code`] gives
/// the original's failure code.
#[derive(Debug, thiserror::Error)]
pub enum LegacyError {
    /// The operation's lock stayed held by a live process for longer than
    /// [`LegacyStore::lock_wait`], or a lock this process held was lost (`migration_busy`).
    #[error("{path}: migration_busy: another process holds {lock}")]
    MigrationBusy {
        /// The candidate's transcript (the lock file itself when a held lock was lost).
        path: PathBuf,
        /// The lock file, `locks/<op>.lock` in the scope's internal directory.
        lock: PathBuf,
    },
    /// A legacy candidate was to be opened for writing under [`MigrationPolicy::Disabled`]
    /// (`legacy_migration_disabled`).
    #[error("{path}: legacy_migration_disabled: the directory migration policy is \"disabled\"")]
    MigrationDisabled {
        /// The legacy transcript.
        path: PathBuf,
    },
    /// Something other than an earlier copy of the source occupies the destination in the v2
    /// scope: other content, a symlink, a special file (`destination_conflict`).
    #[error("{path}: destination_conflict: {why}")]
    DestinationConflict {
        /// The occupied destination.
        path: PathBuf,
        /// What occupies it.
        why: String,
    },
    /// The candidate or one of its artifacts is no longer the version it was listed with, or
    /// changed while it was copied (`source_changed`).
    #[error("{path}: source_changed: {why}")]
    SourceChanged {
        /// The transcript or artifact that changed.
        path: PathBuf,
        /// What changed.
        why: String,
    },
    /// The artifacts tree is not a real directory, or holds a symlink, a hard-linked or
    /// special file, a name that is not UTF-8, a file larger than [`ARTIFACT_MAX_FILE_BYTES`],
    /// or directories nested deeper than [`ARTIFACT_MAX_DEPTH`] (`unsafe_artifacts`).
    #[error("{path}: unsafe_artifacts: {why}")]
    UnsafeArtifacts {
        /// The offending entry of the tree.
        path: PathBuf,
        /// What makes it unsafe.
        why: String,
    },
    /// The artifacts tree holds more than [`ARTIFACT_MAX_FILES`] files or more than
    /// [`ARTIFACT_MAX_TOTAL_BYTES`] in all (`artifact_capacity_exceeded`).
    #[error("{path}: artifact_capacity_exceeded: {why}")]
    ArtifactCapacityExceeded {
        /// The artifacts directory.
        path: PathBuf,
        /// Which bound was passed.
        why: String,
    },
    /// A tombstone of the scope retires this version of the candidate (`migration_retired`).
    #[error("{path}: migration_retired: a tombstone retires this session")]
    MigrationRetired {
        /// The candidate's transcript.
        path: PathBuf,
    },
    /// The operation does not apply to the candidate: it is not a legacy candidate, not a
    /// transcript directly in a legacy directory, or not in the workspace's v2 scope
    /// (`invalid_candidate`).
    #[error("{path}: invalid_candidate: {why}")]
    InvalidCandidate {
        /// The candidate's transcript.
        path: PathBuf,
        /// Why it does not apply.
        why: String,
    },
    /// The sessions root or a directory to be listed is a symlink or another file type, not
    /// a real directory (`unsafe_root`).
    #[error("{path}: unsafe_root: {why}")]
    UnsafeDirectory {
        /// The directory.
        path: PathBuf,
        /// What it is instead.
        why: String,
    },
    /// A copied file or a directory's entries could not be made durable, or the published
    /// copy does not read back as the source's bytes (`durability_failed`).
    #[error("{path}: durability_failed: {why}")]
    DurabilityFailed {
        /// The file or directory concerned.
        path: PathBuf,
        /// What failed.
        why: String,
    },
    /// The workspace cannot be resolved, or its v2 scope failed verification or preparation.
    #[error(transparent)]
    Scope(#[from] ScopeError),
    /// A file operation failed (`io_error`).
    #[error("{path}: {source}")]
    Io {
        /// The path it failed on.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
}

impl LegacyError {
    /// The original's failure code.
    pub fn code(&self) -> &'static str {
        match self {
            LegacyError::MigrationBusy { .. } => "migration_busy",
            LegacyError::MigrationDisabled { .. } => "legacy_migration_disabled",
            LegacyError::DestinationConflict { .. } => "destination_conflict",
            LegacyError::SourceChanged { .. } => "source_changed",
            LegacyError::UnsafeArtifacts { .. } => "unsafe_artifacts",
            LegacyError::ArtifactCapacityExceeded { .. } => "artifact_capacity_exceeded",
            LegacyError::MigrationRetired { .. } => "migration_retired",
            LegacyError::InvalidCandidate { .. } => "invalid_candidate",
            LegacyError::UnsafeDirectory { .. } => "unsafe_root",
            LegacyError::DurabilityFailed { .. } => "durability_failed",
            LegacyError::Scope(ScopeError::BindingConflict { .. }) => "binding_conflict",
            LegacyError::Scope(ScopeError::NetworkUnsupported { .. }) => "network_unsupported",
            LegacyError::Scope(ScopeError::ServedElsewhere { .. }) => "served_elsewhere",
            LegacyError::Scope(ScopeError::InvalidWorkspace { .. }) => "cwd_missing",
            LegacyError::Scope(_) => "binding_invalid",
            LegacyError::Io { .. } => "io_error",
        }
    }
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> LegacyError + '_ {
    move |source| LegacyError::Io {
        path: path.to_owned(),
        source,
    }
}

fn why(path: &Path, f: fn(PathBuf, String) -> LegacyError, why: impl Into<String>) -> LegacyError {
    f(path.to_owned(), why.into())
}

fn conflict(path: PathBuf, why: String) -> LegacyError {
    LegacyError::DestinationConflict { path, why }
}

fn changed(path: PathBuf, why: String) -> LegacyError {
    LegacyError::SourceChanged { path, why }
}

fn unsafe_artifacts(path: PathBuf, why: String) -> LegacyError {
    LegacyError::UnsafeArtifacts { path, why }
}

fn invalid_candidate(path: PathBuf, why: String) -> LegacyError {
    LegacyError::InvalidCandidate { path, why }
}

/// `session.directoryMigration`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MigrationPolicy {
    /// Copy a legacy session into the v2 scope when it is opened for writing; keep the source.
    #[default]
    CopyRetain,
    /// List legacy sessions read-only; opening one for writing fails.
    Disabled,
}

/// Where a candidate lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provenance {
    /// In the v2 scope.
    V2,
    /// In a legacy directory, not (or not visibly) migrated.
    Legacy,
    /// In the v2 scope, the committed copy of a legacy session.
    MigratedV2,
}

impl Provenance {
    /// The provenance's name: `v2`, `legacy` or `migrated_v2`.
    pub fn as_str(self) -> &'static str {
        match self {
            Provenance::V2 => "v2",
            Provenance::Legacy => "legacy",
            Provenance::MigratedV2 => "migrated_v2",
        }
    }
}

/// The exact version of a file a candidate was listed with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileIdentity {
    /// The device the file is on (on Windows, the volume serial number).
    pub dev: u64,
    /// The file's inode number (on Windows, its file index).
    pub ino: u64,
    /// The file's length, bytes.
    pub size: u64,
    /// Modification time in nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// Lower-case hex SHA-256 of the whole file.
    pub sha256: String,
}

/// A session of the workspace, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The transcript's path, in the v2 scope or a legacy directory.
    pub path: PathBuf,
    /// The header's session `id`.
    pub session_id: String,
    /// The header's cwd, as written.
    pub cwd: String,
    /// Where the transcript lives.
    pub provenance: Provenance,
    /// The exact file version that was listed; operations on the candidate refuse any other.
    pub identity: FileIdentity,
}

impl Candidate {
    /// The name of operations on this exact file version (`op`).
    pub fn operation_name(&self) -> String {
        operation_name(&self.path, &self.identity)
    }
}

fn operation_name(path: &Path, id: &FileIdentity) -> String {
    let mut hasher = Sha256::new();
    hasher.update(path.as_os_str().as_encoded_bytes());
    for part in [
        id.dev.to_string(),
        id.ino.to_string(),
        id.size.to_string(),
        id.mtime_ns.to_string(),
        id.sha256.clone(),
    ] {
        hasher.update([0u8]);
        hasher.update(part.as_bytes());
    }
    crate::format::blob::hex(&hasher.finalize())
}

/// A transcript that was skipped because it cannot be attributed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidCandidate {
    /// The transcript's path.
    pub path: PathBuf,
    /// `invalid_header`, `unreadable_candidate`, `source_changed`, `cwd_not_found`,
    /// `cwd_not_directory`, `cwd_network_unsupported` or `cwd_identity_unavailable`.
    pub code: &'static str,
}

/// The sessions of one workspace, v2 scope first, then the legacy directories.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CandidateListing {
    /// The transcripts whose header cwd resolves to this workspace, v2 scope first, then the
    /// legacy directories; retired ones and migrated legacy sources left out.
    pub owned: Vec<Candidate>,
    /// Transcripts whose header cwd is another workspace.
    pub foreign: Vec<PathBuf>,
    /// Transcripts that cannot be attributed (a malformed header, a cwd that cannot be
    /// resolved, a file that cannot be read), with the reason for each.
    pub invalid: Vec<InvalidCandidate>,
}

/// The roots the home- and temp-relative legacy names are taken against.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LegacyRoots {
    /// The home directory; `None` when unknown, and then no home-relative name is tried.
    pub home: Option<PathBuf>,
    /// The temporary directory; `None` when unknown, and then no temp-relative name is tried.
    pub tmp: Option<PathBuf>,
}

impl LegacyRoots {
    /// The process's home directory and temporary directory.
    pub fn current() -> Self {
        LegacyRoots {
            home: std::env::home_dir().filter(|h| !h.as_os_str().is_empty()),
            tmp: Some(std::env::temp_dir()),
        }
    }
}

/// A workspace: its canonical identity and the lexical absolute spelling it was given as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    /// The canonical identity, which names the v2 scope and decides which transcripts are
    /// the workspace's own.
    pub identity: Identity,
    /// The cwd as given, made absolute against the current directory and normalised
    /// lexically (symlinks not resolved).
    pub lexical_cwd: PathBuf,
}

impl Workspace {
    /// The workspace at `cwd` on the local filesystem ([`Workspace::resolve_in`]). Fails
    /// when `cwd` is not an existing local directory with a UTF-8 path, or when it is
    /// relative and the current directory cannot be read.
    pub fn resolve(cwd: &Path) -> Result<Self, LegacyError> {
        Self::resolve_in(&FileStorage, cwd)
    }

    /// The workspace at `cwd` in `storage`.
    pub fn resolve_in(storage: &dyn SessionStorage, cwd: &Path) -> Result<Self, LegacyError> {
        Ok(Workspace {
            identity: resolve_identity_in(storage, cwd)?,
            lexical_cwd: absolute(cwd)?,
        })
    }

    /// `<sessions root>/v2-<digest>`.
    pub fn scope_dir(&self, sessions_root: &Path) -> PathBuf {
        sessions_root.join(scope_dir_name(&self.identity))
    }

    fn digest(&self) -> String {
        digest(self.identity.platform, &self.identity.canonical_path)
    }
}

/// `path` made absolute against the current directory and normalised lexically.
fn absolute(path: &Path) -> Result<PathBuf, LegacyError> {
    if path.is_absolute() {
        return Ok(normalize(path));
    }
    let cwd = std::env::current_dir().map_err(io_err(path))?;
    Ok(normalize(&cwd.join(path)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_names_cover_every_identity_field() {
        let id = FileIdentity {
            dev: 1,
            ino: 2,
            size: 3,
            mtime_ns: 4,
            sha256: "a".repeat(64),
        };
        let base = operation_name(Path::new("/s/-x/f.jsonl"), &id);
        assert_eq!(base.len(), 64);
        let variants = [
            FileIdentity {
                dev: 9,
                ..id.clone()
            },
            FileIdentity {
                ino: 9,
                ..id.clone()
            },
            FileIdentity {
                size: 9,
                ..id.clone()
            },
            FileIdentity {
                mtime_ns: 9,
                ..id.clone()
            },
            FileIdentity {
                sha256: "b".repeat(64),
                ..id.clone()
            },
        ];
        for v in variants {
            assert_ne!(operation_name(Path::new("/s/-x/f.jsonl"), &v), base);
        }
        assert_ne!(operation_name(Path::new("/s/-y/f.jsonl"), &id), base);
        // Field boundaries are NUL-separated: "1"+"23" differs from "12"+"3".
        let a = FileIdentity {
            dev: 1,
            ino: 23,
            ..id.clone()
        };
        let b = FileIdentity {
            dev: 12,
            ino: 3,
            ..id
        };
        assert_ne!(
            operation_name(Path::new("/p"), &a),
            operation_name(Path::new("/p"), &b)
        );
    }
}
