//! Linux's mount table as `/proc/<pid>/mountinfo` states it: read from procfs, so learning
//! which filesystem a path or a descriptor is on never sends a request to that filesystem.
//! The parsing is built everywhere (its tests run on every platform); reading the table,
//! on Linux.
//!
//! A line is `ID PARENT MAJOR:MINOR ROOT POINT OPTIONS [TAGS…] - TYPE SOURCE SUPER`, the
//! paths escaped as octal (`\040` for a space). Mount ids are unique across mount
//! namespaces, so a descriptor's `mnt_id` (its `fdinfo`) is looked up in the table of the
//! process that holds it when it is not in this process's own.

use std::path::PathBuf;

/// One mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The mount's id (`mnt_id` in `fdinfo`, `STATX_MNT_ID`).
    pub id: u64,
    /// The id of the mount it is mounted on (itself or one not listed, for the root).
    pub parent: u64,
    /// The filesystem's device, `major:minor`: the same for every mount of one filesystem.
    pub device: String,
    /// The directory of its filesystem that the mount shows.
    pub root: PathBuf,
    /// Where it is mounted.
    pub point: PathBuf,
    /// The filesystem type (`ext4`, `fuse.sshfs`, `nfs4`, …).
    pub fstype: String,
}

impl Mount {
    /// Whether another process or another host answers for this filesystem, so that a call
    /// reaching it can wait as long as that one does not answer: FUSE (any `fuse`, `fuseblk`
    /// or `fuse.*`, virtiofs) and the network filesystems.
    pub fn is_served_elsewhere(&self) -> bool {
        const NETWORK: [&str; 13] = [
            "nfs",
            "nfs4",
            "cifs",
            "smb3",
            "smbfs",
            "ncpfs",
            "9p",
            "ceph",
            "afs",
            "glusterfs",
            "lustre",
            "gfs2",
            "ocfs2",
        ];
        self.fstype == "fuse"
            || self.fstype == "fuseblk"
            || self.fstype.starts_with("fuse.")
            || self.fstype == "virtiofs"
            || NETWORK.contains(&self.fstype.as_str())
    }
}

/// The mounts of `pid`'s mount namespace (`None`: this process's own).
#[cfg(target_os = "linux")]
pub fn read(pid: Option<u32>) -> std::io::Result<Vec<Mount>> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/mountinfo"),
        None => "/proc/self/mountinfo".to_owned(),
    };
    parse(&std::fs::read_to_string(path)?).ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidData, "unreadable mountinfo line")
    })
}

/// Parses a mount table; `None` when a line cannot be read.
pub fn parse(text: &str) -> Option<Vec<Mount>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let (mount, fs) = line.split_once(" - ")?;
            let mut fields = mount.split(' ');
            let id = fields.next()?.parse().ok()?;
            let parent = fields.next()?.parse().ok()?;
            let device = fields.next()?.to_owned();
            let root = unescape(fields.next()?);
            let point = unescape(fields.next()?);
            let fstype = fs.split(' ').next()?.to_owned();
            Some(Mount {
                id,
                parent,
                device,
                root,
                point,
                fstype,
            })
        })
        .collect()
}

/// A path field with its octal escapes (`\040`, `\011`, `\012`, `\134`) decoded.
pub fn unescape(field: &str) -> PathBuf {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                let value = d.iter().fold(0u32, |v, c| v * 8 + u32::from(c - b'0'));
                out.push(u8::try_from(value).unwrap_or(b'?'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    path_from_bytes(out)
}

#[cfg(unix)]
fn path_from_bytes(bytes: Vec<u8>) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    PathBuf::from(std::ffi::OsString::from_vec(bytes))
}

#[cfg(not(unix))]
fn path_from_bytes(bytes: Vec<u8>) -> PathBuf {
    PathBuf::from(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const TABLE: &str = "\
22 1 252:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
24 22 0:22 / /proc rw,nosuid shared:12 - proc proc rw
40 22 0:40 / /mnt/with\\040space rw shared:20 - fuse.sshfs host:/ rw,user_id=0
41 22 0:41 / /srv/nfs rw - nfs4 server:/export rw
42 22 0:42 / /srv/fuse rw - fuse /dev/fuse rw
43 42 252:0 /home /srv/fuse rw - ext4 /dev/vda rw
";

    #[test]
    fn a_table_is_read_with_its_escaped_paths_and_types() {
        let mounts = parse(TABLE).unwrap();
        assert_eq!(mounts.len(), 6);
        assert_eq!(mounts[2].point, Path::new("/mnt/with space"));
        assert_eq!(mounts[2].fstype, "fuse.sshfs");
        assert_eq!(mounts[2].device, "0:40");
        assert_eq!(mounts[3].id, 41);
        assert!(
            parse("22 1 252:0 / /\n").is_none(),
            "a line without its type"
        );
        assert!(
            parse("22 x 8:1 / / rw - ext4 /dev/sda1 rw\n").is_none(),
            "a bad parent"
        );
        assert_eq!(mounts[5].root, Path::new("/home"));
        assert_eq!(mounts[5].parent, 42);
    }

    #[test]
    fn escapes_are_undone_and_a_broken_one_is_kept() {
        assert_eq!(unescape(r"a\040b\134c\012"), Path::new("a b\\c\n"));
        assert_eq!(unescape(r"a\9b\04"), Path::new(r"a\9b\04"));
    }

    #[test]
    fn fuse_and_network_filesystems_are_served_elsewhere_and_local_ones_are_not() {
        let mounts = parse(TABLE).unwrap();
        let served: Vec<bool> = mounts.iter().map(Mount::is_served_elsewhere).collect();
        assert_eq!(served, [false, false, true, true, true, false]);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn this_process_reads_its_own_table() {
        let mounts = read(None).unwrap();
        assert!(mounts.iter().any(|m| m.point == Path::new("/")));
    }
}
