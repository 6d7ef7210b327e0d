//! The places of an object's members in its text, found while the text is validated.
//!
//! A reader that keeps a line of JSON as text, and builds values only when asked, needs to
//! find a member without walking the line again: [`object_spans`] validates the whole text
//! (exactly as [`parse`](super::parse) would accept it) and records, in text order, where
//! the key and the value of each member of the outermost object are, and of each member of
//! the objects directly inside it. Duplicate keys are all recorded; `JSON.parse` keeps the
//! last value of a key, so a lookup does too ([`last_member`]).
//!
//! Offsets are `u32`: text of 4 GiB or more is refused ([`object_spans`]), to be parsed
//! whole instead.

use std::ops::Range;

use super::parse::{parse_shallow, parse_shallow_in, ParseError, Parser};
use super::value::{JsString, Object, RawJson, SharedText, Value};

/// Where one member of an object is in the text the spans were found in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberSpan {
    key: [u32; 2],
    value: [u32; 2],
    /// For a member of the outermost object whose value is an object: where that object's
    /// members are in [`ObjectSpans`]; empty otherwise.
    nested: [u32; 2],
}

impl MemberSpan {
    /// The key's characters in `text`, between its quotes and with any escapes undecoded.
    pub fn key<'a>(&self, text: &'a str) -> &'a str {
        &text[self.key[0] as usize..self.key[1] as usize]
    }

    /// The value's JSON text in `text`, without surrounding whitespace.
    pub fn value<'a>(&self, text: &'a str) -> &'a str {
        &text[self.value[0] as usize..self.value[1] as usize]
    }
}

/// The members of an object's text, and of the objects directly inside it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectSpans {
    /// The outermost object's members, then the nested objects' members.
    spans: Box<[MemberSpan]>,
    outer: usize,
}

impl ObjectSpans {
    /// The members of the outermost object, in text order.
    pub fn members(&self) -> &[MemberSpan] {
        &self.spans[..self.outer]
    }

    /// The members of the object that is the value of `member` (one of [`Self::members`]),
    /// in text order; none when the value is not an object.
    pub fn nested(&self, member: &MemberSpan) -> &[MemberSpan] {
        self.spans
            .get(member.nested[0] as usize..member.nested[1] as usize)
            .unwrap_or_default()
    }

    /// Every member recorded, outer and nested.
    pub fn all(&self) -> &[MemberSpan] {
        &self.spans
    }
}

/// Validates `text` as one JSON value: the spans of the object it is, or `None` when it is
/// valid JSON of another kind. Text of 4 GiB or more is an error without being read.
pub fn object_spans(text: &str) -> Result<Option<ObjectSpans>, ParseError> {
    let mut p = Parser::new(text, 0);
    if u32::try_from(text.len()).is_err() {
        return Err(p.error("text too long to record member spans"));
    }
    p.skip_ws();
    if p.peek() != Some(b'{') {
        p.skip_value()?;
        return p.at_end().map(|()| None);
    }
    let (mut outer, mut nested) = SCRATCH.take();
    let found = object(&mut p, &mut outer, Some(&mut nested)).and_then(|()| p.at_end());
    let spans = found.map(|()| {
        let count = outer.len() as u32;
        let mut spans = Vec::with_capacity(outer.len() + nested.len());
        spans.extend(outer.iter().map(|span| MemberSpan {
            nested: span.nested.map(|i| i + count),
            ..span.clone()
        }));
        spans.extend_from_slice(&nested);
        ObjectSpans {
            spans: spans.into_boxed_slice(),
            outer: outer.len(),
        }
    });
    if outer.capacity() + nested.capacity() <= SCRATCH_KEPT {
        outer.clear();
        nested.clear();
        SCRATCH.set((outer, nested));
    }
    spans.map(Some)
}

/// The most spans a thread's [`SCRATCH`] keeps room for between texts.
const SCRATCH_KEPT: usize = 4096;

thread_local! {
    /// The spans of the text being read, outer and nested, collected here and then copied
    /// into one allocation of exactly their size: a text costs one allocation, not the
    /// growth of two vectors.
    static SCRATCH: std::cell::Cell<(Vec<MemberSpan>, Vec<MemberSpan>)> =
        const { std::cell::Cell::new((Vec::new(), Vec::new())) };
}

/// Records the members of the object at the parser's `{` into `spans`, and, when `nested`
/// is given, the members of each object-valued member into it.
fn object(
    p: &mut Parser<'_>,
    spans: &mut Vec<MemberSpan>,
    mut nested: Option<&mut Vec<MemberSpan>>,
) -> Result<(), ParseError> {
    p.pos += 1;
    p.skip_ws();
    if p.peek() == Some(b'}') {
        p.pos += 1;
        return Ok(());
    }
    let offset = |p: &Parser<'_>| p.pos as u32;
    loop {
        p.skip_ws();
        if p.peek() != Some(b'"') {
            return Err(p.error("expected a string key"));
        }
        let key_start = offset(p) + 1;
        p.skip_value()?;
        let key = [key_start, offset(p) - 1];
        p.expect(b':', "expected ':' after an object key")?;
        p.skip_ws();
        let value_start = offset(p);
        let mut inner = [0, 0];
        match nested.as_deref_mut() {
            Some(nested) if p.peek() == Some(b'{') => {
                let first = nested.len() as u32;
                object(p, nested, None)?;
                inner = [first, nested.len() as u32];
            }
            _ => p.skip_value()?,
        }
        spans.push(MemberSpan {
            key,
            value: [value_start, offset(p)],
            nested: inner,
        });
        if p.after_member()? {
            return Ok(());
        }
    }
}

