//! Loading a session file leniently (`loadEntriesFromFile`) and into memory.
//!
//! - A missing file loads as empty ([`LoadStatus::Missing`]).
//! - Malformed or torn lines are skipped and reported; the other lines are kept.
//! - If the first record after replay is not a header with a string `id`, the file loads as
//!   empty ([`LoadStatus::NotASession`]).
//! - A header version above 5 (or not an integer) is an error; nothing is replayed.
//!
//! The file is read in chunks on several threads ([`crate::format::lines`]) up to the length it has
//! when opened, so memory holds the records (each line's text, shared per chunk, and the
//! places of its members) and a read buffer per thread.
//! [`LoadedEntries::mark`] says exactly which bytes of which file were read.

use std::io;
use std::path::{Path, PathBuf};

use crate::format::lines::{read_lines, Lines, TAIL};
use crate::format::migrate::{migrate, Migration};
use crate::format::record::Record;
use crate::format::summary::Summary;
use crate::read::replay::{patches_apply, replay_lines, ReplayError, SkippedLine};
use crate::session::tree::Session;
use crate::storage::{FileId, FileStorage, SessionStorage};

/// Which bytes of which file a load read: what a later read of lines appended to the file
/// starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadMark {
    /// The file read (a rewrite through a rename makes another).
    pub id: FileId,
    /// The number of bytes read, from the start of the file.
    pub end: u64,
    /// The number of `\n` bytes among them.
    pub newlines: usize,
    /// The last bytes read (at most [`TAIL`]).
    pub tail: Vec<u8>,
    /// Whether the file's first header accepts patches (version ≥ 4).
    pub patches_apply: bool,
}

impl ReadMark {
    /// The mark of a whole file read as `lines`.
    pub fn of(id: FileId, lines: &Lines) -> Self {
        let first_header = lines
            .parsed
            .iter()
            .find_map(|line| line.record.as_ref().ok().filter(|r| r.is_header()));
        ReadMark {
            id,
            end: lines.end,
            newlines: lines.newlines,
            tail: lines.tail.clone(),
            patches_apply: first_header.is_some_and(patches_apply),
        }
    }

    /// Whether the last line read has no newline yet.
    pub fn torn(&self) -> bool {
        self.tail.last().is_some_and(|&b| b != b'\n')
    }

    /// Moves the mark over `bytes`, the next bytes of the file.
    pub fn advance(&mut self, bytes: &[u8]) {
        self.advance_by(
            bytes.len() as u64,
            memchr::memchr_iter(b'\n', bytes).count(),
            bytes,
        );
    }

    /// Moves the mark over `len` more bytes holding `newlines` newlines and ending with
    /// `tail` (their last bytes, at most [`TAIL`]).
    pub fn advance_by(&mut self, len: u64, newlines: usize, tail: &[u8]) {
        self.end += len;
        self.newlines += newlines;
        let tail = &tail[tail.len().saturating_sub(TAIL)..];
        self.tail.extend_from_slice(tail);
        let excess = self.tail.len().saturating_sub(TAIL);
        self.tail.drain(..excess);
    }
}

/// What a lenient load found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadStatus {
    /// The file holds a session.
    Loaded,
    /// There is no file.
    Missing,
    /// The file is empty or its first record is not a session header with a string id.
    NotASession,
}

/// The records of a file, after patch replay and before migration.
#[derive(Debug)]
pub struct LoadedEntries {
    /// Whether the file exists and holds a session.
    pub status: LoadStatus,
    /// Header first; empty unless `status` is [`LoadStatus::Loaded`].
    pub records: Vec<Record>,
    /// The lines that are not one JSON object, in file order.
    pub skipped: Vec<SkippedLine>,
    /// One summary per record, when the load took them.
    pub summaries: Option<Vec<Summary>>,
    /// What was read, when the file exists.
    pub mark: Option<ReadMark>,
    /// The 1-based line number of each record of `records`, when the load kept them.
    pub record_lines: Vec<usize>,
    /// The offset of the first byte that is not UTF-8 (the lines are read as if it were
    /// U+FFFD), if any.
    pub invalid_utf8: Option<u64>,
}

/// Why a session file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Opening or reading the file failed (a missing file is not an error of a lenient
    /// load: it loads as empty).
    #[error("cannot read {path}: {source}")]
    Io {
        /// The session file.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// The first header's `version` is present but not an integer ≤ 5; nothing was
    /// replayed.
    #[error("{path}: Unsupported session version: {version}")]
    UnsupportedVersion {
        /// The session file.
        path: PathBuf,
        /// The version as found: a string's text, a number as JavaScript writes it, else
        /// compact JSON.
        version: String,
    },
    /// There is no file at the path ([`load_session`]; a lenient load gives
    /// [`LoadStatus::Missing`]).
    #[error("{path}: no such session file")]
    Missing {
        /// The session file.
        path: PathBuf,
    },
    /// The file is empty or its first record is not a session header with a string id
    /// ([`load_session`]; a lenient load gives [`LoadStatus::NotASession`]).
    #[error("{path}: not a session file (the first record is not a session header with an id)")]
    NotASession {
        /// The session file.
        path: PathBuf,
    },
}

