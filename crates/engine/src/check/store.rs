//! Walking the store for [`check_store`]: the sessions root's managed scopes and legacy
//! directories (or one session directory), the transcripts in them and what interrupted
//! writes left beside them. Reads only.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};

use super::privacy::privacy_of;
use super::safe_dirs::writable_by_others;
use super::strict::{self, lines_named};
use super::{blobs, journal, kept, CheckProgress, CheckTarget, Repair, Report, Severity};
use crate::format::blob::{is_valid_hash, BLOB_REF_PREFIX};
use crate::manager::temp_file_unused;
use crate::manager::{backup_primary, find_torn_tail, is_legacy_dir_name, temp_file_primary};
use crate::read::load::{
    build_session, load_entries_from_storage, LoadError, LoadStatus, LoadedEntries,
};
use crate::session::tree::Session;
use crate::storage::{EntryKind, Expected, SessionStorage};
use crate::store::discovery::is_transcript_name;
use crate::store::legacy::{lock_state, LockState};
use crate::store::scope::{check_scope_binding, read_binding, BINDING_FILE, INTERNAL_DIR};

/// What kind of directory a transcript lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// A managed v2 scope: transcripts must be owner-only.
    Managed,
    /// A legacy directory: read, never changed.
    Legacy,
    /// A session directory given on its own.
    Plain,
}

/// A transcript to read, and a leftover to judge once the transcripts are read.
struct Walk {
    transcripts: Vec<(PathBuf, Place)>,
    temps: Vec<(PathBuf, PathBuf, Place)>,
    backups: Vec<(PathBuf, PathBuf, Place)>,
}

/// What the transcripts held, for the findings that need all of them.
#[derive(Default)]
struct Seen {
    /// Transcripts that load as sessions.
    loadable: BTreeSet<PathBuf>,
    /// Session id → managed transcripts holding it.
    managed_ids: BTreeMap<String, PathBuf>,
    /// Legacy transcripts and their session ids.
    legacy: Vec<(PathBuf, String)>,
    /// Blob hash → a transcript referencing it.
    blob_refs: BTreeMap<String, PathBuf>,
}

/// Checks the store `target` names and reports what it found (see the module docs of
/// [`super`]). Only reading: nothing is created, changed or removed. `progress` is told
/// after each transcript.
pub fn check_store(
    storage: &dyn SessionStorage,
    target: &CheckTarget,
    progress: &dyn Fn(CheckProgress),
) -> io::Result<Report> {
    let mut report = Report::default();
    let mut walk = Walk {
        transcripts: Vec::new(),
        temps: Vec::new(),
        backups: Vec::new(),
    };
    let store_dirs = [
        &target.repair_base,
        &target.sessions_root,
        &target.session_dir,
    ];
    let mut judged = BTreeSet::new();
    for dir in store_dirs.into_iter().flatten() {
        if judged.insert(dir) {
            open_to_others(storage, dir, target.repair_base.as_deref(), &mut report);
        }
    }
    if let Some(root) = &target.sessions_root {
        walk_sessions_root(storage, root, &mut walk, &mut report)?;
    }
    if let Some(dir) = &target.session_dir {
        let place = if dir_name(dir).is_some_and(is_legacy_dir_name) {
            Place::Legacy
        } else {
            Place::Plain
        };
        walk_dir(storage, dir, place, &mut walk, &mut report)?;
    }
    let mut seen = Seen::default();
    let total = walk.transcripts.len();
    for (done, (path, place)) in walk.transcripts.iter().enumerate() {
        check_transcript(storage, path, *place, &mut seen, &mut report);
        report.sessions += 1;
        progress(CheckProgress {
            files_done: done + 1,
            files_total: total,
        });
    }
    for (temp, primary, place) in &walk.temps {
        judge_temp(storage, temp, primary, *place, &seen, &mut report);
    }
    for (backup, primary, place) in &walk.backups {
        judge_backup(storage, backup, primary, *place, &mut report);
    }
    note_legacy_copies(&seen, &mut report);
    blobs::check_blobs(storage, &target.blob_dir, &seen.blob_refs, &mut report)?;
    if let Some(history) = &target.history_db {
        super::privacy::history_privacy(storage, history, &mut report);
    }
    if let Some(base) = &target.repair_base {
        journal::report_unfinished(storage, base, &mut report);
        kept::report_kept(storage, base, &mut report);
    }
    Ok(report)
}

