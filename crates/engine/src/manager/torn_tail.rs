//! A torn last line, cut off before a transcript is opened for writing.
//!
//! A crash while a line was being written (by gjcfs or by the agent) can leave the file
//! ending in part of that line: bytes after the last `\n` that are not a record. Every
//! reader skips them, but the strict checks of a managed open (the original's, which refuse
//! any line that is not JSON) refuse the whole file for them, so the session could never be
//! written or resumed again. [`cut_torn_tail`] cuts such a fragment off — it is the line the
//! crash was writing, which the crash costs — when all of these hold:
//! - every line before it passes the strict checks (a file with other damage is left as it
//!   is, for the open to refuse);
//! - the fragment does not parse as a record (a complete last line without its `\n` is
//!   kept, and ended by the next append); one that does not end in `}` or blanks is not a
//!   record, and one that does is parsed only up to [`FRAGMENT_PARSED_MAX`] bytes (a longer
//!   one is left alone);
//! - no other process has the file open for writing (its writer may be writing that line
//!   now), and the check can be made on this platform: checked before the cut's writer
//!   opens the file and, where the check does not itself open the file (Unix), again with
//!   it open;
//! - the file is still the one read, at the size read, right before it is cut (with the
//!   append lock held, so that no append of gjcfs lands in between).
//!
//! What the check cannot see is not guarded against: a writer in another user's or another
//! PID namespace's process, on another host of a network filesystem, or one starting in the
//! instant between the last check and the cut.
//!
//! The cut is fsynced and reported ([`CutTail`]); nothing else of the file changes. Only a
//! write open cuts: a read never writes.

use std::io;
use std::path::Path;

use crate::format::lines::{last_newline, parse_line, read_exact_at, read_lines};
use crate::read::inspect::strict_session;
use crate::storage::{FileId, OpenMode, SessionStorage};

/// The longest last line without `\n` that is parsed to tell whether it is a record.
const FRAGMENT_PARSED_MAX: usize = 64 << 20;

/// The torn line cut off a transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CutTail {
    /// Where the fragment began: the file's length after the cut.
    pub offset: u64,
    /// The fragment's length in bytes.
    pub len: u64,
}

/// Cuts the torn last line off the file at `path` when the rules of this module allow it;
/// what was cut, or `None` when the file was left as it is. A file that cannot be read,
/// opened for writing or checked (or is gone) is left as it is, for the open to report;
/// only a failed cut is an error, and it says whether bytes were cut.
pub fn cut_torn_tail(storage: &dyn SessionStorage, path: &Path) -> io::Result<Option<CutTail>> {
    cut_torn_tail_within(storage, path, FRAGMENT_PARSED_MAX)
}

/// The torn last line of the file at `path` that [`cut_torn_tail`] would cut, as far as
/// the file itself tells (whether another process writes it is not looked at). Reads only.
pub fn find_torn_tail(storage: &dyn SessionStorage, path: &Path) -> Option<CutTail> {
    let torn = torn_fragment(storage, path, FRAGMENT_PARSED_MAX)?;
    Some(CutTail {
        offset: torn.start,
        len: torn.size - torn.start,
    })
}

