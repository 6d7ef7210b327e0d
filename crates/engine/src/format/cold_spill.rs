//! Rehydrating cold-spilled content.
//!
//! After a compaction the agent moves the large payloads of older `message` and
//! `custom_message` entries into the blob store and leaves, in their place, a notice (or, for
//! tool-call arguments, a `{"__gjcColdSpillArguments":true,…}` object), plus an
//! `evictedContent` marker on the entry:
//! `{…, "payloads": {"<path>": {"ref":"blob:sha256:<hex>","sha256":"<hex>","encoding":"utf8"|"json","originalChars":n,…}}}`.
//! A path is dotted from the entry's type: `message.content.0.text`,
//! `message.content.3.arguments`, `custom_message.content`, `custom_message.content.1.text`.
//!
//! Rehydration puts the payloads back, in memory only, as the agent does for exports,
//! fidelity reads and provider context (a file is never changed by it):
//! - Each payload path that names an existing member or array element (array indices as
//!   `String(i)` writes them) gets the blob's content: its UTF-8 text (lossily decoded), or,
//!   for `encoding:"json"`, the JSON value it holds. A merged run of text blocks was stored
//!   as one block, so it comes back as one block. Paths naming nothing are ignored.
//! - A payload is read only when its `ref` is `blob:sha256:<64 lower-case hex>`, its `sha256`
//!   names the same hash, and the blob's bytes hash to it. Otherwise — and when the blob is
//!   missing or a `json` payload does not parse — the value becomes the agent's
//!   `[Cold-spill blob unavailable: <ref>; original <originalChars> chars unavailable]`
//!   (`undefined` for a member that is absent).
//! - When one payload path lies inside another, the outer one wins.
//! - A marker that is not an object, or whose `payloads` is not an object, rehydrates
//!   nothing (the agent fails the whole read on a non-object marker; a corrupt blob also
//!   makes it fail the read, where this gives the unavailable text).
//! - The marker stays on the entry: it records where the content was stored.

use std::borrow::Cow;

use crate::format::blob::{parse_blob_ref, BlobStore};
use crate::format::js_text::template_text;
use crate::format::record::{Record, RecordType};
use crate::json::{self, Object, Value};

/// The text the agent leaves in place of an evicted payload.
pub const EVICTED_NOTICE: &str = "[Compacted history content evicted to durable cold storage]";

/// The entry member holding the cold-spill marker.
pub const MARKER_KEY: &str = "evictedContent";

/// The path prefix of payloads of a record of this type: its `type`, for the types that
/// are evicted.
pub fn payload_base(ty: RecordType) -> Option<&'static str> {
    match ty {
        RecordType::Message => Some("message"),
        RecordType::CustomMessage => Some("custom_message"),
        _ => None,
    }
}

/// The cold-spill marker of `record`, when it is an entry type the agent evicts and carries
/// one.
pub fn marker(record: &Record) -> Option<&Value> {
    payload_base(record.record_type())?;
    // Only a marked record is built to read its marker.
    record
        .has(MARKER_KEY)
        .then(|| record.get(MARKER_KEY))
        .flatten()
}

/// `record` with its cold-spilled payloads read back from `blobs` (borrowed when it has no
/// marker). For a `message` the payloads go into its `message`, for a `custom_message` into
/// the entry itself (its `content`).
pub fn rehydrate_record<'a>(record: &'a Record, blobs: &BlobStore) -> Cow<'a, Record> {
    let (Some(base), Some(marker)) = (payload_base(record.record_type()), marker(record)) else {
        return Cow::Borrowed(record);
    };
    let Some(payloads) = payloads_of(marker) else {
        return Cow::Borrowed(record);
    };
    let mut fields = record.fields().clone();
    match record.record_type() {
        RecordType::Message => {
            if let Some(message) = fields.get_mut("message") {
                rehydrate_in_place(message, base, &payloads, blobs);
            }
        }
        _ => rehydrate_members(&mut fields, base, &payloads, blobs),
    }
    Cow::Owned(Record::new(fields))
}

