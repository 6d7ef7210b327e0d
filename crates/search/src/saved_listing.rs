//! The listing of the store the last update recorded ([`Listing`]), kept in the `listing`
//! table: read, written whole or patched, and replaced.

use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};

use super::listing::{stat_bytes, Listing};
use super::scan::Look;
use super::Stamps;

/// The listing recorded by the last update ([`Listing`]) if it still agrees with `files`
/// (no transaction changed `files` since); `None` otherwise, or when it does not decode.
///
/// The bytes are read with SQLite's blob reads straight into one buffer (a column read of a
/// listing of 10,000 files first assembled it in another, a third of the read's time), in
/// one read transaction with the check that it agrees.
pub fn read_listing(conn: &Connection) -> rusqlite::Result<Option<Listing>> {
    let tx = Transaction::new_unchecked(conn, TransactionBehavior::Deferred)?;
    let len: Option<i64> = tx
        .prepare_cached(
            "SELECT length(l.data) FROM listing l \
             JOIN meta m ON m.id = 1 AND l.files_gen = m.files_gen WHERE l.id = 1",
        )?
        .query_row([], |r| r.get(0))
        .optional()?;
    let Some(len) = len.and_then(|n| usize::try_from(n).ok()) else {
        return Ok(None);
    };
    let blob = tx.blob_open(rusqlite::MAIN_DB, c"listing", c"data", 1, true)?;
    let mut data = vec![0; len];
    let read = blob.read_at(&mut data, 0)?;
    drop(blob);
    tx.commit()?;
    Ok((read == len).then(|| Listing::decode(data)).flatten())
}

/// Records the listing of `look` with the stats of `files`, the stamps read when
/// `PRAGMA data_version` was `files_version` and kept up to date with this connection's
/// changes since. Nothing is recorded when another connection changed the index since then
/// (its changes may not be in `files`): the listing must agree with the table. `last` is
/// the listing read before this connection's changes: when the new one has its shape, only
/// the stats that changed are written into it, not the whole listing again.
pub fn write_listing(
    conn: &Connection,
    look: &Look,
    last: Option<&Listing>,
    files: &Stamps,
    files_version: i64,
) -> rusqlite::Result<()> {
    // The write lock first: no other connection commits until this one does.
    let tx = Transaction::new_unchecked(conn, TransactionBehavior::Immediate)?;
    let version: i64 = tx.query_row("PRAGMA data_version", [], |r| r.get(0))?;
    if version != files_version {
        return Ok(());
    }
    let gen: i64 = tx.query_row("SELECT files_gen FROM meta WHERE id = 1", [], |r| r.get(0))?;
    match last.and_then(|l| look.patches(l, files)) {
        Some(writes) => {
            // `last` is still the row: only this connection wrote since it was read.
            let mut blob = tx.blob_open(rusqlite::MAIN_DB, c"listing", c"data", 1, false)?;
            for (at, stat) in writes {
                blob.write_at(&stat_bytes(&stat), at)?;
            }
            drop(blob);
            tx.prepare_cached("UPDATE listing SET files_gen = ?1 WHERE id = 1")?
                .execute([gen])?;
        }
        None => {
            tx.prepare_cached(
                "INSERT OR REPLACE INTO listing(id, files_gen, data) VALUES (1, ?1, ?2)",
            )?
            .execute(params![gen, look.listing(files)])?;
        }
    }
    tx.commit()
}

/// Replaces the listing by the encoded listing `new`, if it still agrees with `files`.
pub fn replace_listing(conn: &Connection, new: &[u8]) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "UPDATE listing SET data = ?1 WHERE id = 1 \
         AND files_gen = (SELECT files_gen FROM meta WHERE id = 1)",
    )?
    .execute([new])?;
    Ok(())
}
