//! The mount's lifecycle on Linux (and, where the same tools exist, other Unix systems):
//! checking that FUSE is installed, refusing a mountpoint inside the store or around it,
//! clearing a mount left by a killed server, the termination signals, and unmounting
//! through `fusermount3`. What the caller should tell the user is handed to a `report`
//! callback; nothing here prints.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Why a mount cannot start or stop.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    /// FUSE's device or its helper program is missing (the message says what to install).
    #[error("{0}")]
    Missing(String),
    /// The mountpoint or the request is refused (the message says why).
    #[error("{0}")]
    Refused(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

/// The packages that provide FUSE's userspace parts, for error messages.
const FUSE_PACKAGE: &str = "install the fuse3 package (Debian/Ubuntu: apt install fuse3)";

/// Fails with what to install when the FUSE device or `fusermount3` is missing.
pub fn check_fuse_installed() -> Result<(), MountError> {
    if !Path::new("/dev/fuse").exists() {
        return Err(MountError::Missing(format!(
            "/dev/fuse does not exist: the kernel's FUSE module is not loaded (modprobe fuse) \
             or, in a container, the device was not passed in; {FUSE_PACKAGE}"
        )));
    }
    if find_program("fusermount3").is_none() {
        return Err(MountError::Missing(format!(
            "fusermount3 was not found in PATH; {FUSE_PACKAGE}"
        )));
    }
    Ok(())
}

/// The first executable file named `name` in `PATH`.
fn find_program(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// `path` (absolute) with every symlink resolved, as far as it exists: its nearest
/// existing ancestor canonicalized, the rest appended (`..` folded).
fn resolved(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut rest = Vec::new();
    let mut existing = path.to_owned();
    let mut out = loop {
        // A dead mount fails too (ENOTCONN); its parent is resolved instead.
        if let Ok(real) = existing.canonicalize() {
            break real;
        }
        match existing.components().next_back() {
            Some(last @ (Component::Normal(_) | Component::ParentDir | Component::CurDir)) => {
                rest.push(last.as_os_str().to_owned());
                existing.pop();
            }
            _ => break existing,
        }
    };
    for name in rest.iter().rev() {
        if name == ".." {
            out.pop();
        } else if name != "." {
            out.push(name);
        }
    }
    out
}

/// Refuses a mountpoint inside (or equal to) a directory the store is read from — the
/// server would wait on its own mount at the first access and never answer — and a store
/// inside the mountpoint, which the mount would hide.
pub fn refuse_overlap(mountpoint: &Path, store: &[(&str, PathBuf)]) -> Result<(), MountError> {
    let mount = resolved(mountpoint);
    for (what, dir) in store {
        let dir_path = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
        let dir = resolved(&dir_path);
        if mount.starts_with(&dir) {
            return Err(MountError::Refused(format!(
                "{}: the mountpoint is inside {what} {}; mount outside the store",
                mountpoint.display(),
                dir_path.display()
            )));
        }
        if dir.starts_with(&mount) {
            return Err(MountError::Refused(format!(
                "{}: {what} {} is inside the mountpoint; mount outside the store",
                mountpoint.display(),
                dir_path.display()
            )));
        }
    }
    Ok(())
}

/// `fusermount3 -u MOUNTPOINT` for a served mount; the server sees its session end.
pub fn umount(mountpoint: &Path) -> Result<(), MountError> {
    if !is_mounted(mountpoint) {
        return Err(MountError::Refused(format!(
            "{}: not mounted",
            mountpoint.display()
        )));
    }
    let status = Command::new("fusermount3")
        .arg("-u")
        .arg(mountpoint)
        .status()
        .map_err(|source| MountError::Io {
            what: "cannot run fusermount3".into(),
            source,
        })?;
    if !status.success() {
        return Err(MountError::Refused(format!(
            "fusermount3 -u {} failed ({status})",
            mountpoint.display()
        )));
    }
    Ok(())
}

/// Blocks SIGINT, SIGTERM and SIGHUP in this thread and every thread it starts later, and
/// returns the set for [`wait_for_signal`].
pub fn block_termination_signals() -> Result<Signals, MountError> {
    // SAFETY: sigset_t is plain data initialized by sigemptyset before use; the calls only
    // touch the set and this thread's mask.
    unsafe {
        // A shell starts background jobs with SIGINT ignored, and an ignored signal is
        // discarded even while blocked: restore the default so sigwait receives it.
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::signal(signal, libc::SIG_DFL);
        }
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGHUP);
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            return Err(MountError::Io {
                what: "cannot block signals".into(),
                source: std::io::Error::from_raw_os_error(rc),
            });
        }
        Ok(Signals(set))
    }
}

/// The termination signals, blocked ([`block_termination_signals`]).
#[derive(Clone, Copy)]
pub struct Signals(libc::sigset_t);

