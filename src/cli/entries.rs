//! `gjcfs entries FILE [--rehydrate [--agent-dir DIR]]`.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use gjcfs_engine::format::blob::BlobStore;
use gjcfs_engine::format::cold_spill::rehydrate_record;
use gjcfs_engine::storage::FileStorage;

use super::output::load_for_command;
use super::store::StoreArgs;

/// `gjcfs entries`' arguments.
#[derive(clap::Args)]
pub struct Args {
    /// The session file (.jsonl), or a session id (or a unique prefix of one) looked up
    /// in the store.
    pub file: PathBuf,
    /// Put cold-spilled content back in place of the eviction notices, read from the
    /// agent directory's blob store (the markers stay).
    #[arg(long)]
    pub rehydrate: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

pub fn command(args: Args) -> Result<()> {
    let file = args.store.resolve(&args.file)?;
    run(&file, args.rehydrate, args.store.agent_dir.as_deref())
}

pub fn run(file: &Path, rehydrate: bool, agent_dir: Option<&Path>) -> Result<()> {
    let blobs = match rehydrate {
        true => Some(BlobStore::new(
            super::agent::agent_dirs(agent_dir)?.blob_dir(),
            Arc::new(FileStorage),
        )),
        false => None,
    };
    let loaded = load_for_command(file)?;
    let mut out = BufWriter::new(std::io::stdout().lock());
    let mut line = Vec::new();
    for record in loaded.session.records() {
        line.clear();
        match &blobs {
            Some(blobs) => rehydrate_record(record, blobs).write_line(&mut line),
            None => record.write_line(&mut line),
        }
        out.write_all(&line)?;
    }
    out.flush()?;
    Ok(())
}
