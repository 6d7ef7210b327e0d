//! Writing files into the index: whole ([`super::prepare`]), or only the lines appended
//! since they were indexed.
//!
//! Appended lines ([`append`]) are read as [`SessionManager::refresh_from_file`] reads
//! them: the file must be the one indexed (same device and inode), not shorter, with the
//! same last bytes before where indexing stopped; only complete lines are read, a last
//! line without its newline is left for later, and a line torn when it was indexed must
//! have been ended by a newline. The lines replay on top of what is indexed exactly as one
//! pass over the whole file would replay them:
//! - a `header_patch` sets the title or cwd, an `entry_patch` replaces the text of the last
//!   entry with its id when that entry is a `message` (patches apply only in v4+ files and
//!   in their canonical shape, [`header_patch`], [`entry_patch`]);
//! - the new entries get the next record indices; the leaf moves to the last one, and the
//!   path to it is the old path plus the new entries when they continue from the old leaf,
//!   else the path walked up from where they join the old entries;
//! - lines that could change what is indexed of the old entries in other ways — an entry
//!   whose id an entry of the file already has, a second `session` header — and files
//!   whose old entries could be changed by any new line (migrated from before v4, with
//!   duplicate ids, or with a missing parent: [`super::prepare::Prepared::incremental`])
//!   are read again whole instead.
//!
//! [`SessionManager::refresh_from_file`]: gjcfs_engine::manager::SessionManager::refresh_from_file

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::ahead::{Ahead, Closer, AHEAD_BYTES};
use super::prepare::{
    distinct_words, prepare, row_of, title_row, Batch, Prepared, Row, SessionFacts, Stat,
};
use super::schema::{load_state, path_bytes, set_cache, CacheFor};
use super::substring::{add_terms, Known};
use super::{Change, FileState, Inner, Progress, SessionChange, UpdateReport};
use gjcfs_engine::json::{Object, Value};
use gjcfs_engine::lines::{last_newline, read_exact_at, read_lines};
use gjcfs_engine::load::{LoadError, ReadMark};
use gjcfs_engine::record::{Record, RecordType};
use gjcfs_engine::replay::{entry_patch, header_patch, reshape};
use gjcfs_engine::storage::{FileStorage, SessionStorage};

/// Text written in one transaction before it is committed, in bytes.
const COMMIT_BYTES: u64 = 64 << 20;

/// Drops a file and everything indexed of it.
pub fn remove(inner: &mut Inner, path: &Path) -> rusqlite::Result<()> {
    let tx = begin(&inner.conn)?;
    if let Some(id) = file_id(&tx, path)? {
        delete_file(&tx, id)?;
    }
    tx.commit()?;
    inner.files.remove(path);
    Ok(())
}

/// Begins a transaction that may change the `files` table. Its first statement counts it
/// in `meta.files_gen`, so that the listing the last update recorded
/// ([`super::listing`]) no longer counts as agreeing with the table. (Triggers on `files`
/// could count within each statement, but a statement that fires a trigger opens a
/// savepoint, and FTS5 writes out its buffered terms at every savepoint: a first build took
/// twice as long.)
fn begin(conn: &Connection) -> rusqlite::Result<Transaction<'_>> {
    let tx = conn.unchecked_transaction()?;
    tx.prepare_cached("UPDATE meta SET files_gen = files_gen + 1 WHERE id = 1")?
        .execute([])?;
    Ok(tx)
}

fn file_id(conn: &Connection, path: &Path) -> rusqlite::Result<Option<i64>> {
    conn.query_row(
        "SELECT id FROM files WHERE path = ?1",
        [path_bytes(path)],
        |r| r.get(0),
    )
    .optional()
}

