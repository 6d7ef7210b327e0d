//! The blob store's part of a check: each blob's bytes against its name, blobs no session
//! references, references no blob answers, temp files of interrupted writes, modes.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use super::{Repair, Report, Severity};
use crate::format::blob::{is_valid_hash, sha256_hex};
use crate::storage::{EntryKind, SessionStorage};

/// The process id in a blob temp file's name (`<hash>.tmp.<pid>.<ms>.<random>`).
fn temp_writer(name: &str) -> Option<i64> {
    let (hash, rest) = name.split_once(".tmp.")?;
    if !is_valid_hash(hash) {
        return None;
    }
    rest.split('.').next()?.parse().ok()
}

/// Checks the blob store at `dir` against `referenced` (hash → a transcript referencing
/// it) and reports what it finds. Reads only.
pub(super) fn check_blobs(
    storage: &dyn SessionStorage,
    dir: &Path,
    referenced: &BTreeMap<String, PathBuf>,
    report: &mut Report,
) -> io::Result<()> {
    let entries = match storage.list_entries(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    if !entries.is_empty() || storage.exists(dir) {
        super::privacy::privacy_of(storage, dir, true, report);
    }
    let mut present = std::collections::BTreeSet::new();
    for (path, kind) in entries {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        match kind {
            EntryKind::File if is_valid_hash(&name) => {
                present.insert(name.clone());
                report.blobs += 1;
                check_blob(storage, &path, &name, referenced, report);
            }
            EntryKind::File if temp_writer(&name).is_some() => {
                judge_blob_temp(storage, &path, &name, report);
            }
            other => {
                let what = match other {
                    EntryKind::Symlink => "a symlink in the blob store: never followed",
                    _ => "not a blob (its name is not a SHA-256): no reader uses it",
                };
                report.add(Severity::Warning, "stray_file", path, what.to_owned(), None);
            }
        }
    }
    for (hash, by) in referenced {
        if !present.contains(hash) {
            report.add(
                Severity::Error,
                "missing_blob",
                dir.join(hash),
                format!(
                    "{} references this blob, which the blob store lacks: readers show it as \
                     unavailable (an image, or text a compaction moved out of the session)",
                    by.display()
                ),
                None,
            );
        }
    }
    Ok(())
}

/// One blob: its privacy, its bytes against its name, whether anything references it.
fn check_blob(
    storage: &dyn SessionStorage,
    path: &Path,
    hash: &str,
    referenced: &BTreeMap<String, PathBuf>,
    report: &mut Report,
) {
    super::privacy::privacy_of(storage, path, false, report);
    match storage.read(path) {
        Ok(bytes) => {
            let actual = sha256_hex(&bytes);
            if actual != hash {
                report.add(
                    Severity::Error,
                    "corrupt_blob",
                    path,
                    format!(
                        "its bytes hash to {actual}, not to its name: readers refuse it and \
                         show it as unavailable; if a copy with the right bytes exists \
                         elsewhere, put that in its place"
                    ),
                    None,
                );
            }
        }
        Err(e) => report.add(
            Severity::Error,
            "unreadable",
            path,
            format!("cannot read the blob: {e}"),
            None,
        ),
    }
    if !referenced.contains_key(hash) {
        report.add(
            Severity::Note,
            "unreferenced_blob",
            path,
            "no session of this store references it (its session was deleted, or another \
             store shares this blob directory); remove it by hand only if none does"
                .into(),
            None,
        );
    }
}

/// A temp file an interrupted blob write left: moved away once its writer is gone.
fn judge_blob_temp(storage: &dyn SessionStorage, path: &Path, name: &str, report: &mut Report) {
    let pid = temp_writer(name).and_then(|pid| i32::try_from(pid).ok());
    let alive = pid.is_some_and(|pid| pid > 0 && crate::storage::sys::os::process_exists(pid));
    let written = !storage.writers_elsewhere(path).is_ok_and(|w| w.is_empty());
    if alive || written {
        report.add(
            Severity::Note,
            "blob_write_in_progress",
            path,
            "a blob is being written".into(),
            None,
        );
        return;
    }
    report.add(
        Severity::Warning,
        "orphaned_temp",
        path,
        "the temp file of a blob write a crash interrupted (its process is gone): the blob \
         itself is written again by whoever needs it"
            .into(),
        Some(Repair::MoveAway),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blob_temp_names_its_writer() {
        let hash = "c".repeat(64);
        assert_eq!(
            temp_writer(&format!("{hash}.tmp.4242.1700000000000.0abc1234")),
            Some(4242)
        );
        assert_eq!(temp_writer("x.tmp.1.2.3"), None);
        assert_eq!(temp_writer(&hash), None);
    }
}
