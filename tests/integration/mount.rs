//! `gjcfs mount` through a real FUSE mount, driven with ordinary tools.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use crate::common::mount::{
    each_mode, each_mode_mounted, is_mounted, message, mount_in, ok, p, run, store, within, Mount,
    Store,
};
use crate::common::watchdog::fuse_call_of;
use gjcfs::engine::json::{self, Value};
use gjcfs::engine::load_session;
use gjcfs::engine::manager::{SessionManager, StorageConfig};

fn sh(script: &str) -> Output {
    run("sh", &["-c", script])
}

/// Prompts added to the store's history, in order.
fn add_prompts(s: &Store, prompts: &[&str]) {
    let storage =
        gjcfs::engine::history::HistoryStorage::open(s.tmp.path().join("agent/history.db"))
            .unwrap();
    for prompt in prompts {
        storage.add(prompt, Some("/w"));
    }
    storage.close().unwrap();
}

/// An assistant message appended by the agent, outside the mount; its id.
fn append_outside(s: &Store, text: &str) -> String {
    let agent = SessionManager::open_managed(
        &s.file,
        StorageConfig::files(s.tmp.path().join("agent/blobs")),
    )
    .unwrap();
    let id = agent.append_message(message("assistant", text)).unwrap();
    agent.close().unwrap();
    id
}

/// How many messages a context holds.
fn message_count(context: &Value) -> usize {
    let messages = context.as_object().unwrap().get("messages").unwrap();
    messages.as_array().unwrap().len()
}

fn context_messages(dir: &Path) -> usize {
    let text = ok("cat", &[p(&dir.join("context.json"))]);
    message_count(&json::parse(&text).expect("context.json is JSON"))
}

#[test]
fn a_session_reads_through_ls_cat_grep_and_stat() {
    let (s, mount) = mounted_store!();
    let sessions = mount.path().join("sessions");
    assert_eq!(ok("ls", &[p(&sessions)]), format!("{}\n", s.sid));
    let dir = sessions.join(&s.sid);

    let header = json::parse(&ok("cat", &[p(&dir.join("header.json"))])).unwrap();
    assert_eq!(
        header.as_object().unwrap().get_str("id"),
        Some(s.sid.as_str())
    );
    assert_eq!(context_messages(&dir), 3);

    let names: Vec<String> = s
        .ids
        .iter()
        .enumerate()
        .map(|(i, id)| format!("{i:06}-{id}.json"))
        .chain(["new".to_owned()])
        .collect();
    assert_eq!(
        ok("ls", &[p(&dir.join("entries"))]),
        names.join("\n") + "\n"
    );

    let hits = ok("grep", &["-rl", "MOUNTTOKEN", p(&dir.join("entries"))]);
    assert_eq!(hits.trim(), p(&dir.join("entries").join(&names[0])));

    for file in [
        dir.join("header.json"),
        dir.join("context.json"),
        dir.join("leaf"),
        dir.join("entries").join(&names[1]),
    ] {
        let size: u64 = ok("stat", &["-c", "%s", p(&file)]).trim().parse().unwrap();
        assert_eq!(size, fs::read(&file).unwrap().len() as u64, "{file:?}");
    }
    assert_eq!(
        ok("cat", &[p(&dir.join("leaf"))]),
        format!("{}\n", s.ids[2])
    );

    let by_index = ok(
        "stat",
        &["-c", "%i %a", p(&dir.join("entries").join(&names[1]))],
    );
    let by_id = ok(
        "stat",
        &[
            "-c",
            "%i %a",
            p(&dir.join("entries").join(format!("{}.json", s.ids[1]))),
        ],
    );
    assert_eq!(by_index, by_id);
    assert!(by_index.trim().ends_with(" 400"), "{by_index}");
    assert!(ok("stat", &["-c", "%a", p(&dir)]).trim() == "700");
}

#[test]
fn modes_tell_which_files_take_writes() {
    require_fuse!();
    let s = store();
    each_mode(|mode| {
        let (leaf, new) = if mode.is_empty() {
            ("600", "200")
        } else {
            ("400", "400")
        };
        let mount = mount_in(&s, mode);
        let dir = mount.path().join("sessions").join(&s.sid);
        let perm = |name: &str| {
            ok("stat", &["-c", "%a", p(&dir.join(name))])
                .trim()
                .to_owned()
        };
        for name in [
            "header.json",
            "session.jsonl",
            "context.json",
            "context.md",
            "tree.txt",
            "usage.json",
            "errors",
        ] {
            assert_eq!(perm(name), "400", "{name}");
        }
        assert_eq!(perm("leaf"), leaf);
        assert_eq!(perm("entries/new"), new);
        assert_eq!(
            ok("stat", &["-c", "%a", p(&mount.path().join("usage.json"))]).trim(),
            "400"
        );
    });
}

/// Whether process `pid` has `path` open with its offset at the file's end (`tail -n 0 -f`
/// is then following it), from `/proc/PID/fd` and `fdinfo`.
fn reads_at_end(pid: u32, path: &Path) -> bool {
    let Ok(len) = fs::metadata(path).map(|m| m.len()) else {
        return false;
    };
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        let info = format!("/proc/{pid}/fdinfo/{}", fd.file_name().to_string_lossy());
        fs::read_link(fd.path()).is_ok_and(|target| target == path)
            && fs::read_to_string(info).is_ok_and(|info| {
                info.lines()
                    .find_map(|l| l.strip_prefix("pos:"))
                    .is_some_and(|pos| pos.trim().parse() == Ok(len))
            })
    })
}

#[test]
fn session_jsonl_is_the_transcript_and_tail_f_follows_it() {
    require_fuse!();
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    each_mode_mounted(|s, mount, mode| {
        let dir = mount.path().join("sessions").join(&s.sid);
        let transcript = dir.join("session.jsonl");
        assert_eq!(fs::read(&transcript).unwrap(), fs::read(&s.file).unwrap());
        let mut tail = Command::new("tail")
            .args(["-n", "0", "-f", p(&transcript)])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(tail.stdout.take().unwrap()).lines();
        let following = || reads_at_end(tail.id(), &transcript);
        assert!(
            within(Duration::from_secs(10), following),
            "tail does not follow {transcript:?}"
        );
        // One line through the mount (if it takes writes), one by the agent outside it.
        if mode.is_empty() {
            let out = sh(&format!(
                r#"echo '{{"role":"user","content":"TAILMOUNT"}}' >> {}"#,
                p(&dir.join("entries/new"))
            ));
            assert!(out.status.success());
            let seen = lines.next().unwrap().unwrap();
            assert!(seen.contains("TAILMOUNT"), "{seen}");
        }
        append_outside(s, "TAILOUTSIDE");
        let seen = lines.next().unwrap().unwrap();
        assert!(seen.contains("TAILOUTSIDE"), "{mode:?}: {seen}");
        let _ = tail.kill();
        let _ = tail.wait();
        assert_eq!(fs::read(&transcript).unwrap(), fs::read(&s.file).unwrap());
    });
}

/// Opens `path` and reads it whole: the open file, its bytes and its mtime, a little
/// before now (so that a change made next shows in the mtime).
fn open_and_read(path: &Path) -> (fs::File, Vec<u8>, std::time::SystemTime) {
    use std::io::Read;
    let mut file = fs::File::open(path).unwrap();
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).unwrap();
    let mtime = fs::metadata(path).unwrap().modified().unwrap();
    // A fixed wait: the clock moves on past a tick of the file system's times.
    std::thread::sleep(Duration::from_millis(20));
    (file, bytes, mtime)
}

#[test]
fn on_a_writable_mount_an_open_view_reads_whole_as_it_was_and_a_new_open_shows_the_change() {
    use std::io::{Read, Seek, SeekFrom};
    let (s, mount) = mounted_store!();
    let dir = mount.path().join("sessions").join(&s.sid);
    for name in ["context.md", "tree.txt", "context.json", "leaf"] {
        let path = dir.join(name);
        let (mut file, before, mtime_before) = open_and_read(&path);
        // The leaf moves back to the first entry: a change of every view.
        ok(
            "sh",
            &[
                "-c",
                &format!("echo {} > {}", s.ids[0], p(&dir.join("leaf"))),
            ],
        );
        file.seek(SeekFrom::Start(0)).unwrap();
        let mut again = Vec::new();
        file.read_to_end(&mut again).unwrap();
        if name == "leaf" {
            // The leaf takes writes: the open file shows the move, as stat does.
            assert_ne!(again, before, "leaf: the open file shows the change");
        } else {
            // A view's bytes are one version per file: the open file reads as it was,
            // whole, and says so.
            assert_eq!(again, before, "{name}: the open file reads as it was");
            assert_eq!(file.metadata().unwrap().len(), before.len() as u64);
        }
        let now = fs::read(&path).unwrap();
        assert_ne!(now, before, "{name}: a new open shows the change");
        let meta = fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), now.len() as u64, "{name}: stat and read agree");
        assert!(
            meta.modified().unwrap() > mtime_before,
            "{name}: the mtime follows the change"
        );
        ok(
            "sh",
            &[
                "-c",
                &format!("echo {} > {}", s.ids[2], p(&dir.join("leaf"))),
            ],
        );
    }
}

#[test]
fn on_a_read_only_mount_an_open_view_reads_whole_as_it_was_and_a_new_open_shows_the_change() {
    require_fuse!();
    use std::io::{Read, Seek, SeekFrom};
    let s = store();
    let mount = mount_in(&s, &["--read-only"]);
    let dir = mount.path().join("sessions").join(&s.sid);
    for name in ["context.md", "tree.txt", "context.json", "leaf"] {
        let path = dir.join(name);
        let (mut file, before, mtime_before) = open_and_read(&path);
        // The agent appends: a change of every view.
        append_outside(&s, name);
        file.seek(SeekFrom::Start(0)).unwrap();
        let mut again = Vec::new();
        file.read_to_end(&mut again).unwrap();
        assert_eq!(again, before, "{name}: the open file reads as it was");
        assert_eq!(file.metadata().unwrap().len(), before.len() as u64);
        let now = fs::read(&path).unwrap();
        assert_ne!(now, before, "{name}: a new open shows the change");
        let meta = fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), now.len() as u64, "{name}: stat and read agree");
        assert!(
            meta.modified().unwrap() > mtime_before,
            "{name}: the mtime follows the change"
        );
    }
}

