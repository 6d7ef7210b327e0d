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
    /// The session file the failed operation was on.
    pub path: PathBuf,
    /// The I/O failure (shared, so that a latched error can be cloned); a failure of the blob
    /// store is wrapped in it ([`PersistError::io_error`] looks through it).
    pub source: Arc<io::Error>,
}

impl PersistError {
    /// The failure `source` of an operation on the session file at `path`.
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
    /// An earlier persistence failure is latched; the append was refused before an entry was
    /// built.
    PriorFailure,
    /// Persisting this append failed: its entries were removed from memory again, and the
    /// failure is latched.
    CurrentAppend,
}

/// What an operation of the [`SessionManager`] fails with.
///
/// [`SessionManager`]: super::SessionManager
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// An operation on the session file failed: a write (the first failed write is latched), the
    /// rename of a move, or a read or check that opening the file for writing, or switching to
    /// it, needs.
    #[error(transparent)]
    Persist(#[from] PersistError),
    /// An append was rolled back because it could not be persisted.
    #[error("{}: {source}", not_appended(.entry_id))]
    Append {
        /// The id of the first entry rolled back; empty for [`AppendPhase::PriorFailure`].
        entry_id: String,
        /// Whether a failure latched earlier refused the append, or its own write failed.
        phase: AppendPhase,
        /// The persistence failure: the latched one, or this append's own.
        source: PersistError,
    },
    /// An entry id given (to branch to, or as a label's target) is not in the session.
    #[error(transparent)]
    EntryNotFound(#[from] EntryNotFound),
    /// An entry given to append does not have the shape its type requires.
    #[error("invalid entry: {0}")]
    InvalidEntry(String),
    /// The session file could not be loaded: it is missing, not a session, of an unsupported
    /// version, or unreadable.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The file failed the strict content checks: those of a managed transcript, or of a file
    /// switched to with `set_session_file`.
    #[error("{path}: {failure}")]
    Inspect {
        /// The file that was checked.
        path: PathBuf,
        /// Why the checks refused it.
        failure: InspectFailure,
    },
    /// The blob store failed (an invalid hash, a read or write, a corrupt blob). Storing the
    /// blobs of lines being written is part of the write: that failure is a [`PersistError`].
    #[error(transparent)]
    Blob(#[from] BlobError),
    /// The operation needs a session file and this session has none (in memory).
    #[error("the session has no file")]
    NoFile,
    /// The workspace's managed scope could not be resolved, prepared or verified
    /// ([`crate::store::scope`]).
    #[error(transparent)]
    Scope(#[from] crate::store::scope::ScopeError),
    /// Legacy transcripts could not be listed, or one could not be copied into its managed
    /// scope for writing.
    #[error(transparent)]
    Legacy(#[from] crate::store::legacy::LegacyError),
    /// A file that a move or a fork would create is already there; nothing was written.
    #[error("{path} already exists")]
    AlreadyExists {
        /// The file in the way.
        path: PathBuf,
    },
    /// The session was loaded for reading ([`SessionManager::load_for_reading`]) and is
    /// never written.
    ///
    /// [`SessionManager::load_for_reading`]: super::SessionManager::load_for_reading
    #[error("{path}: the session was loaded for reading only and is never written")]
    ReadOnly {
        /// The file the manager was loaded from.
        path: PathBuf,
    },
    /// A full rewrite was refused because the file is not the one memory reflects any
    /// more (another process changed, replaced or appended to it); nothing was written.
    #[error("{path}: changed on disk since it was read; not rewriting it (open it again)")]
    ChangedOnDisk {
        /// The file that was not rewritten.
        path: PathBuf,
    },
    /// A full rewrite was refused because another process holds the file open for writing
    /// (an agent still writing the session); nothing was written.
    #[error("{path}: open for writing by another process (pid {pids:?}); not rewriting it")]
    OpenElsewhere {
        /// The file that was not rewritten.
        path: PathBuf,
        /// The processes that hold it open for writing (on Windows pid 0: it cannot
        /// tell which).
        pids: Vec<u32>,
    },
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

/// The result of an operation of the session manager.
pub type SessionResult<T> = Result<T, SessionError>;

/// What [`SessionError::Append`] says was not appended: the entry, or (refused before one
/// was built) nothing, for an earlier failure.
fn not_appended(entry_id: &str) -> String {
    if entry_id.is_empty() {
        "nothing was appended: an earlier write of the session failed".to_owned()
    } else {
        format!("entry {entry_id} was not appended")
    }
}
