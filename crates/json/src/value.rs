//! The JSON value model.
//!
//! Invariants:
//! - [`Object`] keeps its keys in the order they were read or inserted; replacing the value of
//!   an existing key keeps its position, a new key goes last (JavaScript property order).
//! - [`Number`] holds the number's source text, so numbers survive a round trip unchanged.
//! - [`JsString`] holds any JavaScript string, including lone UTF-16 surrogates, which are kept
//!   in generalized UTF-8 (WTF-8) so that they can be written back as `\udxxx`.
//! - [`Value::Raw`] holds the exact source text of a validated object or array that the parser
//!   did not need to look into. It is only built by the parser, so it is always valid JSON.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use super::number::format_js_number;

/// A JSON value. Containers deeper than the parse depth stay [`Value::Raw`].
///
/// Equality is structural and ignores how deep a value was parsed: a raw container equals
/// the parsed tree of the same JSON.
#[derive(Clone, Debug)]
pub enum Value {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, as its source text.
    Number(Number),
    /// A string; it may hold lone surrogates.
    String(JsString),
    /// An array whose items were parsed.
    Array(Vec<Value>),
    /// An object whose members were parsed.
    Object(Object),
    /// An object or array below the parse depth, kept as its validated source text.
    Raw(RawJson),
}

/// A JSON number kept as its source text.
#[derive(Clone, PartialEq, Eq)]
pub struct Number(NumberText);

/// The longest number text held without an allocation: every number the format writes (a
/// time in milliseconds, a count, a cost) is shorter.
const INLINE_NUMBER: usize = 22;

/// A number's text, held inline up to [`INLINE_NUMBER`] bytes and on the heap beyond.
/// Which one a text takes depends only on its length, so equal texts are equal values.
#[derive(Clone, PartialEq, Eq)]
enum NumberText {
    Inline { len: u8, bytes: [u8; INLINE_NUMBER] },
    Heap(Box<str>),
}

impl NumberText {
    fn new(text: &str) -> Self {
        if text.len() <= INLINE_NUMBER {
            let mut bytes = [0; INLINE_NUMBER];
            bytes[..text.len()].copy_from_slice(text.as_bytes());
            NumberText::Inline {
                len: text.len() as u8,
                bytes,
            }
        } else {
            NumberText::Heap(text.into())
        }
    }

    fn as_str(&self) -> &str {
        match self {
            NumberText::Inline { len, bytes } => std::str::from_utf8(&bytes[..usize::from(*len)])
                .expect("an inline number holds the whole of a text"),
            NumberText::Heap(text) => text,
        }
    }
}

impl fmt::Debug for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Number").field(&self.as_str()).finish()
    }
}

/// A JavaScript string: UTF-8 in the common case, WTF-8 when it holds a lone surrogate.
///
/// Equality and hashing are those of the string: a [`JsString::Static`] equals the
/// [`JsString::Utf8`] of the same text.
#[derive(Clone)]
pub enum JsString {
    /// Well-formed UTF-8 text.
    Utf8(Box<str>),
    /// Generalized UTF-8 holding at least one lone surrogate (`ED A0..BF xx`).
    Wtf8(Box<[u8]>),
    /// A string of the format's own vocabulary (member names, record types, roles), shared
    /// instead of allocated for every record that holds it.
    Static(&'static str),
}

impl PartialEq for JsString {
    fn eq(&self, other: &Self) -> bool {
        self.wtf8_bytes() == other.wtf8_bytes()
    }
}

impl Eq for JsString {}

impl std::hash::Hash for JsString {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.wtf8_bytes().hash(state);
    }
}

/// The validated source text of an object or array: a copy of its own, or a range of the
/// [`SharedText`] it was parsed from ([`parse_shallow_in`](super::parse_shallow_in)), so that
/// a line kept as text and the raw containers built from it hold its bytes once.
#[derive(Clone, Debug)]
pub struct RawJson(RawText);

