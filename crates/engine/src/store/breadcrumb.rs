//! Terminal breadcrumbs: which session each terminal used last, so that
//! "continue" resumes the right one.
//!
//! - A terminal is named `tmux-$TMUX_PANE` (inside tmux), else after its tty path (`pts-3`),
//!   else `kitty-…`, `tmux-…`, `apple-…` or `wt-…` from the terminal's variables; without any,
//!   there is no breadcrumb.
//! - The breadcrumb `<terminal-sessions>/<terminal>` holds `<cwd>\n<session file>\n`. Writing
//!   is best effort. Reading trims the content and needs at least two lines.
//! - On Windows there is no tty path (a console has none), so the name comes from the
//!   variables (`wt-$WT_SESSION` in Windows Terminal); a name holding a path separator of
//!   the platform (`/`, and on Windows `\` and `:`) is no name.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

use crate::storage::{FileStorage, OpenMode, SessionStorage};

/// What a terminal's name never holds: a path separator or a NUL.
#[cfg(not(windows))]
const NOT_IN_ID: [char; 2] = ['/', '\0'];
#[cfg(windows)]
const NOT_IN_ID: [char; 4] = ['/', '\\', ':', '\0'];

/// A terminal's name from its environment and its stdin tty path.
pub fn terminal_id(vars: &HashMap<String, String>, tty: Option<&str>) -> Option<String> {
    let var = |k: &str| vars.get(k).filter(|v| !v.is_empty());
    if let (Some(_), Some(pane)) = (var("TMUX"), var("TMUX_PANE")) {
        return Some(format!("tmux-{pane}"));
    }
    if let Some(tty) = tty {
        let name = tty.strip_prefix("/dev/").unwrap_or(tty).replace('/', "-");
        if !name.is_empty() {
            return Some(name);
        }
    }
    [
        ("KITTY_WINDOW_ID", "kitty"),
        ("TMUX_PANE", "tmux"),
        ("TERM_SESSION_ID", "apple"),
        ("WT_SESSION", "wt"),
    ]
    .iter()
    .find_map(|(k, prefix)| var(k).map(|v| format!("{prefix}-{v}")))
    .filter(|id| !id.contains(NOT_IN_ID) && id != "." && id != "..")
}

/// The tty on stdin, if any.
pub fn stdin_tty() -> Option<String> {
    crate::storage::sys::os::stdin_tty()
}

/// The current terminal's name.
pub fn current_terminal_id() -> Option<String> {
    let vars: HashMap<String, String> = std::env::vars().collect();
    terminal_id(&vars, stdin_tty().as_deref())
}

/// Records that `terminal` uses `session_file` in `cwd` (best effort: errors are returned
/// for the caller to ignore or report).
pub fn write_breadcrumb(
    dir: &Path,
    terminal: &str,
    cwd: &str,
    session_file: &Path,
) -> io::Result<()> {
    write_breadcrumb_in(&FileStorage, dir, terminal, cwd, session_file)
}

/// [`write_breadcrumb`] in `storage`: a new owner-only temp file (not fsynced: a breadcrumb
/// is a hint) renamed over the terminal's breadcrumb.
pub fn write_breadcrumb_in(
    storage: &dyn SessionStorage,
    dir: &Path,
    terminal: &str,
    cwd: &str,
    session_file: &Path,
) -> io::Result<()> {
    storage.ensure_dir(dir)?;
    let path = dir.join(terminal);
    let temp = dir.join(format!(
        ".{terminal}.{}.tmp",
        crate::format::ids::snowflake()
    ));
    let mut file = storage.open_writer(&temp, OpenMode::CreateNew)?;
    let bytes = format!("{cwd}\n{}\n", session_file.display());
    let written = file.write_all(bytes.as_bytes());
    let closed = file.close();
    let written = written
        .and(closed)
        .and_then(|()| storage.rename(&temp, &path));
    if written.is_err() {
        let _ = storage.unlink(&temp);
    }
    written
}

/// The `(cwd, session file)` a terminal's breadcrumb names, if it is well formed.
pub fn read_breadcrumb(dir: &Path, terminal: &str) -> Option<(String, PathBuf)> {
    read_breadcrumb_in(&FileStorage, dir, terminal)
}

