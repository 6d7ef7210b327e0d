//! The FUSE adapter: translates `fuser`'s `Filesystem` calls to the platform-neutral
//! [`Vfs`] and its results to replies. It decides nothing itself: every answer comes from
//! the model, every error code from [`to_errno`], and a panic in a handler becomes `EIO`.
//!
//! What the adapter adds is the kernel's side: the mount and its options for each kernel
//! (Linux, macFUSE); every request run in a span of its own (`call`); the changes the
//! model announces handed to the kernel as invalidations ([`invalidator`]); the attributes
//! and how long the kernel may keep them (`attrs.rs`); a directory's listing read from the
//! offset asked (`listing_from`) and what the kernel may keep of it (`listing_flags`, from
//! the model's `KeptListing`); where a write request stands in its `write(2)`, from the
//! kernel's request sizes (`part_of`); and, on a read-only mount on Linux, files opened by
//! the kernel without a request (`FUSE_NO_OPEN_SUPPORT`), read by node. Serving until a
//! signal or an unmount is `serve.rs`; the mount's lifecycle, `lifecycle.rs`.
//!
//! FUSE exists only on Unix: elsewhere (Windows) this crate is empty.
// A library never prints: it returns errors and emits events; the programs decide.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
#![cfg(unix)]

mod attrs;
pub mod lifecycle;
mod serve;

use std::borrow::Cow;
use std::ffi::OsStr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::{Duration, SystemTime};

use fuser::{
    BackgroundSession, BsdFileFlags, Config, Errno, FileAttr, FileHandle, Filesystem, FopenFlags,
    Generation, INodeNo, InitFlags, KernelConfig, LockOwner, MountOption, Notifier, OpenAccMode,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyWrite, Request, SessionACL, TimeOrNow, WriteFlags,
};
pub use serve::{serve, Ended, CLOSE_PATIENCE, POLL_EVERY};

use attrs::{attr_ttl, entry_ttl, file_attr, file_type, listed_attr};

use gjcfs_vfs::{
    Attr, AttrChange, Caching, DirEntry, Invalidator, IoCause, KeptListing, NamespaceChange,
    NodeKind, OpenMode, Part, Vfs, VfsError,
};

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
        VfsError::Storage { cause, .. } => match cause {
            IoCause::NoSpace => Errno::ENOSPC,
            IoCause::QuotaExceeded => Errno::EDQUOT,
            IoCause::ReadOnlyFilesystem => Errno::EROFS,
            IoCause::PermissionDenied => Errno::EACCES,
            IoCause::NotPermitted => Errno::EPERM,
            IoCause::NotFound => Errno::ENOENT,
            IoCause::FileTooLarge => Errno::EFBIG,
            IoCause::Symlink | IoCause::NotRegularFile => Errno::EACCES,
            IoCause::Other => Errno::EIO,
        },
        VfsError::Refused(_) => Errno::EACCES,
        VfsError::Unreadable(_) => Errno::EIO,
        VfsError::TooLarge(_) => Errno::EFBIG,
        VfsError::Stale => Errno::ESTALE,
    }
}

/// How [`mount`] mounts.
#[derive(Debug, Clone, Copy)]
pub struct MountOptions {
    /// The owner shown for every node (the mounting user).
    pub uid: u32,
    pub gid: u32,
    /// Threads serving kernel requests.
    pub threads: usize,
    pub read_only: bool,
    /// Let other users reach the mount (the permissions shown still hold).
    pub allow_other: bool,
    /// Have fusermount3 remove the mount when the process dies (it needs `allow_other`,
    /// which is then limited to root and the owner unless `allow_other` asks for everyone).
    /// Linux only: macFUSE has no such watcher, and the option is left out there.
    pub auto_unmount: bool,
}

/// A mount being served by background threads.
pub struct Mounted {
    session: BackgroundSession,
}

impl Mounted {
    /// Whether the kernel ended the session (an unmount).
    pub fn is_finished(&self) -> bool {
        self.session.guard.is_finished()
    }

    /// Waits for the session to end; its failure, if any.
    pub fn join(self) -> std::io::Result<()> {
        self.session.join()
    }
}

/// The FUSE implementations the mount options are written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kernel {
    /// Linux's FUSE, mounted by fuser itself (with `fusermount3` for `auto_unmount`).
    Linux,
    /// macFUSE, mounted through its libfuse: it knows no `subtype` and no `auto_unmount`
    /// (there is no watcher process; a dead server's mount is cleared by the next run) and
    /// takes a volume name and `noappledouble` (Finder's `._` files are never created).
    MacFuse,
}