/// `value` — the part of an entry that payload paths starting with `base` address (a
/// message entry's `message` for `"message"`, a context message built from a custom message
/// for `"custom_message"`) — with the payloads of `marker` read back from `blobs`.
pub fn rehydrate_value<'a>(
    value: &'a Value,
    base: &str,
    marker: &Value,
    blobs: &BlobStore,
) -> Cow<'a, Value> {
    match payloads_of(marker) {
        Some(payloads) if !payloads.is_empty() => {
            let mut owned = value.clone();
            rehydrate_in_place(&mut owned, base, &payloads, blobs);
            Cow::Owned(owned)
        }
        _ => Cow::Borrowed(value),
    }
}

/// The payloads of a marker, when it and they are objects.
fn payloads_of(marker: &Value) -> Option<Object> {
    let marker = marker.object_view()?;
    let payloads = marker.get("payloads")?.object_view()?;
    Some(payloads.into_owned())
}

/// Applies the payloads under `base` to `value`, which sits at path `base`.
fn rehydrate_in_place(value: &mut Value, base: &str, payloads: &Object, blobs: &BlobStore) {
    for (path, payload) in ordered(payloads, base) {
        if path.is_empty() {
            *value = read_payload(payload, blobs);
        } else {
            set_existing(value, &path, payload, blobs);
        }
    }
}

/// [`rehydrate_in_place`] for an object sitting at path `base` whose members hold the
/// payload targets.
fn rehydrate_members(fields: &mut Object, base: &str, payloads: &Object, blobs: &BlobStore) {
    for (path, payload) in ordered(payloads, base) {
        let Some((first, rest)) = path.split_first() else {
            continue;
        };
        let Some(member) = fields.get_mut(first) else {
            continue;
        };
        if rest.is_empty() {
            *member = read_payload(payload, blobs);
        } else {
            set_existing(member, rest, payload, blobs);
        }
    }
}

/// The payloads whose path starts with `base`, as the segments after it, innermost first so
/// that an outer payload, applied later, wins.
fn ordered<'p>(payloads: &'p Object, base: &str) -> Vec<(Vec<String>, &'p Value)> {
    let mut found: Vec<(Vec<String>, &Value)> = payloads
        .iter()
        .filter_map(|(key, payload)| {
            let key = key.to_string_lossy();
            let rest = match key.strip_prefix(base)? {
                "" => Vec::new(),
                rest => rest
                    .strip_prefix('.')?
                    .split('.')
                    .map(str::to_owned)
                    .collect(),
            };
            Some((rest, payload))
        })
        .collect();
    found.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
    found
}

/// Replaces the value at `path` under `value` with the payload, if that value exists.
fn set_existing(value: &mut Value, path: &[String], payload: &Value, blobs: &BlobStore) {
    let mut at = value;
    for segment in path {
        at = match at.expand_in_place() {
            Value::Object(obj) => match obj.get_mut(segment) {
                Some(member) => member,
                None => return,
            },
            Value::Array(items) => match array_index(segment).and_then(|i| items.get_mut(i)) {
                Some(item) => item,
                None => return,
            },
            _ => return,
        };
    }
    *at = read_payload(payload, blobs);
}

/// The index a path segment names in an array: canonical decimal, as `String(i)` writes it.
fn array_index(segment: &str) -> Option<usize> {
    let canonical = segment == "0"
        || (!segment.starts_with('0') && segment.bytes().all(|b| b.is_ascii_digit()));
    if canonical && !segment.is_empty() {
        segment.parse().ok()
    } else {
        None
    }
}

