//! `SessionManager`: one session in memory, kept on disk by the original's persistence rules
//! (details §7, §9).
//!
//! Invariants:
//! - Every append creates exactly one entry whose parent is the current leaf (a context
//!   clear's is `null`), inserts it in memory, then persists it; if persisting fails the
//!   entry is removed again and the leaf restored, so memory never holds an entry that
//!   should be on disk and is not.
//! - Deferred persistence: nothing of a new session reaches disk before its first assistant
//!   message; then the whole session is written in one atomic rewrite, after which each entry
//!   is appended as one line. A file that was opened is "on disk" from the start.
//! - Opening never writes. Migrations and folded patches are written by the first
//!   persistence of any kind (a full rewrite); the OpenAI replay sanitizer's patches are
//!   *owed* and written by the first persistence too (appended before its own lines, or
//!   folded by a full rewrite). A refresh never writes either.
//! - A manager loaded for reading ([`SessionManager::load_for_reading`]) never writes at
//!   all: every write fails with [`SessionError::ReadOnly`].
//! - Only a file that does not exist is created from nothing ([`SessionManager::create`],
//!   [`SessionManager::create_managed`], [`SessionManager::set_session_file`]). A missing or
//!   non-session file given to [`SessionManager::open`] is an error, never replaced.
//!   (Deliberate deviation: the original's `open` and `setSessionFile` re-initialise a
//!   non-session file with a fresh header.)
//! - A full rewrite replaces an existing file only while it is the very file memory
//!   reflects (same identity and size as the read mark, checked before the temp file is
//!   written and again right before the rename) and no other process holds it open for
//!   writing; otherwise it is refused ([`SessionError::ChangedOnDisk`],
//!   [`SessionError::OpenElsewhere`]), the file is left untouched and nothing is latched.
//! - The first persistence error is latched: every later write fails with it until the
//!   manager switches to another session.
//! - All state sits behind one mutex: writes are serialized and readers never see a
//!   half-applied append.
//! - Every append checks the file's last byte through its own writer first; a torn last
//!   line (a crash, here or in another process, even after the writer opened) is ended with
//!   `\n` in the same write, so the new entry is never swallowed by it. The lines of one
//!   persistence (owed patches, one entry or a whole batch) go out in one write.
//! - A failed append leaves no torn partial: what it wrote is cut off again when the file
//!   is exactly its old size plus those bytes (else another process appended meanwhile, and
//!   the next append ends the torn tail).
//! - Write opens go through one place ([`SessionManager::open_for_writing`]): a legacy
//!   transcript is copied into its managed scope first and the copy is written; a managed
//!   transcript's scope is verified on every open and read
//!   ([`super::scope::verify_transcript_scope`]).
//! - Crash leftovers (orphaned backups, temp files of an interrupted rewrite) are recovered
//!   only when a session is opened for writing or created in a directory, never in a
//!   legacy directory ([`recover_dir`]).
//! - The manager knows which bytes of the file memory reflects, so that lines appended from
//!   outside can be read on their own ([`SessionManager::refresh_from_file`]).

mod entries;
mod error;
mod refresh;
mod rewrite;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

pub use entries::{build_entry, external_entry, Base};
pub use error::{AppendPhase, PersistError, SessionError, SessionResult};
pub use refresh::{Refresh, ReloadReason};
use rewrite::Refusal;
pub use rewrite::{
    atomic_replace, atomic_replace_checked, is_legacy_dir_name, recover_dir,
    recover_orphaned_backups, remove_orphaned_temps, ORPHANED_TEMP_AGE_MS,
};

use super::blob::BlobStore;
use super::context::SessionContext;
use super::ids;
use super::inspect::strict_session;
use super::json::{Object, Value};
use super::legacy::{
    list_candidates, path_for_writing, LegacyError, LegacyRoots, MigrationPolicy, Provenance,
    Workspace,
};
use super::lines::read_lines;
use super::load::{build_session, load_entries_from_storage, LoadError, LoadStatus, ReadMark};
use super::migrate::{migrate, Migration, CURRENT_SESSION_VERSION};
use super::persist::prepare_for_persist;
use super::record::{Record, RecordType};
use super::replay::patches_apply;
use super::sanitize::sanitize_entries;
use super::session::Session;
use super::storage::{
    check_private_file, FileId, MemoryStorage, OpenMode, SessionStorage, StorageWriter,
};
use super::time;

/// Where a manager keeps its session.
#[derive(Debug, Clone)]
pub struct StorageConfig {
    pub storage: Arc<dyn SessionStorage>,
    pub blobs: BlobStore,
}

impl StorageConfig {
    /// The real filesystem, with the blob store at `blob_dir`.
    pub fn files(blob_dir: impl Into<PathBuf>) -> Self {
        let storage: Arc<dyn SessionStorage> = Arc::new(super::storage::FileStorage);
        StorageConfig {
            blobs: BlobStore::new(blob_dir, storage.clone()),
            storage,
        }
    }
}

/// A configured model chain to append.
#[derive(Debug, Clone, Copy)]
pub struct ModelChain<'a> {
    pub role: &'a str,
    pub entries: &'a [&'a str],
    pub origin: &'a str,
    pub identity: Option<&'a str>,
    pub explicit_head: bool,
    pub cleared: bool,
}