/// `loadEntriesFromFile`: the lenient load.
pub fn load_entries_from_file(path: &Path) -> Result<LoadedEntries, LoadError> {
    load_entries_from_storage(&FileStorage, path)
}

/// The lenient load, reading through `storage`.
pub fn load_entries_from_storage(
    storage: &dyn SessionStorage,
    path: &Path,
) -> Result<LoadedEntries, LoadError> {
    let io_error = |source| LoadError::Io {
        path: path.to_owned(),
        source,
    };
    let file = match storage.open_read_at(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(LoadedEntries {
                status: LoadStatus::Missing,
                records: Vec::new(),
                skipped: Vec::new(),
                summaries: None,
                mark: None,
                record_lines: Vec::new(),
                invalid_utf8: None,
            })
        }
        Err(e) => return Err(io_error(e)),
    };
    let size = file.size().map_err(io_error)?;
    let lines = read_lines(file.as_ref(), 0, size, 1);
    let mark = ReadMark::of(file.id(), &lines);
    let invalid_utf8 = lines.invalid_utf8;
    let replayed = replay_lines(lines).map_err(|e| match e {
        ReplayError::UnsupportedVersion { version } => LoadError::UnsupportedVersion {
            path: path.to_owned(),
            version,
        },
        ReplayError::Io(e) => io_error(e),
    })?;
    let mut loaded = entries_from_records(replayed.records, replayed.skipped);
    if loaded.status == LoadStatus::Loaded {
        loaded.summaries = replayed.summaries;
        loaded.record_lines = replayed.lines;
    }
    loaded.mark = Some(mark);
    loaded.invalid_utf8 = invalid_utf8;
    Ok(loaded)
}

/// Applies the "first record must be a header with a string id" rule.
pub fn entries_from_records(records: Vec<Record>, skipped: Vec<SkippedLine>) -> LoadedEntries {
    let is_session = records
        .first()
        .is_some_and(|r| r.is_header() && r.id().is_some());
    LoadedEntries {
        status: if is_session {
            LoadStatus::Loaded
        } else {
            LoadStatus::NotASession
        },
        records: if is_session { records } else { Vec::new() },
        skipped,
        summaries: None,
        mark: None,
        record_lines: Vec::new(),
        invalid_utf8: None,
    }
}

/// Loaded records as a session.
#[derive(Debug)]
pub struct Built {
    /// The records, migrated and indexed.
    pub session: Session,
    /// What migration did to the records.
    pub migration: Migration,
    /// The entries the load-time sanitizer may change (all of them when not known), in
    /// file order.
    pub to_sanitize: Vec<usize>,
}

/// Migrates `records` and indexes them. `summaries` (one per record, as replay left them)
/// spare indexing a walk over the records when migration changed none of them.
pub fn build_session(mut records: Vec<Record>, summaries: Option<Vec<Summary>>) -> Built {
    let migration = migrate(&mut records);
    match summaries {
        Some(summaries) if migration == Migration::NotNeeded => {
            let to_sanitize = (0..records.len())
                .filter(|&i| summaries[i].needs_sanitizing())
                .collect();
            Built {
                session: Session::from_summarized(records, &summaries),
                migration,
                to_sanitize,
            }
        }
        _ => {
            let session = Session::from_records(records);
            Built {
                to_sanitize: session.entry_indices().collect(),
                session,
                migration,
            }
        }
    }
}

/// A session loaded leniently, migrated in memory and indexed.
#[derive(Debug)]
pub struct LoadedSession {
    /// The records, migrated and indexed.
    pub session: Session,
    /// What migration did to the records.
    pub migration: Migration,
    /// The lines that are not one JSON object, in file order.
    pub skipped: Vec<SkippedLine>,
    /// The entries the load-time sanitizer may change (all of them when not known), in
    /// file order; [`LoadedSession::sanitize`] takes them.
    pub to_sanitize: Vec<usize>,
}

impl LoadedSession {
    /// Applies the agent's load-time sanitizer to the session in memory, as the agent does
    /// before it builds a context, and returns the patches that would record it.
    pub fn sanitize(&mut self) -> Vec<Record> {
        let candidates = std::mem::take(&mut self.to_sanitize);
        self.session.sanitize_entries(candidates)
    }
}

/// Loads, migrates and indexes a session file; a missing or non-session file is an error.
pub fn load_session(path: &Path) -> Result<LoadedSession, LoadError> {
    let loaded = load_entries_from_file(path)?;
    match loaded.status {
        LoadStatus::Loaded => {}
        LoadStatus::Missing => return Err(LoadError::Missing { path: path.into() }),
        LoadStatus::NotASession => return Err(LoadError::NotASession { path: path.into() }),
    }
    let built = build_session(loaded.records, loaded.summaries);
    Ok(LoadedSession {
        session: built.session,
        migration: built.migration,
        skipped: loaded.skipped,
        to_sanitize: built.to_sanitize,
    })
}
