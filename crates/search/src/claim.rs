//! How a watcher ([`super::watch`]) tells every process that the index is fresh, and how a
//! query checks it before trusting the index without a `stat` of every file.
//!
//! Beside the index file `search.sqlite` lie:
//! - `search.sqlite.watch`, the claim: the watcher holds its lock ([`StorageWriter::lock`])
//!   while it follows the store's changes, and the file holds the digest of the store's
//!   directories it follows ([`dirs_digest`]) and the name of the index file it writes
//!   ([`IndexId`]: device, inode and the stamp made with the index's tables). A watcher
//!   that stops, dies or loses changes lets the lock go; one whose index file was removed,
//!   replaced, truncated or damaged (the file at the path is no longer the one it has open)
//!   lets it go too, and claims again only once it has the file at the path open.
//! - A query trusts the claim only for the file it has open itself: the claim must name
//!   that file, as it is at the index's path when the query looks ([`super::index_id`]). An index
//!   made anew beside a watcher that still writes the old one is never trusted for it; the
//!   query then checks the store's files itself, as it does with no watcher.
//! - `search.sqlite.sync/`, where a query leaves a token ([`synced`]) and waits for the
//!   watcher to remove it. The watcher reads the changes of the store and the tokens from
//!   one queue in the order they happened, and removes a token only once every change
//!   before it is indexed: a query that sees its token gone finds every change made before
//!   it started, with no file stat'ed. A query whose tokens the watcher, still holding the
//!   claim, has not taken within [`BEHIND_PATIENCE`] (a large change, a flood of appends)
//!   answers from what the index holds and says so ([`Vouched::Behind`]): indexing the
//!   same changes again beside the watcher would only make both wait on each other.
//!
//! The claim and the tokens are the cache's, on the disk beside it; nothing of the store is
//! written.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::index_id::IndexId;
use gjcfs_engine::storage::{path_to_bytes, FileStorage, OpenMode, SessionStorage, StorageWriter};

/// How long a query waits for the watcher to take one token; it leaves another while the
/// watcher still holds the claim, up to [`BEHIND_PATIENCE`] in all.
pub const SYNC_PATIENCE: Duration = Duration::from_millis(250);

/// The claim file of the index at `index`.
pub fn claim_path(index: &Path) -> PathBuf {
    let mut name = index.as_os_str().to_owned();
    name.push(".watch");
    PathBuf::from(name)
}

/// The directory of the query tokens of the index at `index`.
pub fn sync_dir(index: &Path) -> PathBuf {
    let mut name = index.as_os_str().to_owned();
    name.push(".sync");
    PathBuf::from(name)
}

/// What names the store's directories (each once, in any order): the hex SHA-256 of their
/// sorted paths.
pub fn dirs_digest(dirs: &[PathBuf]) -> String {
    let mut sorted: Vec<&[u8]> = dirs.iter().map(|d| path_to_bytes(d)).collect();
    sorted.sort_unstable();
    sorted.dedup();
    let mut hash = Sha256::new();
    for dir in sorted {
        hash.update(dir);
        hash.update([0]);
    }
    gjcfs_engine::format::blob::hex(&hash.finalize())
}

/// What a claim holds: the directories' digest, then the index file's name.
fn claim_text(digest: &str, id: &IndexId) -> String {
    format!("{digest}\n{}\n", id.line())
}

/// A watcher's hold of the claim.
#[derive(Debug)]
pub struct Claim {
    file: Box<dyn StorageWriter>,
    /// The index file the watcher writes.
    id: IndexId,
}

impl Claim {
    /// Takes the claim of the index at `index`, the file `id`, for the directories of
    /// `digest`; `None` when another watcher holds it (the lock stayed taken for
    /// [`LOCK_PATIENCE`]).
    ///
    /// [`LOCK_PATIENCE`]: gjcfs_engine::storage::LOCK_PATIENCE
    pub fn take(index: &Path, digest: &str, id: IndexId) -> io::Result<Option<Claim>> {
        let mut file = FileStorage.open_writer(&claim_path(index), OpenMode::Append)?;
        match file.lock() {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::TimedOut => return Ok(None),
            Err(e) => return Err(e),
        }
        let mut claim = Claim { file, id };
        claim.follow(digest)?;
        Ok(Some(claim))
    }

    /// Says that the watcher follows the directories of `digest` now.
    pub fn follow(&mut self, digest: &str) -> io::Result<()> {
        self.file.truncate(0)?;
        self.file.write_all(claim_text(digest, &self.id).as_bytes())
    }
}

/// What a watcher's claim says of an index file to a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vouched {
    /// No watcher holds the claim for these directories and this file: the query checks
    /// the store itself.
    No,
    /// A watcher holds it and has indexed every change made before the query.
    Fresh,
    /// A watcher holds it but has not indexed the changes before the query within
    /// [`BEHIND_PATIENCE`] (a large change): the query answers from what the index holds and
    /// says so, rather than index the same change again beside it.
    Behind,
}

/// How long a query waits in all for a watcher that holds the claim to take its token.
pub const BEHIND_PATIENCE: Duration = crate::schema::BUSY_TIMEOUT;

