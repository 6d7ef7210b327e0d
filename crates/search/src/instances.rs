//! How many times each phrase of a word query occurs in a matching document, from the word
//! index itself: an FTS5 auxiliary function, [`FUNCTION`]`(words)`, that gives the count of
//! each phrase of the `MATCH` expression, in its order, as little-endian `u32`s in a blob.
//!
//! The word index holds each document's words ([`super::words`]) with their positions, and
//! a query's terms are its phrases in order ([`super::query::words_match`]), so these are
//! the occurrences the text would give ([`super::occurrences`]) without reading the text:
//! ranking a common query's window ([`super::rank`]) needs no document's text but those of
//! the hits shown.
//!
//! The function is registered on each connection ([`register`]) through FTS5's C API,
//! which SQLite hands out as a pointer bound to `SELECT fts5(?)`; that and the callback are
//! the only code here outside Rust's checks, each step with its own safety note.

use std::ffi::{c_int, c_void};
use std::ptr;

use rusqlite::ffi;
use rusqlite::Connection;

/// The name of the function in SQL.
pub const FUNCTION: &str = "gjcfs_phrase_counts";

/// Registers [`FUNCTION`] on `conn`.
pub fn register(conn: &Connection) -> rusqlite::Result<()> {
    let api = fts5_api(conn)?;
    let name = std::ffi::CString::new(FUNCTION).map_err(rusqlite::Error::NulError)?;
    // SAFETY: `api` is the live FTS5 API of this connection (checked non-null, and of a
    // version with `xCreateFunction`); the name is NUL-terminated and FTS5 copies it; no
    // user data, so nothing to destroy; `phrase_counts` has the signature FTS5 calls.
    let rc = unsafe {
        match (*api).xCreateFunction {
            Some(create) => create(
                api,
                name.as_ptr(),
                ptr::null_mut(),
                Some(phrase_counts),
                None,
            ),
            None => ffi::SQLITE_MISUSE,
        }
    };
    check(conn, rc)
}

/// The connection's FTS5 API: the pointer `SELECT fts5(?1)` writes into the variable bound
/// to `?1` as an `fts5_api_ptr`.
fn fts5_api(conn: &Connection) -> rusqlite::Result<*mut ffi::fts5_api> {
    let mut api: *mut ffi::fts5_api = ptr::null_mut();
    let mut stmt: *mut ffi::sqlite3_stmt = ptr::null_mut();
    // SAFETY: the handle is this connection's and outlives the statement, which is
    // finalised before returning whatever happened; the SQL is NUL-terminated; the bound
    // pointer is to `api`, which outlives the step that writes it, with the type name FTS5
    // looks for and no destructor.
    let rc = unsafe {
        let db = conn.handle();
        let mut rc = ffi::sqlite3_prepare_v2(
            db,
            c"SELECT fts5(?1)".as_ptr(),
            -1,
            &mut stmt,
            ptr::null_mut(),
        );
        if rc == ffi::SQLITE_OK {
            rc = ffi::sqlite3_bind_pointer(
                stmt,
                1,
                ptr::addr_of_mut!(api).cast::<c_void>(),
                c"fts5_api_ptr".as_ptr(),
                None,
            );
        }
        if rc == ffi::SQLITE_OK {
            rc = match ffi::sqlite3_step(stmt) {
                ffi::SQLITE_ROW | ffi::SQLITE_DONE => ffi::SQLITE_OK,
                other => other,
            };
        }
        ffi::sqlite3_finalize(stmt);
        rc
    };
    check(conn, rc)?;
    // SAFETY: a non-null `api` points at FTS5's API structure, which lives as long as the
    // connection.
    if api.is_null() || unsafe { (*api).iVersion } < 2 {
        return Err(rusqlite::Error::SqliteFailure(
            ffi::Error::new(ffi::SQLITE_ERROR),
            Some("this SQLite has no FTS5 API of version 2 or later".to_owned()),
        ));
    }
    Ok(api)
}

fn check(conn: &Connection, rc: c_int) -> rusqlite::Result<()> {
    if rc == ffi::SQLITE_OK {
        return Ok(());
    }
    // SAFETY: the handle is this connection's; the message is copied out at once.
    let message = unsafe {
        let text = ffi::sqlite3_errmsg(conn.handle());
        (!text.is_null()).then(|| {
            std::ffi::CStr::from_ptr(text)
                .to_string_lossy()
                .into_owned()
        })
    };
    Err(rusqlite::Error::SqliteFailure(ffi::Error::new(rc), message))
}

