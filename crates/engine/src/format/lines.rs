//! Reading a byte range of a session file as lines and parsing each line into a record, on
//! several threads (the line rules of a lenient load).
//!
//! Invariants:
//! - The range is cut into chunks at arbitrary offsets. A chunk owns exactly the lines that
//!   *start* inside it and reads each of them to its end, so every line is parsed once and
//!   whole, whatever the cuts. The results are put back in file order, numbered as one pass
//!   from the start of the range numbers them, and are the same for any number of chunks.
//! - A line ends before a `\n`, or at the end of the range (a last line without a newline).
//!   [`parse_line`] applies the per-line rules — one trailing `\r` dropped, a BOM dropped from
//!   the file's first line, blank lines ignored, invalid UTF-8 replaced by U+FFFD as a text
//!   decoder would — and is the one place the sequential readers use too.
//! - Reading never goes past the end of the range. When the file ends first (it shrank while
//!   being read) or a read fails, the lines before that point are kept and every later chunk
//!   is dropped: the result is what one pass reading up to there gives.
//! - Memory holds the records and one read buffer per thread. A record keeps its line's text
//!   (see `format::record`); the kept lines of a chunk share one allocation, so a chunk's
//!   records cost one allocation and their text is copied once.

use std::borrow::Cow;
use std::io;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::format::huge_text::HugeText;
use crate::format::record::{check_line, CheckedLine, LineError, Record};
use crate::format::summary::Summary;
use crate::json::SharedText;
use crate::storage::ReadAt;

/// How many bytes before the end of what was read [`Lines::tail`] keeps.
pub const TAIL: usize = 64;

const BUFFER: usize = 1 << 20;

/// Room kept past a large chunk's text for its last line, which goes on past the chunk.
const HEADROOM: usize = 1 << 20;

/// Ranges are cut into chunks of about this many bytes (a range below it is read on the
/// calling thread alone)...
const CHUNK: u64 = 4 << 20;

/// ... and into at most this many chunks per thread.
const CHUNKS_PER_THREAD: u64 = 16;

/// A non-blank line and what it parsed to.
#[derive(Debug)]
pub struct ParsedLine {
    /// 1-based line number in the file.
    pub number: usize,
    /// The record the line holds, or why it holds none.
    pub record: Result<Record, LineError>,
    /// The record's summary, taken on the thread that parsed it ([`read_lines`] takes one
    /// for every record).
    pub summary: Option<Summary>,
}

/// The non-blank lines of a range, in file order, kept as the chunks that read them: taken
/// apart one by one ([`IntoIterator`]), each chunk's list is let go once its lines are
/// taken, so the lines are never held twice over while their records move elsewhere.
#[derive(Debug, Default)]
pub struct ParsedLines {
    chunks: Vec<Vec<ParsedLine>>,
    len: usize,
}

impl ParsedLines {
    /// The number of lines.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there is no line.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The lines, in file order.
    pub fn iter(&self) -> impl Iterator<Item = &ParsedLine> {
        self.chunks.iter().flatten()
    }

    fn push_chunk(&mut self, lines: Vec<ParsedLine>) {
        self.len += lines.len();
        if !lines.is_empty() {
            self.chunks.push(lines);
        }
    }
}

impl IntoIterator for ParsedLines {
    type Item = ParsedLine;
    type IntoIter = std::iter::Flatten<std::vec::IntoIter<Vec<ParsedLine>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.chunks.into_iter().flatten()
    }
}

/// The lines of a range.
#[derive(Debug)]
pub struct Lines {
    /// The non-blank lines, in file order.
    pub parsed: ParsedLines,
    /// The number of lines read, blank ones included.
    pub count: usize,
    /// The number of `\n` bytes read.
    pub newlines: usize,
    /// Where reading stopped: the end of the range, or where the file ended or a read failed.
    pub end: u64,
    /// The last bytes read before `end` (at most [`TAIL`]).
    pub tail: Vec<u8>,
    /// The file offset of the first byte of a line that is not valid UTF-8.
    pub invalid_utf8: Option<u64>,
    /// The read error that stopped reading.
    pub error: Option<io::Error>,
}

