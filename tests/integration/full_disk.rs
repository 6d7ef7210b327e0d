//! A full disk, for real: an agent directory on a 512 KiB tmpfs is filled with
//! `gjcfs append` until a write fails. The failure is reported as "No space left on device"
//! (exit 1), the session still loads with every acknowledged entry and no torn partial line,
//! and once space is freed the next append works.

use std::process::Output;

use crate::common::tmpfs::Tmpfs;
use crate::common::{generate_managed, gjcfs_with_stdin};

fn append(file: &std::path::Path, agent: &std::path::Path, text: &str) -> Output {
    let args = [
        "append".as_ref(),
        file.as_os_str(),
        "--agent-dir".as_ref(),
        agent.as_os_str(),
    ];
    let line = format!("{{\"role\":\"user\",\"content\":\"{text}\"}}\n");
    gjcfs_with_stdin::<&std::ffi::OsStr>(&args, &line)
}

/// The session at `file` loads with no torn partial line, and its `fill-` entries are
/// exactly the `acknowledged` ones, in order.
fn assert_holds_exactly(file: &std::path::Path, acknowledged: &[String]) {
    let bytes = std::fs::read(file).unwrap();
    assert_eq!(bytes.last(), Some(&b'\n'), "no torn partial line");
    let loaded = gjcfs::engine::load_session(file).unwrap();
    assert!(loaded.skipped.is_empty(), "{:?}", loaded.skipped);
    let contents: Vec<String> = loaded
        .session
        .entries()
        .filter_map(|e| e.message()?.get_str("content").map(str::to_owned))
        .filter(|c| c.starts_with("fill-"))
        .collect();
    assert_eq!(
        contents, acknowledged,
        "every acknowledged entry, nothing else"
    );
}

#[test]
fn a_full_disk_fails_the_append_cleanly_and_freeing_space_lets_the_next_one_through() {
    let Some(fs) = Tmpfs::mount("512k") else {
        return;
    };
    let agent = fs.path().join("agent");
    let ws = fs.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let file = generate_managed(&agent, &ws, 4);
    let filler = fs.path().join("filler");
    std::fs::write(&filler, vec![0u8; 64 * 1024]).unwrap();

    let padding = "x".repeat(6000);
    let mut acknowledged = Vec::new();
    let failure = loop {
        let text = format!("fill-{} {padding}", acknowledged.len());
        let out = append(&file, &agent, &text);
        if !out.status.success() {
            break out;
        }
        acknowledged.push(text);
        assert!(acknowledged.len() < 200, "the disk never filled up");
    };
    assert_eq!(failure.status.code(), Some(1));
    let err = String::from_utf8_lossy(&failure.stderr);
    assert!(err.contains("No space left on device"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!acknowledged.is_empty());

    assert_holds_exactly(&file, &acknowledged);

    std::fs::remove_file(&filler).unwrap();
    let out = append(&file, &agent, "after freeing space");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let session = gjcfs::engine::load_session(&file).unwrap().session;
    let last = session.entries().last().unwrap().message().unwrap().clone();
    assert_eq!(last.get_str("content"), Some("after freeing space"));
}

#[test]
fn a_full_disk_under_the_mount_answers_enospc_and_the_next_append_after_freeing_space_works() {
    require_fuse!();
    use std::io::Write;
    let Some(fs) = Tmpfs::mount("512k") else {
        return;
    };
    let agent = fs.path().join("agent");
    let ws = fs.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let file = generate_managed(&agent, &ws, 4);
    let filler = fs.path().join("filler");
    std::fs::write(&filler, vec![0u8; 64 * 1024]).unwrap();
    let sid = crate::common::session_id(&file);
    let mount = crate::common::mount::Mount::start(&["--agent-dir", agent.to_str().unwrap()]);
    let dir = mount.path().join("sessions").join(&sid);
    let append = |text: &str| {
        let mut new = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join("entries/new"))
            .unwrap();
        new.write_all(format!("{{\"role\":\"user\",\"content\":\"{text}\"}}\n").as_bytes())
    };
    let padding = "x".repeat(6000);
    let mut acknowledged = Vec::new();
    let failure = loop {
        let text = format!("fill-{} {padding}", acknowledged.len());
        match append(&text) {
            Ok(()) => acknowledged.push(text),
            Err(e) => break e,
        }
        assert!(acknowledged.len() < 200, "the disk never filled up");
    };
    assert_eq!(failure.raw_os_error(), Some(libc::ENOSPC), "{failure}");
    let errors = std::fs::read_to_string(dir.join("errors")).unwrap();
    assert!(errors.contains("No space left on device"), "{errors}");
    // The file as the mount left it: every acknowledged entry, no torn partial line.
    assert_holds_exactly(&file, &acknowledged);
    // The fault clears: the next append through the same mount works.
    std::fs::remove_file(&filler).unwrap();
    append("after freeing space").unwrap();
    let session = gjcfs::engine::load_session(&file).unwrap().session;
    let last = session.entries().last().unwrap().message().unwrap().clone();
    assert_eq!(last.get_str("content"), Some("after freeing space"));
}

