//! Shared output helpers for subcommands.

use std::borrow::Cow;
use std::io;
use std::path::Path;

use gjcfs_engine::read::replay::SkippedLine;
use gjcfs_engine::LoadedSession;

use super::style;

/// The title a table shows for a session ([`gjcfs_engine::store::discovery::shown_title`]): its
/// first line, as one line of at most `max` characters (controls and escape sequences
/// dropped), safe for a terminal; `(untitled)` with neither a title nor a prompt.
pub fn title_cell(title: Option<&str>, first_prompt: Option<&str>, max: usize) -> String {
    let line = gjcfs_engine::views::title_line(title, first_prompt, max);
    if line.is_empty() {
        return "(untitled)".to_owned();
    }
    terminal_safe(&line).into_owned()
}

pub use gjcfs_engine::views::token_count;

/// How many skipped lines are named one by one before the rest are only counted.
const SKIPPED_SHOWN: usize = 5;

/// Lets go of `value` without freeing it (it stays reachable through the reference
/// returned), for what a command holds until it ends: the listing or usage of every
/// session and their saved caches, the one session it reads. Freeing tens of thousands of
/// records one by one cost `gjcfs ls --all` an eighth of its time at 50,000 sessions, and a
/// 300 MB session a tenth of a second; the process's end gives all of it back at once.
/// Never for what a caller could call for again and again.
pub fn left_to_exit<T>(value: T) -> &'static mut T {
    Box::leak(Box::new(value))
}

/// Loads the session one command reads, warning about the lines the lenient load skipped.
/// The session lives until the process exits ([`left_to_exit`]).
pub fn load_for_command(path: &Path) -> anyhow::Result<&'static mut LoadedSession> {
    let loaded = left_to_exit(gjcfs_engine::load_session(path)?);
    warn_skipped(path, &loaded.skipped);
    Ok(loaded)
}

/// Warns on stderr about lines a lenient load skipped.
pub fn warn_skipped(path: &Path, skipped: &[SkippedLine]) {
    for s in skipped.iter().take(SKIPPED_SHOWN) {
        warn(format_args!(
            "{}: skipped line {}: {}",
            path.display(),
            s.line,
            s.reason
        ));
    }
    if skipped.len() > SKIPPED_SHOWN {
        warn(format_args!(
            "{}: skipped {} more malformed lines",
            path.display(),
            skipped.len() - SKIPPED_SHOWN
        ));
    }
}

/// Prints `gjcfs: warning: MESSAGE` on stderr (`warning:` coloured where colour is on).
pub fn warn(message: impl std::fmt::Display) {
    let label = style::paint("warning:", style::WARNING, style::stderr_colored());
    eprintln!("gjcfs: {label} {message}");
}

/// Prints `gjcfs: error: ` and the error with its causes on one line on stderr.
pub fn error(err: &anyhow::Error) {
    let label = style::paint("error:", style::ERROR, style::stderr_colored());
    eprintln!("gjcfs: {label} {}", error_line(err));
}

/// Whether an error is a closed stdout (e.g. piped into `head`), which is not a failure:
/// a broken pipe anywhere in its chain, under any context or typed error that wraps it.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
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

/// Whether `c` changes what a terminal shows instead of being shown: a control character
/// (C0, DEL, C1) or a Unicode bidirectional control (marks, embeddings, overrides and
/// isolates), which reorders the text after it.
fn is_terminal_control(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` as it may be printed in a table on a terminal: every character of
/// [`is_terminal_control`] shown as an escape (`\n`, `\r`, `\t`, else `\u{1b}`), so text
/// read from files can neither recolour the screen, move the cursor, reorder a line nor
/// split one row in two. JSON output needs none of this: its writer escapes on its own.
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_terminal_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_terminal_control(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A query that cannot be searched: the command exits with status 2.
#[derive(Debug)]
pub struct BadQuery(pub String);

impl std::fmt::Display for BadQuery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadQuery {}

/// Whether `err` is a bad query (exit status 2).
pub fn is_bad_query(err: &anyhow::Error) -> bool {
    err.downcast_ref::<BadQuery>().is_some()
        || err.downcast_ref::<gjcfs_search::QueryError>().is_some()
}

/// Arguments the command refuses (exit status 2, as a usage error of the parser's own).
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Whether `err` is a usage error (exit status 2): refused arguments or a bad query.
pub fn is_usage_error(err: &anyhow::Error) -> bool {
    err.downcast_ref::<UsageError>().is_some() || is_bad_query(err)
}

/// Nothing was found where the command looked (exit status 1, as `grep`'s): the text says
/// where it looked and what to try.
#[derive(Debug)]
pub struct NothingFound(pub String);

impl std::fmt::Display for NothingFound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NothingFound {}

/// Whether `err` says that nothing was found (exit status 1, said without "error").
pub fn is_nothing_found(err: &anyhow::Error) -> bool {
    err.downcast_ref::<NothingFound>().is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_safe_escapes_controls_and_bidi_and_keeps_the_rest() {
        assert_eq!(terminal_safe("plain · text"), "plain · text");
        assert_eq!(
            terminal_safe("a\x1b[31mb\rc\nd\te\u{7f}\u{9b}\u{202e}f\u{2066}"),
            "a\\u{1b}[31mb\\rc\\nd\\te\\u{7f}\\u{9b}\\u{202e}f\\u{2066}"
        );
    }

    #[test]
    fn a_broken_pipe_is_found_under_any_context_or_typed_error() {
        let pipe = || io::Error::from(io::ErrorKind::BrokenPipe);
        assert!(is_broken_pipe(&anyhow::Error::new(pipe())));
        let wrapped = anyhow::Error::new(pipe()).context("writing the hits");
        assert!(is_broken_pipe(&wrapped.context("search")));
        let typed = gjcfs_engine::LoadError::Io {
            path: "out".into(),
            source: pipe(),
        };
        assert!(is_broken_pipe(&anyhow::Error::new(typed)));
        let other = anyhow::Error::new(io::Error::from(io::ErrorKind::PermissionDenied));
        assert!(!is_broken_pipe(&other.context("writing")));
    }
}
