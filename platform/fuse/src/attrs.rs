//! What the kernel is told of a node: its attributes as FUSE has them, and how long it may
//! keep them and the node's name.

use std::time::{Duration, UNIX_EPOCH};

use fuser::{FileAttr, FileType, INodeNo};
use gjcfs_vfs::{Attr, ListedAttr, NodeKind};

/// How long the kernel keeps the attributes and name of a node that changes (leaf,
/// context, listings): short, because a change made outside (the agent appending) is seen
/// only when the kernel asks again. Every change the model knows of is also announced and
/// invalidated at once. Never zero: the kernel would then look up every name again.
const SHORT_TTL: Duration = Duration::from_secs(1);
/// How long the kernel keeps a stable node (entries, blobs): they change only in ways the
/// model announces.
const LONG_TTL: Duration = Duration::from_secs(24 * 3600);

/// A rendered file's name is looked up at every open: a change of its bytes gives it a new
/// inode number ([`Attr::lookup_each_open`]). Its attributes are kept [`LONG_TTL`]: a
/// number's bytes, and so its size and time, never change.
const NO_TTL: Duration = Duration::ZERO;

/// How long the kernel keeps the name of the node with `attr`.
pub(crate) fn entry_ttl(attr: &Attr) -> &'static Duration {
    if attr.stable {
        &LONG_TTL
    } else if attr.lookup_each_open {
        &NO_TTL
    } else {
        &SHORT_TTL
    }
}

/// How long the kernel keeps the attributes of the node with `attr`. A number whose
/// name is looked up at every open holds one version of its bytes: the kernel need not
/// ask for its attributes again (it did at every `read` and `fstat` with none kept).
pub(crate) fn attr_ttl(attr: &Attr) -> &'static Duration {
    if attr.lookup_each_open {
        &LONG_TTL
    } else {
        entry_ttl(attr)
    }
}

/// The attributes a listing gives of an entry, and how long the kernel keeps them and the
/// entry's name: those of a view not rendered yet for no time, so that the name's first
/// use looks it up (and renders the view).
pub(crate) fn listed_attr(listed: ListedAttr) -> (Attr, &'static Duration) {
    match listed {
        ListedAttr::Known(attr) => (attr, entry_ttl(&attr)),
        ListedAttr::Unrendered(attr) => (attr, &NO_TTL),
    }
}

/// The attributes the kernel gets of a node with `a`, owned by `uid`:`gid` (the mounting
/// user).
pub(crate) fn file_attr(a: &Attr, uid: u32, gid: u32) -> FileAttr {
    let mtime = if a.mtime_ms >= 0 {
        UNIX_EPOCH + Duration::from_millis(a.mtime_ms as u64)
    } else {
        UNIX_EPOCH
    };
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.size.div_ceil(512),
        atime: mtime,
        mtime,
        ctime: mtime,
        crtime: mtime,
        kind: file_type(a.kind),
        perm: a.perm,
        nlink: a.nlink,
        uid,
        gid,
        rdev: 0,
        flags: 0,
        blksize: 4096,
    }
}

pub(crate) fn file_type(kind: NodeKind) -> FileType {
    match kind {
        NodeKind::Directory => FileType::Directory,
        NodeKind::File => FileType::RegularFile,
        NodeKind::Symlink => FileType::Symlink,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(stable: bool, lookup_each_open: bool) -> Attr {
        Attr {
            ino: 9,
            kind: NodeKind::File,
            size: 3,
            perm: 0o400,
            nlink: 1,
            mtime_ms: 1,
            stable,
            lookup_each_open,
        }
    }

    #[test]
    fn a_version_has_its_name_looked_up_at_each_open_and_its_attributes_kept() {
        let version = attr(false, true);
        assert_eq!(
            (entry_ttl(&version), attr_ttl(&version)),
            (&NO_TTL, &LONG_TTL)
        );
        let stable = attr(true, false);
        assert_eq!(
            (entry_ttl(&stable), attr_ttl(&stable)),
            (&LONG_TTL, &LONG_TTL)
        );
        let changing = attr(false, false);
        assert_eq!(
            (entry_ttl(&changing), attr_ttl(&changing)),
            (&SHORT_TTL, &SHORT_TTL)
        );
    }

    #[test]
    fn a_view_listed_before_it_is_rendered_is_kept_for_no_time() {
        let version = attr(false, true);
        assert_eq!(
            listed_attr(ListedAttr::Unrendered(version)),
            (version, &NO_TTL)
        );
        let stable = attr(true, false);
        assert_eq!(listed_attr(ListedAttr::Known(stable)), (stable, &LONG_TTL));
        let changing = attr(false, false);
        assert_eq!(listed_attr(ListedAttr::Unrendered(changing)).1, &NO_TTL);
    }
}
