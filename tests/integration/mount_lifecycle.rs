//! How a `gjcfs mount` starts and stops — signals with files held open, a mountpoint inside
//! the store, other users, a server killed while writers and readers are busy, a missing
//! FUSE installation — and that no session is lost or altered by any of it.

use std::collections::HashMap;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::common::mount::{answers, exit_within, is_mounted, ok, p, run, store, within, Mount};
use crate::common::{cannot_run, gjcfs_bin, root_for};
use gjcfs::engine::load_session;

/// How long a stopping server may take to exit, and a refused start to give up.
const EXIT_BOUND: Duration = Duration::from_secs(10);

/// The contents of the session's messages after the first `skip` entries, in file order,
/// each up to its first space.
fn contents(file: &Path, skip: usize) -> Vec<String> {
    let loaded = load_session(file).unwrap_or_else(|e| panic!("{file:?} does not load: {e}"));
    loaded
        .session
        .entries()
        .skip(skip)
        .filter_map(|e| {
            let content = e.message()?.get_str("content")?;
            Some(content.split(' ').next().unwrap_or_default().to_owned())
        })
        .collect()
}

/// One `write` to `entries/new` by the holder of the file.
struct Attempt {
    line: String,
    /// The server had logged that it refuses writes before the write began.
    after_stop: bool,
    acknowledged: bool,
}

#[test]
fn sigterm_with_entries_new_held_open_refuses_later_writes_and_exits() {
    let (s, mut mount) = mounted_store!();
    let new = mount.session_dir(&s.sid).join("entries/new");
    let log = mount.log_path().to_owned();
    let done = AtomicBool::new(false);
    let attempts = std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut file = fs::OpenOptions::new().append(true).open(&new).unwrap();
            let mut attempts = Vec::new();
            for i in 0.. {
                if done.load(Ordering::SeqCst) {
                    break;
                }
                let after_stop = fs::read_to_string(&log).unwrap().contains("writes refused");
                let line = format!("held-{i}");
                let json = format!("{{\"role\":\"user\",\"content\":\"{line}\"}}\n");
                let acknowledged = file.write_all(json.as_bytes()).is_ok();
                attempts.push(Attempt {
                    line,
                    after_stop,
                    acknowledged,
                });
                // A fixed pause: a slow writer, still writing when the server stops.
                std::thread::sleep(Duration::from_millis(100));
            }
            attempts
        });
        assert!(
            within(Duration::from_secs(10), || s.entry_count() >= 6),
            "the writer appends"
        );
        mount.signal(libc::SIGTERM);
        let status = mount.wait_exit_within(EXIT_BOUND);
        done.store(true, Ordering::SeqCst);
        let attempts = writer.join().expect("the writer thread");
        let status = status.unwrap_or_else(|| {
            panic!(
                "still serving {EXIT_BOUND:?} after SIGTERM: {}",
                mount.log_text()
            )
        });
        assert!(status.success(), "{status}: {}", mount.log_text());
        attempts
    });
    assert!(!is_mounted(mount.path()));

    let acknowledged: Vec<&str> = attempts
        .iter()
        .filter(|a| a.acknowledged)
        .map(|a| a.line.as_str())
        .collect();
    assert_eq!(
        contents(&s.file, 3),
        acknowledged,
        "exactly the acknowledged lines"
    );
    let late: Vec<&Attempt> = attempts.iter().filter(|a| a.after_stop).collect();
    assert!(!late.is_empty(), "the writer kept writing after the signal");
    for attempt in late {
        assert!(
            !attempt.acknowledged,
            "{} was accepted after writes were refused",
            attempt.line
        );
    }
}