impl Kernel {
    const HERE: Kernel = if cfg!(target_os = "macos") {
        Kernel::MacFuse
    } else {
        Kernel::Linux
    };
}

/// The mount options and who may reach the mount, for `kernel`.
fn mount_options(options: &MountOptions, kernel: Kernel) -> (Vec<MountOption>, SessionACL) {
    let mut list = vec![MountOption::FSName("gjcfs".to_owned())];
    match kernel {
        Kernel::Linux => list.push(MountOption::Subtype("gjcfs".to_owned())),
        Kernel::MacFuse => list.extend([
            MountOption::CUSTOM("volname=gjcfs".to_owned()),
            MountOption::CUSTOM("noappledouble".to_owned()),
        ]),
    }
    list.extend([
        MountOption::NoAtime,
        // The kernel checks the permissions the attributes show (owned by the mounting
        // user): with allow_other, other users may reach the mount but not read or write.
        MountOption::DefaultPermissions,
    ]);
    if options.read_only {
        list.push(MountOption::RO);
    }
    let mut acl = SessionACL::Owner;
    if options.allow_other {
        acl = SessionACL::All;
    }
    if options.auto_unmount && kernel == Kernel::Linux {
        list.push(MountOption::AutoUnmount);
        if !options.allow_other {
            acl = SessionACL::RootAndOwner;
        }
    }
    (list, acl)
}

/// Mounts `vfs` at `mountpoint` and serves it in the background, with the model's changes
/// announced to the kernel ([`invalidator`]).
pub fn mount(
    vfs: std::sync::Arc<Vfs>,
    mountpoint: &Path,
    options: &MountOptions,
) -> std::io::Result<Mounted> {
    let adapter = FuseAdapter::new(vfs.clone(), options.uid, options.gid);
    let mut config = Config::default();
    config.n_threads = Some(options.threads);
    config.clone_fd = options.threads > 1;
    (config.mount_options, config.acl) = mount_options(options, Kernel::HERE);
    let session = fuser::spawn_mount(adapter, mountpoint, &config)?;
    vfs.set_invalidator(invalidator(session.notifier()));
    Ok(Mounted { session })
}

pub struct FuseAdapter {
    vfs: std::sync::Arc<Vfs>,
    uid: u32,
    gid: u32,
    /// Files are opened by the kernel alone and read by node (see [`FuseAdapter::new`]).
    by_node: bool,
    /// The longest write request the kernel sends ([`request_max`]).
    request_max: usize,
}

/// The largest write request the mount asks the kernel for.
const MAX_WRITE: u32 = 1 << 20;

/// The longest write request the kernel sends a file opened with `FOPEN_DIRECT_IO` (every
/// file that takes writes): a `write(2)` is cut into requests of at most `max_write` bytes
/// and at most `max_pages` pages of the writer's buffer, where Linux caps `max_pages` at
/// `/proc/sys/fs/fuse/max_pages_limit` (256 where that file is missing). So every request
/// but the last of a `write(2)` is longer than this minus a page ([`part_of`]). macFUSE
/// states no such rule: there, any request longer than a page may be continued.
fn request_max(kernel: Kernel) -> usize {
    let page = page_size();
    if kernel == Kernel::MacFuse {
        return 2 * page;
    }
    let limit = std::fs::read_to_string("/proc/sys/fs/fuse/max_pages_limit")
        .ok()
        .and_then(|text| text.trim().parse::<usize>().ok())
        .unwrap_or(256);
    let max_pages = (MAX_WRITE as usize).div_ceil(page).min(limit);
    (MAX_WRITE as usize).min(max_pages * page)
}

fn page_size() -> usize {
    rustix::param::page_size().max(512)
}

/// Where a write request of `len` bytes stands in its `write(2)`: one as long as the
/// kernel makes them (more than `request_max` minus a page) may be continued; a shorter
/// one is the last.
fn part_of(len: usize, request_max: usize) -> Part {
    if len + page_size() > request_max {
        Part::MayContinue
    } else {
        Part::Last
    }
}

