//! The [`SessionStorage`] calls of [`MemoryStorage`]: each one numbered operation that an
//! armed fault may fail, applied to the visible state (and to the durable image where the
//! call is durable by itself).

use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::*;

impl SessionStorage for MemoryStorage {
    fn ensure_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.lock();
        check(&mut s, "ensure_dir")?;
        for ancestor in dir.ancestors() {
            s.dirs.insert(ancestor.to_owned());
        }
        Ok(())
    }

    fn exists(&self, path: &Path) -> bool {
        let s = self.lock();
        s.files.contains_key(path) || s.dirs.contains(path)
    }

    fn stat(&self, path: &Path) -> io::Result<FileStat> {
        let mut s = self.lock();
        check(&mut s, "stat")?;
        if let Some(bytes) = s.files.get(path) {
            return Ok(FileStat {
                id: FileId {
                    dev: 0,
                    ino: s.id_of(path),
                },
                len: bytes.len() as u64,
                mtime_ms: s.times_of(path).modified,
                is_file: true,
            });
        }
        if s.dirs.contains(path) {
            return Ok(FileStat {
                id: FileId { dev: 0, ino: 0 },
                len: 0,
                mtime_ms: 0,
                is_file: false,
            });
        }
        Err(not_found(path))
    }

    fn open_read(&self, path: &Path) -> io::Result<Box<dyn Read + Send>> {
        let mut s = self.lock();
        check(&mut s, "open_read")?;
        let bytes = s.files.get(path).cloned().ok_or_else(|| not_found(path))?;
        Ok(Box::new(io::Cursor::new(bytes)))
    }

    fn open_read_at(&self, path: &Path) -> io::Result<Box<dyn ReadFile>> {
        let mut s = self.lock();
        check(&mut s, "open_read_at")?;
        let bytes = s.files.get(path).cloned().ok_or_else(|| not_found(path))?;
        let ino = s.ids.get(path).copied().unwrap_or_default();
        let times = s.times_of(path);
        Ok(Box::new(MemoryReadFile {
            bytes,
            id: FileId { dev: 0, ino },
            links: s.links_of(ino),
            mtime_ns: time_ns(times.modified),
            ctime_ns: time_ns(times.changed),
        }))
    }

    fn read_tail(&self, path: &Path, max: usize) -> io::Result<Vec<u8>> {
        let mut s = self.lock();
        check(&mut s, "read_tail")?;
        let bytes = s.files.get(path).ok_or_else(|| not_found(path))?;
        Ok(bytes[bytes.len().saturating_sub(max)..].to_vec())
    }

    fn open_writer(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn StorageWriter>> {
        let mut s = self.lock();
        check(&mut s, "open_writer")?;
        let exists = s.files.contains_key(path);
        if mode == OpenMode::CreateNew && exists {
            return Err(crate::storage::sys::os::errno_error(libc::EEXIST));
        }
        if mode == OpenMode::AppendExisting && !exists {
            return Err(not_found(path));
        }
        if let Some(parent) = path.parent() {
            if !parent.as_os_str().is_empty() && !s.dirs.contains(parent) {
                return Err(not_found(parent));
            }
        }
        if !exists {
            s.files.insert(path.to_owned(), Vec::new());
            new_identity(&mut s, path);
        }
        s.touch(path);
        s.next_writer += 1;
        Ok(Box::new(MemoryWriter {
            storage: self.clone(),
            path: path.to_owned(),
            position: 0,
            number: s.next_writer,
            locked: None,
            born: s.crashes,
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        check(&mut self.lock(), "rename")?;
        self.rename_unchecked(from, to)
    }

    fn unlink(&self, path: &Path) -> io::Result<()> {
        let mut s = self.lock();
        check(&mut s, "unlink")?;
        s.forget(path);
        s.times.remove(path);
        s.ids.remove(path);
        s.files
            .remove(path)
            .map(drop)
            .ok_or_else(|| not_found(path))
    }

    fn list_files(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let mut s = self.lock();
        check(&mut s, "list_files")?;
        if !s.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        Ok(s.files
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .cloned()
            .collect())
    }

    fn list_dirs(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let mut s = self.lock();
        check(&mut s, "list_dirs")?;
        if !s.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        Ok(s.dirs
            .iter()
            .filter(|p| p.parent() == Some(dir))
            .cloned()
            .collect())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.lock();
        check(&mut s, "sync_dir")?;
        let entries = s.entries_of(dir);
        s.durable_entries.insert(dir.to_owned(), entries);
        Ok(())
    }

    fn writers_elsewhere(&self, path: &Path) -> io::Result<Vec<u32>> {
        let mut s = self.lock();
        check(&mut s, "writers_elsewhere")?;
        Ok(s.foreign_writers.get(path).cloned().unwrap_or_default())
    }

    fn lstat(&self, path: &Path) -> io::Result<EntryStat> {
        check(&mut self.lock(), "lstat")?;
        self.lstat_uncounted(path)
    }

    /// Memory has no symlinks: what [`SessionStorage::lstat`] reports, counted as its own
    /// operation.
    fn version(&self, path: &Path) -> io::Result<crate::storage::FileVersion> {
        check(&mut self.lock(), "version")?;
        self.lstat_uncounted(path).map(|stat| stat.version())
    }

    fn user(&self) -> u32 {
        MEMORY_USER
    }

    fn is_locked(&self, path: &Path) -> io::Result<bool> {
        let mut s = self.lock();
        check(&mut s, "is_locked")?;
        if !s.files.contains_key(path) {
            return Ok(false);
        }
        let id = s.id_of(path);
        Ok(s.locks.contains_key(&id))
    }

    /// Memory has no ACLs.
    fn has_acl(&self, path: &Path) -> io::Result<bool> {
        self.existing("has_acl", path).map(|()| false)
    }

    /// Memory is a local filesystem.
    fn is_network_fs(&self, path: &Path) -> io::Result<bool> {
        self.existing("is_network_fs", path).map(|()| false)
    }

    /// Memory has no symlinks: an existing absolute path without `.` or `..` is its own
    /// canonical path.
    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        let mut s = self.lock();
        check(&mut s, "canonicalize")?;
        // Rooted: `/a` (and on Windows `C:\a` or `\a`), without `.` or `..`.
        let plain = path.has_root()
            && path.components().all(|c| {
                matches!(
                    c,
                    std::path::Component::Prefix(_)
                        | std::path::Component::RootDir
                        | std::path::Component::Normal(_)
                )
            });
        if !plain {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: not an absolute plain path", path.display()),
            ));
        }
        if s.files.contains_key(path) || s.dirs.contains(path) {
            Ok(path.to_owned())
        } else {
            Err(not_found(path))
        }
    }

    fn create_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.lock();
        check(&mut s, "create_dir")?;
        if s.files.contains_key(dir) || s.dirs.contains(dir) {
            return Err(crate::storage::sys::os::errno_error(libc::EEXIST));
        }
        if let Some(parent) = dir.parent() {
            if !parent.as_os_str().is_empty() && !s.dirs.contains(parent) {
                return Err(not_found(parent));
            }
        }
        s.dirs.insert(dir.to_owned());
        Ok(())
    }

    fn set_mode(&self, path: &Path, mode: u32) -> io::Result<()> {
        let mut s = self.lock();
        check(&mut s, "set_mode")?;
        if !s.files.contains_key(path) && !s.dirs.contains(path) {
            return Err(not_found(path));
        }
        s.modes.insert(path.to_owned(), mode & 0o7777);
        if s.files.contains_key(path) {
            s.mark_changed(path);
        }
        Ok(())
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.lock();
        check(&mut s, "hard_link")?;
        let bytes = s.files.get(from).cloned().ok_or_else(|| not_found(from))?;
        if s.files.contains_key(to) || s.dirs.contains(to) {
            return Err(crate::storage::sys::os::errno_error(libc::EEXIST));
        }
        if let Some(parent) = to.parent() {
            if !parent.as_os_str().is_empty() && !s.dirs.contains(parent) {
                return Err(not_found(parent));
            }
        }
        let id = s.id_of(from);
        let times = s.times_of(from);
        s.files.insert(to.to_owned(), bytes);
        s.ids.insert(to.to_owned(), id);
        s.times.insert(to.to_owned(), times);
        // A new link changes the file's inode: both its names see it.
        s.mark_changed(from);
        s.mark_changed(to);
        let state = &mut *s;
        for table in [&mut state.modes, &mut state.owners] {
            if let Some(v) = table.get(from).copied() {
                table.insert(to.to_owned(), v);
            }
        }
        Ok(())
    }

    fn list_entries(&self, dir: &Path) -> io::Result<Vec<(PathBuf, EntryKind)>> {
        let mut s = self.lock();
        check(&mut s, "list_entries")?;
        if !s.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        let files = s.files.keys().map(|p| (p.clone(), EntryKind::File));
        let dirs = s.dirs.iter().map(|p| (p.clone(), EntryKind::Dir));
        let mut entries: Vec<_> = files
            .chain(dirs)
            .filter(|(p, _)| p.parent() == Some(dir))
            .collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(entries)
    }

    fn rename_no_replace(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.lock();
        check(&mut s, "rename_no_replace")?;
        let is_dir = s.dirs.contains(from);
        if !is_dir && !s.files.contains_key(from) {
            return Err(not_found(from));
        }
        if s.files.contains_key(to) || s.dirs.contains(to) {
            return Err(crate::storage::sys::os::errno_error(libc::EEXIST));
        }
        if let Some(parent) = to.parent() {
            if !parent.as_os_str().is_empty() && !s.dirs.contains(parent) {
                return Err(not_found(parent));
            }
        }
        if !is_dir {
            drop(s);
            // A rename of a file to a free name: what `rename` does.
            return self.rename_unchecked(from, to);
        }
        if to.starts_with(from) {
            return Err(crate::storage::sys::os::errno_error(libc::EINVAL));
        }
        let state = &mut *s;
        let dirs: Vec<PathBuf> = state
            .dirs
            .iter()
            .filter(|p| p.starts_with(from))
            .cloned()
            .collect();
        for dir in dirs {
            state.dirs.remove(&dir);
            state.dirs.extend(moved(&dir, from, to));
        }
        move_keys(&mut state.files, from, to);
        move_keys(&mut state.times, from, to);
        move_keys(&mut state.ids, from, to);
        move_keys(&mut state.modes, from, to);
        move_keys(&mut state.owners, from, to);
        move_keys(&mut state.foreign_writers, from, to);
        move_keys(&mut state.durable_entries, from, to);
        for entries in state.durable_entries.values_mut() {
            move_keys(entries, from, to);
        }
        Ok(())
    }

    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.lock();
        check(&mut s, "remove_dir")?;
        if s.files.contains_key(dir) {
            return Err(crate::storage::sys::os::errno_error(libc::ENOTDIR));
        }
        if !s.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        let occupied = s.files.keys().any(|p| p.parent() == Some(dir))
            || s.dirs.iter().any(|p| p.parent() == Some(dir));
        if occupied {
            return Err(crate::storage::sys::os::errno_error(libc::ENOTEMPTY));
        }
        s.dirs.remove(dir);
        s.forget(dir);
        s.durable_entries.remove(dir);
        Ok(())
    }

    fn sync_file(&self, path: &Path) -> io::Result<()> {
        let mut s = self.lock();
        check(&mut s, "sync_file")?;
        let bytes = s.files.get(path).cloned().ok_or_else(|| not_found(path))?;
        let id = s.id_of(path);
        s.durable_contents.insert(id, bytes);
        Ok(())
    }
}

impl MemoryStorage {
    /// [`SessionStorage::lstat`] without counting an operation.
    fn lstat_uncounted(&self, path: &Path) -> io::Result<EntryStat> {
        let s = self.lock();
        let (kind, ino, mode, len) = if let Some(bytes) = s.files.get(path) {
            (EntryKind::File, s.id_of(path), 0o600, bytes.len() as u64)
        } else if s.dirs.contains(path) {
            (EntryKind::Dir, 0, 0o700, 0)
        } else {
            return Err(not_found(path));
        };
        Ok(EntryStat {
            kind,
            id: FileId { dev: 0, ino },
            mode: s.modes.get(path).copied().unwrap_or(mode),
            owner: s.owners.get(path).copied().unwrap_or(MEMORY_USER),
            links: if kind == EntryKind::File {
                s.links_of(ino)
            } else {
                1
            },
            len,
            mtime_ns: time_ns(s.times_of(path).modified),
            ctime_ns: time_ns(s.times_of(path).changed),
        })
    }
}
