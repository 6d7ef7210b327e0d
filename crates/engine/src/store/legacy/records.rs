//! Receipts and tombstones: their JSON, which of them are trusted, and writing them.

use std::path::{Path, PathBuf};

use crate::format::ids::snowflake;
use crate::json::{self, Object, Value};
use crate::storage::{write_new_durable, SessionStorage};
use crate::store::scope::{verify_owner_only, INTERNAL_DIR};

use super::capture::{capture, sync_dir};
use super::{io_err, operation_name, Candidate, FileIdentity, LegacyError, RECEIPTS, TOMBSTONES};

pub(super) fn string(text: impl Into<String>) -> Value {
    Value::string(text.into())
}

pub(super) fn object(pairs: Vec<(&str, Value)>) -> Value {
    let mut o = Object::with_capacity(pairs.len());
    for (key, value) in pairs {
        o.insert(key, value);
    }
    Value::Object(o)
}

pub(super) fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// `{dev, ino, size, mtimeNs}`; 64-bit values as decimal strings.
pub(super) fn identity_json(id: &FileIdentity) -> Value {
    object(vec![
        ("dev", string(id.dev.to_string())),
        ("ino", string(id.ino.to_string())),
        ("size", Value::number(id.size as f64)),
        ("mtimeNs", string(id.mtime_ns.to_string())),
    ])
}

pub(super) fn decimal<T: std::str::FromStr>(value: Option<&Value>) -> Option<T> {
    let text = value?.as_str()?;
    let canonical = text == "0" || (!text.starts_with('0') && !text.starts_with('-'));
    if !canonical || text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

pub(super) fn parse_identity(value: Option<&Value>, sha256: &str) -> Option<FileIdentity> {
    let o = value?.as_object()?;
    let size = o.get("size")?.as_f64()?;
    if !(size >= 0.0 && size.fract() == 0.0 && size <= 9_007_199_254_740_991.0) {
        return None;
    }
    let is_hex = sha256.len() == 64
        && sha256
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !is_hex {
        return None;
    }
    Some(FileIdentity {
        dev: decimal(o.get("dev"))?,
        ino: decimal(o.get("ino"))?,
        size: size as u64,
        mtime_ns: decimal(o.get("mtimeNs"))?,
        sha256: sha256.to_owned(),
    })
}

/// A file recorded in a receipt or tombstone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RecordedFile {
    pub(super) path: String,
    pub(super) session_id: String,
    pub(super) cwd: String,
    pub(super) identity: FileIdentity,
}

impl RecordedFile {
    pub(super) fn is(&self, candidate: &Candidate) -> bool {
        Path::new(&self.path) == candidate.path
            && self.session_id == candidate.session_id
            && self.cwd == candidate.cwd
            && self.identity == candidate.identity
    }
}

/// The parsed JSON of a receipt or tombstone that may be trusted: an owner-only regular file
/// with one link, read without following a symlink.
pub(super) fn trusted_record(storage: &dyn SessionStorage, path: &Path) -> Option<Value> {
    verify_owner_only(storage, path, false).ok()?;
    let snapshot = capture(storage, path).ok()?;
    let text = std::str::from_utf8(&snapshot.bytes).ok()?;
    json::parse(text).ok()
}

/// A committed receipt's destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ReceiptDestination {
    pub(super) path: PathBuf,
    pub(super) session_id: String,
}

/// What a scope's receipts and tombstones say.
pub(super) struct ScopeRecords<'a> {
    pub(super) storage: &'a dyn SessionStorage,
    pub(super) scope_dir: PathBuf,
    pub(super) digest: String,
    pub(super) retired: Vec<RecordedFile>,
}

impl<'a> ScopeRecords<'a> {
    pub(super) fn load(storage: &'a dyn SessionStorage, scope_dir: &Path, digest: &str) -> Self {
        let mut records = ScopeRecords {
            storage,
            scope_dir: scope_dir.to_owned(),
            digest: digest.to_owned(),
            retired: Vec::new(),
        };
        let dir = scope_dir.join(INTERNAL_DIR).join(TOMBSTONES);
        let Ok(entries) = storage.list_files(&dir) else {
            return records;
        };
        let paths = entries
            .into_iter()
            .filter(|p| p.extension().is_some_and(|x| x == "json"));
        for path in paths {
            if let Some(value) = trusted_record(storage, &path) {
                records.retired.extend(records.tombstone_targets(&value));
            }
        }
        records
    }

    fn internal(&self, sub: &str) -> PathBuf {
        self.scope_dir.join(INTERNAL_DIR).join(sub)
    }

    pub(super) fn tombstone_targets(&self, value: &Value) -> Vec<RecordedFile> {
        let Some(o) = value.as_object() else {
            return Vec::new();
        };
        if o.get("schemaVersion").and_then(Value::as_f64) != Some(2.0)
            || o.get_str("state") != Some("retired")
            || o.get_str("scope") != Some(self.digest.as_str())
        {
            return Vec::new();
        }
        let Some(targets) = o.get("targets").and_then(Value::as_array) else {
            return Vec::new();
        };
        targets
            .iter()
            .filter_map(|t| {
                let t = t.as_object()?;
                let path = t.get_str("path")?;
                let id = t.get("identity")?.as_object()?;
                if id.get_str("canonicalPath") != Some(path) {
                    return None;
                }
                if !matches!(t.get_str("provenance"), None | Some("v2" | "legacy")) {
                    return None;
                }
                Some(RecordedFile {
                    path: path.to_owned(),
                    session_id: t.get_str("sessionId")?.to_owned(),
                    cwd: t.get_str("cwd")?.to_owned(),
                    identity: parse_identity(t.get("identity"), id.get_str("sha256")?)?,
                })
            })
            .collect()
    }

