//! `gjcfs search QUERY`: full-text search over every session of the store, through the
//! search index (`gjcfs_search`), which is brought up to date first.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::OnceLock;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use gjcfs_engine::format::time::format_iso_millis;
use gjcfs_engine::json;
use gjcfs_engine::storage::FileStorage;
use gjcfs_engine::store::usage::TimeRange;
use gjcfs_search::{Filters, Hit, Progress, Query, Role, SearchError, SearchIndex, Store};

use super::output::{title_cell, warn, NothingFound};
use super::progress;
use super::range::TimeRangeArgs;
use super::store::StoreArgs;
use super::style;

/// Progress is shown when at least this many bytes need indexing.
const PROGRESS_FROM: u64 = 50 << 20;
/// What a search does when its index cannot be kept on disk.
const IN_MEMORY: &str = "using an index in memory for this search (every session is read)";
/// How many unreadable files are named one by one.
const FAILED_SHOWN: usize = 5;

#[derive(Args)]
pub struct SearchArgs {
    /// Words (all must occur), "exact phrases", or with --substring any text.
    query: String,
    /// Match QUERY as a substring anywhere (case-insensitive, at least 3 characters).
    #[arg(long)]
    substring: bool,
    /// Only sessions of this workspace (the header's cwd) [default: the current directory,
    /// or every session with --session-dir].
    #[arg(long, value_name = "DIR", conflicts_with = "all")]
    cwd: Option<PathBuf>,
    /// Search the sessions of every workspace.
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    range: TimeRangeArgs,
    /// Only messages of this role (tool: tool results and bash/python executions).
    #[arg(long, value_enum)]
    role: Option<RoleArg>,
    /// Only the session with this id (or id prefix).
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// At most this many hits.
    #[arg(long, value_name = "N", default_value_t = 20)]
    limit: usize,
    /// One JSON object per hit and line: {"session","path","title","cwd","entry","type",
    /// "kind","timestamp","onLeafPath","score","snippet","highlights"}.
    #[arg(long)]
    json: bool,
    /// Keep the index in this directory [default: $XDG_CACHE_HOME/gjcfs/search/<store>].
    #[arg(long, value_name = "DIR")]
    index: Option<PathBuf>,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Clone, Copy, ValueEnum)]
enum RoleArg {
    User,
    Assistant,
    Tool,
}

/// One search of the store, as `gjcfs search` and `gjcfs mcp` ask for it.
pub struct SearchRequest {
    pub query: String,
    /// Match `query` as a substring.
    pub substring: bool,
    /// Only this workspace; `None` with `all`: every workspace; `None` without: the
    /// current directory (every session with `--session-dir`).
    pub cwd: Option<PathBuf>,
    pub all: bool,
    pub range: TimeRange,
    pub role: Option<Role>,
    /// Only the session with this id (or id prefix).
    pub session: Option<String>,
    pub limit: usize,
    /// The index's directory instead of the store's own in the cache.
    pub index: Option<PathBuf>,
}

/// What a search found: its hits, best first, and the workspace it was limited to.
pub struct Found {
    pub hits: Vec<Hit>,
    pub workspace: Option<String>,
}

pub fn run(args: SearchArgs) -> Result<()> {
    let request = SearchRequest {
        query: args.query.clone(),
        substring: args.substring,
        cwd: args.cwd.clone(),
        all: args.all,
        range: args.range.range()?,
        role: args.role.map(|r| match r {
            RoleArg::User => Role::User,
            RoleArg::Assistant => Role::Assistant,
            RoleArg::Tool => Role::Tool,
        }),
        session: args.session.clone(),
        limit: args.limit,
        index: args.index.clone(),
    };
    let progress = indexing_progress();
    let found = find(&request, &args.store, &progress)?;
    if found.hits.is_empty() {
        return Err(NothingFound(match &found.workspace {
            Some(ws) => format!(
                "no hits for {:?} in the sessions of workspace {ws}; `gjcfs search --all` looks \
                 in every workspace",
                args.query
            ),
            None => format!("no hits for {:?} in the store", args.query),
        })
        .into());
    }
    let hits = found.hits;
    let mut out = BufWriter::new(std::io::stdout().lock());
    let color = !args.json && style::stdout_colored();
    for hit in &hits {
        if args.json {
            writeln!(out, "{}", json::to_compact(&gjcfs_search::hit_json(hit)))?;
        } else {
            writeln!(out, "{}", hit_line(hit, color))?;
        }
    }
    out.flush()?;
    Ok(())
}

