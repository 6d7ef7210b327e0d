//! Indexing only the lines appended to a file since it was indexed.
//!
//! Appended lines are read as [`SessionManager::refresh_from_file`] reads them: the file
//! must be the one indexed (same device and inode), longer than it was (a new version of
//! the same length was rewritten in place), with the same last bytes before where indexing
//! stopped; only complete lines are read, a last line without its
//! newline is left for later, and a line torn when it was indexed must have been ended by
//! a newline. The lines replay on top of what is indexed exactly as one pass over the
//! whole file would replay them:
//! - a `header_patch` sets the title, an `entry_patch` replaces the text (and the files
//!   touched: [`super::touches`]) of the last entry with its id when that entry is a
//!   `message` (patches apply only in v4+ files and in their canonical shape,
//!   [`header_patch`], [`entry_patch`]);
//! - the new entries get the next record indices; the leaf moves to the last one, and the
//!   path to it is the old path plus the new entries when they continue from the old leaf,
//!   else the path walked up from where they join the old entries;
//! - lines that could change what is indexed of the old entries in other ways — an entry
//!   whose id an entry of the file already has, a second `session` header, a
//!   `header_patch` that moves the session to another cwd (the paths its entries touched
//!   are resolved against it) — and files
//!   whose old entries could be changed by any new line (migrated from before v4, with
//!   duplicate ids, or with a missing parent: [`super::prepare::Prepared::incremental`])
//!   are read again whole instead.
//!
//! [`SessionManager::refresh_from_file`]: gjcfs_engine::manager::SessionManager::refresh_from_file

use std::collections::HashMap;
use std::io;
use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::doc_rows::{delete_text, held_kind, insert_row, insert_text, write_file_row};
use super::prepare::{distinct_words, kept_prompt, row_of, title_row, Row, SessionFacts};
use super::stored_text::stored;
use super::substring::{add_terms, drop_unused, Dropped, Known};
use super::touch_rows::{delete_doc_touches, insert_touches};
use super::{Change, FileState, Source};
use gjcfs_engine::format::blob::BlobStore;
use gjcfs_engine::format::lines::{last_newline, read_exact_at, read_lines, Lines};
use gjcfs_engine::format::record::{Record, RecordType};
use gjcfs_engine::json::{Object, Value};
use gjcfs_engine::read::load::ReadMark;
use gjcfs_engine::read::replay::{entry_patch, header_patch, reshape};
use gjcfs_engine::storage::{FileVersion, ReadFile, SessionStorage};

/// Whether an entry of file `file` has the id `id`.
fn has_entry(conn: &Connection, file: i64, id: &str) -> rusqlite::Result<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM docs WHERE file = ?1 AND entry_id = ?2")?
        .query_row(params![file, id], |_| Ok(()))
        .optional()?
        .is_some())
}

/// What [`append`] did.
pub(super) enum Appended {
    /// The file must be read whole; nothing was written.
    Whole,
    /// The file's new state, and what changed (`None`: no new complete line).
    /// With whether text indexed before was deleted (an edited message, a new title).
    Done(Box<FileState>, Option<Change>, bool),
}

/// Where the new leaf's path joins the entries indexed before.
enum Join {
    /// At the old leaf: the old path stays.
    OldLeaf,
    /// At another old entry (a branch).
    Entry(String),
    /// Nowhere: the new entries hold the whole path.
    None,
}

