//! Building new entries with the key order the original writer emits, and
//! checking entries given from outside (the CLI and the mount) before they are appended.
//!
//! - Most types: `type, id, parentId, timestamp`, then the type's own fields in order.
//! - `custom`: `type, customType, data?, id, parentId, timestamp`.
//! - `custom_message`: `type, customType, content, display, details?, attribution, id,
//!   parentId, timestamp`; `attribution` defaults to `"agent"`, and the `details` key
//!   `__pendingDisplayTag` is stripped.

use crate::format::record::{Record, RecordType};
use crate::json::{Object, Value};
use crate::read::inspect::schema_violation;

use super::error::SessionError;

/// The base members every new entry gets.
pub struct Base<'a> {
    /// The entry's id (8 lower-case hex digits when generated).
    pub id: &'a str,
    /// The parent entry's id; `None` for a root (written as `"parentId": null`).
    pub parent_id: Option<&'a str>,
    /// When the entry was made: an ISO 8601 UTC timestamp with milliseconds, as
    /// `Date.prototype.toISOString` writes it (`2026-01-01T00:00:02.000Z`).
    pub timestamp: &'a str,
}

fn put_base(obj: &mut Object, base: &Base<'_>) {
    obj.insert("id", Value::string(base.id));
    obj.insert(
        "parentId",
        base.parent_id.map_or(Value::Null, Value::string),
    );
    obj.insert("timestamp", Value::string(base.timestamp));
}

/// Builds an entry of `ty` from its own fields (in the order given), placing the base
/// members where the original writer puts them.
pub fn build_entry(ty: &str, fields: &Object, base: &Base<'_>) -> Record {
    let mut obj = Object::with_capacity(fields.len() + 4);
    obj.insert("type", Value::string(ty));
    match RecordType::from_type(Some(ty)) {
        RecordType::Custom => {
            copy(&mut obj, fields, &["customType", "data"]);
            put_base(&mut obj, base);
            copy_rest(&mut obj, fields);
        }
        RecordType::CustomMessage => {
            copy(&mut obj, fields, &["customType", "content", "display"]);
            if let Some(details) = fields.get("details") {
                obj.insert("details", strip_pending_display_tag(details));
            }
            let attribution = fields.get("attribution").cloned();
            obj.insert(
                "attribution",
                attribution.unwrap_or_else(|| Value::string("agent")),
            );
            put_base(&mut obj, base);
            copy_rest(&mut obj, fields);
        }
        _ => {
            put_base(&mut obj, base);
            copy_rest(&mut obj, fields);
        }
    }
    Record::new(obj)
}

fn copy(obj: &mut Object, fields: &Object, keys: &[&str]) {
    for key in keys {
        if let Some(v) = fields.get(key) {
            obj.insert(key, v.clone());
        }
    }
}

/// Copies the members not placed yet, in their order.
fn copy_rest(obj: &mut Object, fields: &Object) {
    for (key, value) in fields.iter() {
        let key = key.to_string_lossy();
        if !obj.contains_key(&key) {
            obj.insert(&key, value.clone());
        }
    }
}

fn strip_pending_display_tag(details: &Value) -> Value {
    match details.object_view() {
        Some(obj) if obj.contains_key("__pendingDisplayTag") => {
            let mut obj = obj.into_owned();
            obj.remove("__pendingDisplayTag");
            Value::Object(obj)
        }
        _ => details.clone(),
    }
}

/// The message roles the format knows (the agent's `AgentMessage` roles; the legacy
/// `hookMessage` is migrated to `custom` on load and is not written anew).
pub const MESSAGE_ROLES: [&str; 8] = [
    "user",
    "developer",
    "assistant",
    "toolResult",
    "bashExecution",
    "pythonExecution",
    "fileMention",
    "custom",
];

/// Refuses a message entry given from outside whose role the format does not know.
fn check_role(ty: &str, fields: &Object) -> Result<(), SessionError> {
    if ty != "message" {
        return Ok(());
    }
    let role = fields
        .get("message")
        .and_then(|m| m.as_object())
        .and_then(|m| m.get_str("role"));
    match role {
        Some(role) if MESSAGE_ROLES.contains(&role) => Ok(()),
        Some(role) => Err(SessionError::InvalidEntry(format!(
            "unknown message role {role:?} (known: {})",
            MESSAGE_ROLES.join(", ")
        ))),
        // The schema check names a missing or non-string role.
        None => Ok(()),
    }
}

/// The type and own fields of an entry given from outside: an object with a `type` and no
/// `id`, `parentId` or `timestamp`, or a bare message (an object with a `role` and no
/// `type`), which becomes a `message` entry. A message's role must be one the format
/// knows (`MESSAGE_ROLES`).
pub fn external_entry(input: Object) -> Result<(String, Object), SessionError> {
    let (ty, fields) = external_entry_unchecked(input)?;
    check_role(&ty, &fields)?;
    Ok((ty, fields))
}

