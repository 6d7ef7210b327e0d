//! How `gjcfs mount` on Windows starts the Dokan mount server, `gjcfs-dokan.exe`: its
//! arguments, and what its exit means. The server is a program of its own because it links
//! Dokan's library (`dokan2.dll`); `gjcfs.exe` does not, so every other command runs on a
//! machine without Dokan, and a mount there fails with a clear error instead.
//!
//! Platform-neutral (tested everywhere); `mount_windows.rs` runs it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The server's file name.
pub const SERVER: &str = "gjcfs-dokan.exe";

/// The exit status Windows gives a program it could not start because a DLL it imports is
/// missing (`STATUS_DLL_NOT_FOUND`).
pub const DLL_NOT_FOUND: u32 = 0xC000_0135;

/// What the server serves.
pub struct Serve<'a> {
    pub mountpoint: &'a str,
    /// `--session-dir` (else the agent's sessions root).
    pub session_dir: Option<&'a Path>,
    pub sessions_root: &'a Path,
    pub blob_dir: &'a Path,
    pub history_db: &'a Path,
    pub search_index: Option<&'a Path>,
    pub read_only: bool,
    /// `--redact`.
    pub redact: bool,
    /// `--redact-rules` (or the default rules file), under `--redact`.
    pub redact_rules: Option<&'a Path>,
    /// `--log-file`.
    pub log_file: Option<&'a Path>,
}

/// The server's arguments for `serve`.
pub fn serve_args(s: &Serve<'_>) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["serve".into(), s.mountpoint.into()];
    let mut pair = |flag: &str, value: &Path| {
        args.push(flag.into());
        args.push(value.as_os_str().to_owned());
    };
    match s.session_dir {
        Some(dir) => pair("--session-dir", dir),
        None => pair("--sessions-root", s.sessions_root),
    }
    pair("--blob-dir", s.blob_dir);
    pair("--history-db", s.history_db);
    if let Some(index) = s.search_index {
        pair("--search-index", index);
    }
    if let Some(file) = s.log_file {
        pair("--log-file", file);
    }
    if s.read_only {
        args.push("--read-only".into());
    }
    if s.redact {
        args.push("--redact".into());
        if let Some(file) = s.redact_rules {
            args.push("--redact-rules".into());
            args.push(file.as_os_str().to_owned());
        }
    }
    args
}

/// The server next to the running `gjcfs` (where a build and an install put both).
pub fn server_beside(gjcfs: &Path) -> Option<PathBuf> {
    Some(gjcfs.parent()?.join(SERVER))
}

/// What a failed server exit means to the user, when more than its own message says.
pub fn explain_exit(code: Option<i32>) -> Option<String> {
    match code {
        Some(code) if code as u32 == DLL_NOT_FOUND => Some(
            "Dokan is not installed: its library dokan2.dll was not found. Install Dokan 2 \
             (https://github.com/dokan-dev/dokan/releases) and mount again"
                .to_owned(),
        ),
        None => Some("the mount server ended without an exit status".to_owned()),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_is_given_the_store_resolved() {
        let s = Serve {
            mountpoint: "M:",
            session_dir: None,
            sessions_root: Path::new("C:/a/sessions"),
            blob_dir: Path::new("C:/a/blobs"),
            history_db: Path::new("C:/a/history.db"),
            search_index: Some(Path::new("C:/cache/index")),
            read_only: true,
            redact: true,
            redact_rules: Some(Path::new("C:/cfg/secret-rules.toml")),
            log_file: Some(Path::new("C:/logs/mount.log")),
        };
        let args: Vec<String> = serve_args(&s)
            .into_iter()
            .map(|a| a.into_string().expect("utf-8"))
            .collect();
        assert_eq!(
            args,
            [
                "serve",
                "M:",
                "--sessions-root",
                "C:/a/sessions",
                "--blob-dir",
                "C:/a/blobs",
                "--history-db",
                "C:/a/history.db",
                "--search-index",
                "C:/cache/index",
                "--log-file",
                "C:/logs/mount.log",
                "--read-only",
                "--redact",
                "--redact-rules",
                "C:/cfg/secret-rules.toml"
            ]
        );
        let dir = Serve {
            session_dir: Some(Path::new("D:/s")),
            search_index: None,
            read_only: false,
            redact: false,
            redact_rules: None,
            log_file: None,
            ..s
        };
        let args = serve_args(&dir);
        assert_eq!(args[2..4], ["--session-dir", "D:/s"].map(OsString::from));
        assert_eq!(args.len(), 8);
    }

    #[test]
    fn a_missing_dokan_library_is_named() {
        let missing = explain_exit(Some(0xC000_0135_u32 as i32)).expect("explained");
        assert!(missing.contains("Dokan is not installed"), "{missing}");
        assert_eq!(explain_exit(Some(1)), None, "the server said why itself");
        assert!(explain_exit(None).is_some());
        assert_eq!(
            server_beside(Path::new("/x/bin/gjcfs.exe")),
            Some(PathBuf::from("/x/bin/gjcfs-dokan.exe"))
        );
    }
}
