//! What an I/O failure means, independent of the platform's error numbers, so that layers
//! above the engine (the mount model) can report the real cause — a full disk, a quota, a
//! read-only filesystem, a refused permission — instead of a generic I/O error.

use std::io;

/// The meaning of an I/O failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoCause {
    /// No space left on the device (ENOSPC).
    NoSpace,
    /// The user's disk quota is exhausted (EDQUOT).
    QuotaExceeded,
    /// The filesystem is mounted read-only (EROFS).
    ReadOnlyFilesystem,
    /// File permissions refuse the access (EACCES).
    PermissionDenied,
    /// The operation is not permitted on that file (EPERM).
    NotPermitted,
    /// The file or a directory on its path does not exist (ENOENT).
    NotFound,
    /// The file would exceed the largest size allowed (EFBIG).
    FileTooLarge,
    /// A symlink where none is allowed (ELOOP from a no-follow open).
    Symlink,
    /// Something that is not a regular file where one is needed (a FIFO, a device).
    NotRegularFile,
    /// Any other failure of the device or the system (EIO and the rest).
    Other,
}

/// Classifies `error`.
pub fn io_cause(error: &io::Error) -> IoCause {
    if let Some(code) = error.raw_os_error() {
        if let Some(cause) = cause_of_errno(code) {
            return cause;
        }
    }
    match error.kind() {
        io::ErrorKind::StorageFull => IoCause::NoSpace,
        io::ErrorKind::QuotaExceeded => IoCause::QuotaExceeded,
        io::ErrorKind::ReadOnlyFilesystem => IoCause::ReadOnlyFilesystem,
        io::ErrorKind::PermissionDenied => IoCause::PermissionDenied,
        io::ErrorKind::NotFound => IoCause::NotFound,
        io::ErrorKind::FileTooLarge => IoCause::FileTooLarge,
        io::ErrorKind::WriteZero => IoCause::NoSpace,
        _ => IoCause::Other,
    }
}

#[cfg(unix)]
fn cause_of_errno(code: i32) -> Option<IoCause> {
    Some(match code {
        libc::ENOSPC => IoCause::NoSpace,
        libc::EDQUOT => IoCause::QuotaExceeded,
        libc::EROFS => IoCause::ReadOnlyFilesystem,
        libc::EACCES => IoCause::PermissionDenied,
        libc::EPERM => IoCause::NotPermitted,
        libc::ENOENT => IoCause::NotFound,
        libc::EFBIG => IoCause::FileTooLarge,
        libc::ELOOP => IoCause::Symlink,
        libc::ENXIO => IoCause::NotRegularFile,
        _ => return None,
    })
}

/// On Windows the raw code is a system error code.
#[cfg(windows)]
fn cause_of_errno(code: i32) -> Option<IoCause> {
    crate::storage::sys::os::cause_of_code(code)
}

#[cfg(not(any(unix, windows)))]
fn cause_of_errno(_code: i32) -> Option<IoCause> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_keep_their_meaning() {
        // The platform's own error for each errno (the errno itself on Unix).
        let of = |code| io_cause(&crate::storage::sys::os::errno_error(code));
        assert_eq!(of(libc::ENOSPC), IoCause::NoSpace);
        #[cfg(unix)]
        assert_eq!(of(libc::EDQUOT), IoCause::QuotaExceeded);
        assert_eq!(of(libc::EROFS), IoCause::ReadOnlyFilesystem);
        assert_eq!(of(libc::EACCES), IoCause::PermissionDenied);
        // Windows has one "access denied" for both.
        #[cfg(unix)]
        assert_eq!(of(libc::EPERM), IoCause::NotPermitted);
        #[cfg(windows)]
        assert_eq!(of(libc::EPERM), IoCause::PermissionDenied);
        assert_eq!(of(libc::ENOENT), IoCause::NotFound);
        assert_eq!(of(libc::EIO), IoCause::Other);
        let kind = |k| io_cause(&io::Error::new(k, "x"));
        assert_eq!(kind(io::ErrorKind::StorageFull), IoCause::NoSpace);
        assert_eq!(kind(io::ErrorKind::WriteZero), IoCause::NoSpace);
        assert_eq!(kind(io::ErrorKind::Other), IoCause::Other);
    }

    #[cfg(windows)]
    #[test]
    fn windows_errors_keep_their_meaning() {
        let of = |code: u32| io_cause(&io::Error::from_raw_os_error(code as i32));
        assert_eq!(of(112), IoCause::NoSpace); // ERROR_DISK_FULL
        assert_eq!(of(1295), IoCause::QuotaExceeded); // ERROR_DISK_QUOTA_EXCEEDED
        assert_eq!(of(19), IoCause::ReadOnlyFilesystem); // ERROR_WRITE_PROTECT
        assert_eq!(of(32), IoCause::NotPermitted); // ERROR_SHARING_VIOLATION
        assert_eq!(of(3), IoCause::NotFound); // ERROR_PATH_NOT_FOUND
        assert_eq!(of(1921), IoCause::Symlink); // a refused reparse point
    }
}
