//! A strict JSON parser (RFC 8259, as `JSON.parse` accepts it) with a depth cut-off.
//!
//! Containers nested deeper than the requested parse depth are validated without building a
//! tree and kept as [`Value::Raw`] source text. Validation of skipped containers is iterative,
//! so arbitrarily deep input cannot overflow the stack; parsed levels are bounded by the
//! depth argument.
//!
//! Strings accept every escape `JSON.parse` accepts, including `\u` escapes of lone
//! surrogates, which are kept in generalized UTF-8 (see [`JsString`]).

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use super::scan::{next_string_stop, string_end};
use super::value::{JsString, Number, Object, RawJson, SharedText, Value};

/// How many levels [`parse`] builds before keeping deeper containers raw.
const FULL_DEPTH: usize = 128;

/// Why a text is not one JSON value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ParseError {
    /// Byte offset of the offending character.
    pub offset: usize,
    /// What is wrong there (for example "unterminated string").
    pub reason: &'static str,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.reason, self.offset)
    }
}

/// Parses one JSON value surrounded by optional whitespace.
pub fn parse(text: &str) -> Result<Value, ParseError> {
    parse_shallow(text, FULL_DEPTH)
}

/// Parses one JSON value, building objects and arrays only down to nesting level `depth`
/// (the outermost value is level 0); deeper containers become [`Value::Raw`].
pub fn parse_shallow(text: &str, depth: usize) -> Result<Value, ParseError> {
    let mut p = Parser::new(text, depth);
    let value = p.value(0)?;
    p.at_end()?;
    Ok(value)
}

/// [`parse_shallow`] of `block[range]`, whose deeper containers point into `block`
/// instead of copying their text. Returns an error when `range` is not within `block` or
/// not on character boundaries.
pub fn parse_shallow_in(
    block: &SharedText,
    range: Range<usize>,
    depth: usize,
) -> Result<Value, ParseError> {
    let Some(text) = block.as_str().get(range.clone()) else {
        return Err(ParseError {
            offset: 0,
            reason: "range outside the shared text",
        });
    };
    let mut p = Parser::new(text, depth);
    p.shared = Some((block, range.start));
    let value = p.value(0)?;
    p.at_end()?;
    Ok(value)
}

/// Checks that `text` is one JSON value without building anything: a container is
/// skipped as the parser skips one below its depth, and its text is not copied.
pub fn validate(text: &str) -> Result<(), ParseError> {
    let mut p = Parser::new(text, 0);
    p.skip_value()?;
    p.at_end()
}

/// `doc`, each of its prefixes, and `doc` with each byte in turn replaced by one that matters
/// to JSON (where that leaves UTF-8): texts near a document, valid and not, on which two
/// readers must agree.
#[cfg(test)]
pub(super) fn near_texts(doc: &str) -> Vec<String> {
    let mut texts = vec![doc.to_owned()];
    texts.extend(
        (0..doc.len())
            .filter_map(|n| doc.get(..n))
            .map(str::to_owned),
    );
    for at in 0..doc.len() {
        for byte in [
            b'"', b'\\', b'{', b'}', b']', b',', b':', b'0', b' ', b'x', 0x01,
        ] {
            let mut bytes = doc.as_bytes().to_vec();
            bytes[at] = byte;
            texts.extend(String::from_utf8(bytes).ok());
        }
    }
    texts
}

/// Parses raw container text; the parser made it, so it is valid.
pub(super) fn expand_raw(raw: &RawJson) -> Value {
    match parse(raw.as_str()) {
        Ok(v) => v,
        Err(e) => {
            debug_assert!(false, "raw JSON failed to re-parse: {e}");
            Value::Null
        }
    }
}

pub(super) struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pub(super) pos: usize,
    depth: usize,
    /// The shared text `text` is a range of, and where that range starts: raw containers
    /// then point into it.
    shared: Option<(&'a SharedText, usize)>,
    /// The members of the objects being parsed, innermost last: an object is collected
    /// here and then moved into an allocation of exactly its size (no growth copies, no
    /// spare capacity held for the life of the value).
    members: Vec<(JsString, Value)>,
    /// The same for the items of arrays.
    items: Vec<Value>,
}

impl<'a> Parser<'a> {
    pub(super) fn new(text: &'a str, depth: usize) -> Self {
        Parser {
            text,
            bytes: text.as_bytes(),
            pos: 0,
            depth,
            shared: None,
            members: Vec::new(),
            items: Vec::new(),
        }
    }

