//! Atomic full rewrites of a session file (details §9.4).
//!
//! The new content goes to `.<name>.<snowflake>.tmp` in the same directory, which is written,
//! fsynced and closed, then renamed over the target, so the target is at every moment either
//! the old file or the new one. If the rename fails with EPERM (filesystems that refuse to
//! rename over an open file), the target is first moved to `<name>.<snowflake>.bak`, the temp
//! file renamed into place, and the backup removed; if the second rename fails the backup is
//! renamed back. A crash in between leaves the backup, which
//! [`recover_orphaned_backups`] puts back when the target is missing.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use crate::engine::ids::snowflake;
use crate::engine::storage::{OpenMode, SessionStorage, StorageWriter};

fn sibling(target: &Path, name: String) -> PathBuf {
    target.with_file_name(name)
}

fn base_name(target: &Path) -> String {
    target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Replaces `target` with the bytes `write` produces, atomically.
pub fn atomic_replace(
    storage: &dyn SessionStorage,
    target: &Path,
    write: impl FnOnce(&mut dyn StorageWriter) -> io::Result<()>,
) -> io::Result<()> {
    let base = base_name(target);
    let temp = sibling(target, format!(".{base}.{}.tmp", snowflake()));
    let mut writer = storage.open_writer(&temp, OpenMode::CreateNew)?;
    let written = write(writer.as_mut()).and_then(|()| writer.fsync());
    let closed = writer.close();
    let result = written
        .and(closed)
        .and_then(|()| match storage.rename(&temp, target) {
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                replace_with_backup(storage, &temp, target, e)
            }
            other => other,
        });
    if result.is_err() {
        let _ = storage.unlink(&temp);
    }
    result
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
        let Some(stem) = name.strip_suffix(".bak").filter(|_| !name.starts_with('.')) else {
            continue;
        };
        let Some((primary, _)) = stem.rsplit_once('.') else {
            continue;
        };
        if !primary.ends_with(".jsonl") {
            continue;
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::storage::{Fault, FaultKind, MemoryStorage};

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
        // open_writer, write, fsync, close, rename(EPERM), rename to .bak, rename in, unlink.
        let rename_at = storage.op_count() + 4;
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
        // rename(EPERM) at +4, target→backup at +5, temp→target fails at +6, rollback at +7.
        let fail = |at, errno| Fault {
            at: base + at,
            kind: FaultKind::Errno(errno),
        };
        storage.set_faults(vec![
            fail(4, libc::EPERM),
            fail(6, libc::EIO),
            fail(7, libc::EIO),
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
}
