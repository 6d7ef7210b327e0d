//! Listing the store: one scan at a time, reading only the files that changed since the
//! last one, titles carried over for unchanged files, and sessions whose id cannot name a
//! directory left out and reported once. Where the storage can watch the store's
//! directories (the disk on Linux), a scan that follows one is skipped while the watch
//! saw no change of them: nothing is stat'ed at all.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::Sessions;
use crate::layout::safe_session_name;
use crate::slots::Listed;
use crate::SessionSource;
use gjcfs_engine::store::discovery::{list_all_cached, list_dir_cached, ListingCache, SessionInfo};

/// How often a changed listing is saved again, after the first scan saved it.
const SAVE_EVERY: Duration = Duration::from_secs(600);

impl Sessions {
    /// Starts the listing from the one saved at `path` (by `gjcfs ls` or an earlier mount),
    /// and saves it there ([`Sessions::rescan`]); `None`: nothing is saved.
    pub(crate) fn saving_listing_at(mut self, path: Option<PathBuf>) -> Self {
        if let Some(path) = &path {
            *self.scan.get_mut() = ListingCache::load(path);
        }
        self.saved_listing = path.map(|path| (path, parking_lot::Mutex::new(None)));
        self
    }

    /// Saves the listing `cache` holds if it changed, after the first scan and then at most
    /// every [`SAVE_EVERY`]: a cache in the user's cache directory, never the store; one
    /// that cannot be written costs the next start its speed only.
    fn save_listing(&self, cache: &mut ListingCache) {
        let Some((path, last)) = &self.saved_listing else {
            return;
        };
        let mut last = last.lock();
        if last.is_some_and(|at| at.elapsed() < SAVE_EVERY) {
            return;
        }
        let _ = cache.save(self.storage(), path);
        *last = Some(Instant::now());
    }

    /// Lists the store again (one scan at a time, no other lock held meanwhile), calling
    /// `progress(done, total)` after each transcript file read.
    pub(crate) fn rescan(&self, progress: &dyn Fn(usize, usize)) {
        // One scan at a time, until its listing is in place (a slower scan never puts an
        // older listing over a newer one); what a scan read, the next one need not read.
        let mut cache = self.scan.lock();
        if !self.store_changed() {
            return;
        }
        let storage = self.storage();
        let infos: Vec<SessionInfo> = match &self.source {
            SessionSource::SessionsRoot(root) => {
                list_all_cached(storage, root, &mut cache, progress).unwrap_or_default()
            }
            SessionSource::Dir(dir) => {
                list_dir_cached(storage, dir, &mut cache, progress).unwrap_or_default()
            }
        };
        let (usable, unsafe_ids): (Vec<SessionInfo>, Vec<SessionInfo>) = infos
            .into_iter()
            .partition(|info| safe_session_name(&info.id));
        self.leave_out(unsafe_ids);
        let fresh: HashMap<String, Listed> = usable
            .into_iter()
            .map(|mut info| {
                // A title may take a read past the file's first 4 KiB (where the count
                // of messages, from those 4 KiB alone, may be 0): what it found is kept
                // with the file's listing, and not looked for again while the file is
                // unchanged.
                if info.find_first_prompt(storage) {
                    cache.complete(&info);
                }
                let listed = Listed {
                    title: info.shown_title().to_owned(),
                    path: info.path,
                    cwd: info.cwd,
                    modified_ms: info.modified_ms,
                    seen: None,
                    created: info.created,
                };
                (info.id, listed)
            })
            .collect();
        let mut listing = self.listing.lock();
        let previous = std::mem::take(&mut *listing);
        *listing = fresh
            .into_iter()
            .map(|(id, mut listed)| {
                listed.seen = previous
                    .get(&id)
                    .filter(|old| old.path == listed.path)
                    .and_then(|old| old.seen);
                (id, listed)
            })
            .collect();
        let changed = *listing != previous;
        drop(listing);
        if changed {
            self.listing_changed();
        }
        self.save_listing(&mut cache);
    }

    /// Whether the store may have changed since the last scan: always without a watch of
    /// its directories; with one, when it saw a change or lost some. The watch is set up
    /// (again) before a scan that follows, so that a change made during the scan shows
    /// next time.
    fn store_changed(&self) -> bool {
        let mut watch = self.watch.lock();
        if let Some(w) = watch.as_mut() {
            self.take_events(w.as_mut());
            if !self.unscanned.swap(false, Ordering::AcqRel) {
                return false;
            }
        }
        if watch.is_none() {
            *watch = self.storage.watch().ok();
        }
        let dirs = match &self.source {
            SessionSource::Dir(dir) => vec![dir.clone()],
            SessionSource::SessionsRoot(root) => {
                let mut dirs = self.storage.list_dirs(root).unwrap_or_default();
                dirs.push(root.clone());
                dirs
            }
        };
        // Only where the kernel tells every writer's change (a local filesystem whose
        // directory times tell their entries' changes too: not a network one).
        let local = |dir: &PathBuf| {
            self.storage
                .dir_lookup(dir)
                .and_then(Result::ok)
                .and_then(|d| d.listing_version().ok().flatten())
                .is_some()
        };
        let watched = watch
            .as_mut()
            .is_some_and(|w| dirs.iter().all(|dir| local(dir) && w.add(dir).is_ok()));
        if !watched {
            // A directory that cannot be watched (or a store not made yet): every scan
            // looks at the store.
            *watch = None;
        }
        self.followed.store(watched, Ordering::Release);
        true
    }

    /// Reports each session of `infos` (its id cannot name a directory) the first time.
    fn leave_out(&self, infos: Vec<SessionInfo>) {
        let mut notices = self.notices.lock();
        for info in infos {
            if notices.1.insert(info.path.clone()) {
                notices.0.push(format!(
                    "{}: left out: its session id {:?} cannot name a directory",
                    info.path.display(),
                    info.id
                ));
            }
        }
    }

    /// What the scans left out and why, since the last call.
    pub(crate) fn take_notices(&self) -> Vec<String> {
        std::mem::take(&mut self.notices.lock().0)
    }
}
