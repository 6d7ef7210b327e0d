//! [`Sessions`]: the model's sessions. It owns the listing of the store, the loaded
//! sessions (one slot per session, each behind its own lock) and the cache of slots, and
//! tells the rest of the model what changed through [`Events`].
//!
//! Lock order: a session's slot, then — briefly, one at a time — the model's short locks
//! (listing, inodes, handles, errors, the slot cache). A short lock is never held while a
//! slot is locked or while the disk is read, so loading, rendering or writing one session
//! never stops requests for another.
//!
//! A session is loaded for reading: leniently (a torn or malformed line is skipped), with
//! migration and the load-time sanitizer applied in memory, and nothing written. The first
//! write through the mount opens it for writing, with the strict checks a write needs (a
//! legacy transcript is first copied into its workspace's managed scope); a write that
//! fails leaves the session readable and the next write opens it afresh, so a fault that
//! went away (a full disk, a mode that was briefly wrong) does not stay latched.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

mod followed;
mod kept;
mod saved_renderings;
mod scan;

pub use saved_renderings::SavedRenderings;

use crate::content::{Generation, Rendered};
use crate::errors::from_session;
use crate::navigation::Navigation;
use crate::slots::{Listed, Loaded, Slot, SlotCache, SlotState};
use crate::SessionSource;
use crate::VfsError;
use gjcfs_engine::format::blob::BlobStore;
use gjcfs_engine::manager::{
    ReadRules, Refresh, SessionError, SessionManager, StorageConfig, WriteTarget,
};
use gjcfs_engine::storage::{FileVersion, SessionStorage};
use gjcfs_engine::store::discovery::ListingCache;

/// Which of a session's entries changed, for [`Events::changed`].
#[derive(Debug, Clone, Copy)]
pub(super) enum EntriesChanged<'a> {
    None,
    These(&'a [String]),
    All,
}

/// What [`Sessions`] tells the rest of the model.
pub(super) trait Events {
    /// Session `sid` changed: the nodes the kernel may keep of it are stale (of its
    /// entries, those `entries` names).
    fn changed(&self, sid: &str, entries: EntriesChanged<'_>);
    /// A failure to report in the session's `errors` file; `once` keeps a repeat out.
    fn failed(&self, sid: &str, message: &str, once: bool);
    /// The transcript at `path` changed on disk (the search index reads it again).
    fn file_changed(&self, path: &Path);
}

/// The store's sessions as the model knows them.
pub(super) struct Sessions {
    storage: Arc<dyn SessionStorage>,
    source: SessionSource,
    blob_dir: PathBuf,
    /// How many sessions stay loaded at once.
    max_loaded: usize,
    /// `--redact`: each session's pages are rendered redacted ([`Rendered`]).
    redact: bool,
    /// The sessions of the last scan, by id.
    listing: Mutex<HashMap<String, Listed>>,
    /// Held while the store is scanned, so that one scan serves everyone waiting; it holds
    /// what the last scan read, so that a scan reads only the files that changed.
    scan: Mutex<ListingCache>,
    /// Where the listing is saved between runs, and when this server last saved it.
    saved_listing: Option<(PathBuf, Mutex<Option<std::time::Instant>>)>,
    cache: Mutex<SlotCache>,
    /// What is kept of the sessions no longer loaded ([`kept`]).
    kept: Mutex<kept::Kept>,
    /// The sessions' stripped renderings, saved between runs ([`saved_renderings`]); `None`: not
    /// kept.
    saved: Option<Mutex<saved_renderings::RenderingStore>>,
    /// A watch of the store's directories, where the storage can watch them: a scan is
    /// skipped while it saw no change (`scan.rs`).
    watch: Mutex<Option<Box<dyn gjcfs_engine::storage::DirWatch>>>,
    /// The watch covers every directory of the store ([`followed`]).
    followed: std::sync::atomic::AtomicBool,
    /// The watch reported a change the listing has not been scanned for since.
    unscanned: std::sync::atomic::AtomicBool,
    /// What the watch reported and no announcement has taken in yet ([`followed`]).
    unannounced: Mutex<followed::Unannounced>,
    /// Counts the changes of the listing that `by-date/` and `recent/` show (sessions added,
    /// removed or moved, their times), and those two as of a count.
    listing_gen: std::sync::atomic::AtomicU64,
    navigation: Mutex<Option<(u64, Arc<Navigation>)>>,
    /// Sessions left out of the listing, reported once each (the messages not yet taken,
    /// and every file reported so far).
    notices: Mutex<(Vec<String>, HashSet<PathBuf>)>,
}

impl Sessions {
    /// Nothing is read yet: the store is scanned on demand ([`Sessions::rescan`]).
    pub(super) fn new(
        storage: Arc<dyn SessionStorage>,
        source: SessionSource,
        blob_dir: PathBuf,
        (max_loaded, redact): (usize, bool),
    ) -> Self {
        Sessions {
            storage,
            source,
            blob_dir,
            max_loaded,
            redact,
            listing: Mutex::new(HashMap::new()),
            scan: Mutex::new(ListingCache::default()),
            saved_listing: None,
            cache: Mutex::new(SlotCache::default()),
            kept: Mutex::new(kept::Kept::default()),
            saved: None,
            watch: Mutex::new(None),
            followed: Default::default(),
            unscanned: Default::default(),
            unannounced: Default::default(),
            listing_gen: Default::default(),
            navigation: Mutex::new(None),
            notices: Mutex::new((Vec::new(), HashSet::new())),
        }
    }