/// A session being read and written.
#[derive(Debug)]
pub struct SessionManager {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    config: StorageConfig,
    persist: bool,
    cwd: String,
    session_dir: Option<PathBuf>,
    file: Option<PathBuf>,
    session: Session,
    /// Whether the file holds everything in memory (no full rewrite owed for new entries).
    flushed: bool,
    ensured_on_disk: bool,
    needs_full_rewrite: bool,
    has_assistant: bool,
    /// Whether the file lives in a managed scope: appends are identity-checked, fsynced with
    /// their directory, and never recreate a missing file.
    managed: bool,
    writer: Option<Box<dyn StorageWriter>>,
    latched: Option<PersistError>,
    /// Which bytes of which file memory reflects (see [`refresh`]); `None` when nothing is
    /// on disk yet or a write failed.
    synced: Option<ReadMark>,
    /// Whether the file is held to the strict checks (it was opened with them), so that
    /// appended lines are too.
    strict_reads: bool,
    /// Whether `synced` counts appends of the open writer not yet checked against where
    /// they landed.
    unchecked_appends: bool,
    /// Whether the manager was loaded for reading: every write is refused.
    read_only: bool,
    /// Patch records the load-time sanitizer made in memory and the file does not hold
    /// yet; the first persistence writes them (before its own lines, or folded by a full
    /// rewrite).
    owed: Vec<Record>,
}

/// How [`SessionManager::load_for_reading`] treats a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadRules {
    /// A session file in an explicit directory: only its content is read.
    Explicit,
    /// A managed transcript: its scope must verify and it must be a private file.
    Managed,
}

impl ReadRules {
    /// [`ReadRules::Managed`] for a transcript directly in a directory named `v2-*`.
    pub fn for_path(path: &Path) -> Self {
        match in_v2_dir(path) {
            true => ReadRules::Managed,
            false => ReadRules::Explicit,
        }
    }
}

/// Where [`SessionManager::open_for_writing`] may write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteTarget {
    /// The agent's sessions root (`<agentDir>/sessions`), whose legacy directories are
    /// migrated before writing; without it no directory is taken for a legacy one.
    pub sessions_root: Option<PathBuf>,
    /// What to do with a transcript of a legacy directory.
    pub policy: MigrationPolicy,
}

fn in_v2_dir(path: &Path) -> bool {
    path.parent()
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("v2-"))
}

/// `path` made absolute against the current directory, lexically.
fn absolute(path: &Path) -> PathBuf {
    let joined = match path.is_absolute() {
        true => path.to_owned(),
        false => std::env::current_dir().unwrap_or_default().join(path),
    };
    super::agent_dir::normalize(&joined)
}

/// A failed read of `path` as a load error: a missing file is [`LoadError::Missing`].
fn read_error(path: &Path) -> impl FnOnce(std::io::Error) -> LoadError + '_ {
    move |source| match source.kind() {
        std::io::ErrorKind::NotFound => LoadError::Missing { path: path.into() },
        _ => LoadError::Io {
            path: path.into(),
            source,
        },
    }
}

/// Whether `path` is a transcript directly inside a legacy directory of `root`.
fn is_legacy_transcript(root: &Path, path: &Path) -> bool {
    let Some(dir) = path.parent() else {
        return false;
    };
    let legacy_name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(is_legacy_dir_name);
    let canonical = |p: &Path| super::storage::FileStorage.canonicalize(p).ok();
    legacy_name
        && dir
            .parent()
            .and_then(canonical)
            .is_some_and(|parent| Some(parent) == canonical(root))
}

/// Copies the legacy transcript at `path` into its workspace's v2 scope (or finds the
/// copy an earlier migration made) and returns the copy.
fn migrate_for_writing(
    root: &Path,
    path: &Path,
    policy: MigrationPolicy,
    storage: &dyn SessionStorage,
) -> SessionResult<PathBuf> {
    let prefix = storage
        .read_prefix(path, super::legacy::HEADER_MAX_BYTES)
        .map_err(read_error(path))?;
    let first = prefix.split(|&b| b == b'\n').next().unwrap_or_default();
    let header = Record::parse_line(&String::from_utf8_lossy(first)).ok();
    let Some((id, cwd)) = header.as_ref().and_then(|h| {
        let h = h.as_header()?;
        Some((h.id()?.to_owned(), h.cwd()?.to_owned()))
    }) else {
        return Err(LoadError::NotASession { path: path.into() }.into());
    };
    let cwd = Path::new(&cwd);
    let listing = list_candidates(root, cwd, &LegacyRoots::current())?;
    let abs_root = absolute(root);
    let (Some(dir), Some(name)) = (path.parent().and_then(Path::file_name), path.file_name())
    else {
        return Err(LoadError::NotASession { path: path.into() }.into());
    };
    let listed = abs_root.join(dir).join(name);
    if let Some(candidate) = listing.owned.iter().find(|c| c.path == listed) {
        return Ok(path_for_writing(root, cwd, candidate, policy)?);
    }
    // Migrated before: the listing shows the copy (same name in the scope) instead.
    let copy = Workspace::resolve(cwd)?.scope_dir(&abs_root).join(name);
    let migrated = listing
        .owned
        .iter()
        .find(|c| c.path == copy && c.provenance == Provenance::MigratedV2 && c.session_id == id);
    match migrated {
        Some(candidate) => Ok(path_for_writing(root, cwd, candidate, policy)?),
        None => Err(LegacyError::InvalidCandidate {
            path: path.to_owned(),
            why: format!(
                "not a session of the workspace {} (its header cwd) that can be migrated",
                cwd.display()
            ),
        }
        .into()),
    }
}

