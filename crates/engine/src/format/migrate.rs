//! In-memory migrations from v1 to the current version 5.
//!
//! The version is read from the first `session` record (absent means 1). Steps:
//! - v1 → v2: every `session` record gets `version` (appended when absent); every other record,
//!   in file order, gets a fresh 8-hex `id` and `parentId` = the previous record's id (`null`
//!   first), keys appended when absent and replaced in place otherwise. A compaction with a
//!   numeric `firstKeptEntryIndex` gets `firstKeptEntryId` = the id of the record at that index
//!   of the full list (header = 0) as it stands at that moment of the pass, and loses the index.
//!   A target later in the file has no id yet, so the compaction ends up without
//!   `firstKeptEntryId`, as in the original.
//! - v2 → v3: `message.role` `"hookMessage"` becomes `"custom"`.
//! - v3 → v4 → v5: no data change.
//! - Finally the first header's version is set to 5.
//!
//! Deviations: the v1 step's ids are not random but derived from the file
//! ([`ids::derived_entry_id`]: the session id, the record's place, type and timestamp), so
//! that a file without ids shows the same ids in every load, every process and every
//! remount, and its first write persists exactly those; and they are checked against each
//! other, so that a migrated file never has two entries with one id (the original draws
//! random ids, unchecked).

use std::collections::HashSet;

use crate::format::ids;
use crate::format::record::{Record, RecordType};
use crate::json::{Number, Value};

/// The session file version this engine writes, and the one [`migrate`] brings records to.
pub const CURRENT_SESSION_VERSION: i64 = 5;

/// What [`migrate`] did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Migration {
    /// The records were already at the current version.
    NotNeeded,
    /// The records were migrated from this version.
    Migrated {
        /// The first header's `version` as read (1 when absent or not a number).
        from: f64,
    },
}

fn version_value(v: i64) -> Value {
    Value::Number(Number::from_i64(v))
}

/// Migrates `records` (header first, in file order) to the current version, in place.
pub fn migrate(records: &mut [Record]) -> Migration {
    let Some(first_header) = records.iter().position(Record::is_header) else {
        return Migration::NotNeeded;
    };
    let version = records[first_header]
        .as_header()
        .map_or(1.0, |h| h.version());
    if version >= CURRENT_SESSION_VERSION as f64 {
        return Migration::NotNeeded;
    }
    if version < 2.0 {
        v1_to_v2(records);
    }
    if version < 3.0 {
        v2_to_v3(records);
    }
    records[first_header]
        .fields_mut()
        .insert("version", version_value(CURRENT_SESSION_VERSION));
    Migration::Migrated { from: version }
}

fn v1_to_v2(records: &mut [Record]) {
    let mut assigned: HashSet<String> = HashSet::new();
    let mut previous: Option<String> = None;
    let session_id = records
        .iter()
        .find(|r| r.is_header())
        .and_then(Record::id)
        .unwrap_or_default()
        .to_owned();
    for i in 0..records.len() {
        if records[i].is_header() {
            records[i].fields_mut().insert("version", version_value(2));
            continue;
        }
        let ty = records[i].get_str("type").unwrap_or_default().to_owned();
        let timestamp = records[i].timestamp().unwrap_or_default().to_owned();
        let id = ids::derived_entry_id(&session_id, i, &ty, &timestamp, |candidate| {
            assigned.contains(candidate)
        });
        assigned.insert(id.clone());
        let fields = records[i].fields_mut();
        fields.insert("id", Value::string(id.as_str()));
        fields.insert(
            "parentId",
            previous.as_deref().map_or(Value::Null, Value::string),
        );
        previous = Some(id);
        if records[i].record_type() == RecordType::Compaction {
            resolve_first_kept_index(records, i);
        }
    }
}

/// Replaces a compaction's numeric `firstKeptEntryIndex` by `firstKeptEntryId`.
fn resolve_first_kept_index(records: &mut [Record], at: usize) {
    let Some(index) = records[at]
        .get("firstKeptEntryIndex")
        .and_then(Value::as_f64)
    else {
        return;
    };
    let target_id = (index >= 0.0 && index.fract() == 0.0)
        .then(|| records.get(index as usize))
        .flatten()
        .filter(|target| !target.is_header())
        .and_then(|target| target.id().map(str::to_owned));
    let fields = records[at].fields_mut();
    match target_id {
        Some(id) => fields.insert("firstKeptEntryId", Value::string(id)),
        // JavaScript assigns `undefined`, which the writer drops.
        None => {
            fields.remove("firstKeptEntryId");
        }
    }
    fields.remove("firstKeptEntryIndex");
}