impl FuseAdapter {
    /// Serves `vfs`; files are owned by `uid`:`gid` (the mounting user).
    ///
    /// A read-only model on Linux is served without file handles: the first open is
    /// answered `ENOSYS`, and the kernel then opens and closes every file itself (no OPEN,
    /// FLUSH or RELEASE round trip; `FUSE_NO_OPEN_SUPPORT`), keeps its pages across opens
    /// and reads by node ([`Vfs::read_node`]). A rendered file gets a new inode number
    /// when its bytes change, so its name gets no TTL. Writes need handles: a writable
    /// mount keeps them, and so does macFUSE.
    pub fn new(vfs: std::sync::Arc<Vfs>, uid: u32, gid: u32) -> Self {
        let by_node = vfs.read_only() && Kernel::HERE == Kernel::Linux;
        FuseAdapter {
            vfs,
            uid,
            gid,
            by_node,
            request_max: request_max(Kernel::HERE),
        }
    }

    fn attr(&self, a: &Attr) -> FileAttr {
        file_attr(a, self.uid, self.gid)
    }
}

/// Runs the model call of one kernel request, in a span of its own (`request{op ino}`,
/// with the `errno` it was answered), and logs how it ended: at trace level when it
/// succeeded, at debug level with its error when it was refused, as a warning with the
/// reason when storage failed (the errno cannot carry the reason), as an error when it
/// panicked (answered `EIO`).
fn call<T>(
    op: &'static str,
    ino: u64,
    f: impl FnOnce() -> Result<T, VfsError>,
) -> Result<T, Errno> {
    let span = tracing::debug_span!("request", op, ino, errno = tracing::field::Empty);
    let _in = span.enter();
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(value)) => {
            tracing::trace!("ok");
            Ok(value)
        }
        Ok(Err(e)) => {
            let errno = to_errno(&e);
            span.record("errno", errno.code());
            match &e {
                VfsError::Storage { reason, .. } | VfsError::Unreadable(reason) => {
                    tracing::warn!("{reason}");
                }
                _ => tracing::debug!(error = %e, "refused"),
            }
            Err(errno)
        }
        Err(_) => {
            span.record("errno", Errno::EIO.code());
            tracing::error!("the request panicked; answered EIO");
            Err(Errno::EIO)
        }
    }
}

/// The operation a refused change is logged as.
fn change_op(change: NamespaceChange) -> &'static str {
    match change {
        NamespaceChange::Create => "create",
        NamespaceChange::Remove => "remove",
        NamespaceChange::Rename => "rename",
        NamespaceChange::Link => "link",
    }
}

fn name_str(name: &OsStr) -> Result<&str, VfsError> {
    name.to_str().ok_or(VfsError::NotFound)
}

impl FuseAdapter {
    /// The errno of a refused change to the fixed layout (a request of its own, as
    /// [`call`] runs every request).
    fn refusal(&self, parent: INodeNo, change: NamespaceChange) -> Errno {
        call(change_op(change), parent.0, || {
            Err::<(), _>(self.vfs.change_namespace(parent.0, change))
        })
        .err()
        .unwrap_or(Errno::EIO)
    }
}

impl Filesystem for FuseAdapter {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // The request size `request_max` reckons with.
        let _ = config.set_max_write(MAX_WRITE);
        // O_TRUNC then arrives with the open instead of as a truncate without a handle, so
        // `echo ID > leaf` replaces the leaf only through its handle, only if the id is good.
        if let Err(missing) = config.add_capabilities(InitFlags::FUSE_ATOMIC_O_TRUNC) {
            tracing::warn!("the kernel lacks {missing:?}; O_TRUNC on leaf resets it");
        }
        // A file whose mtime or size changed drops its cached pages at the kernel's next
        // attribute refresh (session.jsonl grows while a reader keeps it open), and views,
        // served without the page cache, can still be mapped. Both optional.
        let _ = config.add_capabilities(InitFlags::FUSE_AUTO_INVAL_DATA);
        let _ = config.add_capabilities(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP);
        // Listings carry the attributes (`ls -l`, `grep -r` need no lookup per name).
        // Optional: without them the kernel looks names up one by one.
        let _ = config
            .add_capabilities(InitFlags::FUSE_DO_READDIRPLUS | InitFlags::FUSE_READDIRPLUS_AUTO);
        if self.by_node {
            if config
                .add_capabilities(InitFlags::FUSE_NO_OPEN_SUPPORT)
                .is_ok()
            {
                self.vfs.serve_reads_by_node();
            } else {
                self.by_node = false;
            }
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match call("lookup", parent.0, || {
            self.vfs.lookup(parent.0, name_str(name)?)
        }) {
            Ok(a) => {
                reply.entry_with_ttls(attr_ttl(&a), entry_ttl(&a), &self.attr(&a), Generation(0))
            }
            Err(e) => reply.error(e),
        }
    }