    /// Succeeds when only whitespace follows the value.
    pub(super) fn at_end(&mut self) -> Result<(), ParseError> {
        self.skip_ws();
        if self.pos == self.bytes.len() {
            Ok(())
        } else {
            Err(self.error("unexpected text after the JSON value"))
        }
    }

    pub(super) fn error(&self, reason: &'static str) -> ParseError {
        ParseError {
            offset: self.pos,
            reason,
        }
    }

    pub(super) fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    pub(super) fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    pub(super) fn expect(&mut self, byte: u8, reason: &'static str) -> Result<(), ParseError> {
        self.skip_ws();
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(reason))
        }
    }

    /// Checks one value, after any whitespace, without building it.
    pub(super) fn skip_value(&mut self) -> Result<(), ParseError> {
        self.skip_ws();
        match self.peek() {
            Some(b'{' | b'[') => self.skip_container(),
            _ => self.skip_scalar(),
        }
    }

    /// Checks the string, number or literal at the parser's position without building it.
    fn skip_scalar(&mut self) -> Result<(), ParseError> {
        match self.peek() {
            Some(b'"') => self.skip_string(),
            Some(b't') => self.literal("true", Value::Null).map(drop),
            Some(b'f') => self.literal("false", Value::Null).map(drop),
            Some(b'n') => self.literal("null", Value::Null).map(drop),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.error("unexpected character")),
            None => Err(self.error("unexpected end of input")),
        }
    }

    fn value(&mut self, level: usize) -> Result<Value, ParseError> {
        self.skip_ws();
        match self.peek() {
            Some(b'{' | b'[') if level >= self.depth => {
                let start = self.pos;
                self.skip_container()?;
                Ok(Value::Raw(match self.shared {
                    Some((block, base)) => RawJson::in_shared(block, base + start, base + self.pos),
                    None => RawJson::from_validated(&self.text[start..self.pos]),
                }))
            }
            Some(b'{') => self.object(level).map(Value::Object),
            Some(b'[') => self.array(level).map(Value::Array),
            Some(b'"') => self.string().map(Value::String),
            Some(b't') => self.literal("true", Value::Bool(true)),
            Some(b'f') => self.literal("false", Value::Bool(false)),
            Some(b'n') => self.literal("null", Value::Null),
            Some(b'-' | b'0'..=b'9') => {
                let start = self.pos;
                self.number()?;
                Ok(Value::Number(Number::from_validated(
                    &self.text[start..self.pos],
                )))
            }
            Some(_) => Err(self.error("unexpected character")),
            None => Err(self.error("unexpected end of input")),
        }
    }

    fn object(&mut self, level: usize) -> Result<Object, ParseError> {
        self.pos += 1;
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Object::new());
        }
        let start = self.members.len();
        let parsed = self.object_members(level);
        let members: Vec<_> = self.members.drain(start..).collect();
        parsed.map(|()| Object::from_parsed(members))
    }

    /// Parses the members of an object onto `members[start..]`, up to its `}`.
    fn object_members(&mut self, level: usize) -> Result<(), ParseError> {
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(self.error("expected a string key"));
            }
            let key = self.string()?;
            self.expect(b':', "expected ':' after an object key")?;
            let value = self.value(level + 1)?;
            // A key given twice is resolved as JSON.parse does when the object is made.
            self.members.push((key, value));
            if self.after_member()? {
                return Ok(());
            }
        }
    }

    /// After a member's value: moves past the `,` before the next member (`false`) or past
    /// the object's closing `}` (`true`).
    pub(super) fn after_member(&mut self) -> Result<bool, ParseError> {
        self.skip_ws();
        let closed = match self.peek() {
            Some(b',') => false,
            Some(b'}') => true,
            _ => return Err(self.error("expected ',' or '}' in an object")),
        };
        self.pos += 1;
        Ok(closed)
    }

    fn array(&mut self, level: usize) -> Result<Vec<Value>, ParseError> {
        self.pos += 1;
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Vec::new());
        }
        let start = self.items.len();
        let parsed = self.array_items(level);
        let items: Vec<_> = self.items.drain(start..).collect();
        parsed.map(|()| items)
    }

    /// Parses the items of an array onto `items`, up to its `]`.
    fn array_items(&mut self, level: usize) -> Result<(), ParseError> {
        loop {
            let item = self.value(level + 1)?;
            self.items.push(item);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.error("expected ',' or ']' in an array")),
            }
        }
    }

    fn literal(&mut self, word: &'static str, value: Value) -> Result<Value, ParseError> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.error("invalid literal"))
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos - start
    }

    /// Scans `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
    fn number(&mut self) -> Result<(), ParseError> {
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.error("invalid number")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return Err(self.error("invalid number: no digits after '.'"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.error("invalid number: no exponent digits"));
            }
        }
        Ok(())
    }

    /// Advances past plain string bytes; stops at `"`, `\` or a control character.
    fn plain_run(&mut self) {
        self.pos = next_string_stop(self.bytes, self.pos);
    }

    fn hex4(&mut self) -> Result<u16, ParseError> {
        let hex = self
            .bytes
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.error("truncated \\u escape"))?;
        let mut v = 0u16;
        for &h in hex {
            let d = (h as char)
                .to_digit(16)
                .ok_or_else(|| self.error("invalid \\u escape"))?;
            v = (v << 4) | d as u16;
        }
        self.pos += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<JsString, ParseError> {
        self.pos += 1;
        let start = self.pos;
        self.plain_run();
        match self.peek() {
            Some(b'"') => {
                let s = &self.text[start..self.pos];
                self.pos += 1;
                return Ok(JsString::from_parsed(s));
            }
            Some(b'\\') => {}
            Some(_) => return Err(self.error("control character in a string")),
            None => return Err(self.error("unterminated string")),
        }
        let mut buf = self.bytes[start..self.pos].to_vec();
        loop {
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(JsString::from_wtf8(buf));
                }
                Some(b'\\') => {
                    self.pos += 1;
                    self.escape(&mut buf)?;
                }
                Some(_) => return Err(self.error("control character in a string")),
                None => return Err(self.error("unterminated string")),
            }
            let run = self.pos;
            self.plain_run();
            buf.extend_from_slice(&self.bytes[run..self.pos]);
        }
    }

    /// Decodes one escape (the backslash already consumed) into `buf` as WTF-8.
    fn escape(&mut self, buf: &mut Vec<u8>) -> Result<(), ParseError> {
        let c = self
            .peek()
            .ok_or_else(|| self.error("unterminated string"))?;
        self.pos += 1;
        let simple = match c {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 0x08,
            b'f' => 0x0C,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => {
                let unit = self.hex4()?;
                push_code_unit(self, buf, unit)?;
                return Ok(());
            }
            _ => {
                self.pos -= 1;
                return Err(self.error("invalid escape"));
            }
        };
        buf.push(simple);
        Ok(())
    }

    fn skip_string(&mut self) -> Result<(), ParseError> {
        match string_end(self.bytes, self.pos + 1) {
            Ok(end) => {
                self.pos = end;
                return Ok(());
            }
            // What is left is checked byte by byte, which names what is wrong.
            Err(resume) => self.pos = resume,
        }
        loop {
            self.plain_run();
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    self.pos += 1;
                    match self.peek() {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                            self.pos += 1
                        }
                        Some(b'u') => {
                            self.pos += 1;
                            self.hex4()?;
                        }
                        _ => return Err(self.error("invalid escape")),
                    }
                }
                Some(_) => return Err(self.error("control character in a string")),
                None => return Err(self.error("unterminated string")),
            }
        }
    }

    fn skip_key(&mut self) -> Result<(), ParseError> {
        self.skip_ws();
        if self.peek() != Some(b'"') {
            return Err(self.error("expected a string key"));
        }
        self.skip_string()?;
        self.expect(b':', "expected ':' after an object key")
    }

    /// Validates one object or array without recursion.
    fn skip_container(&mut self) -> Result<(), ParseError> {
        let mut stack = Nesting::default();
        loop {
            // Expecting a value.
            self.skip_ws();
            match self.peek() {
                Some(open @ (b'{' | b'[')) => {
                    self.pos += 1;
                    let is_object = open == b'{';
                    self.skip_ws();
                    let close = if is_object { b'}' } else { b']' };
                    if self.peek() == Some(close) {
                        self.pos += 1;
                    } else {
                        stack.push(is_object);
                        if is_object {
                            self.skip_key()?;
                        }
                        continue;
                    }
                }
                _ => self.skip_scalar()?,
            }
            // After a value: close containers until one continues with ','.
            loop {
                let Some(is_object) = stack.last() else {
                    return Ok(());
                };
                self.skip_ws();
                match self.peek() {
                    Some(b',') => {
                        self.pos += 1;
                        if is_object {
                            self.skip_key()?;
                        }
                        break;
                    }
                    Some(b'}') if is_object => {
                        self.pos += 1;
                        stack.pop();
                    }
                    Some(b']') if !is_object => {
                        self.pos += 1;
                        stack.pop();
                    }
                    _ => {
                        return Err(self.error(if is_object {
                            "expected ',' or '}' in an object"
                        } else {
                            "expected ',' or ']' in an array"
                        }))
                    }
                }
            }
        }
    }
}

