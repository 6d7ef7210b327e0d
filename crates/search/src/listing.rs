//! What the last update recorded of the store's directories: the listing that lets a check
//! finding nothing changed skip listing directories and reading the index's table of files.
//!
//! A [`Listing`] holds, for each directory of the store in the order the update looked at
//! them, its path, its version when that can be trusted to tell a change of its entries
//! ([`super::scan`]), and its transcript files in the order they were listed, each with the
//! stat the index holds of it. It is kept in one row of the `listing` table, which every
//! transaction that may change the `files` table deletes first ([`super::update`]): a
//! listing present is one the index agrees with.
//!
//! Encoding (little-endian): `gjcL`, a `u32` version ([`VERSION`]), a `u32` count of
//! directories; each directory is its path (bytes), a `u8` that is 1 when a version
//! [`FileVersion`] follows, a `u32` count of files, and each file as its name (bytes) and its
//! [`FileVersion`]. A [`FileVersion`] is device, inode and length as `u64` and the
//! modification and change times in nanoseconds as `i64`; bytes are a `u32` length and that many bytes of a path
//! ([`path_to_bytes`]). Anything else — another version, a short or long blob — decodes to
//! nothing, and the directories are listed.

use std::ops::Range;
use std::path::{Path, PathBuf};

use gjcfs_engine::storage::{path_from_bytes, path_to_bytes};
use gjcfs_engine::storage::{FileId, FileVersion};

const MAGIC: &[u8; 4] = b"gjcL";
/// The encoding's version (2: a [`FileVersion`] has its change time).
pub const VERSION: u32 = 2;

/// The store's directories as the last update saw them, decoded from its encoding, which it
/// keeps: the files' names are read from it where they are needed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    data: Vec<u8>,
    pub dirs: Vec<DirState>,
    /// Every file, directory after directory: where its name is in `data`, and its stat.
    files: Vec<(Range<usize>, FileVersion)>,
}

/// One directory of a [`Listing`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirState {
    pub path: PathBuf,
    /// Its version when listed, if it had settled; `None` lists it again next time.
    pub version: Option<FileVersion>,
    /// Its files, in listing order, among the listing's.
    files: Range<usize>,
    /// Where its version's [`FileVersion`] is in the encoding, when it has one.
    version_at: Option<usize>,
}

impl Listing {
    /// The listing `data` encode; `None` for anything but a whole listing of this version.
    pub fn decode(data: Vec<u8>) -> Option<Listing> {
        let mut r = Reader { data: &data, at: 0 };
        if r.take(4)? != MAGIC || r.u32()? != VERSION {
            return None;
        }
        let count = r.len()?;
        let mut dirs = Vec::new();
        let mut files = Vec::new();
        for _ in 0..count {
            let path = path_from_bytes(r.bytes()?).into_owned();
            let (version, version_at) = match r.take(1)? {
                [0] => (None, None),
                [1] => (Some(r.stat()?), Some(r.at - STAT_LEN)),
                _ => return None,
            };
            let first = files.len();
            for _ in 0..r.len()? {
                let name = r.range()?;
                files.push((name, r.stat()?));
            }
            dirs.push(DirState {
                path,
                version,
                files: first..files.len(),
                version_at,
            });
        }
        (r.at == data.len()).then_some(Listing { data, dirs, files })
    }

    /// The names of the files of `dir` (one of [`Listing::dirs`]) and their stats, in
    /// listing order, as [`path_to_bytes`] gives them.
    pub fn files<'a>(
        &'a self,
        dir: &DirState,
    ) -> impl Iterator<Item = (&'a [u8], &'a FileVersion)> {
        self.files[dir.files.clone()]
            .iter()
            .map(|(name, stat)| (&self.data[name.clone()], stat))
    }

    /// Where in the encoding the [`FileVersion`] of each file of `dir` is, in listing order (each
    /// follows the file's name).
    pub fn stat_offsets<'a>(&'a self, dir: &DirState) -> impl Iterator<Item = usize> + 'a {
        self.files[dir.files.clone()]
            .iter()
            .map(|(name, _)| name.end)
    }
}

impl DirState {
    /// Where in the encoding its version's [`FileVersion`] is, when it has one.
    pub fn version_offset(&self) -> Option<usize> {
        self.version_at
    }
}

/// The length of an encoded [`FileVersion`].
pub const STAT_LEN: usize = 40;

