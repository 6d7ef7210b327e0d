//! Atomic full rewrites of a session file.
//!
//! The new content goes to `.<name>.<snowflake>.tmp` in the same directory, which is written,
//! fsynced and closed, then renamed over the target, so the target is at every moment either
//! the old file or the new one. If the rename fails with EPERM (filesystems that refuse to
//! rename over an open file), the target is first moved to `<name>.<snowflake>.bak`, the temp
//! file renamed into place, and the backup removed; if the second rename fails the backup is
//! renamed back. A crash in between leaves the backup, which
//! [`recover_orphaned_backups`] puts back when the target is missing; a crash before the
//! rename leaves the temp file, which [`remove_orphaned_temps`] removes.
//!
//! A temp file is held open for writing from its creation until after the rename, and this
//! process also notes it as in flight meanwhile: so a temp file that no process holds open
//! for writing (and this one is not writing) is a crash's, however young, and is removed
//! at the next recovery of its directory and after the next full rewrite of its session.
//!
//! - [`atomic_replace_checked`] runs a check before the temp file is written and again right
//!   before the rename; if it fails nothing is replaced and the temp file is removed. The
//!   manager uses it to replace only the very file memory reflects. The second check and
//!   the rename are made holding a lock on the file being replaced, so that of two
//!   processes replacing one file at once the second finds the first one's file and is
//!   refused, instead of renaming over it and losing what was appended to it meanwhile.
//! - Recovery ([`recover_dir`]) runs only where sessions are opened for writing or created,
//!   never while listing, and never in a legacy directory (a name starting with `-`), whose
//!   files gjcfs does not change.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use crate::format::ids::snowflake;
use crate::storage::{OpenMode, SessionStorage, StorageWriter};

fn sibling(target: &Path, name: String) -> PathBuf {
    target.with_file_name(name)
}

fn base_name(target: &Path) -> String {
    target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Why the manager refused a full rewrite: carried inside the [`io::Error`] its check
/// returns, so that [`atomic_replace_checked`] stays a plain I/O operation.
#[derive(Debug, thiserror::Error)]
pub(super) enum Refusal {
    #[error("the file changed on disk since it was read")]
    ChangedOnDisk,
    #[error("another process holds the file open for writing (pid {0:?})")]
    OpenElsewhere(Vec<u32>),
}

impl Refusal {
    /// The refusal inside `e`, if it is one.
    pub(super) fn of(e: &io::Error) -> Option<&Refusal> {
        e.get_ref()?.downcast_ref()
    }
}

impl From<Refusal> for io::Error {
    fn from(refusal: Refusal) -> Self {
        io::Error::other(refusal)
    }
}

/// Replaces `target` with the bytes `write` produces, atomically.
pub fn atomic_replace(
    storage: &dyn SessionStorage,
    target: &Path,
    write: impl FnOnce(&mut dyn StorageWriter) -> io::Result<()>,
) -> io::Result<()> {
    atomic_replace_checked(storage, target, &|| Ok(()), write)
}

/// [`atomic_replace`], running `check` before anything is written and again right before
/// the rename; when it fails, its error is returned and the target is left as it is.
pub fn atomic_replace_checked(
    storage: &dyn SessionStorage,
    target: &Path,
    check: &dyn Fn() -> io::Result<()>,
    write: impl FnOnce(&mut dyn StorageWriter) -> io::Result<()>,
) -> io::Result<()> {
    check()?;
    let base = base_name(target);
    let temp = sibling(target, format!(".{base}.{}.tmp", snowflake()));
    let _in_flight = InFlight::note(&temp);
    let mut writer = storage.open_writer(&temp, OpenMode::CreateNew)?;
    // The writer stays open until the temp file is renamed or removed: another process's
    // recovery sees it held and leaves it alone.
    let result = write(writer.as_mut())
        .and_then(|()| writer.fsync())
        .and_then(|()| {
            // Checked and renamed under the lock: another process's replacement of the
            // same file waits, then its check finds this one's file.
            let _lock = lock_target(storage, target)?;
            check()?;
            match storage.rename(&temp, target) {
                Err(e) if crate::storage::is_rename_refused(&e) => {
                    replace_with_backup(storage, &temp, target, e)
                }
                other => other,
            }
        });
    if result.is_err() {
        let _ = storage.unlink(&temp);
    }
    // The bytes were fsynced before the rename: a failing close loses nothing, and the
    // file is in place.
    let _ = writer.close();
    result
}

/// The file at `target` open and locked ([`StorageWriter::lock`]) while a replacement checks
/// it and renames over it, so that two processes replacing one file do so one after the
/// other; `None` when nothing is there yet. The lock is on the file the rename replaces:
/// a process that waited for it finds, once it has it, another file at the path, which its
/// check refuses. Unix only: Windows refuses to rename over a file held open this way.
fn lock_target(
    storage: &dyn SessionStorage,
    target: &Path,
) -> io::Result<Option<Box<dyn StorageWriter>>> {
    if !cfg!(unix) {
        return Ok(None);
    }
    let mut file = match storage.open_writer(target, OpenMode::AppendExisting) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    file.lock()?;
    Ok(Some(file))
}

/// The temp files this process is writing now, which its own recoveries must leave alone
/// ([`SessionStorage::writers_elsewhere`] never lists this process).
static IN_FLIGHT: std::sync::Mutex<std::collections::BTreeSet<PathBuf>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// A temp file noted in [`IN_FLIGHT`] until dropped.
struct InFlight(PathBuf);

impl InFlight {
    fn note(temp: &Path) -> InFlight {
        in_flight().insert(temp.to_owned());
        InFlight(temp.to_owned())
    }

    fn holds(temp: &Path) -> bool {
        in_flight().contains(temp)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        in_flight().remove(&self.0);
    }
}

fn in_flight() -> std::sync::MutexGuard<'static, std::collections::BTreeSet<PathBuf>> {
    IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner())
}

