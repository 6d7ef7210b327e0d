//! The real filesystem, through the platform calls of [`sys::os`].
//!
//! On Unix files are opened with `O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK` and created with mode
//! `0600`; directories are created `0700`. The process umask cannot widen these (it only
//! removes bits). On Windows files are opened without following a reparse point and created
//! with a protected DACL that grants only the current user (`sys::windows`). Every open is
//! checked on the handle it opened: anything but a regular file (a FIFO, a device, a
//! directory) is refused before it is read or written, so nothing blocks on a FIFO at a
//! session path. Writers open read-write so that they can read the file's last byte through
//! their own descriptor.

// The storage seam itself: the one place the engine touches the filesystem directly.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::sys::{self, os, Create, Open};
use super::{
    EntryKind, EntryStat, FileId, FileStat, OpenMode, ReadAt, ReadFile, SessionStorage,
    StorageWriter,
};

/// Storage on the local filesystem.
#[derive(Debug, Default, Clone, Copy)]
pub struct FileStorage;

/// The error for a path that names something other than a regular file.
pub fn not_a_regular_file() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "not a regular file")
}

/// Opens the regular file at `path` for reading without following a symlink or blocking
/// on a FIFO; anything but a regular file is refused before a byte is read.
pub fn open_regular(path: &Path) -> io::Result<File> {
    os::open(path, Open::READ)
}

/// Opens the directory at `dir` (for an fsync), never blocking on what is there instead.
pub fn open_dir(dir: &Path) -> io::Result<File> {
    os::open_dir(dir)
}

/// A directory on disk, open for looking up the versions of its entries by name.
#[derive(Debug)]
pub struct DirLookup(os::DirLookup);

impl DirLookup {
    /// Opens the directory `dir` for lookups by name.
    pub fn open(dir: &Path) -> io::Result<DirLookup> {
        os::DirLookup::open(dir).map(DirLookup)
    }

    /// The [`FileVersion`](super::FileVersion) of the entry `name` (following a symlink).
    pub fn version(&self, name: &std::ffi::OsStr) -> io::Result<super::FileVersion> {
        self.0.version(name)
    }

    /// The version of the directory itself when it tells every change of the directory's
    /// entries: where creating, removing or renaming an entry sets the directory's
    /// modification time for every process at once (local filesystems of known kinds on
    /// Linux and macOS). `None` where that is not relied on (network filesystems, FUSE,
    /// other kinds, Windows), so the directory is listed every time.
    pub fn listing_version(&self) -> io::Result<Option<super::FileVersion>> {
        self.0.listing_version()
    }
}

/// A directory that files are exported into, open once: every file and subdirectory is
/// created in it by a single name, never by a path built from that name.
///
/// Invariants:
/// - A name is one path component: not empty, not `.` or `..`, without a separator (or, on
///   Windows, a drive or device prefix) and without NUL; anything else is refused with
///   [`io::ErrorKind::InvalidInput`] before the filesystem is touched.
/// - A subdirectory is opened without following a symlink (on Windows any reparse point):
///   one there, even to a directory, is refused with [`io::ErrorKind::NotADirectory`].
/// - On Unix every create, open and rename is made relative to the directory's descriptor
///   (`mkdirat`, `openat`, `renameat`): a directory swapped for a symlink after it was
///   opened cannot redirect a write, and no write lands outside the directory opened. On
///   Windows, which has no such calls in its documented API, the path is joined, and each
///   directory is held open without delete sharing so that it cannot be renamed away and
///   replaced while it is written into.
/// - A file is written whole through a temp file created new (never through a symlink or
///   over anything there), made durable, and renamed onto its name, so a reader never sees
///   half a file and a crash leaves the old one whole.
#[derive(Debug)]
pub struct OutputDir {
    dir: os::OutputDir,
    path: PathBuf,
}

impl OutputDir {
    /// Opens the directory at `dir`, following a symlink there: the one the caller names.
    pub fn open(dir: &Path) -> io::Result<OutputDir> {
        Ok(OutputDir {
            dir: os::OutputDir::open(dir)?,
            path: dir.to_owned(),
        })
    }

    /// The path this directory was opened at, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates the directory `name` (owner-only) in this one unless it is there, and opens
    /// it without following a symlink.
    pub fn create_dir(&self, name: &str) -> io::Result<OutputDir> {
        check_name(name)?;
        Ok(OutputDir {
            dir: self.dir.create_dir(name)?,
            path: self.path.join(name),
        })
    }

