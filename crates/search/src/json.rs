//! A hit as one JSON object: the shape of `gjcfs search --json` and of the mount's
//! `search/<query>/results.jsonl`; and a file's touch, the shape of `gjcfs files --json`.

use super::{FileTouch, Hit};
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

/// `{"session","path","title","firstPrompt","cwd","entry","timestamp","action","source",
/// "onLeafPath","written","resolved"}`: `path` is the session file's, `written` the touched
/// file's path as the entry has it and `resolved` that path resolved against `cwd`.
pub fn touch_json(touch: &FileTouch) -> Value {
    let mut o = Object::new();
    let s = |v: &str| Value::string(v);
    let or_null = |v: Option<&str>| v.map_or(Value::Null, s);
    o.insert("session", s(&touch.session_id));
    o.insert("path", s(&touch.path.to_string_lossy()));
    o.insert("title", or_null(touch.title.as_deref()));
    o.insert("firstPrompt", or_null(touch.first_prompt.as_deref()));
    o.insert("cwd", s(&touch.cwd));
    o.insert("entry", or_null(touch.entry_id.as_deref()));
    let time = touch.time_ms.map(format_iso_millis);
    o.insert("timestamp", or_null(time.as_deref()));
    o.insert("action", s(touch.action.as_str()));
    o.insert("source", s(&touch.source));
    o.insert("onLeafPath", Value::Bool(touch.on_leaf_path));
    o.insert("written", s(&touch.written));
    o.insert("resolved", s(&touch.resolved));
    Value::Object(o)
}
