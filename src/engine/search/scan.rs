//! Finding the store's transcript files and their stats, without reading any file: what an
//! update compares with what the index holds.
//!
//! A store is given as the directories holding its transcripts. Each directory is opened
//! and its own version read; one whose version is the settled one the last update recorded
//! ([`Listing`]) still holds the files listed then, since creating, removing or renaming an
//! entry sets a directory's modification time; any other directory is listed (the regular
//! files with a transcript name, [`is_transcript_name`], as
//! [`crate::discovery::transcript_paths`] lists them). Every file found is then stat'ed by
//! name in its open directory, on several threads for a large store: on 10,000 files the
//! stats are most of the cost of an update that finds nothing changed.

use std::borrow::Cow;
use std::io;
use std::path::{Path, PathBuf};

use super::super::discovery::is_transcript_name;
use super::super::storage::{list_regular_files, path_from_bytes, path_to_bytes, DirLookup};
use super::super::time::now_millis;
use super::listing::{Encoder, Listing};
use super::prepare::Stat;
use super::Stamps;

/// Below this many files, stats run on the calling thread.
const PARALLEL_FROM: usize = 2048;

/// How long before it is listed a directory must have last changed for its version to be
/// trusted next time: a change in the same tick of the file system's clock as the listing
/// could leave the modification time as it was.
const SETTLED_NS: i64 = 3_000_000_000;

/// A file of the store and its stat now.
pub type Found = (PathBuf, io::Result<Stat>);

/// One directory of the store as it is now.
struct Seen<'a> {
    path: PathBuf,
    /// Its version, when it can tell a change of its entries next time.
    version: Option<Stat>,
    /// Its files' names ([`path_to_bytes`]), from the last listing or listed now.
    names: Vec<Cow<'a, [u8]>>,
}

/// The store's directories and their files' stats now.
pub struct Look<'a> {
    dirs: Vec<Seen<'a>>,
    /// The stat of every file, directory after directory, in the order of their names.
    stats: Vec<io::Result<Stat>>,
}

/// Looks at the directories `dirs` (each once), reusing what `last` recorded of a directory
/// whose settled version is unchanged; a directory that cannot be opened or listed holds
/// no files.
pub fn look<'a>(dirs: &[PathBuf], last: Option<&'a Listing>, threads: usize) -> Look<'a> {
    // Nanoseconds since the epoch, the clock file systems stamp modification times with.
    let now = now_millis().saturating_mul(1_000_000);
    let mut opened = Vec::new();
    let mut seen = Vec::new();
    for path in dirs {
        let Ok(dir) = DirLookup::open(path) else {
            continue;
        };
        let version = dir.listing_version().ok().flatten().map(Stat::of);
        // The directories are recorded in the order they are looked at: the next one
        // recorded is this one unless the store's directories changed.
        let recorded = last.and_then(|l| {
            let next = l.dirs.get(seen.len()).filter(|d| d.path == *path);
            next.or_else(|| l.dirs.iter().find(|d| d.path == *path))
                .filter(|d| d.version.is_some() && d.version == version)
                .map(|d| (l, d))
        });
        let names = match recorded {
            Some((l, d)) => l.files(d).map(|(name, _)| Cow::Borrowed(name)).collect(),
            None => match list_regular_files(path, is_transcript_name) {
                Ok(files) => files
                    .iter()
                    .filter_map(|f| f.file_name())
                    .map(|name| Cow::Owned(path_to_bytes(Path::new(name)).to_vec()))
                    .collect(),
                Err(_) => continue,
            },
        };
        let settled = version.filter(|v| v.mtime_ns < now.saturating_sub(SETTLED_NS));
        opened.push(Ok(dir));
        seen.push(Seen {
            path: path.clone(),
            version: settled,
            names,
        });
    }
    let files: Vec<(usize, &[u8])> = seen
        .iter()
        .enumerate()
        .flat_map(|(k, d)| d.names.iter().map(move |name| (k, &name[..])))
        .collect();
    // Each thread looks names up in directories it opened itself: threads sharing one open
    // directory contend for it in the kernel, and two were no faster than one.
    let reopen = || seen.iter().map(|d| DirLookup::open(&d.path)).collect();
    let stats = in_parallel(
        &files,
        threads,
        opened,
        &reopen,
        &|dirs, &(k, name)| match &dirs[k] {
            Ok(dir) => dir.version(path_from_bytes(name).as_os_str()).map(Stat::of),
            Err(e) => Err(copy_error(e)),
        },
    );
    Look { dirs: seen, stats }
}

