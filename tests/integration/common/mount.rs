//! A mounted `gjcfs mount` for tests: started on a temporary mountpoint, waited for in
//! /proc/mounts, and always unmounted and reaped on drop, also when the test panics. Every
//! mount serves under a [`Watchdog`]: past its bound the mount's FUSE connection is
//! aborted and the test fails when the `Mount` is dropped, instead of hanging.
//!
//! A test that mounts starts with `require_fuse!()`: without /dev/fuse or fusermount3 it
//! returns at once and says so on the terminal (`skipped: <test>: …`, past the harness's
//! capture), never passing as if it had mounted — except under CI (`CI=true`), where it
//! fails instead. The check runs when the tests run, so the build is the same everywhere.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// How long a mount may take to appear or a stopped server to exit.
const PATIENCE: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(20);

pub use super::within;
pub use gjcfs::fuse::lifecycle::{answers, is_mounted};

use super::watchdog::{
    abort_if_mounted, all_threads_stopped, connection_of, thread_states, workers_wait_for_requests,
    Watchdog, BOUND,
};

/// Runs a tool to completion.
pub fn run(program: &str, args: &[&str]) -> std::process::Output {
    Command::new(program)
        .args(args)
        .output()
        .expect("tool runs")
}

/// Runs a tool that must succeed; its standard output.
pub fn ok(program: &str, args: &[&str]) -> String {
    let out = run(program, args);
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `command` (a `gjcfs mount` expected to give up by itself) for up to `limit`: its
/// output, or `None` if it still ran — it is then killed and whatever it mounted at
/// `mountpoint` detached.
pub fn exit_within(command: &mut Command, mountpoint: &Path, limit: Duration) -> Option<Output> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the command starts");
    if within(limit, || child.try_wait().unwrap().is_some()) {
        return Some(child.wait_with_output().unwrap());
    }
    let _ = child.kill();
    let _ = child.wait();
    if is_mounted(mountpoint) {
        let _ = Command::new("fusermount3")
            .arg("-uz")
            .arg(mountpoint)
            .status();
    }
    None
}

/// Why a mount cannot run here (`None`: it can): the mount tests drive Linux's FUSE
/// (`/dev/fuse`, `fusermount3` on PATH, /proc/mounts).
fn fuse_missing() -> Option<String> {
    static MISSING: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    MISSING
        .get_or_init(|| {
            if !cfg!(target_os = "linux") {
                return Some("the mount tests drive Linux's FUSE".to_owned());
            }
            let device = Path::new("/dev/fuse").exists();
            let helper = std::env::var_os("PATH").is_some_and(|path| {
                std::env::split_paths(&path).any(|dir| dir.join("fusermount3").is_file())
            });
            (!device || !helper).then(|| {
                format!("FUSE unavailable (/dev/fuse: {device}, fusermount3 on PATH: {helper})")
            })
        })
        .clone()
}

/// Whether this test can mount; if not, [`super::cannot_run`]. Use it through
/// `require_fuse!()`.
pub fn fuse_ready() -> bool {
    fuse_missing().is_none_or(|why| super::cannot_run(&why))
}

/// A path as a tool argument.
pub fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

pub struct Mount {
    child: Option<Child>,
    mountpoint: PathBuf,
    log: PathBuf,
    /// The server's `XDG_CACHE_HOME`.
    cache: PathBuf,
    /// The server's `GJCFS_LOG`, if the test sets one.
    log_filter: Option<String>,
    /// How long the mount may serve before its watchdog aborts it.
    bound: Duration,
    watchdog: Option<Watchdog>,
    /// The FUSE connection of the current server's mount.
    connection: Option<u32>,
    /// Whether a watchdog of an earlier server on this mountpoint fired.
    fired: bool,
    _dir: tempfile::TempDir,
}

impl Mount {
    /// Runs `gjcfs mount <tmp>/mnt ARGS…` and waits until it serves.
    pub fn start(args: &[&str]) -> Mount {
        Mount::start_in(args, None, None)
    }

    /// [`Mount::start`] with `cache` as the server's cache directory (`XDG_CACHE_HOME`,
    /// where its search index goes).
    pub fn start_with_cache(args: &[&str], cache: &Path) -> Mount {
        Mount::start_in(args, Some(cache.to_owned()), None)
    }

    /// [`Mount::start`] with `GJCFS_LOG=filter`: the server logs what the filter lets
    /// through (to [`Mount::log_text`] unless `args` has `--log-file`).
    pub fn start_with_log(args: &[&str], filter: &str) -> Mount {
        Mount::start_in(args, None, Some(filter.to_owned()))
    }

    /// [`Mount::start`] with a watchdog bound of its own instead of [`BOUND`].
    pub fn start_with_bound(args: &[&str], bound: Duration) -> Mount {
        Mount::start_bounded(args, None, None, bound)
    }

    fn start_in(args: &[&str], cache: Option<PathBuf>, log_filter: Option<String>) -> Mount {
        Mount::start_bounded(args, cache, log_filter, BOUND)
    }