/// The callback FTS5 runs for each row: counts the instances of each phrase and returns
/// them as a blob.
unsafe extern "C" fn phrase_counts(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    ctx: *mut ffi::sqlite3_context,
    _values: c_int,
    _args: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: FTS5 passes its extension API and the row's context, valid during the call;
    // the output variables are locals; the result blob is copied by SQLite
    // (SQLITE_TRANSIENT) before `out` is dropped.
    unsafe {
        let api = &*api;
        let (Some(phrases), Some(inst_count), Some(inst)) =
            (api.xPhraseCount, api.xInstCount, api.xInst)
        else {
            ffi::sqlite3_result_error_code(ctx, ffi::SQLITE_MISUSE);
            return;
        };
        let mut counts = vec![0u32; usize::try_from(phrases(fts)).unwrap_or(0)];
        let mut n: c_int = 0;
        let mut rc = inst_count(fts, &mut n);
        for i in 0..n {
            if rc != ffi::SQLITE_OK {
                break;
            }
            let (mut phrase, mut column, mut offset) = (0, 0, 0);
            rc = inst(fts, i, &mut phrase, &mut column, &mut offset);
            if let Some(c) = usize::try_from(phrase).ok().and_then(|p| counts.get_mut(p)) {
                *c += 1;
            }
        }
        if rc != ffi::SQLITE_OK {
            ffi::sqlite3_result_error_code(ctx, rc);
            return;
        }
        let out: Vec<u8> = counts.iter().flat_map(|c| c.to_le_bytes()).collect();
        ffi::sqlite3_result_blob(
            ctx,
            out.as_ptr().cast::<c_void>(),
            c_int::try_from(out.len()).unwrap_or(0),
            ffi::SQLITE_TRANSIENT(),
        );
    }
}

/// The counts [`FUNCTION`] gave, one per phrase; `None` for a blob of another length.
pub fn decode(blob: &[u8], phrases: usize) -> Option<Vec<u32>> {
    if blob.len() != phrases * 4 {
        return None;
    }
    Some(
        blob.chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index_file::open_memory;
    use crate::occurrences::for_each_occurrence;
    use crate::query::{words_match, Query};
    use crate::words::index_text;
    use proptest::prelude::*;
    use std::ops::ControlFlow;

    /// The counts the function gives for each document of `docs` that matches `q`, by
    /// document number, next to the counts of its occurrences in the text.
    fn both(docs: &[String], q: &str) -> Vec<(i64, Vec<u32>, Vec<u32>)> {
        let conn = open_memory().unwrap();
        for (k, text) in docs.iter().enumerate() {
            conn.execute(
                "INSERT INTO words(rowid, text) VALUES (?1, ?2)",
                rusqlite::params![k as i64 + 1, index_text(text)],
            )
            .unwrap();
        }
        let Query::Terms(terms) = Query::parse(q).unwrap() else {
            unreachable!()
        };
        let sql = format!("SELECT rowid, {FUNCTION}(words) FROM words WHERE words MATCH ?1");
        let mut stmt = conn.prepare(&sql).unwrap();
        let rows = stmt
            .query_map([words_match(&terms)], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?))
            })
            .unwrap();
        rows.map(|row| {
            let (id, blob) = row.unwrap();
            let mut tf = vec![0; terms.len()];
            for_each_occurrence(&docs[id as usize - 1], &terms, |o| {
                tf[o.term] += 1;
                ControlFlow::Continue(())
            });
            (id, decode(&blob, terms.len()).unwrap(), tf)
        })
        .collect()
    }

    #[test]
    fn each_phrase_is_counted_as_it_occurs() {
        let docs = [
            "Torn line, torn-line; PARSER torn".to_owned(),
            "a a a, b a".to_owned(),
            "nothing here".to_owned(),
        ];
        let got = both(&docs, "\"torn line\" parser");
        assert_eq!(got, [(1, vec![2, 1], vec![2, 1])]);
        assert_eq!(both(&docs, "\"a a\""), [(2, vec![2], vec![2])]);
        assert_eq!(both(&docs, "a b"), [(2, vec![4, 1], vec![4, 1])]);
    }

    #[test]
    fn a_blob_of_another_length_decodes_to_nothing() {
        assert_eq!(decode(&[1, 0, 0, 0, 2, 0, 0, 0], 2), Some(vec![1, 2]));
        assert_eq!(decode(&[1, 0, 0, 0], 2), None);
        assert_eq!(decode(&[], 0), Some(vec![]));
    }

    proptest! {
        #[test]
        fn the_counts_are_the_occurrences_in_the_text(
            docs in proptest::collection::vec("[abcAB .,é-]{0,30}", 1..6),
            q in prop_oneof![
                Just("a"), Just("\"a a\""), Just("\"a b\" a"), Just("\"b a b\""),
                Just("é \"a é\""), Just("\"a a a\" \"a a\""), Just("c b"),
            ],
        ) {
            for (id, counted, occurring) in both(&docs, q) {
                prop_assert_eq!(&counted, &occurring, "document {}", id);
                prop_assert!(counted.iter().all(|&n| n > 0));
            }
        }
    }
}