/// The EPERM fallback: move the target aside, move the temp file in, drop the backup.
fn replace_with_backup(
    storage: &dyn SessionStorage,
    temp: &Path,
    target: &Path,
    eperm: io::Error,
) -> io::Result<()> {
    if !storage.exists(target) {
        return storage.rename(temp, target);
    }
    let backup = sibling(target, format!("{}.{}.bak", base_name(target), snowflake()));
    storage.rename(target, &backup)?;
    if let Err(second) = storage.rename(temp, target) {
        if let Err(rollback) = storage.rename(&backup, target) {
            return Err(io::Error::new(
                eperm.kind(),
                format!(
                    "{eperm}; replacing {} failed ({second}) and rollback from {} also failed: {rollback}",
                    target.display(),
                    backup.display()
                ),
            ));
        }
        return Err(second);
    }
    let _ = storage.unlink(&backup);
    Ok(())
}

/// Puts back, for every `*.jsonl` in `dir` that is missing, its newest `.bak` left by an
/// interrupted EPERM replacement. Returns the files restored.
pub fn recover_orphaned_backups(
    storage: &dyn SessionStorage,
    dir: &Path,
) -> io::Result<Vec<PathBuf>> {
    let mut newest: BTreeMap<PathBuf, (i64, PathBuf)> = BTreeMap::new();
    for path in storage.list_files(dir)? {
        let name = base_name(&path);
        let Some(primary) = backup_primary(&name) else {
            continue;
        };
        let mtime = storage.stat(&path).map_or(0, |s| s.mtime_ms);
        let primary = dir.join(primary);
        if newest.get(&primary).is_none_or(|(t, _)| mtime > *t) {
            newest.insert(primary, (mtime, path));
        }
    }
    let mut restored = Vec::new();
    for (primary, (_, backup)) in newest {
        if !storage.exists(&primary) {
            storage.rename(&backup, &primary)?;
            restored.push(primary);
        }
    }
    Ok(restored)
}

/// Whether a directory name is a legacy layout's (`-…`, not `v2-…`): gjcfs never changes
/// anything in such a directory.
pub fn is_legacy_dir_name(name: &str) -> bool {
    name.starts_with('-')
}

/// Removes the temp files (`.<name>.jsonl.<snowflake>.tmp`, the snowflake in hex) that a
/// crash during a full rewrite left in `dir`: those no process holds open for writing and
/// this one is not writing (see the module's rules); one whose writers cannot be told is
/// left. Returns the files removed.
pub fn remove_orphaned_temps(storage: &dyn SessionStorage, dir: &Path) -> io::Result<Vec<PathBuf>> {
    remove_orphaned_temps_named(storage, dir, None)
}

/// [`remove_orphaned_temps`] for the temp files of the one session file `target` (a full
/// rewrite of it has just succeeded; never in a legacy directory).
pub(super) fn remove_orphaned_temps_of(
    storage: &dyn SessionStorage,
    target: &Path,
) -> io::Result<Vec<PathBuf>> {
    let Some(dir) = target.parent() else {
        return Ok(Vec::new());
    };
    let legacy = dir
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(is_legacy_dir_name);
    if legacy {
        return Ok(Vec::new());
    }
    remove_orphaned_temps_named(storage, dir, Some(&base_name(target)))
}

