//! JSON as the original engine reads and writes it.
//!
//! The session format is JSONL written by JavaScript's `JSON.stringify`. This module reads any
//! JSON `JSON.parse` accepts and writes values back in the exact shape `JSON.stringify` would,
//! so that a line read and written again is unchanged byte for byte:
//! - key order is kept as read (array-index keys first, as JavaScript enumerates them);
//! - numbers keep their source text;
//! - strings may hold lone UTF-16 surrogates and are escaped exactly as JavaScript does;
//! - containers the engine does not need to look into stay as their validated source text
//!   ([`Value::Raw`]), which keeps large payloads cheap to load and exact to write back.
// A library never prints: it returns errors and emits events; the programs decide.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
// Every public item says what it is: the crate is the API of the layers above it.
#![deny(missing_docs)]

pub mod lazy;
mod members;
mod number;
mod parse;
mod scan;
mod value;
mod vocabulary;
mod write;

pub use members::{last_member, object_at_depth_two, object_spans, MemberSpan, ObjectSpans};
pub use number::format_js_number;
pub use parse::{parse, parse_shallow, parse_shallow_in, validate, ParseError};
pub use value::{JsIter, JsString, Number, Object, RawJson, SharedText, Value};
pub use write::{
    to_compact, to_pretty, write_compact, write_object_compact, write_pretty, write_pretty_object,
    write_string,
};
