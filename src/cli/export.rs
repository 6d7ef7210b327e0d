//! `gjcfs export (SESSION… | --all) [--format html|md|jsonl] --out DIR`: sessions written
//! as files to keep or share, one per session, named by session id.
//!
//! - `html`: `context.html`'s page with its images embedded (`data:` URLs read from the blob
//!   store), so the file needs nothing beside it, and the tree drawn in it; a session with
//!   other branch ends than its leaf also gets `<id>.leaves/<entry id>.html`, the page at
//!   each, which the drawing links to; a context of more than
//!   [`PAGE_MESSAGES`](html::PAGE_MESSAGES) messages is paged, its earlier pages in
//!   `<id>.pages/<n>.html`. `md`: `context.md` with images linked into the blob
//!   store; `jsonl`: the transcript's own bytes.
//! - `--out` is opened once (following a symlink there: the user names it); every file and
//!   the `<id>.leaves` and `<id>.pages` directories are then created relative to that open
//!   directory ([`OutputDir`]), the directories without following a symlink, so nothing
//!   renamed or swapped in inside `--out` during the export can redirect a write out of it.
//! - `--out` never overlaps the store: one that is, is inside or holds the agent directory,
//!   its sessions root, its blob store, `--session-dir`, or the directory of any session
//!   exported (canonical paths compared, symlinks resolved) is refused before anything is
//!   written, with exit status 2, so an export can never add a file the store would read.
//! - Each file is written whole through a temp file and a rename (owner-only, 0600; the
//!   directory is created 0700 when missing); a file of the same name is replaced. A session
//!   whose id cannot name a file is skipped with a warning, and so is a file that cannot be
//!   read as a session; the command then exits 1 after exporting the rest.
//! - `--redact`: every secret in what is written is replaced by `[redacted: <rule id>]`
//!   ([`gjcfs_engine::redact`]: gjcfs's built-in rules, `.env` reads, and the rules of
//!   `--redact-rules FILE` or else of the default rules file when it exists). `jsonl`
//!   redacts the file line by line, value by value, so it stays a session file with the
//!   same entries; `html` and `md` render a redacted copy of the session (its cold-spilled
//!   content read back first), and the store's `index.html` shows redacted titles. The rule
//!   sets in use and each session's count per rule go to stderr (never the secrets); images
//!   are not redacted.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use gjcfs_engine::format::blob::BlobStore;
use gjcfs_engine::redact::{self, Report};
use gjcfs_engine::session::tree::Session;
use gjcfs_engine::storage::{FileStorage, OutputDir, SessionStorage};
use gjcfs_engine::store::discovery::{shown_title, SessionInfo};
use gjcfs_engine::store::usage::{SessionUsageContribution, StoreUsage};
use gjcfs_engine::views::html::{self, Images, PageLinks, PageOptions};
use gjcfs_engine::views::markdown;
use gjcfs_engine::views::store_index::{index_html, IndexEntry};
use gjcfs_engine::views::tree_svg::{
    branch_ends, leaf_page_name, percent_encoded, portable_stem, TreeLinks,
};
use gjcfs_engine::views::usage_chart::usage_svg;
use gjcfs_engine::{load_session, LoadedSession};

use super::output::{warn, warn_skipped, UsageError};
use super::progress::Progress;
use super::store::StoreArgs;

/// The stems of the store's own files in an export of `--all` (`index.html`, `usage.svg`),
/// which no session's page may take.
const RESERVED_STEMS: [&str; 2] = ["index", "usage"];

/// Whether a session id is the stem of one of the store's own files.
fn reserved(id: &str) -> bool {
    RESERVED_STEMS.contains(&id.to_ascii_lowercase().as_str())
}

/// Progress is shown for exports of at least this many sessions.
const PROGRESS_FROM: usize = 50;

