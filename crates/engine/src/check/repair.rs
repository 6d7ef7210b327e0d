//! The safe repairs of a check's findings ([`repair`]), each preceded by a copy of what it
//! changes, in one repair directory per run with a manifest that records each change before
//! it is made.

use std::io;
use std::path::{Path, PathBuf};

use super::journal::Journal;
use super::kept::{prune, Pruned, KEEP_BYTES, KEEP_RUNS};
use super::safe_dirs::only_owner_can_change;
use super::{Finding, Repair, Report, Severity};
use crate::manager::{cut_torn_tail, temp_file_unused};
use crate::storage::{EntryKind, OpenMode, SessionStorage};
use crate::store::legacy::{lock_state, LockState};

/// The directory, in the store's base directory, that repairs keep their copies in.
pub const REPAIRS_DIR_NAME: &str = "gjcfs-repairs";

/// The directory one repair run keeps its copies in: `<base>/gjcfs-repairs/<UTC time>`.
pub fn repairs_dir(base: &Path) -> PathBuf {
    let stamp =
        crate::format::time::format_iso_millis(crate::format::time::now_millis()).replace(':', "-");
    base.join(REPAIRS_DIR_NAME).join(stamp)
}

/// What a person asked [`repair`] to do beyond what is always safe.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RepairOptions {
    /// Rename a rewrite's backup back to its session file when that is missing. The
    /// session may have been deleted on purpose after the rewrite was interrupted, so
    /// this is done only when asked.
    pub restore_deleted: bool,
}

/// What happened to one finding a repair was offered for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repaired {
    /// The finding's place in the report.
    pub index: usize,
    /// Done (what was done), or left (why).
    pub result: Result<String, String>,
}

/// What [`repair`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepairOutcome {
    /// One entry for each finding a repair was offered for, in the report's order.
    pub results: Vec<Repaired>,
    /// Where the copies and the manifest are, when anything was kept.
    pub kept_in: Option<PathBuf>,
    /// The older runs let go after this one completed: beyond the newest
    /// [`KEEP_RUNS`](super::KEEP_RUNS) complete runs or [`KEEP_BYTES`](super::KEEP_BYTES).
    pub pruned: Pruned,
}

impl RepairOutcome {
    /// What happened to finding `index`, if a repair was tried.
    pub fn of(&self, index: usize) -> Option<&Result<String, String>> {
        self.results
            .iter()
            .find(|r| r.index == index)
            .map(|r| &r.result)
    }

    /// The worst severity among the findings of `report` still there after the repairs.
    pub fn worst_left(&self, report: &Report) -> Option<Severity> {
        report
            .findings
            .iter()
            .enumerate()
            .filter(|(i, _)| !matches!(self.of(*i), Some(Ok(_))))
            .map(|(_, f)| f.severity)
            .max()
    }
}