#[derive(Clone, Debug)]
enum RawText {
    Owned(Box<str>),
    Shared(Box<(SharedText, usize, usize)>),
}

/// Text that values parsed from it point into instead of copying ([`RawJson`]); cloning it
/// shares it.
#[derive(Clone)]
pub struct SharedText(Arc<dyn AsRef<str> + Send + Sync>);

impl SharedText {
    /// Shares `text` (a `String`, or any owner of text), without copying it.
    pub fn new(text: impl AsRef<str> + Send + Sync + 'static) -> Self {
        SharedText(Arc::new(text))
    }

    /// The whole text.
    pub fn as_str(&self) -> &str {
        (*self.0).as_ref()
    }
}

impl fmt::Debug for SharedText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SharedText({} bytes)", self.as_str().len())
    }
}

/// An insertion-ordered JSON object.
///
/// Equality follows JavaScript: two objects are equal when they hold equal members in
/// enumeration order ([`Object::js_iter`]), so an array-index key read late equals the same key
/// read first.
#[derive(Clone, Debug, Default)]
pub struct Object(Vec<(JsString, Value)>);

impl Number {
    /// Wraps source text the caller has checked against the JSON number grammar.
    pub(super) fn from_validated(text: &str) -> Self {
        Number(NumberText::new(text))
    }

    /// The JavaScript representation of `value`; `None` for NaN and the infinities, which
    /// JavaScript writes as `null`.
    pub fn from_f64(value: f64) -> Option<Self> {
        value
            .is_finite()
            .then(|| Number(NumberText::new(&format_js_number(value))))
    }

    /// The number whose text is the decimal digits of `value`; beyond ±2^53 that text keeps
    /// digits JavaScript would round.
    pub fn from_i64(value: i64) -> Self {
        Number(NumberText::new(&value.to_string()))
    }

    /// The number's text: its source text when it was read, else the text it was built with.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The number as JavaScript reads it (always finite unless the text overflows).
    pub fn as_f64(&self) -> f64 {
        self.as_str().parse().unwrap_or(f64::NAN)
    }
}

impl JsString {
    /// The string when it is well-formed Unicode.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            JsString::Utf8(s) => Some(s),
            JsString::Static(s) => Some(s),
            JsString::Wtf8(_) => None,
        }
    }

    /// The string with every lone surrogate replaced by U+FFFD.
    pub fn to_string_lossy(&self) -> Cow<'_, str> {
        match self {
            JsString::Utf8(s) => Cow::Borrowed(s),
            JsString::Static(s) => Cow::Borrowed(s),
            JsString::Wtf8(bytes) => Cow::Owned(wtf8_to_lossy(bytes)),
        }
    }

    /// The generalized UTF-8 bytes of the string.
    pub fn wtf8_bytes(&self) -> &[u8] {
        match self {
            JsString::Utf8(s) => s.as_bytes(),
            JsString::Static(s) => s.as_bytes(),
            JsString::Wtf8(bytes) => bytes,
        }
    }

    /// Well-formed text read by the parser: shared when it is one of the format's own
    /// words, allocated otherwise.
    pub(super) fn from_parsed(text: &str) -> Self {
        match super::vocabulary::word(text) {
            Some(word) => JsString::Static(word),
            None => JsString::Utf8(text.into()),
        }
    }

    /// Builds a string from generalized UTF-8 produced by the parser.
    pub(super) fn from_wtf8(bytes: Vec<u8>) -> Self {
        match String::from_utf8(bytes) {
            Ok(s) => JsString::Utf8(s.into_boxed_str()),
            Err(e) => JsString::Wtf8(e.into_bytes().into_boxed_slice()),
        }
    }

    /// The first `units` UTF-16 code units of the string. A character that would be cut in
    /// half (an astral character) is dropped whole, and so is a lone high surrogate left at
    /// the end, so the result never ends in a dangling high surrogate.
    pub fn truncate_utf16(&self, units: usize) -> JsString {
        let bytes = self.wtf8_bytes();
        let (mut at, mut count) = (0, 0);
        while at < bytes.len() {
            let len = match bytes[at] {
                0xF0..=0xF7 => 4,
                0xE0..=0xEF => 3,
                0xC0..=0xDF => 2,
                _ => 1,
            };
            let width = if len == 4 { 2 } else { 1 };
            if count + width > units {
                break;
            }
            count += width;
            at += len;
        }
        let mut kept = &bytes[..at];
        if kept.len() >= 3
            && kept[kept.len() - 3] == 0xED
            && (0xA0..=0xAF).contains(&kept[kept.len() - 2])
        {
            kept = &kept[..kept.len() - 3];
        }
        JsString::from_wtf8(kept.to_vec())
    }

    /// This string followed by `suffix`.
    pub fn concat(&self, suffix: &str) -> JsString {
        let mut bytes = self.wtf8_bytes().to_vec();
        bytes.extend_from_slice(suffix.as_bytes());
        JsString::from_wtf8(bytes)
    }

    /// The JavaScript `length`: the number of UTF-16 code units.
    pub fn utf16_len(&self) -> usize {
        match self {
            JsString::Utf8(s) => s.chars().map(char::len_utf16).sum(),
            JsString::Static(s) => s.chars().map(char::len_utf16).sum(),
            // A lone surrogate takes 3 bytes in WTF-8 and one code unit; every other
            // character is counted from its lead byte.
            JsString::Wtf8(bytes) => bytes
                .iter()
                .map(|&b| match b {
                    0xF0..=0xF7 => 2,
                    b if b & 0xC0 != 0x80 => 1,
                    _ => 0,
                })
                .sum(),
        }
    }
}

