//! `gjcfs generate OUT.jsonl (--entries N | --size SIZE) [--seed S] [--version 5|1]`.

use std::path::Path;

use anyhow::{Context, Result};
use gjcfs::corpus::{self, Format, Limit, Options};

pub fn run(out: &Path, limit: Limit, seed: u64, format: Format) -> Result<()> {
    let options = Options {
        seed,
        limit,
        format,
    };
    let summary = corpus::generate_file(out, &options)
        .with_context(|| format!("cannot write {}", out.display()))?;
    eprintln!(
        "gjcfs: wrote {} ({format} session, seed {seed}): {} entries, {} bytes",
        out.display(),
        summary.entries,
        summary.bytes
    );
    Ok(())
}