    pub(super) fn storage(&self) -> &dyn SessionStorage {
        self.storage.as_ref()
    }

    /// `by-date/` and `recent/` of the listing as it is, made anew only when it changed.
    pub(super) fn navigation(&self) -> Arc<Navigation> {
        let generation = self.listing_gen.load(std::sync::atomic::Ordering::SeqCst);
        if let Some((made_at, navigation)) = &*self.navigation.lock() {
            if *made_at == generation {
                return navigation.clone();
            }
        }
        // Made under the listing's lock alone (two callers may both make it).
        let navigation = Arc::new(Navigation::of(self.listing.lock().iter()));
        *self.navigation.lock() = Some((generation, navigation.clone()));
        navigation
    }

    /// Notes that the listing changed what `by-date/` and `recent/` show.
    fn listing_changed(&self) {
        self.listing_gen
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Runs `f` on the listing as the last scan left it.
    pub(super) fn with_listing<R>(&self, f: impl FnOnce(&HashMap<String, Listed>) -> R) -> R {
        f(&self.listing.lock())
    }

    fn slot(&self, sid: &str) -> Arc<Slot> {
        let (slot, evicted) = self.cache.lock().get(sid, self.max_loaded);
        for (old_sid, old) in evicted {
            // A slot in use elsewhere is closed by its last user (the manager's drop).
            if let Some(mut state) = old.try_lock() {
                if let Some(loaded) = state.loaded.take() {
                    let _ = loaded.manager.close();
                    if let Some(version) = loaded.synced {
                        self.save_rendering(&loaded.path, version, &loaded.rendered);
                        let mut kept = self.kept.lock();
                        kept.put(&old_sid, &loaded.path, version, loaded.rendered);
                    }
                }
            }
        }
        slot
    }

    /// `known` of what is kept of session `sid` while it is not loaded and its file has
    /// the version it was rendered from (no load, no render); when that knows nothing,
    /// `known` of the session loaded if need be ([`Sessions::with_session`]: what it
    /// learnt when it was kept stays known while the file is the same), else `loaded` of
    /// it, which renders what is missing.
    pub(super) fn with_known<R>(
        &self,
        sid: &str,
        events: &dyn Events,
        known: impl Fn(&Rendered) -> Option<R>,
        loaded: impl FnOnce(&mut Loaded) -> Result<R, VfsError>,
    ) -> Result<R, VfsError> {
        if !self.cache.lock().slots.contains_key(sid) {
            self.restore_saved(sid);
            let path = self.kept.lock().path_of(sid);
            let listed_there = path.as_ref().is_some_and(|path| {
                self.listing
                    .lock()
                    .get(sid)
                    .is_some_and(|l| l.path == *path)
            });
            let version = path
                .filter(|_| listed_there)
                .and_then(|path| crate::disk::version(self.storage(), &path));
            if let Some(version) = version {
                if let Some(answer) = self.kept.lock().with(sid, &version, &known) {
                    return Ok(answer);
                }
            }
        }
        self.with_session(sid, events, |l| match known(&l.rendered) {
            Some(answer) => Ok(answer),
            None => loaded(l),
        })
    }

    /// The version of session `sid`'s file now (a stat).
    pub(super) fn transcript_version(&self, sid: &str) -> Option<FileVersion> {
        let path = self.listing.lock().get(sid).map(|l| l.path.clone())?;
        crate::disk::version(self.storage(), &path)
    }

    /// The listing entry of `sid`.
    pub(super) fn listed(&self, sid: &str) -> Option<Listed> {
        self.listing.lock().get(sid).cloned()
    }

    /// Runs `f` on the loaded session `sid`, loading it on first touch, following changes
    /// made outside, and re-rendering when its generation changed.
    pub(super) fn with_session<R>(
        &self,
        sid: &str,
        events: &dyn Events,
        f: impl FnOnce(&mut Loaded) -> Result<R, VfsError>,
    ) -> Result<R, VfsError> {
        let slot = self.slot(sid);
        let mut state = slot.lock();
        self.follow_outside_changes(sid, &mut state, events);
        if state.loaded.is_none() {
            self.load(sid, &mut state, events)?;
        }
        let loaded = state.loaded.as_mut().ok_or(VfsError::NotFound)?;
        let now = loaded.manager.read(Generation::of);
        if now != loaded.rendered.generation {
            loaded.rerender(true, &[]);
        }
        f(loaded)
    }

    /// Runs `f` with session `sid` opened for writing; afterwards the model records the
    /// file as its own write left it. A failure is reported under `what`.
    pub(super) fn with_writer<R>(
        &self,
        sid: &str,
        what: &str,
        events: &dyn Events,
        f: impl FnOnce(&SessionManager) -> Result<R, SessionError>,
    ) -> Result<R, VfsError> {
        let result = self.with_session(sid, events, |loaded| {
            if let Err(e) = self.make_writable(sid, loaded, events) {
                return Ok(Err(e));
            }
            let result = f(&loaded.manager);
            if result.is_ok() {
                self.after_write(sid, loaded, events);
            } else {
                // A failed write is rolled back in memory; the next write opens afresh.
                loaded.synced = crate::disk::version(self.storage(), &loaded.path);
                self.note_stamp(sid, loaded.synced);
            }
            events.file_changed(&loaded.path);
            Ok(result)
        })?;
        result.map_err(|e| {
            events.failed(sid, &format!("{what}: {e}"), false);
            events.changed(sid, EntriesChanged::None);
            from_session(&e)
        })
    }

    /// Brings the model up to the file right after a write through it, before anyone can
    /// look: entries another process appended while the write waited for its lock or right
    /// after it are taken in, and when the write raced a writer that does not lock (the
    /// agent's line landed between the check of the file's end and the write), the session
    /// is opened again now — so entries are always numbered in file order, and a name once
    /// shown never changes.
    fn after_write(&self, sid: &str, loaded: &mut Loaded, events: &dyn Events) {
        // Taken before reading: lines landing meanwhile show as a change next time.
        let stamp = crate::disk::version(self.storage(), &loaded.path);
        let mut edited = loaded.manager.take_caught_up_edits();
        match loaded.manager.refresh_from_file() {
            Ok(Refresh::Unchanged) => {}
            Ok(Refresh::Appended { edited: more, .. }) => edited.extend(more),
            Ok(Refresh::NeedsReload(_)) | Err(_) => {
                loaded.writable = false;
                if let Err(e) = self.make_writable(sid, loaded, events) {
                    events.failed(sid, &format!("reopen after a write: {e}"), false);
                }
                return;
            }
        }
        loaded.synced = stamp;
        self.note_stamp(sid, stamp);
        edited.sort_unstable();
        edited.dedup();
        self.took_in(sid, loaded, &edited, events);
    }

    /// Shows lines appended from outside that memory took in: the session rendered again
    /// (patched messages keep the record count, so not by generation alone) and the
    /// entries whose message a patch replaced (`edited`, record indices) announced.
    fn took_in(&self, sid: &str, loaded: &mut Loaded, edited: &[usize], events: &dyn Events) {
        loaded.rerender(true, edited);
        let ids: Vec<String> = loaded.manager.read(|session| {
            edited
                .iter()
                .filter_map(|&i| session.record(i).id().map(str::to_owned))
                .collect()
        });
        events.changed(sid, EntriesChanged::These(&ids));
    }

    /// Replaces a read-only manager (or one whose write failed) by one opened for writing.
    /// Both have the file's leaf (a reader never moves it; a move is written), and the same
    /// ids (a file without ids gets them from its bytes).
    fn make_writable(
        &self,
        sid: &str,
        loaded: &mut Loaded,
        events: &dyn Events,
    ) -> Result<(), SessionError> {
        if loaded.writable && loaded.manager.persist_error().is_none() {
            return Ok(());
        }
        let before = crate::disk::version(self.storage(), &loaded.path);
        let writer = self.open_writer(&loaded.path)?;
        if let Some(cut) = writer.cut_torn_tail() {
            events.failed(
                sid,
                &format!(
                    "the torn last line a crash left ({} bytes at byte {}) was cut off before writing",
                    cut.len, cut.offset
                ),
                false,
            );
        }
        let path = writer.session_file().unwrap_or_else(|| loaded.path.clone());
        let synced = if path == loaded.path {
            before
        } else {
            // A legacy session now lives in its managed copy.
            let stamp = crate::disk::version(self.storage(), &path);
            if let Some(listed) = self.listing.lock().get_mut(sid) {
                listed.path = path.clone();
            }
            self.listing_changed();
            stamp
        };
        loaded.manager = Arc::new(writer);
        // The reader (the session loaded a second time for writing) is let go here unless a
        // handle still holds it: what it took goes back to the system, not to the server's
        // peak for good.
        gjcfs_engine::storage::return_freed_memory();
        loaded.rerender(false, &[]);
        loaded.writable = true;
        loaded.synced = synced;
        loaded.path = path;
        self.note_stamp(sid, synced);
        Ok(())
    }

    fn load(&self, sid: &str, state: &mut SlotState, events: &dyn Events) -> Result<(), VfsError> {
        let listed = self.listed(sid).ok_or(VfsError::NotFound)?;
        // The stamp is taken before the load: an append landing in between then shows as
        // a change on the next access. Taken after, it would hide that append for good.
        let before = crate::disk::version(self.storage(), &listed.path);
        if let Some((stamp, error)) = &state.failed {
            if *stamp == before {
                return Err(error.clone());
            }
        }
        // A file changed while not loaded makes what the kernel kept of the session stale
        // (a reload of the file as it was shows what was shown: the kernel keeps it).
        if listed.seen.is_some() && listed.seen != before {
            events.changed(sid, EntriesChanged::All);
        }
        match self.open_reader(&listed) {
            Ok(manager) => {
                state.failed = None;
                // What was kept of it holds while the file is as it was rendered from (what
                // was learnt of its files stays known); else it carries its entry names over,
                // while they hold.
                self.restore_saved(sid);
                let rendered = match (self.kept.lock().take(sid), state.dropped.take()) {
                    (Some((version, rendered)), _) if Some(version) == before => rendered,
                    (kept, dropped) => match dropped.or(kept.map(|(_, r)| r)) {
                        Some(mut rendered) => {
                            manager.read(|session| rendered.advance(session, false, &[]));
                            rendered
                        }
                        None => manager.read(|session| Rendered::new(session, self.redact)),
                    },
                };
                state.loaded = Some(Loaded {
                    rendered,
                    manager: Arc::new(manager),
                    writable: false,
                    synced: before,
                    path: listed.path,
                });
                self.note_stamp(sid, before);
                Ok(())
            }
            Err(e) => {
                let error = from_session(&e);
                if error == VfsError::NotFound {
                    // Deleted: gone from the listing too, never brought back.
                    self.listing.lock().remove(sid);
                    self.listing_changed();
                } else {
                    events.failed(sid, &format!("cannot read the session: {e}"), true);
                }
                state.failed =
                    matches!(error, VfsError::Unreadable(_)).then(|| (before, error.clone()));
                Err(error)
            }
        }
    }

    fn storage_config(&self) -> StorageConfig {
        StorageConfig {
            storage: self.storage.clone(),
            blobs: BlobStore::new(&self.blob_dir, self.storage.clone()),
        }
    }

    /// A manager that only reads: lenient, migrated and sanitized in memory, never
    /// writing; a managed transcript still has to pass the owner-only checks.
    fn open_reader(&self, listed: &Listed) -> Result<SessionManager, SessionError> {
        let rules = ReadRules::for_path(&listed.path);
        SessionManager::load_for_reading(&listed.path, self.storage_config(), rules)
    }

    /// A manager that writes, by the engine's write rules: the strict checks, a legacy
    /// transcript first copied into its workspace's managed scope.
    fn open_writer(&self, path: &Path) -> Result<SessionManager, SessionError> {
        let target = WriteTarget {
            sessions_root: match &self.source {
                SessionSource::SessionsRoot(root) => Some(root.clone()),
                SessionSource::Dir(_) => None,
            },
            ..WriteTarget::default()
        };
        SessionManager::open_for_writing(path, &target, self.storage_config())
    }

    /// Drops session `sid` from memory when its file changed since the model last saw it
    /// and the change is not lines appended (those are read on their own).
    fn follow_outside_changes(&self, sid: &str, state: &mut SlotState, events: &dyn Events) {
        let Some(loaded) = state.loaded.as_mut() else {
            return;
        };
        // Taken before reading: lines landing during the refresh show as a change next time.
        let now = crate::disk::version(self.storage(), &loaded.path);
        if now == loaded.synced {
            return;
        }
        // The refresh reads on from where memory ends and checks the bytes just before: a
        // file whose version changed while its length did not may have been rewritten in
        // place anywhere before them (a redaction with its mtime put back), which only a
        // load from the start shows.
        let in_place = now.zip(loaded.synced).is_some_and(|(a, b)| a.len == b.len);
        match loaded.manager.refresh_from_file() {
            Ok(Refresh::Unchanged) if !in_place => loaded.synced = now,
            Ok(Refresh::Appended { edited, .. }) => {
                loaded.synced = now;
                self.note_stamp(sid, now);
                self.took_in(sid, loaded, &edited, events);
                events.file_changed(&loaded.path);
            }
            // Rewritten in place, replaced, shortened or unreadable: load it afresh on the
            // next touch.
            Ok(Refresh::Unchanged | Refresh::NeedsReload(_)) | Err(_) => {
                events.file_changed(&loaded.path);
                if let Some(loaded) = state.loaded.take() {
                    if let Err(e) = loaded.manager.close() {
                        events.failed(sid, &format!("close: {e}"), false);
                    }
                    state.dropped = Some(loaded.rendered);
                }
                events.changed(sid, EntriesChanged::All);
            }
        }
    }

    /// Checks every loaded session's file and follows changes made outside.
    pub(super) fn poll(&self, events: &dyn Events) {
        let slots: Vec<(String, Arc<Slot>)> = {
            let cache = self.cache.lock();
            cache
                .slots
                .iter()
                .map(|(sid, slot)| (sid.clone(), slot.clone()))
                .collect()
        };
        for (sid, slot) in slots {
            // A session busy loading or writing is checked at its next access instead.
            if let Some(mut state) = slot.try_lock() {
                self.follow_outside_changes(&sid, &mut state, events);
            }
        }
        self.save_renderings(false);
    }

    fn note_stamp(&self, sid: &str, stamp: Option<FileVersion>) {
        let mut listing = self.listing.lock();
        if let (Some(listed), Some(stamp)) = (listing.get_mut(sid), stamp) {
            let moved = listed.modified_ms != stamp.modified_ms();
            listed.modified_ms = stamp.modified_ms();
            listed.seen = Some(stamp);
            drop(listing);
            if moved {
                self.listing_changed();
            }
        }
    }

    /// Closes every loaded manager (flushing its writes); returns the failures.
    pub(super) fn close_all(&self) -> Vec<(String, String)> {
        let slots: Vec<(String, Arc<Slot>)> = {
            let mut cache = self.cache.lock();
            cache.lru.clear();
            cache.slots.drain().collect()
        };
        let mut failures = Vec::new();
        for (sid, slot) in slots {
            if let Some(loaded) = slot.lock().loaded.take() {
                if let Some(version) = loaded.synced {
                    self.save_rendering(&loaded.path, version, &loaded.rendered);
                }
                if let Err(e) = loaded.manager.close() {
                    failures.push((sid, e.to_string()));
                }
            }
        }
        self.save_renderings(true);
        failures
    }
}