fn remove_orphaned_temps_named(
    storage: &dyn SessionStorage,
    dir: &Path,
    only: Option<&str>,
) -> io::Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    for path in storage.list_files(dir)? {
        let name = base_name(&path);
        let Some(primary) = temp_file_primary(&name) else {
            continue;
        };
        if only.is_some_and(|only| only != primary) {
            continue;
        }
        if temp_file_unused(storage, &path) {
            storage.unlink(&path)?;
            removed.push(path);
        }
    }
    Ok(removed)
}

/// The session file a rewrite's temp file name (`.<name>.jsonl.<snowflake>.tmp`) is for.
pub fn temp_file_primary(name: &str) -> Option<&str> {
    let (primary, number) = name
        .strip_prefix('.')?
        .strip_suffix(".tmp")?
        .rsplit_once('.')?;
    let number_ok = !number.is_empty() && number.bytes().all(|b| b.is_ascii_hexdigit());
    (primary.ends_with(".jsonl") && number_ok).then_some(primary)
}

/// Whether nobody writes the temp file at `path`: no process holds it open for writing
/// (as far as the platform tells) and this one is not writing it.
pub fn temp_file_unused(storage: &dyn SessionStorage, path: &Path) -> bool {
    !InFlight::holds(path) && storage.writers_elsewhere(path).is_ok_and(|w| w.is_empty())
}

/// The session file a rewrite's backup name (`<name>.jsonl.<snowflake>.bak`) is of.
pub fn backup_primary(name: &str) -> Option<&str> {
    let stem = name
        .strip_suffix(".bak")
        .filter(|_| !name.starts_with('.'))?;
    let (primary, _) = stem.rsplit_once('.')?;
    primary.ends_with(".jsonl").then_some(primary)
}

