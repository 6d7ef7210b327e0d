//! Finding the store's transcript files and their stats, without reading any file: what an
//! update compares with what the index holds.
//!
//! A store is given as the directories holding its transcripts. Each directory is opened
//! and its own version read; one whose version is the settled one the last update recorded
//! ([`Listing`]) still holds the files listed then, since creating, removing or renaming an
//! entry sets a directory's modification time; any other directory is listed (its
//! transcript files, as [`transcript_paths`] lists them, through the storage). Every file
//! found is then stat'ed by name (on the disk in its open directory, [`DirLookup`]), on
//! several threads for a large store: on 10,000 files the stats are most of the cost of an
//! update that finds nothing changed.

use std::borrow::Cow;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::listing::{Encoder, Listing};
use super::Stamps;
use gjcfs_engine::format::time::now_millis;
use gjcfs_engine::storage::{
    path_from_bytes, path_to_bytes, DirLookup, EntryKind, FileVersion, SessionStorage,
};
use gjcfs_engine::store::discovery::transcript_paths;

/// Below this many files, stats run on the calling thread.
const PARALLEL_FROM: usize = 2048;

/// How many files a thread claims at a time: few enough that the threads finish together,
/// enough that claiming costs nothing next to the stats.
const BLOCK: usize = 256;

/// How long before it is listed a directory must have last changed for its version to be
/// trusted next time: a change in the same tick of the file system's clock as the listing
/// could leave the modification time as it was.
const SETTLED_NS: i64 = 3_000_000_000;

/// A file of the store and its stat now.
pub type Found = (PathBuf, io::Result<FileVersion>);

/// A directory of the store, open for looking up its files' versions by name: by handle
/// where the storage has such handles (the disk's [`DirLookup`]), else by path.
enum OpenDir<'s> {
    Handle(DirLookup),
    Path(&'s dyn SessionStorage, PathBuf),
}

impl<'s> OpenDir<'s> {
    fn open(storage: &'s dyn SessionStorage, path: &Path) -> io::Result<Self> {
        if let Some(handle) = storage.dir_lookup(path) {
            return handle.map(OpenDir::Handle);
        }
        match storage.lstat(path)?.kind {
            EntryKind::Dir => Ok(OpenDir::Path(storage, path.to_owned())),
            _ => Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                "not a directory",
            )),
        }
    }

    /// The directory's version when it tells every change of its entries (only a handle
    /// can say so).
    fn listing_version(&self) -> Option<FileVersion> {
        match self {
            OpenDir::Handle(dir) => dir.listing_version().ok().flatten(),
            OpenDir::Path(..) => None,
        }
    }

    fn version(&self, name: &[u8]) -> io::Result<FileVersion> {
        let name = path_from_bytes(name);
        match self {
            OpenDir::Handle(dir) => dir.version(name.as_os_str()),
            OpenDir::Path(storage, path) => storage.version(&path.join(name)),
        }
    }
}

/// The names of the transcript files directly in `dir`, as
/// [`transcript_paths`] lists them.
fn transcript_names(storage: &dyn SessionStorage, dir: &Path) -> io::Result<Vec<Vec<u8>>> {
    Ok(transcript_paths(storage, dir)?
        .iter()
        .filter_map(|path| path.file_name())
        .map(|name| path_to_bytes(Path::new(name)).to_vec())
        .collect())
}

/// One directory of the store as it is now.
struct Seen<'a> {
    path: PathBuf,
    /// Its version, when it can tell a change of its entries next time.
    version: Option<FileVersion>,
    /// Its files' names ([`path_to_bytes`]), from the last listing or listed now.
    names: Vec<Cow<'a, [u8]>>,
}

/// The store's directories and their files' stats now.
pub struct Look<'a> {
    dirs: Vec<Seen<'a>>,
    /// The stat of every file, directory after directory, in the order of their names.
    stats: Vec<io::Result<FileVersion>>,
}

