//! Every platform but Linux, macOS and Windows (the other Unixes): the checks Linux makes
//! through its own interfaces (POSIX ACL attributes, `statfs` filesystem magic, `/proc`) are
//! not implemented here. Each fails closed — an error, never "none found" — so a managed
//! scope is not prepared or trusted, and a full rewrite is not made, without the check.

use std::io;
use std::path::Path;

fn unsupported(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("{what} is not supported on this platform"),
    )
}

/// Not implemented: refuses.
pub fn has_posix_acl(_path: &Path) -> io::Result<bool> {
    Err(unsupported("checking a file for an ACL"))
}

/// Not implemented: refuses.
pub fn is_network_fs(_path: &Path) -> io::Result<bool> {
    Err(unsupported("telling a network filesystem from a local one"))
}

/// Not implemented: refuses (a directory is then listed every time).
pub fn dir_times_tell_entries(_path: &Path) -> io::Result<bool> {
    Err(unsupported(
        "telling whether a directory's time tells its entries' changes",
    ))
}

/// Not implemented: refuses.
pub fn writers_elsewhere(_path: &Path) -> io::Result<Vec<u32>> {
    Err(unsupported("finding the other writers of a file"))
}

/// Not implemented: refuses (the caller falls back to what every platform has).
pub fn rename_no_replace(_from: &Path, _to: &Path) -> io::Result<()> {
    Err(unsupported("a no-replace rename"))
}

/// Not known here.
pub fn boot_id() -> Option<String> {
    None
}

/// Not known here.
pub fn process_start_id(_pid: i64) -> Option<String> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_check_fails_closed() {
        let path = Path::new("/");
        for err in [
            has_posix_acl(path).unwrap_err(),
            is_network_fs(path).unwrap_err(),
            writers_elsewhere(path).unwrap_err(),
            rename_no_replace(path, path).unwrap_err(),
        ] {
            assert_eq!(err.kind(), io::ErrorKind::Unsupported);
            assert!(err.to_string().ends_with("not supported on this platform"));
        }
    }
}
