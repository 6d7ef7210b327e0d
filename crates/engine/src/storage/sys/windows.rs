//! Windows: the storage seam over Win32.
//!
//! - **No-follow opens.** Every file is opened with `FILE_FLAG_OPEN_REPARSE_POINT`, so a
//!   symlink, a junction or any other reparse point at the final component is opened itself,
//!   not followed; a reparse point is then refused (as `ELOOP` is on Unix, with
//!   `ERROR_CANT_RESOLVE_FILENAME`), and so is a handle that is not a disk file, or one that
//!   is a directory ("not a regular file"). [`lstat`] reports any reparse point as a symlink,
//!   so the owner-only checks refuse one on every path they verify. Handles are never
//!   inheritable. Files are shared
//!   for reading, writing and deletion (`FILE_SHARE_READ | FILE_SHARE_WRITE |
//!   FILE_SHARE_DELETE`), as the agent's own runtime shares them, so that a rename over a file
//!   another process reads or appends to is possible.
//! - **Identity.** A file is the volume serial number and the 64-bit file index of
//!   `GetFileInformationByHandle` (`FileId { dev, ino }`); links, sizes and the last-write and
//!   change times come from the same handle.
//! - **Owner-only.** Windows has no mode bits. Directories and files are created with a
//!   protected DACL (no inherited entries) whose one entry grants full access to the current
//!   user's SID, inherited by what is created inside a directory, and with that SID as
//!   owner. A DACL is *owner-only* when every allow entry names the current user, `SYSTEM`
//!   (`S-1-5-18`) or `BUILTIN\Administrators` (`S-1-5-32-544`): those two principals hold the
//!   backup and take-ownership privileges, so no DACL keeps them out, and a profile directory
//!   made private by hand keeps them. Deny entries only narrow access and are allowed; a NULL
//!   DACL, an allow entry for anyone else, or an entry type not understood (object or
//!   callback entries) make the DACL wider than owner-only. [`lstat`] reports the DACL as the
//!   mode the rest of the engine checks: `0700` (directory) or `0600` (file) when it is
//!   owner-only, `0777` or `0666` when it is wider, without the write bits when the file is
//!   read-only. The owner is reported as a user id: the current user's relative id (the last
//!   sub-authority of its SID) when the owner is the current user, otherwise the owner SID's
//!   own relative id (never equal to the current user's: `u32::MAX` if it would be). So
//!   `check_owner_only` refuses a file with a wider DACL, or owned by someone else, like a
//!   `0644` file or another user's file on Linux. `set_mode` with a mode that has no group or
//!   other bits puts the owner-only DACL back; any other mode is refused.
//! - **Canonical paths.** [`canonicalize`] is `GetFinalPathNameByHandleW` on a handle of
//!   the path (normalised names, DOS volume names) with the `\\?\` prefix taken off: drive
//!   letter case, `\\?\` spellings, `.`/`..`, 8.3 short names, `subst` drives and junctions
//!   all give the one spelling the volume stores. A path the system names only as
//!   `\\?\UNC\server\share\…` is given as `\\server\share\…`, and [`is_network_fs`] says that
//!   it (or anything on a remote drive) is a network path: managed scopes refuse it
//!   (`network_unsupported`). A canonical path never contains `?`.
//! - **Renames.** `rename` replaces its target (`std::fs::rename`: POSIX semantics where the
//!   system has them, `MoveFileExW(MOVEFILE_REPLACE_EXISTING)` otherwise). Replacing a file
//!   that is read-only or open without delete sharing fails with access denied or a sharing
//!   violation: the full rewrite then moves the target aside first, the fallback the agent
//!   applies to EPERM ([`is_rename_refused`]). [`rename_no_replace`] is `MoveFileExW` without
//!   `MOVEFILE_REPLACE_EXISTING`.
//! - **Durability.** A file is flushed with `FlushFileBuffers` on a handle with write access.
//!   A directory cannot be flushed through a handle applications are given; NTFS writes the
//!   directory-entry changes of a create or rename to its metadata log itself, so
//!   [`sync_dir`] only checks that the directory exists and is one.
//! - **Appends.** An appending writer writes each buffer at the end of the file as it is at
//!   that moment (`WriteFile` at offset `0xFFFF_FFFF_FFFF_FFFF`), which is what `O_APPEND` does.
//!   Positional reads and writes put the handle's file pointer back where it was.
//! - **Writers elsewhere.** Windows does not list the handles other processes hold. A file
//!   is probed instead: an open that shares only reading and deletion fails with a sharing
//!   violation while any handle with write access is open on it. The answer then is the
//!   single pid `0` (a process the system does not name). The caller holds no writer of its
//!   own during the probe (the full rewrite closes it first).
//! - **Run ids.** There is no boot id; a process's start id is `<pid>:<creation time>` from
//!   `GetProcessTimes`, an absolute time that a reused pid (after a reboot too) does not
//!   repeat.
//! - **The terminal.** Windows consoles have no device path: stdin is never a named tty, and
//!   the terminal id comes from the environment (`WT_SESSION` and the others).

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::os::windows::ffi::{OsStrExt, OsStringExt};
use std::os::windows::fs::FileExt;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::path::{Component, Path, PathBuf, Prefix};
use std::sync::OnceLock;

use windows_sys::Win32::Foundation::{
    CloseHandle, LocalFree, ERROR_ACCESS_DENIED, ERROR_CANT_RESOLVE_FILENAME, ERROR_DISK_FULL,
    ERROR_FILE_NOT_FOUND, ERROR_FILE_TOO_LARGE, ERROR_HANDLE_DISK_FULL, ERROR_INVALID_FUNCTION,
    ERROR_LOCK_VIOLATION, ERROR_SHARING_VIOLATION, ERROR_WRITE_PROTECT, FILETIME, GENERIC_READ,
    GENERIC_WRITE, HANDLE, INVALID_HANDLE_VALUE, STILL_ACTIVE,
};
use windows_sys::Win32::Security::Authorization::{
    GetSecurityInfo, SetSecurityInfo, SE_FILE_OBJECT,
};
use windows_sys::Win32::Security::{
    AclSizeInformation, AddAccessAllowedAceEx, GetAce, GetAclInformation, GetLengthSid,
    GetTokenInformation, InitializeAcl, InitializeSecurityDescriptor, SetSecurityDescriptorControl,
    SetSecurityDescriptorDacl, SetSecurityDescriptorOwner, TokenUser, ACCESS_ALLOWED_ACE,
    ACE_HEADER, ACL, ACL_REVISION, ACL_SIZE_INFORMATION, CONTAINER_INHERIT_ACE,
    DACL_SECURITY_INFORMATION, OBJECT_INHERIT_ACE, OWNER_SECURITY_INFORMATION,
    PROTECTED_DACL_SECURITY_INFORMATION, PSECURITY_DESCRIPTOR, PSID, SECURITY_ATTRIBUTES,
    SECURITY_DESCRIPTOR, SE_DACL_PROTECTED, TOKEN_QUERY, TOKEN_USER,
};
use windows_sys::Win32::Storage::FileSystem::{
    CreateDirectoryW, CreateFileW, FileBasicInfo, GetDriveTypeW, GetFileInformationByHandle,
    GetFileInformationByHandleEx, GetFileType, GetFinalPathNameByHandleW, GetVolumePathNameW,
    LockFileEx, MoveFileExW, UnlockFileEx, BY_HANDLE_FILE_INFORMATION, CREATE_NEW, FILE_ALL_ACCESS,
    FILE_ATTRIBUTE_DIRECTORY, FILE_ATTRIBUTE_READONLY, FILE_ATTRIBUTE_REPARSE_POINT,
    FILE_BASIC_INFO, FILE_FLAG_BACKUP_SEMANTICS, FILE_FLAG_OPEN_REPARSE_POINT,
    FILE_NAME_NORMALIZED, FILE_READ_ATTRIBUTES, FILE_SHARE_DELETE, FILE_SHARE_READ,
    FILE_SHARE_WRITE, FILE_TYPE_DISK, LOCKFILE_EXCLUSIVE_LOCK, LOCKFILE_FAIL_IMMEDIATELY,
    OPEN_ALWAYS, OPEN_EXISTING, READ_CONTROL, VOLUME_NAME_DOS, WRITE_DAC,
};
use windows_sys::Win32::System::SystemServices::{ACCESS_ALLOWED_ACE_TYPE, ACCESS_DENIED_ACE_TYPE};
use windows_sys::Win32::System::Threading::{
    GetCurrentProcess, GetExitCodeProcess, GetProcessTimes, OpenProcess, OpenProcessToken,
    PROCESS_QUERY_LIMITED_INFORMATION,
};
use windows_sys::Win32::System::WindowsProgramming::DRIVE_REMOTE;
use windows_sys::Win32::System::IO::OVERLAPPED;

