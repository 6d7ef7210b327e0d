//! Property tests: the engine, run on generated input, against small models written here
//! straight from the format description.
//!
//! The inputs are built from a model JSON value ([`M`]) with its own JavaScript-canonical
//! writer, so no generated file depends on the engine's writer. Each model is deliberately
//! naive: plain maps and loops over the generator's own description of the file.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::TestCaseError;

use gjcfs::engine::json;
use gjcfs::engine::lines::{read_lines_in, TAIL};
use gjcfs::engine::migrate::{migrate, Migration};
use gjcfs::engine::replay::{parse_session_entries, parse_session_reader, replay_lines};
use gjcfs::engine::summary::Summary;
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
// 1. JSON.

/// Whatever `parse` accepts, the other entry points accept too, and it writes back to text
/// that parses to the same value.
fn check_arbitrary_json(text: &str) -> Result<(), TestCaseError> {
    let parsed = json::parse(text);
    prop_assert_eq!(json::validate(text).is_ok(), parsed.is_ok());
    for depth in 0..4 {
        prop_assert_eq!(json::parse_shallow(text, depth).is_ok(), parsed.is_ok());
    }
    if let Ok(value) = parsed {
        let compact = json::to_compact(&value);
        let again = json::parse(&compact).map_err(fail)?;
        prop_assert_eq!(&again, &value);
        prop_assert_eq!(json::to_compact(&again), compact);
    }
    Ok(())
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn json_canonical_text_round_trips_at_every_depth(value in json_value()) {
        let text = canon(&value);
        let full = json::parse(&text).map_err(fail)?;
        prop_assert_eq!(&json::to_compact(&full), &text);
        prop_assert!(json::validate(&text).is_ok());
        for depth in 0..4 {
            let shallow = json::parse_shallow(&text, depth).map_err(fail)?;
            prop_assert_eq!(&json::to_compact(&shallow), &text, "depth {}", depth);
            prop_assert_eq!(&shallow, &full, "depth {}", depth);
        }
    }

    #[test]
    fn json_non_canonical_text_writes_back_canonical(value in json_value(), seed in any::<u64>()) {
        let mut loose = String::new();
        write_loose(&value, &mut Rng(seed), &mut loose);
        let parsed = json::parse(&loose).map_err(|e| fail(format!("{e} in {loose:?}")))?;
        prop_assert_eq!(json::to_compact(&parsed), canon(&value), "from {:?}", loose);
        for depth in 0..4 {
            let shallow = json::parse_shallow(&loose, depth).map_err(fail)?;
            prop_assert_eq!(&shallow, &parsed, "depth {}", depth);
        }
    }

    #[test]
    fn js_number_formatting_matches_the_ecmascript_algorithm(x in js_number()) {
        let expected = js_number_model(x);
        prop_assert_eq!(json::format_js_number(x), expected.clone());
        prop_assert_eq!(expected.parse::<f64>(), Ok(x));
        let value = json::parse(&expected).map_err(fail)?;
        prop_assert_eq!(value.as_f64(), Some(x));
        prop_assert_eq!(json::to_compact(&value), expected);
    }

    #[test]
    fn arbitrary_text_never_panics_and_accepted_json_reparses(
        bytes in prop::collection::vec(any::<u8>(), 0..64)
    ) {
        check_arbitrary_json(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn damaged_json_never_panics_and_accepted_json_reparses(bytes in mutated_json()) {
        check_arbitrary_json(&String::from_utf8_lossy(&bytes))?;
    }
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

// ---------------------------------------------------------------------------------------------
// 2. Random trees.

#[derive(Clone, Debug)]
struct TreeChoice {
    dup: u8,
    id_k: usize,
    parent_kind: u8,
    parent_k: usize,
    ts: (Option<M>, Option<i64>),
    kind: u8,
    target_k: usize,
    label: u8,
}

fn tree_choice() -> impl Strategy<Value = TreeChoice> {
    (
        any::<u8>(),
        any::<usize>(),
        any::<u8>(),
        any::<usize>(),
        timestamp(),
        any::<u8>(),
        any::<usize>(),
        any::<u8>(),
    )
        .prop_map(
            |(dup, id_k, parent_kind, parent_k, ts, kind, target_k, label)| TreeChoice {
                dup,
                id_k,
                parent_kind,
                parent_k,
                ts,
                kind,
                target_k,
                label,
            },
        )
}

/// A generated tree file and the model of it. Record indices: the header is 0, entry `i`
/// is `i + 1`.
struct TreeFile {
    text: String,
    /// Per record: the entry id (empty for the header).
    ids: Vec<String>,
    /// Per record: the `parentId` when it is a string.
    parents: Vec<Option<String>>,
    /// Per record: the timestamp in milliseconds, `None` when JavaScript reads NaN.
    times: Vec<Option<i64>>,
    /// Last label per target, in file order.
    labels: HashMap<String, String>,
    /// Every id used anywhere, plus ids that do not exist.
    probe_ids: Vec<String>,
}

fn build_tree_file(choices: &[TreeChoice]) -> TreeFile {
    let n = choices.len();
    let mut ids: Vec<String> = Vec::with_capacity(n);
    for (i, c) in choices.iter().enumerate() {
        ids.push(if i > 0 && c.dup < 26 {
            ids[c.id_k % i].clone()
        } else {
            format!("e{i}")
        });
    }
    let mut records = vec![header_v5()];
    let mut file = TreeFile {
        text: String::new(),
        ids: vec![String::new()],
        parents: vec![None],
        times: vec![None],
        labels: HashMap::new(),
        probe_ids: ids.clone(),
    };
    file.probe_ids
        .extend(["ghost0", "ghost1", "e999"].map(String::from));
    for (i, c) in choices.iter().enumerate() {
        let parent = match c.parent_kind % 16 {
            0 | 1 => Some(M::Null),
            2 => Some(jstr(&format!("ghost{}", c.parent_k % 2))),
            3 => Some(jstr(&ids[i])),
            4 if i + 1 < n => Some(jstr(&ids[i + 1 + c.parent_k % (n - i - 1)])),
            5 => None,
            6 => Some(int(7)),
            7..=10 if i > 0 => Some(jstr(&ids[0])),
            _ if i > 0 => Some(jstr(&ids[c.parent_k % i])),
            _ => Some(M::Null),
        };
        let kind = match c.kind % 5 {
            0 => "label",
            1 => "custom",
            2 => "thinking_level_change",
            _ => "message",
        };
        let mut entry = obj(vec![("type", jstr(kind)), ("id", jstr(&ids[i]))]);
        if let Some(p) = &parent {
            entry.set("parentId", p.clone());
        }
        if let Some(t) = &c.ts.0 {
            entry.set("timestamp", t.clone());
        }
        match kind {
            "label" => {
                let target = &file.probe_ids[c.target_k % file.probe_ids.len()];
                entry.set("targetId", jstr(target));
                match c.label % 4 {
                    0 => {
                        file.labels.remove(target);
                    }
                    1 => {
                        entry.set("label", jstr(""));
                        file.labels.remove(target);
                    }
                    2 => {
                        entry.set("label", M::Null);
                        file.labels.remove(target);
                    }
                    _ => {
                        let name = format!("name{}", c.label);
                        entry.set("label", jstr(&name));
                        file.labels.insert(target.clone(), name);
                    }
                }
            }
            "custom" => entry.set("customType", jstr("c")),
            "thinking_level_change" => entry.set("thinkingLevel", jstr("high")),
            _ => entry.set(
                "message",
                obj(vec![("role", jstr("user")), ("content", jstr("x"))]),
            ),
        }
        records.push(entry);
        file.ids.push(ids[i].clone());
        file.parents.push(match parent {
            Some(M::Str(s)) => Some(String::from_utf16(&s).expect("ASCII id")),
            _ => None,
        });
        file.times.push(c.ts.1);
    }
    file.text = jsonl(&records);
    file
}

/// The plain id → parentId map, last occurrence wins.
struct TreeModel<'a> {
    file: &'a TreeFile,
    by_id: HashMap<&'a str, usize>,
}

impl<'a> TreeModel<'a> {
    fn new(file: &'a TreeFile) -> Self {
        let by_id = (1..file.ids.len())
            .map(|r| (file.ids[r].as_str(), r))
            .collect();
        TreeModel { file, by_id }
    }

    fn parent(&self, r: usize) -> Option<usize> {
        let p = self.file.parents[r].as_deref()?;
        self.by_id.get(p).copied()
    }

    /// Root-first path to `r`, stopping at a repeated entry or an unknown parent.
    fn path(&self, r: usize) -> Vec<usize> {
        let mut seen = HashSet::new();
        let mut path = Vec::new();
        let mut at = Some(r);
        while let Some(i) = at {
            if !seen.insert(i) {
                break;
            }
            path.push(i);
            at = self.parent(i);
        }
        path.reverse();
        path
    }

    /// The members of the parent cycle through `r`, if `r` is on one.
    fn cycle_through(&self, r: usize) -> Option<Vec<usize>> {
        let mut members = vec![r];
        let mut at = self.parent(r)?;
        while at != r {
            if members.contains(&at) || members.len() > self.file.ids.len() {
                return None;
            }
            members.push(at);
            at = self.parent(at)?;
        }
        Some(members)
    }

    /// Sort key of the tree's child order: valid timestamps ascending, unparsable ones last.
    fn time_key(&self, r: usize) -> (bool, i64) {
        let t = self.file.times[r];
        (t.is_none(), t.unwrap_or(0))
    }
}

fn check_tree(session: &Session, model: &TreeModel<'_>) -> Result<(), TestCaseError> {
    let n = model.file.ids.len();
    let tree = session.tree();
    let indexed: Vec<usize> = (1..n)
        .filter(|&r| model.by_id[&*model.file.ids[r]] == r)
        .collect();

    // Every indexed entry is reachable from the roots exactly once; nothing else is there.
    let mut visits = vec![0usize; n];
    let mut stack = tree.roots.clone();
    while let Some(x) = stack.pop() {
        visits[x] += 1;
        prop_assert_eq!(visits[x], 1, "entry {} reached twice", x);
        stack.extend(&tree.children[x]);
    }
    let listed = tree.roots.len() + tree.children.iter().map(Vec::len).sum::<usize>();
    prop_assert_eq!(listed, indexed.len());
    for (r, &count) in visits.iter().enumerate() {
        prop_assert_eq!(count, usize::from(indexed.contains(&r)), "entry {}", r);
    }

    // A child sits under the parent the map names.
    for (p, children) in tree.children.iter().enumerate() {
        for &c in children {
            prop_assert_eq!(model.parent(c), Some(p), "child {} of {}", c, p);
            prop_assert_ne!(c, p);
        }
        for pair in children.windows(2) {
            let (a, b) = (model.time_key(pair[0]), model.time_key(pair[1]));
            prop_assert!(
                a < b || (a == b && pair[0] < pair[1]),
                "children of {} out of order: {:?}",
                p,
                children
            );
        }
    }

    // A root has no resolvable parent, is its own parent, or breaks a cycle — one per cycle.
    let mut broken_cycles = HashSet::new();
    for &r in &tree.roots {
        match model.parent(r) {
            None => {}
            Some(p) if p == r => {}
            Some(_) => {
                let cycle = model.cycle_through(r);
                prop_assert!(
                    cycle.is_some(),
                    "root {} has a parent and is on no cycle",
                    r
                );
                let cycle = cycle.unwrap_or_default();
                let key = cycle.iter().min().copied();
                prop_assert!(broken_cycles.insert(key), "cycle {:?} broken twice", cycle);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(cases(192))]

    #[test]
    fn tree_paths_labels_and_branching_follow_the_parent_map(
        choices in prop::collection::vec(tree_choice(), 0..80)
    ) {
        let file = build_tree_file(&choices);
        let replayed = parse_session_entries(&file.text).map_err(fail)?;
        prop_assert!(replayed.skipped.is_empty());
        let session = Session::from_records(replayed.records);
        let model = TreeModel::new(&file);
        let n = file.ids.len();

        // Paths, from every record (shadowed duplicates included).
        for r in 1..n {
            prop_assert_eq!(session.path_to(r), model.path(r), "path to {}", r);
        }

        // The leaf is the last entry; branching moves it exactly to known ids.
        prop_assert_eq!(session.leaf(), (n > 1).then_some(n - 1));
        let leaf_ids: Vec<&str> = session
            .branch_path(None)
            .map_err(fail)?
            .iter()
            .filter_map(|rec| rec.id())
            .collect();
        let model_leaf_ids: Vec<&str> = if n > 1 {
            model.path(n - 1).iter().map(|&i| file.ids[i].as_str()).collect()
        } else {
            Vec::new()
        };
        prop_assert_eq!(leaf_ids, model_leaf_ids);
        for id in &file.probe_ids {
            let known = model.by_id.get(id.as_str()).copied();
            let mut moved = session.clone();
            prop_assert_eq!(moved.branch(id).is_ok(), known.is_some(), "branch({})", id);
            prop_assert_eq!(session.branch_path(Some(id)).is_ok(), known.is_some());
            if let Some(r) = known {
                prop_assert_eq!(moved.leaf(), Some(r));
                prop_assert_eq!(moved.leaf_id(), Some(id.as_str()));
                let expected: Vec<&str> = model.path(r).iter().map(|&i| file.ids[i].as_str()).collect();
                let from_leaf: Vec<&str> = moved
                    .branch_path(None)
                    .map_err(fail)?
                    .iter()
                    .filter_map(|rec| rec.id())
                    .collect();
                prop_assert_eq!(&from_leaf, &expected);
                let from_id: Vec<&str> = session
                    .branch_path(Some(id))
                    .map_err(fail)?
                    .iter()
                    .filter_map(|rec| rec.id())
                    .collect();
                prop_assert_eq!(&from_id, &expected);
            }
        }
        let mut reset = session.clone();
        reset.reset_leaf();
        prop_assert!(reset.branch_path(None).map_err(fail)?.is_empty());
        prop_assert!(reset.build_context().messages.is_empty());

        // Labels: the last label entry per target wins; empty or absent clears.
        prop_assert_eq!(session.labels(), &file.labels);
        for id in &file.probe_ids {
            prop_assert_eq!(session.label(id), file.labels.get(id).map(String::as_str));
        }

        check_tree(&session, &model)?;
    }
}

proptest! {
    #![proptest_config(cases(256))]

    /// The index is the same however it was built: at once, from summaries, in steps of
    /// appended records, or entry by entry — and popping entries restores the earlier one.
    /// The trees have duplicate ids, dangling, forward, self and non-string parents.
    #[test]
    fn an_index_built_in_steps_equals_one_built_at_once(
        choices in prop::collection::vec(tree_choice(), 0..60),
        cuts in prop::collection::vec(any::<Index>(), 0..4),
        pushed_from in any::<Index>(),
    ) {
        let file = build_tree_file(&choices);
        let records = parse_session_entries(&file.text).map_err(fail)?.records;
        let whole = Session::from_records(records.clone());
        let summaries: Vec<Summary> = records.iter().map(Summary::of).collect();
        prop_assert_eq!(&Session::from_summarized(records.clone(), &summaries), &whole);

        let mut cuts: Vec<usize> = cuts.iter().map(|c| 1 + c.index(records.len())).collect();
        cuts.push(records.len());
        cuts.sort_unstable();
        cuts.dedup();
        let mut stepped = Session::from_records(records[..cuts[0]].to_vec());
        for pair in cuts.windows(2) {
            stepped.extend(records[pair[0]..pair[1]].to_vec());
        }
        prop_assert_eq!(&stepped, &whole);

        let k = 1 + pushed_from.index(records.len());
        let base = Session::from_records(records[..k].to_vec());
        let mut pushed = base.clone();
        for record in &records[k..] {
            pushed.push_entry(record.clone());
        }
        prop_assert_eq!(&pushed, &whole);
        for _ in k..records.len() {
            pushed.pop_entry(base.leaf());
        }
        prop_assert_eq!(&pushed, &base);
    }
}

// ---------------------------------------------------------------------------------------------
// 3. Context.

#[derive(Clone, Debug)]
struct CtxChoice {
    parent_kind: u8,
    parent_k: usize,
    kind: u8,
    flag: u8,
    k: usize,
    text: Vec<u16>,
    text2: String,
    details: Option<M>,
    ts: (Option<M>, Option<i64>),
}

fn ctx_choice() -> impl Strategy<Value = CtxChoice> {
    (
        any::<u8>(),
        any::<usize>(),
        any::<u8>(),
        any::<u8>(),
        any::<usize>(),
        js_string(),
        plain_text(),
        prop::option::of(json_value()),
        timestamp(),
    )
        .prop_map(
            |(parent_kind, parent_k, kind, flag, k, text, text2, details, ts)| CtxChoice {
                parent_kind,
                parent_k,
                kind,
                flag,
                k,
                text,
                text2,
                details,
                ts,
            },
        )
}

/// What a `configured_model_chain` entry does, by the normalisation rules
#[derive(Clone, Debug)]
enum ChainEffect {
    Ignore,
    Clear,
    Set(M),
}

/// What an entry means to the context model.
#[derive(Clone, Debug)]
enum CtxKind {
    /// A `message` entry: its payload, and `provider/model` when it is an assistant message.
    Message(M, Option<String>),
    /// An entry that emits this message (custom message, non-empty branch summary).
    Emits(M),
    Compaction {
        summary_message: M,
        first_kept: Option<String>,
        remote: bool,
    },
    ModelChange {
        model: String,
        role: String,
    },
    /// A `configured_model_chain` and what it does to the chain map.
    Chain(String, ChainEffect),
    ServiceTier(Option<String>),
    McpSelection {
        names: M,
        legacy_builtin: Option<M>,
    },
    BuiltinSelection(M),
    Mode {
        mode: String,
        data: Option<M>,
    },
    Thinking(Option<String>),
    /// A `ttsr_injection`: rule names, rule records by name, and a message count.
    Ttsr {
        rules: Vec<String>,
        records: Vec<(String, M)>,
        count: Option<M>,
    },
    Silent,
}

struct CtxEntry {
    id: String,
    parent: Option<usize>,
    kind: CtxKind,
}

fn millis(ts: Option<i64>) -> M {
    ts.map_or(M::Null, int)
}

fn text_content(text: &[u16], as_blocks: bool) -> M {
    if as_blocks {
        M::Arr(vec![obj(vec![
            ("type", jstr("text")),
            ("text", M::Str(text.to_vec())),
        ])])
    } else {
        M::Str(text.to_vec())
    }
}

fn build_ctx_file(choices: &[CtxChoice]) -> (String, Vec<CtxEntry>) {
    let mut records = vec![header_v5()];
    let mut entries: Vec<CtxEntry> = Vec::new();
    for (i, c) in choices.iter().enumerate() {
        let id = format!("e{i}");
        let parent = match c.parent_kind % 10 {
            _ if i == 0 => None,
            0 => None,
            1 | 2 => Some(c.parent_k % i),
            _ => Some(i - 1),
        };
        let ts_ms = c.ts.1;
        let earlier_id = |k: usize| {
            if i == 0 {
                "ghost".to_owned()
            } else {
                format!("e{}", k % i)
            }
        };
        let (ty, fields, kind): (&str, Vec<(&str, M)>, CtxKind) = match c.kind % 16 {
            0..=2 => {
                let (message, model) = match c.flag % 3 {
                    0 => (
                        obj(vec![
                            ("role", jstr("user")),
                            ("content", text_content(&c.text, c.flag % 2 == 0)),
                            ("timestamp", int(1)),
                        ]),
                        None,
                    ),
                    1 => {
                        let provider = ["anthropic", "openai"][c.k % 2];
                        let model = format!("m{}", c.k % 3);
                        (
                            obj(vec![
                                ("role", jstr("assistant")),
                                ("content", text_content(&c.text, true)),
                                ("provider", jstr(provider)),
                                ("model", jstr(&model)),
                                ("timestamp", int(2)),
                            ]),
                            Some(format!("{provider}/{model}")),
                        )
                    }
                    _ => (
                        obj(vec![
                            ("role", jstr("toolResult")),
                            ("toolCallId", jstr("t")),
                            ("toolName", jstr("bash")),
                            ("content", text_content(&c.text, true)),
                            ("isError", M::Bool(false)),
                            ("timestamp", int(3)),
                        ]),
                        None,
                    ),
                };
                (
                    "message",
                    vec![("message", message.clone())],
                    CtxKind::Message(message, model),
                )
            }
            3 => {
                let content = text_content(&c.text, c.flag % 2 == 0);
                let display = M::Bool(c.flag % 3 == 0);
                let attribution = match c.k % 3 {
                    0 => None,
                    1 => Some(jstr("user")),
                    _ => Some(jstr("agent")),
                };
                let mut fields = vec![
                    ("customType", jstr("note")),
                    ("content", content.clone()),
                    ("display", display.clone()),
                ];
                let mut emitted = obj(vec![
                    ("role", jstr("custom")),
                    ("customType", jstr("note")),
                    ("content", content),
                    ("display", display),
                ]);
                if let Some(d) = &c.details {
                    fields.push(("details", d.clone()));
                    emitted.set("details", d.clone());
                }
                if let Some(a) = &attribution {
                    fields.push(("attribution", a.clone()));
                    emitted.set("attribution", a.clone());
                }
                emitted.set("timestamp", millis(ts_ms));
                ("custom_message", fields, CtxKind::Emits(emitted))
            }
            4 => {
                let summary = if c.flag % 3 == 0 {
                    Vec::new()
                } else {
                    c.text.clone()
                };
                let from_id = if c.flag % 2 == 0 {
                    "root".to_owned()
                } else {
                    earlier_id(c.k)
                };
                let kind = if summary.is_empty() {
                    CtxKind::Silent
                } else {
                    CtxKind::Emits(obj(vec![
                        ("role", jstr("branchSummary")),
                        ("summary", M::Str(summary.clone())),
                        ("fromId", jstr(&from_id)),
                        ("timestamp", millis(ts_ms)),
                    ]))
                };
                (
                    "branch_summary",
                    vec![("fromId", jstr(&from_id)), ("summary", M::Str(summary))],
                    kind,
                )
            }
            5 => {
                let first_kept = match c.k % 5 {
                    0 => None,
                    1 => Some("ghost".to_owned()),
                    k => Some(earlier_id(c.parent_k / 7 + k)),
                };
                let tokens = int((c.k % 100_000) as i64);
                let history = M::Arr(vec![obj(vec![("type", jstr("message"))])]);
                let (preserve, payload) = match c.flag % 7 {
                    0 | 1 => (
                        Some(obj(vec![(
                            "openaiRemoteCompaction",
                            obj(vec![
                                ("provider", jstr("openai")),
                                ("replacementHistory", history.clone()),
                            ]),
                        )])),
                        Some(obj(vec![
                            ("type", jstr("openaiResponsesHistory")),
                            ("provider", jstr("openai")),
                            ("items", history.clone()),
                        ])),
                    ),
                    2 => (
                        Some(obj(vec![(
                            "openaiRemoteCompaction",
                            obj(vec![
                                ("provider", jstr("")),
                                ("replacementHistory", history.clone()),
                            ]),
                        )])),
                        None,
                    ),
                    3 => (
                        Some(obj(vec![(
                            "openaiRemoteCompaction",
                            obj(vec![
                                ("provider", jstr("openai")),
                                ("replacementHistory", jstr("x")),
                            ]),
                        )])),
                        None,
                    ),
                    4 => (
                        Some(obj(vec![(
                            "openaiRemoteCompaction",
                            obj(vec![("replacementHistory", history)]),
                        )])),
                        None,
                    ),
                    _ => (None, None),
                };
                let short = (c.flag % 2 == 0).then(|| jstr(&c.text2));
                let mut fields = vec![("summary", M::Str(c.text.clone()))];
                let mut summary_message = obj(vec![
                    ("role", jstr("compactionSummary")),
                    ("summary", M::Str(c.text.clone())),
                ]);
                if let Some(s) = &short {
                    fields.push(("shortSummary", s.clone()));
                    summary_message.set("shortSummary", s.clone());
                }
                if let Some(f) = &first_kept {
                    fields.push(("firstKeptEntryId", jstr(f)));
                }
                fields.push(("tokensBefore", tokens.clone()));
                summary_message.set("tokensBefore", tokens);
                if let Some(p) = &preserve {
                    fields.push(("preserveData", p.clone()));
                }
                let remote = payload.is_some();
                if let Some(p) = payload {
                    summary_message.set("providerPayload", p);
                }
                summary_message.set("timestamp", millis(ts_ms));
                (
                    "compaction",
                    fields,
                    CtxKind::Compaction {
                        summary_message,
                        first_kept,
                        remote,
                    },
                )
            }
            6 => {
                let model = format!("prov/m{}", c.k % 3);
                let role = match c.flag % 4 {
                    0 => None,
                    1 => Some("default"),
                    2 => Some("smol"),
                    _ => Some("plan"),
                };
                let mut fields = vec![("model", jstr(&model))];
                if let Some(r) = role {
                    fields.push(("role", jstr(r)));
                }
                (
                    "model_change",
                    fields,
                    CtxKind::ModelChange {
                        model,
                        role: role.unwrap_or("default").to_owned(),
                    },
                )
            }
            7 => {
                let level = match c.flag % 3 {
                    0 => None,
                    1 => Some("high".to_owned()),
                    _ => Some("low".to_owned()),
                };
                (
                    "thinking_level_change",
                    vec![("thinkingLevel", level.as_deref().map_or(M::Null, jstr))],
                    CtxKind::Thinking(level),
                )
            }
            8 => (
                "custom",
                vec![
                    ("customType", jstr("c")),
                    ("data", c.details.clone().unwrap_or(M::Null)),
                ],
                CtxKind::Silent,
            ),
            11 => {
                let role = ["default", "smol", ""][c.k % 3];
                let entries = match c.flag % 4 {
                    0 => jstr("p/m0"),
                    1 => M::Arr(vec![jstr(""), int(5)]),
                    _ => M::Arr(vec![
                        jstr(&format!("p/m{}", c.k % 3)),
                        jstr(""),
                        jstr("q/x"),
                        int(5),
                    ]),
                };
                let origin = [None, Some(jstr("user")), Some(int(5))][c.parent_k % 3].clone();
                let identity =
                    [None, Some(jstr("id1")), Some(int(7))][(c.parent_k / 3) % 3].clone();
                let explicit_head =
                    [None, Some(M::Bool(true)), Some(jstr("true"))][(c.parent_k / 9) % 3].clone();
                let cleared = [None, Some(M::Bool(true)), Some(M::Bool(false))]
                    [c.flag as usize % 5 % 3]
                    .clone();
                let mut fields = vec![("role", jstr(role)), ("entries", entries.clone())];
                for (key, value) in [
                    ("origin", &origin),
                    ("identity", &identity),
                    ("explicitHead", &explicit_head),
                    ("cleared", &cleared),
                ] {
                    if let Some(v) = value {
                        fields.push((key, v.clone()));
                    }
                }
                let kept: Vec<M> = match &entries {
                    M::Arr(items) => items
                        .iter()
                        .filter(|e| matches!(e, M::Str(s) if !s.is_empty()))
                        .cloned()
                        .collect(),
                    _ => Vec::new(),
                };
                let effect = if role.is_empty() {
                    ChainEffect::Ignore
                } else if cleared == Some(M::Bool(true)) {
                    ChainEffect::Clear
                } else if kept.is_empty() {
                    ChainEffect::Ignore
                } else {
                    let mut chain = obj(vec![
                        ("role", jstr(role)),
                        ("entries", M::Arr(kept)),
                        (
                            "origin",
                            match &origin {
                                Some(o @ M::Str(_)) => o.clone(),
                                _ => jstr("session"),
                            },
                        ),
                    ]);
                    if let Some(id @ M::Str(_)) = &identity {
                        chain.set("identity", id.clone());
                    }
                    chain.set(
                        "explicitHead",
                        M::Bool(explicit_head == Some(M::Bool(true))),
                    );
                    ChainEffect::Set(chain)
                };
                (
                    "configured_model_chain",
                    fields,
                    CtxKind::Chain(role.to_owned(), effect),
                )
            }
            12 => {
                let tier = (c.flag % 2 == 0).then(|| "priority".to_owned());
                (
                    "service_tier_change",
                    vec![("serviceTier", tier.as_deref().map_or(M::Null, jstr))],
                    CtxKind::ServiceTier(tier),
                )
            }
            13 => {
                let names = M::Arr((0..c.k % 3).map(|j| jstr(&format!("mcp{j}"))).collect());
                let legacy_builtin = (c.flag % 2 == 0).then(|| {
                    M::Arr(
                        (0..c.parent_k % 3)
                            .map(|j| jstr(&format!("b{j}")))
                            .collect(),
                    )
                });
                let mut fields = vec![("selectedToolNames", names.clone())];
                if let Some(l) = &legacy_builtin {
                    fields.push(("selectedDiscoveredBuiltinToolNames", l.clone()));
                }
                (
                    "mcp_tool_selection",
                    fields,
                    CtxKind::McpSelection {
                        names,
                        legacy_builtin,
                    },
                )
            }
            14 => {
                let names = M::Arr((0..c.k % 3).map(|j| jstr(&format!("b{j}"))).collect());
                (
                    "discovered_builtin_tool_selection",
                    vec![("selectedToolNames", names.clone())],
                    CtxKind::BuiltinSelection(names),
                )
            }
            15 => {
                let mode = ["plan", "none", "review"][c.k % 3].to_owned();
                let mut fields = vec![("mode", jstr(&mode))];
                if let Some(d) = &c.details {
                    fields.push(("data", d.clone()));
                }
                (
                    "mode_change",
                    fields,
                    CtxKind::Mode {
                        mode,
                        data: c.details.clone(),
                    },
                )
            }
            9 => (
                "label",
                vec![("targetId", jstr(&earlier_id(c.k))), ("label", jstr("l"))],
                CtxKind::Silent,
            ),
            _ => {
                let rules: Vec<String> = (0..c.k % 4)
                    .map(|j| format!("r{}", (c.k / 4 + j * 3) % 4))
                    .collect();
                let records: Vec<(String, M)> = (0..c.flag as usize % 3)
                    .map(|j| {
                        let name = format!("r{}", (c.parent_k + j) % 4);
                        let mut record = obj(vec![
                            ("name", jstr(&name)),
                            ("lastInjectedAt", int(((c.parent_k / 4 + j) % 1000) as i64)),
                        ]);
                        if j == 1 {
                            record.set("repeatMode", jstr("always"));
                        }
                        (name, record)
                    })
                    .collect();
                let count = (c.flag % 4 == 0).then(|| int((c.k % 50) as i64));
                let mut fields = vec![(
                    "injectedRules",
                    M::Arr(rules.iter().map(|r| jstr(r)).collect()),
                )];
                if c.flag % 5 != 0 {
                    fields.push((
                        "injectedRuleRecords",
                        M::Arr(records.iter().map(|(_, r)| r.clone()).collect()),
                    ));
                }
                if let Some(n) = &count {
                    fields.push(("ttsrMessageCount", n.clone()));
                }
                let records = if c.flag % 5 != 0 { records } else { Vec::new() };
                (
                    "ttsr_injection",
                    fields,
                    CtxKind::Ttsr {
                        rules,
                        records,
                        count,
                    },
                )
            }
        };
        let mut record = obj(vec![
            ("type", jstr(ty)),
            ("id", jstr(&id)),
            (
                "parentId",
                parent.map_or(M::Null, |p| jstr(&format!("e{p}"))),
            ),
        ]);
        if let Some(t) = &c.ts.0 {
            record.set("timestamp", t.clone());
        }
        for (k, v) in fields {
            record.set(k, v);
        }
        records.push(record);
        entries.push(CtxEntry { id, parent, kind });
    }
    (jsonl(&records), entries)
}

/// What the context model computes, as canonical text: the messages, and the whole context
/// object
struct ModelContext {
    messages: Vec<String>,
    full: String,
}

/// Sets `key` in an ordered map: in place when present, appended otherwise.
fn map_set(map: &mut Vec<(String, M)>, key: &str, value: M) {
    match map.iter_mut().find(|(k, _)| k == key) {
        Some(slot) => slot.1 = value,
        None => map.push((key.to_owned(), value)),
    }
}

fn map_obj(map: &[(String, M)]) -> M {
    obj(map.iter().map(|(k, v)| (k.as_str(), v.clone())).collect())
}

/// The model: the path, the state scan, message emission, and the
/// return value
fn model_context(entries: &[CtxEntry], leaf: Option<usize>) -> ModelContext {
    let mut path = Vec::new();
    let mut at = leaf;
    while let Some(i) = at {
        path.push(i);
        at = entries[i].parent;
    }
    path.reverse();

    let mut thinking = jstr("off");
    let mut service_tier: Option<M> = None;
    let mut models: Vec<(String, M)> = Vec::new();
    let mut explicit_default = false;
    let mut chains: Vec<(String, M)> = Vec::new();
    let mut ttsr_rules: Vec<String> = Vec::new();
    let mut ttsr_records: Vec<(String, M)> = Vec::new();
    let mut ttsr_count = int(0);
    let mut mcp_names = M::Arr(Vec::new());
    let mut builtin_names: Option<M> = None;
    let mut has_mcp = false;
    let mut has_builtin = false;
    let mut mode = Some(jstr("none"));
    let mut mode_data: Option<M> = None;
    let mut compaction = None;
    for (pos, &i) in path.iter().enumerate() {
        match &entries[i].kind {
            CtxKind::Thinking(level) => thinking = jstr(level.as_deref().unwrap_or("off")),
            CtxKind::ModelChange { model, role } => {
                if role == "default" {
                    explicit_default = true;
                }
                map_set(&mut models, role, jstr(model));
            }
            CtxKind::Message(_, Some(model)) if !explicit_default => {
                map_set(&mut models, "default", jstr(model));
            }
            CtxKind::Chain(role, effect) => match effect {
                ChainEffect::Ignore => {}
                ChainEffect::Clear => chains.retain(|(r, _)| r != role),
                ChainEffect::Set(chain) => map_set(&mut chains, role, chain.clone()),
            },
            CtxKind::ServiceTier(tier) => service_tier = tier.as_deref().map(jstr),
            CtxKind::McpSelection {
                names,
                legacy_builtin,
            } => {
                mcp_names = names.clone();
                has_mcp = true;
                if let Some(list) = legacy_builtin {
                    builtin_names = Some(list.clone());
                    has_builtin = true;
                }
            }
            CtxKind::BuiltinSelection(names) => {
                builtin_names = Some(names.clone());
                has_builtin = true;
            }
            CtxKind::Mode { mode: m, data } => {
                mode = Some(jstr(m));
                mode_data = data.clone();
            }
            CtxKind::Ttsr {
                rules,
                records,
                count,
            } => {
                for name in rules {
                    if !ttsr_rules.contains(name) {
                        ttsr_rules.push(name.clone());
                    }
                    if !ttsr_records.iter().any(|(n, _)| n == name) {
                        let record = obj(vec![("name", jstr(name)), ("lastInjectedAt", int(0))]);
                        ttsr_records.push((name.clone(), record));
                    }
                }
                for (name, record) in records {
                    if !ttsr_rules.contains(name) {
                        ttsr_rules.push(name.clone());
                    }
                    map_set(&mut ttsr_records, name, record.clone());
                }
                if let Some(n) = count {
                    ttsr_count = n.clone();
                }
            }
            CtxKind::Compaction { .. } => compaction = Some(pos),
            _ => {}
        }
    }
    for (role, model) in &models {
        if !chains.iter().any(|(r, _)| r == role) {
            let chain = obj(vec![
                ("role", jstr(role)),
                ("entries", M::Arr(vec![model.clone()])),
                ("origin", jstr("legacy_session")),
                ("explicitHead", M::Bool(true)),
            ]);
            chains.push((role.clone(), chain));
        }
    }

    let emitted = |i: usize| match &entries[i].kind {
        CtxKind::Message(m, _) | CtxKind::Emits(m) => Some(m.clone()),
        _ => None,
    };
    let mut messages = Vec::new();
    match compaction {
        None => messages.extend(path.iter().filter_map(|&i| emitted(i))),
        Some(at) => {
            let CtxKind::Compaction {
                summary_message,
                first_kept,
                remote,
            } = &entries[path[at]].kind
            else {
                unreachable!("a compaction position");
            };
            messages.push(summary_message.clone());
            if !remote {
                let start = first_kept
                    .as_ref()
                    .and_then(|f| path[..at].iter().position(|&i| entries[i].id == *f));
                if let Some(start) = start {
                    messages.extend(path[start..at].iter().filter_map(|&i| emitted(i)));
                }
            }
            messages.extend(path[at + 1..].iter().filter_map(|&i| emitted(i)));
        }
    }

    let mut full = obj(vec![
        ("messages", M::Arr(messages.clone())),
        ("thinkingLevel", thinking),
    ]);
    if let Some(tier) = service_tier {
        full.set("serviceTier", tier);
    }
    full.set("models", map_obj(&models));
    full.set("configuredModelChains", map_obj(&chains));
    full.set(
        "injectedTtsrRules",
        M::Arr(ttsr_rules.iter().map(|r| jstr(r)).collect()),
    );
    full.set(
        "injectedTtsrRuleRecords",
        M::Arr(ttsr_records.into_iter().map(|(_, r)| r).collect()),
    );
    full.set("ttsrMessageCount", ttsr_count);
    full.set("selectedMCPToolNames", mcp_names);
    if let Some(list) = builtin_names {
        full.set("selectedDiscoveredBuiltinToolNames", list);
    }
    full.set("hasPersistedMCPToolSelection", M::Bool(has_mcp));
    full.set(
        "hasPersistedDiscoveredBuiltinToolSelection",
        M::Bool(has_builtin),
    );
    if let Some(m) = mode {
        full.set("mode", m);
    }
    if let Some(d) = mode_data {
        full.set("modeData", d);
    }
    ModelContext {
        messages: messages.iter().map(canon).collect(),
        full: canon(&full),
    }
}

proptest! {
    #![proptest_config(cases(192))]

    #[test]
    fn context_matches_the_model_of_build_session_context(
        choices in prop::collection::vec(ctx_choice(), 0..24),
        leaf_kind in 0u8..10,
        leaf_k in any::<usize>(),
    ) {
        let (text, entries) = build_ctx_file(&choices);
        let replayed = parse_session_entries(&text).map_err(fail)?;
        prop_assert!(replayed.skipped.is_empty());
        let mut session = Session::from_records(replayed.records);
        let n = entries.len();
        let last = n.checked_sub(1);
        let (model_leaf, unknown) = match leaf_kind {
            6 | 7 if n > 0 => {
                let k = leaf_k % n;
                session.branch(&entries[k].id).map_err(fail)?;
                (Some(k), false)
            }
            8 => (last, true),
            9 => {
                session.reset_leaf();
                (None, false)
            }
            _ => (last, false),
        };
        let ctx = if unknown {
            session.build_context_for("ghost")
        } else {
            session.build_context()
        };
        let model = model_context(&entries, model_leaf);
        let got: Vec<String> = ctx.messages.iter().map(|m| json::to_compact(m)).collect();
        prop_assert_eq!(got, model.messages);
        prop_assert_eq!(json::to_compact(&ctx.to_value()), model.full);
    }
}

// ---------------------------------------------------------------------------------------------
// 4. Patch replay.

#[derive(Clone, Debug)]
enum PatchItem {
    Message {
        id_k: usize,
        text: Vec<u16>,
    },
    Other {
        id_k: usize,
    },
    HeaderPatch {
        cwd: Option<String>,
        title: Option<Vec<u16>>,
        source: Option<bool>,
        variant: u8,
    },
    EntryPatch {
        target_k: usize,
        text: Vec<u16>,
        variant: u8,
    },
    SecondHeader,
    Garbage(u8),
}

fn patch_item() -> impl Strategy<Value = PatchItem> {
    prop_oneof![
        3 => (any::<usize>(), js_string()).prop_map(|(id_k, text)| PatchItem::Message { id_k, text }),
        1 => any::<usize>().prop_map(|id_k| PatchItem::Other { id_k }),
        3 => (
            prop::option::of(plain_text()),
            prop::option::of(js_string()),
            prop::option::of(any::<bool>()),
            any::<u8>(),
        )
            .prop_map(|(cwd, title, source, variant)| PatchItem::HeaderPatch {
                cwd,
                title,
                source,
                variant,
            }),
        3 => (any::<usize>(), js_string(), any::<u8>())
            .prop_map(|(target_k, text, variant)| PatchItem::EntryPatch { target_k, text, variant }),
        1 => Just(PatchItem::SecondHeader),
        1 => any::<u8>().prop_map(PatchItem::Garbage),
    ]
}

/// The pool of entry ids, shared by messages and other entries so that ids collide.
fn pool_id(k: usize) -> String {
    format!("m{}", k % 5)
}

/// A model line: a record to keep, or a patch with the effect it has if it applies.
enum PatchLine {
    Record(M),
    HeaderPatch(Option<Vec<(&'static str, M)>>),
    EntryPatch(Option<(String, M)>),
    Skipped,
}

fn build_patch_line(item: &PatchItem) -> (String, PatchLine) {
    match item {
        PatchItem::Message { id_k, text } => {
            let record = obj(vec![
                ("type", jstr("message")),
                ("id", jstr(&pool_id(*id_k))),
                ("parentId", M::Null),
                ("timestamp", jstr("2026-01-01T00:00:01.000Z")),
                (
                    "message",
                    obj(vec![
                        ("role", jstr("user")),
                        ("content", M::Str(text.clone())),
                        ("timestamp", int(1)),
                    ]),
                ),
            ]);
            (canon(&record), PatchLine::Record(record))
        }
        PatchItem::Other { id_k } => {
            let record = obj(vec![
                ("type", jstr("label")),
                ("id", jstr(&pool_id(*id_k))),
                ("parentId", M::Null),
                ("timestamp", jstr("2026-01-01T00:00:01.000Z")),
                ("targetId", jstr("m0")),
                ("label", jstr("l")),
            ]);
            (canon(&record), PatchLine::Record(record))
        }
        PatchItem::SecondHeader => {
            let record = obj(vec![
                ("type", jstr("session")),
                ("version", int(3)),
                ("id", jstr("second")),
                ("timestamp", jstr("2026-01-01T00:00:00.000Z")),
                ("cwd", jstr("/second")),
            ]);
            (canon(&record), PatchLine::Record(record))
        }
        PatchItem::Garbage(k) => {
            let text = ["not json", "{\"type\":", "42", "[1]", "", "   ", "null"][*k as usize % 7];
            (text.to_owned(), PatchLine::Skipped)
        }
        PatchItem::HeaderPatch {
            cwd,
            title,
            source,
            variant,
        } => {
            let mut fields: Vec<(&'static str, M)> = Vec::new();
            if let Some(c) = cwd {
                fields.push(("cwd", jstr(c)));
            }
            if let Some(t) = title {
                fields.push(("title", M::Str(t.clone())));
            }
            if let Some(user) = source {
                fields.push(("titleSource", jstr(if *user { "user" } else { "auto" })));
            }
            let patch = obj(fields.clone());
            let p = canon(&patch);
            let valid = |text: String| (text, PatchLine::HeaderPatch(Some(fields.clone())));
            let invalid = |text: String| (text, PatchLine::HeaderPatch(None));
            match variant % 16 {
                0..=4 => valid(format!("{{\"type\":\"header_patch\",\"patch\":{p}}}")),
                5 => valid(format!("{{\"patch\":{p},\"type\":\"header_patch\"}}")),
                6 => valid(format!(
                    "{{\"type\":\"header_patch\",\"patch\":{{\"title\":\"decoy\"}},\"patch\":{p}}}"
                )),
                7 => invalid(format!(
                    "{{\"type\":\"header_patch\",\"patch\":{p},\"x\":1}}"
                )),
                8 => {
                    let mut extra = patch.clone();
                    extra.set("id", jstr("x"));
                    invalid(format!(
                        "{{\"type\":\"header_patch\",\"patch\":{}}}",
                        canon(&extra)
                    ))
                }
                9 => invalid("{\"type\":\"header_patch\",\"patch\":{\"title\":5}}".into()),
                10 => invalid(
                    "{\"type\":\"header_patch\",\"patch\":{\"titleSource\":\"robot\"}}".into(),
                ),
                11 => invalid(format!("{{\"type\":\"header_patch\",\"patch\":[{p}]}}")),
                12 => invalid("{\"type\":\"header_patch\",\"patch\":null}".into()),
                13 => invalid("{\"type\":\"header_patch\"}".into()),
                14 => invalid("{\"type\":\"header_patch\",\"patch\":{\"cwd\":null}}".into()),
                _ => invalid("{\"type\":\"header_patch\",\"patch\":\"title\"}".into()),
            }
        }
        PatchItem::EntryPatch {
            target_k,
            text,
            variant,
        } => {
            let target = if target_k % 7 == 6 {
                "ghost".to_owned()
            } else {
                pool_id(*target_k)
            };
            let message = obj(vec![
                ("role", jstr("user")),
                (
                    "content",
                    M::Arr(vec![obj(vec![
                        ("type", jstr("text")),
                        ("text", M::Str(text.clone())),
                    ])]),
                ),
                ("timestamp", int(2)),
            ]);
            let m = canon(&message);
            let t = canon(&jstr(&target));
            let valid = |text: String, message: M| {
                (text, PatchLine::EntryPatch(Some((target.clone(), message))))
            };
            let invalid = |text: String| (text, PatchLine::EntryPatch(None));
            match variant % 16 {
                0..=4 => valid(
                    format!("{{\"type\":\"entry_patch\",\"entryId\":{t},\"patch\":{{\"message\":{m}}}}}"),
                    message,
                ),
                5 => valid(
                    format!("{{\"patch\":{{\"message\":{m}}},\"entryId\":{t},\"type\":\"entry_patch\"}}"),
                    message,
                ),
                6 => invalid(format!("{{\"type\":\"entry_patch\",\"entryId\":{t},\"patch\":{{}}}}")),
                7 => invalid(format!(
                    "{{\"type\":\"entry_patch\",\"entryId\":{t},\"patch\":{{\"message\":{m}}},\"x\":1}}"
                )),
                8 => invalid(format!(
                    "{{\"type\":\"entry_patch\",\"entryId\":{t},\"patch\":{{\"message\":{m},\"x\":1}}}}"
                )),
                9 => invalid(format!("{{\"type\":\"entry_patch\",\"entryId\":5,\"patch\":{{\"message\":{m}}}}}")),
                10 => invalid(format!("{{\"type\":\"entry_patch\",\"entryId\":{t},\"patch\":{{\"message\":[{m}]}}}}")),
                11 => invalid(format!("{{\"type\":\"entry_patch\",\"entryId\":{t},\"patch\":{{\"message\":\"x\"}}}}")),
                12 => invalid(format!("{{\"type\":\"entry_patch\",\"entryId\":{t},\"patch\":{{\"message\":null}}}}")),
                13 => invalid(format!("{{\"type\":\"entry_patch\",\"entryId\":{t},\"patch\":[{m}]}}")),
                14 => invalid(format!("{{\"type\":\"entry_patch\",\"patch\":{{\"message\":{m}}}}}")),
                _ => valid(
                    format!("{{\"type\":\"entry_patch\",\"entryId\":{t},\"patch\":{{\"message\":{{}}}}}}"),
                    obj(vec![]),
                ),
            }
        }
    }
}

fn patch_header(version: Option<i64>, title: bool) -> M {
    let mut header = obj(vec![("type", jstr("session"))]);
    if let Some(v) = version {
        header.set("version", int(v));
    }
    header.set("id", jstr("s"));
    if title {
        header.set("title", jstr("original"));
        header.set("titleSource", jstr("user"));
    }
    header.set("timestamp", jstr("2026-01-01T00:00:00.000Z"));
    header.set("cwd", jstr("/original"));
    header
}

/// Patch replay over the model lines: the kept records after patches.
fn model_replay(lines: Vec<PatchLine>) -> Vec<M> {
    let mut out: Vec<M> = Vec::new();
    let mut header: Option<usize> = None;
    let mut by_id: HashMap<Vec<u16>, usize> = HashMap::new();
    let patches_apply = |out: &Vec<M>, header: Option<usize>| {
        header.is_some_and(|h| match out[h].get("version") {
            Some(M::Num(v)) => v.parse::<f64>().is_ok_and(|v| v >= 4.0),
            _ => false,
        })
    };
    for line in lines {
        match line {
            PatchLine::Skipped => {}
            PatchLine::HeaderPatch(effect) => {
                if let (true, Some(fields)) = (patches_apply(&out, header), effect) {
                    let h = header.expect("a header");
                    for (k, v) in fields {
                        out[h].set(k, v);
                    }
                }
            }
            PatchLine::EntryPatch(effect) => {
                if let (true, Some((target, message))) = (patches_apply(&out, header), effect) {
                    let target: Vec<u16> = target.encode_utf16().collect();
                    if let Some(&at) = by_id.get(&target) {
                        if out[at].get("type") == Some(&jstr("message")) {
                            out[at].set("message", message);
                        }
                    }
                }
            }
            PatchLine::Record(record) => {
                if record.get("type") == Some(&jstr("session")) {
                    header.get_or_insert(out.len());
                } else if let Some(M::Str(id)) = record.get("id") {
                    by_id.insert(id.clone(), out.len());
                }
                out.push(record);
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn patch_replay_matches_the_model(
        version in prop::option::of(1i64..=5),
        titled in any::<bool>(),
        header_at in any::<Index>(),
        items in prop::collection::vec(patch_item(), 0..24),
    ) {
        let header = patch_header(version, titled);
        let at = if header_at.index(4) == 0 { 0 } else { header_at.index(items.len() + 1) };
        let mut text = String::new();
        let mut lines = Vec::new();
        // Every kept record as written, and the version of the first header in the file.
        let mut as_written = Vec::new();
        let mut first_version: Option<Option<i64>> = None;
        let mut push = |line: String, model: PatchLine, text: &mut String, lines: &mut Vec<PatchLine>| {
            if let PatchLine::Record(r) = &model {
                as_written.push(canon(r));
                if is_session(r) && first_version.is_none() {
                    first_version = Some(match r.get("version") {
                        Some(M::Num(v)) => v.parse().ok(),
                        _ => None,
                    });
                }
            }
            text.push_str(&line);
            text.push('\n');
            lines.push(model);
        };
        for (i, item) in items.iter().enumerate() {
            if i == at {
                push(canon(&header), PatchLine::Record(header.clone()), &mut text, &mut lines);
            }
            let (line, model) = build_patch_line(item);
            push(line, model, &mut text, &mut lines);
        }
        if at >= items.len() {
            push(canon(&header), PatchLine::Record(header.clone()), &mut text, &mut lines);
        }
        let expected: Vec<String> = model_replay(lines).iter().map(canon).collect();
        let replayed = parse_session_entries(&text).map_err(fail)?;
        prop_assert_eq!(&lines_of(&replayed.records), &expected, "file:\n{}", text);

        // Below version 4 no patch ever applies: every kept record is as written.
        if first_version.is_some_and(|v| v.unwrap_or(1) < 4) {
            prop_assert_eq!(lines_of(&replayed.records), as_written);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 5. Migration.

#[derive(Clone, Debug)]
struct MigChoice {
    kind: u8,
    k: usize,
    index_kind: u8,
    preset_keys: u8,
    parent_k: usize,
}

fn mig_choice() -> impl Strategy<Value = MigChoice> {
    (
        any::<u8>(),
        any::<usize>(),
        any::<u8>(),
        any::<u8>(),
        any::<usize>(),
    )
        .prop_map(|(kind, k, index_kind, preset_keys, parent_k)| MigChoice {
            kind,
            k,
            index_kind,
            preset_keys,
            parent_k,
        })
}

/// What a generated v1 compaction carries as `firstKeptEntryIndex`.
#[derive(Clone, Debug, PartialEq)]
enum KeptIndex {
    None,
    /// A numeric index (an integer, or the fraction text given).
    Number(i64),
    Fraction,
    Text,
}

struct MigFile {
    version: i64,
    records: Vec<M>,
    /// Per record: the v1 compaction index it carries.
    kept_index: Vec<KeptIndex>,
}

fn build_mig_file(
    version: i64,
    explicit_v1: bool,
    second_header: Option<usize>,
    choices: &[MigChoice],
) -> MigFile {
    let mut header = obj(vec![("type", jstr("session"))]);
    if version > 1 || explicit_v1 {
        header.set("version", int(version));
    }
    header.set("id", jstr("s"));
    header.set("timestamp", jstr("2026-01-01T00:00:00.000Z"));
    header.set("cwd", jstr("/w"));
    let mut file = MigFile {
        version,
        records: vec![header],
        kept_index: vec![KeptIndex::None],
    };
    let total = choices.len() + 1 + usize::from(second_header.is_some());
    for (i, c) in choices.iter().enumerate() {
        if second_header == Some(i) {
            let mut second = obj(vec![("type", jstr("session"))]);
            if version > 1 {
                second.set("version", int(version));
            }
            second.set("id", jstr("second"));
            second.set("cwd", jstr("/second"));
            file.records.push(second);
            file.kept_index.push(KeptIndex::None);
        }
        let mut record = obj(vec![]);
        let mut kept = KeptIndex::None;
        if version == 1 && c.preset_keys % 8 == 0 {
            // A legacy row that already has the keys: they keep their positions.
            record.set("parentId", jstr("old-parent"));
            record.set("id", jstr("old"));
        }
        let ty = match c.kind % 6 {
            0 | 1 => "message",
            2 => "compaction",
            3 => "model_change",
            4 => "thinking_level_change",
            _ => "custom",
        };
        record.set("type", jstr(ty));
        if version > 1 {
            record.set("id", jstr(&format!("e{i}")));
            let parent = match c.parent_k % 4 {
                0 => M::Null,
                _ if i == 0 => M::Null,
                1 => jstr("dangling"),
                _ => jstr(&format!("e{}", c.parent_k % i)),
            };
            record.set("parentId", parent);
        }
        record.set("timestamp", jstr("2026-01-01T00:00:01.000Z"));
        match ty {
            "message" => {
                let role = ["user", "assistant", "hookMessage"][c.k % 3];
                record.set(
                    "message",
                    obj(vec![
                        ("role", jstr(role)),
                        ("content", jstr("x")),
                        ("timestamp", int(1)),
                    ]),
                );
            }
            "compaction" => {
                record.set("summary", jstr("sum"));
                if version == 1 {
                    kept = match c.index_kind % 8 {
                        0 => KeptIndex::None,
                        1 => KeptIndex::Fraction,
                        2 => KeptIndex::Text,
                        3 => KeptIndex::Number(-1),
                        _ => KeptIndex::Number((c.k % (total + 2)) as i64),
                    };
                    match &kept {
                        KeptIndex::None => {}
                        KeptIndex::Number(n) => record.set("firstKeptEntryIndex", int(*n)),
                        KeptIndex::Fraction => {
                            record.set("firstKeptEntryIndex", M::Num("1.5".into()))
                        }
                        KeptIndex::Text => record.set("firstKeptEntryIndex", jstr("1")),
                    }
                } else {
                    record.set("firstKeptEntryId", jstr(&format!("e{}", c.k % (i + 1))));
                }
                record.set("tokensBefore", int(100));
            }
            "model_change" => record.set("model", jstr("p/m")),
            "thinking_level_change" => record.set("thinkingLevel", jstr("high")),
            _ => record.set("customType", jstr("c")),
        }
        file.records.push(record);
        file.kept_index.push(kept);
    }
    file
}

fn is_session(record: &M) -> bool {
    record.get("type") == Some(&jstr("session"))
}

/// The migrations applied to the model records, given the ids the engine drew for a v1 file.
fn model_migrate(file: &MigFile, drawn_ids: &[Option<String>]) -> Vec<M> {
    let mut out = file.records.clone();
    let first_header = out.iter().position(is_session).expect("a header");
    if file.version < 2 {
        let mut previous: Option<String> = None;
        for r in 0..out.len() {
            if is_session(&out[r]) {
                out[r].set("version", int(2));
                continue;
            }
            let id = drawn_ids[r].clone().expect("an id was drawn");
            out[r].set("id", jstr(&id));
            out[r].set("parentId", previous.as_deref().map_or(M::Null, jstr));
            previous = Some(id);
            match &file.kept_index[r] {
                KeptIndex::Number(n) => {
                    // The record at that index of the full list, as it stands at this
                    // point of the pass: earlier entries have their new id, later ones only
                    // an id they were written with.
                    let target = usize::try_from(*n)
                        .ok()
                        .filter(|&t| t < out.len() && !is_session(&out[t]));
                    let target_id = target.and_then(|t| match out[t].get("id") {
                        Some(M::Str(id)) => Some(M::Str(id.clone())),
                        _ => None,
                    });
                    out[r].remove("firstKeptEntryIndex");
                    if let Some(id) = target_id {
                        out[r].set("firstKeptEntryId", id);
                    }
                }
                KeptIndex::Fraction => out[r].remove("firstKeptEntryIndex"),
                KeptIndex::None | KeptIndex::Text => {}
            }
        }
    }
    if file.version < 3 {
        for record in out.iter_mut() {
            if is_session(record) {
                record.set("version", int(3));
            } else if let Some(message) = record.get("message") {
                if message.get("role") == Some(&jstr("hookMessage")) {
                    let mut message = message.clone();
                    message.set("role", jstr("custom"));
                    record.set("message", message);
                }
            }
        }
    }
    out[first_header].set("version", int(5));
    out
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn migration_matches_the_model_and_is_idempotent(
        version in 1i64..=3,
        explicit_v1 in any::<bool>(),
        second_header in prop::option::of(0usize..12),
        choices in prop::collection::vec(mig_choice(), 0..12),
    ) {
        let file = build_mig_file(version, explicit_v1, second_header, &choices);
        let text = jsonl(&file.records);
        let mut records = parse_session_entries(&text).map_err(fail)?.records;
        prop_assert_eq!(records.len(), file.records.len());
        prop_assert_eq!(migrate(&mut records), Migration::Migrated { from: version as f64 });

        prop_assert_eq!(records[0].as_header().map(|h| h.version()), Some(5.0));
        let drawn: Vec<Option<String>> = records
            .iter()
            .map(|r| (!r.is_header()).then(|| r.id().map(str::to_owned)).flatten())
            .collect();
        for (r, record) in records.iter().enumerate() {
            prop_assert!(record.is_header() || record.id().is_some(), "record {} has no id", r);
        }
        if version == 1 {
            let ids: Vec<&String> = drawn.iter().flatten().collect();
            for id in &ids {
                prop_assert!(
                    id.len() == 8 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
                    "id {:?}", id
                );
            }
            prop_assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len(), "ids are unique");
            // The parent chain is linear in file order.
            let mut previous: Option<&str> = None;
            for record in records.iter().filter(|r| !r.is_header()) {
                prop_assert_eq!(record.parent_id(), previous);
                previous = record.id();
            }
        }
        let expected: Vec<String> = model_migrate(&file, &drawn).iter().map(canon).collect();
        prop_assert_eq!(&lines_of(&records), &expected);

        let before = lines_of(&records);
        prop_assert_eq!(migrate(&mut records), Migration::NotNeeded);
        prop_assert_eq!(lines_of(&records), before);
    }
}

// ---------------------------------------------------------------------------------------------
// 6. Round trip, torn and malformed lines.

fn v5_session() -> impl Strategy<Value = Vec<M>> {
    let entry = (
        prop::sample::select(vec![
            "message",
            "custom_message",
            "compaction",
            "branch_summary",
            "label",
            "custom",
            "model_change",
            "session_init",
            "a_future_type",
        ]),
        any::<usize>(),
        timestamp(),
        prop::collection::vec((json_key(), json_value()), 0..3),
    );
    (
        prop::option::of(js_string()),
        prop::collection::vec(entry, 0..12),
    )
        .prop_map(|(title, entries)| {
            let mut header = header_v5();
            if let Some(t) = title {
                header.set("title", M::Str(t));
                header.set("titleSource", jstr("auto"));
            }
            let mut records = vec![header];
            for (i, (ty, parent_k, ts, extra)) in entries.into_iter().enumerate() {
                let parent = if i == 0 {
                    M::Null
                } else {
                    jstr(&format!("e{}", parent_k % i))
                };
                let mut members = vec![
                    ("type".encode_utf16().collect(), jstr(ty)),
                    ("id".encode_utf16().collect(), jstr(&format!("e{i}"))),
                    ("parentId".encode_utf16().collect(), parent),
                ];
                if let Some(t) = ts.0 {
                    members.push(("timestamp".encode_utf16().collect(), t));
                }
                members.extend(extra);
                records.push(M::Obj(distinct_keys(members)));
            }
            records
        })
}

fn written(records: &[Record]) -> Vec<u8> {
    let mut out = Vec::new();
    for record in records {
        record.write_line(&mut out);
    }
    out
}

proptest! {
    #![proptest_config(cases(128))]

    #[test]
    fn v5_files_round_trip_byte_for_byte(records in v5_session()) {
        let text = jsonl(&records);
        let replayed = parse_session_entries(&text).map_err(fail)?;
        prop_assert!(replayed.skipped.is_empty());
        prop_assert_eq!(replayed.records.len(), records.len());
        let out = written(&replayed.records);
        prop_assert_eq!(String::from_utf8_lossy(&out), text.as_str());

        // The same file read as a byte stream, with CRLF line ends, or without the final
        // newline gives the same records.
        let streamed = parse_session_reader(text.as_bytes()).map_err(fail)?;
        prop_assert_eq!(written(&streamed.records), out.clone());
        let crlf = parse_session_entries(&text.replace('\n', "\r\n")).map_err(fail)?;
        prop_assert_eq!(written(&crlf.records), out.clone());
        let unterminated = parse_session_entries(text.trim_end_matches('\n')).map_err(fail)?;
        prop_assert_eq!(written(&unterminated.records), out);
    }

    #[test]
    fn a_torn_last_line_drops_exactly_that_record(records in v5_session(), cut in any::<Index>()) {
        let text = jsonl(&records);
        let full = parse_session_entries(&text).map_err(fail)?;
        let body = text.trim_end_matches('\n');
        let last_start = body.rfind('\n').map_or(0, |i| i + 1);
        let last_len = body.len() - last_start;
        let cut = cut.index(last_len);
        let torn = &text.as_bytes()[..last_start + cut];
        let replayed = parse_session_reader(torn).map_err(fail)?;
        let expected = lines_of(&full.records[..full.records.len() - 1]);
        prop_assert_eq!(lines_of(&replayed.records), expected);
        prop_assert_eq!(replayed.skipped.len(), usize::from(cut > 0));
    }

    #[test]
    fn opened_for_writing_a_torn_last_line_is_cut_exactly_when_the_rest_is_strict(
        records in v5_session(),
        cut in any::<Index>(),
    ) {
        use gjcfs::engine::manager::{SessionManager, StorageConfig, WriteTarget};
        let text = jsonl(&records);
        let body = text.trim_end_matches('\n');
        let last_start = body.rfind('\n').map_or(0, |i| i + 1);
        prop_assume!(last_start > 0);
        let kept = &text[..last_start];
        // A proper, non-empty prefix of the last line: never a record.
        let cut = 1 + cut.index(body.len() - last_start - 1);
        let torn = &text.as_bytes()[..last_start + cut];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, torn).unwrap();
        let config = StorageConfig::files(dir.path().join("blobs"));
        let opened = SessionManager::open_for_writing(&path, &WriteTarget::default(), config);
        let now = std::fs::read(&path).unwrap();
        if gjcfs::engine::inspect::parse_strict(kept.as_bytes()).is_ok() {
            let m = opened.map_err(fail)?;
            let reported = m.cut_torn_tail().map(|c| (c.offset, c.len));
            prop_assert_eq!(reported, Some((kept.len() as u64, cut as u64)));
            prop_assert_eq!(now, kept.as_bytes());
        } else {
            prop_assert_eq!(opened.ok().and_then(|m| m.cut_torn_tail()), None);
            prop_assert_eq!(now, torn);
        }
    }

    #[test]
    fn a_malformed_middle_line_keeps_every_other_record(
        records in v5_session(),
        at in any::<Index>(),
        garbage_kind in any::<Index>(),
        cut in any::<Index>(),
    ) {
        let lines: Vec<String> = records.iter().map(canon).collect();
        let at = 1 + at.index(lines.len());
        let fixed = ["not json", "123", "[1,2]", "null", "\"str\"", "{\"a\":1} trailing", "{,}", "}"];
        let garbage = match garbage_kind.index(fixed.len() + 1) {
            k if k < fixed.len() => fixed[k].to_owned(),
            _ => {
                // A proper, non-empty prefix of one of the lines.
                let line = &lines[cut.index(lines.len())];
                let ends: Vec<usize> = line.char_indices().map(|(i, _)| i).filter(|&i| i > 0).collect();
                match ends.len() {
                    0 => "{".to_owned(),
                    n => line[..ends[cut.index(n)]].to_owned(),
                }
            }
        };
        let mut damaged = lines.clone();
        damaged.insert(at, garbage);
        let text = damaged.join("\n") + "\n";
        let replayed = parse_session_entries(&text).map_err(fail)?;
        prop_assert_eq!(lines_of(&replayed.records), lines);
        prop_assert_eq!(replayed.skipped.len(), 1);
        prop_assert_eq!(replayed.skipped[0].line, at + 1);
    }
}

// ---------------------------------------------------------------------------------------------
// 7. Reading in parallel.

/// Damage done to one line of a generated file.
#[derive(Clone, Debug)]
enum Damage {
    /// The line ends with `\r\n`.
    Crlf,
    /// A blank line (empty, spaces and tabs, or a lone `\r`) goes before it.
    BlankBefore(u8),
    /// A byte that is never valid UTF-8 alone goes in at this position.
    InvalidByte(Index, u8),
    /// The line is cut short at this position (a torn write).
    Tear(Index),
}

fn damage() -> impl Strategy<Value = (Index, Damage)> {
    let kind = prop_oneof![
        Just(Damage::Crlf),
        any::<u8>().prop_map(Damage::BlankBefore),
        (any::<Index>(), any::<u8>()).prop_map(|(at, b)| Damage::InvalidByte(at, b)),
        any::<Index>().prop_map(Damage::Tear),
    ];
    (any::<Index>(), kind)
}

/// A session file of patch-replay lines (a header of any version, 6 included), damaged.
fn damaged_file(
    version: Option<i64>,
    items: &[PatchItem],
    damage: &[(Index, Damage)],
    bom: bool,
    final_newline: bool,
) -> Vec<u8> {
    let mut lines: Vec<Vec<u8>> = vec![canon(&patch_header(version, true)).into_bytes()];
    lines.extend(
        items
            .iter()
            .map(|item| build_patch_line(item).0.into_bytes()),
    );
    for (at, damage) in damage {
        let i = at.index(lines.len());
        match damage {
            Damage::Crlf => lines[i].push(b'\r'),
            Damage::BlankBefore(k) => {
                let blank = [&b""[..], b"  \t ", b"\r"][*k as usize % 3];
                lines.insert(i, blank.to_vec());
            }
            Damage::InvalidByte(pos, b) => {
                let pos = pos.index(lines[i].len() + 1);
                lines[i].insert(pos, 0x80 | (b & 0x7F) | if b % 2 == 0 { 0x40 } else { 0 });
            }
            Damage::Tear(pos) => {
                let len = lines[i].len();
                lines[i].truncate(pos.index(len + 1));
            }
        }
    }
    let mut bytes = if bom {
        "\u{FEFF}".as_bytes().to_vec()
    } else {
        Vec::new()
    };
    bytes.extend(lines.join(&b'\n'));
    if final_newline {
        bytes.push(b'\n');
    }
    bytes
}

proptest! {
    #![proptest_config(cases(512))]

    /// Cut into any number of chunks, read on as many threads, a file replays to exactly
    /// what one pass gives: the same records, the same skipped lines with their numbers, the
    /// same error; and the reader reports the same bytes read.
    #[test]
    fn parallel_reading_replays_exactly_as_one_pass(
        version in prop::option::of(1i64..=6),
        items in prop::collection::vec(patch_item(), 0..24),
        damage in prop::collection::vec(damage(), 0..8),
        bom in any::<bool>(),
        final_newline in any::<bool>(),
        chunks in 2usize..40,
    ) {
        let bytes = damaged_file(version, &items, &damage, bom, final_newline);
        let one_pass = parse_session_reader(&bytes[..]);
        let newlines = bytes.iter().filter(|&&b| b == b'\n').count();
        let invalid = std::str::from_utf8(&bytes).err().map(|e| e.valid_up_to() as u64);
        let tail = &bytes[bytes.len().saturating_sub(TAIL)..];
        for k in [1, 2, 3, chunks] {
            let lines = read_lines_in(&bytes[..], 0, bytes.len() as u64, 1, k);
            prop_assert_eq!(lines.newlines, newlines);
            prop_assert_eq!(lines.count, newlines + usize::from(!bytes.ends_with(b"\n") && !bytes.is_empty()));
            prop_assert_eq!(lines.end, bytes.len() as u64);
            prop_assert_eq!(lines.invalid_utf8, invalid);
            prop_assert_eq!(&lines.tail[..], tail);
            match (replay_lines(lines), &one_pass) {
                (Ok(parallel), Ok(one)) => {
                    prop_assert_eq!(&parallel.records, &one.records, "{} chunks", k);
                    prop_assert_eq!(&parallel.skipped, &one.skipped, "{} chunks", k);
                    // The summaries taken on the threads index exactly as the records do.
                    let summaries = parallel.summaries.expect("summaries");
                    let records = parallel.records;
                    prop_assert_eq!(
                        Session::from_summarized(records.clone(), &summaries),
                        Session::from_records(records)
                    );
                }
                (Err(parallel), Err(one)) => prop_assert_eq!(parallel.to_string(), one.to_string()),
                (parallel, one) => prop_assert!(false, "{} chunks: {:?} vs {:?}", k, parallel.map(|r| r.records.len()), one.as_ref().map(|r| r.records.len())),
            }
        }
    }
}
