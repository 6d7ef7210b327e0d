//! Legacy session directories, managed candidates, copy-retain migration into the v2 scope,
//! and tombstones (details §12.5).
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
//!   published by a no-replace rename before the transcript; if staging or publishing fails,
//!   what this attempt made is removed again.
//! - Receipts and tombstones are trusted only as owner-only (`0600`, one link, no ACL)
//!   regular files of the scope; anything else is ignored, never followed.
//! - Everything created is owner-only: directories `0700`, files `0600`.
//!
//! A destination transcript that already holds exactly the source's bytes as an owner-only
//! file with one link (and, when the source has artifacts, an artifacts directory with
//! exactly the same manifest) is taken as the result of an interrupted earlier attempt of
//! the same operation and completed with a receipt instead of failing.

use std::collections::HashSet;
use std::ffi::CString;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::agent_dir::normalize;
use super::ids::snowflake;
use super::json::{self, Object, Value};
use super::scope::{
    check_binding, digest, prepare_scope, read_binding, resolve_identity, scope_dir_name,
    verify_owner_only, Identity, ScopeError, BINDING_FILE, INTERNAL_DIR,
};
use super::storage::FileStorage;
use super::time::now_millis;

/// How much of a transcript's start may hold its header line.
pub const HEADER_MAX_BYTES: usize = 64 * 1024;
/// How many other `-*` directories of the sessions root are scanned.
pub const MAX_DISCOVERED_LEGACY_DIRS: usize = 256;
/// Artifact copy bounds.
pub const ARTIFACT_MAX_DEPTH: usize = 32;
pub const ARTIFACT_MAX_FILES: usize = 50_000;
pub const ARTIFACT_MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;
pub const ARTIFACT_MAX_TOTAL_BYTES: u64 = 512 * 1024 * 1024;
/// Lock lease, renewal margin and how long to wait for a live holder, in milliseconds.
pub const LOCK_LEASE_MS: i64 = 60_000;
pub const LOCK_HEARTBEAT_MS: i64 = 10_000;
pub const LOCK_WAIT_MS: u64 = 5_000;
/// How often to retry a held lock.
const LOCK_POLL: Duration = Duration::from_millis(50);
/// How often a long copy re-checks (and renews) its lock.
const LOCK_CHECK_INTERVAL: Duration = Duration::from_secs(1);

const LOCKS: &str = "locks";
const RECEIPTS: &str = "receipts";
const TOMBSTONES: &str = "tombstones";

#[derive(Debug, thiserror::Error)]
pub enum LegacyError {
    #[error("{path}: migration_busy: another process holds {lock}")]
    MigrationBusy { path: PathBuf, lock: PathBuf },
    #[error("{path}: legacy_migration_disabled: the directory migration policy is \"disabled\"")]
    MigrationDisabled { path: PathBuf },
    #[error("{path}: destination_conflict: {why}")]
    DestinationConflict { path: PathBuf, why: String },
    #[error("{path}: source_changed: {why}")]
    SourceChanged { path: PathBuf, why: String },
    #[error("{path}: unsafe_artifacts: {why}")]
    UnsafeArtifacts { path: PathBuf, why: String },
    #[error("{path}: artifact_capacity_exceeded: {why}")]
    ArtifactCapacityExceeded { path: PathBuf, why: String },
    #[error("{path}: migration_retired: a tombstone retires this session")]
    MigrationRetired { path: PathBuf },
    #[error("{path}: invalid_candidate: {why}")]
    InvalidCandidate { path: PathBuf, why: String },
    #[error("{path}: unsafe_root: {why}")]
    UnsafeDirectory { path: PathBuf, why: String },
    #[error("{path}: durability_failed: {why}")]
    DurabilityFailed { path: PathBuf, why: String },
    #[error(transparent)]
    Scope(#[from] ScopeError),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
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
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i128,
    /// Lower-case hex SHA-256 of the whole file.
    pub sha256: String,
}

/// A session of the workspace, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub path: PathBuf,
    pub session_id: String,
    /// The header's cwd, as written.
    pub cwd: String,
    pub provenance: Provenance,
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
    hasher.update(path.as_os_str().as_bytes());
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
    data_encoding::HEXLOWER.encode(&hasher.finalize())
}

fn sha256_hex(bytes: &[u8]) -> String {
    data_encoding::HEXLOWER.encode(&Sha256::digest(bytes))
}

/// A transcript that was skipped because it cannot be attributed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidCandidate {
    pub path: PathBuf,
    /// `invalid_header`, `unreadable_candidate`, `source_changed`, `cwd_not_found`,
    /// `cwd_not_directory`, `cwd_network_unsupported` or `cwd_identity_unavailable`.
    pub code: &'static str,
}

/// The sessions of one workspace, v2 scope first, then the legacy directories.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CandidateListing {
    pub owned: Vec<Candidate>,
    /// Transcripts whose header cwd is another workspace.
    pub foreign: Vec<PathBuf>,
    pub invalid: Vec<InvalidCandidate>,
}

/// The roots the home- and temp-relative legacy names are taken against.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LegacyRoots {
    pub home: Option<PathBuf>,
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
    pub identity: Identity,
    pub lexical_cwd: PathBuf,
}

