//! Running gjcfs on a pseudo-terminal, as a user's shell runs it.

use std::fs::File;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, ExitStatus, Stdio};

/// The environment variables that decide colour, cleared before each run so that the
/// test's own terminal settings do not leak in.
const COLOR_VARIABLES: [&str; 4] = ["NO_COLOR", "CLICOLOR", "CLICOLOR_FORCE", "TERM"];

/// What a run on a terminal wrote, standard output and standard error together (both are
/// the terminal), and how it ended.
pub struct Screen {
    pub text: String,
    pub status: ExitStatus,
}

impl Screen {
    /// Whether anything written was an ANSI escape sequence.
    pub fn has_escapes(&self) -> bool {
        self.text.contains('\u{1b}')
    }
}

/// Runs `gjcfs ARGS…` with standard output and standard error on a new pseudo-terminal
/// (standard input empty), `TERM=xterm-256color` and no colour variables, then `env` on
/// top (`None` removes one), and reads the terminal until the program closes it.
pub fn run_on_terminal(args: &[&str], env: &[(&str, Option<&str>)]) -> Screen {
    let (mut master, slave) = open_pty();
    let mut command = Command::new(super::gjcfs_bin());
    command.args(args).stdin(Stdio::null());
    for var in COLOR_VARIABLES {
        command.env_remove(var);
    }
    command.env("TERM", "xterm-256color");
    for (name, value) in env {
        match value {
            Some(v) => command.env(name, v),
            None => command.env_remove(name),
        };
    }
    command
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave));
    let mut child = command.spawn().expect("gjcfs runs");
    // The child holds the only copies of the terminal's slave side now: reading ends with
    // EIO once it exits.
    drop(command);
    let mut bytes = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match master.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let status = child.wait().unwrap();
    Screen {
        text: String::from_utf8_lossy(&bytes).into_owned(),
        status,
    }
}

/// A new pseudo-terminal: its master side to read, its slave side for the program.
fn open_pty() -> (File, OwnedFd) {
    let (mut master, mut slave) = (-1, -1);
    let mut size = libc::winsize {
        ws_row: 40,
        ws_col: 120,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes the two descriptors it opens; no name is asked for, the
    // default termios is used, and the window size is read from `size`.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            // Mutable pointers: macOS declares them so, and Linux's const ones take them.
            std::ptr::null_mut(),
            &raw mut size,
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors are open and owned by nobody else.
    unsafe { (File::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) }
}
