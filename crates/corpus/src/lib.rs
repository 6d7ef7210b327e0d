//! Deterministic generator of realistic session files, for tests, benchmarks and demos.
//!
//! A corpus is one session file written the way the agent writes it:
//! - compact JSON lines built with the engine's own JSON model, so every line is exactly what
//!   the engine's writer produces, keys in the order each writer emits them;
//! - ISO entry timestamps (`YYYY-MM-DDTHH:MM:SS.mmmZ`), integer-millisecond message
//!   timestamps, 8-hex entry ids and a UUIDv7-shaped session id.
//!
//! The v5 format ([`Format::V5`]) holds a header, a short start-up block (model, thinking
//! level, configured model chain, `session_init`, tool selections) and then a conversation:
//! turns of a user message, assistant messages (text, thinking with `thinkingSignature`,
//! tool calls; usage with cost) and tool results with outputs from a few bytes to tens of
//! kilobytes, and between turns every other entry type — model, thinking-level and
//! service-tier changes, compactions (whose `firstKeptEntryId` names an earlier entry on
//! the same branch), branch summaries, custom entries and messages, labels (naming existing
//! entries), TTSR injections, mode changes, tool selections and model chains. Now and then
//! the conversation branches: the next entry continues from an earlier entry of the current
//! branch rather than from the previous line. A few user messages carry a small image
//! (base64 under 1,024 characters, so never externalised to the blob store), a few tool
//! outputs carry terminal colour escapes, and a rare one ends in a lone UTF-16 surrogate,
//! as truncated output can.
//!
//! The legacy format ([`Format::V1`]) writes what a version-1 agent wrote: no `version` in
//! the header, no `id`/`parentId` on entries, a linear conversation, legacy `model_change`
//! rows (`provider` + `modelId`) and compactions with `firstKeptEntryIndex`.
//!
//! Patch records are never written, so loading a v5 corpus and writing its records back
//! reproduces the file byte for byte.
//!
//! Output is a pure function of [`Options`]: the seed drives a [`SmallRng`], and nothing
//! else (no clock, no hash-map order) reaches the file.
//!
//! Size limits ([`Limit::Bytes`]): while the file is being written, large payloads are
//! capped at half of the bytes still missing, so the file ends within about one small entry
//! (at most a couple of kilobytes) past the target.
// A library never prints: it returns errors and emits events; the programs decide.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

mod generator;
mod tables;
mod text;
mod values;

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

/// Which on-disk format to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The current format (version 5).
    V5,
    /// The legacy version-1 format, for migration benchmarks.
    V1,
}

/// When to stop writing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// Exactly this many entries after the header.
    Entries(u64),
    /// Stop once the file holds at least this many bytes.
    Bytes(u64),
}

/// What to generate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    pub seed: u64,
    pub limit: Limit,
    pub format: Format,
    /// The header's `cwd`; `None`: one the seed draws. Nothing else depends on it: the rest
    /// of the file is the same bytes whatever it is (a byte limit counts the header as it
    /// is with the drawn cwd).
    pub cwd: Option<String>,
}

/// What was written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Entries after the header.
    pub entries: u64,
    /// Bytes in the file, header included.
    pub bytes: u64,
    /// Entries per `type` (`message` entries are further split by role as `message:<role>`).
    pub by_type: BTreeMap<String, u64>,
}

/// Writes one session to `out` and returns what was written.
pub fn generate(options: &Options, out: impl Write) -> io::Result<Summary> {
    generator::generate(options, out)
}

/// Writes one session to a new file at `path` (replacing any file there).
pub fn generate_file(path: &Path, options: &Options) -> io::Result<Summary> {
    let file = File::create(path)?;
    let mut writer = BufWriter::with_capacity(1 << 20, file);
    let summary = generate(options, &mut writer)?;
    writer
        .into_inner()
        .map_err(|e| e.into_error())?
        .sync_all()?;
    Ok(summary)
}

/// The session as bytes in memory.
pub fn generate_bytes(options: &Options) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail.
    generate(options, &mut out).expect("writing to memory");
    out
}

/// A size that could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid size {0:?}: expected a number with an optional unit B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024)")]
pub struct SizeError(pub String);

