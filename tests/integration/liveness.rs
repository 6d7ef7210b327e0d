//! Nothing waits forever: writers that hold `entries/new` and `leaf` open past every
//! attribute time before they write, on each kind of session, alone and together, on one
//! mount and across two; and every command beside a FUSE mount whose server is stopped.
//! Each mount serves under a watchdog with a short bound, and each command runs with a
//! bound of its own: a hang fails the test within it.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::mount::{message, ok, p, Mount, Store};
use crate::mount::mixed_store;
use gjcfs::engine::json::{self, Value};
use gjcfs::engine::manager::{SessionManager, StorageConfig};

/// The watchdog bound of these tests' mounts: each pass takes a few seconds.
const MOUNT_BOUND: Duration = Duration::from_secs(120);
/// How long one command or writer may take: many times its normal time on a loaded machine.
const COMMAND_BOUND: Duration = Duration::from_secs(60);
/// How long a writer holds its file open before writing: past the kernel's attribute time
/// (one second) for the session's files, so that a `stat` of its descriptor would reach the
/// server.
const HOLD: &str = "2.5";

/// Runs `command` to its end within `limit`, its output; past the limit it is killed and the
/// test fails naming it.
fn finishes_within(command: &mut Command, limit: Duration) -> Output {
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the command starts");
    wait_within(child, limit, &format!("{command:?}"))
}

fn wait_within(child: Child, limit: Duration, what: &str) -> Output {
    let pid = child.id();
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(child.wait_with_output());
    });
    match receive.recv_timeout(limit) {
        Ok(output) => output.expect("the command runs"),
        Err(_) => {
            // SAFETY: kill on the pid of our own child, which has not been reaped.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("{what} did not finish within {limit:?}: it waits on something");
        }
    }
}

