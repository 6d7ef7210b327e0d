//! `usage.json` at the root: the usage of every session of the store, each reply counted
//! once across fork lineages ([`StoreUsage`]), grouped by session, day, week, month, project
//! and model.
//!
//! Invariants:
//! - The sessions are the transcript files of the source as they are now (a directory
//!   scan, no file read), each with its size, mtime and inode.
//! - A session's contribution is built from its file and kept with that stamp; it is built
//!   again only when the stamp changes. The rendered bytes are kept with the list of
//!   (path, stamp) they were combined from and served again while that list is unchanged,
//!   so a warm read costs a directory scan and a stat per session — and nothing at all
//!   within [`RECHECK_AFTER`] of the last scan (a `cat` asks for the size, then the bytes;
//!   the store's usage may lag a change by that much).
//! - Files that cannot be read as sessions count nothing (the CLI's `gjcfs usage` names
//!   them).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::content::Bytes;
use super::disk::FileStamp;
use super::SessionSource;
use super::VfsError;
use gjcfs_engine::discovery::{all_transcript_paths, keep_live_copies, transcript_paths};
use gjcfs_engine::json;
use gjcfs_engine::storage::FileStorage;
use gjcfs_engine::store_usage::{scan_sessions, Grouping, SessionUsageContribution, StoreUsage};

/// Threads reading sessions whose contribution is not known yet.
const SCAN_THREADS: usize = 2;
/// How long rendered bytes are served without scanning the store again.
pub const RECHECK_AFTER: Duration = Duration::from_millis(500);

/// Every transcript file with its stamp, in path order.
type Stamps = Vec<(PathBuf, FileStamp)>;

#[derive(Default)]
struct Cache {
    contributions: HashMap<PathBuf, (FileStamp, Option<SessionUsageContribution>)>,
    /// The bytes, the (path, stamp) list they were combined from, and when that list was
    /// last found unchanged.
    rendered: Option<(Stamps, Bytes, Instant)>,
}

pub struct StoreUsageView {
    source: SessionSource,
    cache: Mutex<Cache>,
}

impl StoreUsageView {
    pub fn new(source: SessionSource) -> Self {
        StoreUsageView {
            source,
            cache: Mutex::new(Cache::default()),
        }
    }

    fn stamped_paths(&self) -> Result<Stamps, VfsError> {
        let storage = FileStorage;
        let paths = match &self.source {
            SessionSource::SessionsRoot(root) => all_transcript_paths(&storage, root),
            SessionSource::Dir(dir) => transcript_paths(&storage, dir),
        }
        .map_err(|e| super::errors::from_io(&e, format!("cannot list the store: {e}")))?;
        Ok(paths
            .into_iter()
            .filter_map(|path| Some((FileStamp::of(&path)?, path)))
            .map(|(stamp, path)| (path, stamp))
            .collect())
    }

    /// The bytes of `usage.json` now.
    pub fn bytes(&self) -> Result<Bytes, VfsError> {
        let mut cache = self.cache.lock();
        if let Some((_, bytes, checked)) = &cache.rendered {
            if checked.elapsed() < RECHECK_AFTER {
                return Ok(bytes.clone());
            }
        }
        let stamped = self.stamped_paths()?;
        if let Some((seen, bytes, checked)) = &mut cache.rendered {
            if *seen == stamped {
                *checked = Instant::now();
                return Ok(bytes.clone());
            }
        }
        let mut contributions = HashMap::with_capacity(stamped.len());
        let mut stale: HashMap<PathBuf, FileStamp> = HashMap::new();
        for (path, stamp) in &stamped {
            match cache.contributions.remove(path) {
                Some((known, c)) if known == *stamp => {
                    contributions.insert(path.clone(), (known, c));
                }
                _ => {
                    stale.insert(path.clone(), *stamp);
                }
            }
        }
        let stale_paths: Vec<PathBuf> = stale.keys().cloned().collect();
        let scan = scan_sessions(&stale_paths, SCAN_THREADS, &|_| {});
        let read = scan.contributions.into_iter().map(|(p, c)| (p, Some(c)));
        let failed = scan.failed.into_iter().map(|(p, _)| (p, None));
        for (path, contribution) in read.chain(failed) {
            if let Some(&stamp) = stale.get(&path) {
                contributions.insert(path, (stamp, contribution));
            }
        }
        cache.contributions = contributions;
        // A session in several files (a legacy session and its managed copy) counts once.
        let mut live: Vec<(&PathBuf, &FileStamp, &SessionUsageContribution)> = stamped
            .iter()
            .filter_map(|(path, stamp)| {
                let contribution = cache.contributions.get(path)?.1.as_ref()?;
                Some((path, stamp, contribution))
            })
            .collect();
        keep_live_copies(&mut live, |(path, stamp, c)| {
            (&c.session_id, stamp.millis(), path)
        });
        let usage = StoreUsage::combine(live.iter().map(|(_, _, c)| *c));
        let value = usage.to_value_grouped(&Grouping::ALL);
        let mut out = json::to_pretty(&value).into_bytes();
        out.push(b'\n');
        let bytes = Arc::new(out);
        cache.rendered = Some((stamped, bytes.clone(), Instant::now()));
        Ok(bytes)
    }
}