impl Workspace {
    pub fn resolve(cwd: &Path) -> Result<Self, LegacyError> {
        Ok(Workspace {
            identity: resolve_identity(cwd)?,
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

// ---------------------------------------------------------------------------------------------
// Legacy directory names
// ---------------------------------------------------------------------------------------------

fn encode_relative(text: &str) -> String {
    text.chars()
        .map(|c| {
            if matches!(c, '/' | '\\' | ':') {
                '-'
            } else {
                c
            }
        })
        .collect()
}

/// `--<path without its leading separator, with / \ : as ->--`.
pub fn encode_absolute(path: &str) -> String {
    let trimmed = path.strip_prefix(['/', '\\']).unwrap_or(path);
    format!("--{}--", encode_relative(trimmed))
}

/// `target` relative to `root` with `/` separators (`""` when equal), or `None` when it is
/// not inside `root`.
fn relative_to(root: &Path, target: &Path) -> Option<String> {
    let rel = target.strip_prefix(root).ok()?;
    let parts: Option<Vec<&str>> = rel.components().map(|c| c.as_os_str().to_str()).collect();
    Some(parts?.join("/"))
}

fn lexical_root(root: &Path) -> PathBuf {
    absolute(root).unwrap_or_else(|_| normalize(root))
}

fn canonical_root(root: &Path) -> PathBuf {
    fs::canonicalize(root)
        .ok()
        .filter(|p| p.is_dir())
        .unwrap_or_else(|| lexical_root(root))
}

/// The legacy directory names a workspace may have been stored under, in the original's
/// order: the absolute encodings of the canonical and the lexical cwd, then the home-relative
/// forms (`-<rel>`, `---<rel>--` or `----`, `--<encHome>-<rel>--` or `--<encHome>--`), then
/// the temp-relative forms (`-tmp[-<rel>]`, `---tmp[-<rel>]--`). A relative form is taken
/// against the root's real path first, else against its lexical spelling.
pub fn legacy_dir_names(
    canonical_cwd: &str,
    lexical_cwd: &Path,
    roots: &LegacyRoots,
) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut add = |name: String| {
        if !names.contains(&name) {
            names.push(name);
        }
    };
    add(encode_absolute(canonical_cwd));
    if let Some(lexical) = lexical_cwd.to_str() {
        add(encode_absolute(lexical));
    }
    let canonical = Path::new(canonical_cwd);
    let relative = |root: &Path| {
        relative_to(&canonical_root(root), canonical)
            .or_else(|| relative_to(&lexical_root(root), lexical_cwd))
    };
    if let Some(home) = &roots.home {
        if let (Some(rel), Some(home_text)) = (relative(home), home.to_str()) {
            let enc_home = encode_relative(home_text);
            let enc_rel = encode_relative(&rel);
            add(format!("-{enc_rel}"));
            if rel.is_empty() {
                add("----".to_owned());
                add(format!("--{enc_home}--"));
            } else {
                add(format!("---{enc_rel}--"));
                add(format!("--{enc_home}-{enc_rel}--"));
            }
        }
    }
    if let Some(tmp) = &roots.tmp {
        if let Some(rel) = relative(tmp) {
            let suffix = if rel.is_empty() {
                String::new()
            } else {
                format!("-{}", encode_relative(&rel))
            };
            add(format!("-tmp{suffix}"));
            add(format!("---tmp{suffix}--"));
        }
    }
    names
}

/// The legacy directories to scan for `ws`: its own names, then up to 256 other directories
/// of the sessions root whose names start with `-` (sorted; symlinks, `v2-*` and the internal
/// directory excluded). Directories that do not exist are included; they list as empty.
pub fn legacy_dirs(
    sessions_root: &Path,
    ws: &Workspace,
    roots: &LegacyRoots,
) -> Result<Vec<String>, LegacyError> {
    let mut names = legacy_dir_names(&ws.identity.canonical_path, &ws.lexical_cwd, roots);
    let entries = match fs::read_dir(sessions_root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(names),
        Err(e) => return Err(io_err(sessions_root)(e)),
    };
    let mut discovered = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io_err(sessions_root))?;
        let is_dir = entry.file_type().map_err(io_err(&entry.path()))?.is_dir();
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if is_dir
            && name.starts_with('-')
            && !name.starts_with("v2-")
            && name != INTERNAL_DIR
            && !names.contains(&name)
        {
            discovered.push(name);
        }
    }
    discovered.sort();
    discovered.truncate(MAX_DISCOVERED_LEGACY_DIRS);
    names.extend(discovered);
    Ok(names)
}

// ---------------------------------------------------------------------------------------------
// Reading files without following symlinks
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    nlink: u64,
}

impl Stat {
    fn of(meta: &Metadata) -> Self {
        Stat {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128,
            nlink: meta.nlink(),
        }
    }

    /// Same object, same size, same mtime.
    fn same_version(&self, other: &Stat) -> bool {
        self.dev == other.dev
            && self.ino == other.ino
            && self.size == other.size
            && self.mtime_ns == other.mtime_ns
    }
}

fn open_no_follow(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
}

fn create_owner_only(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

fn create_owner_only_dir(path: &Path) -> io::Result<()> {
    fs::DirBuilder::new().mode(0o700).create(path)
}

fn sync_dir(dir: &Path) -> Result<(), LegacyError> {
    super::storage::open_dir(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| LegacyError::DurabilityFailed {
            path: dir.to_owned(),
            why: e.to_string(),
        })
}

/// A whole file read through one no-follow descriptor.
struct Snapshot {
    bytes: Vec<u8>,
    stat: Stat,
    sha256: String,
}

enum CaptureError {
    /// Missing, a symlink, not a regular file, or a read error.
    Unreadable,
    /// The file changed while it was read, or the name now points at another file.
    Changed,
}

fn capture(path: &Path) -> Result<Snapshot, CaptureError> {
    let (file, before) = open_regular(path)?;
    finish_capture(path, file, &before, Vec::new())
}

/// Opens `path` without following a symlink; it must be a regular file.
fn open_regular(path: &Path) -> Result<(File, Metadata), CaptureError> {
    let file = open_no_follow(path).map_err(|_| CaptureError::Unreadable)?;
    let before = file.metadata().map_err(|_| CaptureError::Unreadable)?;
    if !before.is_file() {
        return Err(CaptureError::Unreadable);
    }
    Ok((file, before))
}

/// Reads the rest of `file` after `bytes` (its start, already read) and checks that neither
/// the file nor the name changed meanwhile.
fn finish_capture(
    path: &Path,
    mut file: File,
    before: &Metadata,
    mut bytes: Vec<u8>,
) -> Result<Snapshot, CaptureError> {
    let unreadable = |_| CaptureError::Unreadable;
    bytes.reserve((before.len() as usize).saturating_sub(bytes.len()));
    file.read_to_end(&mut bytes).map_err(unreadable)?;
    let after = Stat::of(&file.metadata().map_err(unreadable)?);
    let named = fs::symlink_metadata(path).map_err(unreadable)?;
    if !named.file_type().is_file()
        || !Stat::of(before).same_version(&after)
        || !after.same_version(&Stat::of(&named))
        || bytes.len() as u64 != after.size
    {
        return Err(CaptureError::Changed);
    }
    Ok(Snapshot {
        sha256: sha256_hex(&bytes),
        bytes,
        stat: after,
    })
}

/// The header's `id` and `cwd`, when the first line (within 64 KiB) is a session header.
fn header_fields(bytes: &[u8]) -> Option<(String, String)> {
    let window = &bytes[..bytes.len().min(HEADER_MAX_BYTES)];
    let end = memchr::memchr(b'\n', window)?;
    let value = json::parse(&String::from_utf8_lossy(&window[..end])).ok()?;
    let header = value.as_object()?;
    if header.get_str("type") != Some("session") {
        return None;
    }
    Some((
        header.get_str("id")?.to_owned(),
        header.get_str("cwd")?.to_owned(),
    ))
}

enum Ownership {
    Owned,
    Foreign,
    Invalid(&'static str),
}

fn ownership(cwd: &str, identity: &Identity) -> Ownership {
    match resolve_identity(Path::new(cwd)) {
        Ok(resolved) if &resolved == identity => Ownership::Owned,
        Ok(_) => Ownership::Foreign,
        Err(ScopeError::NetworkUnsupported { .. }) => Ownership::Invalid("cwd_network_unsupported"),
        Err(_) => match fs::metadata(cwd) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ownership::Invalid("cwd_not_found"),
            Ok(meta) if !meta.is_dir() => Ownership::Invalid("cwd_not_directory"),
            _ => Ownership::Invalid("cwd_identity_unavailable"),
        },
    }
}

enum Inspection {
    Owned(Box<(Candidate, Snapshot)>),
    Foreign,
    Invalid(&'static str),
}

/// Attributes one transcript. Only the header window is read of a file that turns out not to
/// be owned; an owned one is read whole and hashed.
fn inspect(path: &Path, provenance: Provenance, identity: &Identity) -> Inspection {
    let failed = |e: CaptureError| match e {
        CaptureError::Changed => Inspection::Invalid("source_changed"),
        CaptureError::Unreadable => Inspection::Invalid("unreadable_candidate"),
    };
    let (mut file, before) = match open_regular(path) {
        Ok(opened) => opened,
        Err(e) => return failed(e),
    };
    let mut start = Vec::new();
    if (&mut file)
        .take(HEADER_MAX_BYTES as u64)
        .read_to_end(&mut start)
        .is_err()
    {
        return Inspection::Invalid("unreadable_candidate");
    }
    let Some((session_id, cwd)) = header_fields(&start) else {
        return Inspection::Invalid("invalid_header");
    };
    match ownership(&cwd, identity) {
        Ownership::Owned => {}
        Ownership::Foreign => return Inspection::Foreign,
        Ownership::Invalid(code) => return Inspection::Invalid(code),
    }
    let snapshot = match finish_capture(path, file, &before, start) {
        Ok(s) => s,
        Err(e) => return failed(e),
    };
    let candidate = Candidate {
        path: path.to_owned(),
        session_id,
        cwd,
        provenance,
        identity: FileIdentity {
            dev: snapshot.stat.dev,
            ino: snapshot.stat.ino,
            size: snapshot.stat.size,
            mtime_ns: snapshot.stat.mtime_ns,
            sha256: snapshot.sha256.clone(),
        },
    };
    Inspection::Owned(Box::new((candidate, snapshot)))
}

/// Re-reads `candidate` and returns its bytes when it is still exactly the listed version.
fn revalidate(candidate: &Candidate, identity: &Identity) -> Result<Snapshot, LegacyError> {
    let stale = |why: &str| why_changed(&candidate.path, why);
    match inspect(&candidate.path, candidate.provenance, identity) {
        Inspection::Owned(found) => {
            let (current, snapshot) = *found;
            if current.identity != candidate.identity {
                return Err(stale("the file differs from the listed version"));
            }
            if current.session_id != candidate.session_id || current.cwd != candidate.cwd {
                return Err(stale("the header differs from the listed one"));
            }
            Ok(snapshot)
        }
        Inspection::Foreign => Err(stale("the header now names another workspace")),
        Inspection::Invalid(code) => Err(stale(code)),
    }
}

fn why_changed(path: &Path, text: &str) -> LegacyError {
    why(path, changed, text)
}

/// The `*.jsonl` files of `dir`, by name; a missing directory has none.
fn transcript_paths(dir: &Path) -> Result<Vec<PathBuf>, LegacyError> {
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(dir)(e)),
        Ok(meta) if !meta.file_type().is_dir() => {
            return Err(LegacyError::UnsafeDirectory {
                path: dir.to_owned(),
                why: "not a real directory (a symlink or another file type)".into(),
            })
        }
        Ok(_) => {}
    }
    let mut paths = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_err(dir))? {
        let entry = entry.map_err(io_err(dir))?;
        if entry.file_name().as_bytes().ends_with(b".jsonl") {
            paths.push(entry.path());
        }
    }
    paths.sort();
    Ok(paths)
}

