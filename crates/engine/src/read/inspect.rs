//! Strict, read-only inspection of a session file: what opening it for writing needs.
//!
//! Fails closed with one of four reasons:
//! - `missing`: the file (or a path component) does not exist;
//! - `read-failed`: not a regular file, a symlink at the final component after resolution,
//!   or any other read error;
//! - `unstable`: the file changed between the stat before, the fstat of the descriptor read
//!   from, and the stat after (dev, ino, nlink, size, mtime, ctime);
//! - `malformed`: invalid UTF-8, a non-empty line that is not one JSON object, a header
//!   version above 5, a first record that is not a header with an id, or any record that
//!   fails the schema check after migration.
//!
//! The path is resolved with `realpath` first, so a symlinked path binds to its target; the
//! target is then opened through the storage seam, which never follows a symlink at the
//! final component, never blocks and refuses anything but a regular file. Nothing is ever
//! written.

use std::io;
use std::path::{Path, PathBuf};

use crate::storage::{EntryKind, EntryStat, FileStorage, ReadFile, SessionStorage};

use crate::format::lines::{read_lines, Lines};
use crate::format::migrate::Migration;
use crate::format::record::{Record, RecordType};
use crate::json::Value;
use crate::read::load::{build_session, entries_from_records, Built, LoadStatus};
use crate::read::replay::replay_lines;
use crate::session::context::chain_normalizes;
use crate::session::tree::Session;

/// Why strict inspection refused a file.
#[derive(Debug, thiserror::Error)]
pub enum InspectFailure {
    /// The file, or a component of its path, does not exist.
    #[error("missing")]
    Missing,
    /// The file is not a regular file, or reading it failed; the text says why.
    #[error("read-failed: {0}")]
    ReadFailed(String),
    /// The file changed (identity, links, size or times) between the stats around the
    /// read.
    #[error("unstable: the file changed while it was read")]
    Unstable,
    /// The content is not a valid session (see the module docs); the text says where
    /// and why.
    #[error("malformed: {0}")]
    Malformed(String),
}

impl InspectFailure {
    /// The reason keyword the original reports.
    pub fn reason(&self) -> &'static str {
        match self {
            InspectFailure::Missing => "missing",
            InspectFailure::ReadFailed(_) => "read-failed",
            InspectFailure::Unstable => "unstable",
            InspectFailure::Malformed(_) => "malformed",
        }
    }
}

/// Why strict inspection refused the file at a path.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {failure}")]
pub struct InspectError {
    /// The path as given to [`inspect_strict`] (not resolved).
    pub path: PathBuf,
    /// Why the file was refused.
    pub failure: InspectFailure,
}

/// What identifies the exact file that was inspected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    /// The file's path with every symlink resolved (`realpath`).
    pub canonical_path: PathBuf,
    /// The header's `id`.
    pub session_id: String,
    /// The device number of the file system that holds the file.
    pub dev: u64,
    /// The file's inode number.
    pub ino: u64,
    /// The number of hard links to the file.
    pub nlink: u64,
    /// The file's length in bytes (all of them were read).
    pub size: u64,
    /// The modification time, in nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// The change time (of the contents or of the inode), in nanoseconds since the
    /// epoch.
    pub ctime_ns: i128,
    /// Lower-case hex SHA-256 of the bytes.
    pub sha256: String,
}

/// Whether the conversation waits for the model (`resumable`) or not (`terminal`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    /// The last context message exists and is not from the assistant.
    Resumable,
    /// There is no context message, or the last one is from the assistant.
    Terminal,
}

/// A session that passed strict inspection, migrated in memory.
#[derive(Debug)]
pub struct Inspection {
    /// The session, migrated to the current version.
    pub session: Session,
    /// What identifies the file that was read.
    pub fingerprint: Fingerprint,
    /// Whether the conversation waits for the model.
    pub tail: Tail,
}

