//! Artifact trees: the bounded no-follow walk, the manifest, and the staged no-replace copy.

use std::io;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::format::ids::snowflake;
use crate::json::Value;
use crate::storage::{remove_tree, EntryKind, OpenMode, ReadFile, SessionStorage};

use super::capture::{sync_dir, Stat};
use super::listing::why_changed;
use super::lock::MigrationLock;
use super::records::{object, string};
use super::{
    conflict, io_err, unsafe_artifacts, why, LegacyError, ARTIFACT_MAX_DEPTH, ARTIFACT_MAX_FILES,
    ARTIFACT_MAX_FILE_BYTES, ARTIFACT_MAX_TOTAL_BYTES,
};

/// The artifacts directory of a transcript: its path minus `.jsonl`.
pub fn artifacts_dir(transcript: &Path) -> PathBuf {
    if transcript.extension().is_some_and(|e| e == "jsonl") {
        transcript.with_extension("")
    } else {
        transcript.to_owned()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TreeEntry {
    /// `/`-separated path below the root; `""` for the root.
    pub(super) rel: String,
    pub(super) dir: bool,
    pub(super) stat: Stat,
    pub(super) sha256: Option<String>,
}

/// One entry of a receipt's `artifactManifest`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct ManifestEntry {
    pub(super) path: String,
    /// `directory` sorts before `file`.
    pub(super) kind: &'static str,
    pub(super) sha256: Option<String>,
    pub(super) size: u64,
}

pub(super) fn manifest(tree: &[TreeEntry]) -> Vec<ManifestEntry> {
    let mut entries: Vec<ManifestEntry> = tree
        .iter()
        .map(|e| ManifestEntry {
            path: e.rel.clone(),
            kind: if e.dir { "directory" } else { "file" },
            sha256: e.sha256.clone(),
            size: if e.dir { 0 } else { e.stat.size() },
        })
        .collect();
    entries.sort();
    entries
}

pub(super) fn manifest_json(entries: &[ManifestEntry]) -> Value {
    Value::Array(
        entries
            .iter()
            .map(|e| match &e.sha256 {
                Some(sha) if e.kind == "file" => object(vec![
                    ("kind", string("file")),
                    ("path", string(e.path.clone())),
                    ("sha256", string(sha.clone())),
                    ("size", Value::number(e.size as f64)),
                ]),
                _ => object(vec![
                    ("kind", string("directory")),
                    ("path", string(e.path.clone())),
                ]),
            })
            .collect(),
    )
}

pub(super) struct Walk<'a> {
    pub(super) storage: &'a dyn SessionStorage,
    pub(super) root: &'a Path,
    pub(super) hash: bool,
    pub(super) files: usize,
    pub(super) bytes: u64,
    pub(super) entries: Vec<TreeEntry>,
    pub(super) tick: &'a mut dyn FnMut() -> Result<(), LegacyError>,
}

