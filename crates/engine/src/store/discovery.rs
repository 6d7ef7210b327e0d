//! Session discovery and listing metadata.
//!
//! Metadata comes from a 4 KiB prefix of each file, replayed with the same patch rules as a
//! full load, plus — for v4/v5 files larger than the prefix — a backwards scan of at most the
//! last 16 KiB for the latest canonical `header_patch` values of `cwd` and `title`. A file
//! whose prefix does not start with a supported header is skipped. A patch buried deeper than
//! the scanned tail is not seen (as in the original). When the prefix holds no complete user
//! message, the first prompt is taken from its raw text (a prompt longer than the prefix
//! shows its first part).

use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::format::record::{Record, RecordType};
use crate::json::Value;
use crate::read::replay::{header_patch, parse_session_entries};
use crate::storage::SessionStorage;

mod cache;
pub use cache::{ListingCache, SAVED_LISTING_FILE};

/// How much of a file's start is read for its metadata.
pub const PREFIX_BYTES: usize = 4096;
/// How much of a file's end is scanned for header patches.
pub const TAIL_SCAN_BYTES: usize = 16 * 1024;

/// What a listing knows of one session file.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionInfo {
    /// The transcript file's path.
    pub path: PathBuf,
    /// The session id from the header (a lower-case UUID v7 in files the agent writes now).
    pub id: String,
    /// The session's working directory: the latest `cwd` header patch seen, else the
    /// header's `cwd`; empty when there is neither.
    pub cwd: String,
    /// The latest `title` header patch seen, else the header's title, else the
    /// `shortSummary` of the last compaction in the prefix.
    pub title: Option<String>,
    /// The header's `parentSession`: the session this one was forked or branched from (its
    /// id, or its file's path for a branched session).
    pub parent_session: Option<String>,
    /// The header's ISO timestamp.
    pub created: String,
    /// File mtime, milliseconds since the epoch.
    pub modified_ms: i64,
    /// File length, bytes.
    pub size: u64,
    /// Message entries seen in the prefix (an estimate when the file is larger).
    pub message_count: usize,
    /// Whether the file is longer than [`PREFIX_BYTES`], so that `message_count` counts only
    /// its prefix ([`count_message_lines`] gives the exact count).
    pub message_count_is_estimate: bool,
    /// Text of the first user message, or [`NO_MESSAGES`].
    pub first_message: String,
}

/// What [`SessionInfo::first_message`] holds when no user message was found.
pub const NO_MESSAGES: &str = "(no messages)";

/// The title a session is shown under, on every surface (listings, the mount's names,
/// search results): its title, else its first user prompt; empty with neither. Each
/// surface cuts it and makes it safe for where it goes.
pub fn shown_title<'a>(title: Option<&'a str>, first_prompt: Option<&'a str>) -> &'a str {
    title
        .filter(|t| !t.trim().is_empty())
        .or(first_prompt)
        .unwrap_or_default()
}

impl SessionInfo {
    /// The first user prompt, if the listing found one.
    pub fn first_prompt(&self) -> Option<&str> {
        (self.first_message != NO_MESSAGES).then_some(self.first_message.as_str())
    }

    /// The title the session is shown under ([`shown_title`]).
    pub fn shown_title(&self) -> &str {
        shown_title(self.title.as_deref(), self.first_prompt())
    }

    /// Looks for the first prompt past the first [`PREFIX_BYTES`] when the listing found
    /// none there but the file is longer (a long system prompt or reply came first), up to
    /// [`FIRST_MESSAGE_SCAN_BYTES`]. Whether it looked (read the file).
    pub fn find_first_prompt(&mut self, storage: &dyn SessionStorage) -> bool {
        if self.first_prompt().is_some() || self.size <= PREFIX_BYTES as u64 {
            return false;
        }
        if let Ok(Some(text)) = first_user_text_beyond_prefix(storage, &self.path) {
            self.first_message = text;
        }
        true
    }
}

/// The text of a user message: a string content, or its text blocks joined by a space.
/// The text of a user message record (its string content, or its text blocks joined by
/// spaces): what a listing takes for a session's first prompt.
pub fn user_text(record: &Record) -> Option<String> {
    let message = record.message()?;
    if message.get_str("role") != Some("user") {
        return None;
    }
    match message.get("content")?.expanded().as_ref() {
        Value::String(s) => Some(s.to_string_lossy().into_owned()),
        Value::Array(blocks) => {
            let texts: Vec<String> = blocks
                .iter()
                .filter_map(|b| b.as_object()?.get_str("text").map(str::to_owned))
                .collect();
            (!texts.is_empty()).then(|| texts.join(" "))
        }
        _ => None,
    }
}

