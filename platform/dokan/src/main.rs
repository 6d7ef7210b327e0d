//! `gjcfs-dokan`: the Dokan mount server that `gjcfs mount` starts on Windows, in an
//! executable of its own because it links Dokan's library (`dokan2.dll`): the `gjcfs`
//! command itself then runs on machines without Dokan, and only a mount needs it. When the
//! library is missing, Windows refuses to start this program (`STATUS_DLL_NOT_FOUND`), and
//! `gjcfs mount` says that Dokan is not installed.
//!
//! ```text
//! gjcfs-dokan serve MOUNTPOINT --sessions-root DIR | --session-dir DIR
//!             --blob-dir DIR --history-db FILE [--search-index DIR] [--read-only]
//!             [--redact [--redact-rules FILE]] [--log-file FILE]
//! gjcfs-dokan unmount MOUNTPOINT
//! ```
//! The store's paths come resolved from `gjcfs mount`; this program does not look for them.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "gjcfs-dokan",
    about = "The Dokan mount server of gjcfs (started by `gjcfs mount`)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// `Serve` holds every option of a mount, `Unmount` one name: the command line is parsed
// once, so the size of the larger variant costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Mount the store and serve it until it is unmounted.
    Serve {
        /// A drive letter (`M:`) or an empty NTFS directory.
        mountpoint: String,
        #[arg(long, value_name = "DIR", required_unless_present = "session_dir")]
        sessions_root: Option<PathBuf>,
        #[arg(long, value_name = "DIR", conflicts_with = "sessions_root")]
        session_dir: Option<PathBuf>,
        #[arg(long, value_name = "DIR")]
        blob_dir: PathBuf,
        #[arg(long, value_name = "FILE")]
        history_db: PathBuf,
        #[arg(long, value_name = "DIR")]
        search_index: Option<PathBuf>,
        #[arg(long)]
        read_only: bool,
        /// Render the pages for people with every secret redacted.
        #[arg(long)]
        redact: bool,
        /// Also apply the secret rules of this file (gitleaks' format).
        #[arg(long, value_name = "FILE", requires = "redact")]
        redact_rules: Option<PathBuf>,
        /// Append the log here instead of standard error (GJCFS_LOG chooses what).
        #[arg(long, value_name = "FILE")]
        log_file: Option<PathBuf>,
    },
    /// Remove a mount made by `serve`.
    Unmount { mountpoint: String },
}

/// How many sessions stay loaded at once.
#[cfg_attr(not(windows), allow(dead_code))]
const MAX_LOADED: usize = 64;

#[cfg(windows)]
fn run(cli: Cli) -> Result<(), String> {
    use gjcfs_vfs::{SessionSource, Vfs, VfsConfig};
    match cli.command {
        Command::Serve {
            mountpoint,
            sessions_root,
            session_dir,
            blob_dir,
            history_db,
            search_index,
            read_only,
            redact,
            redact_rules,
            log_file,
        } => {
            gjcfs_log::init(match &log_file {
                Some(path) => gjcfs_log::Destination::File(path),
                None => gjcfs_log::Destination::Stderr { ansi: false },
            })
            .map_err(|e| e.to_string())?;
            if redact {
                let rules = gjcfs_vfs::redact::use_rules(
                    &gjcfs_vfs::FileStorage,
                    &Vec::from_iter(redact_rules),
                )
                .map_err(|e| e.to_string())?;
                tracing::info!("the pages show secrets redacted by {} rules", rules.rules);
                for (id, error) in &rules.refused {
                    tracing::warn!("secret rule {id} is left out: {error}");
                }
            }
            let (source, store) = match (session_dir, sessions_root) {
                (Some(dir), _) => (SessionSource::Dir(dir.clone()), dir),
                (None, Some(root)) => (SessionSource::SessionsRoot(root.clone()), root),
                (None, None) => return Err("--sessions-root or --session-dir".to_owned()),
            };
            let vfs = std::sync::Arc::new(Vfs::new(VfsConfig {
                storage: std::sync::Arc::new(gjcfs_vfs::FileStorage),
                source,
                blob_dir,
                read_only,
                max_loaded: MAX_LOADED,
                history_db,
                // Windows has no uid: only the mounting user may open anything (the adapter
                // checks each requester's SID).
                owner_uid: None,
                // The saved usage beside the index, as the commands keep it.
                saved_usage: search_index
                    .as_ref()
                    .map(|dir| dir.join(gjcfs_vfs::SAVED_USAGE_FILE)),
                saved_listing: search_index
                    .as_ref()
                    .map(|dir| dir.join(gjcfs_vfs::SAVED_LISTING_FILE)),
                // Sizes rendered with the secrets in them are not those of a redacted view.
                saved_renderings: search_index.as_ref().filter(|_| !redact).and_then(|dir| {
                    gjcfs_vfs::SavedRenderings::for_this_program(
                        &gjcfs_vfs::FileStorage,
                        dir.join(gjcfs_vfs::SAVED_RENDERINGS_FILE),
                    )
                }),
                search_index,
                redact,
            }));
            let served = gjcfs_dokan::windows::serve(
                vfs.clone(),
                &mountpoint,
                &store,
                read_only,
                |message| tracing::info!("{message}"),
            );
            let failures = vfs.close_all();
            for (sid, reason) in &failures {
                tracing::error!("session {sid}: {reason}");
            }
            served.map_err(|e| e.to_string())?;
            if !failures.is_empty() {
                return Err(format!(
                    "{} session(s) could not be closed cleanly",
                    failures.len()
                ));
            }
            tracing::info!("unmounted {mountpoint}");
            Ok(())
        }
        Command::Unmount { mountpoint } => {
            gjcfs_dokan::windows::unmount(&mountpoint).map_err(|e| e.to_string())
        }
    }
}

/// Elsewhere there is no Dokan: refuse.
#[cfg(not(windows))]
fn run(cli: Cli) -> Result<(), String> {
    let what = match cli.command {
        Command::Serve { .. } => "serve",
        Command::Unmount { .. } => "unmount",
    };
    Err(format!(
        "{what}: Dokan mounts exist on Windows only (use `gjcfs mount` here)"
    ))
}

fn main() {
    if let Err(message) = run(Cli::parse()) {
        eprintln!("gjcfs-dokan: {message}");
        std::process::exit(1);
    }
}
