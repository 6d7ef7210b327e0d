//! Watching directories on Linux: one inotify instance (the `inotify` crate), one watch a
//! directory, its events read in the order the kernel queued them.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use inotify::{EventMask, WatchDescriptor, WatchMask};
use rustix::event::{poll, PollFd, PollFlags, Timespec};

use crate::storage::{Changes, DirWatch};

/// What changes an entry of a watched directory, and the directory itself going away.
const MASK: WatchMask = WatchMask::CREATE
    .union(WatchMask::DELETE)
    .union(WatchMask::MODIFY)
    .union(WatchMask::CLOSE_WRITE)
    .union(WatchMask::ATTRIB)
    .union(WatchMask::MOVED_FROM)
    .union(WatchMask::MOVED_TO)
    .union(WatchMask::DELETE_SELF)
    .union(WatchMask::MOVE_SELF)
    .union(WatchMask::ONLYDIR)
    .union(WatchMask::DONT_FOLLOW)
    .union(WatchMask::EXCL_UNLINK);

/// An inotify instance and the directory of each of its watches.
#[derive(Debug)]
pub struct Inotify {
    inotify: inotify::Inotify,
    dirs: HashMap<WatchDescriptor, PathBuf>,
    /// Read events land here: room for many at once (each is 16 bytes and a name).
    buf: Vec<u8>,
}

impl Inotify {
    pub fn new() -> io::Result<Self> {
        Ok(Inotify {
            // Non-blocking and closed on exec, as the crate opens it.
            inotify: inotify::Inotify::init()?,
            dirs: HashMap::new(),
            buf: vec![0; 64 * 1024],
        })
    }

    /// Whether an event is waiting, after up to `timeout`.
    fn ready(&self, timeout: Duration) -> io::Result<bool> {
        let timeout = Timespec {
            tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: timeout.subsec_nanos().into(),
        };
        loop {
            let mut fds = [PollFd::new(&self.inotify, PollFlags::IN)];
            match poll(&mut fds, Some(&timeout)) {
                Ok(n) => return Ok(n > 0),
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Reads what is queued, as changes appended to `into`: `Ok(false)` when nothing was
    /// queued, `None` when the kernel's queue overflowed (changes were lost).
    fn read_queued(&mut self, into: &mut Vec<PathBuf>) -> io::Result<Option<bool>> {
        let events = match self.inotify.read_events(&mut self.buf) {
            Ok(events) => events,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Some(false)),
            Err(e) => return Err(e),
        };
        let mut any = false;
        for event in events {
            any = true;
            if event.mask.contains(EventMask::Q_OVERFLOW) {
                return Ok(None);
            }
            let Some(dir) = self.dirs.get(&event.wd) else {
                continue;
            };
            into.push(match event.name {
                Some(name) if !name.is_empty() => dir.join(name),
                _ => dir.clone(),
            });
            if event.mask.contains(EventMask::IGNORED) {
                // The directory went away (or was moved): its watch is gone.
                self.dirs.remove(&event.wd);
            }
        }
        Ok(Some(any))
    }
}

impl DirWatch for Inotify {
    fn add(&mut self, dir: &Path) -> io::Result<()> {
        let wd = self.inotify.watches().add(dir, MASK)?;
        self.dirs.insert(wd, dir.to_owned());
        Ok(())
    }

    fn wait(&mut self, timeout: Duration) -> io::Result<Changes> {
        let mut paths = Vec::new();
        if !self.ready(timeout)? {
            return Ok(Changes::Paths(paths));
        }
        loop {
            match self.read_queued(&mut paths)? {
                Some(true) => {}
                Some(false) => return Ok(Changes::Paths(paths)),
                None => return Ok(Changes::Lost),
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
