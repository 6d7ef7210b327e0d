//! The persist-time transform and blob-reference resolution.
//!
//! Applied to every record written (full rewrites, appends, entry-patch payloads), walking
//! values with the key each sits under (array elements inherit the array's key):
//! - a data URL (`data:image/…;base64,…`) under `image_url`, or under `url` inside an
//!   `image_url` object, becomes a blob reference to the URL's UTF-8 bytes;
//! - a string longer than [`MAX_PERSIST_CHARS`] UTF-16 units is cut to
//!   `MAX_PERSIST_CHARS − 47` units plus [`TRUNCATION_NOTICE`]; under a signature key it
//!   becomes `""` instead;
//! - an image block (`type:"image"`, string `data`) in an array under `content` whose `data`
//!   is at least 1,024 characters and not already a reference becomes a reference to the
//!   base64-decoded bytes; the block is not walked further;
//! - `partialJson` and `jsonlEvents` members are removed at any depth;
//! - an object whose contents changed and that has a string `content` and a numeric
//!   `lineCount` gets `lineCount` = the number of `\n`-separated pieces of `content`.
//!
//! Blobs are stored durably before the transformed record is returned, so the record can be
//! written right after. Records that need none of this are returned borrowed after a check
//! that does not parse their raw payloads unless their text could need the transform.

use std::borrow::Cow;
use std::sync::OnceLock;

use memchr::memmem;

use crate::format::blob::{blob_ref, parse_blob_ref, BlobError, BlobStore, BLOB_REF_PREFIX};
use crate::json::{JsString, Object, RawJson, Value};

/// The longest string persisted whole, in UTF-16 units.
pub const MAX_PERSIST_CHARS: usize = 500_000;
/// Appended to a truncated string (47 UTF-16 units).
pub const TRUNCATION_NOTICE: &str = "\n\n[Session persistence truncated large content]";
/// Image data at least this long is moved to the blob store.
pub const IMAGE_BLOB_MIN_CHARS: usize = 1024;

const SIGNATURE_KEYS: [&str; 3] = ["thinkingSignature", "thoughtSignature", "textSignature"];
const TRANSIENT_KEYS: [&str; 2] = ["partialJson", "jsonlEvents"];

/// The record as it is to be written, with its blobs stored.
pub fn prepare_for_persist<'a>(
    record: &'a Object,
    blobs: &BlobStore,
) -> Result<Cow<'a, Object>, BlobError> {
    if !object_needs(record, None) {
        return Ok(Cow::Borrowed(record));
    }
    let mut owned = record.clone();
    transform_object(&mut owned, None, blobs)?;
    Ok(Cow::Owned(owned))
}

