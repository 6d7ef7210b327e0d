//! Errors of the session manager.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use crate::format::blob::BlobError;
use crate::read::inspect::InspectFailure;
use crate::read::load::LoadError;
use crate::session::tree::EntryNotFound;

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
        self.io_error().raw_os_error()
    }

    /// The I/O failure underneath: the write's own, or that of the blob store when storing
    /// a blob the line references failed.
    pub fn io_error(&self) -> &io::Error {
        match self
            .source
            .get_ref()
            .and_then(|e| e.downcast_ref::<BlobError>())
        {
            Some(BlobError::Io { source, .. }) => source,
            _ => &self.source,
        }
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
    Scope(#[from] crate::store::scope::ScopeError),
    #[error(transparent)]
    Legacy(#[from] crate::store::legacy::LegacyError),
    #[error("{path} already exists")]
    AlreadyExists { path: PathBuf },
    /// The session was loaded for reading ([`SessionManager::load_for_reading`]) and is
    /// never written.
    ///
    /// [`SessionManager::load_for_reading`]: super::SessionManager::load_for_reading
    #[error("{path}: the session was loaded for reading only and is never written")]
    ReadOnly { path: PathBuf },
    /// A full rewrite was refused because the file is not the one memory reflects any
    /// more (another process changed, replaced or appended to it); nothing was written.
    #[error("{path}: changed on disk since it was read; not rewriting it (open it again)")]
    ChangedOnDisk { path: PathBuf },
    /// A full rewrite was refused because another process holds the file open for writing
    /// (an agent still writing the session); nothing was written.
    #[error("{path}: open for writing by another process (pid {pids:?}); not rewriting it")]
    OpenElsewhere { path: PathBuf, pids: Vec<u32> },
}

impl SessionError {
    /// The errno of an I/O failure underneath, if any.
    pub fn raw_os_error(&self) -> Option<i32> {
        self.io_error().and_then(io::Error::raw_os_error)
    }

    /// The I/O failure underneath, if the error is one (a failed write, read, scope check,
    /// migration or blob access), so that callers can report ENOSPC, EDQUOT, EROFS, EACCES,
    /// EPERM and the like as such.
    pub fn io_error(&self) -> Option<&io::Error> {
        use crate::store::legacy::LegacyError;
        use crate::store::scope::ScopeError;
        fn scope(e: &ScopeError) -> Option<&io::Error> {
            match e {
                ScopeError::Io { source, .. } => Some(source),
                _ => None,
            }
        }
        match self {
            SessionError::Persist(e) | SessionError::Append { source: e, .. } => Some(e.io_error()),
            SessionError::Load(LoadError::Io { source, .. }) => Some(source),
            SessionError::Scope(e) | SessionError::Legacy(LegacyError::Scope(e)) => scope(e),
            SessionError::Legacy(LegacyError::Io { source, .. }) => Some(source),
            SessionError::Blob(BlobError::Io { source, .. }) => Some(source),
            SessionError::Load(_)
            | SessionError::Legacy(_)
            | SessionError::Blob(_)
            | SessionError::EntryNotFound(_)
            | SessionError::InvalidEntry(_)
            | SessionError::Inspect { .. }
            | SessionError::NoFile
            | SessionError::AlreadyExists { .. }
            | SessionError::ReadOnly { .. }
            | SessionError::ChangedOnDisk { .. }
            | SessionError::OpenElsewhere { .. } => None,
        }
    }
}

pub type SessionResult<T> = Result<T, SessionError>;
