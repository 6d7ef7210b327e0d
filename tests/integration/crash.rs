//! Kills a writing `gjcfs append` process at random moments (SIGKILL) many times. Every
//! resulting file must load, and hold, for every run, a prefix of what that run appended;
//! a line a kill tore is cut off by the next run, so only the last line can be torn.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{gjcfs_bin, SessionText};
use gjcfs::engine::load_session;
use rand::{Rng, SeedableRng};

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
        let padding = "x".repeat(rng.gen_range(0..20_000));
        let writer = std::thread::spawn(move || {
            for i in 0.. {
                let line = format!("{{\"role\":\"user\",\"content\":\"r{run}-{i} {padding}\"}}\n");
                if stdin.write_all(line.as_bytes()).is_err() {
                    break;
                }
            }
        });
        std::thread::sleep(Duration::from_millis(rng.gen_range(1..40)));
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
