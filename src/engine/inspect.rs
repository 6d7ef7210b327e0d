//! Strict, read-only inspection of a session file (details §5.4).
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
//! target is then opened with `O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC`. Nothing is ever written.

use crate::storage::sys::unix as sys;
use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::context::chain_normalizes;
use super::json::Value;
use super::lines::{read_lines, Lines};
use super::load::{build_session, entries_from_records, Built, LoadStatus};
use super::migrate::Migration;
use super::record::{Record, RecordType};
use super::replay::replay_lines;
use super::session::Session;

/// Why strict inspection refused a file.
#[derive(Debug, thiserror::Error)]
pub enum InspectFailure {
    #[error("missing")]
    Missing,
    #[error("read-failed: {0}")]
    ReadFailed(String),
    #[error("unstable: the file changed while it was read")]
    Unstable,
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

#[derive(Debug, thiserror::Error)]
#[error("{path}: {failure}")]
pub struct InspectError {
    pub path: PathBuf,
    pub failure: InspectFailure,
}

/// What identifies the exact file that was inspected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    pub canonical_path: PathBuf,
    pub session_id: String,
    pub dev: u64,
    pub ino: u64,
    pub nlink: u64,
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
    /// Lower-case hex SHA-256 of the bytes.
    pub sha256: String,
}

/// Whether the conversation waits for the model (`resumable`) or not (`terminal`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    /// The last context message exists and is not from the assistant.
    Resumable,
    Terminal,
}

/// A session that passed strict inspection, migrated in memory.
#[derive(Debug)]
pub struct Inspection {
    pub session: Session,
    pub fingerprint: Fingerprint,
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
    fn of(m: &fs::Metadata) -> Self {
        StatKey {
            dev: sys::file_id(m).dev,
            ino: sys::file_id(m).ino,
            nlink: sys::links(m),
            size: m.len(),
            mtime_ns: sys::mtime_ns(m),
            ctime_ns: sys::ctime_ns(m),
        }
    }
}

/// Strictly inspects the session file at `path`.
pub fn inspect_strict(path: &Path) -> Result<Inspection, InspectError> {
    let fail = |failure| InspectError {
        path: path.to_owned(),
        failure,
    };
    let (canonical, bytes, stat) = read_stable(path).map_err(fail)?;
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
        sha256: hex(&Sha256::digest(&bytes)),
    };
    Ok(Inspection {
        session,
        fingerprint,
        tail,
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn io_failure(path: &Path, e: io::Error) -> InspectFailure {
    if e.kind() == io::ErrorKind::NotFound || !path.exists() {
        InspectFailure::Missing
    } else {
        InspectFailure::ReadFailed(e.to_string())
    }
}

/// Reads the file through one no-follow descriptor, checking it did not change meanwhile.
fn read_stable(path: &Path) -> Result<(PathBuf, Vec<u8>, StatKey), InspectFailure> {
    let canonical = fs::canonicalize(path).map_err(|e| io_failure(path, e))?;
    let before = fs::metadata(&canonical).map_err(|e| io_failure(path, e))?;
    if !before.file_type().is_file() {
        return Err(InspectFailure::ReadFailed("not a regular file".into()));
    }
    let mut file = sys::no_follow(File::options().read(true))
        .open(&canonical)
        .map_err(|e| io_failure(path, e))?;
    let mut bytes = Vec::with_capacity(before.len() as usize);
    file.read_to_end(&mut bytes)
        .map_err(|e| io_failure(path, e))?;
    let during = file.metadata().map_err(|e| io_failure(path, e))?;
    let after = fs::metadata(&canonical).map_err(|e| io_failure(path, e))?;
    let key = StatKey::of(&before);
    if key != StatKey::of(&during) || key != StatKey::of(&after) {
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
    for record in built.session.records() {
        if let Some(why) = schema_violation(record) {
            let id = record.id().unwrap_or("?");
            return Err(malformed(format!("record {id}: {why}")));
        }
    }
    Ok(built)
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
    let base_ok = is_string(get("id"))
        && matches!(get("parentId"), Some(Value::Null | Value::String(_)))
        && is_string(get("timestamp"));
    if !base_ok {
        return Some("an entry needs a string id and timestamp and a null or string parentId");
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