/// Searches the store through its index, brought up to date first (`progress` hears how
/// far); warnings go to stderr. An index that fills the disk is given up for one in memory.
/// No hit for a `session` prefix no session has is an error.
pub fn find(
    request: &SearchRequest,
    store: &StoreArgs,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Found> {
    let query = if request.substring {
        Query::substring(&request.query)?
    } else {
        Query::parse(&request.query)?
    };
    let cwd = workspace(request.cwd.as_deref(), request.all, store)?;
    let workspace = cwd.clone();
    let filters = Filters {
        cwd,
        since_ms: request.range.since_ms,
        until_ms: request.range.until_ms,
        role: request.role,
        session: request.session.clone(),
        limit: request.limit,
    };
    // The store is checked first: a mistyped one leaves no index behind.
    let dirs = store_dirs(store)?;
    let mut index = open_index(request.index.as_deref(), store)?;
    let threads = super::store::reading_threads();
    let (report, hits) = ask_index(&mut index, store, |index| {
        index.search_dirs(&dirs, threads, progress, &query, &filters)
    })?;
    warn_report(&report);
    if hits.is_empty() {
        if let Some(prefix) = &request.session {
            if !index.has_session(prefix)? {
                bail!("no session of the store has an id starting with {prefix:?} (--session)");
            }
        }
    }
    Ok(Found { hits, workspace })
}

/// The progress of an update of the index, drawn as a bar on stderr once it has at least
/// [`PROGRESS_FROM`] bytes to read.
pub(super) fn indexing_progress() -> impl Fn(Progress) + Sync {
    // The bar appears with the first report, which says how much there is to index.
    let bar: OnceLock<progress::Progress> = OnceLock::new();
    move |p: Progress| {
        let bar =
            bar.get_or_init(|| progress::Progress::bytes("indexing", p.bytes_total, PROGRESS_FROM));
        bar.set(p.bytes_done);
        bar.note(format!("{}/{} sessions", p.files_done, p.files_total));
        if p.files_done == p.files_total {
            bar.finish();
        }
    }
}

/// The workspace a question of the index is limited to: `cwd` (made absolute), none with
/// `all` or `--session-dir`, else the current directory.
pub(super) fn workspace(
    cwd: Option<&std::path::Path>,
    all: bool,
    store: &StoreArgs,
) -> Result<Option<String>> {
    Ok(match (cwd, all || store.session_dir.is_some()) {
        (Some(dir), _) => Some(absolute(dir)?),
        (None, true) => None,
        (None, false) => Some(
            std::env::current_dir()
                .context("cannot read the current directory")?
                .to_string_lossy()
                .into_owned(),
        ),
    })
}

/// Asks `ask` of the index; when it fills the disk, the index is removed to give the space
/// back and one in memory is asked instead (and kept in `index`).
pub(super) fn ask_index<T>(
    index: &mut SearchIndex,
    store: &StoreArgs,
    ask: impl Fn(&SearchIndex) -> Result<T, SearchError>,
) -> Result<T> {
    match ask(index) {
        Err(err) if err.is_disk_full() && index.path().is_some() => {
            let in_memory = SearchIndex::open_in_memory()?.with_blobs(store_blobs(store)?);
            let removed = match std::mem::replace(index, in_memory).discard() {
                Ok(()) => "the index was removed to give its space back".to_owned(),
                Err(e) => format!("the index could not be removed: {e}"),
            };
            warn(format_args!("{err}; {removed}; {IN_MEMORY}"));
            Ok(ask(index)?)
        }
        answer => Ok(answer?),
    }
}

/// Says what the update could not do: the files it could not read, and an index another
/// process kept writing.
pub(super) fn warn_report(report: &gjcfs_search::UpdateReport) {
    if report.busy {
        warn(format_args!(
            "the index is being written by another process (waited {} s for it): sessions \
             changed since it last took them in may be missing or out of date in these results",
            gjcfs_search::BUSY_TIMEOUT.as_secs()
        ));
    }
    for (path, err) in report.failed.iter().take(FAILED_SHOWN) {
        warn(format_args!("not indexed: {}: {err}", path.display()));
    }
    if report.failed.len() > FAILED_SHOWN {
        warn(format_args!(
            "{} more files could not be indexed",
            report.failed.len() - FAILED_SHOWN
        ));
    }
}

/// The directories whose transcripts make up the store (as [`StoreArgs::transcripts`]
/// lists them): `--session-dir`, or every directory of the agent's sessions root.
/// The store's session directories, by their canonical paths: the index knows a file by
/// its path, so `sessions` and `/home/me/sessions` must name the same files, not two sets
/// (one indexed anew, the other dropped).
/// The store's directories, as a mount's watcher of the same store names them
/// ([`Store::dirs`]: canonical paths; a store not made yet has no sessions, and its spelled
/// path is kept).
pub(super) fn store_dirs(store: &StoreArgs) -> Result<Vec<PathBuf>> {
    store.check()?;
    let store = match &store.session_dir {
        Some(dir) => Store::Dir(PathBuf::from(absolute(dir)?)),
        None => Store::Root(PathBuf::from(absolute(
            &store.agent_dirs()?.sessions_root(),
        )?)),
    };
    store.dirs(&FileStorage).with_context(|| match &store {
        Store::Root(root) | Store::Dir(root) => format!("{}: cannot list sessions", root.display()),
    })
}

/// `dir` made absolute against the current directory and normalized lexically.
pub(super) fn absolute(dir: &std::path::Path) -> Result<String> {
    let dir = if dir.is_absolute() {
        dir.to_owned()
    } else {
        std::env::current_dir()
            .context("cannot read the current directory")?
            .join(dir)
    };
    Ok(gjcfs_engine::store::agent_dir::normalize(&dir)
        .to_string_lossy()
        .into_owned())
}

/// The store's blob store, whose cold-spilled text the index reads back.
fn store_blobs(store: &StoreArgs) -> Result<PathBuf> {
    Ok(store.agent_dirs()?.blob_dir())
}

/// The index: `--index DIR`, else the store's own directory in the cache. One that cannot
/// be written there is kept in memory for this run.
pub(super) fn open_index(
    index: Option<&std::path::Path>,
    store: &StoreArgs,
) -> Result<SearchIndex> {
    let dir = match index {
        Some(dir) => dir.to_owned(),
        None => store.cache_dir()?.context(
            "cannot tell where the index goes: set XDG_CACHE_HOME or HOME, or give --index DIR",
        )?,
    };
    let blobs = store_blobs(store)?;
    match SearchIndex::open(&dir) {
        Ok(index) => Ok(index.with_blobs(blobs)),
        Err(err @ (SearchError::CreateDir { .. } | SearchError::Sqlite { .. })) => {
            // What a full filesystem let the open write is given back.
            if err.is_disk_full() {
                let _ = gjcfs_search::remove_index(&dir);
            }
            warn(format_args!("{err}; {IN_MEMORY}"));
            Ok(SearchIndex::open_in_memory()?.with_blobs(blobs))
        }
        Err(err) => Err(err.into()),
    }
}

/// `ID8  TITLE  TIME  KIND  ENTRY  SNIPPET` on one line; matches in bold red on a terminal.
fn hit_line(hit: &Hit, color: bool) -> String {
    let id: String = hit.session_id.chars().take(8).collect();
    let title = title_cell(hit.title.as_deref(), hit.first_prompt.as_deref(), 40);
    let time = hit.time_ms.map_or_else(
        || "-".to_owned(),
        |ms| format_iso_millis(ms)[..16].replace('T', " "),
    );
    let branch = if hit.on_leaf_path {
        ""
    } else {
        " (off branch)"
    };
    let mut snippet = String::new();
    let mut at = 0;
    for &(a, b) in &hit.snippet.highlights {
        snippet.push_str(&hit.snippet.text[at..a]);
        snippet.push_str(&style::paint(&hit.snippet.text[a..b], style::MATCH, color));
        at = b;
    }
    snippet.push_str(&hit.snippet.text[at..]);
    format!(
        "{id}  {title}  {time}  {}{branch}  {}  {snippet}",
        hit.kind,
        hit.entry_id.as_deref().unwrap_or("-")
    )
}
