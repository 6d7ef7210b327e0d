//! macOS (macFUSE): there is no `fusermount3`, no `/proc/mounts` and no `fuse.conf`.
//! - FUSE is installed when macFUSE's filesystem bundle is (`/Library/Filesystems`).
//! - The mount table is `getfsstat` (what `getmntinfo` reads, into a buffer of our own):
//!   a mountpoint is listed by `f_mntonname`, which the kernel keeps with every symlink
//!   resolved (`/tmp/m` is listed as `/private/tmp/m`), so both spellings are compared.
//! - A served mount is one whose `statfs` reaches it and reports the `f_fstypename` of
//!   macFUSE (`macfuse`; `osxfuse` before macFUSE 4).
//! - Unmounting is `unmount(2)` (what `umount` does; the mounting user owns the mount);
//!   a busy or dead mount is then forced with `diskutil unmount force`, and if that fails,
//!   `unmount(2)` with `MNT_FORCE`.
//! - macFUSE has no `auto_unmount` watcher: a mount left by a killed server is detached
//!   by the next run ([`super::clear_stale_mount`]).
//!
//! The parts that are plain logic are built on every system, so their tests run on Linux.

use std::path::Path;

#[cfg(target_os = "macos")]
use super::MountError;

/// The `f_fstypename` values of macFUSE mounts.
const FUSE_TYPES: [&[u8]; 2] = [b"macfuse", b"osxfuse"];

/// The bytes of a NUL-ended name in a fixed-size `statfs` field (all of it if no NUL).
fn field(raw: &[libc::c_char]) -> Vec<u8> {
    raw.iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect()
}

/// Whether `fstypename` names a macFUSE filesystem.
fn is_fuse_type(fstypename: &[u8]) -> bool {
    FUSE_TYPES.contains(&fstypename)
}

/// Whether the mount table's mountpoints (`f_mntonname` values) list `path`, as given or
/// with its symlinks resolved.
fn listed<'a>(mounted_on: impl IntoIterator<Item = &'a [u8]>, path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let real = super::resolved(path);
    let wanted = [path.as_os_str().as_bytes(), real.as_os_str().as_bytes()];
    mounted_on.into_iter().any(|on| wanted.contains(&on))
}

#[cfg(target_os = "macos")]
fn c_path(path: &Path) -> Option<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(path.as_os_str().as_bytes()).ok()
}

/// The macFUSE bundles, newest first.
#[cfg(target_os = "macos")]
const BUNDLES: [&str; 2] = [
    "/Library/Filesystems/macfuse.fs",
    "/Library/Filesystems/osxfuse.fs",
];

/// Fails with what to install when macFUSE is missing.
#[cfg(target_os = "macos")]
pub fn check_fuse_installed() -> Result<(), MountError> {
    if BUNDLES.iter().any(|b| Path::new(b).is_dir()) {
        return Ok(());
    }
    Err(MountError::Missing(format!(
        "macFUSE is not installed ({} is missing): install it from https://macfuse.github.io \
         (or `brew install --cask macfuse`) and allow its system extension",
        BUNDLES[0]
    )))
}

/// Never: macFUSE has no watcher process that would unmount after the server dies.
#[cfg(target_os = "macos")]
pub fn auto_unmount_allowed() -> bool {
    false
}

/// Every mounted filesystem (`getfsstat` without waiting on any of them).
#[cfg(target_os = "macos")]
fn mount_table() -> std::io::Result<Vec<libc::statfs>> {
    loop {
        // SAFETY: a null buffer asks for the count only.
        let count = unsafe { libc::getfsstat(std::ptr::null_mut(), 0, libc::MNT_NOWAIT) };
        if count < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // Room for mounts made meanwhile; a full buffer is read again.
        let room = count as usize + 8;
        // SAFETY: statfs is plain data; zeroed is a valid value of it.
        let mut table: Vec<libc::statfs> = vec![unsafe { std::mem::zeroed() }; room];
        let bytes = (room * std::mem::size_of::<libc::statfs>()) as libc::c_int;
        // SAFETY: the buffer holds `room` structs, `bytes` long.
        let got = unsafe { libc::getfsstat(table.as_mut_ptr(), bytes, libc::MNT_NOWAIT) };
        if got < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if (got as usize) < room {
            table.truncate(got as usize);
            return Ok(table);
        }
    }
}

