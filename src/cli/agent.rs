//! Locating the agent directory for commands that need it.

use std::path::Path;

use anyhow::{bail, Result};
use gjcfs_engine::store::agent_dir::{AgentDirs, Environment};

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
/// `sessions/` may be missing when it has a prompt history: an agent that never saved a
/// session; one with neither is not an agent directory). `allow_empty` takes a missing or
/// empty store as an empty one.
pub fn check_store(dirs: &AgentDirs, session_dir: Option<&Path>, allow_empty: bool) -> Result<()> {
    let (dir, what) = match session_dir {
        Some(dir) => (dir, "session directory"),
        None => (dirs.agent_dir(), "agent directory"),
    };
    match std::fs::metadata(dir) {
        // An agent directory holds its sessions or its prompt history (or, a new one, not
        // yet either: --allow-empty).
        Ok(meta)
            if meta.is_dir()
                && session_dir.is_none()
                && !allow_empty
                && !dirs.sessions_root().is_dir()
                && !dirs.history_db().is_file() =>
        {
            bail!(
                "{}: not an agent directory: it holds neither sessions/ nor a prompt history \
                 (give the right one with --agent-dir, or --allow-empty for an empty store)",
                dir.display()
            )
        }
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
