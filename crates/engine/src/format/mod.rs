//! The file format: one record a line, the text and time rules of JavaScript, identifiers,
//! the blob store and the persist-time transform, reading lines, migrations, the load-time
//! sanitizer and cold-spill rehydration.
//!
//! Nothing here knows a session's tree; [`crate::session`] builds it from these records.

pub mod blob;
pub mod cold_spill;
pub(crate) mod huge_text;
pub mod ids;
pub(crate) mod js_text;
pub mod lines;
pub mod migrate;
pub mod persist;
pub mod record;
pub(crate) mod sanitize;
pub mod summary;
pub mod time;
