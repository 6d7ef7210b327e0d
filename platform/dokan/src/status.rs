//! NTSTATUS codes: the one mapping from model errors ([`to_ntstatus`]) and the codes the
//! translation answers itself. The values are Windows' own (`ntstatus.h`); on Windows a
//! compile-time check holds each to the `winapi` constant of the same name.

use gjcfs_vfs::{IoCause, Unresolved, VfsError};

/// An NTSTATUS value (negative: an error).
pub type NtStatus = i32;

macro_rules! statuses {
    ($($name:ident = $value:literal,)*) => {
        $(pub const $name: NtStatus = {
            let value: u32 = $value;
            value as i32
        };)*
        /// Every code this module names, with its name (for the check against `winapi`).
        #[cfg(windows)]
        pub(crate) const ALL: &[(&str, NtStatus, NtStatus)] = &[
            $((stringify!($name), $name, winapi::shared::ntstatus::$name),)*
        ];
    };
}

statuses! {
    STATUS_SUCCESS = 0x0000_0000,
    STATUS_BUFFER_OVERFLOW = 0x8000_0005,
    STATUS_INVALID_HANDLE = 0xC000_0008,
    STATUS_INVALID_PARAMETER = 0xC000_000D,
    STATUS_ACCESS_DENIED = 0xC000_0022,
    STATUS_OBJECT_NAME_INVALID = 0xC000_0033,
    STATUS_OBJECT_NAME_NOT_FOUND = 0xC000_0034,
    STATUS_OBJECT_NAME_COLLISION = 0xC000_0035,
    STATUS_OBJECT_PATH_NOT_FOUND = 0xC000_003A,
    STATUS_QUOTA_EXCEEDED = 0xC000_0044,
    STATUS_DISK_FULL = 0xC000_007F,
    STATUS_FILE_INVALID = 0xC000_0098,
    STATUS_MEDIA_WRITE_PROTECTED = 0xC000_00A2,
    STATUS_FILE_IS_A_DIRECTORY = 0xC000_00BA,
    STATUS_NOT_SUPPORTED = 0xC000_00BB,
    STATUS_FILE_CORRUPT_ERROR = 0xC000_0102,
    STATUS_NOT_A_DIRECTORY = 0xC000_0103,
    STATUS_CANNOT_DELETE = 0xC000_0121,
    STATUS_IO_DEVICE_ERROR = 0xC000_0185,
    STATUS_FILE_TOO_LARGE = 0xC000_0904,
}

/// The one mapping from model errors to NTSTATUS codes (no catch-all: a new error or cause
/// does not compile until it has its code).
pub fn to_ntstatus(error: &VfsError) -> NtStatus {
    match error {
        VfsError::NotFound => STATUS_OBJECT_NAME_NOT_FOUND,
        VfsError::NotADirectory => STATUS_NOT_A_DIRECTORY,
        VfsError::IsADirectory => STATUS_FILE_IS_A_DIRECTORY,
        VfsError::ReadOnly => STATUS_MEDIA_WRITE_PROTECTED,
        // Win32 shows both as ERROR_ACCESS_DENIED, as for a read-only file.
        VfsError::NotPermitted | VfsError::AccessDenied => STATUS_ACCESS_DENIED,
        VfsError::InvalidArgument(_) => STATUS_INVALID_PARAMETER,
        VfsError::BadHandle => STATUS_INVALID_HANDLE,
        VfsError::Storage { cause, .. } => match cause {
            IoCause::NoSpace => STATUS_DISK_FULL,
            IoCause::QuotaExceeded => STATUS_QUOTA_EXCEEDED,
            IoCause::ReadOnlyFilesystem => STATUS_MEDIA_WRITE_PROTECTED,
            IoCause::PermissionDenied | IoCause::NotPermitted => STATUS_ACCESS_DENIED,
            IoCause::NotFound => STATUS_OBJECT_NAME_NOT_FOUND,
            IoCause::FileTooLarge => STATUS_FILE_TOO_LARGE,
            IoCause::Symlink | IoCause::NotRegularFile => STATUS_ACCESS_DENIED,
            IoCause::Other => STATUS_IO_DEVICE_ERROR,
        },
        VfsError::Refused(_) => STATUS_ACCESS_DENIED,
        VfsError::Unreadable(_) => STATUS_FILE_CORRUPT_ERROR,
        VfsError::TooLarge(_) => STATUS_FILE_TOO_LARGE,
        VfsError::Stale => STATUS_FILE_INVALID,
    }
}

