//! The FUSE adapter: translates `fuser`'s `Filesystem` calls to the platform-neutral
//! [`Vfs`] and its results to replies. It decides nothing itself: every answer comes from
//! the model, every error code from [`to_errno`], and a panic in a handler becomes `EIO`.

use std::ffi::OsStr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    BsdFileFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, InitFlags, KernelConfig, LockOwner, OpenAccMode, OpenFlags, RenameFlags, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyWrite, Request,
    TimeOrNow, WriteFlags,
};
use gjcfs::vfs::{Attr, NamespaceChange, NodeKind, OpenMode, Vfs, VfsError};

/// Attributes and names are never cached by the kernel: contents change with every branch
/// and append, and a stale size would cut reads short.
const TTL: Duration = Duration::ZERO;

/// The one mapping from model errors to error codes.
pub fn to_errno(error: &VfsError) -> Errno {
    match error {
        VfsError::NotFound => Errno::ENOENT,
        VfsError::NotADirectory => Errno::ENOTDIR,
        VfsError::IsADirectory => Errno::EISDIR,
        VfsError::ReadOnly => Errno::EROFS,
        VfsError::NotPermitted => Errno::EPERM,
        VfsError::AccessDenied => Errno::EACCES,
        VfsError::InvalidArgument(_) => Errno::EINVAL,
        VfsError::BadHandle => Errno::EBADF,
        VfsError::Io(_) => Errno::EIO,
    }
}

pub struct FuseAdapter {
    vfs: std::sync::Arc<Vfs>,
    uid: u32,
    gid: u32,
}

impl FuseAdapter {
    /// Serves `vfs`; files are owned by `uid`:`gid` (the mounting user).
    pub fn new(vfs: std::sync::Arc<Vfs>, uid: u32, gid: u32) -> Self {
        FuseAdapter { vfs, uid, gid }
    }

    fn attr(&self, a: &Attr) -> FileAttr {
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
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            flags: 0,
            blksize: 4096,
        }
    }
}

fn file_type(kind: NodeKind) -> FileType {
    match kind {
        NodeKind::Directory => FileType::Directory,
        NodeKind::File => FileType::RegularFile,
        NodeKind::Symlink => FileType::Symlink,
    }
}

/// Runs a model call; a panic becomes `EIO`, an error its errno (I/O failures are logged
/// with their reason, which the errno cannot carry).
fn call<T>(what: &str, f: impl FnOnce() -> Result<T, VfsError>) -> Result<T, Errno> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => {
            if let VfsError::Io(reason) = &e {
                eprintln!("gjcfs mount: {what}: {reason}");
            }
            Err(to_errno(&e))
        }
        Err(_) => {
            eprintln!("gjcfs mount: {what} panicked; answered EIO");
            Err(Errno::EIO)
        }
    }
}

fn name_str(name: &OsStr) -> Result<&str, VfsError> {
    name.to_str().ok_or(VfsError::NotFound)
}

impl FuseAdapter {
    /// The errno of a refused change to the fixed layout.
    fn refusal(&self, parent: INodeNo, change: NamespaceChange) -> Errno {
        match catch_unwind(AssertUnwindSafe(|| {
            self.vfs.change_namespace(parent.0, change)
        })) {
            Ok(e) => to_errno(&e),
            Err(_) => {
                eprintln!("gjcfs mount: {change:?} panicked; answered EIO");
                Errno::EIO
            }
        }
    }
}

