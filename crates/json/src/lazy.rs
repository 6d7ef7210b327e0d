//! Lazy reading of JSON text: the items of an array, the members of an object and the
//! characters of a string, found only as far as the reader asks, without building values.
//!
//! Meant for text the parser has already validated ([`RawJson`](super::RawJson)), where
//! reading a little of a large container should not cost a full parse — a preview of a tool
//! output, the type of a block. Any input is safe: text that is not what the reader expects
//! ends the iteration early; nothing panics, and every step moves forward.
//!
//! An item or member value is handed out as the text from its first byte to the end of the
//! input, so that reading the start of a large value never scans the rest of it: every
//! reader here stops at the end of the value it starts on. [`value_text`] bounds it when
//! the exact text is needed. Moving on to the next item skips the current one, scanning its
//! bytes once; strings, which dominate session files, are skipped with the parser's
//! eight-bytes-at-a-time scan.

use std::borrow::Cow;

use super::scan::next_string_stop;

fn skip_ws(b: &[u8], mut p: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = b.get(p) {
        p += 1;
    }
    p
}

/// The end of the string literal whose opening quote is at `p` (just past its closing quote).
fn string_end(b: &[u8], p: usize) -> Option<usize> {
    let mut q = p + 1;
    loop {
        q = next_string_stop(b, q);
        match b.get(q)? {
            b'"' => return Some(q + 1),
            b'\\' => q += 2,
            _ => q += 1,
        }
    }
}

/// The end of the value that starts at `p`, or `None` when the text ends inside it.
fn value_end(b: &[u8], p: usize) -> Option<usize> {
    match *b.get(p)? {
        b'"' => string_end(b, p),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut q = p;
            loop {
                match *b.get(q)? {
                    b'"' => q = string_end(b, q)?,
                    b'{' | b'[' => {
                        depth += 1;
                        q += 1;
                    }
                    b'}' | b']' => {
                        depth -= 1;
                        q += 1;
                        if depth == 0 {
                            return Some(q);
                        }
                    }
                    _ => q += 1,
                }
            }
        }
        _ => {
            let mut q = p;
            while let Some(&c) = b.get(q) {
                if matches!(c, b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r') {
                    break;
                }
                q += 1;
            }
            (q > p).then_some(q)
        }
    }
}

/// The position just inside the container `text` opens with `open`, if it does.
fn opened(text: &str, open: u8) -> Option<usize> {
    let p = skip_ws(text.as_bytes(), 0);
    (text.as_bytes().get(p) == Some(&open)).then_some(p + 1)
}

/// Moves past whitespace and one separating comma; `None` at the container's end.
fn next_start(b: &[u8], pos: usize, close: u8) -> Option<usize> {
    let mut p = skip_ws(b, pos);
    if b.get(p) == Some(&b',') {
        p = skip_ws(b, p + 1);
    }
    match b.get(p) {
        None => None,
        Some(&c) if c == close => None,
        Some(_) => Some(p),
    }
}

/// Where an iteration over a container stands.
#[derive(Debug, Clone, Copy)]
enum Walk {
    /// Just inside the container, or after a member's key: the next value starts here.
    At(usize),
    /// A value was handed out from here; the next one starts after it.
    After(usize),
    Done,
}

impl Walk {
    /// The position after the current value, ending the walk when there is none.
    fn advance(&mut self, b: &[u8]) -> Option<usize> {
        let at = match std::mem::replace(self, Walk::Done) {
            Walk::At(p) => p,
            Walk::After(start) => value_end(b, start)?,
            Walk::Done => return None,
        };
        Some(at)
    }
}

/// The items of the array `text` holds ([`array_items`]).
#[derive(Debug, Clone)]
pub struct Items<'a> {
    text: &'a str,
    walk: Walk,
}

/// The items of the JSON array in `text` (leading whitespace allowed), one at a time, each
/// as the text from its start to the end of the input; none when `text` is not an array.
pub fn array_items(text: &str) -> Items<'_> {
    Items {
        text,
        walk: opened(text, b'[').map_or(Walk::Done, Walk::At),
    }
}

impl<'a> Iterator for Items<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let b = self.text.as_bytes();
        let start = next_start(b, self.walk.advance(b)?, b']')?;
        self.walk = Walk::After(start);
        Some(&self.text[start..])
    }
}

/// The text of the JSON value at the start of `text` (after whitespace), exactly; `None`
/// when the text ends inside it.
pub fn value_text(text: &str) -> Option<&str> {
    let start = skip_ws(text.as_bytes(), 0);
    let end = value_end(text.as_bytes(), start)?;
    Some(&text[start..end])
}

/// The members of the object `text` holds ([`object_members`]).
#[derive(Debug, Clone)]
pub struct Members<'a> {
    text: &'a str,
    walk: Walk,
}

/// The members of the JSON object in `text` (leading whitespace allowed), one at a time, as
/// the decoded key and the text from the value's start to the end of the input; none when
/// `text` is not an object.
pub fn object_members(text: &str) -> Members<'_> {
    Members {
        text,
        walk: opened(text, b'{').map_or(Walk::Done, Walk::At),
    }
}

impl<'a> Iterator for Members<'a> {
    type Item = (Cow<'a, str>, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        let b = self.text.as_bytes();
        let key_start = next_start(b, self.walk.advance(b)?, b'}')?;
        if b[key_start] != b'"' {
            return None;
        }
        let key_end = string_end(b, key_start)?;
        let colon = skip_ws(b, key_end);
        if b.get(colon) != Some(&b':') {
            return None;
        }
        let start = skip_ws(b, colon + 1);
        if start >= b.len() {
            return None;
        }
        self.walk = Walk::After(start);
        let raw_key = &self.text[key_start + 1..key_end - 1];
        let key = if raw_key.contains('\\') {
            Cow::Owned(string_chars(&self.text[key_start..key_end]).collect())
        } else {
            Cow::Borrowed(raw_key)
        };
        Some((key, &self.text[start..]))
    }
}

