//! Errors of the session manager.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use crate::engine::blob::BlobError;
use crate::engine::inspect::InspectFailure;
use crate::engine::load::LoadError;
use crate::engine::session::EntryNotFound;

/// A failed write to a session file. Once one happens it is latched: every later operation
/// that would write fails with the same error until the manager switches session.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot persist session {path}: {source}")]
pub struct PersistError {
    pub path: PathBuf,
    pub source: Arc<io::Error>,
}

impl PersistError {
    pub fn new(path: impl Into<PathBuf>, source: io::Error) -> Self {
        PersistError {
            path: path.into(),
            source: Arc::new(source),
        }
    }

    /// The errno of the underlying failure, if any.
    pub fn raw_os_error(&self) -> Option<i32> {
        self.source.raw_os_error()
    }
}

/// Whether an append failed on its own or because an earlier failure was latched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendPhase {
    PriorFailure,
    CurrentAppend,
}

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    Persist(#[from] PersistError),
    /// An append was rolled back because it could not be persisted.
    #[error("entry {entry_id} was not appended: {source}")]
    Append {
        entry_id: String,
        phase: AppendPhase,
        source: PersistError,
    },
    #[error(transparent)]
    EntryNotFound(#[from] EntryNotFound),
    /// An entry given to append does not have the shape its type requires.
    #[error("invalid entry: {0}")]
    InvalidEntry(String),
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("{path}: {failure}")]
    Inspect {
        path: PathBuf,
        failure: InspectFailure,
    },
    #[error(transparent)]
    Blob(#[from] BlobError),
    /// The operation needs a session file and this session has none (in memory).
    #[error("the session has no file")]
    NoFile,
    #[error(transparent)]
    Scope(#[from] crate::engine::scope::ScopeError),
    #[error(transparent)]
    Legacy(#[from] crate::engine::legacy::LegacyError),
    #[error("{path} already exists")]
    AlreadyExists { path: PathBuf },
}

impl SessionError {
    /// The errno of an I/O failure underneath, if any.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            SessionError::Persist(e) | SessionError::Append { source: e, .. } => e.raw_os_error(),
            _ => None,
        }
    }
}

pub type SessionResult<T> = Result<T, SessionError>;
