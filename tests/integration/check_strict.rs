//! `check` reports every record the agent's strict resume refuses, with its line: one
//! transcript per rule of the strict checks, each refused by the engine's strict
//! inspection and found by `check_store` at the line it is on.

use std::path::{Path, PathBuf};

use gjcfs::engine::check::{check_store, CheckTarget, Finding, Severity};
use gjcfs::engine::read::inspect::parse_strict;
use gjcfs::engine::storage::{MemoryStorage, SessionStorage};

const TS: &str = r#""timestamp":"2026-01-01T00:00:00.000Z""#;
const HEADER: &str =
    r#"{"type":"session","version":5,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#;

/// A v5 entry `id` under `parent` of `ty` with the members `rest`.
fn entry(ty: &str, id: &str, parent: Option<&str>, rest: &str) -> String {
    let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
    format!(r#"{{"type":"{ty}","id":"{id}","parentId":{parent},{TS},{rest}}}"#)
}

fn question() -> String {
    entry(
        "message",
        "q",
        None,
        r#""message":{"role":"user","content":"q"}"#,
    )
}

/// A record after the question, of `ty` with `rest`.
fn after(ty: &str, rest: &str) -> String {
    entry(ty, "x", Some("q"), rest)
}

/// One case per strict rule: (what, the lines after the header, the kind found, the line
/// it is on, a part of what the finding says).
fn cases() -> Vec<(&'static str, Vec<String>, &'static str, usize, &'static str)> {
    let q = question;
    let refused = "refused_record";
    let schema = "fields do not match";
    vec![
        (
            "an entry without timestamp",
            vec![q(), r#"{"type":"message","id":"a","parentId":"q","message":{"role":"assistant","content":"a"}}"#.into()],
            refused, 3, "string timestamp",
        ),
        ("an unknown type as the last record", vec![q(), after("future_thing", r#""x":1"#)], refused, 3, "unknown entry type"),
        ("an empty record", vec![q(), "{}".into()], refused, 3, "no string type"),
        ("a numeric type", vec![q(), r#"{"type":7,"id":"x","parentId":"q"}"#.into()], refused, 3, "no string type"),
        ("an entry without id", vec![q(), format!(r#"{{"type":"message","parentId":"q",{TS},"message":{{"role":"user","content":"x"}}}}"#)], refused, 3, "string id"),
        ("a numeric parentId", vec![q(), format!(r#"{{"type":"message","id":"x","parentId":5,{TS},"message":{{"role":"user","content":"x"}}}}"#)], refused, 3, "parentId"),
        ("a second header without cwd", vec![q(), format!(r#"{{"type":"session","id":"t",{TS}}}"#)], refused, 3, "a header needs"),
        ("a message without role", vec![q(), after("message", r#""message":{"content":"x"}"#)], refused, 3, schema),
        ("a model change without model", vec![q(), after("model_change", r#""role":"x""#)], refused, 3, schema),
        ("a configured model chain that does not normalise", vec![q(), after("configured_model_chain", r#""x":1"#)], refused, 3, schema),
        ("a compaction without tokensBefore", vec![q(), after("compaction", r#""summary":"s","firstKeptEntryId":"q""#)], refused, 3, schema),
        ("a branch summary without fromId", vec![q(), after("branch_summary", r#""summary":"s""#)], refused, 3, schema),
        ("a custom entry without customType", vec![q(), after("custom", r#""data":1"#)], refused, 3, schema),
        ("a custom message without display", vec![q(), after("custom_message", r#""customType":"c","content":"x""#)], refused, 3, schema),
        ("a label without targetId", vec![q(), after("label", r#""label":"l""#)], refused, 3, schema),
        ("a ttsr injection without injectedRules", vec![q(), after("ttsr_injection", r#""x":1"#)], refused, 3, schema),
        ("an MCP tool selection of numbers", vec![q(), after("mcp_tool_selection", r#""selectedToolNames":[1]"#)], refused, 3, schema),
        ("a builtin tool selection that is a string", vec![q(), after("discovered_builtin_tool_selection", r#""selectedToolNames":"a""#)], refused, 3, schema),
        ("a session init without task", vec![q(), after("session_init", r#""systemPrompt":"p","tools":[]"#)], refused, 3, schema),
        ("a mode change without mode", vec![q(), after("mode_change", r#""x":1"#)], refused, 3, schema),
        ("a numeric thinking level", vec![q(), after("thinking_level_change", r#""thinkingLevel":3"#)], refused, 3, schema),
        ("a service tier change without tier", vec![q(), after("service_tier_change", r#""x":1"#)], refused, 3, schema),
        ("a line that is not JSON", vec![q(), "not json".into(), after("message", r#""message":{"role":"user","content":"x"}"#)], "malformed_line", 3, "line 3 is not a record"),
        ("a JSON line that is not an object", vec![q(), "123".into()], "malformed_line", 3, "line 3 is not a record"),
    ]
}

/// A v1 transcript whose compaction keeps an entry after it: migration gives it no
/// `firstKeptEntryId`, which the schema check then refuses.
fn v1_compaction() -> String {
    let v1 = |ty: &str, rest: &str| format!(r#"{{"type":"{ty}",{TS},{rest}}}"#);
    [
        format!(r#"{{"type":"session","id":"s",{TS},"cwd":"/w"}}"#),
        v1("message", r#""message":{"role":"user","content":"q"}"#),
        v1(
            "compaction",
            r#""summary":"s","firstKeptEntryIndex":3,"tokensBefore":5"#,
        ),
        v1("message", r#""message":{"role":"user","content":"a"}"#),
    ]
    .join("\n")
        + "\n"
}

/// The findings of a check of the directory `/s` holding `bytes` as `t.jsonl`.
fn findings_of(bytes: &[u8]) -> Vec<Finding> {
    let storage = MemoryStorage::new();
    storage.ensure_dir(Path::new("/s")).unwrap();
    storage.put_file(Path::new("/s/t.jsonl"), bytes);
    let target = CheckTarget {
        sessions_root: None,
        session_dir: Some(PathBuf::from("/s")),
        blob_dir: PathBuf::from("/blobs"),
        history_db: None,
        repair_base: None,
    };
    check_store(&storage, &target, &|_| {}).unwrap().findings
}

/// Checks that the strict inspection refuses `bytes` and that the check finds it: one
/// error of `kind` saying `line N` and `said`.
fn assert_found(what: &str, bytes: &[u8], kind: &str, line: usize, said: &str) {
    let strict = parse_strict(bytes).map(drop).unwrap_err().to_string();
    let findings = findings_of(bytes);
    let found: Vec<&Finding> = findings.iter().filter(|f| f.kind == kind).collect();
    assert_eq!(found.len(), 1, "{what}: {findings:#?}");
    let f = found[0];
    assert_eq!(f.severity, Severity::Error, "{what}");
    assert_eq!(f.path, Path::new("/s/t.jsonl"), "{what}");
    assert!(
        f.what.contains(&format!("line {line}")),
        "{what}: {}",
        f.what
    );
    assert!(f.what.contains(said), "{what}: {}", f.what);
    if kind == "refused_record" {
        assert!(
            strict.contains(&format!("line {line}:")),
            "{what}: {strict}"
        );
    }
}

#[test]
fn every_record_the_strict_checks_refuse_is_a_finding_with_its_line() {
    // A sound session: nothing to say.
    let sound = format!("{HEADER}\n{}\n", question());
    parse_strict(sound.as_bytes()).unwrap();
    assert_eq!(findings_of(sound.as_bytes()), []);

    for (what, lines, kind, line, said) in cases() {
        let bytes = format!("{HEADER}\n{}\n", lines.join("\n"));
        assert_found(what, bytes.as_bytes(), kind, line, said);
    }
    let bytes = v1_compaction();
    assert_found(
        "a v1 compaction keeping a later entry",
        bytes.as_bytes(),
        "refused_record",
        3,
        "fields do not match",
    );

    // A byte that is not UTF-8 in a message's text, on line 3.
    let mut bytes = format!("{HEADER}\n{}\n", question()).into_bytes();
    let at = bytes.len() + r#"{"type":"message","id":"x","parentId":"q","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":""#.len();
    let text = after("message", r#""message":{"role":"user","content":"X"}"#);
    let (before, rest) = text.split_once('X').unwrap();
    bytes.extend_from_slice(before.as_bytes());
    bytes.push(0xff);
    bytes.extend_from_slice(rest.as_bytes());
    bytes.push(b'\n');
    assert_found(
        "a byte that is not UTF-8",
        &bytes,
        "invalid_utf8",
        3,
        &format!("byte {at}"),
    );
}

#[test]
fn refusals_of_one_rule_are_one_finding_naming_each_line() {
    let no_ts = |id: &str| {
        format!(
            r#"{{"type":"message","id":"{id}","parentId":"q","message":{{"role":"user","content":"x"}}}}"#
        )
    };
    let bytes = format!(
        "{HEADER}\n{}\n{}\n{{}}\n{}\n",
        question(),
        no_ts("a"),
        no_ts("b")
    );
    let findings = findings_of(bytes.as_bytes());
    let refused: Vec<&str> = findings
        .iter()
        .filter(|f| f.kind == "refused_record")
        .map(|f| f.what.as_str())
        .collect();
    assert_eq!(refused.len(), 2, "{findings:#?}");
    assert!(
        refused[0].starts_with("lines 3 and 5 are refused"),
        "{}",
        refused[0]
    );
    assert!(refused[0].contains("string timestamp"), "{}", refused[0]);
    assert!(
        refused[1].starts_with("line 4 is refused"),
        "{}",
        refused[1]
    );
}
