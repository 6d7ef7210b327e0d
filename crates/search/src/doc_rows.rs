//! The rows an update writes for a file: its documents, their words and the files they
//! touched, and its `files` row.

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension};

use super::file_rows::path_bytes;
use super::file_rows::version_columns;
use super::prepare::{Row, SessionFacts};
use super::stored_text::{stored, text_of};
use super::substring::Dropped;
use super::touch_rows::insert_touches;
use super::words::index_text;
use super::FileState;
use gjcfs_engine::read::load::ReadMark;
use gjcfs_engine::storage::FileVersion;

/// Deletes the words of document `doc` (its row of `docs` not deleted yet) from the word
/// index, and notes them in `dropped` (the caller drops those no document holds any more:
/// [`drop_unused`]). The contentless word index is given the words it was given
/// ([`insert_text`]: a document with text has a row, made of its words), which its
/// secure-delete option removes from the file.
///
/// [`drop_unused`]: super::substring::drop_unused
pub(super) fn delete_text(
    conn: &Connection,
    doc: i64,
    dropped: &mut Dropped,
) -> rusqlite::Result<()> {
    let text = conn
        .prepare_cached("SELECT text FROM docs WHERE id = ?1")?
        .query_row([doc], |r| text_of(r.get_ref(0)?))
        .optional()?
        .flatten();
    let Some(text) = text.filter(|t| !t.is_empty()) else {
        return Ok(());
    };
    let words = index_text(&text);
    conn.prepare_cached("INSERT INTO words(words, rowid, text) VALUES ('delete', ?1, ?2)")?
        .execute(params![doc, words])?;
    dropped.add_words(&words);
    Ok(())
}

/// Indexes the words of document `doc` ([`Row::words`]); the caller adds them to the
/// vocabulary ([`add_terms`]).
pub(super) fn insert_text(conn: &Connection, doc: i64, row: &Row) -> rusqlite::Result<()> {
    conn.prepare_cached("INSERT INTO words(rowid, text) VALUES (?1, ?2)")?
        .execute(params![doc, row.words])?;
    Ok(())
}

/// The kind `docs` holds of a row: `NULL` where it is the entry type (every entry but a
/// message), which readers take instead ([`super::matches::KIND`]).
pub(super) fn held_kind(row: &Row) -> Option<&str> {
    (row.kind != row.entry_type).then_some(row.kind.as_str())
}

/// Writes the document of `row` in file `file`: its row, its words and its touches.
pub(super) fn insert_row(conn: &Connection, file: i64, row: &Row) -> rusqlite::Result<()> {
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
        held_kind(row),
        row.time_ms,
        row.on_leaf,
        stored(&row.text)
    ])?;
    let doc = conn.last_insert_rowid();
    if !row.text.is_empty() {
        insert_text(conn, doc, row)?;
    }
    insert_touches(conn, doc, &row.touches)
}

/// Writes the `files` row of `path` (inserted, or updated when `id` is given) and returns
/// its state.
#[allow(clippy::too_many_arguments)]
pub(super) fn write_file_row(
    conn: &Connection,
    id: Option<i64>,
    path: &Path,
    stat: FileVersion,
    mark: Option<&ReadMark>,
    incremental: bool,
    next_seq: i64,
    leaf: Option<&(i64, String)>,
    facts: &SessionFacts,
) -> rusqlite::Result<FileState> {
    let [dev, ino, len, mtime_ns, ctime_ns] = version_columns(&stat);
    let values = params![
        path_bytes(path),
        dev,
        ino,
        len,
        mtime_ns,
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
        ctime_ns,
    ];
    conn.prepare_cached(
        "INSERT INTO files(path, dev, ino, len, mtime_ns, mark_end, mark_newlines, mark_tail, \
         patches_apply, incremental, next_seq, leaf_seq, leaf_id, session_id, cwd, title, created, id, \
         first_prompt, ctime_ns) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, \
         ?20) \
         ON CONFLICT(id) DO UPDATE SET dev=?2, ino=?3, len=?4, mtime_ns=?5, mark_end=?6, \
         mark_newlines=?7, mark_tail=?8, patches_apply=?9, incremental=?10, next_seq=?11, \
         leaf_seq=?12, leaf_id=?13, session_id=?14, cwd=?15, title=?16, created=?17, \
         first_prompt=?19, ctime_ns=?20",
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
