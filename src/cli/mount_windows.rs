//! `gjcfs mount M:` on Windows: resolves the store as the Unix mount does and starts the
//! Dokan mount server, `gjcfs-dokan.exe` ([`super::dokan_server`]), in the foreground until
//! it is unmounted (`gjcfs umount M:`, Ctrl-C). `gjcfs umount` asks the same server program
//! to remove the mount.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::dokan_server::{explain_exit, serve_args, server_beside, Serve, SERVER};

/// `gjcfs mount`'s arguments.
#[derive(clap::Args)]
pub struct Args {
    /// A drive letter (`M:`) or an empty NTFS directory.
    pub mountpoint: String,
    #[command(flatten)]
    pub store: super::store::StoreArgs,
    /// Refuse every write (the volume is write-protected).
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
    /// %APPDATA%\gjcfs\secret-rules.toml, when it exists]
    #[arg(long, value_name = "FILE", requires = "redact")]
    pub redact_rules: Option<PathBuf>,
    /// Append the server's log to this file instead of standard error (what is logged
    /// is chosen by GJCFS_LOG, e.g. GJCFS_LOG=debug).
    #[arg(long, value_name = "FILE")]
    pub log_file: Option<PathBuf>,
}

/// `gjcfs umount`'s arguments.
#[derive(clap::Args)]
pub struct UmountArgs {
    /// The drive letter or directory mounted.
    pub mountpoint: String,
}

/// The server program, or why there is none.
fn server() -> Result<PathBuf> {
    let me = std::env::current_exe().context("cannot find the running gjcfs.exe")?;
    let server = server_beside(&me).context("cannot find the running gjcfs.exe's directory")?;
    if !server.is_file() {
        bail!(
            "{}: not found; {SERVER} serves Dokan mounts and is installed beside gjcfs.exe",
            server.display()
        );
    }
    Ok(server)
}

/// Runs the server with `args`, in the foreground.
fn run_server(args: Vec<std::ffi::OsString>) -> Result<()> {
    let server = server()?;
    let status = Command::new(&server)
        .args(args)
        .status()
        .with_context(|| format!("{}: cannot start", server.display()))?;
    if status.success() {
        return Ok(());
    }
    match explain_exit(status.code()) {
        Some(reason) => bail!("{reason}"),
        // The server printed its reason.
        None => bail!("the mount server failed ({status})"),
    }
}

pub fn command(args: Args) -> Result<()> {
    let dirs = args.store.agent_dirs()?;
    args.store.check()?;
    let session_dir = args.store.session_dir.as_deref();
    let served_dir = session_dir.unwrap_or(dirs.agent_dir());
    let search_index = gjcfs_search::default_index_dir(served_dir);
    let (sessions_root, blob_dir, history_db) =
        (dirs.sessions_root(), dirs.blob_dir(), dirs.history_db());
    let redact_rules = args
        .redact
        .then(|| super::export::redact_rules_file(args.redact_rules.as_deref()))
        .flatten();
    run_server(serve_args(&Serve {
        mountpoint: &args.mountpoint,
        session_dir,
        sessions_root: &sessions_root,
        blob_dir: &blob_dir,
        history_db: &history_db,
        search_index: search_index.as_deref(),
        read_only: args.read_only,
        redact: args.redact,
        redact_rules: redact_rules.as_deref(),
        log_file: args.log_file.as_deref(),
    }))
}

pub fn umount_command(args: UmountArgs) -> Result<()> {
    run_server(vec!["unmount".into(), args.mountpoint.into()])
}