fn v2_to_v3(records: &mut [Record]) {
    for record in records.iter_mut() {
        match record.record_type() {
            RecordType::Session => record.fields_mut().insert("version", version_value(3)),
            RecordType::Message => {
                let message = record
                    .fields_mut()
                    .get_mut("message")
                    .and_then(Value::as_object_mut);
                if let Some(message) = message {
                    if message.get_str("role") == Some("hookMessage") {
                        message.insert("role", Value::string("custom"));
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::replay::parse_session_entries;

    fn records(text: &str) -> Vec<Record> {
        parse_session_entries(text).unwrap().records
    }

    #[test]
    fn v1_header_gets_version_appended_last() {
        let mut r = records("{\"type\":\"session\",\"id\":\"s\",\"cwd\":\"/\"}\n{\"type\":\"custom\",\"customType\":\"x\"}");
        assert_eq!(migrate(&mut r), Migration::Migrated { from: 1.0 });
        assert_eq!(
            r[0].to_line(),
            "{\"type\":\"session\",\"id\":\"s\",\"cwd\":\"/\",\"version\":5}"
        );
        let line = r[1].to_line();
        assert!(
            line.starts_with("{\"type\":\"custom\",\"customType\":\"x\",\"id\":\""),
            "{line}"
        );
        assert!(line.ends_with("\",\"parentId\":null}"), "{line}");
    }

    #[test]
    fn first_kept_index_resolves_earlier_targets_only() {
        let mut r = records(concat!(
            "{\"type\":\"session\",\"id\":\"s\"}\n",
            "{\"type\":\"message\",\"message\":{\"role\":\"user\"}}\n",
            "{\"type\":\"compaction\",\"summary\":\"a\",\"firstKeptEntryIndex\":1,\"tokensBefore\":1}\n",
            "{\"type\":\"compaction\",\"summary\":\"b\",\"firstKeptEntryIndex\":4,\"tokensBefore\":1}\n",
            "{\"type\":\"message\",\"message\":{\"role\":\"user\"}}\n",
            "{\"type\":\"compaction\",\"summary\":\"c\",\"firstKeptEntryIndex\":0,\"tokensBefore\":1}\n",
            "{\"type\":\"compaction\",\"summary\":\"d\",\"firstKeptEntryIndex\":\"1\",\"tokensBefore\":1}\n",
        ));
        migrate(&mut r);
        assert_eq!(r[2].get_str("firstKeptEntryId"), r[1].id());
        assert!(!r[2].fields().contains_key("firstKeptEntryIndex"));
        let keys: Vec<_> = r[2]
            .fields()
            .keys()
            .map(|k| k.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            keys,
            [
                "type",
                "summary",
                "tokensBefore",
                "id",
                "parentId",
                "firstKeptEntryId"
            ]
        );
        assert!(!r[3].fields().contains_key("firstKeptEntryId"));
        assert!(!r[3].fields().contains_key("firstKeptEntryIndex"));
        assert!(
            !r[5].fields().contains_key("firstKeptEntryId"),
            "header target is not kept"
        );
        assert_eq!(r[6].get_str("firstKeptEntryIndex"), Some("1"));
    }

    #[test]
    fn hook_messages_become_custom_before_v3_only() {
        let line = "{\"type\":\"message\",\"id\":\"m\",\"parentId\":null,\"message\":{\"role\":\"hookMessage\"}}";
        let mut v2 = records(&format!(
            "{{\"type\":\"session\",\"version\":2,\"id\":\"s\"}}\n{line}"
        ));
        migrate(&mut v2);
        assert_eq!(v2[1].message().unwrap().get_str("role"), Some("custom"));
        let mut v3 = records(&format!(
            "{{\"type\":\"session\",\"version\":3,\"id\":\"s\"}}\n{line}"
        ));
        migrate(&mut v3);
        assert_eq!(
            v3[1].message().unwrap().get_str("role"),
            Some("hookMessage")
        );
        assert_eq!(v3[0].as_header().unwrap().version(), 5.0);
    }

    #[test]
    fn current_version_is_left_alone() {
        let text = "{\"type\":\"session\",\"version\":5,\"id\":\"s\"}\n{\"type\":\"message\",\"message\":{\"role\":\"hookMessage\"}}";
        let mut r = records(text);
        assert_eq!(migrate(&mut r), Migration::NotNeeded);
        assert_eq!(r[1].to_line(), text.lines().nth(1).unwrap());
    }
}
