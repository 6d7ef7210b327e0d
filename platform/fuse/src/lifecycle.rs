//! The mount's lifecycle: checking that FUSE is installed, refusing a mountpoint inside the
//! store or around it, clearing a mount left by a killed server, the termination signals,
//! and unmounting. What the caller should tell the user is handed to a `report` callback;
//! nothing here prints.
//!
//! What differs between systems lives in one module per system, each with the same
//! functions (`check_fuse_installed`, `is_mounted`, `answers`, `auto_unmount_allowed`,
//! `umount`, `unmount`, `detach`):
//! - `linux`: `/dev/fuse` and `fusermount3`, `/proc/mounts`, the FUSE magic of `statfs`;
//! - `macos`: macFUSE's bundle, the mount table of `getmntinfo` (`f_mntonname`,
//!   `f_fstypename` `macfuse`/`osxfuse`), `unmount(2)` then `diskutil unmount force`;
//! - `unsupported` (the other Unixes): mounting is refused with a message.

use std::path::Path;
use std::time::{Duration, Instant};

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as sys;
// Its pure parts are built everywhere, so that their tests run on Linux too.
#[cfg(any(target_os = "macos", test))]
mod macos;
#[cfg(target_os = "macos")]
use macos as sys;
mod overlap;
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
mod unsupported;
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
use unsupported as sys;

pub use overlap::refuse_overlap;
#[cfg(any(target_os = "macos", test))]
pub(crate) use overlap::resolved;
pub use sys::{answers, auto_unmount_allowed, check_fuse_installed, is_mounted, unmount};

/// Why a mount cannot start or stop.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    /// FUSE's device or its helper program is missing (the message says what to install).
    #[error("{0}")]
    Missing(String),
    /// The mountpoint or the request is refused (the message says why).
    #[error("{0}")]
    Refused(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

/// Unmounts the served mount at `mountpoint` (`gjcfs umount`); the server sees its session
/// end. Refused when nothing is mounted there.
pub fn umount(mountpoint: &Path) -> Result<(), MountError> {
    if !is_mounted(mountpoint) {
        return Err(MountError::Refused(format!(
            "{}: not mounted",
            mountpoint.display()
        )));
    }
    sys::umount(mountpoint)
}

/// Blocks SIGINT, SIGTERM and SIGHUP in this thread and every thread it starts later, and
/// returns the set for [`wait_for_signal`].
pub fn block_termination_signals() -> Result<Signals, MountError> {
    // SAFETY: sigset_t is plain data initialized by sigemptyset before use; the calls only
    // touch the set and this thread's mask.
    unsafe {
        // A shell starts background jobs with SIGINT ignored, and an ignored signal is
        // discarded even while blocked: restore the default so sigwait receives it.
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::signal(signal, libc::SIG_DFL);
        }
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGHUP);
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            return Err(MountError::Io {
                what: "cannot block signals".into(),
                source: std::io::Error::from_raw_os_error(rc),
            });
        }
        Ok(Signals(set))
    }
}

/// The termination signals, blocked ([`block_termination_signals`]).
#[derive(Clone, Copy)]
pub struct Signals(libc::sigset_t);

/// Waits for one of `signals`; its name (`SIGINT`, `SIGTERM`, `SIGHUP`).
pub fn wait_for_signal(signals: &Signals) -> Option<&'static str> {
    let mut signal = 0;
    // SAFETY: `signals` holds an initialized set; `signal` is a valid out pointer.
    if unsafe { libc::sigwait(&signals.0, &mut signal) } != 0 {
        return None;
    }
    Some(match signal {
        libc::SIGINT => "SIGINT",
        libc::SIGHUP => "SIGHUP",
        _ => "SIGTERM",
    })
}

/// How long a dead server's mount is given to go away by itself.
const STALE_PATIENCE: Duration = Duration::from_secs(2);

/// A mount left at the mountpoint by a crashed earlier run ("transport endpoint is not
/// connected") is detached before mounting again. The dead server's auto-unmount watcher
/// may be about to remove it: it is given a moment first, because a watcher that runs
/// after the new mount would unmount that one instead. A mount whose server still answers
/// is an error.
pub fn clear_stale_mount(
    mountpoint: &Path,
    report: &mut dyn FnMut(String),
) -> Result<(), MountError> {
    let started = Instant::now();
    while is_mounted(mountpoint) {
        if answers(mountpoint) {
            return Err(MountError::Refused(format!(
                "{}: already mounted and served; run `gjcfs umount {}` first",
                mountpoint.display(),
                mountpoint.display()
            )));
        }
        if started.elapsed() >= STALE_PATIENCE {
            report(format!(
                "{} holds a dead mount; detaching it",
                mountpoint.display()
            ));
            sys::detach(mountpoint, report);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_directory_or_a_missing_path_is_no_served_mount() {
        // The directory a vanished mount leaves behind answers statfs, but is not FUSE.
        assert!(!answers(Path::new(env!("CARGO_MANIFEST_DIR"))));
        assert!(!answers(&std::env::temp_dir()));
        assert!(!answers(Path::new("/nonexistent/gjcfs-mountpoint")));
    }
}
