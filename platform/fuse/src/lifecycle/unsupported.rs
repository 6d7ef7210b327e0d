//! The Unixes other than Linux and macOS: how to find their mounts and unmount them is not
//! implemented, so mounting is refused before anything is mounted, and nothing is ever
//! taken for a served mount.

use std::path::Path;

use super::MountError;

fn refused() -> MountError {
    MountError::Missing("mounting is implemented on Linux and macOS only".to_owned())
}

/// Refuses: mounting is not implemented here.
pub fn check_fuse_installed() -> Result<(), MountError> {
    Err(refused())
}

pub fn auto_unmount_allowed() -> bool {
    false
}

/// Not known here: never.
pub fn is_mounted(_path: &Path) -> bool {
    false
}

/// Not known here: never.
pub fn answers(_path: &Path) -> bool {
    false
}

pub fn umount(_mountpoint: &Path) -> Result<(), MountError> {
    Err(refused())
}

pub fn unmount(mountpoint: &Path, report: &mut dyn FnMut(String)) {
    report(format!("{}: {}", mountpoint.display(), refused()));
}

pub fn detach(mountpoint: &Path, report: &mut dyn FnMut(String)) {
    unmount(mountpoint, report);
}
