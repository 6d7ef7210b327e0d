//! The watchdog over every test mount: past its bound it prints what the server's threads
//! (and every process waiting on a FUSE answer) are doing, aborts the mount's FUSE
//! connection — which fails each request still waiting with `ENOTCONN`, so the test's
//! blocked call returns — and makes the test fail when its `Mount` is dropped. A mount that
//! deadlocks fails its test within the bound instead of holding up the suite.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long one mount may serve its test: far beyond what any mount test takes on a loaded
/// two-core machine, far below the suite's time.
pub const BOUND: Duration = Duration::from_secs(300);

/// Where the kernel lists its FUSE connections (the `fusectl` filesystem).
const CONNECTIONS: &str = "/sys/fs/fuse/connections";

/// A running watchdog; [`Watchdog::stop`] ends it.
pub struct Watchdog {
    done: Arc<(Mutex<bool>, Condvar)>,
    fired: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Watches the server `pid` serving `mountpoint` on FUSE connection `connection` for
    /// `bound`.
    pub fn start(
        pid: u32,
        mountpoint: &Path,
        connection: Option<u32>,
        bound: Duration,
    ) -> Watchdog {
        let done = Arc::new((Mutex::new(false), Condvar::new()));
        let fired = Arc::new(AtomicBool::new(false));
        let thread = {
            let (done, fired, mountpoint) = (done.clone(), fired.clone(), mountpoint.to_owned());
            std::thread::spawn(move || {
                let (lock, wake) = &*done;
                let deadline = Instant::now() + bound;
                let mut stopped = lock.lock().unwrap();
                while !*stopped {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        fired.store(true, Ordering::SeqCst);
                        fire(pid, &mountpoint, connection, bound);
                        return;
                    }
                    stopped = wake.wait_timeout(stopped, left).unwrap().0;
                }
            })
        };
        Watchdog {
            done,
            fired,
            thread: Some(thread),
        }
    }

    /// Ends the watch; whether it fired.
    pub fn stop(&mut self) -> bool {
        *self.done.0.lock().unwrap() = true;
        self.done.1.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.fired.load(Ordering::SeqCst)
    }
}

/// The FUSE connection of the mount at `mountpoint`: the minor number of its device in the
/// mount table (read from procfs, never from the mount).
pub fn connection_of(mountpoint: &Path) -> Option<u32> {
    let table = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let point = mountpoint.to_str()?;
    table.lines().rev().find_map(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        let fstype = line.split_once(" - ")?.1.split(' ').next()?;
        (fields.get(4) == Some(&point) && fstype.starts_with("fuse"))
            .then(|| fields.get(2)?.split_once(':')?.1.parse().ok())
            .flatten()
    })
}

fn fire(pid: u32, mountpoint: &Path, connection: Option<u32>, bound: Duration) {
    eprintln!(
        "watchdog: the mount at {} served its test past {bound:?}; the server's threads:\n{}\
         processes waiting on a FUSE answer:\n{}",
        mountpoint.display(),
        thread_states(pid),
        waiting_on_fuse()
    );
    abort_if_mounted(mountpoint, connection);
}

/// Aborts FUSE connection `connection` while it is still the one mounted at `mountpoint`
/// (the number of a mount gone since may be another test's now), saying what it did.
pub fn abort_if_mounted(mountpoint: &Path, connection: Option<u32>) {
    match connection.filter(|n| connection_of(mountpoint) == Some(*n)) {
        Some(n) => match abort(n) {
            Ok(()) => eprintln!("FUSE connection {n} ({}) aborted", mountpoint.display()),
            Err(e) => eprintln!("could not abort FUSE connection {n}: {e}"),
        },
        None => eprintln!("the FUSE connection of {} is unknown", mountpoint.display()),
    }
}

