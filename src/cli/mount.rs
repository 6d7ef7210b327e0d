//! `gjcfs mount MOUNTPOINT`: checks the store and the mountpoint, mounts, shows the first
//! listing's progress and serves the session store through FUSE in the foreground until
//! Ctrl-C, SIGTERM or SIGHUP (or an outside unmount); how a served mount stops is
//! `gjcfs_fuse::serve`'s.
//!
//! Unix only; Windows mounts through Dokan (`mount_windows.rs`).

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::OnceLock;

use anyhow::Context;
use anyhow::{bail, Result};
use gjcfs_engine::store::agent_dir::AgentDirs;
use gjcfs_fuse::lifecycle;
use gjcfs_vfs::{SavedRenderings, SessionSource, Vfs, VfsConfig};

use super::output::terminal_safe;
use super::progress::Progress;

/// `gjcfs mount`'s arguments.
#[derive(clap::Args)]
pub struct Args {
    /// An empty directory (created if missing).
    pub mountpoint: PathBuf,
    #[command(flatten)]
    pub store: super::store::StoreArgs,
    /// Refuse every write (EROFS). On Linux files are then served without a request per
    /// open and close: reading many files (grep -r) is several times faster, and a view
    /// opened before a change reads whole as it was.
    #[arg(long)]
    pub read_only: bool,
    /// Render the pages for people with every secret replaced by `[redacted: <rule id>]`
    /// (the rules of `gjcfs export --redact`): context.html, context.md, pages/, leaves/,
    /// tree.txt, tree.svg and the store's index.html. The data stays as stored:
    /// session.jsonl, entries/, context.json, search/, history/ and files/ still hold the
    /// secrets.
    #[arg(long)]
    pub redact: bool,
    /// Also apply the secret rules of FILE, in gitleaks' format (as `gjcfs export
    /// --redact-rules`) [default: $XDG_CONFIG_HOME/gjcfs/secret-rules.toml, else
    /// ~/.config/gjcfs/secret-rules.toml, when it exists]
    #[arg(long, value_name = "FILE", requires = "redact")]
    pub redact_rules: Option<PathBuf>,
    /// Let other users reach the mount (needs root or user_allow_other in
    /// /etc/fuse.conf). The kernel still enforces the permissions shown (files 0400, leaf
    /// 0600, entries/new 0200, directories 0700, owned by the mounting user), and the
    /// server refuses writes by anyone but that user and root: other users are refused
    /// (EACCES) every directory and file, so they can neither read nor append to
    /// sessions. Without it, other users cannot reach the mount at all.
    #[arg(long)]
    pub allow_other: bool,
    /// Append the server's log to this file instead of standard error (created 0600;
    /// what is logged is chosen by GJCFS_LOG, e.g. GJCFS_LOG=debug).
    #[arg(long, value_name = "FILE")]
    pub log_file: Option<PathBuf>,
}

/// `gjcfs umount`'s arguments.
#[derive(clap::Args)]
pub struct UmountArgs {
    /// The mountpoint.
    pub mountpoint: PathBuf,
}

pub fn command(args: Args) -> Result<()> {
    gjcfs_log::init(match &args.log_file {
        Some(path) => gjcfs_log::Destination::File(path),
        None => gjcfs_log::Destination::Stderr {
            ansi: super::style::stderr_colored(),
        },
    })?;
    run(
        &args.mountpoint,
        Options {
            agent_dir: args.store.agent_dir.as_deref(),
            session_dir: args.store.session_dir.as_deref(),
            read_only: args.read_only,
            redact: args.redact.then_some(args.redact_rules.as_deref()),
            allow_other: args.allow_other,
            allow_empty: args.store.allow_empty,
        },
    )
}

pub fn umount_command(args: UmountArgs) -> Result<()> {
    umount(&args.mountpoint)
}

/// The first listing shows progress for stores of at least this many files.
const LISTING_PROGRESS_FROM: usize = 2000;
/// How many sessions stay loaded at once.
const MAX_LOADED: usize = 64;
/// Threads serving kernel requests (Linux; one elsewhere).
const SERVER_THREADS: usize = if cfg!(target_os = "linux") { 4 } else { 1 };