/// The last of `members` whose key is written `key` (without escapes) in `text`, the text
/// they were found in: the member whose value `JSON.parse` keeps, when no other member
/// spells the same key with escapes.
pub fn last_member<'s>(text: &str, members: &'s [MemberSpan], key: &str) -> Option<&'s MemberSpan> {
    members.iter().rev().find(|span| span.key(text) == key)
}

/// What [`parse_shallow_in`](super::parse_shallow_in) gives for `block[range]` at depth 2
/// (the object and the containers directly in it built, deeper containers raw), built from
/// the spans [`object_spans`] found in that text: a raw container in an object member is its
/// span, taken without reading its text again, so building costs the decoding of the
/// scalars near the top, not a second pass over the text. `None` when `range` is not within
/// `block` or a key has escapes (the spans do not decode keys).
pub fn object_at_depth_two(
    block: &SharedText,
    range: Range<usize>,
    spans: &ObjectSpans,
) -> Option<Object> {
    let text = block.as_str().get(range.clone())?;
    // A member's value as a range of `block`.
    let in_block = |span: &MemberSpan| {
        let [start, end] = span.value.map(|at| range.start + at as usize);
        start..end
    };
    let shared = |span: &MemberSpan| {
        let Range { start, end } = in_block(span);
        Value::Raw(RawJson::in_shared(block, start, end))
    };
    let key = |span: &MemberSpan| {
        let key = span.key(text);
        (!key.contains('\\')).then(|| JsString::from_parsed(key))
    };
    let mut members = Vec::with_capacity(spans.members().len());
    for member in spans.members() {
        let value = match *member.value(text).as_bytes().first()? {
            b'{' => {
                let nested = spans.nested(member);
                let mut inner = Vec::with_capacity(nested.len());
                for m in nested {
                    let value = match *m.value(text).as_bytes().first()? {
                        b'{' | b'[' => shared(m),
                        _ => parse_shallow(m.value(text), 0).ok()?,
                    };
                    inner.push((key(m)?, value));
                }
                Value::Object(Object::from_parsed(inner))
            }
            b'[' => parse_shallow_in(block, in_block(member), 1).ok()?,
            _ => parse_shallow(member.value(text), 0).ok()?,
        };
        members.push((key(member)?, value));
    }
    Some(Object::from_parsed(members))
}

#[cfg(test)]
mod tests {
    use super::super::parse::near_texts;
    use super::super::{parse, parse_shallow, parse_shallow_in, Object, SharedText, Value};
    use super::*;

    /// The object `JSON.parse` makes of `text` with members below it kept raw, built from
    /// `members`: each key decoded, each value parsed, duplicates keeping the first position
    /// and the last value.
    fn object_from(text: &str, members: &[MemberSpan]) -> Object {
        let mut object = Object::new();
        for span in members {
            let key = parse(&format!("\"{}\"", span.key(text))).unwrap();
            let value = parse_shallow(span.value(text), 0).unwrap();
            object.insert(&key.as_js_string().unwrap().to_string_lossy(), value);
        }
        object
    }

    /// Checks `spans` against parsing: the outer members, and the members of each member
    /// that is an object.
    fn check_spans(text: &str, spans: &ObjectSpans) {
        let Ok(Value::Object(parsed)) = parse_shallow(text, 1) else {
            panic!("{text:?} is an object")
        };
        assert_eq!(object_from(text, spans.members()), parsed, "{text:?}");
        for member in spans.members() {
            match parse_shallow(member.value(text), 1).unwrap() {
                Value::Object(inner) => {
                    assert_eq!(object_from(text, spans.nested(member)), inner, "{text:?}")
                }
                _ => assert!(spans.nested(member).is_empty(), "{text:?}"),
            }
        }
        let nested: usize = spans.members().iter().map(|m| spans.nested(m).len()).sum();
        assert_eq!(spans.all().len(), spans.members().len() + nested);
    }

