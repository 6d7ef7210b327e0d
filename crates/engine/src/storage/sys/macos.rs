//! macOS: extended ACLs, the filesystem type from `statfs`, `libproc` (writers of a file,
//! a process's start time), the boot session's UUID and the no-replace rename
//! (`renamex_np`). Every check that cannot tell fails closed.
//!
//! - **ACL**: macOS keeps ACLs as "extended" security (`ACL_TYPE_EXTENDED`), not POSIX
//!   attributes. An entry carries one when `acl_get_link_np` returns an ACL with at least
//!   one entry. Only `ENOENT` ("no ACL", once the entry is known to exist) means none;
//!   every other failure, `ENOTSUP` included (the Linux rule for filesystems that cannot
//!   store one does not apply here), is an error, and the caller refuses.
//! - **Network filesystem**: `statfs`'s `f_fstypename` is one of [`NETWORK_FS_TYPES`] (NFS,
//!   SMB, AFP, WebDAV, FTP), or the volume is not flagged `MNT_LOCAL` — which also covers
//!   network filesystems served by macFUSE (sshfs and the like) unless mounted `-o local`.
//!   A failed `statfs` is an error, as on Linux.
//! - **Writers elsewhere**: every process's vnode descriptors (`proc_pidinfo`
//!   `PROC_PIDLISTFDS`, `proc_pidfdinfo` `PROC_PIDFDVNODEINFO`) that are the same file
//!   (device and inode) and open with `FWRITE`. As with `/proc` on Linux, processes whose
//!   descriptors cannot be read (another user's, or gone meanwhile) are skipped; the list
//!   of processes itself failing is an error.
//! - **Boot id**: `kern.bootsessionuuid`, a UUID made at each boot. (`kern.boottime` is
//!   not used: macOS moves it when the clock is set, and a boot id that changes within one
//!   boot would make a live lock holder look gone.)
//! - **Process start id**: `<pid>:<start seconds>.<microseconds>` from `proc_pidinfo`
//!   `PROC_PIDTBSDINFO`.
//!
//! Appends need nothing of their own here: the engine's managed append (open no-follow,
//! identity checked against the path before every write, `fsync` of file and directory)
//! uses only what macOS has, so the whole-file re-publish the agent itself falls back to on
//! macOS is not needed, and the bytes on disk are the same.
//!
//! The parts that are plain logic are built on every system, so their tests run on Linux.

use std::io;

/// `f_fstypename` values of network filesystems.
pub const NETWORK_FS_TYPES: [&[u8]; 6] = [b"nfs", b"smbfs", b"afpfs", b"webdav", b"ftp", b"cifs"];

/// `MNT_LOCAL` of `sys/mount.h`: the volume is stored locally.
const MNT_LOCAL: u32 = 0x0000_1000;
#[cfg(target_os = "macos")]
const _: () = assert!(libc::MNT_LOCAL as u32 == MNT_LOCAL);

/// `FWRITE` of `sys/fcntl.h`, in `proc_fileinfo::fi_openflags`.
const FWRITE: u32 = 0x0000_0002;

/// The bytes of a NUL-ended name in a fixed-size `statfs` field (all of it if no NUL).
fn field(raw: &[libc::c_char]) -> Vec<u8> {
    raw.iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect()
}

/// Whether a filesystem of type `fstypename` with mount flags `flags` is a network one.
fn is_network(fstypename: &[u8], flags: u32) -> bool {
    NETWORK_FS_TYPES.contains(&fstypename) || flags & MNT_LOCAL == 0
}

/// `f_fstypename` values of the local filesystems that set a directory's modification time
/// whenever an entry is created, removed or renamed in it.
const DIR_TIMES_TELL_ENTRIES: [&[u8]; 2] = [b"apfs", b"hfs"];

/// Whether on a filesystem of type `fstypename` with mount flags `flags` a directory's
/// modification time tells every change of its entries: a local APFS or HFS+ volume, not
/// macFUSE or a network one.
fn dir_times_tell_entries_of(fstypename: &[u8], flags: u32) -> bool {
    DIR_TIMES_TELL_ENTRIES.contains(&fstypename) && flags & MNT_LOCAL != 0
}