/// An existing scope directory must be owner-only and carry the right binding (if any).
fn verify_existing_scope(scope_dir: &Path, identity: &Identity) -> Result<(), LegacyError> {
    match fs::symlink_metadata(scope_dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(scope_dir)(e)),
        Ok(_) => {}
    }
    verify_owner_only(&FileStorage, scope_dir, true)?;
    let binding = scope_dir.join(BINDING_FILE);
    if let Some(bytes) = read_binding(&FileStorage, &binding)? {
        check_binding(&binding, &bytes, identity)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Receipts and tombstones
// ---------------------------------------------------------------------------------------------

fn string(text: impl Into<String>) -> Value {
    Value::string(text.into())
}

fn object(pairs: Vec<(&str, Value)>) -> Value {
    let mut o = Object::with_capacity(pairs.len());
    for (key, value) in pairs {
        o.insert(key, value);
    }
    Value::Object(o)
}

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// `{dev, ino, size, mtimeNs}`; 64-bit values as decimal strings.
fn identity_json(id: &FileIdentity) -> Value {
    object(vec![
        ("dev", string(id.dev.to_string())),
        ("ino", string(id.ino.to_string())),
        ("size", Value::number(id.size as f64)),
        ("mtimeNs", string(id.mtime_ns.to_string())),
    ])
}

fn decimal<T: std::str::FromStr>(value: Option<&Value>) -> Option<T> {
    let text = value?.as_str()?;
    let canonical = text == "0" || (!text.starts_with('0') && !text.starts_with('-'));
    if !canonical || text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

fn parse_identity(value: Option<&Value>, sha256: &str) -> Option<FileIdentity> {
    let o = value?.as_object()?;
    let size = o.get("size")?.as_f64()?;
    if !(size >= 0.0 && size.fract() == 0.0 && size <= 9_007_199_254_740_991.0) {
        return None;
    }
    let is_hex = sha256.len() == 64
        && sha256
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !is_hex {
        return None;
    }
    Some(FileIdentity {
        dev: decimal(o.get("dev"))?,
        ino: decimal(o.get("ino"))?,
        size: size as u64,
        mtime_ns: decimal(o.get("mtimeNs"))?,
        sha256: sha256.to_owned(),
    })
}

/// A file recorded in a receipt or tombstone.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RecordedFile {
    path: String,
    session_id: String,
    cwd: String,
    identity: FileIdentity,
}

impl RecordedFile {
    fn is(&self, candidate: &Candidate) -> bool {
        Path::new(&self.path) == candidate.path
            && self.session_id == candidate.session_id
            && self.cwd == candidate.cwd
            && self.identity == candidate.identity
    }
}

/// The parsed JSON of a receipt or tombstone that may be trusted: an owner-only regular file
/// with one link, read without following a symlink.
fn trusted_record(path: &Path) -> Option<Value> {
    verify_owner_only(&FileStorage, path, false).ok()?;
    let snapshot = capture(path).ok()?;
    let text = std::str::from_utf8(&snapshot.bytes).ok()?;
    json::parse(text).ok()
}

/// A committed receipt's destination.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ReceiptDestination {
    path: PathBuf,
    session_id: String,
}

/// What a scope's receipts and tombstones say.
struct ScopeRecords {
    scope_dir: PathBuf,
    digest: String,
    retired: Vec<RecordedFile>,
}

