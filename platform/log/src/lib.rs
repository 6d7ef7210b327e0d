//! The log of the mount servers (`gjcfs mount`, and `gjcfs-dokan` on Windows): the
//! [`tracing`] events of the adapters and the server, one line each, with a UTC timestamp,
//! the level, the spans it happened in (each kernel request is one, with its operation,
//! inode and error) and the message.
//!
//! Which events are written is chosen like `RUST_LOG` chooses, by [`FILTER_VARIABLE`]
//! (`GJCFS_LOG=debug`, `GJCFS_LOG=gjcfs_fuse=trace,info`), else by `RUST_LOG`, else
//! [`DEFAULT_FILTER`]. A filter that cannot be read is an error, never silently ignored.
//!
//! The log goes to standard error, or appended to a file (`--log-file`), which is created
//! owner-only (0600) and never followed through a symlink; a file that exists and is not a
//! regular file is refused.
// A library never prints: it returns errors and emits events; the programs decide.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tracing_subscriber::EnvFilter;

/// The variable that chooses what is logged.
pub const FILTER_VARIABLE: &str = "GJCFS_LOG";
/// What is logged when neither `GJCFS_LOG` nor `RUST_LOG` is set: the server's life
/// (mounted, serving, unmounted) and everything that went wrong.
pub const DEFAULT_FILTER: &str = "info";

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("{variable}={value:?} is not a log filter ({reason}); try {variable}=debug")]
    BadFilter {
        variable: &'static str,
        value: String,
        reason: String,
    },
    #[error("{}: cannot open the log file: {source}", path.display())]
    File { path: PathBuf, source: io::Error },
    #[error("{}: not a regular file; the log is written only to a file", path.display())]
    NotAFile { path: PathBuf },
    #[error("a log is already set up for this process")]
    AlreadySet,
}

/// Where the log goes.
pub enum Destination<'a> {
    /// Standard error, coloured when `ansi`.
    Stderr { ansi: bool },
    /// Appended to this file.
    File(&'a Path),
}

/// The filter the environment asks for: `GJCFS_LOG`, else `RUST_LOG`, else
/// [`DEFAULT_FILTER`].
pub fn filter_from_env() -> Result<EnvFilter, LogError> {
    for variable in [FILTER_VARIABLE, "RUST_LOG"] {
        if let Some(value) = std::env::var_os(variable) {
            let value = value.to_string_lossy().into_owned();
            return EnvFilter::builder()
                .parse(&value)
                .map_err(|e| LogError::BadFilter {
                    variable,
                    value,
                    reason: e.to_string(),
                });
        }
    }
    Ok(EnvFilter::new(DEFAULT_FILTER))
}

/// Sends the process's events to `destination`, filtered as the environment asks.
pub fn init(destination: Destination<'_>) -> Result<(), LogError> {
    let filter = filter_from_env()?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(true);
    let set = match destination {
        Destination::Stderr { ansi } => builder.with_ansi(ansi).with_writer(io::stderr).try_init(),
        Destination::File(path) => builder
            .with_ansi(false)
            .with_writer(Mutex::new(open_log_file(path)?))
            .try_init(),
    };
    set.map_err(|_| LogError::AlreadySet)
}

/// Opens `path` to append to, creating it owner-only; never through a symlink, and never
/// a FIFO or device (opened without blocking, then checked).
pub fn open_log_file(path: &Path) -> Result<File, LogError> {
    let mut options = std::fs::OpenOptions::new();
    options.append(true).create(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
    }
    let file = options.open(path).map_err(|source| LogError::File {
        path: path.to_owned(),
        source,
    })?;
    let regular = file.metadata().map(|m| m.is_file()).unwrap_or(false);
    if !regular {
        return Err(LogError::NotAFile {
            path: path.to_owned(),
        });
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_file_is_owner_only_appended_and_never_a_symlink_or_fifo() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mount.log");
        std::fs::write(&path, "earlier\n").unwrap();
        {
            use std::io::Write;
            let mut file = open_log_file(&path).unwrap();
            writeln!(file, "later").unwrap();
        }
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "earlier\nlater\n");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let fresh = dir.path().join("fresh.log");
            open_log_file(&fresh).unwrap();
            let mode = std::fs::metadata(&fresh).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);

            let link = dir.path().join("link.log");
            std::os::unix::fs::symlink(&path, &link).unwrap();
            assert!(matches!(open_log_file(&link), Err(LogError::File { .. })));
            let fifo = dir.path().join("fifo");
            let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
            // SAFETY: a valid C string.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
            assert!(matches!(
                open_log_file(&fifo),
                Err(LogError::NotAFile { .. }) | Err(LogError::File { .. })
            ));
            assert!(matches!(
                open_log_file(dir.path()),
                Err(LogError::NotAFile { .. }) | Err(LogError::File { .. })
            ));
        }
    }
}