pub struct Options<'a> {
    pub agent_dir: Option<&'a Path>,
    pub session_dir: Option<&'a Path>,
    pub read_only: bool,
    /// `--redact`, with `--redact-rules`.
    pub redact: Option<Option<&'a Path>>,
    pub allow_other: bool,
    pub allow_empty: bool,
}

/// Loads the secret rules of `--redact` (before anything is rendered), and logs what it
/// does, which rule sets it applies and any rule left out (not compiled).
fn use_redact_rules(file: Option<&Path>) -> Result<()> {
    let (sets, left_out) = super::export::use_redact_rules(file)?;
    tracing::info!(
        "the pages show secrets redacted ({sets}); session.jsonl, entries/ and context.json \
         hold them as stored"
    );
    for message in left_out {
        tracing::warn!("{message}");
    }
    Ok(())
}

pub fn run(mountpoint: &Path, options: Options<'_>) -> Result<()> {
    let Options {
        agent_dir,
        session_dir,
        read_only,
        redact,
        allow_other,
        allow_empty,
    } = options;
    let dirs = super::agent::agent_dirs(agent_dir)?;
    let source = match session_dir {
        Some(dir) => SessionSource::Dir(dir.to_owned()),
        None => SessionSource::SessionsRoot(dirs.sessions_root()),
    };
    let mountpoint = std::path::absolute(mountpoint)
        .with_context(|| format!("{}: cannot resolve", mountpoint.display()))?;
    lifecycle::check_fuse_installed()?;
    super::agent::check_store(&dirs, session_dir, allow_empty)?;
    if let Some(file) = redact {
        use_redact_rules(file)?;
    }
    prepare_mountpoint(&mountpoint, &dirs, session_dir)?;

    // Signals are taken by one thread with sigwait; blocked before any other thread starts
    // so every thread inherits the mask.
    let signals = lifecycle::block_termination_signals()?;

    let cache_dir = gjcfs_search::default_index_dir(session_dir.unwrap_or(dirs.agent_dir()));
    let vfs = Arc::new(Vfs::new(vfs_config(
        source,
        &dirs,
        cache_dir,
        read_only,
        redact.is_some(),
    )));
    let (uid, gid) = (
        rustix::process::getuid().as_raw(),
        rustix::process::getgid().as_raw(),
    );
    let options = gjcfs_fuse::MountOptions {
        uid,
        gid,
        threads: SERVER_THREADS,
        read_only,
        allow_other,
        auto_unmount: allow_other || lifecycle::auto_unmount_allowed(),
    };
    let session = gjcfs_fuse::mount(vfs.clone(), &mountpoint, &options)
        .with_context(|| format!("{}: cannot mount", mountpoint.display()))?;
    tracing::info!("mounted at {}", mountpoint.display());
    // The first listing reads the start of every session file.
    let bar: OnceLock<Progress> = OnceLock::new();
    let served = vfs.summary(&|done, total| {
        bar.get_or_init(|| Progress::files("listing the store", total, LISTING_PROGRESS_FROM))
            .set(done as u64);
    });
    if let Some(bar) = bar.get() {
        bar.finish();
    }
    let served_dir = session_dir.unwrap_or(dirs.agent_dir());
    tracing::info!(
        "serving {}: {} session(s) in {} workspace(s), prompt history: {}{}",
        terminal_safe(&served_dir.display().to_string()),
        served.sessions,
        served.workspaces,
        if served.history { "yes" } else { "no" },
        if read_only { " (read-only)" } else { "" }
    );

    // The index follows the store once a search built it, so that searches here and by
    // `gjcfs search` need not check every file.
    match vfs.watch_search() {
        Ok(()) => tracing::info!("the search index follows the store's changes once built"),
        Err(e) => tracing::info!("the search index checks the store at each search: {e}"),
    }

    let ended = gjcfs_fuse::serve(&vfs, &mountpoint, session, signals);
    for (sid, reason) in &ended.unclosed {
        tracing::error!("session {}: {reason}", terminal_safe(sid));
    }
    if let Some(failure) = ended.failure {
        return Err(failure).context("the filesystem session failed");
    }
    if !ended.unclosed.is_empty() {
        bail!(
            "{} session(s) could not be closed cleanly",
            ended.unclosed.len()
        );
    }
    tracing::info!("unmounted {}", mountpoint.display());
    Ok(())
}