fn delete_file(conn: &Connection, id: i64) -> rusqlite::Result<()> {
    let mut docs =
        conn.prepare_cached("SELECT id FROM docs WHERE file = ?1 AND text IS NOT NULL")?;
    let ids: Vec<i64> = docs
        .query_map([id], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    for doc in ids {
        delete_text(conn, doc)?;
    }
    conn.prepare_cached("DELETE FROM docs WHERE file = ?1")?
        .execute([id])?;
    conn.prepare_cached("DELETE FROM files WHERE id = ?1")?
        .execute([id])?;
    Ok(())
}

fn delete_text(conn: &Connection, doc: i64) -> rusqlite::Result<()> {
    conn.prepare_cached("DELETE FROM words WHERE rowid = ?1")?
        .execute([doc])?;
    Ok(())
}

/// Indexes the words of document `doc` ([`Row::words`]); the caller adds them to the
/// vocabulary ([`add_terms`]).
fn insert_text(conn: &Connection, doc: i64, row: &Row) -> rusqlite::Result<()> {
    conn.prepare_cached("INSERT INTO words(rowid, text) VALUES (?1, ?2)")?
        .execute(params![doc, row.words])?;
    Ok(())
}

fn insert_row(conn: &Connection, file: i64, row: &Row) -> rusqlite::Result<()> {
    let text = (!row.text.is_empty()).then_some(row.text.as_str());
    conn.prepare_cached(
        "INSERT INTO docs(file, seq, entry_id, parent_id, entry_type, kind, time_ms, on_leaf, text) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        file,
        row.seq,
        row.entry_id,
        row.parent_id,
        row.entry_type,
        row.kind,
        row.time_ms,
        row.on_leaf,
        text
    ])?;
    if text.is_some() {
        insert_text(conn, conn.last_insert_rowid(), row)?;
    }
    Ok(())
}

/// Writes the `files` row of `path` (inserted, or updated when `id` is given) and returns
/// its state.
#[allow(clippy::too_many_arguments)]
fn write_file_row(
    conn: &Connection,
    id: Option<i64>,
    path: &Path,
    stat: Stat,
    mark: Option<&ReadMark>,
    incremental: bool,
    next_seq: i64,
    leaf: Option<&(i64, String)>,
    facts: &SessionFacts,
) -> rusqlite::Result<FileState> {
    let values = params![
        path_bytes(path),
        stat.dev as i64,
        stat.ino as i64,
        stat.len as i64,
        stat.mtime_ns,
        mark.map(|m| m.end as i64),
        mark.map(|m| m.newlines as i64),
        mark.map(|m| m.tail.clone()),
        mark.map(|m| m.patches_apply),
        incremental,
        next_seq,
        leaf.map(|l| l.0),
        leaf.map(|l| l.1.clone()),
        facts.session_id,
        facts.cwd,
        facts.title,
        facts.created,
        id,
        facts.first_prompt,
    ];
    conn.prepare_cached(
        "INSERT INTO files(path, dev, ino, len, mtime_ns, mark_end, mark_newlines, mark_tail, \
         patches_apply, incremental, next_seq, leaf_seq, leaf_id, session_id, cwd, title, created, id, \
         first_prompt) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19) \
         ON CONFLICT(id) DO UPDATE SET dev=?2, ino=?3, len=?4, mtime_ns=?5, mark_end=?6, \
         mark_newlines=?7, mark_tail=?8, patches_apply=?9, incremental=?10, next_seq=?11, \
         leaf_seq=?12, leaf_id=?13, session_id=?14, cwd=?15, title=?16, created=?17, \
         first_prompt=?19",
    )?
    .execute(values)?;
    Ok(FileState {
        id: id.unwrap_or_else(|| conn.last_insert_rowid()),
        stat,
        mark: mark.cloned(),
        incremental,
        next_seq,
        leaf: leaf.cloned(),
    })
}

/// Replaces what is indexed of a file by a whole read of it, its rows as they arrive in
/// `batches`; `known` as [`add_terms`]. Returns the file's new state and the bytes of text
/// written.
fn write_prepared(
    conn: &Connection,
    prepared: &Prepared,
    batches: &mpsc::Receiver<Batch>,
    known: &mut Known,
) -> rusqlite::Result<(FileState, u64)> {
    if let Some(old) = file_id(conn, &prepared.path)? {
        delete_file(conn, old)?;
    }
    let state = write_file_row(
        conn,
        None,
        &prepared.path,
        prepared.stat,
        prepared.mark.as_ref(),
        prepared.incremental,
        prepared.next_seq,
        prepared.leaf.as_ref(),
        &prepared.facts,
    )?;
    let mut text = 0;
    for batch in batches {
        for row in &batch.rows {
            insert_row(conn, state.id, row)?;
            text += row.text.len() as u64;
        }
        add_terms(conn, batch.terms.iter().map(String::as_str), known)?;
    }
    Ok((state, text))
}

