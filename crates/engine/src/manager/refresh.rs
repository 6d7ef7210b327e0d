//! Picking up lines appended to the session file from outside (another process appending,
//! as the agent does), without reading the whole file again.
//!
//! Invariants:
//! - The manager knows which bytes of which file memory reflects: a [`ReadMark`] set by the
//!   load (the bytes read), moved by each of its own appends (so they are never read back),
//!   set afresh by each full rewrite, and dropped when a write fails or the manager switches
//!   session. Before the mark is used, and when the writer closes, the writer's offset
//!   after its last write shows whether the appends landed right at the mark; if another
//!   process appended before one of them, the mark is dropped too.
//! - [`SessionManager::refresh_from_file`] reads only the bytes after the mark, and only
//!   complete lines: a last line without its newline yet is left for a later refresh. The
//!   lines go through the load's own line rules and patch replay ([`resume_lines`]), the
//!   sanitizer and, for a session opened strictly, the strict checks; memory then holds what
//!   a load of the file gives — records, index, labels, header, and the leaf on the last
//!   entry (a leaf moved in memory goes back there, as on a reload).
//! - Nothing changes unless the file is the same file and still holds the bytes memory
//!   reflects (same identity, not shorter, the same last bytes before the mark); otherwise
//!   the answer is [`Refresh::NeedsReload`] and memory is left alone.
//! - The sanitizer's patches for the new lines are applied in memory and owed, as on open:
//!   the next write of the manager writes them first. A refresh never writes.

use std::io;

use super::{is_assistant, SessionError, SessionManager, SessionResult, State};
use crate::format::lines::{last_newline, read_exact_at, read_lines};
use crate::format::record::Record;
use crate::read::inspect::schema_violation;
use crate::read::load::{LoadError, ReadMark};
use crate::read::replay::{resume_lines, BaseEdit, Resumed, SkippedLine};
use crate::storage::ReadFile;

/// What [`SessionManager::refresh_from_file`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refresh {
    /// Memory reflects every complete line of the file (a last line still being written is
    /// not read yet). Nothing changed.
    Unchanged,
    /// Complete lines were appended to the file, and memory now holds them as a load of the
    /// file would: `records` new records (patch lines change existing records and add
    /// none), the lines that were skipped, with their line numbers in the file, and the
    /// indices of records already held whose message an entry patch replaced, ascending.
    Appended {
        /// How many records were added (patch lines add none).
        records: usize,
        /// The appended lines that were skipped, with their line numbers in the file.
        skipped: Vec<SkippedLine>,
        /// The indices of records already held whose message an entry patch replaced, ascending.
        edited: Vec<usize>,
    },
    /// The file is no longer the bytes memory reflects plus appended lines; memory is left
    /// as it was, and only opening the file again shows it.
    NeedsReload(ReloadReason),
}

/// Why a refresh cannot apply what is in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReloadReason {
    /// There is no file at the path any more.
    Missing,
    /// Another file is at the path (an atomic rewrite renamed it there).
    Replaced,
    /// The file is shorter than what memory reflects.
    Truncated,
    /// The last bytes memory reflects are not in the file any more.
    Changed,
    /// Memory holds migrations of an older format not yet written, which appended lines
    /// cannot be read on top of.
    Migrated,
    /// The last line memory read had no newline and was continued.
    TornLineContinued,
    /// A write of this manager failed, or landed after bytes another process had appended
    /// in the meantime, so it does not know which bytes memory reflects.
    Untracked,
    /// The session was opened strictly and the appended lines fail the strict checks; the
    /// reopen reports why.
    Malformed(String),
}

