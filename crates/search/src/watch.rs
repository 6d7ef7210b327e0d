//! Keeping an index fresh from the storage's change events ([`SessionStorage::watch`]), so
//! that a query can trust it ([`super::claim`]) instead of a `stat` of every file.
//!
//! The watcher runs on a thread of its own:
//! 1. it watches the store's root (for directories made or removed), the directory of the
//!    query tokens and every directory of the store, then brings the index up to date with
//!    a full check ([`SearchIndex::update_dirs`]) and takes the claim;
//! 2. it reads the changes as they come: a transcript that changed is brought up to date
//!    alone ([`SearchIndex::update_session`]), a change of the store's directories watches
//!    the new ones and checks them all again, and a query's token is removed once every
//!    change before it is indexed;
//!    A transcript it could not take in because another connection kept the index's write
//!    lock (a search writing beside it) is kept, with the tokens that came after it, and
//!    tried again at the next turn: the claim stays, and queries meanwhile find the watcher
//!    behind ([`claim::Vouched::Behind`]);
//! 3. when changes were lost, or the index could not be written, or the index file is no
//!    longer the one at the index's path (removed, replaced, truncated, damaged: looked at
//!    five times a second), it lets the claim go and starts again at 1, on the file at the
//!    path once there is one — queries check the store themselves meanwhile.
//!
//! It claims only a store whose every directory is on a local filesystem whose directory
//! times tell every change of their entries ([`DirLookup::listing_version`]): there a watch
//! sees every writer of the machine. Elsewhere it keeps no claim and tries again later.
//!
//! [`DirLookup::listing_version`]: gjcfs_engine::storage::DirLookup::listing_version

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::claim::{self, Claim};
use super::index_id::IndexId;
use super::{SearchIndex, Store};
use gjcfs_engine::storage::{Changes, DirWatch, FileStorage, SessionStorage};
use gjcfs_engine::store::discovery::is_transcript_name;

/// How long the watcher waits for changes before it looks whether it should stop.
const WAIT: Duration = Duration::from_millis(200);
/// How long it waits before it starts again after a failure.
const RETRY: Duration = Duration::from_secs(2);

/// How long dropping a [`Watching`] waits for its thread to end: one in the middle of a
/// long update is left to end with the process (its transaction is SQLite's to roll back),
/// so that an unmount never waits for an index build.
const STOP_PATIENCE: Duration = Duration::from_secs(1);

/// A watcher at work; dropping it stops it (and lets its claim go).
#[derive(Debug)]
pub struct Watching {
    stop: Arc<AtomicBool>,
    /// Says when the thread ended.
    ended: std::sync::mpsc::Receiver<()>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Watching {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if self.ended.recv_timeout(STOP_PATIENCE).is_ok() {
            if let Some(thread) = self.thread.take() {
                let _ = thread.join();
            }
        }
    }
}

/// Starts watching `store` for `index`, which must be a file; an error when the storage
/// cannot watch or the index is in memory.
pub fn start(index: Arc<SearchIndex>, store: Store, threads: usize) -> io::Result<Watching> {
    let Some(path) = index.path().map(Path::to_owned) else {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "an index in memory is not watched",
        ));
    };
    let storage = index.storage();
    let watch = storage.watch()?;
    let sync = claim::sync_dir(&path);
    FileStorage.ensure_dir(&sync)?;
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = Watcher {
        index,
        store,
        storage,
        threads,
        path,
        sync,
        stop: stop.clone(),
    };
    let (end, ended) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("gjcfs-search-watch".into())
        .spawn(move || {
            watcher.run(watch);
            let _ = end.send(());
        })?;
    Ok(Watching {
        stop,
        ended,
        thread: Some(thread),
    })
}

struct Watcher {
    index: Arc<SearchIndex>,
    store: Store,
    storage: Arc<dyn SessionStorage>,
    threads: usize,
    /// The index file.
    path: PathBuf,
    /// Where queries leave their tokens.
    sync: PathBuf,
    stop: Arc<AtomicBool>,
}

/// What the watcher follows: the store's root (canonical, for a [`Store::Root`]), its
/// directories, the index file it writes, and the claim while it holds it.
struct Following {
    root: Option<PathBuf>,
    dirs: Vec<PathBuf>,
    /// The index file written, and when it was last found at the index's path.
    id: IndexId,
    checked: Instant,
    claim: Option<Claim>,
    /// Changes not taken in yet (the write lock was busy), with the tokens after them.
    pending: Vec<PathBuf>,
}

impl Watcher {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn run(self, mut watch: Box<dyn DirWatch>) {
        while !self.stopped() {
            let followed = self
                .start_following(watch.as_mut())
                .and_then(|following| self.follow(watch.as_mut(), following));
            if followed.is_err() {
                // The claim is let go already; the store is checked afresh after a pause.
                let mut waited = Duration::ZERO;
                while waited < RETRY && !self.stopped() {
                    std::thread::sleep(WAIT);
                    waited += WAIT;
                }
            }
        }
    }