/// The encoding of `stat`, which a listing holds at a [`Listing::stat_offsets`] offset.
pub fn stat_bytes(stat: &FileVersion) -> [u8; STAT_LEN] {
    let mut out = [0; STAT_LEN];
    for (k, n) in [stat.id.dev, stat.id.ino, stat.len].into_iter().enumerate() {
        out[k * 8..k * 8 + 8].copy_from_slice(&n.to_le_bytes());
    }
    out[24..32].copy_from_slice(&(stat.mtime_ns as i64).to_le_bytes());
    out[32..].copy_from_slice(&(stat.ctime_ns as i64).to_le_bytes());
    out
}

/// Writes the encoding of a listing, directory after directory.
pub struct Encoder {
    out: Vec<u8>,
}

impl Encoder {
    /// A listing of `dirs` directories.
    pub fn new(dirs: usize) -> Self {
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        put_len(&mut out, dirs);
        Encoder { out }
    }

    /// The next directory, of `files` files: the next `files` calls of [`Encoder::file`].
    pub fn dir(&mut self, path: &Path, version: Option<&FileVersion>, files: usize) {
        put_bytes(&mut self.out, path_to_bytes(path));
        match version {
            Some(v) => {
                self.out.push(1);
                put_stat(&mut self.out, v);
            }
            None => self.out.push(0),
        }
        put_len(&mut self.out, files);
    }

    /// The next file of the directory, by its name's [`path_to_bytes`].
    pub fn file(&mut self, name: &[u8], stat: &FileVersion) {
        put_bytes(&mut self.out, name);
        put_stat(&mut self.out, stat);
    }

    pub fn finish(self) -> Vec<u8> {
        self.out
    }
}

fn put_len(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_len(out, bytes.len());
    out.extend_from_slice(bytes);
}

fn put_stat(out: &mut Vec<u8>, stat: &FileVersion) {
    out.extend_from_slice(&stat_bytes(stat));
}