/// The first user prompt found by scanning the raw text of a prefix, for when no complete
/// user message is in it (a first prompt longer than the prefix): after the first
/// `"role":"user","content":`, the string that follows, or the first `"text"` string of the
/// array that follows, decoded up to its closing quote or to the end of the prefix (an escape
/// cut by the end is dropped). Empty text counts as none.
fn raw_first_user_text(prefix: &str) -> Option<String> {
    const USER: &str = "\"role\":\"user\",\"content\":";
    let after = &prefix[prefix.find(USER)? + USER.len()..];
    let string = match after.as_bytes().first()? {
        b'"' => &after[1..],
        b'[' => {
            const TEXT: &str = "\"text\":\"";
            &after[after.find(TEXT)? + TEXT.len()..]
        }
        _ => return None,
    };
    let text = decode_string_prefix(string);
    (!text.is_empty()).then_some(text)
}

/// The JSON string body at the start of `text`, decoded up to its closing quote or the end.
fn decode_string_prefix(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    let mut pending_high: Option<u32> = None;
    while let Some(c) = chars.next() {
        let unit = match c {
            '"' => break,
            '\\' => match chars.next() {
                Some('n') => Some('\n'),
                Some('t') => Some('\t'),
                Some('r') => Some('\r'),
                Some('b') => Some('\u{8}'),
                Some('f') => Some('\u{c}'),
                Some('u') => {
                    let hex: String = chars.by_ref().take(4).collect();
                    match u32::from_str_radix(&hex, 16) {
                        Ok(code) if hex.len() == 4 => {
                            if (0xd800..0xdc00).contains(&code) {
                                pending_high = Some(code);
                                continue;
                            }
                            let code = match pending_high.take() {
                                Some(high) if (0xdc00..0xe000).contains(&code) => {
                                    0x10000 + ((high - 0xd800) << 10) + (code - 0xdc00)
                                }
                                _ => code,
                            };
                            Some(char::from_u32(code).unwrap_or('\u{fffd}'))
                        }
                        _ => break,
                    }
                }
                Some(other) => Some(other),
                None => break,
            },
            other => Some(other),
        };
        if pending_high.take().is_some() {
            out.push('\u{fffd}');
        }
        out.extend(unit);
    }
    out
}

/// The latest canonical `cwd` and `title` header patches in the last bytes of a file.
fn tail_patches(tail: &[u8]) -> (Option<String>, Option<String>) {
    let text = String::from_utf8_lossy(tail);
    let (mut cwd, mut title) = (None, None);
    for line in text.split('\n').rev() {
        if cwd.is_some() && title.is_some() {
            break;
        }
        let Ok(record) = Record::parse_line(line.trim_end_matches('\r')) else {
            continue;
        };
        if record.record_type() != RecordType::HeaderPatch {
            continue;
        }
        if let Some(patch) = header_patch(record.fields()) {
            if cwd.is_none() {
                cwd = patch.get_str("cwd").map(str::to_owned);
            }
            if title.is_none() {
                title = patch.get_str("title").map(str::to_owned);
            }
        }
    }
    (cwd, title)
}

