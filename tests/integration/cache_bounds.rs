//! The store's saved listing and usage are read only as far as the store justifies: a
//! file extended to gigabytes (damaged, or left by another store) is never read whole; it
//! is refused, the command answers from the sessions themselves, and the file is replaced.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::gjcfs_bin;
use crate::common::mount::store;
use crate::common::peak::{run_measured, Run};

/// What the saved files are extended to (sparse: no disk is used).
const EXTENDED: u64 = 1 << 30;

/// The resident memory listing a small store may take: far below a saved file read whole.
const PEAK: u64 = 256 << 20;

/// `gjcfs ls --all --long` over the store at `agent` with its caches under `cache`.
fn ls_long(agent: &str, cache: &Path) -> Option<Run> {
    let mut command = Command::new(gjcfs_bin());
    command
        .env("XDG_CACHE_HOME", cache)
        .env("MALLOC_ARENA_MAX", "2")
        .args(["ls", "--all", "--long", "--agent-dir", agent]);
    run_measured(&command, b"")
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
    let Some(first) = ls_long(&agent, &cache) else {
        return;
    };
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
    let again = ls_long(&agent, &cache).unwrap();
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