/// [`read_breadcrumb`] in `storage` (never following a symlink, refusing anything but a
/// regular file).
pub fn read_breadcrumb_in(
    storage: &dyn SessionStorage,
    dir: &Path,
    terminal: &str,
) -> Option<(String, PathBuf)> {
    let bytes = storage.read(&dir.join(terminal)).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let mut lines = text.trim().split('\n');
    let cwd = lines.next()?.trim_end_matches('\r').to_owned();
    let file = lines.next()?.trim_end_matches('\r');
    (!cwd.is_empty() && !file.is_empty()).then(|| (cwd, PathBuf::from(file)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn terminal_names_follow_the_preference_order() {
        assert_eq!(
            terminal_id(
                &vars(&[("TMUX", "x"), ("TMUX_PANE", "%3")]),
                Some("/dev/pts/1")
            )
            .as_deref(),
            Some("tmux-%3")
        );
        assert_eq!(
            terminal_id(&vars(&[]), Some("/dev/pts/3")).as_deref(),
            Some("pts-3")
        );
        assert_eq!(
            terminal_id(&vars(&[("KITTY_WINDOW_ID", "7")]), None).as_deref(),
            Some("kitty-7")
        );
        assert_eq!(
            terminal_id(&vars(&[("TMUX_PANE", "%1")]), None).as_deref(),
            Some("tmux-%1")
        );
        assert_eq!(
            terminal_id(&vars(&[("WT_SESSION", "g")]), None).as_deref(),
            Some("wt-g")
        );
        assert_eq!(terminal_id(&vars(&[]), None), None);
        assert_eq!(terminal_id(&vars(&[("WT_SESSION", "a/b")]), None), None);
        // A backslash or a colon would name another file, or a stream, on Windows.
        let windows_only = terminal_id(&vars(&[("WT_SESSION", "a\\b")]), None);
        assert_eq!(windows_only.is_none(), cfg!(windows));
        let windows_only = terminal_id(&vars(&[("WT_SESSION", "a:b")]), None);
        assert_eq!(windows_only.is_none(), cfg!(windows));
        #[cfg(windows)]
        assert_eq!(stdin_tty(), None);
    }

    #[test]
    fn breadcrumbs_round_trip_and_bad_ones_are_ignored() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("terminal-sessions");
        write_breadcrumb(&dir, "pts-1", "/work", Path::new("/s/a.jsonl")).unwrap();
        assert_eq!(
            read_breadcrumb(&dir, "pts-1"),
            Some(("/work".into(), PathBuf::from("/s/a.jsonl")))
        );
        crate::storage::write_new_durable(&FileStorage, &dir.join("pts-2"), b"/only-one-line\n")
            .unwrap();
        assert_eq!(read_breadcrumb(&dir, "pts-2"), None);
        assert_eq!(read_breadcrumb(&dir, "pts-9"), None);
        let entries = FileStorage.list_entries(&dir).unwrap();
        assert_eq!(entries.len(), 2, "no temp files left: {entries:?}");
    }

    #[test]
    fn a_failed_breadcrumb_write_leaves_no_temp_file() {
        use crate::storage::{Fault, FaultKind, MemoryStorage};
        let dir = Path::new("/agent/terminal-sessions");
        for at in 0..5 {
            let storage = MemoryStorage::new();
            storage.set_fault(Some(Fault {
                at,
                kind: FaultKind::ShortWrite,
            }));
            let written = write_breadcrumb_in(&storage, dir, "pts-1", "/w", Path::new("/s/a"));
            storage.set_fault(None);
            let crumb = read_breadcrumb_in(&storage, dir, "pts-1");
            match written {
                Ok(()) => assert_eq!(crumb, Some(("/w".into(), PathBuf::from("/s/a")))),
                Err(_) => assert_eq!(crumb, None, "fault at {at}"),
            }
            assert!(
                storage.paths().len() <= 1,
                "fault at {at}: {:?}",
                storage.paths()
            );
        }
    }
}
