//! The persistence state machine: deferred persistence, full rewrites, appends of whole
//! lines, latched errors, and committing new entries.

use std::path::{Path, PathBuf};

use crate::format::ids;
use crate::format::migrate::Migration;
use crate::format::persist::prepare_for_persist;
use crate::format::record::Record;
use crate::format::time;
use crate::json::Object;
use crate::read::load::{
    build_session, load_entries_from_storage, LoadError, LoadStatus, ReadMark,
};
use crate::read::replay::patches_apply;
use crate::session::tree::Session;
use crate::storage::{check_private_file, FileId, OpenMode, SessionStorage, StorageWriter};

use super::rewrite::Refusal;
use super::{
    atomic_replace_checked, build_entry, entries, is_assistant, new_header, session_file_name,
    AppendPhase, Base, PersistError, SessionError, SessionResult, State, StorageConfig,
};

impl State {
    pub(super) fn fresh(
        config: StorageConfig,
        cwd: &str,
        session_dir: Option<PathBuf>,
        persist: bool,
    ) -> Self {
        let header = new_header(&ids::new_session_id(), cwd, None);
        let file = session_dir
            .as_ref()
            .map(|d| d.join(session_file_name(&header)));
        State {
            config,
            persist,
            cwd: cwd.to_owned(),
            session_dir,
            file,
            session: Session::from_records(vec![header]),
            flushed: false,
            ensured_on_disk: false,
            needs_full_rewrite: false,
            has_assistant: false,
            managed: false,
            writer: None,
            latched: None,
            synced: None,
            strict_reads: false,
            unchecked_appends: false,
            read_only: false,
            owed: Vec::new(),
            append_locked: false,
            caught_up_edits: Vec::new(),
        }
    }

    pub(super) fn storage(&self) -> &dyn SessionStorage {
        self.config.storage.as_ref()
    }

    /// Switches to `session` at `file`, clearing a latched error.
    pub(super) fn adopt(&mut self, session: Session, file: Option<PathBuf>, on_disk: bool) {
        self.close_writer();
        self.has_assistant = session.entries().any(is_assistant);
        self.cwd = session.header().cwd().unwrap_or(&self.cwd).to_owned();
        self.session = session;
        self.file = file;
        self.flushed = on_disk;
        self.ensured_on_disk = on_disk;
        self.needs_full_rewrite = false;
        self.latched = None;
        self.synced = None;
        self.owed.clear();
    }

    pub(super) fn close_writer(&mut self) {
        self.check_appends();
        // Closing the descriptor drops its lock.
        self.append_locked = false;
        if let Some(writer) = self.writer.take() {
            let _ = writer.close();
        }
    }

    /// Runs `f` holding the append lock on the session file ([`StorageWriter::lock`]): the
    /// lock orders gjcfs's own writers of one file, so that what one of them checks of the
    /// file's end still holds when it writes. Taken only where there is a file to lock
    /// (nothing is created for it) and the platform grants it; without it `f` runs
    /// anyway, as the agent's own writes do. Nested calls take it once.
    pub(super) fn with_append_lock<R>(&mut self, f: impl FnOnce(&mut State) -> R) -> R {
        if self.append_locked {
            return f(self);
        }
        self.append_locked = self.take_append_lock();
        let result = f(self);
        if std::mem::take(&mut self.append_locked) {
            let unlocked = self.writer.as_mut().is_none_or(|w| w.unlock().is_ok());
            if !unlocked {
                // Closing the descriptor drops the lock for sure.
                self.close_writer();
            }
        }
        result
    }

    /// Locks the file through the open writer, opening one (never creating the file) when
    /// there is none; whether the lock is held.
    fn take_append_lock(&mut self) -> bool {
        let Some(path) = self.file.clone() else {
            return false;
        };
        if !self.persist || self.read_only {
            return false;
        }
        if self.writer.is_none() {
            match self.storage().open_writer(&path, OpenMode::AppendExisting) {
                Ok(writer) => self.writer = Some(writer),
                Err(_) => return false,
            }
        }
        self.writer.as_mut().is_some_and(|w| w.lock().is_ok())
    }

