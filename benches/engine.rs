//! Engine benchmarks over generated sessions (see `BENCHMARKS.md`).
//!
//! Inputs are written by the corpus generator into a temporary directory, so the benchmark
//! needs nothing but the crate. Groups:
//! - `load`: `load_session` (read, lenient parse, patch replay, migration, indexing) of a
//!   v5 and a v1 corpus, with byte throughput; dropping the result is not timed.
//!   `GJCFS_BENCH_LOAD_SIZE` (e.g. `100MB`) changes the corpus size from the default 20 MB.
//! - `session`: `build_context()` and `tree()` on a loaded 100,000-entry session.
//! - `json`: `parse_shallow` at the record depth the engine uses, a full `parse`, and
//!   `to_compact` of the parsed records, over every line of a 5 MB corpus.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use gjcfs::corpus::{self, Format, Limit, Options};
use gjcfs::engine::json::{self, Value};
use gjcfs::engine::load_session;
use gjcfs::engine::record::RECORD_PARSE_DEPTH;

const SEED: u64 = 1;

fn write_corpus(dir: &Path, name: &str, limit: Limit, format: Format) -> (PathBuf, u64) {
    let path = dir.join(name);
    let options = Options {
        seed: SEED,
        limit,
        format,
    };
    let summary = corpus::generate_file(&path, &options).expect("corpus written");
    (path, summary.bytes)
}

fn load_size() -> u64 {
    match std::env::var("GJCFS_BENCH_LOAD_SIZE") {
        Ok(text) => corpus::parse_size(&text).expect("GJCFS_BENCH_LOAD_SIZE is a size"),
        Err(_) => 20_000_000,
    }
}

fn load(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let size = load_size();
    let mut group = c.benchmark_group("load");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    for (format, label) in [(Format::V5, "v5"), (Format::V1, "v1")] {
        let name = format!("{label}.jsonl");
        let (path, bytes) = write_corpus(dir.path(), &name, Limit::Bytes(size), format);
        group.throughput(Throughput::Bytes(bytes));
        // The loaded session is dropped outside the timed section: only loading is timed.
        group.bench_function(
            format!("load_session/{label}/{}MB", bytes / 1_000_000),
            |b| {
                b.iter_batched(
                    || (),
                    |()| {
                        let loaded = load_session(black_box(&path)).expect("loads");
                        assert!(loaded.skipped.is_empty());
                        loaded
                    },
                    BatchSize::PerIteration,
                )
            },
        );
    }
    group.finish();
}

fn session(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let (path, _) = write_corpus(
        dir.path(),
        "100k.jsonl",
        Limit::Entries(100_000),
        Format::V5,
    );
    let loaded = load_session(&path).expect("loads");
    drop(dir);
    let session = loaded.session;
    let mut group = c.benchmark_group("session");
    group.sample_size(50);
    group.bench_function("build_context/100k_entries", |b| {
        b.iter(|| black_box(&session).build_context())
    });
    group.bench_function("tree/100k_entries", |b| {
        b.iter(|| black_box(&session).tree())
    });
    group.finish();
}

fn json_lines(c: &mut Criterion) {
    let bytes = corpus::generate_bytes(&Options {
        seed: SEED,
        limit: Limit::Bytes(5_000_000),
        format: Format::V5,
    });
    let text = String::from_utf8(bytes).expect("UTF-8");
    let lines: Vec<&str> = text.lines().collect();
    let total = text.len() as u64;
    let shallow: Vec<Value> = lines
        .iter()
        .map(|l| json::parse_shallow(l, RECORD_PARSE_DEPTH).expect("valid"))
        .collect();
    let full: Vec<Value> = lines
        .iter()
        .map(|l| json::parse(l).expect("valid"))
        .collect();

    let mut group = c.benchmark_group("json");
    group.sample_size(20);
    group.throughput(Throughput::Bytes(total));
    group.bench_function(format!("parse_shallow_depth2/{}_lines", lines.len()), |b| {
        b.iter(|| {
            for line in &lines {
                black_box(json::parse_shallow(line, RECORD_PARSE_DEPTH).expect("valid"));
            }
        })
    });
    group.bench_function(format!("parse_full/{}_lines", lines.len()), |b| {
        b.iter(|| {
            for line in &lines {
                black_box(json::parse(line).expect("valid"));
            }
        })
    });
    group.bench_function(format!("to_compact_depth2/{}_lines", lines.len()), |b| {
        b.iter(|| {
            for value in &shallow {
                black_box(json::to_compact(value));
            }
        })
    });
    group.bench_function(format!("to_compact_full/{}_lines", lines.len()), |b| {
        b.iter(|| {
            for value in &full {
                black_box(json::to_compact(value));
            }
        })
    });
    group.finish();
}

criterion_group!(benches, load, session, json_lines);
criterion_main!(benches);