/// One line's bytes without its `\n`: `None` for a blank line, else the record or why the
/// line is not one. `first_in_file` says whether the line starts at offset 0 (a BOM there is
/// dropped).
pub fn parse_line(first_in_file: bool, bytes: &[u8]) -> Option<Result<Record, LineError>> {
    let (text, _) = line_text(first_in_file, bytes)?;
    Some(Record::parse_line(&text))
}

/// The text of one line's bytes without its `\n` (`None` for a blank line), and the offset
/// in `bytes` of the first byte that is not valid UTF-8.
fn line_text(first_in_file: bool, bytes: &[u8]) -> Option<(Cow<'_, str>, Option<usize>)> {
    let line = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    let (line, skipped) = match line.strip_prefix("\u{FEFF}".as_bytes()) {
        Some(rest) if first_in_file => (rest, 3),
        _ => (line, 0),
    };
    if line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r')) {
        return None;
    }
    // Valid UTF-8 (the normal case) is checked by a vector validator and borrowed; only a
    // line with invalid bytes goes through the lossy decoder.
    Some(match simdutf8::compat::from_utf8(line) {
        Ok(text) => (Cow::Borrowed(text), None),
        Err(e) => (
            String::from_utf8_lossy(line),
            Some(skipped + e.valid_up_to()),
        ),
    })
}

/// The texts of the lines of a chunk that are kept as records, one after another: the
/// records of a chunk share one allocation ([`SharedText`]) instead of one each.
struct ChunkText {
    text: HugeText,
    /// The lines checked so far.
    lines: Vec<CheckedInChunk>,
}

/// A line's number in the chunk, and what checking found with the range of the chunk's
/// text it is kept at.
type CheckedInChunk = (usize, Result<(CheckedLine, Range<usize>), LineError>);

impl ChunkText {
    /// Room for the lines starting in `bytes` bytes of the file: the last of them may go on
    /// past that ([`HEADROOM`]).
    fn with_capacity(bytes: usize) -> Self {
        ChunkText {
            text: HugeText::with_capacity(bytes, if bytes > HEADROOM { HEADROOM } else { 0 }),
            lines: Vec::new(),
        }
    }

    /// Checks the line numbered `number`, keeping its text when it is a record to keep.
    fn check(&mut self, number: usize, line: &str) {
        let checked = check_line(line).map(|checked| {
            let start = self.text.len();
            if let CheckedLine::Text(_) = checked {
                self.text.push_str(line);
            }
            (checked, start..self.text.len())
        });
        self.lines.push((number, checked));
    }

    /// The records, sharing the text; each with its summary.
    fn into_parsed(self) -> Vec<ParsedLine> {
        let block = SharedText::new(self.text);
        self.lines
            .into_iter()
            .map(|(number, checked)| {
                let mut record =
                    checked.map(|(checked, range)| Record::from_checked(&block, range, checked));
                let summary = record.as_ref().ok().map(Summary::of);
                if let Ok(record) = &mut record {
                    record.forget_short_places();
                }
                ParsedLine {
                    number,
                    summary,
                    record,
                }
            })
            .collect()
    }
}

/// The lines of `file[start..end]`; `start` must be the start of a line, numbered
/// `first_number`. Large ranges are read on up to as many threads as the machine has.
pub fn read_lines<R: ReadAt + ?Sized>(
    file: &R,
    start: u64,
    end: u64,
    first_number: usize,
) -> Lines {
    let most = threads() as u64 * CHUNKS_PER_THREAD;
    let chunks = end.saturating_sub(start).div_ceil(CHUNK).clamp(1, most);
    read_lines_in(file, start, end, first_number, chunks as usize)
}

