//! Store-wide figures: listing 10,000 sessions in 50 scopes, and a managed append to a 10 MB
//! session beside an unmanaged append followed by the same fsyncs.

use std::fs::File;
use std::path::Path;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use gjcfs::engine::json::{self, Value};
use gjcfs::engine::manager::{SessionManager, StorageConfig};
use gjcfs::engine::storage::FileStorage;
use gjcfs::engine::store::discovery::list_all;

fn store_with_sessions(root: &Path, scopes: usize, per_scope: usize) {
    for s in 0..scopes {
        let dir = root.join(format!("v2-{s:052}"));
        std::fs::create_dir_all(&dir).unwrap();
        for i in 0..per_scope {
            let id = format!("0190{s:04x}-{i:04x}-7000-8000-000000000000");
            let text = format!(
                concat!(
                    r#"{{"type":"session","version":5,"id":"{id}","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/work/p{s}"}}"#,
                    "\n",
                    r#"{{"type":"message","id":"a{i:07x}","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":"question {i} about the parser","timestamp":1}}}}"#,
                    "\n",
                    r#"{{"type":"message","id":"b{i:07x}","parentId":"a{i:07x}","timestamp":"2026-01-01T00:00:02.000Z","message":{{"role":"assistant","content":[{{"type":"text","text":"an answer"}}],"provider":"p","model":"m","timestamp":2}}}}"#,
                    "\n",
                ),
                id = id,
                i = i,
                s = s
            );
            std::fs::write(
                dir.join(format!("2026-01-01T00-00-00-000Z_{id}.jsonl")),
                text,
            )
            .unwrap();
        }
    }
}

fn listing(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("sessions");
    store_with_sessions(&root, 50, 200);
    let mut group = c.benchmark_group("store");
    group.sample_size(10);
    group.bench_function("list_all over 10,000 sessions in 50 scopes (warm)", |b| {
        b.iter(|| {
            let all = list_all(&FileStorage, &root).unwrap();
            assert_eq!(all.len(), 10_000);
        })
    });
    group.finish();
}

fn ten_mb_session(m: &SessionManager) {
    let chunk = "tool output line\n".repeat(600);
    m.append_message(json::parse(r#"{"role":"user","content":"q","timestamp":1}"#).unwrap())
        .unwrap();
    m.append_message(
        json::parse(
            r#"{"role":"assistant","content":[],"provider":"p","model":"m","timestamp":2}"#,
        )
        .unwrap(),
    )
    .unwrap();
    for i in 0..1000 {
        let msg = format!(
            r#"{{"role":"toolResult","toolCallId":"c{i}","toolName":"bash","content":[{{"type":"text","text":{}}}],"isError":false,"timestamp":{i}}}"#,
            json::to_compact(&Value::string(chunk.as_str()))
        );
        m.append_message(json::parse(&msg).unwrap()).unwrap();
    }
    m.flush().unwrap();
}

fn small() -> Value {
    json::parse(r#"{"role":"user","content":"one more line","timestamp":3}"#).unwrap()
}

fn appends(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let config = StorageConfig::files(tmp.path().join("blobs"));
    let managed =
        SessionManager::create_managed(&ws, &tmp.path().join("sessions"), config.clone()).unwrap();
    ten_mb_session(&managed);
    let plain_dir = tmp.path().join("plain");
    let plain = SessionManager::create("/ws", &plain_dir, config);
    ten_mb_session(&plain);
    let plain_file = plain.session_file().unwrap();
    let mut group = c.benchmark_group("append to a 10 MB session");
    group
        .sample_size(50)
        .measurement_time(Duration::from_secs(10));
    group.bench_function(
        "managed append (identity check, fsync file and directory)",
        |b| b.iter(|| managed.append_message(small()).unwrap()),
    );
    group.bench_function(
        "unmanaged append, then fsync of the file and its directory",
        |b| {
            b.iter(|| {
                plain.append_message(small()).unwrap();
                plain.flush().unwrap();
                File::open(&plain_dir).unwrap().sync_all().unwrap();
            })
        },
    );
    group.bench_function("unmanaged append alone", |b| {
        b.iter(|| plain.append_message(small()).unwrap())
    });
    group.finish();
    assert!(plain_file.exists());
}

criterion_group!(benches, listing, appends);
criterion_main!(benches);
