//! The root's store-wide files, from one combination of every session's usage
//! ([`StoreUsage`], each reply counted once across fork lineages): `usage.json` (grouped by
//! session, day, week, month, project and model), `usage.svg` (cost and tokens per day) and
//! `index.html` (the sessions by project and by day, linking to their pages).
//!
//! Invariants:
//! - The sessions are the transcript files of the source as they are now (a directory
//!   scan, no file read), each with its size, mtime and inode.
//! - A session's contribution is built from its file and kept with that stamp; it is built
//!   again only when the stamp changes. What is kept is the store's saved usage, the file
//!   `gjcfs usage` and `gjcfs ls --long` keep in the store's cache directory: read when
//!   first needed (within what the store justifies) and saved again after each change, so
//!   a mount of a store a command has scanned reads no session for it, and the other way
//!   round. The rendered bytes are kept with the list of
//!   (path, stamp) they were combined from and served again while that list is unchanged,
//!   so a warm read costs a directory scan and a stat per session — and nothing at all
//!   within [`RECHECK_AFTER`] of the last scan (a `cat` asks for the size, then the bytes;
//!   the store's usage may lag a change by that much).
//! - Files that cannot be read as sessions count nothing (the CLI's `gjcfs usage` names
//!   them).
//! - The store is listed, its files stamped and the saved usage read and written through
//!   the model's storage ([`crate::VfsConfig::storage`]); but a session whose contribution
//!   is not kept is read by the engine's scan ([`scan_sessions_cached`]), which takes each
//!   file's version again and loads it from the disk (`FileStorage`), whatever storage the
//!   model was given.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::content::Bytes;
use super::inode::StoreFile;
use super::SessionSource;
use super::VfsError;
use gjcfs_engine::json::{self, Value};
use gjcfs_engine::storage::FileVersion;
use gjcfs_engine::storage::SessionStorage;
use gjcfs_engine::store::discovery::{all_transcript_paths, keep_live_copies, transcript_paths};
use gjcfs_engine::store::usage::{
    scan_sessions_cached, Grouping, SessionUsageContribution, StoreUsage, UsageCache,
};
use gjcfs_engine::views::{self, store_index::IndexEntry};

use super::layout::safe_session_name;

/// Threads reading sessions whose contribution is not known yet.
const SCAN_THREADS: usize = 2;
/// How long rendered bytes are served without scanning the store again.
pub const RECHECK_AFTER: Duration = Duration::from_millis(500);

/// Every transcript file with its stamp, in path order.
type Stamps = Vec<(PathBuf, FileVersion)>;

/// The files rendered from one combination.
#[derive(Default)]
struct Rendered {
    usage_json: Option<Bytes>,
    usage_svg: Option<Bytes>,
    index: Option<Bytes>,
}

/// What the store's files are made of: the combination, and each live session's row of
/// the index (its title aside).
struct Combined {
    usage: StoreUsage,
    live: Vec<IndexEntry>,
}

#[derive(Default)]
struct Cache {
    /// Each session's contribution at its file's version: the saved usage, once read.
    contributions: Option<UsageCache>,
    /// The combination, the (path, stamp) list it was made from, when that list was last
    /// found unchanged, and the files rendered from it so far.
    combined: Option<(Stamps, Arc<Combined>, Instant, Rendered)>,
}

pub struct StoreUsageView {
    source: SessionSource,
    storage: Arc<dyn SessionStorage>,
    /// The store's saved usage, shared with the commands; `None`: kept in memory only.
    saved: Option<PathBuf>,
    cache: Mutex<Cache>,
}

impl StoreUsageView {
    pub fn new(
        source: SessionSource,
        storage: Arc<dyn SessionStorage>,
        saved: Option<PathBuf>,
    ) -> Self {
        StoreUsageView {
            source,
            storage,
            saved,
            cache: Mutex::new(Cache::default()),
        }
    }

    fn stamped_paths(&self) -> Result<Stamps, VfsError> {
        let storage = self.storage.as_ref();
        let paths = match &self.source {
            SessionSource::SessionsRoot(root) => all_transcript_paths(storage, root),
            SessionSource::Dir(dir) => transcript_paths(storage, dir),
        }
        .map_err(|e| super::errors::from_io(&e, format!("cannot list the store: {e}")))?;
        Ok(paths
            .into_iter()
            .filter_map(|path| Some((super::disk::version(storage, &path)?, path)))
            .map(|(stamp, path)| (path, stamp))
            .collect())
    }