#[derive(clap::Args)]
pub struct Args {
    /// Session files (.jsonl) or session ids (or unique prefixes) of the store.
    #[arg(value_name = "SESSION", required_unless_present = "all")]
    sessions: Vec<PathBuf>,
    /// Export every session of the store (its live copy, as `gjcfs ls --all` lists it).
    #[arg(long, conflicts_with = "sessions")]
    all: bool,
    /// html: one self-contained page per session; md: the Markdown of `gjcfs show`;
    /// jsonl: the transcript as it is stored.
    #[arg(long, value_enum, default_value = "html")]
    format: Format,
    /// The directory to write into (created, owner-only, if missing); never one inside the
    /// session store or holding it.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Replace every secret found with `[redacted: <rule id>]` before writing, and report
    /// on stderr how many each rule replaced, per session (never the secrets). Secrets are
    /// what gjcfs's built-in rules find (cloud, AI, code hosting, registry, messaging and
    /// payment providers' keys and tokens, private keys, JWTs; password=, token=, secret=
    /// assignments, passwords in URLs, high-entropy tokens), the whole output of a read of
    /// a .env file, and what the rules of --redact-rules find. jsonl stays a valid session
    /// file. A secret no rule matches, one split across messages or one in an image is not
    /// found.
    #[arg(long)]
    redact: bool,
    /// Also apply the secret rules of FILE, in gitleaks' format (typically gitleaks' own
    /// config/gitleaks.toml; a rule that does not compile is named and left out) [default:
    /// $XDG_CONFIG_HOME/gjcfs/secret-rules.toml, else ~/.config/gjcfs/secret-rules.toml,
    /// when it exists]
    #[arg(long, value_name = "FILE", requires = "redact")]
    redact_rules: Option<PathBuf>,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Html,
    Md,
    Jsonl,
}

impl Format {
    fn extension(self) -> &'static str {
        match self {
            Format::Html => "html",
            Format::Md => "md",
            Format::Jsonl => "jsonl",
        }
    }
}

pub fn run(args: Args) -> Result<()> {
    let listed = if args.all {
        let mut listed = args.store.sessions()?;
        // The index titles a session by its first prompt when it has no title; a long
        // system prompt can push that past the first 4 KiB, where the listing looked. (A
        // count of messages from those 4 KiB alone may be 0 where messages come later.)
        for info in &mut listed {
            info.find_first_prompt(&FileStorage);
        }
        Some(listed)
    } else {
        None
    };
    let paths: Vec<PathBuf> = if let Some(listed) = &listed {
        listed.iter().map(|i| i.path.clone()).collect()
    } else {
        args.sessions
            .iter()
            .map(|s| args.store.resolve(s))
            .collect::<Result<_>>()?
    };
    refuse_store_overlap(&args, &paths)?;
    // The directory named is the user's: it may be a symlink to one.
    create_private_dir(&args.out)?;
    let out = OutputDir::open(&args.out)
        .with_context(|| format!("{}: cannot open the directory", args.out.display()))?;
    let blobs = args
        .store
        .agent_dirs()
        .ok()
        .map(|dirs| BlobStore::new(dirs.blob_dir(), Arc::new(FileStorage)));
    let bar = Progress::files("exporting sessions", paths.len(), PROGRESS_FROM);
    let store_pages = listed.is_some() && args.format == Format::Html;
    // Each session's usage, taken from the load its export makes, and whether it was
    // exported: for the store's pages.
    let mut usage: Vec<(PathBuf, SessionUsageContribution, bool)> = Vec::new();
    let mut failed = 0usize;
    if args.redact {
        let (sets, left_out) = use_redact_rules(args.redact_rules.as_deref())?;
        eprintln!("gjcfs: {sets}");
        for message in left_out {
            warn(message);
        }
    }
    let mut redacted = Report::default();
    for (done, path) in paths.iter().enumerate() {
        let mut report = args.redact.then(Report::default);
        let exported = load_session(path)
            .map_err(anyhow::Error::from)
            .and_then(|loaded| {
                let contribution =
                    store_pages.then(|| SessionUsageContribution::from_loaded(&loaded));
                let how = How {
                    format: args.format,
                    blobs: blobs.as_ref(),
                    report: report.as_mut(),
                };
                let exported = export_one(path, loaded, how, &out);
                if let Some(c) = contribution {
                    usage.push((path.clone(), c, exported.is_ok()));
                }
                exported
            });
        match (exported, report) {
            (Err(e), _) => {
                warn(format_args!("{}: not exported: {e:#}", path.display()));
                failed += 1;
            }
            (Ok(id), Some(report)) => {
                eprintln!("gjcfs: {id}: {}", redaction_line(&report));
                redacted.merge(&report);
            }
            (Ok(_), None) => {}
        }
        bar.set(done as u64 + 1);
    }
    bar.finish();
    if let (Some(listed), true) = (&listed, store_pages) {
        write_store_pages(listed, &usage, &out, args.redact)?;
    }
    if args.redact {
        eprintln!("gjcfs: in all: {}", redaction_line(&redacted));
    }
    eprintln!(
        "gjcfs: exported {} session(s) to {}",
        paths.len() - failed,
        args.out.display()
    );
    if failed > 0 {
        bail!("{failed} session(s) could not be exported");
    }
    Ok(())
}

