//! Which session store a command reads: the agent directory's sessions, or one directory.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use gjcfs_engine::storage::FileStorage;
use gjcfs_engine::store::discovery::{
    all_transcript_paths, list_all_cached, list_dir_cached, match_prefix, transcript_paths,
    ListingCache, SessionInfo,
};
use gjcfs_engine::store::usage::{scan_sessions_cached, StoreScan, UsageCache, SAVED_USAGE_FILE};
use gjcfs_engine::AgentDirs;

use super::output::{left_to_exit, terminal_safe};

/// The saved listing's file in the store's cache directory ([`StoreArgs::cache_file`]).
pub use gjcfs_engine::store::discovery::SAVED_LISTING_FILE as LISTING_FILE;

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
    /// Whether the store is read again and again by one process (`gjcfs mcp`): what a
    /// reading keeps is then freed after it, never left to the process's exit.
    #[arg(skip)]
    pub long_running: bool,
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
    /// Only the files that changed since the last listing are read: what a listing read is
    /// kept in the store's cache directory ([`StoreArgs::cache_file`]).
    pub fn sessions(&self) -> Result<Vec<SessionInfo>> {
        self.sessions_then(|_, _| {})
    }

    /// [`StoreArgs::sessions`], with `complete` given the sessions and the listing cache
    /// before it is saved: what it learns of a session by reading more of it
    /// ([`ListingCache::complete`]) is kept for the next run.
    pub fn sessions_then(
        &self,
        complete: impl FnOnce(&mut [SessionInfo], &mut ListingCache),
    ) -> Result<Vec<SessionInfo>> {
        self.check()?;
        let saved = self.cache_file(LISTING_FILE)?;
        let mut cache = saved.as_deref().map(ListingCache::load).unwrap_or_default();
        let none = &|_, _| {};
        let mut sessions = match &self.session_dir {
            Some(dir) => list_dir_cached(&FileStorage, dir, &mut cache, none)
                .with_context(|| format!("{}: cannot list sessions", dir.display()))?,
            None => list_all_cached(
                &FileStorage,
                &self.agent_dirs()?.sessions_root(),
                &mut cache,
                none,
            )?,
        };
        complete(&mut sessions, &mut cache);
        if let Some(file) = &saved {
            // A cache: one that cannot be written costs the next run its speed only.
            let _ = cache.save(&FileStorage, file);
        }
        self.let_go(cache);
        Ok(sessions)
    }

    /// The usage each of `paths` records ([`scan_sessions_cached`]): only the files that
    /// changed since the last scan are read, the rest comes from the store's cache
    /// directory. `whole_store`: `paths` are every file of the store, so the cache forgets
    /// the others. `progress` gets the number of files done.
    pub fn scan_usage(
        &self,
        paths: &[PathBuf],
        whole_store: bool,
        progress: &(dyn Fn(usize) + Sync),
    ) -> Result<StoreScan> {
        let saved = self.cache_file(SAVED_USAGE_FILE)?;
        // The saved usage holds every file of the store: what bounds it.
        let files = match (&saved, whole_store) {
            (None, _) => 0,
            (Some(_), true) => paths.len(),
            (Some(_), false) => self.transcripts()?.len().max(paths.len()),
        };
        let mut cache = saved
            .as_deref()
            .map(|file| UsageCache::load(&FileStorage, file, files))
            .unwrap_or_default();
        let scan = scan_sessions_cached(paths, reading_threads(), &mut cache, progress);
        if whole_store {
            cache.keep_only(paths);
        }
        if let Some(file) = &saved {
            // A cache: one that cannot be written costs the next run its speed only.
            let _ = cache.save(&FileStorage, file);
        }
        self.let_go(cache);
        Ok(scan)
    }

    /// The directory where the store's caches are kept: its search index (shared with a
    /// mount of the same store), its saved listing and usage; `None` when there is no cache
    /// directory (neither `XDG_CACHE_HOME` nor `HOME`).
    pub fn cache_dir(&self) -> Result<Option<PathBuf>> {
        let store = match &self.session_dir {
            Some(dir) => dir.clone(),
            None => self.agent_dirs()?.agent_dir().to_owned(),
        };
        Ok(gjcfs_search::default_index_dir(&store))
    }

    /// The file `name` in [`StoreArgs::cache_dir`].
    pub fn cache_file(&self, name: &str) -> Result<Option<PathBuf>> {
        Ok(self.cache_dir()?.map(|dir| dir.join(name)))
    }

    /// Lets go of what one reading of the store kept: freed by a long-running process,
    /// else left to the exit ([`left_to_exit`]).
    pub fn let_go<T: 'static>(&self, value: T) {
        if self.long_running {
            drop(value);
        } else {
            left_to_exit(value);
        }
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
        self.session_by_id(&target)
    }

    /// The file of the store's session whose id is `target`, or the only one whose id
    /// starts with it. Nothing outside the store is looked at.
    pub fn session_by_id(&self, target: &str) -> Result<PathBuf> {
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