/// The containers a skipped value is inside, innermost last: `true` for an object, `false`
/// for an array. The first 64 levels are bits of one word (a value nested deeper than any
/// session holds goes on in a vector), so skipping a container allocates nothing.
#[derive(Default)]
struct Nesting {
    depth: usize,
    shallow: u64,
    deep: Vec<bool>,
}

impl Nesting {
    fn push(&mut self, is_object: bool) {
        if self.depth < 64 {
            self.shallow = self.shallow & !(1 << self.depth) | u64::from(is_object) << self.depth;
        } else {
            self.deep.push(is_object);
        }
        self.depth += 1;
    }

    fn last(&self) -> Option<bool> {
        let level = self.depth.checked_sub(1)?;
        if level < 64 {
            Some(self.shallow >> level & 1 == 1)
        } else {
            self.deep.last().copied()
        }
    }

    fn pop(&mut self) {
        if self.depth > 64 {
            self.deep.pop();
        }
        self.depth = self.depth.saturating_sub(1);
    }
}

/// Appends one UTF-16 code unit from a `\u` escape, pairing surrogates when the next escape
/// completes a pair and keeping a lone surrogate as WTF-8 otherwise.
fn push_code_unit(p: &mut Parser<'_>, buf: &mut Vec<u8>, unit: u16) -> Result<(), ParseError> {
    if (0xD800..0xDC00).contains(&unit) && p.bytes[p.pos..].starts_with(b"\\u") {
        let save = p.pos;
        p.pos += 2;
        let low = p.hex4()?;
        if (0xDC00..0xE000).contains(&low) {
            let cp = 0x10000 + (((unit as u32) - 0xD800) << 10) + ((low as u32) - 0xDC00);
            if let Some(ch) = char::from_u32(cp) {
                let mut tmp = [0u8; 4];
                buf.extend_from_slice(ch.encode_utf8(&mut tmp).as_bytes());
            }
            return Ok(());
        }
        p.pos = save;
    }
    match char::from_u32(unit as u32) {
        Some(ch) => {
            let mut tmp = [0u8; 4];
            buf.extend_from_slice(ch.encode_utf8(&mut tmp).as_bytes());
        }
        None => {
            // A lone surrogate, encoded as generalized UTF-8.
            buf.push(0xED);
            buf.push(0xA0 | ((unit >> 6) & 0x1F) as u8);
            buf.push(0x80 | (unit & 0x3F) as u8);
        }
    }
    Ok(())
}

