//! Serving a mount until it should end: a termination signal or an unmount from outside.
//!
//! While it runs, the store's change events are followed every tenth of a second, the
//! loaded sessions are checked for changes made outside the mount every [`POLL_EVERY`] and
//! the model's notices are logged. On a signal, writes are refused at
//! once, the mount is detached (lazily if files are open) and the server waits up to
//! [`CLOSE_PATIENCE`] for the open files to close; then every session is flushed and
//! closed. The caller's exit then closes the device, which ends the connection of a
//! detached mount some process still holds a file of.

use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use gjcfs_vfs::Vfs;

use crate::lifecycle::{self, Signals};
use crate::Mounted;

/// How often loaded sessions are checked for changes made outside the mount.
pub const POLL_EVERY: Duration = Duration::from_millis(500);
/// How long a stopping server waits for the files still open on its detached mount to be
/// closed before it ends the connection.
pub const CLOSE_PATIENCE: Duration = Duration::from_secs(2);

/// How a served mount ended.
#[derive(Debug)]
pub struct Ended {
    /// The kernel session's failure, if it had one.
    pub failure: Option<std::io::Error>,
    /// The sessions that could not be closed cleanly: (session id, reason).
    pub unclosed: Vec<(String, String)>,
}

/// Serves `mounted` (the mount of `vfs` at `mountpoint`) until one of `signals` arrives or
/// the mount is unmounted from outside, then closes every session. `signals` must have been
/// blocked before any thread was started ([`lifecycle::block_termination_signals`]).
pub fn serve(vfs: &Vfs, mountpoint: &Path, mounted: Mounted, signals: Signals) -> Ended {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        if let Some(name) = lifecycle::wait_for_signal(&signals) {
            let _ = tx.send(name);
        }
    });
    let signal = wait_for_end(vfs, &mounted, &rx);
    let failure = match signal {
        Some(name) => {
            // Nothing written from now on reaches a session.
            vfs.stop_writes();
            tracing::info!("{name}: writes refused from now on; unmounting");
            stop(mountpoint, mounted)
        }
        None => mounted.join().err(),
    };
    Ended {
        failure,
        unclosed: vfs.close_all(),
    }
}

/// Polls for outside changes and logs notices until a signal (its name) or the kernel's end
/// of the session (none).
fn wait_for_end(
    vfs: &Vfs,
    mounted: &Mounted,
    signals: &mpsc::Receiver<&'static str>,
) -> Option<&'static str> {
    let mut polled = Instant::now();
    loop {
        match signals.recv_timeout(Duration::from_millis(100)) {
            Ok(name) => return Some(name),
            Err(mpsc::RecvTimeoutError::Timeout) if !mounted.is_finished() => {
                vfs.follow_store_events();
                if polled.elapsed() >= POLL_EVERY {
                    vfs.poll_outside_changes();
                    polled = Instant::now();
                }
                for notice in vfs.take_notices() {
                    tracing::warn!("{notice}");
                }
            }
            Err(_) => return None,
        }
    }
}

/// Unmounts and waits for the session to end; the session's failure. Files still open after
/// [`CLOSE_PATIENCE`] fail once the caller exits (`ENOTCONN`).
fn stop(mountpoint: &Path, mounted: Mounted) -> Option<std::io::Error> {
    // Unmount ourselves (on Linux, fuser's own unmount only closes the auto_unmount socket
    // and relies on a fusermount3 watcher being alive); the session thread then ends, once
    // the last file open on a detached mount is closed.
    lifecycle::unmount(mountpoint, &mut |message| tracing::info!("{message}"));
    let started = Instant::now();
    while !mounted.is_finished() && started.elapsed() < CLOSE_PATIENCE {
        std::thread::sleep(Duration::from_millis(20));
    }
    if !mounted.is_finished() {
        tracing::warn!("files are still open on the detached mount; ending its connection");
        return None;
    }
    ended_after_unmount(mounted.join()).err()
}

/// The end of a session this server unmounted itself: the kernel may end the connection by
/// aborting it once the last open file is closed, which the session reports as
/// "connection aborted" — that is the end asked for, not a failure (every line written
/// before the close was applied when the file was released).
fn ended_after_unmount(ended: std::io::Result<()>) -> std::io::Result<()> {
    match ended {
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionAborted => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Error, ErrorKind};

    #[test]
    fn an_aborted_connection_after_our_unmount_is_the_end_asked_for() {
        assert!(ended_after_unmount(Ok(())).is_ok());
        assert!(ended_after_unmount(Err(Error::from(ErrorKind::ConnectionAborted))).is_ok());
        let other = ended_after_unmount(Err(Error::from(ErrorKind::InvalidData)));
        assert_eq!(other.unwrap_err().kind(), ErrorKind::InvalidData);
    }
}
