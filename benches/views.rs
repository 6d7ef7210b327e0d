//! Views benchmarks (see `docs/benchmarks-archive.md` ## Views). Inputs are written by the
//! corpus generator into a temporary directory. Groups:
//! - `views`: rendering `context.md`, `tree.txt` and `usage.json` of a loaded
//!   100,000-entry session (the load is not timed). The generated session compacts, so its
//!   context at the leaf is short; `context.md` is also rendered for the same session with
//!   its compactions turned into `custom` entries, whose context is the whole path to the
//!   leaf (the worst case).
//! - `pages`: rendering `context.html` of the real 914-message transcript
//!   (`tests/fixtures/real/large-session.jsonl`), warm: the highlighter's syntaxes are
//!   loaded and their patterns compiled by the first render, which is not timed.
//! - `store_usage`: `gjcfs usage` over a 10,000-session store (one generated 40-entry session
//!   copied under 10,000 session ids, every fifth a fork of the one before), cold (every
//!   file read and parsed on two threads, then combined) and the combine step alone over
//!   contributions kept in memory (what a cache of per-session contributions pays).

use std::hint::black_box;
use std::path::{Path, PathBuf};

use criterion::{criterion_group, criterion_main, Criterion};
use gjcfs::corpus::{self, Format, Limit, Options};
use gjcfs::engine::format::record::{Record, RecordType};
use gjcfs::engine::json::Value;
use gjcfs::engine::load_session;
use gjcfs::engine::storage::FileStorage;
use gjcfs::engine::store::discovery::transcript_paths;
use gjcfs::engine::store::usage::{scan_sessions, StoreUsage};
use gjcfs::engine::views::html::{self, Images, PageOptions};
use gjcfs::engine::views::{markdown, tree, usage};
use gjcfs::engine::Session;

const SEED: u64 = 1;
const STORE_SESSIONS: usize = 10_000;

fn generated(dir: &Path, name: &str, entries: u64) -> PathBuf {
    let path = dir.join(name);
    corpus::generate_file(
        &path,
        &Options {
            seed: SEED,
            limit: Limit::Entries(entries),
            format: Format::V5,
            cwd: None,
        },
    )
    .expect("corpus written");
    path
}

/// The session with every compaction turned into a `custom` entry (same id and parent).
fn without_compactions(session: &Session) -> Session {
    let records = session
        .records()
        .iter()
        .map(|r| {
            if r.record_type() != RecordType::Compaction {
                return r.clone();
            }
            let mut fields = r.fields().clone();
            fields.insert("type", Value::string("custom"));
            Record::new(fields)
        })
        .collect();
    Session::from_records(records)
}

fn views(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = generated(dir.path(), "100k.jsonl", 100_000);
    let session = load_session(&path).expect("loads").session;
    drop(dir);
    let whole = without_compactions(&session);
    let mut group = c.benchmark_group("views");
    group.sample_size(20);
    let messages = session.build_context().messages.len();
    group.bench_function(
        format!("context_md/100k_entries_{messages}_messages"),
        |b| b.iter(|| markdown::context_md(black_box(&session), "blobs/")),
    );
    let messages = whole.build_context().messages.len();
    group.bench_function(
        format!("context_md/100k_entries_no_compaction_{messages}_messages"),
        |b| b.iter(|| markdown::context_md(black_box(&whole), "blobs/")),
    );
    group.bench_function("tree_txt/100k_entries", |b| {
        b.iter(|| tree::tree_txt(black_box(&session)))
    });
    group.bench_function("usage_json/100k_entries", |b| {
        b.iter(|| usage::session_usage_json(black_box(&session)))
    });
    group.finish();
}

fn pages(c: &mut Criterion) {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real/large-session.jsonl");
    let session = load_session(&path).expect("loads").session;
    let options = PageOptions::plain(Images::Link("blobs/"));
    black_box(html::context_html(&session, &options));
    let mut group = c.benchmark_group("pages");
    group.sample_size(20);
    group.bench_function("context_html/real_914_messages", |b| {
        b.iter(|| html::context_html(black_box(&session), &options))
    });
    group.finish();
}

/// A store of `STORE_SESSIONS` copies of one generated session, each under its own session
/// id; every fifth names the one before it as its `parentSession` (a fork).
fn store(dir: &Path) -> Vec<PathBuf> {
    let source = generated(dir, "source.jsonl", 40);
    let text = std::fs::read_to_string(&source).expect("readable");
    std::fs::remove_file(&source).expect("removed");
    let (header, rest) = text.split_once('\n').expect("a header line");
    let id_at = header.find("\"id\":\"").expect("an id") + 6;
    let id_end = id_at + header[id_at..].find('"').expect("closed");
    let store = dir.join("store");
    std::fs::create_dir(&store).expect("store dir");
    let id = |n: usize| format!("00000000-0000-7000-8000-{n:012}");
    for n in 0..STORE_SESSIONS {
        let mut line = format!("{}{}{}", &header[..id_at], id(n), &header[id_end..]);
        if n % 5 == 4 {
            line.insert_str(
                line.len() - 1,
                &format!(",\"parentSession\":\"{}\"", id(n - 1)),
            );
        }
        std::fs::write(
            store.join(format!("2026-01-01T00-00-00-000Z_{}.jsonl", id(n))),
            format!("{line}\n{rest}"),
        )
        .expect("session written");
    }
    transcript_paths(&FileStorage, &store).expect("listed")
}

fn store_usage(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let paths = store(dir.path());
    let scan = scan_sessions(&paths, 2, &|_| {});
    assert_eq!(scan.contributions.len(), STORE_SESSIONS);
    let mut group = c.benchmark_group("store_usage");
    group.sample_size(10);
    group.bench_function("scan_and_combine/10k_sessions_2_threads", |b| {
        b.iter(|| {
            let scan = scan_sessions(black_box(&paths), 2, &|_| {});
            StoreUsage::combine(scan.contributions.iter().map(|s| &s.contribution))
        })
    });
    group.bench_function("combine/10k_sessions", |b| {
        b.iter(|| {
            StoreUsage::combine(
                black_box(&scan)
                    .contributions
                    .iter()
                    .map(|s| &s.contribution),
            )
        })
    });
    group.finish();
}

criterion_group!(benches, views, pages, store_usage);
criterion_main!(benches);
