//! How a document's text is held in `docs.text`: a text of fewer than [`COMPRESS_FROM`]
//! bytes, or one that zstd does not shrink, as SQL `TEXT`; any other as a `BLOB` holding
//! one zstd frame (level [`LEVEL`]) that records the text's length in its header. The
//! value's SQL type tells which, so every reader goes through [`text_of`], and [`len_of`]
//! gives a text's length from the frame's header without decoding it.
//!
//! Measured on 10,000 generated sessions (docs/benchmarks-archive.md, "Search"): the
//! documents' text is 40 % of the index; zstd at level 1 keeps 61 % of it (lz4 kept 80 %,
//! deflate 60 % at a third of the speed), at about 80 MB/s on one core of the machine
//! there. The thread writing the index compresses ([`super::doc_rows`]): the threads
//! reading sessions had more to do, and the build kept its pace.
//!
//! The index is a cache: a blob that does not decode to UTF-8 text is damage, reported as
//! [`rusqlite::ErrorCode::DatabaseCorrupt`] so that the index is made anew.

use std::cell::RefCell;

use rusqlite::types::{Value, ValueRef};

/// The shortest text that is compressed: below it zstd's frame costs more than it saves.
pub const COMPRESS_FROM: usize = 64;
/// zstd's level: its fastest that still halves prose (negative levels kept 80–90 %).
pub const LEVEL: i32 = 1;

thread_local! {
    /// Each thread's compressor: making one costs more than compressing a short text.
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> =
        RefCell::new(zstd::bulk::Compressor::new(LEVEL).ok());
}

/// The value `docs.text` holds for `text`; `NULL` for an empty text (a document without
/// text). A text zstd fails on is held as it is.
pub fn stored(text: &str) -> Value {
    if text.is_empty() {
        return Value::Null;
    }
    if text.len() >= COMPRESS_FROM {
        let frame = COMPRESSOR.with(|c| {
            c.borrow_mut()
                .as_mut()
                .and_then(|c| c.compress(text.as_bytes()).ok())
        });
        if let Some(frame) = frame.filter(|f| f.len() < text.len()) {
            return Value::Blob(frame);
        }
    }
    Value::Text(text.to_owned())
}

/// The text a `docs.text` value holds; `None` for `NULL`.
pub fn text_of(value: ValueRef) -> rusqlite::Result<Option<String>> {
    let bytes = match value {
        ValueRef::Null => return Ok(None),
        ValueRef::Text(text) => text.to_vec(),
        ValueRef::Blob(frame) => zstd::stream::decode_all(frame)
            .map_err(|e| damaged(&format!("a document's text does not decode: {e}")))?,
        ValueRef::Integer(_) | ValueRef::Real(_) => {
            return Err(damaged("a document's text is a number"))
        }
    };
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| damaged("a document's text is not UTF-8"))
}

/// The length in bytes of the text a `docs.text` value holds (0 for `NULL`), from a
/// frame's header alone. A frame whose header does not say is decoded.
pub fn len_of(value: ValueRef) -> rusqlite::Result<u64> {
    match value {
        ValueRef::Text(text) => Ok(text.len() as u64),
        ValueRef::Blob(frame) => match zstd::zstd_safe::get_frame_content_size(frame) {
            Ok(Some(len)) => Ok(len),
            _ => Ok(text_of(value)?.map_or(0, |t| t.len() as u64)),
        },
        _ => Ok(text_of(value)?.map_or(0, |t| t.len() as u64)),
    }
}

fn damaged(what: &str) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CORRUPT),
        Some(what.to_owned()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(text: &str) -> (Value, Option<String>, u64) {
        let value = stored(text);
        let back = text_of(ValueRef::from(&value)).unwrap();
        let len = len_of(ValueRef::from(&value)).unwrap();
        (value, back, len)
    }

    #[test]
    fn a_long_text_is_held_compressed_and_reads_back_whole() {
        let text = "the parser tore a line; ".repeat(40);
        let (value, back, len) = round_trip(&text);
        let Value::Blob(frame) = &value else {
            panic!("not compressed: {value:?}")
        };
        assert!(frame.len() < text.len() / 4, "{} bytes", frame.len());
        assert_eq!(back.as_deref(), Some(text.as_str()));
        assert_eq!(len, text.len() as u64);
    }

    #[test]
    fn short_empty_and_incompressible_texts_are_held_as_text() {
        assert_eq!(round_trip(""), (Value::Null, None, 0));
        let short = "a label";
        assert_eq!(round_trip(short).0, Value::Text(short.to_owned()));
        // 64 characters, each once: nothing repeats for zstd to take, and its frame
        // costs more than the text.
        let distinct: String = (b'!'..=b'`').map(char::from).collect();
        assert_eq!(distinct.len(), COMPRESS_FROM);
        let (value, back, len) = round_trip(&distinct);
        assert_eq!(value, Value::Text(distinct.clone()));
        assert_eq!(back.as_deref(), Some(distinct.as_str()));
        assert_eq!(len, distinct.len() as u64);
    }

    #[test]
    fn a_damaged_frame_is_reported_as_a_corrupt_index() {
        let Value::Blob(mut frame) = stored(&"abc ".repeat(100)) else {
            panic!("not compressed")
        };
        let at = frame.len() / 2;
        frame.truncate(at);
        let e = text_of(ValueRef::Blob(&frame)).unwrap_err();
        assert!(crate::index_file::is_corrupt(&e), "{e:?}");
        let e = text_of(ValueRef::Blob(b"not a frame")).unwrap_err();
        assert!(crate::index_file::is_corrupt(&e), "{e:?}");
        let e = text_of(ValueRef::Integer(3)).unwrap_err();
        assert!(crate::index_file::is_corrupt(&e), "{e:?}");
    }

    proptest! {
        #[test]
        fn every_text_reads_back_as_it_was(text in "(\\PC|\n){0,300}", times in 1usize..20) {
            let text = text.repeat(times);
            let (_, back, len) = round_trip(&text);
            prop_assert_eq!(back.unwrap_or_default(), text.clone());
            prop_assert_eq!(len, text.len() as u64);
        }
    }
}