/// [`read_lines`] cut into exactly `chunks` chunks (at least one). The chunks are handed out
/// one at a time to up to as many threads as the machine has, so a thread that runs slower
/// (a fresh allocator arena, a core shared with another process) holds up the end by one
/// chunk at most.
pub fn read_lines_in<R: ReadAt + ?Sized>(
    file: &R,
    start: u64,
    end: u64,
    first_number: usize,
    chunks: usize,
) -> Lines {
    let end = end.max(start);
    let chunks = chunks.max(1) as u64;
    let cut = |k: u64| start + ((end - start) as u128 * k as u128 / chunks as u128) as u64;
    let next = AtomicU64::new(0);
    // Takes chunks until none is left; each comes back with its number.
    let work = || {
        let mut buf = Vec::new();
        let mut done = Vec::new();
        loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            if k >= chunks {
                return done;
            }
            done.push((
                k,
                read_chunk(file, start, cut(k), cut(k + 1), end, &mut buf),
            ));
        }
    };
    let helpers = (threads() as u64).min(chunks) - 1;
    let mut results: Vec<(u64, Chunk)> = std::thread::scope(|scope| {
        let spawned: Vec<_> = (0..helpers)
            .map(|_| {
                std::thread::Builder::new()
                    .name("gjcfs-lines".into())
                    .spawn_scoped(scope, work)
            })
            .collect();
        // Chunks a thread that could not be started would have taken are taken here.
        let mut results = work();
        for handle in spawned.into_iter().flatten() {
            results.extend(
                handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            );
        }
        results
    });
    results.sort_unstable_by_key(|&(k, _)| k);
    merge(
        results.into_iter().map(|(_, chunk)| chunk).collect(),
        start,
        end,
        first_number,
    )
}

/// How many threads large ranges are read on.
fn threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// What one chunk read. Line numbers in `parsed` count from 0 within the chunk.
#[derive(Debug, Default)]
struct Chunk {
    parsed: Vec<ParsedLine>,
    count: usize,
    newlines: usize,
    /// Where the chunk's lines end (the start of the next chunk's first line, or where
    /// reading stopped).
    stop: u64,
    tail: Vec<u8>,
    invalid_utf8: Option<u64>,
    error: Option<io::Error>,
    /// The file ended before the range did.
    short: bool,
}

/// A read buffer over `file[..end]`: `buf[..len]` holds the bytes at `base..base + len`.
struct Window<'f, R: ?Sized> {
    file: &'f R,
    buf: &'f mut Vec<u8>,
    base: u64,
    len: usize,
    end: u64,
}

enum Fill {
    More,
    /// The range ends here.
    End,
    /// The file ends here, before the range does.
    Eof,
}

impl<R: ReadAt + ?Sized> Window<'_, R> {
    fn filled_to(&self) -> u64 {
        self.base + self.len as u64
    }

    fn bytes(&self, from: u64, to: u64) -> &[u8] {
        &self.buf[(from - self.base) as usize..(to - self.base) as usize]
    }

    /// Reads more bytes after the window, first dropping the bytes before `keep`.
    fn fill(&mut self, keep: u64) -> io::Result<Fill> {
        if self.filled_to() >= self.end {
            return Ok(Fill::End);
        }
        let drop = (keep.clamp(self.base, self.filled_to()) - self.base) as usize;
        self.buf.copy_within(drop..self.len, 0);
        self.base += drop as u64;
        self.len -= drop;
        if self.len == self.buf.len() {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        let room = (self.buf.len() - self.len).min((self.end - self.filled_to()) as usize);
        let at = self.filled_to();
        let n = self
            .file
            .read_at(&mut self.buf[self.len..self.len + room], at)?;
        self.len += n;
        Ok(if n == 0 { Fill::Eof } else { Fill::More })
    }

    /// The offset of the next `\n` at or after `from`, reading as needed and dropping the
    /// bytes before `keep` (all the bytes searched, at most); `Err` says why there is none.
    fn find_newline(&mut self, from: u64, keep: u64) -> Result<u64, io::Result<Fill>> {
        let mut at = from;
        loop {
            if at < self.filled_to() {
                let start = (at - self.base) as usize;
                if let Some(i) = memchr::memchr(b'\n', &self.buf[start..self.len]) {
                    return Ok(at + i as u64);
                }
                at = self.filled_to();
            }
            match self.fill(keep) {
                Ok(Fill::More) => {}
                other => return Err(other),
            }
        }
    }
}

