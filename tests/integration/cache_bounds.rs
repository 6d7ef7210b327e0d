//! The store's saved listing and usage are read only as far as the store justifies: a
//! file extended to gigabytes (damaged, or left by another store) is never read whole; it
//! is refused, the command answers from the sessions themselves, and the file is replaced.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::gjcfs_bin;
use crate::common::mount::store;

/// What the saved files are extended to (sparse: no disk is used).
const EXTENDED: u64 = 1 << 30;

/// What a run of the command gave.
struct Run {
    success: bool,
    stdout: String,
    /// The peak resident memory of the command's process, in bytes.
    peak: u64,
}

/// The resident memory listing a small store may take: far below a saved file read whole.
const PEAK: u64 = 256 << 20;

/// `gjcfs ls --all --long` over the store at `agent` with its caches under `cache`.
fn ls_long(agent: &str, cache: &Path) -> Run {
    let mut command = Command::new(gjcfs_bin());
    command
        .env("XDG_CACHE_HOME", cache)
        .env("MALLOC_ARENA_MAX", "2")
        .args(["ls", "--all", "--long", "--agent-dir", agent])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    #[allow(clippy::zombie_processes)] // reaped by the wait4 below
    let mut child = command.spawn().unwrap();
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    // The child's own peak memory: wait4 on its pid (the `Child` is then not waited on).
    let mut status = 0;
    // SAFETY: a plain C struct, for which all zeroes is a value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the pid of our own child, and out-pointers to live locals.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(
        pid,
        child.id() as i32,
        "{}",
        std::io::Error::last_os_error()
    );
    Run {
        success: libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        stdout,
        peak: usage.ru_maxrss as u64 * 1024,
    }
}

/// Every file under `dir` named `name`.
fn files_named(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n == name) {
                found.push(path);
            }
        }
    }
    found
}

#[test]
fn saved_files_extended_to_gigabytes_are_refused_and_replaced() {
    let s = store();
    let cache = s.tmp.path().join("cache");
    let agent = s.agent_dir();
    let first = ls_long(&agent, &cache);
    assert!(first.success);
    let saved: Vec<PathBuf> = ["listing", "usage"]
        .iter()
        .flat_map(|name| files_named(&cache, name))
        .collect();
    assert_eq!(saved.len(), 2, "{saved:?}");
    for file in &saved {
        fs::OpenOptions::new()
            .write(true)
            .open(file)
            .unwrap()
            .set_len(EXTENDED)
            .unwrap();
    }
    let again = ls_long(&agent, &cache);
    assert!(again.success);
    assert_eq!(again.stdout, first.stdout);
    assert!(
        again.peak < PEAK,
        "{} MiB resident (before: {} MiB)",
        again.peak >> 20,
        first.peak >> 20
    );
    for file in &saved {
        let len = fs::metadata(file).unwrap().len();
        assert!(len < 1 << 20, "{} is {len} bytes", file.display());
    }
}