/// Whether `acl_get_link_np`'s `errno` means "no ACL" rather than a failure.
fn means_no_acl(errno: Option<i32>) -> bool {
    errno == Some(libc::ENOENT)
}

/// Whether `acl_get_entry(acl, ACL_FIRST_ENTRY, …)` returning `rc` (with `errno` after it)
/// found an entry. Only `-1` with `EINVAL` (no entry there) means none — whether success is
/// `0` (macOS) or `1` (the FreeBSD convention), any other result counts as an entry, so an
/// ACL is never passed over; `-1` with any other error is that error.
fn first_entry_found(rc: i32, errno: Option<i32>) -> io::Result<bool> {
    match (rc, errno) {
        (-1, Some(libc::EINVAL)) => Ok(false),
        (-1, Some(code)) => Err(io::Error::from_raw_os_error(code)),
        (-1, None) => Err(io::Error::other("acl_get_entry failed")),
        _ => Ok(true),
    }
}

/// Whether a descriptor opened with `fi_openflags` may write.
fn opened_for_writing(fi_openflags: u32) -> bool {
    fi_openflags & FWRITE != 0
}

/// Whether a descriptor's vnode (`vst_dev` is a 32-bit `dev_t`) is the file `dev`/`ino`.
fn same_file(vst_dev: u32, vst_ino: u64, dev: u64, ino: u64) -> bool {
    vst_dev == dev as u32 && vst_ino == ino
}

