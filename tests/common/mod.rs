//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

use gjcfs::engine::json::{self, Value};

/// The path of a file under `tests/fixtures/`.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The text of a fixture.
pub fn fixture_text(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).expect("fixture is readable")
}

/// A fixture's `.expected.json`, parsed.
pub fn expected(name: &str) -> Value {
    json::parse(&fixture_text(&format!("{name}.expected.json"))).expect("expected file is JSON")
}

/// Follows a path of object keys and array indices through a value.
pub fn at<'a>(value: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(value, |v, key| match v {
        Value::Object(o) => o.get(key).unwrap_or_else(|| panic!("no member {key}")),
        Value::Array(a) => &a[key.parse::<usize>().expect("index")],
        _ => panic!("cannot index {v:?} with {key}"),
    })
}

/// The path of the built `gjcfs` binary.
pub fn gjcfs_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_gjcfs"))
}
