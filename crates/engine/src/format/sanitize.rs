//! The load-time OpenAI replay sanitizer.
//!
//! Every assistant `message` whose `providerPayload.type` is `"openaiResponsesHistory"` loses
//! its `providerPayload`, and each `thinking` content block loses its `thinkingSignature`.
//! The sanitized message replaces the entry's message, and one `entry_patch` record
//! `{"type":"entry_patch","entryId":…,"patch":{"message":…}}` per changed entry is returned
//! for the caller to persist.
//!
//! This module holds the rule, record by record; [`crate::session::tree::Session::sanitize_openai_replay`]
//! applies it to a session.

use crate::format::record::{ReadLine, Record, RecordType};
use crate::json::{lazy, Object, Value};

const REPLAY_PAYLOAD_TYPE: &str = "openaiResponsesHistory";

/// The sanitized message of `record` and the `entry_patch` record that says so, or `None`
/// when the sanitizer leaves the record as it is.
pub fn sanitize_record(record: &Record) -> Option<(Value, Record)> {
    if !needs_sanitizing(record) {
        return None;
    }
    let sanitized = sanitized_message(record.message()?);
    let mut patch = Object::with_capacity(1);
    patch.insert("message", Value::Object(sanitized.clone()));
    let mut entry_patch = Object::with_capacity(3);
    entry_patch.insert("type", Value::string("entry_patch"));
    entry_patch.insert("entryId", Value::string(record.id().unwrap_or_default()));
    entry_patch.insert("patch", Value::Object(patch));
    Some((Value::Object(sanitized), Record::new(entry_patch)))
}

/// Whether the sanitizer changes this record.
pub fn needs_sanitizing(record: &Record) -> bool {
    if record.record_type() != RecordType::Message {
        return false;
    }
    if let Some(line) = record.as_read() {
        return read_message_needs_sanitizing(line);
    }
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

/// [`needs_sanitizing`] for a `message` record as read from a file, answered from the
/// places of its members without building them: the same rule on the last `role`,
/// `providerPayload` and `type` members, as `JSON.parse` keeps them.
fn read_message_needs_sanitizing(line: ReadLine<'_>) -> bool {
    let role = line.nested_member("message", "role");
    let payload_type = || {
        let payload = line.nested_member("message", "providerPayload")?;
        lazy::object_members(payload)
            .filter(|(key, _)| key == "type")
            .last()
            .map(|(_, ty)| ty)
    };
    role.is_some_and(|role| lazy::is_string(role, "assistant"))
        && payload_type().is_some_and(|ty| lazy::is_string(ty, REPLAY_PAYLOAD_TYPE))
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
