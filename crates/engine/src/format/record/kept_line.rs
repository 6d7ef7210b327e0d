//! A record's line kept as read: validated text, and where its members are, from which a
//! record's members are built only when asked for.
//!
//! Reading a line checks it whole ([`check_line`]): one JSON object, the places of its
//! members and of the members of the objects directly inside it, its `type`. A short line
//! lets the places go once its record's summary is taken ([`PLACES_KEPT_FROM`]). The text itself
//! is then kept by the caller — on its own, or with the other lines of a chunk in one
//! [`SharedText`] — and a [`KeptLine`] names it. Building the members parses the text again
//! with the raw containers pointing into the shared text, so a line's bytes are held once.
//!
//! Invariants:
//! - A kept line's text is valid JSON: one object whose keys (outer and nested) have no
//!   escapes, so a key is found by comparing its text, and the last member with a key is
//!   the one `JSON.parse` keeps.
//! - A line that does not fit these rules (an escaped key or `type`, 4 GiB or more) is
//!   built at once ([`CheckedLine::Built`]); what it parses to is the same either way.

use std::borrow::Cow;
use std::ops::Range;

use super::{LineError, RecordType, RECORD_PARSE_DEPTH};
use crate::json::{self, Object, ObjectSpans, SharedText, Value};

/// What checking one line found.
#[derive(Debug)]
pub(crate) enum CheckedLine {
    /// A record to keep as text: its type and the places of its members.
    Text(CheckedText),
    /// A record whose members were built at once.
    Built(Object),
}

/// A line checked to be kept as text ([`Record::from_checked`](super::Record::from_checked)).
#[derive(Debug)]
pub(crate) struct CheckedText {
    pub(crate) ty: RecordType,
    spans: ObjectSpans,
}

/// Checks that `text` is one JSON object and finds its members.
pub(crate) fn check_line(text: &str) -> Result<CheckedLine, LineError> {
    let built = |text| match json::parse_shallow(text, RECORD_PARSE_DEPTH)? {
        Value::Object(fields) => Ok(CheckedLine::Built(fields)),
        _ => Err(LineError::NotAnObject),
    };
    if u32::try_from(text.len()).is_err() {
        return built(text);
    }
    let spans = json::object_spans(text)?.ok_or(LineError::NotAnObject)?;
    if spans.all().iter().any(|m| m.key(text).contains('\\')) {
        return built(text);
    }
    let ty = match plain_string(text, &spans, "type") {
        LineString::Plain(ty) => RecordType::from_type(Some(ty)),
        LineString::NotAString => RecordType::Missing,
        LineString::Escaped => return built(text),
    };
    Ok(CheckedLine::Text(CheckedText { ty, spans }))
}

/// A member looked up as a string.
pub(crate) enum LineString<'a> {
    /// A string without escapes: its characters are the text between the quotes.
    Plain(&'a str),
    /// A string with escapes, to be decoded.
    Escaped,
    /// No such member, or not a string.
    NotAString,
}

fn plain_string<'a>(text: &'a str, spans: &ObjectSpans, key: &str) -> LineString<'a> {
    match member(text, spans, key) {
        Some(value) if value.starts_with('"') => {
            let chars = &value[1..value.len() - 1];
            if chars.contains('\\') {
                LineString::Escaped
            } else {
                LineString::Plain(chars)
            }
        }
        _ => LineString::NotAString,
    }
}

fn member<'a>(text: &'a str, spans: &ObjectSpans, key: &str) -> Option<&'a str> {
    json::last_member(text, spans.members(), key).map(|m| m.value(text))
}

/// Lines shorter than this keep the places of their members only until
/// [`KeptLine::forget_short_places`]; after that they are found again in the text when asked
/// for. On a short line the places cost about as much memory as the text (a 200-byte entry
/// has some 200 bytes of them), and finding them again is a scan of a few hundred bytes.
pub(crate) const PLACES_KEPT_FROM: usize = 1024;

/// A line kept as read: a range of a shared text, checked by [`check_line`].
#[derive(Clone, Debug)]
pub(crate) struct KeptLine {
    block: SharedText,
    range: Range<usize>,
    /// The places of the members; `None` once a short line let them go.
    spans: Option<Box<ObjectSpans>>,
}

impl KeptLine {
    /// The line `block[range]`, which `checked` was found in.
    pub(crate) fn new(block: SharedText, range: Range<usize>, checked: CheckedText) -> Self {
        KeptLine {
            block,
            range,
            spans: Some(Box::new(checked.spans)),
        }
    }

    /// Lets go of the members' places when the line is shorter than [`PLACES_KEPT_FROM`].
    pub(crate) fn forget_short_places(&mut self) {
        if self.range.len() < PLACES_KEPT_FROM {
            self.spans = None;
        }
    }