/// The listing metadata of one file, or `None` when it does not hold a supported session.
pub fn session_info(storage: &dyn SessionStorage, path: &Path) -> io::Result<Option<SessionInfo>> {
    let stat = storage.stat(path)?;
    let prefix = storage.read_prefix(path, PREFIX_BYTES)?;
    let prefix_text = String::from_utf8_lossy(&prefix);
    let Ok(replayed) = parse_session_entries(&prefix_text) else {
        return Ok(None);
    };
    let records = replayed.records;
    let Some(header) = records.first().and_then(Record::as_header) else {
        return Ok(None);
    };
    let Some(id) = header.id() else {
        return Ok(None);
    };
    let mut cwd = header.cwd().unwrap_or_default().to_owned();
    let mut title = header.title().map(str::to_owned);
    if header.version() >= 4.0 && stat.len > PREFIX_BYTES as u64 {
        let (tail_cwd, tail_title) = tail_patches(&storage.read_tail(path, TAIL_SCAN_BYTES)?);
        cwd = tail_cwd.unwrap_or(cwd);
        title = tail_title.or(title);
    }
    if title.is_none() {
        title = records
            .iter()
            .rev()
            .filter(|r| r.record_type() == RecordType::Compaction)
            .find_map(|r| r.get_str("shortSummary").map(str::to_owned));
    }
    let messages = records
        .iter()
        .filter(|r| r.record_type() == RecordType::Message)
        .count();
    let markers = memchr::memmem::find_iter(&prefix, b"\"type\":\"message\"").count();
    Ok(Some(SessionInfo {
        path: path.to_owned(),
        id: id.to_owned(),
        cwd,
        title,
        parent_session: header.parent_session().map(str::to_owned),
        created: header.timestamp().unwrap_or_default().to_owned(),
        modified_ms: stat.mtime_ms,
        size: stat.len,
        message_count: messages.max(markers),
        message_count_is_estimate: stat.len > PREFIX_BYTES as u64,
        first_message: records
            .iter()
            .find_map(user_text)
            .or_else(|| raw_first_user_text(&prefix_text))
            .unwrap_or_else(|| NO_MESSAGES.to_owned()),
    }))
}

/// How many lines of the file at `path` are message entries, counted by a scan of the raw
/// bytes (no line is parsed): a line starting `{"type":"message"`, as every message entry
/// the agent writes does. Exact where [`SessionInfo::message_count`] is an estimate.
pub fn count_message_lines(storage: &dyn SessionStorage, path: &Path) -> io::Result<usize> {
    const MARK: &[u8] = b"{\"type\":\"message\"";
    let mut reader = storage.open_read(path)?;
    let mut buf = vec![0; 1 << 16];
    // The bytes of the current line seen so far, up to the length of the mark.
    let mut start: Vec<u8> = Vec::with_capacity(MARK.len());
    let mut at_line_start = true;
    let mut count = 0;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let mut rest = &buf[..n];
        while !rest.is_empty() {
            if at_line_start {
                let take = (MARK.len() - start.len()).min(rest.len());
                start.extend_from_slice(&rest[..take]);
                if start.len() == MARK.len() || start.contains(&b'\n') {
                    count += usize::from(start == MARK);
                    at_line_start = false;
                }
            }
            match memchr::memchr(b'\n', rest) {
                Some(i) => {
                    rest = &rest[i + 1..];
                    start.clear();
                    at_line_start = true;
                }
                None => rest = &[],
            }
        }
    }
    Ok(count)
}

/// How far [`first_user_text_beyond_prefix`] reads.
pub const FIRST_MESSAGE_SCAN_BYTES: usize = 1 << 20;

/// The first user message of a file whose listing prefix holds none (a long system prompt
/// or first reply fills it): the raw scan of [`session_info`] over the first
/// [`FIRST_MESSAGE_SCAN_BYTES`] instead. The agent's listing stops at the prefix and shows
/// `(no messages)`; `gjcfs ls` looks further.
pub fn first_user_text_beyond_prefix(
    storage: &dyn SessionStorage,
    path: &Path,
) -> io::Result<Option<String>> {
    let bytes = storage.read_prefix(path, FIRST_MESSAGE_SCAN_BYTES)?;
    Ok(raw_first_user_text(&String::from_utf8_lossy(&bytes)))
}

/// Whether a directory entry name is a listable transcript (`*.jsonl`, not hidden).
pub fn is_transcript_name(name: &str) -> bool {
    name.ends_with(".jsonl") && !name.starts_with('.')
}

/// The transcript files directly in `dir` (listable names, see [`is_transcript_name`]),
/// sorted by path. Nothing is read, and no backup is recovered.
pub fn transcript_paths(storage: &dyn SessionStorage, dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut paths: Vec<PathBuf> = storage
        .list_files(dir)?
        .into_iter()
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(is_transcript_name)
        })
        .collect();
    // One directory's files: the order of their names' bytes is that of their paths.
    paths.sort_unstable_by(|a, b| a.as_os_str().cmp(b.as_os_str()));
    Ok(paths)
}

