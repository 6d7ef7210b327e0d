//! Helpers shared by the integration tests: real mounts under a watchdog (`mount.rs`,
//! `watchdog.rs`) and the macros that start a mount test — `require_fuse!()` (a visible
//! skip where `/dev/fuse` or `fusermount3` is missing, a failure under CI) and
//! `mounted_store!()` (the same, then the demo store mounted) — a headless browser for the
//! page tests (`browser.rs`, `require_browser!()`, `pages.rs`), a pseudo-terminal
//! (`pty.rs`), stores in memory and the mount model over one (`memory.rs`, `vfs_io.rs`), a
//! command's peak memory (`peak.rs`), a small tmpfs to fill (`tmpfs.rs`) and names swapped
//! atomically (`swap.rs`).
#![allow(dead_code)]

/// Returns from a test that mounts where no mount can run (see `mount::fuse_ready`): a
/// visible skip, and a failure under CI.
macro_rules! require_fuse {
    () => {
        if !$crate::common::mount::fuse_ready() {
            return;
        }
    };
}

/// Returns from a test that needs a browser where none is installed: a visible skip, and a
/// failure under CI.
macro_rules! require_browser {
    () => {
        if !$crate::common::browser::browser_ready() {
            return;
        }
    };
}

/// The start of most mount tests: returns where no mount can run (as `require_fuse!`),
/// makes the demo store ([`mount::store`]) and mounts it with `--agent-dir` and any further
/// arguments. `let (s, mount) = mounted_store!();`, `mounted_store!("--read-only")`.
macro_rules! mounted_store {
    ($($arg:expr),* $(,)?) => {{
        require_fuse!();
        let s = $crate::common::mount::store();
        let mount =
            $crate::common::mount::Mount::start(&["--agent-dir", &s.agent_dir() $(, $arg)*]);
        (s, mount)
    }};
}

pub mod browser;
pub mod memory;
pub mod mount;
pub mod pages;
pub mod peak;
pub mod pty;
#[cfg(target_os = "linux")]
pub mod swap;
#[cfg(target_os = "linux")]
pub mod tmpfs;
pub mod vfs_io;
pub mod watchdog;

use std::path::PathBuf;

use gjcfs::engine::json::{self, Value};

/// The path of a file under `tests/fixtures/`.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Polls `f` until it holds, for up to `limit`; whether it did. The way a test waits for
/// something to happen (a server to notice a change, a file to appear): `limit` is only a
/// bound against hanging, never the time the test expects it to take.
pub fn within(limit: std::time::Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    loop {
        if f() {
            return true;
        }
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Whether the program `tool` is on PATH for a test that runs it; if not, [`cannot_run`].
pub fn tool_ready(tool: &str) -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()));
    found || cannot_run(&format!("{tool} is not installed"))
}

/// A test that cannot run here says why on the terminal (past the harness's capture, which
/// takes only print! and eprint!) and returns false, to return itself; under CI
/// (`CI=true`, where `.ci/run` installs what the tests need) it fails instead.
pub fn cannot_run(why: &str) -> bool {
    let test = std::thread::current().name().unwrap_or("a test").to_owned();
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: {why}; CI must be able to run it (.ci/run installs what it needs)");
    }
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "skipped: {test}: {why}");
    false
}

/// Whether this process runs as root, which `what` needs; if not, [`cannot_run`] (a
/// visible skip, or a failure under CI, which runs as root).
pub fn root_for(what: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    euid == 0 || cannot_run(&format!("{what} needs root"))
}

/// The session id in a session file's header.
pub fn session_id(file: &std::path::Path) -> String {
    gjcfs::engine::load_session(file)
        .expect("a session file")
        .session
        .header()
        .id()
        .expect("a header id")
        .to_owned()
}

/// The text of a fixture.
pub fn fixture_text(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).expect("fixture is readable")
}

/// A fixture's `.expected.json`, parsed.
pub fn expected(name: &str) -> Value {
    json::parse(&fixture_text(&format!("{name}.expected.json"))).expect("expected file is JSON")
}

/// Follows a path of object keys and array indices through a value.
pub fn at<'a>(value: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(value, |v, key| match v {
        Value::Object(o) => o.get(key).unwrap_or_else(|| panic!("no member {key}")),
        Value::Array(a) => &a[key.parse::<usize>().expect("index")],
        _ => panic!("cannot index {v:?} with {key}"),
    })
}

/// The path of the built `gjcfs` binary.
pub fn gjcfs_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_gjcfs"))
}

/// The standard output of `gjcfs ARGS…`, which must succeed.
pub fn gjcfs_stdout<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> String {
    let mut command = std::process::Command::new(gjcfs_bin());
    command.args(args);
    stdout_of(&mut command)
}