impl SessionManager {
    /// Brings memory up to date with complete lines appended to the session file since it
    /// was loaded or last written by this manager, reading only those bytes.
    ///
    /// - The file must be the one memory reflects, and still hold its bytes: same identity
    ///   (device and inode), not shorter, the same last bytes before what was read. Else the
    ///   answer is [`Refresh::NeedsReload`] and memory is left alone; so it is too when
    ///   memory holds migrations not yet written, or a write of this manager failed.
    /// - Only complete lines are read; a last line without its newline yet is left for a
    ///   later refresh. This manager's own appends are never read back.
    /// - The lines go through the load's line rules and patch replay, the load-time
    ///   sanitizer (whose patches are owed to the next write, as on open) and, for a session opened
    ///   strictly ([`SessionManager::set_session_file`], [`SessionManager::open_managed`]),
    ///   the strict checks. Memory then holds what reopening the file gives: records, index,
    ///   labels, header, and the leaf on the last entry — a leaf moved in memory goes back
    ///   there, as on a reopen. Without new lines the leaf stays where it is.
    pub fn refresh_from_file(&self) -> SessionResult<Refresh> {
        self.state.lock().refresh()
    }
}

/// Why the file no longer holds the bytes `mark` says memory reflects: another file, shorter,
/// or other bytes just before the mark; none when it still holds them.
fn changed_before_mark(
    file: &dyn ReadFile,
    mark: &ReadMark,
    size: u64,
) -> io::Result<Option<ReloadReason>> {
    if file.id() != mark.id {
        return Ok(Some(ReloadReason::Replaced));
    }
    if size < mark.end {
        return Ok(Some(ReloadReason::Truncated));
    }
    let tail_at = mark.end - mark.tail.len() as u64;
    Ok(match read_exact_at(file, tail_at, mark.tail.len())? {
        None => Some(ReloadReason::Truncated),
        Some(tail) if tail != mark.tail => Some(ReloadReason::Changed),
        Some(_) => None,
    })
}

impl State {
    pub(super) fn refresh(&mut self) -> SessionResult<Refresh> {
        use ReloadReason::*;
        let Some(path) = self.file.clone().filter(|_| self.persist) else {
            return Ok(Refresh::Unchanged);
        };
        let storage = self.config.storage.clone();
        self.check_appends();
        let Some(mark) = self.synced.clone() else {
            // Nothing of this session was written yet, or a write failed.
            return Ok(match storage.exists(&path) {
                true => Refresh::NeedsReload(Untracked),
                false => Refresh::Unchanged,
            });
        };
        let io_error = |source| {
            SessionError::Load(LoadError::Io {
                path: path.clone(),
                source,
            })
        };
        let file = match storage.open_read_at(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(Refresh::NeedsReload(Missing))
            }
            Err(e) => return Err(io_error(e)),
        };
        let size = file.size().map_err(io_error)?;
        if let Some(reason) = changed_before_mark(file.as_ref(), &mark, size).map_err(io_error)? {
            return Ok(Refresh::NeedsReload(reason));
        }
        if size == mark.end {
            return Ok(Refresh::Unchanged);
        }
        if self.needs_full_rewrite {
            return Ok(Refresh::NeedsReload(Migrated));
        }
        let mut next = mark.clone();
        if mark.torn() {
            // Only a newline right after it leaves the torn line as it was read.
            match read_exact_at(file.as_ref(), mark.end, 1).map_err(io_error)? {
                Some(byte) if byte == b"\n" => next.advance(b"\n"),
                Some(_) => return Ok(Refresh::NeedsReload(TornLineContinued)),
                None => return Ok(Refresh::NeedsReload(Truncated)),
            }
        }
        let Some(newline) = last_newline(file.as_ref(), next.end, size).map_err(io_error)? else {
            self.synced = Some(next);
            return Ok(Refresh::Unchanged);
        };
        let end = newline + 1;
        let lines = read_lines(file.as_ref(), next.end, end, next.newlines + 1);
        if let Some(e) = lines.error {
            return Err(io_error(e));
        }
        if lines.end < end {
            return Ok(Refresh::NeedsReload(Truncated));
        }
        if self.strict_reads {
            if let Some(why) = strict_line_failure(&lines) {
                return Ok(Refresh::NeedsReload(Malformed(why)));
            }
        }
        next.advance_by(end - next.end, lines.newlines, &lines.tail);
        let resumed = resume_lines(&self.session, mark.patches_apply, lines.parsed);
        if self.strict_reads {
            if let Some(why) = self.strict_record_failure(&resumed.records, &resumed.edits) {
                return Ok(Refresh::NeedsReload(Malformed(why)));
            }
        }

