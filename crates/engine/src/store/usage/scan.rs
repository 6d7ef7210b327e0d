//! Reading the usage of many session files in parallel, and [`UsageCache`]: what that gave
//! for each file, saved between runs, so that the next scan reads only the files that
//! changed.
//!
//! A scan takes each file's version and loads the file from the disk ([`FileStorage`]);
//! only the saved cache goes through the storage given to [`UsageCache::load`] and
//! [`UsageCache::save`].

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{ContributedUsage, SessionUsageContribution};
use crate::read::load::LoadError;
use crate::session::usage::UsageTotals;
use crate::storage::{FileStorage, FileVersion, SessionStorage};
use crate::store::saved::{self, ByVersion, Decoder, Encoder, Saved};

/// The saved usage's file name in a store's cache directory, where every program that
/// reads the store's usage (the commands, the mount) keeps it.
pub const SAVED_USAGE_FILE: &str = "usage";

/// The contributions of many session files, read in parallel.
#[derive(Debug, Default)]
pub struct StoreScan {
    /// In the order of the paths given.
    pub contributions: Vec<Scanned>,
    /// Files that could not be loaded as sessions.
    pub failed: Vec<(PathBuf, LoadError)>,
}

/// One file's contribution.
#[derive(Debug, Clone, PartialEq)]
pub struct Scanned {
    /// The session file.
    pub path: PathBuf,
    /// What it adds to the store's usage.
    pub contribution: SessionUsageContribution,
    /// The file's version before it was read (`None`: it could not be had).
    pub version: Option<FileVersion>,
}

impl Scanned {
    /// The file's modification time in milliseconds (0 when unknown): what tells the live
    /// copy of a session in several files ([`crate::store::discovery::keep_live_copies`]).
    pub fn modified_ms(&self) -> i64 {
        self.version.map_or(0, |v| v.modified_ms())
    }
}

/// What scanning each file gave ([`scan_sessions_cached`]), which counts while the file
/// keeps the version it had when it was read (identity, length, both times); saved
/// between runs ([`UsageCache::load`], [`UsageCache::save`]). A file that could not be
/// loaded is not kept: it is tried again.
#[derive(Debug, Default)]
pub struct UsageCache(ByVersion<SessionUsageContribution>);

impl UsageCache {
    /// The cache saved at `path` by [`UsageCache::save`] for a store of `files` files; an
    /// empty one when there is none, it cannot be read as one, or it is longer than such a
    /// store justifies (never read whole).
    pub fn load(storage: &dyn SessionStorage, path: &Path, files: usize) -> Self {
        UsageCache(ByVersion::load(storage, path, files))
    }

    /// Saves the cache at `path` if it changed since it was loaded: a file in the user's
    /// cache, replaced whole.
    pub fn save(&mut self, storage: &dyn SessionStorage, path: &Path) -> io::Result<()> {
        self.0.save(storage, path)
    }

    /// Forgets every file but those of `paths` (after a scan of the whole store).
    pub fn keep_only(&mut self, paths: &[PathBuf]) {
        let keep: std::collections::HashSet<&std::ffi::OsStr> =
            paths.iter().map(|p| p.as_os_str()).collect();
        self.0.retain(|path| keep.contains(path.as_os_str()));
    }
}

/// Loads every file of `paths` on `threads` threads (at least one) and builds its
/// contribution. `progress` is called with the number of files done after each file.
pub fn scan_sessions(
    paths: &[PathBuf],
    threads: usize,
    progress: &(dyn Fn(usize) + Sync),
) -> StoreScan {
    scan_sessions_cached(paths, threads, &mut UsageCache::default(), progress)
}