#[derive(PartialEq, Eq)]
struct StatKey {
    dev: u64,
    ino: u64,
    nlink: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl StatKey {
    fn of(stat: &EntryStat) -> Self {
        StatKey {
            dev: stat.id.dev,
            ino: stat.id.ino,
            nlink: stat.links,
            size: stat.len,
            mtime_ns: stat.mtime_ns,
            ctime_ns: stat.ctime_ns,
        }
    }

    fn of_open(file: &dyn ReadFile) -> io::Result<Self> {
        Ok(StatKey {
            dev: file.id().dev,
            ino: file.id().ino,
            nlink: file.links()?,
            size: file.size()?,
            mtime_ns: file.mtime_ns()?,
            ctime_ns: file.ctime_ns()?,
        })
    }
}

/// Strictly inspects the session file at `path`.
pub fn inspect_strict(path: &Path) -> Result<Inspection, InspectError> {
    inspect_strict_in(&FileStorage, path)
}

/// [`inspect_strict`] in `storage`.
pub fn inspect_strict_in(
    storage: &dyn SessionStorage,
    path: &Path,
) -> Result<Inspection, InspectError> {
    let fail = |failure| InspectError {
        path: path.to_owned(),
        failure,
    };
    let (canonical, bytes, stat) = read_stable(storage, path).map_err(fail)?;
    let (session, _) = parse_strict(&bytes).map_err(fail)?;
    let tail = match session.build_context().messages.last() {
        Some(m) if m.as_object().and_then(|o| o.get_str("role")) != Some("assistant") => {
            Tail::Resumable
        }
        _ => Tail::Terminal,
    };
    let fingerprint = Fingerprint {
        canonical_path: canonical,
        session_id: session.header().id().unwrap_or_default().to_owned(),
        dev: stat.dev,
        ino: stat.ino,
        nlink: stat.nlink,
        size: stat.size,
        mtime_ns: stat.mtime_ns,
        ctime_ns: stat.ctime_ns,
        sha256: crate::format::blob::sha256_hex(&bytes),
    };
    Ok(Inspection {
        session,
        fingerprint,
        tail,
    })
}

fn io_failure(storage: &dyn SessionStorage, path: &Path, e: io::Error) -> InspectFailure {
    if e.kind() == io::ErrorKind::NotFound || !storage.exists(path) {
        InspectFailure::Missing
    } else {
        InspectFailure::ReadFailed(e.to_string())
    }
}

/// Reads the file through one no-follow open, checking it did not change meanwhile.
fn read_stable(
    storage: &dyn SessionStorage,
    path: &Path,
) -> Result<(PathBuf, Vec<u8>, StatKey), InspectFailure> {
    let failed = |e| io_failure(storage, path, e);
    let canonical = storage.canonicalize(path).map_err(failed)?;
    // Resolved: nothing at the canonical path is a symlink, so lstat says what stat would.
    let before = storage.lstat(&canonical).map_err(failed)?;
    if before.kind != EntryKind::File {
        return Err(InspectFailure::ReadFailed("not a regular file".into()));
    }
    let file = storage.open_read_at(&canonical).map_err(failed)?;
    let bytes = file.read_all().map_err(failed)?;
    let during = StatKey::of_open(file.as_ref()).map_err(failed)?;
    let after = storage.lstat(&canonical).map_err(failed)?;
    let key = StatKey::of(&before);
    if key != during || key != StatKey::of(&after) {
        return Err(InspectFailure::Unstable);
    }
    Ok((canonical, bytes, key))
}

/// The content checks of strict inspection, then migration and the schema check.
pub fn parse_strict(bytes: &[u8]) -> Result<(Session, Migration), InspectFailure> {
    let built = strict_session(read_lines(bytes, 0, bytes.len() as u64, 1))?;
    Ok((built.session, built.migration))
}

/// [`parse_strict`] over the lines of a whole file, read already (without a read error).
pub fn strict_session(lines: Lines) -> Result<Built, InspectFailure> {
    let malformed = |why: String| InspectFailure::Malformed(why);
    if let Some(at) = lines.invalid_utf8 {
        return Err(malformed(format!("invalid UTF-8 at byte {at}")));
    }
    let replayed = replay_lines(lines).map_err(|e| malformed(e.to_string()))?;
    if let Some(bad) = replayed.skipped.first() {
        return Err(malformed(format!("line {}: {}", bad.line, bad.reason)));
    }
    let loaded = entries_from_records(replayed.records, Vec::new());
    if loaded.status != LoadStatus::Loaded {
        return Err(malformed(
            "the first record is not a session header with an id".into(),
        ));
    }
    let built = build_session(loaded.records, replayed.summaries);
    if let Some(refused) = schema_refusals(&built.session, &replayed.lines).next() {
        return Err(malformed(refused.to_string()));
    }
    Ok(built)
}

/// A record the schema check refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The record's 1-based line number in the file (0 when not known).
    pub line: usize,
    /// The record's `id`, if it has a string one.
    pub id: Option<String>,
    /// The rule it breaks ([`schema_violation`]).
    pub why: &'static str,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {}: record {}: {}",
            self.line,
            self.id.as_deref().unwrap_or("?"),
            self.why
        )
    }
}

/// The records of `session` (migrated) that the schema check refuses, in file order; `lines`
/// holds the line number of each record as read ([`crate::read::replay::Replayed::lines`]),
/// which migration keeps in order.
pub fn schema_refusals<'a>(
    session: &'a Session,
    lines: &'a [usize],
) -> impl Iterator<Item = Refused> + 'a {
    session
        .records()
        .iter()
        .enumerate()
        .filter_map(move |(at, record)| {
            let why = schema_violation(record)?;
            Some(Refused {
                line: lines.get(at).copied().unwrap_or(0),
                id: record.id().map(str::to_owned),
                why,
            })
        })
}

fn is_string(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::String(_)))
}