/// The code of a path that did not resolve: a missing directory on the way, or a file used
/// as one, is Windows' "path not found"; a failure at the last name is the error's own code.
pub fn path_status(unresolved: &Unresolved) -> NtStatus {
    match &unresolved.error {
        VfsError::NotFound | VfsError::NotADirectory if !unresolved.at_last => {
            STATUS_OBJECT_PATH_NOT_FOUND
        }
        error => to_ntstatus(error),
    }
}

#[cfg(windows)]
const _: () = {
    let mut i = 0;
    while i < ALL.len() {
        assert!(
            ALL[i].1 == ALL[i].2,
            "an NTSTATUS value differs from winapi's"
        );
        i += 1;
    }
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_model_error_has_its_status() {
        let cases = [
            (VfsError::NotFound, STATUS_OBJECT_NAME_NOT_FOUND),
            (VfsError::NotADirectory, STATUS_NOT_A_DIRECTORY),
            (VfsError::IsADirectory, STATUS_FILE_IS_A_DIRECTORY),
            (VfsError::ReadOnly, STATUS_MEDIA_WRITE_PROTECTED),
            (VfsError::NotPermitted, STATUS_ACCESS_DENIED),
            (VfsError::AccessDenied, STATUS_ACCESS_DENIED),
            (
                VfsError::InvalidArgument(String::new()),
                STATUS_INVALID_PARAMETER,
            ),
            (VfsError::BadHandle, STATUS_INVALID_HANDLE),
            (VfsError::Refused(String::new()), STATUS_ACCESS_DENIED),
            (
                VfsError::Unreadable(String::new()),
                STATUS_FILE_CORRUPT_ERROR,
            ),
            (VfsError::TooLarge(String::new()), STATUS_FILE_TOO_LARGE),
            (VfsError::Stale, STATUS_FILE_INVALID),
        ];
        let storage = |cause| VfsError::Storage {
            cause,
            reason: String::new(),
        };
        let causes = [
            (IoCause::NoSpace, STATUS_DISK_FULL),
            (IoCause::QuotaExceeded, STATUS_QUOTA_EXCEEDED),
            (IoCause::ReadOnlyFilesystem, STATUS_MEDIA_WRITE_PROTECTED),
            (IoCause::PermissionDenied, STATUS_ACCESS_DENIED),
            (IoCause::NotPermitted, STATUS_ACCESS_DENIED),
            (IoCause::NotFound, STATUS_OBJECT_NAME_NOT_FOUND),
            (IoCause::FileTooLarge, STATUS_FILE_TOO_LARGE),
            (IoCause::Symlink, STATUS_ACCESS_DENIED),
            (IoCause::NotRegularFile, STATUS_ACCESS_DENIED),
            (IoCause::Other, STATUS_IO_DEVICE_ERROR),
        ];
        for (error, status) in cases
            .into_iter()
            .chain(causes.map(|(cause, status)| (storage(cause), status)))
        {
            assert_eq!(to_ntstatus(&error), status, "{error:?}");
            assert!(status < 0, "{error:?} is an error code");
        }
    }

    #[test]
    fn a_missing_directory_on_the_way_is_path_not_found() {
        let at = |error, at_last| path_status(&Unresolved { error, at_last });
        assert_eq!(at(VfsError::NotFound, true), STATUS_OBJECT_NAME_NOT_FOUND);
        assert_eq!(at(VfsError::NotFound, false), STATUS_OBJECT_PATH_NOT_FOUND);
        assert_eq!(
            at(VfsError::NotADirectory, false),
            STATUS_OBJECT_PATH_NOT_FOUND
        );
        assert_eq!(at(VfsError::NotADirectory, true), STATUS_NOT_A_DIRECTORY);
        assert_eq!(at(VfsError::ReadOnly, false), STATUS_MEDIA_WRITE_PROTECTED);
    }

    #[test]
    fn the_codes_are_windows_values() {
        // Spot checks against the documented values of ntstatus.h.
        assert_eq!(STATUS_OBJECT_NAME_NOT_FOUND as u32, 0xC000_0034);
        assert_eq!(STATUS_ACCESS_DENIED as u32, 0xC000_0022);
        assert_eq!(STATUS_BUFFER_OVERFLOW as u32, 0x8000_0005);
        assert_eq!(STATUS_SUCCESS, 0);
    }
}
