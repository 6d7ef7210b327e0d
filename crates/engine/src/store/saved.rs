//! What a process keeps of the store across runs, in the user's cache directory: a small
//! binary encoding, and reading it back without trusting it.
//!
//! A saved file is `MAGIC`, its kind (8 bytes), its format (a `u32`) and the body: numbers
//! little-endian, byte strings and texts after their length (a `u64`), an optional text
//! after a flag byte. Reading checks every length against what is left and every text for
//! UTF-8; a file that is missing, of another kind or format, short, long or off in any way
//! is no saved state at all, and the caller starts afresh. A file is replaced whole (a
//! temporary file renamed over it), so a reader sees the old one or the new one.
//!
//! Nothing saved is ever trusted for a file it describes: each entry keeps the file's
//! [`FileVersion`], and one whose file's version is different now is read again.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use crate::storage::{
    path_from_bytes, path_to_bytes, FileId, FileVersion, OpenMode, SessionStorage,
};

/// The first bytes of every saved file.
const MAGIC: &[u8; 8] = b"gjcfs\0sv";

/// The length of an encoded [`FileVersion`]: device, inode and length as `u64`, the
/// modification and change times as `i128`.
const VERSION_LEN: usize = 8 * 3 + 16 * 2;

/// Writes a saved file's body.
#[derive(Debug)]
pub struct Encoder(Vec<u8>);

impl Encoder {
    /// A new file of `kind` in `format`.
    pub fn new(kind: &[u8; 8], format: u32) -> Self {
        let mut bytes = Vec::with_capacity(1 << 16);
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(kind);
        bytes.extend_from_slice(&format.to_le_bytes());
        Encoder(bytes)
    }

    /// A number.
    pub fn u64(&mut self, n: u64) {
        self.0.extend_from_slice(&n.to_le_bytes());
    }

    /// A signed number.
    pub fn i64(&mut self, n: i64) {
        self.0.extend_from_slice(&n.to_le_bytes());
    }

    /// A float, as its bits.
    pub fn f64(&mut self, n: f64) {
        self.u64(n.to_bits());
    }

    /// A flag, one byte.
    pub fn bool(&mut self, b: bool) {
        self.0.push(u8::from(b));
    }

    /// Bytes after their length.
    pub fn bytes(&mut self, bytes: &[u8]) {
        self.u64(bytes.len() as u64);
        self.0.extend_from_slice(bytes);
    }

    /// A text after its length.
    pub fn str(&mut self, text: &str) {
        self.bytes(text.as_bytes());
    }

    /// An optional text after a flag byte.
    pub fn opt_str(&mut self, text: Option<&str>) {
        self.bool(text.is_some());
        if let Some(text) = text {
            self.str(text);
        }
    }

    /// A file's version.
    pub fn version(&mut self, v: &FileVersion) {
        self.u64(v.id.dev);
        self.u64(v.id.ino);
        self.u64(v.len);
        self.0.extend_from_slice(&v.mtime_ns.to_le_bytes());
        self.0.extend_from_slice(&v.ctime_ns.to_le_bytes());
    }

    /// The whole file.
    pub fn finish(self) -> Vec<u8> {
        self.0
    }
}

/// Reads a saved file's body; every call is `None` once anything is off.
#[derive(Debug)]
pub struct Decoder<'a> {
    rest: &'a [u8],
}