/// A file read whole ([`prepare`]), its rows to come in batches from the thread reading
/// it.
type Read = Result<(Prepared, mpsc::Receiver<Batch>), LoadError>;

/// Batches of rows made ahead of the writer, per file.
const BATCHES_AHEAD: usize = 4;

/// Reads the file at `path` and sends it to the writer as file `k`, then its rows as they
/// are made; `false` when the writer has stopped.
fn read_and_send(
    k: usize,
    path: &Path,
    blobs: Option<&gjcfs_engine::blob::BlobStore>,
    to_writer: &mpsc::Sender<(usize, Read)>,
) -> bool {
    let (prepared, rows) = match prepare(path, blobs) {
        Ok(read) => read,
        Err(e) => return to_writer.send((k, Err(e))).is_ok(),
    };
    let (batches, from_reader) = mpsc::sync_channel(BATCHES_AHEAD);
    if to_writer.send((k, Ok((prepared, from_reader)))).is_err() {
        return false;
    }
    for batch in rows {
        if batches.send(batch).is_err() {
            return false;
        }
    }
    true
}

/// Indexes the files in `changed` (each with the stat it has now): appended lines where
/// they can be read on their own, every other file read whole on [`readers`]`(threads)`
/// threads while this one writes. The connection has the page cache of an update
/// meanwhile, and that of queries again afterwards, whether or not the update failed
/// ([`CacheFor`]).
pub fn apply(
    inner: &mut Inner,
    changed: Vec<(PathBuf, Stat)>,
    threads: usize,
    progress: &dyn Fn(Progress),
    report: &mut UpdateReport,
) -> rusqlite::Result<()> {
    set_cache(&inner.conn, CacheFor::Update)?;
    let applied = apply_changes(inner, changed, threads, progress, report);
    let shrunk = set_cache(&inner.conn, CacheFor::Queries);
    applied.and(shrunk)
}