impl Look<'_> {
    /// How many files were found.
    pub fn len(&self) -> usize {
        self.stats.len()
    }

    /// Whether the store holds exactly the files of `last`, each with the stat recorded.
    pub fn same_files(&self, last: &Listing) -> bool {
        let mut stats = self.stats.iter();
        self.dirs.len() == last.dirs.len()
            && self.dirs.iter().zip(&last.dirs).all(|(now, then)| {
                now.path == then.path
                    && now.names.len() == last.files(then).count()
                    && now
                        .names
                        .iter()
                        .zip(last.files(then))
                        .all(|(name, (was, stat))| {
                            name[..] == *was
                                && stats.next().is_some_and(|s| s.as_ref().ok() == Some(stat))
                        })
            })
    }

    /// Whether a directory's version is not the one `last` recorded (with
    /// [`Look::same_files`]: only whether it is trusted changed).
    pub fn versions_differ(&self, last: &Listing) -> bool {
        self.dirs
            .iter()
            .zip(&last.dirs)
            .any(|(now, then)| now.version != then.version)
    }

    /// Every file found, with its stat.
    pub fn found(&self) -> Vec<Found> {
        self.dirs
            .iter()
            .flat_map(|d| {
                d.names
                    .iter()
                    .map(|name| d.path.join(path_from_bytes(name)))
            })
            .zip(&self.stats)
            .map(|(path, stat)| (path, stat.as_ref().map(|s| *s).map_err(copy_error)))
            .collect()
    }

    /// The encoded listing to record of the store as the index holds it: each directory's
    /// files with the stat of their `indexed` stamp. A directory with a file the index
    /// lacks is recorded without its version, so that it is listed again.
    pub fn listing(&self, indexed: &Stamps) -> Vec<u8> {
        let mut out = Encoder::new(self.dirs.len());
        for d in &self.dirs {
            let files: Vec<(&[u8], Stat)> = d
                .names
                .iter()
                .filter_map(|name| {
                    let stamp = indexed.get(&d.path.join(path_from_bytes(name)))?;
                    Some((&name[..], stamp.stat))
                })
                .collect();
            let complete = files.len() == d.names.len();
            out.dir(
                &d.path,
                d.version.as_ref().filter(|_| complete),
                files.len(),
            );
            for (name, stat) in files {
                out.file(name, &stat);
            }
        }
        out.finish()
    }

    /// The writes that turn the encoding of `last` into [`Look::listing`] of `indexed`, as
    /// offsets and stats, when the two have the same shape: the same directories with the
    /// same files, each indexed, and a version where `last` has one. `None` otherwise.
    pub fn patches(&self, last: &Listing, indexed: &Stamps) -> Option<Vec<(usize, Stat)>> {
        if self.dirs.len() != last.dirs.len() {
            return None;
        }
        let mut writes = Vec::new();
        for (now, then) in self.dirs.iter().zip(&last.dirs) {
            let complete = now.names.len() == last.files(then).count();
            if now.path != then.path || !complete || now.version.is_some() != then.version.is_some()
            {
                return None;
            }
            if let (Some(v), Some(at)) = (now.version, then.version_offset()) {
                if then.version != Some(v) {
                    writes.push((at, v));
                }
            }
            for ((name, at), (was, old)) in now
                .names
                .iter()
                .zip(last.stat_offsets(then))
                .zip(last.files(then))
            {
                if name[..] != *was {
                    return None;
                }
                let stat = indexed.get(&now.path.join(path_from_bytes(name)))?.stat;
                if stat != *old {
                    writes.push((at, stat));
                }
            }
        }
        Some(writes)
    }

    /// [`Look::listing`] for a look that found the files of `last` ([`Look::same_files`]).
    pub fn listing_of_same(&self, last: &Listing) -> Vec<u8> {
        let mut out = Encoder::new(self.dirs.len());
        for (now, then) in self.dirs.iter().zip(&last.dirs) {
            out.dir(&then.path, now.version.as_ref(), now.names.len());
            for (name, stat) in last.files(then) {
                out.file(name, stat);
            }
        }
        out.finish()
    }
}

/// The same error again (`io::Error` is not `Clone`).
pub fn copy_error(e: &io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code),
        None => io::Error::new(e.kind(), e.to_string()),
    }
}

/// Each path with its stat, on up to `threads` threads.
pub fn stat_all(paths: Vec<PathBuf>, threads: usize) -> Vec<Found> {
    let stats = in_parallel(&paths, threads, (), &|| (), &|(), p| Stat::read(p));
    paths.into_iter().zip(stats).collect()
}

/// `f` of each item, in their order, on up to `threads` threads: the calling thread's with
/// `state`, each other's with a state of its own from `new_state`.
fn in_parallel<T: Sync, S, R: Send>(
    items: &[T],
    threads: usize,
    state: S,
    new_state: &(dyn Fn() -> S + Sync),
    f: &(dyn Fn(&S, &T) -> R + Sync),
) -> Vec<R> {
    let threads = threads.clamp(1, items.len().div_ceil(PARALLEL_FROM / 2).max(1));
    if threads == 1 || items.len() < PARALLEL_FROM {
        return items.iter().map(|item| f(&state, item)).collect();
    }
    let chunk = items.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let mut parts = items.chunks(chunk);
        let mine = parts.next().unwrap_or_default();
        let workers: Vec<_> = parts
            .map(|part| {
                scope.spawn(move || {
                    let state = new_state();
                    part.iter().map(|item| f(&state, item)).collect::<Vec<R>>()
                })
            })
            .collect();
        let mut out: Vec<R> = mine.iter().map(|item| f(&state, item)).collect();
        for worker in workers {
            match worker.join() {
                Ok(part) => out.extend(part),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        out
    })
}