use super::{Create, Info, Open};
use crate::storage::{not_a_regular_file, EntryKind, EntryStat, FileId, FileStat, FileVersion};

/// Sharing of every handle: others may read, write, rename and delete meanwhile.
const SHARE_ALL: u32 = FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE;
/// 100 ns intervals between 1601-01-01 (FILETIME) and 1970-01-01.
const EPOCH_DIFF_100NS: i128 = 116_444_736_000_000_000;
/// `NT AUTHORITY\SYSTEM`, as SID bytes.
const SID_SYSTEM: [u8; 12] = [1, 1, 0, 0, 0, 0, 0, 5, 18, 0, 0, 0];
/// `BUILTIN\Administrators`, as SID bytes.
const SID_ADMINISTRATORS: [u8; 16] = [1, 2, 0, 0, 0, 0, 0, 5, 32, 0, 0, 0, 0x20, 2, 0, 0];

/// `path` as a NUL-terminated UTF-16 string.
fn wide(path: &Path) -> io::Result<Vec<u16>> {
    let mut w: Vec<u16> = path.as_os_str().encode_wide().collect();
    if w.contains(&0) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"));
    }
    w.push(0);
    Ok(w)
}

fn last_error() -> io::Error {
    io::Error::last_os_error()
}

fn check(ok: i32) -> io::Result<()> {
    if ok == 0 {
        Err(last_error())
    } else {
        Ok(())
    }
}

/// The error of an open that met a symlink or another reparse point.
fn reparse_refused() -> io::Error {
    io::Error::from_raw_os_error(ERROR_CANT_RESOLVE_FILENAME as i32)
}

/// Opens `path` with `CreateFileW`.
fn create_file(
    path: &Path,
    access: u32,
    share: u32,
    security: Option<&SECURITY_ATTRIBUTES>,
    disposition: u32,
    flags: u32,
) -> io::Result<File> {
    let name = wide(path)?;
    let sa = security.map_or(std::ptr::null(), |s| s as *const SECURITY_ATTRIBUTES);
    // SAFETY: `name` is NUL-terminated; `sa` is null or points at a live SECURITY_ATTRIBUTES
    // whose descriptor outlives the call.
    let handle = unsafe {
        CreateFileW(
            name.as_ptr(),
            access,
            share,
            sa,
            disposition,
            flags,
            std::ptr::null_mut(),
        )
    };
    if handle == INVALID_HANDLE_VALUE {
        return Err(last_error());
    }
    // SAFETY: a valid handle that nothing else owns.
    Ok(unsafe { File::from_raw_handle(handle) })
}

/// The information `GetFileInformationByHandle` gives about the open `file`.
fn handle_info(file: &File) -> io::Result<BY_HANDLE_FILE_INFORMATION> {
    // SAFETY: plain data, for which all zeroes is a valid value.
    let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: a plain-data out-parameter and a valid handle.
    check(unsafe { GetFileInformationByHandle(file.as_raw_handle(), &mut info) })?;
    Ok(info)
}

/// The times of `FileBasicInfo` (last write, change) of the open `file`.
fn basic_info(file: &File) -> io::Result<FILE_BASIC_INFO> {
    // SAFETY: plain data, for which all zeroes is a valid value.
    let mut info: FILE_BASIC_INFO = unsafe { std::mem::zeroed() };
    // SAFETY: a plain-data out-parameter of the size passed, and a valid handle.
    check(unsafe {
        GetFileInformationByHandleEx(
            file.as_raw_handle(),
            FileBasicInfo,
            (&mut info as *mut FILE_BASIC_INFO).cast(),
            std::mem::size_of::<FILE_BASIC_INFO>() as u32,
        )
    })?;
    Ok(info)
}

fn filetime_ns(t: i64) -> i128 {
    (t as i128 - EPOCH_DIFF_100NS) * 100
}

fn filetime_of(ft: FILETIME) -> i64 {
    ((ft.dwHighDateTime as i64) << 32) | ft.dwLowDateTime as i64
}

fn file_size(info: &BY_HANDLE_FILE_INFORMATION) -> u64 {
    ((info.nFileSizeHigh as u64) << 32) | info.nFileSizeLow as u64
}

fn id_of(info: &BY_HANDLE_FILE_INFORMATION) -> FileId {
    FileId {
        dev: info.dwVolumeSerialNumber as u64,
        ino: ((info.nFileIndexHigh as u64) << 32) | info.nFileIndexLow as u64,
    }
}

/// Whether the open `file` is a disk file (not a pipe, a console or another device).
fn is_disk(file: &File) -> bool {
    // SAFETY: a valid handle.
    unsafe { GetFileType(file.as_raw_handle()) == FILE_TYPE_DISK }
}

/// Refuses an open handle that is a reparse point, not a disk file, or (unless `dir`) a
/// directory; `dir` requires a directory.
fn check_opened(file: &File, dir: bool) -> io::Result<BY_HANDLE_FILE_INFORMATION> {
    if !is_disk(file) {
        return Err(not_a_regular_file());
    }
    let info = handle_info(file)?;
    if info.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT != 0 {
        return Err(reparse_refused());
    }
    if (info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY != 0) != dir {
        return Err(if dir {
            io::Error::new(io::ErrorKind::NotADirectory, "not a directory")
        } else {
            not_a_regular_file()
        });
    }
    Ok(info)
}

/// Opens the file at `path` as `how` says without following a reparse point, creating it
/// with the owner-only DACL, and refuses it unless it is a regular disk file.
pub fn open(path: &Path, how: Open) -> io::Result<File> {
    let access = if how.write {
        GENERIC_READ | GENERIC_WRITE
    } else {
        GENERIC_READ
    };
    let disposition = match how.create {
        Create::Never => OPEN_EXISTING,
        Create::IfMissing => OPEN_ALWAYS,
        Create::New => CREATE_NEW,
    };
    // The owner-only descriptor, for a file this open may create.
    let security = match how.create {
        Create::Never => None,
        Create::IfMissing | Create::New => Some(OwnerOnly::new(false)?),
    };
    let sa = security.as_ref().map(|s| s.attributes());
    let file = create_file(
        path,
        access,
        SHARE_ALL,
        sa.as_ref(),
        disposition,
        FILE_FLAG_OPEN_REPARSE_POINT,
    )
    .map_err(|e| {
        // A directory opened without backup semantics is refused as access denied.
        if e.raw_os_error() == Some(ERROR_ACCESS_DENIED as i32) && is_dir_path(path) {
            not_a_regular_file()
        } else {
            e
        }
    })?;
    check_opened(&file, false)?;
    Ok(file)
}