    pub(super) fn retires(&self, candidate: &Candidate) -> bool {
        self.retired.iter().any(|r| r.is(candidate))
    }

    /// The source and destination of a trusted committed receipt of this scope.
    fn parse_receipt(&self, value: &Value) -> Option<(RecordedFile, ReceiptDestination)> {
        let o = value.as_object()?;
        if o.get("schemaVersion").and_then(Value::as_f64) != Some(2.0)
            || o.get_str("state") != Some("committed")
            || o.get_str("policy") != Some("copy-retain")
            || o.get_str("scope") != Some(self.digest.as_str())
            || o.get_str("attemptId").is_none_or(str::is_empty)
            || !valid_manifest(o.get("artifactManifest")?)
        {
            return None;
        }
        let source = o.get("source")?.as_object()?;
        let header = source.get("header")?.as_object()?;
        let session_id = source.get_str("sessionId")?;
        if header.get_str("id") != Some(session_id) {
            return None;
        }
        let recorded = RecordedFile {
            path: source.get_str("path")?.to_owned(),
            session_id: session_id.to_owned(),
            cwd: header.get_str("cwd")?.to_owned(),
            identity: parse_identity(source.get("identity"), source.get_str("sha256")?)?,
        };
        let destination = o.get("destination")?.as_object()?;
        let path = PathBuf::from(destination.get_str("path")?);
        if path.parent() != Some(self.scope_dir.as_path()) {
            return None;
        }
        Some((
            recorded,
            ReceiptDestination {
                path,
                session_id: destination.get_str("sessionId")?.to_owned(),
            },
        ))
    }

    /// Where the committed receipt of `source` (this exact version) says it was copied.
    pub(super) fn committed_receipt(&self, source: &Candidate) -> Option<ReceiptDestination> {
        let path = self
            .internal(RECEIPTS)
            .join(format!("{}.json", source.operation_name()));
        let (recorded, destination) = self.parse_receipt(&trusted_record(self.storage, &path)?)?;
        recorded.is(source).then_some(destination)
    }

    /// The legacy sources whose committed receipts name `destination`.
    pub(super) fn sources_copied_to(
        &self,
        destination: &Path,
        session_id: &str,
    ) -> Vec<RecordedFile> {
        let Ok(entries) = self.storage.list_files(&self.internal(RECEIPTS)) else {
            return Vec::new();
        };
        let mut sources = Vec::new();
        for path in entries {
            let Some(stem) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".json"))
            else {
                continue;
            };
            let Some((source, dest)) =
                trusted_record(self.storage, &path).and_then(|v| self.parse_receipt(&v))
            else {
                continue;
            };
            let named_for_source = operation_name(Path::new(&source.path), &source.identity);
            if dest.path == destination && dest.session_id == session_id && named_for_source == stem
            {
                sources.push(source);
            }
        }
        sources.sort_by(|a, b| a.path.cmp(&b.path));
        sources
    }
}

pub(super) fn valid_manifest(value: &Value) -> bool {
    let Some(entries) = value.as_array() else {
        return false;
    };
    entries.iter().all(|entry| {
        let Some(e) = entry.as_object() else {
            return false;
        };
        let Some(path) = e.get_str("path") else {
            return false;
        };
        if path.starts_with('/') || path.split(['/', '\\']).any(|p| p == "..") {
            return false;
        }
        match e.get_str("kind") {
            Some("directory") => true,
            Some("file") => {
                let sha_ok = e.get_str("sha256").is_some_and(|s| {
                    s.len() == 64
                        && s.bytes()
                            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                });
                let size_ok = e
                    .get("size")
                    .and_then(Value::as_f64)
                    .is_some_and(|s| s >= 0.0 && s.fract() == 0.0);
                sha_ok && size_ok
            }
            _ => false,
        }
    })
}

/// Writes a record (receipt or tombstone) as `<json>\n` through a temp file renamed over
/// `path`, then makes the directory durable. Called only under the operation's lock, which
/// is what makes replacing a stale record at the same name safe.
pub(super) fn write_record(
    storage: &dyn SessionStorage,
    path: &Path,
    value: &Value,
) -> Result<(), LegacyError> {
    put_record(storage, path, value)?;
    sync_dir(storage, path.parent().unwrap_or(Path::new(".")))
}

/// [`write_record`] up to the rename: when it fails, nothing is at `path` that was not
/// there before (the temp file is removed again). The directory is not synced yet.
pub(super) fn put_record(
    storage: &dyn SessionStorage,
    path: &Path,
    value: &Value,
) -> Result<(), LegacyError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(".{name}.{}.tmp", snowflake()));
    let mut bytes = json::to_compact(value).into_bytes();
    bytes.push(b'\n');
    let result =
        write_new_durable(storage, &temp, &bytes).and_then(|()| storage.rename(&temp, path));
    if let Err(e) = result {
        let _ = storage.unlink(&temp);
        return Err(io_err(path)(e));
    }
    Ok(())
}
