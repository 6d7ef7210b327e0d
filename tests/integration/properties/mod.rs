//! Property tests: the engine, run on generated input, against small models written here
//! straight from the format description. This module holds the model JSON value, its
//! writers and the strategies every subject shares; each subject is a module of its own.
//!
//! The inputs are built from a model JSON value ([`M`]) with its own JavaScript-canonical
//! writer, so no generated file depends on the engine's writer. Each model is deliberately
//! naive: plain maps and loops over the generator's own description of the file.

mod context;
mod json_text;
mod migration;
mod parallel;
mod patches;
mod round_trip;
mod tree;

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::TestCaseError;

use gjcfs::engine::format::lines::{read_lines_in, TAIL};
use gjcfs::engine::format::migrate::{migrate, Migration};
use gjcfs::engine::format::summary::Summary;
use gjcfs::engine::json;
use gjcfs::engine::read::replay::{parse_session_entries, parse_session_reader, replay_lines};
use gjcfs::engine::{Record, Session};

// ---------------------------------------------------------------------------------------------
// The model JSON value and its JavaScript-canonical writer.

/// A JSON value as JavaScript holds it.
#[derive(Clone, PartialEq)]
enum M {
    Null,
    Bool(bool),
    /// A number, already in JavaScript's canonical text.
    Num(String),
    /// UTF-16 code units (lone surrogates allowed).
    Str(Vec<u16>),
    Arr(Vec<M>),
    /// Members in insertion order; keys are distinct.
    Obj(Vec<(Vec<u16>, M)>),
}

impl std::fmt::Debug for M {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&canon(self))
    }
}

fn jstr(text: &str) -> M {
    M::Str(text.encode_utf16().collect())
}

fn int(n: i64) -> M {
    M::Num(n.to_string())
}

fn obj(members: Vec<(&str, M)>) -> M {
    M::Obj(
        members
            .into_iter()
            .map(|(k, v)| (k.encode_utf16().collect(), v))
            .collect(),
    )
}

fn units(c: char) -> Vec<u16> {
    let mut buf = [0u16; 2];
    c.encode_utf16(&mut buf).to_vec()
}

impl M {
    fn get(&self, key: &str) -> Option<&M> {
        let key: Vec<u16> = key.encode_utf16().collect();
        match self {
            M::Obj(members) => members.iter().find(|(k, _)| *k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// JavaScript assignment: in place when the key exists, appended otherwise.
    fn set(&mut self, key: &str, value: M) {
        let key: Vec<u16> = key.encode_utf16().collect();
        if let M::Obj(members) = self {
            match members.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => slot.1 = value,
                None => members.push((key, value)),
            }
        }
    }

    fn remove(&mut self, key: &str) {
        let key: Vec<u16> = key.encode_utf16().collect();
        if let M::Obj(members) = self {
            members.retain(|(k, _)| *k != key);
        }
    }
}

/// The array index a property key denotes in JavaScript: canonical decimal below 2^32 − 1.
fn array_index(key: &[u16]) -> Option<u64> {
    let text = String::from_utf16(key).ok()?;
    let n: u64 = text.parse().ok()?;
    (n.to_string() == text && n < 4_294_967_295).then_some(n)
}

/// `JSON.stringify(value)`.
fn canon(value: &M) -> String {
    let mut out = String::new();
    write_canon(value, &mut out);
    out
}

fn write_canon(value: &M, out: &mut String) {
    match value {
        M::Null => out.push_str("null"),
        M::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        M::Num(n) => out.push_str(n),
        M::Str(s) => write_canon_str(s, out),
        M::Arr(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canon(item, out);
            }
            out.push(']');
        }
        M::Obj(members) => {
            // Array-index keys first in ascending order, then the rest in insertion order.
            let mut order: Vec<&(Vec<u16>, M)> = members
                .iter()
                .filter(|(k, _)| array_index(k).is_some())
                .collect();
            order.sort_by_key(|(k, _)| array_index(k));
            order.extend(members.iter().filter(|(k, _)| array_index(k).is_none()));
            out.push('{');
            for (i, (k, v)) in order.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canon_str(k, out);
                out.push(':');
                write_canon(v, out);
            }
            out.push('}');
        }
    }
}

fn write_canon_str(s: &[u16], out: &mut String) {
    out.push('"');
    for item in char::decode_utf16(s.iter().copied()) {
        match item {
            Ok('"') => out.push_str("\\\""),
            Ok('\\') => out.push_str("\\\\"),
            Ok('\u{8}') => out.push_str("\\b"),
            Ok('\u{c}') => out.push_str("\\f"),
            Ok('\n') => out.push_str("\\n"),
            Ok('\r') => out.push_str("\\r"),
            Ok('\t') => out.push_str("\\t"),
            Ok(c) if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            Ok(c) => out.push(c),
            Err(lone) => {
                let _ = write!(out, "\\u{:04x}", lone.unpaired_surrogate());
            }
        }
    }
    out.push('"');
}

