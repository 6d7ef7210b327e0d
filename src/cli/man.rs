//! `gjcfs man --out DIR`: a man page per command (`gjcfs.1`, `gjcfs-ls.1`,
//! `gjcfs-history-search.1`, …), generated from the same definitions the parser uses. The
//! pages in `docs/man/` are these, and a test keeps them current.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::CommandFactory;
use gjcfs_engine::storage::OutputDir;

/// `gjcfs man`'s arguments.
#[derive(clap::Args)]
pub struct Args {
    /// The directory to write the pages into (created if missing; pages already there are
    /// replaced).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

pub fn run(args: Args) -> Result<()> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("{}: cannot create", args.out.display()))?;
    let mut command = super::Cli::command().disable_help_subcommand(true);
    // Gives every subcommand its display name (`gjcfs-history-search`).
    command.build();
    let dir = OutputDir::open(&args.out)
        .with_context(|| format!("{}: cannot open the directory", args.out.display()))?;
    let mut written = 0;
    write_pages(&command, &dir, &mut written)?;
    eprintln!("gjcfs: wrote {written} man pages to {}", args.out.display());
    Ok(())
}

/// Writes the page of `command` and of each of its subcommands, counting them.
fn write_pages(command: &clap::Command, dir: &OutputDir, written: &mut usize) -> Result<()> {
    let page = clap_mangen::Man::new(command.clone());
    let mut text = Vec::new();
    page.render(&mut text)?;
    let name = page.get_filename();
    dir.write_replacing(&name, &text, false)
        .with_context(|| format!("{}: cannot write", dir.path().join(&name).display()))?;
    *written += 1;
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, dir, written)?;
    }
    Ok(())
}