impl<'a> Decoder<'a> {
    /// The body of `bytes` if it is a file of `kind` in `format`.
    pub fn new(bytes: &'a [u8], kind: &[u8; 8], format: u32) -> Option<Self> {
        let rest = bytes.strip_prefix(MAGIC)?.strip_prefix(kind)?;
        let rest = rest.strip_prefix(&format.to_le_bytes()[..])?;
        Some(Decoder { rest })
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.rest.len() {
            return None;
        }
        let (taken, rest) = self.rest.split_at(n);
        self.rest = rest;
        Some(taken)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    /// A number; `None` past the end.
    pub fn u64(&mut self) -> Option<u64> {
        self.array().map(u64::from_le_bytes)
    }

    /// A signed number; `None` past the end.
    pub fn i64(&mut self) -> Option<i64> {
        self.array().map(i64::from_le_bytes)
    }

    /// A float; `None` past the end.
    pub fn f64(&mut self) -> Option<f64> {
        self.u64().map(f64::from_bits)
    }

    /// A flag; `None` past the end or for a byte that is no flag.
    pub fn bool(&mut self) -> Option<bool> {
        match self.take(1)? {
            [0] => Some(false),
            [1] => Some(true),
            _ => None,
        }
    }

    /// A count of items to come, each at least `min_bytes` long: `None` when that many
    /// cannot fit in what is left (a damaged count never makes a huge allocation).
    pub fn count(&mut self, min_bytes: usize) -> Option<usize> {
        let n = usize::try_from(self.u64()?).ok()?;
        (n.checked_mul(min_bytes.max(1))? <= self.rest.len()).then_some(n)
    }

    /// Bytes after their length; `None` when fewer are left.
    pub fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.u64()?).ok()?;
        self.take(n)
    }

    /// A text after its length; `None` when fewer bytes are left or they are no UTF-8.
    pub fn str(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.bytes()?).ok()
    }

    /// An optional text after a flag byte.
    pub fn opt_str(&mut self) -> Option<Option<&'a str>> {
        match self.bool()? {
            false => Some(None),
            true => self.str().map(Some),
        }
    }

    /// A file's version; `None` past the end.
    pub fn version(&mut self) -> Option<FileVersion> {
        Some(FileVersion {
            id: FileId {
                dev: self.u64()?,
                ino: self.u64()?,
            },
            len: self.u64()?,
            mtime_ns: i128::from_le_bytes(self.array()?),
            ctime_ns: i128::from_le_bytes(self.array()?),
        })
    }

    /// Whether every byte was read: a file with more is not one this format wrote.
    pub fn is_done(&self) -> bool {
        self.rest.is_empty()
    }
}

