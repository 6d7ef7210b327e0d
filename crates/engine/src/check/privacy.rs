//! Owner-only checks of what the agent keeps private: kind, owner, mode, links, ACL; and of
//! the prompt history, which the agent creates under the umask: its mode alone.

use std::path::Path;

use super::{Repair, Report, Severity};
use crate::storage::{EntryKind, Expected, SessionStorage};

/// Owner-only checks of a managed file or directory: a wrong mode is restored by a repair
/// (the file is ours and of the right kind), everything else is left.
pub(super) fn privacy_of(
    storage: &dyn SessionStorage,
    path: &Path,
    dir: bool,
    report: &mut Report,
) {
    let stat = match storage.lstat(path) {
        Ok(stat) => stat,
        Err(e) => {
            report.add(
                Severity::Error,
                "unreadable",
                path,
                format!("cannot look at it: {e}"),
                None,
            );
            return;
        }
    };
    let refused = "the agent and gjcfs refuse it until it is put right";
    let want_kind = if dir { EntryKind::Dir } else { EntryKind::File };
    if stat.kind != want_kind {
        let what = format!(
            "not a {}: {refused}",
            if dir { "directory" } else { "regular file" }
        );
        report.add(Severity::Error, "unsafe_file", path, what, None);
        return;
    }
    if stat.owner != storage.user() {
        let what = format!("owned by uid {}, not by this user: {refused}", stat.owner);
        report.add(Severity::Error, "foreign_owner", path, what, None);
        return;
    }
    let want = if dir { 0o700 } else { 0o600 };
    if stat.mode != want {
        let what = format!(
            "mode {:o}, not {want:o}: {}",
            stat.mode,
            if stat.mode & 0o077 != 0 {
                "other users may read it, and the agent and gjcfs refuse it"
            } else {
                "the agent and gjcfs refuse it"
            }
        );
        // A file with other names is left: its mode is theirs too (reported below).
        let repair = (dir || stat.links == 1).then_some(Repair::RestoreMode {
            from: stat.mode,
            to: want,
            found: Expected::of(&stat),
        });
        report.add(Severity::Warning, "wide_mode", path, what, repair);
    }
    if !dir && stat.links > 1 {
        let what = format!(
            "{} hard links: another name shares its bytes; {refused}",
            stat.links
        );
        report.add(Severity::Error, "unsafe_file", path, what, None);
    }
    match storage.has_acl(path) {
        Ok(false) => {}
        Ok(true) => report.add(
            Severity::Error,
            "unsafe_file",
            path,
            format!("it carries an ACL that may let others in: {refused}"),
            None,
        ),
        Err(e) => report.add(
            Severity::Warning,
            "unreadable",
            path,
            format!("its ACL cannot be read ({e}): the agent and gjcfs refuse it"),
            None,
        ),
    }
}

/// The prompt history database at `path` and its `-wal`, `-shm` and `-journal` files: each
/// that group or others may read or write is reported (`wide_history`), and left. The agent
/// creates them under the umask and keeps using them; gjcfs never changes the agent's files
/// that it does not manage (a person runs `chmod`). What is missing is not looked at further.
pub(super) fn history_privacy(storage: &dyn SessionStorage, path: &Path, report: &mut Report) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let file = Path::new(&name);
        let stat = match storage.lstat(file) {
            Ok(stat) => stat,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                let what = format!("cannot look at it: {e}");
                report.add(Severity::Warning, "unreadable", file, what, None);
                continue;
            }
        };
        if stat.kind != EntryKind::File || stat.mode & 0o077 == 0 {
            continue;
        }
        let what = format!(
            "mode {:o}: {} may {} the prompts it holds; `chmod 600` it (gjcfs leaves the \
             agent's prompt history as it is)",
            stat.mode,
            if stat.mode & 0o007 != 0 {
                "every user"
            } else {
                "the file's group"
            },
            if stat.mode & 0o022 != 0 {
                "read and change"
            } else {
                "read"
            },
        );
        report.add(Severity::Warning, "wide_history", file, what, None);
    }
}
