//! `gjcfs context FILE [--leaf ID]`.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use std::sync::Arc;

use gjcfs_engine::format::blob::BlobStore;
use gjcfs_engine::storage::FileStorage;

use super::output::load_for_command;
use super::store::StoreArgs;

/// `gjcfs context`'s arguments.
#[derive(clap::Args)]
pub struct Args {
    /// The session file (.jsonl), or a session id (or a unique prefix of one) looked up
    /// in the store. Images and cold-spilled content come from the agent directory's blob
    /// store.
    pub file: PathBuf,
    /// Build the context at this entry instead of the current leaf.
    #[arg(long, value_name = "ID")]
    pub leaf: Option<String>,
    #[command(flatten)]
    pub store: StoreArgs,
}

pub fn command(args: Args) -> Result<()> {
    let file = args.store.resolve(&args.file)?;
    run(&file, args.leaf.as_deref(), args.store.agent_dir.as_deref())
}

pub fn run(file: &Path, leaf: Option<&str>, agent_dir: Option<&Path>) -> Result<()> {
    // An explicit agent directory must resolve; without one, a missing home directory only
    // means blob references and cold-spilled content cannot be resolved (they are printed
    // as stored).
    let blob_dir = match agent_dir {
        Some(_) => Some(super::agent::agent_dirs(agent_dir)?.blob_dir()),
        None => super::agent::agent_dirs(None).ok().map(|d| d.blob_dir()),
    };
    let loaded = load_for_command(file)?;
    // What the agent sends: its load-time sanitizer has run (in memory only: its patches
    // are dropped, the file is not written).
    loaded.sanitize();
    let session = &loaded.session;
    let context = match leaf {
        None => session.build_context(),
        Some(id) if session.index_of(id).is_some() => session.build_context_for(id),
        Some(id) => bail!("{}: entry {id} not found", file.display()),
    };
    let context = match blob_dir {
        Some(dir) => context.with_blobs_resolved(&BlobStore::new(dir, Arc::new(FileStorage))),
        None => context,
    };
    let mut out = BufWriter::new(std::io::stdout().lock());
    context.write_pretty(&mut out)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
}