fn is_dir_path(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

/// Opens the directory at `dir` itself (not following a reparse point there).
pub fn open_dir(dir: &Path) -> io::Result<File> {
    let file = create_file(
        dir,
        FILE_READ_ATTRIBUTES | READ_CONTROL,
        SHARE_ALL,
        None,
        OPEN_EXISTING,
        FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT,
    )?;
    check_opened(&file, true)?;
    Ok(file)
}

/// Opens the entry at `path` itself, whatever it is, for its attributes and security.
fn open_entry(path: &Path) -> io::Result<File> {
    create_file(
        path,
        FILE_READ_ATTRIBUTES | READ_CONTROL,
        SHARE_ALL,
        None,
        OPEN_EXISTING,
        FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT,
    )
}

/// Opens what `path` names (following links) for its attributes.
fn open_following(path: &Path) -> io::Result<File> {
    create_file(
        path,
        FILE_READ_ATTRIBUTES,
        SHARE_ALL,
        None,
        OPEN_EXISTING,
        FILE_FLAG_BACKUP_SEMANTICS,
    )
}

/// Writes some of `bytes`: at the end of the file if `append`, else at the file pointer.
pub fn write(file: &File, bytes: &[u8], append: bool) -> io::Result<usize> {
    if append {
        // Offset 0xFFFFFFFF:0xFFFFFFFF is "the end of the file" (FILE_WRITE_TO_END_OF_FILE).
        file.seek_write(bytes, u64::MAX)
    } else {
        (&*file).write(bytes)
    }
}

/// Takes the open `file`'s exclusive advisory lock if no other handle holds it (whether it
/// was taken), or drops it (`exclusive` false): a lock (`LockFileEx`) on one byte far past
/// any end of file, because a Windows lock is mandatory for the bytes it covers and must
/// never stop a reader or an appender of the file itself. Closing the handle drops it.
pub fn lock_file(file: &File, exclusive: bool) -> io::Result<bool> {
    // SAFETY: a zeroed OVERLAPPED is valid; only its offset fields are set.
    let mut at: OVERLAPPED = unsafe { std::mem::zeroed() };
    at.Anonymous.Anonymous.Offset = 0xFFFF_FFFE;
    at.Anonymous.Anonymous.OffsetHigh = 0xFFFF_FFFF;
    let handle = file.as_raw_handle();
    // SAFETY: a handle this `File` owns and an OVERLAPPED that outlives the (synchronous,
    // never pending: the lock fails at once when taken) call.
    let ok = unsafe {
        if exclusive {
            let flags = LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY;
            LockFileEx(handle, flags, 0, 1, 0, &mut at)
        } else {
            UnlockFileEx(handle, 0, 1, 0, &mut at)
        }
    };
    match check(ok) {
        Ok(()) => Ok(true),
        Err(e) if exclusive && e.raw_os_error() == Some(ERROR_LOCK_VIOLATION as i32) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether another handle holds the exclusive lock of [`lock_file`] on the open `file`: a
/// shared lock of the same byte is tried without waiting and dropped again.
pub fn probe_lock(file: &File) -> io::Result<bool> {
    // SAFETY: a zeroed OVERLAPPED is valid; only its offset fields are set.
    let mut at: OVERLAPPED = unsafe { std::mem::zeroed() };
    at.Anonymous.Anonymous.Offset = 0xFFFF_FFFE;
    at.Anonymous.Anonymous.OffsetHigh = 0xFFFF_FFFF;
    let handle = file.as_raw_handle();
    // SAFETY: a handle this `File` owns and an OVERLAPPED that outlives the synchronous
    // calls (the lock fails at once when taken).
    let ok = unsafe { LockFileEx(handle, LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &mut at) };
    match check(ok) {
        Ok(()) => {
            // SAFETY: as above; the shared lock just taken is dropped.
            check(unsafe { UnlockFileEx(handle, 0, 1, 0, &mut at) })?;
            Ok(false)
        }
        Err(e) if e.raw_os_error() == Some(ERROR_LOCK_VIOLATION as i32) => Ok(true),
        Err(e) => Err(e),
    }
}

/// What the handle of the open `file` says about it.
pub fn info(file: &File) -> io::Result<Info> {
    let info = handle_info(file)?;
    let basic = basic_info(file)?;
    Ok(Info {
        id: id_of(&info),
        len: file_size(&info),
        links: info.nNumberOfLinks as u64,
        mtime_ns: filetime_ns(basic.LastWriteTime),
        ctime_ns: filetime_ns(basic.ChangeTime),
    })
}

/// What `path` (following links) is.
pub fn stat(path: &Path) -> io::Result<FileStat> {
    let file = open_following(path)?;
    let info = handle_info(&file)?;
    let mtime_ms = (filetime_ns(filetime_of(info.ftLastWriteTime)) / 1_000_000) as i64;
    Ok(FileStat {
        id: id_of(&info),
        len: file_size(&info),
        mtime_ms: mtime_ms.max(0),
        is_file: info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY == 0 && is_disk(&file),
    })
}

/// The identity, length, last-write time and change time (`FILE_BASIC_INFO`'s
/// `ChangeTime`, which `SetFileTime` cannot set) of `path` (following links).
pub fn version(path: &Path) -> io::Result<FileVersion> {
    let file = open_following(path)?;
    let info = handle_info(&file)?;
    Ok(FileVersion {
        id: id_of(&info),
        len: file_size(&info),
        mtime_ns: filetime_ns(filetime_of(info.ftLastWriteTime)),
        ctime_ns: filetime_ns(basic_info(&file)?.ChangeTime),
    })
}

/// A directory into which files and subdirectories are written by name. Windows has no
/// creation relative to a directory handle in its documented API, so the name is joined to
/// the directory's path; the directory is held open without delete sharing instead, so
/// that it cannot be renamed away (and something else put at its path) while it is open,
/// and every subdirectory and temp file is opened without following a reparse point.
#[derive(Debug)]
pub struct OutputDir {
    path: PathBuf,
    _held: File,
}

impl OutputDir {
    /// Opens the directory at `dir`, following a link there (the caller named it): the
    /// path written into is the one the link resolves to.
    pub fn open(dir: &Path) -> io::Result<OutputDir> {
        OutputDir::hold(canonicalize(dir)?)
    }

    /// Holds the directory at `path` itself open (not following a reparse point), shared
    /// for reading and writing but not for deletion or renaming.
    fn hold(path: PathBuf) -> io::Result<OutputDir> {
        let held = create_file(
            &path,
            FILE_READ_ATTRIBUTES,
            FILE_SHARE_READ | FILE_SHARE_WRITE,
            None,
            OPEN_EXISTING,
            FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT,
        )?;
        check_opened(&held, true).map_err(|e| {
            if e.raw_os_error() == Some(ERROR_CANT_RESOLVE_FILENAME as i32)
                || e.kind() == io::ErrorKind::NotADirectory
            {
                io::Error::new(
                    io::ErrorKind::NotADirectory,
                    "not a directory (a symlink is not followed)",
                )
            } else {
                e
            }
        })?;
        Ok(OutputDir { path, _held: held })
    }

    /// Creates the directory `name` (owner-only) in this one unless it is there, and holds
    /// it open; anything but a directory itself (a reparse point too) is refused with
    /// [`io::ErrorKind::NotADirectory`].
    pub fn create_dir(&self, name: &str) -> io::Result<OutputDir> {
        let path = self.path.join(name);
        match create_dir(&path) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        OutputDir::hold(path)
    }

    /// Writes `bytes` as `name` in this directory: into the temp file `temp`, created new
    /// without following a reparse point (owner-only when `private`, else with the
    /// directory's inherited access), flushed, then renamed onto `name`; the temp file is
    /// removed when a step fails.
    pub fn write_replacing(
        &self,
        temp: &str,
        name: &str,
        bytes: &[u8],
        private: bool,
    ) -> io::Result<()> {
        let temp = self.path.join(temp);
        let file = if private {
            open(
                &temp,
                Open {
                    write: true,
                    append: false,
                    create: Create::New,
                },
            )
        } else {
            use std::os::windows::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
                .open(&temp)
        };
        let mut file = file?;
        let written = file.write_all(bytes).and_then(|()| file.sync_all());
        drop(file);
        let renamed = written.and_then(|()| std::fs::rename(&temp, self.path.join(name)));
        if renamed.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        renamed
    }
}

/// A directory whose entries are looked up by name (Windows has no lookup relative to a
/// directory handle in its documented API: the name is joined to the path).
#[derive(Debug)]
pub struct DirLookup(PathBuf);

impl DirLookup {
    pub fn open(dir: &Path) -> io::Result<DirLookup> {
        open_dir(dir)?;
        Ok(DirLookup(dir.to_owned()))
    }

    /// [`version`] of `name` in the directory.
    pub fn version(&self, name: &std::ffi::OsStr) -> io::Result<FileVersion> {
        version(&self.0.join(name))
    }

    /// Not relied on: NTFS may update a directory's last-write time late, so a directory
    /// is listed every time.
    pub fn listing_version(&self) -> io::Result<Option<FileVersion>> {
        Ok(None)
    }
}

/// The bytes of a path, as stored in an index (its WTF-8 bytes: UTF-8 for every path that
/// is valid UTF-16).
pub fn path_to_bytes(path: &Path) -> &[u8] {
    path.as_os_str().as_encoded_bytes()
}

/// The path whose [`path_to_bytes`] are `bytes`; bytes that are not UTF-8 (a path with an
/// unpaired surrogate, or a damaged index) give a path with replacement characters, which
/// names no stamped file.
pub fn path_from_bytes(bytes: &[u8]) -> std::borrow::Cow<'_, Path> {
    match String::from_utf8_lossy(bytes) {
        std::borrow::Cow::Borrowed(s) => std::borrow::Cow::Borrowed(Path::new(s)),
        std::borrow::Cow::Owned(s) => std::borrow::Cow::Owned(PathBuf::from(s)),
    }
}

/// What the entry at `path` itself is: its kind (any reparse point is a symlink), identity,
/// owner and the mode its DACL amounts to (see the module documentation).
pub fn lstat(path: &Path) -> io::Result<EntryStat> {
    let meta = std::fs::symlink_metadata(path)?;
    let file = open_entry(path)?;
    let info = handle_info(&file)?;
    // Every reparse point counts as a link to the checks, not only symlinks and junctions:
    // what it stands for is not the entry itself.
    let kind = if info.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT != 0 {
        EntryKind::Symlink
    } else {
        entry_kind(meta.file_type())
    };
    let basic = basic_info(&file)?;
    let (owner, owner_only) = security_of(&file)?;
    let dir = kind == EntryKind::Dir;
    let mut mode = match (dir, owner_only) {
        (true, true) => 0o700,
        (true, false) => 0o777,
        (false, true) => 0o600,
        (false, false) => 0o666,
    };
    if !dir && info.dwFileAttributes & FILE_ATTRIBUTE_READONLY != 0 {
        mode &= !0o222;
    }
    Ok(EntryStat {
        kind,
        id: id_of(&info),
        mode,
        owner,
        links: info.nNumberOfLinks as u64,
        len: meta.len(),
        mtime_ns: filetime_ns(basic.LastWriteTime),
        ctime_ns: filetime_ns(basic.ChangeTime),
    })
}

/// What a directory entry of type `kind` is: a symlink or junction is a symlink.
pub fn entry_kind(kind: std::fs::FileType) -> EntryKind {
    if kind.is_symlink() {
        EntryKind::Symlink
    } else if kind.is_file() {
        EntryKind::File
    } else if kind.is_dir() {
        EntryKind::Dir
    } else {
        EntryKind::Other
    }
}

/// Creates `dir` and its missing parents, each with the owner-only DACL.
pub fn ensure_dir(dir: &Path) -> io::Result<()> {
    match create_dir(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(_) if is_dir_path(dir) => return Ok(()),
        Err(e) => return Err(e),
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        ensure_dir(parent)?;
    }
    match create_dir(dir) {
        Err(_) if is_dir_path(dir) => Ok(()),
        other => other,
    }
}

/// Creates the one directory `dir` with the owner-only DACL.
pub fn create_dir(dir: &Path) -> io::Result<()> {
    let name = wide(dir)?;
    let security = OwnerOnly::new(true)?;
    let sa = security.attributes();
    // SAFETY: `name` is NUL-terminated; `sa` and its descriptor live across the call.
    check(unsafe { CreateDirectoryW(name.as_ptr(), &sa) })
}

/// Puts the owner-only DACL on the entry at `path` when `mode` has no group or other bits
/// (a reparse point there is refused); any other mode cannot be expressed and is refused.
pub fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    if mode & 0o077 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("mode {mode:o} has no Windows DACL equivalent"),
        ));
    }
    let file = create_file(
        path,
        FILE_READ_ATTRIBUTES | READ_CONTROL | WRITE_DAC,
        SHARE_ALL,
        None,
        OPEN_EXISTING,
        FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT,
    )?;
    let info = handle_info(&file)?;
    if info.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT != 0 {
        return Err(reparse_refused());
    }
    let security = OwnerOnly::new(info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY != 0)?;
    set_protected_dacl(&file, security.acl())
}

