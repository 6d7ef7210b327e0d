//! What tells whether an indexed file changed without reading it, for every indexed file:
//! kept in memory by path, read from the `files` table ([`super::file_rows::read_stamps`]).

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::Path;

use gjcfs_engine::storage::FileVersion;

/// What tells whether an indexed file changed: its `files` row id and the stat indexed.
/// Every indexed file's stamp is kept in memory; the rest of its row is read only when the
/// file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub id: i64,
    pub stat: FileVersion,
}

/// The stamps of the indexed files by path, keyed by the path's bytes: hashing and
/// comparing a `Path` walks its components, which was a tenth of a search's cost on
/// 10,000 files.
#[derive(Debug, Default)]
pub struct Stamps(HashMap<OsString, Stamp>);

impl Stamps {
    pub fn get(&self, path: &Path) -> Option<&Stamp> {
        self.0.get(path.as_os_str())
    }

    pub fn contains(&self, path: &Path) -> bool {
        self.0.contains_key(path.as_os_str())
    }

    pub fn insert(&mut self, path: &Path, stamp: Stamp) {
        self.0.insert(path.as_os_str().to_owned(), stamp);
    }

    pub fn remove(&mut self, path: &Path) {
        self.0.remove(path.as_os_str());
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }

    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.0.keys().map(Path::new)
    }
}
