//! A store as the index covers it: the directories that hold its transcripts.

use std::path::{Path, PathBuf};

use gjcfs_engine::storage::SessionStorage;

/// A store as the index covers it: the directories that hold its transcripts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Store {
    /// An agent's sessions root: every directory directly in it (its managed scopes and
    /// legacy directories).
    Root(PathBuf),
    /// One directory of transcripts.
    Dir(PathBuf),
}

impl Store {
    /// The store's directories now, by their canonical paths (a root not made yet holds
    /// none).
    pub fn dirs(&self, storage: &dyn SessionStorage) -> std::io::Result<Vec<PathBuf>> {
        let canonical = |dir: &Path| storage.canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
        match self {
            Store::Dir(dir) => Ok(vec![canonical(dir)]),
            Store::Root(root) => match storage.list_dirs(&canonical(root)) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
                listed => listed,
            },
        }
    }
}