/// Replaces the DACL of the entry open as `file` (with `WRITE_DAC`) by `acl`, protected from
/// inheritance.
fn set_protected_dacl(file: &File, acl: *const ACL) -> io::Result<()> {
    // SAFETY: a valid handle; `acl` points at a well-formed ACL that lives across the call.
    let rc = unsafe {
        SetSecurityInfo(
            file.as_raw_handle(),
            SE_FILE_OBJECT,
            DACL_SECURITY_INFORMATION | PROTECTED_DACL_SECURITY_INFORMATION,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            acl,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc as i32));
    }
    Ok(())
}

/// The final path of the open `file` as the system spells it, without the `\\?\` prefix
/// (`\\?\UNC\server\share` becomes `\\server\share`).
fn final_path(file: &File) -> io::Result<PathBuf> {
    let mut buf = vec![0u16; 512];
    loop {
        // SAFETY: `buf` has room for `buf.len()` UTF-16 units.
        let n = unsafe {
            GetFinalPathNameByHandleW(
                file.as_raw_handle(),
                buf.as_mut_ptr(),
                buf.len() as u32,
                FILE_NAME_NORMALIZED | VOLUME_NAME_DOS,
            )
        } as usize;
        if n == 0 {
            return Err(last_error());
        }
        if n < buf.len() {
            buf.truncate(n);
            break;
        }
        buf.resize(n + 1, 0);
    }
    Ok(strip_verbatim(PathBuf::from(
        std::ffi::OsString::from_wide(&buf),
    )))
}

/// `path` without a `\\?\` (verbatim) prefix: `\\?\C:\x` is `C:\x`, `\\?\UNC\s\h\x` is
/// `\\s\h\x`. Other spellings are returned as they are.
pub fn strip_verbatim(path: PathBuf) -> PathBuf {
    let Some(Component::Prefix(prefix)) = path.components().next() else {
        return path;
    };
    let rest: PathBuf = path.components().skip(1).collect();
    match prefix.kind() {
        Prefix::VerbatimDisk(letter) => {
            let mut out = PathBuf::from(format!("{}:\\", letter as char));
            out.push(rest.strip_prefix("\\").unwrap_or(&rest));
            out
        }
        Prefix::VerbatimUNC(server, share) => {
            let mut s = std::ffi::OsString::from(r"\\");
            s.push(server);
            s.push(r"\");
            s.push(share);
            s.push(r"\");
            let mut out = PathBuf::from(s);
            out.push(rest.strip_prefix("\\").unwrap_or(&rest));
            out
        }
        _ => path,
    }
}

/// The canonical spelling of `path` (following links): `GetFinalPathNameByHandleW`
/// without the `\\?\` prefix.
pub fn canonicalize(path: &Path) -> io::Result<PathBuf> {
    let file = open_following(path)?;
    final_path(&file)
}

/// Checks that `dir` is a directory (see the module documentation: directory entries are
/// made durable by the filesystem's own log; there is no directory flush to ask for).
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    open_dir(dir).map(drop)
}

/// Flushes the regular file at `path` (`FlushFileBuffers` needs a handle with write access).
pub fn sync_file(path: &Path) -> io::Result<()> {
    open(
        path,
        Open {
            write: true,
            append: false,
            create: Create::Never,
        },
    )?
    .sync_all()
}

/// Access denied or a sharing violation: a rename target that is read-only or open without
/// delete sharing.
pub fn is_rename_refused(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error().map(|c| c as u32),
        Some(ERROR_ACCESS_DENIED | ERROR_SHARING_VIOLATION)
    )
}