/// Raw containers are parsed here, where the parser is: the value model itself does not
/// depend on the parser.
impl Value {
    /// The value with a raw container parsed into a tree; other values are borrowed.
    pub fn expanded(&self) -> Cow<'_, Value> {
        match self {
            Value::Raw(raw) => Cow::Owned(expand_raw(raw)),
            other => Cow::Borrowed(other),
        }
    }

    /// Replaces a raw container by its parsed tree in place, and returns the value.
    pub fn expand_in_place(&mut self) -> &mut Value {
        if let Value::Raw(raw) = self {
            *self = expand_raw(raw);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_scalars_and_containers() {
        let v = parse(r#" {"a":[1,-2.5e3,true,false,null],"b":{"c":"d"}} "#).unwrap();
        let o = v.as_object().unwrap();
        let a = o.get("a").unwrap().as_array().unwrap();
        assert_eq!(a.len(), 5);
        assert_eq!(a[1], Value::Number(Number::from_validated("-2.5e3")));
        assert_eq!(
            o.get("b").unwrap().as_object().unwrap().get_str("c"),
            Some("d")
        );
    }

    #[test]
    fn keeps_deep_containers_raw() {
        let text = r#"{"a":{"b":[1, 2]},"c":"x"}"#;
        let v = parse_shallow(text, 1).unwrap();
        let o = v.as_object().unwrap();
        assert_eq!(
            o.get("a"),
            Some(&Value::Raw(RawJson::from_validated(r#"{"b":[1, 2]}"#)))
        );
        assert_eq!(o.get_str("c"), Some("x"));
    }

    #[test]
    fn decodes_escapes_and_surrogates() {
        let v = parse(r#""a\n\u0041\ud83d\ude00\/""#).unwrap();
        assert_eq!(v.as_str(), Some("a\nA😀/"));
        let lone = parse(r#""x\udc00y""#).unwrap();
        assert_eq!(lone.as_str(), None);
        assert_eq!(lone.as_js_string().unwrap().wtf8_bytes(), b"x\xED\xB0\x80y");
        let high_then_text = parse(r#""\ud800\u0041""#).unwrap();
        assert_eq!(
            high_then_text.as_js_string().unwrap().wtf8_bytes(),
            b"\xED\xA0\x80A"
        );
    }

    #[test]
    fn parsing_in_shared_text_points_raw_containers_into_it() {
        let block = SharedText::new(r#"xx{"a":{"b":[1]},"c":"d"} yy"#.to_owned());
        let value = parse_shallow_in(&block, 2..26, 1).unwrap();
        assert_eq!(value, parse_shallow(&block.as_str()[2..26], 1).unwrap());
        let Some(Value::Raw(raw)) = value.as_object().and_then(|o| o.get("a")) else {
            panic!("a raw member")
        };
        assert_eq!(raw.as_str(), r#"{"b":[1]}"#);
        let inside = block.as_str().as_bytes().as_ptr_range();
        assert!(inside.contains(&raw.as_str().as_ptr()), "not a copy");
        assert!(parse_shallow_in(&block, 2..40, 1).is_err());
        assert!(parse_shallow_in(&block, 0..26, 1).is_err());
    }

    #[test]
    fn duplicate_keys_keep_first_position_and_last_value() {
        let v = parse(r#"{"a":1,"b":2,"a":3}"#).unwrap();
        let o = v.as_object().unwrap();
        assert_eq!(o.keys().count(), 2);
        assert_eq!(o.get("a").unwrap().as_f64(), Some(3.0));
    }

    #[test]
    fn rejects_invalid_json() {
        for bad in [
            "",
            "{",
            "[1,]",
            "{\"a\"}",
            "01",
            "1.",
            "-",
            "tru",
            "\"\t\"",
            "\"\\x\"",
            "{} x",
            "[1 2]",
            "{\"a\":1,}",
            "\"\\u12\"",
            "{'a':1}",
            "NaN",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should fail");
            assert!(validate(bad).is_err(), "{bad:?} should fail validation");
        }
    }

    #[test]
    fn validation_agrees_with_parsing_on_every_cut_and_changed_byte() {
        let doc =
            r#" {"a":[1,-2.5e3,true,null,{"b":"x\"y\\","c":[]}],"d":"\u00e9\ud83d\ude00","e":{}} "#;
        for text in &near_texts(doc) {
            assert_eq!(validate(text).is_ok(), parse(text).is_ok(), "{text:?}");
        }
    }

    #[test]
    fn strings_stop_at_every_offset() {
        for len in 0..40 {
            let plain = "é".repeat(len / 2) + &"x".repeat(len % 2);
            for (tail, expected) in [
                ("\"", plain.clone()),
                ("\\n\"", plain.clone() + "\n"),
                ("\\\"z\"", plain.clone() + "\"z"),
            ] {
                let text = format!("\"{plain}{tail}");
                assert_eq!(parse(&text).unwrap().as_str(), Some(expected.as_str()));
                assert!(validate(&text).is_ok());
            }
            assert!(parse(&format!("\"{plain}\u{1}\"")).is_err());
            assert!(validate(&format!("\"{plain}\t\"")).is_err());
            assert!(parse(&format!("\"{plain}")).is_err());
        }
    }

    #[test]
    fn nesting_is_a_stack_across_its_word_and_its_vector() {
        let (mut nesting, mut model) = (Nesting::default(), Vec::new());
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // The depth hovers about 66, so it goes past 64 and back again and again.
            let pushes = if model.len() < 66 { 60 } else { 40 };
            if x % 100 < pushes || model.is_empty() {
                let is_object = x >> 40 & 1 == 1;
                nesting.push(is_object);
                model.push(is_object);
            } else {
                nesting.pop();
                model.pop();
            }
            assert_eq!(
                nesting.last(),
                model.last().copied(),
                "at depth {}",
                model.len()
            );
        }
        // Objects and arrays alternating 100 deep close in their own order.
        let deep = "[{\"a\":".repeat(100) + "1" + &"}]".repeat(100);
        assert!(validate(&deep).is_ok());
        let crossed = "[{\"a\":".repeat(100) + "1" + &"]}".repeat(100);
        assert!(validate(&crossed).is_err());
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let deep = "[".repeat(100_000) + &"]".repeat(100_000);
        assert!(parse(&deep).is_ok());
        let unbalanced = "[".repeat(100_000);
        assert!(parse(&unbalanced).is_err());
    }
}
