//! A session of many small entries costs about its size in memory: the places of a short
//! line's members are found again in its text instead of being kept, writing every record
//! out (or giving its message to a context) builds it only for the moment, and the lines
//! read are let go chunk by chunk as their records are kept.

use std::fs;
use std::io::Write as _;
use std::path::Path;
use std::process::Command;

use crate::common::mount::{p, Mount};
use crate::common::peak::{run_measured, Run};
use crate::common::{gjcfs_bin, SessionText};
use crate::mount::resident_kib;

/// The id of the sessions written here.
const SESSION_ID: &str = "019b8e21-46cc-710a-ac1d-39560cac6399";

/// Small entries: each about 200 bytes, as a short exchange writes them.
const ENTRIES: usize = 100_000;

/// A session of `entries` short user messages, each the child of the one before.
fn small_entries(entries: usize) -> String {
    let header = format!(
        r#"{{"type":"session","version":5,"id":"{SESSION_ID}","timestamp":"2026-01-05T12:28:24.140Z","cwd":"/w"}}"#
    );
    let mut text = SessionText::with_header(&header);
    let mut parent: Option<String> = None;
    for i in 0..entries {
        let id = format!("{i:08x}");
        let content = format!("line {i} of many small messages, each a short exchange");
        text = text.message(&id, parent.as_deref(), "user", &content);
        parent = Some(id);
    }
    text.text()
}

fn gjcfs(args: &[&str], agent: &Path, stdin: &str) -> Option<Run> {
    let mut command = Command::new(gjcfs_bin());
    command
        .args(args)
        .arg("--agent-dir")
        .arg(agent)
        .env("MALLOC_ARENA_MAX", "2");
    let run = run_measured(&command, stdin.as_bytes())?;
    assert!(run.success, "gjcfs {args:?} failed");
    Some(run)
}

#[test]
fn a_session_of_small_entries_costs_about_its_size() {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agent");
    let (tiny, large) = (
        dir.path().join("tiny.jsonl"),
        dir.path().join("large.jsonl"),
    );
    fs::write(&tiny, small_entries(2)).unwrap();
    fs::write(&large, small_entries(ENTRIES)).unwrap();
    let size = fs::metadata(&large).unwrap().len();
    let append = "{\"role\":\"user\",\"content\":\"one more\"}\n";
    for (what, args, stdin) in [
        ("entries", ["entries", ""], ""),
        ("append", ["append", ""], append),
        ("context", ["context", ""], ""),
    ] {
        let run = |file: &Path| {
            let mut args = args;
            args[1] = file.to_str().unwrap();
            gjcfs(&args, &agent, stdin)
        };
        let Some(base) = run(&tiny) else {
            return;
        };
        let taken = run(&large).unwrap();
        let base = base.peak;
        if what == "entries" {
            assert_eq!(taken.stdout.lines().count(), ENTRIES + 1);
        }
        // The text itself, its records and the index of their ids: 2.2 to 2.5 times the
        // text in a debug build, as the threads that read it share the work
        // (docs/benchmarks-archive.md has the release figures); before, 5.4 (append) and
        // 5.9 (entries) times. A context holds its messages too, each built for it alone:
        // 3.4 times, before 6.3.
        let bound = if what == "context" {
            size * 5
        } else {
            size * 3
        };
        let held = taken.peak.saturating_sub(base);
        assert!(
            held <= bound,
            "gjcfs {what} of {ENTRIES} small entries ({} KiB) held {} KiB more than of two",
            size >> 10,
            held >> 10
        );
    }
    let text = fs::read_to_string(&large).unwrap();
    assert_eq!(text.lines().count(), ENTRIES + 2);
    let last = text.lines().last().unwrap();
    assert!(last.contains(r#""content":"one more""#), "{last}");
}

#[test]
fn a_mount_of_small_entries_gives_back_what_a_write_and_a_context_took() {
    require_fuse!();
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("s.jsonl"), small_entries(ENTRIES)).unwrap();
    let size = fs::metadata(dir.path().join("s.jsonl")).unwrap().len();
    let mount = Mount::start(&["--session-dir", p(dir.path())]);
    let session = mount.session_dir(SESSION_ID);
    assert_eq!(
        fs::read_dir(session.join("entries")).unwrap().count(),
        ENTRIES + 1
    );
    // The first write loads the session for writing, a second copy while the first is held.
    let mut new = fs::OpenOptions::new()
        .append(true)
        .open(session.join("entries/new"))
        .unwrap();
    new.write_all(b"{\"role\":\"user\",\"content\":\"one more\"}\n")
        .unwrap();
    drop(new);
    let context = fs::read(session.join("context.json")).unwrap();
    assert!(context.len() as u64 > size / 2, "{}", context.len());
    // What the session holds (its text, records, index, names, the context kept): about
    // seven times the file in a debug build; before, the reader's copy and every message
    // built stayed, fifteen times.
    let held = resident_kib(mount.pid()) << 10;
    assert!(
        held <= 10 * size,
        "the server holds {} KiB for a session of {} KiB",
        held >> 10,
        size >> 10
    );
}
