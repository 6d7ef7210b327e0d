//! Swapping two names atomically, as another user racing a command would.

/// Exchanges the entries at `a` and `b` atomically (`renameat2(RENAME_EXCHANGE)`), whatever
/// each is; whether it did.
pub fn exchange(a: &std::ffi::CStr, b: &std::ffi::CStr) -> bool {
    // SAFETY: both paths are NUL-terminated and outlive the call.
    unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        ) == 0
    }
}
