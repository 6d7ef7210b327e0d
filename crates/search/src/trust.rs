//! How an index trusts a watcher's claim ([`super::claim`]) only for the file it has open
//! itself ([`super::index_id`]), and how a watcher's index opens the file at its path again.

use std::path::Path;

use rusqlite::Connection;

use super::answer::{Answer, Ask};
use super::claim::{self, Vouched};
use super::index_file;
use super::index_id::{open_file_id, IndexId};
use super::{distinct, SearchError, SearchIndex};
use gjcfs_engine::storage::{FileStorage, SessionStorage};

impl SearchIndex {
    /// The name of the index file this index has open, while it is the file at its path;
    /// `None` in memory.
    pub(super) fn file_id(&self) -> Option<IndexId> {
        let path = self.path.as_deref()?;
        let inner = self.inner.lock();
        open_file_id(&inner.conn, path)
    }

    /// Opens the file at the index's path again when the one open is no longer it (removed
    /// files are not made again here: a search makes them), replacing what is not a current
    /// index ([`index_file::open_file`]); the name of the file open then.
    pub(super) fn reopen(&self) -> Result<IndexId, SearchError> {
        let gone = |path: &Path| SearchError::Replace {
            path: path.to_owned(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the index file is not the one open, or is gone",
            ),
        };
        let Some(path) = self.path.as_deref() else {
            return Err(gone(Path::new(":memory:")));
        };
        let mut inner = self.inner.lock();
        if let Some(id) = open_file_id(&inner.conn, path) {
            return Ok(id);
        }
        if !FileStorage.exists(path) {
            return Err(gone(path));
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        // The old connection is closed first: its locks must not outlive its file.
        inner.conn = Connection::open_in_memory().map_err(|e| self.sql_error(e))?;
        inner.conn = index_file::open_file(dir, path)?;
        inner.files.clear();
        inner.data_version = -1;
        open_file_id(&inner.conn, path).ok_or_else(|| gone(path))
    }

    /// The answer of `ask` when a watcher vouches for the file this index has open
    /// ([`claim::vouched`]), with whether it was behind (the answer is then that of the
    /// index as it stands, not brought up to date: another process is indexing the changes);
    /// `None` when none does, or the file turns out damaged, and the store must be checked.
    pub(super) fn answer_vouched<A: Answer>(
        &self,
        dirs: &[std::path::PathBuf],
        ask: Ask<'_, A>,
    ) -> Result<Option<(A::Out, bool)>, SearchError> {
        let (Some(path), Some(id)) = (self.path.as_deref(), self.file_id()) else {
            return Ok(None);
        };
        let answer = match claim::vouched(path, &distinct(dirs), &id) {
            Vouched::No => return Ok(None),
            Vouched::Fresh => self.answer_once(ask, None),
            Vouched::Behind => {
                let inner = self.inner.lock();
                ask(&inner.conn)
                    .map(|answer| (answer.output(), true))
                    .map_err(|e| self.sql_error(e))
            }
        };
        match answer {
            Err(SearchError::Sqlite { source, .. }) if index_file::is_corrupt(&source) => Ok(None),
            hits => hits.map(Some),
        }
    }
}

// The test harms the index file with the standard library, not through the code under test.
// Windows refuses to remove or replace a file that another handle has open: an index cannot
// be taken away from under a connection there.
#[cfg(all(test, unix))]
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
mod tests {
    use super::*;
    use crate::index_file::HEADER_LEN;

    fn index(dir: &Path) -> SearchIndex {
        SearchIndex::open(dir).unwrap()
    }

    #[test]
    fn an_open_index_is_named_while_it_is_the_file_at_its_path() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("index");
        let held = index(&dir);
        let id = held.file_id().expect("named");
        let len = std::fs::metadata(dir.join(super::super::INDEX_FILE))
            .unwrap()
            .len();
        assert!(len >= HEADER_LEN, "a new index has its first page: {len}");
        assert_eq!(id.stamp.len(), 32);
        assert_eq!(
            index(&dir).file_id(),
            Some(id.clone()),
            "another connection"
        );

        // Another index made in its place: the same path, another stamp and file.
        super::super::remove_index(&dir).unwrap();
        let other = index(&dir);
        let other_id = other.file_id().unwrap();
        assert_ne!(other_id.stamp, id.stamp);
        assert_ne!(other_id.file, id.file);
        assert_eq!(
            held.file_id(),
            None,
            "the old file is not the one at the path"
        );
        assert_eq!(held.reopen().unwrap(), other_id);
        assert_eq!(held.file_id(), Some(other_id));

        // Truncated: no stamp is read, and the file is named again once a new index is made
        // in it.
        std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(dir.join(super::super::INDEX_FILE))
            .unwrap();
        assert_eq!(held.file_id(), None);
        let renewed = held.reopen().unwrap();
        assert!(renewed.stamp != id.stamp && held.file_id() == Some(renewed));

        drop(other);
        super::super::remove_index(&dir).unwrap();
        assert_eq!(held.file_id(), None);
        assert!(held.reopen().is_err(), "a removed index is not made again");
    }
}
