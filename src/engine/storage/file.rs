//! The real filesystem.
//!
//! Files are opened with `O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK` and created with mode `0600`;
//! directories are created `0700`. The process umask cannot widen these (it only removes
//! bits). Every open is checked with `fstat` on the descriptor it opened: anything but a
//! regular file (a FIFO, a device, a directory) is refused before it is read or written, so
//! nothing blocks on a FIFO at a session path. Writers open read-write so that they can read
//! the file's last byte through their own descriptor.

// The storage seam itself: the one place the engine touches the filesystem directly.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use super::sys;
use super::{
    EntryKind, EntryStat, FileId, FileStat, OpenMode, ReadAt, ReadFile, SessionStorage,
    StorageWriter,
};

const FILE_MODE: u32 = 0o600;
const DIR_MODE: u32 = 0o700;

/// Storage on the local filesystem.
#[derive(Debug, Default, Clone, Copy)]
pub struct FileStorage;

/// The error for a path that names something other than a regular file.
pub fn not_a_regular_file() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "not a regular file")
}

/// Opens `path` with `options`, not following a symlink and never blocking, and refuses it
/// (closing it again) unless the descriptor is a regular file.
fn open_checked(options: &mut OpenOptions, path: &Path) -> io::Result<File> {
    let file = sys::unix::no_follow(options).open(path)?;
    if !file.metadata()?.file_type().is_file() {
        return Err(not_a_regular_file());
    }
    Ok(file)
}

/// Opens the regular file at `path` for reading without following a symlink or blocking
/// on a FIFO; anything but a regular file is refused before a byte is read.
pub fn open_regular(path: &Path) -> io::Result<File> {
    open_checked(OpenOptions::new().read(true), path)
}

/// Opens the directory at `dir` (for an fsync), never blocking on what is there instead.
pub fn open_dir(dir: &Path) -> io::Result<File> {
    sys::unix::open_dir(dir)
}

impl SessionStorage for FileStorage {
    fn ensure_dir(&self, dir: &Path) -> io::Result<()> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(DIR_MODE)
            .create(dir)
    }

    fn exists(&self, path: &Path) -> bool {
        fs::symlink_metadata(path).is_ok()
    }

    fn stat(&self, path: &Path) -> io::Result<FileStat> {
        let meta = fs::metadata(path)?;
        let mtime_ms = meta
            .modified()?
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        Ok(FileStat {
            id: sys::unix::file_id(&meta),
            len: meta.len(),
            mtime_ms,
            is_file: meta.is_file(),
        })
    }

    fn open_read(&self, path: &Path) -> io::Result<Box<dyn Read + Send>> {
        Ok(Box::new(open_regular(path)?))
    }

    fn open_read_at(&self, path: &Path) -> io::Result<Box<dyn ReadFile>> {
        let file = open_regular(path)?;
        let id = sys::unix::file_id(&file.metadata()?);
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
        let mut options = OpenOptions::new();
        sys::unix::create_mode(options.read(true).write(true), FILE_MODE);
        match mode {
            OpenMode::Append => options.append(true).create(true),
            OpenMode::CreateNew => options.create_new(true),
        };
        let file = open_checked(&mut options, path)?;
        Ok(Box::new(FileWriter { file }))
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
        files.sort();
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
        open_dir(dir)?.sync_all()
    }

    fn writers_elsewhere(&self, path: &Path) -> io::Result<Vec<u32>> {
        sys::writers_elsewhere(path)
    }

    fn lstat(&self, path: &Path) -> io::Result<EntryStat> {
        let meta = fs::symlink_metadata(path)?;
        Ok(EntryStat {
            kind: entry_kind(meta.file_type()),
            id: sys::unix::file_id(&meta),
            mode: sys::unix::mode(&meta),
            owner: sys::unix::owner(&meta),
            links: sys::unix::links(&meta),
            len: meta.len(),
            mtime_ns: sys::unix::mtime_ns(&meta),
            ctime_ns: sys::unix::ctime_ns(&meta),
        })
    }

    fn user(&self) -> u32 {
        sys::unix::effective_uid()
    }

    fn has_acl(&self, path: &Path) -> io::Result<bool> {
        sys::has_posix_acl(path)
    }

    fn is_network_fs(&self, path: &Path) -> io::Result<bool> {
        sys::is_network_fs(path)
    }

    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        fs::canonicalize(path)
    }

    fn create_dir(&self, dir: &Path) -> io::Result<()> {
        fs::DirBuilder::new().mode(DIR_MODE).create(dir)
    }

    fn set_mode(&self, path: &Path, mode: u32) -> io::Result<()> {
        if fs::symlink_metadata(path)?.file_type().is_symlink() {
            return Err(io::Error::from_raw_os_error(libc::ELOOP));
        }
        fs::set_permissions(path, fs::Permissions::from_mode(mode))
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::hard_link(from, to)
    }

    fn sync_file(&self, path: &Path) -> io::Result<()> {
        open_regular(path)?.sync_all()
    }

    fn list_entries(&self, dir: &Path) -> io::Result<Vec<(PathBuf, EntryKind)>> {
        let mut entries = Vec::new();
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            entries.push((entry.path(), entry_kind(entry.file_type()?)));
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(entries)
    }

    /// `renameat2(RENAME_NOREPLACE)` where the kernel has it; elsewhere a directory first
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
}

