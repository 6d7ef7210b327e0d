//! Whether only this user can change the directories a repair acts in.
//!
//! A repair names what it changes by path. Another user who can write a directory on that
//! path could put a symlink or another file in place of what the check looked at, between
//! the check and the change, and have the change made to something outside the store.
//! So a repair acts on `path` only when every directory from the store's base down to
//! `path`'s own directory is a real directory (never a symlink), owned by this user (or
//! root), and writable by no one else (or sticky, where no one else may rename or remove
//! what this user owns): such a chain only this user can change, and the path leads where
//! the check looked. Directories above the base are where the user chose to keep the
//! store, and are not judged.

use std::path::Path;

use crate::storage::{EntryKind, SessionStorage};

/// Group and other write permission.
const WRITABLE_BY_OTHERS: u32 = 0o022;
/// The sticky bit.
const STICKY: u32 = 0o1000;

/// Whether the directory bits `mode` let a user other than the owner add, rename or remove
/// entries of another owner's.
pub(super) fn writable_by_others(mode: u32) -> bool {
    mode & WRITABLE_BY_OTHERS != 0 && mode & STICKY == 0
}

/// `Ok` when only this user can change the directories from `base` down to `path`'s own
/// directory (see the module docs); otherwise why not, as a repair's "left" reason.
pub(super) fn only_owner_can_change(
    storage: &dyn SessionStorage,
    base: &Path,
    path: &Path,
) -> Result<(), String> {
    let Ok(below) = path.strip_prefix(base) else {
        return Err(format!("left: it is outside {}", base.display()));
    };
    let mut dir = base.to_owned();
    let mut components = below.components().peekable();
    loop {
        if dir != *path {
            judge(storage, &dir)?;
        }
        match components.next() {
            Some(component) if components.peek().is_some() => dir.push(component),
            _ => return Ok(()),
        }
    }
}

/// One directory of the chain.
fn judge(storage: &dyn SessionStorage, dir: &Path) -> Result<(), String> {
    let stat = storage
        .lstat(dir)
        .map_err(|e| format!("left: {} cannot be looked at ({e})", dir.display()))?;
    let user = storage.user();
    if stat.kind != EntryKind::Dir {
        return Err(format!(
            "left: {} is not a directory (a symlink?), so the path may lead outside the store",
            dir.display()
        ));
    }
    if stat.owner != user && stat.owner != 0 {
        return Err(format!(
            "left: {} is owned by uid {}, who could put something else in its place",
            dir.display(),
            stat.owner
        ));
    }
    if writable_by_others(stat.mode) {
        return Err(format!(
            "left: other users can write {} (mode {:o}) and could put something else in \
             its place; make it owner-only (chmod go-w) and repair again",
            dir.display(),
            stat.mode
        ));
    }
    Ok(())
}