/// Whether `path` is a mountpoint in the mount table.
#[cfg(target_os = "macos")]
pub fn is_mounted(path: &Path) -> bool {
    let Ok(table) = mount_table() else {
        return false;
    };
    let names: Vec<Vec<u8>> = table.iter().map(|fs| field(&fs.f_mntonname)).collect();
    listed(names.iter().map(Vec::as_slice), path)
}

/// Whether a macFUSE server answers for the filesystem at `path`: its `statfs` reaches
/// the server and names macFUSE (the directory a vanished mount leaves answers too, with
/// the type of the filesystem underneath).
#[cfg(target_os = "macos")]
pub fn answers(path: &Path) -> bool {
    let Some(c) = c_path(path) else {
        return false;
    };
    // SAFETY: a valid NUL-terminated path and a zeroed out-struct.
    unsafe {
        let mut buf: libc::statfs = std::mem::zeroed();
        libc::statfs(c.as_ptr(), &mut buf) == 0 && is_fuse_type(&field(&buf.f_fstypename))
    }
}

/// `unmount(2)` with `flags`.
#[cfg(target_os = "macos")]
fn unmount_call(mountpoint: &Path, flags: libc::c_int) -> std::io::Result<()> {
    let c = c_path(mountpoint)
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "NUL in path"))?;
    // SAFETY: a valid NUL-terminated path.
    if unsafe { libc::unmount(c.as_ptr(), flags) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// `unmount(2)`, as `umount MOUNTPOINT` does.
#[cfg(target_os = "macos")]
pub fn umount(mountpoint: &Path) -> Result<(), MountError> {
    unmount_call(mountpoint, 0).map_err(|source| MountError::Io {
        what: format!("cannot unmount {}", mountpoint.display()),
        source,
    })
}

/// `unmount(2)`, and if the mount is still there (busy), forced ([`detach`]).
#[cfg(target_os = "macos")]
pub fn unmount(mountpoint: &Path, report: &mut dyn FnMut(String)) {
    if unmount_call(mountpoint, 0).is_err() && is_mounted(mountpoint) {
        report("unmount failed; forcing it".to_owned());
        detach(mountpoint, report);
    }
}

/// `diskutil unmount force MOUNTPOINT`, else `unmount(2)` with `MNT_FORCE`: the mount goes
/// whatever still holds it (the files open on it fail from then on).
#[cfg(target_os = "macos")]
pub fn detach(mountpoint: &Path, report: &mut dyn FnMut(String)) {
    let status = std::process::Command::new("diskutil")
        .args(["unmount", "force"])
        .arg(mountpoint)
        .stdout(std::process::Stdio::null())
        .status();
    if matches!(status, Ok(s) if s.success()) || !is_mounted(mountpoint) {
        return;
    }
    if let Err(e) = unmount_call(mountpoint, libc::MNT_FORCE) {
        report(format!(
            "diskutil unmount force {} failed, and so did a forced unmount: {e}",
            mountpoint.display()
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_macfuse_types_are_fuse() {
        assert!(is_fuse_type(b"macfuse"));
        assert!(is_fuse_type(b"osxfuse"));
        for other in [
            &b"apfs"[..],
            b"hfs",
            b"smbfs",
            b"nfs",
            b"fuse",
            b"macfuse2",
            b"",
        ] {
            assert!(!is_fuse_type(other), "{other:?}");
        }
    }

    #[test]
    fn a_statfs_name_ends_at_its_nul() {
        let mut raw = [0 as libc::c_char; 16];
        for (slot, &b) in raw.iter_mut().zip(b"macfuse\0apfs") {
            *slot = b as libc::c_char;
        }
        assert_eq!(field(&raw), b"macfuse");
        assert!(is_fuse_type(&field(&raw)));
        let full = [b'a' as libc::c_char; 16];
        assert_eq!(field(&full), [b'a'; 16]);
        assert_eq!(field(&[0; 4]), b"");
    }

    #[test]
    fn a_mountpoint_is_listed_by_either_spelling() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        // The kernel lists the resolved path, as /private/tmp/m for /tmp/m; the mountpoint
        // itself need not exist (a dead mount's cannot be resolved).
        let on = super::super::resolved(&real.join("m"));
        let table = [
            &b"/"[..],
            b"/System/Volumes/Data",
            on.as_os_str().as_encoded_bytes(),
        ];
        assert!(listed(table, &link.join("m")));
        assert!(listed(table, &real.join("m")));
        assert!(!listed(table, &link.join("other")));
        assert!(!listed(table, &real));
        assert!(!listed([], &real.join("m")));
    }
}