/// A directory of the store (the agent directory, the sessions root, a session directory)
/// that other users can write: they could put a symlink or another file in place of what
/// is in it. The repair takes group and other write away where this user owns it and it
/// is below the repairs' base; the base itself (where repairs keep their copies) is left
/// for a person, and no repair is made below it until it is closed.
fn open_to_others(
    storage: &dyn SessionStorage,
    dir: &Path,
    base: Option<&Path>,
    report: &mut Report,
) {
    let Ok(stat) = storage.lstat(dir) else {
        return;
    };
    if stat.kind != EntryKind::Dir || !writable_by_others(stat.mode) {
        return;
    }
    let closed = stat.mode & !0o022;
    let mut what = format!(
        "mode {:o}: other users can add, rename and remove what is in it (a symlink in \
         place of a session, a copy of one)",
        stat.mode
    );
    let repairable = stat.owner == storage.user() && base.is_some_and(|b| dir.starts_with(b));
    if base == Some(dir) {
        what.push_str(&format!(
            "; no repair is made in it until it is closed: chmod go-w {}",
            dir.display()
        ));
    }
    let repair = (repairable && base != Some(dir)).then_some(Repair::RestoreMode {
        from: stat.mode,
        to: closed,
        found: Expected::of(&stat),
    });
    report.add(Severity::Warning, "writable_by_others", dir, what, repair);
}

fn dir_name(path: &Path) -> Option<&str> {
    path.file_name().and_then(|n| n.to_str())
}

/// The entries of the sessions root: scopes, legacy directories, and what does not belong.
fn walk_sessions_root(
    storage: &dyn SessionStorage,
    root: &Path,
    walk: &mut Walk,
    report: &mut Report,
) -> io::Result<()> {
    let entries = match storage.list_entries(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for (path, kind) in entries {
        let name = dir_name(&path).unwrap_or_default().to_owned();
        match kind {
            EntryKind::Dir if name.starts_with("v2-") => {
                check_scope(storage, &path, report);
                walk_dir(storage, &path, Place::Managed, walk, report)?;
            }
            EntryKind::Dir if is_legacy_dir_name(&name) => {
                walk_dir(storage, &path, Place::Legacy, walk, report)?;
            }
            EntryKind::Dir => report.add(
                Severity::Note,
                "unknown_directory",
                path,
                "neither a managed scope (v2-…) nor a legacy directory (--…--): the agent \
                 and gjcfs read nothing in it"
                    .into(),
                None,
            ),
            other => stray(report, path, other, "the sessions root"),
        }
    }
    Ok(())
}

/// Reports an entry that does not belong where it is.
fn stray(report: &mut Report, path: PathBuf, kind: EntryKind, place: &str) {
    let what = match kind {
        EntryKind::Symlink => format!(
            "a symlink in {place}: never followed, so nothing it leads to is read; remove it \
             or put what it leads to in place"
        ),
        EntryKind::File => format!(
            "a file in {place} that is not a session: neither the agent nor gjcfs reads \
             it; move it out of the store"
        ),
        _ => format!("a special file in {place} (a FIFO, a socket or a device): never opened"),
    };
    report.add(Severity::Warning, "stray_file", path, what, None);
}

/// A managed scope's own state: the directory's privacy, its binding.
fn check_scope(storage: &dyn SessionStorage, scope: &Path, report: &mut Report) {
    privacy_of(storage, scope, true, report);
    let binding = scope.join(BINDING_FILE);
    match read_binding(storage, &binding) {
        Ok(None) => report.add(
            Severity::Error,
            "broken_binding",
            binding,
            "the scope has no binding file: the agent and gjcfs refuse to read or write its \
             sessions until one naming its workspace is in place"
                .into(),
            None,
        ),
        Err(e) => report.add(
            Severity::Error,
            "broken_binding",
            binding,
            format!("{e}: the agent and gjcfs refuse the scope's sessions"),
            None,
        ),
        Ok(Some(bytes)) => {
            if let Err(e) = check_scope_binding(scope, &bytes) {
                report.add(
                    Severity::Error,
                    "broken_binding",
                    binding.clone(),
                    format!("{e}: the agent and gjcfs refuse the scope's sessions"),
                    None,
                );
            }
            privacy_of(storage, &binding, false, report);
        }
    }
}

/// The entries of one directory of sessions.
fn walk_dir(
    storage: &dyn SessionStorage,
    dir: &Path,
    place: Place,
    walk: &mut Walk,
    report: &mut Report,
) -> io::Result<()> {
    let entries = match storage.list_entries(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            report.add(
                Severity::Error,
                "unreadable",
                dir,
                format!("cannot list the directory: {e}"),
                None,
            );
            return Ok(());
        }
    };
    let names: BTreeSet<String> = entries
        .iter()
        .filter_map(|(p, _)| dir_name(p).map(str::to_owned))
        .collect();
    for (path, kind) in entries {
        let name = dir_name(&path).unwrap_or_default().to_owned();
        match kind {
            EntryKind::File if is_transcript_name(&name) => walk.transcripts.push((path, place)),
            EntryKind::File if name == BINDING_FILE && place == Place::Managed => {}
            EntryKind::File => {
                if let Some(primary) = temp_file_primary(&name) {
                    walk.temps.push((path.clone(), dir.join(primary), place));
                } else if let Some(primary) = backup_primary(&name) {
                    walk.backups.push((path.clone(), dir.join(primary), place));
                } else if place != Place::Legacy {
                    stray(report, path, kind, "a session directory");
                }
            }
            EntryKind::Dir if name == INTERNAL_DIR && place == Place::Managed => {
                check_internal(storage, &path, report);
            }
            // A transcript's artifacts directory (its path without `.jsonl`).
            EntryKind::Dir if names.contains(&format!("{name}.jsonl")) => {}
            EntryKind::Dir => {}
            other if place != Place::Legacy => stray(report, path, other, "a session directory"),
            _ => {}
        }
    }
    Ok(())
}

