//! Whole-file reads and writes through a `Vfs`, as a kernel would issue them: open, read or
//! write, release.

use gjcfs::vfs::{OpenMode, Vfs, VfsError};

/// Reads node `ino` whole (up to 1 MiB).
pub fn read_file(v: &Vfs, ino: u64) -> Result<Vec<u8>, VfsError> {
    let read = OpenMode {
        read: true,
        ..Default::default()
    };
    let o = v.open(ino, read)?;
    let bytes = v.read(o.fh, 0, 1 << 20);
    v.release(o.fh)?;
    bytes
}

/// Writes `pieces` one after another to `ino` opened for writing (truncated): the first
/// failure, the file released either way.
pub fn write_file(v: &Vfs, ino: u64, pieces: &[&[u8]]) -> Result<(), VfsError> {
    let mode = OpenMode {
        write: true,
        truncate: true,
        ..Default::default()
    };
    let o = v.open(ino, mode)?;
    let mut offset = 0;
    for piece in pieces {
        if let Err(e) = v.write(o.fh, offset, piece) {
            v.release(o.fh).ok();
            return Err(e);
        }
        offset += piece.len() as u64;
    }
    v.release(o.fh)
}