/// Indexes the complete lines appended to `path` since `old` (see the module
/// documentation), inside the caller's transaction.
pub(super) fn append(
    tx: &Transaction,
    path: &Path,
    old: &FileState,
    stat: FileVersion,
    source: &Source,
) -> rusqlite::Result<Appended> {
    let Some(mark) = old.mark.as_ref().filter(|_| old.incremental) else {
        return Ok(Appended::Whole);
    };
    // A new version of the same length appended nothing: it was rewritten in place (a
    // redaction with its mtime put back), which only a whole read shows.
    if stat.id != mark.id || stat.len < mark.end || stat.len == old.stat.len {
        return Ok(Appended::Whole);
    }
    let Some((next, lines)) = read_appended(source.storage.as_ref(), path, mark) else {
        return Ok(Appended::Whole);
    };
    let facts = indexed_facts(tx, old.id)?;
    let complete_lines = lines.is_some();
    let mut replay = Replay {
        tx,
        blobs: source.blobs.as_ref(),
        file: old.id,
        patches_apply: mark.patches_apply,
        facts: facts.clone(),
        records: Vec::new(),
        rows: Vec::new(),
        by_id: HashMap::new(),
        edits: HashMap::new(),
    };
    for line in lines.map(|l| l.parsed).unwrap_or_default() {
        let Ok(record) = line.record else { continue };
        if !replay.push(old.next_seq, record)? {
            return Ok(Appended::Whole);
        }
    }
    let Replay {
        rows: mut new_rows,
        by_id,
        edits,
        facts: new_facts,
        ..
    } = replay;
    let incremental = old.incremental && parents_known(tx, old.id, &new_rows, &by_id)?;
    let leaf = if new_rows.is_empty() {
        old.leaf.clone()
    } else {
        move_leaf(tx, old, &mut new_rows, &by_id)?
    };
    for row in &new_rows {
        insert_row(tx, old.id, row)?;
    }
    let terms = distinct_words(new_rows.iter().chain(edits.values()));
    let mut known = Known::default();
    add_terms(tx, terms.iter().map(String::as_str), &mut known)?;
    let mut dropped = Dropped::default();
    write_edits(tx, &edits, &mut dropped)?;
    if new_facts.title != facts.title {
        retitle(tx, old.id, &new_facts, &mut known, &mut dropped)?;
    }
    let erased = drop_unused(tx, dropped, &mut known)?;
    let records = new_rows.len();
    let state = write_file_row(
        tx,
        Some(old.id),
        path,
        stat,
        Some(&next),
        incremental,
        old.next_seq + records as i64,
        leaf.as_ref(),
        &new_facts,
    )?;
    let change = complete_lines.then_some(Change::Appended {
        records,
        edited: edits.len(),
    });
    Ok(Appended::Done(Box::new(state), change, erased))
}

/// Reads the complete lines appended to `path` after `mark`: the mark moved past them, and
/// the lines (`None`: no new complete line). `None` when the file is not the one indexed
/// any more or cannot be read so: it is read whole instead.
fn read_appended(
    storage: &dyn SessionStorage,
    path: &Path,
    mark: &ReadMark,
) -> Option<(ReadMark, Option<Lines>)> {
    let file = storage.open_read_at(path).ok()?;
    read_after(file.as_ref(), mark).ok().flatten()
}

fn read_after(
    file: &dyn ReadFile,
    mark: &ReadMark,
) -> io::Result<Option<(ReadMark, Option<Lines>)>> {
    if file.id() != mark.id {
        return Ok(None);
    }
    let size = file.size()?;
    let tail_at = mark.end - mark.tail.len() as u64;
    if read_exact_at(file, tail_at, mark.tail.len())?.as_deref() != Some(&mark.tail) {
        return Ok(None);
    }
    let mut next = mark.clone();
    if size == mark.end {
        return Ok(Some((next, None)));
    }
    if mark.torn() {
        match read_exact_at(file, mark.end, 1)? {
            Some(byte) if byte == b"\n" => next.advance(b"\n"),
            _ => return Ok(None),
        }
    }
    let Some(newline) = last_newline(file, next.end, size)? else {
        return Ok(Some((next, None)));
    };
    let end = newline + 1;
    let lines = read_lines(file, next.end, end, next.newlines + 1);
    if lines.error.is_some() || lines.end < end {
        return Ok(None);
    }
    next.advance_by(end - next.end, lines.newlines, &lines.tail);
    Ok(Some((next, Some(lines))))
}

