//! What [`MemoryStorage`] opens: a read file is a snapshot of the bytes when it was
//! opened; a writer writes through to the storage, each call one numbered operation.

use std::io;
use std::path::{Path, PathBuf};

use super::*;

/// A snapshot of a file taken when it was opened.
#[derive(Debug)]
pub(super) struct MemoryReadFile {
    pub(super) bytes: Vec<u8>,
    pub(super) id: FileId,
    pub(super) links: u64,
    pub(super) mtime_ns: i128,
    pub(super) ctime_ns: i128,
}

impl ReadAt for MemoryReadFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.bytes.read_at(buf, offset)
    }
}

impl ReadFile for MemoryReadFile {
    fn size(&self) -> io::Result<u64> {
        Ok(self.bytes.len() as u64)
    }

    fn id(&self) -> FileId {
        self.id
    }

    fn links(&self) -> io::Result<u64> {
        Ok(self.links)
    }

    fn mtime_ns(&self) -> io::Result<i128> {
        Ok(self.mtime_ns)
    }

    fn ctime_ns(&self) -> io::Result<i128> {
        Ok(self.ctime_ns)
    }
}

#[derive(Debug)]
pub(super) struct MemoryWriter {
    pub(super) storage: MemoryStorage,
    pub(super) path: PathBuf,
    /// The length of the file right after this writer's last write.
    pub(super) position: u64,
    /// This writer's number, which the lock it holds is kept under.
    pub(super) number: u64,
    /// The identity of the file whose lock this writer holds.
    pub(super) locked: Option<u64>,
    /// The number of crashes before this writer was opened: a writer of an earlier life of
    /// the machine is dead (see [`MemoryWriter::live`]).
    pub(super) born: u64,
}

impl MemoryWriter {
    /// Begins operation `name`: a writer opened before the last crash belongs to a process
    /// that no longer exists, so its calls fail (EIO) and reach nothing, uncounted; any
    /// other call is one numbered operation ([`check`]).
    fn live(&self, s: &mut State, name: &'static str) -> io::Result<()> {
        self.alive(s)?;
        check(s, name)
    }

    /// Fails (EIO) for a writer opened before the last crash.
    fn alive(&self, s: &State) -> io::Result<()> {
        match self.born == s.crashes {
            true => Ok(()),
            false => Err(crate::storage::sys::os::errno_error(libc::EIO)),
        }
    }

    /// Drops the lock this writer holds, if any, waking writers waiting for it.
    fn release(&mut self, s: &mut State) {
        if let Some(id) = self.locked.take() {
            if s.locks.get(&id) == Some(&self.number) {
                s.locks.remove(&id);
            }
            self.storage.unlocked.notify_all();
        }
    }

    /// One write operation named `name`: `store` puts what the armed fault lets through of
    /// `bytes` (all, half for a short write, nothing for an errno) into the file. Returns how
    /// many bytes were stored, the file's length after, and the fault.
    fn write_op(
        &mut self,
        name: &'static str,
        bytes: &[u8],
        store: impl FnOnce(&mut Vec<u8>, &[u8]),
    ) -> io::Result<(u64, u64, Option<FaultKind>)> {
        let mut s = self.storage.lock();
        self.alive(&s)?;
        let fault = begin(&mut s, name);
        let stored = match fault {
            Some(FaultKind::ShortWrite) => &bytes[..bytes.len() / 2],
            Some(FaultKind::Errno(_)) => &bytes[..0],
            None => bytes,
        };
        s.touch(&self.path);
        let file = s
            .files
            .get_mut(&self.path)
            .ok_or_else(|| not_found(&self.path))?;
        store(file, stored);
        Ok((stored.len() as u64, file.len() as u64, fault))
    }
}

impl StorageWriter for MemoryWriter {
    fn write_all_counted(&mut self, bytes: &[u8], written: &mut u64) -> io::Result<()> {
        *written = 0;
        let (stored, len, fault) = self.write_op("write", bytes, |file, stored| {
            file.extend_from_slice(stored)
        })?;
        self.position = len;
        *written = stored;
        fault.map_or(Ok(()), |kind| Err(errno(kind)))
    }

    fn end(&self) -> io::Result<FileEnd> {
        let mut s = self.storage.lock();
        self.live(&mut s, "end")?;
        let file = s
            .files
            .get(&self.path)
            .ok_or_else(|| not_found(&self.path))?;
        Ok(FileEnd {
            size: file.len() as u64,
            last_byte: file.last().copied(),
        })
    }

    fn write_at(&mut self, bytes: &[u8], offset: u64) -> io::Result<()> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let (_, _, fault) = self.write_op("write_at", bytes, |file, stored| {
            let end = start.saturating_add(stored.len());
            if file.len() < end {
                file.resize(end, 0);
            }
            file[start..end].copy_from_slice(stored);
        })?;
        fault.map_or(Ok(()), |kind| Err(errno(kind)))
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        let mut s = self.storage.lock();
        self.live(&mut s, "truncate")?;
        let file = s
            .files
            .get_mut(&self.path)
            .ok_or_else(|| not_found(&self.path))?;
        file.truncate(len as usize);
        s.touch(&self.path);
        Ok(())
    }

    fn fsync(&mut self) -> io::Result<()> {
        let mut s = self.storage.lock();
        self.live(&mut s, "fsync")?;
        let id = s.id_of(&self.path);
        if let Some(bytes) = s.files.get(&self.path).cloned() {
            s.durable_contents.insert(id, bytes);
        }
        Ok(())
    }

    fn position(&self) -> io::Result<u64> {
        self.live(&mut self.storage.lock(), "position")?;
        Ok(self.position)
    }

    fn lock(&mut self) -> io::Result<()> {
        let storage = self.storage.clone();
        let mut s = storage.lock();
        self.live(&mut s, "lock")?;
        let id = s.id_of(&self.path);
        let started = std::time::Instant::now();
        loop {
            match s.locks.get(&id) {
                Some(&holder) if holder != self.number => {
                    let left = crate::storage::LOCK_PATIENCE.saturating_sub(started.elapsed());
                    if left.is_zero() {
                        return Err(crate::storage::lock_timed_out());
                    }
                    s = storage
                        .unlocked
                        .wait_timeout(s, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                _ => break,
            }
        }
        s.locks.insert(id, self.number);
        self.locked = Some(id);
        Ok(())
    }

    fn unlock(&mut self) -> io::Result<()> {
        let storage = self.storage.clone();
        let mut s = storage.lock();
        self.live(&mut s, "unlock")?;
        self.release(&mut s);
        Ok(())
    }

    fn is_file_at(&self, path: &Path) -> io::Result<bool> {
        Ok(path == self.path && self.storage.lock().files.contains_key(path))
    }

    fn close(mut self: Box<Self>) -> io::Result<()> {
        let storage = self.storage.clone();
        let mut s = storage.lock();
        self.release(&mut s);
        self.live(&mut s, "close")
    }
}

impl Drop for MemoryWriter {
    /// A writer dropped without [`StorageWriter::close`] lets its lock go too, as closing a
    /// descriptor does.
    fn drop(&mut self) {
        let storage = self.storage.clone();
        let mut s = storage.lock();
        self.release(&mut s);
    }
}