/// `sh -c script` within [`COMMAND_BOUND`]; it must succeed.
fn sh_ok(script: &str) -> Output {
    let out = finishes_within(Command::new("sh").args(["-c", script]), COMMAND_BOUND);
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A shell script that opens `file` for writing (`>>` or `>`), holds it [`HOLD`] seconds,
/// then writes `line` and closes it.
fn slow_writer(redirect: &str, file: &Path, line: &str) -> String {
    format!(
        "exec 3{redirect} '{}' && sleep {HOLD} && printf '%s\\n' '{line}' >&3 && exec 3>&-",
        p(file)
    )
}

/// A message line for `entries/new` with `marker` as its text.
fn line(marker: &str) -> String {
    format!(r#"{{"role":"user","content":"{marker}"}}"#)
}

/// A session file from the v1 fixture with id `id` and workspace `cwd`.
fn v1_session(id: &str, cwd: &Path) -> String {
    fs::read_to_string("tests/fixtures/v1-minimal.jsonl")
        .unwrap()
        .replace("\"sess-1\"", &format!("\"{id}\""))
        .replace(
            "\"/tmp\"",
            &json::to_compact(&Value::string(cwd.to_str().unwrap())),
        )
}

/// A managed session of two messages in the workspace of `s`; its file.
fn another_managed(s: &Store) -> PathBuf {
    let m = SessionManager::create_managed(
        &s.tmp.path().join("workspace"),
        &s.tmp.path().join("agent/sessions"),
        StorageConfig::files(s.tmp.path().join("agent/blobs")),
    )
    .unwrap();
    m.append_message(message("user", "another")).unwrap();
    m.append_message(message("assistant", "reply")).unwrap();
    m.close().unwrap();
    m.session_file().unwrap()
}

/// A store with a session of each kind whose first write does more than append: the
/// names of their directories in the mount, with what each is.
fn every_kind() -> (Store, Vec<(&'static str, String)>) {
    let (s, _legacy, legacy_id) = mixed_store();
    let scope = s.file.parent().unwrap().to_owned();
    let ws = s.tmp.path().join("workspace");
    // A v1 file in the managed scope, migrated by its first write.
    let v1 = scope.join("2025-02-01T00-00-00-000Z_v1-scope.jsonl");
    fs::write(&v1, v1_session("v1-scope", &ws)).unwrap();
    fs::set_permissions(&v1, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    // A session a crash left with a torn last line.
    let torn = another_managed(&s);
    let mut file = fs::OpenOptions::new().append(true).open(&torn).unwrap();
    file.write_all(br#"{"type":"message","id":"torn"#).unwrap();
    let torn_id = crate::common::session_id(&torn);
    let plain_id = crate::common::session_id(&another_managed(&s));
    let kinds = vec![
        ("v5", plain_id),
        ("temp file beside", s.sid.clone()),
        ("legacy v1 transcript", legacy_id),
        ("v1 in its scope", "v1-scope".to_owned()),
        ("torn last line", torn_id),
        ("sanitizer owed", "replay".to_owned()),
    ];
    (s, kinds)
}

/// Whether the context of the session at `dir` holds `marker`.
fn context_holds(dir: &Path, marker: &str) -> bool {
    let out = finishes_within(
        Command::new("cat").arg(dir.join("context.json")),
        COMMAND_BOUND,
    );
    String::from_utf8_lossy(&out.stdout).contains(marker)
}

/// Starts `scripts` at once and waits for each within the bound; each must succeed.
fn run_together(scripts: &[String]) {
    for (script, out) in scripts.iter().zip(finish_together(scripts)) {
        assert!(
            out.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Starts `scripts` at once; the output of each, which must end within the bound.
fn finish_together(scripts: &[String]) -> Vec<Output> {
    let children: Vec<(Child, &String)> = scripts
        .iter()
        .map(|script| {
            let child = Command::new("sh")
                .args(["-c", script])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (child, script)
        })
        .collect();
    children
        .into_iter()
        .map(|(child, script)| wait_within(child, COMMAND_BOUND, script))
        .collect()
}

#[test]
fn slow_writers_on_every_kind_of_session_are_served_alone_and_together() {
    require_fuse!();
    let (s, kinds) = every_kind();
    let mount = Mount::start_with_bound(&["--agent-dir", &s.agent_dir()], MOUNT_BOUND);
    let sessions = mount.path().join("sessions");
    // One at a time, each the session's first write.
    for (kind, id) in &kinds {
        let dir = sessions.join(id);
        let marker = format!("ALONE{}", kind.replace(' ', ""));
        sh_ok(&slow_writer(">>", &dir.join("entries/new"), &line(&marker)));
        assert!(context_holds(&dir, &marker), "{kind}: {marker} appended");
    }
    // Every session at once, then every leaf moved back to the first entry at once.
    let scripts: Vec<String> = kinds
        .iter()
        .map(|(kind, id)| {
            let marker = format!("TOGETHER{}", kind.replace(' ', ""));
            slow_writer(">>", &sessions.join(id).join("entries/new"), &line(&marker))
        })
        .collect();
    run_together(&scripts);
    let mut leaves = Vec::new();
    for (kind, id) in &kinds {
        let dir = sessions.join(id);
        assert!(context_holds(
            &dir,
            &format!("TOGETHER{}", kind.replace(' ', ""))
        ));
        let first = ok("ls", &[p(&dir.join("entries"))])
            .lines()
            .next()
            .unwrap()
            .to_owned();
        leaves.push((dir, first));
    }
    let scripts: Vec<String> = leaves
        .iter()
        .map(|(dir, first)| slow_writer(">", &dir.join("leaf"), first))
        .collect();
    run_together(&scripts);
    for (dir, first) in &leaves {
        let leaf = ok("cat", &[p(&dir.join("leaf"))]);
        let id = first.split_once('-').unwrap().1.trim_end_matches(".json");
        assert_eq!(leaf.trim(), id, "{}", dir.display());
    }
}

#[test]
fn slow_writers_on_two_mounts_of_one_store_are_served() {
    require_fuse!();
    let (s, kinds) = every_kind();
    let args = ["--agent-dir", &s.agent_dir()];
    let mounts = [
        Mount::start_with_bound(&args, MOUNT_BOUND),
        Mount::start_with_bound(&args, MOUNT_BOUND),
    ];
    // Each session written through both mounts at once: each server's probe meets the
    // other mount's writer.
    let scripts: Vec<String> = kinds
        .iter()
        .flat_map(|(kind, id)| {
            mounts.iter().enumerate().map(move |(i, mount)| {
                let marker = format!("MOUNT{i}{}", kind.replace(' ', ""));
                let new = mount.session_dir(id).join("entries/new");
                slow_writer(">>", &new, &line(&marker))
            })
        })
        .collect();
    // Each write ends in its time; one acknowledged is in the store (which copy a legacy
    // session's second mount follows is not this test's concern), one refused says why.
    let outputs = finish_together(&scripts);
    let sessions = s.tmp.path().join("agent/sessions");
    let mut outputs = outputs.iter();
    for (kind, id) in &kinds {
        for (i, mount) in mounts.iter().enumerate() {
            let marker = format!("MOUNT{i}{}", kind.replace(' ', ""));
            let out = outputs.next().unwrap();
            if out.status.success() {
                let found = finishes_within(
                    Command::new("grep").args(["-rl", &marker]).arg(&sessions),
                    COMMAND_BOUND,
                );
                assert!(
                    found.status.success(),
                    "{kind}: {marker} acknowledged, not stored"
                );
            } else {
                let errors = fs::read_to_string(mount.session_dir(id).join("errors")).unwrap();
                assert!(
                    !errors.is_empty(),
                    "{kind}: {marker} refused without a word"
                );
            }
        }
    }
}

/// A mount whose server is stopped, with a process holding one of its files open: every
/// `stat` of that descriptor, and every lookup on that mount, waits until the server goes
/// on.
struct StoppedMount {
    mount: Mount,
    holder: Child,
    _store: Store,
}

impl StoppedMount {
    fn start() -> StoppedMount {
        let store = crate::common::mount::store();
        let mount = Mount::start_with_bound(&["--agent-dir", &store.agent_dir()], MOUNT_BOUND);
        let held = mount.session_dir(&store.sid).join("header.json");
        let holder = Command::new("sh")
            .args([
                "-c",
                &format!("exec 3<'{}' && echo held && exec sleep 600", p(&held)),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stopped = StoppedMount {
            mount,
            holder,
            _store: store,
        };
        let mut held = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(stopped.holder.stdout.as_mut().unwrap()),
            &mut held,
        )
        .unwrap();
        assert_eq!(held.trim(), "held");
        stopped.mount.pause();
        // Past the attribute time of what is held (a second): a `stat` would now ask the
        // server. A fixed wait: only time makes the kernel's copy expire.
        std::thread::sleep(Duration::from_millis(1500));
        stopped
    }

    fn path(&self) -> &Path {
        self.mount.path()
    }
}

impl Drop for StoppedMount {
    fn drop(&mut self) {
        self.mount.resume();
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

#[test]
fn commands_and_a_mount_finish_beside_a_fuse_mount_whose_server_is_stopped() {
    require_fuse!();
    let (s, kinds) = every_kind();
    let stopped = StoppedMount::start();
    // A legacy session whose workspace lies on the stopped mount.
    let cwd = stopped.path().join("sessions");
    let legacy_root =
        s.tmp
            .path()
            .join("agent/sessions")
            .join(gjcfs::engine::store::legacy::encode_absolute(
                cwd.to_str().unwrap(),
            ));
    fs::create_dir_all(&legacy_root).unwrap();
    let elsewhere = legacy_root.join("2025-03-01T00-00-00-000Z_elsewhere.jsonl");
    fs::write(&elsewhere, v1_session("elsewhere", &cwd)).unwrap();
    let gjcfs = env!("CARGO_BIN_EXE_gjcfs");
    let agent = s.agent_dir();
    let torn = &kinds
        .iter()
        .find(|(k, _)| *k == "torn last line")
        .unwrap()
        .1;
    let run = |args: &[&str], stdin: Option<&str>| -> Output {
        let mut command = Command::new(gjcfs);
        command
            .args(args)
            .env("XDG_CACHE_HOME", s.tmp.path().join("cache"));
        let Some(text) = stdin else {
            return finishes_within(&mut command, COMMAND_BOUND);
        };
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // A command that refuses before it reads its input closes the pipe first: what it
        // did is told by its exit status.
        let _ = child.stdin.take().unwrap().write_all(text.as_bytes());
        wait_within(child, COMMAND_BOUND, &format!("gjcfs {args:?}"))
    };
    let appended = run(
        &["append", "--agent-dir", &agent, torn],
        Some(&line("CLIAPPEND")),
    );
    assert!(appended.status.success(), "{appended:?}");
    let refused = run(
        &["append", "--agent-dir", &agent, elsewhere.to_str().unwrap()],
        Some(&line("NEVER")),
    );
    assert!(
        !refused.status.success(),
        "a workspace on the stopped mount is refused"
    );
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(why.contains("served by another process"), "{why}");
    for args in [
        &["check", "--agent-dir", &agent][..],
        &["check", "--repair", "--agent-dir", &agent],
        &["search", "--agent-dir", &agent, "MOUNTTOKEN"],
        &["ls", "--agent-dir", &agent],
    ] {
        let started = Instant::now();
        let out = run(args, None);
        assert!(
            out.status.code().is_some(),
            "gjcfs {args:?} ended by a signal: {out:?}"
        );
        eprintln!("gjcfs {args:?}: {:?}", started.elapsed());
    }
    // A mount of the store, and its first writes to sessions that need the writers' probe.
    let mount = Mount::start_with_bound(&["--agent-dir", &agent], MOUNT_BOUND);
    for (kind, id) in kinds.iter().filter(|(k, _)| *k != "torn last line") {
        let dir = mount.session_dir(id);
        let marker = format!("BESIDE{}", kind.replace(' ', ""));
        sh_ok(&slow_writer(">>", &dir.join("entries/new"), &line(&marker)));
        assert!(context_holds(&dir, &marker), "{kind}");
    }
    drop(mount);
    drop(stopped);
    assert!(
        fs::read_to_string(&elsewhere)
            .unwrap()
            .contains("\"elsewhere\""),
        "the refused session is left as it was"
    );
}

#[test]
fn a_mount_test_that_deadlocks_fails_within_its_bound() {
    require_fuse!();
    let s = crate::common::mount::store();
    let bound = Duration::from_secs(3);
    let mount = Mount::start_with_bound(&["--agent-dir", &s.agent_dir()], bound);
    mount.pause();
    let started = Instant::now();
    // statfs is never answered from the kernel's caches: it waits on the stopped server
    // until the watchdog aborts the connection, and then fails.
    let answered = crate::common::mount::answers(mount.path());
    let waited = started.elapsed();
    assert!(!answered, "an aborted connection answers with an error");
    assert!(waited >= bound - Duration::from_millis(500), "{waited:?}");
    assert!(waited < Duration::from_secs(60), "{waited:?}");
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(mount)));
    let message = dropped.expect_err("the test fails");
    let message = message
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(message.starts_with("watchdog:"), "{message}");
}
