//! Which session store a command reads: the agent directory's sessions, or one directory.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use gjcfs_engine::storage::FileStorage;
use gjcfs_engine::store::discovery::{
    all_transcript_paths, list_all, list_dir, match_prefix, transcript_paths, SessionInfo,
};
use gjcfs_engine::AgentDirs;

use super::output::terminal_safe;

/// How many matching ids an ambiguity error names.
const AMBIGUOUS_SHOWN: usize = 5;

/// The store flags every command that reads the store takes: `--agent-dir DIR`,
/// `--session-dir DIR`, `--allow-empty`.
#[derive(Args)]
pub struct StoreArgs {
    /// The agent directory: its sessions, blob store and history
    #[cfg_attr(
        not(windows),
        doc = "[default: $GJC_CODING_AGENT_DIR, else ~/.gjc/agent]."
    )]
    #[cfg_attr(
        windows,
        doc = "[default: %GJC_CODING_AGENT_DIR%, else %USERPROFILE%\\.gjc\\agent]."
    )]
    #[arg(long, value_name = "DIR")]
    pub agent_dir: Option<PathBuf>,
    /// Take the sessions of this one directory instead of the agent directory's (whose
    /// blob store is still used).
    #[arg(long, value_name = "DIR")]
    pub session_dir: Option<PathBuf>,
    /// Take a missing agent or session directory as an empty store (else an error).
    #[arg(long)]
    pub allow_empty: bool,
}

/// How many threads read the sessions of a store at once: every core, two to eight.
pub fn reading_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 8))
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

    /// The session file `path` names: anything at that path but a directory (the command
    /// reads it, or refuses it with its own reason), else a session of the store by id or
    /// unique id prefix.
    pub fn resolve(&self, path: &Path) -> Result<PathBuf> {
        let target = path.to_string_lossy();
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.is_dir() => bail!(
                "{target}: a directory, not a session file (give a .jsonl file or a session id)"
            ),
            Ok(_) => return Ok(path.to_owned()),
            Err(_) => {}
        }
        if target.contains('/') || target.ends_with(".jsonl") {
            bail!("{target}: no such session file");
        }
        let sessions = self.sessions()?;
        if let Some(exact) = sessions.iter().find(|info| info.id == target) {
            return Ok(exact.path.clone());
        }
        match match_prefix(&sessions, &target).as_slice() {
            [] => bail!("no session matches {target} in {}", self.describe()?),
            [one] => Ok(one.path.clone()),
            many => {
                // In id order: the listing's order (newest first) changes with every write.
                let mut ids: Vec<String> = many
                    .iter()
                    .map(|info| terminal_safe(&info.id).into_owned())
                    .collect();
                ids.sort_unstable();
                ids.truncate(AMBIGUOUS_SHOWN);
                let more = if many.len() > AMBIGUOUS_SHOWN {
                    ", …"
                } else {
                    ""
                };
                bail!(
                    "{target} is ambiguous: {} sessions match ({}{more})",
                    many.len(),
                    ids.join(", ")
                )
            }
        }
    }
}