    /// The members' places: the kept ones, or found again in the (validated) text.
    fn spans(&self) -> Cow<'_, ObjectSpans> {
        match &self.spans {
            Some(spans) => Cow::Borrowed(spans),
            None => Cow::Owned(match json::object_spans(self.text()) {
                Ok(Some(spans)) => spans,
                _ => {
                    debug_assert!(false, "a kept line is a validated object");
                    ObjectSpans::default()
                }
            }),
        }
    }

    fn text(&self) -> &str {
        self.block
            .as_str()
            .get(self.range.clone())
            .unwrap_or_default()
    }

    /// Whether the line has a member `key`.
    pub(crate) fn has(&self, key: &str) -> bool {
        member(self.text(), &self.spans(), key).is_some()
    }

    /// The member `key` as a string.
    pub(crate) fn string(&self, key: &str) -> LineString<'_> {
        plain_string(self.text(), &self.spans(), key)
    }

    /// The members, built from the spans (as the line parses at [`RECORD_PARSE_DEPTH`]);
    /// raw containers point into the shared text.
    pub(crate) fn build(&self) -> Object {
        const _: () = assert!(RECORD_PARSE_DEPTH == 2, "members are built two levels deep");
        match json::object_at_depth_two(&self.block, self.range.clone(), &self.spans()) {
            Some(fields) => fields,
            None => {
                debug_assert!(false, "a kept line is a validated object with plain keys");
                Object::new()
            }
        }
    }
}

/// The line a record was read from, while the record is unchanged: members found in its
/// text without building values.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReadLine<'a>(pub(crate) &'a KeptLine);

impl<'a> ReadLine<'a> {
    /// The JSON text of the member `inner` of the object that is the member `key`; `None`
    /// when either is missing or `key` is not an object.
    pub(crate) fn nested_member(&self, key: &str, inner: &str) -> Option<&'a str> {
        let (text, spans) = (self.0.text(), self.0.spans());
        let outer = json::last_member(text, spans.members(), key)?;
        json::last_member(text, spans.nested(outer), inner).map(|m| m.value(text))
    }
}

#[cfg(test)]
mod tests {
    use super::super::Record;
    use super::*;
    use crate::format::sanitize::needs_sanitizing;

    /// The record read from `line`, and the record of the object `line` parses to.
    fn read_and_built(line: &str) -> (Record, Record) {
        let Ok(Value::Object(fields)) = json::parse(line) else {
            panic!("{line} is an object")
        };
        (Record::parse_line(line).unwrap(), Record::new(fields))
    }

    #[test]
    fn a_read_record_answers_as_the_built_one() {
        for line in [
            r#"{"type":"message","id":"a1","parentId":"p","message":{"role":"user","content":"hi"}}"#,
            r#"{"type":"label","id":"x","parentId":null,"id":"y","type":"message","title":3}"#,
            r#"{"type":"session","id":"a\u0031","title":"tab\there","cwd":"\/w"}"#,
            r#"{"type":5,"id":7,"parentId":[1],"timestamp":{"a":1}}"#,
            r#"{"\u0074ype":"message","id":"z","type2":"x"}"#,
            r#"{"type":"mess\u0061ge","id":"e"}"#,
            r#"{"type":"message","message":{"r\u006fle":"assistant"},"id":"n"}"#,
            r#" { "type" : "compaction" , "firstKeptEntryId" : "f" } "#,
            r#"{"type":"message","id":"r","message":{"role":"assist\u0061nt"}}"#,
            r#"{"type":"message","message":{"role":"user","role":"assistant"}}"#,
            r#"{"type":"message","message":"assistant","role":"assistant"}"#,
            r#"{}"#,
            &format!(
                r#"{{"type":"message","id":"l","message":{{"role":"user","content":"{}"}}}}"#,
                "x".repeat(PLACES_KEPT_FROM)
            ),
        ] {
            let (read, built) = read_and_built(line);
            assert_eq!(read.record_type(), built.record_type(), "{line}");
            for key in [
                "type",
                "id",
                "parentId",
                "title",
                "cwd",
                "timestamp",
                "firstKeptEntryId",
                "no",
            ] {
                assert_eq!(read.get_str(key), built.get_str(key), "{line}: {key}");
            }
            assert_eq!(needs_sanitizing(&read), needs_sanitizing(&built), "{line}");
            for role in ["user", "assistant"] {
                let (a, b) = (read.is_message_of(role), built.is_message_of(role));
                assert_eq!(a, b, "{line}: {role}");
            }
            assert_eq!(read.fields(), built.fields(), "{line}");
            assert_eq!(read.to_line(), built.to_line(), "{line}");
        }
    }

    #[test]
    fn a_short_line_finds_its_members_again_and_a_long_one_keeps_their_places() {
        let line = |content: &str| {
            format!(
                r#"{{"type":"message","id":"a","message":{{"role":"user","content":"{content}"}}}}"#
            )
        };
        let short = Record::parse_line(&line("hi")).unwrap();
        let long = Record::parse_line(&line(&"x".repeat(PLACES_KEPT_FROM))).unwrap();
        assert!(short.as_read().unwrap().0.spans.is_none());
        assert!(long.as_read().unwrap().0.spans.is_some());
        for record in [&short, &long] {
            assert_eq!(record.id(), Some("a"));
            assert!(record.is_message_of("user"));
        }
    }

