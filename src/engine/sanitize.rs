//! The load-time OpenAI replay sanitizer.
//!
//! Every assistant `message` whose `providerPayload.type` is `"openaiResponsesHistory"` loses
//! its `providerPayload`, and each `thinking` content block loses its `thinkingSignature`.
//! The sanitized message replaces the entry's message, and one `entry_patch` record
//! `{"type":"entry_patch","entryId":…,"patch":{"message":…}}` per changed entry is returned
//! for the caller to persist.

use super::json::{Object, Value};
use super::record::Record;
use super::session::Session;

const REPLAY_PAYLOAD_TYPE: &str = "openaiResponsesHistory";

/// Sanitizes `session` in place and returns the `entry_patch` records describing the change.
pub fn sanitize_openai_replay(session: &mut Session) -> Vec<Record> {
    let all: Vec<usize> = session.entry_indices().collect();
    sanitize_entries(session, all)
}

/// [`sanitize_openai_replay`] for the records at `candidates` only (every record the
/// sanitizer would change must be among them), in the order given.
pub fn sanitize_entries(
    session: &mut Session,
    candidates: impl IntoIterator<Item = usize>,
) -> Vec<Record> {
    let targets: Vec<usize> = candidates
        .into_iter()
        .filter(|&i| needs_sanitizing(session.record(i)))
        .collect();
    let mut patches = Vec::with_capacity(targets.len());
    for i in targets {
        let Some(message) = session.record(i).message() else {
            continue;
        };
        let sanitized = sanitized_message(message);
        let entry_id = session.record(i).id().unwrap_or_default().to_owned();
        session.replace_message(i, Value::Object(sanitized.clone()));
        let mut patch = Object::with_capacity(1);
        patch.insert("message", Value::Object(sanitized));
        let mut record = Object::with_capacity(3);
        record.insert("type", Value::string("entry_patch"));
        record.insert("entryId", Value::string(entry_id));
        record.insert("patch", Value::Object(patch));
        patches.push(Record::new(record));
    }
    patches
}

/// Whether the sanitizer changes this record.
pub fn needs_sanitizing(record: &Record) -> bool {
    let Some(message) = record.message() else {
        return false;
    };
    message.get_str("role") == Some("assistant")
        && message.get("providerPayload").is_some_and(|p| {
            p.expanded()
                .as_object()
                .is_some_and(|o| o.get_str("type") == Some(REPLAY_PAYLOAD_TYPE))
        })
}

fn sanitized_message(message: &Object) -> Object {
    let mut message = message.clone();
    message.remove("providerPayload");
    if let Some(Value::Array(blocks)) = message.get_mut("content").map(Value::expand_in_place) {
        for block in blocks.iter_mut() {
            if let Some(block) = block.as_object_mut() {
                if block.get_str("type") == Some("thinking") {
                    block.remove("thinkingSignature");
                }
            }
        }
    }
    message
}
