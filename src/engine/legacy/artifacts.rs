//! Artifact trees: the bounded no-follow walk, the manifest, and the staged no-replace copy.

use std::ffi::CString;
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::ids::snowflake;
use crate::json::Value;

use super::capture::{create_owner_only, create_owner_only_dir, open_no_follow, sync_dir, Stat};
use super::listing::why_changed;
use super::lock::MigrationLock;
use super::records::{object, string};
use super::{
    conflict, io_err, unsafe_artifacts, why, LegacyError, ARTIFACT_MAX_DEPTH, ARTIFACT_MAX_FILES,
    ARTIFACT_MAX_FILE_BYTES, ARTIFACT_MAX_TOTAL_BYTES,
};

/// The artifacts directory of a transcript: its path minus `.jsonl`.
pub fn artifacts_dir(transcript: &Path) -> PathBuf {
    let bytes = transcript.as_os_str().as_bytes();
    let stem = bytes.strip_suffix(b".jsonl").unwrap_or(bytes);
    PathBuf::from(std::ffi::OsStr::from_bytes(stem))
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
            size: if e.dir { 0 } else { e.stat.size },
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
        let mut names = Vec::new();
        for entry in fs::read_dir(dir).map_err(io_err(dir))? {
            names.push(entry.map_err(io_err(dir))?.file_name());
        }
        names.sort();
        for name in names {
            let path = dir.join(&name);
            let Some(name) = name.to_str() else {
                return Err(why(&path, unsafe_artifacts, "the name is not UTF-8"));
            };
            let child = if rel.is_empty() {
                name.to_owned()
            } else {
                format!("{rel}/{name}")
            };
            let meta = fs::symlink_metadata(&path).map_err(io_err(&path))?;
            let kind = meta.file_type();
            if kind.is_symlink() {
                return Err(why(&path, unsafe_artifacts, "is a symlink"));
            }
            if kind.is_dir() {
                self.entries.push(TreeEntry {
                    rel: child.clone(),
                    dir: true,
                    stat: Stat::of(&meta),
                    sha256: None,
                });
                self.visit(&path, &child, depth + 1)?;
                continue;
            }
            if !kind.is_file() {
                return Err(why(&path, unsafe_artifacts, "is not a regular file"));
            }
            if meta.nlink() > 1 {
                return Err(why(&path, unsafe_artifacts, "has more than one hard link"));
            }
            if meta.size() > ARTIFACT_MAX_FILE_BYTES {
                return Err(why(&path, unsafe_artifacts, "is larger than 64 MiB"));
            }
            self.files += 1;
            self.bytes += meta.size();
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
                Some(hash_file(&path, &stat)?)
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
    root: &Path,
    hash: bool,
    tick: &mut dyn FnMut() -> Result<(), LegacyError>,
) -> Result<Vec<TreeEntry>, LegacyError> {
    let meta = fs::symlink_metadata(root).map_err(io_err(root))?;
    if !meta.file_type().is_dir() {
        return Err(why(root, unsafe_artifacts, "is not a real directory"));
    }
    let mut walk = Walk {
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

/// Hashes a file through a no-follow descriptor that must still be the listed version.
pub(super) fn hash_file(path: &Path, expected: &Stat) -> Result<String, LegacyError> {
    let mut file = open_no_follow(path).map_err(io_err(path))?;
    let meta = file.metadata().map_err(io_err(path))?;
    if !Stat::of(&meta).same_version(expected) {
        return Err(why_changed(path, "the artifact changed while it was read"));
    }
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = file.read(&mut buf).map_err(io_err(path))?;
        if n == 0 {
            break;
        }
        total += n as u64;
        hasher.update(&buf[..n]);
    }
    if total != expected.size {
        return Err(why_changed(path, "the artifact changed while it was read"));
    }
    Ok(data_encoding::HEXLOWER.encode(&hasher.finalize()))
}

/// Copies one planned file to a new owner-only file, checking it is still the listed bytes.
pub(super) fn copy_file(src: &Path, dst: &Path, planned: &TreeEntry) -> Result<(), LegacyError> {
    let mut input = open_no_follow(src).map_err(io_err(src))?;
    let meta = input.metadata().map_err(io_err(src))?;
    if !Stat::of(&meta).same_version(&planned.stat) {
        return Err(why_changed(src, "the artifact changed since it was listed"));
    }
    let mut output = create_owner_only(dst).map_err(io_err(dst))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = input.read(&mut buf).map_err(io_err(src))?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > planned.stat.size {
            return Err(why_changed(src, "the artifact grew while it was copied"));
        }
        hasher.update(&buf[..n]);
        output.write_all(&buf[..n]).map_err(io_err(dst))?;
    }
    let sha = data_encoding::HEXLOWER.encode(&hasher.finalize());
    if total != planned.stat.size || planned.sha256.as_deref() != Some(sha.as_str()) {
        return Err(why_changed(src, "the artifact changed while it was copied"));
    }
    output
        .sync_all()
        .map_err(|e| LegacyError::DurabilityFailed {
            path: dst.to_owned(),
            why: e.to_string(),
        })
}

/// Renames the directory `from` to `to` only if `to` does not exist.
pub(super) fn rename_dir_no_replace(from: &Path, to: &Path) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        let c = |p: &Path| {
            CString::new(p.as_os_str().as_bytes())
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))
        };
        let (cf, ct) = (c(from)?, c(to)?);
        // SAFETY: both are valid NUL-terminated paths; renameat2 takes no other pointers.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_renameat2,
                libc::AT_FDCWD,
                cf.as_ptr(),
                libc::AT_FDCWD,
                ct.as_ptr(),
                libc::RENAME_NOREPLACE,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if !matches!(err.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) {
            return Err(err);
        }
    }
    // Without a no-replace rename: claim the name with an empty directory of our own, then
    // replace that directory (a rename only replaces an empty directory).
    create_owner_only_dir(to)?;
    fs::rename(from, to).inspect_err(|_| {
        let _ = fs::remove_dir(to);
    })
}

