//! Following the store's change events, so that a kernel may keep what it was told of a
//! session's fixed files and directories until the session changes.
//!
//! Where the storage watches every directory of the store (`scan.rs` sets the watch up
//! before the scan that follows it), each event the watch reports is taken here, by the
//! scan or by [`Sessions::follow_store_events`], and the session whose file it names is
//! announced as changed (a loaded session is brought up to its file first): nothing a
//! kernel keeps of it outlives a change by more than the time between two calls. A lost
//! event (the watch's queue overflowed) announces every session; a change of one of the
//! store's directories themselves (a workspace's directory moved, removed or replaced)
//! announces every session listed under it, and nothing is followed until the next scan
//! watches the directories as they are. While no watch covers the
//! store, or for a session no scan listed yet, nothing is followed
//! ([`Sessions::changes_followed`] is false) and a kernel keeps such attributes briefly.
//!
//! Order matters: a caller reads [`Sessions::changes_followed`] before it reads the
//! session, so a change after that read is seen by the watch and announced after the
//! attributes were given; a kernel drops attributes that an announcement overtook.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{EntriesChanged, Events, Sessions};
use crate::SessionSource;
use gjcfs_engine::storage::{Changes, DirWatch};

/// The most changed paths held for the next announcement; beyond, they count as lost
/// (every session announced).
const UNANNOUNCED_MAX: usize = 1 << 16;

/// What the watch reported and no announcement has taken in yet.
#[derive(Default)]
pub(super) struct Unannounced {
    paths: Vec<PathBuf>,
    /// The store's directories that changed themselves (moved, removed, replaced, made):
    /// every session listed under one may now be a file no watch covers.
    dirs: Vec<PathBuf>,
    /// Events were lost: every session may have changed.
    lost: bool,
}

impl Sessions {
    /// Whether every change of session `sid`'s file is announced as it is seen: a watch
    /// covers every directory of the store, and a scan listed `sid` (a scan sets the
    /// watch of a directory up before it lists it; a session found by a lookup before any
    /// scan saw it may be in a directory not watched yet).
    pub(crate) fn changes_followed(&self, sid: &str) -> bool {
        self.followed.load(Ordering::Acquire) && self.listing.lock().contains_key(sid)
    }

    /// Takes what `watch` reported since the last call, for the next scan (which then
    /// lists the store again) and the next [`Sessions::follow_store_events`].
    pub(super) fn take_events(&self, watch: &mut dyn DirWatch) {
        match watch.wait(Duration::ZERO) {
            Ok(Changes::Paths(paths)) if paths.is_empty() => return,
            Ok(Changes::Paths(paths)) => {
                let (dirs, files): (Vec<PathBuf>, Vec<PathBuf>) =
                    paths.into_iter().partition(|p| self.is_store_dir(p));
                if !dirs.is_empty() {
                    // Until the next scan watches the store's directories as they are now.
                    self.followed.store(false, Ordering::Release);
                }
                let mut unannounced = self.unannounced.lock();
                unannounced.dirs.extend(dirs);
                unannounced.paths.extend(files);
                if unannounced.paths.len() > UNANNOUNCED_MAX {
                    // Nobody took them in: held no longer, as if lost.
                    unannounced.paths = Vec::new();
                    unannounced.lost = true;
                }
            }
            Ok(Changes::Lost) | Err(_) => self.unannounced.lock().lost = true,
        }
        self.unscanned.store(true, Ordering::Release);
    }

    /// Whether `path` names one of the store's directories (the store itself, or a
    /// workspace's directory in a sessions root), or something in their place that is not
    /// a file: what the watch covers may have changed with it.
    fn is_store_dir(&self, path: &Path) -> bool {
        let in_layout = match &self.source {
            SessionSource::Dir(dir) => path == dir,
            SessionSource::SessionsRoot(root) => path == root || path.parent() == Some(root),
        };
        in_layout && !self.storage.stat(path).is_ok_and(|stat| stat.is_file)
    }

