//! The sessions the model has loaded: one slot per session, each behind its own lock.
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

use std::path::Path;
use std::sync::Arc;

use super::content::{Generation, Rendered};
use super::errors::from_session;
use super::fs::{EntriesChanged, Vfs, RESET_GRACE};
use super::slots::{Listed, Loaded, Slot, SlotState};
use super::SessionSource;
use super::VfsError;
use gjcfs_engine::format::blob::BlobStore;
use gjcfs_engine::manager::{
    ReadRules, Refresh, SessionError, SessionManager, StorageConfig, WriteTarget,
};
use gjcfs_engine::storage::FileVersion;

impl Vfs {
    fn slot(&self, sid: &str) -> Arc<Slot> {
        let (slot, evicted) = self.cache.lock().get(sid, self.config.max_loaded);
        for old in evicted {
            // A slot in use elsewhere is closed by its last user (the manager's drop).
            if let Some(mut state) = old.try_lock() {
                if let Some(loaded) = state.loaded.take() {
                    let _ = loaded.manager.close();
                }
            }
        }
        slot
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
        f: impl FnOnce(&mut Loaded) -> Result<R, VfsError>,
    ) -> Result<R, VfsError> {
        let slot = self.slot(sid);
        let mut state = slot.lock();
        self.follow_outside_changes(sid, &mut state);
        if state.loaded.is_none() {
            self.load(sid, &mut state)?;
        }
        let loaded = state.loaded.as_mut().ok_or(VfsError::NotFound)?;
        let now = loaded.manager.read(Generation::of);
        if now != loaded.rendered.generation {
            loaded.rerender(true, &[]);
        }
        f(loaded)
    }

    /// Runs `f` with session `sid` opened for writing; afterwards the model records the
    /// file as its own write left it. A failure is recorded in `errors` under `what`.
    /// `accepted` says the bytes were taken before writes stopped (a line completed by a
    /// close): those are still written while the server shuts down.
    pub(super) fn with_writer<R>(
        &self,
        sid: &str,
        what: &str,
        accepted: bool,
        f: impl FnOnce(&SessionManager) -> Result<R, SessionError>,
    ) -> Result<R, VfsError> {
        let _gate = self.write_gate.read();
        if self.config.read_only || (self.writes_stopped() && !accepted) {
            return Err(VfsError::ReadOnly);
        }
        let result = self.with_session(sid, |loaded| {
            if let Err(e) = self.make_writable(sid, loaded) {
                return Ok(Err(e));
            }
            let result = f(&loaded.manager);
            if result.is_ok() {
                self.after_write(sid, loaded);
            } else {
                // A failed write is rolled back in memory; the next write opens afresh.
                loaded.synced = super::disk::version(self.storage(), &loaded.path);
                self.note_stamp(sid, loaded.synced);
            }
            self.search.session_changed(&loaded.path);
            Ok(result)
        })?;
        result.map_err(|e| {
            self.errors.push(sid, &format!("{what}: {e}"));
            self.announce(sid, EntriesChanged::None);
            from_session(&e)
        })
    }

    /// Brings the model up to the file right after a write through it, before anyone can
    /// look: entries another process appended while the write waited for its lock or right
    /// after it are taken in, and when the write raced a writer that does not lock (the
    /// agent's line landed between the check of the file's end and the write), the session
    /// is opened again now — so entries are always numbered in file order, and a name once
    /// shown never changes.
    fn after_write(&self, sid: &str, loaded: &mut Loaded) {
        // Taken before reading: lines landing meanwhile show as a change next time.
        let stamp = super::disk::version(self.storage(), &loaded.path);
        let mut edited = loaded.manager.take_caught_up_edits();
        match loaded.manager.refresh_from_file() {
            Ok(Refresh::Unchanged) => {}
            Ok(Refresh::Appended { edited: more, .. }) => edited.extend(more),
            Ok(Refresh::NeedsReload(_)) | Err(_) => {
                loaded.writable = false;
                if let Err(e) = self.make_writable(sid, loaded) {
                    self.errors.push(sid, &format!("reopen after a write: {e}"));
                }
                return;
            }
        }
        loaded.synced = stamp;
        self.note_stamp(sid, stamp);
        edited.sort_unstable();
        edited.dedup();
        self.took_in(sid, loaded, &edited);
    }

    /// Shows lines appended from outside that memory took in: the session rendered again
    /// (patched messages keep the record count, so not by generation alone) and the
    /// entries whose message a patch replaced (`edited`, record indices) announced.
    fn took_in(&self, sid: &str, loaded: &mut Loaded, edited: &[usize]) {
        loaded.rerender(true, edited);
        let ids: Vec<String> = loaded.manager.read(|session| {
            edited
                .iter()
                .filter_map(|&i| session.record(i).id().map(str::to_owned))
                .collect()
        });
        self.announce(sid, EntriesChanged::These(&ids));
    }

