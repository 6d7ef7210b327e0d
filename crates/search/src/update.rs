//! Writing files into the index: whole ([`super::prepare`]), or only the lines appended
//! since they were indexed ([`super::append`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use rusqlite::{Connection, OptionalExtension, Transaction};

use super::ahead::{Ahead, Closer, AHEAD_BYTES};
use super::append::{append, Appended};
use super::doc_rows::{delete_text, insert_row, write_file_row};
use super::file_rows::{load_state, path_bytes};
use super::lock_wait::LockWait;
use super::prepare::{prepare, Batch, Prepared};
use super::schema::{set_cache, CacheFor};
use super::substring::{add_terms, drop_unused, Dropped, Known};
use super::touch_rows::delete_file_touches;
use super::{Change, FileState, Inner, Progress, SessionChange, Source, UpdateReport};
use gjcfs_engine::read::load::LoadError;
use gjcfs_engine::storage::FileVersion;

/// Text written in one transaction before it is committed, in bytes.
const COMMIT_BYTES: u64 = 64 << 20;

/// Drops a file and everything indexed of it.
pub fn remove(inner: &mut Inner, path: &Path) -> rusqlite::Result<()> {
    remove_files(inner, std::slice::from_ref(&path))
}

/// Drops the files of `paths` and everything indexed of them, in one transaction: the word
/// index's pages and the vocabulary's words that several files share are rewritten and
/// looked up once (200 sessions of 54 KB: docs/benchmarks-archive.md, "Search: erasing").
fn remove_files(inner: &mut Inner, paths: &[&Path]) -> rusqlite::Result<()> {
    let tx = begin(&inner.conn, &inner.lock_wait)?;
    let mut dropped = Dropped::default();
    for path in paths {
        if let Some(id) = file_id(&tx, path)? {
            delete_file(&tx, id, &mut dropped)?;
        }
    }
    let erased = drop_unused(&tx, dropped, &mut Known::default())?;
    tx.commit()?;
    inner.erased |= erased;
    for path in paths {
        inner.files.remove(path);
    }
    Ok(())
}

/// Empties the write-ahead log once text was deleted ([`Inner::erased`]): its frames keep
/// the pages as they were written, the deleted text included, until the log is overwritten.
/// A checkpoint copies the newest version of each page into the database file (where
/// `secure_delete` zeroed what was deleted) and truncates the log. While another connection
/// writes, or reads an older snapshot, for longer than the operation may still wait, the log
/// is left as it is and the next operation tries again.
pub fn scrub_log(inner: &mut Inner) -> rusqlite::Result<()> {
    if !inner.erased {
        return Ok(());
    }
    let conn = &inner.conn;
    let checkpoint = inner.lock_wait.waiting(conn, || {
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            r.get::<_, i64>(0)
        })
    });
    match checkpoint {
        // 0: the log was copied whole and truncated.
        Ok(0) => inner.erased = false,
        Ok(_) => {}
        Err(e) if super::index_file::is_busy(&e) => {}
        Err(e) => return Err(e),
    }
    Ok(())
}

/// Begins a transaction that may change the `files` table. Its first statement counts it
/// in `meta.files_gen`, so that the listing the last update recorded
/// ([`super::listing`]) no longer counts as agreeing with the table. (Triggers on `files`
/// could count within each statement, but a statement that fires a trigger opens a
/// savepoint, and FTS5 writes out its buffered terms at every savepoint: a first build took
/// twice as long.)
/// Its first statement takes the write lock, waiting at most what the operation has left
/// ([`LockWait`]).
fn begin<'c>(conn: &'c Connection, wait: &LockWait) -> rusqlite::Result<Transaction<'c>> {
    let tx = conn.unchecked_transaction()?;
    wait.waiting(conn, || {
        tx.prepare_cached("UPDATE meta SET files_gen = files_gen + 1 WHERE id = 1")?
            .execute([])
    })?;
    Ok(tx)
}

/// Drops the files of `paths` ([`remove_files`]) with the page cache of an update
/// ([`CacheFor`]), unless another connection held the write lock for the operation's whole
/// wait ([`UpdateReport::busy`]: nothing more is written then); each is reported removed.
pub fn remove_unless_busy(
    inner: &mut Inner,
    paths: Vec<PathBuf>,
    report: &mut UpdateReport,
) -> rusqlite::Result<()> {
    if paths.is_empty() {
        return Ok(());
    }
    set_cache(&inner.conn, CacheFor::Update)?;
    let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let removed = remove_files(inner, &refs);
    set_cache(&inner.conn, CacheFor::Queries)?;
    match removed {
        Err(e) if super::index_file::is_busy(&e) => report.busy = true,
        done => done?,
    }
    report
        .changes
        .extend(paths.into_iter().map(|path| SessionChange {
            path,
            change: Change::Removed,
        }));
    Ok(())
}