/// Parses a byte size such as `100MB`, `1.5GiB`, `512KiB` or `2048`.
///
/// KB, MB and GB are powers of 1000; KiB, MiB and GiB powers of 1024; units are
/// case-insensitive and may follow a space. A single-letter unit (`k`, `M`, `G`) means the
/// decimal one.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let err = || SizeError(text.to_owned());
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "m" | "mb" => 1_000_000,
        "g" | "gb" => 1_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        _ => return Err(err()),
    };
    if number.is_empty() || number.starts_with('.') || number.ends_with('.') {
        return Err(err());
    }
    let value: f64 = number.parse().map_err(|_| err())?;
    let bytes = value * factor as f64;
    if !(1.0..=1e15).contains(&bytes) {
        return Err(err());
    }
    Ok(bytes.round() as u64)
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::V5 => "v5",
            Format::V1 => "v1",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gjcfs_engine::json;

    fn options(seed: u64, limit: Limit, format: Format) -> Options {
        Options {
            seed,
            limit,
            format,
            cwd: None,
        }
    }

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("2048"), Ok(2048));
        assert_eq!(parse_size("100MB"), Ok(100_000_000));
        assert_eq!(parse_size("100 mb"), Ok(100_000_000));
        assert_eq!(parse_size("20MiB"), Ok(20 << 20));
        assert_eq!(parse_size("1.5k"), Ok(1_500));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        for bad in ["", "MB", "12XB", "-5MB", "1..2MB", ".5MB", "0", "5.MB"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn entry_limit_is_exact_and_counted() {
        let opts = options(3, Limit::Entries(500), Format::V5);
        let bytes = generate_bytes(&opts);
        let text = std::str::from_utf8(&bytes).unwrap();
        assert_eq!(text.lines().count(), 501);
        let summary = generate(&opts, io::sink()).unwrap();
        assert_eq!(summary.entries, 500);
        assert_eq!(summary.bytes, bytes.len() as u64);
        assert_eq!(summary.by_type.values().sum::<u64>(), 500);
    }

    #[test]
    fn a_given_cwd_is_the_headers_and_changes_nothing_else() {
        // Shorter and longer than the drawn ones, and escaped in JSON.
        let cwds = [
            "/x",
            "/a very/long \"quoted\" workspace/ünïcode\tdir/with/more/names",
        ];
        for format in [Format::V5, Format::V1] {
            for limit in [Limit::Entries(200), Limit::Bytes(200_000)] {
                for seed in 0..4 {
                    let drawn = options(seed, limit, format);
                    let plain = generate_bytes(&drawn);
                    let plain = std::str::from_utf8(&plain).unwrap();
                    let (plain_header, plain_rest) = plain.split_once('\n').unwrap();
                    for cwd in cwds {
                        let given = Options {
                            cwd: Some(cwd.to_owned()),
                            ..drawn.clone()
                        };
                        let bytes = generate_bytes(&given);
                        let text = std::str::from_utf8(&bytes).unwrap();
                        let (header, rest) = text.split_once('\n').unwrap();
                        assert!(rest == plain_rest, "{format} {limit:?} {seed} {cwd}");
                        let drawn_cwd = json::parse(plain_header).unwrap();
                        let drawn_cwd = drawn_cwd.as_object().unwrap().get("cwd").unwrap();
                        let mut header = json::parse(header).unwrap();
                        let fields = header.as_object_mut().unwrap();
                        assert_eq!(fields.get_str("cwd"), Some(cwd));
                        fields.insert("cwd", drawn_cwd.clone());
                        let mut back = Vec::new();
                        json::write_compact(&header, &mut back);
                        assert_eq!(back, plain_header.as_bytes(), "the rest of the header");
                        let summary = generate(&given, io::sink()).unwrap();
                        assert_eq!(summary.bytes, bytes.len() as u64);
                        assert_eq!(summary.entries, rest.lines().count() as u64);
                    }
                }
            }
        }
    }

    #[test]
    fn v1_entries_have_no_ids() {
        let bytes = generate_bytes(&options(5, Limit::Entries(800), Format::V1));
        let text = std::str::from_utf8(&bytes).unwrap();
        let mut lines = text.lines();
        let header = json::parse(lines.next().unwrap()).unwrap();
        assert!(header.as_object().unwrap().get("version").is_none());
        let mut compactions = 0;
        for (n, line) in lines.enumerate() {
            let v = json::parse(line).unwrap();
            let o = v.as_object().unwrap();
            assert!(o.get("id").is_none() && o.get("parentId").is_none());
            if o.get_str("type") == Some("compaction") {
                compactions += 1;
                let index = o.get("firstKeptEntryIndex").unwrap().as_f64().unwrap();
                assert!(index >= 1.0 && (index as usize) <= n, "{index} at line {n}");
            }
        }
        assert!(compactions > 0);
    }
}
