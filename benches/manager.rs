//! Write-side figures: appends to a persisted session (with and without an fsync per entry)
//! and a full rewrite of a large session beside a plain file copy of it.
//!
//! `tail_check`: the cost of checking the file's last byte before every append (an `fstat`
//! and a one-byte `pread` on the writer's descriptor), on a 100 MB session from the corpus
//! generator (`gjcfs generate OUT --size 100M`). Side by side in one run: the same line
//! appended through one open writer with a plain write (what an append did before the
//! check), and with the check first (what it does now); then the manager's whole append
//! (`append_message`) to that session.

use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use gjcfs::engine::json::{self, Value};
use gjcfs::engine::manager::{SessionManager, StorageConfig};

fn persisted_session(dir: &Path) -> SessionManager {
    let m = SessionManager::create("/bench", dir, StorageConfig::files(dir.join("blobs")));
    m.append_message(json::parse(r#"{"role":"user","content":"q","timestamp":1}"#).unwrap())
        .unwrap();
    m.append_message(
        json::parse(r#"{"role":"assistant","content":[{"type":"text","text":"a"}],"provider":"p","model":"m","timestamp":2}"#)
            .unwrap(),
    )
    .unwrap();
    m
}

fn small_entry(i: u64) -> Value {
    json::parse(&format!(
        r#"{{"role":"user","content":"message number {i}","timestamp":{i}}}"#
    ))
    .unwrap()
}

fn appends(c: &mut Criterion) {
    let mut group = c.benchmark_group("append");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    const N: u64 = 100_000;
    group.throughput(Throughput::Elements(N));
    group.bench_function("100k small entries, no fsync", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let dir = tempfile::tempdir().unwrap();
                let m = persisted_session(dir.path());
                let entries: Vec<Value> = (0..N).map(small_entry).collect();
                let start = Instant::now();
                for e in entries {
                    m.append_message(e).unwrap();
                }
                total += start.elapsed();
                m.close().unwrap();
            }
            total
        })
    });
    const M: u64 = 500;
    group.throughput(Throughput::Elements(M));
    group.bench_function("500 small entries, flush (fsync) after each", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let dir = tempfile::tempdir().unwrap();
                let m = persisted_session(dir.path());
                let start = Instant::now();
                for i in 0..M {
                    m.append_message(small_entry(i)).unwrap();
                    m.flush().unwrap();
                }
                total += start.elapsed();
            }
            total
        })
    });
    group.finish();
}

/// A session of about `bytes` bytes made of messages with long tool outputs.
fn large_session(dir: &Path, bytes: usize) -> SessionManager {
    let m = persisted_session(dir);
    let output = "log line with some text in it\n".repeat(300);
    let mut written = 0;
    let mut i = 0u64;
    while written < bytes {
        let msg = json::parse(&format!(
            r#"{{"role":"toolResult","toolCallId":"call{i}","toolName":"bash","content":[{{"type":"text","text":{}}}],"isError":false,"timestamp":{i}}}"#,
            json::to_compact(&Value::string(output.as_str()))
        ))
        .unwrap();
        m.append_message(msg).unwrap();
        written += output.len() + 200;
        i += 1;
    }
    m.flush().unwrap();
    m
}

fn rewrite(c: &mut Criterion) {
    let mut group = c.benchmark_group("rewrite");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    let dir = tempfile::tempdir().unwrap();
    let m = large_session(dir.path(), 100 << 20);
    let file = m.session_file().unwrap();
    let size = std::fs::metadata(&file).unwrap().len();
    group.throughput(Throughput::Bytes(size));
    let copy = dir.path().join("copy.jsonl");
    group.bench_function("cp of the 100 MB session file (baseline)", |b| {
        b.iter(|| std::fs::copy(&file, &copy).unwrap())
    });
    group.bench_function("cp of the file, then fsync of the copy (baseline)", |b| {
        b.iter(|| {
            std::fs::copy(&file, &copy).unwrap();
            std::fs::File::open(&copy).unwrap().sync_all().unwrap();
        })
    });
    group.bench_function("full atomic rewrite of the 100 MB session", |b| {
        b.iter(|| m.rewrite_entries().unwrap())
    });
    group.finish();
}

fn tail_check(c: &mut Criterion) {
    use gjcfs::corpus::{self, Format, Limit, Options};
    use gjcfs::engine::storage::{FileStorage, OpenMode, SessionStorage};
    let mut group = c.benchmark_group("tail_check");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(10));
    let dir = tempfile::tempdir().unwrap();
    let pristine = dir.path().join("pristine.jsonl");
    let options = Options {
        seed: 1,
        limit: Limit::Bytes(100_000_000),
        format: Format::V5,
        cwd: None,
    };
    corpus::generate_file(&pristine, &options).unwrap();
    // Each measurement appends to its own copy of the 100 MB session.
    let copy = |name: &str| {
        let path = dir.path().join(name);
        std::fs::copy(&pristine, &path).unwrap();
        path
    };
    const N: u64 = 1_000;
    group.throughput(Throughput::Elements(N));
    let line = |i: u64| {
        format!(
            "{{\"type\":\"custom\",\"customType\":\"bench\",\"id\":\"{i:08x}\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:00.000Z\"}}\n"
        )
    };
    let before = copy("before.jsonl");
    group.bench_function("1k appends to a 100 MB session: write only (before)", |b| {
        let mut w = FileStorage.open_writer(&before, OpenMode::Append).unwrap();
        b.iter(|| {
            for i in 0..N {
                w.write_all(line(i).as_bytes()).unwrap();
            }
        })
    });
    let now = copy("now.jsonl");
    group.bench_function(
        "1k appends to a 100 MB session: last-byte check, then write (now)",
        |b| {
            let mut w = FileStorage.open_writer(&now, OpenMode::Append).unwrap();
            b.iter(|| {
                for i in 0..N {
                    let end = w.end().unwrap();
                    assert!(!end.torn());
                    w.write_all(line(i).as_bytes()).unwrap();
                }
            })
        },
    );
    let managed = copy("manager.jsonl");
    let m = SessionManager::open(
        &managed,
        "/bench",
        StorageConfig::files(dir.path().join("b")),
    )
    .unwrap();
    group.bench_function(
        "1k appends to a 100 MB session: SessionManager::append_message",
        |b| {
            b.iter(|| {
                for i in 0..N {
                    m.append_message(small_entry(i)).unwrap();
                }
            })
        },
    );
    group.finish();
}

criterion_group!(benches, appends, rewrite, tail_check);
criterion_main!(benches);
