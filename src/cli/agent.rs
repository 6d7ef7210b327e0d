//! Locating the agent directory for commands that need it.

use std::path::Path;

use anyhow::Result;
use gjcfs::engine::agent_dir::{AgentDirs, Environment};

/// The agent directory given with `--agent-dir`, or the one the environment names (the
/// agent's own rules: `GJC_CODING_AGENT_DIR`, `~/.gjc/agent`, XDG data redirection).
pub fn agent_dirs(explicit: Option<&Path>) -> Result<AgentDirs> {
    let env = Environment::current();
    Ok(match explicit {
        Some(dir) => AgentDirs::with_agent_dir(&env, dir)?,
        None => AgentDirs::resolve(&env)?,
    })
}