    fn start_bounded(
        args: &[&str],
        cache: Option<PathBuf>,
        log_filter: Option<String>,
        bound: Duration,
    ) -> Mount {
        let dir = tempfile::tempdir().expect("temp dir");
        let mountpoint = dir.path().join("mnt");
        fs::create_dir(&mountpoint).unwrap();
        let log = dir.path().join("mount.log");
        let mut mount = Mount {
            child: None,
            mountpoint,
            log,
            cache: cache.unwrap_or_else(|| dir.path().join("cache")),
            log_filter,
            bound,
            watchdog: None,
            connection: None,
            fired: false,
            _dir: dir,
        };
        mount.spawn(args);
        mount
    }

    /// Starts the server on this mountpoint again (after [`Mount::crash`]).
    pub fn restart(&mut self, args: &[&str]) {
        assert!(self.child.is_none(), "the server is still running");
        self.spawn(args);
    }

    fn spawn(&mut self, args: &[&str]) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_gjcfs"));
        if let Some(filter) = &self.log_filter {
            command.env("GJCFS_LOG", filter);
        }
        let child = command
            .arg("mount")
            .arg(&self.mountpoint)
            .args(args)
            // The search index goes to the mount's own cache, never the user's, and no
            // secret rules of the user's configuration apply.
            .env("XDG_CACHE_HOME", &self.cache)
            .env("XDG_CONFIG_HOME", &self.cache)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&self.log).unwrap())
            .spawn()
            .expect("gjcfs starts");
        self.child = Some(child);
        let start = Instant::now();
        // Mounted, and answering (a stale mount is listed but fails every call the kernel
        // cannot answer from its caches; statfs is never cached).
        while !(is_mounted(&self.mountpoint) && answers(&self.mountpoint)) {
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().unwrap()) {
                panic!("gjcfs mount exited with {status}: {}", self.log_text());
            }
            assert!(
                start.elapsed() < PATIENCE,
                "not mounted after {PATIENCE:?}: {}",
                self.log_text()
            );
            sleep(POLL);
        }
        let pid = self.pid();
        self.connection = connection_of(&self.mountpoint);
        self.watchdog = Some(Watchdog::start(
            pid,
            &self.mountpoint,
            self.connection,
            self.bound,
        ));
    }

    /// Ends the watch of the current server; whether any watchdog of this mount fired.
    fn end_watch(&mut self) -> bool {
        let fired = self.watchdog.take().is_some_and(|mut w| w.stop());
        self.fired |= fired;
        self.fired
    }

    /// Kills the server with SIGKILL, leaving whatever the kernel keeps of the mount.
    pub fn crash(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.end_watch();
    }

    /// Stops the server (SIGSTOP): every request to the mount then waits, as on a FUSE
    /// mount whose server hangs. [`Mount::resume`] and the drop let it go on. Returns once
    /// every thread of the server has stopped: the signal reaches them asynchronously, and a
    /// thread still running would answer the next request.
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP);
        let Some(child) = &self.child else { return };
        let started = Instant::now();
        while !all_threads_stopped(child.id()) {
            assert!(started.elapsed() < PATIENCE, "the server did not stop");
            sleep(Duration::from_millis(5));
        }
    }

    /// Waits until the server has read and handled every request and `forget` the kernel
    /// queued for it so far: each of its threads serving the kernel waits for the next one.
    pub fn wait_idle(&self) {
        let pid = self.pid();
        assert!(
            within(PATIENCE, || workers_wait_for_requests(pid)),
            "the server's threads never all waited for a request:\n{}server log: {}",
            thread_states(pid),
            self.log_text()
        );
    }

    /// Lets a paused server go on (SIGCONT).
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    /// Waits for the server to exit on its own (after an outside unmount).
    pub fn wait_exit(&mut self) -> Option<ExitStatus> {
        self.wait_exit_within(PATIENCE)
    }

    /// Waits up to `limit` for the server to exit; its status if it did.
    pub fn wait_exit_within(&mut self, limit: Duration) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Some(status) = child.try_wait().unwrap() {
                self.child = None;
                self.end_watch();
                return Some(status);
            }
            sleep(POLL);
        }
        None
    }

    pub fn path(&self) -> &Path {
        &self.mountpoint
    }

    /// The directory of session `sid` in the mount.
    pub fn session_dir(&self, sid: &str) -> PathBuf {
        self.mountpoint.join("sessions").join(sid)
    }

    /// The file the server's standard error goes to.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// How many read calls the server has made: one per request the kernel sent it, and
    /// the few its own threads make (`/proc/PID/io`).
    pub fn server_reads(&self) -> u64 {
        let pid = self.child.as_ref().expect("the server runs").id();
        let io = fs::read_to_string(format!("/proc/{pid}/io")).expect("/proc/PID/io");
        io.lines()
            .find_map(|l| l.strip_prefix("syscr: "))
            .and_then(|n| n.trim().parse().ok())
            .expect("syscr in /proc/PID/io")
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the server runs").id()
    }

    /// Sends `signal` to the server.
    pub fn signal(&self, signal: i32) {
        if let Some(child) = &self.child {
            // SAFETY: kill on the pid of our own child.
            unsafe { libc::kill(child.id() as i32, signal) };
        }
    }

    /// Sends SIGTERM and waits for the server to exit; returns its status.
    pub fn stop(&mut self) -> Option<ExitStatus> {
        self.signal(libc::SIGTERM);
        self.wait_exit()
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        self.resume();
        if self.child.is_some() && self.stop().is_none() {
            // A server that does not stop may wait on its own mount: ending the connection
            // ends every wait on it, the server's own included.
            abort_if_mounted(&self.mountpoint, self.connection);
            for flag in ["-u", "-uz"] {
                if is_mounted(&self.mountpoint) {
                    let _ = Command::new("fusermount3")
                        .arg(flag)
                        .arg(&self.mountpoint)
                        .status();
                }
            }
            if let Some(mut child) = self.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        if is_mounted(&self.mountpoint) {
            let _ = Command::new("fusermount3")
                .arg("-uz")
                .arg(&self.mountpoint)
                .status();
        }
        if self.end_watch() && !std::thread::panicking() {
            panic!(
                "watchdog: the mount at {} served past its bound of {:?} and was aborted; \
                 server log: {}",
                self.mountpoint.display(),
                self.bound,
                self.log_text()
            );
        }
    }
}