/// The value of member `key` of the object `text` holds (the first one with that key), as
/// the text from its start to the end of the input.
pub fn member<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    object_members(text).find_map(|(k, v)| (k == key).then_some(v))
}

/// The characters of a JSON string literal ([`string_chars`]).
#[derive(Debug, Clone)]
pub struct StringChars<'a> {
    text: &'a str,
    pos: Option<usize>,
}

/// The characters of the JSON string literal in `text` (leading whitespace allowed),
/// decoded one at a time; none when `text` is not a string. A lone surrogate escape reads
/// as U+FFFD.
pub fn string_chars(text: &str) -> StringChars<'_> {
    StringChars {
        text,
        pos: opened(text, b'"'),
    }
}

/// Whether the JSON text `text` is a string equal to `s`.
pub fn is_string(text: &str, s: &str) -> bool {
    let trimmed = text.trim_start();
    trimmed.starts_with('"') && string_chars(trimmed).eq(s.chars())
}

impl StringChars<'_> {
    fn hex4(&self, at: usize) -> Option<u32> {
        let digits = self.text.get(at..at + 4)?;
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(digits, 16).ok()
    }

    /// A `\u` escape at `at` (the backslash): the character and the position after it.
    fn unicode_escape(&self, at: usize) -> Option<(char, usize)> {
        let unit = self.hex4(at + 2)?;
        let after = at + 6;
        if (0xD800..0xDC00).contains(&unit) && self.text.get(after..after + 2) == Some("\\u") {
            if let Some(low) = self
                .hex4(after + 2)
                .filter(|l| (0xDC00..0xE000).contains(l))
            {
                let c = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                return Some((char::from_u32(c)?, after + 6));
            }
        }
        Some((char::from_u32(unit).unwrap_or('\u{FFFD}'), after))
    }
}

impl Iterator for StringChars<'_> {
    type Item = char;

    fn next(&mut self) -> Option<char> {
        let at = self.pos.take()?;
        let rest = self.text.get(at..)?;
        let (c, next) = match rest.as_bytes().first()? {
            b'"' => return None,
            b'\\' => match rest.as_bytes().get(1)? {
                b'n' => ('\n', at + 2),
                b't' => ('\t', at + 2),
                b'r' => ('\r', at + 2),
                b'b' => ('\u{8}', at + 2),
                b'f' => ('\u{c}', at + 2),
                b'u' => self.unicode_escape(at)?,
                &other => (char::from(other), at + 2),
            },
            _ => {
                let c = rest.chars().next()?;
                (c, at + c.len_utf8())
            }
        };
        self.pos = Some(next);
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_and_members_are_found_without_parsing_the_rest() {
        let text = r#" [ {"type":"text","text":"a\"b"} , 12, "s]", [1,[2]] , null ] "#;
        let items: Vec<&str> = array_items(text).map(|i| value_text(i).unwrap()).collect();
        assert_eq!(
            items,
            [
                r#"{"type":"text","text":"a\"b"}"#,
                "12",
                r#""s]""#,
                "[1,[2]]",
                "null"
            ]
        );
        let members: Vec<(String, &str)> = object_members(items[0])
            .map(|(k, v)| (k.into_owned(), value_text(v).unwrap()))
            .collect();
        assert_eq!(
            members,
            [("type".into(), r#""text""#), ("text".into(), r#""a\"b""#)]
        );
        assert_eq!(member(items[0], "text"), Some(r#""a\"b"}"#));
        assert_eq!(
            string_chars(member(items[0], "text").unwrap()).collect::<String>(),
            "a\"b"
        );
        // Reading the start of a value does not need its end.
        let open = r#"[{"type":"text","text":"abc"#;
        let first = array_items(open).next().unwrap();
        let text = member(first, "text").unwrap();
        assert_eq!(string_chars(text).take(2).collect::<String>(), "ab");
        assert!(is_string(member(items[0], "type").unwrap(), "text"));
        assert!(!is_string("12", "12"));
        assert_eq!(array_items("[]").count(), 0);
        assert_eq!(object_members("{ }").count(), 0);
        assert_eq!(array_items("{}").count(), 0);
        let escaped_key: Vec<String> = object_members(r#"{"t\u0079pe":1}"#)
            .map(|(k, _)| k.into_owned())
            .collect();
        assert_eq!(escaped_key, ["type"]);
    }

    #[test]
    fn strings_decode_escapes_and_surrogates() {
        let decoded: String = string_chars(r#""a\n\t\\\/\u00e9\ud83d\ude00\ud800x日""#).collect();
        assert_eq!(decoded, "a\n\t\\/é😀\u{FFFD}x日");
        assert_eq!(string_chars("12").count(), 0);
        // Only what is asked for is decoded.
        let mut chars = string_chars(r#""abc"#);
        assert_eq!(chars.next(), Some('a'));
    }

    #[test]
    fn malformed_text_ends_the_walk() {
        for text in [
            "[",
            "[1,",
            "[\"open",
            "[{\"a\":",
            "{\"a\"",
            "{\"a\" 1}",
            "{1:2}",
            "[}",
            "\"\\u12",
            "[\"\\",
        ] {
            let _ = array_items(text).count();
            let _ = object_members(text).count();
            let _ = string_chars(text).count();
        }
        assert_eq!(array_items("[1,").collect::<Vec<_>>(), ["1,"]);
        assert_eq!(array_items("[\"open,1]").count(), 1);
        assert_eq!(value_text("[\"open"), None);
    }
}