    #[test]
    fn spans_give_the_members_parsing_gives() {
        let text = r#" { "a" : [1, {"b": 2}] , "s":"x\"y", "\u0061b":null,"a":{"c":"}","d" : {"e":1}} ,"n":-1.5e3} "#;
        let spans = object_spans(text).unwrap().unwrap();
        let keys: Vec<_> = spans.members().iter().map(|s| s.key(text)).collect();
        assert_eq!(keys, ["a", "s", "\\u0061b", "a", "n"]);
        assert_eq!(spans.members()[1].value(text), r#""x\"y""#);
        let a = last_member(text, spans.members(), "a").unwrap();
        assert_eq!(a.value(text), r#"{"c":"}","d" : {"e":1}}"#);
        let d = last_member(text, spans.nested(a), "d").unwrap();
        assert_eq!(d.value(text), r#"{"e":1}"#);
        assert!(spans.nested(d).is_empty(), "only one level is nested");
        let n = last_member(text, spans.members(), "n").unwrap();
        assert_eq!(n.value(text), "-1.5e3");
        assert_eq!(last_member(text, spans.members(), "b"), None);
        check_spans(text, &spans);
    }

    /// Checks [`object_at_depth_two`] against parsing at depth 2, with `text` in the middle
    /// of a shared block: equal members, and raw exactly where parsing leaves them raw.
    fn check_built(text: &str, spans: &ObjectSpans) {
        let block = SharedText::new(format!("[{text}]"));
        let range = 1..1 + text.len();
        let built = object_at_depth_two(&block, range.clone(), spans);
        let parsed = parse_shallow_in(&block, range, 2).unwrap();
        let escaped_key = spans.all().iter().any(|m| m.key(text).contains('\\'));
        if escaped_key {
            return assert_eq!(built, None, "{text:?}");
        }
        let built = Value::Object(built.unwrap());
        assert_eq!(built, parsed, "{text:?}");
        assert_eq!(
            super::super::to_compact(&built),
            super::super::to_compact(&parsed),
            "{text:?}"
        );
        assert_eq!(raw_places(&built), raw_places(&parsed), "{text:?}");
    }

    /// The nesting levels at which a value holds raw containers, in order.
    fn raw_places(value: &Value) -> Vec<usize> {
        fn walk(value: &Value, level: usize, out: &mut Vec<usize>) {
            match value {
                Value::Raw(_) => out.push(level),
                Value::Object(o) => o.iter().for_each(|(_, v)| walk(v, level + 1, out)),
                Value::Array(items) => items.iter().for_each(|v| walk(v, level + 1, out)),
                _ => {}
            }
        }
        let mut out = Vec::new();
        walk(value, 0, &mut out);
        out
    }

    #[test]
    fn building_from_spans_is_parsing_at_depth_two() {
        let text = r#"{"type":"message","id":"a","message":{"role":"user","content":[{"type":"text","text":"x"}],"n":1.5,"o":{},"s":"\u00e9"},"l":[1,[2],{"a":3}],"e":{},"message":{"role":"x","role":"y"},"z":null}"#;
        let spans = object_spans(text).unwrap().unwrap();
        check_built(text, &spans);
    }

    #[test]
    fn other_values_and_empty_objects() {
        let spans = object_spans(" {} ").unwrap().unwrap();
        assert!(spans.all().is_empty());
        let text = r#"{"e":{},"a":[{"x":1}]}"#;
        let spans = object_spans(text).unwrap().unwrap();
        assert!(spans.nested(&spans.members()[0]).is_empty());
        assert!(spans.nested(&spans.members()[1]).is_empty());
        for text in ["[1]", "\"s\"", "3", "null", " true "] {
            assert_eq!(object_spans(text).unwrap(), None, "{text}");
        }
    }

    #[test]
    fn each_text_gets_only_its_own_spans() {
        // A text that fails midway, and one with more members than a thread's scratch
        // keeps room for, leave nothing behind for the next text.
        let failed = r#"{"a":1,"b":{"c":2},"d":"#;
        assert!(object_spans(failed).is_err());
        let text = r#"{"x":{"y":1}}"#;
        let spans = object_spans(text).unwrap().unwrap();
        assert_eq!(spans.all().len(), 2);
        check_spans(text, &spans);
        let members: Vec<String> = (0..SCRATCH_KEPT + 1)
            .map(|i| format!("\"k{i}\":{{\"v\":{i}}}"))
            .collect();
        let large = format!("{{{}}}", members.join(","));
        let spans = object_spans(&large).unwrap().unwrap();
        assert_eq!(spans.all().len(), 2 * (SCRATCH_KEPT + 1));
        check_spans(&large, &spans);
        let spans = object_spans(text).unwrap().unwrap();
        assert_eq!(spans.all().len(), 2);
        check_spans(text, &spans);
    }

    #[test]
    fn agrees_with_parsing_on_every_cut_and_changed_byte() {
        let doc = r#" {"a":[1,-2.5e3,true,null,{"b":"x\"y\\","c":[]}],"d":{"\u00e9":"\ud83d\ude00","f":{"g":[]},"f":2},"e":{},"a":"z"} "#;
        for text in &near_texts(doc) {
            match (object_spans(text), parse_shallow(text, 1)) {
                (Ok(Some(spans)), Ok(Value::Object(_))) => {
                    check_spans(text, &spans);
                    check_built(text, &spans);
                }
                (Ok(None), Ok(value)) => assert!(!value.is_object(), "{text:?}"),
                (Err(_), Err(_)) => {}
                (spans, parsed) => panic!("{text:?}: {spans:?} but {parsed:?}"),
            }
        }
    }
}
