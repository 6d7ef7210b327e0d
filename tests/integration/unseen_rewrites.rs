//! Changes a stat of identity, length and modification time cannot see: a session file
//! rewritten in place, bytes for as many bytes, with its modification time put back (a
//! redaction, `touch -r`). The search index, the saved listing and usage, and the mount
//! each see it all the same (a file's version has its change time).

use std::fs;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use crate::common::mount::{within, Mount};
use crate::common::{gjcfs_bin, SessionText};

/// Rewrites the first `from` in the file at `path` as `to` (as long) in place, then puts
/// the file's modification time back; checks that identity, length and modification time
/// are as they were.
fn rewrite_in_place(path: &Path, from: &str, to: &str) {
    assert_eq!(from.len(), to.len(), "a rewrite of as many bytes");
    let before = fs::metadata(path).unwrap();
    let at = fs::read_to_string(path)
        .unwrap()
        .find(from)
        .unwrap_or_else(|| panic!("{from} in {}", path.display()));
    // Past the tick of the file system's clock of any earlier change: the change time this
    // rewrite sets is a new one.
    std::thread::sleep(Duration::from_millis(20));
    let file = fs::OpenOptions::new().write(true).open(path).unwrap();
    file.write_all_at(to.as_bytes(), at as u64).unwrap();
    file.set_times(fs::FileTimes::new().set_modified(before.modified().unwrap()))
        .unwrap();
    drop(file);
    let after = fs::metadata(path).unwrap();
    assert_eq!(
        (
            after.dev(),
            after.ino(),
            after.len(),
            after.modified().unwrap()
        ),
        (
            before.dev(),
            before.ino(),
            before.len(),
            before.modified().unwrap()
        ),
        "a rewrite a stat of identity, length and mtime cannot tell"
    );
}

fn gjcfs(args: &[&str], cache: &Path) -> Output {
    let out = Command::new(gjcfs_bin())
        .env("XDG_CACHE_HOME", cache)
        .args(args)
        .output()
        .expect("gjcfs runs");
    assert!(
        out.status.success(),
        "gjcfs {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(out: Output) -> String {
    String::from_utf8(out.stdout).unwrap()
}

/// A store directory of one session, `s1.jsonl`: a user's question holding `secret` and an
/// answer that used `input` tokens.
fn store_of_one(dir: &Path, secret: &str, input: u32) -> std::path::PathBuf {
    let store = dir.join("sessions");
    fs::create_dir(&store).unwrap();
    let file = store.join("s1.jsonl");
    let answer = format!(
        r#""message":{{"role":"assistant","content":[],"provider":"p","model":"m","usage":{{"input":{input},"output":7,"cacheRead":0,"cacheWrite":0,"cost":{{"total":0.5}}}}}}"#
    );
    let text = SessionText::with_header(
        r#"{"type":"session","version":5,"id":"session-1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/work"}"#,
    )
    .message("a", None, "user", &format!("where is {secret} kept"))
    .entry("message", "b", Some("a"), &answer)
    .text();
    fs::write(&file, text).unwrap();
    file
}

#[test]
fn a_word_redacted_in_place_with_the_mtime_put_back_is_no_longer_found() {
    let dir = tempfile::tempdir().unwrap();
    let file = store_of_one(dir.path(), "zyxsecret", 10);
    let cache = dir.path().join("cache");
    let (root, index) = (dir.path().join("sessions"), dir.path().join("index"));
    // How many hits a search for `word` prints (it exits with 1 when there are none).
    let search = |word: &str| {
        let out = Command::new(gjcfs_bin())
            .env("XDG_CACHE_HOME", &cache)
            .args([
                "search",
                word,
                "--json",
                "--session-dir",
                root.to_str().unwrap(),
            ])
            .args(["--index", index.to_str().unwrap()])
            .output()
            .unwrap();
        let hits = String::from_utf8(out.stdout).unwrap().lines().count();
        assert_eq!(
            out.status.code(),
            Some(if hits == 0 { 1 } else { 0 }),
            "{word}"
        );
        hits
    };
    assert_eq!(search("zyxsecret"), 1);
    assert_eq!(search("zyxredact"), 0);
    rewrite_in_place(&file, "zyxsecret", "zyxredact");
    assert_eq!(search("zyxsecret"), 0, "the redacted word is gone");
    assert_eq!(search("zyxredact"), 1, "the word in its place is found");
}

#[test]
fn usage_and_the_listing_follow_a_rewrite_in_place_with_the_mtime_put_back() {
    let dir = tempfile::tempdir().unwrap();
    let file = store_of_one(dir.path(), "the old question", 1234);
    let root = dir.path().join("sessions");
    let cache = dir.path().join("cache");
    let run = |cache: &Path, cmd: &str| {
        stdout(gjcfs(
            &[cmd, "--json", "--session-dir", root.to_str().unwrap()],
            cache,
        ))
    };
    let usage = run(&cache, "usage");
    assert!(usage.contains("1234"), "{usage}");
    let listed = run(&cache, "ls");
    assert!(listed.contains("the old question"), "{listed}");
    // Twice: the second run takes both from what the first kept.
    assert_eq!(run(&cache, "usage"), usage);
    assert_eq!(run(&cache, "ls"), listed);

    rewrite_in_place(&file, "\"input\":1234", "\"input\":5678");
    rewrite_in_place(&file, "the old question", "the new question");
    let fresh = tempfile::tempdir().unwrap();
    let usage = run(&cache, "usage");
    assert!(usage.contains("5678") && !usage.contains("1234"), "{usage}");
    assert_eq!(
        usage,
        run(fresh.path(), "usage"),
        "as a run keeping nothing"
    );
    let listed = run(&cache, "ls");
    assert!(listed.contains("the new question"), "{listed}");
    assert_eq!(listed, run(fresh.path(), "ls"), "as a run keeping nothing");
}

#[test]
fn a_mount_follows_a_rewrite_in_place_with_the_mtime_put_back() {
    require_fuse!();
    let s = crate::common::mount::store();
    let mount = Mount::start(&["--agent-dir", &s.agent_dir()]);
    let context = mount.session_dir(&s.sid).join("context.json");
    let read = || fs::read_to_string(&context).unwrap();
    assert!(read().contains("question MOUNTTOKEN"), "{}", read());
    rewrite_in_place(&s.file, "MOUNTTOKEN", "REDACTEDXX");
    assert!(
        within(Duration::from_secs(10), || {
            let now = read();
            now.contains("question REDACTEDXX") && !now.contains("MOUNTTOKEN")
        }),
        "context.json still shows {}",
        read()
    );
}
