//! [`Adapter`]: Dokan's calls in plain terms (a Windows path, the kernel's create
//! disposition and options, offsets) translated to the model. The Dokan binding
//! (`windows.rs`) only converts types and calls these.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gjcfs_vfs::{Attr, AttrChange, NamespaceChange, NodeKind, OpenMode, Vfs, VfsError, LEAF_MAX};
use parking_lot::Mutex;

use crate::names;
use crate::security::{self, Sid};
use crate::status::*;

// Create dispositions (ZwCreateFile).
pub const FILE_SUPERSEDE: u32 = 0;
pub const FILE_OPEN: u32 = 1;
pub const FILE_CREATE: u32 = 2;
pub const FILE_OPEN_IF: u32 = 3;
pub const FILE_OVERWRITE: u32 = 4;
pub const FILE_OVERWRITE_IF: u32 = 5;
// Create options.
pub const FILE_DIRECTORY_FILE: u32 = 0x0000_0001;
pub const FILE_NON_DIRECTORY_FILE: u32 = 0x0000_0040;
pub const FILE_DELETE_ON_CLOSE: u32 = 0x0000_1000;
// Access rights that read or write a file's data.
const FILE_READ_DATA: u32 = 0x0001;
const FILE_WRITE_DATA: u32 = 0x0002;
const FILE_APPEND_DATA: u32 = 0x0004;
const FILE_EXECUTE: u32 = 0x0020;
const GENERIC_ALL: u32 = 0x1000_0000;
const GENERIC_EXECUTE: u32 = 0x2000_0000;
const GENERIC_WRITE: u32 = 0x4000_0000;
const GENERIC_READ: u32 = 0x8000_0000;

/// A `ZwCreateFile` as Dokan passes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreateRequest {
    pub desired_access: u32,
    pub disposition: u32,
    pub options: u32,
}

impl CreateRequest {
    fn writes(&self) -> bool {
        self.desired_access & (FILE_WRITE_DATA | FILE_APPEND_DATA | GENERIC_WRITE | GENERIC_ALL)
            != 0
    }

    fn reads(&self) -> bool {
        self.desired_access
            & (FILE_READ_DATA | FILE_EXECUTE | GENERIC_READ | GENERIC_EXECUTE | GENERIC_ALL)
            != 0
    }

    fn truncates(&self) -> bool {
        matches!(
            self.disposition,
            FILE_SUPERSEDE | FILE_OVERWRITE | FILE_OVERWRITE_IF
        )
    }

    fn creates(&self) -> bool {
        matches!(
            self.disposition,
            FILE_SUPERSEDE | FILE_CREATE | FILE_OPEN_IF | FILE_OVERWRITE_IF
        )
    }
}

/// What an open file object holds.
#[derive(Debug)]
pub struct Handle {
    pub ino: u64,
    pub is_dir: bool,
    content: Content,
}

#[derive(Debug)]
enum Content {
    /// A directory (listed by path when asked).
    Dir,
    /// A file: the model's handle, opened at create for a write, at the first read else
    /// (opens for attributes alone, as Explorer makes, open nothing).
    File(Mutex<Option<u64>>),
    /// A link shown as a file holding its target ([links](crate#links)).
    Link(Vec<u8>),
}

/// A node's information as Windows shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Info {
    pub attributes: u32,
    pub size: u64,
    pub mtime: SystemTime,
    /// The node's number (stable for the life of the mount).
    pub index: u64,
    pub links: u32,
}

/// A directory entry as Windows lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The Windows name ([`names::encode`]).
    pub name: String,
    pub info: Info,
}

/// The translator over one model, for one mounting user.
pub struct Adapter {
    vfs: Arc<Vfs>,
    owner: Sid,
}

impl Adapter {
    /// Serves `vfs` to `owner` (the mounting user) alone.
    pub fn new(vfs: Arc<Vfs>, owner: Sid) -> Self {
        Adapter { vfs, owner }
    }

    pub fn vfs(&self) -> &Arc<Vfs> {
        &self.vfs
    }

    pub fn owner(&self) -> &Sid {
        &self.owner
    }

