//! A session file read whole into the rows the index keeps of it.
//!
//! The file is loaded as every reader of the engine loads it ([`load_entries_from_file`]:
//! lenient lines, patch replay), migrated and indexed ([`build_session`]); then every
//! entry becomes a row — its id, parent id, type, kind, time, whether it is on the path
//! from the root to the leaf, its text ([`record_text`]) and the files it touched
//! ([`record_touches`]) — and the header's title one more. The rows are made a batch at a time ([`RowMaker`]), so the writer writes a large
//! session's first rows while the rest are made. Reading is pure: nothing is written, so
//! files are prepared on several threads.

use gjcfs_engine::format::blob::BlobStore;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::text::{record_kind, record_text, TITLE_KIND};
use super::touches::{record_touches, Touch};
use super::words::index_text;
use super::Source;
use gjcfs_engine::format::migrate::Migration;
use gjcfs_engine::format::record::Record;
use gjcfs_engine::format::time::parse_iso_millis;
use gjcfs_engine::read::load::{
    build_session, load_entries_from_storage, LoadError, LoadStatus, ReadMark,
};
use gjcfs_engine::session::tree::Session;
use gjcfs_engine::storage::FileVersion;

/// One record of a session as the index keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The record's index in the session (the header is 0).
    pub seq: i64,
    pub entry_id: Option<String>,
    pub parent_id: Option<String>,
    /// The record's `type`.
    pub entry_type: String,
    /// The message role, or the entry type ([`record_kind`]).
    pub kind: String,
    pub time_ms: Option<i64>,
    pub on_leaf: bool,
    /// Empty when the record holds no text.
    pub text: String,
    /// What the word index holds of `text` ([`index_text`]).
    pub words: String,
    /// The files the record read or changed, resolved against the session's cwd.
    pub touches: Vec<Touch>,
}

/// The session-level facts of a file.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionFacts {
    pub session_id: String,
    pub cwd: String,
    pub title: Option<String>,
    pub created: String,
    /// The first user prompt, as the index keeps it ([`kept_prompt`]).
    pub first_prompt: Option<String>,
}

/// How many characters of a first prompt's line the index keeps at most, whitespace and
/// controls not counted (`kept_prompt`): twice what a hit's title shows in `gjcfs search`
/// (40), and a third of an average first prompt.
pub const PROMPT_CHARS: usize = 80;

/// What the index keeps of a session's first prompt, where a hit's title comes from when
/// the session has none: its first line, cut after [`PROMPT_CHARS`] characters that are
/// neither whitespace nor controls. A title made of at most that many characters of the
/// first line, whitespace runs shown as one space, is the same from this as from the
/// whole prompt, which can be as long as a pasted file.
pub fn kept_prompt(prompt: String) -> String {
    let line = prompt.lines().next().unwrap_or_default();
    let mut shown = 0;
    let end = line
        .char_indices()
        .find(|&(_, c)| {
            if !c.is_whitespace() && !c.is_control() {
                shown += 1;
            }
            shown > PROMPT_CHARS
        })
        .map_or(line.len(), |(at, _)| at);
    if end == prompt.len() {
        return prompt;
    }
    line[..end].to_owned()
}

/// A file read whole.
#[derive(Debug)]
pub struct Prepared {
    pub path: PathBuf,
    /// Taken before the file was read.
    pub stat: FileVersion,
    /// The bytes read; `None` for a file that is not a session.
    pub mark: Option<ReadMark>,
    /// Whether lines appended later can be indexed on their own (see [`super::update`]).
    pub incremental: bool,
    pub facts: SessionFacts,
    /// The number of records (the header included): the seq of the next one.
    pub next_seq: i64,
    pub leaf: Option<(i64, String)>,
}

/// The time of a record: its ISO `timestamp`, else its message's millisecond one.
pub fn record_time(record: &Record) -> Option<i64> {
    record.timestamp().and_then(parse_iso_millis).or_else(|| {
        let ms = record.message()?.get("timestamp")?.as_f64()?;
        ms.is_finite().then_some(ms as i64)
    })
}