fn is_string_array(v: Option<&Value>) -> bool {
    v.is_some_and(|v| match v.expanded().as_ref() {
        Value::Array(items) => items.iter().all(|i| matches!(i, Value::String(_))),
        _ => false,
    })
}

fn absent_or(v: Option<&Value>, check: impl Fn(Option<&Value>) -> bool) -> bool {
    v.is_none() || check(v)
}

/// The first schema rule `record` breaks, if any.
pub fn schema_violation(record: &Record) -> Option<&'static str> {
    let get = |k| record.get(k);
    if !is_string(get("type")) {
        return Some("no string type");
    }
    if record.is_header() {
        let ok = is_string(get("id")) && is_string(get("cwd")) && is_string(get("timestamp"));
        return (!ok).then_some("a header needs string id, cwd and timestamp");
    }
    if !is_string(get("id")) {
        return Some("an entry needs a string id");
    }
    if !matches!(get("parentId"), Some(Value::Null | Value::String(_))) {
        return Some("an entry needs a null or string parentId");
    }
    if !is_string(get("timestamp")) {
        return Some("an entry needs a string timestamp");
    }
    let ok = match record.record_type() {
        RecordType::Message => record.message().is_some_and(|m| is_string(m.get("role"))),
        RecordType::ModelChange => {
            is_string(get("model")) || (is_string(get("provider")) && is_string(get("modelId")))
        }
        RecordType::ConfiguredModelChain => chain_normalizes(record),
        RecordType::Compaction => {
            is_string(get("summary"))
                && is_string(get("firstKeptEntryId"))
                && matches!(get("tokensBefore"), Some(Value::Number(_)))
        }
        RecordType::BranchSummary => is_string(get("fromId")) && is_string(get("summary")),
        RecordType::Custom => is_string(get("customType")),
        RecordType::CustomMessage => {
            is_string(get("customType"))
                && get("content").is_some_and(|c| matches!(c, Value::String(_)) || c.is_array())
                && matches!(get("display"), Some(Value::Bool(_)))
        }
        RecordType::Label => is_string(get("targetId")) && absent_or(get("label"), is_string),
        RecordType::TtsrInjection => is_string_array(get("injectedRules")),
        RecordType::McpToolSelection => {
            is_string_array(get("selectedToolNames"))
                && absent_or(get("selectedDiscoveredBuiltinToolNames"), is_string_array)
                && absent_or(get("mutationCorrelationId"), is_string)
        }
        RecordType::DiscoveredBuiltinToolSelection => {
            is_string_array(get("selectedToolNames"))
                && absent_or(get("mutationCorrelationId"), is_string)
        }
        RecordType::SessionInit => {
            is_string(get("systemPrompt"))
                && is_string(get("task"))
                && is_string_array(get("tools"))
        }
        RecordType::ModeChange => is_string(get("mode")),
        RecordType::ThinkingLevelChange => {
            matches!(
                get("thinkingLevel"),
                None | Some(Value::Null | Value::String(_))
            )
        }
        RecordType::ServiceTierChange => {
            matches!(get("serviceTier"), Some(Value::Null | Value::String(_)))
        }
        RecordType::Session
        | RecordType::HeaderPatch
        | RecordType::EntryPatch
        | RecordType::Unknown
        | RecordType::Missing => false,
    };
    (!ok).then_some(match record.record_type() {
        RecordType::Unknown | RecordType::HeaderPatch | RecordType::EntryPatch => {
            "unknown entry type"
        }
        _ => "fields do not match the entry type's schema",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{Fault, FaultKind, MemoryStorage};

    const SESSION: &str = concat!(
        r#"{"type":"session","version":5,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#,
        "\n",
        r#"{"type":"message","id":"q","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}"#,
        "\n"
    );

    #[test]
    fn strict_reads_go_through_the_storage_and_fail_closed() {
        let storage = MemoryStorage::new();
        storage.ensure_dir(Path::new("/s")).unwrap();
        let path = Path::new("/s/a.jsonl");
        storage.put_file(path, SESSION.as_bytes());
        let inspected = inspect_strict_in(&storage, path).unwrap();
        assert_eq!(inspected.fingerprint.session_id, "s");
        assert_eq!(inspected.fingerprint.size, SESSION.len() as u64);
        assert_eq!(inspected.tail, Tail::Resumable);

        let missing = inspect_strict_in(&storage, Path::new("/s/b.jsonl")).unwrap_err();
        assert!(
            matches!(missing.failure, InspectFailure::Missing),
            "{missing}"
        );
        storage.set_fault(Some(Fault {
            at: storage.op_count() + 2,
            kind: FaultKind::Errno(libc::EIO),
        }));
        let failed = inspect_strict_in(&storage, path).unwrap_err();
        assert!(
            matches!(failed.failure, InspectFailure::ReadFailed(_)),
            "{failed}"
        );
    }
}