/// Recovery before a session in `dir` is opened for writing or created: orphaned backups
/// are put back ([`recover_orphaned_backups`]) and orphaned temp files removed
/// ([`remove_orphaned_temps`]). Best effort (a failure leaves things as they are, for the
/// next time); nothing is done in a legacy directory ([`is_legacy_dir_name`]).
pub fn recover_dir(storage: &dyn SessionStorage, dir: &Path) {
    let legacy = dir
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(is_legacy_dir_name);
    if legacy || !storage.exists(dir) {
        return;
    }
    let _ = recover_orphaned_backups(storage, dir);
    let _ = remove_orphaned_temps(storage, dir);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{Fault, FaultKind, MemoryStorage};

    /// The operations of the target's lock before the rename: its open and its lock, on
    /// Unix only ([`lock_target`]).
    const LOCK_OPS: u64 = if cfg!(unix) { 2 } else { 0 };

    fn setup() -> (MemoryStorage, PathBuf) {
        let storage = MemoryStorage::new();
        storage.ensure_dir(Path::new("/s")).unwrap();
        let target = PathBuf::from("/s/a.jsonl");
        storage.put_file(&target, b"old\n");
        (storage, target)
    }

    fn replace(storage: &MemoryStorage, target: &Path) -> io::Result<()> {
        atomic_replace(storage, target, |w| w.write_all(b"new\n"))
    }

    #[test]
    fn replaces_and_leaves_no_temp() {
        let (storage, target) = setup();
        replace(&storage, &target).unwrap();
        assert_eq!(storage.file(&target).unwrap(), b"new\n");
        assert_eq!(storage.paths(), vec![target]);
    }

    #[test]
    fn eperm_rename_falls_back_to_a_backup_dance() {
        let (storage, target) = setup();
        // open_writer, write, fsync, the target opened and locked (on Unix), rename(EPERM),
        // rename to .bak, rename in, unlink, close.
        let rename_at = storage.op_count() + 3 + LOCK_OPS;
        storage.set_fault(Some(Fault {
            at: rename_at,
            kind: FaultKind::Errno(libc::EPERM),
        }));
        replace(&storage, &target).unwrap();
        assert_eq!(storage.file(&target).unwrap(), b"new\n");
        assert_eq!(storage.paths(), vec![target]);
    }

    #[test]
    fn failed_rollback_is_reported_and_the_backup_is_recovered() {
        let (storage, target) = setup();
        let base = storage.op_count();
        // After the target's lock: rename(EPERM) at +3, target→backup at +4, temp→target
        // fails at +5, rollback at +6.
        let fail = |at, errno| Fault {
            at: base + LOCK_OPS + at,
            kind: FaultKind::Errno(errno),
        };
        storage.set_faults(vec![
            fail(3, libc::EPERM),
            fail(5, libc::EIO),
            fail(6, libc::EIO),
        ]);
        let err = replace(&storage, &target).unwrap_err();
        assert!(err.to_string().contains("rollback from"), "{err}");
        assert_eq!(err.raw_os_error(), None);
        assert!(storage.file(&target).is_none());
        storage.set_fault(None);
        let restored = recover_orphaned_backups(&storage, Path::new("/s")).unwrap();
        assert_eq!(restored, vec![target.clone()]);
        assert_eq!(storage.file(&target).unwrap(), b"old\n");
        assert_eq!(storage.paths(), vec![target]);
    }

    #[test]
    fn orphan_recovery_picks_the_newest_backup_and_leaves_existing_files() {
        let storage = MemoryStorage::new();
        let dir = Path::new("/s");
        storage.ensure_dir(dir).unwrap();
        storage.put_file(&dir.join("x.jsonl.1.bak"), b"older");
        storage.put_file(&dir.join("x.jsonl.2.bak"), b"newer");
        storage.put_file(&dir.join("y.jsonl"), b"live");
        storage.put_file(&dir.join("y.jsonl.3.bak"), b"stale");
        storage.put_file(&dir.join(".z.jsonl.4.bak"), b"hidden");
        storage.put_file(&dir.join("notes.txt.5.bak"), b"other");
        let restored = recover_orphaned_backups(&storage, dir).unwrap();
        assert_eq!(restored, vec![dir.join("x.jsonl")]);
        assert_eq!(storage.file(&dir.join("x.jsonl")).unwrap(), b"newer");
        assert_eq!(storage.file(&dir.join("y.jsonl")).unwrap(), b"live");
        assert!(storage.file(&dir.join(".z.jsonl")).is_none());
    }

    #[test]
    fn a_failing_check_before_the_rename_replaces_nothing_and_removes_the_temp() {
        let (storage, target) = setup();
        let calls = std::cell::Cell::new(0);
        let check = || {
            calls.set(calls.get() + 1);
            match calls.get() {
                1 => Ok(()),
                _ => Err(Refusal::ChangedOnDisk.into()),
            }
        };
        let err = atomic_replace_checked(&storage, &target, &check, |w| w.write_all(b"new\n"))
            .unwrap_err();
        assert!(matches!(Refusal::of(&err), Some(Refusal::ChangedOnDisk)));
        assert_eq!(calls.get(), 2);
        assert_eq!(storage.file(&target).unwrap(), b"old\n");
        assert_eq!(storage.paths(), vec![target]);
    }

    #[test]
    fn a_temp_file_being_written_here_is_never_taken_for_an_orphan() {
        let (storage, target) = setup();
        let dir = Path::new("/s");
        let mut seen = Vec::new();
        atomic_replace(&storage, &target, |w| {
            // Another session of the same directory opened meanwhile, in this process.
            recover_dir(&storage, dir);
            seen = storage.paths();
            w.write_all(b"new\n")
        })
        .unwrap();
        assert_eq!(
            seen.len(),
            2,
            "the temp file survived the recovery: {seen:?}"
        );
        assert_eq!(storage.file(&target).unwrap(), b"new\n");
        // A temp file nobody writes is removed however young it is; the sweep after a
        // rewrite of a session takes only that session's.
        storage.put_file(&dir.join(".a.jsonl.15e509ad4fde4d76.tmp"), b"killed");
        storage.put_file(&dir.join(".b.jsonl.78.tmp"), b"another session's");
        let removed = remove_orphaned_temps_of(&storage, &target).unwrap();
        assert_eq!(removed, [dir.join(".a.jsonl.15e509ad4fde4d76.tmp")]);
        assert_eq!(
            storage.paths(),
            [dir.join(".b.jsonl.78.tmp"), target.clone()],
            "the other session's is left for its own recovery"
        );
    }

    #[test]
    fn orphaned_temps_are_removed_unless_held_open_and_never_in_legacy_dirs() {
        let storage = MemoryStorage::new();
        for dir in ["/s", "/--legacy--"] {
            storage.ensure_dir(Path::new(dir)).unwrap();
            storage.put_file(&Path::new(dir).join(".a.jsonl.123.tmp"), b"half");
        }
        let held = Path::new("/s/.b.jsonl.456.tmp");
        storage.put_file(held, b"being written");
        storage.set_foreign_writers(held, vec![42]);
        storage.put_file(Path::new("/s/.notes.txt.1.tmp"), b"other");
        recover_dir(&storage, Path::new("/s"));
        recover_dir(&storage, Path::new("/--legacy--"));
        assert_eq!(
            storage.paths(),
            [
                PathBuf::from("/--legacy--/.a.jsonl.123.tmp"),
                PathBuf::from("/s/.b.jsonl.456.tmp"),
                PathBuf::from("/s/.notes.txt.1.tmp"),
            ]
        );
    }
}