    /// The node a Windows path names.
    fn resolve(&self, path: &str) -> Result<Attr, NtStatus> {
        let names = names::model_names(path).ok_or(STATUS_OBJECT_NAME_NOT_FOUND)?;
        self.vfs.resolve(&names).map_err(|u| path_status(&u))
    }

    /// The directory a Windows path's last name is in.
    fn parent(&self, path: &str) -> Result<Attr, NtStatus> {
        let names = names::model_names(path).ok_or(STATUS_OBJECT_PATH_NOT_FOUND)?;
        let parent = &names[..names.len().saturating_sub(1)];
        self.vfs.resolve(parent).map_err(|u| {
            path_status(&gjcfs_vfs::Unresolved {
                at_last: false,
                ..u
            })
        })
    }

    /// Opens (never creates) `path` for `requester`: only the mounting user may open
    /// anything (an unknown requester is refused). A name that does not exist is refused
    /// with the model's reason for a create when the disposition would create it; delete on
    /// close with the model's reason for a removal.
    pub fn create(
        &self,
        path: &str,
        request: CreateRequest,
        requester: Option<&Sid>,
    ) -> Result<Handle, NtStatus> {
        if requester != Some(&self.owner) {
            return Err(STATUS_ACCESS_DENIED);
        }
        let attr = match self.resolve(path) {
            Ok(attr) => attr,
            Err(STATUS_OBJECT_NAME_NOT_FOUND) if request.creates() => {
                let parent = self.parent(path)?;
                return Err(to_ntstatus(
                    &self
                        .vfs
                        .change_namespace(parent.ino, NamespaceChange::Create),
                ));
            }
            Err(status) => return Err(status),
        };
        if request.disposition == FILE_CREATE {
            return Err(STATUS_OBJECT_NAME_COLLISION);
        }
        if request.options & FILE_DELETE_ON_CLOSE != 0 {
            return Err(self.removal(path));
        }
        let is_dir = attr.kind == NodeKind::Directory;
        if is_dir && request.options & FILE_NON_DIRECTORY_FILE != 0 {
            return Err(STATUS_FILE_IS_A_DIRECTORY);
        }
        if !is_dir && request.options & FILE_DIRECTORY_FILE != 0 {
            return Err(STATUS_NOT_A_DIRECTORY);
        }
        let content = match attr.kind {
            NodeKind::Directory if request.truncates() => return Err(STATUS_ACCESS_DENIED),
            NodeKind::Directory => Content::Dir,
            NodeKind::Symlink if request.writes() || request.truncates() => {
                return Err(to_ntstatus(&VfsError::AccessDenied))
            }
            NodeKind::Symlink => Content::Link(self.link_bytes(attr.ino)?),
            NodeKind::File if request.writes() || request.truncates() => {
                let mode = OpenMode {
                    read: request.reads(),
                    write: true,
                    truncate: request.truncates(),
                    caller_uid: None,
                };
                let opened = self.vfs.open(attr.ino, mode).map_err(|e| to_ntstatus(&e))?;
                Content::File(Mutex::new(Some(opened.fh)))
            }
            NodeKind::File => Content::File(Mutex::new(None)),
        };
        Ok(Handle {
            ino: attr.ino,
            is_dir,
            content,
        })
    }

    /// Why `path` cannot be removed (delete-on-close, `DeleteFile`, `RemoveDirectory`).
    pub fn removal(&self, path: &str) -> NtStatus {
        match self.parent(path) {
            Ok(parent) => {
                let refused = self
                    .vfs
                    .change_namespace(parent.ino, NamespaceChange::Remove);
                match refused {
                    VfsError::NotPermitted => STATUS_CANNOT_DELETE,
                    other => to_ntstatus(&other),
                }
            }
            Err(status) => status,
        }
    }

    /// Why `path` cannot be renamed or moved.
    pub fn rename(&self, path: &str) -> NtStatus {
        match self.parent(path) {
            Ok(parent) => to_ntstatus(
                &self
                    .vfs
                    .change_namespace(parent.ino, NamespaceChange::Rename),
            ),
            Err(status) => status,
        }
    }

