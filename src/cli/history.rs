//! `gjcfs history`: list, search and record prompts in the agent's prompt history.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use gjcfs_engine::format::time::format_iso_millis;
use gjcfs_engine::store::agent_dir;
use gjcfs_engine::{HistoryEntry, HistoryStorage};

use super::output::{terminal_safe, NothingFound};

/// The `history` command's arguments: without a subcommand it lists recent prompts. The
/// options may be given before or after a subcommand.
#[derive(Args)]
pub struct HistoryArgs {
    #[command(subcommand)]
    action: Option<Action>,
    /// Only prompts recorded in this working directory; for `add`, the working directory to
    /// record (default: the current directory). Made absolute.
    #[arg(long, value_name = "DIR", global = true)]
    cwd: Option<PathBuf>,
    /// At most this many prompts (default 20; the store caps it at 1000).
    #[arg(long, value_name = "N", global = true)]
    limit: Option<usize>,
    /// Print one JSON object a line: {"id","prompt","created_at","cwd"}.
    #[arg(long, global = true)]
    json: bool,
    /// The agent directory holding history.db (default: $GJC_CODING_AGENT_DIR,
    /// $PI_CODING_AGENT_DIR, or ~/.gjc/agent, with XDG data redirection).
    #[arg(long, value_name = "DIR", global = true)]
    agent_dir: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Action {
    /// Search prompts: full-text prefix matches of every word first, then prompts that
    /// contain every word anywhere; newest first within each group.
    Search {
        /// The words to look for (split on anything that is not a letter or digit).
        query: String,
    },
    /// Record prompts, in order, as the agent does when one is submitted. Blank prompts and
    /// a prompt equal to the previous one are skipped.
    Add {
        /// The prompts.
        #[arg(required = true)]
        prompts: Vec<String>,
    },
}

const DEFAULT_LIMIT: usize = 20;

pub fn run(args: HistoryArgs) -> Result<()> {
    match &args.action {
        None => list(&args, None),
        Some(Action::Search { query }) => list(&args, Some(query)),
        Some(Action::Add { prompts }) => {
            if args.limit.is_some() || args.json {
                bail!("--limit and --json do not apply to `history add`");
            }
            add(prompts, &args)
        }
    }
}

/// `<agentDir>/history.db` for the chosen or configured agent directory.
fn database_path(args: &HistoryArgs) -> Result<PathBuf> {
    Ok(super::agent::agent_dirs(args.agent_dir.as_deref())?.history_db())
}

/// A directory as given, made absolute against the current directory.
fn absolute(dir: &Path) -> Result<String> {
    let path = if dir.is_absolute() {
        agent_dir::normalize(dir)
    } else {
        let cwd = std::env::current_dir().context("cannot read the current directory")?;
        agent_dir::join(&cwd, dir)
    };
    path.into_os_string()
        .into_string()
        .map_err(|p| anyhow::anyhow!("{}: not a UTF-8 path", Path::new(&p).display()))
}

fn list(args: &HistoryArgs, query: Option<&str>) -> Result<()> {
    let path = database_path(args)?;
    let cwd = args.cwd.as_deref().map(absolute).transpose()?;
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
    let entries = prompts(&path, query, cwd.as_deref(), limit)?;
    let mut out = BufWriter::new(std::io::stdout().lock());
    let mut line = Vec::new();
    for entry in &entries {
        if args.json {
            line.clear();
            entry.write_json_line(&mut line);
            out.write_all(&line)?;
        } else {
            writeln!(out, "{}", human_line(entry))?;
        }
    }
    out.flush()?;
    Ok(())
}

/// The newest `limit` prompts of the history database `path`, or those that match `query`
/// (best first), of the working directory `cwd` only when given. None is [`NothingFound`].
pub fn prompts(
    path: &Path,
    query: Option<&str>,
    cwd: Option<&str>,
    limit: usize,
) -> Result<Vec<HistoryEntry>> {
    if !path.exists() {
        bail!("{}: no prompt history database", path.display());
    }
    let storage = HistoryStorage::open(path)?;
    let entries = match query {
        None => storage.get_recent(limit, cwd)?,
        Some(query) if gjcfs_engine::history::tokenize(query).is_empty() => {
            return Err(super::output::BadQuery(format!(
                "{query:?} holds no word to search for (punctuation only separates words)"
            ))
            .into())
        }
        Some(query) => storage.search(query, limit, cwd)?,
    };
    storage.close()?;
    if entries.is_empty() {
        let scope = match cwd {
            Some(cwd) => format!(" in {cwd}"),
            None => String::new(),
        };
        return Err(NothingFound(match query {
            Some(query) => format!("no prompt{scope} matches {query:?}"),
            None => format!("no prompts recorded{scope} in {}", path.display()),
        })
        .into());
    }
    Ok(entries)
}

fn add(prompts: &[String], args: &HistoryArgs) -> Result<()> {
    let cwd = absolute(args.cwd.as_deref().unwrap_or(Path::new(".")))?;
    let storage = HistoryStorage::open(database_path(args)?)?;
    for prompt in prompts {
        storage.add(prompt, Some(&cwd));
    }
    storage.close()?;
    Ok(())
}

/// `YYYY-MM-DD HH:MM:SS  cwd  prompt` (UTC; `-` for no cwd; control characters in the
/// cwd and the prompt shown as escapes so that each prompt stays on one line).
fn human_line(entry: &HistoryEntry) -> String {
    let iso = format_iso_millis(entry.created_at.saturating_mul(1000));
    let time = iso
        .get(..19)
        .map_or_else(|| iso.clone(), |t| t.replace('T', " "));
    format!(
        "{time}  {}  {}",
        terminal_safe(entry.cwd.as_deref().unwrap_or("-")),
        terminal_safe(&entry.prompt)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines() {
        let entry = HistoryEntry {
            id: 7,
            prompt: "fix \"it\"\nnow\u{1}".into(),
            created_at: 1_767_225_600,
            cwd: Some("/w".into()),
        };
        assert_eq!(
            human_line(&entry),
            "2026-01-01 00:00:00  /w  fix \"it\"\\nnow\\u{1}"
        );
        let no_cwd = HistoryEntry { cwd: None, ..entry };
        assert!(human_line(&no_cwd).contains("  -  "));
    }
}
