//! The `touches` rows an update writes with a document ([`super::touches`]), and deletes
//! with it.

use rusqlite::{params, Connection};

use super::touches::Touch;

/// Writes the touches of document `doc`, in order.
pub(super) fn insert_touches(
    conn: &Connection,
    doc: i64,
    touches: &[Touch],
) -> rusqlite::Result<()> {
    for touch in touches {
        conn.prepare_cached(
            "INSERT INTO touches(doc, action, source, written, resolved) VALUES (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(params![
            doc,
            touch.action.as_str(),
            touch.source,
            touch.written,
            touch.resolved
        ])?;
    }
    Ok(())
}

/// Deletes the touches of document `doc`; whether it had any.
pub(super) fn delete_doc_touches(conn: &Connection, doc: i64) -> rusqlite::Result<bool> {
    let deleted = conn
        .prepare_cached("DELETE FROM touches WHERE doc = ?1")?
        .execute([doc])?;
    Ok(deleted > 0)
}

/// Deletes the touches of every document of file `file` (before its documents); whether it
/// had any.
pub(super) fn delete_file_touches(conn: &Connection, file: i64) -> rusqlite::Result<bool> {
    let deleted = conn
        .prepare_cached("DELETE FROM touches WHERE doc IN (SELECT id FROM docs WHERE file = ?1)")?
        .execute([file])?;
    Ok(deleted > 0)
}
