//! Lenient JSONL reading and patch replay (`parseSessionEntries`).
//!
//! Lines:
//! - The text is split on `\n`; one trailing `\r` is stripped; blank lines are skipped.
//! - Each line must be exactly one JSON object. A line that is not (malformed, torn, a bare
//!   number, two values) is skipped and reported in [`Replayed::skipped`]; the lines around
//!   it are kept. A complete last line without a trailing newline is kept.
//!
//! Replay:
//! - The first `session` record's `version` must be absent (v1) or an integer ≤ 5; otherwise
//!   the whole file is rejected with [`ReplayError::UnsupportedVersion`] before any replay.
//! - `header_patch` and `entry_patch` records are consumed: applied when the first header
//!   seen so far has a version ≥ 4 and the record has exactly the canonical shape,
//!   dropped otherwise. An entry patch only reaches a `message` entry already seen, and
//!   replaces its `message` wholesale. Later patches win.
//! - Every other record is kept in file order, later `session` records included.
//!
//! Resuming: [`resume_lines`] replays lines that follow the lines a session was loaded from
//! exactly as one pass over the whole file would — the first header and the entries patches
//! reach are the session's — without changing the session: the patches it makes to the
//! session's records come back as [`BaseEdit`]s for the caller to apply.

use std::collections::HashMap;
use std::io::BufRead;

use crate::format::lines::{parse_line, Lines, ParsedLine, ParsedLines};
use crate::format::record::{LineError, Record, RecordType};
use crate::format::summary::Summary;
use crate::json::{self, Object, Value};
use crate::session::tree::Session;

/// A line that was skipped, with its 1-based number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedLine {
    /// The line's number, from 1.
    pub line: usize,
    /// Why the line is not a record.
    pub reason: LineError,
}

/// The records of a file after patch replay.
#[derive(Debug, Default)]
pub struct Replayed {
    /// The records kept, in file order, patches applied (patch records are
    /// consumed).
    pub records: Vec<Record>,
    /// The lines that are not one JSON object, in file order.
    pub skipped: Vec<SkippedLine>,
    /// One summary per record, as the records are after replay, when the lines came with
    /// them.
    pub summaries: Option<Vec<Summary>>,
    /// The 1-based line number of each record of `records`.
    pub lines: Vec<usize>,
}

/// Why a file's lines could not be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The first header's `version` is present but not an integer ≤ 5.
    #[error("Unsupported session version: {version}")]
    UnsupportedVersion {
        /// The version as found: a string's text, a number as JavaScript writes it, else
        /// compact JSON.
        version: String,
    },
    /// Reading the lines failed; the lines before the failure are not returned.
    #[error("cannot read session data: {0}")]
    Io(#[from] std::io::Error),
}

/// `parseSessionEntries` over text already in memory.
pub fn parse_session_entries(text: &str) -> Result<Replayed, ReplayError> {
    let mut replayer = Replayer::default();
    for (n, line) in text.split('\n').enumerate() {
        replayer.push_line(n + 1, line.as_bytes())?;
    }
    Ok(replayer.finish())
}

/// `parseSessionEntries` over a byte stream, one line at a time, so that memory holds only
/// the records. Invalid UTF-8 is replaced with U+FFFD, as a text decoder would.
pub fn parse_session_reader(mut reader: impl BufRead) -> Result<Replayed, ReplayError> {
    let mut replayer = Replayer::default();
    let mut buf = Vec::new();
    let mut n = 0;
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        n += 1;
        if buf.last() == Some(&b'\n') {
            buf.pop();
        }
        replayer.push_line(n, &buf)?;
    }
    Ok(replayer.finish())
}

