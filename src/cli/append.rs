//! `gjcfs append FILE`: appends entries read from stdin through the session manager.

use std::io::BufRead;
use std::path::Path;

use anyhow::{bail, Context, Result};
use gjcfs::engine::json::{self, Value};
use gjcfs::engine::manager::{SessionManager, StorageConfig};

pub fn run(file: &Path, agent_dir: Option<&Path>) -> Result<()> {
    if !file.is_file() {
        bail!("{}: no such session file", file.display());
    }
    let blobs = super::agent::agent_dirs(agent_dir)?.blob_dir();
    let cwd = std::env::current_dir()
        .map(|d| d.to_string_lossy().into_owned())
        .unwrap_or_default();
    let manager = SessionManager::open(file, &cwd, StorageConfig::files(blobs))?;
    let stdin = std::io::stdin().lock();
    let mut appended = 0usize;
    for (n, line) in stdin.lines().enumerate() {
        let line = line.context("cannot read standard input")?;
        if line.trim().is_empty() {
            continue;
        }
        let outcome = match json::parse(&line) {
            Ok(Value::Object(entry)) => manager.append_external(entry).map_err(anyhow::Error::from),
            Ok(_) => Err(anyhow::anyhow!("not a JSON object")),
            Err(e) => Err(anyhow::anyhow!("invalid JSON: {e}")),
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