    /// Before entries from outside are appended: memory takes in the complete lines other
    /// processes appended since it last looked ([`State::refresh`]), so that the new
    /// entries follow them. A file memory cannot follow (replaced, rewritten, a write of
    /// this manager that raced another's) is appended to as it is, as before, and so is one
    /// that cannot be read now: the append itself then says what is wrong.
    pub(super) fn catch_up(&mut self) {
        if self.synced.is_none() || self.needs_full_rewrite {
            return;
        }
        if let Ok(super::Refresh::Appended { edited, .. }) = self.refresh() {
            self.caught_up_edits.extend(edited);
        }
    }

    pub(super) fn fail(&mut self, path: &Path, e: std::io::Error) -> PersistError {
        let err = PersistError::new(path, e);
        self.close_writer();
        self.synced = None;
        self.latched.get_or_insert_with(|| err.clone());
        err
    }

    pub(super) fn check_latched(&self) -> Result<(), PersistError> {
        match &self.latched {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Refuses a write: a manager loaded for reading never writes.
    pub(super) fn check_writable(&self) -> SessionResult<()> {
        match (&self.file, self.read_only) {
            (Some(path), true) => Err(SessionError::ReadOnly { path: path.clone() }),
            _ => Ok(()),
        }
    }

    /// What a full rewrite of `path` must find there: nothing, or the very file memory
    /// reflects (same identity and size as the `synced` mark) with no other process holding
    /// it open for writing. A refusal is an [`io::Error`] carrying a [`Refusal`].
    fn rewrite_precondition(&self, path: &Path) -> std::io::Result<()> {
        let storage = self.storage();
        let stat = match storage.stat(path) {
            Ok(stat) => stat,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        let reflected = self
            .synced
            .as_ref()
            .is_some_and(|mark| mark.id == stat.id && mark.end == stat.len);
        if !reflected {
            return Err(Refusal::ChangedOnDisk.into());
        }
        let pids = storage.writers_elsewhere(path)?;
        if !pids.is_empty() {
            return Err(Refusal::OpenElsewhere(pids).into());
        }
        Ok(())
    }

    /// Writes every record to the file in one atomic replacement. An existing file is
    /// replaced only while it is still the file memory reflects (checked before the temp
    /// file is written and again right before the rename); otherwise nothing changes and the
    /// refusal is returned (not latched).
    pub(super) fn full_rewrite(&mut self) -> SessionResult<()> {
        let Some(path) = self.file.clone() else {
            return Ok(());
        };
        self.check_writable()?;
        self.check_latched()?;
        self.close_writer();
        if let Some(dir) = path.parent() {
            if let Err(e) = self.storage().ensure_dir(dir) {
                return Err(self.fail(&path, e).into());
            }
        }
        let config = self.config.clone();
        let records = self.session.records();
        let mut mark = ReadMark {
            id: FileId { dev: 0, ino: 0 },
            end: 0,
            newlines: 0,
            tail: Vec::new(),
            patches_apply: patches_apply(&records[0]),
        };
        let check = || self.rewrite_precondition(&path);
        let result = atomic_replace_checked(config.storage.as_ref(), &path, &check, |w| {
            let mut buf = Vec::with_capacity(1 << 20);
            for record in records {
                let prepared = prepare_for_persist(record.fields(), &config.blobs)
                    .map_err(std::io::Error::other)?;
                crate::json::write_object_compact(&prepared, &mut buf);
                buf.push(b'\n');
                if buf.len() >= 1 << 20 {
                    w.write_all(&buf)?;
                    mark.advance(&buf);
                    buf.clear();
                }
            }
            w.write_all(&buf)?;
            mark.advance(&buf);
            Ok(())
        });
        let result = result.and_then(|()| match path.parent() {
            Some(dir) if self.managed => self.storage().sync_dir(dir),
            _ => Ok(()),
        });
        match result {
            Ok(()) => {
                self.flushed = true;
                self.ensured_on_disk = true;
                self.needs_full_rewrite = false;
                self.owed.clear();
                self.note_rewritten(mark);
                // What earlier rewrites of this file left when they were killed.
                let _ = super::rewrite::remove_orphaned_temps_of(self.storage(), &path);
                Ok(())
            }
            Err(e) => match Refusal::of(&e) {
                Some(Refusal::ChangedOnDisk) => Err(SessionError::ChangedOnDisk { path }),
                Some(Refusal::OpenElsewhere(pids)) => Err(SessionError::OpenElsewhere {
                    path,
                    pids: pids.clone(),
                }),
                None => Err(self.fail(&path, e).into()),
            },
        }
    }

    /// The open append writer, opening it when needed.
    pub(super) fn writer(
        &mut self,
        path: &Path,
    ) -> Result<&mut Box<dyn StorageWriter>, PersistError> {
        if self.writer.is_none() {
            match self.config.storage.open_writer(path, OpenMode::Append) {
                Ok(w) => self.writer = Some(w),
                Err(e) => return Err(self.fail(path, e)),
            }
        }
        Ok(self.writer.as_mut().expect("opened above"))
    }

    /// The lines for `records` after the persist transform (blobs stored first).
    fn encode(&self, records: &[&Record]) -> Result<Vec<u8>, crate::format::blob::BlobError> {
        let mut buf = Vec::new();
        for record in records {
            let prepared = prepare_for_persist(record.fields(), &self.config.blobs)?;
            crate::json::write_object_compact(&prepared, &mut buf);
            buf.push(b'\n');
        }
        Ok(buf)
    }

    /// Appends the owed patches, then `records`, to the file in one write.
    fn append_records(&mut self, records: &[&Record]) -> SessionResult<()> {
        let Some(path) = self.file.clone() else {
            return Ok(());
        };
        self.check_writable()?;
        let owed = std::mem::take(&mut self.owed);
        let all: Vec<&Record> = owed.iter().chain(records.iter().copied()).collect();
        let encoded = self.encode(&all);
        drop(all);
        let result = match encoded {
            Err(e) => Err(self.fail(&path, std::io::Error::other(e)).into()),
            Ok(buf) if self.managed => self.managed_append(&path, &buf),
            Ok(buf) => self.write_at_end(&path, &buf, false),
        };
        if result.is_err() {
            self.owed = owed;
        }
        result
    }

    /// A managed append: the file must still be the private file this
    /// session writes; the lines are written, then the file and its directory fsynced.
    fn managed_append(&mut self, path: &Path, buf: &[u8]) -> SessionResult<()> {
        let storage = self.config.storage.clone();
        if let Err(e) = check_private_file(storage.as_ref(), path) {
            let e = if e.kind() == std::io::ErrorKind::NotFound {
                std::io::Error::new(e.kind(), "managed_append_missing: the transcript is gone")
            } else {
                e
            };
            return Err(self.fail(path, e).into());
        }
        let replaced = match &self.writer {
            Some(w) => !w.is_file_at(path).unwrap_or(false),
            None => false,
        };
        if replaced {
            self.close_writer();
        }
        self.write_at_end(path, buf, true)
    }

    /// Writes `buf` at the end of the file through the writer, in one write. A last line
    /// left torn (by a crash here or by another process since) is ended with `\n` first, in
    /// the same write, so the new lines are never swallowed by it; a last line still being
    /// written by another process is waited for ([`settled_end`]), and gjcfs's own writers
    /// that append entries from outside take turns through the append lock
    /// ([`State::with_append_lock`]). With `durable`, the file and then its directory are
    /// fsynced. If anything fails, what this write put in the file is cut off again (and,
    /// with `durable`, the cut fsynced) — when the file is exactly its old size plus those
    /// bytes (if another process appended meanwhile it is left; the next append ends a torn
    /// tail).
    fn write_at_end(&mut self, path: &Path, buf: &[u8], durable: bool) -> SessionResult<()> {
        let storage = self.config.storage.clone();
        let writer = self.writer(path)?;
        let end = match settled_end(writer.as_ref()) {
            Ok(end) => end,
            Err(e) => return Err(self.fail(path, e).into()),
        };
        let mut bytes = Vec::with_capacity(buf.len() + 1);
        if end.torn() {
            bytes.push(b'\n');
        }
        bytes.extend_from_slice(buf);
        let mut written = 0;
        let result = writer
            .write_all_counted(&bytes, &mut written)
            .and_then(|()| match durable {
                true => writer.fsync(),
                false => Ok(()),
            })
            .and_then(|()| match path.parent() {
                Some(dir) if durable => storage.sync_dir(dir),
                _ => Ok(()),
            });
        if let Err(e) = result {
            if written > 0 && writer.end().is_ok_and(|now| now.size == end.size + written) {
                // A durable append may have reached the disk before a later step failed:
                // its removal is made durable too.
                let _ = writer.truncate(end.size).and_then(|()| match durable {
                    true => writer.fsync(),
                    false => Ok(()),
                });
            }
            return Err(self.fail(path, e).into());
        }
        self.note_appended(&bytes);
        Ok(())
    }

    /// `_persist` for the entries just appended from `from` on.
    fn persist_entries(&mut self, from: usize) -> SessionResult<()> {
        if !self.persist || self.file.is_none() {
            return Ok(());
        }
        self.check_writable()?;
        self.check_latched()?;
        if !self.ensured_on_disk && !self.has_assistant {
            self.flushed = false;
            return Ok(());
        }
        let vanished = !self.managed
            && self.writer.is_none()
            && self
                .file
                .as_deref()
                .is_some_and(|f| !self.storage().exists(f));
        if self.needs_full_rewrite || !self.flushed || vanished {
            // A file deleted behind our back is written again from memory.
            return self.full_rewrite();
        }
        let records = self.session.records()[from..].to_vec();
        self.append_records(&records.iter().collect::<Vec<_>>())
    }

    /// `#persistPatches`: patch records for changes already made in memory, after the
    /// patches owed from the load.
    pub(super) fn persist_patches(&mut self, patches: &[Record]) -> SessionResult<()> {
        let Some(path) = self.file.clone() else {
            return Ok(());
        };
        if !self.persist || (patches.is_empty() && self.owed.is_empty()) {
            return Ok(());
        }
        self.check_writable()?;
        if !self.storage().exists(&path) {
            return Ok(());
        }
        self.check_latched()?;
        if self.needs_full_rewrite || !self.flushed || self.session.header().version() < 5.0 {
            return self.full_rewrite();
        }
        self.append_records(&patches.iter().collect::<Vec<_>>())
    }

    /// Loads the file at `path` leniently into memory as this session's file (migrations
    /// and the sanitizer's patches applied in memory, owed to the first write).
    pub(super) fn load_leniently(&mut self, path: &Path) -> SessionResult<()> {
        let loaded = load_entries_from_storage(self.storage(), path)?;
        match loaded.status {
            LoadStatus::Loaded => {}
            LoadStatus::Missing => return Err(LoadError::Missing { path: path.into() }.into()),
            LoadStatus::NotASession => {
                return Err(LoadError::NotASession { path: path.into() }.into())
            }
        }
        let built = build_session(loaded.records, loaded.summaries);
        self.adopt(built.session, Some(path.to_owned()), true);
        self.synced = loaded.mark;
        self.needs_full_rewrite = matches!(built.migration, Migration::Migrated { .. });
        self.owed = self.session.sanitize_entries(built.to_sanitize);
        Ok(())
    }

    /// The entries for `inputs` given from outside ([`super::external_entry`]), each the
    /// child of the one before and the first the child of the leaf, checked as an append
    /// checks them; nothing is inserted.
    pub(super) fn build_external(&self, inputs: Vec<Object>) -> SessionResult<Vec<Record>> {
        let mut built: Vec<Record> = Vec::with_capacity(inputs.len());
        for input in inputs {
            let (ty, fields) = super::external_entry(input)?;
            self.check_label_target(&ty, &fields)?;
            let parent = match built.last() {
                Some(previous) => previous.id().map(str::to_owned),
                None => self.session.leaf_id().map(str::to_owned),
            };
            let record = self.build_new(&ty, &fields, parent.as_deref(), &built)?;
            built.push(record);
        }
        Ok(built)
    }

    /// A label given from outside must target an existing entry.
    pub(super) fn check_label_target(&self, ty: &str, fields: &Object) -> SessionResult<()> {
        match fields.get_str("targetId") {
            Some(target) if ty == "label" && self.session.index_of(target).is_none() => {
                Err(crate::session::tree::EntryNotFound(target.to_owned()).into())
            }
            _ => Ok(()),
        }
    }

    pub(super) fn append(&mut self, ty: &str, fields: &Object) -> SessionResult<String> {
        self.append_with_parent(ty, fields, self.session.leaf_id().map(str::to_owned))
    }

    pub(super) fn append_with_parent(
        &mut self,
        ty: &str,
        fields: &Object,
        parent: Option<String>,
    ) -> SessionResult<String> {
        self.check_appendable()?;
        let record = self.build_new(ty, fields, parent.as_deref(), &[])?;
        let id = record.id().unwrap_or_default().to_owned();
        self.commit_entries(vec![record])?;
        Ok(id)
    }

    /// Whether appends are accepted at all: not loaded for reading, no error latched.
    pub(super) fn check_appendable(&self) -> SessionResult<()> {
        self.check_writable()?;
        match &self.latched {
            Some(prior) => Err(SessionError::Append {
                entry_id: String::new(),
                phase: AppendPhase::PriorFailure,
                source: prior.clone(),
            }),
            None => Ok(()),
        }
    }

    /// A new entry of `ty` under `parent`, with an id unique in the session and among
    /// `batch` (entries built before it, not inserted yet), checked against the schema.
    pub(super) fn build_new(
        &self,
        ty: &str,
        fields: &Object,
        parent: Option<&str>,
        batch: &[Record],
    ) -> SessionResult<Record> {
        let id = ids::new_entry_id(|c| {
            self.session.index_of(c).is_some() || batch.iter().any(|r| r.id() == Some(c))
        });
        let timestamp = time::now_iso();
        let base = Base {
            id: &id,
            parent_id: parent,
            timestamp: &timestamp,
        };
        let record = build_entry(ty, fields, &base);
        entries::check_schema(&record)?;
        Ok(record)
    }

    /// Inserts `records` as new entries, each the new leaf, then persists them together; if
    /// that fails they are all removed again and the leaf restored.
    pub(super) fn commit_entries(&mut self, records: Vec<Record>) -> SessionResult<()> {
        let first_id = records
            .first()
            .and_then(Record::id)
            .unwrap_or_default()
            .to_owned();
        let previous_leaf = self.session.leaf();
        let had_assistant = self.has_assistant;
        let from = self.session.records().len();
        for record in records {
            self.has_assistant |= is_assistant(&record);
            self.session.push_entry(record);
        }
        if let Err(e) = self.persist_entries(from) {
            while self.session.records().len() > from {
                self.session.pop_entry(previous_leaf);
            }
            self.has_assistant = had_assistant;
            return Err(match e {
                SessionError::Persist(source) => SessionError::Append {
                    entry_id: first_id,
                    phase: AppendPhase::CurrentAppend,
                    source,
                },
                other => other,
            });
        }
        Ok(())
    }
}

/// How often, and how long apart, a last line without its newline is looked at again
/// before it is taken for a torn one.
const TORN_RECHECKS: u32 = 5;
const TORN_RECHECK_PAUSE: std::time::Duration = std::time::Duration::from_millis(10);

/// The end of the writer's file, once it holds still: a last line without its newline may
/// be one another process is writing right now (a reader can see a long line's write half
/// done), so it is looked at again, a few milliseconds apart, until the file stops growing
/// or the line is ended. Ending a line that its writer then finishes would leave a blank
/// line; one still unended after the pauses is torn (a crash left it).
fn settled_end(writer: &dyn StorageWriter) -> std::io::Result<crate::storage::FileEnd> {
    let mut end = writer.end()?;
    for _ in 0..TORN_RECHECKS {
        if !end.torn() {
            break;
        }
        std::thread::sleep(TORN_RECHECK_PAUSE);
        let now = writer.end()?;
        if now == end {
            break;
        }
        end = now;
    }
    Ok(end)
}
