//! Strict, read-only inspection (the original's resume-readonly tests).

use std::fs;
use std::path::Path;

use crate::common::{fixture, SessionText};
use gjcfs::engine::read::inspect::{inspect_strict, InspectFailure, Tail};
use sha2::{Digest, Sha256};

fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let path = dir.join(name);
    fs::write(&path, bytes).unwrap();
    path
}

fn reason(path: &Path) -> &'static str {
    inspect_strict(path).unwrap_err().failure.reason()
}

#[test]
fn valid_session_inspects_with_fingerprint_and_tail() {
    let dir = tempfile::tempdir().unwrap();
    let text = SessionText::new()
        .message("a", None, "user", "question")
        .text();
    let path = write(dir.path(), "s.jsonl", text.as_bytes());
    let inspection = inspect_strict(&path).unwrap();
    assert_eq!(inspection.tail, Tail::Resumable);
    let fp = &inspection.fingerprint;
    assert_eq!(fp.session_id, "test-session");
    assert_eq!(fp.size, text.len() as u64);
    let digest: String = Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(fp.sha256, digest);
    assert_eq!(fp.canonical_path, fs::canonicalize(&path).unwrap());

    let answered = SessionText::new()
        .message("a", None, "user", "question")
        .message("b", Some("a"), "assistant", "answer")
        .text();
    let path = write(dir.path(), "t.jsonl", answered.as_bytes());
    assert_eq!(inspect_strict(&path).unwrap().tail, Tail::Terminal);
}

#[test]
fn symlinked_path_binds_to_its_target() {
    let dir = tempfile::tempdir().unwrap();
    let target = write(
        dir.path(),
        "real.jsonl",
        SessionText::new().text().as_bytes(),
    );
    let link = dir.path().join("link.jsonl");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let inspection = inspect_strict(&link).unwrap();
    assert_eq!(
        inspection.fingerprint.canonical_path,
        fs::canonicalize(&target).unwrap()
    );
}

#[test]
fn missing_non_regular_and_fifo_fail_closed() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(reason(&dir.path().join("absent.jsonl")), "missing");
    assert_eq!(reason(dir.path()), "read-failed");
    let fifo = dir.path().join("fifo.jsonl");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    assert_eq!(reason(&fifo), "read-failed");
    let dangling = dir.path().join("dangling.jsonl");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
    assert_eq!(reason(&dangling), "missing");
}

#[test]
fn malformed_content_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let header = r#"{"type":"session","version":5,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#;
    let entry = |rest: &str| {
        format!("{header}\n{{\"id\":\"e\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:01.000Z\",{rest}}}\n")
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("not json", b"this is not json\n".to_vec()),
        (
            "invalid utf-8",
            [header.as_bytes(), b"\n\xff\xfe\n"].concat(),
        ),
        (
            "bad utf-8 in a string",
            format!("{header}\n")
                .into_bytes()
                .into_iter()
                .chain(
                    b"{\"type\":\"custom\",\"customType\":\"\xc3\"}\n"
                        .iter()
                        .copied(),
                )
                .collect(),
        ),
        (
            "future version",
            br#"{"type":"session","version":6,"id":"s","timestamp":"t","cwd":"/"}"#.to_vec(),
        ),
        (
            "no header",
            entry(r#""type":"custom","customType":"x""#)
                .lines()
                .nth(1)
                .unwrap()
                .as_bytes()
                .to_vec(),
        ),
        (
            "header without cwd",
            br#"{"type":"session","version":5,"id":"s","timestamp":"t"}"#.to_vec(),
        ),
        (
            "ttsr without rules",
            entry(r#""type":"ttsr_injection""#).into_bytes(),
        ),
        (
            "builtin selection missing",
            entry(r#""type":"discovered_builtin_tool_selection""#).into_bytes(),
        ),
        (
            "builtin selection string",
            entry(r#""type":"discovered_builtin_tool_selection","selectedToolNames":"x""#)
                .into_bytes(),
        ),
        (
            "builtin selection number item",
            entry(r#""type":"discovered_builtin_tool_selection","selectedToolNames":[1]"#)
                .into_bytes(),
        ),
        (
            "unknown type",
            entry(r#""type":"future_thing""#).into_bytes(),
        ),
        (
            "message without role",
            entry(r#""type":"message","message":{"content":"x"}"#).into_bytes(),
        ),
        (
            "compaction without target",
            entry(r#""type":"compaction","summary":"s","tokensBefore":1"#).into_bytes(),
        ),
        (
            "label with numeric label",
            entry(r#""type":"label","targetId":"e","label":5"#).into_bytes(),
        ),
        ("array line", format!("{header}\n[1,2]\n").into_bytes()),
    ];
    for (name, bytes) in cases {
        let path = write(dir.path(), "bad.jsonl", &bytes);
        let err = inspect_strict(&path).unwrap_err();
        assert!(
            matches!(err.failure, InspectFailure::Malformed(_)),
            "{name}: {err}"
        );
    }
}

#[test]
fn empty_builtin_selection_is_valid_and_persisted() {
    let dir = tempfile::tempdir().unwrap();
    let text = SessionText::new()
        .message("u", None, "user", "hi")
        .entry(
            "discovered_builtin_tool_selection",
            "d",
            Some("u"),
            r#""selectedToolNames":[]"#,
        )
        .text();
    let path = write(dir.path(), "s.jsonl", text.as_bytes());
    let inspection = inspect_strict(&path).unwrap();
    assert_eq!(inspection.tail, Tail::Resumable);
    let ctx = inspection.session.build_context();
    assert!(ctx.has_persisted_discovered_builtin_tool_selection);
    assert_eq!(ctx.selected_discovered_builtin_tool_names, Some(vec![]));
}

#[test]
fn legacy_files_inspect_without_being_written() {
    for name in [
        "v1-minimal.jsonl",
        "v2-already-has-ids.jsonl",
        "real/large-session.jsonl",
        "real/before-compaction.jsonl",
    ] {
        let path = fixture(name);
        let before = fs::read(&path).unwrap();
        let mtime = fs::metadata(&path).unwrap().modified().unwrap();
        let inspection = inspect_strict(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(inspection.session.header().version(), 5.0, "{name}");
        assert_eq!(fs::read(&path).unwrap(), before, "{name}");
        assert_eq!(
            fs::metadata(&path).unwrap().modified().unwrap(),
            mtime,
            "{name}"
        );
    }
}

#[test]
fn v1_compaction_pointing_forward_is_malformed_after_migration() {
    let dir = tempfile::tempdir().unwrap();
    let text = concat!(
        r#"{"type":"session","id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#,
        "\n",
        r#"{"type":"compaction","timestamp":"2026-01-01T00:00:01.000Z","summary":"s","firstKeptEntryIndex":2,"tokensBefore":1}"#,
        "\n",
        r#"{"type":"message","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"user","content":"x"}}"#,
        "\n",
    );
    let path = write(dir.path(), "v1.jsonl", text.as_bytes());
    assert_eq!(reason(&path), "malformed");
}
