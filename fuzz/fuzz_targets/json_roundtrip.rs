//! Fuzz target: JSON parsing and writing (see `checks::json_roundtrip`).

#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::json_roundtrip(data));
