//! Owner-only security descriptors and file attributes.
//!
//! Every node's security descriptor names the mounting user as owner and group and has a
//! protected DACL (nothing inherited) with one entry: the mounting user, allowed what the
//! node's mode bits allow them (`r`: read data, `w`: write and append data, `x` on a
//! directory: traverse; always: read attributes, extended attributes and the descriptor).
//! Nobody else is named, so nobody else is allowed anything; the adapter also refuses every
//! open by another user ([`crate::Adapter::create`]), since Dokan leaves access checks to
//! the filesystem. Descriptors cannot be changed (`SetFileSecurity` is refused).
//!
//! The descriptor is built here as the bytes of a self-relative `SECURITY_DESCRIPTOR`,
//! so its layout is tested on every platform.

use gjcfs_vfs::{Attr, NodeKind};

/// A security identifier in its binary form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sid(Vec<u8>);

/// The most sub-authorities a SID has.
const SID_MAX_SUB_AUTHORITIES: usize = 15;

impl Sid {
    /// Parses `S-1-<authority>-<sub>-…`.
    pub fn parse(text: &str) -> Option<Sid> {
        let mut parts = text.strip_prefix("S-")?.split('-');
        let revision: u8 = parts.next()?.parse().ok()?;
        let authority: u64 = parts.next()?.parse().ok()?;
        if revision != 1 || authority >= 1 << 48 {
            return None;
        }
        let subs: Vec<u32> = parts.map(|p| p.parse().ok()).collect::<Option<_>>()?;
        if subs.is_empty() || subs.len() > SID_MAX_SUB_AUTHORITIES {
            return None;
        }
        let mut bytes = vec![1, subs.len() as u8];
        bytes.extend_from_slice(&authority.to_be_bytes()[2..]);
        for sub in subs {
            bytes.extend_from_slice(&sub.to_le_bytes());
        }
        Some(Sid(bytes))
    }

    /// A SID from its binary form (checked to be one).
    pub fn from_bytes(bytes: &[u8]) -> Option<Sid> {
        let (&revision, rest) = bytes.split_first()?;
        let count = usize::from(*rest.first()?);
        let valid = revision == 1
            && (1..=SID_MAX_SUB_AUTHORITIES).contains(&count)
            && bytes.len() == 8 + 4 * count;
        valid.then(|| Sid(bytes.to_vec()))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Display for Sid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut authority = [0u8; 8];
        authority[2..].copy_from_slice(&self.0[2..8]);
        write!(f, "S-{}-{}", self.0[0], u64::from_be_bytes(authority))?;
        for sub in self.0[8..].chunks_exact(4) {
            write!(
                f,
                "-{}",
                u32::from_le_bytes([sub[0], sub[1], sub[2], sub[3]])
            )?;
        }
        Ok(())
    }
}

// Access rights (winnt.h).
const FILE_READ_DATA: u32 = 0x0001;
const FILE_WRITE_DATA: u32 = 0x0002;
const FILE_APPEND_DATA: u32 = 0x0004;
const FILE_READ_EA: u32 = 0x0008;
const FILE_WRITE_EA: u32 = 0x0010;
const FILE_TRAVERSE: u32 = 0x0020;
const FILE_READ_ATTRIBUTES: u32 = 0x0080;
const FILE_WRITE_ATTRIBUTES: u32 = 0x0100;
const READ_CONTROL: u32 = 0x0002_0000;
const SYNCHRONIZE: u32 = 0x0010_0000;

/// `FILE_GENERIC_READ`.
pub const READ_ACCESS: u32 =
    READ_CONTROL | SYNCHRONIZE | FILE_READ_DATA | FILE_READ_ATTRIBUTES | FILE_READ_EA;
/// `FILE_GENERIC_WRITE`.
pub const WRITE_ACCESS: u32 = READ_CONTROL
    | SYNCHRONIZE
    | FILE_WRITE_DATA
    | FILE_APPEND_DATA
    | FILE_WRITE_ATTRIBUTES
    | FILE_WRITE_EA;

/// What the mounting user is allowed on a node of mode `perm`.
pub fn access_mask(kind: NodeKind, perm: u16) -> u32 {
    let mut mask = READ_CONTROL | SYNCHRONIZE | FILE_READ_ATTRIBUTES | FILE_READ_EA;
    if perm & 0o400 != 0 {
        mask |= READ_ACCESS;
    }
    if perm & 0o200 != 0 {
        mask |= WRITE_ACCESS;
    }
    if kind == NodeKind::Directory && perm & 0o100 != 0 {
        mask |= FILE_TRAVERSE;
    }
    mask
}

// SECURITY_INFORMATION bits.
pub const OWNER_SECURITY_INFORMATION: u32 = 0x1;
pub const GROUP_SECURITY_INFORMATION: u32 = 0x2;
pub const DACL_SECURITY_INFORMATION: u32 = 0x4;