/// An encoded listing, read from `at` on.
struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn range(&mut self) -> Option<Range<usize>> {
        let n = self.len()?;
        let start = self.at;
        self.take(n)?;
        Some(start..self.at)
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let bytes = self.data.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(bytes)
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.len()?;
        self.take(n)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn len(&mut self) -> Option<usize> {
        let n = usize::try_from(self.u32()?).ok()?;
        // A count larger than what is left cannot be whole (every item takes a byte).
        (n <= self.data.len() - self.at).then_some(n)
    }

    fn stat(&mut self) -> Option<FileVersion> {
        Some(FileVersion {
            id: FileId {
                dev: self.u64()?,
                ino: self.u64()?,
            },
            len: self.u64()?,
            mtime_ns: i128::from(self.u64()? as i64),
            ctime_ns: i128::from(self.u64()? as i64),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn stat(n: u64) -> FileVersion {
        FileVersion {
            id: FileId { dev: n, ino: n + 1 },
            len: n * 100,
            mtime_ns: -i128::from(n),
            ctime_ns: i128::from(n) * 3,
        }
    }

    /// Two directories: one settled with two files, one not settled and empty.
    fn sample() -> Vec<u8> {
        let mut e = Encoder::new(2);
        e.dir(Path::new("/store/--work--"), Some(&stat(7)), 2);
        e.file(b"a.jsonl", &stat(1));
        e.file(b"b.jsonl", &stat(2));
        e.dir(Path::new("/store/empty"), None, 0);
        e.finish()
    }

    #[test]
    fn a_listing_decodes_to_what_was_encoded() {
        let listing = Listing::decode(sample()).unwrap();
        assert_eq!(listing.dirs.len(), 2);
        let (work, empty) = (&listing.dirs[0], &listing.dirs[1]);
        assert_eq!(work.path, Path::new("/store/--work--"));
        assert_eq!(work.version, Some(stat(7)));
        let files: Vec<_> = listing.files(work).collect();
        assert_eq!(
            files,
            [(&b"a.jsonl"[..], &stat(1)), (&b"b.jsonl"[..], &stat(2))]
        );
        assert_eq!(empty.path, Path::new("/store/empty"));
        assert_eq!(empty.version, None);
        assert_eq!(listing.files(empty).count(), 0);
        let none = Listing::decode(Encoder::new(0).finish()).unwrap();
        assert!(none.dirs.is_empty());
    }

    #[test]
    fn a_stat_written_at_its_offset_is_what_decodes() {
        let listing = Listing::decode(sample()).unwrap();
        let mut bytes = sample();
        let work = &listing.dirs[0];
        let at: Vec<usize> = listing.stat_offsets(work).collect();
        bytes[at[1]..at[1] + STAT_LEN].copy_from_slice(&stat_bytes(&stat(9)));
        let v = work.version_offset().unwrap();
        bytes[v..v + STAT_LEN].copy_from_slice(&stat_bytes(&stat(8)));
        assert_eq!(listing.dirs[1].version_offset(), None);
        let patched = Listing::decode(bytes).unwrap();
        let files: Vec<_> = patched.files(&patched.dirs[0]).map(|(_, s)| *s).collect();
        assert_eq!(files, [stat(1), stat(9)]);
        assert_eq!(patched.dirs[0].version, Some(stat(8)));
    }

    /// A directory's version (or none) and its files' names and stats.
    type Dir = (Option<FileVersion>, Vec<(String, FileVersion)>);

    /// A listing of `dirs` encoded.
    fn encoded(dirs: &[Dir]) -> Vec<u8> {
        let mut e = Encoder::new(dirs.len());
        for (k, (version, files)) in dirs.iter().enumerate() {
            e.dir(
                Path::new(&format!("/store/d{k}")),
                version.as_ref(),
                files.len(),
            );
            for (name, stat) in files {
                e.file(name.as_bytes(), stat);
            }
        }
        e.finish()
    }

    fn any_stat() -> impl Strategy<Value = FileVersion> {
        (
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            any::<i64>(),
            any::<i64>(),
        )
            .prop_map(|(dev, ino, len, mtime_ns, ctime_ns)| FileVersion {
                id: FileId { dev, ino },
                len,
                mtime_ns: i128::from(mtime_ns),
                ctime_ns: i128::from(ctime_ns),
            })
    }

    fn any_dirs() -> impl Strategy<Value = Vec<Dir>> {
        let files = proptest::collection::vec(("[a-z0-9._-]{1,12}", any_stat()), 0..6);
        proptest::collection::vec((proptest::option::of(any_stat()), files), 0..4)
    }

    proptest! {
        #[test]
        fn every_listing_decodes_to_what_was_encoded(dirs in any_dirs()) {
            let listing = Listing::decode(encoded(&dirs)).unwrap();
            prop_assert_eq!(listing.dirs.len(), dirs.len());
            for (dir, (version, files)) in listing.dirs.iter().zip(&dirs) {
                prop_assert_eq!(&dir.version, version);
                let got: Vec<(Vec<u8>, FileVersion)> =
                    listing.files(dir).map(|(n, s)| (n.to_vec(), *s)).collect();
                let want: Vec<(Vec<u8>, FileVersion)> =
                    files.iter().map(|(n, s)| (n.as_bytes().to_vec(), *s)).collect();
                prop_assert_eq!(got, want);
            }
        }

        /// Damage anywhere decodes to nothing or to a listing whose every stat lies
        /// inside the bytes, never to a panic.
        #[test]
        fn damaged_listings_never_panic(
            dirs in any_dirs(),
            hits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        ) {
            let mut bytes = encoded(&dirs);
            for (at, b) in hits {
                let k = at.index(bytes.len());
                bytes[k] = b;
            }
            let len = bytes.len();
            if let Some(listing) = Listing::decode(bytes) {
                for dir in &listing.dirs {
                    for at in listing.stat_offsets(dir) {
                        prop_assert!(at + STAT_LEN <= len);
                    }
                    if let Some(at) = dir.version_offset() {
                        prop_assert!(at + STAT_LEN <= len);
                    }
                }
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Listing::decode(bytes);
        }
    }

    #[test]
    fn anything_but_a_whole_listing_decodes_to_nothing() {
        let bytes = sample();
        for n in 0..bytes.len() {
            assert_eq!(Listing::decode(bytes[..n].to_vec()), None, "cut at {n}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(Listing::decode(longer), None);
        let mut other = bytes.clone();
        other[4..8].copy_from_slice(&(VERSION - 1).to_le_bytes());
        assert_eq!(Listing::decode(other), None, "the version before");
        let mut flag = bytes.clone();
        let at = 4 + 4 + 4 + 4 + "/store/--work--".len();
        assert_eq!(flag[at], 1);
        flag[at] = 9;
        assert_eq!(Listing::decode(flag), None, "a bad version flag");
        let mut huge = bytes;
        huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(Listing::decode(huge), None, "a count beyond the blob");
    }
}
