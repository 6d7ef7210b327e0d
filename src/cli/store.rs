//! Which session store a command reads: the agent directory's sessions, or one directory.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use gjcfs_engine::discovery::{
    all_transcript_paths, list_all, list_dir, match_prefix, transcript_paths, SessionInfo,
};
use gjcfs_engine::storage::FileStorage;
use gjcfs_engine::AgentDirs;

use super::output::terminal_safe;

/// How many matching ids an ambiguity error names.
const AMBIGUOUS_SHOWN: usize = 5;

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

    /// The session file `target` names: an existing file, or a session found by id prefix.
    pub fn resolve(&self, target: &str) -> Result<PathBuf> {
        let path = Path::new(target);
        if path.is_file() {
            return Ok(path.to_owned());
        }
        if path.is_dir() {
            bail!("{target}: a directory, not a session file (give a .jsonl file or a session id)");
        }
        if target.contains('/') || target.ends_with(".jsonl") {
            bail!("{target}: no such session file");
        }
        let sessions = self.sessions()?;
        if let Some(exact) = sessions.iter().find(|info| info.id == target) {
            return Ok(exact.path.clone());
        }
        match match_prefix(&sessions, target).as_slice() {
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

/// The session file `target` names for a command that reads one agent directory: an
/// existing file, or a session of that store by id or unique prefix.
pub fn resolve_in(target: &Path, agent_dir: Option<&Path>) -> Result<PathBuf> {
    // Anything at that path is the command's to read (or to refuse, with its own reason).
    if std::fs::symlink_metadata(target).is_ok() {
        return Ok(target.to_owned());
    }
    let store = StoreArgs {
        agent_dir: agent_dir.map(Path::to_path_buf),
        session_dir: None,
        allow_empty: false,
    };
    store.resolve(&target.to_string_lossy())
}