/// The index files a search left in `dir` (none when it gave its space back).
fn index_files(dir: &std::path::Path) -> Vec<String> {
    walk(dir)
        .into_iter()
        .filter(|name| name.contains("search.sqlite"))
        .collect()
}

fn walk(dir: &std::path::Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path.display().to_string());
        }
    }
    out
}

/// An agent directory in a temporary directory holding about 5 MB of sessions, whose index
/// cannot fit in the 256 KiB `cache`.
fn sessions_too_big_for(cache: &Tmpfs) -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let agent = tmp.path().join("agent");
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    generate_managed(&agent, &ws, 1500);
    assert!(cache.path().is_dir());
    (tmp, agent)
}

#[test]
fn search_with_its_index_on_a_full_filesystem_answers_from_memory_and_gives_the_space_back() {
    let Some(cache) = Tmpfs::mount("256k") else {
        return;
    };
    let (tmp, agent) = sessions_too_big_for(&cache);
    let index = cache.path().join("index");
    let search = |index: &std::path::Path| {
        let args: Vec<&std::ffi::OsStr> = vec![
            "search".as_ref(),
            "the".as_ref(),
            "--all".as_ref(),
            "--limit".as_ref(),
            "3".as_ref(),
            "--agent-dir".as_ref(),
            agent.as_os_str(),
            "--index".as_ref(),
            index.as_os_str(),
        ];
        gjcfs_with_stdin(&args, "")
    };
    for run in 0..2 {
        let out = search(&index);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "run {run}: {err}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).lines().count(),
            3,
            "{err}"
        );
        assert!(err.contains("index in memory"), "run {run}: {err}");
        assert!(
            index_files(cache.path()).is_empty(),
            "run {run}: {:?}",
            walk(cache.path())
        );
    }
    // The same hits as an index on a filesystem with room.
    let roomy = tmp.path().join("index");
    let out = search(&roomy);
    assert!(out.status.success());
    assert_eq!(out.stdout, search(&index).stdout);
}

#[test]
fn the_mounts_search_with_its_index_on_a_full_filesystem_answers_from_memory() {
    require_fuse!();
    let Some(cache) = Tmpfs::mount("256k") else {
        return;
    };
    let (_tmp, agent) = sessions_too_big_for(&cache);
    let mount = crate::common::mount::Mount::start_with_cache(
        &["--agent-dir", agent.to_str().unwrap()],
        cache.path(),
    );
    let hits = std::fs::read_dir(mount.path().join("search/the"))
        .unwrap_or_else(|e| panic!("{e}: {}", mount.log_text()))
        .count();
    assert!(hits > 1, "{hits} hits");
    assert!(
        index_files(cache.path()).is_empty(),
        "{:?}",
        walk(cache.path())
    );
}