/// [`cut_torn_tail`], parsing a last line that could be a record up to `parse_max` bytes.
fn cut_torn_tail_within(
    storage: &dyn SessionStorage,
    path: &Path,
    parse_max: usize,
) -> io::Result<Option<CutTail>> {
    let Some(torn) = torn_fragment(storage, path, parse_max) else {
        return Ok(None);
    };
    let no_other_writer = || storage.writers_elsewhere(path).is_ok_and(|p| p.is_empty());
    if !no_other_writer() {
        return Ok(None);
    }
    // Up to the cut, a failure only means the file is left as it is.
    let Ok(mut writer) = storage.open_writer(path, OpenMode::AppendExisting) else {
        return Ok(None);
    };
    // Again with this writer open, right before the cut: a writer that came meanwhile is
    // seen. (On Windows the check itself opens the file, which this writer would fail.)
    if cfg!(unix) && !no_other_writer() {
        return Ok(None);
    }
    // gjcfs's own appenders are held off from here to the cut (the append lock).
    let _ = writer.lock();
    let same = writer.is_file_at(path).unwrap_or(false)
        && storage.stat(path).is_ok_and(|stat| stat.id == torn.file)
        && writer.end().is_ok_and(|end| end.size == torn.size);
    if !same {
        return Ok(None);
    }
    writer.truncate(torn.start)?;
    let cut = CutTail {
        offset: torn.start,
        len: torn.size - torn.start,
    };
    let undurable = |e: io::Error| {
        let why = format!(
            "cut off the torn last line ({} bytes at byte {}), but the cut may not be durable: {e}",
            cut.len, cut.offset
        );
        io::Error::new(e.kind(), why)
    };
    writer.fsync().map_err(undurable)?;
    writer.close().map_err(undurable)?;
    Ok(Some(cut))
}

/// A file whose last line is torn and whose other lines pass the strict checks.
struct Torn {
    file: FileId,
    size: u64,
    /// Where the torn line starts.
    start: u64,
}

