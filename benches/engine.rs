//! Engine benchmarks over generated sessions (targets and figures: `docs/PERFORMANCE.md`).
//!
//! Inputs are written by the corpus generator into a temporary directory, so the benchmark
//! needs nothing but the crate. Groups:
//! - `load`: `load_session` (read, lenient parse, patch replay, migration, indexing) of a
//!   v5 and a v1 corpus, with byte throughput; dropping the result is not timed. Beside it,
//!   the same load with the lines read and parsed on one thread (`one_thread`).
//!   `GJCFS_BENCH_LOAD_SIZE` (e.g. `100MB`) changes the corpus size from the default 20 MB.
//! - `refresh`: `SessionManager::refresh_from_file` after 10 lines were appended to a
//!   100 MB session, next to reopening the session (`SessionManager::open`).
//! - `session`: `build_context()` and `tree()` on a loaded 100,000-entry session.
//! - `json`: `parse_shallow` at the record depth the engine uses, a full `parse`, and
//!   `to_compact` of the parsed records, over every line of a 5 MB corpus.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Bencher, Criterion, Throughput};
use gjcfs::corpus::{self, Format, Limit, Options};
use gjcfs::engine::format::lines::read_lines_in;
use gjcfs::engine::format::record::RECORD_PARSE_DEPTH;
use gjcfs::engine::json::{self, Value};
use gjcfs::engine::load_session;
use gjcfs::engine::manager::{Refresh, SessionManager, StorageConfig};
use gjcfs::engine::read::load::{build_session, entries_from_records};
use gjcfs::engine::read::replay::replay_lines;
use gjcfs::engine::storage::{FileStorage, SessionStorage};

const SEED: u64 = 1;

fn write_corpus(dir: &Path, name: &str, limit: Limit, format: Format) -> (PathBuf, u64) {
    let path = dir.join(name);
    let options = Options {
        seed: SEED,
        limit,
        format,
        cwd: None,
    };
    let summary = corpus::generate_file(&path, &options).expect("corpus written");
    (path, summary.bytes)
}

/// A v5 corpus in a temporary directory, kept while the directory lives.
fn temp_corpus(name: &str, limit: Limit) -> (tempfile::TempDir, PathBuf, u64) {
    let dir = tempfile::tempdir().expect("temp dir");
    let (path, bytes) = write_corpus(dir.path(), name, limit, Format::V5);
    (dir, path, bytes)
}

/// Times `f` alone: what it returns is dropped outside the timed section.
fn time_without_drop<O>(b: &mut Bencher<'_>, mut f: impl FnMut() -> O) {
    b.iter_batched(|| (), |()| f(), BatchSize::PerIteration)
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
                time_without_drop(b, || {
                    let loaded = load_session(black_box(&path)).expect("loads");
                    assert!(loaded.skipped.is_empty());
                    loaded
                })
            },
        );
        group.bench_function(format!("one_thread/{label}/{}MB", bytes / 1_000_000), |b| {
            time_without_drop(b, || load_on_one_thread(black_box(&path)))
        });
    }
    group.finish();
}

/// `load_session` with the lines read and parsed on the calling thread only.
fn load_on_one_thread(path: &Path) -> gjcfs::engine::Session {
    let file = FileStorage.open_read_at(path).expect("opens");
    let size = file.size().expect("size");
    let lines = read_lines_in(file.as_ref(), 0, size, 1, 1);
    let replayed = replay_lines(lines).expect("loads");
    assert!(replayed.skipped.is_empty());
    let loaded = entries_from_records(replayed.records, replayed.skipped);
    build_session(loaded.records, replayed.summaries).session
}

fn refresh(c: &mut Criterion) {
    let (dir, path, bytes) = temp_corpus("refresh.jsonl", Limit::Bytes(100_000_000));
    // Reopened untouched: the refreshed file grows by 10 lines an iteration.
    let pristine = dir.path().join("reopen.jsonl");
    std::fs::copy(&path, &pristine).expect("copies");
    let config = || StorageConfig::files(dir.path().join("blobs"));
    let manager = SessionManager::open(&path, "/bench", config()).expect("opens");
    let mut n = 0u64;
    let mut ten_lines = || {
        let mut text = String::new();
        for _ in 0..10 {
            n += 1;
            text.push_str(&format!(
                r#"{{"type":"message","id":"bench{n}","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"appended line {n} with a little text","timestamp":1}}}}"#
            ));
            text.push('\n');
        }
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("opens for append");
        std::io::Write::write_all(&mut file, text.as_bytes()).expect("appends");
    };
    let mut group = c.benchmark_group("refresh");
    group.sample_size(10);
    group.bench_function(
        format!("refresh_after_10_lines/{}MB", bytes / 1_000_000),
        |b| {
            b.iter_batched(
                &mut ten_lines,
                |()| {
                    let refreshed = manager.refresh_from_file().expect("refreshes");
                    assert!(matches!(refreshed, Refresh::Appended { records: 10, .. }));
                },
                BatchSize::PerIteration,
            )
        },
    );
    group.bench_function(format!("reopen/{}MB", bytes / 1_000_000), |b| {
        time_without_drop(b, || {
            SessionManager::open(black_box(&pristine), "/bench", config()).expect("opens")
        })
    });
    group.finish();
}

fn session(c: &mut Criterion) {
    let (dir, path, _) = temp_corpus("100k.jsonl", Limit::Entries(100_000));
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
        cwd: None,
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
    // The least any load must do with a line: check that it is JSON, building nothing.
    group.bench_function(format!("validate/{}_lines", lines.len()), |b| {
        b.iter(|| {
            for line in &lines {
                json::validate(black_box(line)).expect("valid");
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

criterion_group!(benches, load, refresh, session, json_lines);
criterion_main!(benches);