impl ScopeRecords {
    fn load(scope_dir: &Path, digest: &str) -> Self {
        let mut records = ScopeRecords {
            scope_dir: scope_dir.to_owned(),
            digest: digest.to_owned(),
            retired: Vec::new(),
        };
        let dir = scope_dir.join(INTERNAL_DIR).join(TOMBSTONES);
        let Ok(entries) = fs::read_dir(&dir) else {
            return records;
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        paths.sort();
        for path in paths {
            if let Some(value) = trusted_record(&path) {
                records.retired.extend(records.tombstone_targets(&value));
            }
        }
        records
    }

    fn internal(&self, sub: &str) -> PathBuf {
        self.scope_dir.join(INTERNAL_DIR).join(sub)
    }

    fn tombstone_targets(&self, value: &Value) -> Vec<RecordedFile> {
        let Some(o) = value.as_object() else {
            return Vec::new();
        };
        if o.get("schemaVersion").and_then(Value::as_f64) != Some(2.0)
            || o.get_str("state") != Some("retired")
            || o.get_str("scope") != Some(self.digest.as_str())
        {
            return Vec::new();
        }
        let Some(targets) = o.get("targets").and_then(Value::as_array) else {
            return Vec::new();
        };
        targets
            .iter()
            .filter_map(|t| {
                let t = t.as_object()?;
                let path = t.get_str("path")?;
                let id = t.get("identity")?.as_object()?;
                if id.get_str("canonicalPath") != Some(path) {
                    return None;
                }
                if !matches!(t.get_str("provenance"), None | Some("v2" | "legacy")) {
                    return None;
                }
                Some(RecordedFile {
                    path: path.to_owned(),
                    session_id: t.get_str("sessionId")?.to_owned(),
                    cwd: t.get_str("cwd")?.to_owned(),
                    identity: parse_identity(t.get("identity"), id.get_str("sha256")?)?,
                })
            })
            .collect()
    }

    fn retires(&self, candidate: &Candidate) -> bool {
        self.retired.iter().any(|r| r.is(candidate))
    }

    /// The source and destination of a trusted committed receipt of this scope.
    fn parse_receipt(&self, value: &Value) -> Option<(RecordedFile, ReceiptDestination)> {
        let o = value.as_object()?;
        if o.get("schemaVersion").and_then(Value::as_f64) != Some(2.0)
            || o.get_str("state") != Some("committed")
            || o.get_str("policy") != Some("copy-retain")
            || o.get_str("scope") != Some(self.digest.as_str())
            || o.get_str("attemptId").is_none_or(str::is_empty)
            || !valid_manifest(o.get("artifactManifest")?)
        {
            return None;
        }
        let source = o.get("source")?.as_object()?;
        let header = source.get("header")?.as_object()?;
        let session_id = source.get_str("sessionId")?;
        if header.get_str("id") != Some(session_id) {
            return None;
        }
        let recorded = RecordedFile {
            path: source.get_str("path")?.to_owned(),
            session_id: session_id.to_owned(),
            cwd: header.get_str("cwd")?.to_owned(),
            identity: parse_identity(source.get("identity"), source.get_str("sha256")?)?,
        };
        let destination = o.get("destination")?.as_object()?;
        let path = PathBuf::from(destination.get_str("path")?);
        if path.parent() != Some(self.scope_dir.as_path()) {
            return None;
        }
        Some((
            recorded,
            ReceiptDestination {
                path,
                session_id: destination.get_str("sessionId")?.to_owned(),
            },
        ))
    }

    /// Where the committed receipt of `source` (this exact version) says it was copied.
    fn committed_receipt(&self, source: &Candidate) -> Option<ReceiptDestination> {
        let path = self
            .internal(RECEIPTS)
            .join(format!("{}.json", source.operation_name()));
        let (recorded, destination) = self.parse_receipt(&trusted_record(&path)?)?;
        recorded.is(source).then_some(destination)
    }

    /// The legacy sources whose committed receipts name `destination`.
    fn sources_copied_to(&self, destination: &Path, session_id: &str) -> Vec<RecordedFile> {
        let Ok(entries) = fs::read_dir(self.internal(RECEIPTS)) else {
            return Vec::new();
        };
        let mut sources = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let Some(stem) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".json"))
            else {
                continue;
            };
            let Some((source, dest)) = trusted_record(&path).and_then(|v| self.parse_receipt(&v))
            else {
                continue;
            };
            let named_for_source = operation_name(Path::new(&source.path), &source.identity);
            if dest.path == destination && dest.session_id == session_id && named_for_source == stem
            {
                sources.push(source);
            }
        }
        sources.sort_by(|a, b| a.path.cmp(&b.path));
        sources
    }
}

fn valid_manifest(value: &Value) -> bool {
    let Some(entries) = value.as_array() else {
        return false;
    };
    entries.iter().all(|entry| {
        let Some(e) = entry.as_object() else {
            return false;
        };
        let Some(path) = e.get_str("path") else {
            return false;
        };
        if path.starts_with('/') || path.split(['/', '\\']).any(|p| p == "..") {
            return false;
        }
        match e.get_str("kind") {
            Some("directory") => true,
            Some("file") => {
                let sha_ok = e.get_str("sha256").is_some_and(|s| {
                    s.len() == 64
                        && s.bytes()
                            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                });
                let size_ok = e
                    .get("size")
                    .and_then(Value::as_f64)
                    .is_some_and(|s| s >= 0.0 && s.fract() == 0.0);
                sha_ok && size_ok
            }
            _ => false,
        }
    })
}

/// Writes a record (receipt or tombstone) as `<json>\n` through a temp file renamed over
/// `path`, then makes the directory durable. Called only under the operation's lock, which
/// is what makes replacing a stale record at the same name safe.
fn write_record(path: &Path, value: &Value) -> Result<(), LegacyError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(".{name}.{}.tmp", snowflake()));
    let mut bytes = json::to_compact(value).into_bytes();
    bytes.push(b'\n');
    let result = create_owner_only(&temp)
        .and_then(|mut f| {
            f.write_all(&bytes)?;
            f.sync_all()
        })
        .and_then(|()| fs::rename(&temp, path));
    if let Err(e) = result {
        let _ = fs::remove_file(&temp);
        return Err(io_err(path)(e));
    }
    sync_dir(dir)
}

// ---------------------------------------------------------------------------------------------
// Listing
// ---------------------------------------------------------------------------------------------

/// The sessions of the workspace at `cwd`: the v2 scope first, then its legacy directories.
/// Retired candidates are hidden; a legacy candidate whose committed receipt names a listed
/// v2 copy is hidden and that copy is marked [`Provenance::MigratedV2`]. Creates nothing.
pub fn list_candidates(
    sessions_root: &Path,
    cwd: &Path,
    roots: &LegacyRoots,
) -> Result<CandidateListing, LegacyError> {
    let ws = Workspace::resolve(cwd)?;
    let root = absolute(sessions_root)?;
    match fs::symlink_metadata(&root) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(CandidateListing::default()),
        Err(e) => return Err(io_err(&root)(e)),
        Ok(meta) if !meta.file_type().is_dir() => {
            return Err(LegacyError::UnsafeDirectory {
                path: root,
                why: "the sessions root is not a real directory".into(),
            })
        }
        Ok(_) => {}
    }
    let scope_dir = ws.scope_dir(&root);
    verify_existing_scope(&scope_dir, &ws.identity)?;
    let mut dirs = vec![(scope_dir.clone(), Provenance::V2)];
    for name in legacy_dirs(&root, &ws, roots)? {
        dirs.push((root.join(name), Provenance::Legacy));
    }
    let mut listing = CandidateListing::default();
    let mut seen = HashSet::new();
    for (dir, provenance) in dirs {
        for path in transcript_paths(&dir)? {
            if !seen.insert(path.clone()) {
                continue;
            }
            match inspect(&path, provenance, &ws.identity) {
                Inspection::Owned(found) => listing.owned.push(found.0),
                Inspection::Foreign => listing.foreign.push(path),
                Inspection::Invalid(code) => listing.invalid.push(InvalidCandidate { path, code }),
            }
        }
    }
    let records = ScopeRecords::load(&scope_dir, &ws.digest());
    listing.owned.retain(|c| !records.retires(c));
    let mut hidden = vec![false; listing.owned.len()];
    let mut migrated = vec![false; listing.owned.len()];
    for (i, source) in listing.owned.iter().enumerate() {
        if source.provenance != Provenance::Legacy {
            continue;
        }
        let Some(dest) = records.committed_receipt(source) else {
            continue;
        };
        let copy = listing.owned.iter().position(|c| {
            c.provenance != Provenance::Legacy
                && c.path == dest.path
                && c.session_id == dest.session_id
        });
        if let Some(j) = copy {
            hidden[i] = true;
            migrated[j] = true;
        }
    }
    let mut kept = Vec::with_capacity(listing.owned.len());
    for (i, mut candidate) in listing.owned.into_iter().enumerate() {
        if hidden[i] {
            continue;
        }
        if migrated[i] {
            candidate.provenance = Provenance::MigratedV2;
        }
        kept.push(candidate);
    }
    listing.owned = kept;
    Ok(listing)
}

