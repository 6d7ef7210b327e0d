//! The mount server's log: levels and timestamps, a span per kernel request with its
//! errno, chosen by GJCFS_LOG, and `--log-file`.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use crate::common::gjcfs_bin;
use crate::common::mount::{p, run, store, Mount};

/// Whether `line` starts as every log line does: an RFC 3339 UTC timestamp, then a level.
fn stamped(line: &str, level: &str) -> bool {
    let Some((time, rest)) = line.split_once(' ') else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let time_ok = time.len() >= 20
        && time.ends_with('Z')
        && digits(&time[..4])
        && &time[4..5] == "-"
        && &time[10..11] == "T"
        && time[11..time.len() - 1].split([':', '.']).all(digits);
    time_ok && rest.trim_start().starts_with(level)
}

#[test]
fn gjcfs_log_chooses_what_the_server_logs_with_a_span_per_request() {
    require_fuse!();
    let s = store();
    let agent = s.agent_dir();
    let mut mount = Mount::start_with_log(&["--agent-dir", &agent], "debug");
    let missing = mount.path().join("sessions/no-such-session");
    assert!(!run("ls", &[p(&missing)]).status.success());
    let listed = run("ls", &[p(&mount.session_dir(&s.sid))]);
    assert!(listed.status.success());
    assert!(mount.stop().unwrap().success());
    let log = mount.log_text();
    let lines: Vec<&str> = log.lines().collect();
    assert!(
        lines.iter().any(|l| stamped(l, "INFO")
            && l.ends_with(&format!(
                "gjcfs::cli::mount: mounted at {}",
                mount.path().display()
            ))),
        "{log}"
    );
    // The refused lookup: its span names the request, its inode and the errno answered.
    assert!(
        lines.iter().any(|l| stamped(l, "DEBUG")
            && l.contains(r#"request{op="lookup""#)
            && l.contains("errno=2}: gjcfs_fuse: refused error=no such file or directory")),
        "{log}"
    );
    // Requests that succeeded are logged at trace level only.
    assert!(!log.contains("gjcfs_fuse: ok"), "{log}");
    assert!(
        lines.iter().all(|l| l.is_empty() || stamped(l, "")),
        "{log}"
    );

    let mut mount = Mount::start_with_log(&["--agent-dir", &agent], "gjcfs_fuse=trace");
    assert!(run("ls", &[p(&mount.session_dir(&s.sid))]).status.success());
    assert!(mount.stop().unwrap().success());
    let log = mount.log_text();
    assert!(
        log.lines().any(|l| stamped(l, "TRACE")
            && l.contains(r#"request{op="getattr""#)
            && l.ends_with("gjcfs_fuse: ok")),
        "{log}"
    );
    assert!(
        !log.contains("mounted at"),
        "only gjcfs_fuse was asked for: {log}"
    );

    // The default: the server's life and what went wrong, no request.
    let mut mount = Mount::start_with_log(&["--agent-dir", &agent], "info");
    assert!(!run("ls", &[p(&missing)]).status.success());
    assert!(mount.stop().unwrap().success());
    let log = mount.log_text();
    assert!(log.contains(" INFO ") && !log.contains("request{"), "{log}");
    assert!(log.contains("unmounted"), "{log}");
}

#[test]
fn log_file_takes_the_log_appended_and_owner_only() {
    require_fuse!();
    let s = store();
    let agent = s.agent_dir();
    let file = s.tmp.path().join("server.log");
    fs::write(&file, "kept\n").unwrap();
    fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
    let fresh = s.tmp.path().join("fresh.log");
    for (path, earlier) in [(&file, "kept\n"), (&fresh, "")] {
        let mut mount =
            Mount::start_with_log(&["--agent-dir", &agent, "--log-file", p(path)], "info");
        assert!(mount.stop().unwrap().success());
        assert_eq!(mount.log_text(), "", "nothing on stderr");
        let text = fs::read_to_string(path).unwrap();
        assert!(text.starts_with(earlier), "{text}");
        assert!(
            text.contains("mounted at") && text.contains("unmounted"),
            "{text}"
        );
        assert!(!text.contains('\u{1b}'), "no colour in a file: {text:?}");
        let mode = fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", path.display());
    }
}

#[test]
fn a_bad_log_filter_or_log_file_stops_the_mount_before_it_mounts() {
    let tmp = tempfile::tempdir().unwrap();
    let mountpoint = tmp.path().join("mnt");
    let agent = tmp.path().join("agent");
    fs::create_dir_all(agent.join("sessions")).unwrap();
    let link = tmp.path().join("link.log");
    std::os::unix::fs::symlink(tmp.path().join("elsewhere.log"), &link).unwrap();
    for (filter, log_file, why) in [
        (
            "=nonsense[",
            None,
            "GJCFS_LOG=\"=nonsense[\" is not a log filter",
        ),
        ("info", Some(&link), "cannot open the log file"),
        ("info", Some(&tmp.path().to_path_buf()), "log file"),
    ] {
        let mut command = std::process::Command::new(gjcfs_bin());
        command
            .args(["mount", p(&mountpoint), "--agent-dir", p(&agent)])
            .env("GJCFS_LOG", filter);
        if let Some(path) = log_file {
            command.args(["--log-file", p(path)]);
        }
        let out = command.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{why}: {stderr}");
        assert!(stderr.contains(why), "{why}: {stderr}");
        assert!(!mountpoint.exists(), "nothing was mounted or made");
    }
    assert!(
        !tmp.path().join("elsewhere.log").exists(),
        "the symlink was not followed"
    );
}