    // fuser's batch_forget calls this for each node.
    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        let _ = catch_unwind(AssertUnwindSafe(|| self.vfs.forget(ino.0, nlookup)));
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match call("getattr", ino.0, || self.vfs.getattr(ino.0)) {
            Ok(a) => reply.attr(attr_ttl(&a), &self.attr(&a)),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match call("readlink", ino.0, || self.vfs.readlink(ino.0)) {
            Ok(target) => reply.data(target.as_bytes()),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        req: &Request,
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
        let change = AttrChange {
            size,
            others: mode.is_some()
                || uid.is_some()
                || gid.is_some()
                || atime.is_some()
                || mtime.is_some(),
        };
        let result = call("setattr", ino.0, || {
            self.vfs
                .set_attr(ino.0, fh.map(|f| f.0), change, Some(req.uid()))
        });
        match result {
            Ok(a) => reply.attr(attr_ttl(&a), &self.attr(&a)),
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

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if self.by_node {
            // The kernel opens every file itself from now on.
            return reply.error(Errno::ENOSYS);
        }
        let access = flags.acc_mode();
        let mode = OpenMode {
            read: matches!(access, OpenAccMode::O_RDONLY | OpenAccMode::O_RDWR),
            write: matches!(access, OpenAccMode::O_WRONLY | OpenAccMode::O_RDWR),
            truncate: flags.0 & libc::O_TRUNC != 0,
            caller_uid: Some(req.uid()),
        };
        match call("open", ino.0, || self.vfs.open(ino.0, mode)) {
            Ok(opened) => {
                let mut flags = match opened.caching {
                    Caching::Direct => FopenFlags::FOPEN_DIRECT_IO,
                    Caching::UntilReopen => FopenFlags::empty(),
                    Caching::Keep => FopenFlags::FOPEN_KEEP_CACHE,
                };
                if !mode.write {
                    // Nothing to apply at close: spare the round trip.
                    flags |= FopenFlags::FOPEN_NOFLUSH;
                }
                reply.opened(FileHandle(opened.fh), flags)
            }
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let read = || {
            if self.by_node {
                self.vfs.read_node(ino.0, offset, size)
            } else {
                self.vfs.read(fh.0, offset, size)
            }
        };
        match call("read", ino.0, read) {
            Ok(bytes) => reply.data(&bytes),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let part = part_of(data.len(), self.request_max);
        let writer = lock_owner.map(|owner| owner.0);
        match call("write", ino.0, || {
            self.vfs.write_part(fh.0, offset, data, part, writer)
        }) {
            Ok(n) => reply.written(u32::try_from(n).unwrap_or(u32::MAX)),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        if self.by_node {
            // Nothing is ever pending: the kernel stops sending flushes.
            return reply.error(Errno::ENOSYS);
        }
        match call("flush", ino.0, || self.vfs.flush(fh.0, Some(lock_owner.0))) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    /// An fsync applies what the handle holds, as a close does: the lines written to
    /// `entries/new` are appended then (a managed transcript's append is fsynced).
    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        match call("fsync", ino.0, || self.vfs.flush(fh.0, None)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        match call("release", ino.0, || self.vfs.release(fh.0)) {
            Ok(()) => reply.ok(),
            Err(e) => {
                tracing::warn!(errno = e.code(), "a write failed at release");
                reply.error(e)
            }
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match call("opendir", ino.0, || self.vfs.opendir(ino.0)) {
            Ok(opened) => reply.opened(FileHandle(opened.fh), listing_flags(opened.kept)),
            Err(e) => reply.error(e),
        }
    }

    fn releasedir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        match call("releasedir", ino.0, || self.vfs.release(fh.0)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let entries = match call("readdir", ino.0, || self.vfs.dir_entries(fh.0)) {
            Ok(entries) => entries,
            Err(e) => return reply.error(e),
        };
        for (next, entry) in listing_from(ino.0, &entries, offset) {
            if reply.add(INodeNo(entry.ino), next, file_type(entry.kind), &entry.name) {
                break;
            }
        }
        reply.ok();
    }

    fn readdirplus(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let listed = call("readdirplus", ino.0, || {
            Ok((self.vfs.dir_entries(fh.0)?, self.vfs.getattr(ino.0)?))
        });
        let (entries, own) = match listed {
            Ok(listed) => listed,
            Err(e) => return reply.error(e),
        };
        for (next, entry) in listing_from(ino.0, &entries, offset) {
            // The kernel makes no name of `.` and `..`; their attributes are not used.
            let dots = entry.name == "." || entry.name == "..";
            let (attr, ttl) = if dots {
                (own, entry_ttl(&own))
            } else {
                // Counted as a lookup, as the kernel counts an entry with its attributes.
                match call("readdirplus", ino.0, || {
                    self.vfs.listed_entry(ino.0, &entry)
                }) {
                    Ok(listed) => listed_attr(listed),
                    Err(e) => return reply.error(e),
                }
            };
            let full = reply.add(
                INodeNo(attr.ino),
                next,
                &entry.name,
                // One time for both: the name's (a listing gives no attribute time of its own).
                ttl,
                &self.attr(&attr),
                Generation(0),
            );
            if full {
                if !dots {
                    // Not given: not the kernel's.
                    self.forget(req, INodeNo(attr.ino), 1);
                }
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

/// How long a change waits for the kernel to drop what it cached, so that a `stat` right
/// after a write sees the change. Bounded: the kernel may hold an invalidation until a
/// request being served (the very write that caused it) is answered.
const INVALIDATION_WAIT: Duration = Duration::from_millis(100);

/// The model's change hook: the inode numbers go to a thread of their own that tells the
/// kernel to drop its cached attributes and pages; the caller waits for that at most
/// [`INVALIDATION_WAIT`]. A handler must not notify the kernel itself (the kernel may wait
/// on a request that handler is serving).
pub fn invalidator(notifier: Notifier) -> Invalidator {
    type Batch = (Vec<u64>, std::sync::mpsc::Sender<()>);
    let (tx, rx) = std::sync::mpsc::channel::<Batch>();
    std::thread::spawn(move || {
        while let Ok(first) = rx.recv() {
            let mut batches = vec![first];
            batches.extend(rx.try_iter());
            let inos: std::collections::BTreeSet<u64> = batches
                .iter()
                .flat_map(|(inos, _)| inos.iter().copied())
                .collect();
            for ino in inos {
                // ENOENT: the kernel holds nothing of that node. Other failures (the mount
                // going away) leave nothing to invalidate either.
                let _ = notifier.inval_inode(INodeNo(ino), 0, 0);
            }
            for (_, done) in batches {
                let _ = done.send(());
            }
        }
    });
    let tx = parking_lot::Mutex::new(tx);
    Box::new(move |inos: &[u64]| {
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        if tx.lock().send((inos.to_vec(), done_tx)).is_ok() {
            let _ = done_rx.recv_timeout(INVALIDATION_WAIT);
        }
    })
}

/// How the kernel is told what it may keep of a directory's listing: `FOPEN_CACHE_DIR`
/// fills a copy from this handle's reads, and `FOPEN_KEEP_CACHE` keeps the copy the
/// kernel has (without it, an open drops the copy).
fn listing_flags(kept: KeptListing) -> FopenFlags {
    match kept {
        KeptListing::No => FopenFlags::empty(),
        KeptListing::Renewed => FopenFlags::FOPEN_CACHE_DIR,
        KeptListing::Unchanged => FopenFlags::FOPEN_CACHE_DIR | FopenFlags::FOPEN_KEEP_CACHE,
    }
}

/// The listing of directory `ino` from `offset` on: `.`, `..` and the entries, each with
/// the offset of the one after it. A large directory is read in many requests, each from
/// where the last ended: what comes before `offset` is neither cloned nor walked.
fn listing_from(
    ino: u64,
    entries: &[DirEntry],
    offset: u64,
) -> impl Iterator<Item = (u64, Cow<'_, DirEntry>)> {
    let start = usize::try_from(offset).unwrap_or(usize::MAX);
    let dots = [".", ".."]
        .into_iter()
        .enumerate()
        .skip(start)
        .map(move |(i, name)| {
            let dot = DirEntry {
                ino,
                kind: NodeKind::Directory,
                name: name.to_owned(),
            };
            (i as u64 + 1, Cow::Owned(dot))
        });
    let first = start.saturating_sub(2).min(entries.len());
    let rest = entries[first..]
        .iter()
        .enumerate()
        .map(move |(i, entry)| ((first + i) as u64 + 3, Cow::Borrowed(entry)));
    dots.chain(rest)
}

#[cfg(test)]
mod tests;