/// The standard output of `command` (a run of gjcfs, set up as the caller needs), which
/// must succeed.
pub fn stdout_of(command: &mut std::process::Command) -> String {
    let out = command.output().expect("gjcfs runs");
    assert!(
        out.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// Builds session files line by line for tests.
pub struct SessionText {
    lines: Vec<String>,
    clock: u32,
}

impl SessionText {
    /// A v5 header.
    pub fn new() -> Self {
        Self::with_header(
            r#"{"type":"session","version":5,"id":"test-session","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/work"}"#,
        )
    }

    pub fn with_header(header: &str) -> Self {
        SessionText {
            lines: vec![header.to_owned()],
            clock: 0,
        }
    }

    /// Appends an entry `{type, id, parentId, timestamp, ...rest}`; `rest` is JSON object
    /// members without braces (may be empty).
    pub fn entry(mut self, ty: &str, id: &str, parent: Option<&str>, rest: &str) -> Self {
        self.clock += 1;
        let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
        let sep = if rest.is_empty() { "" } else { "," };
        self.lines.push(format!(
            r#"{{"type":"{ty}","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:{:02}.000Z"{sep}{rest}}}"#,
            self.clock % 60
        ));
        self
    }

    /// Appends a message entry with a role and string content.
    pub fn message(self, id: &str, parent: Option<&str>, role: &str, text: &str) -> Self {
        let extra = if role == "assistant" {
            r#","provider":"anthropic","model":"claude""#
        } else {
            ""
        };
        let rest = format!(r#""message":{{"role":"{role}","content":"{text}"{extra}}}"#);
        self.entry("message", id, parent, &rest)
    }

    /// Appends a raw line.
    pub fn line(mut self, line: &str) -> Self {
        self.lines.push(line.to_owned());
        self
    }

    pub fn text(&self) -> String {
        let mut t = self.lines.join("\n");
        t.push('\n');
        t
    }

    pub fn session(&self) -> gjcfs::engine::Session {
        let mut records = gjcfs::engine::read::replay::parse_session_entries(&self.text())
            .expect("test session parses")
            .records;
        gjcfs::engine::format::migrate::migrate(&mut records);
        gjcfs::engine::Session::from_records(records)
    }
}

impl Default for SessionText {
    fn default() -> Self {
        Self::new()
    }
}

/// The `content` strings of a context's messages (summaries for summary messages).
pub fn contents(ctx: &gjcfs::engine::SessionContext<'_>) -> Vec<String> {
    ctx.messages
        .iter()
        .map(|m| {
            let o = m.as_object().expect("message object");
            o.get_str("content")
                .or_else(|| o.get_str("summary"))
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

/// Compares `actual` with `tests/golden/<name>`, or writes it there with `GJCFS_BLESS=1`.
pub fn golden(name: &str, actual: &[u8]) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("GJCFS_BLESS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (GJCFS_BLESS=1 writes it)", path.display()));
    if expected != actual {
        let (expected, actual) = (
            String::from_utf8_lossy(&expected),
            String::from_utf8_lossy(actual),
        );
        let line = expected
            .lines()
            .zip(actual.lines())
            .position(|(e, a)| e != a)
            .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
        panic!(
            "{name} differs from its golden file at line {}:\n  expected: {:?}\n  actual:   {:?}\n(GJCFS_BLESS=1 rewrites it)",
            line + 1,
            expected.lines().nth(line),
            actual.lines().nth(line)
        );
    }
}

/// The session with every entry id replaced by its record index (`00000001`, …), so that
/// the ids the v1 migration draws at random are the same in every run.
pub fn renumbered(session: gjcfs::engine::Session) -> gjcfs::engine::Session {
    let records = session.into_records();
    let ids: std::collections::HashMap<String, String> = records
        .iter()
        .enumerate()
        .filter(|(_, r)| !r.is_header())
        .filter_map(|(i, r)| Some((r.id()?.to_owned(), format!("{i:08x}"))))
        .collect();
    let records = records
        .into_iter()
        .map(|r| {
            let mut fields = r.into_fields();
            for key in ["id", "parentId", "firstKeptEntryId", "targetId", "fromId"] {
                let renamed = fields.get_str(key).and_then(|id| ids.get(id)).cloned();
                if let Some(new) = renamed {
                    fields.insert(key, Value::string(new));
                }
            }
            gjcfs::engine::format::record::Record::new(fields)
        })
        .collect();
    gjcfs::engine::Session::from_records(records)
}

/// Runs gjcfs with `args` and `stdin`, killing it and failing the test if it does not
/// finish within ten seconds (a command blocked on a FIFO would never finish).
pub fn gjcfs_with_stdin<S: AsRef<std::ffi::OsStr>>(
    args: &[S],
    stdin: &str,
) -> std::process::Output {
    use std::io::Write;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let mut child = Command::new(gjcfs_bin())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let _ = input.write_all(stdin.as_bytes());
    drop(input);
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            let args: Vec<_> = args.iter().map(|a| a.as_ref().to_owned()).collect();
            panic!("gjcfs {args:?} hung");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

/// Generates a session of `entries` entries for the workspace `ws` into its managed scope
/// in `agent` (`gjcfs generate s.jsonl --scope`) and returns the transcript.
pub fn generate_managed(agent: &std::path::Path, ws: &std::path::Path, entries: usize) -> PathBuf {
    let entries = entries.to_string();
    let args: Vec<&std::ffi::OsStr> = vec![
        "generate".as_ref(),
        "s.jsonl".as_ref(),
        "--entries".as_ref(),
        entries.as_ref(),
        "--cwd".as_ref(),
        ws.as_os_str(),
        "--scope".as_ref(),
        agent.as_os_str(),
    ];
    let out = gjcfs_with_stdin(&args, "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let identity = gjcfs::engine::store::scope::resolve_identity(ws).unwrap();
    let file = agent
        .join("sessions")
        .join(gjcfs::engine::store::scope::scope_dir_name(&identity))
        .join("s.jsonl");
    assert!(file.is_file());
    file
}

/// Sets the modification time of the file or directory at `path` to `seconds` after a
/// fixed moment in the past, so that tests order files by mtime without waiting for the
/// clock (the owner may set it through a descriptor opened for reading).
pub fn set_mtime(path: &std::path::Path, seconds: u64) {
    let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_750_000_000 + seconds);
    std::fs::File::open(path)
        .and_then(|f| f.set_modified(when))
        .unwrap_or_else(|e| panic!("set the mtime of {}: {e}", path.display()));
}
