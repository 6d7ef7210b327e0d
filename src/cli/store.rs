//! Which session store a command reads: the agent directory's sessions, or one directory.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use gjcfs::engine::discovery::{
    all_transcript_paths, list_all, list_dir, transcript_paths, SessionInfo,
};
use gjcfs::engine::storage::FileStorage;
use gjcfs::engine::AgentDirs;

/// `--agent-dir DIR` or `--session-dir DIR`.
#[derive(Args)]
pub struct StoreArgs {
    /// The agent directory whose sessions to read
    /// [default: $GJC_CODING_AGENT_DIR, else ~/.gjc/agent].
    #[arg(long, value_name = "DIR")]
    pub agent_dir: Option<PathBuf>,
    /// Read the sessions of this one directory instead.
    #[arg(long, value_name = "DIR")]
    pub session_dir: Option<PathBuf>,
    /// Take a missing agent or session directory as an empty store (else an error).
    #[arg(long)]
    pub allow_empty: bool,
}

impl StoreArgs {
    pub fn agent_dirs(&self) -> Result<AgentDirs> {
        super::agent::agent_dirs(self.agent_dir.as_deref())
    }

    /// Where the sessions are, for messages.
    pub fn describe(&self) -> Result<String> {
        Ok(match &self.session_dir {
            Some(dir) => dir.display().to_string(),
            None => self.agent_dirs()?.sessions_root().display().to_string(),
        })
    }

    /// Fails when the store is not there (see [`super::agent::check_store`]).
    pub fn check(&self) -> Result<()> {
        super::agent::check_store(
            &self.agent_dirs()?,
            self.session_dir.as_deref(),
            self.allow_empty,
        )
    }

    /// The sessions of the store with their listing metadata (one per session id).
    pub fn sessions(&self) -> Result<Vec<SessionInfo>> {
        self.check()?;
        Ok(match &self.session_dir {
            Some(dir) => list_dir(&FileStorage, dir)
                .with_context(|| format!("{}: cannot list sessions", dir.display()))?,
            None => list_all(&FileStorage, &self.agent_dirs()?.sessions_root())?,
        })
    }

    /// Every transcript file of the store, unread.
    pub fn transcripts(&self) -> Result<Vec<PathBuf>> {
        self.check()?;
        Ok(match &self.session_dir {
            Some(dir) => transcript_paths(&FileStorage, dir)
                .with_context(|| format!("{}: cannot list sessions", dir.display()))?,
            None => all_transcript_paths(&FileStorage, &self.agent_dirs()?.sessions_root())?,
        })
    }
}