/// Whether a watcher holds the claim of the index at `index` for the directories `dirs` and
/// the index file `id` (the one the caller has open), and whether it has indexed every
/// change made before this call ([`synced`]).
pub fn vouched(index: &Path, dirs: &[PathBuf], id: &IndexId) -> Vouched {
    let claim = claim_path(index);
    let held = || {
        let expected = claim_text(&dirs_digest(dirs), id);
        FileStorage.is_locked(&claim).unwrap_or(false)
            && FileStorage
                .read_prefix(&claim, expected.len() + 1)
                .unwrap_or_default()
                == expected.as_bytes()
    };
    if !held() {
        return Vouched::No;
    }
    let started = Instant::now();
    while started.elapsed() < BEHIND_PATIENCE {
        if synced(index) {
            return Vouched::Fresh;
        }
        if !held() {
            return Vouched::No;
        }
    }
    Vouched::Behind
}

/// Whether a watcher vouches that the index file `id` holds every change made before this
/// call ([`vouched`]).
pub fn is_fresh(index: &Path, dirs: &[PathBuf], id: &IndexId) -> bool {
    vouched(index, dirs, id) == Vouched::Fresh
}

/// Leaves a token for the watcher and waits up to [`SYNC_PATIENCE`] for it to go: whether
/// the watcher took it (the token is removed either way).
pub fn synced(index: &Path) -> bool {
    static TOKENS: AtomicU64 = AtomicU64::new(0);
    let token = sync_dir(index).join(format!(
        "{}-{}",
        std::process::id(),
        TOKENS.fetch_add(1, Ordering::Relaxed)
    ));
    if create_token(&token).is_err() {
        return false;
    }
    let started = Instant::now();
    let mut pause = Duration::from_micros(50);
    while started.elapsed() < SYNC_PATIENCE {
        if !FileStorage.exists(&token) {
            return true;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(2));
    }
    // Not taken in time; the watcher took it meanwhile if it is gone already.
    match FileStorage.unlink(&token) {
        Ok(()) => false,
        Err(e) => e.kind() == io::ErrorKind::NotFound,
    }
}

/// Creates the empty token file (nothing in it needs to be durable: a crash loses the
/// query waiting for it too).
fn create_token(token: &Path) -> io::Result<()> {
    FileStorage
        .open_writer(token, OpenMode::CreateNew)
        .and_then(|w| w.close())
}

/// Takes the tokens of `paths` that are in `sync`: every change before them was indexed.
pub fn take_tokens(sync: &Path, paths: &[PathBuf]) {
    for token in paths.iter().filter(|p| p.parent() == Some(sync)) {
        let _ = FileStorage.unlink(token);
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_names_the_set_of_directories() {
        let a = PathBuf::from("/s/a");
        let b = PathBuf::from("/s/b");
        let ab = dirs_digest(&[a.clone(), b.clone()]);
        assert_eq!(ab, dirs_digest(&[b.clone(), a.clone(), b.clone()]));
        assert_ne!(ab, dirs_digest(std::slice::from_ref(&a)));
        assert_ne!(ab, dirs_digest(&[PathBuf::from("/s/a/s/b")]));
        assert_eq!(ab.len(), 64);
    }

    #[test]
    fn an_index_is_fresh_only_while_a_claim_for_its_directories_is_held_and_tokens_are_taken() {
        let tmp = tempfile::tempdir().unwrap();
        let index = tmp.path().join("search.sqlite");
        FileStorage.ensure_dir(&sync_dir(&index)).unwrap();
        let dirs = vec![tmp.path().join("s")];
        let id = IndexId {
            file: gjcfs_engine::storage::FileId { dev: 1, ino: 2 },
            stamp: "0123".into(),
        };
        let other_file = IndexId {
            stamp: "4567".into(),
            ..id.clone()
        };
        let is_fresh = |dirs: &[PathBuf]| is_fresh(&index, dirs, &id);
        assert!(!is_fresh(&dirs), "no watcher");
        let mut claim = Claim::take(&index, &dirs_digest(&dirs), id.clone())
            .unwrap()
            .unwrap();
        // Nobody takes the token: the query gives up after its patience, leaving nothing.
        let started = Instant::now();
        assert!(!is_fresh(&dirs));
        assert!(started.elapsed() >= SYNC_PATIENCE);
        assert_eq!(std::fs::read_dir(sync_dir(&index)).unwrap().count(), 0);
        // A watcher that takes tokens: fresh, for its directories only.
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let tokens: Vec<PathBuf> = std::fs::read_dir(sync_dir(&index))
                        .unwrap()
                        .map(|e| e.unwrap().path())
                        .collect();
                    take_tokens(&sync_dir(&index), &tokens);
                    std::thread::sleep(Duration::from_millis(1));
                }
            });
            assert!(is_fresh(&dirs));
            assert!(
                !super::is_fresh(&index, &dirs, &other_file),
                "another index file"
            );
            assert!(!is_fresh(&[tmp.path().join("other")]));
            claim
                .follow(&dirs_digest(&[tmp.path().join("other")]))
                .unwrap();
            assert!(!is_fresh(&dirs));
            assert!(is_fresh(&[tmp.path().join("other")]));
            drop(claim);
            assert!(!is_fresh(&[tmp.path().join("other")]), "claim let go");
            stop.store(true, Ordering::Relaxed);
        });
    }
}