#[test]
fn a_view_can_be_mapped() {
    require_fuse!();
    each_mode_mounted(|s, mount, _| map_context_md(mount, s));
}

fn map_context_md(mount: &Mount, s: &Store) {
    use std::os::fd::AsRawFd;
    let path = mount
        .path()
        .join("sessions")
        .join(&s.sid)
        .join("context.md");
    let expected = fs::read(&path).unwrap();
    let file = fs::File::open(&path).unwrap();
    // SAFETY: a read-only private mapping of an open file, read within its length and
    // unmapped before the file is closed.
    unsafe {
        let map = libc::mmap(
            std::ptr::null_mut(),
            expected.len(),
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            file.as_raw_fd(),
            0,
        );
        assert_ne!(map, libc::MAP_FAILED, "{}", std::io::Error::last_os_error());
        let mapped = std::slice::from_raw_parts(map as *const u8, expected.len());
        assert_eq!(mapped, &expected[..]);
        libc::munmap(map, expected.len());
    }
}

#[test]
fn echo_into_leaf_branches_and_an_unknown_id_fails() {
    let (s, mount) = mounted_store!();
    let dir = mount.path().join("sessions").join(&s.sid);
    let leaf = dir.join("leaf");

    let out = sh(&format!("echo {} > {}", s.ids[0], p(&leaf)));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(ok("cat", &[p(&leaf)]), format!("{}\n", s.ids[0]));
    assert_eq!(context_messages(&dir), 1);

    let out = sh(&format!("echo nope > {}", p(&leaf)));
    assert!(!out.status.success(), "an unknown id must fail the write");
    assert_eq!(ok("cat", &[p(&leaf)]), format!("{}\n", s.ids[0]));
    assert!(ok("cat", &[p(&dir.join("errors"))]).contains("nope"));

    let out = sh(&format!(": > {}", p(&leaf)));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(ok("cat", &[p(&leaf)]), "");
    assert_eq!(context_messages(&dir), 0);
}

#[test]
fn lines_written_to_entries_new_are_appended_and_invalid_ones_are_not() {
    let (s, mount) = mounted_store!();
    let new = mount
        .path()
        .join("sessions")
        .join(&s.sid)
        .join("entries/new");
    let out = sh(&format!(
        r#"printf '{{"role":"user","content":"hi from the mount"}}\n' >> {}"#,
        p(&new)
    ));
    assert!(out.status.success(), "{out:?}");
    let loaded = load_session(&s.file).unwrap();
    assert_eq!(loaded.session.entry_count(), 4);
    let last = loaded.session.entries().last().unwrap();
    assert_eq!(last.parent_id(), Some(s.ids[2].as_str()));
    let content = last.message().unwrap().get_str("content");
    assert_eq!(content, Some("hi from the mount"));

    for bad in ["not json", r#"{"type":"bogus"}"#, r#"[1,2]"#] {
        let out = sh(&format!("printf '%s\\n' '{bad}' >> {}", p(&new)));
        assert!(!out.status.success(), "{bad} must be refused");
    }
    assert_eq!(s.entry_count(), 4);
    let entries = ok("ls", &[p(new.parent().unwrap())]);
    assert_eq!(entries.lines().count(), 5);
}

#[test]
fn a_child_closing_an_inherited_descriptor_does_not_cut_its_parents_line() {
    let (s, mount) = mounted_store!();
    let new = mount.session_dir(&s.sid).join("entries/new");
    // The shell writes half a line, runs a child that inherits the open file and exits
    // (its close is a flush by another process), then writes the rest.
    let out = sh(&format!(
        r#"{{ printf '{{"role":"user",'; sh -c true; printf '"content":"whole"}}\n'; }} >> {}"#,
        p(&new)
    ));
    assert!(out.status.success(), "{out:?}\n{}", mount.log_text());
    let loaded = load_session(&s.file).unwrap();
    assert_eq!(loaded.session.entry_count(), 4);
    let last = loaded.session.entries().last().unwrap();
    assert_eq!(last.message().unwrap().get_str("content"), Some("whole"));
}

/// `count` message lines of about 1.5 KB each, one JSON object a line.
fn message_lines(count: usize, tag: &str) -> Vec<u8> {
    let padding = "p".repeat(1500);
    let mut out = Vec::new();
    for i in 0..count {
        out.extend_from_slice(
            format!("{{\"role\":\"user\",\"content\":\"{tag} {i} {padding}\"}}\n").as_bytes(),
        );
    }
    out
}

/// `bytes` written to `path` on a fresh descriptor as tools write: one `write(2)`, and
/// after a short count (which the kernel may return, for a FUSE file as for any) another
/// for the rest, until all is taken or a write fails. Returns the bytes taken, the errno
/// of the write that failed (0 for none) and what the close returned (`libc` directly:
/// `File` ignores the close's error).
fn write_all_and_close(path: &Path, bytes: &[u8]) -> (usize, i32, i32) {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    let errno = || std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    // SAFETY: a valid path; the buffer outlives the calls; the descriptor is closed once.
    unsafe {
        let fd = libc::open(c_path.as_ptr(), libc::O_WRONLY | libc::O_APPEND);
        assert!(
            fd >= 0,
            "open {path:?}: {}",
            std::io::Error::last_os_error()
        );
        let (mut taken, mut write_errno) = (0, 0);
        while taken < bytes.len() {
            let rest = &bytes[taken..];
            match libc::write(fd, rest.as_ptr().cast(), rest.len()) {
                n if n > 0 => taken += n as usize,
                _ => {
                    write_errno = errno();
                    break;
                }
            }
        }
        let close_errno = if libc::close(fd) < 0 { errno() } else { 0 };
        (taken, write_errno, close_errno)
    }
}

#[test]
fn one_write_longer_than_a_kernel_request_is_appended_all_together_or_not_at_all() {
    let (s, mount) = mounted_store!();
    let new = mount.session_dir(&s.sid).join("entries/new");
    // About 3 MB: the kernel cuts it into requests of at most 1 MiB.
    let mut bytes = message_lines(2000, "whole");
    assert!(bytes.len() > 2 << 20);
    let (written, errno, close_errno) = write_all_and_close(&new, &bytes);
    assert_eq!(
        (written, errno, close_errno),
        (bytes.len(), 0, 0),
        "{}",
        mount.log_text()
    );
    let session = load_session(&s.file).unwrap().session;
    assert_eq!(session.entry_count(), 3 + 2000);
    let contents: Vec<&str> = session
        .entries()
        .skip(3)
        .map(|e| e.message().unwrap().get_str("content").unwrap())
        .collect();
    for (i, content) in contents.iter().enumerate() {
        assert!(content.starts_with(&format!("whole {i} ")), "entry {i}");
    }

    // The same with an invalid last line: nothing of it is appended, and the writer hears
    // of it at the write (the first request's: nothing counted) or, after a short count,
    // at every later write and at the close.
    bytes = message_lines(2000, "refused");
    bytes.extend_from_slice(b"{\"type\":\"bogus\"}\n");
    let (written, errno, close_errno) = write_all_and_close(&new, &bytes);
    assert!(
        written < bytes.len(),
        "the write is not taken whole ({written})"
    );
    assert_eq!(errno, libc::EINVAL, "a write is refused");
    if written > 0 {
        assert_eq!(
            close_errno,
            libc::EINVAL,
            "the close fails after a short count"
        );
    }
    assert_eq!(s.entry_count(), 3 + 2000, "nothing of the refused write");
    let errors = ok("cat", &[p(&mount.session_dir(&s.sid).join("errors"))]);
    assert!(
        errors.contains("nothing of that write is appended"),
        "{errors}"
    );
    // The next write through a new open file is taken.
    let out = sh(&format!(
        r#"printf '{{"role":"user","content":"after"}}\n' >> {}"#,
        p(&new)
    ));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(s.entry_count(), 3 + 2001);
}

#[test]
fn entry_names_never_change_while_the_mount_and_gjcfs_append_write_at_once() {
    require_fuse!();
    use std::collections::HashMap;
    use std::io::Write;
    use std::process::{Command, Stdio};
    const LINES: usize = 200;
    let s = store();
    let mount = Mount::start(&["--agent-dir", &s.agent_dir()]);
    let entries = mount.session_dir(&s.sid).join("entries");
    let new = entries.join("new");
    // One writer through the mount, a line per open...
    let through_mount = std::thread::spawn(move || {
        for i in 0..LINES {
            let line = format!("{{\"role\":\"user\",\"content\":\"mount {i}\"}}\n");
            let mut file = fs::OpenOptions::new().append(true).open(&new).unwrap();
            file.write_all(line.as_bytes()).unwrap();
        }
    });
    // ...and `gjcfs append` on the transcript itself, a line at a time.
    let mut outside = Command::new(env!("CARGO_BIN_EXE_gjcfs"))
        .args(["append", p(&s.file), "--agent-dir", &s.agent_dir()])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = outside.stdin.take().unwrap();
    let feeding = std::thread::spawn(move || {
        for i in 0..LINES {
            let line = format!("{{\"role\":\"user\",\"content\":\"cli {i}\"}}\n");
            stdin.write_all(line.as_bytes()).unwrap();
            stdin.flush().unwrap();
            // A fixed pause: the lines come apart, interleaved with the mount's.
            std::thread::sleep(Duration::from_millis(2));
        }
    });
    // Every name `ls` shows keeps meaning the same entry.
    let mut names: HashMap<String, String> = HashMap::new();
    let mut changed = Vec::new();
    let mut look = |names: &mut HashMap<String, String>| {
        for name in ok("ls", &[p(&entries)]).lines() {
            let Some((_, id)) = name.strip_suffix(".json").and_then(|n| n.split_once('-')) else {
                continue;
            };
            if let Some(before) = names.insert(id.to_owned(), name.to_owned()) {
                if before != name {
                    changed.push((before, name.to_owned()));
                }
            }
        }
    };
    while !through_mount.is_finished() || !feeding.is_finished() {
        look(&mut names);
    }
    through_mount.join().unwrap();
    feeding.join().unwrap();
    let status = outside.wait_with_output().unwrap();
    assert!(status.status.success(), "{status:?}");
    look(&mut names);
    assert!(
        changed.is_empty(),
        "{} names changed: {:?}",
        changed.len(),
        &changed[..changed.len().min(5)]
    );
    // And they are the file's order.
    let session = load_session(&s.file).unwrap().session;
    assert_eq!(session.entry_count(), 3 + 2 * LINES);
    for (n, entry) in session.entries().enumerate() {
        let id = entry.id().unwrap();
        assert_eq!(
            names.get(id),
            Some(&format!("{n:06}-{id}.json")),
            "entry {n}"
        );
    }
}