/// Decodes generalized UTF-8, one U+FFFD for each lone surrogate.
fn wtf8_to_lossy(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    let mut rest = bytes;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                out.push_str(s);
                break;
            }
            Err(e) => {
                let (good, bad) = rest.split_at(e.valid_up_to());
                out.push_str(std::str::from_utf8(good).unwrap_or_default());
                out.push(char::REPLACEMENT_CHARACTER);
                // A surrogate is three bytes; anything else the parser never produces.
                let skip = e.error_len().map_or(bad.len(), |_| 3.min(bad.len()));
                rest = &bad[skip..];
            }
        }
    }
    out
}

impl fmt::Debug for JsString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.to_string_lossy(), f)
    }
}

impl From<&str> for JsString {
    fn from(s: &str) -> Self {
        JsString::Utf8(s.into())
    }
}

impl From<String> for JsString {
    fn from(s: String) -> Self {
        JsString::Utf8(s.into_boxed_str())
    }
}

impl PartialEq<str> for JsString {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == Some(other)
    }
}

impl RawJson {
    pub(super) fn from_validated(text: &str) -> Self {
        RawJson(RawText::Owned(text.into()))
    }

    /// `block[start..end]`, which the parser validated.
    pub(super) fn in_shared(block: &SharedText, start: usize, end: usize) -> Self {
        RawJson(RawText::Shared(Box::new((block.clone(), start, end))))
    }

    /// The container's exact source text, inner whitespace included.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            RawText::Owned(text) => text,
            RawText::Shared(shared) => {
                let (block, start, end) = &**shared;
                block.as_str().get(*start..*end).unwrap_or_default()
            }
        }
    }

    /// Whether the raw text is an object (as opposed to an array).
    pub fn is_object(&self) -> bool {
        self.as_str().starts_with('{')
    }
}

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for RawJson {}

impl Object {
    /// An object without members.
    pub fn new() -> Self {
        Object(Vec::new())
    }

