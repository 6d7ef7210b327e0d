//! `gjcfs ls [--all] [--cwd DIR] [--long] [--json]`: sessions like the agent's session
//! picker, with their tokens and cost on request.

use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use gjcfs_engine::format::time::format_iso_millis;
use gjcfs_engine::json::{self, Object, Value};
use gjcfs_engine::session::usage::UsageSum;
use gjcfs_engine::storage::{FileStorage, SessionStorage};
use gjcfs_engine::store::discovery::{
    count_message_lines, keep_live_copies, project_local_transcripts, session_info, ListingCache,
    SessionInfo,
};
use gjcfs_engine::store::legacy::{list_candidates, LegacyRoots};

use super::output::{left_to_exit, terminal_safe, title_cell, token_count, NothingFound};
use super::progress::Progress;
use super::store::StoreArgs;
use super::style;

/// `gjcfs ls`' arguments.
#[derive(clap::Args)]
pub struct Args {
    /// List the sessions of every workspace (the default with --session-dir).
    #[arg(long)]
    pub all: bool,
    /// The workspace whose sessions to list [default: the current directory].
    #[arg(long, value_name = "DIR", conflicts_with_all = ["all", "session_dir"])]
    pub cwd: Option<PathBuf>,
    /// Add each session's tokens and cost (read from every reply it records).
    #[arg(long, short = 'l')]
    pub long: bool,
    /// One JSON object per session and line, with its tokens and cost ("usage").
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// How the sessions are printed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    /// The table with tokens and cost.
    Long,
    Json,
}

pub fn command(args: Args) -> Result<()> {
    let all = args.all || args.store.session_dir.is_some();
    let format = match (args.json, args.long) {
        (true, _) => Format::Json,
        (false, true) => Format::Long,
        (false, false) => Format::Table,
    };
    run(all, args.cwd.as_deref(), format, &args.store)
}

