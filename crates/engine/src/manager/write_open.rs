//! Opening a session file for writing, as one pipeline.
//!
//! [`SessionManager::open_for_writing`] first decides where, and by which rules, the file is
//! written ([`locate`]): a transcript directly inside a legacy directory of the sessions
//! root is copied into its workspace's managed scope and the copy is written; a transcript
//! in a `v2-` scope is managed; anything else is an explicit directory. Then the steps run
//! in order ([`Opening::run`]):
//! 1. verify: a managed transcript's scope must verify
//!    ([`crate::store::scope::verify_transcript_scope`]);
//! 2. recover: the backups and temp files a crash left in its directory are recovered
//!    ([`recover_dir`]);
//! 3. check: a managed transcript must be a private file;
//! 4. cut: a torn last line a crash left is cut off (`torn_tail` has the rules), for
//!    `open_for_writing` only;
//! 5. adopt: the file is read, strictly for a managed transcript
//!    ([`SessionManager::set_session_file`]) or leniently, and becomes the session.
//!
//! [`SessionManager::open_managed`] and [`SessionManager::open`] are the same pipeline for
//! a known kind of file, without the cut.

use std::path::{Path, PathBuf};

use super::{absolute, read_error, recover_dir, torn_tail, SessionError, SessionManager, State};
use super::{PersistError, SessionResult, StorageConfig};
use crate::format::blob::sha256_hex;
use crate::format::record::Record;
use crate::manager::is_legacy_dir_name;
use crate::read::inspect::parse_strict;
use crate::read::load::LoadError;
use crate::storage::{check_private_file, SessionStorage};
use crate::store::legacy::{
    list_candidates, path_for_writing, LegacyError, LegacyRoots, MigrationPolicy, Provenance,
    Workspace,
};

/// Where [`SessionManager::open_for_writing`] may write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteTarget {
    /// The agent's sessions root (`<agentDir>/sessions`), whose legacy directories are
    /// migrated before writing; without it no directory is taken for a legacy one.
    pub sessions_root: Option<PathBuf>,
    /// What to do with a transcript of a legacy directory.
    pub policy: MigrationPolicy,
}

/// The rules a file is opened by.
pub(super) enum Rules<'a> {
    /// A transcript in a managed scope: its scope verifies, it is private, its content
    /// passes the strict checks; later appends are managed appends.
    Managed,
    /// A file in an explicit directory, read leniently, for the workspace `cwd`.
    Explicit { cwd: &'a str },
}

/// One open for writing: the file, its rules, and whether a torn last line is cut.
pub(super) struct Opening<'a> {
    pub path: &'a Path,
    pub rules: Rules<'a>,
    pub cut_torn: bool,
}

impl Opening<'_> {
    /// Runs the steps (see the module docs): verify, recover, check, cut, adopt.
    pub(super) fn run(self, config: StorageConfig) -> SessionResult<SessionManager> {
        let storage = config.storage.clone();
        let storage = storage.as_ref();
        let managed = matches!(self.rules, Rules::Managed);
        let persist = |e| SessionError::Persist(PersistError::new(self.path, e));
        if managed {
            crate::store::scope::verify_transcript_scope(storage, self.path)?;
        }
        if let Some(dir) = self.path.parent() {
            recover_dir(storage, dir);
        }
        if managed {
            check_private_file(storage, self.path).map_err(persist)?;
        }
        let cut_tail = match self.cut_torn {
            true => torn_tail::cut_torn_tail(storage, self.path).map_err(persist)?,
            false => None,
        };
        let mut manager = self.adopt(config)?;
        manager.cut_tail = cut_tail;
        Ok(manager)
    }

    /// Reads the file into a new manager, by its rules.
    fn adopt(&self, config: StorageConfig) -> SessionResult<SessionManager> {
        match self.rules {
            Rules::Managed => {
                let manager = SessionManager::in_memory("");
                {
                    let mut state = manager.state.lock();
                    state.config = config;
                    state.persist = true;
                    state.managed = true;
                }
                manager.set_session_file(self.path)?;
                Ok(manager)
            }
            Rules::Explicit { cwd } => {
                let dir = self.path.parent().map(Path::to_path_buf);
                let mut state = State::fresh(config, cwd, dir, true);
                state.load_leniently(self.path)?;
                Ok(SessionManager::from_state(state))
            }
        }
    }
}

impl SessionManager {
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
    /// Before the content is read, a torn last line a crash left is cut off the file when
    /// every other line passes the strict checks and no other process writes the file
    /// ([`Self::cut_torn_tail`] says so; the rules are in `torn_tail`): otherwise the strict
    /// checks would refuse a managed transcript for ever for the one line the crash cost.
    ///
    /// [`Self::session_file`] of the result names the file that is written.
    pub fn open_for_writing(
        path: &Path,
        target: &WriteTarget,
        config: StorageConfig,
    ) -> SessionResult<Self> {
        let (path, rules) = locate(path, target, config.storage.as_ref())?;
        Opening {
            path: &path,
            rules,
            cut_torn: true,
        }
        .run(config)
    }
}

/// The file [`SessionManager::open_for_writing`] writes for `path`, and its rules: a legacy
/// transcript's managed copy (made here), a managed transcript, or a file of an explicit
/// directory.
fn locate(
    path: &Path,
    target: &WriteTarget,
    storage: &dyn SessionStorage,
) -> SessionResult<(PathBuf, Rules<'static>)> {
    if let Some(root) = &target.sessions_root {
        if is_legacy_transcript(root, path) {
            let copy = migrate_for_writing(root, path, target.policy, storage)?;
            return Ok((copy, Rules::Managed));
        }
    }
    let rules = match super::in_v2_dir(path) {
        true => Rules::Managed,
        false => Rules::Explicit { cwd: "" },
    };
    Ok((path.to_owned(), rules))
}

/// Refuses the legacy transcript at `path` before anything is copied into the managed scope
/// when the strict checks of the managed open would refuse its copy: its bytes as listed
/// (`sha256`), less a torn last line the open would cut off the copy. Bytes that are no
/// longer the listed ones are left for the migration, which refuses a changed source.
fn refuse_before_copy(
    storage: &dyn SessionStorage,
    path: &Path,
    sha256: &str,
) -> SessionResult<()> {
    let bytes = storage.read(path).map_err(read_error(path))?;
    if sha256_hex(&bytes) != sha256 {
        return Ok(());
    }
    let end = match torn_tail::find_torn_tail(storage, path) {
        Some(cut) if cut.offset + cut.len == bytes.len() as u64 => cut.offset as usize,
        _ => bytes.len(),
    };
    parse_strict(&bytes[..end])
        .map(drop)
        .map_err(|failure| SessionError::Inspect {
            path: path.to_owned(),
            failure,
        })
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
    let canonical = |p: &Path| crate::storage::FileStorage.canonicalize(p).ok();
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
        .read_prefix(path, crate::store::legacy::HEADER_MAX_BYTES)
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
        if policy != MigrationPolicy::Disabled {
            refuse_before_copy(storage, path, &candidate.identity.sha256)?;
        }
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