/// Removes a directory this migration published, if it is still that directory.
pub(super) fn unpublish_dir(path: &Path, published: &Stat) {
    let same = fs::symlink_metadata(path).is_ok_and(|m| {
        m.file_type().is_dir() && m.dev() == published.dev && m.ino() == published.ino
    });
    if same {
        let _ = fs::remove_dir_all(path);
    }
}

/// Copies the planned artifact tree to `dest` (no replace) through a staging directory in
/// the scope; returns the published directory's stat.
pub(super) fn copy_artifacts(
    source: &Path,
    plan: &[TreeEntry],
    scope_dir: &Path,
    dest: &Path,
    op: &str,
    lock: &mut MigrationLock,
) -> Result<Stat, LegacyError> {
    let staging = scope_dir.join(format!(".gjc-migrate-{op}-{}.artifacts", snowflake()));
    create_owner_only_dir(&staging).map_err(io_err(&staging))?;
    let mut copy = || -> Result<(), LegacyError> {
        for entry in plan.iter().filter(|e| !e.rel.is_empty()) {
            let target = staging.join(&entry.rel);
            if entry.dir {
                create_owner_only_dir(&target).map_err(io_err(&target))?;
            } else {
                copy_file(&source.join(&entry.rel), &target, entry)?;
                lock.heartbeat()?;
            }
        }
        for entry in plan.iter().rev().filter(|e| e.dir) {
            sync_dir(&staging.join(&entry.rel))?;
        }
        let again = walk_tree(source, false, &mut || Ok(()))?;
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
        lock.assert_owned()?;
        rename_dir_no_replace(&staging, dest).map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists | io::ErrorKind::DirectoryNotEmpty => why(
                dest,
                conflict,
                "an artifacts directory appeared during the migration",
            ),
            _ => io_err(dest)(e),
        })
    };
    if let Err(e) = copy() {
        let _ = fs::remove_dir_all(&staging);
        return Err(e);
    }
    let published = fs::symlink_metadata(dest)
        .map(|m| Stat::of(&m))
        .map_err(io_err(dest))?;
    if let Err(e) = sync_dir(scope_dir) {
        unpublish_dir(dest, &published);
        return Err(e);
    }
    Ok(published)
}