    /// An object without members, with room for `n` of them.
    pub fn with_capacity(n: usize) -> Self {
        Object(Vec::with_capacity(n))
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the object has no members.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value of the member `key`, if there is one.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The value of the member `key`, to change it in place.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        self.0.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Whether the object has a member `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// A string member, when present and a well-formed string.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }

    /// Sets `key`: in place when present, appended otherwise (JavaScript assignment).
    pub fn insert(&mut self, key: &str, value: Value) {
        match self.get_mut(key) {
            Some(slot) => *slot = value,
            None => self.0.push((key.into(), value)),
        }
    }

    /// The object of `members`, in their order, whose keys the caller knows to be distinct
    /// (a map's keys): built without looking each key up among the ones before it, as
    /// [`Object::insert`] does (an object of 100,000 members would cost 5 billion key
    /// comparisons that way).
    pub fn from_distinct(members: impl IntoIterator<Item = (JsString, Value)>) -> Self {
        let members: Vec<(JsString, Value)> = members.into_iter().collect();
        debug_assert!(
            {
                let mut seen = std::collections::HashSet::with_capacity(members.len());
                members.iter().all(|(key, _)| seen.insert(key))
            },
            "the keys of Object::from_distinct are distinct"
        );
        Object(members)
    }

    /// The object `JSON.parse` makes of `members` in text order: a key given more than once
    /// keeps its first position and its last value. Keys are compared by hash, so an
    /// object of 200,000 members costs 200,000 lookups, not 20 billion comparisons.
    pub(super) fn from_parsed(members: Vec<(JsString, Value)>) -> Self {
        // Few members are compared directly.
        const LOOKED_UP_FROM: usize = 16;
        if members.len() < LOOKED_UP_FROM {
            let mut object = Object::with_capacity(members.len());
            for (key, value) in members {
                match object.0.iter_mut().find(|(k, _)| *k == key) {
                    Some(slot) => slot.1 = value,
                    None => object.0.push((key, value)),
                }
            }
            return object;
        }
        // For each member, the earlier place its key first had, if any.
        let mut first = std::collections::HashMap::with_capacity(members.len());
        let earlier: Vec<Option<usize>> = members
            .iter()
            .enumerate()
            .map(|(at, (key, _))| match first.entry(key) {
                std::collections::hash_map::Entry::Occupied(place) => Some(*place.get()),
                std::collections::hash_map::Entry::Vacant(place) => {
                    place.insert(at);
                    None
                }
            })
            .collect();
        drop(first);
        if earlier.iter().all(Option::is_none) {
            return Object(members);
        }
        let mut slots: Vec<Option<(JsString, Value)>> = members.into_iter().map(Some).collect();
        for (at, to) in earlier.into_iter().enumerate() {
            let Some(to) = to else { continue };
            if let Some((_, value)) = slots[at].take() {
                if let Some(slot) = &mut slots[to] {
                    slot.1 = value;
                }
            }
        }
        Object(slots.into_iter().flatten().collect())
    }

    /// Removes the member `key` and returns its value; the other members keep their
    /// order.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let at = self.0.iter().position(|(k, _)| k == key)?;
        Some(self.0.remove(at).1)
    }

    /// The members in stored order (as read or inserted); [`Object::js_iter`] gives
    /// JavaScript's order.
    pub fn iter(&self) -> impl Iterator<Item = (&JsString, &Value)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    /// The members in stored order, their values mutable.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&JsString, &mut Value)> {
        self.0.iter_mut().map(|(k, v)| (&*k, v))
    }

    /// The keys in stored order.
    pub fn keys(&self) -> impl Iterator<Item = &JsString> {
        self.0.iter().map(|(k, _)| k)
    }

    /// The members in JavaScript enumeration order: array-index keys (`"0"`, `"12"`) first in
    /// ascending numeric order, then the others in insertion order.
    pub fn js_iter(&self) -> JsIter<'_> {
        let may_be_index = |k: &JsString| k.wtf8_bytes().first().is_some_and(u8::is_ascii_digit);
        if !self
            .keys()
            .any(|k| may_be_index(k) && array_index(k).is_some())
        {
            return JsIter::InOrder(self.0.iter());
        }
        let mut indexed: Vec<_> = self
            .iter()
            .filter_map(|(k, v)| array_index(k).map(|n| (n, k, v)))
            .collect();
        indexed.sort_by_key(|(n, _, _)| *n);
        let members: Vec<_> = indexed
            .into_iter()
            .map(|(_, k, v)| (k, v))
            .chain(self.iter().filter(|(k, _)| array_index(k).is_none()))
            .collect();
        JsIter::Reordered(members.into_iter())
    }
}

/// The iterator of [`Object::js_iter`]; it allocates only when an object has index keys.
pub enum JsIter<'a> {
    /// The members in stored order: the object has no array-index key.
    InOrder(std::slice::Iter<'a, (JsString, Value)>),
    /// The members collected in enumeration order, array-index keys first.
    Reordered(std::vec::IntoIter<(&'a JsString, &'a Value)>),
}

impl<'a> Iterator for JsIter<'a> {
    type Item = (&'a JsString, &'a Value);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            JsIter::InOrder(it) => it.next().map(|(k, v)| (k, v)),
            JsIter::Reordered(it) => it.next(),
        }
    }
}

impl PartialEq for Object {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.js_iter().eq(other.js_iter())
    }
}

/// The array index a key denotes in JavaScript, if any (`0..=2^32-2`, canonical digits).
fn array_index(key: &JsString) -> Option<u32> {
    let s = key.as_str()?;
    if s.is_empty() || s.len() > 10 || (s.len() > 1 && s.starts_with('0')) {
        return None;
    }
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<u64>()
        .ok()
        .filter(|&n| n < u32::MAX as u64)
        .map(|n| n as u32)
}

impl FromIterator<(JsString, Value)> for Object {
    fn from_iter<I: IntoIterator<Item = (JsString, Value)>>(iter: I) -> Self {
        Object::from_parsed(iter.into_iter().collect())
    }
}

impl Value {
    /// A string value.
    pub fn string(s: impl Into<JsString>) -> Self {
        Value::String(s.into())
    }

    /// A number value, or `null` for NaN and the infinities (as JavaScript writes them).
    pub fn number(n: f64) -> Self {
        Number::from_f64(n).map_or(Value::Null, Value::Number)
    }

    /// The text of a string of well-formed Unicode; `None` for any other value, and
    /// for a string holding a lone surrogate.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => s.as_str(),
            _ => None,
        }
    }

    /// The string, lone surrogates included; `None` when this is not a string.
    pub fn as_js_string(&self) -> Option<&JsString> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The number as JavaScript reads it; `None` when this is not a number.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(n) => Some(n.as_f64()),
            _ => None,
        }
    }

    /// The boolean; `None` when this is not `true` or `false`.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// Whether this is `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// Whether this is an object, parsed or raw.
    pub fn is_object(&self) -> bool {
        match self {
            Value::Object(_) => true,
            Value::Raw(raw) => raw.is_object(),
            _ => false,
        }
    }

    /// Whether this is an array, parsed or raw.
    pub fn is_array(&self) -> bool {
        match self {
            Value::Array(_) => true,
            Value::Raw(raw) => !raw.is_object(),
            _ => false,
        }
    }

    /// JavaScript truthiness.
    pub fn is_truthy(&self) -> bool {
        match self {
            Value::Null => false,
            Value::Bool(b) => *b,
            Value::Number(n) => {
                let f = n.as_f64();
                f != 0.0 && !f.is_nan()
            }
            Value::String(s) => !s.wtf8_bytes().is_empty(),
            Value::Array(_) | Value::Object(_) | Value::Raw(_) => true,
        }
    }

    /// The object when it is parsed; `None` for a raw object (see
    /// [`Value::object_view`]) and for any other value.
    pub fn as_object(&self) -> Option<&Object> {
        match self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The object under this value, parsing a raw container when needed.
    pub fn object_view(&self) -> Option<Cow<'_, Object>> {
        match self.expanded() {
            Cow::Borrowed(Value::Object(o)) => Some(Cow::Borrowed(o)),
            Cow::Owned(Value::Object(o)) => Some(Cow::Owned(o)),
            _ => None,
        }
    }

    /// The object, to change it: a raw container (an array too) is first parsed in
    /// place. `None` when this is not an object.
    pub fn as_object_mut(&mut self) -> Option<&mut Object> {
        match self.expand_in_place() {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The items when the array is parsed; `None` for a raw array (see
    /// [`Value::expanded`]) and for any other value.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Value::Null, Value::Null) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Number(a), Value::Number(b)) => a == b,
            (Value::String(a), Value::String(b)) => a == b,
            (Value::Array(a), Value::Array(b)) => a == b,
            (Value::Object(a), Value::Object(b)) => a == b,
            (Value::Raw(a), Value::Raw(b)) if a == b => true,
            (Value::Raw(_), _) | (_, Value::Raw(_)) => {
                let (a, b) = (self.expanded(), other.expanded());
                !matches!(a.as_ref(), Value::Raw(_))
                    && !matches!(b.as_ref(), Value::Raw(_))
                    && a == b
            }
            _ => false,
        }
    }
}

impl From<Object> for Value {
    fn from(o: Object) -> Self {
        Value::Object(o)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::string(s)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<Vec<Value>> for Value {
    fn from(a: Vec<Value>) -> Self {
        Value::Array(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_numbers_text_is_kept_whole_at_every_length() {
        let digits = "-12345678901234567890123456789.0123456789";
        for len in 1..digits.len() {
            let text = &digits[..len];
            let n = Number::from_validated(text);
            assert_eq!(n.as_str(), text);
            assert_eq!(n, Number::from_validated(text));
            assert_ne!(n, Number::from_validated(&digits[..len + 1]));
            assert_eq!(format!("{n:?}"), format!("Number({text:?})"));
        }
        assert_eq!(Number::from_i64(-(1 << 53)).as_f64(), -9007199254740992.0);
        // Held inline, a number costs a value no more room than before.
        assert!(std::mem::size_of::<Value>() <= 32);
    }

    #[test]
    fn insert_keeps_position_and_appends_new_keys() {
        let mut o = Object::new();
        o.insert("a", Value::Null);
        o.insert("b", Value::Null);
        o.insert("a", Value::Bool(true));
        let keys: Vec<_> = o.keys().map(|k| k.to_string_lossy().into_owned()).collect();
        assert_eq!(keys, ["a", "b"]);
        assert_eq!(o.get("a"), Some(&Value::Bool(true)));
        assert_eq!(o.remove("a"), Some(Value::Bool(true)));
        assert!(!o.contains_key("a"));
    }

    #[test]
    fn utf16_length_counts_code_units() {
        assert_eq!(JsString::from("aé😀").utf16_len(), 4);
        let lone = JsString::from_wtf8(vec![b'a', 0xED, 0xA0, 0x80]);
        assert!(matches!(lone, JsString::Wtf8(_)));
        assert_eq!(lone.utf16_len(), 2);
        assert_eq!(lone.to_string_lossy(), "a\u{FFFD}");
    }

    #[test]
    fn raw_and_parsed_containers_compare_equal() {
        let raw = super::super::parse_shallow("{\"a\": [1, {\"b\":null}]}", 0).unwrap();
        let parsed = super::super::parse("{\"a\":[1,{\"b\":null}]}").unwrap();
        assert!(matches!(raw, Value::Raw(_)));
        assert_eq!(raw, parsed);
        assert_eq!(parsed, raw);
        assert_ne!(raw, super::super::parse("{\"a\":[1]}").unwrap());
    }

    #[test]
    fn truncation_counts_utf16_and_never_leaves_a_dangling_high_surrogate() {
        let s = JsString::from("ab😀c");
        assert_eq!(s.truncate_utf16(2), JsString::from("ab"));
        assert_eq!(
            s.truncate_utf16(3),
            JsString::from("ab"),
            "half an astral char is dropped"
        );
        assert_eq!(s.truncate_utf16(4), JsString::from("ab😀"));
        let lone_high = JsString::from_wtf8(vec![b'a', 0xED, 0xA0, 0x80, b'b']);
        assert_eq!(lone_high.truncate_utf16(2), JsString::from("a"));
        assert_eq!(lone_high.truncate_utf16(3).utf16_len(), 3);
        assert_eq!(JsString::from("x").concat("yz"), JsString::from("xyz"));
    }

    #[test]
    fn a_key_given_twice_keeps_its_first_place_and_its_last_value_at_any_size() {
        for n in [3, 15, 16, 40] {
            let mut members: Vec<String> = (0..n).map(|i| format!("\"k{i}\":{i}")).collect();
            members.extend(
                [
                    r#""k1":"second""#,
                    r#""z":0"#,
                    r#""k0":"third""#,
                    r#""k1":"last""#,
                ]
                .map(String::from),
            );
            let text = format!("{{{}}}", members.join(","));
            let Value::Object(object) = super::super::parse(&text).unwrap() else {
                panic!("an object")
            };
            let mut keys: Vec<String> = (0..n).map(|i| format!("k{i}")).collect();
            keys.push("z".into());
            let found: Vec<&str> = object.iter().map(|(k, _)| k.as_str().unwrap()).collect();
            assert_eq!(found, keys, "{n} members");
            assert_eq!(object.get_str("k0"), Some("third"), "{n}");
            assert_eq!(object.get_str("k1"), Some("last"), "{n}");
            assert_eq!(object.get("k2").and_then(Value::as_f64), Some(2.0), "{n}");
            let collected: Object = object.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            assert_eq!(collected, object);
        }
    }

    #[test]
    fn an_object_of_distinct_keys_is_the_object_inserted_one_by_one() {
        let members = [("b", 1.0), ("a", 2.0), ("10", 3.0), ("2", 4.0)];
        let mut inserted = Object::new();
        for (key, n) in members {
            inserted.insert(key, Value::number(n));
        }
        let made = Object::from_distinct(members.map(|(k, n)| (k.into(), Value::number(n))));
        assert_eq!(made, inserted);
        let order: Vec<&str> = made.iter().map(|(k, _)| k.as_str().unwrap()).collect();
        assert_eq!(order, ["b", "a", "10", "2"]);
    }

    #[test]
    #[should_panic(expected = "distinct")]
    #[cfg(debug_assertions)]
    fn an_object_of_distinct_keys_refuses_a_repeated_one_in_debug_builds() {
        Object::from_distinct([("a".into(), Value::Null), ("a".into(), Value::Null)]);
    }

    #[test]
    fn object_equality_follows_javascript_enumeration_order() {
        let late = super::super::parse(r#"{"b":1,"1":2}"#).unwrap();
        let first = super::super::parse(r#"{"1":2,"b":1}"#).unwrap();
        assert_eq!(late, first);
        let swapped = super::super::parse(r#"{"1":2,"0":3,"b":1}"#).unwrap();
        assert_eq!(
            swapped,
            super::super::parse(r#"{"0":3,"1":2,"b":1}"#).unwrap()
        );
        assert_ne!(
            super::super::parse(r#"{"a":1,"b":2}"#).unwrap(),
            super::super::parse(r#"{"b":2,"a":1}"#).unwrap()
        );
    }

    #[test]
    fn truthiness_follows_javascript() {
        assert!(!Value::string("").is_truthy());
        assert!(Value::string("x").is_truthy());
        assert!(!Value::number(0.0).is_truthy());
        assert!(!Value::Null.is_truthy());
        assert!(Value::Object(Object::new()).is_truthy());
    }
}