/// Looks at the directories `dirs` (each once), reusing what `last` recorded of a directory
/// whose settled version is unchanged; a directory that cannot be opened or listed holds
/// no files. `during` runs on the calling thread meanwhile, while other threads stat the
/// files ([`in_parallel`]); its answer is returned with the look.
pub fn look_while<'a, A>(
    storage: &dyn SessionStorage,
    dirs: &[PathBuf],
    last: Option<&'a Listing>,
    threads: usize,
    during: impl FnOnce() -> A,
) -> (Look<'a>, A) {
    // Nanoseconds since the epoch, the clock file systems stamp modification times with.
    let now = now_millis().saturating_mul(1_000_000);
    let mut opened = Vec::new();
    let mut seen = Vec::new();
    for path in dirs {
        let Ok(dir) = OpenDir::open(storage, path) else {
            continue;
        };
        let version = dir.listing_version();
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
            None => match transcript_names(storage, path) {
                Ok(names) => names.into_iter().map(Cow::Owned).collect(),
                Err(_) => continue,
            },
        };
        let settled = version.filter(|v| v.mtime_ns < i128::from(now.saturating_sub(SETTLED_NS)));
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
    let reopen = || {
        seen.iter()
            .map(|d| OpenDir::open(storage, &d.path))
            .collect()
    };
    let (stats, answer) = in_parallel(
        &files,
        threads,
        opened,
        &reopen,
        &|dirs: &Vec<io::Result<OpenDir>>, &(k, name)| match &dirs[k] {
            Ok(dir) => dir.version(name),
            Err(e) => Err(copy_error(e)),
        },
        during,
    );
    (Look { dirs: seen, stats }, answer)
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
            let files: Vec<(&[u8], FileVersion)> = d
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
    pub fn patches(&self, last: &Listing, indexed: &Stamps) -> Option<Vec<(usize, FileVersion)>> {
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
pub fn stat_all(storage: &dyn SessionStorage, paths: Vec<PathBuf>, threads: usize) -> Vec<Found> {
    let version = |_: &(), p: &PathBuf| storage.version(p);
    let (stats, ()) = in_parallel(&paths, threads, (), &|| (), &version, || ());
    paths.into_iter().zip(stats).collect()
}

/// `f` of each item, in their order, and `during` run on the calling thread. Up to
/// `threads` other threads (each with a state of its own from `new_state`) start on the
/// items at once, and the calling thread (with `state`) joins them when `during` returns:
/// on two cores, two threads and the caller finished sooner than one and the caller, since
/// a thread that waits for a core leaves its items to the others. Each thread claims
/// [`BLOCK`] items at a time until none is left, so threads that start late or run slower
/// do not hold up the end. Few items (below [`PARALLEL_FROM`]) or no other thread: all on
/// the calling thread, after `during`.
fn in_parallel<T: Sync, S, R: Send, A>(
    items: &[T],
    threads: usize,
    state: S,
    new_state: &(dyn Fn() -> S + Sync),
    f: &(dyn Fn(&S, &T) -> R + Sync),
    during: impl FnOnce() -> A,
) -> (Vec<R>, A) {
    let threads = threads.min(items.len().div_ceil(PARALLEL_FROM / 2));
    if threads == 0 || items.len() < PARALLEL_FROM {
        let answer = during();
        return (items.iter().map(|item| f(&state, item)).collect(), answer);
    }
    let blocks = items.len().div_ceil(BLOCK);
    let next = AtomicUsize::new(0);
    // The blocks one thread claimed, each with its number.
    let claim = |state: &S| {
        let mut done = Vec::new();
        loop {
            let b = next.fetch_add(1, Ordering::Relaxed);
            if b >= blocks {
                return done;
            }
            let part = &items[b * BLOCK..items.len().min((b + 1) * BLOCK)];
            done.push((
                b,
                part.iter().map(|item| f(state, item)).collect::<Vec<R>>(),
            ));
        }
    };
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| scope.spawn(|| claim(&new_state())))
            .collect();
        let answer = during();
        let mut parts = claim(&state);
        for worker in workers {
            match worker.join() {
                Ok(part) => parts.extend(part),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        parts.sort_unstable_by_key(|(b, _)| *b);
        (
            parts.into_iter().flat_map(|(_, part)| part).collect(),
            answer,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn every_item_is_done_once_in_order_with_the_answer_of_during() {
        let items: Vec<usize> = (0..10 * BLOCK + 17).collect();
        for threads in [0, 1, 2, 8] {
            for len in [0, 1, PARALLEL_FROM - 1, PARALLEL_FROM, items.len()] {
                let calls = AtomicUsize::new(0);
                let (out, answer) = in_parallel(
                    &items[..len],
                    threads,
                    0,
                    &|| 1,
                    &|_, &i| {
                        calls.fetch_add(1, Ordering::Relaxed);
                        i * 2
                    },
                    || "answer",
                );
                assert_eq!(answer, "answer");
                assert_eq!(
                    calls.load(Ordering::Relaxed),
                    len,
                    "{threads} threads, {len}"
                );
                assert_eq!(out, (0..len).map(|i| i * 2).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn the_other_threads_do_the_items_while_during_runs() {
        // `during` waits until a thread other than the caller did an item: it returns only
        // because the items were started without it.
        let items: Vec<usize> = (0..PARALLEL_FROM * 2).collect();
        let caller = std::thread::current().id();
        let other_did_one = AtomicBool::new(false);
        let (out, waited) = in_parallel(
            &items,
            1,
            (),
            &|| (),
            &|(), &i| {
                if std::thread::current().id() != caller {
                    other_did_one.store(true, Ordering::Release);
                }
                i
            },
            || {
                let start = std::time::Instant::now();
                while !other_did_one.load(Ordering::Acquire) {
                    assert!(
                        start.elapsed().as_secs() < 60,
                        "no other thread did an item"
                    );
                    std::thread::yield_now();
                }
            },
        );
        assert_eq!(waited, ());
        assert_eq!(out, items);
    }

    #[test]
    fn the_caller_uses_its_state_and_every_other_thread_one_of_its_own() {
        let items: Vec<usize> = (0..PARALLEL_FROM * 4).collect();
        let caller = std::thread::current().id();
        let made = AtomicUsize::new(0);
        let (out, ()) = in_parallel(
            &items,
            4,
            0,
            &|| made.fetch_add(1, Ordering::Relaxed) + 1,
            &|&state, _| (state == 0) == (std::thread::current().id() == caller),
            || (),
        );
        assert!(out.iter().all(|&mine| mine));
        assert_eq!(made.load(Ordering::Relaxed), 4);
    }

    #[test]
    fn a_panic_in_another_thread_reaches_the_caller() {
        let items: Vec<usize> = (0..PARALLEL_FROM * 2).collect();
        let caller = std::thread::current().id();
        let other_started = AtomicBool::new(false);
        let result = std::panic::catch_unwind(|| {
            in_parallel(
                &items,
                1,
                (),
                &|| (),
                &|(), _| {
                    if std::thread::current().id() != caller {
                        other_started.store(true, Ordering::Release);
                        panic!("a worker panics");
                    }
                },
                || {
                    while !other_started.load(Ordering::Acquire) {
                        std::thread::yield_now();
                    }
                },
            )
        });
        assert!(result.is_err());
    }
}