/// A scope's internal directory: migration locks a crash left.
fn check_internal(storage: &dyn SessionStorage, internal: &Path, report: &mut Report) {
    let locks = internal.join("locks");
    let Ok(entries) = storage.list_entries(&locks) else {
        return;
    };
    for (path, kind) in entries {
        if kind != EntryKind::File || !dir_name(&path).is_some_and(|n| n.ends_with(".lock")) {
            continue;
        }
        match lock_state(storage, &path) {
            Some(LockState::Stale) => report.add(
                Severity::Warning,
                "stale_lock",
                path,
                "a migration lock whose migration is gone (its lease ran out and its process \
                 no longer runs): the next migration of that session waits for it or takes it \
                 over"
                    .into(),
                Some(Repair::MoveAway),
            ),
            Some(LockState::Held) => report.add(
                Severity::Note,
                "held_lock",
                path,
                "a migration is under way".into(),
                None,
            ),
            Some(LockState::Released) | None => {}
        }
    }
}

/// One transcript: privacy (managed), whether it loads, its lines, what the strict checks
/// refuse, its tree, its blobs.
fn check_transcript(
    storage: &dyn SessionStorage,
    path: &Path,
    place: Place,
    seen: &mut Seen,
    report: &mut Report,
) {
    if place == Place::Managed {
        privacy_of(storage, path, false, report);
    }
    let Some(mut loaded) = loaded_session(storage, path, report) else {
        return;
    };
    seen.loadable.insert(path.to_owned());
    report_damaged_lines(storage, path, place, &loaded, report);
    if let Some(at) = loaded.invalid_utf8 {
        strict::report_invalid_utf8(storage, path, at, report);
    }
    let record_lines = std::mem::take(&mut loaded.record_lines);
    let built = build_session(loaded.records, loaded.summaries);
    let session = built.session;
    strict::report_refused_records(&session, &record_lines, path, report);
    report_orphans(&session, path, report);
    let id = session.header().id().unwrap_or_default().to_owned();
    match place {
        Place::Managed => {
            seen.managed_ids.insert(id, path.to_owned());
        }
        Place::Legacy => seen.legacy.push((path.to_owned(), id)),
        Place::Plain => {}
    }
    if let Err(e) = scan_blob_refs(storage, path, &mut seen.blob_refs) {
        report.add(Severity::Error, "unreadable", path, e.to_string(), None);
    }
}

/// The session's entries, when it loads as a session; else what stops it is reported.
fn loaded_session(
    storage: &dyn SessionStorage,
    path: &Path,
    report: &mut Report,
) -> Option<LoadedEntries> {
    let loaded = match load_entries_from_storage(storage, path) {
        Ok(loaded) => loaded,
        Err(LoadError::UnsupportedVersion { version, .. }) => {
            report.add(
                Severity::Note,
                "future_version",
                path,
                format!("written by a newer agent (version {version}): gjcfs reads none of it"),
                None,
            );
            return None;
        }
        Err(e) => {
            report.add(Severity::Error, "unreadable", path, e.to_string(), None);
            return None;
        }
    };
    match loaded.status {
        LoadStatus::Loaded => Some(loaded),
        LoadStatus::Missing => None,
        LoadStatus::NotASession => {
            report.add(
                Severity::Error,
                "not_a_session",
                path,
                "its first record is not a session header: no reader shows it, and gjcfs \
                 refuses to write it; if it was a session, its header line is damaged"
                    .into(),
                None,
            );
            None
        }
    }
}

