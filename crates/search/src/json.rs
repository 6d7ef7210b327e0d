//! A hit as one JSON object: the shape of `gjcfs search --json` and of the mount's
//! `search/<query>/results.jsonl`.

use super::Hit;
use gjcfs_engine::format::time::format_iso_millis;
use gjcfs_engine::json::{Object, Value};

/// `{"session","path","title","cwd","entry","type","kind","timestamp","onLeafPath","score",
/// "snippet","highlights"}`; highlights are `[start, end)` character offsets in the snippet.
pub fn hit_json(hit: &Hit) -> Value {
    let mut o = Object::new();
    let s = |v: &str| Value::string(v);
    o.insert("session", s(&hit.session_id));
    o.insert("path", s(&hit.path.to_string_lossy()));
    o.insert("title", hit.title.as_deref().map_or(Value::Null, s));
    o.insert("cwd", s(&hit.cwd));
    o.insert("entry", hit.entry_id.as_deref().map_or(Value::Null, s));
    o.insert("type", s(&hit.entry_type));
    o.insert("kind", s(&hit.kind));
    o.insert(
        "timestamp",
        hit.time_ms
            .map_or(Value::Null, |ms| s(&format_iso_millis(ms))),
    );
    o.insert("onLeafPath", Value::Bool(hit.on_leaf_path));
    o.insert("score", Value::number(hit.score));
    o.insert("snippet", s(&hit.snippet.text));
    let highlights = hit
        .snippet
        .highlights
        .iter()
        .map(|&(a, b)| {
            // Character offsets, as a reader of the JSON counts them.
            let chars = |at: usize| hit.snippet.text[..at].chars().count() as f64;
            Value::Array(vec![Value::number(chars(a)), Value::number(chars(b))])
        })
        .collect();
    o.insert("highlights", Value::Array(highlights));
    Value::Object(o)
}