/// [`scan_sessions`], taking the contribution of a file whose version is the one `cache`
/// keeps from it, and keeping those of the files read.
pub fn scan_sessions_cached(
    paths: &[PathBuf],
    threads: usize,
    cache: &mut UsageCache,
    progress: &(dyn Fn(usize) + Sync),
) -> StoreScan {
    let mut results: Vec<Option<Read>> =
        std::iter::repeat_with(|| None).take(paths.len()).collect();
    // The version is taken before the file is read: a change made while it is read makes
    // the next scan read it again.
    let mut unread = Vec::new();
    let versions = saved::versions(&FileStorage, paths);
    for (i, (path, version)) in paths.iter().zip(versions).enumerate() {
        match version.and_then(|v| cache.0.get(path, &v)) {
            Some(known) => results[i] = Some((version, Ok(known.clone()))),
            None => unread.push((i, version)),
        }
    }
    let done = AtomicUsize::new(paths.len() - unread.len());
    progress(done.load(Ordering::Relaxed));
    for (i, version, read) in read_in_parallel(paths, &unread, threads, &done, progress) {
        if let (Some(version), Ok(contribution)) = (version, &read) {
            cache.0.insert(&paths[i], version, contribution.clone());
        }
        results[i] = Some((version, read));
    }
    let mut scan = StoreScan::default();
    for (path, result) in paths.iter().zip(results) {
        let (version, read) = result.expect("every path is read or cached");
        match read {
            Ok(contribution) => scan.contributions.push(Scanned {
                path: path.clone(),
                contribution,
                version,
            }),
            Err(e) => scan.failed.push((path.clone(), e)),
        }
    }
    scan
}

/// A file to read (its index in the paths) and the version it had before.
type Unread = (usize, Option<FileVersion>);
/// A file's version before it was read, and what reading it gave.
type Read = (
    Option<FileVersion>,
    Result<SessionUsageContribution, LoadError>,
);

/// The files `unread` names, loaded on `threads` threads (at least one), counting each in
/// `done`.
fn read_in_parallel(
    paths: &[PathBuf],
    unread: &[Unread],
    threads: usize,
    done: &AtomicUsize,
    progress: &(dyn Fn(usize) + Sync),
) -> Vec<(
    usize,
    Option<FileVersion>,
    Result<SessionUsageContribution, LoadError>,
)> {
    let next = AtomicUsize::new(0);
    let work = || {
        let mut mine = Vec::new();
        while let Some(&(i, version)) = unread.get(next.fetch_add(1, Ordering::Relaxed)) {
            mine.push((i, version, SessionUsageContribution::from_file(&paths[i])));
            progress(done.fetch_add(1, Ordering::Relaxed) + 1);
        }
        mine
    };
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.max(1)).map(|_| scope.spawn(work)).collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

impl Saved for SessionUsageContribution {
    const KIND: &'static [u8; 8] = b"usage\0\0\0";
    /// 2: each file's version has its change time.
    const FORMAT: u32 = 2;

    fn encode(&self, e: &mut Encoder) {
        e.str(&self.session_id);
        e.opt_str(self.parent.as_deref());
        e.str(&self.created);
        e.str(&self.cwd);
        e.u64(self.messages as u64);
        e.bool(self.stable_ids);
        e.u64(self.skipped as u64);
        e.u64(self.records.len() as u64);
        for r in &self.records {
            e.str(&r.entry_id);
            e.str(&r.timestamp);
            e.bool(r.time_ms.is_some());
            e.i64(r.time_ms.unwrap_or(0));
            e.str(&r.model);
            let a = &r.amounts;
            for n in [a.input, a.output, a.cache_read, a.cache_write] {
                e.f64(n);
            }
            e.f64(a.premium_requests);
            e.f64(a.cost);
        }
    }

    fn decode(d: &mut Decoder, _: &Path) -> Option<Self> {
        let session_id = d.str()?.to_owned();
        let parent = d.opt_str()?.map(str::to_owned);
        let created = d.str()?.to_owned();
        let cwd = d.str()?.to_owned();
        let messages = usize::try_from(d.u64()?).ok()?;
        let stable_ids = d.bool()?;
        let skipped = usize::try_from(d.u64()?).ok()?;
        // Three lengths, a flag, a time and six amounts at least.
        let n = d.count(3 * 8 + 1 + 8 + 6 * 8)?;
        let mut records = Vec::with_capacity(n);
        for _ in 0..n {
            let entry_id = d.str()?.to_owned();
            let timestamp = d.str()?.to_owned();
            let has_time = d.bool()?;
            let time = d.i64()?;
            records.push(ContributedUsage {
                entry_id,
                timestamp,
                time_ms: has_time.then_some(time),
                model: d.str()?.to_owned(),
                amounts: UsageTotals {
                    input: d.f64()?,
                    output: d.f64()?,
                    cache_read: d.f64()?,
                    cache_write: d.f64()?,
                    premium_requests: d.f64()?,
                    cost: d.f64()?,
                },
            });
        }
        Some(SessionUsageContribution {
            session_id,
            parent,
            created,
            cwd,
            messages,
            stable_ids,
            records,
            skipped,
        })
    }
}