impl Filesystem for FuseAdapter {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // O_TRUNC then arrives with the open instead of as a truncate without a handle, so
        // `echo ID > leaf` replaces the leaf only through its handle, only if the id is good.
        if let Err(missing) = config.add_capabilities(InitFlags::FUSE_ATOMIC_O_TRUNC) {
            eprintln!("gjcfs mount: the kernel lacks {missing:?}; O_TRUNC on leaf resets it");
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match call("lookup", || self.vfs.lookup(parent.0, name_str(name)?)) {
            Ok(a) => reply.entry(&TTL, &self.attr(&a), Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match call("getattr", || self.vfs.getattr(ino.0)) {
            Ok(a) => reply.attr(&TTL, &self.attr(&a)),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match call("readlink", || self.vfs.readlink(ino.0)) {
            Ok(target) => reply.data(target.as_bytes()),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let other = mode.is_some() || uid.is_some() || gid.is_some();
        let times = atime.is_some() || mtime.is_some();
        let result = call("setattr", || match size {
            _ if other => self.vfs.set_other_attr(ino.0),
            Some(size) => self.vfs.set_size(ino.0, fh.map(|f| f.0), size),
            // Times alone (touch on an open file, the kernel's own updates) change
            // nothing in the model; the data's times stay authoritative.
            None if times => self.vfs.set_other_attr(ino.0),
            None => self.vfs.getattr(ino.0),
        });
        match result {
            Ok(a) => reply.attr(&TTL, &self.attr(&a)),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        _req: &Request,
        parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        reply.error(self.refusal(parent, NamespaceChange::Create));
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        reply.error(self.refusal(parent, NamespaceChange::Create));
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(self.refusal(parent, NamespaceChange::Remove));
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(self.refusal(parent, NamespaceChange::Remove));
    }

    fn symlink(
        &self,
        _req: &Request,
        parent: INodeNo,
        _link_name: &OsStr,
        _target: &Path,
        reply: ReplyEntry,
    ) {
        reply.error(self.refusal(parent, NamespaceChange::Create));
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        _name: &OsStr,
        _newparent: INodeNo,
        _newname: &OsStr,
        _flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        reply.error(self.refusal(parent, NamespaceChange::Rename));
    }

    fn link(
        &self,
        _req: &Request,
        _ino: INodeNo,
        newparent: INodeNo,
        _newname: &OsStr,
        reply: ReplyEntry,
    ) {
        reply.error(self.refusal(newparent, NamespaceChange::Link));
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let access = flags.acc_mode();
        let mode = OpenMode {
            read: matches!(access, OpenAccMode::O_RDONLY | OpenAccMode::O_RDWR),
            write: matches!(access, OpenAccMode::O_WRONLY | OpenAccMode::O_RDWR),
            truncate: flags.0 & libc::O_TRUNC != 0,
        };
        match call("open", || self.vfs.open(ino.0, mode)) {
            Ok(opened) => {
                let flags = if opened.direct_io {
                    FopenFlags::FOPEN_DIRECT_IO
                } else {
                    FopenFlags::empty()
                };
                reply.opened(FileHandle(opened.fh), flags)
            }
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match call("read", || self.vfs.read(fh.0, offset, size)) {
            Ok(bytes) => reply.data(&bytes),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match call("write", || self.vfs.write(fh.0, offset, data)) {
            Ok(n) => reply.written(u32::try_from(n).unwrap_or(u32::MAX)),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        match call("flush", || self.vfs.flush(fh.0)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        match call("release", || self.vfs.release(fh.0)) {
            Ok(()) => reply.ok(),
            Err(e) => {
                eprintln!("gjcfs mount: a write failed at release: {e:?}");
                reply.error(e)
            }
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        // Only the first call of a listing rescans the sessions.
        let entries = match call("readdir", || self.vfs.readdir_from(ino.0, offset == 0)) {
            Ok(entries) => entries,
            Err(e) => return reply.error(e),
        };
        let dots = [(ino.0, "."), (ino.0, "..")]
            .into_iter()
            .map(|(i, n)| (i, FileType::Directory, n.to_owned()));
        let all = dots.chain(
            entries
                .into_iter()
                .map(|e| (e.ino, file_type(e.kind), e.name)),
        );
        for (i, (child, kind, name)) in all.enumerate().skip(offset as usize) {
            if reply.add(INodeNo(child), (i + 1) as u64, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        reply.error(self.refusal(parent, NamespaceChange::Create));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_handler_answers_eio() {
        let result: Result<(), Errno> = call("test", || panic!("boom"));
        assert_eq!(result, Err(Errno::EIO));
        assert_eq!(call("test", || Ok(7)), Ok(7));
        assert_eq!(
            call::<()>("test", || Err(VfsError::InvalidArgument("x".into()))),
            Err(Errno::EINVAL)
        );
    }

    #[test]
    fn every_model_error_has_its_errno() {
        let cases = [
            (VfsError::NotFound, libc::ENOENT),
            (VfsError::NotADirectory, libc::ENOTDIR),
            (VfsError::IsADirectory, libc::EISDIR),
            (VfsError::ReadOnly, libc::EROFS),
            (VfsError::NotPermitted, libc::EPERM),
            (VfsError::AccessDenied, libc::EACCES),
            (VfsError::InvalidArgument(String::new()), libc::EINVAL),
            (VfsError::BadHandle, libc::EBADF),
            (VfsError::Io(String::new()), libc::EIO),
        ];
        for (error, code) in cases {
            assert_eq!(i32::from(to_errno(&error)), code, "{error:?}");
        }
    }
}