/// The row of record `seq` of a session whose header has `cwd`, `on_leaf` left to the
/// caller; with `blobs`, its cold-spilled text (and tool calls) read back
/// ([`gjcfs_engine::format::cold_spill`]).
pub fn row_of(seq: i64, record: &Record, blobs: Option<&BlobStore>, cwd: &str) -> Row {
    let record = match blobs {
        Some(blobs) => gjcfs_engine::format::cold_spill::rehydrate_record(record, blobs),
        None => std::borrow::Cow::Borrowed(record),
    };
    let record = record.as_ref();
    Row {
        seq,
        entry_id: record.id().map(str::to_owned),
        parent_id: record.parent_id().map(str::to_owned),
        entry_type: record.get_str("type").unwrap_or_default().to_owned(),
        kind: record_kind(record),
        time_ms: record_time(record),
        on_leaf: false,
        words: String::new(),
        text: record_text(record),
        touches: record_touches(record, cwd),
    }
    .indexed()
}

/// The row holding a session's title.
pub fn title_row(facts: &SessionFacts) -> Option<Row> {
    let title = facts.title.as_ref().filter(|t| !t.is_empty())?;
    Some(
        Row {
            seq: 0,
            entry_id: None,
            parent_id: None,
            entry_type: "session".to_owned(),
            kind: TITLE_KIND.to_owned(),
            time_ms: parse_iso_millis(&facts.created),
            on_leaf: true,
            words: String::new(),
            text: title.clone(),
            touches: Vec::new(),
        }
        .indexed(),
    )
}

/// Every word the rows' texts hold, once each: what the vocabulary needs of them
/// ([`super::substring`]).
pub fn distinct_words<'a>(rows: impl IntoIterator<Item = &'a Row>) -> Vec<String> {
    let mut seen: HashSet<&str, foldhash::fast::RandomState> = HashSet::default();
    for row in rows {
        seen.extend(row.words.split(' ').filter(|w| !w.is_empty()));
    }
    seen.into_iter().map(str::to_owned).collect()
}

impl Row {
    fn indexed(mut self) -> Self {
        self.words = index_text(&self.text);
        self
    }
}

/// Rows of a file, a batch at a time, with the distinct words of the batch
/// ([`distinct_words`]).
#[derive(Debug, Default)]
pub struct Batch {
    pub rows: Vec<Row>,
    pub terms: Vec<String>,
}

/// How many rows a batch holds at most: a large session's rows are written while the rest
/// are made.
pub const BATCH_ROWS: usize = 1024;

/// Makes the rows of a prepared file ([`prepare`]), a batch at a time.
#[derive(Default)]
pub struct RowMaker {
    session: Option<Session>,
    blobs: Option<BlobStore>,
    /// The header's cwd, which relative paths are resolved against.
    cwd: String,
    on_leaf: Vec<bool>,
    title: Option<Row>,
    /// The records still to make rows of.
    entries: std::vec::IntoIter<usize>,
}

impl Iterator for RowMaker {
    type Item = Batch;

    fn next(&mut self) -> Option<Batch> {
        let mut rows: Vec<Row> = self.title.take().into_iter().collect();
        if let Some(session) = &self.session {
            for i in self.entries.by_ref().take(BATCH_ROWS) {
                let mut row = row_of(i as i64, session.record(i), self.blobs.as_ref(), &self.cwd);
                row.on_leaf = self.on_leaf[i];
                rows.push(row);
            }
        }
        if rows.is_empty() {
            return None;
        }
        let terms = distinct_words(&rows);
        Some(Batch { rows, terms })
    }
}

