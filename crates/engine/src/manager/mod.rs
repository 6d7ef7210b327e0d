//! `SessionManager`: one session in memory, kept on disk by the original's persistence rules.
//!
//! Here: the manager, its configuration, and creating sessions and loading them for reading.
//! Opening for writing is one pipeline in `write_open` (locate, verify, recover, check, cut,
//! adopt). The persistence state machine is in `state`, the typed appends in `appends`,
//! moving and forking in `fork`; building entries, full rewrites, refreshes and errors have
//! their own files too.
//!
//! Invariants:
//! - Every append creates exactly one entry whose parent is the current leaf (a context
//!   clear's is `null`), inserts it in memory, then persists it; if persisting fails the
//!   entry is removed again and the leaf restored, so memory never holds an entry that
//!   should be on disk and is not.
//! - Deferred persistence: nothing of a new session reaches disk before its first assistant
//!   message; then the whole session is written in one atomic rewrite, after which each entry
//!   is appended as one line. A file that was opened is "on disk" from the start.
//! - Opening never writes, except that [`SessionManager::open_for_writing`] cuts off a torn
//!   last line a crash left (`torn_tail`). Migrations and folded patches are written by the
//!   first persistence of any kind (a full rewrite); the OpenAI replay sanitizer's patches are
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
//!   ([`crate::store::scope::verify_transcript_scope`]). A torn last line a crash left (and
//!   nothing else wrong) is cut off there, and only there, and reported (`torn_tail`).
//! - Crash leftovers (orphaned backups, temp files of an interrupted rewrite) are recovered
//!   only when a session is opened for writing or created in a directory, never in a
//!   legacy directory ([`recover_dir`]).
//! - The manager knows which bytes of the file memory reflects, so that lines appended from
//!   outside can be read on their own ([`SessionManager::refresh_from_file`]).

mod appends;
mod entries;
mod error;
mod fork;
pub mod leaf_marker;
mod refresh;
pub mod resume;
mod rewrite;
mod state;
mod torn_tail;
mod write_open;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

pub use entries::{build_entry, external_entry, Base};
pub use error::{AppendPhase, PersistError, SessionError, SessionResult};
pub use refresh::{Refresh, ReloadReason};
pub use rewrite::{
    atomic_replace, atomic_replace_checked, backup_primary, is_legacy_dir_name, recover_dir,
    recover_orphaned_backups, remove_orphaned_temps, temp_file_primary, temp_file_unused,
};
pub use torn_tail::{cut_torn_tail, find_torn_tail, CutTail};
pub use write_open::WriteTarget;
use write_open::{Opening, Rules};

use crate::format::blob::BlobStore;
use crate::format::ids;
use crate::format::lines::read_lines;
use crate::format::migrate::{Migration, CURRENT_SESSION_VERSION};
use crate::format::record::Record;
use crate::format::time;
use crate::json::{Object, Value};
use crate::read::inspect::strict_session;
use crate::read::load::{LoadError, ReadMark};
use crate::session::context::SessionContext;
use crate::session::tree::Session;
use crate::storage::{check_private_file, MemoryStorage, SessionStorage, StorageWriter};

/// Where a manager keeps its session.
#[derive(Debug, Clone)]
pub struct StorageConfig {
    /// The filesystem the session file and its directory are on (the disk, or memory in tests).
    pub storage: Arc<dyn SessionStorage>,
    /// The blob store that payloads a line references are stored in before the line is written.
    pub blobs: BlobStore,
}

impl StorageConfig {
    /// The real filesystem, with the blob store at `blob_dir`.
    pub fn files(blob_dir: impl Into<PathBuf>) -> Self {
        let storage: Arc<dyn SessionStorage> = Arc::new(crate::storage::FileStorage);
        StorageConfig {
            blobs: BlobStore::new(blob_dir, storage.clone()),
            storage,
        }
    }
}

/// A configured model chain to append.
#[derive(Debug, Clone, Copy)]
pub struct ModelChain<'a> {
    /// The model role the chain is for (`default`, `smol`, ...).
    pub role: &'a str,
    /// The chain's models in order, each `provider/model`.
    pub entries: &'a [&'a str],
    /// Where the chain was configured (such as `session` or `settings`).
    pub origin: &'a str,
    /// An identifier of the chain, written as `identity` when given.
    pub identity: Option<&'a str>,
    /// Written as `explicitHead`: whether the chain's head (its first model) was chosen
    /// explicitly.
    pub explicit_head: bool,
    /// Whether the entry clears the role's chain (written as `cleared: true` only when set); a
    /// cleared chain is dropped from the context's configured chains.
    pub cleared: bool,
}

