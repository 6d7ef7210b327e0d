//! A command's run with the peak resident memory of its process, as GNU `time` reports it.
//!
//! The peak is not taken from `wait4` on a child of the test: a child started with a shared
//! address space (`posix_spawn`) or forked from the test's own inherits, at its `exec`, the
//! peak of the address space it left — the test process's, which holds whatever the tests
//! running beside it do. `time` starts the command from its own small process and reports
//! the command's own peak.

use std::io::{Read, Write};
use std::process::{Command, Stdio};

/// What a run of a command gave.
pub struct Run {
    pub success: bool,
    pub stdout: String,
    /// The peak resident memory of the command's process, in bytes.
    pub peak: u64,
}

/// Runs `command` (its program, arguments and environment) under `time`, with `stdin` as
/// its standard input, collecting its standard output (standard error is the test's).
/// `None` when `time` is not installed (the test is then skipped, or fails under CI).
pub fn run_measured(command: &Command, stdin: &[u8]) -> Option<Run> {
    if !super::tool_ready("time") {
        return None;
    }
    let report = tempfile::NamedTempFile::new().unwrap();
    let mut timed = Command::new("time");
    timed
        .args(["--format", "%M", "--output"])
        .arg(report.path())
        .arg(command.get_program())
        .args(command.get_args())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => timed.env(key, value),
            None => timed.env_remove(key),
        };
    }
    let mut child = timed.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&stdin);
    });
    let mut stdout = Vec::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut stdout)
        .unwrap();
    writer.join().unwrap();
    let status = child.wait().unwrap();
    // The last line is the peak in KiB (a line before it may say the command failed).
    let report = std::fs::read_to_string(report.path()).unwrap();
    let kib: u64 = report
        .lines()
        .last()
        .and_then(|line| line.trim().parse().ok())
        .unwrap_or_else(|| panic!("time reported {report:?}"));
    Some(Run {
        success: status.success(),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        peak: kib * 1024,
    })
}