/// A fresh header in the order a new session writes it.
fn new_header(id: &str, cwd: &str, parent_session: Option<&str>) -> Record {
    let mut h = Object::with_capacity(6);
    h.insert("type", Value::string("session"));
    h.insert("version", Value::number(CURRENT_SESSION_VERSION as f64));
    h.insert("id", Value::string(id));
    h.insert("timestamp", Value::string(time::now_iso()));
    h.insert("cwd", Value::string(cwd));
    if let Some(parent) = parent_session {
        h.insert("parentSession", Value::string(parent));
    }
    Record::new(h)
}

/// `<timestamp with : and . as ->_<id>.jsonl`.
pub fn session_file_name(header: &Record) -> String {
    let ts = header
        .get_str("timestamp")
        .unwrap_or_default()
        .replace([':', '.'], "-");
    format!("{ts}_{}.jsonl", header.id().unwrap_or_default())
}

fn is_assistant(record: &Record) -> bool {
    record
        .message()
        .is_some_and(|m| m.get_str("role") == Some("assistant"))
}

/// `setSessionName`'s clean-up: control characters become spaces, runs of spaces collapse,
/// the ends are trimmed, and the result is cut to 1,000 UTF-16 units.
pub fn sanitize_title(name: &str) -> String {
    let spaced: String = name
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let collapsed = spaced
        .split(' ')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let mut out = String::new();
    let mut units = 0;
    for c in collapsed.trim().chars() {
        units += c.len_utf16();
        if units > 1000 {
            break;
        }
        out.push(c);
    }
    out
}

