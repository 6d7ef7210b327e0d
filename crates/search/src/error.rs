//! [`SearchError`]: why the index could not be used, and what a caller may do about it.

use std::path::PathBuf;

use super::index_file;
use super::query::QueryError;

/// Why the index could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error("cannot create the index directory {path}: {source}")]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot replace the index file {path}: {source}")]
    Replace {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("search index {path}: {source}")]
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error(transparent)]
    Query(#[from] QueryError),
}

impl SearchError {
    /// Whether another connection kept the index's write lock for the operation's whole
    /// wait.
    pub fn is_busy(&self) -> bool {
        matches!(self, SearchError::Sqlite { source, .. } if index_file::is_busy(source))
    }

    /// Whether the index could not be written because its filesystem is full (or the
    /// user's quota is): the index is then better given up ([`SearchIndex::discard`](super::SearchIndex::discard)) than
    /// kept half written.
    pub fn is_disk_full(&self) -> bool {
        use gjcfs_engine::io_cause::{io_cause, IoCause};
        match self {
            SearchError::CreateDir { source, .. } | SearchError::Replace { source, .. } => {
                matches!(io_cause(source), IoCause::NoSpace | IoCause::QuotaExceeded)
            }
            SearchError::Sqlite { source, .. } => matches!(
                source,
                rusqlite::Error::SqliteFailure(e, _) if e.code == rusqlite::ErrorCode::DiskFull
            ),
            SearchError::Query(_) => false,
        }
    }
}