    /// The bytes of a link shown as a file: its target as a relative Windows path.
    fn link_bytes(&self, ino: u64) -> Result<Vec<u8>, NtStatus> {
        let target = self.vfs.readlink(ino).map_err(|e| to_ntstatus(&e))?;
        Ok(names::windows_link_target(&target).into_bytes())
    }

    /// Up to `len` bytes of the file at `offset`.
    pub fn read(&self, handle: &Handle, offset: u64, len: u32) -> Result<Vec<u8>, NtStatus> {
        match &handle.content {
            Content::Dir => Err(STATUS_FILE_IS_A_DIRECTORY),
            Content::Link(bytes) => {
                let start = usize::try_from(offset)
                    .unwrap_or(usize::MAX)
                    .min(bytes.len());
                let end = start.saturating_add(len as usize).min(bytes.len());
                Ok(bytes[start..end].to_vec())
            }
            Content::File(fh) => {
                let fh = {
                    let mut fh = fh.lock();
                    match *fh {
                        Some(fh) => fh,
                        None => {
                            let mode = OpenMode {
                                read: true,
                                ..OpenMode::default()
                            };
                            let opened = self
                                .vfs
                                .open(handle.ino, mode)
                                .map_err(|e| to_ntstatus(&e))?;
                            *fh = Some(opened.fh);
                            opened.fh
                        }
                    }
                };
                self.vfs.read(fh, offset, len).map_err(|e| to_ntstatus(&e))
            }
        }
    }

    /// Writes `data` at `offset`, or at the end when `to_end` (`FILE_APPEND_DATA`).
    /// `entries/new` appends whatever the offset: the model takes each complete line as
    /// an entry. A handle opened without write access is refused.
    pub fn write(
        &self,
        handle: &Handle,
        offset: u64,
        data: &[u8],
        to_end: bool,
    ) -> Result<u32, NtStatus> {
        let Content::File(fh) = &handle.content else {
            return Err(STATUS_ACCESS_DENIED);
        };
        let Some(fh) = *fh.lock() else {
            return Err(STATUS_ACCESS_DENIED);
        };
        let offset = if to_end {
            // What the handle holds now (a leaf's buffer; nothing for the append point).
            let held = self
                .vfs
                .read(fh, 0, LEAF_MAX as u32 + 1)
                .map_err(|e| to_ntstatus(&e))?;
            held.len() as u64
        } else {
            offset
        };
        let written = self
            .vfs
            .write(fh, offset, data)
            .map_err(|e| to_ntstatus(&e))?;
        Ok(u32::try_from(written).unwrap_or(u32::MAX))
    }

    /// Applies what the handle holds (`FlushFileBuffers`).
    pub fn flush(&self, handle: &Handle) -> Result<(), NtStatus> {
        match &handle.content {
            Content::File(fh) => match *fh.lock() {
                Some(fh) => self.vfs.flush(fh, None).map_err(|e| to_ntstatus(&e)),
                None => Ok(()),
            },
            Content::Dir | Content::Link(_) => Ok(()),
        }
    }

    /// The handle's last close: what it holds is applied; the failure, if any, is returned
    /// for the log (Windows has no close result to give it to).
    pub fn close(&self, handle: &Handle) -> Result<(), NtStatus> {
        match &handle.content {
            Content::File(fh) => match fh.lock().take() {
                Some(fh) => self.vfs.release(fh).map_err(|e| to_ntstatus(&e)),
                None => Ok(()),
            },
            Content::Dir | Content::Link(_) => Ok(()),
        }
    }

    /// Truncation (`SetEndOfFile`): the model decides (a `leaf` handle's buffer, the
    /// append point at 0; other files refuse).
    pub fn set_size(&self, handle: &Handle, size: u64) -> Result<(), NtStatus> {
        let fh = match &handle.content {
            Content::File(fh) => *fh.lock(),
            Content::Dir => return Err(STATUS_FILE_IS_A_DIRECTORY),
            Content::Link(_) => return Err(STATUS_ACCESS_DENIED),
        };
        let change = AttrChange {
            size: Some(size),
            others: false,
        };
        self.vfs
            .set_attr(handle.ino, fh, change, None)
            .map(drop)
            .map_err(|e| to_ntstatus(&e))
    }