impl State {
    fn fresh(
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
        }
    }

    fn storage(&self) -> &dyn SessionStorage {
        self.config.storage.as_ref()
    }

    /// Switches to `session` at `file`, clearing a latched error.
    fn adopt(&mut self, session: Session, file: Option<PathBuf>, on_disk: bool) {
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

    fn close_writer(&mut self) {
        self.check_appends();
        if let Some(writer) = self.writer.take() {
            let _ = writer.close();
        }
    }

    fn fail(&mut self, path: &Path, e: std::io::Error) -> PersistError {
        let err = PersistError::new(path, e);
        self.close_writer();
        self.synced = None;
        self.latched.get_or_insert_with(|| err.clone());
        err
    }

    fn check_latched(&self) -> Result<(), PersistError> {
        match &self.latched {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Refuses a write: a manager loaded for reading never writes.
    fn check_writable(&self) -> SessionResult<()> {
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
    fn full_rewrite(&mut self) -> SessionResult<()> {
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
                super::json::write_object_compact(&prepared, &mut buf);
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
    fn writer(&mut self, path: &Path) -> Result<&mut Box<dyn StorageWriter>, PersistError> {
        if self.writer.is_none() {
            match self.config.storage.open_writer(path, OpenMode::Append) {
                Ok(w) => self.writer = Some(w),
                Err(e) => return Err(self.fail(path, e)),
            }
        }
        Ok(self.writer.as_mut().expect("opened above"))
    }

    /// The lines for `records` after the persist transform (blobs stored first).
    fn encode(&self, records: &[&Record]) -> Result<Vec<u8>, super::blob::BlobError> {
        let mut buf = Vec::new();
        for record in records {
            let prepared = prepare_for_persist(record.fields(), &self.config.blobs)?;
            super::json::write_object_compact(&prepared, &mut buf);
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

    /// A managed append (details §9.6): the file must still be the private file this
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
    /// the same write, so the new lines are never swallowed by it. With `durable`, the file
    /// and then its directory are fsynced. If anything fails, what this write put in the
    /// file is cut off again (and, with `durable`, the cut fsynced) — when the file is
    /// exactly its old size plus those bytes (if another process appended meanwhile it is
    /// left; the next append ends a torn tail).
    fn write_at_end(&mut self, path: &Path, buf: &[u8], durable: bool) -> SessionResult<()> {
        let storage = self.config.storage.clone();
        let writer = self.writer(path)?;
        let end = match writer.end() {
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
    fn persist_patches(&mut self, patches: &[Record]) -> SessionResult<()> {
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
    fn load_leniently(&mut self, path: &Path) -> SessionResult<()> {
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
        self.owed = sanitize_entries(&mut self.session, built.to_sanitize);
        Ok(())
    }

    /// A label given from outside must target an existing entry.
    fn check_label_target(&self, ty: &str, fields: &Object) -> SessionResult<()> {
        match fields.get_str("targetId") {
            Some(target) if ty == "label" && self.session.index_of(target).is_none() => {
                Err(super::session::EntryNotFound(target.to_owned()).into())
            }
            _ => Ok(()),
        }
    }

    fn append(&mut self, ty: &str, fields: &Object) -> SessionResult<String> {
        self.append_with_parent(ty, fields, self.session.leaf_id().map(str::to_owned))
    }

    fn append_with_parent(
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
    fn check_appendable(&self) -> SessionResult<()> {
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
    fn build_new(
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
    fn commit_entries(&mut self, records: Vec<Record>) -> SessionResult<()> {
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

impl SessionManager {
    fn from_state(state: State) -> Self {
        SessionManager {
            state: Mutex::new(state),
        }
    }

    /// A new session in `session_dir` (nothing is written until the first assistant reply).
    /// Backups and temp files a crash left in the directory are recovered first
    /// ([`recover_dir`]).
    pub fn create(cwd: &str, session_dir: impl Into<PathBuf>, config: StorageConfig) -> Self {
        let dir = session_dir.into();
        recover_dir(config.storage.as_ref(), &dir);
        Self::from_state(State::fresh(config, cwd, Some(dir), true))
    }

    /// A new session in the managed scope of the workspace `cwd` under `sessions_root`
    /// (the scope is prepared and bound first; nothing else is written until the first
    /// assistant reply).
    pub fn create_managed(
        cwd: &Path,
        sessions_root: &Path,
        config: StorageConfig,
    ) -> SessionResult<Self> {
        let storage = config.storage.as_ref();
        let identity = super::scope::resolve_identity_in(storage, cwd)?;
        let scope = super::scope::prepare_scope_in(storage, sessions_root, &identity)?;
        recover_dir(config.storage.as_ref(), &scope);
        let mut state = State::fresh(config, &cwd.to_string_lossy(), Some(scope), true);
        state.managed = true;
        state.strict_reads = true;
        Ok(Self::from_state(state))
    }

    /// Opens an existing transcript in a managed scope for writing: its scope must verify
    /// ([`super::scope::verify_transcript_scope`]), it must be a private file and pass the
    /// strict content checks; later appends are managed appends. Nothing is written at open
    /// (the sanitizer's patches and migrations are owed to the first write).
    pub fn open_managed(path: &Path, config: StorageConfig) -> SessionResult<Self> {
        super::scope::verify_transcript_scope(config.storage.as_ref(), path)?;
        if let Some(scope) = path.parent() {
            recover_dir(config.storage.as_ref(), scope);
        }
        check_private_file(config.storage.as_ref(), path)
            .map_err(|e| SessionError::Persist(PersistError::new(path, e)))?;
        let manager = Self::in_memory("");
        {
            let mut state = manager.state.lock();
            state.config = config;
            state.persist = true;
            state.managed = true;
        }
        manager.set_session_file(path)?;
        Ok(manager)
    }

    /// A session that is never written.
    pub fn in_memory(cwd: &str) -> Self {
        let storage: Arc<dyn SessionStorage> = Arc::new(MemoryStorage::new());
        let config = StorageConfig {
            blobs: BlobStore::new("/blobs", storage.clone()),
            storage,
        };
        Self::from_state(State::fresh(config, cwd, None, false))
    }

    /// Opens the session file at `path` leniently for writing (explicit directory): a
    /// malformed or torn line is skipped. A missing file is [`LoadError::Missing`] and a
    /// file whose first record is not a session header [`LoadError::NotASession`]; neither
    /// is written. Nothing is written at open: migrations and the OpenAI replay sanitizer's
    /// patches are applied in memory and owed to the first persistence (an append or a
    /// patch), which writes them first. Backups and temp files a crash left in the
    /// directory are recovered first ([`recover_dir`]).
    ///
    /// Deliberate deviation: the original's `open` (and `setSessionFile`) replaces a
    /// missing or non-session file with a fresh header-only session at once; gjcfs refuses,
    /// so that a mistyped path or a file that is not a session is never overwritten. The
    /// only file created from nothing is one that does not exist yet, by [`Self::create`],
    /// [`Self::create_managed`] or [`Self::set_session_file`].
    pub fn open(path: &Path, cwd: &str, config: StorageConfig) -> SessionResult<Self> {
        let dir = path.parent().map(Path::to_path_buf);
        if let Some(dir) = &dir {
            recover_dir(config.storage.as_ref(), dir);
        }
        let mut state = State::fresh(config, cwd, dir, true);
        state.load_leniently(path)?;
        Ok(Self::from_state(state))
    }

    /// Loads the session file at `path` for reading only: leniently (malformed and torn
    /// lines are skipped), migrated and sanitized in memory. The manager never writes:
    /// every write fails with [`SessionError::ReadOnly`]; [`Self::refresh_from_file`] keeps
    /// working. A missing file is [`LoadError::Missing`], a non-session file
    /// [`LoadError::NotASession`]. A managed transcript ([`ReadRules::Managed`]) must also
    /// be in a scope that verifies and be a private file, as for writing; its content is
    /// read leniently all the same.
    pub fn load_for_reading(
        path: &Path,
        config: StorageConfig,
        rules: ReadRules,
    ) -> SessionResult<Self> {
        if rules == ReadRules::Managed {
            super::scope::verify_transcript_scope(config.storage.as_ref(), path)?;
            check_private_file(config.storage.as_ref(), path).map_err(read_error(path))?;
        }
        let mut state = State::fresh(config, "", path.parent().map(Path::to_path_buf), true);
        state.read_only = true;
        state.managed = rules == ReadRules::Managed;
        state.load_leniently(path)?;
        Ok(Self::from_state(state))
    }

    /// Opens the transcript at `path` for writing, wherever it is (see [`WriteTarget`]):
    /// - directly inside a legacy directory of the sessions root (a directory whose name
    ///   starts with `-`, not `v2-`): the transcript is first copied into its workspace's
    ///   v2 scope (copy-retain migration, the workspace being the header's cwd), and the
    ///   copy is opened with [`Self::open_managed`]; the legacy file is only read. When the
    ///   copy cannot be made (workspace gone, migration disabled, a binding conflict, a file
    ///   that is not an owned candidate of its workspace) the open fails and nothing
    ///   changes;
    /// - in a directory named `v2-*`: [`Self::open_managed`] (strict content checks);
    /// - anywhere else: [`Self::open`] (explicit directory).
    ///
    /// [`Self::session_file`] of the result names the file that is written.
    pub fn open_for_writing(
        path: &Path,
        target: &WriteTarget,
        config: StorageConfig,
    ) -> SessionResult<Self> {
        let parent_name = path
            .parent()
            .and_then(Path::file_name)
            .and_then(|n| n.to_str());
        if let Some(root) = &target.sessions_root {
            if is_legacy_transcript(root, path) {
                let copy = migrate_for_writing(root, path, target.policy, config.storage.as_ref())?;
                return Self::open_managed(&copy, config);
            }
        }
        if parent_name.is_some_and(|n| n.starts_with("v2-")) {
            return Self::open_managed(path, config);
        }
        Self::open(path, "", config)
    }

    /// `setSessionFile`: switches to the file at `path`. An existing file must pass the
    /// strict content checks (a non-session file is refused, never re-initialised); nothing
    /// is written (the sanitizer's patches and migrations are owed to the first write). A
    /// missing one gets a fresh header-only file.
    pub fn set_session_file(&self, path: &Path) -> SessionResult<()> {
        let mut state = self.state.lock();
        state.check_writable()?;
        if let Some(dir) = path.parent() {
            recover_dir(state.storage(), dir);
        }
        if !state.storage().exists(path) {
            let cwd = state.cwd.clone();
            let header = new_header(&ids::new_session_id(), &cwd, None);
            state.adopt(
                Session::from_records(vec![header]),
                Some(path.to_owned()),
                false,
            );
            state.session_dir = path.parent().map(Path::to_path_buf);
            state.strict_reads = true;
            return state.full_rewrite();
        }
        let read_failed = |e| SessionError::Persist(PersistError::new(path, e));
        let file = state.storage().open_read_at(path).map_err(read_failed)?;
        let size = file.size().map_err(read_failed)?;
        let mut lines = read_lines(file.as_ref(), 0, size, 1);
        if let Some(e) = lines.error.take() {
            return Err(read_failed(e));
        }
        let mark = ReadMark::of(file.id(), &lines);
        let built = strict_session(lines).map_err(|failure| SessionError::Inspect {
            path: path.to_owned(),
            failure,
        })?;
        let mut session = built.session;
        let migrated = matches!(built.migration, Migration::Migrated { .. });
        let patches = sanitize_entries(&mut session, built.to_sanitize);
        state.adopt(session, Some(path.to_owned()), true);
        state.session_dir = path.parent().map(Path::to_path_buf);
        state.needs_full_rewrite = migrated;
        state.synced = Some(mark);
        state.strict_reads = true;
        state.owed = patches;
        Ok(())
    }

    /// Appends entries given from outside (see [`external_entry`]) all together, or none
    /// of them. Every input is checked first — its shape, the schema, and that a label's
    /// target exists (an entry already in the session; entries of the same batch have no
    /// ids yet to name) — then they are chained under the current leaf and persisted
    /// together: when they go to disk by appending, all their lines are written in one
    /// write. On any failure memory and file are as before. Returns the new ids in order.
    pub fn append_external_all(&self, inputs: Vec<Object>) -> SessionResult<Vec<String>> {
        let mut state = self.state.lock();
        state.check_appendable()?;
        let mut built: Vec<Record> = Vec::with_capacity(inputs.len());
        for input in inputs {
            let (ty, fields) = external_entry(input)?;
            state.check_label_target(&ty, &fields)?;
            let parent = match built.last() {
                Some(previous) => previous.id().map(str::to_owned),
                None => state.session.leaf_id().map(str::to_owned),
            };
            let record = state.build_new(&ty, &fields, parent.as_deref(), &built)?;
            built.push(record);
        }
        let ids = built
            .iter()
            .map(|r| r.id().unwrap_or_default().to_owned())
            .collect();
        if !built.is_empty() {
            state.commit_entries(built)?;
        }
        Ok(ids)
    }

    /// `newSession`: a fresh session in the same directory; nothing is written yet.
    pub fn new_session(&self, parent_session: Option<&str>) {
        let mut state = self.state.lock();
        let cwd = state.cwd.clone();
        let header = new_header(&ids::new_session_id(), &cwd, parent_session);
        let file = state
            .session_dir
            .as_ref()
            .map(|d| d.join(session_file_name(&header)));
        state.adopt(Session::from_records(vec![header]), file, false);
    }

    /// Runs `f` on the session as it is now.
    pub fn read<R>(&self, f: impl FnOnce(&Session) -> R) -> R {
        f(&self.state.lock().session)
    }

    /// The context at the current leaf, as JSON.
    pub fn context_value(&self) -> Value {
        self.read(|s| s.build_context().to_value())
    }

    /// Runs `f` on the context at the current leaf.
    pub fn with_context<R>(&self, f: impl FnOnce(&SessionContext<'_>) -> R) -> R {
        self.read(|s| f(&s.build_context()))
    }

    pub fn session_file(&self) -> Option<PathBuf> {
        self.state.lock().file.clone()
    }

    pub fn session_id(&self) -> String {
        self.read(|s| s.header().id().unwrap_or_default().to_owned())
    }

    pub fn leaf_id(&self) -> Option<String> {
        self.read(|s| s.leaf_id().map(str::to_owned))
    }

    pub fn cwd(&self) -> String {
        self.state.lock().cwd.clone()
    }

    /// The blob store this session writes to.
    pub fn blobs(&self) -> BlobStore {
        self.state.lock().config.blobs.clone()
    }

    /// The latched persistence error, if any.
    pub fn persist_error(&self) -> Option<PersistError> {
        self.state.lock().latched.clone()
    }

    /// `branch`: moves the leaf to an existing entry.
    pub fn branch(&self, id: &str) -> SessionResult<()> {
        Ok(self.state.lock().session.branch(id)?)
    }

    /// `resetLeaf`: the next append starts a new root.
    pub fn reset_leaf(&self) {
        self.state.lock().session.reset_leaf();
    }

    /// Appends an entry of `ty` with its own fields; returns the new id.
    pub fn append_fields(&self, ty: &str, fields: &Object) -> SessionResult<String> {
        self.state.lock().append(ty, fields)
    }

    /// Appends an entry given from outside (see [`external_entry`]).
    pub fn append_external(&self, input: Object) -> SessionResult<String> {
        let (ty, fields) = external_entry(input)?;
        let mut state = self.state.lock();
        state.check_label_target(&ty, &fields)?;
        state.append(&ty, &fields)
    }

    pub fn append_message(&self, message: Value) -> SessionResult<String> {
        self.append_fields("message", &members([("message", Some(message))]))
    }

    pub fn append_thinking_level_change(&self, level: Option<&str>) -> SessionResult<String> {
        let level = level.map_or(Value::Null, Value::string);
        self.append_fields(
            "thinking_level_change",
            &members([("thinkingLevel", Some(level))]),
        )
    }

    pub fn append_model_change(&self, model: &str, role: Option<&str>) -> SessionResult<String> {
        let fields = members([
            ("model", Some(Value::string(model))),
            ("role", role.map(Value::string)),
        ]);
        self.append_fields("model_change", &fields)
    }

    pub fn append_service_tier_change(&self, tier: Option<&str>) -> SessionResult<String> {
        let tier = tier.map_or(Value::Null, Value::string);
        self.append_fields(
            "service_tier_change",
            &members([("serviceTier", Some(tier))]),
        )
    }

    pub fn append_compaction(
        &self,
        summary: &str,
        first_kept_entry_id: &str,
        tokens_before: f64,
        details: Option<Value>,
    ) -> SessionResult<String> {
        let fields = members([
            ("summary", Some(Value::string(summary))),
            ("firstKeptEntryId", Some(Value::string(first_kept_entry_id))),
            ("tokensBefore", Some(Value::number(tokens_before))),
            ("details", details),
        ]);
        self.append_fields("compaction", &fields)
    }

    pub fn append_custom_entry(
        &self,
        custom_type: &str,
        data: Option<Value>,
    ) -> SessionResult<String> {
        let fields = members([
            ("customType", Some(Value::string(custom_type))),
            ("data", data),
        ]);
        self.append_fields("custom", &fields)
    }

    pub fn append_custom_message_entry(
        &self,
        custom_type: &str,
        content: Value,
        display: bool,
        details: Option<Value>,
        attribution: Option<&str>,
    ) -> SessionResult<String> {
        let fields = members([
            ("customType", Some(Value::string(custom_type))),
            ("content", Some(content)),
            ("display", Some(Value::Bool(display))),
            ("details", details),
            ("attribution", attribution.map(Value::string)),
        ]);
        self.append_fields("custom_message", &fields)
    }

    /// `appendLabelChange`: `None` or an empty label clears it. The target must exist.
    pub fn append_label_change(
        &self,
        target_id: &str,
        label: Option<&str>,
    ) -> SessionResult<String> {
        let mut state = self.state.lock();
        if state.session.index_of(target_id).is_none() {
            return Err(super::session::EntryNotFound(target_id.to_owned()).into());
        }
        let fields = members([
            ("targetId", Some(Value::string(target_id))),
            ("label", label.map(Value::string)),
        ]);
        state.append("label", &fields)
    }

    pub fn append_ttsr_injection(&self, rules: &[&str]) -> SessionResult<String> {
        let rules = Value::Array(rules.iter().map(|r| Value::string(*r)).collect());
        self.append_fields("ttsr_injection", &members([("injectedRules", Some(rules))]))
    }

    pub fn append_session_init(&self, init: &Object) -> SessionResult<String> {
        self.append_fields("session_init", init)
    }

    pub fn append_mode_change(&self, mode: &str, data: Option<Value>) -> SessionResult<String> {
        let fields = members([("mode", Some(Value::string(mode))), ("data", data)]);
        self.append_fields("mode_change", &fields)
    }

    pub fn append_mcp_tool_selection(
        &self,
        names: &[&str],
        correlation: Option<&str>,
    ) -> SessionResult<String> {
        self.append_fields("mcp_tool_selection", &selection(names, correlation))
    }

    pub fn append_discovered_builtin_tool_selection(
        &self,
        names: &[&str],
        correlation: Option<&str>,
    ) -> SessionResult<String> {
        self.append_fields(
            "discovered_builtin_tool_selection",
            &selection(names, correlation),
        )
    }

    /// `appendConfiguredModelChain`: only the chain's own fields are kept (runtime fields
    /// such as an active index are not persisted).
    pub fn append_configured_model_chain(&self, chain: &ModelChain<'_>) -> SessionResult<String> {
        let fields = members([
            ("role", Some(Value::string(chain.role))),
            (
                "entries",
                Some(Value::Array(
                    chain.entries.iter().map(|e| Value::string(*e)).collect(),
                )),
            ),
            ("origin", Some(Value::string(chain.origin))),
            ("identity", chain.identity.map(Value::string)),
            ("explicitHead", Some(Value::Bool(chain.explicit_head))),
            ("cleared", chain.cleared.then_some(Value::Bool(true))),
        ]);
        self.append_fields("configured_model_chain", &fields)
    }

    /// `appendContextClearEntry`: a `context_clear` custom entry that starts a new root.
    pub fn append_context_clear(&self) -> SessionResult<String> {
        let fields = members([("customType", Some(Value::string("context_clear")))]);
        self.state
            .lock()
            .append_with_parent("custom", &fields, None)
    }

    /// `branchWithSummary`: moves the leaf to `from` (or to no entry) and appends a
    /// `branch_summary` there.
    pub fn branch_with_summary(
        &self,
        from: Option<&str>,
        summary: &str,
        details: Option<Value>,
    ) -> SessionResult<String> {
        let mut state = self.state.lock();
        match from {
            Some(id) => state.session.branch(id)?,
            None => state.session.reset_leaf(),
        }
        let fields = members([
            ("fromId", Some(Value::string(from.unwrap_or("root")))),
            ("summary", Some(Value::string(summary))),
            ("details", details),
        ]);
        state.append_with_parent("branch_summary", &fields, from.map(str::to_owned))
    }

    /// `setSessionName`: sets the title and appends a `header_patch`. Returns false when
    /// nothing changed (an automatic title never replaces a user's, and an empty name is
    /// refused).
    pub fn set_session_name(&self, name: &str, user: bool) -> SessionResult<bool> {
        let mut state = self.state.lock();
        state.check_writable()?;
        let source = if user { "user" } else { "auto" };
        if !user && state.session.header().title_source() == Some("user") {
            return Ok(false);
        }
        let title = sanitize_title(name);
        if title.is_empty() {
            return Ok(false);
        }
        let header = state.session.header_mut();
        header.insert("title", Value::string(title.as_str()));
        header.insert("titleSource", Value::string(source));
        let mut patch = Object::with_capacity(2);
        patch.insert("title", Value::string(title));
        patch.insert("titleSource", Value::string(source));
        let record = Record::new(members([
            ("type", Some(Value::string("header_patch"))),
            ("patch", Some(Value::Object(patch))),
        ]));
        state.persist_patches(&[record])?;
        Ok(true)
    }

    /// `rewriteEntries`: rewrites the whole file now.
    pub fn rewrite_entries(&self) -> SessionResult<()> {
        let mut state = self.state.lock();
        state.check_writable()?;
        if !state.persist {
            return Ok(());
        }
        state.full_rewrite()
    }

    /// `ensureOnDisk`: writes the session now if it is not fully on disk (a pending full
    /// rewrite, or patches owed from the load).
    pub fn ensure_on_disk(&self) -> SessionResult<()> {
        let mut state = self.state.lock();
        state.check_writable()?;
        if !state.persist || (state.flushed && !state.needs_full_rewrite) {
            return match state.owed.is_empty() {
                true => Ok(()),
                false => state.persist_patches(&[]),
            };
        }
        state.full_rewrite()
    }

    /// Makes every appended line durable (fsync), then reports a latched error.
    pub fn flush(&self) -> SessionResult<()> {
        let mut state = self.state.lock();
        if let (Some(path), Some(writer)) = (state.file.clone(), state.writer.as_mut()) {
            if let Err(e) = writer.fsync() {
                return Err(state.fail(&path, e).into());
            }
        }
        state.check_latched()?;
        Ok(())
    }

    /// Flushes and closes the file.
    pub fn close(&self) -> SessionResult<()> {
        let flushed = self.flush();
        self.state.lock().close_writer();
        flushed
    }

    /// `moveTo`: moves the session file into `dest_dir` (same name, never replacing a file
    /// there) and records `new_cwd` with a `header_patch`; if the file existed or the session
    /// has an assistant message, a full rewrite then folds the new cwd into the header. A move
    /// to the current cwd does nothing.
    pub fn move_to(&self, new_cwd: &str, dest_dir: &Path) -> SessionResult<()> {
        let mut state = self.state.lock();
        state.check_writable()?;
        if state.cwd == new_cwd {
            return Ok(());
        }
        let old = state.file.clone();
        let new = old
            .as_ref()
            .and_then(|f| f.file_name())
            .map(|name| dest_dir.join(name));
        let existed = old.as_deref().is_some_and(|f| state.storage().exists(f));
        if let (Some(old), Some(new)) = (&old, &new) {
            if existed {
                if state.storage().exists(new) {
                    return Err(SessionError::AlreadyExists { path: new.clone() });
                }
                state.close_writer();
                let moved = state
                    .storage()
                    .ensure_dir(dest_dir)
                    .and_then(|()| state.storage().rename(old, new));
                if let Err(e) = moved {
                    return Err(PersistError::new(old, e).into());
                }
            }
        }
        state.file = new;
        state.session_dir = Some(dest_dir.to_owned());
        state.cwd = new_cwd.to_owned();
        state
            .session
            .header_mut()
            .insert("cwd", Value::string(new_cwd));
        if existed || state.has_assistant {
            state.full_rewrite()?;
        }
        Ok(())
    }

    /// `fork`: copies the session to a new file (same directory) whose `parentSession` is this
    /// session's id, and switches to it. Returns `(old file, new file)`.
    pub fn fork(&self) -> SessionResult<(PathBuf, PathBuf)> {
        let mut state = self.state.lock();
        state.check_writable()?;
        let old = state
            .file
            .clone()
            .filter(|_| state.persist)
            .ok_or(SessionError::NoFile)?;
        let old_header = state.session.header();
        let old_id = old_header.id().unwrap_or_default().to_owned();
        let mut h = Object::with_capacity(8);
        h.insert("type", Value::string("session"));
        h.insert("version", Value::number(CURRENT_SESSION_VERSION as f64));
        h.insert("id", Value::string(ids::new_session_id()));
        if let Some(title) = old_header.title() {
            h.insert("title", Value::string(title));
        }
        if let Some(source) = old_header.title_source() {
            h.insert("titleSource", Value::string(source));
        }
        h.insert("timestamp", Value::string(time::now_iso()));
        h.insert("cwd", Value::string(state.cwd.as_str()));
        h.insert("parentSession", Value::string(old_id));
        let header = Record::new(h);
        let new = old.with_file_name(session_file_name(&header));
        let mut records = vec![header];
        records.extend(state.session.entries().cloned());
        state.publish_new(Session::from_records(records), &new)?;
        Ok((old, new))
    }

    /// `createBranchedSession`: a new session holding the path to `leaf_id` (labels
    /// recreated after it), written at once; the manager switches to it. `parentSession` is
    /// the old file's path. Returns the new file (none in memory).
    pub fn create_branched_session(&self, leaf_id: &str) -> SessionResult<Option<PathBuf>> {
        let mut state = self.state.lock();
        state.check_writable()?;
        let path: Vec<Record> = state
            .session
            .branch_path(Some(leaf_id))?
            .into_iter()
            .filter(|r| r.record_type() != RecordType::Label)
            .cloned()
            .collect();
        let old_file = state.file.clone().filter(|_| state.persist);
        let parent = old_file.as_ref().map(|f| f.to_string_lossy().into_owned());
        let header = new_header(
            &ids::new_session_id(),
            &state.cwd.clone(),
            parent.as_deref(),
        );
        let mut records = vec![header];
        let mut on_path: Vec<String> = Vec::new();
        for record in &path {
            if let Some(id) = record.id() {
                on_path.push(id.to_owned());
            }
        }
        records.extend(path);
        let mut parent_id = on_path.last().cloned();
        let now = time::now_iso();
        for target in &on_path {
            let Some(label) = state.session.label(target).map(str::to_owned) else {
                continue;
            };
            let id = ids::new_entry_id(|c| {
                on_path.iter().any(|p| p == c) || records.iter().any(|r| r.id() == Some(c))
            });
            let fields = members([
                ("targetId", Some(Value::string(target.as_str()))),
                ("label", Some(Value::string(label))),
            ]);
            let base = Base {
                id: &id,
                parent_id: parent_id.as_deref(),
                timestamp: &now,
            };
            records.push(build_entry("label", &fields, &base));
            parent_id = Some(id);
        }
        let session = Session::from_records(records);
        match (&old_file, &state.session_dir) {
            (Some(_), Some(dir)) => {
                let new = dir.join(session_file_name(&session.records()[0]));
                state.publish_new(session, &new)?;
                Ok(Some(new))
            }
            _ => {
                state.adopt(session, None, false);
                Ok(None)
            }
        }
    }

    /// `forkFrom`: a new session in `dest_dir` holding every entry of the session file at
    /// `source` (loaded leniently and migrated), with `parentSession` = the source's id;
    /// written at once.
    pub fn fork_from(
        source: &Path,
        cwd: &str,
        dest_dir: &Path,
        config: StorageConfig,
    ) -> SessionResult<Self> {
        let loaded = load_entries_from_storage(config.storage.as_ref(), source)?;
        if loaded.status != LoadStatus::Loaded {
            return Err(super::load::LoadError::NotASession {
                path: source.into(),
            }
            .into());
        }
        let mut records = loaded.records;
        migrate(&mut records);
        let not_a_session = || super::load::LoadError::NotASession {
            path: source.into(),
        };
        let source_header = records[0].as_header().ok_or_else(not_a_session)?;
        let (source_id, title, title_source) = (
            source_header.id().unwrap_or_default().to_owned(),
            source_header.title().map(str::to_owned),
            source_header.title_source().map(str::to_owned),
        );
        let mut header = new_header(&ids::new_session_id(), cwd, Some(&source_id)).into_fields();
        if let Some(title) = title {
            header.insert("title", Value::string(title));
        }
        if let Some(source) = title_source {
            header.insert("titleSource", Value::string(source));
        }
        let header = Record::new(header);
        let file = dest_dir.join(session_file_name(&header));
        records[0] = header;
        let mut state = State::fresh(config, cwd, Some(dest_dir.to_owned()), true);
        state.adopt(Session::from_records(records), Some(file), false);
        state.full_rewrite()?;
        Ok(Self::from_state(state))
    }
}

impl State {
    /// Writes `session` to a new file at `path` (never replacing one) and switches to it.
    fn publish_new(&mut self, session: Session, path: &Path) -> SessionResult<()> {
        if self.storage().exists(path) {
            return Err(SessionError::AlreadyExists {
                path: path.to_owned(),
            });
        }
        self.adopt(session, Some(path.to_owned()), false);
        self.full_rewrite()?;
        Ok(())
    }
}

/// An object from `(key, value)` pairs, leaving out absent values.
fn members<const N: usize>(pairs: [(&str, Option<Value>); N]) -> Object {
    let mut obj = Object::with_capacity(N);
    for (key, value) in pairs {
        if let Some(value) = value {
            obj.insert(key, value);
        }
    }
    obj
}

fn selection(names: &[&str], correlation: Option<&str>) -> Object {
    members([
        (
            "selectedToolNames",
            Some(Value::Array(
                names.iter().map(|n| Value::string(*n)).collect(),
            )),
        ),
        ("mutationCorrelationId", correlation.map(Value::string)),
    ])
}

impl Drop for SessionManager {
    fn drop(&mut self) {
        let state = self.state.get_mut();
        if let Some(mut writer) = state.writer.take() {
            let _ = writer.fsync();
            let _ = writer.close();
        }
    }
}