/// The model of the store `source` (of the agent directory `dirs`), served from the disk to
/// this user, sharing the caches `gjcfs search`, `gjcfs usage` and `gjcfs ls` keep for it in
/// `cache_dir`: the search index, the saved usage, the saved listing it starts from, and
/// the sizes of the views it rendered.
fn vfs_config(
    source: SessionSource,
    dirs: &AgentDirs,
    cache_dir: Option<PathBuf>,
    read_only: bool,
    redact: bool,
) -> VfsConfig {
    VfsConfig {
        storage: Arc::new(gjcfs_engine::storage::FileStorage),
        source,
        blob_dir: dirs.blob_dir(),
        read_only,
        max_loaded: MAX_LOADED,
        history_db: dirs.history_db(),
        owner_uid: Some(rustix::process::getuid().as_raw()),
        search_index: cache_dir.clone(),
        saved_usage: cache_dir
            .as_ref()
            .map(|dir| dir.join(gjcfs_engine::store::usage::SAVED_USAGE_FILE)),
        saved_listing: cache_dir
            .as_ref()
            .map(|dir| dir.join(gjcfs_engine::store::discovery::SAVED_LISTING_FILE)),
        // Sizes rendered with the secrets in them are not those of a redacted view.
        saved_renderings: cache_dir.filter(|_| !redact).and_then(|dir| {
            SavedRenderings::for_this_program(
                &gjcfs_engine::storage::FileStorage,
                dir.join(gjcfs_vfs::SAVED_RENDERINGS_FILE),
            )
        }),
        redact,
    }
}

/// Makes `mountpoint` ready to be mounted on: outside the store and not around it, no
/// dead mount left on it, created (0700) when missing, an empty directory.
fn prepare_mountpoint(
    mountpoint: &Path,
    dirs: &AgentDirs,
    session_dir: Option<&Path>,
) -> Result<()> {
    let mut store = vec![
        ("the agent directory", dirs.agent_dir().to_owned()),
        ("the sessions directory", dirs.sessions_root()),
        ("the blob store", dirs.blob_dir()),
    ];
    if let Some(dir) = dirs.history_db().parent() {
        store.push(("the prompt history's directory", dir.to_owned()));
    }
    if let Some(dir) = session_dir {
        store.push(("the session directory", dir.to_owned()));
    }
    lifecycle::refuse_overlap(mountpoint, &store)?;
    lifecycle::clear_stale_mount(mountpoint, &mut |message| tracing::info!("{message}"))?;
    if !mountpoint.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(mountpoint)
            .with_context(|| format!("{}: cannot create the mountpoint", mountpoint.display()))?;
    }
    if !mountpoint.is_dir() {
        bail!("{}: not a directory", mountpoint.display());
    }
    let occupied = std::fs::read_dir(mountpoint)
        .with_context(|| format!("{}: cannot read the mountpoint", mountpoint.display()))?
        .next()
        .is_some();
    if occupied {
        bail!(
            "{}: not empty (a mount would hide what it holds); choose an empty directory",
            mountpoint.display()
        );
    }
    Ok(())
}

/// `gjcfs umount MOUNTPOINT`: unmounts (Linux: `fusermount3 -u`; macOS: `unmount(2)`); the
/// server sees its session end.
pub fn umount(mountpoint: &Path) -> Result<()> {
    let mountpoint = std::path::absolute(mountpoint)
        .with_context(|| format!("{}: cannot resolve", mountpoint.display()))?;
    Ok(lifecycle::umount(&mountpoint)?)
}