/// Reads a file whole: what the index keeps of the file, and the maker of its rows. A file
/// that is missing or not a session gives no rows (and no mark); an unreadable one, or one
/// of an unsupported version, is an error.
pub fn prepare(source: &Source, path: &Path) -> Result<(Prepared, RowMaker), LoadError> {
    let io_error = |source| LoadError::Io {
        path: path.to_owned(),
        source,
    };
    let storage = source.storage.as_ref();
    let stat = storage.version(path).map_err(io_error)?;
    let loaded = load_entries_from_storage(storage, path)?;
    let mut prepared = Prepared {
        path: path.to_owned(),
        stat,
        mark: None,
        incremental: false,
        facts: SessionFacts::default(),
        next_seq: 0,
        leaf: None,
    };
    if loaded.status != LoadStatus::Loaded {
        return Ok((prepared, RowMaker::default()));
    }
    let built = build_session(loaded.records, loaded.summaries);
    let session = built.session;
    let header = session.header();
    prepared.facts = SessionFacts {
        session_id: header.id().unwrap_or_default().to_owned(),
        cwd: header.cwd().unwrap_or_default().to_owned(),
        title: header.title().map(str::to_owned),
        created: header.timestamp().unwrap_or_default().to_owned(),
        first_prompt: session
            .entries()
            .find_map(gjcfs_engine::store::discovery::user_text)
            .map(kept_prompt),
    };
    let mut on_leaf = vec![false; session.records().len()];
    if let Some(leaf) = session.leaf() {
        for i in session.path_to(leaf) {
            on_leaf[i] = true;
        }
        if let Some(id) = session.records()[leaf].id() {
            prepared.leaf = Some((leaf as i64, id.to_owned()));
        }
    }
    let entries: Vec<usize> = session.entry_indices().collect();
    let dangling = entries
        .iter()
        .any(|&i| session.record(i).parent_id().is_some() && session.parent_of(i).is_none());
    prepared.next_seq = session.records().len() as i64;
    let patches_apply = loaded.mark.as_ref().is_some_and(|m| m.patches_apply);
    // Appended lines replay on top of these records exactly when no migration changed them
    // (v4 migrates to v5 without a change), no two entries share an id and no parent is
    // missing (a new entry could then move an old one, or take up a dangling parent).
    let migrated_data = matches!(built.migration, Migration::Migrated { from } if from < 4.0);
    prepared.incremental = patches_apply
        && !migrated_data
        && !session.has_duplicate_ids()
        && !dangling
        && session.records()[1..].iter().all(|r| !r.is_header());
    prepared.mark = loaded.mark;
    let maker = RowMaker {
        title: title_row(&prepared.facts),
        session: Some(session),
        blobs: source.blobs.clone(),
        cwd: prepared.facts.cwd.clone(),
        on_leaf,
        entries: entries.into_iter(),
    };
    Ok((prepared, maker))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gjcfs_engine::views::one_line;
    use proptest::prelude::*;

    /// A title as the CLI makes one of a prompt: its first line in one line of `max`.
    fn title(prompt: &str, max: usize) -> String {
        one_line(prompt.lines().next().unwrap_or_default(), max)
    }

    #[test]
    fn a_prompt_is_kept_as_its_first_line_up_to_its_limit() {
        assert_eq!(kept_prompt("fix the parser".to_owned()), "fix the parser");
        assert_eq!(kept_prompt("first\r\nsecond".to_owned()), "first");
        assert_eq!(kept_prompt("\nsecond".to_owned()), "");
        let long = format!("{}  tail\nnext", "y".repeat(PROMPT_CHARS));
        // Cut just before the first character past the limit.
        assert_eq!(kept_prompt(long), format!("{}  ", "y".repeat(PROMPT_CHARS)));
        // Whitespace does not count: a spaced-out line keeps PROMPT_CHARS letters.
        let spaced = "a \t ".repeat(PROMPT_CHARS + 5);
        let kept = kept_prompt(spaced.clone());
        assert_eq!(kept.chars().filter(|c| *c == 'a').count(), PROMPT_CHARS);
        assert!(spaced.starts_with(&kept));
    }

    proptest! {
        #[test]
        fn a_title_from_the_kept_prompt_is_the_title_from_the_whole(
            prompt in "([a-z]{1,9}|[ \t\u{7}]{1,40}|\n|é|\r\n){0,120}",
            max in 1usize..=PROMPT_CHARS,
        ) {
            let kept = kept_prompt(prompt.clone());
            prop_assert!(prompt.starts_with(&kept));
            prop_assert_eq!(title(&kept, max), title(&prompt, max));
        }
    }
}
