//! Fuzz target: a session file through replay, migration, the tree and the context (see
//! `checks::parse_session`).

#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::parse_session(data));