    /// Announces every session whose file changed since the last call, as the watch of
    /// the store's directories reported it; a loaded session is brought up to its file
    /// first. Nothing while no watch is set up.
    pub(crate) fn follow_store_events(&self, events: &dyn Events) {
        if let Some(watch) = self.watch.lock().as_mut() {
            self.take_events(watch.as_mut());
        }
        let Unannounced { paths, dirs, lost } = std::mem::take(&mut *self.unannounced.lock());
        let changed: Vec<String> = {
            let listing = self.listing.lock();
            if lost {
                listing.keys().cloned().collect()
            } else if paths.is_empty() && dirs.is_empty() {
                return;
            } else {
                // A few paths against every listed one: their names are compared first
                // (no hashing of every listed path).
                let paths: HashSet<PathBuf> = paths.into_iter().collect();
                let names: Vec<&OsStr> = paths.iter().filter_map(|p| p.file_name()).collect();
                listing
                    .iter()
                    .filter(|(_, listed)| {
                        let path = &listed.path;
                        let named = path.file_name().is_some_and(|name| names.contains(&name));
                        (named && paths.contains(path))
                            || dirs.iter().any(|dir| path.starts_with(dir))
                    })
                    .map(|(sid, _)| sid.clone())
                    .collect()
            }
        };
        let busy: Vec<String> = changed
            .into_iter()
            .filter(|sid| !self.announce_change(sid, events))
            .collect();
        if !busy.is_empty() {
            // Followed on the next call, once whoever holds them is done.
            let paths: Vec<PathBuf> = {
                let listing = self.listing.lock();
                busy.iter()
                    .filter_map(|sid| listing.get(sid).map(|listed| listed.path.clone()))
                    .collect()
            };
            self.unannounced.lock().paths.extend(paths);
        }
    }

    /// Session `sid`'s file changed: a loaded session follows it (and announces what
    /// changed); any other is announced whole, entries and all (an outside change may
    /// patch entries). False, announcing nothing, while another thread holds the session
    /// (a write through the mount, whose own change the event may be, or a load): it is
    /// followed on a later call, when what changed can be told. Announcing it whole then
    /// would cost an invalidation of every entry a kernel was ever shown, on every write.
    fn announce_change(&self, sid: &str, events: &dyn Events) -> bool {
        let slot = self.cache.lock().slots.get(sid).cloned();
        if let Some(slot) = slot {
            let Some(mut state) = slot.try_lock() else {
                return false;
            };
            if state.loaded.is_some() {
                self.follow_outside_changes(sid, &mut state, events);
                return true;
            }
        }
        events.changed(sid, EntriesChanged::All);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gjcfs_engine::storage::FileStorage;

    /// A watch that reports `count` changed files once.
    #[derive(Debug)]
    struct Burst(usize);

    impl DirWatch for Burst {
        fn add(&mut self, _dir: &Path) -> std::io::Result<()> {
            Ok(())
        }

        fn wait(&mut self, _timeout: Duration) -> std::io::Result<Changes> {
            let count = std::mem::take(&mut self.0);
            let paths = (0..count).map(|i| PathBuf::from(format!("/store/w/{i}.jsonl")));
            Ok(Changes::Paths(paths.collect()))
        }
    }

    #[test]
    fn changes_nobody_takes_in_are_held_up_to_a_bound_then_count_as_lost() {
        let sessions = Sessions::new(
            std::sync::Arc::new(FileStorage),
            SessionSource::SessionsRoot(PathBuf::from("/store")),
            PathBuf::from("/blobs"),
            (1, false),
        );
        sessions.take_events(&mut Burst(UNANNOUNCED_MAX));
        assert_eq!(sessions.unannounced.lock().paths.len(), UNANNOUNCED_MAX);
        assert!(!sessions.unannounced.lock().lost);
        sessions.take_events(&mut Burst(1));
        let unannounced = sessions.unannounced.lock();
        assert!(unannounced.paths.is_empty() && unannounced.lost);
        assert!(sessions.unscanned.load(Ordering::Acquire));
    }
}