// ---------------------------------------------------------------------------------------------
// The lease lock
// ---------------------------------------------------------------------------------------------

/// What a lock file holds.
#[derive(Debug, Clone, PartialEq)]
struct LockRecord {
    attempt_id: String,
    pid: i64,
    boot_id: Option<String>,
    process_start_id: String,
    created_at: i64,
    heartbeat_at: i64,
    lease_expires_at: i64,
    released: bool,
}

impl LockRecord {
    fn bytes(&self) -> Vec<u8> {
        let mut pairs = vec![
            ("attemptId", string(self.attempt_id.clone())),
            ("pid", Value::number(self.pid as f64)),
        ];
        if let Some(boot) = &self.boot_id {
            pairs.push(("bootId", string(boot.clone())));
        }
        pairs.extend([
            ("processStartId", string(self.process_start_id.clone())),
            ("createdAt", Value::number(self.created_at as f64)),
            ("heartbeatAt", Value::number(self.heartbeat_at as f64)),
            (
                "leaseExpiresAt",
                Value::number(self.lease_expires_at as f64),
            ),
        ]);
        if self.released {
            pairs.push(("released", Value::Bool(true)));
        }
        let mut bytes = json::to_compact(&object(pairs)).into_bytes();
        bytes.push(b'\n');
        bytes
    }

    fn parse(bytes: &[u8]) -> Option<Self> {
        let value = json::parse(std::str::from_utf8(bytes).ok()?).ok()?;
        let o = value.as_object()?;
        let int = |key: &str| {
            o.get(key)
                .and_then(Value::as_f64)
                .filter(|n| n.is_finite() && n.fract() == 0.0)
                .map(|n| n as i64)
        };
        Some(LockRecord {
            attempt_id: o.get_str("attemptId")?.to_owned(),
            pid: int("pid")?,
            boot_id: o.get_str("bootId").map(str::to_owned),
            process_start_id: o.get_str("processStartId")?.to_owned(),
            created_at: int("createdAt")?,
            heartbeat_at: int("heartbeatAt")?,
            lease_expires_at: int("leaseExpiresAt")?,
            released: o.get("released").and_then(Value::as_bool) == Some(true),
        })
    }
}

/// The kernel's boot id, where the platform has one.
fn boot_id() -> Option<&'static str> {
    static BOOT: OnceLock<Option<String>> = OnceLock::new();
    BOOT.get_or_init(|| {
        fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .ok()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    })
    .as_deref()
}

/// `<pid>:<start time in clock ticks>` from `/proc/<pid>/stat`, when readable.
fn proc_start_id(pid: i64) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 22 (starttime); fields after the parenthesised command name start at field 3.
    let after = &stat[stat.rfind(')')? + 1..];
    let start = after.split_whitespace().nth(19)?;
    Some(format!("{pid}:{start}"))
}

/// An id of this process that another process with the same pid would not have.
pub fn current_process_start_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        proc_start_id(std::process::id() as i64)
            .unwrap_or_else(|| format!("uuid:{}", uuid::Uuid::new_v4()))
    })
}

/// Whether the process that wrote `record` certainly no longer runs.
fn owner_gone(record: &LockRecord) -> bool {
    if let (Some(theirs), Some(ours)) = (record.boot_id.as_deref(), boot_id()) {
        if theirs != ours {
            return true;
        }
    }
    let Ok(pid) = i32::try_from(record.pid) else {
        return true;
    };
    if pid <= 0 {
        return true;
    }
    // pid is positive, so this never addresses a process group.
    if !super::storage::sys::unix::process_exists(pid) {
        return true;
    }
    let actual = if pid as u32 == std::process::id() {
        Some(current_process_start_id().to_owned())
    } else {
        proc_start_id(pid as i64)
    };
    actual.is_some_and(|id| id != record.process_start_id)
}

/// A held `locks/<op>.lock`.
#[derive(Debug)]
struct MigrationLock {
    path: PathBuf,
    dir: PathBuf,
    file: File,
    dev: u64,
    ino: u64,
    record: LockRecord,
    last_check: Instant,
    released: bool,
}

impl MigrationLock {
    /// Takes the lock, waiting up to [`LOCK_WAIT_MS`] for a live holder. A lock that was
    /// released, or whose lease expired and whose holder certainly no longer runs (or that
    /// cannot be parsed and is older than a lease), is taken over.
    fn acquire(dir: &Path, op: &str, subject: &Path) -> Result<Self, LegacyError> {
        let path = dir.join(format!("{op}.lock"));
        let deadline = Instant::now() + Duration::from_millis(LOCK_WAIT_MS);
        loop {
            let now = now_millis();
            let record = LockRecord {
                attempt_id: uuid::Uuid::new_v4().to_string(),
                pid: std::process::id() as i64,
                boot_id: boot_id().map(str::to_owned),
                process_start_id: current_process_start_id().to_owned(),
                created_at: now,
                heartbeat_at: now,
                lease_expires_at: now + LOCK_LEASE_MS,
                released: false,
            };
            match create_owner_only(&path) {
                Ok(mut file) => {
                    let written = file
                        .write_all(&record.bytes())
                        .and_then(|()| file.sync_all())
                        .and_then(|()| file.metadata());
                    let meta = match written {
                        Ok(meta) => meta,
                        Err(e) => {
                            let _ = fs::remove_file(&path);
                            return Err(io_err(&path)(e));
                        }
                    };
                    let lock = MigrationLock {
                        dev: meta.dev(),
                        ino: meta.ino(),
                        path,
                        dir: dir.to_owned(),
                        file,
                        record,
                        last_check: Instant::now(),
                        released: false,
                    };
                    sync_dir(dir)?;
                    return Ok(lock);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    if Self::reclaim_if_stale(dir, &path) && Instant::now() < deadline {
                        continue;
                    }
                }
                Err(e) => return Err(io_err(&path)(e)),
            }
            if Instant::now() >= deadline {
                return Err(LegacyError::MigrationBusy {
                    path: subject.to_owned(),
                    lock: path,
                });
            }
            std::thread::sleep(LOCK_POLL);
        }
    }