#[test]
fn a_mountpoint_inside_the_store_or_around_it_is_refused() {
    require_fuse!();
    let s = store();
    let agent = s.tmp.path().join("agent");
    let session_dir = s.file.parent().unwrap().to_owned();
    let agent_args = ["--agent-dir", p(&agent)];
    let dir_args = ["--agent-dir", p(&agent), "--session-dir", p(&session_dir)];
    let cases: [(std::path::PathBuf, &[&str], &str); 5] = [
        // Not there yet: it would be created inside the store.
        (agent.join("sessions/--x--"), &agent_args, "inside"),
        (agent.clone(), &agent_args, "inside"),
        (agent.join("blobs/view"), &agent_args, "inside"),
        (session_dir.join("mnt"), &dir_args, "inside"),
        // The store under the mountpoint.
        (
            s.tmp.path().to_owned(),
            &agent_args,
            "is inside the mountpoint",
        ),
    ];
    for (mountpoint, args, says) in cases {
        let existed = mountpoint.exists();
        let mut command = Command::new(gjcfs_bin());
        command.arg("mount").arg(&mountpoint).args(args);
        let out = exit_within(&mut command, &mountpoint, EXIT_BOUND)
            .unwrap_or_else(|| panic!("{mountpoint:?}: still running after {EXIT_BOUND:?}"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{mountpoint:?}: {err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(err.contains(says), "{mountpoint:?}: {err}");
        assert!(!is_mounted(&mountpoint), "{mountpoint:?} was mounted");
        assert_eq!(mountpoint.exists(), existed, "{mountpoint:?}");
    }
    assert_eq!(s.entry_count(), 3);
}

/// A bind mount made for one test (`mount --bind`), detached again on drop.
struct BindMount(std::path::PathBuf);

impl BindMount {
    /// `source` also at `target` (created); `None`, said on stderr, where this process may
    /// not mount (not root) outside CI.
    fn new(source: &Path, target: &Path) -> Option<BindMount> {
        fs::create_dir_all(target).unwrap();
        let out = run("mount", &["--bind", p(source), p(target)]);
        if out.status.success() {
            return Some(BindMount(target.to_owned()));
        }
        let why = String::from_utf8_lossy(&out.stderr);
        cannot_run(&format!("mount --bind fails here: {}", why.trim()));
        None
    }
}

impl Drop for BindMount {
    fn drop(&mut self) {
        let _ = run("umount", &["-l", p(&self.0)]);
    }
}

#[test]
fn a_mountpoint_reaching_the_store_through_a_bind_mount_is_refused() {
    require_fuse!();
    let s = store();
    let agent = s.tmp.path().join("agent");
    let elsewhere = tempfile::tempdir().unwrap();
    // The agent directory under another name.
    let Some(_alias) = BindMount::new(&agent, &elsewhere.path().join("alias")) else {
        return;
    };
    // A directory outside the store that is also mounted inside it.
    let outside = elsewhere.path().join("outside");
    fs::create_dir(&outside).unwrap();
    let Some(_inside) = BindMount::new(&outside, &agent.join("sessions/shown")) else {
        return;
    };
    let cases = [
        (
            elsewhere.path().join("alias/mnt"),
            "the mountpoint is inside",
        ),
        (elsewhere.path().join("alias"), "the mountpoint is inside"),
        (
            elsewhere.path().join("alias/sessions/new-dir"),
            "the mountpoint is inside",
        ),
        (outside.clone(), "shows the mountpoint's directory"),
        (outside.join("deeper"), "shows the mountpoint's directory"),
    ];
    for (mountpoint, says) in cases {
        let existed = mountpoint.exists();
        let mut command = Command::new(gjcfs_bin());
        command
            .arg("mount")
            .arg(&mountpoint)
            .args(["--agent-dir", p(&agent)]);
        let out = exit_within(&mut command, &mountpoint, EXIT_BOUND)
            .unwrap_or_else(|| panic!("{mountpoint:?}: still running after {EXIT_BOUND:?}"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{mountpoint:?}: {err}");
        assert!(err.contains(says), "{mountpoint:?}: {err}");
        // (The alias itself is a mountpoint: of the bind mount, not of gjcfs.)
        assert!(!answers(&mountpoint), "{mountpoint:?} was mounted");
        assert_eq!(mountpoint.exists(), existed, "{mountpoint:?}");
    }
    assert_eq!(s.entry_count(), 3);
}

/// A system user made for one test, removed again on drop.
struct LocalUser {
    name: String,
    uid: u32,
    gid: u32,
}

impl LocalUser {
    fn create() -> LocalUser {
        let name = format!("gjcfs-t{}", std::process::id());
        let status = Command::new("useradd")
            .args(["-M", "-r", "-s", "/usr/sbin/nologin", &name])
            .status()
            .expect("useradd runs");
        assert!(status.success(), "useradd {name}: {status}");
        let mut user = LocalUser {
            name,
            uid: 0,
            gid: 0,
        };
        user.uid = ok("id", &["-u", &user.name]).trim().parse().unwrap();
        user.gid = ok("id", &["-g", &user.name]).trim().parse().unwrap();
        user
    }

    /// `program ARGS…` run as this user.
    fn run(&self, program: &str, args: &[&str]) -> std::process::Output {
        Command::new(program)
            .args(args)
            .uid(self.uid)
            .gid(self.gid)
            .current_dir("/")
            .output()
            .expect("the tool runs")
    }
}

impl Drop for LocalUser {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(&self.name).status();
    }
}

#[test]
fn with_allow_other_other_users_are_held_to_the_permissions_shown() {
    require_fuse!();
    if !root_for("creating a second user") {
        return;
    }
    let s = store();
    let user = LocalUser::create();
    let mount = Mount::start(&["--agent-dir", &s.agent_dir(), "--allow-other"]);
    // The user may reach the mountpoint; what it shows is then up to the mount.
    let parent = mount.path().parent().unwrap();
    ok("chmod", &["0755", p(parent)]);
    let dir = mount.session_dir(&s.sid);

    let denied = |out: std::process::Output, what: &str| {
        assert!(!out.status.success(), "{what} succeeded as another user");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("Permission denied"), "{what}: {err}");
    };
    denied(user.run("cat", &[p(&dir.join("header.json"))]), "cat");
    denied(user.run("ls", &[p(&dir)]), "ls");
    let line = r#"{"role":"user","content":"from another user"}"#;
    let append = format!("echo '{line}' >> {}", p(&dir.join("entries/new")));
    denied(user.run("sh", &["-c", &append]), "echo >> entries/new");
    assert_eq!(s.entry_count(), 3, "nothing appended");

    // The owner still reads.
    assert!(ok("cat", &[p(&dir.join("header.json"))]).contains(&s.sid));
    assert_eq!(ok("ls", &[p(&dir.join("entries"))]).lines().count(), 4);
}

/// Kills (SIGKILL) and reaps a child on drop.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A shell appending `{"content":"<tag>-<i> <padding spaces>"}` lines to `new` through one
/// open descriptor, printing `i` once each write succeeded; it stops at the first failed
/// write.
fn writer(new: &Path, tag: &str, padding: usize) -> Reaped {
    let script = r#"exec 3>>"$1" || exit 1
printf -v pad '%*s' "$3" ''
i=0
while printf '{"role":"user","content":"%s-%s %s"}\n' "$2" "$i" "$pad" >&3; do
  echo "$i"
  i=$((i+1))
done"#;
    let padding = padding.to_string();
    let child = Command::new("bash")
        .args(["-c", script, "writer", p(new), tag, &padding])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("bash starts");
    Reaped(child)
}

#[test]
fn sigkill_amid_writers_and_readers_loses_no_acknowledged_line() {
    require_fuse!();
    const ROUNDS: usize = 5;
    const WRITERS: usize = 3;
    let s = store();
    let args = ["--agent-dir", &s.agent_dir()];
    let mut mount = Mount::start(&args);
    let mut acknowledged: Vec<String> = Vec::new();
    for round in 0..ROUNDS {
        let dir = mount.session_dir(&s.sid);
        // Readers: files held open, and a process reading views over and over.
        let held: Vec<fs::File> = [
            dir.join("context.json"),
            dir.join("tree.txt"),
            dir.join("entries").join(format!("{}.json", s.ids[0])),
        ]
        .iter()
        .map(|path| fs::File::open(path).unwrap())
        .collect();
        let reader = Reaped(
            Command::new("sh")
                .args([
                    "-c",
                    r#"while cat "$1" "$2" >/dev/null 2>&1; do :; done"#,
                    "reader",
                    p(&dir.join("context.json")),
                    p(&dir.join("tree.txt")),
                ])
                .spawn()
                .expect("sh starts"),
        );
        // Short lines, and lines longer than one FUSE write request.
        let mut writers: Vec<Reaped> = (0..WRITERS)
            .map(|w| {
                writer(
                    &dir.join("entries/new"),
                    &format!("r{round}w{w}"),
                    w * 100_000,
                )
            })
            .collect();
        // Acknowledgements arrive on each writer's stdout until its first failed write.
        let collectors: Vec<_> = writers
            .iter_mut()
            .enumerate()
            .map(|(w, child)| {
                let stdout = child.0.stdout.take().unwrap();
                let tag = format!("r{round}w{w}");
                std::thread::spawn(move || {
                    BufReader::new(stdout)
                        .lines()
                        .map(|line| format!("{tag}-{}", line.unwrap()))
                        .collect::<Vec<String>>()
                })
            })
            .collect();
        let base = s.entry_count();
        assert!(
            within(Duration::from_secs(10), || {
                s.entry_count() >= base + 10 * WRITERS
            }),
            "round {round}: the writers append: {}",
            mount.log_text()
        );
        mount.crash();
        for (w, collector) in collectors.into_iter().enumerate() {
            let acks = collector.join().expect("a collector");
            assert!(!acks.is_empty(), "round {round}: writer {w} wrote nothing");
            acknowledged.extend(acks);
        }
        for mut child in writers {
            let exited = within(EXIT_BOUND, || child.0.try_wait().unwrap().is_some());
            assert!(exited, "round {round}: a writer still runs after the crash");
        }
        drop(reader);
        drop(held);

        // The file loads; at most its last line is torn; every acknowledged line is there
        // once, and no line twice.
        let loaded = load_session(&s.file).unwrap();
        assert!(
            loaded.skipped.len() <= 1,
            "round {round}: {:?}",
            loaded.skipped
        );
        let lines = fs::read_to_string(&s.file).unwrap().lines().count();
        for skipped in &loaded.skipped {
            assert_eq!(
                skipped.line, lines,
                "round {round}: a torn line not at the end"
            );
        }
        let mut counts: HashMap<String, usize> = HashMap::new();
        for content in contents(&s.file, 3) {
            *counts.entry(content).or_default() += 1;
        }
        for (content, count) in &counts {
            assert_eq!(*count, 1, "round {round}: {content} appended {count} times");
        }
        for line in &acknowledged {
            assert!(counts.contains_key(line), "round {round}: {line} was lost");
        }

        // Mounted again over the dead mount, an append lands and is read back.
        mount.restart(&args);
        let after = format!("after-crash-{round}");
        let append = format!(
            r#"printf '{{"role":"user","content":"{after}"}}\n' >> {}"#,
            p(&dir.join("entries/new"))
        );
        let out = run("sh", &["-c", &append]);
        assert!(
            out.status.success(),
            "round {round}: {}; the server said: {}",
            String::from_utf8_lossy(&out.stderr),
            mount.log_text()
        );
        assert_eq!(contents(&s.file, 3).last(), Some(&after), "round {round}");
        acknowledged.push(after);
    }
    mount.stop().expect("the server exits");
    let counts = contents(&s.file, 3);
    for line in &acknowledged {
        assert_eq!(counts.iter().filter(|c| *c == line).count(), 1, "{line}");
    }
}

#[test]
fn a_missing_fusermount3_is_named_with_the_package_to_install() {
    let empty = tempfile::tempdir().unwrap();
    let mountpoint = empty.path().join("mnt");
    let agent = empty.path().join("agent");
    let mut command = Command::new(gjcfs_bin());
    command
        .args(["mount", p(&mountpoint), "--agent-dir", p(&agent)])
        .env("PATH", empty.path());
    let out = exit_within(&mut command, &mountpoint, EXIT_BOUND).expect("gjcfs gives up");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    // Without /dev/fuse that is named first.
    let missing = if Path::new("/dev/fuse").exists() {
        "fusermount3"
    } else {
        "/dev/fuse"
    };
    assert!(err.contains(missing) && err.contains("fuse3"), "{err}");
    assert!(!mountpoint.exists(), "nothing was created");
    assert!(!is_mounted(&mountpoint));
}

#[test]
fn a_missing_store_or_an_occupied_mountpoint_is_refused_and_the_banner_says_what_is_served() {
    require_fuse!();
    let s = store();
    let missing = s.tmp.path().join("no-such-agent");
    let occupied = s.tmp.path().join("occupied");
    fs::create_dir_all(&occupied).unwrap();
    fs::write(occupied.join("notes.txt"), b"mine").unwrap();
    let file = s.file.clone();
    let fresh = s.tmp.path().join("fresh");
    let agent = s.tmp.path().join("agent");
    let cases: [(&Path, Vec<&str>, &str); 4] = [
        (
            &fresh,
            vec!["--agent-dir", p(&missing)],
            "no agent directory here",
        ),
        (&fresh, vec!["--agent-dir", p(&file)], "not a directory"),
        (
            &fresh,
            vec!["--session-dir", p(&missing)],
            "no session directory here",
        ),
        (&occupied, vec!["--agent-dir", p(&agent)], "not empty"),
    ];
    for (mountpoint, args, says) in cases {
        let mut command = Command::new(gjcfs_bin());
        command.arg("mount").arg(mountpoint).args(&args);
        let out = exit_within(&mut command, mountpoint, EXIT_BOUND)
            .unwrap_or_else(|| panic!("{args:?}: still running"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!is_mounted(mountpoint));
    }
    assert_eq!(fs::read(occupied.join("notes.txt")).unwrap(), b"mine");
    // Asked for, an empty store is served.
    let mut empty = Mount::start(&["--agent-dir", p(&missing), "--allow-empty"]);
    assert_eq!(ok("ls", &[p(&empty.path().join("sessions"))]), "");
    empty.stop();
    let mut mount = Mount::start(&["--agent-dir", p(&agent)]);
    assert!(within(Duration::from_secs(5), || mount
        .log_text()
        .contains("1 session(s) in 1 workspace(s), prompt history: no")));
    mount.stop();
}