fn apply_changes(
    inner: &mut Inner,
    changed: Vec<(PathBuf, Stat)>,
    threads: usize,
    progress: &dyn Fn(Progress),
    report: &mut UpdateReport,
) -> rusqlite::Result<()> {
    let mut whole = Vec::new();
    for (path, stat) in changed {
        let Some(stamp) = inner.files.get(&path).copied() else {
            whole.push((path, stat, false));
            continue;
        };
        let tx = begin(&inner.conn)?;
        let old = load_state(&tx, stamp.id)?;
        match append(&tx, &path, &old, stat, inner.blobs.as_ref())? {
            Appended::Whole => {
                drop(tx);
                whole.push((path, stat, true));
            }
            Appended::Done(state, change) => {
                tx.commit()?;
                inner.files.insert(&path, state.stamp());
                match change {
                    Some(change) => report.changes.push(SessionChange { path, change }),
                    None => report.unchanged += 1,
                }
            }
        }
    }
    if whole.is_empty() {
        return Ok(());
    }
    // Oldest first, and written in that order: the index's newest documents are those of
    // the sessions written last, which is the window a common query is ranked over.
    whole.sort_by_key(|w| w.1.mtime_ns);
    let total = Progress {
        files_done: 0,
        files_total: whole.len(),
        bytes_done: 0,
        bytes_total: whole.iter().map(|w| w.1.len).sum(),
    };
    progress(total);
    // This thread writes the index, the busiest of all: the others read, one core fewer
    // (on two cores, a second reading thread took the writer's core from it and a build of
    // 10,000 sessions took 13.5–14.3 s instead of 10.7–11.4 s).
    let threads = readers(threads).min(whole.len());
    // Each file counts a page at least: empty files are not read ahead without bound.
    let lens: Vec<u64> = whole.iter().map(|w| w.1.len.max(4096)).collect();
    // Two files ahead of the writer, the reader waited while the writer flushed or
    // committed: 10,000 sessions took 10.1–12.1 s instead of 9.0–10.3 s (alternating
    // builds; 93 MB at most in memory instead of 164 MB).
    let reading = Ahead::new(&lens, AHEAD_BYTES);
    let Inner {
        conn, files, blobs, ..
    } = inner;
    let blobs = blobs.as_ref();
    std::thread::scope(|scope| -> rusqlite::Result<()> {
        // A reader sends its next file only once every row of this one is sent, and the
        // writer takes a file's rows while it writes the file.
        let (tx, rx) = mpsc::channel::<(usize, Read)>();
        for _ in 0..threads {
            let tx = tx.clone();
            let (whole, reading) = (&whole, &reading);
            scope.spawn(move || {
                let _stops_all = Closer::on_panic(reading);
                while let Some(k) = reading.claim() {
                    if !read_and_send(k, &whole[k].0, blobs, &tx) {
                        return;
                    }
                }
            });
        }
        drop(tx);
        let _readers_stop = Closer::always(&reading);
        let mut done = total;
        let mut pending = 0u64;
        let conn: &Connection = conn;
        let mut db = Some(begin(conn)?);
        // The words added to the vocabulary by this update's transactions.
        let mut vocabulary = Known::default();
        // Files prepared ahead of the next one in order wait here.
        let mut ahead: BTreeMap<usize, Read> = BTreeMap::new();
        let mut in_order = 0;
        let mut received = rx.iter();
        loop {
            let prepared = match ahead.remove(&in_order) {
                Some(prepared) => prepared,
                None => match received.next() {
                    Some((k, prepared)) if k == in_order => prepared,
                    Some((k, prepared)) => {
                        ahead.insert(k, prepared);
                        continue;
                    }
                    None => break,
                },
            };
            let k = in_order;
            in_order += 1;
            let (path, stat, known) = &whole[k];
            let tx = match &db {
                Some(tx) => tx,
                None => db.insert(begin(conn)?),
            };
            done.files_done += 1;
            done.bytes_done += stat.len;
            match prepared {
                Ok((prepared, batches)) => {
                    let (state, text) = write_prepared(tx, &prepared, &batches, &mut vocabulary)?;
                    pending += text;
                    files.insert(path, state.stamp());
                    let change = if *known {
                        Change::Reindexed
                    } else {
                        Change::Added
                    };
                    report.changes.push(SessionChange {
                        path: path.clone(),
                        change,
                    });
                }
                Err(e) => {
                    // What was indexed of it is no longer what it holds.
                    if let Some(id) = file_id(tx, path)? {
                        delete_file(tx, id)?;
                    }
                    files.remove(path);
                    report.failed.push((path.clone(), e));
                }
            }
            reading.written(k);
            if pending >= COMMIT_BYTES {
                if let Some(tx) = db.take() {
                    tx.commit()?;
                }
                pending = 0;
            }
            progress(done);
        }
        if let Some(tx) = db.take() {
            tx.commit()?;
        }
        Ok(())
    })
}

/// How many threads read files for a writer given `threads` in all: one fewer, at least one.
fn readers(threads: usize) -> usize {
    threads.saturating_sub(1).max(1)
}

#[cfg(test)]
#[test]
fn one_thread_is_left_to_the_writer() {
    assert_eq!([1, 2, 3, 8].map(readers), [1, 1, 2, 7]);
}

/// Whether an entry of file `file` has the id `id`.
fn has_entry(conn: &Connection, file: i64, id: &str) -> rusqlite::Result<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM docs WHERE file = ?1 AND entry_id = ?2")?
        .query_row(params![file, id], |_| Ok(()))
        .optional()?
        .is_some())
}