    /// Removes the lock at `path` if it is stale; true when it was removed.
    fn reclaim_if_stale(dir: &Path, path: &Path) -> bool {
        let Ok(meta) = fs::symlink_metadata(path) else {
            // Gone meanwhile: just try again.
            return true;
        };
        let observed = Stat::of(&meta);
        let stale = match capture(path).ok().and_then(|s| LockRecord::parse(&s.bytes)) {
            Some(owner) => {
                owner.released || (owner.lease_expires_at < now_millis() && owner_gone(&owner))
            }
            None => {
                let mtime_ms = (observed.mtime_ns / 1_000_000) as i64;
                mtime_ms + LOCK_LEASE_MS < now_millis()
            }
        };
        if !stale {
            return false;
        }
        // Move the observed file aside and remove it only if it is still the one observed;
        // a lock created meanwhile by someone else is put back.
        let aside = dir.join(format!(".gjc-lock-{}.stale", uuid::Uuid::new_v4()));
        if fs::rename(path, &aside).is_err() {
            return false;
        }
        let same = fs::symlink_metadata(&aside).is_ok_and(|m| {
            let s = Stat::of(&m);
            s.dev == observed.dev && s.ino == observed.ino
        });
        if !same {
            let _ = fs::hard_link(&aside, path);
        }
        let _ = fs::remove_file(&aside);
        let _ = sync_dir(dir);
        same
    }

    fn busy(&self) -> LegacyError {
        LegacyError::MigrationBusy {
            path: self.path.clone(),
            lock: self.path.clone(),
        }
    }

    fn rewrite(&mut self, record: &LockRecord) -> io::Result<()> {
        let bytes = record.bytes();
        self.file.write_all_at(&bytes, 0)?;
        self.file.set_len(bytes.len() as u64)?;
        self.file.sync_all()
    }

    /// Fencing: fails with `migration_busy` unless the lock file is still ours; renews the
    /// lease when less than a heartbeat of it is left.
    fn assert_owned(&mut self) -> Result<(), LegacyError> {
        self.last_check = Instant::now();
        let named = fs::symlink_metadata(&self.path).map_err(|_| self.busy())?;
        let current = capture(&self.path)
            .ok()
            .and_then(|s| LockRecord::parse(&s.bytes));
        let ours = !self.released
            && named.dev() == self.dev
            && named.ino() == self.ino
            && current
                .as_ref()
                .is_some_and(|c| !c.released && c.attempt_id == self.record.attempt_id);
        if !ours {
            return Err(self.busy());
        }
        let now = now_millis();
        if current.is_some_and(|c| c.lease_expires_at < now + LOCK_HEARTBEAT_MS) {
            let mut renewed = self.record.clone();
            renewed.heartbeat_at = now;
            renewed.lease_expires_at = now + LOCK_LEASE_MS;
            self.rewrite(&renewed).map_err(io_err(&self.path))?;
            self.record = renewed;
        }
        Ok(())
    }

    /// [`Self::assert_owned`] at most once a second, for long copies.
    fn heartbeat(&mut self) -> Result<(), LegacyError> {
        if self.last_check.elapsed() >= LOCK_CHECK_INTERVAL {
            self.assert_owned()?;
        }
        Ok(())
    }

    /// Marks the lock released (the file stays, as the original leaves it).
    fn release(mut self) -> Result<(), LegacyError> {
        self.release_in_place()
    }

    fn release_in_place(&mut self) -> Result<(), LegacyError> {
        self.assert_owned()?;
        let now = now_millis();
        let mut done = self.record.clone();
        done.released = true;
        done.heartbeat_at = now;
        done.lease_expires_at = now;
        self.released = true;
        self.rewrite(&done).map_err(io_err(&self.path))?;
        sync_dir(&self.dir)
    }
}

impl Drop for MigrationLock {
    fn drop(&mut self) {
        if !self.released {
            let _ = self.release_in_place();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Artifact trees
// ---------------------------------------------------------------------------------------------

/// The artifacts directory of a transcript: its path minus `.jsonl`.
pub fn artifacts_dir(transcript: &Path) -> PathBuf {
    let bytes = transcript.as_os_str().as_bytes();
    let stem = bytes.strip_suffix(b".jsonl").unwrap_or(bytes);
    PathBuf::from(std::ffi::OsStr::from_bytes(stem))
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct TreeEntry {
    /// `/`-separated path below the root; `""` for the root.
    rel: String,
    dir: bool,
    stat: Stat,
    sha256: Option<String>,
}

/// One entry of a receipt's `artifactManifest`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct ManifestEntry {
    path: String,
    /// `directory` sorts before `file`.
    kind: &'static str,
    sha256: Option<String>,
    size: u64,
}

fn manifest(tree: &[TreeEntry]) -> Vec<ManifestEntry> {
    let mut entries: Vec<ManifestEntry> = tree
        .iter()
        .map(|e| ManifestEntry {
            path: e.rel.clone(),
            kind: if e.dir { "directory" } else { "file" },
            sha256: e.sha256.clone(),
            size: if e.dir { 0 } else { e.stat.size },
        })
        .collect();
    entries.sort();
    entries
}

fn manifest_json(entries: &[ManifestEntry]) -> Value {
    Value::Array(
        entries
            .iter()
            .map(|e| match &e.sha256 {
                Some(sha) if e.kind == "file" => object(vec![
                    ("kind", string("file")),
                    ("path", string(e.path.clone())),
                    ("sha256", string(sha.clone())),
                    ("size", Value::number(e.size as f64)),
                ]),
                _ => object(vec![
                    ("kind", string("directory")),
                    ("path", string(e.path.clone())),
                ]),
            })
            .collect(),
    )
}

struct Walk<'a> {
    root: &'a Path,
    hash: bool,
    files: usize,
    bytes: u64,
    entries: Vec<TreeEntry>,
    tick: &'a mut dyn FnMut() -> Result<(), LegacyError>,
}

impl Walk<'_> {
    fn visit(&mut self, dir: &Path, rel: &str, depth: usize) -> Result<(), LegacyError> {
        if depth > ARTIFACT_MAX_DEPTH {
            return Err(why(
                dir,
                unsafe_artifacts,
                format!("nested deeper than {ARTIFACT_MAX_DEPTH} directories"),
            ));
        }
        let mut names = Vec::new();
        for entry in fs::read_dir(dir).map_err(io_err(dir))? {
            names.push(entry.map_err(io_err(dir))?.file_name());
        }
        names.sort();
        for name in names {
            let path = dir.join(&name);
            let Some(name) = name.to_str() else {
                return Err(why(&path, unsafe_artifacts, "the name is not UTF-8"));
            };
            let child = if rel.is_empty() {
                name.to_owned()
            } else {
                format!("{rel}/{name}")
            };
            let meta = fs::symlink_metadata(&path).map_err(io_err(&path))?;
            let kind = meta.file_type();
            if kind.is_symlink() {
                return Err(why(&path, unsafe_artifacts, "is a symlink"));
            }
            if kind.is_dir() {
                self.entries.push(TreeEntry {
                    rel: child.clone(),
                    dir: true,
                    stat: Stat::of(&meta),
                    sha256: None,
                });
                self.visit(&path, &child, depth + 1)?;
                continue;
            }
            if !kind.is_file() {
                return Err(why(&path, unsafe_artifacts, "is not a regular file"));
            }
            if meta.nlink() > 1 {
                return Err(why(&path, unsafe_artifacts, "has more than one hard link"));
            }
            if meta.size() > ARTIFACT_MAX_FILE_BYTES {
                return Err(why(&path, unsafe_artifacts, "is larger than 64 MiB"));
            }
            self.files += 1;
            self.bytes += meta.size();
            if self.files > ARTIFACT_MAX_FILES {
                return Err(why(
                    self.root,
                    |path, why| LegacyError::ArtifactCapacityExceeded { path, why },
                    format!("more than {ARTIFACT_MAX_FILES} files"),
                ));
            }
            if self.bytes > ARTIFACT_MAX_TOTAL_BYTES {
                return Err(why(
                    self.root,
                    |path, why| LegacyError::ArtifactCapacityExceeded { path, why },
                    "more than 512 MiB in all",
                ));
            }
            let stat = Stat::of(&meta);
            let sha256 = if self.hash {
                Some(hash_file(&path, &stat)?)
            } else {
                None
            };
            self.entries.push(TreeEntry {
                rel: child,
                dir: false,
                stat,
                sha256,
            });
            (self.tick)()?;
        }
        Ok(())
    }
}

/// The bounded, no-follow listing of an artifact tree (pre-order, by name), file hashes
/// included when `hash`.
fn walk_tree(
    root: &Path,
    hash: bool,
    tick: &mut dyn FnMut() -> Result<(), LegacyError>,
) -> Result<Vec<TreeEntry>, LegacyError> {
    let meta = fs::symlink_metadata(root).map_err(io_err(root))?;
    if !meta.file_type().is_dir() {
        return Err(why(root, unsafe_artifacts, "is not a real directory"));
    }
    let mut walk = Walk {
        root,
        hash,
        files: 0,
        bytes: 0,
        entries: vec![TreeEntry {
            rel: String::new(),
            dir: true,
            stat: Stat::of(&meta),
            sha256: None,
        }],
        tick,
    };
    walk.visit(root, "", 0)?;
    Ok(walk.entries)
}

/// Hashes a file through a no-follow descriptor that must still be the listed version.
fn hash_file(path: &Path, expected: &Stat) -> Result<String, LegacyError> {
    let mut file = open_no_follow(path).map_err(io_err(path))?;
    let meta = file.metadata().map_err(io_err(path))?;
    if !Stat::of(&meta).same_version(expected) {
        return Err(why_changed(path, "the artifact changed while it was read"));
    }
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = file.read(&mut buf).map_err(io_err(path))?;
        if n == 0 {
            break;
        }
        total += n as u64;
        hasher.update(&buf[..n]);
    }
    if total != expected.size {
        return Err(why_changed(path, "the artifact changed while it was read"));
    }
    Ok(data_encoding::HEXLOWER.encode(&hasher.finalize()))
}

