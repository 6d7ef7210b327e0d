//! Fuzz target: the words of a text and the runs of a substring (see `checks::search_text`).

#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::search_text(data));