/// The file of secret rules to add to the built-in ones: `file` (`--redact-rules`), else
/// the default rules file when it exists ([`redact::default_rules_file`]).
pub fn redact_rules_file(file: Option<&Path>) -> Option<PathBuf> {
    match file {
        Some(file) => Some(file.to_owned()),
        None => redact::default_rules_file().filter(|default| default.is_file()),
    }
}

/// Makes redaction apply the built-in rules and those of `file`, else of the default
/// rules file when it exists ([`redact::default_rules_file`]); returns what to tell: the
/// rule sets in use (`redacting secrets by built-in N rules; plus FILE: M rules`), and what
/// to warn of each rule left out (not compiled). An error when the file cannot be read or
/// holds no rules.
pub fn use_redact_rules(file: Option<&Path>) -> Result<(String, Vec<String>)> {
    let files: Vec<PathBuf> = redact_rules_file(file).into_iter().collect();
    let rules = redact::use_rules(&FileStorage, &files).context("secret rules")?;
    let mut sets = format!("redacting secrets by built-in {} rules", rules.builtin);
    for (name, n) in &rules.files {
        sets.push_str(&format!("; plus {name}: {n} rules"));
    }
    let left_out = rules.refused.iter();
    let left_out = left_out.map(|(id, error)| format!("secret rule {id} is left out: {error}"));
    Ok((sets, left_out.collect()))
}

/// `redacted N secret(s): rule n, …`, or that none was found.
fn redaction_line(report: &Report) -> String {
    match report.total() {
        0 => "no secret found".to_owned(),
        n => format!("redacted {n} secret(s): {report}"),
    }
}

/// Writes `index.html` (every exported session by project and by day, linking to its page)
/// and `usage.svg` (the store's cost and tokens per day, every session that loaded counted)
/// for an export of the whole store; under `--redact` the titles are redacted (a title is
/// a session's own text, counted in its report already).
fn write_store_pages(
    listed: &[SessionInfo],
    usage: &[(PathBuf, SessionUsageContribution, bool)],
    out: &OutputDir,
    redact: bool,
) -> Result<()> {
    let titles: HashMap<&Path, &SessionInfo> =
        listed.iter().map(|i| (i.path.as_path(), i)).collect();
    let entries: Vec<IndexEntry> = usage
        .iter()
        .filter(|(_, _, exported)| *exported)
        .map(|(path, c, _)| {
            let title = titles.get(path.as_path()).map_or("", |info| {
                shown_title(info.title.as_deref(), info.first_prompt())
            });
            let title = match redact {
                true => redact::redact_text(title, &mut Report::default()),
                false => Cow::Borrowed(title),
            };
            IndexEntry {
                id: c.session_id.clone(),
                title: title.into_owned(),
                cwd: c.cwd.clone(),
                created: c.created.clone(),
                messages: c.messages,
                usage: c.own_usage(),
                href: format!("{}.html", percent_encoded(&c.session_id)),
            }
        })
        .collect();
    let usage = StoreUsage::combine(usage.iter().map(|(_, c, _)| c));
    for (name, bytes) in [
        ("index.html", index_html(&entries, &usage)),
        ("usage.svg", usage_svg(&usage.by_day)),
    ] {
        write_file(out, name, &bytes)?;
    }
    Ok(())
}