fn torn_fragment(storage: &dyn SessionStorage, path: &Path, parse_max: usize) -> Option<Torn> {
    let file = storage.open_read_at(path).ok()?;
    let size = file.size().ok()?;
    let last = read_exact_at(file.as_ref(), size.checked_sub(1)?, 1).ok()??;
    if last == b"\n" {
        return None;
    }
    // No complete line at all: not even a header to keep.
    let start = last_newline(file.as_ref(), 0, size).ok()?? + 1;
    // A record ends with `}` (then maybe blanks): a fragment ending in anything else is
    // torn without reading it. Another is parsed, up to a bound (an endless last line is
    // never taken into memory here).
    if matches!(last[0], b'}' | b' ' | b'\t' | b'\r') {
        let len = usize::try_from(size - start).ok()?;
        if len > parse_max {
            return None;
        }
        let fragment = read_exact_at(file.as_ref(), start, len).ok()??;
        if !matches!(parse_line(false, &fragment), Some(Err(_))) {
            return None;
        }
    }
    let lines = read_lines(file.as_ref(), 0, start, 1);
    if lines.error.is_some() || strict_session(lines).is_err() {
        return None;
    }
    Some(Torn {
        file: file.id(),
        size,
        start,
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::storage::{Fault, FaultKind, MemoryStorage};

    const HEADER: &str = r#"{"type":"session","version":5,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#;
    const ENTRY: &str = r#"{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hi"}}"#;

    fn stored(bytes: &str) -> (MemoryStorage, PathBuf) {
        let storage = MemoryStorage::new();
        let path = PathBuf::from("/s/t.jsonl");
        storage.ensure_dir(Path::new("/s")).unwrap();
        storage.put_file(&path, bytes.as_bytes());
        (storage, path)
    }

    /// Part of a line, as a crash leaves it.
    const FRAGMENT: &str = r#"{"type":"message","id":"b"#;

    fn whole() -> String {
        format!("{HEADER}\n{ENTRY}\n")
    }

    #[test]
    fn a_fragment_after_good_lines_is_cut_and_made_durable() {
        // Cut after a look at its last byte, or after parsing it (it could have been whole).
        let ending_in_a_brace = r#"{"type":"message","message":{"role":"user"}"#;
        for fragment in [FRAGMENT, ending_in_a_brace, "{\"id\": \r"] {
            let (storage, path) = stored(&format!("{}{fragment}", whole()));
            let cut = cut_torn_tail(&storage, &path).unwrap();
            let offset = whole().len() as u64;
            let len = fragment.len() as u64;
            assert_eq!(cut, Some(CutTail { offset, len }), "{fragment}");
            storage.crash();
            assert_eq!(storage.file(&path).unwrap(), whole().as_bytes());
        }
    }

    #[test]
    fn files_that_end_well_or_are_damaged_elsewhere_are_left_alone() {
        let bad_middle = format!("{HEADER}\nnot json\n{ENTRY}\n{FRAGMENT}");
        let bad_schema = format!("{HEADER}\n{{\"type\":\"nonsense\",\"id\":\"x\"}}\n{FRAGMENT}");
        let cases = [
            String::new(),
            whole(),
            // A complete record without its newline is kept.
            format!("{HEADER}\n{ENTRY}"),
            // Spaces after the last line are a blank line.
            format!("{}   ", whole()),
            // A record and blanks, without the newline.
            format!("{HEADER}\n{ENTRY} \r"),
            // No complete line, not even the header.
            HEADER[..20].to_owned(),
            bad_middle,
            bad_schema,
        ];
        for bytes in cases {
            let (storage, path) = stored(&bytes);
            assert_eq!(cut_torn_tail(&storage, &path).unwrap(), None, "{bytes:?}");
            assert_eq!(storage.file(&path).unwrap(), bytes.as_bytes());
        }
    }

    #[test]
    fn a_last_line_too_long_to_parse_is_left_alone() {
        // Torn, but it ends like a record: only parsing it could tell.
        let fragment = r#"{"a":"xxxx","b":{}"#;
        let bytes = format!("{}{fragment}", whole());
        let (storage, path) = stored(&bytes);
        let cut = cut_torn_tail_within(&storage, &path, fragment.len() - 1).unwrap();
        assert_eq!(cut, None);
        assert_eq!(storage.file(&path).unwrap(), bytes.as_bytes());
        let cut = cut_torn_tail_within(&storage, &path, fragment.len()).unwrap();
        assert_eq!(cut.map(|c| c.len), Some(fragment.len() as u64));
    }

    /// A torn file whose cut meets `op` failing with EIO: what the cut returned, and the
    /// file after it.
    fn cut_failing_at(op: &str) -> (io::Result<Option<CutTail>>, Vec<u8>) {
        let bytes = format!("{}{FRAGMENT}", whole());
        let (storage, path) = stored(&bytes);
        let before = storage.op_count();
        cut_torn_tail(&storage, &path).unwrap();
        let log = storage.op_log();
        let at = log[before as usize..]
            .iter()
            .position(|&o| o == op)
            .unwrap();
        let (storage, path) = stored(&bytes);
        storage.set_fault(Some(Fault {
            at: storage.op_count() + at as u64,
            kind: FaultKind::Errno(libc::EIO),
        }));
        let result = cut_torn_tail(&storage, &path);
        (result, storage.file(&path).unwrap())
    }

    #[test]
    fn a_failure_before_the_cut_leaves_the_file_and_one_after_it_says_what_was_cut() {
        let torn = format!("{}{FRAGMENT}", whole());
        for op in ["open_writer", "stat", "end"] {
            let (result, file) = cut_failing_at(op);
            assert_eq!(result.unwrap(), None, "{op}");
            assert_eq!(file, torn.as_bytes(), "{op}");
        }
        let (result, file) = cut_failing_at("fsync");
        let err = result.unwrap_err().to_string();
        let said = format!(
            "cut off the torn last line ({} bytes at byte {})",
            FRAGMENT.len(),
            whole().len()
        );
        assert!(err.contains(&said), "{err}");
        assert_eq!(file, whole().as_bytes());
    }

    #[test]
    fn a_file_another_process_writes_is_left_alone() {
        let bytes = format!("{}{FRAGMENT}", whole());
        let (storage, path) = stored(&bytes);
        storage.set_foreign_writers(&path, vec![4242]);
        assert_eq!(cut_torn_tail(&storage, &path).unwrap(), None);
        assert_eq!(storage.file(&path).unwrap(), bytes.as_bytes());
    }
}
