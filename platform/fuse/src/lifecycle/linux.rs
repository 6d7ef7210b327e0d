//! Linux: `/dev/fuse` and `fusermount3`, the mount table in `/proc/mounts`, the FUSE magic
//! number of `statfs`, and `auto_unmount` as `/etc/fuse.conf` allows it.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::MountError;

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

/// `fusermount3 -u MOUNTPOINT`.
pub fn umount(mountpoint: &Path) -> Result<(), MountError> {
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

/// Whether fusermount3 will accept `auto_unmount` (it needs `allow_other`: root, or
/// `user_allow_other` in /etc/fuse.conf).
pub fn auto_unmount_allowed() -> bool {
    if rustix::process::geteuid().is_root() {
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
        #[allow(clippy::unnecessary_cast)] // `f_type`'s width differs between libcs.
        let kind = buf.f_type as i64;
        kind == FUSE_SUPER_MAGIC
    }
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
        detach(mountpoint, report);
    }
}

/// `fusermount3 -uz`: the mount is detached at once, whatever still holds it.
pub fn detach(mountpoint: &Path, report: &mut dyn FnMut(String)) {
    let status = Command::new("fusermount3")
        .arg("-uz")
        .arg(mountpoint)
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        report(format!("fusermount3 -uz {} failed", mountpoint.display()));
    }
}
