//! Redacting a session's records: the JSON of each line, or the records of a loaded
//! session.

use std::collections::HashSet;

use super::{placeholder, redact_text, Report, ENV_FILE};
use crate::format::blob::BlobStore;
use crate::format::cold_spill::{rehydrate_record, MARKER_KEY};
use crate::format::record::Record;
use crate::json::{self, JsString, Object, Value};
use crate::session::tree::Session;

/// The members whose string values are the structure of a session, never text to redact:
/// ids and the links between entries, types and roles, times, tool call ids and names,
/// models, blob references and hashes, and the providers' opaque signatures and encrypted
/// reasoning.
pub const KEPT_MEMBERS: &[&str] = &[
    "type",
    "id",
    "parentId",
    "timestamp",
    "role",
    "toolCallId",
    "toolName",
    "targetId",
    "fromId",
    "firstKeptEntryId",
    "entryId",
    "parentSession",
    "cwd",
    "version",
    "titleSource",
    "customType",
    "mimeType",
    "ref",
    "sha256",
    "encoding",
    "api",
    "provider",
    "model",
    "modelId",
    "stopReason",
    "responseId",
    "signature",
    "thinkingSignature",
    "textSignature",
    "encrypted_content",
];

/// The ids of the `read` tool calls of `.env` files seen so far, in file order (a call
/// comes before its result).
#[derive(Default)]
struct EnvReads(HashSet<String>);

impl EnvReads {
    /// Notes the `read` calls of `.env` files among an assistant message's content.
    fn note_calls(&mut self, message: &Object) {
        let Some(content) = message.get("content").map(Value::expanded) else {
            return;
        };
        for block in content.as_array().unwrap_or_default() {
            let Some(block) = block.object_view() else {
                continue;
            };
            let is_read = block.get_str("type") == Some("toolCall")
                && block
                    .get_str("name")
                    .is_some_and(|n| n.eq_ignore_ascii_case("read"));
            let arguments = block.get("arguments").and_then(Value::object_view);
            let path = arguments.as_deref().and_then(|a| {
                ["path", "file_path", "filePath", "file"]
                    .iter()
                    .find_map(|k| a.get_str(k))
            });
            if let (true, Some(path), Some(id)) = (is_read, path, block.get_str("id")) {
                if is_env_file(path) {
                    self.0.insert(id.to_owned());
                }
            }
        }
    }

    /// Whether `message` is the result of a `read` of a `.env` file.
    fn is_result(&self, message: &Object) -> bool {
        message.get_str("role") == Some("toolResult")
            && message
                .get_str("toolCallId")
                .is_some_and(|id| self.0.contains(id))
    }
}

/// Whether `path` names a `.env` file: `.env`, `.env.<anything>` or `<name>.env`.
fn is_env_file(path: &str) -> bool {
    let name = path.rsplit(['/', '\\']).next().unwrap_or(path);
    name == ".env" || name.starts_with(".env.") || name.ends_with(".env")
}

/// The message of a record, expanded: an entry's `message`, an entry patch's.
fn message_of(fields: &mut Object) -> Option<&mut Object> {
    let holder = if fields.get_str("type") == Some("entry_patch") {
        fields.get_mut("patch")?.expand_in_place().as_object_mut()?
    } else {
        fields
    };
    holder.get_mut("message")?.expand_in_place().as_object_mut()
}

/// Redacts one record's fields in place: the output of a `.env` read whole, every other
/// string by the rules.
fn redact_fields(fields: &mut Object, env: &mut EnvReads, report: &mut Report) {
    if let Some(message) = message_of(fields) {
        env.note_calls(message);
        if env.is_result(message) {
            let mut blanked = false;
            for key in ["content", "details"] {
                if let Some(value) = message.get_mut(key) {
                    blanked |= blank(value);
                }
            }
            if blanked {
                report.add(ENV_FILE, 1);
            }
        }
    }
    redact_members(fields, report);
}

