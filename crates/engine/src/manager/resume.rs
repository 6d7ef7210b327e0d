//! Choosing the session to continue (`continueRecent`).
//!
//! Candidates, each opened strictly (a malformed, unstable or future-version file is skipped):
//! 1. the terminal's breadcrumb, when its cwd is this workspace and the file's header cwd
//!    resolves to the same directory;
//! 2. the workspace's managed candidates (its v2 scope and its legacy directories), newest
//!    first; a legacy one is copied into the scope first (copy-retain). A disabled migration
//!    policy, a busy migration or an artifact over the copy bounds is an error, not a skip;
//! 3. otherwise a new session in the scope.
//!
//! The breadcrumb is then written for the session chosen (best effort).

use std::path::{Path, PathBuf};

use crate::manager::{SessionManager, SessionResult, StorageConfig};
use crate::read::inspect::inspect_strict;
use crate::storage::{FileStorage, SessionStorage};
use crate::store::agent_dir::{AgentDirs, Category};
use crate::store::breadcrumb::{read_breadcrumb, write_breadcrumb};
use crate::store::legacy::{
    list_candidates, path_for_writing, Candidate, LegacyError, LegacyRoots, MigrationPolicy,
};
use crate::store::scope::{resolve_identity, scope_dir_name};

/// Where terminal breadcrumbs live.
pub fn breadcrumb_dir(dirs: &AgentDirs) -> PathBuf {
    dirs.path("terminal-sessions", Category::State)
}

fn same_dir(a: &str, b: &Path) -> bool {
    let canon = |p: &Path| FileStorage.canonicalize_local(p).ok();
    canon(Path::new(a)).is_some_and(|a| Some(a) == canon(b))
}

/// The breadcrumb's session, if it is usable for `cwd`.
fn from_breadcrumb(dirs: &AgentDirs, terminal: &str, cwd: &Path) -> Option<PathBuf> {
    let (crumb_cwd, file) = read_breadcrumb(&breadcrumb_dir(dirs), terminal)?;
    if !same_dir(&crumb_cwd, cwd) {
        return None;
    }
    let inspection = inspect_strict(&file).ok()?;
    let header_cwd = inspection.session.header().cwd()?.to_owned();
    same_dir(&header_cwd, cwd).then_some(file)
}

/// Errors that stop `continueRecent` instead of skipping the candidate.
fn is_fatal(e: &LegacyError) -> bool {
    matches!(
        e.code(),
        "legacy_migration_disabled" | "artifact_capacity_exceeded" | "migration_busy"
    )
}

/// `continueRecent`: the session to continue in the workspace `cwd`, or a new one.
pub fn continue_recent(
    cwd: &Path,
    dirs: &AgentDirs,
    config: StorageConfig,
    terminal: Option<&str>,
    policy: MigrationPolicy,
) -> SessionResult<SessionManager> {
    let identity = resolve_identity(cwd)?;
    let root = dirs.sessions_root();
    let scope = root.join(scope_dir_name(&identity));
    let mut manager = None;
    if let Some(file) = terminal.and_then(|t| from_breadcrumb(dirs, t, cwd)) {
        manager = if file.parent() == Some(scope.as_path()) {
            SessionManager::open_managed(&file, config.clone()).ok()
        } else {
            SessionManager::open(&file, &cwd.to_string_lossy(), config.clone()).ok()
        };
    }
    if manager.is_none() {
        let mut candidates = list_candidates(&root, cwd, &LegacyRoots::current())
            .map(|listing| listing.owned)
            .unwrap_or_default();
        let mtime = |c: &Candidate| FileStorage.stat(&c.path).map(|s| s.mtime_ms).ok();
        candidates.sort_by_key(|c| std::cmp::Reverse(mtime(c)));
        for candidate in &candidates {
            if inspect_strict(&candidate.path).is_err() {
                continue;
            }
            let path = match path_for_writing(&root, cwd, candidate, policy) {
                Ok(path) => path,
                Err(e) if is_fatal(&e) => return Err(e.into()),
                Err(_) => continue,
            };
            if let Ok(opened) = SessionManager::open_managed(&path, config.clone()) {
                manager = Some(opened);
                break;
            }
        }
    }
    let manager = match manager {
        Some(manager) => manager,
        None => SessionManager::create_managed(cwd, &root, config)?,
    };
    if let (Some(terminal), Some(file)) = (terminal, manager.session_file()) {
        let _ = write_breadcrumb(&breadcrumb_dir(dirs), terminal, &manager.cwd(), &file);
    }
    Ok(manager)
}
