//! Kills a writing `gjcfs append` process at random moments (SIGKILL) many times. Every
//! resulting file must load, and hold, for every run, a prefix of what that run appended;
//! a line a kill tore is cut off by the next run, so only the last line can be torn.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{gjcfs_bin, SessionText};
use gjcfs::engine::load_session;
use rand::{RngExt, SeedableRng};

#[test]
fn sigkill_during_appends_loses_at_most_the_line_being_written() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("session.jsonl");
    std::fs::write(
        &file,
        SessionText::new()
            .message("a", None, "user", "q")
            .message("b", Some("a"), "assistant", "a")
            .text(),
    )
    .unwrap();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(0x5eed);
    let runs = 40;
    for run in 0..runs {
        let mut child = Command::new(gjcfs_bin())
            .args(["append", file.to_str().unwrap()])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let padding = "x".repeat(rng.random_range(0..20_000));
        let writer = std::thread::spawn(move || {
            for i in 0.. {
                let line = format!("{{\"role\":\"user\",\"content\":\"r{run}-{i} {padding}\"}}\n");
                if stdin.write_all(line.as_bytes()).is_err() {
                    break;
                }
            }
        });
        // A fixed, random wait: the kill lands at a random point of the appends.
        std::thread::sleep(Duration::from_millis(rng.random_range(1..40)));
        child.kill().unwrap();
        child.wait().unwrap();
        writer.join().unwrap();

        let loaded = load_session(&file).unwrap_or_else(|e| panic!("run {run}: {e}"));
        // Each run's open cut off the line the kill before it tore: at most the last line
        // is torn, and the file passes the strict checks without it.
        let lines = std::fs::read_to_string(&file).unwrap().lines().count();
        assert!(loaded.skipped.len() <= 1, "run {run}: {:?}", loaded.skipped);
        for skipped in &loaded.skipped {
            assert_eq!(skipped.line, lines, "run {run}: a torn line not at the end");
        }
        let contents: Vec<String> = loaded
            .session
            .entries()
            .filter_map(|e| e.message()?.get_str("content").map(str::to_owned))
            .collect();
        for r in 0..=run {
            let prefix = format!("r{r}-");
            let ours: Vec<usize> = contents
                .iter()
                .filter_map(|c| c.strip_prefix(&prefix)?.split(' ').next()?.parse().ok())
                .collect();
            let expected: Vec<usize> = (0..ours.len()).collect();
            assert_eq!(
                ours, expected,
                "run {r} after kill {run}: a prefix, in order"
            );
        }
        // The chain is intact: each appended entry hangs under the one before it.
        let records = loaded.session.records();
        for i in 2..records.len() {
            assert_eq!(
                records[i].parent_id(),
                records[i - 1].id(),
                "run {run}, record {i}"
            );
        }
    }
}

/// The temp files of interrupted full rewrites in `dir`.
fn temp_files(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".tmp"))
        .collect()
}

#[test]
fn temp_files_of_killed_full_rewrites_are_removed_by_the_next_write() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("session.jsonl");
    // A v1 file: the first append migrates it, which is a full rewrite through a temp file.
    let out = Command::new(gjcfs_bin())
        .args([
            "generate",
            file.to_str().unwrap(),
            "--size",
            "30M",
            "--version",
            "1",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let original = std::fs::read(&file).unwrap();
    let append = || {
        let mut child = Command::new(gjcfs_bin())
            .args(["append", file.to_str().unwrap()])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(b"{\"role\":\"user\",\"content\":\"after the kills\"}\n")
            .unwrap();
        drop(stdin);
        child
    };
    let mut rng = rand::rngs::SmallRng::seed_from_u64(0x7e3);
    let mut left = 0;
    for kill in 0..10 {
        let before = temp_files(dir.path());
        let mut child = append();
        // Killed at a random point of its rewrite: once its temp file is there (however
        // long the load before it takes on a busy machine), within the next tenths of a
        // second.
        let waiting = std::time::Instant::now();
        while temp_files(dir.path())
            .iter()
            .all(|name| before.contains(name))
            && child.try_wait().unwrap().is_none()
            && waiting.elapsed() < Duration::from_secs(60)
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        // A fixed, random wait: the kill lands at a random point of the rewrite.
        std::thread::sleep(Duration::from_millis(rng.random_range(0..300)));
        child.kill().unwrap();
        child.wait().unwrap();
        left = left.max(temp_files(dir.path()).len());
        let now = std::fs::read(&file).unwrap();
        assert!(
            now == original || load_session(&file).is_ok(),
            "kill {kill}: the file is the old one or a whole new one"
        );
    }
    assert!(
        left > 0,
        "no kill interrupted a rewrite: the test proves nothing"
    );
    let status = append().wait().unwrap();
    assert!(status.success());
    assert_eq!(temp_files(dir.path()), Vec::<String>::new(), "left behind");
    let session = load_session(&file).unwrap().session;
    let last = session.entries().last().unwrap().message().unwrap().clone();
    assert_eq!(last.get_str("content"), Some("after the kills"));
}