fn file_id(conn: &Connection, path: &Path) -> rusqlite::Result<Option<i64>> {
    conn.query_row(
        "SELECT id FROM files WHERE path = ?1",
        [path_bytes(path)],
        |r| r.get(0),
    )
    .optional()
}

/// Deletes file `id`'s rows, its documents' words and touches, noting them in `dropped`.
fn delete_file(conn: &Connection, id: i64, dropped: &mut Dropped) -> rusqlite::Result<()> {
    if delete_file_touches(conn, id)? {
        dropped.note_erased();
    }
    let mut docs =
        conn.prepare_cached("SELECT id FROM docs WHERE file = ?1 AND text IS NOT NULL")?;
    let ids: Vec<i64> = docs
        .query_map([id], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    for doc in ids {
        delete_text(conn, doc, dropped)?;
    }
    conn.prepare_cached("DELETE FROM docs WHERE file = ?1")?
        .execute([id])?;
    conn.prepare_cached("DELETE FROM files WHERE id = ?1")?
        .execute([id])?;
    Ok(())
}

/// Replaces what is indexed of a file by a whole read of it, its rows as they arrive in
/// `batches`; `known` as [`add_terms`]. Returns the file's new state, the bytes of text
/// written, and whether text indexed before was deleted.
fn write_prepared(
    conn: &Connection,
    prepared: &Prepared,
    batches: &mpsc::Receiver<Batch>,
    known: &mut Known,
) -> rusqlite::Result<(FileState, u64, bool)> {
    let mut dropped = Dropped::default();
    if let Some(old) = file_id(conn, &prepared.path)? {
        delete_file(conn, old, &mut dropped)?;
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
    let erased = drop_unused(conn, dropped, known)?;
    Ok((state, text, erased))
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
    source: &Source,
    to_writer: &mpsc::Sender<(usize, Read)>,
) -> bool {
    let (prepared, rows) = match prepare(source, path) {
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
    changed: Vec<(PathBuf, FileVersion)>,
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
    changed: Vec<(PathBuf, FileVersion)>,
    threads: usize,
    progress: &dyn Fn(Progress),
    report: &mut UpdateReport,
) -> rusqlite::Result<()> {
    let mut whole = append_known(inner, changed, report)?;
    if whole.is_empty() {
        return Ok(());
    }
    // Oldest first, and written in that order: the index's newest documents are those of
    // the sessions written last, which is the window a common query is ranked over.
    whole.sort_by_key(|w| w.stat.mtime_ns);
    write_whole(inner, &whole, threads, progress, report)
}

/// A file to read whole, with its stat now and whether it was indexed before.
struct Whole {
    path: PathBuf,
    stat: FileVersion,
    known: bool,
}

/// Indexes the lines appended to the files indexed before, each in a transaction of its
/// own; returns the files that must be read whole instead, with the new ones.
fn append_known(
    inner: &mut Inner,
    changed: Vec<(PathBuf, FileVersion)>,
    report: &mut UpdateReport,
) -> rusqlite::Result<Vec<Whole>> {
    let mut whole = Vec::new();
    for (path, stat) in changed {
        if !inner.files.contains(&path) {
            whole.push(Whole {
                path,
                stat,
                known: false,
            });
            continue;
        }
        let tx = begin(&inner.conn, &inner.lock_wait)?;
        // By its path: another connection may have indexed it anew (another row) since the
        // stamps were read, or dropped it.
        let Some(id) = file_id(&tx, &path)? else {
            drop(tx);
            inner.files.remove(&path);
            whole.push(Whole {
                path,
                stat,
                known: false,
            });
            continue;
        };
        let old = load_state(&tx, id)?;
        match append(&tx, &path, &old, stat, &inner.source)? {
            Appended::Whole => {
                drop(tx);
                whole.push(Whole {
                    path,
                    stat,
                    known: true,
                });
            }
            Appended::Done(state, change, erased) => {
                tx.commit()?;
                inner.erased |= erased;
                inner.files.insert(&path, state.stamp());
                match change {
                    Some(change) => report.changes.push(SessionChange { path, change }),
                    None => report.unchanged += 1,
                }
            }
        }
    }
    Ok(whole)
}

/// Reads the files of `whole` on reading threads and writes them on this one, in order.
fn write_whole(
    inner: &mut Inner,
    whole: &[Whole],
    threads: usize,
    progress: &dyn Fn(Progress),
    report: &mut UpdateReport,
) -> rusqlite::Result<()> {
    let total = Progress {
        files_done: 0,
        files_total: whole.len(),
        bytes_done: 0,
        bytes_total: whole.iter().map(|w| w.stat.len).sum(),
    };
    progress(total);
    // This thread writes the index, the busiest of all: the others read, one core fewer
    // (on two cores, a second reading thread took the writer's core from it and a build of
    // 10,000 sessions took 13.5–14.3 s instead of 10.7–11.4 s).
    let threads = readers(threads).min(whole.len());
    // Each file counts a page at least: empty files are not read ahead without bound.
    let lens: Vec<u64> = whole.iter().map(|w| w.stat.len.max(4096)).collect();
    // Two files ahead of the writer, the reader waited while the writer flushed or
    // committed: 10,000 sessions took 10.1–12.1 s instead of 9.0–10.3 s (alternating
    // builds; 93 MB at most in memory instead of 164 MB).
    let reading = Ahead::new(&lens, AHEAD_BYTES);
    let source = &inner.source;
    std::thread::scope(|scope| -> rusqlite::Result<()> {
        // A reader sends its next file only once every row of this one is sent, and the
        // writer takes a file's rows while it writes the file.
        let (tx, rx) = mpsc::channel::<(usize, Read)>();
        for _ in 0..threads {
            let tx = tx.clone();
            let reading = &reading;
            scope.spawn(move || {
                let _stops_all = Closer::on_panic(reading);
                while let Some(k) = reading.claim() {
                    if !read_and_send(k, &whole[k].path, source, &tx) {
                        return;
                    }
                }
            });
        }
        drop(tx);
        let _readers_stop = Closer::always(&reading);
        let mut writer = Writer {
            conn: &inner.conn,
            wait: &inner.lock_wait,
            files: &mut inner.files,
            erased: &mut inner.erased,
            report,
            db: None,
            pending: 0,
            vocabulary: Known::default(),
        };
        let mut done = total;
        for (k, read) in in_order(rx) {
            let file = &whole[k];
            done.files_done += 1;
            done.bytes_done += file.stat.len;
            writer.write(file, read)?;
            reading.written(k);
            progress(done);
        }
        writer.commit()
    })
}

/// The files read ahead, in the order of their numbers, whatever order they arrive in.
fn in_order(received: mpsc::Receiver<(usize, Read)>) -> impl Iterator<Item = (usize, Read)> {
    let mut ahead: BTreeMap<usize, Read> = BTreeMap::new();
    let mut next = 0;
    let mut received = received.into_iter();
    std::iter::from_fn(move || {
        let read = match ahead.remove(&next) {
            Some(read) => read,
            None => loop {
                let (k, read) = received.next()?;
                if k == next {
                    break read;
                }
                ahead.insert(k, read);
            },
        };
        next += 1;
        Some((next - 1, read))
    })
}

/// The writing end of an update: files written in transactions of about
/// [`COMMIT_BYTES`] of text.
struct Writer<'a> {
    conn: &'a Connection,
    wait: &'a LockWait,
    files: &'a mut super::Stamps,
    /// [`Inner::erased`](super::Inner).
    erased: &'a mut bool,
    report: &'a mut UpdateReport,
    db: Option<Transaction<'a>>,
    /// Text written in the open transaction, in bytes.
    pending: u64,
    /// The words in the vocabulary by the open transaction: another connection may drop a
    /// word between two transactions ([`drop_unused`]).
    vocabulary: Known,
}

impl Writer<'_> {
    /// Writes one file read whole, or drops what was indexed of it when it could not be
    /// read.
    fn write(&mut self, file: &Whole, read: Read) -> rusqlite::Result<()> {
        let tx = match &self.db {
            Some(tx) => tx,
            None => {
                self.vocabulary.clear();
                self.db.insert(begin(self.conn, self.wait)?)
            }
        };
        match read {
            Ok((prepared, batches)) => {
                let (state, text, erased) =
                    write_prepared(tx, &prepared, &batches, &mut self.vocabulary)?;
                *self.erased |= erased;
                self.pending += text;
                self.files.insert(&file.path, state.stamp());
                let change = if file.known {
                    Change::Reindexed
                } else {
                    Change::Added
                };
                self.report.changes.push(SessionChange {
                    path: file.path.clone(),
                    change,
                });
            }
            Err(e) => {
                // What was indexed of it is no longer what it holds.
                let mut dropped = Dropped::default();
                if let Some(id) = file_id(tx, &file.path)? {
                    delete_file(tx, id, &mut dropped)?;
                }
                *self.erased |= drop_unused(tx, dropped, &mut self.vocabulary)?;
                self.files.remove(&file.path);
                self.report.failed.push((file.path.clone(), e));
            }
        }
        if self.pending >= COMMIT_BYTES {
            self.pending = 0;
            return self.commit();
        }
        Ok(())
    }

    /// Commits the open transaction, if there is one.
    fn commit(&mut self) -> rusqlite::Result<()> {
        match self.db.take() {
            Some(tx) => tx.commit(),
            None => Ok(()),
        }
    }
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