        Ok(self.take_resumed(resumed, next))
    }

    /// Puts what the new lines gave into memory (edits, records, header's cwd), moves the
    /// mark to `next` and sanitizes the records that changed, owing the patches.
    fn take_resumed(&mut self, resumed: Resumed, next: ReadMark) -> Refresh {
        let mut candidates = Vec::new();
        for edit in resumed.edits {
            match edit {
                BaseEdit::Header(members) => {
                    let header = self.session.header_mut();
                    for (key, value) in members.iter() {
                        header.insert(&key.to_string_lossy(), value.clone());
                    }
                }
                BaseEdit::Message { index, message } => {
                    self.session.replace_message(index, message);
                    candidates.push(index);
                }
            }
        }
        let from = self.session.records().len();
        let records = resumed.records.len();
        self.has_assistant |= resumed.records.iter().any(is_assistant);
        self.session.extend(resumed.records);
        if let Some(cwd) = self.session.header().cwd() {
            self.cwd = cwd.to_owned();
        }
        self.synced = Some(next);
        candidates.sort_unstable();
        candidates.dedup();
        let edited = candidates.clone();
        candidates.extend(from..self.session.records().len());
        let patches = self.session.sanitize_entries(candidates);
        self.owed.extend(patches);
        Refresh::Appended {
            records,
            skipped: resumed.skipped,
            edited,
        }
    }

    /// Why records appended to a strictly opened session would fail the strict checks
    /// with the patches they make.
    fn strict_record_failure(&self, records: &[Record], edits: &[BaseEdit]) -> Option<String> {
        let mut header = self.session.records()[0].clone();
        let mut edited = Vec::new();
        for edit in edits {
            match edit {
                BaseEdit::Header(members) => {
                    for (key, value) in members.iter() {
                        header
                            .fields_mut()
                            .insert(&key.to_string_lossy(), value.clone());
                    }
                }
                BaseEdit::Message { index, message } => {
                    let mut record = self.session.record(*index).clone();
                    record.fields_mut().insert("message", message.clone());
                    edited.push(record);
                }
            }
        }
        std::iter::once(&header)
            .chain(&edited)
            .chain(records)
            .find_map(|record| {
                let why = schema_violation(record)?;
                Some(format!("record {}: {why}", record.id().unwrap_or("?")))
            })
    }
}

/// Why appended lines would fail the strict line checks (invalid UTF-8, a line that is not
/// a record).
fn strict_line_failure(lines: &crate::format::lines::Lines) -> Option<String> {
    if let Some(at) = lines.invalid_utf8 {
        return Some(format!("invalid UTF-8 at byte {at}"));
    }
    lines.parsed.iter().find_map(|line| {
        let reason = line.record.as_ref().err()?;
        Some(format!("line {}: {reason}", line.number))
    })
}

impl State {
    /// Moves the mark over `bytes`, just appended by this manager through its writer.
    /// Where they landed is checked later ([`State::check_appends`]).
    pub(super) fn note_appended(&mut self, bytes: &[u8]) {
        if let Some(mark) = &mut self.synced {
            mark.advance(bytes);
            self.unchecked_appends = true;
        }
    }

    /// Checks that the appends counted into the mark landed right at it: the writer's offset
    /// after its last write is where that write ended, so it equals the mark's end unless
    /// another process appended before one of them. Then the manager no longer knows which
    /// bytes memory reflects. One check covers any number of appends.
    pub(super) fn check_appends(&mut self) {
        if !std::mem::take(&mut self.unchecked_appends) {
            return;
        }
        let landed = self.writer.as_ref().map(|writer| writer.position());
        if !matches!((&self.synced, landed), (Some(mark), Some(Ok(at))) if mark.end == at) {
            self.synced = None;
        }
    }

    /// The mark of a file this manager just wrote whole: `mark` as counted while writing,
    /// with the identity of the file now at the path, if that file holds just those bytes.
    pub(super) fn note_rewritten(&mut self, mut mark: ReadMark) {
        let path = self.file.clone();
        self.synced = path.and_then(|path| {
            let file = self.config.storage.open_read_at(&path).ok()?;
            mark.id = file.id();
            (file.size().ok()? == mark.end).then_some(mark)
        });
    }
}
