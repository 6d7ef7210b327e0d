//! `gjcfs files PATH`: which sessions read or changed a file, or any file under a
//! directory — the agent-session view of `git blame` — from the touches the search index
//! keeps (`gjcfs_search::touches`), brought up to date first as for `gjcfs search`.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use gjcfs_engine::format::time::format_iso_millis;
use gjcfs_engine::json;
use gjcfs_engine::store::usage::TimeRange;
use gjcfs_search::{FileTouch, TouchFilters, Touches};

use super::output::{terminal_safe, title_cell, NothingFound};
use super::range::TimeRangeArgs;
use super::search::{
    absolute, ask_index, indexing_progress, open_index, store_dirs, warn_report, workspace,
};
use super::store::StoreArgs;

#[derive(Args)]
pub struct FilesArgs {
    /// The file or directory, absolute or relative to the current directory (a directory
    /// names every file under it). Matched as written, after `.` and `..` are folded: no
    /// file is looked at, and a file since deleted is found too.
    path: PathBuf,
    /// Only sessions of this workspace (the header's cwd) [default: the current directory,
    /// or every session with --session-dir].
    #[arg(long, value_name = "DIR", conflicts_with = "all")]
    cwd: Option<PathBuf>,
    /// The sessions of every workspace.
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    range: TimeRangeArgs,
    /// At most this many touches (how many more there are is said on stderr).
    #[arg(long, value_name = "N", default_value_t = 20)]
    limit: usize,
    /// One JSON object per touch and line: {"session","path","title","firstPrompt","cwd",
    /// "entry","timestamp","action","source","onLeafPath","written","resolved"}.
    #[arg(long)]
    json: bool,
    /// Keep the index in this directory [default: $XDG_CACHE_HOME/gjcfs/search/<store>].
    #[arg(long, value_name = "DIR")]
    index: Option<PathBuf>,
    #[command(flatten)]
    store: StoreArgs,
}

/// One question of `gjcfs files` (and of `gjcfs mcp`'s `files_touched`).
pub struct FilesRequest {
    /// The file or directory, absolute or relative to the current directory.
    pub path: PathBuf,
    /// Only this workspace; `None` with `all`: every workspace; `None` without: the
    /// current directory (every session with `--session-dir`).
    pub cwd: Option<PathBuf>,
    pub all: bool,
    pub range: TimeRange,
    pub limit: usize,
    /// The index's directory instead of the store's own in the cache.
    pub index: Option<PathBuf>,
}

/// What `find` found: the touches, the path they were looked up by and the workspace
/// they were limited to.
pub struct Found {
    pub touches: Touches,
    pub path: String,
    pub workspace: Option<String>,
}

/// The touches of the file or directory the request names, newest first, through the
/// search index brought up to date first; warnings go to stderr.
pub fn find(request: &FilesRequest, store: &StoreArgs) -> Result<Found> {
    // `~/…` names what the agent wrote with a `~` (the shell expands an unquoted one).
    let path = match request.path.to_str() {
        Some(home) if home.starts_with('~') => home.to_owned(),
        _ => absolute(&request.path)?,
    };
    let workspace = workspace(request.cwd.as_deref(), request.all, store)?;
    let filters = TouchFilters {
        cwd: workspace.clone(),
        since_ms: request.range.since_ms,
        until_ms: request.range.until_ms,
        limit: request.limit,
    };
    // The store is checked first: a mistyped one leaves no index behind.
    let dirs = store_dirs(store)?;
    let mut index = open_index(request.index.as_deref(), store)?;
    let threads = super::store::reading_threads();
    let progress = indexing_progress();
    let (report, touches) = ask_index(&mut index, store, |index| {
        index.files_touched_dirs(&dirs, threads, &progress, &path, &filters)
    })?;
    warn_report(&report);
    Ok(Found {
        touches,
        path,
        workspace,
    })
}

pub fn run(args: FilesArgs) -> Result<()> {
    let request = FilesRequest {
        path: args.path.clone(),
        cwd: args.cwd.clone(),
        all: args.all,
        range: args.range.range()?,
        limit: args.limit,
        index: args.index.clone(),
    };
    let Found {
        touches: found,
        path,
        workspace,
    } = find(&request, &args.store)?;
    if found.touches.is_empty() && found.total == 0 {
        return Err(NothingFound(match &workspace {
            Some(ws) => format!(
                "no session of workspace {ws} read or changed {path}; `gjcfs files --all` looks \
                 in every workspace"
            ),
            None => format!("no session of the store read or changed {path}"),
        })
        .into());
    }
    let mut out = BufWriter::new(std::io::stdout().lock());
    for touch in &found.touches {
        if args.json {
            writeln!(
                out,
                "{}",
                json::to_compact(&gjcfs_search::touch_json(touch))
            )?;
        } else {
            writeln!(out, "{}", touch_line(touch))?;
        }
    }
    out.flush()?;
    let more = found.total - found.touches.len();
    if more > 0 {
        eprintln!("gjcfs: {more} more not shown (--limit {})", args.limit);
    }
    Ok(())
}

/// `ID8  TITLE  TIME  ACTION  TOOL  ENTRY  PATH` on one line, the path resolved; text from
/// the session shown safe for a terminal.
fn touch_line(touch: &FileTouch) -> String {
    let id: String = touch.session_id.chars().take(8).collect();
    let title = title_cell(touch.title.as_deref(), touch.first_prompt.as_deref(), 40);
    let time = touch.time_ms.map_or_else(
        || "-".to_owned(),
        |ms| format_iso_millis(ms)[..16].replace('T', " "),
    );
    let branch = if touch.on_leaf_path {
        ""
    } else {
        " (off branch)"
    };
    format!(
        "{}  {title}  {time}  {}{branch}  {}  {}  {}",
        terminal_safe(&id),
        touch.action.as_str(),
        terminal_safe(&touch.source),
        terminal_safe(touch.entry_id.as_deref().unwrap_or("-")),
        terminal_safe(&touch.resolved),
    )
}