/// Each thread of `pid`: its name, state, where it waits in the kernel, and its kernel
/// stack where it can be read.
pub fn thread_states(pid: u32) -> String {
    let mut out = String::new();
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return format!("  (process {pid} is gone)\n");
    };
    for task in tasks.flatten() {
        let dir = task.path();
        let read = |name: &str| fs::read_to_string(dir.join(name)).unwrap_or_default();
        let stat = read("stat");
        let state = state_of(&stat);
        out.push_str(&format!(
            "  {} {} state {state} wchan {}\n",
            task.file_name().to_string_lossy(),
            read("comm").trim(),
            read("wchan").trim()
        ));
        for frame in read("stack").lines().take(12) {
            out.push_str(&format!("      {frame}\n"));
        }
    }
    out
}

/// The state letter of a task from its `/proc/…/stat` line (`R`, `S`, `D`, `T`, …).
fn state_of(stat: &str) -> &str {
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .unwrap_or("?")
}

/// Whether every thread of `pid` is stopped (by a signal) or the process is gone.
pub fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return true;
    };
    tasks.flatten().all(|task| {
        let stat = fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        stat.is_empty() || state_of(&stat) == "T"
    })
}

/// Whether every thread of `pid` that serves the kernel's FUSE requests (fuser's
/// `fuser-N`, one at least) waits in the FUSE device for the next one: all the requests and
/// `forget`s queued for the server have then been read and handled (a request queued
/// wakes a waiting thread, and a thread woken shows no wait).
pub fn workers_wait_for_requests(pid: u32) -> bool {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let mut workers = 0;
    for task in tasks.flatten() {
        let read = |name: &str| fs::read_to_string(task.path().join(name)).unwrap_or_default();
        let comm = read("comm");
        let number = comm.trim().strip_prefix("fuser-").unwrap_or_default();
        if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if read("wchan").trim() != "fuse_dev_do_read" {
            return false;
        }
        workers += 1;
    }
    workers > 0
}

/// Whether a kernel wait `wchan` is one on a FUSE server's answer.
fn waits_on_fuse(wchan: &str) -> bool {
    wchan.contains("fuse") || wchan.contains("request_wait_answer")
}

/// The system call in which process `pid` (single-threaded) waits for a FUSE server's
/// answer, if it does: its `/proc/PID/syscall` line (number, arguments, stack and program
/// counters) and its counts of reads and writes. Two equal values taken at two moments
/// show the process in one call all along, unless it made another call just like it in
/// between that moved neither count (a program that opens the file once and reads it
/// does not).
pub fn fuse_call_of(pid: u32) -> Option<String> {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let wchan = fs::read_to_string(proc.join("wchan")).ok()?;
    if !waits_on_fuse(&wchan) {
        return None;
    }
    let call = fs::read_to_string(proc.join("syscall")).ok()?;
    let io = fs::read_to_string(proc.join("io")).ok()?;
    let counts: Vec<&str> = io
        .lines()
        .filter(|l| l.starts_with("syscr:") || l.starts_with("syscw:"))
        .collect();
    Some(format!("{} {}", call.trim(), counts.join(" ")))
}

/// Every process whose kernel wait is in FUSE, with its command line.
fn waiting_on_fuse() -> String {
    let mut out = String::new();
    for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let dir = entry.path();
        let wchan = fs::read_to_string(dir.join("wchan")).unwrap_or_default();
        if waits_on_fuse(&wchan) {
            let cmd = fs::read(dir.join("cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            out.push_str(&format!(
                "  {} {wchan}: {cmd}\n",
                entry.file_name().to_string_lossy()
            ));
        }
    }
    out
}

/// Aborts FUSE connection `n` through `fusectl`, mounting it first where it is not.
fn abort(n: u32) -> std::io::Result<()> {
    let file = PathBuf::from(CONNECTIONS).join(n.to_string()).join("abort");
    if !file.exists() {
        let _ = std::process::Command::new("mount")
            .args(["-t", "fusectl", "fusectl", CONNECTIONS])
            .status();
    }
    fs::write(file, b"1")
}
