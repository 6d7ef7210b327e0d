//! Errors in filesystem terms: how the engine's errors become [`VfsError`]s (typed, the
//! cause kept), and each session's `errors` file, the log of why its last writes failed.

use std::collections::{HashMap, VecDeque};
use std::io;

use parking_lot::Mutex;

use super::VfsError;
use gjcfs_engine::format::blob::BlobError;
use gjcfs_engine::format::time;
use gjcfs_engine::io_cause::{io_cause, IoCause};
use gjcfs_engine::manager::SessionError;
use gjcfs_engine::read::load::LoadError;
use gjcfs_engine::store::legacy::LegacyError;
use gjcfs_engine::store::scope::ScopeError;

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