/// The Windows error that means what the POSIX errno `errno` means, for the errnos the
/// engine tells apart (the test backend's faults name errnos).
pub fn errno_error(errno: i32) -> io::Error {
    let code = match errno {
        libc::EPERM => ERROR_ACCESS_DENIED,
        libc::ENOENT => ERROR_FILE_NOT_FOUND,
        libc::EIO => ERROR_INVALID_FUNCTION,
        libc::EACCES => ERROR_ACCESS_DENIED,
        libc::ENOSPC => ERROR_DISK_FULL,
        libc::EROFS => ERROR_WRITE_PROTECT,
        libc::EFBIG => ERROR_FILE_TOO_LARGE,
        libc::EEXIST => windows_sys::Win32::Foundation::ERROR_ALREADY_EXISTS,
        libc::ENOTEMPTY => windows_sys::Win32::Foundation::ERROR_DIR_NOT_EMPTY,
        libc::ENOTDIR => windows_sys::Win32::Foundation::ERROR_DIRECTORY,
        libc::EINVAL => windows_sys::Win32::Foundation::ERROR_INVALID_PARAMETER,
        libc::ELOOP => ERROR_CANT_RESOLVE_FILENAME,
        _ => return io::Error::other(format!("errno {errno}")),
    };
    io::Error::from_raw_os_error(code as i32)
}

/// What a Windows error code means for the engine (`io_cause`).
pub fn cause_of_code(code: i32) -> Option<crate::io_cause::IoCause> {
    use crate::io_cause::IoCause;
    Some(match code as u32 {
        ERROR_DISK_FULL | ERROR_HANDLE_DISK_FULL => IoCause::NoSpace,
        windows_sys::Win32::Foundation::ERROR_DISK_QUOTA_EXCEEDED => IoCause::QuotaExceeded,
        ERROR_WRITE_PROTECT => IoCause::ReadOnlyFilesystem,
        ERROR_ACCESS_DENIED => IoCause::PermissionDenied,
        ERROR_SHARING_VIOLATION => IoCause::NotPermitted,
        ERROR_FILE_NOT_FOUND | windows_sys::Win32::Foundation::ERROR_PATH_NOT_FOUND => {
            IoCause::NotFound
        }
        ERROR_FILE_TOO_LARGE => IoCause::FileTooLarge,
        ERROR_CANT_RESOLVE_FILENAME => IoCause::Symlink,
        _ => return None,
    })
}

/// Reads at `offset`, leaving the handle's file pointer where it was.
pub fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    keeping_position(file, |f| f.seek_read(buf, offset))
}

/// Writes every byte of `bytes` at `offset`, leaving the handle's file pointer where it was.
pub fn write_all_at(file: &File, mut bytes: &[u8], mut offset: u64) -> io::Result<()> {
    keeping_position(file, |f| {
        while !bytes.is_empty() {
            match f.seek_write(bytes, offset) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "Short write")),
                Ok(n) => {
                    bytes = &bytes[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    })
}

/// Runs `op`, which moves the file pointer (positional I/O on Windows does), and puts the
/// pointer back.
fn keeping_position<T>(file: &File, op: impl FnOnce(&File) -> io::Result<T>) -> io::Result<T> {
    let mut f = file;
    let at = f.stream_position()?;
    let result = op(file);
    f.seek(SeekFrom::Start(at))?;
    result
}

/// The current user's SID, as bytes.
fn user_sid() -> io::Result<&'static [u8]> {
    static SID: OnceLock<Result<Vec<u8>, i32>> = OnceLock::new();
    SID.get_or_init(|| read_user_sid().map_err(|e| e.raw_os_error().unwrap_or(0)))
        .as_deref()
        .map_err(|&code| io::Error::from_raw_os_error(code))
}

fn read_user_sid() -> io::Result<Vec<u8>> {
    let mut token: HANDLE = std::ptr::null_mut();
    // SAFETY: the pseudo handle of this process; `token` is an out-parameter.
    check(unsafe { OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &mut token) })?;
    // SAFETY: a token handle we own from here on.
    let token = unsafe { OwnedHandle::from_raw_handle(token) };
    let mut len = 0u32;
    // SAFETY: a size query (null buffer, zero length).
    unsafe {
        GetTokenInformation(
            token.as_raw_handle(),
            TokenUser,
            std::ptr::null_mut(),
            0,
            &mut len,
        )
    };
    let mut buf = vec![0u64; (len as usize).div_ceil(8)];
    // SAFETY: `buf` is aligned and has room for `len` bytes.
    check(unsafe {
        GetTokenInformation(
            token.as_raw_handle(),
            TokenUser,
            buf.as_mut_ptr().cast(),
            len,
            &mut len,
        )
    })?;
    // SAFETY: the call filled `buf` with a TOKEN_USER whose SID points into `buf`.
    let sid = unsafe { (*buf.as_ptr().cast::<TOKEN_USER>()).User.Sid };
    Ok(sid_bytes(sid).to_vec())
}

/// The bytes of the valid SID at `sid`.
fn sid_bytes<'a>(sid: PSID) -> &'a [u8] {
    // SAFETY: `sid` points at a valid SID of GetLengthSid bytes, alive for the caller's use.
    unsafe { std::slice::from_raw_parts(sid as *const u8, GetLengthSid(sid) as usize) }
}

/// The relative id of a SID: its last sub-authority.
fn rid(sid: &[u8]) -> u32 {
    match sid.len() {
        n if n >= 12 => u32::from_le_bytes([sid[n - 4], sid[n - 3], sid[n - 2], sid[n - 1]]),
        _ => u32::MAX,
    }
}

/// The user id the engine compares owners with: the current user's relative id.
pub fn effective_uid() -> u32 {
    user_sid().map_or(u32::MAX - 1, rid)
}

/// The owner (as a user id, see the module documentation) and whether the DACL is
/// owner-only, of the entry open as `file` (with `READ_CONTROL`).
fn security_of(file: &File) -> io::Result<(u32, bool)> {
    let user = user_sid()?;
    let mut owner: PSID = std::ptr::null_mut();
    let mut dacl: *mut ACL = std::ptr::null_mut();
    let mut sd: PSECURITY_DESCRIPTOR = std::ptr::null_mut();
    // SAFETY: a valid handle with READ_CONTROL; every out-parameter is live.
    let rc = unsafe {
        GetSecurityInfo(
            file.as_raw_handle(),
            SE_FILE_OBJECT,
            OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION,
            &mut owner,
            std::ptr::null_mut(),
            &mut dacl,
            std::ptr::null_mut(),
            &mut sd,
        )
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc as i32));
    }
    let result = (|| {
        if owner.is_null() {
            return Err(io::Error::other("no owner in the security descriptor"));
        }
        let owner = sid_bytes(owner);
        let owner_id = if owner == user {
            rid(user)
        } else if rid(owner) == rid(user) {
            u32::MAX
        } else {
            rid(owner)
        };
        Ok((owner_id, dacl_is_owner_only(dacl, user)?))
    })();
    // SAFETY: `sd` was allocated by GetSecurityInfo and is freed once; `owner` and `dacl`
    // point into it and are not used after this.
    unsafe { LocalFree(sd) };
    result
}