    /// `SetAllocationSize`: space is not reserved ahead; taken as done on a handle open
    /// for writing, refused on others.
    pub fn set_allocation(&self, handle: &Handle) -> Result<(), NtStatus> {
        match &handle.content {
            Content::File(fh) if fh.lock().is_some() => Ok(()),
            _ => Err(STATUS_ACCESS_DENIED),
        }
    }

    /// A change of attributes, times or security: nothing to do when nothing changes, else
    /// the model's refusal.
    pub fn set_other(&self, handle: &Handle, changes: bool) -> Result<(), NtStatus> {
        let change = AttrChange {
            size: None,
            others: changes,
        };
        self.vfs
            .set_attr(handle.ino, None, change, None)
            .map(drop)
            .map_err(|e| to_ntstatus(&e))
    }

    /// The information of the handle's node.
    pub fn info(&self, handle: &Handle) -> Result<Info, NtStatus> {
        let attr = self.vfs.getattr(handle.ino).map_err(|e| to_ntstatus(&e))?;
        let size = match &handle.content {
            Content::Link(bytes) => Some(bytes.len() as u64),
            _ => None,
        };
        Ok(self.info_of(&attr, size))
    }

    fn info_of(&self, attr: &Attr, link_size: Option<u64>) -> Info {
        let mtime = if attr.mtime_ms >= 0 {
            UNIX_EPOCH + Duration::from_millis(attr.mtime_ms as u64)
        } else {
            UNIX_EPOCH
        };
        Info {
            attributes: security::attributes(attr),
            size: link_size.unwrap_or(attr.size),
            mtime,
            index: attr.ino,
            links: attr.nlink,
        }
    }

    /// The entries of directory `path` (without `.` and `..`), with Windows names.
    pub fn find(&self, path: &str) -> Result<Vec<Found>, NtStatus> {
        let dir = self.resolve(path)?;
        if dir.kind != NodeKind::Directory {
            return Err(STATUS_NOT_A_DIRECTORY);
        }
        let fh = self.vfs.opendir(dir.ino).map_err(|e| to_ntstatus(&e))?.fh;
        let listed = self.vfs.dir_entries(fh);
        let _ = self.vfs.release(fh);
        let entries = listed.map_err(|e| to_ntstatus(&e))?;
        let mut found = Vec::with_capacity(entries.len());
        for entry in entries.iter() {
            // A name gone since the listing is left out.
            let Ok(attr) = self.vfs.getattr(entry.ino) else {
                continue;
            };
            let link_size = match attr.kind {
                NodeKind::Symlink => match self.link_bytes(entry.ino) {
                    Ok(bytes) => Some(bytes.len() as u64),
                    Err(_) => continue,
                },
                _ => None,
            };
            found.push(Found {
                name: names::encode(&entry.name),
                info: self.info_of(&attr, link_size),
            });
        }
        Ok(found)
    }

    /// The security descriptor of the handle's node ([`security::descriptor`]).
    pub fn security(&self, handle: &Handle, requested: u32) -> Result<Vec<u8>, NtStatus> {
        let attr = self.vfs.getattr(handle.ino).map_err(|e| to_ntstatus(&e))?;
        let (kind, perm) = match attr.kind {
            // A link is a read-only file here.
            NodeKind::Symlink => (NodeKind::File, 0o400),
            kind => (kind, attr.perm),
        };
        Ok(security::descriptor(&self.owner, kind, perm, requested))
    }

    /// The Windows paths (from the mount root) of the nodes a model change names, for
    /// change notification, each once; nodes without a path now (gone) are left out.
    pub fn changed_paths(&self, inos: &[u64]) -> Vec<String> {
        let mut seen = std::collections::HashSet::new();
        inos.iter()
            .filter(|&&ino| seen.insert(ino))
            .filter_map(|&ino| self.vfs.path_of(ino).ok())
            .map(|names| names::windows_path(&names))
            .collect()
    }
}
