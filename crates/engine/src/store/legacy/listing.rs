//! Attributing transcripts by their header cwd, revalidating a listed candidate, and listing
//! the candidates of a workspace.

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};

use crate::json;
use crate::storage::{EntryKind, SessionStorage};
use crate::store::scope::{
    check_binding, read_binding, resolve_identity_in, verify_owner_only, Identity, ScopeError,
    BINDING_FILE,
};

use super::capture::{finish_capture, open_regular, read_on, CaptureError, Snapshot};
use super::names::legacy_dirs_in;
use super::records::ScopeRecords;
use super::{
    absolute, changed, io_err, why, Candidate, CandidateListing, InvalidCandidate, LegacyError,
    LegacyRoots, LegacyStore, Provenance, Workspace, HEADER_MAX_BYTES,
};

/// The header's `id` and `cwd`, when the first line (within 64 KiB) is a session header.
pub(super) fn header_fields(bytes: &[u8]) -> Option<(String, String)> {
    let window = &bytes[..bytes.len().min(HEADER_MAX_BYTES)];
    let end = memchr::memchr(b'\n', window)?;
    let value = json::parse(&String::from_utf8_lossy(&window[..end])).ok()?;
    let header = value.as_object()?;
    if header.get_str("type") != Some("session") {
        return None;
    }
    Some((
        header.get_str("id")?.to_owned(),
        header.get_str("cwd")?.to_owned(),
    ))
}

pub(super) enum Ownership {
    Owned,
    Foreign,
    Invalid(&'static str),
}

pub(super) fn ownership(storage: &dyn SessionStorage, cwd: &str, identity: &Identity) -> Ownership {
    match resolve_identity_in(storage, Path::new(cwd)) {
        Ok(resolved) if &resolved == identity => Ownership::Owned,
        Ok(_) => Ownership::Foreign,
        Err(ScopeError::NetworkUnsupported { .. }) => Ownership::Invalid("cwd_network_unsupported"),
        Err(ScopeError::ServedElsewhere { .. }) => Ownership::Invalid("cwd_served_elsewhere"),
        Err(_) => match storage.canonicalize_local(Path::new(cwd)) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ownership::Invalid("cwd_not_found"),
            Ok(real) if storage.lstat(&real).is_ok_and(|s| s.kind != EntryKind::Dir) => {
                Ownership::Invalid("cwd_not_directory")
            }
            _ => Ownership::Invalid("cwd_identity_unavailable"),
        },
    }
}

pub(super) enum Inspection {
    Owned(Box<(Candidate, Snapshot)>),
    Foreign,
    Invalid(&'static str),
}

/// Attributes one transcript. Only the header window is read of a file that turns out not to
/// be owned; an owned one is read whole and hashed.
pub(super) fn inspect(
    storage: &dyn SessionStorage,
    path: &Path,
    provenance: Provenance,
    identity: &Identity,
) -> Inspection {
    let failed = |e: CaptureError| match e {
        CaptureError::Changed => Inspection::Invalid("source_changed"),
        CaptureError::Unreadable => Inspection::Invalid("unreadable_candidate"),
    };
    let opened = match open_regular(storage, path) {
        Ok(opened) => opened,
        Err(e) => return failed(e),
    };
    let mut start = Vec::new();
    if read_on(opened.file.as_ref(), &mut start, HEADER_MAX_BYTES).is_err() {
        return Inspection::Invalid("unreadable_candidate");
    }
    let Some((session_id, cwd)) = header_fields(&start) else {
        return Inspection::Invalid("invalid_header");
    };
    match ownership(storage, &cwd, identity) {
        Ownership::Owned => {}
        Ownership::Foreign => return Inspection::Foreign,
        Ownership::Invalid(code) => return Inspection::Invalid(code),
    }
    let snapshot = match finish_capture(storage, path, opened, start) {
        Ok(s) => s,
        Err(e) => return failed(e),
    };
    let candidate = Candidate {
        path: path.to_owned(),
        session_id,
        cwd,
        provenance,
        identity: snapshot.stat.identity(snapshot.sha256.clone()),
    };
    Inspection::Owned(Box::new((candidate, snapshot)))
}

/// Re-reads `candidate` and returns its bytes when it is still exactly the listed version.
pub(super) fn revalidate(
    storage: &dyn SessionStorage,
    candidate: &Candidate,
    identity: &Identity,
) -> Result<Snapshot, LegacyError> {
    let stale = |why: &str| why_changed(&candidate.path, why);
    match inspect(storage, &candidate.path, candidate.provenance, identity) {
        Inspection::Owned(found) => {
            let (current, snapshot) = *found;
            if current.identity != candidate.identity {
                return Err(stale("the file differs from the listed version"));
            }
            if current.session_id != candidate.session_id || current.cwd != candidate.cwd {
                return Err(stale("the header differs from the listed one"));
            }
            Ok(snapshot)
        }
        Inspection::Foreign => Err(stale("the header now names another workspace")),
        Inspection::Invalid(code) => Err(stale(code)),
    }
}

pub(super) fn why_changed(path: &Path, text: &str) -> LegacyError {
    why(path, changed, text)
}

/// The `*.jsonl` files of `dir`, by name; a missing directory has none.
pub(super) fn transcript_paths(
    storage: &dyn SessionStorage,
    dir: &Path,
) -> Result<Vec<PathBuf>, LegacyError> {
    match storage.lstat(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(dir)(e)),
        Ok(stat) if stat.kind != EntryKind::Dir => {
            return Err(LegacyError::UnsafeDirectory {
                path: dir.to_owned(),
                why: "not a real directory (a symlink or another file type)".into(),
            })
        }
        Ok(_) => {}
    }
    let mut paths = Vec::new();
    for (path, _) in storage.list_entries(dir).map_err(io_err(dir))? {
        if path
            .file_name()
            .is_some_and(|n| n.as_encoded_bytes().ends_with(b".jsonl"))
        {
            paths.push(path);
        }
    }
    Ok(paths)
}