/// Copies one planned file to a new owner-only file, checking it is still the listed bytes.
fn copy_file(src: &Path, dst: &Path, planned: &TreeEntry) -> Result<(), LegacyError> {
    let mut input = open_no_follow(src).map_err(io_err(src))?;
    let meta = input.metadata().map_err(io_err(src))?;
    if !Stat::of(&meta).same_version(&planned.stat) {
        return Err(why_changed(src, "the artifact changed since it was listed"));
    }
    let mut output = create_owner_only(dst).map_err(io_err(dst))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = input.read(&mut buf).map_err(io_err(src))?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > planned.stat.size {
            return Err(why_changed(src, "the artifact grew while it was copied"));
        }
        hasher.update(&buf[..n]);
        output.write_all(&buf[..n]).map_err(io_err(dst))?;
    }
    let sha = data_encoding::HEXLOWER.encode(&hasher.finalize());
    if total != planned.stat.size || planned.sha256.as_deref() != Some(sha.as_str()) {
        return Err(why_changed(src, "the artifact changed while it was copied"));
    }
    output
        .sync_all()
        .map_err(|e| LegacyError::DurabilityFailed {
            path: dst.to_owned(),
            why: e.to_string(),
        })
}

/// Renames the directory `from` to `to` only if `to` does not exist.
fn rename_dir_no_replace(from: &Path, to: &Path) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        let c = |p: &Path| {
            CString::new(p.as_os_str().as_bytes())
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))
        };
        let (cf, ct) = (c(from)?, c(to)?);
        // SAFETY: both are valid NUL-terminated paths; renameat2 takes no other pointers.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_renameat2,
                libc::AT_FDCWD,
                cf.as_ptr(),
                libc::AT_FDCWD,
                ct.as_ptr(),
                libc::RENAME_NOREPLACE,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if !matches!(err.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) {
            return Err(err);
        }
    }
    // Without a no-replace rename: claim the name with an empty directory of our own, then
    // replace that directory (a rename only replaces an empty directory).
    create_owner_only_dir(to)?;
    fs::rename(from, to).inspect_err(|_| {
        let _ = fs::remove_dir(to);
    })
}

/// Removes a directory this migration published, if it is still that directory.
fn unpublish_dir(path: &Path, published: &Stat) {
    let same = fs::symlink_metadata(path).is_ok_and(|m| {
        m.file_type().is_dir() && m.dev() == published.dev && m.ino() == published.ino
    });
    if same {
        let _ = fs::remove_dir_all(path);
    }
}

/// Copies the planned artifact tree to `dest` (no replace) through a staging directory in
/// the scope; returns the published directory's stat.
fn copy_artifacts(
    source: &Path,
    plan: &[TreeEntry],
    scope_dir: &Path,
    dest: &Path,
    op: &str,
    lock: &mut MigrationLock,
) -> Result<Stat, LegacyError> {
    let staging = scope_dir.join(format!(".gjc-migrate-{op}-{}.artifacts", snowflake()));
    create_owner_only_dir(&staging).map_err(io_err(&staging))?;
    let mut copy = || -> Result<(), LegacyError> {
        for entry in plan.iter().filter(|e| !e.rel.is_empty()) {
            let target = staging.join(&entry.rel);
            if entry.dir {
                create_owner_only_dir(&target).map_err(io_err(&target))?;
            } else {
                copy_file(&source.join(&entry.rel), &target, entry)?;
                lock.heartbeat()?;
            }
        }
        for entry in plan.iter().rev().filter(|e| e.dir) {
            sync_dir(&staging.join(&entry.rel))?;
        }
        let again = walk_tree(source, false, &mut || Ok(()))?;
        let unchanged = again.len() == plan.len()
            && again
                .iter()
                .zip(plan)
                .all(|(a, b)| a.rel == b.rel && a.dir == b.dir && a.stat.same_version(&b.stat));
        if !unchanged {
            return Err(why_changed(
                source,
                "the artifacts changed while they were copied",
            ));
        }
        lock.assert_owned()?;
        rename_dir_no_replace(&staging, dest).map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists | io::ErrorKind::DirectoryNotEmpty => why(
                dest,
                conflict,
                "an artifacts directory appeared during the migration",
            ),
            _ => io_err(dest)(e),
        })
    };
    if let Err(e) = copy() {
        let _ = fs::remove_dir_all(&staging);
        return Err(e);
    }
    let published = fs::symlink_metadata(dest)
        .map(|m| Stat::of(&m))
        .map_err(io_err(dest))?;
    if let Err(e) = sync_dir(scope_dir) {
        unpublish_dir(dest, &published);
        return Err(e);
    }
    Ok(published)
}