#[cfg(test)]
// The test writes its store with the standard library and sets a file's time back.
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
mod tests {
    use super::*;

    fn session(id: &str, input: u32) -> String {
        format!(
            "{{\"type\":\"session\",\"version\":5,\"id\":\"{id}\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/w\"}}\n\
             {{\"type\":\"message\",\"id\":\"u1\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:01.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"q\"}}}}\n\
             {{\"type\":\"message\",\"id\":\"a1\",\"parentId\":\"u1\",\"timestamp\":\"2026-01-01T00:00:02.000Z\",\"message\":{{\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{{\"input\":{input},\"output\":2.5,\"cacheRead\":1,\"cacheWrite\":0,\"premiumRequests\":1,\"cost\":{{\"total\":0.25}}}}}}}}\n"
        )
    }

    #[test]
    fn a_cached_scan_reads_only_files_whose_version_changed_even_with_its_mtime_put_back() {
        let tmp = tempfile::tempdir().unwrap();
        let paths: Vec<PathBuf> = ["a", "b"]
            .iter()
            .map(|id| {
                let path = tmp.path().join(format!("{id}.jsonl"));
                std::fs::write(&path, session(id, 10)).unwrap();
                path
            })
            .collect();
        let saved_at = tmp.path().join("cache/usage");
        let mut cache = UsageCache::load(&FileStorage, &saved_at, 10);
        let first = scan_sessions_cached(&paths, 2, &mut cache, &|_| {});
        let plain = scan_sessions(&paths, 1, &|_| {});
        assert_eq!(first.contributions, plain.contributions);
        let input = |scan: &StoreScan, k: usize| {
            scan.contributions[k].contribution.own_usage().totals.input
        };
        assert_eq!(input(&first, 0), 10.0);
        cache.save(&FileStorage, &saved_at).unwrap();

        // a.jsonl is as it was: its saved contribution counts (it is not read). b.jsonl is
        // rewritten in place, a usage number digit for digit, and its modification time put
        // back: it keeps its identity, length and mtime, and is read again all the same.
        std::thread::sleep(std::time::Duration::from_millis(50));
        let b = &paths[1];
        let time = std::fs::metadata(b).unwrap().modified().unwrap();
        let file = std::fs::File::options().write(true).open(b).unwrap();
        std::io::Write::write_all(&mut &file, session("b", 90).as_bytes()).unwrap();
        file.set_modified(time).unwrap();
        drop(file);
        let mut cache = UsageCache::load(&FileStorage, &saved_at, 10);
        let done = std::sync::Mutex::new(Vec::new());
        let again = scan_sessions_cached(&paths, 2, &mut cache, &|n| {
            done.lock().unwrap().push(n);
        });
        assert_eq!(done.lock().unwrap()[..], [1, 2], "one taken from the cache");
        assert_eq!(input(&again, 0), 10.0, "taken from the cache");
        assert_eq!(input(&again, 1), 90.0, "read again");
        assert!(again.failed.is_empty());
    }

    #[test]
    fn every_field_of_a_contribution_is_saved() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("a.jsonl");
        std::fs::write(&path, session("a", 10)).unwrap();
        let scan = scan_sessions(std::slice::from_ref(&path), 1, &|_| {});
        let contribution = &scan.contributions[0].contribution;
        let mut e = Encoder::new(
            SessionUsageContribution::KIND,
            SessionUsageContribution::FORMAT,
        );
        contribution.encode(&mut e);
        let bytes = e.finish();
        let mut d = Decoder::new(
            &bytes,
            SessionUsageContribution::KIND,
            SessionUsageContribution::FORMAT,
        )
        .unwrap();
        assert_eq!(
            SessionUsageContribution::decode(&mut d, &path).as_ref(),
            Some(contribution)
        );
        assert!(d.is_done());
    }
}