/// Whether every allow entry of `dacl` names `user`, SYSTEM or Administrators (a NULL DACL
/// allows everyone: not owner-only).
fn dacl_is_owner_only(dacl: *const ACL, user: &[u8]) -> io::Result<bool> {
    if dacl.is_null() {
        return Ok(false);
    }
    // SAFETY: plain data, for which all zeroes is a valid value.
    let mut size: ACL_SIZE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: a plain-data out-parameter of the size passed.
    check(unsafe {
        GetAclInformation(
            dacl,
            (&mut size as *mut ACL_SIZE_INFORMATION).cast(),
            std::mem::size_of::<ACL_SIZE_INFORMATION>() as u32,
            AclSizeInformation,
        )
    })?;
    for i in 0..size.AceCount {
        let mut ace: *mut core::ffi::c_void = std::ptr::null_mut();
        // SAFETY: `i` is below the ACL's entry count; `ace` is an out-parameter.
        check(unsafe { GetAce(dacl, i, &mut ace) })?;
        // SAFETY: every entry starts with an ACE_HEADER.
        let header = unsafe { *ace.cast::<ACE_HEADER>() };
        match header.AceType as u32 {
            ACCESS_DENIED_ACE_TYPE => {}
            ACCESS_ALLOWED_ACE_TYPE => {
                // An allow entry is an ACCESS_ALLOWED_ACE whose SID starts at SidStart.
                let entry = ace.cast::<ACCESS_ALLOWED_ACE>();
                // SAFETY: `entry` points at a whole ACCESS_ALLOWED_ACE (above).
                let sid = unsafe { std::ptr::addr_of_mut!((*entry).SidStart) } as PSID;
                // SAFETY: as above.
                let mask = unsafe { (*entry).Mask };
                let sid = sid_bytes(sid);
                let trusted = sid == user || sid == SID_SYSTEM || sid == SID_ADMINISTRATORS;
                if mask != 0 && !trusted {
                    return Ok(false);
                }
            }
            _ => return Ok(false),
        }
    }
    Ok(true)
}

/// A self-contained owner-only security descriptor: owner = the current user, a protected
/// DACL with one entry granting the current user full access (inherited by children for a
/// directory).
struct OwnerOnly {
    /// The ACL (aligned storage).
    acl: Vec<u64>,
    sid: Vec<u8>,
    sd: Box<SECURITY_DESCRIPTOR>,
}

impl OwnerOnly {
    fn new(dir: bool) -> io::Result<Box<OwnerOnly>> {
        let sid = user_sid()?.to_vec();
        let acl_len =
            std::mem::size_of::<ACL>() + std::mem::size_of::<ACCESS_ALLOWED_ACE>() + sid.len();
        let mut this = Box::new(OwnerOnly {
            acl: vec![0u64; acl_len.div_ceil(8)],
            sid,
            // SAFETY: plain data, initialised below.
            sd: Box::new(unsafe { std::mem::zeroed() }),
        });
        let inherit = if dir {
            OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE
        } else {
            0
        };
        let acl = this.acl.as_mut_ptr().cast::<ACL>();
        let sid = this.sid.as_mut_ptr() as PSID;
        let sd = (&mut *this.sd as *mut SECURITY_DESCRIPTOR).cast();
        // SAFETY: `acl` has room for the header and one entry with the SID; `sd` is a
        // SECURITY_DESCRIPTOR; `sid` is a valid SID; all three live as long as `this`.
        unsafe {
            check(InitializeAcl(
                acl,
                (this.acl.len() * 8) as u32,
                ACL_REVISION,
            ))?;
            check(AddAccessAllowedAceEx(
                acl,
                ACL_REVISION,
                inherit,
                FILE_ALL_ACCESS,
                sid,
            ))?;
            check(InitializeSecurityDescriptor(sd, 1))?;
            check(SetSecurityDescriptorOwner(sd, sid, 0))?;
            check(SetSecurityDescriptorDacl(sd, 1, acl, 0))?;
            check(SetSecurityDescriptorControl(
                sd,
                SE_DACL_PROTECTED,
                SE_DACL_PROTECTED,
            ))?;
        }
        Ok(this)
    }

    fn acl(&self) -> *const ACL {
        self.acl.as_ptr().cast()
    }

    /// Attributes for a create call; valid while `self` lives.
    fn attributes(&self) -> SECURITY_ATTRIBUTES {
        SECURITY_ATTRIBUTES {
            nLength: std::mem::size_of::<SECURITY_ATTRIBUTES>() as u32,
            lpSecurityDescriptor: (&*self.sd as *const SECURITY_DESCRIPTOR).cast_mut().cast(),
            bInheritHandle: 0,
        }
    }
}

/// No ACL other than the DACL exists on Windows: whether the DACL of the entry at `path`
/// (not following a reparse point) is wider than owner-only; an error when it cannot be read.
pub fn has_posix_acl(path: &Path) -> io::Result<bool> {
    let file = open_entry(path)?;
    Ok(!security_of(&file)?.1)
}

/// Whether `path` is a network path: a UNC final path, or on a remote drive.
pub fn is_network_fs(path: &Path) -> io::Result<bool> {
    let real = canonicalize(path)?;
    if real.as_os_str().encode_wide().take(2).eq([b'\\' as u16; 2]) {
        return Ok(true);
    }
    let name = wide(&real)?;
    let mut root = vec![0u16; name.len() + 1];
    // SAFETY: `name` is NUL-terminated; `root` has room for `root.len()` units.
    check(unsafe { GetVolumePathNameW(name.as_ptr(), root.as_mut_ptr(), root.len() as u32) })?;
    // SAFETY: `root` is a NUL-terminated volume path.
    Ok(unsafe { GetDriveTypeW(root.as_ptr()) } == DRIVE_REMOTE)
}

/// The pid `0` when some handle with write access is open on the file at `path` (this
/// process's included: the caller closes its own first), none otherwise.
pub fn writers_elsewhere(path: &Path) -> io::Result<Vec<u32>> {
    match create_file(
        path,
        GENERIC_READ,
        FILE_SHARE_READ | FILE_SHARE_DELETE,
        None,
        OPEN_EXISTING,
        FILE_FLAG_OPEN_REPARSE_POINT,
    ) {
        Ok(file) => {
            check_opened(&file, false)?;
            Ok(Vec::new())
        }
        Err(e) if e.raw_os_error() == Some(ERROR_SHARING_VIOLATION as i32) => Ok(vec![0]),
        Err(e) => Err(e),
    }
}

/// Renames `from` to `to` only if nothing is at `to` (`MoveFileExW` without
/// `MOVEFILE_REPLACE_EXISTING`).
pub fn rename_no_replace(from: &Path, to: &Path) -> io::Result<()> {
    let (f, t) = (wide(from)?, wide(to)?);
    // SAFETY: both are NUL-terminated paths.
    check(unsafe { MoveFileExW(f.as_ptr(), t.as_ptr(), 0) })
}

/// None: Windows has no boot id (a process start id carries an absolute time instead).
pub fn boot_id() -> Option<String> {
    None
}

/// `<pid>:<creation time in 100 ns since 1601>`, when the process can be queried.
pub fn process_start_id(pid: i64) -> Option<String> {
    let pid = u32::try_from(pid).ok()?;
    let process = Process::open(pid)?;
    let zero = FILETIME {
        dwLowDateTime: 0,
        dwHighDateTime: 0,
    };
    let (mut created, mut exited, mut kernel, mut user) = (zero, zero, zero, zero);
    // SAFETY: a valid process handle; four live out-parameters.
    let ok =
        unsafe { GetProcessTimes(process.0, &mut created, &mut exited, &mut kernel, &mut user) };
    (ok != 0).then(|| format!("{pid}:{}", filetime_of(created)))
}

/// A process handle, closed on drop.
struct Process(HANDLE);

impl Process {
    fn open(pid: u32) -> Option<Process> {
        // SAFETY: OpenProcess takes no pointers.
        let handle = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
        (!handle.is_null()).then_some(Process(handle))
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // SAFETY: a handle this value owns.
        unsafe { CloseHandle(self.0) };
    }
}

