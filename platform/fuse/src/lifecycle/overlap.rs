//! Refusing a mountpoint that overlaps the store: inside a directory the store is read
//! from (the server would wait on its own mount at its first access, and never answer —
//! not even to the signal that should stop it) or around one (the mount would hide it).
//!
//! A path can reach a directory under another name: a symlink, a bind mount of the agent
//! directory (`mount --bind ~/.gjc/agent /srv/alias`), a directory mounted inside the
//! store. With shared mount propagation (systemd's default) a mount made at one name of a
//! directory also appears at its other names. So the mountpoint and the store's
//! directories are compared three ways, any one of which refuses:
//! 1. by path, every symlink resolved;
//! 2. by device and inode: no ancestor of the mountpoint (itself included) is a store
//!    directory, and no ancestor of a store directory is the mountpoint;
//! 3. (Linux) by where they are in their filesystems, from the mount table
//!    (`/proc/self/mountinfo`): a path's [`Location`]s are its place in the filesystem it is
//!    on (device and path from that filesystem's root), then the place of each mount it is
//!    reached through in the filesystem below, down to `/`. The mountpoint is inside a
//!    store directory when one of its locations lies under the directory's own place, and
//!    around it when one of the directory's locations lies under the mountpoint's: under
//!    any name either is reached by, bind mounts and mounts inside the store included.

use std::path::{Component, Path, PathBuf};

use gjcfs_vfs::mountinfo::{self, Mount};

use super::MountError;

/// `path` (absolute) with every symlink resolved, as far as it exists: its nearest
/// existing ancestor canonicalized, the rest appended (`..` folded).
pub(crate) fn resolved(path: &Path) -> PathBuf {
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

/// Refuses a mountpoint inside (or equal to) a directory the store is read from, and a
/// store directory inside the mountpoint (see the module's rules).
pub fn refuse_overlap(mountpoint: &Path, store: &[(&str, PathBuf)]) -> Result<(), MountError> {
    let mount = resolved(mountpoint);
    let table = mount_table();
    for (what, dir) in store {
        let given = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
        let dir = resolved(&given);
        let inside = |why: &str| {
            MountError::Refused(format!(
                "{}: the mountpoint is inside {what} {}{why}; mount outside the store",
                mountpoint.display(),
                given.display()
            ))
        };
        let around = |why: &str| {
            MountError::Refused(format!(
                "{}: {what} {} is inside the mountpoint{why}; mount outside the store",
                mountpoint.display(),
                given.display()
            ))
        };
        if mount.starts_with(&dir) {
            return Err(inside(""));
        }
        if dir.starts_with(&mount) {
            return Err(around(""));
        }
        if same_as_an_ancestor(&mount, &dir) {
            return Err(inside(" (the same directory under another name)"));
        }
        if same_as_an_ancestor(&dir, &mount) {
            return Err(around(" (the same directory under another name)"));
        }
        if let Some(table) = &table {
            let (mount_at, dir_at) = (table.locations(&mount), table.locations(&dir));
            if reaches_into(&mount_at, &dir_at) {
                return Err(inside(" (reached through another mount of it)"));
            }
            if reaches_into(&dir_at, &mount_at) {
                return Err(around(" (reached through another mount of it)"));
            }
            let shown_inside = table.shown_inside(&dir);
            if mount_at
                .first()
                .is_some_and(|m| shown_inside.iter().any(|x| x.overlaps(m)))
            {
                return Err(MountError::Refused(format!(
                    "{}: a mount inside {what} {} shows the mountpoint's directory, where the \
                     mount would appear too; mount outside the store",
                    mountpoint.display(),
                    given.display()
                )));
            }
        }
    }
    Ok(())
}

/// Whether `target` (existing) is `path` or one of its ancestors, by device and inode.
fn same_as_an_ancestor(path: &Path, target: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(target) = std::fs::metadata(target) else {
        return false;
    };
    path.ancestors().any(|ancestor| {
        std::fs::metadata(ancestor)
            .is_ok_and(|meta| meta.dev() == target.dev() && meta.ino() == target.ino())
    })
}

/// Whether one of `from`'s locations lies under the first of `into` (its own place).
fn reaches_into(from: &[Location], into: &[Location]) -> bool {
    let Some(place) = into.first() else {
        return false;
    };
    from.iter()
        .any(|l| l.device == place.device && l.path.starts_with(&place.path))
}

/// Where a directory is in a filesystem: the filesystem's device (`major:minor`) and the
/// path from its root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Location {
    device: String,
    path: PathBuf,
}

impl Location {
    /// Whether either lies under the other, in one filesystem.
    fn overlaps(&self, other: &Location) -> bool {
        self.device == other.device
            && (self.path.starts_with(&other.path) || other.path.starts_with(&self.path))
    }
}

/// The mount table of this process's mount namespace.
#[derive(Debug, Clone)]
pub(crate) struct MountTable {
    mounts: Vec<Mount>,
}

/// The mount table, where the system has one to read (Linux); `None` elsewhere or when
/// it cannot be read (then only the other two checks are made).
fn mount_table() -> Option<MountTable> {
    if cfg!(target_os = "linux") {
        let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        MountTable::parse(&text)
    } else {
        None
    }
}

impl MountTable {
    /// Parses `/proc/self/mountinfo` ([`mountinfo::parse`]); `None` for a table with a line
    /// it cannot read.
    fn parse(text: &str) -> Option<MountTable> {
        Some(MountTable {
            mounts: mountinfo::parse(text)?,
        })
    }