/// How a session is exported: its format, the blob store, and under `--redact` the report
/// of what was redacted.
struct How<'a> {
    format: Format,
    blobs: Option<&'a BlobStore>,
    report: Option<&'a mut Report>,
}

/// Writes the export of the session file `path`, loaded, into `out`; returns its session
/// id.
fn export_one(
    path: &Path,
    mut loaded: LoadedSession,
    how: How<'_>,
    out: &OutputDir,
) -> Result<String> {
    let How {
        format,
        blobs,
        report,
    } = how;
    warn_skipped(path, &loaded.skipped);
    let id = loaded.session.header().id().unwrap_or_default().to_owned();
    if !portable_stem(&id) {
        bail!("its session id {id:?} cannot name a file on every system");
    }
    if format == Format::Html && reserved(&id) {
        bail!("its session id {id:?} names the store's own page");
    }
    let name = format!("{id}.{}", format.extension());
    let bytes = match format {
        Format::Jsonl => {
            let bytes = FileStorage.read(path)?;
            match report {
                Some(report) => redact::redact_lines(&bytes, report),
                None => bytes,
            }
        }
        Format::Md => {
            // The context the agent sends: its load-time sanitizer applied, in memory only.
            loaded.sanitize();
            let session = shown(&loaded.session, blobs, report);
            match blobs {
                Some(blobs) => {
                    let prefix = format!("{}/", blobs.dir().display());
                    markdown::context_md_rehydrated(&session, &prefix, blobs)
                }
                None => markdown::context_md(&session, "blobs/"),
            }
        }
        Format::Html => {
            loaded.sanitize();
            let session = shown(&loaded.session, blobs, report);
            write_leaf_pages(&session, &id, blobs, out)?
        }
    };
    write_file(out, &name, &bytes)?;
    Ok(id)
}

/// The session pages are rendered from: under `--redact` (a report given), a redacted
/// copy with its cold-spilled content read back ([`redact::redacted_session`]).
fn shown<'s>(
    session: &'s Session,
    blobs: Option<&BlobStore>,
    report: Option<&mut Report>,
) -> Cow<'s, Session> {
    match report {
        Some(report) => Cow::Owned(redact::redacted_session(session, blobs, report)),
        None => Cow::Borrowed(session),
    }
}

/// Writes the file `name` into `dir`, owner-only, replacing one there.
fn write_file(dir: &OutputDir, name: &str, bytes: &[u8]) -> Result<()> {
    dir.write_replacing(name, bytes, true)
        .with_context(|| format!("{}: cannot write", dir.path().join(name).display()))
}

/// Creates the directory `name` in `dir` unless it is there, and opens it without
/// following a symlink: pages are never written through a link someone put inside the
/// export, nor through one swapped in while it is written.
fn open_subdir(dir: &OutputDir, name: &str) -> Result<OutputDir> {
    dir.create_dir(name).with_context(|| {
        format!(
            "{}: cannot open the directory",
            dir.path().join(name).display()
        )
    })
}