/// Waits for one of `signals`; its name (`SIGINT`, `SIGTERM`, `SIGHUP`).
pub fn wait_for_signal(signals: &Signals) -> Option<&'static str> {
    let mut signal = 0;
    // SAFETY: `signals` holds an initialized set; `signal` is a valid out pointer.
    if unsafe { libc::sigwait(&signals.0, &mut signal) } != 0 {
        return None;
    }
    Some(match signal {
        libc::SIGINT => "SIGINT",
        libc::SIGHUP => "SIGHUP",
        _ => "SIGTERM",
    })
}

/// Whether fusermount3 will accept `auto_unmount` (it needs `allow_other`: root, or
/// `user_allow_other` in /etc/fuse.conf).
pub fn auto_unmount_allowed() -> bool {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    std::fs::read_to_string("/etc/fuse.conf")
        .is_ok_and(|text| text.lines().any(|line| line.trim() == "user_allow_other"))
}

/// `/proc/mounts` escapes space, tab, newline and backslash as octal.
fn mounts_escape(path: &Path) -> String {
    let mut out = String::new();
    for c in path.to_string_lossy().chars() {
        match c {
            ' ' => out.push_str("\\040"),
            '\t' => out.push_str("\\011"),
            '\n' => out.push_str("\\012"),
            '\\' => out.push_str("\\134"),
            c => out.push(c),
        }
    }
    out
}

/// Whether `path` is a mountpoint in `/proc/mounts`.
pub fn is_mounted(path: &Path) -> bool {
    let wanted = mounts_escape(path);
    std::fs::read_to_string("/proc/mounts").is_ok_and(|text| {
        text.lines()
            .any(|line| line.split(' ').nth(1) == Some(wanted.as_str()))
    })
}

/// The `f_type` statfs reports for a FUSE filesystem.
#[cfg(target_os = "linux")]
const FUSE_SUPER_MAGIC: i64 = 0x6573_5546;

/// Whether a FUSE server answers for the filesystem at `path`: statfs always reaches it (a
/// dead mount's cached names and attributes may still answer a stat), and the filesystem
/// it reports must be FUSE — a mount that vanished between a look at `/proc/mounts` and
/// this call leaves the plain directory underneath, whose statfs succeeds too.
pub fn answers(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a valid NUL-terminated path and a zeroed out-struct.
    unsafe {
        let mut buf: libc::statfs = std::mem::zeroed();
        if libc::statfs(c_path.as_ptr(), &mut buf) != 0 {
            return false;
        }
        is_fuse(&buf)
    }
}

#[cfg(target_os = "linux")]
fn is_fuse(buf: &libc::statfs) -> bool {
    #[allow(clippy::unnecessary_cast)] // `f_type`'s width differs between libcs.
    let kind = buf.f_type as i64;
    kind == FUSE_SUPER_MAGIC
}

#[cfg(not(target_os = "linux"))]
fn is_fuse(buf: &libc::statfs) -> bool {
    let name: Vec<u8> = buf
        .f_fstypename
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    name.ends_with(b"fuse")
}

/// How long a dead server's mount is given to go away by itself.
const STALE_PATIENCE: Duration = Duration::from_secs(2);

/// A mount left at the mountpoint by a crashed earlier run ("transport endpoint is not
/// connected") is detached before mounting again. The dead server's auto-unmount watcher
/// may be about to remove it: it is given a moment first, because a watcher that runs
/// after the new mount would unmount that one instead. A mount whose server still answers
/// is an error.
pub fn clear_stale_mount(
    mountpoint: &Path,
    report: &mut dyn FnMut(String),
) -> Result<(), MountError> {
    let started = Instant::now();
    while is_mounted(mountpoint) {
        if answers(mountpoint) {
            return Err(MountError::Refused(format!(
                "{}: already mounted and served; run `gjcfs umount {}` first",
                mountpoint.display(),
                mountpoint.display()
            )));
        }
        if started.elapsed() >= STALE_PATIENCE {
            report(format!(
                "{} holds a dead mount; detaching it",
                mountpoint.display()
            ));
            lazy_unmount(mountpoint, report);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// `fusermount3 -u`, and if the mount is busy, `fusermount3 -uz` (detached now, gone when
/// the last open file closes).
pub fn unmount(mountpoint: &Path, report: &mut dyn FnMut(String)) {
    let status = Command::new("fusermount3")
        .arg("-u")
        .arg(mountpoint)
        .status();
    if !matches!(status, Ok(s) if s.success()) && is_mounted(mountpoint) {
        report("unmount failed; detaching lazily".to_owned());
        lazy_unmount(mountpoint, report);
    }
}

fn lazy_unmount(mountpoint: &Path, report: &mut dyn FnMut(String)) {
    let status = Command::new("fusermount3")
        .arg("-uz")
        .arg(mountpoint)
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        report(format!("fusermount3 -uz {} failed", mountpoint.display()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_directory_or_a_missing_path_is_no_served_mount() {
        // The directory a vanished mount leaves behind answers statfs, but is not FUSE.
        assert!(!answers(Path::new(env!("CARGO_MANIFEST_DIR"))));
        assert!(!answers(&std::env::temp_dir()));
        assert!(!answers(Path::new("/nonexistent/gjcfs-mountpoint")));
    }
}