    /// Step 1: open the file at the index's path (if it is not the one open: a file removed
    /// is waited for), watch everything, bring the index up to date, claim the file.
    fn start_following(&self, watch: &mut dyn DirWatch) -> io::Result<Following> {
        self.index.reopen().map_err(io::Error::other)?;
        let root = match &self.store {
            Store::Root(root) => Some(self.storage.canonicalize(root)?),
            Store::Dir(_) => None,
        };
        if let Some(root) = &root {
            watch.add(root)?;
        }
        watch.add(&self.sync)?;
        let dirs = self.watch_dirs(watch)?;
        self.update_all(&dirs)?;
        // The update replaces a file it finds damaged.
        let id = self.index.reopen().map_err(io::Error::other)?;
        let claim = if self.all_local(&dirs) {
            Claim::take(&self.path, &claim::dirs_digest(&dirs), id.clone())?
        } else {
            None
        };
        Ok(Following {
            root,
            dirs,
            id,
            checked: Instant::now(),
            claim,
            pending: Vec::new(),
        })
    }

    /// Brings the index up to date with every file of `dirs`: an error when another
    /// connection kept the index's write lock and some were not.
    fn update_all(&self, dirs: &[PathBuf]) -> io::Result<()> {
        let report = self
            .index
            .update_dirs(dirs, self.threads, &|_| {})
            .map_err(io::Error::other)?;
        if report.busy {
            return Err(io::Error::other(
                "the index was written by another connection",
            ));
        }
        Ok(())
    }

    /// The store's directories now, each watched.
    fn watch_dirs(&self, watch: &mut dyn DirWatch) -> io::Result<Vec<PathBuf>> {
        let dirs = self.store.dirs(self.storage.as_ref())?;
        for dir in &dirs {
            match watch.add(dir) {
                Ok(()) => {}
                // Gone since it was listed: the root's change says so next.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(dirs)
    }

    /// Whether every directory is one whose changes a watch sees, whoever makes them.
    fn all_local(&self, dirs: &[PathBuf]) -> bool {
        dirs.iter().all(|dir| {
            self.storage
                .dir_lookup(dir)
                .and_then(Result::ok)
                .and_then(|d| d.listing_version().ok().flatten())
                .is_some()
        })
    }

    /// Step 2, until the watcher stops (`Ok`) or changes are lost or cannot be indexed, or
    /// the index file written is no longer the one at the index's path (looked at every
    /// [`WAIT`]).
    fn follow(&self, watch: &mut dyn DirWatch, mut following: Following) -> io::Result<()> {
        while !self.stopped() {
            let mut paths = match watch.wait(WAIT)? {
                Changes::Lost => return Err(io::Error::other("changes were lost")),
                Changes::Paths(paths) => paths,
            };
            if !following.pending.is_empty() {
                let mut all = std::mem::take(&mut following.pending);
                all.append(&mut paths);
                paths = all;
            }
            if !paths.is_empty() {
                self.take_in(watch, &paths, &mut following)?;
            }
            if following.checked.elapsed() >= WAIT {
                if self.index.file_id().as_ref() != Some(&following.id) {
                    return Err(io::Error::other("the index file was replaced or removed"));
                }
                following.checked = Instant::now();
            }
        }
        Ok(())
    }

    /// Indexes the changes of `paths`, then takes the tokens among them.
    fn take_in(
        &self,
        watch: &mut dyn DirWatch,
        paths: &[PathBuf],
        following: &mut Following,
    ) -> io::Result<()> {
        let dir_changed = paths.iter().any(|p| following.is_dir_change(p));
        if dir_changed {
            following.dirs = self.watch_dirs(watch)?;
            self.update_all(&following.dirs)?;
            if let Some(claim) = &mut following.claim {
                claim.follow(&claim::dirs_digest(&following.dirs))?;
            }
        } else {
            let mut done: Vec<&Path> = Vec::new();
            for path in paths.iter().filter(|p| is_transcript(p, &following.dirs)) {
                if done.contains(&path.as_path()) {
                    continue;
                }
                match self.index.update_session(path) {
                    Ok(_) => done.push(path),
                    Err(e) if e.is_busy() => {
                        // This and every later change and token, at the next turn.
                        let at = paths.iter().position(|p| p == path).unwrap_or(0);
                        following.pending = paths[at..].to_vec();
                        claim::take_tokens(&self.sync, &paths[..at]);
                        return Ok(());
                    }
                    Err(e) => return Err(io::Error::other(e)),
                }
            }
        }
        claim::take_tokens(&self.sync, paths);
        Ok(())
    }
}

impl Following {
    /// Whether `path` names a directory of the store, or an entry of the root (a directory
    /// made, removed or renamed there).
    fn is_dir_change(&self, path: &Path) -> bool {
        let in_root = self
            .root
            .as_deref()
            .is_some_and(|root| path == root || path.parent() == Some(root));
        in_root || self.dirs.iter().any(|d| d == path)
    }
}

/// Whether `path` is a transcript in one of `dirs`.
fn is_transcript(path: &Path, dirs: &[PathBuf]) -> bool {
    let named = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(is_transcript_name);
    named && path.parent().is_some_and(|p| dirs.iter().any(|d| d == p))
}