// Descriptor control bits, revisions, ACE type and flags.
const SE_DACL_PRESENT: u16 = 0x0004;
const SE_DACL_PROTECTED: u16 = 0x1000;
const SE_SELF_RELATIVE: u16 = 0x8000;
const SECURITY_DESCRIPTOR_REVISION: u8 = 1;
const ACL_REVISION: u8 = 2;
const ACCESS_ALLOWED_ACE_TYPE: u8 = 0;
const OBJECT_INHERIT_ACE: u8 = 0x1;
const CONTAINER_INHERIT_ACE: u8 = 0x2;

/// The self-relative security descriptor of a node: the parts `requested` asks for
/// (owner, group, DACL; a SACL is never given), owner and group `owner`, the DACL
/// allowing `owner` [`access_mask`] and nobody anything else.
pub fn descriptor(owner: &Sid, kind: NodeKind, perm: u16, requested: u32) -> Vec<u8> {
    const HEADER: usize = 20;
    let mut control = SE_SELF_RELATIVE;
    let mut body = Vec::new();
    let mut place = |part: &[u8]| {
        let offset = (HEADER + body.len()) as u32;
        body.extend_from_slice(part);
        offset
    };
    let owner_offset = if requested & OWNER_SECURITY_INFORMATION != 0 {
        place(owner.as_bytes())
    } else {
        0
    };
    let group_offset = if requested & GROUP_SECURITY_INFORMATION != 0 {
        place(owner.as_bytes())
    } else {
        0
    };
    let dacl_offset = if requested & DACL_SECURITY_INFORMATION != 0 {
        control |= SE_DACL_PRESENT | SE_DACL_PROTECTED;
        place(&owner_only_acl(owner, kind, perm))
    } else {
        0
    };
    let mut out = Vec::with_capacity(HEADER + body.len());
    out.push(SECURITY_DESCRIPTOR_REVISION);
    out.push(0);
    out.extend_from_slice(&control.to_le_bytes());
    for offset in [owner_offset, group_offset, 0, dacl_offset] {
        out.extend_from_slice(&offset.to_le_bytes());
    }
    out.extend_from_slice(&body);
    out
}

/// An ACL of one access-allowed entry for `owner`. A directory's entry is marked
/// inheritable, so that what Windows shows of its children matches.
fn owner_only_acl(owner: &Sid, kind: NodeKind, perm: u16) -> Vec<u8> {
    let sid = owner.as_bytes();
    let ace_size = 8 + sid.len();
    let acl_size = 8 + ace_size;
    let flags = if kind == NodeKind::Directory {
        OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE
    } else {
        0
    };
    let mut acl = Vec::with_capacity(acl_size);
    acl.extend_from_slice(&[ACL_REVISION, 0]);
    acl.extend_from_slice(&(acl_size as u16).to_le_bytes());
    acl.extend_from_slice(&1u16.to_le_bytes());
    acl.extend_from_slice(&0u16.to_le_bytes());
    acl.extend_from_slice(&[ACCESS_ALLOWED_ACE_TYPE, flags]);
    acl.extend_from_slice(&(ace_size as u16).to_le_bytes());
    acl.extend_from_slice(&access_mask(kind, perm).to_le_bytes());
    acl.extend_from_slice(sid);
    acl
}

// File attributes (winnt.h).
pub const FILE_ATTRIBUTE_READONLY: u32 = 0x01;
pub const FILE_ATTRIBUTE_DIRECTORY: u32 = 0x10;
pub const FILE_ATTRIBUTE_NORMAL: u32 = 0x80;

