//! Serialization in the exact shape `JSON.stringify` produces.
//!
//! Invariants:
//! - Strings escape `"`, `\`, and control characters below U+0020 (`\b \f \n \r \t`, else
//!   `\u00xx` in lower-case hex); DEL, U+2028/U+2029 and non-ASCII are written raw; a lone
//!   surrogate is written as `\udxxx`.
//! - Numbers are written as their stored text (see [`Number`](super::Number)).
//! - Object members whose key is an array index (`"0"`, `"12"`) come first in ascending
//!   numeric order, then the others in insertion order, as JavaScript enumerates them.
//! - Raw containers are written verbatim in compact output and re-indented in pretty output.
//! - Pretty output is `JSON.stringify(value, null, 2)` for values nested at most
//!   [`MAX_PRETTY_DEPTH`] levels deep. Deeper containers go on the line of their parent,
//!   without line breaks: indentation is quadratic in depth (a 40,000-deep array would
//!   indent into gigabytes), so what a pretty rendering costs stays linear in its input.

use super::scan::next_string_stop;
use super::value::{JsString, Object, Value};

/// The compact serialization of `value`.
pub fn to_compact(value: &Value) -> String {
    let mut out = Vec::new();
    write_compact(value, &mut out);
    into_string(out)
}

/// The two-space indented serialization of `value`, without a trailing newline.
pub fn to_pretty(value: &Value) -> String {
    let mut out = Vec::new();
    write_pretty(value, &mut out, 0);
    into_string(out)
}

fn into_string(out: Vec<u8>) -> String {
    // Every byte written is either ASCII, copied from a `str`, or an escape.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Appends the compact serialization of `value` to `out`.
pub fn write_compact(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => out.extend_from_slice(n.as_str().as_bytes()),
        Value::String(s) => write_string(s, out),
        Value::Raw(raw) => out.extend_from_slice(raw.as_str().as_bytes()),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_compact(item, out);
            }
            out.push(b']');
        }
        Value::Object(obj) => write_object_compact(obj, out),
    }
}

/// Appends the compact serialization of an object to `out`.
pub fn write_object_compact(obj: &Object, out: &mut Vec<u8>) {
    out.push(b'{');
    for (i, (key, item)) in obj.js_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_string(key, out);
        out.push(b':');
        write_compact(item, out);
    }
    out.push(b'}');
}

/// How many levels deep pretty output breaks lines and indents.
pub const MAX_PRETTY_DEPTH: usize = 128;

fn newline(out: &mut Vec<u8>, indent: usize) {
    if indent > MAX_PRETTY_DEPTH {
        return;
    }
    out.push(b'\n');
    out.resize(out.len() + indent * 2, b' ');
}

/// Appends the pretty serialization of `value`, nested `indent` levels deep.
pub fn write_pretty(value: &Value, out: &mut Vec<u8>, indent: usize) {
    match value {
        Value::Array(items) if !items.is_empty() => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                newline(out, indent + 1);
                write_pretty(item, out, indent + 1);
            }
            newline(out, indent);
            out.push(b']');
        }
        Value::Object(obj) => write_pretty_object(obj, out, indent),
        Value::Raw(raw) => reindent_raw(raw.as_str().as_bytes(), out, indent),
        other => write_compact(other, out),
    }
}

/// [`write_pretty`] of an object the caller holds by reference (no copy into a [`Value`]).
pub fn write_pretty_object(obj: &Object, out: &mut Vec<u8>, indent: usize) {
    if obj.is_empty() {
        out.extend_from_slice(b"{}");
        return;
    }
    out.push(b'{');
    for (i, (key, item)) in obj.js_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        newline(out, indent + 1);
        write_string(key, out);
        out.extend_from_slice(b": ");
        write_pretty(item, out, indent + 1);
    }
    newline(out, indent);
    out.push(b'}');
}