/// ECMAScript `Number::toString` for a finite number: the fewest significant digits that
/// read back as the same number, laid out by the exponent rules of the specification.
fn js_number_model(x: f64) -> String {
    if x == 0.0 {
        return "0".to_owned();
    }
    let (sign, abs) = if x < 0.0 { ("-", -x) } else { ("", x) };
    let sci = (1..=17usize)
        .map(|p| format!("{:.*e}", p - 1, abs))
        .find(|s| s.parse::<f64>() == Ok(abs))
        .expect("17 significant digits always read back");
    let (mantissa, exp) = sci.split_once('e').expect("scientific notation");
    let digits = mantissa.replace('.', "");
    let digits = digits.trim_end_matches('0');
    let k = digits.len() as i32;
    let n = exp.parse::<i32>().expect("exponent") + 1;
    let body = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        format!("{}.{}", &digits[..n as usize], &digits[n as usize..])
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let e = n - 1;
        let e_sign = if e < 0 { '-' } else { '+' };
        if k == 1 {
            format!("{digits}e{e_sign}{}", e.abs())
        } else {
            format!("{}.{}e{e_sign}{}", &digits[..1], &digits[1..], e.abs())
        }
    };
    format!("{sign}{body}")
}

/// A small deterministic generator for the formatting choices of [`write_loose`].
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }

    fn ws(&mut self, out: &mut String) {
        out.push_str(["", "", " ", "\n", "\t", "\r\n  "][self.below(6) as usize]);
    }
}

fn loose_unit_escape(unit: u16, rng: &mut Rng, out: &mut String) {
    if rng.below(2) == 0 {
        let _ = write!(out, "\\u{unit:04X}");
    } else {
        let _ = write!(out, "\\u{unit:04x}");
    }
}

/// Valid JSON for `value` that `JSON.stringify` would not write: whitespace, needless and
/// upper-case escapes, `\/`, members in insertion order (array indices unsorted), and
/// duplicated keys whose earlier value is overridden. Numbers stay canonical: the engine keeps
/// a number's source text (the format allows it), so `1.0` is written back as `1.0`.
fn write_loose(value: &M, rng: &mut Rng, out: &mut String) {
    rng.ws(out);
    match value {
        M::Str(s) => write_loose_str(s, rng, out),
        M::Arr(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_loose(item, rng, out);
            }
            rng.ws(out);
            out.push(']');
        }
        M::Obj(members) => {
            out.push('{');
            for (i, (k, v)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if rng.below(5) == 0 {
                    rng.ws(out);
                    write_loose_str(k, rng, out);
                    out.push(':');
                    out.push_str("[\"overridden\"],");
                }
                rng.ws(out);
                write_loose_str(k, rng, out);
                rng.ws(out);
                out.push(':');
                write_loose(v, rng, out);
            }
            rng.ws(out);
            out.push('}');
        }
        scalar => write_canon(scalar, out),
    }
    rng.ws(out);
}

fn write_loose_str(s: &[u16], rng: &mut Rng, out: &mut String) {
    out.push('"');
    for item in char::decode_utf16(s.iter().copied()) {
        let c = match item {
            Ok(c) => c,
            Err(lone) => {
                loose_unit_escape(lone.unpaired_surrogate(), rng, out);
                continue;
            }
        };
        let short = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '/' => Some("\\/"),
            '\u{8}' => Some("\\b"),
            '\u{c}' => Some("\\f"),
            '\n' => Some("\\n"),
            '\r' => Some("\\r"),
            '\t' => Some("\\t"),
            _ => None,
        };
        let must_escape = (c as u32) < 0x20 || c == '"' || c == '\\';
        match (rng.below(3), short) {
            (0, _) | (_, None) if must_escape || rng.below(2) == 0 => {
                for unit in units(c) {
                    loose_unit_escape(unit, rng, out);
                }
            }
            (_, Some(esc)) if must_escape || rng.below(2) == 0 => out.push_str(esc),
            _ => out.push(c),
        }
    }
    out.push('"');
}

// ---------------------------------------------------------------------------------------------
// Strategies for model values.

fn js_string() -> impl Strategy<Value = Vec<u16>> {
    let piece = prop_oneof![
        6 => proptest::char::range('a', 'z').prop_map(units),
        2 => (0u16..0x20).prop_map(|u| vec![u]),
        2 => prop::sample::select(vec![
            '"', '\\', '/', ' ', '\u{7f}', '\u{80}', '\u{2028}', '\u{2029}', 'é', '€',
            '\u{fffd}', '\u{feff}', '😀', '\u{10ffff}',
        ])
        .prop_map(units),
        1 => any::<char>().prop_map(units),
        2 => (0xD800u16..0xE000).prop_map(|u| vec![u]),
    ];
    prop::collection::vec(piece, 0..10).prop_map(|pieces| pieces.concat())
}

fn plain_text() -> impl Strategy<Value = String> {
    "[a-z ]{0,12}"
}