/// Reports lines that are not records, and a torn last line.
fn report_damaged_lines(
    storage: &dyn SessionStorage,
    path: &Path,
    place: Place,
    loaded: &LoadedEntries,
    report: &mut Report,
) {
    let ends_torn = loaded.mark.as_ref().is_some_and(|m| m.torn());
    let last_line = loaded.mark.as_ref().map_or(0, |m| m.newlines + 1);
    let mut malformed: Vec<usize> = Vec::new();
    for skipped in &loaded.skipped {
        if ends_torn && skipped.line == last_line {
            continue;
        }
        malformed.push(skipped.line);
    }
    if ends_torn && loaded.skipped.iter().any(|s| s.line == last_line) {
        torn_tail(storage, path, place, report);
    }
    if !malformed.is_empty() {
        report.add(
            Severity::Error,
            "malformed_line",
            path,
            format!(
                "{} not a record: readers skip {}, and the agent refuses to resume the \
                 session (its strict checks fail); look at {} and mend or remove {}",
                lines_named(&malformed),
                if malformed.len() == 1 { "it" } else { "them" },
                if malformed.len() == 1 { "it" } else { "them" },
                if malformed.len() == 1 { "it" } else { "them" },
            ),
            None,
        );
    }
}

/// Reports entries whose parent the session does not hold.
fn report_orphans(session: &Session, path: &Path, report: &mut Report) {
    let mut orphans = session.entries().filter(|entry| {
        entry
            .parent_id()
            .is_some_and(|parent| session.index_of(parent).is_none())
    });
    if let Some(first) = orphans.next() {
        let count = 1 + orphans.count();
        report.add(
            Severity::Error,
            "missing_parent",
            path,
            format!(
                "{count} {} a parent the session does not hold (first: {} under {}): each \
                 starts a branch of its own, cut off from the conversation before it",
                if count == 1 {
                    "entry names"
                } else {
                    "entries name"
                },
                first.id().unwrap_or("?"),
                first.parent_id().unwrap_or("?"),
            ),
            None,
        );
    }
}

/// A transcript whose last line has no newline and is not a record.
fn torn_tail(storage: &dyn SessionStorage, path: &Path, place: Place, report: &mut Report) {
    match find_torn_tail(storage, path) {
        Some(cut) => report.add(
            Severity::Error,
            "torn_tail",
            path,
            format!(
                "the last line ({} bytes at byte {}) is part of a line a crash was writing: \
                 readers skip it, and the agent refuses to resume the session until it is cut",
                cut.len, cut.offset
            ),
            (place != Place::Legacy).then_some(Repair::CutTornTail {
                offset: cut.offset,
                len: cut.len,
            }),
        ),
        None => report.add(
            Severity::Error,
            "torn_tail",
            path,
            "the last line is torn, but it could be a record or the lines before it fail \
             the strict checks too: look at the end of the file before cutting anything"
                .into(),
            None,
        ),
    }
}

/// The blob hashes the file at `path` references (`blob:sha256:<hex>` anywhere in it),
/// read in chunks (a reference across a chunk's end is found in the next).
fn scan_blob_refs(
    storage: &dyn SessionStorage,
    path: &Path,
    refs: &mut BTreeMap<String, PathBuf>,
) -> io::Result<()> {
    const CHUNK: usize = 4 << 20;
    let reference = BLOB_REF_PREFIX.len() + 64;
    let file = storage.open_read_at(path)?;
    let size = file.size()?;
    let finder = memchr::memmem::Finder::new(BLOB_REF_PREFIX.as_bytes());
    let mut buf = vec![0u8; CHUNK + reference];
    let mut at = 0u64;
    while at < size {
        let want = usize::try_from(size - at)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let mut got = 0;
        while got < want {
            match file.read_at(&mut buf[got..want], at + got as u64)? {
                0 => break,
                n => got += n,
            }
        }
        let bytes = &buf[..got];
        for start in finder.find_iter(bytes) {
            let hash = &bytes[start + BLOB_REF_PREFIX.len()..];
            let Some(hash) = hash.get(..64).and_then(|h| std::str::from_utf8(h).ok()) else {
                continue;
            };
            if is_valid_hash(hash) && !refs.contains_key(hash) {
                refs.insert(hash.to_owned(), path.to_owned());
            }
        }
        if got < buf.len() {
            break;
        }
        // The next chunk starts early enough to hold whole a reference this one cut.
        at += (got - reference) as u64;
    }
    Ok(())
}