/// A session being read and written.
#[derive(Debug)]
pub struct SessionManager {
    state: Mutex<State>,
    /// The torn last line [`SessionManager::open_for_writing`] cut off the file.
    cut_tail: Option<CutTail>,
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
    /// Whether the open writer holds the append lock ([`StorageWriter::lock`]).
    append_locked: bool,
    /// Records whose message an entry patch replaced while an append from outside caught
    /// up with the file ([`SessionManager::take_caught_up_edits`]).
    caught_up_edits: Vec<usize>,
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
    crate::store::agent_dir::normalize(&joined)
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
    record.is_message_of("assistant")
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

impl SessionManager {
    fn from_state(state: State) -> Self {
        SessionManager {
            state: Mutex::new(state),
            cut_tail: None,
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
        let identity = crate::store::scope::resolve_identity_in(storage, cwd)?;
        let scope = crate::store::scope::prepare_scope_in(storage, sessions_root, &identity)?;
        recover_dir(config.storage.as_ref(), &scope);
        let mut state = State::fresh(config, &cwd.to_string_lossy(), Some(scope), true);
        state.managed = true;
        state.strict_reads = true;
        Ok(Self::from_state(state))
    }

    /// Opens an existing transcript in a managed scope for writing: its scope must verify
    /// ([`crate::store::scope::verify_transcript_scope`]), it must be a private file and pass the
    /// strict content checks; later appends are managed appends. Nothing is written at open
    /// (the sanitizer's patches and migrations are owed to the first write).
    pub fn open_managed(path: &Path, config: StorageConfig) -> SessionResult<Self> {
        Opening {
            path,
            rules: Rules::Managed,
            cut_torn: false,
        }
        .run(config)
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
        Opening {
            path,
            rules: Rules::Explicit { cwd },
            cut_torn: false,
        }
        .run(config)
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
            crate::store::scope::verify_transcript_scope(config.storage.as_ref(), path)?;
            check_private_file(config.storage.as_ref(), path).map_err(read_error(path))?;
        }
        let mut state = State::fresh(config, "", path.parent().map(Path::to_path_buf), true);
        state.read_only = true;
        state.managed = rules == ReadRules::Managed;
        state.load_leniently(path)?;
        Ok(Self::from_state(state))
    }

    /// The torn last line a crash left, which [`Self::open_for_writing`] cut off the file
    /// before opening it (the rules are in the `torn_tail` module).
    pub fn cut_torn_tail(&self) -> Option<CutTail> {
        self.cut_tail
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
        let patches = session.sanitize_entries(built.to_sanitize);
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
    ///
    /// The file is locked against gjcfs's other writers meanwhile, and memory first takes
    /// in the lines other processes appended since it last looked (as
    /// [`SessionManager::refresh_from_file`] does): the new entries then follow them in
    /// memory as in the file, and the first one's parent is the file's last entry.
    pub fn append_external_all(&self, inputs: Vec<Object>) -> SessionResult<Vec<String>> {
        let mut state = self.state.lock();
        state.check_appendable()?;
        state.with_append_lock(|state| {
            state.catch_up();
            let built = state.build_external(inputs)?;
            let ids = built
                .iter()
                .map(|r| r.id().unwrap_or_default().to_owned())
                .collect();
            if !built.is_empty() {
                state.commit_entries(built)?;
            }
            Ok(ids)
        })
    }

    /// Checks an entry given from outside as [`SessionManager::append_external_all`] would
    /// before appending it (its type, role and schema, a label's target), without
    /// appending anything; a manager loaded for reading checks too.
    pub fn check_external(&self, input: &Object) -> SessionResult<()> {
        self.state
            .lock()
            .build_external(vec![input.clone()])
            .map(drop)
    }

    /// The records whose message an entry patch replaced while appends from outside
    /// caught up with the file (see [`SessionManager::append_external_all`]), since the
    /// last call: what a reader that shows them must render again.
    pub fn take_caught_up_edits(&self) -> Vec<usize> {
        std::mem::take(&mut self.state.lock().caught_up_edits)
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
    pub fn with_context<R>(&self, f: impl FnOnce(SessionContext<'_>) -> R) -> R {
        self.read(|s| f(s.build_context()))
    }

    /// The path of the session file; `None` for a session kept in memory only. The file need
    /// not exist yet: a new session writes nothing before its first assistant reply.
    pub fn session_file(&self) -> Option<PathBuf> {
        self.state.lock().file.clone()
    }

    /// The session's id, from its header (a UUID v7 for a new session; empty if the header has
    /// none).
    pub fn session_id(&self) -> String {
        self.read(|s| s.header().id().unwrap_or_default().to_owned())
    }

    /// The id of the current leaf, which the next append takes as its parent; `None` when the
    /// leaf is null (no entry yet, or after [`Self::reset_leaf`]) or its entry has no string
    /// id.
    pub fn leaf_id(&self) -> Option<String> {
        self.read(|s| s.leaf_id().map(str::to_owned))
    }

    /// The session's working directory: its header's `cwd`, else the one the manager was made
    /// with; [`Self::move_to`] changes it.
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
