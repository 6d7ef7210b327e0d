//! Errors in filesystem terms: [`VfsError`], how the engine's errors become one (typed, the
//! cause kept), and each session's `errors` file, the log of why its last writes failed.

use std::collections::{HashMap, VecDeque};
use std::io;

use parking_lot::Mutex;

use gjcfs_engine::format::blob::BlobError;
use gjcfs_engine::format::time;
use gjcfs_engine::io_cause::{io_cause, IoCause};
use gjcfs_engine::manager::SessionError;
use gjcfs_engine::read::load::LoadError;
use gjcfs_engine::store::legacy::LegacyError;
use gjcfs_engine::store::scope::ScopeError;

/// Why an operation failed, in filesystem terms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VfsError {
    #[error("no such file or directory")]
    NotFound,
    #[error("not a directory")]
    NotADirectory,
    #[error("is a directory")]
    IsADirectory,
    /// The mount is read-only.
    #[error("read-only mount")]
    ReadOnly,
    /// The operation is never allowed on this node (delete, rename, chmod, …).
    #[error("operation not permitted")]
    NotPermitted,
    /// The node does not allow this kind of access (writing a read-only file, creating a
    /// file in a directory of the model).
    #[error("permission denied")]
    AccessDenied,
    /// A write whose content was rejected (unknown leaf id, invalid entry); the reason is
    /// also in the session's `errors` file.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// An unknown or already released file handle.
    #[error("bad file handle")]
    BadHandle,
    /// The storage underneath failed; `cause` keeps what the failure means (a full disk,
    /// a quota, a read-only filesystem, a refused permission).
    #[error("{reason}")]
    Storage { cause: IoCause, reason: String },
    /// A safety check refuses the session or file: not owner-only, a symlink, a FIFO, a
    /// scope whose binding does not hold, a transcript failing the strict checks a write
    /// needs. The reason is in the session's `errors` file.
    #[error("refused: {0}")]
    Refused(String),
    /// The file cannot be read as a session (a damaged header, a future version, a
    /// corrupt blob).
    #[error("unreadable: {0}")]
    Unreadable(String),
    /// Too large to take: a line of `entries/new` above [`LINE_MAX`](crate::LINE_MAX), a leaf above
    /// [`LEAF_MAX`](crate::LEAF_MAX).
    #[error("too large: {0}")]
    TooLarge(String),
    /// A file opened before it changed, whose old bytes are no longer kept (reads served by
    /// node, `snapshots.rs`): opened again, it reads as it is now.
    #[error("the file changed since it was opened")]
    Stale,
}

/// The error log key of `history/errors` (no session id is empty).
pub(super) const HISTORY_LOG: &str = "";

/// How many failure reasons a session's `errors` file keeps.
const ERRORS_KEPT: usize = 32;

/// An I/O failure as a [`VfsError`]: refusals of a no-follow open or of a file that is not
/// a regular file are refusals; the rest keep their cause.
pub(super) fn from_io(error: &io::Error, reason: String) -> VfsError {
    match io_cause(error) {
        IoCause::Symlink | IoCause::NotRegularFile => VfsError::Refused(reason),
        IoCause::NotFound => VfsError::NotFound,
        cause => VfsError::Storage { cause, reason },
    }
}

/// A blob store failure: a corrupt blob is unreadable, never served.
pub(super) fn from_blob(error: &BlobError) -> VfsError {
    let reason = error.to_string();
    match error {
        BlobError::Io { source, .. } => from_io(source, reason),
        BlobError::InvalidHash(_) | BlobError::Corrupt { .. } => VfsError::Unreadable(reason),
    }
}

fn from_scope(error: &ScopeError, reason: String) -> VfsError {
    match error {
        ScopeError::Io { source, .. } => from_io(source, reason),
        ScopeError::InvalidWorkspace { .. }
        | ScopeError::NetworkUnsupported { .. }
        | ScopeError::ServedElsewhere { .. }
        | ScopeError::BindingInvalid { .. }
        | ScopeError::BindingConflict { .. }
        | ScopeError::Unsafe { .. }
        | ScopeError::Exposed { .. } => VfsError::Refused(reason),
    }
}

fn from_legacy(error: &LegacyError, reason: String) -> VfsError {
    match error {
        LegacyError::Io { source, .. } => from_io(source, reason),
        LegacyError::Scope(scope) => from_scope(scope, reason),
        LegacyError::MigrationBusy { .. }
        | LegacyError::MigrationDisabled { .. }
        | LegacyError::DestinationConflict { .. }
        | LegacyError::SourceChanged { .. }
        | LegacyError::UnsafeArtifacts { .. }
        | LegacyError::ArtifactCapacityExceeded { .. }
        | LegacyError::MigrationRetired { .. }
        | LegacyError::InvalidCandidate { .. }
        | LegacyError::UnsafeDirectory { .. }
        | LegacyError::DurabilityFailed { .. } => VfsError::Refused(reason),
    }
}

/// The engine's error for a session operation, in filesystem terms.
pub(super) fn from_session(error: &SessionError) -> VfsError {
    let reason = error.to_string();
    match error {
        SessionError::Persist(failure)
        | SessionError::Append {
            source: failure, ..
        } => from_io(&failure.source, reason),
        SessionError::EntryNotFound(_) | SessionError::InvalidEntry(_) => {
            VfsError::InvalidArgument(reason)
        }
        SessionError::Load(load) => match load {
            LoadError::Io { source, .. } => from_io(source, reason),
            LoadError::Missing { .. } => VfsError::NotFound,
            LoadError::UnsupportedVersion { .. } | LoadError::NotASession { .. } => {
                VfsError::Unreadable(reason)
            }
        },
        SessionError::Inspect { .. } => VfsError::Refused(reason),
        SessionError::Blob(blob) => from_blob(blob),
        SessionError::NoFile => VfsError::NotPermitted,
        SessionError::Scope(scope) => from_scope(scope, reason),
        SessionError::Legacy(legacy) => from_legacy(legacy, reason),
        SessionError::AlreadyExists { .. }
        | SessionError::ChangedOnDisk { .. }
        | SessionError::OpenElsewhere { .. } => VfsError::Refused(reason),
        SessionError::ReadOnly { .. } => VfsError::ReadOnly,
    }
}

/// Every session's failure log (the `errors` files).
#[derive(Default)]
pub(super) struct ErrorLog {
    logs: Mutex<HashMap<String, VecDeque<String>>>,
}

impl ErrorLog {
    /// Records `reason` for session `sid`, time-stamped, on one line.
    pub fn push(&self, sid: &str, reason: &str) {
        let line = format!(
            "{} {}\n",
            time::format_iso_millis(time::now_millis()),
            reason.replace(['\n', '\r'], " ")
        );
        let mut logs = self.logs.lock();
        let log = logs.entry(sid.to_owned()).or_default();
        log.push_back(line);
        while log.len() > ERRORS_KEPT {
            log.pop_front();
        }
    }

    /// Records `reason` unless it is already the last line (a refused session answers
    /// every access with the same reason).
    pub fn push_once(&self, sid: &str, reason: &str) {
        let flat = reason.replace(['\n', '\r'], " ");
        let repeated = self
            .logs
            .lock()
            .get(sid)
            .and_then(|log| log.back())
            .is_some_and(|last| last.trim_end().ends_with(&flat));
        if !repeated {
            self.push(sid, reason);
        }
    }

    /// The `errors` file of `sid`.
    pub fn text(&self, sid: &str) -> String {
        self.logs
            .lock()
            .get(sid)
            .map(|log| log.iter().map(String::as_str).collect())
            .unwrap_or_default()
    }
}