/// A rewrite's temp file: removable once nobody writes it and its session is intact.
fn judge_temp(
    storage: &dyn SessionStorage,
    temp: &Path,
    primary: &Path,
    place: Place,
    seen: &Seen,
    report: &mut Report,
) {
    if !temp_file_unused(storage, temp) {
        report.add(
            Severity::Note,
            "rewrite_in_progress",
            temp,
            format!("a rewrite of {} is writing it now", primary.display()),
            None,
        );
        return;
    }
    let intact = seen.loadable.contains(primary);
    let (what, repair) = match (intact, place) {
        (true, Place::Legacy) => (
            "the temp file of a rewrite a crash interrupted; its session is intact. In a \
             legacy directory gjcfs changes nothing: remove it by hand"
                .to_owned(),
            None,
        ),
        (true, _) => (
            "the temp file of a rewrite a crash interrupted; its session is intact, and the \
             temp file holds nothing it needs"
                .to_owned(),
            Some(Repair::MoveAway),
        ),
        (false, _) => (
            format!(
                "the temp file of a rewrite a crash interrupted, and its session {} is \
                 missing or does not load: it may hold the only copy; look at it before \
                 removing anything",
                primary.display()
            ),
            None,
        ),
    };
    report.add(Severity::Warning, "orphaned_temp", temp, what, repair);
}

/// A rewrite's backup: put back when its session is missing, else left.
fn judge_backup(
    storage: &dyn SessionStorage,
    backup: &Path,
    primary: &Path,
    place: Place,
    report: &mut Report,
) {
    if storage.exists(primary) {
        report.add(
            Severity::Warning,
            "orphaned_backup",
            backup,
            format!(
                "an older copy of {} that an interrupted rewrite left; the session file is in \
                 place: compare the two, then remove this one by hand",
                primary.display()
            ),
            None,
        );
        return;
    }
    report.add(
        Severity::Error,
        "orphaned_backup",
        backup,
        format!(
            "the session file {} is missing, and this is its copy from before an interrupted \
             rewrite (`check --repair --restore-deleted` renames it back)",
            primary.display()
        ),
        (place != Place::Legacy).then(|| Repair::RestoreBackup {
            to: primary.to_owned(),
        }),
    );
}

/// Each legacy session, with or without its managed copy.
fn note_legacy_copies(seen: &Seen, report: &mut Report) {
    for (path, id) in &seen.legacy {
        let what = match seen.managed_ids.get(id) {
            Some(copy) => format!(
                "a legacy session; its managed copy {} is the live one (the agent and gjcfs \
                 write only the copy)",
                copy.display()
            ),
            None => "a legacy session without a managed copy: the first write copies it into \
                     its workspace's managed scope"
                .to_owned(),
        };
        let kind = if seen.managed_ids.contains_key(id) {
            "legacy_with_copy"
        } else {
            "legacy_without_copy"
        };
        report.add(Severity::Note, kind, path.clone(), what, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::MemoryStorage;

    #[test]
    fn blob_references_are_found_across_chunk_ends() {
        let storage = MemoryStorage::new();
        storage.ensure_dir(Path::new("/s")).unwrap();
        let hash = "a".repeat(64);
        let reference = format!("{BLOB_REF_PREFIX}{hash}");
        // Put one reference across the first chunk's end.
        let mut text = "x".repeat((4 << 20) - 20);
        text.push_str(&reference);
        text.push_str(&format!(" {BLOB_REF_PREFIX}{}", "b".repeat(64)));
        text.push_str(&format!(" {BLOB_REF_PREFIX}not-a-hash"));
        storage.put_file(Path::new("/s/t.jsonl"), text.as_bytes());
        let mut refs = BTreeMap::new();
        scan_blob_refs(&storage, Path::new("/s/t.jsonl"), &mut refs).unwrap();
        let found: Vec<&String> = refs.keys().collect();
        assert_eq!(found, [&hash, &"b".repeat(64)]);
    }
}