fn entry_kind(kind: fs::FileType) -> EntryKind {
    if kind.is_file() {
        EntryKind::File
    } else if kind.is_dir() {
        EntryKind::Dir
    } else if kind.is_symlink() {
        EntryKind::Symlink
    } else {
        EntryKind::Other
    }
}

/// A file read with `pread`, which leaves the descriptor's offset alone, so threads can
/// share it.
#[derive(Debug)]
struct PositionalFile {
    file: File,
    id: FileId,
}

impl ReadAt for PositionalFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        sys::unix::read_at(&self.file, buf, offset)
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
        Ok(sys::unix::links(&self.file.metadata()?))
    }

    fn mtime_ns(&self) -> io::Result<i128> {
        Ok(sys::unix::mtime_ns(&self.file.metadata()?))
    }

    fn ctime_ns(&self) -> io::Result<i128> {
        Ok(sys::unix::ctime_ns(&self.file.metadata()?))
    }
}

#[derive(Debug)]
struct FileWriter {
    file: File,
}

impl StorageWriter for FileWriter {
    fn write_all_counted(&mut self, mut bytes: &[u8], written: &mut u64) -> io::Result<()> {
        *written = 0;
        while !bytes.is_empty() {
            match self.file.write(bytes) {
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
        if sys::unix::read_at(&self.file, &mut byte, size - 1)? != 1 {
            // Cut short meanwhile: the end moved, read it again.
            return self.end();
        }
        Ok(super::FileEnd {
            size,
            last_byte: Some(byte[0]),
        })
    }

    fn write_at(&mut self, bytes: &[u8], offset: u64) -> io::Result<()> {
        sys::unix::write_all_at(&self.file, bytes, offset)
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

    fn is_file_at(&self, path: &Path) -> io::Result<bool> {
        let open = sys::unix::file_id(&self.file.metadata()?);
        match fs::symlink_metadata(path) {
            Ok(named) => Ok(sys::unix::file_id(&named) == open),
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

    #[test]
    fn creates_owner_only_files_and_dirs_and_refuses_symlinks() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        FileStorage.ensure_dir(&dir).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        let file = dir.join("f");
        let mut w = FileStorage.open_writer(&file, OpenMode::CreateNew).unwrap();
        w.write_all(b"abc").unwrap();
        w.fsync().unwrap();
        w.close().unwrap();
        assert_eq!(mode(&file), 0o600);
        assert!(FileStorage.open_writer(&file, OpenMode::CreateNew).is_err());
        let link = dir.join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(FileStorage.open_read(&link).is_err());
        assert!(FileStorage.open_writer(&link, OpenMode::Append).is_err());
        assert_eq!(FileStorage.read(&file).unwrap(), b"abc");
        assert_eq!(FileStorage.list_files(&dir).unwrap(), vec![file]);
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
        std::os::unix::fs::symlink(&c, dir.join("l")).unwrap();
        crate::storage::write_new_durable(&FileStorage, &c.join("f"), b"xyz").unwrap();
        let entries = FileStorage.list_entries(dir).unwrap();
        assert_eq!(
            entries,
            [
                (b.clone(), EntryKind::Dir),
                (c.clone(), EntryKind::Dir),
                (dir.join("l"), EntryKind::Symlink)
            ]
        );
        let stat = FileStorage.lstat(&c.join("f")).unwrap();
        assert_eq!(stat.len, 3);
        let open = FileStorage.open_read_at(&c.join("f")).unwrap();
        assert_eq!(open.mtime_ns().unwrap(), stat.mtime_ns);
        assert!(FileStorage.remove_dir(&c).is_err(), "not empty");
        crate::storage::remove_tree(&FileStorage, &c).unwrap();
        assert!(!FileStorage.exists(&c));
    }
}
