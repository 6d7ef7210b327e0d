//! A small tmpfs for tests that need a real full filesystem: mounted on a temporary
//! directory with `mount -t tmpfs -o size=…`, and always unmounted on drop, also when the
//! test panics.
//!
//! Mounting needs root: without it a test is skipped with a message — except under CI
//! (`CI=true`), where that fails it.

use std::path::Path;
use std::process::Command;

/// A mounted tmpfs; unmounted (and its mountpoint removed) when dropped.
pub struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (as `mount -o size=` takes it: `512k`, `4m`), or `None`
    /// (after saying why) when this process may not mount. Panics under CI instead.
    pub fn mount(size: &str) -> Option<Tmpfs> {
        if !super::root_for("mounting a tmpfs") {
            return None;
        }
        let dir = tempfile::tempdir().expect("a mountpoint");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0700")])
            .arg("tmpfs")
            .arg(dir.path())
            .status()
            .expect("mount runs");
        assert!(status.success(), "mount -t tmpfs failed: {status}");
        Some(Tmpfs { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let unmounted = Command::new("umount")
            .arg(self.dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !unmounted {
            // Busy: detach it, so that the mountpoint never outlives the test.
            use std::os::unix::ffi::OsStrExt;
            let c = std::ffi::CString::new(self.dir.path().as_os_str().as_bytes())
                .expect("no NUL in a temp path");
            // SAFETY: a valid NUL-terminated path.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
    }
}