/// `parseSessionEntries` over lines read and parsed already ([`crate::format::lines`]); a read
/// error that stopped the reading is reported after the lines before it are replayed.
pub fn replay_lines(lines: Lines) -> Result<Replayed, ReplayError> {
    // The kept records grow as the lines are taken, chunk by chunk, so the lines read and
    // the records made of them are not both held whole at once (a large list grows in place
    // of its pages, without a copy).
    let mut replayer = Replayer {
        summaries: Some(Vec::new()),
        ..Replayer::default()
    };
    for line in lines.parsed {
        replayer.push_parsed(line)?;
    }
    match lines.error {
        Some(e) => Err(ReplayError::Io(e)),
        None => Ok(replayer.finish()),
    }
}

/// Whether a file whose first header is `header` applies patches (version ≥ 4).
pub fn patches_apply(header: &Record) -> bool {
    header.get("version").and_then(Value::as_f64) >= Some(4.0)
}

/// A change replay makes to a record of the session it resumes.
#[derive(Debug, Clone, PartialEq)]
pub enum BaseEdit {
    /// The members a header patch sets on the first header.
    Header(Object),
    /// An entry patch's message for the `message` entry at this record index.
    Message {
        /// The index of the `message` entry among the session's records.
        index: usize,
        /// The new `message` value, which replaces the old one whole.
        message: Value,
    },
}

/// Lines replayed after the records of a session already loaded.
#[derive(Debug, Default)]
pub struct Resumed {
    /// The records the lines add, patches applied.
    pub records: Vec<Record>,
    /// The patches to the session's own records, in file order.
    pub edits: Vec<BaseEdit>,
    /// The lines that are not one JSON object, in file order.
    pub skipped: Vec<SkippedLine>,
}

/// Replays `lines` as if they followed the lines `base` was loaded from; `patches_apply`
/// is what the file's first header said ([`patches_apply`]). `base` is not changed: its
/// patches come back as [`Resumed::edits`].
pub fn resume_lines(base: &Session, patches_apply: bool, lines: ParsedLines) -> Resumed {
    let mut replayer = Replayer {
        base: Some(base),
        patches_apply,
        ..Replayer::default()
    };
    for line in lines {
        // The first header is in `base`, so no version check can fail.
        let _ = replayer.push_parsed(line);
    }
    Resumed {
        records: replayer.out,
        edits: replayer.edits,
        skipped: replayer.skipped,
    }
}

/// Streaming replay state.
struct Replayer<'b> {
    out: Vec<Record>,
    /// The line number of each record of `out`.
    lines: Vec<usize>,
    skipped: Vec<SkippedLine>,
    /// Index of the first `session` record in `out`.
    header: Option<usize>,
    /// The session these lines follow, if any: it holds the first header, and the entries
    /// before the ones in `out`.
    base: Option<&'b Session>,
    /// Patches to `base`'s records.
    edits: Vec<BaseEdit>,
    /// One summary per record of `out`, while every record came with one.
    summaries: Option<Vec<Summary>>,
    /// Whether the first header accepts patches (version ≥ 4).
    patches_apply: bool,
    /// Entry id → position in `out` (the last entry with that id) for the records
    /// `out[..indexed]`, entries before the first header included. Only entry patches read
    /// it, so it is built when the first one arrives and then kept up to date; files without
    /// entry patches never hash an id.
    by_id: HashMap<Box<str>, usize>,
    indexed: usize,
}

impl Default for Replayer<'_> {
    fn default() -> Self {
        Replayer {
            out: Vec::new(),
            lines: Vec::new(),
            skipped: Vec::new(),
            header: None,
            base: None,
            edits: Vec::new(),
            summaries: Some(Vec::new()),
            patches_apply: false,
            by_id: HashMap::new(),
            indexed: 0,
        }
    }
}