/// Replaces every string of `value` but the structure's ([`KEPT_MEMBERS`]) with the
/// `.env` placeholder; whether it replaced one.
fn blank(value: &mut Value) -> bool {
    match value.expand_in_place() {
        Value::String(s) => {
            let shown = placeholder(ENV_FILE);
            let changed = s.as_str() != Some(shown.as_str());
            *s = JsString::from(shown);
            changed
        }
        Value::Array(items) => items.iter_mut().fold(false, |b, v| blank(v) | b),
        Value::Object(object) => object
            .iter_mut()
            .filter(|(k, _)| !kept(k))
            .fold(false, |b, (_, v)| blank(v) | b),
        _ => false,
    }
}

fn kept(key: &JsString) -> bool {
    key.as_str()
        .is_some_and(|k| KEPT_MEMBERS.contains(&k) || k == MARKER_KEY)
}

/// Redacts the members of `object` but the structure's.
fn redact_members(object: &mut Object, report: &mut Report) {
    // An image's bytes, and a provider's encrypted thinking, are data, not text.
    let opaque = matches!(object.get_str("type"), Some("image" | "redactedThinking"));
    for (key, value) in object.iter_mut() {
        if kept(key) || (opaque && key.as_str() == Some("data")) {
            continue;
        }
        redact_value(value, report);
    }
}

fn redact_value(value: &mut Value, report: &mut Report) {
    match value.expand_in_place() {
        Value::String(s) => {
            let text = s.to_string_lossy();
            if let std::borrow::Cow::Owned(redacted) = redact_text(&text, report) {
                *s = JsString::from(redacted);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| redact_value(v, report)),
        Value::Object(object) => redact_members(object, report),
        _ => {}
    }
}

/// A session file's bytes with every secret redacted, line by line, counted in `report`.
///
/// A line that is a JSON object is redacted value by value and, when anything was
/// replaced, written back compact as `JSON.stringify` writes it (so the result is still a
/// session file: the same records, entries, ids and tree); a line left unchanged keeps its
/// bytes. A line that is not a JSON object (the loader skips it) is redacted as text.
pub fn redact_lines(bytes: &[u8], report: &mut Report) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut env = EnvReads::default();
    for (n, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if n > 0 {
            out.push(b'\n');
        }
        let (body, cr) = match line.strip_suffix(b"\r") {
            Some(body) => (body, true),
            None => (line, false),
        };
        let before = report.total();
        let text = String::from_utf8_lossy(body);
        let redacted = match json::parse(&text) {
            Ok(Value::Object(mut fields)) => {
                redact_fields(&mut fields, &mut env, report);
                json::to_compact(&Value::Object(fields))
            }
            _ => redact_text(&text, report).into_owned(),
        };
        out.extend_from_slice(if report.total() == before {
            body
        } else {
            redacted.as_bytes()
        });
        if cr {
            out.push(b'\r');
        }
    }
    out
}

/// A copy of `session` for rendering, every secret redacted (counted in `report`): its
/// records in order, each with its cold-spilled payloads read back from `blobs` first and
/// its cold-spill marker dropped (so that a rendering reads nothing back over the redacted
/// text), then redacted; the same leaf.
pub fn redacted_session(
    session: &Session,
    blobs: Option<&BlobStore>,
    report: &mut Report,
) -> Session {
    let mut env = EnvReads::default();
    let records = session
        .records()
        .iter()
        .map(|record| {
            let mut fields = match blobs {
                Some(blobs) => rehydrate_record(record, blobs).into_owned(),
                None => record.clone(),
            }
            .into_fields();
            fields.remove(MARKER_KEY);
            redact_fields(&mut fields, &mut env, report);
            Record::new(fields)
        })
        .collect();
    let mut copy = Session::from_records(records);
    match session.leaf_id() {
        Some(id) => {
            // The copy holds the same ids in the same places.
            let _ = copy.branch(id);
        }
        None => copy.reset_leaf(),
    }
    copy
}
