//! A legacy (v1) transcript the strict checks refuse is refused before anything is copied
//! into its workspace's managed scope: no copy, no receipt, no lock, the scope as it was.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use gjcfs::engine::manager::{SessionError, SessionManager, StorageConfig, WriteTarget};
use gjcfs::engine::read::inspect::parse_strict;
use gjcfs::engine::store::legacy::{encode_absolute, MigrationPolicy};
use gjcfs::engine::store::scope::{resolve_identity, scope_dir_name};

const TS: &str = r#""timestamp":"2026-01-01T00:00:00.000Z""#;

/// A v1 entry (no id, no parentId) of `ty` with the members `rest`.
fn v1(ty: &str, rest: &str) -> String {
    format!(r#"{{"type":"{ty}",{TS},{rest}}}"#)
}

fn user(text: &str) -> String {
    v1(
        "message",
        &format!(r#""message":{{"role":"user","content":"{text}"}}"#),
    )
}

/// Every kind of defect the strict checks refuse in a v1 transcript whose header the
/// listing accepts (an id and a cwd): (what, the lines after the header).
fn defects() -> Vec<(&'static str, Vec<String>)> {
    let q = user("q");
    vec![
        (
            "an entry without timestamp",
            vec![r#"{"type":"message","message":{"role":"user","content":"q"}}"#.into()],
        ),
        (
            "a numeric timestamp",
            vec![
                r#"{"type":"message","timestamp":5,"message":{"role":"user","content":"q"}}"#
                    .into(),
            ],
        ),
        ("an empty record", vec![q.clone(), "{}".into()]),
        (
            "an unknown type last",
            vec![q.clone(), v1("future_thing", r#""x":1"#)],
        ),
        (
            "a line that is not JSON",
            vec![q.clone(), "not json".into(), user("a")],
        ),
        (
            "a JSON line that is not an object",
            vec![q.clone(), "123".into()],
        ),
        (
            "a message without a role",
            vec![v1("message", r#""message":{"content":"q"}"#)],
        ),
        (
            "a message that is a string",
            vec![v1("message", r#""message":"q""#)],
        ),
        (
            "a model change without a model",
            vec![q.clone(), v1("model_change", r#""x":1"#)],
        ),
        (
            "a compaction without a summary",
            vec![
                q.clone(),
                v1("compaction", r#""firstKeptEntryIndex":1,"tokensBefore":5"#),
            ],
        ),
        (
            "a compaction keeping an entry after it",
            vec![
                q.clone(),
                v1(
                    "compaction",
                    r#""summary":"s","firstKeptEntryIndex":3,"tokensBefore":5"#,
                ),
                user("a"),
            ],
        ),
        (
            "a branch summary without fromId",
            vec![q.clone(), v1("branch_summary", r#""summary":"s""#)],
        ),
        (
            "a custom entry without customType",
            vec![q.clone(), v1("custom", r#""data":1"#)],
        ),
        (
            "a custom message without display",
            vec![
                q.clone(),
                v1("custom_message", r#""customType":"c","content":"x""#),
            ],
        ),
        (
            "a label without targetId",
            vec![q.clone(), v1("label", r#""label":"l""#)],
        ),
        (
            "a ttsr injection without rules",
            vec![q.clone(), v1("ttsr_injection", r#""x":1"#)],
        ),
        (
            "a mode change without mode",
            vec![q.clone(), v1("mode_change", r#""x":1"#)],
        ),
        (
            "a service tier change without tier",
            vec![q.clone(), v1("service_tier_change", r#""x":1"#)],
        ),
        (
            "a second header without cwd",
            vec![q, format!(r#"{{"type":"session","id":"x",{TS}}}"#)],
        ),
    ]
}

/// Every entry below `dir` (directories too) with its bytes and mode; empty when `dir`
/// does not exist.
fn tree(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, u32)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let meta = fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode() & 0o7777;
            if meta.is_dir() {
                stack.push(path.clone());
                out.insert(path, (Vec::new(), mode));
            } else {
                out.insert(path.clone(), (fs::read(&path).unwrap(), mode));
            }
        }
    }
    out
}

#[test]
fn a_legacy_transcript_the_strict_checks_refuse_is_refused_before_anything_is_copied() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    fs::create_dir_all(&ws).unwrap();
    let ws = fs::canonicalize(&ws).unwrap();
    let root = tmp.path().join("agent/sessions");
    let legacy = root.join(encode_absolute(ws.to_str().unwrap()));
    fs::create_dir_all(&legacy).unwrap();
    let scope = root.join(scope_dir_name(&resolve_identity(&ws).unwrap()));
    let header = format!(
        r#"{{"type":"session","id":"legacy",{TS},"cwd":"{}"}}"#,
        ws.display()
    );
    let target = WriteTarget {
        sessions_root: Some(root.clone()),
        policy: MigrationPolicy::CopyRetain,
    };
    let config = || StorageConfig::files(tmp.path().join("agent/blobs"));

    // A sound v1 transcript is copied and opened: the scope exists, with its records.
    let sound = legacy.join("2026-01-01T00-00-00-000Z_sound.jsonl");
    fs::write(&sound, format!("{header}\n{}\n{}\n", user("q"), user("a"))).unwrap();
    let m = SessionManager::open_for_writing(&sound, &target, config()).unwrap();
    assert_eq!(
        m.session_file().unwrap(),
        scope.join(sound.file_name().unwrap())
    );
    m.close().unwrap();

    let mut files: Vec<(&str, Vec<u8>)> = defects()
        .into_iter()
        .map(|(what, lines)| {
            (
                what,
                format!("{header}\n{}\n", lines.join("\n")).into_bytes(),
            )
        })
        .collect();
    let mut not_utf8 = format!("{header}\n").into_bytes();
    // A user message whose text holds a byte that is not UTF-8.
    let line = user("X");
    let (before, after) = line.split_once('X').unwrap();
    not_utf8.extend_from_slice(before.as_bytes());
    not_utf8.push(0xff);
    not_utf8.extend_from_slice(after.as_bytes());
    not_utf8.push(b'\n');
    files.push(("a line that is not UTF-8", not_utf8));
    for (n, (what, bytes)) in files.into_iter().enumerate() {
        assert!(
            parse_strict(&bytes).is_err(),
            "{what}: the strict checks refuse it"
        );
        let file = legacy.join(format!("2026-01-02T00-00-00-000Z_bad-{n}.jsonl"));
        fs::write(&file, &bytes).unwrap();
        let before = tree(&scope);
        let err = SessionManager::open_for_writing(&file, &target, config()).unwrap_err();
        assert!(
            matches!(err, SessionError::Inspect { .. }),
            "{what}: refused as malformed, not {err}"
        );
        assert!(err.to_string().contains("malformed"), "{what}: {err}");
        assert_eq!(tree(&scope), before, "{what}: the scope changed");
        assert_eq!(
            fs::read(&file).unwrap(),
            bytes,
            "{what}: the source changed"
        );
    }

    // A header the listing cannot attribute is refused before any copy too.
    let headers = [
        format!(r#"{{"type":"session",{TS},"cwd":"{}"}}"#, ws.display()),
        format!(r#"{{"type":"session","id":"legacy",{TS}}}"#),
        "not json".to_owned(),
    ];
    for (n, header) in headers.iter().enumerate() {
        let file = legacy.join(format!("2026-01-04T00-00-00-000Z_header-{n}.jsonl"));
        fs::write(&file, format!("{header}\n{}\n", user("q"))).unwrap();
        let before = tree(&scope);
        SessionManager::open_for_writing(&file, &target, config()).unwrap_err();
        assert_eq!(tree(&scope), before, "{header}: the scope changed");
    }

    // A torn last line is not a refusal: the copy's open cuts it.
    let torn = legacy.join("2026-01-03T00-00-00-000Z_torn.jsonl");
    fs::write(&torn, format!("{header}\n{}\n{{\"type\":\"mess", user("q"))).unwrap();
    let m = SessionManager::open_for_writing(&torn, &target, config()).unwrap();
    assert_eq!(m.read(|s| s.entry_count()), 1);
}