impl Replayer<'_> {
    fn push_line(&mut self, n: usize, line: &[u8]) -> Result<(), ReplayError> {
        match parse_line(n == 1, line) {
            Some(record) => self.push_parsed(ParsedLine {
                number: n,
                record,
                summary: None,
            }),
            None => Ok(()),
        }
    }

    fn push_parsed(&mut self, line: ParsedLine) -> Result<(), ReplayError> {
        match line.record {
            Ok(record) => self.push(line.number, record, line.summary),
            Err(reason) => {
                self.skipped.push(SkippedLine {
                    line: line.number,
                    reason,
                });
                Ok(())
            }
        }
    }

    fn push(
        &mut self,
        number: usize,
        record: Record,
        summary: Option<Summary>,
    ) -> Result<(), ReplayError> {
        match record.record_type() {
            RecordType::HeaderPatch => {
                if self.patches_apply {
                    if let Some(patch) = header_patch(record.fields()) {
                        match self.header {
                            Some(at) => {
                                let header = self.out[at].fields_mut();
                                for (key, value) in patch.iter() {
                                    header.insert(&key.to_string_lossy(), value.clone());
                                }
                            }
                            None => self.edits.push(BaseEdit::Header(patch.into_owned())),
                        }
                    }
                }
            }
            RecordType::EntryPatch => {
                if self.patches_apply {
                    self.apply_entry_patch(record.fields());
                }
            }
            ty => {
                if ty == RecordType::Session && self.header.is_none() && self.base.is_none() {
                    check_version(&record)?;
                    self.header = Some(self.out.len());
                    self.patches_apply = patches_apply(&record);
                }
                match (summary, &mut self.summaries) {
                    (Some(summary), Some(summaries)) => summaries.push(summary),
                    _ => self.summaries = None,
                }
                self.out.push(record);
                self.lines.push(number);
            }
        }
        Ok(())
    }

    fn apply_entry_patch(&mut self, patch: &Object) {
        let Some((entry_id, message)) = entry_patch(patch) else {
            return;
        };
        self.index_entries();
        // Entries in `out` come after the base's, so they win.
        if let Some(&at) = self.by_id.get(entry_id) {
            let target = &mut self.out[at];
            if target.record_type() == RecordType::Message && message.is_truthy() {
                target.fields_mut().insert("message", reshape(message, 1));
                if let Some(summaries) = &mut self.summaries {
                    summaries[at] = Summary::of(target);
                }
            }
            return;
        }
        let Some(base) = self.base else {
            return;
        };
        if let Some(index) = base.index_of(entry_id) {
            if base.record(index).record_type() == RecordType::Message && message.is_truthy() {
                self.edits.push(BaseEdit::Message {
                    index,
                    message: reshape(message, 1),
                });
            }
        }
    }

    /// Brings `by_id` up to date with the entries kept so far. Headers are not entries; a
    /// later entry with a known id takes the index over.
    fn index_entries(&mut self) {
        for (at, record) in self.out.iter().enumerate().skip(self.indexed) {
            if record.record_type() != RecordType::Session {
                if let Some(id) = record.id() {
                    self.by_id.insert(id.into(), at);
                }
            }
        }
        self.indexed = self.out.len();
    }

    fn finish(self) -> Replayed {
        Replayed {
            records: self.out,
            skipped: self.skipped,
            summaries: self.summaries,
            lines: self.lines,
        }
    }
}

/// Rejects a header whose version is present but not an integer ≤ 5.
fn check_version(header: &Record) -> Result<(), ReplayError> {
    let Some(version) = header.get("version") else {
        return Ok(());
    };
    let supported = version
        .as_f64()
        .is_some_and(|v| v.fract() == 0.0 && v <= 5.0);
    if supported {
        return Ok(());
    }
    let version = match version {
        Value::String(s) => s.to_string_lossy().into_owned(),
        Value::Number(n) => json::format_js_number(n.as_f64()),
        other => json::to_compact(other),
    };
    Err(ReplayError::UnsupportedVersion { version })
}

/// Whether an object has exactly the given keys (each once).
fn has_exactly_keys(obj: &Object, keys: &[&str]) -> bool {
    obj.len() == keys.len() && keys.iter().all(|k| obj.contains_key(k))
}