/// What [`append`] did.
enum Appended {
    /// The file must be read whole; nothing was written.
    Whole,
    /// The file's new state, and what changed (`None`: no new complete line).
    Done(FileState, Option<Change>),
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
fn append(
    tx: &Transaction,
    path: &Path,
    old: &FileState,
    stat: Stat,
    blobs: Option<&gjcfs_engine::blob::BlobStore>,
) -> rusqlite::Result<Appended> {
    let Some(mark) = old.mark.as_ref().filter(|_| old.incremental) else {
        return Ok(Appended::Whole);
    };
    if (stat.dev, stat.ino) != (mark.id.dev, mark.id.ino) || stat.len < mark.end {
        return Ok(Appended::Whole);
    }
    let Ok(file) = FileStorage.open_read_at(path) else {
        return Ok(Appended::Whole);
    };
    let read = || -> io::Result<Option<(ReadMark, Option<gjcfs_engine::lines::Lines>)>> {
        if file.id() != mark.id {
            return Ok(None);
        }
        let size = file.size()?;
        let tail_at = mark.end - mark.tail.len() as u64;
        if read_exact_at(file.as_ref(), tail_at, mark.tail.len())?.as_deref() != Some(&mark.tail) {
            return Ok(None);
        }
        let mut next = mark.clone();
        if size == mark.end {
            return Ok(Some((next, None)));
        }
        if mark.torn() {
            match read_exact_at(file.as_ref(), mark.end, 1)? {
                Some(byte) if byte == b"\n" => next.advance(b"\n"),
                _ => return Ok(None),
            }
        }
        let Some(newline) = last_newline(file.as_ref(), next.end, size)? else {
            return Ok(Some((next, None)));
        };
        let end = newline + 1;
        let lines = read_lines(file.as_ref(), next.end, end, next.newlines + 1);
        if lines.error.is_some() || lines.end < end {
            return Ok(None);
        }
        next.advance_by(end - next.end, lines.newlines, &lines.tail);
        Ok(Some((next, Some(lines))))
    };
    let Ok(Some((next, lines))) = read() else {
        return Ok(Appended::Whole);
    };
    let facts = tx.query_row(
        "SELECT session_id, cwd, title, created, first_prompt FROM files WHERE id = ?1",
        [old.id],
        |r| {
            Ok(SessionFacts {
                session_id: r.get(0)?,
                cwd: r.get(1)?,
                title: r.get(2)?,
                created: r.get(3)?,
                first_prompt: r.get(4)?,
            })
        },
    )?;
    let complete_lines = lines.is_some();
    let mut replay = Replay {
        tx,
        blobs,
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
    // The path to the new leaf, and whether a new entry's parent is missing.
    let mut incremental = old.incremental;
    let mut leaf = old.leaf.clone();
    let known = |id: &str| has_entry(tx, old.id, id);
    for row in &new_rows {
        if let Some(parent) = &row.parent_id {
            if !by_id.contains_key(parent) && !known(parent)? {
                incremental = false;
            }
        }
    }
    if let Some(last) = new_rows.len().checked_sub(1) {
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
                    None if old.leaf.as_ref().is_some_and(|l| &l.1 == parent) => {
                        break Join::OldLeaf
                    }
                    None if known(parent)? => break Join::Entry(parent.clone()),
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
        leaf = row.entry_id.clone().map(|id| (row.seq, id));
    }
    for row in &new_rows {
        insert_row(tx, old.id, row)?;
    }
    let terms = distinct_words(new_rows.iter().chain(edits.values()));
    add_terms(tx, terms.iter().map(String::as_str), &mut Known::default())?;
    for (doc, row) in &edits {
        delete_text(tx, *doc)?;
        let text = &row.text;
        tx.prepare_cached("UPDATE docs SET text = ?2, kind = ?3 WHERE id = ?1")?
            .execute(params![doc, (!text.is_empty()).then_some(text), row.kind])?;
        if !text.is_empty() {
            insert_text(tx, *doc, row)?;
        }
    }
    if new_facts.title != facts.title {
        let mut title = tx.prepare_cached("SELECT id FROM docs WHERE file = ?1 AND seq = 0")?;
        let ids: Vec<i64> = title
            .query_map([old.id], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        for doc in ids {
            delete_text(tx, doc)?;
            tx.prepare_cached("DELETE FROM docs WHERE id = ?1")?
                .execute([doc])?;
        }
        if let Some(row) = title_row(&new_facts) {
            insert_row(tx, old.id, &row)?;
            let terms = distinct_words([&row]);
            add_terms(tx, terms.iter().map(String::as_str), &mut Known::default())?;
        }
    }
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
    Ok(Appended::Done(state, change))
}

/// Appended records being replayed on top of a file's indexed ones.
struct Replay<'t> {
    tx: &'t Transaction<'t>,
    blobs: Option<&'t gjcfs_engine::blob::BlobStore>,
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
                    if let Some(cwd) = patch.get_str("cwd") {
                        self.facts.cwd = cwd.to_owned();
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
                self.rows.push(row_of(seq, &record, self.blobs));
                if self.facts.first_prompt.is_none() {
                    self.facts.first_prompt = gjcfs_engine::discovery::user_text(&record);
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
                self.rows[k] = row_of(seq, record, self.blobs);
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
            self.edits
                .insert(doc, row_of(0, &Record::new(fields), self.blobs));
        }
        Ok(())
    }
}