/// The version of each of `paths` now (`None` where it cannot be had), asked on several
/// threads when there are many: on 50,000 files the stats were an eighth of a listing.
pub fn versions(storage: &dyn SessionStorage, paths: &[PathBuf]) -> Vec<Option<FileVersion>> {
    const PER_THREAD: usize = 4096;
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get().min(4))
        .min(paths.len().div_ceil(PER_THREAD));
    if threads <= 1 {
        return paths.iter().map(|p| storage.version(p).ok()).collect();
    }
    let chunk = paths.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let parts: Vec<_> = paths
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|p| storage.version(p).ok())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        parts
            .into_iter()
            .flat_map(|part| part.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

/// The most bytes a saved file is read for, a floor for small stores.
const JUSTIFIED_FLOOR: usize = 1 << 20;
/// The most bytes a saved file may keep per store file: far beyond what a path, its
/// version and a listing's or usage's value take.
const JUSTIFIED_PER_FILE: usize = 16 << 10;

/// The longest saved file a store of `files` files justifies: one longer (a file damaged,
/// extended or left by another store) is never read.
pub fn justified_len(files: usize) -> usize {
    files
        .saturating_mul(JUSTIFIED_PER_FILE)
        .saturating_add(JUSTIFIED_FLOOR)
}

/// A value a saved file keeps per store file ([`ByVersion`]).
pub trait Saved: Sized + Clone + PartialEq {
    /// The saved file's kind.
    const KIND: &'static [u8; 8];
    /// Its format: a change of the encoding takes a new one.
    const FORMAT: u32;
    /// Writes the value (its file's path is saved already).
    fn encode(&self, e: &mut Encoder);
    /// Reads the value saved for the file at `path`.
    fn decode(d: &mut Decoder, path: &Path) -> Option<Self>;
}

/// A value per file (what reading the file gave), which counts while the file keeps the
/// version it had when it was read; kept in memory, and saved between runs.
#[derive(Debug)]
pub struct ByVersion<T> {
    /// By the path's bytes: hashing a `Path` walks its components.
    known: HashMap<OsString, (FileVersion, T)>,
    /// Whether it changed since it was loaded (or made).
    changed: bool,
}

impl<T> Default for ByVersion<T> {
    fn default() -> Self {
        ByVersion {
            known: HashMap::new(),
            changed: false,
        }
    }
}

impl<T: Saved> ByVersion<T> {
    /// The value kept for `path` if its file still has `version`.
    pub fn get(&self, path: &Path, version: &FileVersion) -> Option<&T> {
        self.known
            .get(path.as_os_str())
            .filter(|(kept, _)| kept == version)
            .map(|(_, value)| value)
    }

    /// Keeps `value` for `path` at `version`.
    pub fn insert(&mut self, path: &Path, version: FileVersion, value: T) {
        let new = (version, value);
        if self.known.get(path.as_os_str()) != Some(&new) {
            self.known.insert(path.as_os_str().to_owned(), new);
            self.changed = true;
        }
    }

    /// Forgets `path`: its version and value, if it had any.
    pub fn remove(&mut self, path: &Path) -> Option<(FileVersion, T)> {
        let removed = self.known.remove(path.as_os_str());
        self.changed |= removed.is_some();
        removed
    }

    /// Replaces the value kept for `path`, at the version it was kept with.
    pub fn replace(&mut self, path: &Path, value: T) {
        if let Some((_, kept)) = self.known.get_mut(path.as_os_str()) {
            if *kept != value {
                *kept = value;
                self.changed = true;
            }
        }
    }

    /// Forgets every file but those `keep` accepts.
    pub fn retain(&mut self, keep: impl Fn(&Path) -> bool) {
        let before = self.known.len();
        self.known.retain(|path, _| keep(Path::new(path)));
        self.changed |= self.known.len() != before;
    }

    /// What was saved at `path` for a store of `files` files; nothing when there is no
    /// such file, it cannot be read as one of `T`, or it is longer than such a store
    /// justifies ([`justified_len`]): it is then never read whole, and the next save
    /// replaces it.
    pub fn load(storage: &dyn SessionStorage, path: &Path, files: usize) -> Self {
        let limit = justified_len(files);
        let bytes = storage.read_prefix(path, limit.saturating_add(1)).ok();
        let too_long = bytes.as_ref().is_some_and(|b| b.len() > limit);
        let known = bytes
            .filter(|_| !too_long)
            .and_then(|bytes| Self::decode(&bytes))
            .unwrap_or_default();
        ByVersion {
            known,
            changed: too_long,
        }
    }

    /// Saves at `path` if anything changed since it was loaded: a file replaced whole.
    pub fn save(&mut self, storage: &dyn SessionStorage, path: &Path) -> io::Result<()> {
        if self.changed {
            write(storage, path, &self.encode())?;
            self.changed = false;
        }
        Ok(())
    }

    fn encode(&self) -> Vec<u8> {
        let mut e = Encoder::new(T::KIND, T::FORMAT);
        e.u64(self.known.len() as u64);
        for (path, (version, value)) in &self.known {
            e.bytes(path_to_bytes(Path::new(path)));
            e.version(version);
            value.encode(&mut e);
        }
        e.finish()
    }

    fn decode(bytes: &[u8]) -> Option<HashMap<OsString, (FileVersion, T)>> {
        let mut d = Decoder::new(bytes, T::KIND, T::FORMAT)?;
        // A path's length and a version at least.
        let n = d.count(8 + VERSION_LEN)?;
        let mut known = HashMap::with_capacity(n);
        for _ in 0..n {
            let path = path_from_bytes(d.bytes()?).into_owned();
            let version = d.version()?;
            let value = T::decode(&mut d, &path)?;
            known.insert(path.into_os_string(), (version, value));
        }
        d.is_done().then_some(known)
    }
}

impl<T: Saved> Saved for Option<T> {
    const KIND: &'static [u8; 8] = T::KIND;
    const FORMAT: u32 = T::FORMAT;

    fn encode(&self, e: &mut Encoder) {
        e.bool(self.is_some());
        if let Some(value) = self {
            value.encode(e);
        }
    }

    fn decode(d: &mut Decoder, path: &Path) -> Option<Self> {
        match d.bool()? {
            false => Some(None),
            true => T::decode(d, path).map(Some),
        }
    }
}

/// Replaces the saved file at `path` by `bytes`: written to a temporary file beside it (in
/// a directory made owner-only if missing), then renamed over it. Not made durable: a crash
/// may lose it, and the next run starts afresh.
pub fn write(storage: &dyn SessionStorage, path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        storage.ensure_dir(dir)?;
    }
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{}.tmp", std::process::id()));
    let temp = std::path::PathBuf::from(name);
    let written = (|| {
        let mut file = storage.open_writer(&temp, OpenMode::CreateNew)?;
        file.write_all(bytes)?;
        file.close()?;
        storage.rename(&temp, path)
    })();
    if written.is_err() {
        let _ = storage.unlink(&temp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::MemoryStorage;

    fn sample() -> Vec<u8> {
        let mut e = Encoder::new(b"testkind", 3);
        e.u64(7);
        e.i64(-5);
        e.f64(0.25);
        e.bool(true);
        e.str("héllo");
        e.opt_str(None);
        e.opt_str(Some(""));
        e.version(&FileVersion {
            id: FileId { dev: 1, ino: 2 },
            len: 3,
            mtime_ns: -4,
            ctime_ns: 5,
        });
        e.finish()
    }

    #[test]
    fn what_is_written_reads_back() {
        let bytes = sample();
        let mut d = Decoder::new(&bytes, b"testkind", 3).unwrap();
        assert_eq!(d.u64(), Some(7));
        assert_eq!(d.i64(), Some(-5));
        assert_eq!(d.f64(), Some(0.25));
        assert_eq!(d.bool(), Some(true));
        assert_eq!(d.str(), Some("héllo"));
        assert_eq!(d.opt_str(), Some(None));
        assert_eq!(d.opt_str(), Some(Some("")));
        let v = d.version().unwrap();
        assert_eq!(
            (v.id.dev, v.id.ino, v.len, v.mtime_ns, v.ctime_ns),
            (1, 2, 3, -4, 5)
        );
        assert!(d.is_done());
    }

    #[test]
    fn another_kind_or_format_or_a_cut_file_reads_as_nothing() {
        let bytes = sample();
        assert!(Decoder::new(&bytes, b"otherkin", 3).is_none());
        assert!(Decoder::new(&bytes, b"testkind", 4).is_none());
        for cut in 0..bytes.len() {
            let Some(mut d) = Decoder::new(&bytes[..cut], b"testkind", 3) else {
                continue;
            };
            let all = (|| {
                d.u64()?;
                d.i64()?;
                d.f64()?;
                d.bool()?;
                d.str()?;
                d.opt_str()?;
                d.opt_str()?;
                d.version()
            })();
            assert!(all.is_none() || !d.is_done(), "cut at {cut}");
        }
        // A count that cannot fit is refused before anything is allocated.
        let mut e = Encoder::new(b"testkind", 3);
        e.u64(u64::MAX);
        let bytes = e.finish();
        assert_eq!(Decoder::new(&bytes, b"testkind", 3).unwrap().count(1), None);
    }

    #[test]
    fn a_saved_file_is_replaced_whole() {
        let storage = MemoryStorage::new();
        let path = Path::new("/cache/store/listing");
        write(&storage, path, b"one").unwrap();
        write(&storage, path, b"two").unwrap();
        assert_eq!(storage.file(path).as_deref(), Some(&b"two"[..]));
        assert_eq!(
            storage.list_files(Path::new("/cache/store")).unwrap().len(),
            1
        );
    }

    #[derive(Debug, Clone, PartialEq)]
    struct Text(String);

    impl Saved for Text {
        const KIND: &'static [u8; 8] = b"texttest";
        const FORMAT: u32 = 1;
        fn encode(&self, e: &mut Encoder) {
            e.str(&self.0);
        }
        fn decode(d: &mut Decoder, _: &Path) -> Option<Self> {
            d.str().map(|t| Text(t.to_owned()))
        }
    }

    #[test]
    fn values_count_while_their_file_keeps_its_version_and_saving_writes_only_changes() {
        let storage = MemoryStorage::new();
        let at = Path::new("/cache/texts");
        let v = |len| FileVersion {
            id: FileId { dev: 1, ino: 2 },
            len,
            mtime_ns: 3,
            ctime_ns: 4,
        };
        let mut cache: ByVersion<Option<Text>> = ByVersion::load(&storage, at, 10);
        cache.insert(Path::new("/s/a"), v(1), Some(Text("a".into())));
        cache.insert(Path::new("/s/b"), v(1), None);
        cache.replace(Path::new("/s/a"), Some(Text("A".into())));
        cache.save(&storage, at).unwrap();
        let mut loaded: ByVersion<Option<Text>> = ByVersion::load(&storage, at, 10);
        assert_eq!(
            loaded.get(Path::new("/s/a"), &v(1)),
            Some(&Some(Text("A".into())))
        );
        assert_eq!(
            loaded.get(Path::new("/s/a"), &v(2)),
            None,
            "another version"
        );
        assert_eq!(loaded.get(Path::new("/s/b"), &v(1)), Some(&None));
        let ops = storage.op_count();
        loaded.insert(Path::new("/s/b"), v(1), None);
        loaded.save(&storage, at).unwrap();
        assert_eq!(storage.op_count(), ops, "nothing changed, nothing written");
        loaded.retain(|p| p == Path::new("/s/b"));
        loaded.save(&storage, at).unwrap();
        let reloaded: ByVersion<Option<Text>> = ByVersion::load(&storage, at, 10);
        assert_eq!(reloaded.known.len(), 1);
        // Damaged: nothing at all.
        let bytes = storage.file(at).unwrap();
        storage.put_file(at, &bytes[..bytes.len() - 1]);
        let damaged: ByVersion<Option<Text>> = ByVersion::load(&storage, at, 10);
        assert!(damaged.known.is_empty());
    }

    #[test]
    fn a_saved_file_longer_than_its_store_justifies_is_never_read_and_is_replaced() {
        let storage = MemoryStorage::new();
        let at = Path::new("/cache/texts");
        let mut cache: ByVersion<Option<Text>> = ByVersion::default();
        cache.insert(
            Path::new("/s/a"),
            FileVersion {
                id: FileId { dev: 1, ino: 2 },
                len: 1,
                mtime_ns: 3,
                ctime_ns: 4,
            },
            Some(Text("a".into())),
        );
        cache.save(&storage, at).unwrap();
        let mut bytes = storage.file(at).unwrap();
        assert_eq!(
            ByVersion::<Option<Text>>::load(&storage, at, 1).known.len(),
            1
        );
        // Extended past what one file justifies (a well-formed start, then zeros).
        bytes.resize(justified_len(1) + 1, 0);
        storage.put_file(at, &bytes);
        let mut refused: ByVersion<Option<Text>> = ByVersion::load(&storage, at, 1);
        assert!(refused.known.is_empty());
        // A larger store justifies it (and then it is read, and found damaged).
        let larger: ByVersion<Option<Text>> = ByVersion::load(&storage, at, 1000);
        assert!(larger.known.is_empty() && !larger.changed);
        // The refused file is replaced by the next save.
        refused.save(&storage, at).unwrap();
        assert!(storage.file(at).unwrap().len() < 100);
    }
}
