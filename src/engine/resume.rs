//! Choosing the session to continue (`continueRecent`, details §13–14).
//!
//! Candidates, each opened strictly (a malformed, unstable or future-version file is skipped):
//! 1. the terminal's breadcrumb, when its cwd is this workspace and the file's header cwd
//!    resolves to the same directory;
//! 2. the sessions of the workspace's managed scope, newest first;
//! 3. otherwise a new session in the scope.
//!
//! The breadcrumb is then written for the session chosen (best effort).

use std::path::{Path, PathBuf};

use super::agent_dir::{AgentDirs, Category};
use super::breadcrumb::{read_breadcrumb, write_breadcrumb};
use super::discovery::list_dir;
use super::inspect::inspect_strict;
use super::manager::{SessionManager, SessionResult, StorageConfig};
use super::scope::{resolve_identity, scope_dir_name};

/// Where terminal breadcrumbs live.
pub fn breadcrumb_dir(dirs: &AgentDirs) -> PathBuf {
    dirs.path("terminal-sessions", Category::State)
}

fn same_dir(a: &str, b: &Path) -> bool {
    let canon = |p: &Path| std::fs::canonicalize(p).ok();
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

/// `continueRecent`: the session to continue in the workspace `cwd`, or a new one.
pub fn continue_recent(
    cwd: &Path,
    dirs: &AgentDirs,
    config: StorageConfig,
    terminal: Option<&str>,
) -> SessionResult<SessionManager> {
    let identity = resolve_identity(cwd)?;
    let scope = dirs.sessions_root().join(scope_dir_name(&identity));
    let crumb = terminal.and_then(|t| from_breadcrumb(dirs, t, cwd));
    let candidates = list_dir(config.storage.as_ref(), &scope).unwrap_or_default();
    let chosen = crumb
        .into_iter()
        .chain(candidates.into_iter().map(|c| c.path))
        .find_map(|path| {
            let in_scope = path.parent() == Some(scope.as_path());
            let opened = if in_scope {
                SessionManager::open_managed(&path, config.clone())
            } else {
                inspect_strict(&path)
                    .map_err(|e| super::manager::SessionError::Inspect {
                        path: e.path,
                        failure: e.failure,
                    })
                    .and_then(|_| {
                        SessionManager::open(&path, &cwd.to_string_lossy(), config.clone())
                    })
            };
            opened.ok()
        });
    let manager = match chosen {
        Some(manager) => manager,
        None => SessionManager::create_managed(cwd, &dirs.sessions_root(), config)?,
    };
    if let (Some(terminal), Some(file)) = (terminal, manager.session_file()) {
        let _ = write_breadcrumb(&breadcrumb_dir(dirs), terminal, &manager.cwd(), &file);
    }
    Ok(manager)
}
