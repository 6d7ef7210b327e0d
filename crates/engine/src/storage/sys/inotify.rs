//! Watching directories on Linux: one inotify instance, one watch a directory, its events
//! read in the order the kernel queued them.

use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::storage::{Changes, DirWatch};

/// What changes an entry of a watched directory, and the directory itself going away.
const MASK: u32 = libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MODIFY
    | libc::IN_CLOSE_WRITE
    | libc::IN_ATTRIB
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_ONLYDIR
    | libc::IN_DONT_FOLLOW
    | libc::IN_EXCL_UNLINK;

/// The fixed part of an event (`struct inotify_event` without its name).
const EVENT_HEAD: usize = std::mem::size_of::<libc::inotify_event>();

/// An inotify instance and the directory of each of its watches.
#[derive(Debug)]
pub struct Inotify {
    fd: OwnedFd,
    dirs: HashMap<i32, PathBuf>,
    /// Read events land here: room for many at once (each is 16 bytes and a name).
    buf: Vec<u8>,
}

impl Inotify {
    pub fn new() -> io::Result<Self> {
        // SAFETY: no pointers; the descriptor returned is owned below.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Inotify {
            // SAFETY: a descriptor just opened and owned by nothing else.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            dirs: HashMap::new(),
            buf: vec![0; 64 * 1024],
        })
    }

    /// Whether an event is waiting, after up to `timeout`.
    fn ready(&self, timeout: Duration) -> io::Result<bool> {
        let mut poll = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        loop {
            // SAFETY: one pollfd that lives across the call.
            match unsafe { libc::poll(&mut poll, 1, ms) } {
                n if n >= 0 => return Ok(n > 0),
                _ => {
                    let e = io::Error::last_os_error();
                    if e.kind() != io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
            }
        }
    }

    /// Reads what is queued into `buf`: its length (0 when nothing is).
    fn read_queued(&mut self) -> io::Result<usize> {
        loop {
            // SAFETY: the buffer is ours and as long as passed.
            let n = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr().cast(),
                    self.buf.len(),
                )
            };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => {}
                io::ErrorKind::WouldBlock => return Ok(0),
                _ => return Err(e),
            }
        }
    }

    /// The events of `buf[..len]` as changes, in order.
    fn changes(&mut self, len: usize, into: &mut Vec<PathBuf>) -> Option<()> {
        let mut at = 0;
        while at + EVENT_HEAD <= len {
            // SAFETY: EVENT_HEAD bytes are in the buffer at `at`; read unaligned.
            let event: libc::inotify_event =
                unsafe { std::ptr::read_unaligned(self.buf[at..].as_ptr().cast()) };
            let name_at = at + EVENT_HEAD;
            let name_end = (name_at + event.len as usize).min(len);
            at = name_end;
            if event.mask & libc::IN_Q_OVERFLOW != 0 {
                return None;
            }
            let Some(dir) = self.dirs.get(&event.wd) else {
                continue;
            };
            let name = &self.buf[name_at..name_end];
            let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
            into.push(if name.is_empty() {
                dir.clone()
            } else {
                dir.join(OsStr::from_bytes(name))
            });
            if event.mask & libc::IN_IGNORED != 0 {
                // The directory went away (or was moved): its watch is gone.
                self.dirs.remove(&event.wd);
            }
        }
        Some(())
    }
}

impl DirWatch for Inotify {
    fn add(&mut self, dir: &Path) -> io::Result<()> {
        let path = CString::new(dir.as_os_str().as_bytes())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // SAFETY: a NUL-terminated path that lives across the call.
        let wd = unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), path.as_ptr(), MASK) };
        if wd < 0 {
            return Err(io::Error::last_os_error());
        }
        self.dirs.insert(wd, dir.to_owned());
        Ok(())
    }

    fn wait(&mut self, timeout: Duration) -> io::Result<Changes> {
        let mut paths = Vec::new();
        if !self.ready(timeout)? {
            return Ok(Changes::Paths(paths));
        }
        loop {
            let len = self.read_queued()?;
            if len == 0 {
                return Ok(Changes::Paths(paths));
            }
            if self.changes(len, &mut paths).is_none() {
                return Ok(Changes::Lost);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(watch: &mut Inotify) -> Vec<PathBuf> {
        match watch.wait(Duration::from_secs(5)).unwrap() {
            Changes::Paths(paths) => paths,
            Changes::Lost => panic!("changes lost"),
        }
    }

    #[test]
    fn changes_of_watched_directories_come_in_order_and_others_do_not() {
        let tmp = tempfile::tempdir().unwrap();
        let watched = tmp.path().join("watched");
        let other = tmp.path().join("other");
        std::fs::create_dir(&watched).unwrap();
        std::fs::create_dir(&other).unwrap();
        let mut watch = Inotify::new().unwrap();
        watch.add(&watched).unwrap();
        assert_eq!(
            watch.wait(Duration::from_millis(1)).unwrap(),
            Changes::Paths(Vec::new())
        );
        let a = watched.join("a.jsonl");
        std::fs::write(other.join("x"), b"x").unwrap();
        std::fs::write(&a, b"line\n").unwrap();
        let seen = paths(&mut watch);
        assert!(!seen.is_empty() && seen.iter().all(|p| *p == a), "{seen:?}");
        let b = watched.join("b.jsonl");
        std::fs::rename(&a, &b).unwrap();
        std::fs::remove_file(&b).unwrap();
        let seen = paths(&mut watch);
        assert_eq!(seen, vec![a, b.clone(), b]);
    }

    #[test]
    fn a_removed_directory_is_reported_and_no_longer_watched() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("scope");
        std::fs::create_dir(&dir).unwrap();
        let mut watch = Inotify::new().unwrap();
        watch.add(&dir).unwrap();
        std::fs::remove_dir(&dir).unwrap();
        let seen = paths(&mut watch);
        assert!(seen.iter().all(|p| *p == dir) && !seen.is_empty());
        assert!(watch.dirs.is_empty());
    }

    #[test]
    fn a_full_queue_is_a_loss() {
        let tmp = tempfile::tempdir().unwrap();
        let mut watch = Inotify::new().unwrap();
        watch.add(tmp.path()).unwrap();
        let limit: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
            .map_or(16384, |s| s.trim().parse().unwrap());
        // Two files written in turn: the kernel folds an event into the one before it
        // only when they are alike.
        let mut files = ["f", "g"].map(|name| {
            let path = tmp.path().join(name);
            std::fs::write(&path, b"").unwrap();
            std::fs::OpenOptions::new().append(true).open(path).unwrap()
        });
        for k in 0..=limit {
            std::io::Write::write_all(&mut files[k % 2], b"x").unwrap();
        }
        assert_eq!(watch.wait(Duration::from_secs(5)).unwrap(), Changes::Lost);
    }
}