/// The text of a string `sysctl`: up to its NUL, UTF-8, trimmed, not empty.
fn sysctl_text(buf: &[u8]) -> Option<String> {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let text = std::str::from_utf8(&buf[..end]).ok()?.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// The start id of process `pid` started at `sec`.`usec`.
fn start_id(pid: i64, sec: u64, usec: u64) -> String {
    format!("{pid}:{sec}.{usec:06}")
}

#[cfg(target_os = "macos")]
pub use native::{
    boot_id, dir_times_tell_entries, has_extended_acl, is_network_fs, process_start_id,
    rename_no_replace, writers_elsewhere,
};

#[cfg(target_os = "macos")]
mod native {
    use std::ffi::{c_int, c_uint, c_void, CString};
    use std::fs;
    use std::io;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    use std::path::Path;

    use super::*;

    fn c_path(path: &Path) -> io::Result<CString> {
        CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))
    }

    type AclT = *mut c_void;
    type AclEntryT = *mut c_void;
    /// `acl_type_t` (an enum) value `ACL_TYPE_EXTENDED`.
    const ACL_TYPE_EXTENDED: c_uint = 0x0000_0100;
    const ACL_FIRST_ENTRY: c_int = 0;

    // libSystem's ACL functions (sys/acl.h); the libc crate does not declare them.
    extern "C" {
        fn acl_get_link_np(path: *const libc::c_char, kind: c_uint) -> AclT;
        fn acl_get_entry(acl: AclT, entry_id: c_int, entry: *mut AclEntryT) -> c_int;
        fn acl_free(obj: *mut c_void) -> c_int;
    }

    /// Whether `path` (not following a symlink) carries an extended ACL with any entry.
    pub fn has_extended_acl(path: &Path) -> io::Result<bool> {
        let c = c_path(path)?;
        fs::symlink_metadata(path)?;
        // SAFETY: `c` is a valid NUL-terminated path; the ACL returned is freed below.
        let acl = unsafe { acl_get_link_np(c.as_ptr(), ACL_TYPE_EXTENDED) };
        if acl.is_null() {
            let err = io::Error::last_os_error();
            if !means_no_acl(err.raw_os_error()) {
                return Err(err);
            }
            // ENOENT is also "no such file": the entry must still be there.
            fs::symlink_metadata(path)?;
            return Ok(false);
        }
        let mut entry: AclEntryT = std::ptr::null_mut();
        // SAFETY: `acl` is a valid ACL and `entry` a valid out pointer; `acl` is freed once.
        let (rc, errno) = unsafe {
            let rc = acl_get_entry(acl, ACL_FIRST_ENTRY, &mut entry);
            let errno = io::Error::last_os_error().raw_os_error();
            acl_free(acl);
            (rc, errno)
        };
        first_entry_found(rc, errno)
    }

    /// The `statfs` of the filesystem holding `path`.
    fn statfs(path: &Path) -> io::Result<libc::statfs> {
        let c = c_path(path)?;
        // SAFETY: `statfs` is plain data, for which all zeroes is a valid value.
        let mut buf: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: `c` is a valid NUL-terminated path and `buf` a properly sized out-parameter.
        if unsafe { libc::statfs(c.as_ptr(), &mut buf) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(buf)
    }

    /// Whether `path` is on a network filesystem ([`is_network`]); an error when `statfs`
    /// cannot tell.
    pub fn is_network_fs(path: &Path) -> io::Result<bool> {
        let buf = statfs(path)?;
        Ok(is_network(&field(&buf.f_fstypename), buf.f_flags))
    }

    /// Whether the modification time of the directory `path` tells every change of its
    /// entries ([`dir_times_tell_entries_of`]).
    pub fn dir_times_tell_entries(path: &Path) -> io::Result<bool> {
        let buf = statfs(path)?;
        Ok(dir_times_tell_entries_of(
            &field(&buf.f_fstypename),
            buf.f_flags,
        ))
    }

    /// `struct proc_fileinfo` of `sys/proc_info.h`.
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct ProcFileInfo {
        fi_openflags: u32,
        fi_status: u32,
        fi_offset: i64,
        fi_type: i32,
        fi_guardflags: u32,
    }

    /// `struct vnode_fdinfo` of `sys/proc_info.h`.
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct VnodeFdInfo {
        pfi: ProcFileInfo,
        pvi: libc::vnode_info,
    }
    const _: () = assert!(std::mem::size_of::<VnodeFdInfo>() == 176);

    /// `PROC_PIDFDVNODEINFO` of `sys/proc_info.h`.
    const PROC_PIDFDVNODEINFO: c_int = 1;

    /// Every process id (`proc_listallpids`).
    fn all_pids() -> io::Result<Vec<libc::pid_t>> {
        loop {
            // SAFETY: a null buffer asks for the count only.
            let count = unsafe { libc::proc_listallpids(std::ptr::null_mut(), 0) };
            if count < 0 {
                return Err(io::Error::last_os_error());
            }
            let room = count as usize + 64;
            let mut pids = vec![0 as libc::pid_t; room];
            let bytes = (room * std::mem::size_of::<libc::pid_t>()) as c_int;
            // SAFETY: the buffer holds `room` pids, `bytes` long.
            let got = unsafe { libc::proc_listallpids(pids.as_mut_ptr().cast(), bytes) };
            if got < 0 {
                return Err(io::Error::last_os_error());
            }
            if (got as usize) < room {
                pids.truncate(got as usize);
                return Ok(pids);
            }
        }
    }

    /// The descriptors of process `pid`, or `None` when they cannot be read.
    fn descriptors(pid: libc::pid_t) -> Option<Vec<libc::proc_fdinfo>> {
        let size = std::mem::size_of::<libc::proc_fdinfo>();
        // SAFETY: a null buffer asks for the size needed.
        let need =
            unsafe { libc::proc_pidinfo(pid, libc::PROC_PIDLISTFDS, 0, std::ptr::null_mut(), 0) };
        if need <= 0 {
            return None;
        }
        let room = need as usize / size + 16;
        let mut fds = vec![
            libc::proc_fdinfo {
                proc_fd: 0,
                proc_fdtype: 0
            };
            room
        ];
        // SAFETY: the buffer holds `room` entries of `size` bytes.
        let got = unsafe {
            libc::proc_pidinfo(
                pid,
                libc::PROC_PIDLISTFDS,
                0,
                fds.as_mut_ptr().cast(),
                (room * size) as c_int,
            )
        };
        if got <= 0 {
            return None;
        }
        fds.truncate(got as usize / size);
        Some(fds)
    }

    /// What descriptor `fd` of process `pid` has open, if it is a vnode and readable.
    fn vnode(pid: libc::pid_t, fd: i32) -> Option<VnodeFdInfo> {
        // SAFETY: VnodeFdInfo is plain data; zeroed is a valid value of it.
        let mut info: VnodeFdInfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<VnodeFdInfo>() as c_int;
        // SAFETY: `info` is `size` bytes long.
        let got = unsafe {
            libc::proc_pidfdinfo(
                pid,
                fd,
                PROC_PIDFDVNODEINFO,
                (&mut info as *mut VnodeFdInfo).cast(),
                size,
            )
        };
        (got == size).then_some(info)
    }

    /// The other processes holding the file at `path` open for writing.
    pub fn writers_elsewhere(path: &Path) -> io::Result<Vec<u32>> {
        let target = fs::symlink_metadata(path)?;
        let own = std::process::id();
        let mut pids = Vec::new();
        for pid in all_pids()? {
            if pid <= 0 || pid as u32 == own {
                continue;
            }
            let Some(fds) = descriptors(pid) else {
                continue;
            };
            let writes = fds
                .iter()
                .filter(|fd| fd.proc_fdtype == libc::PROX_FDTYPE_VNODE as u32)
                .filter_map(|fd| vnode(pid, fd.proc_fd))
                .any(|info| {
                    let stat = &info.pvi.vi_stat;
                    same_file(stat.vst_dev, stat.vst_ino, target.dev(), target.ino())
                        && opened_for_writing(info.pfi.fi_openflags)
                });
            if writes {
                pids.push(pid as u32);
            }
        }
        Ok(pids)
    }

    /// Renames `from` to `to` only if nothing is at `to` (`renamex_np` with `RENAME_EXCL`).
    /// A filesystem without the flag is an [`io::ErrorKind::Unsupported`] error.
    pub fn rename_no_replace(from: &Path, to: &Path) -> io::Result<()> {
        let (cf, ct) = (c_path(from)?, c_path(to)?);
        // SAFETY: both are valid NUL-terminated paths.
        if unsafe { libc::renamex_np(cf.as_ptr(), ct.as_ptr(), libc::RENAME_EXCL) } == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::ENOTSUP | libc::EINVAL) => {
                Err(io::Error::new(io::ErrorKind::Unsupported, err))
            }
            _ => Err(err),
        }
    }

    /// The boot session's UUID (`kern.bootsessionuuid`).
    pub fn boot_id() -> Option<String> {
        let mut buf = [0u8; 64];
        let mut len = buf.len();
        // SAFETY: a NUL-terminated name, a buffer of `len` bytes and no new value.
        let rc = unsafe {
            libc::sysctlbyname(
                c"kern.bootsessionuuid".as_ptr(),
                buf.as_mut_ptr().cast(),
                &mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        if rc != 0 {
            return None;
        }
        sysctl_text(&buf[..len.min(buf.len())])
    }

    /// `<pid>:<start time>` from `proc_pidinfo` `PROC_PIDTBSDINFO`, when readable.
    pub fn process_start_id(pid: i64) -> Option<String> {
        let c_pid = libc::pid_t::try_from(pid).ok().filter(|&p| p > 0)?;
        // SAFETY: proc_bsdinfo is plain data; zeroed is a valid value of it.
        let mut info: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::proc_bsdinfo>() as c_int;
        // SAFETY: `info` is `size` bytes long.
        let got = unsafe {
            libc::proc_pidinfo(
                c_pid,
                libc::PROC_PIDTBSDINFO,
                0,
                (&mut info as *mut libc::proc_bsdinfo).cast(),
                size,
            )
        };
        (got == size).then(|| start_id(pid, info.pbi_start_tvsec, info.pbi_start_tvusec))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_filesystems_are_known_by_type_or_by_not_being_local() {
        for kind in NETWORK_FS_TYPES {
            assert!(is_network(kind, MNT_LOCAL), "{kind:?}");
        }
        for kind in [&b"apfs"[..], b"hfs", b"msdos", b"exfat", b"devfs"] {
            assert!(!is_network(kind, MNT_LOCAL | 0x1), "{kind:?}");
        }
        // A macFUSE volume (sshfs) or anything else not flagged local is refused.
        assert!(is_network(b"macfuse", 0));
        assert!(is_network(b"apfs", 0));
        assert!(!is_network(b"macfuse", MNT_LOCAL));
    }

    #[test]
    fn only_a_local_apfs_or_hfs_volume_has_directory_times_that_tell_its_entries() {
        assert!(dir_times_tell_entries_of(b"apfs", MNT_LOCAL));
        assert!(dir_times_tell_entries_of(b"hfs", MNT_LOCAL | 0x1));
        assert!(!dir_times_tell_entries_of(b"apfs", 0), "not local");
        for kind in NETWORK_FS_TYPES
            .iter()
            .chain(&[&b"macfuse"[..], b"msdos", b"exfat"])
        {
            assert!(!dir_times_tell_entries_of(kind, MNT_LOCAL), "{kind:?}");
        }
    }

    #[test]
    fn a_statfs_type_name_ends_at_its_nul() {
        let mut raw = [0 as libc::c_char; 16];
        for (slot, &b) in raw.iter_mut().zip(b"smbfs\0apfs") {
            *slot = b as libc::c_char;
        }
        assert_eq!(field(&raw), b"smbfs");
        assert!(is_network(&field(&raw), MNT_LOCAL));
        assert_eq!(field(&[b'x' as libc::c_char; 16]), [b'x'; 16]);
    }

    #[test]
    fn only_enoent_means_no_acl() {
        assert!(means_no_acl(Some(libc::ENOENT)));
        for errno in [
            libc::ENOTSUP,
            libc::EOPNOTSUPP,
            libc::EACCES,
            libc::EIO,
            libc::EINVAL,
        ] {
            assert!(!means_no_acl(Some(errno)), "{errno}");
        }
        assert!(!means_no_acl(None));
    }

    #[test]
    fn any_first_entry_of_an_acl_counts_and_only_einval_means_none() {
        assert!(first_entry_found(0, None).unwrap());
        assert!(first_entry_found(1, None).unwrap());
        assert!(first_entry_found(0, Some(libc::EINVAL)).unwrap());
        assert!(!first_entry_found(-1, Some(libc::EINVAL)).unwrap());
        let err = first_entry_found(-1, Some(libc::ENOMEM)).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOMEM));
        assert!(first_entry_found(-1, None).is_err());
    }

    #[test]
    fn a_writer_is_a_descriptor_of_the_same_file_with_fwrite() {
        const FREAD: u32 = 0x1;
        assert!(opened_for_writing(FWRITE));
        assert!(opened_for_writing(FREAD | FWRITE));
        assert!(!opened_for_writing(FREAD));
        assert!(!opened_for_writing(0));
        assert!(same_file(7, 42, 7, 42));
        assert!(!same_file(7, 42, 7, 43));
        assert!(!same_file(8, 42, 7, 42));
        // `st_dev` is a signed 32-bit dev_t that std widens with its sign.
        assert!(same_file(0x8000_0001, 9, -2_147_483_647i64 as u64, 9));
    }

    #[test]
    fn a_sysctl_string_is_read_up_to_its_nul() {
        let uuid = "1B2C3D4E-0000-4000-8000-00112233AABB";
        let mut buf = uuid.as_bytes().to_vec();
        buf.push(0);
        buf.extend_from_slice(b"junk");
        assert_eq!(sysctl_text(&buf).as_deref(), Some(uuid));
        assert_eq!(sysctl_text(uuid.as_bytes()).as_deref(), Some(uuid));
        assert_eq!(sysctl_text(b"\0"), None);
        assert_eq!(sysctl_text(b" \n\0"), None);
        assert_eq!(sysctl_text(&[0xff, 0xfe, 0]), None);
    }

    #[test]
    fn a_start_id_tells_two_processes_with_one_pid_apart() {
        assert_eq!(start_id(501, 1_700_000_000, 42), "501:1700000000.000042");
        assert_ne!(
            start_id(501, 1_700_000_000, 42),
            start_id(501, 1_700_000_000, 43)
        );
        assert_ne!(
            start_id(501, 1_700_000_000, 42),
            start_id(501, 1_700_000_001, 42)
        );
    }
}