/// Reads the lines starting in `from..to`; `range_start` is where the whole range starts (a
/// line start) and `end` where it ends. `buf` is the read buffer (kept between chunks).
fn read_chunk<R: ReadAt + ?Sized>(
    file: &R,
    range_start: u64,
    from: u64,
    to: u64,
    end: u64,
    buf: &mut Vec<u8>,
) -> Chunk {
    let base = from.saturating_sub(1).max(range_start);
    // Nothing past `end` is ever read, so a short range needs no full-size buffer.
    let size = end.saturating_sub(base).clamp(1, BUFFER as u64) as usize;
    if buf.len() < size {
        buf.resize(size, 0);
    }
    let mut window = Window {
        file,
        buf,
        base,
        len: 0,
        end,
    };
    let mut chunk = Chunk::default();
    // A line starts at `from` only if the byte before it is a newline.
    let mut line_start = from;
    if from > range_start {
        match window.find_newline(from - 1, u64::MAX) {
            Ok(newline) => line_start = newline + 1,
            Err(stopped) => {
                chunk.stop = window.filled_to();
                match stopped {
                    Ok(Fill::Eof) => chunk.short = true,
                    Ok(_) => {}
                    Err(e) => {
                        chunk.stop = from;
                        chunk.error = Some(e);
                    }
                }
                return chunk;
            }
        }
    }
    let region_start = line_start;
    let mut texts = ChunkText::with_capacity(to.saturating_sub(line_start) as usize);
    while line_start < to && line_start < end {
        let keep = line_start.saturating_sub(TAIL as u64);
        let (line_end, terminated) = match window.find_newline(line_start, keep) {
            Ok(newline) => (newline, true),
            Err(Ok(Fill::Eof)) => {
                chunk.short = true;
                if window.filled_to() == line_start {
                    break;
                }
                (window.filled_to(), false)
            }
            Err(Ok(_)) => (window.filled_to(), false),
            Err(Err(e)) => {
                chunk.error = Some(e);
                break;
            }
        };
        if let Some((line, invalid)) =
            line_text(line_start == 0, window.bytes(line_start, line_end))
        {
            texts.check(chunk.count, &line);
            if let (None, Some(at)) = (chunk.invalid_utf8, invalid) {
                chunk.invalid_utf8 = Some(line_start + at as u64);
            }
        }
        chunk.count += 1;
        line_start = line_end + u64::from(terminated);
        chunk.newlines += usize::from(terminated);
        if chunk.short {
            break;
        }
    }
    chunk.parsed = texts.into_parsed();
    chunk.stop = line_start;
    if line_start > region_start {
        let from = line_start
            .saturating_sub(TAIL as u64)
            .max(region_start)
            .max(window.base);
        chunk.tail = window.bytes(from, line_start).to_vec();
    }
    chunk
}

/// Puts the chunks back together in file order, up to the first that stopped early.
fn merge(chunks: Vec<Chunk>, start: u64, end: u64, first_number: usize) -> Lines {
    let mut lines = Lines {
        parsed: ParsedLines::default(),
        count: 0,
        newlines: 0,
        end: end.max(start),
        tail: Vec::new(),
        invalid_utf8: None,
        error: None,
    };
    for mut chunk in chunks {
        let number = first_number + lines.count;
        for line in &mut chunk.parsed {
            line.number += number;
        }
        lines.parsed.push_chunk(std::mem::take(&mut chunk.parsed));
        lines.count += chunk.count;
        lines.newlines += chunk.newlines;
        lines.invalid_utf8 = lines.invalid_utf8.or(chunk.invalid_utf8);
        lines.tail.extend_from_slice(&chunk.tail);
        let excess = lines.tail.len().saturating_sub(TAIL);
        lines.tail.drain(..excess);
        if chunk.error.is_some() || chunk.short {
            lines.end = chunk.stop;
            lines.error = chunk.error;
            break;
        }
    }
    lines
}

/// The bytes of `file` at `offset`, or `None` if it ends first.
pub fn read_exact_at(file: &dyn ReadAt, offset: u64, len: usize) -> io::Result<Option<Vec<u8>>> {
    let mut buf = vec![0; len];
    let mut done = 0;
    while done < len {
        match file.read_at(&mut buf[done..], offset + done as u64)? {
            0 => return Ok(None),
            n => done += n,
        }
    }
    Ok(Some(buf))
}

