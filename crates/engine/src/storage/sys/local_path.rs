//! A path's canonical form resolved without ever stepping onto a filesystem that another
//! process or host answers for (FUSE, network filesystems: [`Mount::is_served_elsewhere`]).
//!
//! `realpath` looks up every component, so a path that leads onto a FUSE mount whose server
//! does not answer — or onto this process's own mount, or an NFS export on a dead link —
//! waits as long. Here each component is checked against the mount table (read from procfs)
//! before it is looked up: a path that would reach such a mount, through its own
//! components or a symlink's, is refused with a [`ServedElsewhere`] error, no request sent.
//! On local filesystems the result is what `realpath` gives.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use super::mountinfo::{self, Mount};
use crate::storage::ServedElsewhere;

/// How many symlinks one resolution follows at most (Linux's `MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// `path` with every symlink resolved, `.` and `..` folded, made absolute against the
/// working directory; an error when a component is missing, a symlink loop, or when the
/// resolution would reach a mount served elsewhere (an [`io::ErrorKind::Unsupported`]
/// error carrying [`ServedElsewhere`]).
pub fn canonicalize_local(path: &Path) -> io::Result<PathBuf> {
    resolve_avoiding(path, &mountinfo::read(None)?)
}

/// [`canonicalize_local`] against the mount table `mounts`.
fn resolve_avoiding(path: &Path, mounts: &[Mount]) -> io::Result<PathBuf> {
    let served: Vec<&Mount> = mounts.iter().filter(|m| m.is_served_elsewhere()).collect();
    let absolute = std::path::absolute(path)?;
    let mut pending: Vec<OsString> = Vec::new();
    push_components(&mut pending, &absolute);
    let mut out = PathBuf::from("/");
    let mut links = 0;
    while let Some(name) = pending.pop() {
        if name == ".." {
            out.pop();
            continue;
        }
        let next = out.join(&name);
        if let Some(mount) = served.iter().find(|m| next.starts_with(&m.point)) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                ServedElsewhere {
                    point: mount.point.clone(),
                    fstype: mount.fstype.clone(),
                    network: !mount.fstype.starts_with("fuse") && mount.fstype != "virtiofs",
                },
            ));
        }
        if !fs::symlink_metadata(&next)?.file_type().is_symlink() {
            out = next;
            continue;
        }
        links += 1;
        if links > MAX_LINKS {
            return Err(io::Error::from_raw_os_error(libc::ELOOP));
        }
        let target = fs::read_link(&next)?;
        if target.is_absolute() {
            out = PathBuf::from("/");
        }
        push_components(&mut pending, &target);
    }
    Ok(out)
}

/// Pushes `path`'s names onto `pending` so that the first is popped first.
fn push_components(pending: &mut Vec<OsString>, path: &Path) {
    let names: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_owned()),
            Component::ParentDir => Some("..".into()),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect();
    pending.extend(names.into_iter().rev());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::served_elsewhere;
    use std::os::unix::fs::symlink;

    #[test]
    fn resolves_as_realpath_does_on_local_filesystems() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        fs::create_dir_all(root.join("a/b/c")).unwrap();
        symlink("b/c", root.join("a/rel")).unwrap();
        symlink(root.join("a/b"), root.join("abs")).unwrap();
        symlink("../abs/c", root.join("a/up")).unwrap();
        symlink("chain1", root.join("chain0")).unwrap();
        symlink("a/up", root.join("chain1")).unwrap();
        for p in [
            "a/b/c",
            "a/rel",
            "abs/c",
            "a/up",
            "chain0",
            "a/./b/../rel/",
            "abs/../b",
        ] {
            let path = root.join(p);
            assert_eq!(
                canonicalize_local(&path).unwrap(),
                fs::canonicalize(&path).unwrap(),
                "{p}"
            );
        }
    }

    #[test]
    fn missing_components_and_loops_are_errors() {
        let tmp = tempfile::tempdir().unwrap();
        let missing = canonicalize_local(&tmp.path().join("nope")).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        symlink("loop", tmp.path().join("loop")).unwrap();
        let looped = canonicalize_local(&tmp.path().join("loop")).unwrap_err();
        assert_eq!(looped.raw_os_error(), Some(libc::ELOOP));
    }

    #[test]
    fn a_path_onto_a_served_mount_is_refused_through_its_names_or_a_symlink() {
        let tmp = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(tmp.path()).unwrap();
        fs::create_dir_all(root.join("served/dir")).unwrap();
        fs::create_dir(root.join("local")).unwrap();
        symlink(root.join("served/dir"), root.join("local/into")).unwrap();
        let mut mounts = mountinfo::read(None).unwrap();
        mounts.push(Mount {
            id: u64::MAX,
            parent: 1,
            device: "0:0".into(),
            root: "/".into(),
            point: root.join("served"),
            fstype: "fuse.test".into(),
        });
        for p in ["served", "served/dir", "local/into", "local/../served/dir"] {
            let error = resolve_avoiding(&root.join(p), &mounts).unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::Unsupported, "{p}");
            let why = served_elsewhere(&error).unwrap();
            assert_eq!(
                (why.point.as_path(), why.fstype.as_str()),
                (root.join("served").as_path(), "fuse.test")
            );
        }
        assert_eq!(
            resolve_avoiding(&root.join("local"), &mounts).unwrap(),
            root.join("local")
        );
        assert!(served_elsewhere(&io::Error::from(io::ErrorKind::NotFound)).is_none());
    }
}
