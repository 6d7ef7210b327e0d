//! What earlier repair runs keep in `<base>/gjcfs-repairs/`, and letting the old ones go.
//!
//! Each run keeps a whole copy of every file whose bytes it changed, so copies add up
//! (ten cuts of a large session keep ten copies of it). A check reports what they take
//! ([`report_kept`]); [`prune`] removes the oldest complete runs beyond a number to keep
//! and beyond a total size, always keeping the newest. A run that did not finish is never
//! removed: its manifest and copies are what a person needs to see what it changed (the
//! check reports it as `unfinished_repair`). Removal goes only into directories no other
//! user can change ([`super::safe_dirs`]) and never follows a symlink.

use std::io;
use std::path::{Path, PathBuf};

use super::journal::is_complete;
use super::safe_dirs::only_owner_can_change;
use super::{Report, Severity, REPAIRS_DIR_NAME};
use crate::storage::{EntryKind, SessionStorage};

/// How many complete runs a repair keeps, the newest.
pub const KEEP_RUNS: usize = 10;
/// How many bytes the complete runs a repair keeps may take in all (the newest run is kept
/// whatever its size).
pub const KEEP_BYTES: u64 = 1 << 30;

/// One repair run's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptRun {
    /// Its directory, `<base>/gjcfs-repairs/<UTC time>`.
    pub dir: PathBuf,
    /// Whether its manifest says it is complete.
    pub complete: bool,
    /// The bytes of the files in it.
    pub bytes: u64,
}

/// The repair runs under `base`, oldest first (their names are UTC times).
pub fn kept_runs(storage: &dyn SessionStorage, base: &Path) -> Vec<KeptRun> {
    let Ok(entries) = storage.list_entries(&base.join(REPAIRS_DIR_NAME)) else {
        return Vec::new();
    };
    let mut runs: Vec<KeptRun> = entries
        .into_iter()
        .filter(|(_, kind)| *kind == EntryKind::Dir)
        .map(|(dir, _)| KeptRun {
            complete: is_complete(storage, &dir),
            bytes: bytes_under(storage, &dir),
            dir,
        })
        .collect();
    runs.sort_by(|a, b| a.dir.cmp(&b.dir));
    runs
}

/// The bytes of the files under `dir` (symlinks not followed).
fn bytes_under(storage: &dyn SessionStorage, dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for (path, kind) in storage.list_entries(&dir).unwrap_or_default() {
            match kind {
                EntryKind::Dir => stack.push(path),
                _ => total += storage.lstat(&path).map_or(0, |stat| stat.len),
            }
        }
    }
    total
}

/// Reports what the repair runs under `base` keep, when they keep anything.
pub(super) fn report_kept(storage: &dyn SessionStorage, base: &Path, report: &mut Report) {
    let runs = kept_runs(storage, base);
    if runs.is_empty() {
        return;
    }
    let bytes: u64 = runs.iter().map(|run| run.bytes).sum();
    let what = format!(
        "{} repair run{} keep {} in copies of what they changed (a repair keeps the newest \
         {KEEP_RUNS} complete runs, within {}); `gjcfs check --prune-repairs N` keeps only \
         the newest N",
        runs.len(),
        if runs.len() == 1 { "" } else { "s" },
        size(bytes),
        size(KEEP_BYTES)
    );
    let dir = base.join(REPAIRS_DIR_NAME);
    report.add(Severity::Note, "repair_copies", dir, what, None);
}

/// `bytes` for a person: `12.3 MB`.
fn size(bytes: u64) -> String {
    match bytes {
        0..1_000 => format!("{bytes} bytes"),
        1_000..1_000_000 => format!("{:.1} kB", bytes as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} MB", bytes as f64 / 1e6),
        _ => format!("{:.1} GB", bytes as f64 / 1e9),
    }
}

/// What [`prune`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pruned {
    /// The run directories removed, with their bytes.
    pub removed: Vec<(PathBuf, u64)>,
    /// Why pruning stopped early, if it did (nothing after that was removed).
    pub stopped: Option<String>,
}