/// Whether a process with id `pid` is running (one that may not be queried exists).
pub fn process_exists(pid: i32) -> bool {
    let Ok(pid) = u32::try_from(pid) else {
        return false;
    };
    let Some(process) = Process::open(pid) else {
        return io::Error::last_os_error().raw_os_error() == Some(ERROR_ACCESS_DENIED as i32);
    };
    let mut code = 0u32;
    // SAFETY: a valid process handle and a live out-parameter.
    let ok = unsafe { GetExitCodeProcess(process.0, &mut code) };
    ok == 0 || code == STILL_ACTIVE as u32
}

/// None: a Windows console has no device path.
pub fn stdin_tty() -> Option<String> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{
        check_owner_only, check_private_file, write_new_durable, FileStorage, OpenMode,
        SessionStorage,
    };

    /// `Everyone` (`S-1-1-0`), as SID bytes.
    const SID_EVERYONE: [u8; 12] = [1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0];

    /// An ACL (in aligned storage) with one allow entry for each of `sids`, then one deny
    /// entry for each of `denied`.
    fn build_acl(sids: &[&[u8]], denied: &[&[u8]]) -> Vec<u64> {
        let len = std::mem::size_of::<ACL>()
            + sids
                .iter()
                .chain(denied)
                .map(|s| std::mem::size_of::<ACCESS_ALLOWED_ACE>() + s.len())
                .sum::<usize>();
        let mut acl = vec![0u64; len.div_ceil(8)];
        let acl_ptr = acl.as_mut_ptr().cast::<ACL>();
        // SAFETY: `acl` has room for every entry; each SID is a valid SID copied to the heap.
        unsafe {
            check(InitializeAcl(acl_ptr, (acl.len() * 8) as u32, ACL_REVISION)).unwrap();
            for sid in sids {
                let mut sid = sid.to_vec();
                let sid = sid.as_mut_ptr() as PSID;
                check(AddAccessAllowedAceEx(
                    acl_ptr,
                    ACL_REVISION,
                    0,
                    FILE_ALL_ACCESS,
                    sid,
                ))
                .unwrap();
            }
            for sid in denied {
                let mut sid = sid.to_vec();
                let sid = sid.as_mut_ptr() as PSID;
                check(windows_sys::Win32::Security::AddAccessDeniedAceEx(
                    acl_ptr,
                    ACL_REVISION,
                    0,
                    FILE_ALL_ACCESS,
                    sid,
                ))
                .unwrap();
            }
        }
        acl
    }

    /// Puts a protected DACL on the entry at `path` granting full access to each of `sids`.
    fn set_dacl(path: &Path, sids: &[&[u8]]) {
        let acl = build_acl(sids, &[]);
        let file = create_file(
            path,
            READ_CONTROL | WRITE_DAC,
            SHARE_ALL,
            None,
            OPEN_EXISTING,
            FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT,
        )
        .unwrap();
        set_protected_dacl(&file, acl.as_ptr().cast()).unwrap();
    }

    #[test]
    fn owner_only_dacls_grant_only_the_user_system_and_administrators() {
        let user = user_sid().unwrap();
        let owner_only = |allowed: &[&[u8]], denied: &[&[u8]]| {
            let acl = build_acl(allowed, denied);
            dacl_is_owner_only(acl.as_ptr().cast(), user).unwrap()
        };
        assert!(owner_only(&[user], &[]));
        assert!(owner_only(&[user, &SID_SYSTEM, &SID_ADMINISTRATORS], &[]));
        assert!(owner_only(&[], &[]), "an empty DACL grants nobody");
        assert!(
            owner_only(&[user], &[&SID_EVERYONE]),
            "a deny entry only narrows"
        );
        assert!(!owner_only(&[user, &SID_EVERYONE], &[]));
        assert!(!owner_only(&[&SID_EVERYONE], &[]));
        let other_user = [
            1, 5, 0, 0, 0, 0, 0, 5, 21, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0xe9, 3, 0, 0,
        ];
        assert!(!owner_only(&[user, &other_user], &[]));
        assert!(
            !dacl_is_owner_only(std::ptr::null(), user).unwrap(),
            "a NULL DACL grants everyone"
        );
    }

    #[test]
    fn created_entries_are_owner_only_and_owned_by_the_user() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a").join("b");
        FileStorage.ensure_dir(&dir).unwrap();
        let file = dir.join("f");
        write_new_durable(&FileStorage, &file, b"x").unwrap();
        for (path, is_dir, mode) in [
            (tmp.path().join("a"), true, 0o700),
            (dir.clone(), true, 0o700),
            (file.clone(), false, 0o600),
        ] {
            let stat = FileStorage.lstat(&path).unwrap();
            assert_eq!(stat.mode, mode, "{}", path.display());
            assert_eq!(stat.owner, FileStorage.user(), "{}", path.display());
            assert!(!FileStorage.has_acl(&path).unwrap());
            check_owner_only(&FileStorage, &path, is_dir).unwrap();
        }
        assert_ne!(FileStorage.user(), u32::MAX);
    }

    /// A directory `d` in a new temp dir and a file `d/f`, both with a DACL that grants
    /// the user and Everyone.
    fn widened() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("d");
        FileStorage.create_dir(&dir).unwrap();
        let file = dir.join("f");
        write_new_durable(&FileStorage, &file, b"x").unwrap();
        let user = user_sid().unwrap();
        set_dacl(&file, &[user, &SID_EVERYONE]);
        set_dacl(&dir, &[user, &SID_EVERYONE]);
        (tmp, dir, file)
    }

    #[test]
    fn a_wider_dacl_is_refused() {
        let (_tmp, dir, file) = widened();
        assert_eq!(FileStorage.lstat(&file).unwrap().mode, 0o666);
        assert_eq!(FileStorage.lstat(&dir).unwrap().mode, 0o777);
        assert!(FileStorage.has_acl(&file).unwrap());
        let err = check_private_file(&FileStorage, &file).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
        assert!(err.to_string().contains("mode 666"), "{err}");
        assert!(check_owner_only(&FileStorage, &dir, true).is_err());
        // Opening the file for appending does not repair it: it is still refused.
        drop(FileStorage.open_writer(&file, OpenMode::Append).unwrap());
        assert!(check_private_file(&FileStorage, &file).is_err());
        // Only modes without group and other bits have a DACL.
        let err = FileStorage.set_mode(&file, 0o644).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::Unsupported);
    }

    #[test]
    #[cfg_attr(
        windows,
        ignore = "Wine derives a DACL from the Unix mode bits and cannot take an Everyone \
                  entry away again; on Windows run with --include-ignored"
    )]
    fn set_mode_puts_owner_only_back() {
        let (_tmp, dir, file) = widened();
        FileStorage.set_mode(&file, 0o600).unwrap();
        FileStorage.set_mode(&dir, 0o700).unwrap();
        check_private_file(&FileStorage, &file).unwrap();
        check_owner_only(&FileStorage, &dir, true).unwrap();
        let user = user_sid().unwrap();
        set_dacl(&file, &[user, &SID_SYSTEM, &SID_ADMINISTRATORS]);
        check_private_file(&FileStorage, &file).unwrap();
    }

    #[test]
    fn identity_aliases_give_one_canonical_spelling() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("Work Dir");
        FileStorage.create_dir(&dir).unwrap();
        FileStorage.create_dir(&dir.join("sub")).unwrap();
        let canonical = canonicalize(&dir).unwrap();
        let text = canonical.to_str().unwrap().to_owned();
        assert!(!text.contains('?'), "{text}");
        assert!(canonical.is_absolute(), "{text}");
        assert_eq!(text.as_bytes()[1], b':', "a drive letter: {text}");
        assert!(text.as_bytes()[0].is_ascii_uppercase(), "{text}");
        let aliases = [
            text.to_lowercase(),
            text.to_uppercase(),
            format!(r"\\?\{text}"),
            format!(r"{text}\.\sub\.."),
            text.replace('\\', "/"),
            format!("{}{}", text[..1].to_lowercase(), &text[1..]),
        ];
        for alias in &aliases {
            assert_eq!(
                canonicalize(Path::new(alias)).unwrap(),
                canonical,
                "{alias}"
            );
        }
        assert!(!is_network_fs(&canonical).unwrap());
        let identity = crate::store::scope::resolve_identity(&canonical).unwrap();
        assert_eq!(identity.canonical_path, text);
        assert_eq!(identity.platform, "win32");
        for alias in &aliases {
            assert_eq!(
                crate::store::scope::resolve_identity(Path::new(alias)).unwrap(),
                identity,
                "{alias}"
            );
        }
    }

    #[test]
    fn verbatim_prefixes_are_taken_off() {
        let strip = |p: &str| strip_verbatim(PathBuf::from(p));
        assert_eq!(strip(r"\\?\C:\a\b"), Path::new(r"C:\a\b"));
        assert_eq!(strip(r"\\?\C:\"), Path::new(r"C:\"));
        assert_eq!(strip(r"\\?\UNC\srv\share\x"), Path::new(r"\\srv\share\x"));
        assert_eq!(strip(r"C:\a"), Path::new(r"C:\a"));
        assert_eq!(strip(r"\\srv\share\x"), Path::new(r"\\srv\share\x"));
    }

    #[test]
    fn devices_and_directories_are_not_regular_files() {
        let tmp = tempfile::tempdir().unwrap();
        for path in [Path::new("NUL"), tmp.path()] {
            let err = open(path, Open::READ).unwrap_err();
            assert_eq!(
                err.kind(),
                io::ErrorKind::InvalidInput,
                "{}: {err}",
                path.display()
            );
        }
        // A console is refused too (how depends on whether one is attached).
        assert!(open(Path::new("CON"), Open::READ).is_err());
        assert!(open_dir(tmp.path()).is_ok());
        let file = tmp.path().join("f");
        write_new_durable(&FileStorage, &file, b"x").unwrap();
        assert!(open_dir(&file).is_err());
        sync_dir(tmp.path()).unwrap();
        assert!(sync_dir(&file).is_err());
        assert!(sync_dir(&tmp.path().join("missing")).is_err());
    }

    #[test]
    fn identity_is_the_volume_serial_and_file_index() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        write_new_durable(&FileStorage, &a, b"a").unwrap();
        write_new_durable(&FileStorage, &b, b"b").unwrap();
        let id = FileStorage.stat(&a).unwrap().id;
        assert_eq!(FileStorage.lstat(&a).unwrap().id, id);
        assert_eq!(FileStorage.open_read_at(&a).unwrap().id(), id);
        assert_ne!(FileStorage.stat(&b).unwrap().id, id);
        let moved = tmp.path().join("moved");
        FileStorage.rename(&a, &moved).unwrap();
        assert_eq!(
            FileStorage.stat(&moved).unwrap().id,
            id,
            "a rename keeps it"
        );
        FileStorage.rename(&b, &moved).unwrap();
        assert_ne!(
            FileStorage.stat(&moved).unwrap().id,
            id,
            "a replacement is new"
        );
        FileStorage.hard_link(&moved, &a).unwrap();
        assert_eq!(FileStorage.lstat(&a).unwrap().links, 2);
    }

    #[test]
    fn renames_replace_refuse_or_fall_back_as_the_agent_does() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let (a, b) = (dir.join("a.jsonl"), dir.join("b.jsonl"));
        write_new_durable(&FileStorage, &a, b"a").unwrap();
        write_new_durable(&FileStorage, &b, b"b").unwrap();
        let err = FileStorage.rename_no_replace(&a, &b).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        FileStorage
            .rename_no_replace(&a, &dir.join("c.jsonl"))
            .unwrap();
        assert_eq!(FileStorage.read(&b).unwrap(), b"b");

        // A read-only target: the rename is refused, the full rewrite moves it aside first.
        let mut perms = std::fs::metadata(&b).unwrap().permissions();
        perms.set_readonly(true);
        std::fs::set_permissions(&b, perms).unwrap();
        assert_eq!(FileStorage.lstat(&b).unwrap().mode, 0o400);
        if let Err(e) = std::fs::rename(dir.join("c.jsonl"), &b) {
            assert!(is_rename_refused(&e), "{e}");
        }
        crate::manager::atomic_replace(&FileStorage, &b, |w| w.write_all(b"new\n")).unwrap();
        assert_eq!(FileStorage.read(&b).unwrap(), b"new\n");

        // A target open without delete sharing can be neither replaced nor moved aside: the
        // rewrite fails and leaves it as it is.
        let held = create_file(
            &b,
            GENERIC_READ,
            FILE_SHARE_READ | FILE_SHARE_WRITE,
            None,
            OPEN_EXISTING,
            0,
        )
        .unwrap();
        let err =
            crate::manager::atomic_replace(&FileStorage, &b, |w| w.write_all(b"x\n")).unwrap_err();
        assert!(is_rename_refused(&err), "{err}");
        drop(held);
        assert_eq!(FileStorage.read(&b).unwrap(), b"new\n");
        let left = FileStorage.list_files(dir).unwrap();
        assert!(
            left.iter()
                .all(|p| p.extension().is_some_and(|e| e == "jsonl")),
            "no temp or backup left: {left:?}"
        );
    }

    #[test]
    fn writers_are_found_through_sharing_modes() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f");
        write_new_durable(&FileStorage, &file, b"x").unwrap();
        assert_eq!(
            FileStorage.writers_elsewhere(&file).unwrap(),
            Vec::<u32>::new()
        );
        let reader = FileStorage.open_read_at(&file).unwrap();
        assert_eq!(
            FileStorage.writers_elsewhere(&file).unwrap(),
            Vec::<u32>::new()
        );
        let writer = FileStorage.open_writer(&file, OpenMode::Append).unwrap();
        assert_eq!(FileStorage.writers_elsewhere(&file).unwrap(), vec![0]);
        writer.close().unwrap();
        drop(reader);
        assert_eq!(
            FileStorage.writers_elsewhere(&file).unwrap(),
            Vec::<u32>::new()
        );
        assert!(FileStorage
            .writers_elsewhere(&tmp.path().join("missing"))
            .is_err());
    }

    #[test]
    fn appends_land_at_the_end_and_positional_io_keeps_the_file_pointer() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f");
        let mut a = FileStorage.open_writer(&file, OpenMode::Append).unwrap();
        let mut b = FileStorage.open_writer(&file, OpenMode::Append).unwrap();
        a.write_all(b"1\n").unwrap();
        b.write_all(b"2\n").unwrap();
        a.write_all(b"3\n").unwrap();
        assert_eq!(a.position().unwrap(), 6);
        assert_eq!(b.position().unwrap(), 4);
        assert_eq!(a.end().unwrap().last_byte, Some(b'\n'));
        assert_eq!(
            a.position().unwrap(),
            6,
            "reading the end keeps the pointer"
        );
        a.close().unwrap();
        b.close().unwrap();
        assert_eq!(FileStorage.read(&file).unwrap(), b"1\n2\n3\n");

        let other = tmp.path().join("g");
        let mut w = FileStorage
            .open_writer(&other, OpenMode::CreateNew)
            .unwrap();
        w.write_all(b"abcdef").unwrap();
        w.write_at(b"XY", 1).unwrap();
        w.write_all(b"!").unwrap();
        w.close().unwrap();
        assert_eq!(FileStorage.read(&other).unwrap(), b"aXYdef!");
    }

    #[test]
    fn process_ids_tell_runs_apart() {
        let own = std::process::id();
        assert!(process_exists(own as i32));
        assert!(!process_exists(-1));
        let start = process_start_id(own as i64).unwrap();
        assert!(start.starts_with(&format!("{own}:")), "{start}");
        assert_eq!(process_start_id(own as i64), Some(start));
        assert_eq!(boot_id(), None);
        assert_eq!(stdin_tty(), None);
    }
}
