//! Shared output helpers for subcommands.

use std::io;
use std::path::Path;

use gjcfs::engine::replay::SkippedLine;

/// How many skipped lines are named one by one before the rest are only counted.
const SKIPPED_SHOWN: usize = 5;

/// Warns on stderr about lines a lenient load skipped.
pub fn warn_skipped(path: &Path, skipped: &[SkippedLine]) {
    for s in skipped.iter().take(SKIPPED_SHOWN) {
        eprintln!(
            "gjcfs: warning: {}: skipped line {}: {}",
            path.display(),
            s.line,
            s.reason
        );
    }
    if skipped.len() > SKIPPED_SHOWN {
        eprintln!(
            "gjcfs: warning: {}: skipped {} more malformed lines",
            path.display(),
            skipped.len() - SKIPPED_SHOWN
        );
    }
}

/// Whether an error is a closed stdout (e.g. piped into `head`), which is not a failure.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.downcast_ref::<io::Error>()
        .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
}