    /// The bytes of `file` now; `title` names a session of the index by its id.
    pub fn bytes(
        &self,
        file: StoreFile,
        title: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Bytes, VfsError> {
        let mut cache = self.cache.lock();
        self.refresh(&mut cache)?;
        let (_, combined, _, rendered) = cache.combined.as_mut().expect("just combined");
        let slot = match file {
            StoreFile::UsageJson => &mut rendered.usage_json,
            StoreFile::UsageSvg => &mut rendered.usage_svg,
            StoreFile::Index => &mut rendered.index,
        };
        if let Some(bytes) = slot {
            return Ok(bytes.clone());
        }
        let bytes = Arc::new(match file {
            StoreFile::UsageJson => {
                let Value::Object(mut value) = combined.usage.to_value_grouped(&Grouping::ALL)
                else {
                    unreachable!("the usage is an object")
                };
                // Each session's title, as `gjcfs usage --json --by session` gives it.
                views::usage::add_session_titles(&mut value, title);
                let mut out = json::to_pretty(&Value::Object(value)).into_bytes();
                out.push(b'\n');
                out
            }
            StoreFile::UsageSvg => views::usage_chart::usage_svg(&combined.usage.by_day),
            StoreFile::Index => index_page(combined, title),
        });
        *slot = Some(bytes.clone());
        Ok(bytes)
    }

    /// Brings the combination up to date with the store (see the module invariants).
    fn refresh(&self, cache: &mut Cache) -> Result<(), VfsError> {
        if let Some((_, _, checked, _)) = &cache.combined {
            if checked.elapsed() < RECHECK_AFTER {
                return Ok(());
            }
        }
        let stamped = self.stamped_paths()?;
        if let Some((seen, _, checked, _)) = &mut cache.combined {
            if *seen == stamped {
                *checked = Instant::now();
                return Ok(());
            }
        }
        let paths: Vec<PathBuf> = stamped.iter().map(|(path, _)| path.clone()).collect();
        let storage = self.storage.as_ref();
        let contributions = cache
            .contributions
            .get_or_insert_with(|| match &self.saved {
                Some(file) => UsageCache::load(storage, file, paths.len()),
                None => UsageCache::default(),
            });
        let scan = scan_sessions_cached(&paths, SCAN_THREADS, contributions, &|_| {});
        contributions.keep_only(&paths);
        if let Some(file) = &self.saved {
            // A cache: one that cannot be written costs the next reader its speed only.
            let _ = contributions.save(storage, file);
        }
        // A session in several files (a legacy session and its managed copy) counts once.
        let mut live = scan.contributions;
        keep_live_copies(&mut live, |s| {
            (&s.contribution.session_id, s.modified_ms(), &s.path)
        });
        let live: Vec<&SessionUsageContribution> = live.iter().map(|s| &s.contribution).collect();
        let combined = Combined {
            usage: StoreUsage::combine(live.iter().copied()),
            live: live
                .iter()
                .filter(|c| safe_session_name(&c.session_id))
                .map(|c| IndexEntry {
                    id: c.session_id.clone(),
                    title: String::new(),
                    cwd: c.cwd.clone(),
                    created: c.created.clone(),
                    messages: c.messages,
                    usage: c.own_usage(),
                    href: format!(
                        "sessions/{}/context.html",
                        views::tree_svg::percent_encoded(&c.session_id)
                    ),
                })
                .collect(),
        };
        cache.combined = Some((
            stamped,
            Arc::new(combined),
            Instant::now(),
            Rendered::default(),
        ));
        Ok(())
    }
}

/// `index.html`: every live session whose id names a directory of the mount, linking to its
/// `sessions/<id>/context.html`, titled as the mount's listing titles it.
fn index_page(combined: &Combined, title: &dyn Fn(&str) -> Option<String>) -> Vec<u8> {
    let entries: Vec<IndexEntry> = combined
        .live
        .iter()
        .map(|e| IndexEntry {
            title: title(&e.id).unwrap_or_default(),
            id: e.id.clone(),
            cwd: e.cwd.clone(),
            created: e.created.clone(),
            messages: e.messages,
            usage: e.usage,
            href: e.href.clone(),
        })
        .collect();
    views::store_index::index_html(&entries, &combined.usage)
}