/// A memory figure of process `pid` from `/proc/PID/status` (`VmRSS`, `VmHWM`), in KiB.
pub(crate) fn status_kib(pid: u32, field: &str) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"))
}

/// The resident memory of process `pid`, in KiB.
pub(crate) fn resident_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS")
}

#[test]
fn names_looked_up_once_cost_no_memory_after_the_kernel_lets_them_go() {
    require_fuse!();
    if !crate::common::root_for("dropping the kernel's caches") {
        return;
    }
    const BATCHES: usize = 10;
    const NAMES: usize = 2000;
    let s = store();
    let mount = Mount::start(&["--agent-dir", &s.agent_dir()]);
    let search = mount.path().join("search");
    let mut after = Vec::new();
    for batch in 0..BATCHES {
        for i in 0..NAMES {
            // Every name there is a query: looking it up makes nodes and an answer.
            let _ = fs::metadata(search.join(format!("zq{batch}x{i}")));
        }
        // The kernel lets every name go and queues a FUSE forget for each (before the write
        // returns); the server has handled them all when it waits for requests again.
        fs::write("/proc/sys/vm/drop_caches", "2").unwrap();
        mount.wait_idle();
        after.push(resident_kib(mount.pid()));
    }
    // Once the first batches have brought the allocator to its steady state, more
    // distinct names do not make the server bigger (at 640 bytes a name, as measured
    // before queries were forgotten, 12,000 names would be 7.5 MiB).
    let growth = after[BATCHES - 1].saturating_sub(after[3]);
    assert!(
        growth < 512,
        "the server grew {growth} KiB over {} names: {after:?}",
        (BATCHES - 4) * NAMES
    );
}

#[test]
fn a_huge_line_is_held_once_once_its_files_are_read() {
    require_fuse!();
    const LINE: usize = 100 << 20;
    let dir = tempfile::tempdir().unwrap();
    let sid = "019b8e21-46cc-710a-ac1d-39560cac6399";
    let text = format!(
        "{{\"type\":\"session\",\"version\":5,\"id\":\"{sid}\",\"timestamp\":\"2026-01-05T12:28:24.140Z\",\"cwd\":\"/w\"}}\n\
         {{\"type\":\"message\",\"id\":\"aaaa0001\",\"parentId\":null,\"timestamp\":\"2026-01-05T12:28:25.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"q\",\"timestamp\":1}}}}\n\
         {{\"type\":\"message\",\"id\":\"aaaa0002\",\"parentId\":\"aaaa0001\",\"timestamp\":\"2026-01-05T12:28:26.000Z\",\"message\":{{\"role\":\"toolResult\",\"toolCallId\":\"t1\",\"toolName\":\"bash\",\"content\":[{{\"type\":\"text\",\"text\":\"{}\"}}],\"isError\":false,\"timestamp\":2}}}}\n",
        "x".repeat(LINE)
    );
    fs::write(dir.path().join("s.jsonl"), text).unwrap();
    let mount = Mount::start(&["--session-dir", p(dir.path())]);
    let session = mount.session_dir(sid);
    for file in [
        "context.json",
        "entries/000001-aaaa0002.json",
        "context.json",
    ] {
        let bytes = fs::read(session.join(file)).unwrap();
        assert!(bytes.len() > LINE, "{file}: {}", bytes.len());
    }
    let line_kib = (LINE / 1024) as u64;
    // The session in memory holds the line once; what its files were rendered into is
    // let go with their readers (the kernel's release may trail the close a moment).
    assert!(
        within(Duration::from_secs(5), || resident_kib(mount.pid())
            < line_kib * 3 / 2),
        "the server holds {} KiB for a line of {line_kib} KiB",
        resident_kib(mount.pid())
    );
    // Less than three times the line at any moment: the load holds the line as read and
    // as parsed (each in a buffer grown by doubling); rendering a file adds one copy.
    let peak = status_kib(mount.pid(), "VmHWM");
    assert!(
        peak < line_kib * 3,
        "peak {peak} KiB for a line of {line_kib} KiB"
    );
}

#[test]
fn removing_renaming_and_creating_fail() {
    let (s, mount) = mounted_store!();
    let dir = mount.path().join("sessions").join(&s.sid);
    let header = dir.join("header.json");
    for (program, args) in [
        ("rm", vec![p(&header).to_owned()]),
        ("rm", vec!["-rf".to_owned(), p(&dir).to_owned()]),
        (
            "mv",
            vec![p(&header).to_owned(), p(&dir.join("h2")).to_owned()],
        ),
        ("mkdir", vec![p(&dir.join("sub")).to_owned()]),
        ("touch", vec![p(&dir.join("new-file")).to_owned()]),
        ("chmod", vec!["644".to_owned(), p(&header).to_owned()]),
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert!(!run(program, &args).status.success(), "{program} {args:?}");
    }
    let out = sh(&format!("echo x > {}", p(&header)));
    assert!(!out.status.success());
    assert!(header.is_file());
    assert_eq!(s.entry_count(), 3);
}

#[test]
fn a_read_only_mount_refuses_every_write() {
    let (s, mount) = mounted_store!("--read-only");
    let dir = mount.path().join("sessions").join(&s.sid);
    let out = sh(&format!("echo {} > {}", s.ids[0], p(&dir.join("leaf"))));
    assert!(!out.status.success());
    let out = sh(&format!(
        r#"printf '{{"role":"user","content":"x"}}\n' >> {}"#,
        p(&dir.join("entries/new"))
    ));
    assert!(!out.status.success());
    assert_eq!(
        ok("cat", &[p(&dir.join("leaf"))]),
        format!("{}\n", s.ids[2])
    );
    assert_eq!(s.entry_count(), 3);
}

#[test]
fn sigterm_unmounts_and_exits_cleanly() {
    require_fuse!();
    let s = store();
    let mut mount = Mount::start(&["--session-dir", p(s.file.parent().unwrap())]);
    let dir = mount.path().join("sessions").join(&s.sid);
    assert_eq!(
        ok("cat", &[p(&dir.join("leaf"))]),
        format!("{}\n", s.ids[2])
    );
    let status = mount.stop().expect("the server exits");
    assert!(status.success(), "{status}: {}", mount.log_text());
    assert!(!is_mounted(mount.path()));
    assert_eq!(s.entry_count(), 3);
}

#[test]
fn an_append_by_the_agent_outside_the_mount_shows_up() {
    require_fuse!();
    each_mode_mounted(|s, mount, mode| {
        let dir = mount.path().join("sessions").join(&s.sid);
        assert_eq!(ok("ls", &[p(&dir.join("entries"))]).lines().count(), 4);
        assert_eq!(context_messages(&dir), 3);
        let leaf = ok("cat", &[p(&dir.join("leaf"))]);
        let added = append_outside(s, "outside");
        assert_eq!(ok("ls", &[p(&dir.join("entries"))]).lines().count(), 5);
        let moved = ok("cat", &[p(&dir.join("leaf"))]);
        assert_eq!(moved.len(), leaf.len());
        assert_eq!(moved, format!("{added}\n"), "{mode:?}");
        assert_eq!(context_messages(&dir), 4, "{mode:?}");
    });
}

#[test]
fn cached_entries_and_headers_follow_patches_written_outside() {
    require_fuse!();
    each_mode_mounted(|s, mount, _| entries_and_headers_follow_patches(mount, s));
}

fn entries_and_headers_follow_patches(mount: &Mount, s: &Store) {
    let dir = mount.path().join("sessions").join(&s.sid);
    let entry = dir.join("entries").join(format!("{}.json", s.ids[0]));
    let header = dir.join("header.json");
    // Read twice: the second read is served from the kernel's cache.
    for _ in 0..2 {
        assert!(ok("cat", &[p(&entry)]).contains("question MOUNTTOKEN"));
        assert!(!ok("cat", &[p(&header)]).contains("renamed outside"));
    }
    let size_before = fs::metadata(&entry).unwrap().len();
    // The agent patches the first message and renames the session, by appending lines.
    let patch = format!(
        "{{\"type\":\"entry_patch\",\"entryId\":\"{}\",\"patch\":{{\"message\":{{\"role\":\"user\",\"content\":\"patched outside, much longer than before\"}}}}}}\n\
         {{\"type\":\"header_patch\",\"patch\":{{\"title\":\"renamed outside\"}}}}\n",
        s.ids[0]
    );
    fs::OpenOptions::new()
        .append(true)
        .open(&s.file)
        .unwrap()
        .write_all(patch.as_bytes())
        .unwrap();
    // Nothing is written to the mount: the server notices by itself (its poll of loaded
    // sessions) and drops the kernel's copies, which reads of the kept entry and header
    // would otherwise go on being served from.
    let patched = || {
        ok("cat", &[p(&entry)]).contains("patched outside, much longer than before")
            && ok("cat", &[p(&header)]).contains("renamed outside")
    };
    assert!(
        within(Duration::from_secs(10), patched),
        "the patched entry and header are shown"
    );
    let shown = ok("cat", &[p(&entry)]);
    assert!(!shown.contains("MOUNTTOKEN"), "{shown}");
    assert_eq!(fs::metadata(&entry).unwrap().len(), shown.len() as u64);
    assert_ne!(shown.len() as u64, size_before);
    let header_text = ok("cat", &[p(&header)]);
    assert!(header_text.contains("renamed outside"), "{header_text}");
    assert_eq!(
        fs::metadata(&header).unwrap().len(),
        header_text.len() as u64
    );
}