fn js_number() -> impl Strategy<Value = f64> {
    prop_oneof![
        (-1000i64..1000).prop_map(|n| n as f64),
        any::<i64>().prop_map(|n| n as f64),
        (any::<i32>(), 1i32..9).prop_map(|(m, k)| f64::from(m) / 10f64.powi(k)),
        (-9999i32..10000, -330i32..310)
            .prop_map(|(m, e)| format!("{m}e{e}").parse::<f64>().unwrap_or(0.0)),
        any::<f64>(),
        prop::sample::select(vec![
            0.1 + 0.2,
            5e-324,
            f64::MAX,
            f64::MIN_POSITIVE,
            1e21,
            1e20,
            1e-7,
            1e-6,
            123e-20,
            9007199254740993.0,
            -0.0,
            0.5,
        ]),
    ]
    .prop_filter("finite", |x| x.is_finite())
}

fn json_key() -> impl Strategy<Value = Vec<u16>> {
    prop_oneof![
        2 => js_string(),
        1 => prop::sample::select(vec![
            "0", "1", "2", "10", "01", "-1", "4294967294", "4294967295", "1.5", "", "type", "a",
        ])
        .prop_map(|k| k.encode_utf16().collect()),
    ]
}

/// Keeps the first member of each key.
fn distinct_keys(members: Vec<(Vec<u16>, M)>) -> Vec<(Vec<u16>, M)> {
    let mut seen = HashSet::new();
    members
        .into_iter()
        .filter(|(k, _)| seen.insert(k.clone()))
        .collect()
}

fn json_value() -> impl Strategy<Value = M> {
    let leaf = prop_oneof![
        Just(M::Null),
        any::<bool>().prop_map(M::Bool),
        js_number().prop_map(|x| M::Num(js_number_model(x))),
        js_string().prop_map(M::Str),
    ];
    leaf.prop_recursive(4, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(M::Arr),
            prop::collection::vec((json_key(), inner), 0..5)
                .prop_map(|members| M::Obj(distinct_keys(members))),
        ]
    })
}

/// Canonical JSON text with a few byte edits (insertions, deletions, replacements, a cut).
fn mutated_json() -> impl Strategy<Value = Vec<u8>> {
    let alphabet = b"{}[]\",:\\/u0123456789aAfFeE.+-tnrl \n\t\x01\xed\xff".to_vec();
    let edit = (0u8..4, any::<Index>(), prop::sample::select(alphabet));
    (json_value(), prop::collection::vec(edit, 1..4)).prop_map(|(value, edits)| {
        let mut bytes = canon(&value).into_bytes();
        for (kind, at, byte) in edits {
            let i = at.index(bytes.len() + 1);
            match kind {
                0 => bytes.insert(i, byte),
                1 if i < bytes.len() => {
                    bytes.remove(i);
                }
                2 if i < bytes.len() => bytes[i] = byte,
                _ => bytes.truncate(i),
            }
        }
        bytes
    })
}

/// A configuration with `n` cases by default; `PROPTEST_CASES`, when set, decides instead.
fn cases(n: u32) -> ProptestConfig {
    let config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_some() {
        config
    } else {
        ProptestConfig { cases: n, ..config }
    }
}

fn fail(e: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(e.to_string())
}

// ---------------------------------------------------------------------------------------------
// Timestamps shared by the session generators.

/// 2026-01-01T00:00:00.000Z in milliseconds since the epoch.
const BASE_MS: i64 = 1_767_225_600_000;

/// A `timestamp` member (absent when `None`) and the milliseconds JavaScript reads from it
/// (`None` for NaN). Few distinct instants, so that ties are common.
fn timestamp() -> impl Strategy<Value = (Option<M>, Option<i64>)> {
    prop_oneof![
        8 => (0i64..3, 0i64..1000).prop_map(|(s, ms)| (
            Some(jstr(&format!("2026-01-01T00:00:{s:02}.{ms:03}Z"))),
            Some(BASE_MS + s * 1000 + ms),
        )),
        1 => (0i64..3).prop_map(|s| (
            Some(jstr(&format!("2026-01-01T00:00:{s:02}Z"))),
            Some(BASE_MS + s * 1000),
        )),
        1 => Just((Some(jstr("2026-01-01")), Some(BASE_MS))),
        1 => prop::sample::select(vec!["", "yesterday", "2026-13-01T00:00:00.000Z", "2026-02-30"])
            .prop_map(|t| (Some(jstr(t)), None)),
        1 => Just((None, None)),
        // `new Date(5)`: a number is a time value.
        1 => Just((Some(int(5)), Some(5))),
    ]
}

fn header_v5() -> M {
    obj(vec![
        ("type", jstr("session")),
        ("version", int(5)),
        ("id", jstr("s")),
        ("timestamp", jstr("2026-01-01T00:00:00.000Z")),
        ("cwd", jstr("/w")),
    ])
}

fn jsonl(records: &[M]) -> String {
    records.iter().map(|r| canon(r) + "\n").collect()
}

fn lines_of(records: &[Record]) -> Vec<String> {
    records.iter().map(Record::to_line).collect()
}

fn is_session(record: &M) -> bool {
    record.get("type") == Some(&jstr("session"))
}
