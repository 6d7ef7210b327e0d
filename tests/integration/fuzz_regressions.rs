//! Saved inputs replayed through the checks of the cargo-fuzz targets (`fuzz/checks.rs`):
//! every file in `tests/fuzz-regressions/<target>/`, and every fixture session file, which
//! seeds the fuzz corpus.

#[path = "../../fuzz/checks.rs"]
mod checks;
#[path = "../../fuzz/vfs_ops.rs"]
mod vfs_ops;

use crate::common::vfs_io;

use std::path::{Path, PathBuf};

fn files_in(dir: &Path, keep: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|p| p.is_file() && keep(p))
        .collect();
    files.sort();
    files
}

fn regressions(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-regressions");
    files_in(&dir.join(target), |_| true)
}

/// Runs `check` on every file, naming the file that fails.
fn run_all(files: &[PathBuf], check: fn(&[u8])) {
    assert!(!files.is_empty(), "no inputs");
    for path in files {
        let data = std::fs::read(path).expect("readable input");
        if std::panic::catch_unwind(|| check(&data)).is_err() {
            panic!("check failed on {}", path.display());
        }
    }
}

#[test]
fn parse_session_regressions() {
    run_all(&regressions("parse_session"), checks::parse_session);
}

#[test]
fn json_roundtrip_regressions() {
    run_all(&regressions("json_roundtrip"), checks::json_roundtrip);
}

#[test]
fn search_text_regressions() {
    run_all(&regressions("search_text"), checks::search_text);
}

#[test]
fn vfs_ops_regressions() {
    run_all(&regressions("vfs_ops"), vfs_ops::vfs_ops);
}

#[test]
fn fuzz_checks_hold_on_every_fixture_session() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let is_jsonl = |p: &Path| p.extension().is_some_and(|e| e == "jsonl");
    let mut files = files_in(&fixtures, is_jsonl);
    files.extend(files_in(&fixtures.join("real"), is_jsonl));
    run_all(&files, checks::parse_session);
}
