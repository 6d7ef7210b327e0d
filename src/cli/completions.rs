//! `gjcfs completions SHELL`: the shell's completion script for every command and flag,
//! generated from the same definitions the parser uses.

use std::io::Write;

use anyhow::Result;
use clap::CommandFactory;
use clap_complete::Shell;

/// `gjcfs completions`' arguments.
#[derive(clap::Args)]
pub struct Args {
    /// bash, zsh, fish, powershell or elvish.
    #[arg(value_enum)]
    pub shell: Shell,
}

pub fn run(args: Args) -> Result<()> {
    let mut command = super::Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "gjcfs", &mut script);
    let mut out = std::io::stdout().lock();
    out.write_all(&script)?;
    out.flush()?;
    Ok(())
}