/// The two ways a mount serves reads, as the options that choose them: a writable mount
/// through file handles, a read-only one by node (the kernel opens and closes files
/// without asking the server). A test of what both must do runs in each ([`each_mode`]).
pub const MODES: [&[&str]; 2] = [&[], &["--read-only"]];

/// Runs `test` once in each mode of [`MODES`], with the mode's options; a failure says in
/// which mode it happened.
pub fn each_mode(mut test: impl FnMut(&[&str])) {
    /// Names the mode on the test's output when the test fails in it.
    struct InMode(&'static [&'static str]);
    impl Drop for InMode {
        fn drop(&mut self) {
            if std::thread::panicking() {
                eprintln!("(in mount mode {:?})", self.0);
            }
        }
    }
    for mode in MODES {
        let _in_mode = InMode(mode);
        test(mode);
    }
}

/// [`each_mode`] on a mount of a fresh [`store`] in each mode ([`mount_in`]): `test` gets
/// the store, the mount and the mode's options. The mount is unmounted before the next.
pub fn each_mode_mounted(mut test: impl FnMut(&Store, &Mount, &[&str])) {
    each_mode(|mode| {
        let s = store();
        let mount = mount_in(&s, mode);
        test(&s, &mount, mode);
    });
}

/// Mounts the store `s` (`--agent-dir`) with the options of `mode`.
pub fn mount_in(s: &Store, mode: &[&str]) -> Mount {
    let agent = s.agent_dir();
    Mount::start(&[&["--agent-dir", agent.as_str()], mode].concat())
}

/// A store of one session to mount: an agent directory in a temporary directory.
pub struct Store {
    pub tmp: tempfile::TempDir,
    pub sid: String,
    pub file: PathBuf,
    /// user q, assistant a, user q2.
    pub ids: Vec<String>,
}

impl Store {
    pub fn agent_dir(&self) -> String {
        self.tmp.path().join("agent").to_string_lossy().into_owned()
    }

    pub fn entry_count(&self) -> usize {
        gjcfs::engine::load_session(&self.file)
            .unwrap()
            .session
            .entry_count()
    }
}

/// A message of `role` with text content.
pub fn message(role: &str, text: &str) -> gjcfs::engine::json::Value {
    gjcfs::engine::json::parse(&format!(
        r#"{{"role":"{role}","content":"{text}","provider":"p","model":"m","timestamp":1}}"#
    ))
    .unwrap()
}

/// A new managed session of the workspace `<tmp>/workspace` in the agent directory
/// `<tmp>/agent`, open for appends.
pub fn new_managed_session(tmp: &Path) -> gjcfs::engine::manager::SessionManager {
    use gjcfs::engine::manager::{SessionManager, StorageConfig};
    let ws = tmp.join("workspace");
    fs::create_dir_all(&ws).unwrap();
    SessionManager::create_managed(
        &ws,
        &tmp.join("agent/sessions"),
        StorageConfig::files(tmp.join("agent/blobs")),
    )
    .unwrap()
}

/// A managed session of three messages (user, assistant, user) in a fresh agent directory.
pub fn store() -> Store {
    let tmp = tempfile::tempdir().unwrap();
    let m = new_managed_session(tmp.path());
    let ids = vec![
        m.append_message(message("user", "question MOUNTTOKEN"))
            .unwrap(),
        m.append_message(message("assistant", "answer")).unwrap(),
        m.append_message(message("user", "q2")).unwrap(),
    ];
    m.close().unwrap();
    Store {
        sid: m.session_id(),
        file: m.session_file().unwrap(),
        tmp,
        ids,
    }
}