    /// Writes `bytes` as the file `name` in this directory, replacing one there: owner-only
    /// (`0600`) when `private`, else readable by all (`0644`; on Windows the directory's
    /// inherited access).
    pub fn write_replacing(&self, name: &str, bytes: &[u8], private: bool) -> io::Result<()> {
        check_name(name)?;
        let temp = format!(".{name}.{}.tmp", std::process::id());
        self.dir.write_replacing(&temp, name, bytes, private)
    }
}

/// Refuses a name that is not exactly one normal path component (see [`OutputDir`]).
fn check_name(name: &str) -> io::Result<()> {
    let mut components = Path::new(name).components();
    let one = matches!(
        (components.next(), components.next()),
        (Some(std::path::Component::Normal(c)), None) if c == name
    );
    if one && !name.contains('\0') {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a single file name"),
        ))
    }
}

/// The bytes a path is stored as in an index ([`path_from_bytes`] gives the path back).
pub fn path_to_bytes(path: &Path) -> &[u8] {
    os::path_to_bytes(path)
}

/// The path stored as `bytes` ([`path_to_bytes`]).
pub fn path_from_bytes(bytes: &[u8]) -> std::borrow::Cow<'_, Path> {
    os::path_from_bytes(bytes)
}

impl SessionStorage for FileStorage {
    fn ensure_dir(&self, dir: &Path) -> io::Result<()> {
        os::ensure_dir(dir)
    }

    fn exists(&self, path: &Path) -> bool {
        fs::symlink_metadata(path).is_ok()
    }

    fn stat(&self, path: &Path) -> io::Result<FileStat> {
        os::stat(path)
    }

    fn version(&self, path: &Path) -> io::Result<super::FileVersion> {
        os::version(path)
    }

    fn dir_lookup(&self, dir: &Path) -> Option<io::Result<DirLookup>> {
        Some(DirLookup::open(dir))
    }

    fn open_read(&self, path: &Path) -> io::Result<Box<dyn Read + Send>> {
        Ok(Box::new(open_regular(path)?))
    }

    fn open_read_at(&self, path: &Path) -> io::Result<Box<dyn ReadFile>> {
        let file = open_regular(path)?;
        let id = os::info(&file)?.id;
        Ok(Box::new(PositionalFile { file, id }))
    }

    fn read_tail(&self, path: &Path, max: usize) -> io::Result<Vec<u8>> {
        let mut file = open_regular(path)?;
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(len.saturating_sub(max as u64)))?;
        let mut bytes = Vec::with_capacity(max.min(len as usize));
        file.read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    fn open_writer(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn StorageWriter>> {
        let append = matches!(mode, OpenMode::Append | OpenMode::AppendExisting);
        let create = match mode {
            OpenMode::Append => Create::IfMissing,
            OpenMode::AppendExisting => Create::Never,
            OpenMode::CreateNew => Create::New,
        };
        let file = os::open(
            path,
            Open {
                write: true,
                append,
                create,
            },
        )?;
        Ok(Box::new(FileWriter { file, append }))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn unlink(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn list_files(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let mut files = Vec::new();
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                files.push(entry.path());
            }
        }
        // One directory's entries: their names' bytes give the order of their paths, without
        // a walk of each path's components.
        files.sort_unstable_by(|a, b| a.as_os_str().cmp(b.as_os_str()));
        Ok(files)
    }

    fn list_dirs(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let mut dirs = Vec::new();
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                dirs.push(entry.path());
            }
        }
        dirs.sort();
        Ok(dirs)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        os::sync_dir(dir)
    }

    fn writers_elsewhere(&self, path: &Path) -> io::Result<Vec<u32>> {
        sys::writers_elsewhere(path)
    }

    fn lstat(&self, path: &Path) -> io::Result<EntryStat> {
        os::lstat(path)
    }

    fn user(&self) -> u32 {
        os::effective_uid()
    }

    fn has_acl(&self, path: &Path) -> io::Result<bool> {
        sys::has_posix_acl(path)
    }

    fn is_network_fs(&self, path: &Path) -> io::Result<bool> {
        sys::is_network_fs(path)
    }

    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        os::canonicalize(path)
    }

    fn canonicalize_local(&self, path: &Path) -> io::Result<PathBuf> {
        sys::canonicalize_local(path)
    }

    fn create_dir(&self, dir: &Path) -> io::Result<()> {
        os::create_dir(dir)
    }

    fn set_mode(&self, path: &Path, mode: u32) -> io::Result<()> {
        os::set_mode(path, mode)
    }

    #[cfg(unix)]
    fn set_mode_if(&self, path: &Path, expected: &super::Expected, mode: u32) -> io::Result<bool> {
        os::set_mode_if(path, expected, mode)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::hard_link(from, to)
    }

    fn sync_file(&self, path: &Path) -> io::Result<()> {
        os::sync_file(path)
    }

    fn list_entries(&self, dir: &Path) -> io::Result<Vec<(PathBuf, EntryKind)>> {
        let mut entries = Vec::new();
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            entries.push((entry.path(), os::entry_kind(entry.file_type()?)));
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(entries)
    }

    /// The platform's no-replace rename where it has one (`renameat2(RENAME_NOREPLACE)`,
    /// `MoveFileExW` without `MOVEFILE_REPLACE_EXISTING`); elsewhere a directory first
    /// claims the name with an empty directory of its own and then replaces that (a rename
    /// replaces only an empty directory), and a file is hard-linked into place and its old
    /// name removed.
    fn rename_no_replace(&self, from: &Path, to: &Path) -> io::Result<()> {
        match sys::rename_no_replace(from, to) {
            Err(e) if e.kind() == io::ErrorKind::Unsupported => {}
            other => return other,
        }
        if fs::symlink_metadata(from)?.file_type().is_dir() {
            self.create_dir(to)?;
            fs::rename(from, to).inspect_err(|_| {
                let _ = fs::remove_dir(to);
            })
        } else {
            fs::hard_link(from, to)?;
            fs::remove_file(from)
        }
    }

    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        fs::remove_dir(dir)
    }

    fn is_locked(&self, path: &Path) -> io::Result<bool> {
        match os::open(path, Open::READ) {
            Ok(file) => os::probe_lock(&file),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn watch(&self) -> io::Result<Box<dyn super::DirWatch>> {
        sys::dir_watch()
    }
}

/// A file read with positional reads (`pread`; on Windows reads at an offset), which
/// threads can share.
#[derive(Debug)]
struct PositionalFile {
    file: File,
    id: FileId,
}

impl ReadAt for PositionalFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        os::read_at(&self.file, buf, offset)
    }
}