fn external_entry_unchecked(input: Object) -> Result<(String, Object), SessionError> {
    let invalid = |why: &str| Err(SessionError::InvalidEntry(why.to_owned()));
    for key in ["id", "parentId", "timestamp"] {
        if input.contains_key(key) && input.contains_key("type") {
            return invalid(&format!(
                "{key} is assigned by the session and must not be given"
            ));
        }
    }
    match input.get("type") {
        None if input
            .get("role")
            .is_some_and(|r| matches!(r, Value::String(_))) =>
        {
            let mut message = input;
            if !message.contains_key("timestamp") {
                message.insert(
                    "timestamp",
                    Value::number(crate::format::time::now_millis() as f64),
                );
            }
            let mut fields = Object::with_capacity(1);
            fields.insert("message", Value::Object(message));
            Ok(("message".to_owned(), fields))
        }
        None => invalid("an entry needs a string \"type\" (or a message needs a string \"role\")"),
        Some(Value::String(ty)) => {
            let ty = ty.to_string_lossy().into_owned();
            match RecordType::from_type(Some(&ty)) {
                RecordType::Session | RecordType::HeaderPatch | RecordType::EntryPatch => {
                    invalid(&format!("type {ty:?} cannot be appended as an entry"))
                }
                RecordType::Unknown | RecordType::Missing => {
                    invalid(&format!("unknown entry type {ty:?}"))
                }
                _ => {
                    let mut fields = input;
                    fields.remove("type");
                    Ok((ty, fields))
                }
            }
        }
        Some(_) => invalid("\"type\" must be a string"),
    }
}

/// Checks a built entry against the strict schema.
pub fn check_schema(record: &Record) -> Result<(), SessionError> {
    match schema_violation(record) {
        None => Ok(()),
        Some(why) => Err(SessionError::InvalidEntry(format!(
            "{} entry: {why}",
            record.get_str("type").unwrap_or("?")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    fn obj(text: &str) -> Object {
        parse(text).unwrap().as_object().unwrap().clone()
    }

    const BASE: Base<'static> = Base {
        id: "abcd1234",
        parent_id: Some("p"),
        timestamp: "2026-01-01T00:00:00.000Z",
    };

    #[test]
    fn a_message_role_the_format_does_not_know_is_refused() {
        for text in [
            r#"{"role":"wizard","content":"x"}"#,
            r#"{"type":"message","message":{"role":"wizard","content":"x"}}"#,
        ] {
            let err = external_entry(obj(text)).unwrap_err();
            assert!(
                err.to_string().contains("unknown message role \"wizard\""),
                "{err}"
            );
        }
        for role in MESSAGE_ROLES {
            let text = format!(r#"{{"role":"{role}","content":"x"}}"#);
            assert!(external_entry(obj(&text)).is_ok(), "{role}");
        }
    }

    #[test]
    fn key_order_follows_the_original_writer() {
        let custom = build_entry(
            "custom",
            &obj(r#"{"data":{"a":1},"customType":"x"}"#),
            &BASE,
        );
        assert_eq!(
            custom.to_line(),
            r#"{"type":"custom","customType":"x","data":{"a":1},"id":"abcd1234","parentId":"p","timestamp":"2026-01-01T00:00:00.000Z"}"#
        );
        let cm = build_entry(
            "custom_message",
            &obj(
                r#"{"customType":"x","content":"hi","display":true,"details":{"__pendingDisplayTag":1,"k":2}}"#,
            ),
            &BASE,
        );
        assert_eq!(
            cm.to_line(),
            r#"{"type":"custom_message","customType":"x","content":"hi","display":true,"details":{"k":2},"attribution":"agent","id":"abcd1234","parentId":"p","timestamp":"2026-01-01T00:00:00.000Z"}"#
        );
        let label = build_entry("label", &obj(r#"{"targetId":"t","label":"x"}"#), &BASE);
        assert_eq!(
            label.to_line(),
            r#"{"type":"label","id":"abcd1234","parentId":"p","timestamp":"2026-01-01T00:00:00.000Z","targetId":"t","label":"x"}"#
        );
    }

    #[test]
    fn external_entries_are_checked() {
        let (ty, fields) = external_entry(obj(r#"{"role":"user","content":"hi"}"#)).unwrap();
        assert_eq!(ty, "message");
        assert!(fields
            .get("message")
            .unwrap()
            .as_object()
            .unwrap()
            .contains_key("timestamp"));
        for bad in [
            r#"{"type":"label","id":"x","targetId":"t"}"#,
            r#"{"type":"label","parentId":null,"targetId":"t"}"#,
            r#"{"type":"nope"}"#,
            r#"{"type":"session"}"#,
            r#"{"type":5}"#,
            r#"{"content":"no role"}"#,
        ] {
            assert!(external_entry(obj(bad)).is_err(), "{bad}");
        }
        let (ty, fields) = external_entry(obj(r#"{"type":"ttsr_injection"}"#)).unwrap();
        assert!(check_schema(&build_entry(&ty, &fields, &BASE)).is_err());
    }
}