/// The transcript files in every directory of the sessions root (v2 scopes and legacy
/// layouts), sorted by path; none when the root does not exist. A directory that cannot be
/// listed is skipped, as [`list_all`] skips it.
pub fn all_transcript_paths(
    storage: &dyn SessionStorage,
    sessions_root: &Path,
) -> io::Result<Vec<PathBuf>> {
    let dirs = match storage.list_dirs(sessions_root) {
        Ok(dirs) => dirs,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut paths: Vec<PathBuf> = dirs
        .iter()
        .filter_map(|dir| transcript_paths(storage, dir).ok())
        .flatten()
        .collect();
    paths.sort();
    Ok(paths)
}

/// How deep below `<cwd>/.gjc` project-local transcripts are looked for.
const PROJECT_LOCAL_DEPTH: usize = 8;

/// The project-local transcripts of a workspace, which the agent lists beside its managed
/// ones (and never writes): every listable `*.jsonl` under `<cwd>/.gjc/` that sits directly
/// in `.gjc/`, in a directory named `agent-session`, or below a directory named `sessions`
/// (at most `PROJECT_LOCAL_DEPTH` levels down, symlinks not followed). Sorted by path;
/// none when there is no `.gjc` directory.
pub fn project_local_transcripts(storage: &dyn SessionStorage, cwd: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    // (directory, depth, whether a `sessions` directory is on the way down)
    let mut stack = vec![(cwd.join(".gjc"), 0, false)];
    while let Some((dir, depth, under_sessions)) = stack.pop() {
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let under_sessions = under_sessions || (depth > 0 && name == "sessions");
        if depth == 0 || under_sessions || name == "agent-session" {
            found.extend(transcript_paths(storage, &dir).unwrap_or_default());
        }
        if depth < PROJECT_LOCAL_DEPTH {
            for sub in storage.list_dirs(&dir).unwrap_or_default() {
                stack.push((sub, depth + 1, under_sessions));
            }
        }
    }
    found.sort();
    found
}

/// Every session in `dir`, newest first (ties by path); unreadable or non-session files are
/// skipped. Listing changes nothing: orphaned rewrite backups are recovered only where a
/// session is opened for writing ([`crate::manager::recover_dir`]).
pub fn list_dir(storage: &dyn SessionStorage, dir: &Path) -> io::Result<Vec<SessionInfo>> {
    list_dir_with(storage, dir, &|_, _| {})
}

/// [`list_dir`], calling `progress(done, total)` after each transcript file it reads.
pub fn list_dir_with(
    storage: &dyn SessionStorage,
    dir: &Path,
    progress: &dyn Fn(usize, usize),
) -> io::Result<Vec<SessionInfo>> {
    list_dir_cached(storage, dir, &mut ListingCache::default(), progress)
}

/// [`list_dir_with`], reading only the files that changed since `cache` last listed them.
pub fn list_dir_cached(
    storage: &dyn SessionStorage,
    dir: &Path,
    cache: &mut ListingCache,
    progress: &dyn Fn(usize, usize),
) -> io::Result<Vec<SessionInfo>> {
    let mut infos = cache.list(storage, &transcript_paths(storage, dir)?, progress);
    sort_newest_first(&mut infos);
    Ok(infos)
}

fn sort_newest_first(infos: &mut [SessionInfo]) {
    infos.sort_by(|a, b| {
        b.modified_ms
            .cmp(&a.modified_ms)
            .then_with(|| a.path.cmp(&b.path))
    });
}

/// A session picker row (`getRecentSessions`).
#[derive(Debug, Clone, PartialEq)]
pub struct RecentSession {
    /// The transcript file's path.
    pub path: PathBuf,
    /// File mtime, milliseconds since the epoch.
    pub modified_ms: i64,
    /// The title, else the first user prompt, else `Untitled · HH:MM` (UTC).
    pub name: String,
}

/// A display name: cut to its first line, control characters removed, trimmed.
fn clean_name(text: &str) -> Option<String> {
    let first = text
        .split('\n')
        .next()
        .unwrap_or_default()
        .trim_end_matches('\r');
    let cleaned: String = first.chars().filter(|c| !c.is_control()).collect();
    let cleaned = cleaned.trim();
    (!cleaned.is_empty()).then(|| cleaned.to_owned())
}

/// `getRecentSessions`: the newest `limit` sessions of `dir`, newest first.
pub fn get_recent_sessions(
    storage: &dyn SessionStorage,
    dir: &Path,
    limit: usize,
) -> io::Result<Vec<RecentSession>> {
    Ok(list_dir(storage, dir)?
        .into_iter()
        .take(limit)
        .map(|info| {
            let prompt = info.first_prompt();
            let name = info
                .title
                .as_deref()
                .and_then(clean_name)
                .or_else(|| prompt.and_then(clean_name))
                .unwrap_or_else(|| {
                    let time = crate::format::time::parse_iso_millis(&info.created)
                        .unwrap_or(info.modified_ms);
                    format!(
                        "Untitled · {}",
                        &crate::format::time::format_iso_millis(time)[11..16]
                    )
                });
            RecentSession {
                path: info.path,
                modified_ms: info.modified_ms,
                name,
            }
        })
        .collect())
}

/// `findMostRecentSession`: the newest valid session file of `dir`.
pub fn find_most_recent_session(storage: &dyn SessionStorage, dir: &Path) -> Option<PathBuf> {
    list_dir(storage, dir)
        .ok()?
        .into_iter()
        .next()
        .map(|info| info.path)
}

/// Every session in every directory of the sessions root (v2 scopes and legacy layouts),
/// newest first; when one session id appears more than once, the newest copy is kept.
pub fn list_all(
    storage: &dyn SessionStorage,
    sessions_root: &Path,
) -> io::Result<Vec<SessionInfo>> {
    list_all_with(storage, sessions_root, &|_, _| {})
}

/// [`list_all`], calling `progress(done, total)` after each transcript file it reads.
pub fn list_all_with(
    storage: &dyn SessionStorage,
    sessions_root: &Path,
    progress: &dyn Fn(usize, usize),
) -> io::Result<Vec<SessionInfo>> {
    list_all_cached(
        storage,
        sessions_root,
        &mut ListingCache::default(),
        progress,
    )
}

/// [`list_all_with`], reading only the files that changed since `cache` last listed them.
pub fn list_all_cached(
    storage: &dyn SessionStorage,
    sessions_root: &Path,
    cache: &mut ListingCache,
    progress: &dyn Fn(usize, usize),
) -> io::Result<Vec<SessionInfo>> {
    let paths = all_transcript_paths(storage, sessions_root)?;
    let mut infos = cache.list(storage, &paths, progress);
    sort_newest_first(&mut infos);
    keep_live_copies(&mut infos, |info| (&info.id, info.modified_ms, &info.path));
    Ok(infos)
}

/// Keeps, of the items that are copies of one session (one session id in several files: a
/// legacy session and its managed copy, a file copied by hand), only the live one — the
/// newest by modification time, then the first by path (as bytes) — in the order given. `copy` says
/// an item's session id, its file's mtime (ms) and its path. Every surface that counts or
/// shows sessions (listings, usage, search, the mount) keeps the same one.
pub fn keep_live_copies<T>(items: &mut Vec<T>, copy: impl Fn(&T) -> (&str, i64, &Path)) {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|&a, &b| {
        let (_, a_ms, a_path) = copy(&items[a]);
        let (_, b_ms, b_path) = copy(&items[b]);
        let (a_bytes, b_bytes) = (
            a_path.as_os_str().as_encoded_bytes(),
            b_path.as_os_str().as_encoded_bytes(),
        );
        b_ms.cmp(&a_ms).then_with(|| a_bytes.cmp(b_bytes))
    });
    let mut seen = std::collections::HashSet::new();
    let mut live = vec![false; items.len()];
    for i in order {
        live[i] = seen.insert(copy(&items[i]).0.to_owned());
    }
    let mut at = 0;
    items.retain(|_| {
        at += 1;
        live[at - 1]
    });
}

/// The sessions whose id, file name, or file-name id part starts with `prefix`
/// (case-insensitive), in the order given.
pub fn match_prefix<'a>(infos: &'a [SessionInfo], prefix: &str) -> Vec<&'a SessionInfo> {
    let prefix = prefix.to_lowercase();
    infos
        .iter()
        .filter(|info| {
            let name = info
                .path
                .file_stem()
                .map(|s| s.to_string_lossy().to_lowercase())
                .unwrap_or_default();
            let after = name
                .rsplit_once('_')
                .map_or(name.as_str(), |(_, id)| id)
                .to_owned();
            info.id.to_lowercase().starts_with(&prefix)
                || name.starts_with(&prefix)
                || after.starts_with(&prefix)
        })
        .collect()
}

#[cfg(test)]
mod tests;
