//! `gjcfs append FILE`: appends entries read from stdin through the session manager.
//!
//! The file is opened with [`SessionManager::open_for_writing`] against the agent
//! directory's sessions root: a file that does not hold a session (its first record is not
//! a session header) is refused and left as it is; a session in a legacy directory is
//! copied into its workspace's managed scope first and the copy is written (stderr says
//! where); a managed transcript must pass the managed checks (a private file in a scope that
//! verifies). A torn last line a crash left is cut off first when nothing else is wrong
//! with the file (stderr says so). Lines are appended one by one: the first invalid line
//! stops the command, the lines before it stay appended.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use gjcfs_engine::format::record::parse_object_line;
use gjcfs_engine::manager::{SessionManager, StorageConfig, WriteTarget};

/// `gjcfs append`'s arguments.
#[derive(clap::Args)]
pub struct Args {
    /// The session file (.jsonl; it must exist), or a session id (or a unique prefix
    /// of one) looked up in the store. Large images go to the agent directory's blob
    /// store.
    pub file: PathBuf,
    #[command(flatten)]
    pub store: super::store::StoreArgs,
}

pub fn command(args: Args) -> Result<()> {
    let file = args.store.resolve(&args.file)?;
    run(&file, args.store.agent_dir.as_deref())
}

pub fn run(file: &Path, agent_dir: Option<&Path>) -> Result<()> {
    let dirs = super::agent::agent_dirs(agent_dir)?;
    let target = WriteTarget {
        sessions_root: Some(dirs.sessions_root()),
        ..WriteTarget::default()
    };
    let manager =
        SessionManager::open_for_writing(file, &target, StorageConfig::files(dirs.blob_dir()))?;
    if let Some(cut) = manager.cut_torn_tail() {
        eprintln!(
            "{}: cut off the torn last line a crash left ({} bytes at byte {})",
            manager
                .session_file()
                .unwrap_or_else(|| file.to_owned())
                .display(),
            cut.len,
            cut.offset
        );
    }
    if let Some(written) = manager.session_file().filter(|w| w != file) {
        eprintln!(
            "{}: a legacy session; appending to its copy in the managed scope, {}",
            file.display(),
            written.display()
        );
    }
    let stdin = std::io::stdin().lock();
    let mut appended = 0usize;
    for (n, line) in stdin.lines().enumerate() {
        let line = line.context("cannot read standard input")?;
        if line.trim().is_empty() {
            continue;
        }
        let outcome = match parse_object_line(&line) {
            Ok(entry) => manager.append_external(entry).map_err(anyhow::Error::from),
            Err(e) => Err(anyhow::Error::from(e)),
        };
        if let Err(e) = outcome {
            manager.close()?;
            bail!(
                "stdin line {}: {e:#} ({appended} entries appended before it)",
                n + 1
            );
        }
        appended += 1;
    }
    manager.close()?;
    Ok(())
}
