//! Which other processes hold a file open for writing, learned from `/proc` alone.
//!
//! Every open descriptor of every process is compared with the file by what
//! `/proc/<pid>/fdinfo/<fd>` states — its mount id, inode number and open flags — never by
//! a `stat` of `/proc/<pid>/fd/<fd>`, which would follow the descriptor into its filesystem:
//! a descriptor on a FUSE mount whose server does not answer (this very process's mount
//! among them) or on a network filesystem on a dead link would hold the probe for as long.
//! A descriptor on another mount counts only when that mount shows the same filesystem
//! (the same `major:minor` in the mount table: a bind mount of the store) and the inode
//! matches.

use std::collections::HashMap;
use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::mountinfo::{self, Mount};

/// What `fdinfo` states of one descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FdInfo {
    flags: i32,
    mnt_id: u64,
    /// The inode number; kernels before 5.14 do not state it.
    ino: Option<u64>,
}

impl FdInfo {
    fn parse(text: &str) -> Option<FdInfo> {
        let field = |name: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
                .map(str::trim)
        };
        Some(FdInfo {
            flags: i32::from_str_radix(field("flags")?, 8).ok()?,
            mnt_id: field("mnt_id")?.parse().ok()?,
            ino: field("ino").and_then(|n| n.parse().ok()),
        })
    }

    fn writes(&self) -> bool {
        matches!(self.flags & libc::O_ACCMODE, libc::O_WRONLY | libc::O_RDWR)
    }
}

/// The file being asked about: its mount, inode, filesystem device and resolved path.
struct Target {
    mnt_id: u64,
    ino: u64,
    /// `major:minor` of its filesystem in this process's mount table, when listed there.
    device: Option<String>,
    /// The path `/proc/<pid>/fd/<fd>` reads for it (kernels without `ino` in `fdinfo`).
    path: Option<std::path::PathBuf>,
}

impl Target {
    fn of(path: &Path) -> io::Result<Target> {
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
        // SAFETY: `statx` is plain data, for which all zeroes is a valid value.
        let mut buf: libc::statx = unsafe { std::mem::zeroed() };
        // SAFETY: `c` is a valid NUL-terminated path and `buf` a properly sized out-parameter.
        let rc = unsafe {
            libc::statx(
                libc::AT_FDCWD,
                c.as_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
                libc::STATX_INO | libc::STATX_MNT_ID,
                &mut buf,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        if buf.stx_mask & libc::STATX_MNT_ID == 0 {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "this kernel does not state a file's mount id (Linux 5.8 or later does)",
            ));
        }
        let mounts = mountinfo::read(None)?;
        Ok(Target {
            mnt_id: buf.stx_mnt_id,
            ino: buf.stx_ino,
            device: device_of(&mounts, buf.stx_mnt_id),
            path: fs::canonicalize(path).ok(),
        })
    }
}

fn device_of(mounts: &[Mount], mnt_id: u64) -> Option<String> {
    mounts
        .iter()
        .find(|m| m.id == mnt_id)
        .map(|m| m.device.clone())
}

/// The filesystems behind mount ids, from this process's table and, for a mount it does
/// not list, the table of the process holding the descriptor (another mount namespace).
struct Devices {
    own: Vec<Mount>,
    others: HashMap<u32, Vec<Mount>>,
}

impl Devices {
    fn same_filesystem(&mut self, pid: u32, mnt_id: u64, device: &str) -> bool {
        if let Some(found) = device_of(&self.own, mnt_id) {
            return found == device;
        }
        let theirs = self
            .others
            .entry(pid)
            .or_insert_with(|| mountinfo::read(Some(pid)).unwrap_or_default());
        device_of(theirs, mnt_id).is_some_and(|found| found == device)
    }
}

/// The other processes holding the file at `path` open for writing. Processes whose
/// descriptors cannot be read (another user's, or gone meanwhile) are skipped.
pub fn writers_elsewhere(path: &Path) -> io::Result<Vec<u32>> {
    let target = Target::of(path)?;
    let mut devices = Devices {
        own: mountinfo::read(None)?,
        others: HashMap::new(),
    };
    let own = std::process::id();
    let mut pids = Vec::new();
    for entry in fs::read_dir("/proc")? {
        let Ok(entry) = entry else { continue };
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == own {
            continue;
        }
        let Ok(fds) = fs::read_dir(entry.path().join("fdinfo")) else {
            continue;
        };
        let writes = fds.flatten().any(|fd| {
            let Some(info) = fs::read_to_string(fd.path())
                .ok()
                .and_then(|text| FdInfo::parse(&text))
            else {
                return false;
            };
            info.writes() && is_target(&info, &target, &mut devices, pid, &fd.file_name())
        });
        if writes {
            pids.push(pid);
        }
    }
    Ok(pids)
}

/// Whether the descriptor `fd` of `pid`, as `info` states it, is the target file.
fn is_target(
    info: &FdInfo,
    target: &Target,
    devices: &mut Devices,
    pid: u32,
    fd: &std::ffi::OsStr,
) -> bool {
    let same_fs = info.mnt_id == target.mnt_id
        || target
            .device
            .as_deref()
            .is_some_and(|device| devices.same_filesystem(pid, info.mnt_id, device));
    if !same_fs {
        return false;
    }
    match info.ino {
        Some(ino) => ino == target.ino,
        // Reading the link names the file's path without a request to its filesystem.
        None => {
            let link = fs::read_link(Path::new("/proc").join(pid.to_string()).join("fd").join(fd));
            link.is_ok_and(|link| Some(link) == target.path)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fdinfo_states_flags_mount_and_inode() {
        let info = FdInfo::parse("pos:\t0\nflags:\t0102001\nmnt_id:\t24\nino:\t3\n").unwrap();
        assert_eq!(
            info,
            FdInfo {
                flags: 0o102001,
                mnt_id: 24,
                ino: Some(3)
            }
        );
        assert!(info.writes());
        let old = FdInfo::parse("pos:\t0\nflags:\t0100000\nmnt_id:\t24\n").unwrap();
        assert_eq!(old.ino, None, "kernels before 5.14");
        assert!(!old.writes());
        assert!(FdInfo::parse("pos:\t0\n").is_none());
    }

    #[test]
    fn a_writer_is_found_by_mount_and_inode_and_a_reader_is_not() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f");
        fs::write(&file, b"x").unwrap();
        let read_only = tmp.path().join("g");
        fs::write(&read_only, b"y").unwrap();
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg("exec 3>>\"$1\" 4<\"$2\"; echo ready; read _")
            .arg("sh")
            .arg(&file)
            .arg(&read_only)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
            &mut ready,
        )
        .unwrap();
        let pid = child.id();
        assert_eq!(writers_elsewhere(&file).unwrap(), vec![pid]);
        assert!(!writers_elsewhere(&read_only).unwrap().contains(&pid));
        drop(child.stdin.take());
        child.wait().unwrap();
        assert!(writers_elsewhere(&file).unwrap().is_empty());
    }
}