    /// Replaces a read-only manager (or one whose write failed) by one opened for writing.
    /// Both have the file's leaf (a reader never moves it; a move is written), and the same
    /// ids (a file without ids gets them from its bytes).
    fn make_writable(&self, sid: &str, loaded: &mut Loaded) -> Result<(), SessionError> {
        if loaded.writable && loaded.manager.persist_error().is_none() {
            return Ok(());
        }
        let before = super::disk::version(self.storage(), &loaded.path);
        let writer = self.open_writer(&loaded.path)?;
        if let Some(cut) = writer.cut_torn_tail() {
            self.errors.push(
                sid,
                &format!(
                    "the torn last line a crash left ({} bytes at byte {}) was cut off before writing",
                    cut.len, cut.offset
                ),
            );
        }
        let path = writer.session_file().unwrap_or_else(|| loaded.path.clone());
        let synced = if path == loaded.path {
            before
        } else {
            // A legacy session now lives in its managed copy.
            let stamp = super::disk::version(self.storage(), &path);
            if let Some(listed) = self.listing.lock().get_mut(sid) {
                listed.path = path.clone();
            }
            stamp
        };
        loaded.manager = Arc::new(writer);
        loaded.rerender(false, &[]);
        loaded.writable = true;
        loaded.synced = synced;
        loaded.path = path;
        self.note_stamp(sid, synced);
        Ok(())
    }

    fn load(&self, sid: &str, state: &mut SlotState) -> Result<(), VfsError> {
        let listed = self.listed(sid).ok_or(VfsError::NotFound)?;
        // The stamp is taken before the load: an append landing in between then shows as
        // a change on the next access. Taken after, it would hide that append for good.
        let before = super::disk::version(self.storage(), &listed.path);
        if let Some((stamp, error)) = &state.failed {
            if *stamp == before {
                return Err(error.clone());
            }
        }
        // A reload comes back with the file's leaf; a file changed while not loaded also
        // makes what the kernel kept of its entries stale.
        let stale = listed.seen.is_some() && listed.seen != before;
        self.announce(
            sid,
            if stale {
                EntriesChanged::All
            } else {
                EntriesChanged::None
            },
        );
        match self.open_reader(&listed) {
            Ok(manager) => {
                state.failed = None;
                let rendered = match state.dropped.take() {
                    Some(mut rendered) => {
                        manager.read(|session| rendered.advance(session, false, &[]));
                        rendered
                    }
                    None => manager.read(Rendered::new),
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
                } else {
                    self.errors
                        .push_once(sid, &format!("cannot read the session: {e}"));
                }
                state.failed =
                    matches!(error, VfsError::Unreadable(_)).then(|| (before, error.clone()));
                Err(error)
            }
        }
    }

    fn storage_config(&self) -> StorageConfig {
        StorageConfig {
            storage: self.config.storage.clone(),
            blobs: BlobStore::new(&self.config.blob_dir, self.config.storage.clone()),
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
            sessions_root: match &self.config.source {
                SessionSource::SessionsRoot(root) => Some(root.clone()),
                SessionSource::Dir(_) => None,
            },
            ..WriteTarget::default()
        };
        SessionManager::open_for_writing(path, &target, self.storage_config())
    }

    /// Drops session `sid` from memory when its file changed since the model last saw it
    /// and the change is not lines appended (those are read on their own).
    fn follow_outside_changes(&self, sid: &str, state: &mut SlotState) {
        let Some(loaded) = state.loaded.as_mut() else {
            return;
        };
        // Taken before reading: lines landing during the refresh show as a change next time.
        let now = super::disk::version(self.storage(), &loaded.path);
        if now == loaded.synced {
            return;
        }
        match loaded.manager.refresh_from_file() {
            Ok(Refresh::Unchanged) => loaded.synced = now,
            Ok(Refresh::Appended { edited, .. }) => {
                loaded.synced = now;
                self.note_stamp(sid, now);
                self.took_in(sid, loaded, &edited);
                self.search.session_changed(&loaded.path);
            }
            // Replaced, shortened or unreadable: load it afresh on the next touch.
            Ok(Refresh::NeedsReload(_)) | Err(_) => {
                self.search.session_changed(&loaded.path);
                if let Some(loaded) = state.loaded.take() {
                    if let Err(e) = loaded.manager.close() {
                        self.errors.push(sid, &format!("close: {e}"));
                    }
                    state.dropped = Some(loaded.rendered);
                }
                self.announce(sid, EntriesChanged::All);
            }
        }
    }

    /// Checks every loaded session's file and follows changes made outside (the agent
    /// appending), announcing them. The mount calls it about twice a second, so cached
    /// views follow the agent's writes even when nobody asks the model.
    pub fn poll_outside_changes(&self) {
        self.search.reindex_changed();
        self.apply_pending_resets(RESET_GRACE);
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
                self.follow_outside_changes(&sid, &mut state);
            }
        }
    }

    fn note_stamp(&self, sid: &str, stamp: Option<FileVersion>) {
        if let (Some(listed), Some(stamp)) = (self.listing.lock().get_mut(sid), stamp) {
            listed.modified_ms = stamp.modified_ms();
            listed.seen = Some(stamp);
        }
    }

    /// Closes every loaded manager (flushing its writes); returns the failures.
    pub(super) fn close_sessions(&self) -> Vec<(String, String)> {
        let slots: Vec<(String, Arc<Slot>)> = {
            let mut cache = self.cache.lock();
            cache.lru.clear();
            cache.slots.drain().collect()
        };
        let mut failures = Vec::new();
        for (sid, slot) in slots {
            if let Some(loaded) = slot.lock().loaded.take() {
                if let Err(e) = loaded.manager.close() {
                    failures.push((sid, e.to_string()));
                }
            }
        }
        failures
    }
}