    /// The mount `path` is on: the last one (the one on top) whose point is the longest
    /// prefix of it.
    fn mount_of(&self, path: &Path) -> Option<&Mount> {
        let mut best: Option<&Mount> = None;
        for mount in &self.mounts {
            if path.starts_with(&mount.point)
                && best.is_none_or(|b| {
                    mount.point.components().count() >= b.point.components().count()
                })
            {
                best = Some(mount);
            }
        }
        best
    }

    /// What the mounts below `dir` (strictly) show: each one's filesystem and root. A
    /// mount made where one of them is from would appear inside `dir` too.
    pub(crate) fn shown_inside(&self, dir: &Path) -> Vec<Location> {
        self.mounts
            .iter()
            .filter(|m| m.point.starts_with(dir) && m.point != dir)
            .map(|m| Location {
                device: m.device.clone(),
                path: m.root.clone(),
            })
            .collect()
    }

    /// Where `path` (absolute, resolved) is: its place in the filesystem it is on, then
    /// the place of each mount it is reached through in the filesystem below, down to the
    /// root mount.
    pub(crate) fn locations(&self, path: &Path) -> Vec<Location> {
        let mut out = Vec::new();
        let Some(mut mount) = self.mount_of(path) else {
            return out;
        };
        let mut at = path.to_owned();
        // A mount's parent chain ends at the root (its parent is not in the table, or is
        // itself); the bound keeps a damaged table from looping.
        for _ in 0..self.mounts.len() + 1 {
            let rest = at.strip_prefix(&mount.point).unwrap_or(Path::new(""));
            out.push(Location {
                device: mount.device.clone(),
                path: mount.root.join(rest),
            });
            let parent = self
                .mounts
                .iter()
                .rev()
                .find(|m| m.id == mount.parent && m.id != mount.id);
            match parent {
                Some(parent) if mount.point.starts_with(&parent.point) => {
                    at = mount.point.clone();
                    mount = parent;
                }
                _ => break,
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table: `/` on 8:1, the agent directory bound at `/srv/alias`, a tmpfs at
    /// `/home/u/agent/tmp`, and `/data` (8:2) bound inside the store at
    /// `/home/u/agent/sessions/data`.
    const TABLE: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 8:1 /home/u/agent /srv/alias rw shared:1 - ext4 /dev/sda1 rw
31 22 0:40 / /home/u/agent/tmp rw shared:2 - tmpfs tmpfs rw
32 22 8:2 / /data rw shared:3 - ext4 /dev/sdb1 rw
33 22 8:2 / /home/u/agent/sessions/data rw shared:3 - ext4 /dev/sdb1 rw
34 22 8:1 /srv/with\\040space /mnt/spaced rw - ext4 /dev/sda1 rw
";

    fn table() -> MountTable {
        MountTable::parse(TABLE).unwrap()
    }

    fn at(device: &str, path: &str) -> Location {
        Location {
            device: device.into(),
            path: path.into(),
        }
    }

    #[test]
    fn a_path_is_located_in_its_filesystem_and_through_each_mount_below() {
        let t = table();
        assert_eq!(
            t.locations(Path::new("/srv/alias/mnt")),
            [at("8:1", "/home/u/agent/mnt"), at("8:1", "/srv/alias")]
        );
        assert_eq!(
            t.locations(Path::new("/home/u/agent/tmp/x")),
            [at("0:40", "/x"), at("8:1", "/home/u/agent/tmp")]
        );
        assert_eq!(
            t.locations(Path::new("/mnt/spaced/a")),
            [at("8:1", "/srv/with space/a"), at("8:1", "/mnt/spaced")]
        );
        assert_eq!(t.locations(Path::new("/")), [at("8:1", "/")]);
    }

    #[test]
    fn the_mount_table_finds_every_overlap_a_path_cannot() {
        let t = table();
        let agent = t.locations(Path::new("/home/u/agent"));
        // A mountpoint in a bind mount of the agent directory is inside it.
        let alias = t.locations(Path::new("/srv/alias/mnt"));
        assert!(reaches_into(&alias, &agent));
        // A mountpoint on /data, which is also mounted inside the store, would show up
        // there: a mount inside the sessions directory shows the mountpoint's place.
        let data = t.locations(Path::new("/data/m"));
        let inside = t.shown_inside(Path::new("/home/u/agent/sessions"));
        assert_eq!(inside, [at("8:2", "/")]);
        assert!(inside.iter().any(|x| x.overlaps(&data[0])));
        assert!(t
            .shown_inside(Path::new("/srv"))
            .iter()
            .all(|x| !x.overlaps(&data[0])));
        // A tmpfs inside the store is still inside it.
        let tmp = t.locations(Path::new("/home/u/agent/tmp/m"));
        assert!(reaches_into(&tmp, &agent));
        // Unrelated places are not.
        let elsewhere = t.locations(Path::new("/srv/other"));
        assert!(!reaches_into(&elsewhere, &agent));
        assert!(!reaches_into(&agent, &elsewhere));
    }

    #[test]
    fn a_damaged_table_is_not_read() {
        assert!(MountTable::parse("22 x 8:1 / / rw - ext4 /dev/sda1 rw\n").is_none());
        assert!(MountTable::parse("22 1 8:1 /\n").is_none());
    }

    #[test]
    fn this_systems_table_locates_the_root() {
        if let Some(table) = mount_table() {
            assert!(!table.locations(Path::new("/")).is_empty());
        }
    }
}