/// Removes the oldest complete repair runs under `base` beyond the newest `keep` and beyond
/// `keep_bytes` in all (the newest complete run stays whatever its size); runs that did not
/// finish stay. Nothing is removed unless only this user can change the directories on the
/// way (see the module `safe_dirs`).
pub fn prune(storage: &dyn SessionStorage, base: &Path, keep: usize, keep_bytes: u64) -> Pruned {
    let mut pruned = Pruned::default();
    let repairs = base.join(REPAIRS_DIR_NAME);
    let complete: Vec<KeptRun> = kept_runs(storage, base)
        .into_iter()
        .filter(|run| run.complete)
        .collect();
    // Newest first: what is kept, until the count or the size is reached.
    let mut kept = 0;
    let mut kept_bytes = 0u64;
    for run in complete.iter().rev() {
        let fits = kept < keep && (kept == 0 || kept_bytes + run.bytes <= keep_bytes);
        if fits {
            kept += 1;
            kept_bytes += run.bytes;
            continue;
        }
        if let Err(why) = only_owner_can_change(storage, base, &run.dir) {
            pruned.stopped = Some(why);
            break;
        }
        match remove_tree(storage, &run.dir) {
            Ok(()) => pruned.removed.push((run.dir.clone(), run.bytes)),
            Err(e) => {
                pruned.stopped = Some(format!("{} cannot be removed: {e}", run.dir.display()));
                break;
            }
        }
    }
    if !pruned.removed.is_empty() {
        let _ = storage.sync_dir(&repairs);
    }
    pruned
}

/// Removes `dir` and everything in it, never following a symlink (one is removed itself).
fn remove_tree(storage: &dyn SessionStorage, dir: &Path) -> io::Result<()> {
    for (path, kind) in storage.list_entries(dir)? {
        match kind {
            EntryKind::Dir => remove_tree(storage, &path)?,
            _ => storage.unlink(&path)?,
        }
    }
    storage.remove_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::MemoryStorage;

    /// A run directory `name` under `/agent/gjcfs-repairs` with a copy of `bytes` bytes.
    fn run(storage: &MemoryStorage, name: &str, bytes: usize, complete: bool) -> PathBuf {
        let dir = Path::new("/agent").join(REPAIRS_DIR_NAME).join(name);
        storage.ensure_dir(&dir.join("sessions")).unwrap();
        storage.put_file(&dir.join("sessions/a.jsonl"), &vec![b'x'; bytes]);
        let manifest = if complete {
            "{\"state\":\"complete\",\"steps\":0}\n"
        } else {
            ""
        };
        storage.put_file(&dir.join(super::super::MANIFEST_NAME), manifest.as_bytes());
        dir
    }

    #[test]
    fn the_oldest_complete_runs_go_beyond_the_count_and_the_size_and_unfinished_ones_stay() {
        let storage = MemoryStorage::new();
        let old = run(&storage, "2026-01-01", 100, true);
        let stopped = run(&storage, "2026-01-02", 100, false);
        let middle = run(&storage, "2026-01-03", 100, true);
        let new = run(&storage, "2026-01-04", 100, true);
        let base = Path::new("/agent");
        let mut report = Report::default();
        report_kept(&storage, base, &mut report);
        let what = &report.findings[0].what;
        assert!(what.starts_with("4 repair runs keep 4"), "{what}");
        // Two kept by count: the oldest complete one goes.
        let pruned = prune(&storage, base, 2, u64::MAX);
        assert_eq!(pruned.removed, [(old.clone(), bytes_under(&storage, &new))]);
        assert!(!storage.exists(&old) && storage.exists(&stopped));
        // By size: only the newest fits.
        let pruned = prune(&storage, base, 10, 150);
        assert_eq!(pruned.removed.len(), 1);
        assert!(!storage.exists(&middle) && storage.exists(&new));
        // The newest complete run stays whatever its size; the stopped one stays.
        let pruned = prune(&storage, base, 10, 0);
        assert!(pruned.removed.is_empty());
        assert!(storage.exists(&new) && storage.exists(&stopped));
        // Keeping none removes every complete run.
        prune(&storage, base, 0, 0);
        assert!(!storage.exists(&new) && storage.exists(&stopped));
    }
}
