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

#[cfg(not(unix))]
fn cause_of_errno(_code: i32) -> Option<IoCause> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_keep_their_meaning() {
        let of = |code| io_cause(&io::Error::from_raw_os_error(code));
        assert_eq!(of(libc::ENOSPC), IoCause::NoSpace);
        assert_eq!(of(libc::EDQUOT), IoCause::QuotaExceeded);
        assert_eq!(of(libc::EROFS), IoCause::ReadOnlyFilesystem);
        assert_eq!(of(libc::EACCES), IoCause::PermissionDenied);
        assert_eq!(of(libc::EPERM), IoCause::NotPermitted);
        assert_eq!(of(libc::EIO), IoCause::Other);
        let kind = |k| io_cause(&io::Error::new(k, "x"));
        assert_eq!(kind(io::ErrorKind::StorageFull), IoCause::NoSpace);
        assert_eq!(kind(io::ErrorKind::WriteZero), IoCause::NoSpace);
        assert_eq!(kind(io::ErrorKind::Other), IoCause::Other);
    }
}