/// What the index holds of file `file`'s session.
fn indexed_facts(tx: &Transaction, file: i64) -> rusqlite::Result<SessionFacts> {
    tx.query_row(
        "SELECT session_id, cwd, title, created, first_prompt FROM files WHERE id = ?1",
        [file],
        |r| {
            Ok(SessionFacts {
                session_id: r.get(0)?,
                cwd: r.get(1)?,
                title: r.get(2)?,
                created: r.get(3)?,
                first_prompt: r.get(4)?,
            })
        },
    )
}

/// Whether every new entry's parent is a new entry or one indexed before: a missing
/// parent means a later line could change the old entries' path, so the file is no longer
/// indexed incrementally.
fn parents_known(
    tx: &Transaction,
    file: i64,
    new_rows: &[Row],
    by_id: &HashMap<String, usize>,
) -> rusqlite::Result<bool> {
    for row in new_rows {
        if let Some(parent) = &row.parent_id {
            if !by_id.contains_key(parent) && !has_entry(tx, file, parent)? {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// Moves the leaf to the last of the (not empty) `new_rows`: marks the path to it in them
/// and in the old entries, and returns the new leaf.
fn move_leaf(
    tx: &Transaction,
    old: &FileState,
    new_rows: &mut [Row],
    by_id: &HashMap<String, usize>,
) -> rusqlite::Result<Option<(i64, String)>> {
    let last = new_rows.len() - 1;
    let mut at = last;
    let mut seen = vec![false; new_rows.len()];
    let join = loop {
        seen[at] = true;
        new_rows[at].on_leaf = true;
        match &new_rows[at].parent_id {
            None => break Join::None,
            Some(parent) => match by_id.get(parent) {
                Some(&k) if seen[k] => break Join::None,
                Some(&k) => at = k,
                None if old.leaf.as_ref().is_some_and(|l| &l.1 == parent) => break Join::OldLeaf,
                None if has_entry(tx, old.id, parent)? => break Join::Entry(parent.clone()),
                None => break Join::None,
            },
        }
    };
    match join {
        Join::OldLeaf => {}
        Join::Entry(id) => {
            tx.prepare_cached(
                "WITH RECURSIVE up(id, parent) AS ( \
                   SELECT id, parent_id FROM docs WHERE file = ?1 AND entry_id = ?2 \
                   UNION SELECT d.id, d.parent_id FROM up \
                     JOIN docs d ON d.file = ?1 AND d.entry_id = up.parent) \
                 UPDATE docs SET on_leaf = (id IN (SELECT id FROM up)) \
                 WHERE file = ?1 AND seq > 0 AND (on_leaf OR id IN (SELECT id FROM up))",
            )?
            .execute(params![old.id, id])?;
        }
        Join::None => {
            tx.prepare_cached(
                "UPDATE docs SET on_leaf = 0 WHERE file = ?1 AND seq > 0 AND on_leaf",
            )?
            .execute([old.id])?;
        }
    }
    let row = &new_rows[last];
    Ok(row.entry_id.clone().map(|id| (row.seq, id)))
}

/// Writes the new text and touches of the indexed messages a patch replaced.
fn write_edits(
    tx: &Transaction,
    edits: &HashMap<i64, Row>,
    dropped: &mut Dropped,
) -> rusqlite::Result<()> {
    for (doc, row) in edits {
        delete_text(tx, *doc, dropped)?;
        tx.prepare_cached("UPDATE docs SET text = ?2, kind = ?3 WHERE id = ?1")?
            .execute(params![doc, stored(&row.text), held_kind(row)])?;
        if !row.text.is_empty() {
            insert_text(tx, *doc, row)?;
        }
        if delete_doc_touches(tx, *doc)? {
            dropped.note_erased();
        }
        insert_touches(tx, *doc, &row.touches)?;
    }
    Ok(())
}

/// Replaces the indexed title of file `file` by the one in `facts`.
fn retitle(
    tx: &Transaction,
    file: i64,
    facts: &SessionFacts,
    known: &mut Known,
    dropped: &mut Dropped,
) -> rusqlite::Result<()> {
    let mut title = tx.prepare_cached("SELECT id FROM docs WHERE file = ?1 AND seq = 0")?;
    let ids: Vec<i64> = title
        .query_map([file], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    for doc in ids {
        delete_text(tx, doc, dropped)?;
        tx.prepare_cached("DELETE FROM docs WHERE id = ?1")?
            .execute([doc])?;
    }
    if let Some(row) = title_row(facts) {
        insert_row(tx, file, &row)?;
        let terms = distinct_words([&row]);
        add_terms(tx, terms.iter().map(String::as_str), known)?;
    }
    Ok(())
}

/// Appended records being replayed on top of a file's indexed ones.
struct Replay<'t> {
    tx: &'t Transaction<'t>,
    blobs: Option<&'t BlobStore>,
    file: i64,
    patches_apply: bool,
    facts: SessionFacts,
    /// The new records, with their rows.
    records: Vec<Record>,
    rows: Vec<Row>,
    /// Id → index in `records`, of the new entries seen so far.
    by_id: HashMap<String, usize>,
    /// Indexed documents whose message a patch replaced: their new row (its text, kind
    /// and what the indexes hold of the text).
    edits: HashMap<i64, Row>,
}

impl Replay<'_> {
    /// Replays one record; `false` when the file must be read whole instead.
    fn push(&mut self, first_seq: i64, record: Record) -> rusqlite::Result<bool> {
        match record.record_type() {
            RecordType::HeaderPatch => {
                if let Some(patch) = header_patch(record.fields()).filter(|_| self.patches_apply) {
                    if patch
                        .get_str("cwd")
                        .is_some_and(|cwd| cwd != self.facts.cwd)
                    {
                        return Ok(false);
                    }
                    if let Some(title) = patch.get_str("title") {
                        self.facts.title = Some(title.to_owned());
                    }
                }
            }
            RecordType::EntryPatch => {
                if let Some((id, message)) =
                    entry_patch(record.fields()).filter(|_| self.patches_apply)
                {
                    self.patch(id, message)?;
                }
            }
            RecordType::Session => return Ok(false),
            _ => {
                if let Some(id) = record.id() {
                    let taken = self.by_id.contains_key(id) || has_entry(self.tx, self.file, id)?;
                    if taken {
                        return Ok(false);
                    }
                    self.by_id.insert(id.to_owned(), self.records.len());
                }
                let seq = first_seq + self.records.len() as i64;
                self.rows
                    .push(row_of(seq, &record, self.blobs, &self.facts.cwd));
                if self.facts.first_prompt.is_none() {
                    self.facts.first_prompt =
                        gjcfs_engine::store::discovery::user_text(&record).map(kept_prompt);
                }
                self.records.push(record);
            }
        }
        Ok(true)
    }

    /// An entry patch: the last entry with `id` so far gets `message` if it is a message.
    fn patch(&mut self, id: &str, message: &Value) -> rusqlite::Result<()> {
        if !message.is_truthy() {
            return Ok(());
        }
        if let Some(&k) = self.by_id.get(id) {
            let record = &mut self.records[k];
            if record.record_type() == RecordType::Message {
                record.fields_mut().insert("message", reshape(message, 1));
                let seq = self.rows[k].seq;
                let on_leaf = self.rows[k].on_leaf;
                self.rows[k] = row_of(seq, record, self.blobs, &self.facts.cwd);
                self.rows[k].on_leaf = on_leaf;
            }
            return Ok(());
        }
        let target: Option<(i64, String)> = self
            .tx
            .prepare_cached(
                "SELECT id, entry_type FROM docs WHERE file = ?1 AND entry_id = ?2 AND seq > 0 \
                 ORDER BY seq DESC LIMIT 1",
            )?
            .query_row(params![self.file, id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        if let Some((doc, "message")) = target.as_ref().map(|(d, t)| (*d, t.as_str())) {
            let mut fields = Object::new();
            fields.insert("type", Value::string("message"));
            fields.insert("message", reshape(message, 1));
            let row = row_of(0, &Record::new(fields), self.blobs, &self.facts.cwd);
            self.edits.insert(doc, row);
        }
        Ok(())
    }
}