/// An existing scope directory must be owner-only and carry the right binding (if any).
pub(super) fn verify_existing_scope(
    storage: &dyn SessionStorage,
    scope_dir: &Path,
    identity: &Identity,
) -> Result<(), LegacyError> {
    match storage.lstat(scope_dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(scope_dir)(e)),
        Ok(_) => {}
    }
    verify_owner_only(storage, scope_dir, true)?;
    let binding = scope_dir.join(BINDING_FILE);
    if let Some(bytes) = read_binding(storage, &binding)? {
        check_binding(&binding, &bytes, identity)?;
    }
    Ok(())
}

/// The sessions of the workspace at `cwd`: the v2 scope first, then its legacy directories.
/// Retired candidates are hidden; a legacy candidate whose committed receipt names a listed
/// v2 copy is hidden and that copy is marked [`Provenance::MigratedV2`]. Creates nothing.
pub fn list_candidates(
    sessions_root: &Path,
    cwd: &Path,
    roots: &LegacyRoots,
) -> Result<CandidateListing, LegacyError> {
    LegacyStore::on_disk().list_candidates(sessions_root, cwd, roots)
}

impl LegacyStore<'_> {
    /// [`list_candidates`] in this store.
    pub fn list_candidates(
        &self,
        sessions_root: &Path,
        cwd: &Path,
        roots: &LegacyRoots,
    ) -> Result<CandidateListing, LegacyError> {
        list(self.storage, sessions_root, cwd, roots)
    }
}

fn list(
    storage: &dyn SessionStorage,
    sessions_root: &Path,
    cwd: &Path,
    roots: &LegacyRoots,
) -> Result<CandidateListing, LegacyError> {
    let ws = Workspace::resolve_in(storage, cwd)?;
    let root = absolute(sessions_root)?;
    match storage.lstat(&root) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(CandidateListing::default()),
        Err(e) => return Err(io_err(&root)(e)),
        Ok(stat) if stat.kind != EntryKind::Dir => {
            return Err(LegacyError::UnsafeDirectory {
                path: root,
                why: "the sessions root is not a real directory".into(),
            })
        }
        Ok(_) => {}
    }
    let scope_dir = ws.scope_dir(&root);
    verify_existing_scope(storage, &scope_dir, &ws.identity)?;
    let mut dirs = vec![(scope_dir.clone(), Provenance::V2)];
    for name in legacy_dirs_in(storage, &root, &ws, roots)? {
        dirs.push((root.join(name), Provenance::Legacy));
    }
    let mut listing = CandidateListing::default();
    let mut seen = HashSet::new();
    for (dir, provenance) in dirs {
        for path in transcript_paths(storage, &dir)? {
            if !seen.insert(path.clone()) {
                continue;
            }
            match inspect(storage, &path, provenance, &ws.identity) {
                Inspection::Owned(found) => listing.owned.push(found.0),
                Inspection::Foreign => listing.foreign.push(path),
                Inspection::Invalid(code) => listing.invalid.push(InvalidCandidate { path, code }),
            }
        }
    }
    let records = ScopeRecords::load(storage, &scope_dir, &ws.digest());
    listing.owned.retain(|c| !records.retires(c));
    let mut hidden = vec![false; listing.owned.len()];
    let mut migrated = vec![false; listing.owned.len()];
    for (i, source) in listing.owned.iter().enumerate() {
        if source.provenance != Provenance::Legacy {
            continue;
        }
        let Some(dest) = records.committed_receipt(source) else {
            continue;
        };
        let copy = listing.owned.iter().position(|c| {
            c.provenance != Provenance::Legacy
                && c.path == dest.path
                && c.session_id == dest.session_id
        });
        if let Some(j) = copy {
            hidden[i] = true;
            migrated[j] = true;
        }
    }
    let mut kept = Vec::with_capacity(listing.owned.len());
    for (i, mut candidate) in listing.owned.into_iter().enumerate() {
        if hidden[i] {
            continue;
        }
        if migrated[i] {
            candidate.provenance = Provenance::MigratedV2;
        }
        kept.push(candidate);
    }
    listing.owned = kept;
    Ok(listing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_need_a_full_first_line() {
        let header = br#"{"type":"session","id":"s","cwd":"/w"}"#;
        assert_eq!(header_fields(header), None, "no newline: invalid");
        let mut line = header.to_vec();
        line.push(b'\n');
        assert_eq!(header_fields(&line), Some(("s".into(), "/w".into())));
        assert_eq!(
            header_fields(b"{\"type\":\"session\",\"id\":1,\"cwd\":\"/w\"}\n"),
            None
        );
        assert_eq!(
            header_fields(b"{\"type\":\"x\",\"id\":\"s\",\"cwd\":\"/w\"}\n"),
            None
        );
        let mut long = br#"{"type":"session","id":"s","cwd":"/w","pad":""#.to_vec();
        long.extend(std::iter::repeat_n(b'x', HEADER_MAX_BYTES));
        long.extend(b"\"}\n");
        assert_eq!(header_fields(&long), None, "header beyond 64 KiB");
    }
}