impl Walk<'_> {
    fn visit(&mut self, dir: &Path, rel: &str, depth: usize) -> Result<(), LegacyError> {
        if depth > ARTIFACT_MAX_DEPTH {
            return Err(why(
                dir,
                unsafe_artifacts,
                format!("nested deeper than {ARTIFACT_MAX_DEPTH} directories"),
            ));
        }
        let entries = self.storage.list_entries(dir).map_err(io_err(dir))?;
        for (path, _) in entries {
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                return Err(why(&path, unsafe_artifacts, "the name is not UTF-8"));
            };
            let child = if rel.is_empty() {
                name.to_owned()
            } else {
                format!("{rel}/{name}")
            };
            let meta = self.storage.lstat(&path).map_err(io_err(&path))?;
            if meta.kind == EntryKind::Symlink {
                return Err(why(&path, unsafe_artifacts, "is a symlink"));
            }
            if meta.kind == EntryKind::Dir {
                self.entries.push(TreeEntry {
                    rel: child.clone(),
                    dir: true,
                    stat: Stat::of(&meta),
                    sha256: None,
                });
                self.visit(&path, &child, depth + 1)?;
                continue;
            }
            if meta.kind != EntryKind::File {
                return Err(why(&path, unsafe_artifacts, "is not a regular file"));
            }
            if meta.links > 1 {
                return Err(why(&path, unsafe_artifacts, "has more than one hard link"));
            }
            if meta.len > ARTIFACT_MAX_FILE_BYTES {
                return Err(why(&path, unsafe_artifacts, "is larger than 64 MiB"));
            }
            self.files += 1;
            self.bytes += meta.len;
            if self.files > ARTIFACT_MAX_FILES {
                return Err(why(
                    self.root,
                    |path, why| LegacyError::ArtifactCapacityExceeded { path, why },
                    format!("more than {ARTIFACT_MAX_FILES} files"),
                ));
            }
            if self.bytes > ARTIFACT_MAX_TOTAL_BYTES {
                return Err(why(
                    self.root,
                    |path, why| LegacyError::ArtifactCapacityExceeded { path, why },
                    "more than 512 MiB in all",
                ));
            }
            let stat = Stat::of(&meta);
            let sha256 = if self.hash {
                Some(hash_file(self.storage, &path, &stat)?)
            } else {
                None
            };
            self.entries.push(TreeEntry {
                rel: child,
                dir: false,
                stat,
                sha256,
            });
            (self.tick)()?;
        }
        Ok(())
    }
}

/// The bounded, no-follow listing of an artifact tree (pre-order, by name), file hashes
/// included when `hash`.
pub(super) fn walk_tree(
    storage: &dyn SessionStorage,
    root: &Path,
    hash: bool,
    tick: &mut dyn FnMut() -> Result<(), LegacyError>,
) -> Result<Vec<TreeEntry>, LegacyError> {
    let meta = storage.lstat(root).map_err(io_err(root))?;
    if meta.kind != EntryKind::Dir {
        return Err(why(root, unsafe_artifacts, "is not a real directory"));
    }
    let mut walk = Walk {
        storage,
        root,
        hash,
        files: 0,
        bytes: 0,
        entries: vec![TreeEntry {
            rel: String::new(),
            dir: true,
            stat: Stat::of(&meta),
            sha256: None,
        }],
        tick,
    };
    walk.visit(root, "", 0)?;
    Ok(walk.entries)
}

/// Opens `path` without following a symlink and checks that it is still the `expected`
/// version.
fn open_version(
    storage: &dyn SessionStorage,
    path: &Path,
    expected: &Stat,
    why_not: &str,
) -> Result<Box<dyn ReadFile>, LegacyError> {
    let file = storage.open_read_at(path).map_err(io_err(path))?;
    if !Stat::of_open(file.as_ref())
        .map_err(io_err(path))?
        .same_version(expected)
    {
        return Err(why_changed(path, why_not));
    }
    Ok(file)
}

/// Feeds the file to `sink` in chunks, from the start to its end; the number of bytes read.
fn read_chunks(
    file: &dyn ReadFile,
    path: &Path,
    mut sink: impl FnMut(&[u8]) -> Result<(), LegacyError>,
) -> Result<u64, LegacyError> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = file.read_at(&mut buf, total).map_err(io_err(path))?;
        if n == 0 {
            return Ok(total);
        }
        total += n as u64;
        sink(&buf[..n])?;
    }
}

/// Hashes a file through a no-follow open that must still be the listed version.
pub(super) fn hash_file(
    storage: &dyn SessionStorage,
    path: &Path,
    expected: &Stat,
) -> Result<String, LegacyError> {
    let changed = "the artifact changed while it was read";
    let file = open_version(storage, path, expected, changed)?;
    let mut hasher = Sha256::new();
    let total = read_chunks(file.as_ref(), path, |chunk| {
        hasher.update(chunk);
        Ok(())
    })?;
    if total != expected.size() {
        return Err(why_changed(path, changed));
    }
    Ok(crate::format::blob::hex(&hasher.finalize()))
}

