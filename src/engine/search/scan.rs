//! Finding the store's transcript files and their stats, without reading any file: what an
//! update compares with the stamps the index holds.
//!
//! A store is given as the directories holding its transcripts; each is listed (the
//! regular files with a transcript name, [`is_transcript_name`], as
//! [`crate::discovery::transcript_paths`] lists them) and every file found is stat'ed.
//! Stats run on several threads for a large store: on 10,000 files they are most of the
//! cost of an update that finds nothing changed. Nothing is sorted: the index looks files
//! up by path.

use std::io;
use std::path::{Path, PathBuf};

use super::super::discovery::is_transcript_name;
use super::super::storage::{list_regular_files, DirLookup};
use super::prepare::Stat;

/// Below this many files, stats run on the calling thread.
const PARALLEL_FROM: usize = 2048;

/// A file of the store and its stat now.
pub type Found = (PathBuf, io::Result<Stat>);

/// A directory of the store, open, with its transcript files.
pub struct Listed {
    dir: DirLookup,
    pub files: Vec<PathBuf>,
}

/// The transcript files directly in `dir` (regular files, not following symlinks).
pub fn list(dir: &Path) -> io::Result<Listed> {
    let handle = DirLookup::open(dir)?;
    let files = list_regular_files(dir, is_transcript_name)?;
    Ok(Listed { dir: handle, files })
}

/// Each file of each listed directory with its stat, on up to `threads` threads.
pub fn stat_listed(listed: Vec<Listed>, threads: usize) -> Vec<Found> {
    let mut found = Vec::new();
    for Listed { dir, files } in listed {
        found.extend(in_parallel(
            files,
            threads,
            &|path: &Path| match path.file_name() {
                // One lookup of one name in the open directory, not a walk of the path.
                Some(name) => dir.version(name).map(Stat::of),
                None => Stat::read(path),
            },
        ));
    }
    found
}

/// Each path with its stat, on up to `threads` threads.
pub fn stat_all(paths: Vec<PathBuf>, threads: usize) -> Vec<Found> {
    in_parallel(paths, threads, &Stat::read)
}

fn in_parallel(
    paths: Vec<PathBuf>,
    threads: usize,
    stat: &(dyn Fn(&Path) -> io::Result<Stat> + Sync),
) -> Vec<Found> {
    let threads = threads.clamp(1, paths.len().div_ceil(PARALLEL_FROM / 2).max(1));
    if threads == 1 || paths.len() < PARALLEL_FROM {
        return paths
            .into_iter()
            .map(|p| {
                let found = stat(&p);
                (p, found)
            })
            .collect();
    }
    let chunk = paths.len().div_ceil(threads);
    let mut paths = paths;
    let mut parts = Vec::with_capacity(threads);
    while paths.len() > chunk {
        parts.push(paths.split_off(paths.len() - chunk));
    }
    parts.push(paths);
    std::thread::scope(|scope| {
        let workers: Vec<_> = parts
            .into_iter()
            .map(|part| scope.spawn(move || in_parallel(part, 1, stat)))
            .collect();
        let mut found = Vec::new();
        for worker in workers {
            match worker.join() {
                Ok(part) => found.extend(part),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        found
    })
}
