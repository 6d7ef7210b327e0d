//! `gjcfs show SESSION --format md|tree|usage`: a session rendered for reading.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use gjcfs::engine::discovery::match_prefix;
use gjcfs::engine::load_session;
use gjcfs::engine::views::{markdown, tree, usage};

use super::output::{terminal_safe, warn_skipped};
use super::store::StoreArgs;

/// How many matching ids an ambiguity error names.
const AMBIGUOUS_SHOWN: usize = 5;

#[derive(Args)]
pub struct ShowArgs {
    /// A session file (.jsonl), or a session id — or a unique prefix of one, or of the
    /// file's name — looked up in the store.
    session: String,
    /// md: the context at the current leaf as Markdown; tree: every entry, one a line,
    /// branches drawn, the leaf marked; usage: token and cost totals with a per-model
    /// breakdown, as JSON.
    #[arg(long, value_enum, default_value = "md")]
    format: Format,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Md,
    Tree,
    Usage,
}

pub fn run(args: ShowArgs) -> Result<()> {
    let path = resolve(&args.session, &args.store)?;
    let loaded = load_session(&path)?;
    warn_skipped(&path, &loaded.skipped);
    let session = &loaded.session;
    let mut out = BufWriter::new(std::io::stdout().lock());
    match args.format {
        Format::Md => {
            // Image links point into the agent's blob store when it can be named.
            let prefix = match args.store.agent_dirs() {
                Ok(dirs) => format!("{}/", dirs.blob_dir().display()),
                Err(_) => "blobs/".to_owned(),
            };
            markdown::write_context_md(session, &prefix, &mut out)?;
        }
        Format::Tree => tree::write_tree(session, &mut out)?,
        Format::Usage => out.write_all(&usage::session_usage_json(session))?,
    }
    out.flush()?;
    // The process ends next: leave the records to the OS instead of freeing them one by
    // one (a tenth of a second for a 300 MB session).
    std::mem::forget(loaded);
    Ok(())
}

/// The session file `target` names: an existing file, or a session found by id prefix.
fn resolve(target: &str, store: &StoreArgs) -> Result<PathBuf> {
    let path = Path::new(target);
    if path.is_file() {
        return Ok(path.to_owned());
    }
    if target.contains('/') || target.ends_with(".jsonl") {
        bail!("{target}: no such session file");
    }
    let sessions = store.sessions()?;
    if let Some(exact) = sessions.iter().find(|info| info.id == target) {
        return Ok(exact.path.clone());
    }
    match match_prefix(&sessions, target).as_slice() {
        [] => bail!("no session matches {target} in {}", store.describe()?),
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