/// Copies one planned file to a new owner-only file, checking it is still the listed bytes.
pub(super) fn copy_file(
    storage: &dyn SessionStorage,
    src: &Path,
    dst: &Path,
    planned: &TreeEntry,
) -> Result<(), LegacyError> {
    let input = open_version(
        storage,
        src,
        &planned.stat,
        "the artifact changed since it was listed",
    )?;
    let mut output = storage
        .open_writer(dst, OpenMode::CreateNew)
        .map_err(io_err(dst))?;
    let mut hasher = Sha256::new();
    let mut total = 0u64;
    read_chunks(input.as_ref(), src, |chunk| {
        total += chunk.len() as u64;
        if total > planned.stat.size() {
            return Err(why_changed(src, "the artifact grew while it was copied"));
        }
        hasher.update(chunk);
        output.write_all(chunk).map_err(io_err(dst))
    })?;
    let sha = crate::format::blob::hex(&hasher.finalize());
    if total != planned.stat.size() || planned.sha256.as_deref() != Some(sha.as_str()) {
        return Err(why_changed(src, "the artifact changed while it was copied"));
    }
    output
        .fsync()
        .and_then(|()| output.close())
        .map_err(|e| LegacyError::DurabilityFailed {
            path: dst.to_owned(),
            why: e.to_string(),
        })
}

/// Removes a directory this migration published, if it is still that directory.
pub(super) fn unpublish_dir(storage: &dyn SessionStorage, path: &Path, published: &Stat) {
    let same = storage
        .lstat(path)
        .is_ok_and(|s| s.kind == EntryKind::Dir && s.id == published.id());
    if same {
        let _ = remove_tree(storage, path);
    }
}

/// Copies the planned artifact tree to `dest` (no replace) through a staging directory in
/// the scope; returns the published directory's stat. When it fails, nothing it made is
/// left.
pub(super) fn copy_artifacts(
    storage: &dyn SessionStorage,
    source: &Path,
    plan: &[TreeEntry],
    scope_dir: &Path,
    dest: &Path,
    op: &str,
    lock: &mut MigrationLock,
) -> Result<Stat, LegacyError> {
    let staging = scope_dir.join(format!(".gjc-migrate-{op}-{}.artifacts", snowflake()));
    storage.create_dir(&staging).map_err(io_err(&staging))?;
    let mut copy = || -> Result<Stat, LegacyError> {
        for entry in plan.iter().filter(|e| !e.rel.is_empty()) {
            let target = staging.join(&entry.rel);
            if entry.dir {
                storage.create_dir(&target).map_err(io_err(&target))?;
            } else {
                copy_file(storage, &source.join(&entry.rel), &target, entry)?;
                lock.heartbeat()?;
            }
        }
        for entry in plan.iter().rev().filter(|e| e.dir) {
            sync_dir(storage, &staging.join(&entry.rel))?;
        }
        let again = walk_tree(storage, source, false, &mut || Ok(()))?;
        let unchanged = again.len() == plan.len()
            && again
                .iter()
                .zip(plan)
                .all(|(a, b)| a.rel == b.rel && a.dir == b.dir && a.stat.same_version(&b.stat));
        if !unchanged {
            return Err(why_changed(
                source,
                "the artifacts changed while they were copied",
            ));
        }
        // The staged directory keeps its identity through the rename.
        let staged = Stat::of(&storage.lstat(&staging).map_err(io_err(&staging))?);
        lock.assert_owned()?;
        storage
            .rename_no_replace(&staging, dest)
            .map_err(|e| match e.kind() {
                io::ErrorKind::AlreadyExists | io::ErrorKind::DirectoryNotEmpty => why(
                    dest,
                    conflict,
                    "an artifacts directory appeared during the migration",
                ),
                _ => io_err(dest)(e),
            })?;
        Ok(staged)
    };
    let published = match copy() {
        Ok(published) => published,
        Err(e) => {
            let _ = remove_tree(storage, &staging);
            return Err(e);
        }
    };
    if let Err(e) = sync_dir(storage, scope_dir) {
        unpublish_dir(storage, dest, &published);
        return Err(e);
    }
    Ok(published)
}