// ---------------------------------------------------------------------------------------------
// Migration
// ---------------------------------------------------------------------------------------------

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
fn check_legacy_location(root: &Path, path: &Path) -> Result<(), LegacyError> {
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
fn check_destination_transcript(dest: &Path, sha256: &str) -> Result<bool, LegacyError> {
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
fn check_destination_artifacts(
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
fn publish_file(dir: &Path, dest: &Path, bytes: &[u8]) -> Result<(), LegacyError> {
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

fn file_json(path: &Path, session_id: &str, cwd: &str, id: &FileIdentity) -> Value {
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
/// [`SessionManager::open`](super::manager::SessionManager::open): a v2 candidate's own path,
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

// ---------------------------------------------------------------------------------------------
// Tombstones
// ---------------------------------------------------------------------------------------------

fn target_json(file: &RecordedFile, provenance: &str) -> Value {
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
    let ws = Workspace::resolve(cwd)?;
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
    let scope_dir = prepare_scope(&root, &ws.identity)?;
    let internal = scope_dir.join(INTERNAL_DIR);
    let op = candidate.operation_name();
    let tombstone = internal.join(TOMBSTONES).join(format!("{op}.json"));
    let mut lock = MigrationLock::acquire(&internal.join(LOCKS), &op, &candidate.path)?;
    let records = ScopeRecords::load(&scope_dir, &ws.digest());
    let this = RecordedFile {
        path: path_text(&candidate.path),
        session_id: candidate.session_id.clone(),
        cwd: candidate.cwd.clone(),
        identity: candidate.identity.clone(),
    };
    let already = trusted_record(&tombstone)
        .map(|v| records.tombstone_targets(&v))
        .is_some_and(|targets| targets.iter().any(|t| t.is(candidate)));
    if already {
        lock.release()?;
        return Ok(tombstone);
    }
    revalidate(candidate, &ws.identity)?;
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
    write_record(&tombstone, &value)?;
    lock.release()?;
    Ok(tombstone)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roots(home: &str, tmp: &str) -> LegacyRoots {
        LegacyRoots {
            home: Some(PathBuf::from(home)),
            tmp: Some(PathBuf::from(tmp)),
        }
    }

    fn names(cwd: &str, roots: &LegacyRoots) -> Vec<String> {
        legacy_dir_names(cwd, Path::new(cwd), roots)
    }

    // The roots below do not exist, so relative forms are taken lexically.
    const HOME: &str = "/nonexistent-gjcfs-home/alice";
    const TMP: &str = "/nonexistent-gjcfs-tmp";

    #[test]
    fn absolute_names_strip_one_leading_separator_and_encode_separators() {
        assert_eq!(encode_absolute("/home/alice/proj"), "--home-alice-proj--");
        assert_eq!(encode_absolute("C:\\Users\\a b"), "--C--Users-a b--");
        assert_eq!(encode_absolute("\\\\server\\share"), "---server-share--");
        assert_eq!(encode_absolute("/"), "----");
    }

    #[test]
    fn home_relative_names_have_the_historical_shapes() {
        let r = roots(HOME, TMP);
        let cwd = format!("{HOME}/proj/x");
        assert_eq!(
            names(&cwd, &r),
            [
                "--nonexistent-gjcfs-home-alice-proj-x--",
                "-proj-x",
                "---proj-x--",
                "---nonexistent-gjcfs-home-alice-proj-x--",
            ]
        );
        // Home itself.
        assert_eq!(
            names(HOME, &r),
            [
                "--nonexistent-gjcfs-home-alice--",
                "-",
                "----",
                "---nonexistent-gjcfs-home-alice--",
            ]
        );
        // A sibling of home is not home-relative.
        assert_eq!(
            names("/nonexistent-gjcfs-home/alicebob", &r),
            ["--nonexistent-gjcfs-home-alicebob--"]
        );
    }

    #[test]
    fn temp_relative_names_have_the_historical_shapes() {
        let r = roots(HOME, TMP);
        assert_eq!(
            names(&format!("{TMP}/build/a"), &r),
            [
                "--nonexistent-gjcfs-tmp-build-a--",
                "-tmp-build-a",
                "---tmp-build-a--",
            ]
        );
        assert_eq!(
            names(TMP, &r),
            ["--nonexistent-gjcfs-tmp--", "-tmp", "---tmp--"]
        );
    }

    #[test]
    fn lexical_and_canonical_spellings_both_count() {
        let r = LegacyRoots::default();
        let got = legacy_dir_names(
            "/nonexistent-gjcfs/real/p",
            Path::new("/nonexistent-gjcfs/alias/p"),
            &r,
        );
        assert_eq!(
            got,
            [
                "--nonexistent-gjcfs-real-p--",
                "--nonexistent-gjcfs-alias-p--"
            ]
        );
        // The lexical spelling decides a relative form when the canonical one is outside.
        let r = roots("/nonexistent-gjcfs/alias", TMP);
        let got = legacy_dir_names(
            "/nonexistent-gjcfs/real/p",
            Path::new("/nonexistent-gjcfs/alias/p"),
            &r,
        );
        assert!(got.contains(&"-p".to_owned()), "{got:?}");
    }

    #[test]
    fn colliding_paths_share_a_legacy_name_but_not_a_scope() {
        let r = LegacyRoots::default();
        let scope = |p: &str| {
            scope_dir_name(&Identity {
                platform: "posix",
                canonical_path: p.into(),
            })
        };
        assert_eq!(names("/x/a-b/c", &r), ["--x-a-b-c--"]);
        assert_eq!(names("/x/a/b-c", &r), ["--x-a-b-c--"]);
        assert_eq!(names("/x/a/b/c", &r), ["--x-a-b-c--"]);
        assert_ne!(scope("/x/a-b/c"), scope("/x/a/b-c"));
        assert_ne!(scope("/x/a--b/c"), scope("/x/a/b--c"));
    }

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

    #[test]
    fn lock_records_round_trip_and_headers_need_a_full_first_line() {
        let record = LockRecord {
            attempt_id: "a".into(),
            pid: 42,
            boot_id: None,
            process_start_id: "42:7".into(),
            created_at: 1,
            heartbeat_at: 2,
            lease_expires_at: 3,
            released: true,
        };
        let bytes = record.bytes();
        assert_eq!(
            std::str::from_utf8(&bytes).unwrap(),
            "{\"attemptId\":\"a\",\"pid\":42,\"processStartId\":\"42:7\",\"createdAt\":1,\"heartbeatAt\":2,\"leaseExpiresAt\":3,\"released\":true}\n"
        );
        assert_eq!(LockRecord::parse(&bytes), Some(record));

        let header = br#"{"type":"session","id":"s","cwd":"/w"}"#;
        assert_eq!(header_fields(header), None, "no newline: invalid");
        let mut line = header.to_vec();
        line.push(b'\n');
        assert_eq!(header_fields(&line), Some(("s".into(), "/w".into())));
        assert_eq!(
            header_fields(b"{\"type\":\"session\",\"id\":1,\"cwd\":\"/w\"}\n"),
            None
        );
        assert_eq!(
            header_fields(b"{\"type\":\"x\",\"id\":\"s\",\"cwd\":\"/w\"}\n"),
            None
        );
        let mut long = br#"{"type":"session","id":"s","cwd":"/w","pad":""#.to_vec();
        long.extend(std::iter::repeat_n(b'x', HEADER_MAX_BYTES));
        long.extend(b"\"}\n");
        assert_eq!(header_fields(&long), None, "header beyond 64 KiB");
    }
}
