//! Linux: POSIX ACL attributes, the filesystem type from `statfs`, `/proc` (the boot id, a
//! process's start time), and the no-replace rename. Which processes write a file is
//! `writers.rs`; the mount table, `mountinfo.rs`.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))
}

/// Whether `path` (not following a symlink) carries a POSIX ACL: an access or a default ACL
/// attribute. A filesystem that cannot store ACLs (`ENOTSUP`) has none.
pub fn has_posix_acl(path: &Path) -> io::Result<bool> {
    let c = c_path(path)?;
    for name in [c"system.posix_acl_access", c"system.posix_acl_default"] {
        // SAFETY: both pointers are valid NUL-terminated strings; a zero-size query reads nothing.
        let rc = unsafe { libc::lgetxattr(c.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0) };
        if rc >= 0 {
            return Ok(true);
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::ENODATA) => {}
            Some(e) if e == libc::ENOTSUP || e == libc::EOPNOTSUPP => {}
            _ => return Err(err),
        }
    }
    Ok(false)
}

/// Filesystem magic numbers of network filesystems (statfs `f_type`).
const NETWORK_FS_MAGIC: [i64; 6] = [
    0x6969,      // NFS
    0x517B,      // SMB
    0xFF53_4D42, // CIFS
    0xFE53_4D42, // SMB2
    0x564C,      // NCP
    0x0102_1997, // 9P (v9fs)
];

/// Filesystem magic numbers of the local filesystems that set a directory's modification
/// time whenever an entry is created, removed or renamed in it, as every process sees it at
/// once: ext2/3/4, XFS, Btrfs, tmpfs, F2FS, ZFS, bcachefs, overlayfs. Not FUSE or a network
/// filesystem, whose attributes may be cached for seconds.
const DIR_TIMES_TELL_ENTRIES: [i64; 8] = [
    0xEF53,      // ext2/3/4
    0x5846_5342, // XFS
    0x9123_683E, // Btrfs
    0x0102_1994, // tmpfs
    0xF2F5_2010, // F2FS
    0x2FC1_2FC1, // ZFS
    0xCA45_1A4E, // bcachefs
    0x794C_7630, // overlayfs
];

/// The `statfs` `f_type` of the filesystem holding `path`.
fn fs_type(path: &Path) -> io::Result<i64> {
    let c = c_path(path)?;
    // SAFETY: `statfs` is plain data, for which all zeroes is a valid value.
    let mut buf: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `buf` a properly sized out-parameter.
    let rc = unsafe { libc::statfs(c.as_ptr(), &mut buf) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(buf.f_type as i64)
}

/// Whether `path` is on a network filesystem; an error when `statfs` cannot tell.
pub fn is_network_fs(path: &Path) -> io::Result<bool> {
    Ok(NETWORK_FS_MAGIC.contains(&fs_type(path)?))
}

/// Whether the modification time of the directory `path` tells every change of its entries
/// (its filesystem is one of [`DIR_TIMES_TELL_ENTRIES`]).
pub fn dir_times_tell_entries(path: &Path) -> io::Result<bool> {
    Ok(DIR_TIMES_TELL_ENTRIES.contains(&fs_type(path)?))
}

/// Renames `from` to `to` only if nothing is at `to` (`renameat2` with `RENAME_NOREPLACE`).
/// A kernel or filesystem without the flag is an [`io::ErrorKind::Unsupported`] error.
pub fn rename_no_replace(from: &Path, to: &Path) -> io::Result<()> {
    let (cf, ct) = (c_path(from)?, c_path(to)?);
    // SAFETY: both are valid NUL-terminated paths; renameat2 takes no other pointers.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            cf.as_ptr(),
            libc::AT_FDCWD,
            ct.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EINVAL | libc::ENOSYS) => Err(io::Error::new(io::ErrorKind::Unsupported, err)),
        _ => Err(err),
    }
}

/// The kernel's boot id (`/proc/sys/kernel/random/boot_id`).
pub fn boot_id() -> Option<String> {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// `<pid>:<start time in clock ticks>` from `/proc/<pid>/stat`, when readable: an id of the
/// process that another process with the same pid would not have.
pub fn process_start_id(pid: i64) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 22 (starttime); fields after the parenthesised command name start at field 3.
    let after = &stat[stat.rfind(')')? + 1..];
    let start = after.split_whitespace().nth(19)?;
    Some(format!("{pid}:{start}"))
}

/// `madvise(MADV_HUGEPAGE)` over `region`, which starts on a page boundary; failure (no
/// transparent huge pages) leaves ordinary pages, so it is not reported.
pub fn advise_huge_pages(region: &mut [std::mem::MaybeUninit<u8>]) {
    // SAFETY: the region is memory this process owns, borrowed mutably for the call; the
    // advice changes how it is backed, never its contents.
    unsafe {
        libc::madvise(
            region.as_mut_ptr().cast(),
            region.len(),
            libc::MADV_HUGEPAGE,
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_times_are_relied_on_for_the_known_local_filesystems_only() {
        assert!(
            !dir_times_tell_entries(Path::new("/proc")).unwrap(),
            "procfs"
        );
        assert!(!dir_times_tell_entries(Path::new("/sys")).unwrap(), "sysfs");
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(
            dir_times_tell_entries(tmp.path()).unwrap(),
            DIR_TIMES_TELL_ENTRIES.contains(&fs_type(tmp.path()).unwrap())
        );
        assert!(dir_times_tell_entries(Path::new("/no/such/dir")).is_err());
    }
}