/// The sessions `gjcfs ls` lists, newest first, each with where it was found (`None` with
/// `all`): every session of the store with `all`, else those of the workspace `cwd` (the
/// current directory without one). Message counts are exact. An empty listing is a
/// [`NothingFound`] that says where it looked.
pub fn listing(
    all: bool,
    cwd: Option<&Path>,
    store: &StoreArgs,
) -> Result<Vec<(SessionInfo, Option<&'static str>)>> {
    let dirs = store.agent_dirs()?;
    let sessions_root = match &store.session_dir {
        Some(dir) => dir.clone(),
        None => dirs.sessions_root(),
    };
    let storage: Arc<dyn SessionStorage> = Arc::new(FileStorage);
    let workspace = match cwd {
        Some(dir) => dir.to_owned(),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let rows: Vec<(SessionInfo, Option<&'static str>)> = if all {
        store_listing(store)?
            .into_iter()
            .map(|info| (info, None))
            .collect()
    } else {
        store.check()?;
        let cwd = workspace.clone();
        let listing = list_candidates(&sessions_root, &cwd, &LegacyRoots::current())?;
        let mut rows: Vec<_> = listing
            .owned
            .iter()
            .filter_map(|c| {
                let info = session_info(storage.as_ref(), &c.path).ok()??;
                Some((info, Some(c.provenance.as_str())))
            })
            .collect();
        rows.extend(
            project_local_transcripts(storage.as_ref(), &cwd)
                .iter()
                .filter_map(|p| {
                    Some((
                        session_info(storage.as_ref(), p).ok()??,
                        Some("project-local"),
                    ))
                }),
        );
        rows.sort_by(|(a, _), (b, _)| {
            b.modified_ms
                .cmp(&a.modified_ms)
                .then_with(|| a.path.cmp(&b.path))
        });
        // One row per session id: the live copy.
        keep_live_copies(&mut rows, |(info, _)| {
            (&info.id, info.modified_ms, &info.path)
        });
        for (info, _) in &mut rows {
            exact(storage.as_ref(), info);
        }
        rows
    };
    if rows.is_empty() {
        let looked_in = (!all).then_some(workspace.as_path());
        let in_store = store.transcripts().map_or(0, |p| p.len());
        return Err(nothing_listed(in_store, &sessions_root, looked_in).into());
    }
    Ok(rows)
}

pub fn run(all: bool, cwd: Option<&Path>, format: Format, store: &StoreArgs) -> Result<()> {
    let rows = listing(all, cwd, store)?;
    let usage = match format {
        Format::Table => vec![None; rows.len()],
        Format::Long | Format::Json => {
            let paths: Vec<PathBuf> = rows.iter().map(|(info, _)| info.path.clone()).collect();
            session_usage(store, &paths)?
        }
    };
    let mut out = BufWriter::new(std::io::stdout().lock());
    if format != Format::Json {
        let header = header_row(format == Format::Long);
        let bold = style::stdout_colored();
        writeln!(
            out,
            "{}",
            style::paint(header.trim_end(), style::HEADER, bold)
        )?;
    }
    for ((info, provenance), usage) in rows.iter().zip(&usage) {
        match format {
            Format::Json => writeln!(
                out,
                "{}",
                json::to_compact(&to_json(info, *provenance, usage.as_ref()))
            )?,
            Format::Long => writeln!(out, "{}", table_row(info, *provenance, Some(usage)))?,
            Format::Table => writeln!(out, "{}", table_row(info, *provenance, None))?,
        }
    }
    out.flush()?;
    left_to_exit((rows, usage));
    Ok(())
}

/// Every session of the store as `gjcfs ls --all` lists it: message counts exact, and the
/// first prompt looked for past a file's first 4 KiB where it was not found there.
pub fn store_listing(store: &StoreArgs) -> Result<Vec<SessionInfo>> {
    // What is counted is kept with the listing, so the next run reads nothing of a session
    // that did not change.
    store.sessions_then(|infos: &mut [SessionInfo], cache: &mut ListingCache| {
        for info in infos {
            if exact(&FileStorage, info) {
                cache.complete(info);
            }
        }
    })
}

/// Completes a listing's estimate from a large file's first 4 KiB: its messages counted
/// exactly, and a first prompt that a long system prompt pushed out looked for further;
/// whether anything changed.
fn exact(storage: &dyn SessionStorage, info: &mut SessionInfo) -> bool {
    if !info.message_count_is_estimate {
        return false;
    }
    if let Ok(count) = count_message_lines(storage, &info.path) {
        info.message_count = count;
        info.message_count_is_estimate = false;
    }
    if info.message_count > 0 {
        info.find_first_prompt(storage);
    }
    true
}

/// The usage each session records ([`UsageSum`] of every reply its statistics count,
/// copies from a parent included), or `None` for a file that cannot be loaded; read on
/// every core, with progress on a terminal, where the store's saved usage does not have
/// it ([`StoreArgs::scan_usage`]).
fn session_usage(store: &StoreArgs, paths: &[PathBuf]) -> Result<Vec<Option<UsageSum>>> {
    let bar = Progress::files("reading sessions", paths.len(), PROGRESS_FROM);
    let scan = store.scan_usage(paths, false, &|done| bar.set(done as u64))?;
    bar.finish();
    let sums: HashMap<&Path, UsageSum> = scan
        .contributions
        .iter()
        .map(|s| (s.path.as_path(), s.contribution.own_usage()))
        .collect();
    Ok(paths
        .iter()
        .map(|p| sums.get(p.as_path()).copied())
        .collect())
}

/// What an empty listing says: where it looked, and for one workspace, how many session
/// files the whole store has (and that `--all` lists them).
fn nothing_listed(in_store: usize, sessions_root: &Path, workspace: Option<&Path>) -> NothingFound {
    NothingFound(match (workspace, in_store) {
        (None, _) => format!("no sessions in the store {}", sessions_root.display()),
        (Some(ws), 0) => format!(
            "no sessions for workspace {}, and none in the store {}",
            ws.display(),
            sessions_root.display()
        ),
        (Some(ws), n) => format!(
            "no sessions for workspace {}; {n} session file{} in the store: `gjcfs ls --all` \
             lists {}",
            ws.display(),
            if n == 1 { "" } else { "s" },
            if n == 1 { "it" } else { "them" }
        ),
    })
}

/// Progress is shown for the usage of at least this many sessions.
const PROGRESS_FROM: usize = 500;

/// The most characters of a session's title a table shows (`ls` and `usage --by session`).
pub const TITLE_WIDTH: usize = 60;

/// Width of the TOKENS and COST columns of `--long`.
const TOKENS_WIDTH: usize = 13;
const COST_WIDTH: usize = 10;

/// The column names above the rows.
fn header_row(long: bool) -> String {
    let usage = if long {
        format!("  {:>TOKENS_WIDTH$}  {:>COST_WIDTH$}", "TOKENS", "COST")
    } else {
        String::new()
    };
    format!(
        "{:<36}  {:<16}  {:>5}{usage}  {}  {}",
        "SESSION", "MODIFIED (UTC)", "MSGS", "CWD", "TITLE"
    )
}

/// The TOKENS and COST cells of `--long` (`-` for a file that cannot be loaded).
fn usage_cells(usage: Option<&UsageSum>) -> String {
    let (tokens, cost) = usage.map_or_else(
        || ("-".to_owned(), "-".to_owned()),
        |u| {
            let t = &u.totals;
            let tokens = t.input + t.output + t.cache_read + t.cache_write;
            (token_count(tokens), format!("${:.4}", t.cost))
        },
    );
    format!("  {tokens:>TOKENS_WIDTH$}  {cost:>COST_WIDTH$}")
}

/// A row of the table; `usage` is `Some` with `--long`.
fn table_row(
    info: &SessionInfo,
    provenance: Option<&str>,
    usage: Option<&Option<UsageSum>>,
) -> String {
    let modified = format_iso_millis(info.modified_ms);
    let count = if info.message_count_is_estimate {
        format!("{}+", info.message_count)
    } else {
        info.message_count.to_string()
    };
    let legacy = if provenance == Some("legacy") {
        "  (legacy, read-only until opened)"
    } else {
        ""
    };
    let usage = usage.map_or_else(String::new, |u| usage_cells(u.as_ref()));
    format!(
        "{:<36}  {}  {:>5}{usage}  {}  {}{legacy}",
        terminal_safe(&info.id),
        &modified[..16].replace('T', " "),
        count,
        terminal_safe(&info.cwd),
        title_cell(info.title.as_deref(), info.first_prompt(), TITLE_WIDTH)
    )
}

pub fn to_json(info: &SessionInfo, provenance: Option<&str>, usage: Option<&UsageSum>) -> Value {
    let mut o = Object::with_capacity(11);
    o.insert("id", Value::string(info.id.as_str()));
    o.insert(
        "title",
        info.title.as_deref().map_or(Value::Null, Value::string),
    );
    o.insert("cwd", Value::string(info.cwd.as_str()));
    o.insert("created", Value::string(info.created.as_str()));
    o.insert(
        "modified",
        Value::string(format_iso_millis(info.modified_ms)),
    );
    o.insert("messageCount", Value::number(info.message_count as f64));
    o.insert(
        "messageCountIsEstimate",
        Value::Bool(info.message_count_is_estimate),
    );
    o.insert("firstMessage", Value::string(info.first_message.as_str()));
    o.insert(
        "path",
        Value::string(info.path.to_string_lossy().into_owned()),
    );
    if let Some(provenance) = provenance {
        o.insert("provenance", Value::string(provenance));
    }
    o.insert("usage", usage.map_or(Value::Null, UsageSum::to_value));
    Value::Object(o)
}