/// A node's Windows attributes: a directory; a file without the owner's write bit (0400)
/// read-only; another file normal. A link shows as a read-only file ([links](crate#links)).
pub fn attributes(attr: &Attr) -> u32 {
    match attr.kind {
        NodeKind::Directory => FILE_ATTRIBUTE_DIRECTORY,
        NodeKind::Symlink => FILE_ATTRIBUTE_READONLY,
        NodeKind::File if attr.perm & 0o200 == 0 => FILE_ATTRIBUTE_READONLY,
        NodeKind::File => FILE_ATTRIBUTE_NORMAL,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const USER: &str = "S-1-5-21-1004336348-1177238915-682003330-1001";

    #[test]
    fn a_sid_reads_back_as_written() {
        let sid = Sid::parse(USER).expect("sid");
        assert_eq!(sid.to_string(), USER);
        assert_eq!(sid.as_bytes().len(), 8 + 4 * 5);
        assert_eq!(&sid.as_bytes()[..8], &[1, 5, 0, 0, 0, 0, 0, 5]);
        assert_eq!(Sid::from_bytes(sid.as_bytes()), Some(sid.clone()));
        assert_eq!(
            Sid::parse("S-1-5-18").expect("system").to_string(),
            "S-1-5-18"
        );
        for bad in [
            "",
            "S-1",
            "S-1-5",
            "S-2-5-18",
            "X-1-5-18",
            "S-1-5-x",
            "S-1-281474976710656-1",
        ] {
            assert_eq!(Sid::parse(bad), None, "{bad:?}");
        }
        assert_eq!(Sid::from_bytes(&sid.as_bytes()[..12]), None);
        assert_eq!(Sid::from_bytes(&[1, 0, 0, 0, 0, 0, 0, 5]), None);
    }

    /// An access control entry read back: type, flags, mask, SID.
    type Ace = (u8, u8, u32, Sid);

    /// The parts of a self-relative descriptor, read back: control, owner, group, and the
    /// DACL's entries.
    fn read_back(sd: &[u8]) -> (u16, Option<Sid>, Option<Sid>, Vec<Ace>) {
        let u16_at = |i: usize| u16::from_le_bytes([sd[i], sd[i + 1]]);
        let u32_at = |i: usize| u32::from_le_bytes([sd[i], sd[i + 1], sd[i + 2], sd[i + 3]]);
        let sid_at = |i: usize| {
            let len = 8 + 4 * usize::from(sd[i + 1]);
            Sid::from_bytes(&sd[i..i + len]).expect("a SID")
        };
        assert_eq!(sd[0], 1, "revision");
        let part = |i: usize| (u32_at(i) != 0).then(|| u32_at(i) as usize);
        assert_eq!(u32_at(12), 0, "no SACL");
        let mut aces = Vec::new();
        if let Some(acl) = part(16) {
            assert_eq!(sd[acl], 2, "ACL revision");
            assert_eq!(
                acl + usize::from(u16_at(acl + 2)),
                sd.len(),
                "the ACL ends it"
            );
            let mut at = acl + 8;
            for _ in 0..u16_at(acl + 4) {
                aces.push((sd[at], sd[at + 1], u32_at(at + 4), sid_at(at + 8)));
                at += usize::from(u16_at(at + 2));
            }
        }
        (u16_at(2), part(4).map(sid_at), part(8).map(sid_at), aces)
    }

    #[test]
    fn every_descriptor_allows_the_owner_alone() {
        let owner = Sid::parse(USER).expect("sid");
        let all =
            OWNER_SECURITY_INFORMATION | GROUP_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION;
        let cases = [
            (NodeKind::File, 0o400, 0, READ_ACCESS),
            (NodeKind::File, 0o600, 0, READ_ACCESS | WRITE_ACCESS),
            (
                NodeKind::File,
                0o200,
                0,
                WRITE_ACCESS | FILE_READ_ATTRIBUTES | FILE_READ_EA,
            ),
            (NodeKind::Directory, 0o700, 0x3, 0x0012_01BF),
        ];
        for (kind, perm, flags, mask) in cases {
            let sd = descriptor(&owner, kind, perm, all);
            let (control, o, g, aces) = read_back(&sd);
            assert_eq!(
                control,
                0x8000 | 0x1000 | 0x0004,
                "self-relative, protected DACL"
            );
            assert_eq!(o.as_ref(), Some(&owner));
            assert_eq!(g.as_ref(), Some(&owner));
            assert_eq!(
                aces,
                vec![(0, flags, mask, owner.clone())],
                "{kind:?} {perm:o}"
            );
        }
        // FILE_GENERIC_READ exactly, for a read-only file.
        assert_eq!(READ_ACCESS, 0x0012_0089);
        assert_eq!(WRITE_ACCESS, 0x0012_0116);
    }

    #[test]
    fn a_descriptor_holds_only_the_parts_asked_for() {
        let owner = Sid::parse(USER).expect("sid");
        let sd = descriptor(&owner, NodeKind::File, 0o400, OWNER_SECURITY_INFORMATION);
        assert_eq!(read_back(&sd), (0x8000, Some(owner.clone()), None, vec![]));
        let sd = descriptor(&owner, NodeKind::File, 0o400, DACL_SECURITY_INFORMATION);
        let (control, o, g, aces) = read_back(&sd);
        assert_eq!((control, o, g, aces.len()), (0x9004, None, None, 1));
        assert_eq!(descriptor(&owner, NodeKind::File, 0o400, 0).len(), 20);
    }

    #[test]
    fn attributes_show_directories_and_read_only_files() {
        let attr = |kind, perm| Attr {
            ino: 2,
            kind,
            size: 0,
            perm,
            nlink: 1,
            mtime_ms: 0,
            stable: false,
            lookup_each_open: false,
        };
        assert_eq!(attributes(&attr(NodeKind::Directory, 0o700)), 0x10);
        assert_eq!(attributes(&attr(NodeKind::File, 0o400)), 0x01);
        assert_eq!(attributes(&attr(NodeKind::File, 0o600)), 0x80);
        assert_eq!(attributes(&attr(NodeKind::File, 0o200)), 0x80);
        assert_eq!(attributes(&attr(NodeKind::Symlink, 0o777)), 0x01);
    }
}
