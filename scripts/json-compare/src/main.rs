//! Checks every line of a JSONL file with each parser, on one thread, and prints the rate
//! (bytes of the file per second) and how many lines each accepted. Usage:
//!   json-compare FILE [ROUNDS]
//! Each parser only checks a line, builds no value where it can: `gjcfs validate`
//! (`gjcfs_json::validate`), `gjcfs object_spans` (validation and the places of the
//! members of the top two levels, what a session load does), serde_json and sonic-rs into
//! `IgnoredAny`, simd-json's tape (it parses in place, so each line is first copied).

use std::time::Instant;

use serde::de::IgnoredAny;

type Check = fn(&[u8], &mut Vec<u8>) -> bool;

fn as_str(line: &[u8]) -> &str {
    std::str::from_utf8(line).unwrap_or("")
}

const PARSERS: [(&str, Check); 5] = [
    ("gjcfs validate", |line, _| {
        gjcfs_json::validate(as_str(line)).is_ok()
    }),
    ("gjcfs object_spans", |line, _| {
        gjcfs_json::object_spans(as_str(line)).is_ok()
    }),
    ("serde_json IgnoredAny", |line, _| {
        serde_json::from_slice::<IgnoredAny>(line).is_ok()
    }),
    ("sonic-rs IgnoredAny", |line, _| {
        sonic_rs::from_slice::<IgnoredAny>(line).is_ok()
    }),
    ("simd-json tape", |line, scratch| {
        scratch.clear();
        scratch.extend_from_slice(line);
        simd_json::to_tape(scratch).is_ok()
    }),
];

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: json-compare FILE [ROUNDS]");
        std::process::exit(2);
    };
    let rounds: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(3);
    let data = std::fs::read(&path).unwrap_or_else(|e| {
        eprintln!("json-compare: {path}: {e}");
        std::process::exit(1);
    });
    let lines: Vec<&[u8]> = data
        .split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .collect();
    println!("{path}: {} bytes, {} lines", data.len(), lines.len());
    let mut scratch = Vec::new();
    for round in 1..=rounds {
        for (name, check) in PARSERS {
            let started = Instant::now();
            let accepted = lines
                .iter()
                .filter(|line| check(line, &mut scratch))
                .count();
            let rate = data.len() as f64 / started.elapsed().as_secs_f64() / 1e9;
            println!("round {round}  {name:<22} {rate:5.2} GB/s  {accepted} lines accepted");
        }
    }
}