    #[test]
    fn writing_a_read_record_out_leaves_its_members_unbuilt() {
        let record =
            Record::parse_line(r#"{"type":"message","id":"a","message":{"role":"assistant"}}"#)
                .unwrap();
        let mut out = Vec::new();
        record.write_line(&mut out);
        assert_eq!(record.to_line().into_bytes(), out[..out.len() - 1]);
        assert!(record.is_message_of("assistant"));
        let super::super::Body::Read(_, built) = &record.body else {
            panic!("read from a line")
        };
        assert!(built.get().is_none(), "members kept built");
        assert_eq!(record.get_str("id"), Some("a"));
    }

    #[test]
    fn lines_that_need_decoding_to_find_a_member_are_built_at_once() {
        for line in [
            r#"{"\u0074ype":"message"}"#,
            r#"{"type":"mess\u0061ge"}"#,
            r#"{"type":"message","message":{"r\u006fle":"assistant"}}"#,
        ] {
            assert!(
                matches!(check_line(line), Ok(CheckedLine::Built(_))),
                "{line}"
            );
        }
        let kept = r#"{"type":"message","id":"a\u0031","message":{"content":"\u00e9"}}"#;
        assert!(matches!(check_line(kept), Ok(CheckedLine::Text(_))));
        assert_eq!(check_line("[1]").unwrap_err(), LineError::NotAnObject);
        assert!(matches!(check_line("{\"a\":}"), Err(LineError::Json(_))));
    }

    #[test]
    fn the_sanitizer_rule_reads_a_kept_line_as_the_parsed_message() {
        let message = |m: &str| format!(r#"{{"type":"message","id":"m","message":{m}}}"#);
        let payload = r#"{"type":"openaiResponsesHistory","items":[]}"#;
        for (inner, expected) in [
            (format!(r#"{{"role":"assistant","providerPayload":{payload}}}"#), true),
            (format!(r#"{{"role":"assistant","providerPayload":{payload},"role":"user"}}"#), false),
            (format!(r#"{{"role":"user","providerPayload":{payload},"role":"assistant"}}"#), true),
            (format!(r#"{{"role":"assist\u0061nt","providerPayload":{payload}}}"#), true),
            (r#"{"role":"assistant","providerPayload":{"type":"openaiResponses\u0048istory"}}"#.into(), true),
            (r#"{"role":"assistant","providerPayload":{"type":"openaiResponsesHistory","type":"x"}}"#.into(), false),
            (r#"{"role":"assistant","providerPayload":"openaiResponsesHistory"}"#.into(), false),
            (r#"{"role":"assistant","providerPayload":{}}"#.into(), false),
            (format!(r#"{{"providerPayload":{payload}}}"#), false),
            (r#"[{"role":"assistant"}]"#.into(), false),
        ] {
            let line = message(&inner);
            let (read, built) = read_and_built(&line);
            assert!(read.as_read().is_some(), "{line} is kept as text");
            assert_eq!(needs_sanitizing(&read), expected, "{line}");
            assert_eq!(needs_sanitizing(&built), expected, "{line}");
        }
        let other = format!(
            r#"{{"type":"custom_message","message":{{"role":"assistant","providerPayload":{payload}}}}}"#
        );
        assert!(!needs_sanitizing(&Record::parse_line(&other).unwrap()));
    }

    #[test]
    fn a_changed_record_lets_its_line_go() {
        let mut record = Record::parse_line(r#"{"type":"message","id":"a","n":1}"#).unwrap();
        assert!(record.as_read().is_some());
        assert_eq!(record.get("n").and_then(Value::as_f64), Some(1.0));
        record.fields_mut().insert("n", Value::number(2.0));
        assert!(record.as_read().is_none());
        assert_eq!(record.to_line(), r#"{"type":"message","id":"a","n":2}"#);
        assert_eq!(record.id(), Some("a"));
    }

    #[test]
    fn built_members_point_into_the_shared_text() {
        let text = r#"{"type":"message","message":{"role":"user","content":[{"type":"text","text":"x"}]}} {"type":"label"}"#;
        let block = SharedText::new(text.to_owned());
        let end = text.find(" {").unwrap();
        let CheckedLine::Text(checked) = check_line(&text[..end]).unwrap() else {
            panic!("kept as text")
        };
        let fields = KeptLine::new(block.clone(), 0..end, checked).build();
        let content = fields
            .get("message")
            .and_then(Value::as_object)
            .and_then(|m| m.get("content"));
        let Some(Value::Raw(raw)) = content else {
            panic!("content stays raw: {content:?}")
        };
        assert_eq!(raw.as_str(), r#"[{"type":"text","text":"x"}]"#);
        let within = block.as_str().as_bytes().as_ptr_range();
        assert!(within.contains(&raw.as_str().as_ptr()));
    }
}