/// Applies the repairs `report` offers. Copies go to `dir` (created owner-only when first
/// needed), under their path relative to `base`. The manifest there
/// ([`MANIFEST_NAME`](super::MANIFEST_NAME)) records each change as `begun`, appended and
/// synced, before it is made, and `done` or `left` after; a last line marks the run
/// `complete`. A change that cannot be recorded first is not made. Each repair
/// checks again that it still applies right before it acts, and one that does not is left,
/// saying why.
pub fn repair(
    storage: &dyn SessionStorage,
    report: &Report,
    base: &Path,
    dir: &Path,
    options: RepairOptions,
) -> RepairOutcome {
    let mut outcome = RepairOutcome::default();
    let offered = report.findings.iter().filter(|f| f.repair.is_some());
    if offered.clone().next().is_none() {
        return outcome;
    }
    if let Err(why) = make_run_dir(storage, base, dir) {
        for (index, finding) in report.findings.iter().enumerate() {
            if finding.repair.is_some() {
                let result = Err(why.clone());
                outcome.results.push(Repaired { index, result });
            }
        }
        return outcome;
    }
    let keep = Keep {
        storage,
        base,
        dir,
        options,
    };
    let mut journal = Journal::new(storage, dir);
    for (index, finding) in report.findings.iter().enumerate() {
        let Some(repair) = &finding.repair else {
            continue;
        };
        let result = match journal.begin(finding, repair) {
            Ok(step) => {
                let result = only_owner_can_change(storage, base, &finding.path)
                    .and_then(|()| apply(storage, finding, repair, &keep));
                match (journal.end(step, &result), result) {
                    (Err(e), Ok(done)) => Ok(format!(
                        "{done} (not confirmed in the manifest, which the next check \
                         reports: {e})"
                    )),
                    (_, result) => result,
                }
            }
            Err(e) => Err(format!(
                "not repaired: the change could not be recorded in the manifest first ({e})"
            )),
        };
        outcome.results.push(Repaired { index, result });
    }
    // A run not marked complete is reported by the next check, and keeps every older run.
    let completed = journal.complete().is_ok();
    if storage.exists(dir) {
        outcome.kept_in = Some(dir.to_owned());
    }
    if completed {
        outcome.pruned = prune(storage, base, KEEP_RUNS, KEEP_BYTES);
    }
    outcome
}

/// Makes the run's directory `dir` in `<base>/gjcfs-repairs` (made first where missing):
/// refused when `gjcfs-repairs` is a symlink, another user's or open to others (see
/// [`only_owner_can_change`]), so nothing a run keeps or records lands outside the store,
/// and when `dir` is there already.
fn make_run_dir(storage: &dyn SessionStorage, base: &Path, dir: &Path) -> Result<(), String> {
    let repairs = dir.parent().unwrap_or(dir);
    only_owner_can_change(storage, base, repairs)?;
    match storage.create_dir(repairs) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
            return Err(format!(
                "not repaired: {} cannot be made ({e})",
                repairs.display()
            ))
        }
        _ => {}
    }
    only_owner_can_change(storage, base, dir)?;
    storage.create_dir(dir).map_err(|e| {
        format!(
            "not repaired: the repair directory {} cannot be made ({e})",
            dir.display()
        )
    })
}

/// Where a repair run keeps what it copies or moves.
struct Keep<'a> {
    storage: &'a dyn SessionStorage,
    base: &'a Path,
    dir: &'a Path,
    options: RepairOptions,
}

impl Keep<'_> {
    /// Where the copy of `path` goes.
    fn place_of(&self, path: &Path) -> PathBuf {
        match path.strip_prefix(self.base) {
            Ok(relative) if !relative.as_os_str().is_empty() => self.dir.join(relative),
            _ => self
                .dir
                .join("outside")
                .join(path.file_name().unwrap_or_default()),
        }
    }

    fn prepare(&self, target: &Path) -> io::Result<()> {
        match target.parent() {
            Some(parent) => self.storage.ensure_dir(parent),
            None => Ok(()),
        }
    }

    /// A durable copy of the file at `path`; its path.
    fn copy(&self, path: &Path) -> io::Result<PathBuf> {
        let target = self.place_of(path);
        self.prepare(&target)?;
        let source = self.storage.open_read_at(path)?;
        let size = source.size()?;
        let mut writer = self.storage.open_writer(&target, OpenMode::CreateNew)?;
        let copied = (|| {
            let mut buf = vec![0u8; 1 << 20];
            let mut at = 0u64;
            while at < size {
                let n = source.read_at(&mut buf, at)?;
                if n == 0 {
                    break;
                }
                writer.write_all(&buf[..n])?;
                at += n as u64;
            }
            writer.fsync()
        })();
        let closed = writer.close();
        if let Err(e) = copied
            .and(closed)
            .and_then(|()| sync_parent(self.storage, &target))
        {
            let _ = self.storage.unlink(&target);
            return Err(e);
        }
        Ok(target)
    }

    /// Moves the file at `path` here (copied, then removed, across filesystems); where to,
    /// and whether the directories' entries were then synced.
    fn take(&self, path: &Path) -> io::Result<(PathBuf, io::Result<()>)> {
        let target = self.place_of(path);
        self.prepare(&target)?;
        match self.storage.rename_no_replace(path, &target) {
            Ok(()) => {
                let synced = sync_parent(self.storage, &target)
                    .and_then(|()| sync_parent(self.storage, path));
                Ok((target, synced))
            }
            Err(e) if e.kind() == io::ErrorKind::CrossesDevices => {
                let copy = self.copy(path)?;
                self.storage.unlink(path)?;
                Ok((copy, sync_parent(self.storage, path)))
            }
            Err(e) => Err(e),
        }
    }
}