/// The offset of the last `\n` in `file[from..to]`.
pub fn last_newline(file: &dyn ReadAt, from: u64, to: u64) -> io::Result<Option<u64>> {
    const BLOCK: u64 = 1 << 16;
    let mut end = to;
    while end > from {
        let start = end.saturating_sub(BLOCK).max(from);
        let Some(block) = read_exact_at(file, start, (end - start) as usize)? else {
            return Ok(None);
        };
        if let Some(i) = memchr::memrchr(b'\n', &block) {
            return Ok(Some(start + i as u64));
        }
        end = start;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbers(lines: &Lines) -> Vec<usize> {
        lines.parsed.iter().map(|l| l.number).collect()
    }

    #[test]
    fn every_cut_gives_the_same_lines() {
        let text = b"\xEF\xBB\xBF{\"a\":1}\r\n\n  \n{\"b\":\xFF}\nnot json\n{\"c\":[1,2]}";
        let one = read_lines_in(&text[..], 0, text.len() as u64, 1, 1);
        assert_eq!(numbers(&one), [1, 4, 5, 6]);
        assert_eq!(one.count, 6);
        assert_eq!(one.newlines, 5);
        let invalid = text.iter().position(|&b| b == 0xFF).unwrap() as u64;
        assert_eq!(one.invalid_utf8, Some(invalid));
        assert_eq!(one.tail, &text[text.len() - TAIL.min(text.len())..]);
        assert!(one.parsed.iter().next().unwrap().record.is_ok());
        assert!(one.parsed.iter().nth(2).unwrap().record.is_err());
        for chunks in 2..=text.len() + 2 {
            let many = read_lines_in(&text[..], 0, text.len() as u64, 1, chunks);
            assert_eq!(numbers(&many), numbers(&one), "{chunks} chunks");
            assert_eq!(many.count, one.count);
            assert_eq!(many.newlines, one.newlines);
            assert_eq!(many.invalid_utf8, one.invalid_utf8);
            assert_eq!(many.tail, one.tail);
            assert_eq!(many.end, one.end);
            for (a, b) in many.parsed.iter().zip(one.parsed.iter()) {
                assert_eq!(a.record, b.record);
            }
        }
    }

    #[test]
    fn a_range_inside_the_file_is_numbered_from_its_first_line() {
        let text = b"{\"a\":1}\n\xEF\xBB\xBF{\"b\":2}\n{\"c\":3}\n";
        let lines = read_lines_in(&text[..], 8, text.len() as u64, 2, 3);
        assert_eq!(numbers(&lines), [2, 3]);
        // A BOM on a line other than the file's first is not dropped.
        assert!(lines.parsed.iter().next().unwrap().record.is_err());
        assert_eq!(lines.newlines, 2);
    }

    #[test]
    fn lines_longer_than_the_buffer_are_read_whole() {
        let long = format!("{{\"a\":\"{}\"}}", "x".repeat(3 * BUFFER));
        let text = format!("{long}\n{long}\n{{}}\n");
        let lines = read_lines_in(text.as_bytes(), 0, text.len() as u64, 1, 2);
        assert_eq!(numbers(&lines), [1, 2, 3]);
        assert!(lines.parsed.iter().all(|l| l.record.is_ok()));
    }

    /// A file that shrinks to `len` bytes after `ok_reads` reads, or fails then.
    struct Flaky {
        bytes: Vec<u8>,
        len: usize,
        fail: bool,
        reads: std::sync::atomic::AtomicUsize,
        ok_reads: usize,
    }

    impl ReadAt for Flaky {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
            let n = self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if n < self.ok_reads {
                return self.bytes[..].read_at(buf, offset);
            }
            if self.fail {
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
            self.bytes[..self.len].read_at(buf, offset)
        }
    }

    #[test]
    fn a_file_that_ends_early_or_fails_keeps_the_lines_before() {
        let text = b"{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n".to_vec();
        let shrunk = Flaky {
            bytes: text.clone(),
            len: 12,
            fail: false,
            reads: 0.into(),
            ok_reads: 0,
        };
        let lines = read_lines_in(&shrunk, 0, text.len() as u64, 1, 1);
        assert_eq!(numbers(&lines), [1, 2]);
        assert!(lines.parsed.iter().nth(1).unwrap().record.is_err());
        assert_eq!(lines.end, 12);
        assert!(lines.error.is_none());
        let failing = Flaky {
            bytes: text.clone(),
            len: 0,
            fail: true,
            reads: 0.into(),
            ok_reads: 0,
        };
        let lines = read_lines_in(&failing, 0, text.len() as u64, 1, 1);
        assert!(lines.parsed.is_empty());
        assert_eq!(lines.error.unwrap().raw_os_error(), Some(libc::EIO));
    }
}