/// Writes the pages beside the session's own page, and returns that page (the last page of
/// its context, with the tree): `<id>.leaves/<entry>.html` for every branch end but the
/// leaf, and `<id>.pages/<n>.html` for every page of the context before the last (neither
/// directory for a session without other branches or with one page).
fn write_leaf_pages(
    session: &Session,
    id: &str,
    blobs: Option<&BlobStore>,
    out: &OutputDir,
) -> Result<Vec<u8>> {
    let leaf = gjcfs_engine::manager::leaf_marker::shown_leaf(session).map(str::to_owned);
    let others: Vec<String> = branch_ends(session)
        .into_iter()
        .filter(|end| Some(end) != leaf.as_ref())
        .collect();
    let images = blobs.map_or(Images::Link("blobs/"), Images::Embed);
    let own_page = format!("{}.html", percent_encoded(id));
    let back = format!("../{own_page}");
    let leaves_dir = format!("{id}.leaves");
    let leaves_prefix = format!("{}/", percent_encoded(&leaves_dir));
    let leaves_from_a_page = format!("../{leaves_prefix}");
    let pages_dir = format!("{id}.pages");
    let pages_prefix = format!("{}/", percent_encoded(&pages_dir));
    let have_leaves = !others.is_empty();
    let page = |leaf: Option<&str>, page: Option<usize>, beside: bool| {
        let (leaves, page_links) = match (leaf, beside) {
            // A leaf page: its siblings; the newest messages at that entry.
            (Some(_), _) => (Some(""), None),
            // An earlier page of the context, in <id>.pages/.
            (None, true) => (
                have_leaves.then_some(leaves_from_a_page.as_str()),
                Some(PageLinks {
                    dir: "",
                    last: &back,
                }),
            ),
            // The session's own page.
            (None, false) => (
                have_leaves.then_some(leaves_prefix.as_str()),
                Some(PageLinks {
                    dir: &pages_prefix,
                    last: &own_page,
                }),
            ),
        };
        let current = if leaf.is_some() || beside {
            back.as_str()
        } else {
            own_page.as_str()
        };
        html::context_html(
            session,
            &PageOptions {
                images,
                cold: blobs,
                leaf,
                tree: Some(TreeLinks {
                    leaves,
                    current: Some(current),
                }),
                page,
                page_links,
            },
        )
    };
    if have_leaves {
        let dir = open_subdir(out, &leaves_dir)?;
        for end in &others {
            if let Some(name) = leaf_page_name(end) {
                write_file(&dir, &name, &page(Some(end), None, true))?;
            }
        }
    }
    let messages = session.build_context().messages.len();
    let pages = messages.div_ceil(html::PAGE_MESSAGES).max(1);
    if pages > 1 {
        let dir = open_subdir(out, &pages_dir)?;
        for n in 1..pages {
            write_file(&dir, &format!("{n}.html"), &page(None, Some(n), true))?;
        }
    }
    Ok(page(None, None, false))
}

/// Refuses an `--out` that overlaps a directory of the store (see the module
/// documentation): a `jsonl` export into a scope directory would add a second copy of a
/// session, which could become its live copy.
fn refuse_store_overlap(args: &Args, paths: &[PathBuf]) -> Result<()> {
    let mut store: Vec<PathBuf> = Vec::new();
    if let Ok(dirs) = args.store.agent_dirs() {
        store.extend([
            dirs.agent_dir().to_owned(),
            dirs.sessions_root(),
            dirs.blob_dir(),
        ]);
    }
    store.extend(args.store.session_dir.iter().cloned());
    store.extend(paths.iter().filter_map(|p| p.parent()).map(Path::to_owned));
    let out = resolved(&args.out)?;
    for dir in &store {
        let dir = resolved(dir)?;
        if out.starts_with(&dir) || dir.starts_with(&out) {
            return Err(UsageError(format!(
                "--out {}: overlaps the session store at {}; export into a directory that is \
                 neither inside the store nor holds it",
                args.out.display(),
                dir.display()
            ))
            .into());
        }
    }
    Ok(())
}

/// `path` absolute with every symlink of the part that exists resolved, the missing rest
/// joined to it as written.
fn resolved(path: &Path) -> Result<PathBuf> {
    let absolute =
        std::path::absolute(path).with_context(|| format!("{}: cannot resolve", path.display()))?;
    let mut existing = gjcfs_engine::store::agent_dir::normalize(&absolute);
    let mut rest = Vec::new();
    loop {
        match std::fs::canonicalize(&existing) {
            Ok(canonical) => return Ok(rest.into_iter().rev().fold(canonical, |p, c| p.join(c))),
            Err(_) => match (existing.parent(), existing.file_name()) {
                (Some(parent), Some(name)) => {
                    rest.push(name.to_owned());
                    existing = parent.to_owned();
                }
                _ => return Ok(absolute),
            },
        }
    }
}

/// Creates `dir` (and its parents) when missing, the last one owner-only; `dir` may be a
/// symlink to a directory (the user names it).
fn create_private_dir(dir: &Path) -> Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder
        .create(dir)
        .with_context(|| format!("{}: cannot create the directory", dir.display()))
}