/// The content of one payload, or the agent's unavailable text.
fn read_payload(payload: &Value, blobs: &BlobStore) -> Value {
    let payload = payload.object_view();
    let member = |key: &str| payload.as_ref().and_then(|p| p.get(key).cloned());
    let reference = member("ref");
    let unavailable = || {
        Value::string(format!(
            "[Cold-spill blob unavailable: {}; original {} chars unavailable]",
            template_text(reference.as_ref()),
            template_text(member("originalChars").as_ref())
        ))
    };
    let Some(hash) = reference
        .as_ref()
        .and_then(Value::as_str)
        .and_then(parse_blob_ref)
    else {
        return unavailable();
    };
    if member("sha256").as_ref().and_then(Value::as_str) != Some(hash) {
        return unavailable();
    }
    let Ok(Some(bytes)) = blobs.get_checked(hash) else {
        return unavailable();
    };
    let text = String::from_utf8_lossy(&bytes);
    let is_json = member("encoding").as_ref().and_then(Value::as_str) == Some("json");
    if is_json {
        json::parse(&text).unwrap_or_else(|_| unavailable())
    } else {
        Value::string(text.into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::blob::{blob_ref, sha256_hex};
    use crate::storage::MemoryStorage;
    use std::sync::Arc;

    fn store() -> BlobStore {
        BlobStore::new("/blobs", Arc::new(MemoryStorage::new()))
    }

    fn payload(hash: &str, encoding: &str, chars: usize) -> String {
        format!(
            "{{\"kind\":\"cold_spill\",\"ref\":\"{}\",\"encoding\":\"{encoding}\",\"originalChars\":{chars},\"sha256\":\"{hash}\"}}",
            blob_ref(hash)
        )
    }

    fn record(line: &str) -> Record {
        Record::parse_line(line).unwrap()
    }

    #[test]
    fn nested_payloads_lose_to_the_outer_one_and_absent_paths_are_ignored() {
        let blobs = store();
        let inner = blobs.put(b"inner").unwrap();
        let outer = blobs
            .put(b"{\"type\":\"text\",\"text\":\"outer\"}")
            .unwrap();
        let line = format!(
            "{{\"type\":\"message\",\"id\":\"a\",\"message\":{{\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":\"n\"}}]}},\
             \"evictedContent\":{{\"payloads\":{{\"message.content.0.text\":{},\"message.content.0\":{},\"message.content.01\":{},\"message.content.9.text\":{}}}}}}}",
            payload(&inner, "utf8", 5),
            payload(&outer, "json", 5),
            payload(&inner, "utf8", 5),
            payload(&inner, "utf8", 5),
        );
        let record = record(&line);
        let rehydrated = rehydrate_record(&record, &blobs);
        assert_eq!(
            json::to_compact(rehydrated.get("message").unwrap()),
            "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"outer\"}]}"
        );
        assert!(rehydrated.get(MARKER_KEY).is_some(), "the marker stays");
    }

    #[test]
    fn unreadable_payloads_give_the_unavailable_text() {
        let blobs = store();
        let good = blobs.put(b"good").unwrap();
        let missing = sha256_hex(b"never stored");
        let bad_json = blobs.put(b"{nope").unwrap();
        let cases = [
            (
                payload(&missing, "utf8", 7),
                format!("blob:sha256:{missing}; original 7"),
            ),
            (
                payload(&bad_json, "json", 5),
                format!("blob:sha256:{bad_json}; original 5"),
            ),
            (
                payload(&good, "utf8", 4)
                    .replace(&format!("\"sha256\":\"{good}\""), "\"sha256\":\"x\""),
                format!("blob:sha256:{good}; original 4"),
            ),
            (
                "{\"ref\":\"blob:sha256:../x\"}".to_owned(),
                "blob:sha256:../x; original undefined".to_owned(),
            ),
            ("7".to_owned(), "undefined; original undefined".to_owned()),
        ];
        for (payload, shown) in cases {
            let line = format!(
                "{{\"type\":\"custom_message\",\"customType\":\"c\",\"content\":\"n\",\"id\":\"a\",\"evictedContent\":{{\"payloads\":{{\"custom_message.content\":{payload}}}}}}}"
            );
            let record = record(&line);
            let rehydrated = rehydrate_record(&record, &blobs);
            assert_eq!(
                rehydrated.get_str("content"),
                Some(format!("[Cold-spill blob unavailable: {shown} chars unavailable]").as_str()),
                "{payload}"
            );
        }
    }

    #[test]
    fn records_without_a_usable_marker_are_borrowed() {
        let blobs = store();
        for line in [
            "{\"type\":\"message\",\"id\":\"a\",\"message\":{\"role\":\"user\",\"content\":\"x\"}}",
            "{\"type\":\"message\",\"id\":\"a\",\"message\":{\"role\":\"user\",\"content\":\"x\"},\"evictedContent\":\"garbage\"}",
            "{\"type\":\"message\",\"id\":\"a\",\"message\":{\"role\":\"user\",\"content\":\"x\"},\"evictedContent\":{\"payloads\":\"nope\"}}",
            "{\"type\":\"custom\",\"id\":\"a\",\"evictedContent\":{\"payloads\":{\"custom.data\":{}}}}",
        ] {
            let record = record(line);
            assert!(matches!(rehydrate_record(&record, &blobs), Cow::Borrowed(_)), "{line}");
        }
    }
}