impl ReadFile for PositionalFile {
    fn size(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn id(&self) -> FileId {
        self.id
    }

    fn links(&self) -> io::Result<u64> {
        Ok(os::info(&self.file)?.links)
    }

    fn mtime_ns(&self) -> io::Result<i128> {
        Ok(os::info(&self.file)?.mtime_ns)
    }

    fn ctime_ns(&self) -> io::Result<i128> {
        Ok(os::info(&self.file)?.ctime_ns)
    }
}

#[derive(Debug)]
struct FileWriter {
    file: File,
    /// Whether every write goes to the end of the file.
    append: bool,
}

impl StorageWriter for FileWriter {
    fn write_all_counted(&mut self, mut bytes: &[u8], written: &mut u64) -> io::Result<()> {
        *written = 0;
        while !bytes.is_empty() {
            match os::write(&self.file, bytes, self.append) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "Short write")),
                Ok(n) => {
                    bytes = &bytes[n..];
                    *written += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn end(&self) -> io::Result<super::FileEnd> {
        let size = self.file.metadata()?.len();
        if size == 0 {
            return Ok(super::FileEnd {
                size,
                last_byte: None,
            });
        }
        let mut byte = [0u8];
        if os::read_at(&self.file, &mut byte, size - 1)? != 1 {
            // Cut short meanwhile: the end moved, read it again.
            return self.end();
        }
        Ok(super::FileEnd {
            size,
            last_byte: Some(byte[0]),
        })
    }

    fn write_at(&mut self, bytes: &[u8], offset: u64) -> io::Result<()> {
        os::write_all_at(&self.file, bytes, offset)
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    fn fsync(&mut self) -> io::Result<()> {
        self.file.sync_all()
    }

    fn position(&self) -> io::Result<u64> {
        (&self.file).stream_position()
    }

    fn lock(&mut self) -> io::Result<()> {
        let started = std::time::Instant::now();
        let mut pause = std::time::Duration::from_micros(100);
        while !os::lock_file(&self.file, true)? {
            if started.elapsed() >= super::LOCK_PATIENCE {
                return Err(super::lock_timed_out());
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(std::time::Duration::from_millis(10));
        }
        Ok(())
    }

    fn unlock(&mut self) -> io::Result<()> {
        os::lock_file(&self.file, false).map(drop)
    }

    fn is_file_at(&self, path: &Path) -> io::Result<bool> {
        let open = os::info(&self.file)?.id;
        match os::lstat(path) {
            Ok(named) => Ok(named.kind == EntryKind::File && named.id == open),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn close(self: Box<Self>) -> io::Result<()> {
        drop(self.file);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A symlink at `link` to `target` (a directory symlink on Windows when `dir`).
    pub(crate) fn symlink(target: &Path, link: &Path, dir: bool) {
        #[cfg(unix)]
        let made = {
            let _ = dir;
            std::os::unix::fs::symlink(target, link)
        };
        #[cfg(windows)]
        let made = if dir {
            std::os::windows::fs::symlink_dir(target, link)
        } else {
            std::os::windows::fs::symlink_file(target, link)
        };
        made.unwrap();
    }

    #[test]
    fn is_locked_tells_a_held_lock_without_taking_one() {
        let tmp = tempfile::tempdir().unwrap();
        crate::storage::check_is_locked(&FileStorage, tmp.path());
    }

    #[test]
    fn creates_owner_only_files_and_dirs() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        FileStorage.ensure_dir(&dir).unwrap();
        let mode = |p: &Path| FileStorage.lstat(p).unwrap().mode & 0o777;
        assert_eq!(mode(&dir), 0o700);
        let file = dir.join("f");
        let mut w = FileStorage.open_writer(&file, OpenMode::CreateNew).unwrap();
        w.write_all(b"abc").unwrap();
        w.fsync().unwrap();
        w.close().unwrap();
        assert_eq!(mode(&file), 0o600);
        assert!(FileStorage.open_writer(&file, OpenMode::CreateNew).is_err());
        assert_eq!(FileStorage.read(&file).unwrap(), b"abc");
        assert_eq!(FileStorage.list_files(&dir).unwrap(), vec![file.clone()]);
        // A directory is not a file to open.
        assert!(FileStorage.open_read(&dir).is_err());
        assert!(FileStorage.open_writer(&dir, OpenMode::Append).is_err());
        // Appending to a file that must exist creates nothing.
        let missing = dir.join("missing");
        let err = FileStorage
            .open_writer(&missing, OpenMode::AppendExisting)
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(!FileStorage.exists(&missing));
        let mut w = FileStorage
            .open_writer(&file, OpenMode::AppendExisting)
            .unwrap();
        w.write_all(b"d").unwrap();
        w.close().unwrap();
        assert_eq!(FileStorage.read(&file).unwrap(), b"abcd");
    }

    #[cfg(unix)]
    #[test]
    fn a_mode_is_set_only_on_the_entry_expected() {
        use crate::storage::Expected;
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f");
        crate::storage::write_new_durable(&FileStorage, &file, b"abc").unwrap();
        FileStorage.set_mode(&file, 0o644).unwrap();
        let found = Expected::of(&FileStorage.lstat(&file).unwrap());
        // Another file in its place: left.
        let other = tmp.path().join("g");
        crate::storage::write_new_durable(&FileStorage, &other, b"abc").unwrap();
        FileStorage.set_mode(&other, 0o644).unwrap();
        fs::rename(&file, tmp.path().join("kept")).unwrap();
        fs::rename(&other, &file).unwrap();
        assert!(!FileStorage.set_mode_if(&file, &found, 0o600).unwrap());
        assert_eq!(FileStorage.lstat(&file).unwrap().mode, 0o644);
        // The entry itself, once it has a second name: left; with one again: set.
        fs::rename(tmp.path().join("kept"), &file).unwrap();
        fs::hard_link(&file, tmp.path().join("second")).unwrap();
        assert!(!FileStorage.set_mode_if(&file, &found, 0o600).unwrap());
        fs::remove_file(tmp.path().join("second")).unwrap();
        let found = Expected::of(&FileStorage.lstat(&file).unwrap());
        assert!(FileStorage.set_mode_if(&file, &found, 0o600).unwrap());
        assert_eq!(FileStorage.lstat(&file).unwrap().mode, 0o600);
        // A symlink in its place is never followed.
        let link = tmp.path().join("link");
        symlink(&file, &link, false);
        assert!(FileStorage.set_mode_if(&link, &found, 0o644).is_err());
        assert_eq!(FileStorage.lstat(&file).unwrap().mode, 0o600);
    }

    #[test]
    #[cfg_attr(
        windows,
        ignore = "Wine 8 makes no symlinks (CreateSymbolicLinkW succeeds and creates nothing); \
                  on Windows run with --include-ignored"
    )]
    fn refuses_symlinks_and_lists_them_as_symlinks() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let file = dir.join("f");
        crate::storage::write_new_durable(&FileStorage, &file, b"abc").unwrap();
        let link = dir.join("link");
        symlink(&file, &link, false);
        assert!(FileStorage.open_read(&link).is_err());
        assert!(FileStorage.open_read_at(&link).is_err());
        assert!(FileStorage.open_writer(&link, OpenMode::Append).is_err());
        assert_eq!(FileStorage.lstat(&link).unwrap().kind, EntryKind::Symlink);
        assert!(FileStorage.set_mode(&link, 0o600).is_err());
        let sub = dir.join("d");
        FileStorage.create_dir(&sub).unwrap();
        symlink(&sub, &dir.join("l"), true);
        assert_eq!(
            FileStorage.list_entries(dir).unwrap(),
            [
                (sub.clone(), EntryKind::Dir),
                (file.clone(), EntryKind::File),
                (dir.join("l"), EntryKind::Symlink),
                (link.clone(), EntryKind::Symlink),
            ]
        );
        assert_eq!(FileStorage.list_files(dir).unwrap(), vec![file]);
        assert_eq!(FileStorage.list_dirs(dir).unwrap(), vec![sub]);
    }

    #[test]
    fn no_replace_renames_refuse_a_taken_name_and_entries_say_what_they_are() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let (a, b, c) = (dir.join("a"), dir.join("b"), dir.join("c"));
        FileStorage.create_dir(&a).unwrap();
        FileStorage.create_dir(&b).unwrap();
        let err = FileStorage.rename_no_replace(&a, &b).unwrap_err();
        assert!(
            matches!(
                err.kind(),
                io::ErrorKind::AlreadyExists | io::ErrorKind::DirectoryNotEmpty
            ),
            "{err}"
        );
        FileStorage.rename_no_replace(&a, &c).unwrap();
        crate::storage::write_new_durable(&FileStorage, &c.join("f"), b"xyz").unwrap();
        let entries = FileStorage.list_entries(dir).unwrap();
        assert_eq!(
            entries,
            [(b.clone(), EntryKind::Dir), (c.clone(), EntryKind::Dir),]
        );
        let stat = FileStorage.lstat(&c.join("f")).unwrap();
        assert_eq!(stat.len, 3);
        let open = FileStorage.open_read_at(&c.join("f")).unwrap();
        assert_eq!(open.mtime_ns().unwrap(), stat.mtime_ns);
        // Windows removes a file that is open only once its last handle is closed.
        drop(open);
        assert!(FileStorage.remove_dir(&c).is_err(), "not empty");
        crate::storage::remove_tree(&FileStorage, &c).unwrap();
        assert!(!FileStorage.exists(&c));
    }

    #[test]
    fn a_same_length_rewrite_with_its_mtime_put_back_is_another_version() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("session.jsonl");
        crate::storage::write_new_durable(&FileStorage, &file, b"{\"secret\":\"hunter2\"}\n")
            .unwrap();
        let before = FileStorage.version(&file).unwrap();
        // Past the tick of the file system's clock the file was written in.
        std::thread::sleep(std::time::Duration::from_millis(50));
        let open = fs::OpenOptions::new().write(true).open(&file).unwrap();
        std::io::Write::write_all(&mut &open, b"{\"secret\":\"*******\"}\n").unwrap();
        let mtime = std::time::UNIX_EPOCH
            + std::time::Duration::from_nanos(before.mtime_ns.try_into().unwrap());
        open.set_times(fs::FileTimes::new().set_modified(mtime))
            .unwrap();
        drop(open);
        let after = FileStorage.version(&file).unwrap();
        assert_eq!(
            (after.id, after.len, after.mtime_ns),
            (before.id, before.len, before.mtime_ns),
            "a rewrite a stat of identity, length and mtime cannot see"
        );
        assert_ne!(after, before);
        assert!(after.ctime_ns > before.ctime_ns);
        // Every way of asking says the same.
        let lookup = DirLookup::open(tmp.path()).unwrap();
        assert_eq!(
            lookup
                .version(std::ffi::OsStr::new("session.jsonl"))
                .unwrap(),
            after
        );
        assert_eq!(FileStorage.lstat(&file).unwrap().version(), after);
        let read = FileStorage.open_read_at(&file).unwrap();
        assert_eq!(read.ctime_ns().unwrap(), after.ctime_ns);
    }
}
