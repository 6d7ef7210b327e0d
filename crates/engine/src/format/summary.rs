//! What the reading of a line takes from its record for later: the id and parent id the
//! session's index needs, and whether the load-time sanitizer changes it.
//!
//! Building the index of a large session reads the id and parent id of every record; read
//! from the records themselves, that is a few cache misses per record. A [`Summary`] taken
//! while a record is parsed (on the parsing thread, with the record in cache) holds them
//! inline, so building the index touches only compact memory.
//!
//! A format-level module: it knows records and the sanitizer's rule, not sessions.

use crate::format::record::Record;
use crate::format::sanitize::needs_sanitizing;

/// What indexing and the load-time sanitizer read of one record, taken when it is parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    id: Option<Key>,
    parent_id: Option<Key>,
    needs_sanitizing: bool,
}

impl Summary {
    /// The summary of `record`: its string id and parent id, and whether the sanitizer
    /// changes it.
    pub fn of(record: &Record) -> Self {
        Summary {
            id: record.id().map(Key::new),
            parent_id: record.parent_id().map(Key::new),
            needs_sanitizing: needs_sanitizing(record),
        }
    }

    /// The record's id, if it has a string one.
    pub fn id(&self) -> Option<&str> {
        self.id.as_ref().map(Key::as_str)
    }

    /// The record's parent id, if it has a string one.
    pub fn parent_id(&self) -> Option<&str> {
        self.parent_id.as_ref().map(Key::as_str)
    }

    /// Whether the load-time sanitizer changes the record (see `format::sanitize`).
    pub fn needs_sanitizing(&self) -> bool {
        self.needs_sanitizing
    }
}

const INLINE_KEY: usize = 22;

/// An id kept inline when short (every id the agent makes is), on the heap otherwise. The
/// id index holds its keys this way, so comparing one reads no other memory. Equality and
/// hashing are the string's (the representation follows from the length).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Key {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Heap(Box<str>),
}

impl Key {
    pub(crate) fn new(text: &str) -> Self {
        if text.len() > INLINE_KEY {
            return Key::Heap(text.into());
        }
        let mut bytes = [0; INLINE_KEY];
        bytes[..text.len()].copy_from_slice(text.as_bytes());
        Key::Inline {
            len: text.len() as u8,
            bytes,
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        match self {
            // Built from a `&str`, so always UTF-8.
            Key::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..*len as usize]).unwrap_or("")
            }
            Key::Heap(text) => text,
        }
    }
}

impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl std::borrow::Borrow<str> for Key {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}