/// The plain object under `value`, parsing raw text when needed.
fn plain_object(value: &Value) -> Option<std::borrow::Cow<'_, Object>> {
    use std::borrow::Cow;
    match value {
        Value::Object(o) => Some(Cow::Borrowed(o)),
        Value::Raw(raw) if raw.is_object() => match json::parse_shallow(raw.as_str(), 1) {
            Ok(Value::Object(o)) => Some(Cow::Owned(o)),
            _ => None,
        },
        _ => None,
    }
}

/// The members a canonical `header_patch` sets, or `None` if the record is not canonical.
pub fn header_patch(record: &Object) -> Option<std::borrow::Cow<'_, Object>> {
    if !has_exactly_keys(record, &["type", "patch"]) {
        return None;
    }
    let patch = plain_object(record.get("patch")?)?;
    for (key, value) in patch.iter() {
        let ok = match key.as_str() {
            Some("cwd" | "title") => matches!(value, Value::String(_)),
            Some("titleSource") => matches!(value.as_str(), Some("auto" | "user")),
            _ => false,
        };
        if !ok {
            return None;
        }
    }
    Some(patch)
}

/// The target id and message of a canonical `entry_patch`, or `None` if it is not canonical
/// or carries no message.
pub fn entry_patch(record: &Object) -> Option<(&str, &Value)> {
    if !has_exactly_keys(record, &["type", "entryId", "patch"]) {
        return None;
    }
    let entry_id = record.get_str("entryId")?;
    let patch = match record.get("patch")? {
        Value::Object(o) => o,
        _ => return None,
    };
    if patch.keys().any(|k| k != "message") {
        return None;
    }
    let message = patch.get("message")?;
    message.is_object().then_some((entry_id, message))
}