/// Makes the entry of `path` in its directory durable.
fn sync_parent(storage: &dyn SessionStorage, path: &Path) -> io::Result<()> {
    match path.parent() {
        Some(dir) => storage.sync_dir(dir),
        None => Ok(()),
    }
}

fn apply(
    storage: &dyn SessionStorage,
    finding: &Finding,
    repair: &Repair,
    keep: &Keep<'_>,
) -> Result<String, String> {
    let path = &finding.path;
    match repair {
        Repair::CutTornTail { .. } => {
            let copy = keep
                .copy(path)
                .map_err(|e| format!("not cut: no copy could be kept ({e})"))?;
            match cut_torn_tail(storage, path) {
                Ok(Some(cut)) => Ok(format!(
                    "cut off {} bytes at byte {}; the file as it was: {}",
                    cut.len,
                    cut.offset,
                    copy.display()
                )),
                Ok(None) => {
                    let _ = storage.unlink(&copy);
                    Err(
                        "not cut: the file changed since the check, or a process holds it \
                         open for writing"
                            .into(),
                    )
                }
                Err(e) => Err(format!(
                    "the cut failed ({e}); the file as it was: {}",
                    copy.display()
                )),
            }
        }
        Repair::MoveAway => {
            let still = match finding.kind {
                "stale_lock" => lock_state(storage, path) == Some(LockState::Stale),
                _ => temp_file_unused(storage, path),
            };
            if !still {
                return Err("left: it is in use again".into());
            }
            let (to, synced) = keep.take(path).map_err(|e| format!("not moved: {e}"))?;
            let done = format!("moved to {}", to.display());
            Ok(match synced {
                Ok(()) => done,
                Err(e) => format!("{done} (the directories could not be synced: {e})"),
            })
        }
        Repair::RestoreBackup { to } => {
            if !keep.options.restore_deleted {
                return Err("left: its session may have been deleted on purpose; \
                            --restore-deleted renames the backup back"
                    .into());
            }
            if storage.exists(to) {
                return Err(format!("left: {} is back", to.display()));
            }
            storage
                .rename_no_replace(path, to)
                .map_err(|e| format!("not renamed: {e}"))?;
            let done = format!("renamed back to {}", to.display());
            Ok(match sync_parent(storage, to) {
                Ok(()) => done,
                Err(e) => format!("{done} (its directory could not be synced: {e})"),
            })
        }
        Repair::RestoreMode { from, to, found } => {
            let ours = matches!(found.kind, EntryKind::File | EntryKind::Dir)
                && found.owner == storage.user();
            if !ours {
                return Err("left: not a file or directory of this user's".into());
            }
            let symlink = || {
                storage
                    .lstat(path)
                    .is_ok_and(|s| s.kind == EntryKind::Symlink)
            };
            match storage.set_mode_if(path, found, *to) {
                Ok(true) => Ok(format!("mode {from:o} set to {to:o}")),
                Ok(false) => Err("left: it changed since the check".into()),
                Err(_) if symlink() => Err("left: it is a symlink now".into()),
                Err(e) => Err(format!("mode not set: {e}")),
            }
        }
    }
}
