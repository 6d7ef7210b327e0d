//! Locating the agent directory for commands that need it.

use std::path::Path;

use anyhow::{bail, Result};
use gjcfs_engine::agent_dir::{AgentDirs, Environment};

/// The agent directory given with `--agent-dir`, or the one the environment names (the
/// agent's own rules: `GJC_CODING_AGENT_DIR`, `~/.gjc/agent`, XDG data redirection).
pub fn agent_dirs(explicit: Option<&Path>) -> Result<AgentDirs> {
    let env = Environment::current();
    Ok(match explicit {
        Some(dir) => AgentDirs::with_agent_dir(&env, dir)?,
        None => AgentDirs::resolve(&env)?,
    })
}

/// Refuses a store that is not there, so that a mistyped `--agent-dir` or a missing
/// `~/.gjc/agent` is one clear line and a non-zero exit instead of an empty answer. With
/// `--session-dir` that directory must exist; otherwise the agent directory must (its
/// `sessions/` may be missing: an agent that never saved a session). `allow_empty` takes a
/// missing store as an empty one.
pub fn check_store(dirs: &AgentDirs, session_dir: Option<&Path>, allow_empty: bool) -> Result<()> {
    let (dir, what) = match session_dir {
        Some(dir) => (dir, "session directory"),
        None => (dirs.agent_dir(), "agent directory"),
    };
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => bail!("{}: the {what} is not a directory", dir.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && allow_empty => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "{}: no {what} here (give the right one with --{}, or --allow-empty for an empty store)",
            dir.display(),
            if session_dir.is_some() { "session-dir" } else { "agent-dir" }
        ),
        Err(e) => bail!("{}: cannot read the {what}: {e}", dir.display()),
    }
}