/// Re-parses a raw container so that `depth` levels of it are built, as if it had been read
/// at record level.
pub fn reshape(value: &Value, depth: usize) -> Value {
    match value {
        Value::Raw(raw) => {
            json::parse_shallow(raw.as_str(), depth).unwrap_or_else(|_| value.clone())
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn titles(text: &str) -> Option<String> {
        let r = parse_session_entries(text).unwrap();
        r.records[0].get_str("title").map(str::to_owned)
    }

    #[test]
    fn skips_malformed_lines_and_reports_them() {
        let text =
            "{\"type\":\"session\",\"id\":\"a\"}\nnot json\n123\n\n{\"type\":\"x\"}\r\n{\"torn";
        let r = parse_session_entries(text).unwrap();
        assert_eq!(r.records.len(), 2);
        let lines: Vec<_> = r.skipped.iter().map(|s| s.line).collect();
        assert_eq!(lines, [2, 3, 6]);
        assert_eq!(r.skipped[1].reason, LineError::NotAnObject);
    }

    #[test]
    fn header_patches_need_version_four() {
        let patch = "{\"type\":\"header_patch\",\"patch\":{\"title\":\"t\"}}";
        assert_eq!(
            titles(&format!(
                "{{\"type\":\"session\",\"version\":4,\"id\":\"a\"}}\n{patch}"
            )),
            Some("t".into())
        );
        assert_eq!(
            titles(&format!(
                "{{\"type\":\"session\",\"version\":3,\"id\":\"a\"}}\n{patch}"
            )),
            None
        );
        assert_eq!(
            titles(&format!("{{\"type\":\"session\",\"id\":\"a\"}}\n{patch}")),
            None
        );
    }

    #[test]
    fn non_canonical_header_patches_are_ignored() {
        for patch in [
            r#"{"type":"header_patch","patch":{"titleSource":"robot"}}"#,
            r#"{"type":"header_patch","patch":{"title":5}}"#,
            r#"{"type":"header_patch","patch":["title"]}"#,
            r#"{"type":"header_patch","patch":null}"#,
            r#"{"type":"header_patch"}"#,
            r#"{"type":"header_patch","patch":{"title":"x","id":"y"}}"#,
        ] {
            let text = format!("{{\"type\":\"session\",\"version\":5,\"id\":\"a\"}}\n{patch}");
            assert_eq!(titles(&text), None, "{patch}");
        }
    }

    #[test]
    fn rejects_unsupported_versions() {
        for v in ["6", "4.5", "\"5\"", "null"] {
            let text = format!("{{\"type\":\"session\",\"version\":{v},\"id\":\"a\"}}");
            let err = parse_session_entries(&text).unwrap_err();
            assert!(
                err.to_string().starts_with("Unsupported session version: "),
                "{err}"
            );
        }
        assert!(
            parse_session_entries("{\"type\":\"session\",\"version\":5.0,\"id\":\"a\"}").is_ok()
        );
    }

    #[test]
    fn entry_patch_reaches_an_entry_written_before_the_header() {
        let text = concat!(
            "{\"type\":\"message\",\"id\":\"m\",\"message\":{\"role\":\"user\",\"content\":[1]}}\n",
            "{\"type\":\"session\",\"version\":5,\"id\":\"s\"}\n",
            "{\"type\":\"entry_patch\",\"entryId\":\"m\",\"patch\":{\"message\":{\"role\":\"user\",\"content\":[2]}}}\n",
        );
        let r = parse_session_entries(text).unwrap();
        assert_eq!(r.records.len(), 2);
        let msg = r.records[0].message().unwrap();
        assert_eq!(json::to_compact(msg.get("content").unwrap()), "[2]");
    }

    #[test]
    fn entry_patch_only_replaces_messages() {
        let text = concat!(
            "{\"type\":\"session\",\"version\":5,\"id\":\"s\"}\n",
            "{\"type\":\"label\",\"id\":\"l\",\"targetId\":\"m\"}\n",
            "{\"type\":\"entry_patch\",\"entryId\":\"l\",\"patch\":{\"message\":{\"role\":\"user\"}}}\n",
            "{\"type\":\"message\",\"id\":\"m\",\"message\":{\"role\":\"user\",\"content\":[1]}}\n",
            "{\"type\":\"entry_patch\",\"entryId\":\"m\",\"patch\":{\"message\":{\"role\":\"user\",\"content\":[2]}}}\n",
        );
        let r = parse_session_entries(text).unwrap();
        assert_eq!(r.records.len(), 3);
        assert!(!r.records[1].fields().contains_key("message"));
        let msg = r.records[2].message().unwrap();
        assert_eq!(json::to_compact(msg.get("content").unwrap()), "[2]");
    }

    #[test]
    fn entry_patches_see_entries_added_between_them() {
        let patch = |id: &str, n: u32| {
            format!("{{\"type\":\"entry_patch\",\"entryId\":\"{id}\",\"patch\":{{\"message\":{{\"role\":\"user\",\"content\":[{n}]}}}}}}\n")
        };
        let message = |id: &str| {
            format!("{{\"type\":\"message\",\"id\":\"{id}\",\"message\":{{\"role\":\"user\",\"content\":[0]}}}}\n")
        };
        let text = [
            message("early"),
            "{\"type\":\"session\",\"version\":5,\"id\":\"s\"}\n".to_owned(),
            patch("early", 9),
            message("a"),
            patch("a", 1),
            patch("b", 9),
            message("b"),
            message("a"),
            patch("a", 2),
            patch("b", 3),
        ]
        .concat();
        let r = parse_session_entries(&text).unwrap();
        let contents: Vec<String> = r
            .records
            .iter()
            .filter_map(|rec| rec.message())
            .map(|m| json::to_compact(m.get("content").unwrap()))
            .collect();
        // Entries before the header are indexed too; a patch before its target is
        // dropped; a duplicated id sends later patches to the later entry.
        assert_eq!(contents, ["[9]", "[1]", "[3]", "[2]"]);
    }
}