/// Re-indents validated JSON text token by token, copying strings and numbers verbatim.
fn reindent_raw(text: &[u8], out: &mut Vec<u8>, base: usize) {
    let mut depth = base;
    let mut i = 0;
    let next_significant = |mut j: usize| {
        while j < text.len() && matches!(text[j], b' ' | b'\t' | b'\n' | b'\r') {
            j += 1;
        }
        j
    };
    while i < text.len() {
        let b = text[i];
        match b {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'{' | b'[' => {
                let close = if b == b'{' { b'}' } else { b']' };
                let j = next_significant(i + 1);
                if text.get(j) == Some(&close) {
                    out.push(b);
                    out.push(close);
                    i = j + 1;
                } else {
                    out.push(b);
                    depth += 1;
                    newline(out, depth);
                    i += 1;
                }
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                newline(out, depth);
                out.push(b);
                i += 1;
            }
            b',' => {
                out.push(b',');
                newline(out, depth);
                i += 1;
            }
            b':' => {
                out.extend_from_slice(b": ");
                i += 1;
            }
            b'"' => {
                let start = i;
                i += 1;
                while i < text.len() && text[i] != b'"' {
                    i += if text[i] == b'\\' { 2 } else { 1 };
                }
                i = (i + 1).min(text.len());
                out.extend_from_slice(&text[start..i]);
            }
            _ => {
                let start = i;
                while i < text.len()
                    && !matches!(
                        text[i],
                        b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r' | b':'
                    )
                {
                    i += 1;
                }
                out.extend_from_slice(&text[start..i]);
            }
        }
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn write_unit_escape(unit: u16, out: &mut Vec<u8>) {
    out.extend_from_slice(b"\\u");
    for shift in [12, 8, 4, 0] {
        out.push(HEX[((unit >> shift) & 0xF) as usize]);
    }
}

/// The escape of an ASCII byte that needs one, if any.
fn escape_of(b: u8) -> Option<&'static [u8]> {
    match b {
        b'"' => Some(b"\\\""),
        b'\\' => Some(b"\\\\"),
        0x08 => Some(b"\\b"),
        0x0C => Some(b"\\f"),
        b'\n' => Some(b"\\n"),
        b'\r' => Some(b"\\r"),
        b'\t' => Some(b"\\t"),
        _ => None,
    }
}

/// Appends the escape of a quote, backslash or control character.
fn push_escape(b: u8, out: &mut Vec<u8>) {
    match escape_of(b) {
        Some(esc) => out.extend_from_slice(esc),
        None => write_unit_escape(b as u16, out),
    }
}

/// Appends a quoted, escaped JavaScript string.
pub fn write_string(s: &JsString, out: &mut Vec<u8>) {
    out.push(b'"');
    match s {
        // Well-formed text needs escapes only where the parser's string scan stops.
        JsString::Utf8(_) | JsString::Static(_) => {
            let bytes = s.wtf8_bytes();
            let (mut run, mut at) = (0, next_string_stop(bytes, 0));
            while at < bytes.len() {
                out.extend_from_slice(&bytes[run..at]);
                push_escape(bytes[at], out);
                run = at + 1;
                at = next_string_stop(bytes, run);
            }
            out.extend_from_slice(&bytes[run..]);
        }
        JsString::Wtf8(bytes) => write_wtf8(bytes, out),
    }
    out.push(b'"');
}

/// The escaped body of a string holding lone surrogates (written as `\udxxx`).
fn write_wtf8(bytes: &[u8], out: &mut Vec<u8>) {
    let mut run = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'"' || b == b'\\' || b < 0x20 {
            out.extend_from_slice(&bytes[run..i]);
            push_escape(b, out);
            i += 1;
            run = i;
        } else if b == 0xED && bytes.get(i + 1).is_some_and(|&n| n >= 0xA0) {
            out.extend_from_slice(&bytes[run..i]);
            let low = bytes.get(i + 2).copied().unwrap_or(0x80);
            let unit = 0xD000 | ((bytes[i + 1] as u16 & 0x3F) << 6) | (low as u16 & 0x3F);
            write_unit_escape(unit, out);
            i += 3;
            run = i;
        } else {
            i += 1;
        }
    }
    out.extend_from_slice(&bytes[run..]);
}

#[cfg(test)]
mod tests {
    use super::super::parse::{parse, parse_shallow};
    use super::*;

    fn round_trip(text: &str) -> String {
        to_compact(&parse(text).unwrap())
    }

    #[test]
    fn compact_round_trip_of_javascript_output_is_exact() {
        for text in [
            r#"{"a":1,"b":[true,false,null],"c":{"d":"e\n\"\\\u0001\u001f"}}"#,
            r#"{"n":1.5e-7,"m":-0.5,"big":12345678901234567890}"#,
            r#""\ud800 lone""#,
            "\"\u{7f}\u{2028}é😀\"",
            r#"[]"#,
            r#"{}"#,
        ] {
            assert_eq!(round_trip(text), text);
        }
    }

    #[test]
    fn pretty_output_of_deep_nesting_stays_linear_and_parses_back() {
        let depth = 40_000;
        let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        for value in [parse(&text).unwrap(), parse_shallow(&text, 1).unwrap()] {
            let pretty = to_pretty(&value);
            assert!(pretty.len() < 4 * text.len() + 64 * MAX_PRETTY_DEPTH * MAX_PRETTY_DEPTH);
            assert!(parse(&pretty).is_ok());
            let squeezed: String = pretty.split_whitespace().collect();
            assert!(squeezed == text, "the pretty text holds other values");
        }
        let shallow = parse("[[1,{\"a\":[2]}]]").unwrap();
        assert_eq!(
            to_pretty(&shallow),
            "[\n  [\n    1,\n    {\n      \"a\": [\n        2\n      ]\n    }\n  ]\n]"
        );
    }

    #[test]
    fn normalizes_escapes_like_javascript() {
        assert_eq!(round_trip(r#""\u0041\/\u00e9""#), "\"A/é\"");
        assert_eq!(round_trip(r#""\u0008\u000C""#), r#""\b\f""#);
    }

    #[test]
    fn array_index_keys_come_first() {
        assert_eq!(
            round_trip(r#"{"b":1,"10":2,"a":3,"2":4,"01":5}"#),
            r#"{"2":4,"10":2,"b":1,"a":3,"01":5}"#
        );
    }

    #[test]
    fn pretty_matches_javascript_indentation() {
        let text = r#"{"a":[1,{"b":[]}],"c":{},"d":"x"}"#;
        let expected = "{\n  \"a\": [\n    1,\n    {\n      \"b\": []\n    }\n  ],\n  \"c\": {},\n  \"d\": \"x\"\n}";
        assert_eq!(to_pretty(&parse(text).unwrap()), expected);
        // Raw containers re-indent to the same text.
        assert_eq!(to_pretty(&parse_shallow(text, 0).unwrap()), expected);
        assert_eq!(to_pretty(&parse_shallow(text, 1).unwrap()), expected);
    }

    #[test]
    fn raw_pretty_keeps_string_contents() {
        let text = r#"{"s":"a, b: {c} [d] \" e"}"#;
        let expected = "{\n  \"s\": \"a, b: {c} [d] \\\" e\"\n}";
        assert_eq!(to_pretty(&parse_shallow(text, 0).unwrap()), expected);
    }
}
