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

/// The error and its causes on one line, leaving out a cause whose text the line already
/// holds (typed errors name their cause in their own message).
pub fn error_line(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if !line.contains(&text) {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(&text);
        }
    }
    line
}