/// Whether raw text could hold something the transform changes: a string long enough to
/// truncate, a transient key, an image block or an `image_url`. Inside JSON strings a quote
/// is always escaped, so these quoted patterns only match keys and whole string values.
fn raw_may_need(raw: &RawJson) -> bool {
    static FINDERS: OnceLock<[memmem::Finder<'static>; 4]> = OnceLock::new();
    let text = raw.as_str();
    if text.len() > MAX_PERSIST_CHARS {
        return true;
    }
    let finders = FINDERS.get_or_init(|| {
        [
            "\"partialJson\"",
            "\"jsonlEvents\"",
            "\"image\"",
            "\"image_url\"",
        ]
        .map(|p| memmem::Finder::new(p.as_bytes()))
    });
    finders.iter().any(|f| f.find(text.as_bytes()).is_some())
}

fn is_data_url(s: &str) -> bool {
    s.starts_with("data:image/") && s.contains(";base64,")
}

fn is_url_slot(key: Option<&str>, parent: Option<&str>) -> bool {
    key == Some("image_url") || (key == Some("url") && parent == Some("image_url"))
}

/// Whether a string value would change.
fn string_needs(s: &JsString, key: Option<&str>, parent: Option<&str>) -> bool {
    if is_url_slot(key, parent) && s.as_str().is_some_and(is_data_url) {
        return true;
    }
    s.wtf8_bytes().len() > MAX_PERSIST_CHARS && s.utf16_len() > MAX_PERSIST_CHARS
}

/// The `data` of an image block that should move to the blob store.
fn externalizable_image(value: &Value) -> Option<&str> {
    let block = value.as_object()?;
    if block.get_str("type") != Some("image") {
        return None;
    }
    let data = block.get("data")?.as_js_string()?;
    let data = data.as_str()?;
    (!data.starts_with(BLOB_REF_PREFIX) && data.len() >= IMAGE_BLOB_MIN_CHARS).then_some(data)
}

fn value_needs(value: &Value, key: Option<&str>, parent: Option<&str>) -> bool {
    match value {
        Value::Raw(raw) => raw_may_need(raw),
        Value::String(s) => string_needs(s, key, parent),
        Value::Array(items) => items.iter().any(|item| {
            (key == Some("content") && externalizable_image(item).is_some())
                || value_needs(item, key, parent)
        }),
        Value::Object(obj) => object_needs(obj, key),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

fn object_needs(obj: &Object, key: Option<&str>) -> bool {
    obj.iter().any(|(k, v)| {
        let k = k.as_str();
        k.is_some_and(|k| TRANSIENT_KEYS.contains(&k)) || value_needs(v, k, key)
    })
}

/// Transforms `value` in place; returns whether anything changed.
fn transform(
    value: &mut Value,
    key: Option<&str>,
    parent: Option<&str>,
    blobs: &BlobStore,
) -> Result<bool, BlobError> {
    match value {
        Value::Raw(raw) => {
            if !raw_may_need(raw) {
                return Ok(false);
            }
            value.expand_in_place();
            transform(value, key, parent, blobs)
        }
        Value::String(s) => {
            if is_url_slot(key, parent) && s.as_str().is_some_and(is_data_url) {
                let hash = blobs.put(s.wtf8_bytes())?;
                *s = JsString::from(blob_ref(&hash));
                return Ok(true);
            }
            if !string_needs(s, key, parent) {
                return Ok(false);
            }
            *s = if key.is_some_and(|k| SIGNATURE_KEYS.contains(&k)) {
                JsString::from("")
            } else {
                s.truncate_utf16(MAX_PERSIST_CHARS - TRUNCATION_NOTICE.len())
                    .concat(TRUNCATION_NOTICE)
            };
            Ok(true)
        }
        Value::Array(items) => {
            let mut changed = false;
            for item in items.iter_mut() {
                item.expand_in_place();
                if key == Some("content") {
                    if let Some(data) = externalizable_image(item) {
                        let hash = blobs.put(&decode_base64_lenient(data))?;
                        if let Some(block) = item.as_object_mut() {
                            block.insert("data", Value::string(blob_ref(&hash)));
                        }
                        changed = true;
                        continue;
                    }
                }
                changed |= transform(item, key, parent, blobs)?;
            }
            Ok(changed)
        }
        Value::Object(obj) => transform_object(obj, key, blobs),
        Value::Null | Value::Bool(_) | Value::Number(_) => Ok(false),
    }
}

fn transform_object(
    obj: &mut Object,
    key: Option<&str>,
    blobs: &BlobStore,
) -> Result<bool, BlobError> {
    let mut changed = false;
    for transient in TRANSIENT_KEYS {
        changed |= obj.remove(transient).is_some();
    }
    for (k, v) in obj.iter_mut() {
        let k = k.as_str().map(str::to_owned);
        changed |= transform(v, k.as_deref(), key, blobs)?;
    }
    if changed && matches!(obj.get("lineCount"), Some(Value::Number(_))) {
        if let Some(content) = obj.get("content").and_then(Value::as_js_string) {
            let lines = content.wtf8_bytes().iter().filter(|&&b| b == b'\n').count() + 1;
            obj.insert("lineCount", Value::number(lines as f64));
        }
    }
    Ok(changed)
}

/// Decodes base64 the lenient way Node's `Buffer.from(s, "base64")` does: both alphabets,
/// characters outside them skipped, decoding stops at `=`, missing padding accepted.
pub fn decode_base64_lenient(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for b in text.bytes() {
        let v = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            b'=' => break,
            _ => continue,
        };
        acc = (acc << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

/// The placeholder for a blob that cannot be read.
fn missing_placeholder(kind: &str, reference: &str) -> String {
    let hash = reference.strip_prefix(BLOB_REF_PREFIX).unwrap_or(reference);
    format!("[Session resident {kind} blob missing: sha256:{hash}; original content unavailable]")
}

/// `value` with every blob reference resolved as the original resolves them on load:
/// image-block `data` becomes the blob's base64, `image_url`, `image_url.url` and other
/// `data` references (not directly under `content`) become the blob's UTF-8 text; a blob
/// that is missing, corrupt or badly named becomes the original's placeholder text.
pub fn resolve_blob_refs<'a>(value: &'a Value, blobs: &BlobStore) -> Cow<'a, Value> {
    if !mentions_blob_ref(value) {
        return Cow::Borrowed(value);
    }
    let mut owned = value.expanded().into_owned();
    resolve(&mut owned, None, None, blobs);
    Cow::Owned(owned)
}

fn mentions_blob_ref(value: &Value) -> bool {
    match value {
        Value::Raw(raw) => {
            memmem::find(raw.as_str().as_bytes(), BLOB_REF_PREFIX.as_bytes()).is_some()
        }
        Value::String(s) => s.wtf8_bytes().starts_with(BLOB_REF_PREFIX.as_bytes()),
        Value::Array(items) => items.iter().any(mentions_blob_ref),
        Value::Object(obj) => obj.iter().any(|(_, v)| mentions_blob_ref(v)),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

fn read_blob(reference: &str, blobs: &BlobStore) -> Option<Vec<u8>> {
    let hash = parse_blob_ref(reference)?;
    blobs.get_checked(hash).ok().flatten()
}

fn resolve(value: &mut Value, key: Option<&str>, parent: Option<&str>, blobs: &BlobStore) {
    value.expand_in_place();
    match value {
        Value::String(s) => {
            let Some(reference) = s.as_str().filter(|t| t.starts_with(BLOB_REF_PREFIX)) else {
                return;
            };
            let as_text =
                is_url_slot(key, parent) || (key == Some("data") && parent != Some("content"));
            if as_text {
                let text = match read_blob(reference, blobs) {
                    Some(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                    None => missing_placeholder("imageUrl", reference),
                };
                *s = JsString::from(text);
            }
        }
        Value::Array(items) => {
            for item in items.iter_mut() {
                resolve(item, key, parent, blobs);
            }
        }
        Value::Object(obj) => {
            let image_ref = (obj.get_str("type") == Some("image"))
                .then(|| obj.get_str("data"))
                .flatten()
                .filter(|d| d.starts_with(BLOB_REF_PREFIX))
                .map(str::to_owned);
            if let Some(reference) = image_ref {
                let data = match read_blob(&reference, blobs) {
                    Some(bytes) => data_encoding::BASE64.encode(&bytes),
                    None => missing_placeholder("imageData", &reference),
                };
                obj.insert("data", Value::string(data));
            }
            for (k, v) in obj.iter_mut() {
                let k = k.as_str().map(str::to_owned);
                resolve(v, k.as_deref(), key, blobs);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::Raw(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::record::RECORD_PARSE_DEPTH;
    use crate::json::{parse, parse_shallow, to_compact};
    use crate::storage::{MemoryStorage, SessionStorage};
    use std::sync::Arc;

    fn store() -> (MemoryStorage, BlobStore) {
        let storage = MemoryStorage::new();
        let blobs = BlobStore::new("/agent/blobs", Arc::new(storage.clone()));
        (storage, blobs)
    }

    fn prepared(text: &str, blobs: &BlobStore) -> String {
        let Value::Object(obj) = parse_shallow(text, RECORD_PARSE_DEPTH).unwrap() else {
            panic!()
        };
        to_compact(&Value::Object(
            prepare_for_persist(&obj, blobs).unwrap().into_owned(),
        ))
    }

    #[test]
    fn ordinary_records_are_untouched_and_borrowed() {
        let (_, blobs) = store();
        let text = r#"{"type":"message","message":{"role":"user","content":[{"type":"text","text":"an image of a cat"}]}}"#;
        let Value::Object(obj) = parse_shallow(text, RECORD_PARSE_DEPTH).unwrap() else {
            panic!()
        };
        assert!(matches!(
            prepare_for_persist(&obj, &blobs).unwrap(),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn long_strings_are_truncated_and_signatures_cleared() {
        let (_, blobs) = store();
        let long = "x".repeat(MAX_PERSIST_CHARS + 10);
        let text = format!(
            r#"{{"type":"message","message":{{"role":"assistant","content":[{{"type":"thinking","thinking":"{long}","thinkingSignature":"{long}"}}],"note":"{long}"}}}}"#
        );
        let out = parse(&prepared(&text, &blobs)).unwrap();
        let msg = out
            .as_object()
            .unwrap()
            .get("message")
            .unwrap()
            .as_object()
            .unwrap();
        let note = msg.get_str("note").unwrap();
        assert_eq!(note.len(), MAX_PERSIST_CHARS);
        assert!(note.ends_with(TRUNCATION_NOTICE));
        assert_eq!(TRUNCATION_NOTICE.encode_utf16().count(), 47);
        let block = &msg.get("content").unwrap().as_array().unwrap()[0];
        let block = block.as_object().unwrap();
        assert_eq!(block.get_str("thinkingSignature"), Some(""));
        assert_eq!(block.get_str("thinking").unwrap().len(), MAX_PERSIST_CHARS);
    }

    #[test]
    fn transient_keys_go_and_line_count_is_recomputed() {
        let (_, blobs) = store();
        let text = r#"{"type":"message","message":{"role":"toolResult","details":{"content":"a\nb\nc","lineCount":9,"partialJson":"{"},"jsonlEvents":[1]}}"#;
        assert_eq!(
            prepared(text, &blobs),
            r#"{"type":"message","message":{"role":"toolResult","details":{"content":"a\nb\nc","lineCount":3}}}"#
        );
    }

    #[test]
    fn images_and_data_urls_move_to_the_blob_store_and_resolve_back() {
        let (storage, blobs) = store();
        let bytes: Vec<u8> = (0..2000u32).map(|i| (i * 7) as u8).collect();
        let b64 = data_encoding::BASE64.encode(&bytes);
        let small = data_encoding::BASE64.encode(b"tiny");
        let url = format!("data:image/png;base64,{small}");
        let text = format!(
            r#"{{"type":"message","message":{{"role":"user","content":[{{"type":"image","data":"{b64}","mimeType":"image/png"}},{{"type":"image","data":"{small}","mimeType":"image/png"}}],"providerPayload":{{"items":[{{"content":[{{"image_url":{{"url":"{url}"}}}}]}}]}}}}}}"#
        );
        let out = prepared(&text, &blobs);
        let image_hash = crate::format::blob::sha256_hex(&bytes);
        let url_hash = crate::format::blob::sha256_hex(url.as_bytes());
        assert!(out.contains(&format!(
            r#"{{"type":"image","data":"blob:sha256:{image_hash}","mimeType":"image/png"}}"#
        )));
        assert!(out.contains(&small), "small images stay inline");
        assert!(out.contains(&format!(r#"{{"url":"blob:sha256:{url_hash}"}}"#)));
        assert!(!out.contains(&b64));
        assert_eq!(
            storage.file(&blobs.path_of(&image_hash).unwrap()).unwrap(),
            bytes
        );
        assert_eq!(
            storage.file(&blobs.path_of(&url_hash).unwrap()).unwrap(),
            url.as_bytes()
        );

        let stored = parse(&out).unwrap();
        let resolved = resolve_blob_refs(&stored, &blobs);
        assert_eq!(to_compact(&resolved), to_compact(&parse(&text).unwrap()));

        storage
            .unlink(&blobs.path_of(&image_hash).unwrap())
            .unwrap();
        let resolved = to_compact(&resolve_blob_refs(&stored, &blobs));
        assert!(resolved.contains(&format!(
            "[Session resident imageData blob missing: sha256:{image_hash}; original content unavailable]"
        )));
    }

    #[test]
    fn lenient_base64_matches_node() {
        assert_eq!(decode_base64_lenient("aGVsbG8="), b"hello");
        assert_eq!(decode_base64_lenient("aGVs\nbG8"), b"hello");
        assert_eq!(decode_base64_lenient("-_8"), [0xfb, 0xff]);
        assert_eq!(decode_base64_lenient("aGk=IGlnbm9yZWQ="), b"hi");
    }
}