#[test]
fn stat_after_a_branch_shows_the_new_sizes_at_once() {
    let (s, mount) = mounted_store!();
    let dir = mount.path().join("sessions").join(&s.sid);
    let context = dir.join("context.json");
    let leaf = dir.join("leaf");
    let full = ok("cat", &[p(&context)]);
    assert_eq!(fs::metadata(&context).unwrap().len(), full.len() as u64);
    ok("sh", &["-c", &format!("echo {} > {}", s.ids[0], p(&leaf))]);
    // No waiting: the model announced the change, the kernel dropped its attributes
    // (stat first: a read to the end would correct the size by itself).
    let stat_size = fs::metadata(&context).unwrap().len();
    assert_eq!(
        fs::metadata(&leaf).unwrap().len(),
        s.ids[0].len() as u64 + 1
    );
    let short = ok("cat", &[p(&context)]);
    assert!(short.len() < full.len());
    assert_eq!(stat_size, short.len() as u64);
}

#[test]
fn mounting_over_a_served_mount_fails_and_leaves_it_alone() {
    let (s, mount) = mounted_store!();
    let out = run(
        env!("CARGO_BIN_EXE_gjcfs"),
        &["mount", p(mount.path()), "--agent-dir", &s.agent_dir()],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already mounted"), "{err}");
    let leaf = mount.path().join("sessions").join(&s.sid).join("leaf");
    assert_eq!(ok("cat", &[p(&leaf)]), format!("{}\n", s.ids[2]));
}

#[test]
fn a_stale_mount_left_by_a_killed_server_is_cleared_on_start() {
    require_fuse!();
    let s = store();
    let args = ["--agent-dir", &s.agent_dir()];
    let mut mount = Mount::start(&args);
    mount.crash();
    mount.restart(&args);
    let dir = mount.path().join("sessions").join(&s.sid);
    assert_eq!(
        ok("cat", &[p(&dir.join("leaf"))]),
        format!("{}\n", s.ids[2])
    );
}

#[test]
fn gjcfs_umount_ends_the_server() {
    let (_s, mut mount) = mounted_store!();
    ok(env!("CARGO_BIN_EXE_gjcfs"), &["umount", p(mount.path())]);
    let status = mount.wait_exit().expect("the server exits");
    assert!(status.success(), "{status}: {}", mount.log_text());
    assert!(!is_mounted(mount.path()));
}

#[test]
fn blobs_read_back_through_cat() {
    require_fuse!();
    use gjcfs::engine::format::blob::BlobStore;
    use gjcfs::engine::storage::FileStorage;
    let s = store();
    let blobs = BlobStore::new(
        s.tmp.path().join("agent/blobs"),
        std::sync::Arc::new(FileStorage),
    );
    let hash = blobs.put(b"\x89PNG not really").unwrap();
    let mount = Mount::start(&["--agent-dir", &s.agent_dir()]);
    let dir = mount.path().join("blobs");
    assert_eq!(ok("ls", &[p(&dir)]), format!("{hash}\n"));
    let out = run("cat", &[p(&dir.join(&hash))]);
    assert!(out.status.success());
    assert_eq!(out.stdout, b"\x89PNG not really");

    // Referenced by an entry appended through the mount, it shows under the session too.
    let session = mount.path().join("sessions").join(&s.sid);
    assert_eq!(ok("ls", &[p(&session.join("blobs"))]), "");
    let entry =
        format!(r#"{{"type":"custom","customType":"img","data":{{"ref":"blob:sha256:{hash}"}}}}"#);
    let out = sh(&format!(
        "printf '%s\\n' '{entry}' >> {}",
        p(&session.join("entries/new"))
    ));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(ok("ls", &[p(&session.join("blobs"))]), format!("{hash}\n"));
    let inode = |path: &Path| ok("stat", &["-c", "%i", p(path)]);
    assert_eq!(
        inode(&session.join("blobs").join(&hash)),
        inode(&dir.join(&hash))
    );
}

#[test]
fn history_reads_through_cat() {
    require_fuse!();
    let s = store();
    add_prompts(&s, &["rename the module", "explain the tree"]);
    each_mode(|mode| {
        let mount = mount_in(&s, mode);
        history_reads(&mount);
    });
}

fn history_reads(mount: &Mount) {
    let history = mount.path().join("history");
    let prompts = ok("cat", &[p(&history.join("prompts.jsonl"))]);
    let parsed: Vec<Value> = prompts.lines().map(|l| json::parse(l).unwrap()).collect();
    assert_eq!(parsed.len(), 2);
    assert_eq!(
        parsed[1].as_object().unwrap().get_str("prompt"),
        Some("explain the tree")
    );
    let found = ok("cat", &[p(&history.join("search").join("renam"))]);
    assert_eq!(found.lines().count(), 1);
    assert!(found.contains("rename the module"));
    // How it works is written down beside it, and the queries asked are listed.
    assert_eq!(
        ok("ls", &[p(&history)]),
        "README\nerrors\nprompts.jsonl\nsearch\n"
    );
    // A query without a word is refused with the reason in history/errors; one that
    // finds nothing is an empty answer.
    let refused = run("cat", &[p(&history.join("search").join("(( ))"))]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("Invalid argument"));
    assert!(ok("cat", &[p(&history.join("errors"))]).contains("holds no word to search for"));
    assert_eq!(ok("cat", &[p(&history.join("search").join("zebra"))]), "");
    assert!(ok("cat", &[p(&history.join("README"))]).contains("search/<query>"));
    ok("cat", &[p(&history.join("search").join("explain tree"))]);
    assert_eq!(
        ok("ls", &[p(&history.join("search"))]),
        "explain tree\nrenam\nzebra\n"
    );
}

#[test]
fn projects_hold_symlinks_that_lead_to_the_sessions() {
    let (s, mount) = mounted_store!();
    let projects = mount.path().join("projects");
    let names = ok("ls", &[p(&projects)]);
    assert_eq!(names.lines().count(), 1);
    let link = projects.join(names.trim()).join(&s.sid);
    assert_eq!(
        ok("readlink", &[p(&link)]),
        format!("../../sessions/{}\n", s.sid)
    );
    assert_eq!(
        ok("cat", &[p(&link.join("leaf"))]),
        format!("{}\n", s.ids[2])
    );
}

#[test]
fn ctrl_c_with_a_file_still_open_detaches_and_applies_its_pending_line() {
    use std::io::Write;
    let (s, mut mount) = mounted_store!();
    let new = mount
        .path()
        .join("sessions")
        .join(&s.sid)
        .join("entries/new");
    let mut open = fs::OpenOptions::new().append(true).open(&new).unwrap();
    // An unterminated line waits for the close.
    open.write_all(br#"{"role":"user","content":"pending"}"#)
        .unwrap();
    assert_eq!(s.entry_count(), 3);
    mount.signal(libc::SIGINT);
    // The busy mount is detached at once; the server lives until the file is closed.
    let start = std::time::Instant::now();
    while is_mounted(mount.path()) {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "still mounted: {}",
            mount.log_text()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    drop(open);
    let status = mount.wait_exit().expect("the server exits");
    assert!(status.success(), "{status}: {}", mount.log_text());
    let loaded = load_session(&s.file).unwrap();
    assert_eq!(loaded.session.entry_count(), 4);
    let last = loaded.session.entries().last().unwrap();
    assert_eq!(last.message().unwrap().get_str("content"), Some("pending"));
}

/// Reads one file of the mount whole and parses it; a torn read would not parse.
fn read_json(path: &Path) -> (Vec<u8>, Value) {
    // An entry file listed a moment ago exists; anything else is a failure of the mount.
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let text = String::from_utf8(bytes.clone()).expect("UTF-8");
    match json::parse(&text) {
        Ok(value) => (bytes, value),
        Err(e) => panic!("{path:?} is not complete JSON ({e}): {text:?}"),
    }
}

#[test]
fn readers_see_whole_files_while_the_agent_appends_outside_the_mount() {
    require_fuse!();
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    const APPENDS: usize = 120;
    const READERS: usize = 3;
    each_mode_mounted(|s, mount, _| {
        let dir = mount.path().join("sessions").join(&s.sid);
        let done = Arc::new(AtomicBool::new(false));

        let readers: Vec<_> = (0..READERS)
            .map(|_| {
                let dir = dir.clone();
                let done = Arc::clone(&done);
                std::thread::spawn(move || {
                    let mut seen: HashMap<String, Vec<u8>> = HashMap::new();
                    let mut last_messages = 0;
                    let mut rounds = 0;
                    // At least one round after the appender is done.
                    loop {
                        let finished = done.load(Ordering::SeqCst);
                        let (_, context) = read_json(&dir.join("context.json"));
                        let messages = message_count(&context);
                        assert!(
                            messages >= last_messages,
                            "the context went back from {last_messages} to {messages} messages"
                        );
                        last_messages = messages;
                        for item in fs::read_dir(dir.join("entries")).unwrap() {
                            let name = item.unwrap().file_name().into_string().unwrap();
                            if name == "new" {
                                continue;
                            }
                            let (bytes, value) = read_json(&dir.join("entries").join(&name));
                            assert!(value.as_object().unwrap().get_str("id").is_some());
                            if let Some(before) = seen.get(&name) {
                                assert_eq!(before, &bytes, "{name} changed after it was read");
                            } else {
                                seen.insert(name, bytes);
                            }
                        }
                        rounds += 1;
                        if finished {
                            return (rounds, seen.len());
                        }
                    }
                })
            })
            .collect();

        let agent = SessionManager::open_managed(
            &s.file,
            StorageConfig::files(s.tmp.path().join("agent/blobs")),
        )
        .unwrap();
        let mut added = Vec::new();
        for i in 0..APPENDS {
            let role = if i % 2 == 0 { "assistant" } else { "user" };
            added.push(
                agent
                    .append_message(message(role, &format!("outside {i}")))
                    .unwrap(),
            );
        }
        agent.close().unwrap();
        done.store(true, Ordering::SeqCst);
        for reader in readers {
            let (rounds, seen) = reader.join().expect("a reader failed");
            assert!(rounds >= 1 && seen >= 3, "{rounds} rounds, {seen} entries");
        }

        // Everything appended shows (a bounded number of tries, no clock).
        let total = 3 + APPENDS;
        let mut listed = 0;
        for _ in 0..50 {
            listed = fs::read_dir(dir.join("entries")).unwrap().count() - 1;
            if listed == total {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert_eq!(listed, total);
        assert_eq!(context_messages(&dir), total);
        assert_eq!(
            ok("cat", &[p(&dir.join("leaf"))]),
            format!("{}\n", added.last().unwrap())
        );
        for (i, id) in added.iter().enumerate() {
            let (_, value) = read_json(&dir.join("entries").join(format!("{id}.json")));
            let message = value.as_object().unwrap().get("message").unwrap();
            assert_eq!(
                message.as_object().unwrap().get_str("content"),
                Some(format!("outside {i}").as_str())
            );
        }
    });
}

#[test]
fn concurrent_writers_to_entries_new_each_land_exactly_once() {
    require_fuse!();
    use std::collections::HashMap;
    use std::io::Write;
    const WRITERS: usize = 4;
    const LINES: usize = 25;
    let s = store();
    let mount = Mount::start(&["--agent-dir", &s.agent_dir()]);
    let new = mount
        .path()
        .join("sessions")
        .join(&s.sid)
        .join("entries/new");
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let new = new.clone();
            std::thread::spawn(move || {
                let mut file = fs::OpenOptions::new().append(true).open(&new).unwrap();
                for i in 0..LINES {
                    // One write call per line; every few lines on a fresh handle.
                    if i % 10 == 9 {
                        file = fs::OpenOptions::new().append(true).open(&new).unwrap();
                    }
                    let line = format!("{{\"role\":\"user\",\"content\":\"w{w} line {i}\"}}\n");
                    file.write_all(line.as_bytes()).unwrap();
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().expect("a writer failed");
    }
    drop(mount);

    let loaded = load_session(&s.file).unwrap();
    let session = &loaded.session;
    assert_eq!(session.entry_count(), 3 + WRITERS * LINES);
    let mut counts: HashMap<String, usize> = HashMap::new();
    for entry in session.entries().skip(3) {
        let content = entry.message().unwrap().get_str("content").unwrap();
        *counts.entry(content.to_owned()).or_default() += 1;
    }
    for w in 0..WRITERS {
        for i in 0..LINES {
            assert_eq!(
                counts.get(&format!("w{w} line {i}")),
                Some(&1),
                "w{w} line {i}"
            );
        }
    }
    // Each append is the child of the one before: one unbroken chain.
    let entries: Vec<_> = session.entries().collect();
    for pair in entries.windows(2) {
        assert_eq!(pair[1].parent_id(), pair[0].id());
    }
    assert_eq!(session.leaf_id(), entries.last().unwrap().id());
}

#[test]
fn other_sessions_answer_while_a_big_session_loads() {
    require_fuse!();
    use std::process::{Command, Stdio};
    let s = store();
    let ws = s.tmp.path().join("workspace");
    let generated = Command::new(env!("CARGO_BIN_EXE_gjcfs"))
        .args(["generate", "big.jsonl", "--size", "60M", "--cwd", p(&ws)])
        .args(["--scope", &s.agent_dir()])
        .output()
        .unwrap();
    assert!(generated.status.success(), "{generated:?}");
    let big_id = ok(
        env!("CARGO_BIN_EXE_gjcfs"),
        &["ls", "--all", "--json", "--agent-dir", &s.agent_dir()],
    )
    .lines()
    .map(|line| json::parse(line).unwrap())
    .find(|v| {
        v.as_object()
            .unwrap()
            .get_str("path")
            .unwrap()
            .ends_with("big.jsonl")
    })
    .and_then(|v| v.as_object().unwrap().get_str("id").map(str::to_owned))
    .expect("the big session is listed");
    let mount = Mount::start(&["--agent-dir", &s.agent_dir()]);
    let sessions = mount.path().join("sessions");
    ok("ls", &[p(&sessions)]);
    let mut big = Command::new("cat")
        .arg(sessions.join(&big_id).join("context.json"))
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // The big session loads while `cat` waits in one call on the mount (the open of its
    // view, which looks the view up). Other requests are answered meanwhile: a round of
    // them starts and ends with `cat` still in the same call, whatever the load's speed.
    let other = sessions.join(&s.sid);
    let mut rounds = 0;
    let mut answered_during_a_call = false;
    let finished = within(Duration::from_secs(120), || {
        let Some(call) = fuse_call_of(big.id()) else {
            // Not (or no longer) waiting on the mount: starting, or done.
            return big.try_wait().unwrap().is_some();
        };
        fs::read_dir(&sessions).unwrap().for_each(drop);
        fs::read(other.join("header.json")).unwrap();
        fs::read(other.join("context.json")).unwrap();
        rounds += 1;
        answered_during_a_call = fuse_call_of(big.id()) == Some(call);
        answered_during_a_call
    });
    if !finished {
        let _ = big.kill();
    }
    let status = big.wait().unwrap();
    assert!(finished, "cat neither waited on the mount nor ended");
    assert!(status.success());
    assert!(
        answered_during_a_call,
        "no round of other requests was answered while the big session loaded: they waited \
         for it ({rounds} rounds)"
    );
}

#[test]
fn a_refused_session_answers_eacces_says_why_and_recovers_when_put_right() {
    use std::os::unix::fs::PermissionsExt;
    let (s, mount) = mounted_store!();
    let dir = mount.path().join("sessions").join(&s.sid);
    let set_mode = |mode| fs::set_permissions(&s.file, fs::Permissions::from_mode(mode)).unwrap();
    ok("cat", &[p(&dir.join("header.json"))]);
    set_mode(0o644);
    // A write finds the transcript no longer private: refused with EACCES, not EIO — at
    // the open when the mount has seen the mode change (its change time moved the file's
    // version on: the session is loaded afresh, and refused), else at the write.
    let append = |line: &str| {
        let mut file = fs::OpenOptions::new()
            .append(true)
            .open(dir.join("entries/new"))?;
        file.write_all(format!("{line}\n").as_bytes())
    };
    let refused = append(r#"{"role":"user","content":"while 0644"}"#).unwrap_err();
    assert_eq!(refused.raw_os_error(), Some(libc::EACCES), "{refused}");
    let errors = ok("cat", &[p(&dir.join("errors"))]);
    assert!(errors.contains("mode 644"), "{errors}");
    assert_eq!(s.entry_count(), 3);
    // Put right: the next write works (nothing stays latched).
    set_mode(0o600);
    let out = sh(&format!(
        r#"echo '{{"role":"user","content":"after the fix"}}' >> {}"#,
        p(&dir.join("entries/new"))
    ));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(s.entry_count(), 4);
    // A session refused from the start: every file EACCES, errors readable.
    drop(mount);
    set_mode(0o644);
    let mount = Mount::start(&["--agent-dir", &s.agent_dir()]);
    let dir = mount.path().join("sessions").join(&s.sid);
    let out = run("cat", &[p(&dir.join("context.json"))]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Permission denied"));
    assert!(ok("cat", &[p(&dir.join("errors"))]).contains("mode 644"));
    set_mode(0o600);
    ok("cat", &[p(&dir.join("context.json"))]);
}

#[test]
fn a_leaf_moved_through_the_mount_is_kept_in_the_file() {
    let (s, mut mount) = mounted_store!();
    let dir = mount.path().join("sessions").join(&s.sid);
    let expected = {
        let session = load_session(&s.file).unwrap().session;
        session.build_context_for(&s.ids[0]).to_value()
    };
    ok(
        "sh",
        &[
            "-c",
            &format!("echo {} > {}", s.ids[0], p(&dir.join("leaf"))),
        ],
    );
    assert_eq!(
        ok("cat", &[p(&dir.join("leaf"))]),
        format!("{}\n", s.ids[0])
    );
    // Every other reader of the file finds the leaf there: the engine, a second mount…
    let session = load_session(&s.file).unwrap().session;
    assert_eq!(session.build_context().to_value(), expected);
    assert_eq!(
        gjcfs::engine::manager::leaf_marker::shown_leaf(&session),
        Some(s.ids[0].as_str())
    );
    mount.stop();
    mount.restart(&["--agent-dir", &s.agent_dir()]);
    assert_eq!(
        ok("cat", &[p(&dir.join("leaf"))]),
        format!("{}\n", s.ids[0])
    );
    // … and the next entry the agent appends continues the chosen branch.
    let m = SessionManager::open_managed(
        &s.file,
        StorageConfig::files(s.tmp.path().join("agent/blobs")),
    )
    .unwrap();
    let next = m.append_message(message("user", "on the branch")).unwrap();
    let path = m.read(|s| s.path_to(s.index_of(&next).unwrap()));
    let on_path: Vec<Option<String>> = m.read(|s| {
        path.iter()
            .map(|&i| s.record(i).id().map(str::to_owned))
            .collect()
    });
    assert!(on_path.contains(&Some(s.ids[0].clone())));
    assert!(!on_path.contains(&Some(s.ids[1].clone())));
    m.close().unwrap();
    // A reset is kept the same way.
    ok("sh", &["-c", &format!(": > {}", p(&dir.join("leaf")))]);
    assert!(within(Duration::from_secs(2), || ok(
        "cat",
        &[p(&dir.join("leaf"))]
    )
    .is_empty()));
    let session = load_session(&s.file).unwrap().session;
    assert_eq!(
        gjcfs::engine::manager::leaf_marker::shown_leaf(&session),
        None
    );
}

#[test]
fn leaf_takes_file_names_labels_and_unique_prefixes() {
    let (s, mount) = mounted_store!();
    let dir = mount.path().join("sessions").join(&s.sid);
    let leaf = dir.join("leaf");
    let set = |name: &str| sh(&format!("echo '{name}' > {}", p(&leaf)));
    let shows = |id: &str| assert_eq!(ok("cat", &[p(&leaf)]), format!("{id}\n"));
    assert!(set(&format!("000000-{}", s.ids[0])).status.success());
    shows(&s.ids[0]);
    assert!(set(&format!("000001-{}.json", s.ids[1])).status.success());
    shows(&s.ids[1]);
    let label = format!(
        r#"{{"type":"label","targetId":"{}","label":"start"}}"#,
        s.ids[0]
    );
    assert!(sh(&format!(
        "echo '{label}' >> {}",
        p(&dir.join("entries/new"))
    ))
    .status
    .success());
    assert!(set("start").status.success());
    shows(&s.ids[0]);
    assert!(set(&s.ids[2][..6]).status.success());
    shows(&s.ids[2]);
    // Unknown and ambiguous names fail with EINVAL and change nothing.
    assert!(!set("no-such-entry").status.success());
    shows(&s.ids[2]);
    let errors = ok("cat", &[p(&dir.join("errors"))]);
    assert!(
        errors.contains("no entry is named \"no-such-entry\""),
        "{errors}"
    );
    // Every entry id is 8 hex digits: some one-digit prefix names two once there are enough.
    for n in 0..40 {
        let line = format!(r#"{{"role":"user","content":"filler {n}"}}"#);
        sh(&format!("echo '{line}' >> {}", p(&dir.join("entries/new"))));
    }
    let session = load_session(&s.file).unwrap().session;
    let ids: Vec<&str> = session.entries().filter_map(|r| r.id()).collect();
    let digit = (0..16)
        .map(|d| format!("{d:x}"))
        .find(|d| ids.iter().filter(|id| id.starts_with(d.as_str())).count() > 1)
        .expect("a shared first digit");
    let before = ok("cat", &[p(&leaf)]);
    assert!(!set(&digit).status.success());
    assert_eq!(ok("cat", &[p(&leaf)]), before);
    let errors = ok("cat", &[p(&dir.join("errors"))]);
    assert!(errors.contains("is ambiguous: it begins"), "{errors}");
}

#[test]
fn by_date_and_recent_lead_to_the_sessions_by_day_and_newest_first() {
    let (s, mount) = mounted_store!();
    let root = mount.path();
    let header = json::parse(&ok(
        "cat",
        &[p(&root.join("sessions").join(&s.sid).join("header.json"))],
    ))
    .unwrap();
    let created = header
        .as_object()
        .unwrap()
        .get_str("timestamp")
        .unwrap()
        .to_owned();
    let day = &created[..10];
    assert_eq!(ok("ls", &[p(&root.join("by-date"))]), format!("{day}\n"));
    let names = ok("ls", &[p(&root.join("by-date").join(day))]);
    let short = &s.sid[..8];
    let expected = format!(
        "{} question MOUNTTOKEN ({short})",
        created[11..16].replace(':', "-")
    );
    assert_eq!(names.trim_end(), expected);
    let link = root.join("by-date").join(day).join(&expected);
    assert_eq!(
        ok("readlink", &[p(&link)]).trim_end(),
        format!("../../sessions/{}", s.sid)
    );
    assert!(ok("cat", &[p(&link.join("context.md"))]).contains("MOUNTTOKEN"));
    let recent = ok("ls", &[p(&root.join("recent"))]);
    let first = format!("001 question MOUNTTOKEN ({short})");
    assert_eq!(recent.trim_end(), first);
    assert_eq!(
        ok("cat", &[p(&root.join("recent").join(&first).join("leaf"))]),
        format!("{}\n", s.ids[2])
    );
}

/// Every file under `root` (not following symlinks): path → (bytes, mtime).
fn snapshot(root: &Path) -> std::collections::BTreeMap<PathBuf, (Vec<u8>, std::time::SystemTime)> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let meta = fs::symlink_metadata(entry.path()).unwrap();
            if meta.is_dir() {
                stack.push(entry.path());
            } else if meta.is_file() {
                let bytes = fs::read(entry.path()).unwrap();
                out.insert(entry.path(), (bytes, meta.modified().unwrap()));
            }
        }
    }
    out
}

/// A store holding a managed session, a legacy v1 session, an OpenAI-history session, an
/// orphaned backup in each kind of directory and a temp file left by a crashed rewrite.
pub(crate) fn mixed_store() -> (Store, PathBuf, String) {
    let s = store();
    let ws = s.tmp.path().join("workspace");
    let root = s.tmp.path().join("agent/sessions");
    let legacy_dir = root.join(gjcfs::engine::store::legacy::encode_absolute(
        ws.to_str().unwrap(),
    ));
    fs::create_dir_all(&legacy_dir).unwrap();
    let legacy = legacy_dir.join("2025-01-01T00-00-00-000Z_legacy-1.jsonl");
    let v1 = fs::read_to_string("tests/fixtures/v1-minimal.jsonl")
        .unwrap()
        .replace("\"sess-1\"", "\"legacy-1\"")
        .replace(
            "\"/tmp\"",
            &json::to_compact(&Value::string(ws.to_str().unwrap())),
        );
    fs::write(&legacy, v1).unwrap();
    fs::write(legacy_dir.join("gone.jsonl.123.bak"), b"orphan\n").unwrap();
    let scope = s.file.parent().unwrap();
    let openai = fs::read_to_string("tests/fixtures/openai-replay-sanitize.jsonl")
        .unwrap()
        .replace("<CWD>", ws.to_str().unwrap());
    let openai_path = scope.join("2026-01-01T00-00-00-000Z_replay.jsonl");
    fs::write(&openai_path, openai).unwrap();
    fs::set_permissions(
        &openai_path,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    fs::write(scope.join("lost.jsonl.456.bak"), b"orphan\n").unwrap();
    let tmp_name = format!(".{}.789.tmp", s.file.file_name().unwrap().to_str().unwrap());
    fs::write(scope.join(tmp_name), b"half a rewrite").unwrap();
    (s, legacy, "legacy-1".to_owned())
}

#[test]
fn reading_everything_through_the_mount_changes_no_file() {
    require_fuse!();
    each_mode(|mode| {
        let (s, _legacy, legacy_id) = mixed_store();
        let agent = s.tmp.path().join("agent");
        let before = snapshot(&agent);
        let mount = mount_in(&s, mode);
        let sessions = mount.path().join("sessions");
        let listed = ok("ls", &[p(&sessions)]);
        for id in [s.sid.as_str(), legacy_id.as_str(), "replay"] {
            assert!(listed.lines().any(|l| l == id), "{id} in {listed}");
        }
        // The header of a listed session damaged behind the mount's back, then read.
        let damaged = s
            .file
            .parent()
            .unwrap()
            .join("2026-01-01T00-00-00-000Z_replay.jsonl");
        let mut text = fs::read(&damaged).unwrap();
        text[0] = b'#';
        fs::write(&damaged, &text).unwrap();
        let after_damage = snapshot(&agent);
        let out = run("cat", &[p(&sessions.join("replay/header.json"))]);
        assert!(!out.status.success(), "a damaged header is not served");
        let errors = ok("cat", &[p(&sessions.join("replay/errors"))]);
        assert!(errors.contains("not a session"), "{errors}");
        // Every file of every session, the views, the store's usage.
        run("grep", &["-r", "-c", "", p(mount.path())]);
        for id in [s.sid.as_str(), legacy_id.as_str()] {
            ok("cat", &[p(&sessions.join(id).join("context.json"))]);
        }
        drop(mount);
        assert_eq!(
            fs::read(&damaged).unwrap(),
            text,
            "the damaged file is left alone"
        );
        let after = snapshot(&agent);
        let changed: Vec<_> = after_damage
            .iter()
            .filter(|(path, state)| after.get(*path) != Some(state))
            .map(|(path, _)| path.clone())
            .chain(
                after
                    .keys()
                    .filter(|p| !after_damage.contains_key(*p))
                    .cloned(),
            )
            .collect();
        assert!(changed.is_empty(), "{mode:?}: changed {changed:?}");
        assert_eq!(before.len(), after.len());
    });
}

#[test]
fn an_append_to_a_legacy_session_goes_to_its_managed_copy() {
    require_fuse!();
    let (s, legacy, legacy_id) = mixed_store();
    let original = fs::read(&legacy).unwrap();
    let mtime = fs::metadata(&legacy).unwrap().modified().unwrap();
    let mount = Mount::start(&["--agent-dir", &s.agent_dir()]);
    let dir = mount.path().join("sessions").join(&legacy_id);
    assert_eq!(context_messages(&dir), 2);
    let out = sh(&format!(
        r#"echo '{{"role":"user","content":"LEGACYAPPEND"}}' >> {}"#,
        p(&dir.join("entries/new"))
    ));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(context_messages(&dir), 3);
    let header = ok("cat", &[p(&dir.join("header.json"))]);
    assert!(
        header.contains(&format!("\"id\": \"{legacy_id}\"")),
        "{header}"
    );
    drop(mount);
    assert_eq!(
        fs::read(&legacy).unwrap(),
        original,
        "the legacy file is untouched"
    );
    assert_eq!(fs::metadata(&legacy).unwrap().modified().unwrap(), mtime);
    let copy = s.file.parent().unwrap().join(legacy.file_name().unwrap());
    let session = load_session(&copy).unwrap().session;
    assert_eq!(session.header().id(), Some(legacy_id.as_str()));
    assert!(fs::read_to_string(&copy).unwrap().contains("LEGACYAPPEND"));
}

#[test]
fn an_append_after_a_torn_line_written_outside_is_not_swallowed() {
    let (s, mount) = mounted_store!();
    let new = mount
        .path()
        .join("sessions")
        .join(&s.sid)
        .join("entries/new");
    let append = |text: &str| {
        let out = sh(&format!("echo '{text}' >> {}", p(&new)));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    append(r#"{"role":"user","content":"first through the mount"}"#);
    // Another writer dies halfway through its line.
    let mut file = fs::OpenOptions::new().append(true).open(&s.file).unwrap();
    file.write_all(br#"{"type":"message","id":"torn"#).unwrap();
    drop(file);
    append(r#"{"role":"user","content":"AFTERTORN"}"#);
    drop(mount);
    let loaded = load_session(&s.file).unwrap();
    let contents: Vec<_> = loaded
        .session
        .entries()
        .filter_map(|e| e.message()?.get_str("content").map(str::to_owned))
        .collect();
    assert_eq!(
        contents.last().map(String::as_str),
        Some("AFTERTORN"),
        "{contents:?}"
    );
    assert_eq!(loaded.skipped.len(), 1, "only the torn fragment is lost");
}

#[test]
fn an_append_to_a_session_a_crash_left_torn_cuts_the_torn_line_first() {
    require_fuse!();
    let s = store();
    let whole = fs::read(&s.file).unwrap();
    // A writer died halfway through its line before the mount started.
    let mut file = fs::OpenOptions::new().append(true).open(&s.file).unwrap();
    file.write_all(br#"{"type":"message","id":"torn"#).unwrap();
    drop(file);
    let mount = Mount::start(&["--agent-dir", &s.agent_dir()]);
    let dir = mount.path().join("sessions").join(&s.sid);
    // Reading never cuts.
    ok("cat", &[p(&dir.join("context.json"))]);
    assert_eq!(fs::read(&s.file).unwrap().len(), whole.len() + 28);
    let line = r#"{"role":"user","content":"AFTERTORN"}"#;
    let out = sh(&format!("echo '{line}' >> {}", p(&dir.join("entries/new"))));
    let errors = fs::read_to_string(dir.join("errors")).unwrap();
    assert!(
        out.status.success(),
        "{}; errors: {errors}",
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        errors.contains("the torn last line a crash left (28 bytes at byte"),
        "{errors}"
    );
    drop(mount);
    let bytes = fs::read(&s.file).unwrap();
    assert_eq!(
        bytes[..whole.len()],
        whole[..],
        "the lines before it are kept"
    );
    let loaded = load_session(&s.file).unwrap();
    let last = loaded.session.entries().last().unwrap().message().unwrap();
    assert_eq!(last.get_str("content"), Some("AFTERTORN"));
    assert!(loaded.skipped.is_empty(), "{:?}", loaded.skipped);
    // The strict checks (the agent's resume) pass again.
    let inspected = gjcfs::engine::read::inspect::inspect_strict(&s.file);
    assert!(inspected.is_ok(), "{inspected:?}");
}

#[test]
fn one_write_of_several_lines_appends_all_or_nothing() {
    let (s, mount) = mounted_store!();
    let new = mount
        .path()
        .join("sessions")
        .join(&s.sid)
        .join("entries/new");
    let mut file = fs::OpenOptions::new().append(true).open(&new).unwrap();
    let batch = concat!(
        r#"{"role":"user","content":"fine"}"#,
        "\n",
        r#"{"type":"label","targetId":"no-such-entry","label":"x"}"#,
        "\n"
    );
    let err = file.write_all(batch.as_bytes()).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
    drop(file);
    assert_eq!(s.entry_count(), 3, "the valid first line was not appended");
    let good = concat!(
        r#"{"role":"user","content":"one"}"#,
        "\n",
        r#"{"role":"user","content":"two"}"#,
        "\n"
    );
    fs::OpenOptions::new()
        .append(true)
        .open(&new)
        .unwrap()
        .write_all(good.as_bytes())
        .unwrap();
    drop(mount);
    assert_eq!(s.entry_count(), 5);
}

#[test]
fn a_deleted_session_is_never_brought_back_by_a_read() {
    let (s, mount) = mounted_store!();
    let dir = mount.path().join("sessions").join(&s.sid);
    ok("cat", &[p(&dir.join("context.json"))]);
    fs::remove_file(&s.file).unwrap();
    for name in ["header.json", "context.json", "leaf", "tree.txt"] {
        let out = run("cat", &[p(&dir.join(name))]);
        assert!(!out.status.success(), "{name} after the delete");
    }
    let out = sh(&format!(
        r#"echo '{{"role":"user","content":"x"}}' >> {}"#,
        p(&dir.join("entries/new"))
    ));
    assert!(!out.status.success(), "an append does not recreate it");
    assert!(!s.file.exists(), "nothing brought the file back");
    assert!(!ok("ls", &[p(&mount.path().join("sessions"))]).contains(&s.sid));
}

#[test]
fn a_message_with_a_role_the_format_does_not_know_is_refused() {
    let (s, mount) = mounted_store!();
    let dir = mount.path().join("sessions").join(&s.sid);
    let mut new = fs::OpenOptions::new()
        .append(true)
        .open(dir.join("entries/new"))
        .unwrap();
    let err = new
        .write_all(b"{\"role\":\"wizard\",\"content\":\"abracadabra\"}\n")
        .unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
    assert!(ok("cat", &[p(&dir.join("errors"))]).contains("unknown message role \"wizard\""));
    assert_eq!(s.entry_count(), 3);
}

#[test]
fn search_finds_every_session_at_once_and_follows_appends() {
    let (s, mount) = mounted_store!();
    let root = mount.path();
    let query = root.join("search").join("MOUNTTOKEN");
    let hits = ok("ls", &[p(&query)]);
    let first = format!("001-{}-{}.json", s.sid, s.ids[0]);
    assert_eq!(hits, format!("{first}\nresults.jsonl\n"));
    assert_eq!(
        ok("readlink", &[p(&query.join(&first))]).trim_end(),
        format!("../../sessions/{}/entries/{}.json", s.sid, s.ids[0])
    );
    // The link leads to the entry itself.
    assert!(ok("cat", &[p(&query.join(&first))]).contains("question MOUNTTOKEN"));
    let results = ok("cat", &[p(&query.join("results.jsonl"))]);
    let hit = json::parse(results.lines().next().unwrap()).unwrap();
    assert_eq!(
        hit.as_object().unwrap().get_str("entry"),
        Some(s.ids[0].as_str())
    );
    assert_eq!(ok("ls", &[p(&root.join("search"))]), "MOUNTTOKEN\n");
    // An entry appended through the mount is found at once; so is one the agent appends.
    let out = sh(&format!(
        r#"echo '{{"role":"user","content":"second NEWTOKEN"}}' >> {}"#,
        p(&root.join("sessions").join(&s.sid).join("entries/new"))
    ));
    assert!(out.status.success());
    assert!(within(Duration::from_secs(3), || ok(
        "ls",
        &[p(&root.join("search").join("NEWTOKEN"))]
    )
    .contains(&format!("001-{}-", s.sid))));
    let m = SessionManager::open_managed(
        &s.file,
        StorageConfig::files(s.tmp.path().join("agent/blobs")),
    )
    .unwrap();
    m.append_message(message("user", "outside OUTSIDETOKEN"))
        .unwrap();
    m.close().unwrap();
    assert!(within(Duration::from_secs(3), || ok(
        "ls",
        &[p(&root.join("search").join("OUTSIDETOKEN"))]
    )
    .contains(&format!("001-{}-", s.sid))));
    // A query that cannot be searched is EINVAL; one that finds nothing is empty.
    let bad = run("ls", &[p(&root.join("search").join("\"unclosed"))]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("Invalid argument"));
    assert_eq!(
        ok("ls", &[p(&root.join("search").join("zebra"))]),
        "results.jsonl\n"
    );
}

#[test]
fn a_mount_keeps_a_built_search_index_fresh_for_gjcfs_search_and_lets_go_when_it_ends() {
    require_fuse!();
    let s = store();
    let agent = s.agent_dir();
    let cache = s.tmp.path().join("cache");
    let mut mount = Mount::start_with_cache(&["--agent-dir", &agent], &cache);
    let index_dir = || {
        fs::read_dir(cache.join("gjcfs/search"))
            .ok()
            .and_then(|mut dirs| dirs.next())
            .map(|d| d.unwrap().path())
    };
    // The watcher's claim: a shared lock cannot be had while it is held.
    let claimed = || {
        index_dir().is_some_and(|dir| {
            let claim = dir.join("search.sqlite.watch");
            claim.exists()
                && !run("flock", &["-n", "-s", p(&claim), "true"])
                    .status
                    .success()
        })
    };
    let search = |word: &str| {
        let out = std::process::Command::new(crate::common::gjcfs_bin())
            .env("XDG_CACHE_HOME", &cache)
            .args(["search", word, "--agent-dir", &agent, "--all", "--json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    // The mount builds no index nobody searched (its store's cache directory holds only
    // the listing it saved); once a search built it, the mount watches it. A fixed wait,
    // past a poll of the mount (every half second): nothing is to happen in it.
    std::thread::sleep(Duration::from_millis(600));
    let built = || index_dir().is_some_and(|dir| dir.join("search.sqlite").exists());
    assert!(!claimed() && !built());
    assert_eq!(search("MOUNTTOKEN").lines().count(), 1);
    assert!(
        within(Duration::from_secs(10), claimed),
        "the mount claims the index"
    );
    // The agent appends; a search right after finds it, with no wait in between.
    for n in 0..3 {
        let word = format!("WATCHEDTOKEN{n}");
        let m = SessionManager::open_managed(
            &s.file,
            StorageConfig::files(s.tmp.path().join("agent/blobs")),
        )
        .unwrap();
        m.append_message(message("user", &format!("outside {word}")))
            .unwrap();
        m.close().unwrap();
        assert_eq!(search(&word).lines().count(), 1, "{word}");
    }
    mount.stop();
    assert!(!claimed(), "an unmounted store's index is not claimed");
    assert_eq!(search("WATCHEDTOKEN2").lines().count(), 1);
}

#[test]
fn the_leaf_of_a_legacy_v1_session_moves_on_its_managed_copy() {
    require_fuse!();
    let (s, legacy, legacy_id) = mixed_store();
    let original = fs::read(&legacy).unwrap();
    let mount = Mount::start(&["--agent-dir", &s.agent_dir()]);
    let dir = mount.path().join("sessions").join(&legacy_id);
    assert_eq!(context_messages(&dir), 2);
    // The first entry, by the id every load of the v1 file derives for it.
    let first = ok("ls", &[p(&dir.join("entries"))])
        .lines()
        .next()
        .unwrap()
        .to_owned();
    let out = sh(&format!("echo {first} > {}", p(&dir.join("leaf"))));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(context_messages(&dir), 1, "the context at the first entry");
    drop(mount);
    assert_eq!(
        fs::read(&legacy).unwrap(),
        original,
        "the legacy file is untouched"
    );
    let copy = s.file.parent().unwrap().join(legacy.file_name().unwrap());
    let session = load_session(&copy).unwrap().session;
    let count = message_count(&session.build_context().to_value());
    assert_eq!(count, 1, "the copy resumes at the chosen entry");
}

/// Messages added to the store of [`with_many_entries`].
const ADDED: usize = 200;

/// Runs `f` in each mode on a mount of a store whose session has [`ADDED`] more messages.
fn with_many_entries(f: impl Fn(&Store, &Mount, &[&str])) {
    each_mode(|mode| {
        let s = store();
        for i in 0..ADDED {
            append_outside(&s, &format!("more {i}"));
        }
        f(&s, &mount_in(&s, mode), mode);
    });
}

#[test]
fn a_read_only_mount_serves_cached_files_without_a_request_each() {
    require_fuse!();
    with_many_entries(|s, mount, mode| {
        let entries = mount.session_dir(&s.sid).join("entries");
        let files: Vec<String> = ok("ls", &[p(&entries)])
            .lines()
            .filter(|name| *name != "new")
            .map(|name| p(&entries.join(name)).to_owned())
            .collect();
        assert_eq!(files.len(), 3 + ADDED);
        let args: Vec<&str> = files.iter().map(String::as_str).collect();
        let first = ok("cat", &args);
        let before = mount.server_reads();
        assert_eq!(ok("cat", &args), first, "the same bytes again");
        let requests = mount.server_reads() - before;
        if mode.is_empty() {
            // An open (and a release) for every file: the handle holds its snapshot.
            assert!(requests >= files.len() as u64, "{requests} requests");
        } else {
            // Names, attributes and pages all come from the kernel's caches.
            assert!(requests < files.len() as u64 / 10, "{requests} requests");
        }
    });
}

/// How many listing reads (`readdir`, `readdirplus`) the server of `mount` logged so far.
fn listing_reads(mount: &Mount) -> usize {
    let log = mount.log_text();
    log.lines()
        .filter(|l| l.contains(r#"request{op="readdir"#))
        .count()
}

#[test]
fn a_listing_the_kernel_kept_serves_again_until_the_directory_changes() {
    require_fuse!();
    each_mode(|mode| {
        let s = store();
        let agent = s.agent_dir();
        let args = [&["--agent-dir", agent.as_str()], mode].concat();
        let mount = Mount::start_with_log(&args, "gjcfs_fuse=trace");
        let entries = mount.session_dir(&s.sid).join("entries");
        let first = ok("ls", &[p(&entries)]);
        assert!(listing_reads(&mount) > 0, "{}", mount.log_text());
        let reads = listing_reads(&mount);
        assert_eq!(ok("ls", &[p(&entries)]), first);
        assert_eq!(
            listing_reads(&mount),
            reads,
            "the kernel's copy, not the server"
        );

        // An entry the agent appends is in the next listing, which the kernel keeps.
        let id = append_outside(&s, "appended outside");
        assert!(
            within(Duration::from_secs(5), || ok("ls", &[p(&entries)])
                .contains(&id)),
            "{mode:?}: {id} never listed"
        );
        let reads = listing_reads(&mount);
        let listed = ok("ls", &[p(&entries)]);
        assert!(listed.contains(&id), "{listed}");
        assert_eq!(listing_reads(&mount), reads, "{mode:?}");

        if mode.is_empty() {
            // One appended through the mount is listed at once.
            let new = entries.join("new");
            let line = r#"{"role":"user","content":"through the mount"}"#;
            let out = sh(&format!("echo '{line}' >> {}", p(&new)));
            assert!(out.status.success(), "{out:?}");
            let loaded = load_session(&s.file).unwrap();
            let last = loaded.session.entries().last().unwrap();
            let id = last.id().unwrap().to_owned();
            let listed = ok("ls", &[p(&entries)]);
            assert!(listed.contains(&id), "{id} not in {listed}");
        }
    });
}

/// Only the disk on Linux can watch the store's directories.
#[cfg(target_os = "linux")]
#[test]
fn a_sessions_fixed_names_cost_no_request_until_the_session_changes() {
    require_fuse!();
    // Names that are one node in both modes (a read-only mount gives each version of a
    // rendered file a number of its own, looked up at each open).
    let names = [
        "entries",
        "blobs",
        "labels",
        "pages",
        "leaves",
        "session.jsonl",
    ];
    each_mode_mounted(|s, mount, mode| {
        // Listed: the scan watches the store's directories.
        ok("ls", &[p(&mount.path().join("sessions"))]);
        let dir = mount.session_dir(&s.sid);
        let paths: Vec<String> = names.iter().map(|n| p(&dir.join(n)).to_owned()).collect();
        let args: Vec<&str> = paths.iter().map(String::as_str).collect();
        let stat = |args: &[&str]| ok("stat", &[&["-c", "%n %s"], args].concat());
        let first = stat(&args);
        // Past the brief time other names are kept (a second): a fixed wait, since what is
        // shown is that these names outlast it.
        std::thread::sleep(Duration::from_millis(1200));
        let before = mount.server_reads();
        for _ in 0..3 {
            assert_eq!(stat(&args), first);
        }
        let requests = mount.server_reads() - before;
        assert!(
            requests < names.len() as u64,
            "{mode:?}: {requests} requests"
        );

        // The agent appends: the next stat shows the transcript's new size.
        append_outside(s, "appended outside");
        let size = fs::metadata(&s.file).unwrap().len();
        let transcript = dir.join("session.jsonl");
        let shown = || fs::metadata(&transcript).unwrap().len();
        assert!(
            within(Duration::from_secs(2), || shown() == size),
            "{mode:?}: {} shown, {size} on disk",
            shown()
        );
        // And it stays shown past the brief time of the kernel's copies (a fixed wait: for
        // nothing to change).
        std::thread::sleep(Duration::from_millis(1200));
        assert_eq!(shown(), size, "{mode:?}");
    });
}

#[test]
fn a_view_read_in_small_pieces_costs_no_request_a_piece() {
    require_fuse!();
    with_many_entries(|s, mount, mode| {
        let view = mount.session_dir(&s.sid).join("context.json");
        let whole = fs::read(&view).unwrap();
        let pieces = whole.len() / 1024;
        assert!(pieces > 20, "{} bytes", whole.len());
        let before = mount.server_reads();
        let copied = ok(
            "dd",
            &[
                &format!("if={}", p(&view)),
                "of=/dev/stdout",
                "bs=1024",
                "status=none",
            ],
        );
        assert_eq!(copied.as_bytes(), whole, "{mode:?}");
        let requests = mount.server_reads() - before;
        // A lookup of the name, and on a writable mount an open, a flush and a release:
        // the version's pages and attributes come from the kernel, not a request a read.
        assert!(
            requests <= 6,
            "{requests} requests for {pieces} reads ({mode:?})"
        );
    });
}

#[test]
fn on_a_read_only_mount_an_open_view_reads_on_after_many_other_files_are_read() {
    require_fuse!();
    use std::io::{Read, Seek, SeekFrom};
    let s = store();
    add_prompts(&s, &["rename the module"]);
    let mount = mount_in(&s, &["--read-only"]);
    let path = mount.session_dir(&s.sid).join("context.md");
    let (mut file, before, _) = open_and_read(&path);
    // More rendered files read than keep their bytes in the server (1,024).
    let search = mount.path().join("history/search");
    let queries: Vec<String> = (0..1500)
        .map(|i| p(&search.join(format!("q{i}"))).to_owned())
        .collect();
    let args: Vec<&str> = queries.iter().map(String::as_str).collect();
    ok("cat", &args);
    // Unchanged, it reads whole again (from the kernel's pages or rendered anew).
    file.seek(SeekFrom::Start(0)).unwrap();
    let mut again = Vec::new();
    file.read_to_end(&mut again).unwrap();
    assert_eq!(again, before);
    assert_eq!(file.metadata().unwrap().len(), before.len() as u64);
    assert_eq!(fs::read(&path).unwrap(), before);
}
