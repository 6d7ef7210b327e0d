//! Conformance with the original engine: every fixture from its test suite, and the two real
//! transcripts recorded by the agent.

use crate::common::{at, expected, fixture, fixture_text};
use gjcfs::engine::format::ids::is_short_entry_id;
use gjcfs::engine::json::{self, Value};
use gjcfs::engine::read::inspect::{inspect_strict, InspectFailure, Tail};
use gjcfs::engine::read::replay::parse_session_entries;
use gjcfs::engine::{load_entries_from_file, load_session, LoadStatus, RecordType, Session};

fn message_content(session_record: &gjcfs::engine::Record) -> String {
    let message = session_record.message().expect("a message entry");
    json::to_compact(message.get("content").expect("content"))
}

/// Checks that `actual` has every member `expected` names, recursively.
fn assert_subset(expected: &Value, actual: &Value, path: &str) {
    match (expected, actual.expanded().as_ref()) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, v) in e.iter() {
                let k = k.to_string_lossy();
                let got = a.get(&k).unwrap_or_else(|| panic!("{path}.{k} missing"));
                assert_subset(v, got, &format!("{path}.{k}"));
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            assert_eq!(e.len(), a.len(), "{path}: length");
            for (i, (e, a)) in e.iter().zip(a).enumerate() {
                assert_subset(e, a, &format!("{path}[{i}]"));
            }
        }
        (e, a) => assert_eq!(json::to_compact(e), json::to_compact(a), "{path}"),
    }
}

fn records_value(text: &str) -> Value {
    let replayed = parse_session_entries(text).expect("parses");
    Value::Array(
        replayed
            .records
            .iter()
            .map(|r| Value::Object(r.fields().clone()))
            .collect(),
    )
}

#[test]
fn v1_minimal_gets_ids_and_a_linear_chain() {
    let exp = expected("v1-minimal");
    let loaded = load_session(&fixture("v1-minimal.jsonl")).unwrap();
    let records = loaded.session.records();
    assert_eq!(
        records[0].as_header().unwrap().version(),
        at(&exp, &["afterMigration", "header.version"])
            .as_f64()
            .unwrap()
    );
    let first = records[1].id().unwrap();
    let second = records[2].id().unwrap();
    assert!(is_short_entry_id(first) && is_short_entry_id(second));
    assert_eq!(records[1].get("parentId"), Some(&Value::Null));
    assert_eq!(records[2].parent_id(), Some(first));
}

#[test]
fn v2_ids_are_kept() {
    let exp = expected("v2-already-has-ids");
    let loaded = load_session(&fixture("v2-already-has-ids.jsonl")).unwrap();
    let records = loaded.session.records();
    let ids: Vec<Value> = records[1..]
        .iter()
        .map(|r| Value::string(r.id().unwrap()))
        .collect();
    assert_eq!(&Value::Array(ids), at(&exp, &["afterMigration", "ids"]));
    assert_eq!(
        records[2].parent_id(),
        at(&exp, &["afterMigration", "entries[2].parentId"]).as_str()
    );
    assert_eq!(records[0].as_header().unwrap().version(), 5.0);
}

#[test]
fn v3_patches_are_not_applied() {
    let exp = expected("v3-with-patches");
    let actual = records_value(&fixture_text("v3-with-patches.jsonl"));
    let want = at(&exp, &["parseSessionEntries"]).as_array().unwrap();
    let got = actual.as_array().unwrap();
    assert_eq!(got.len(), want.len());
    let header = got[0].as_object().unwrap();
    let want_header = want[0].as_object().unwrap();
    for key in ["type", "version", "id", "cwd"] {
        assert_eq!(header.get(key), want_header.get(key), "{key}");
    }
    assert_eq!(want_header.get("titleAbsent"), Some(&Value::Bool(true)));
    assert!(!header.contains_key("title"));
}

#[test]
fn v4_patches_replay_and_strict_inspection_writes_nothing() {
    let exp = expected("v4-patch-fixture");
    let path = fixture("v4-patch-fixture.jsonl");
    let before = std::fs::read(&path).unwrap();
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    let inspection = inspect_strict(&path).unwrap();
    let session = &inspection.session;
    let header = Value::Object(session.records()[0].fields().clone());
    assert_subset(at(&exp, &["header"]), &header, "header");
    let entries = Value::Array(
        session
            .entries()
            .map(|r| Value::Object(r.fields().clone()))
            .collect(),
    );
    assert_subset(at(&exp, &["entries"]), &entries, "entries");
    assert_eq!(inspection.tail, Tail::Resumable);
    assert_eq!(
        at(&exp, &["fileMustBeUnchangedAfterStrictOpenAndClose"]),
        &Value::Bool(true)
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), mtime);
}

#[test]
fn ordered_patches_later_wins_and_early_ones_are_ignored() {
    let exp = expected("ordered-patches");
    let text = fixture_text("ordered-patches.jsonl");
    assert!(!text.ends_with('\n'), "the fixture has no trailing newline");
    assert_subset(
        at(&exp, &["parseSessionEntries"]),
        &records_value(&text),
        "records",
    );
}

#[test]
fn non_canonical_patches_are_ignored() {
    let exp = expected("ignored-noncanonical-patches");
    let text = fixture_text("ignored-noncanonical-patches.jsonl");
    let records = records_value(&text);
    assert_subset(at(&exp, &["parseSessionEntries"]), &records, "records");
    assert!(!at(&records, &["0"])
        .as_object()
        .unwrap()
        .contains_key("title"));
}

#[test]
fn future_version_is_rejected_before_replay() {
    let exp = expected("future-v6");
    let err = parse_session_entries(&fixture_text("future-v6.jsonl")).unwrap_err();
    assert_eq!(err.to_string(), "Unsupported session version: 6");
    assert!(at(&exp, &["parseSessionEntries"])
        .as_str()
        .unwrap()
        .contains(&err.to_string()));
    let load = load_entries_from_file(&fixture("future-v6.jsonl")).unwrap_err();
    assert!(
        load.to_string().ends_with("Unsupported session version: 6"),
        "{load}"
    );
    let strict = inspect_strict(&fixture("future-v6.jsonl")).unwrap_err();
    assert_eq!(strict.failure.reason(), "malformed");
}

#[test]
fn malformed_middle_line_is_skipped_leniently_and_fails_strictly() {
    let exp = expected("lenient-malformed-line");
    let loaded = load_entries_from_file(&fixture("lenient-malformed-line.jsonl")).unwrap();
    assert_eq!(loaded.status, LoadStatus::Loaded);
    assert_eq!(
        loaded.records.len() as f64,
        at(&exp, &["loadEntriesFromFile_length"]).as_f64().unwrap()
    );
    assert_eq!(loaded.skipped.len(), 1);
    assert_eq!(loaded.skipped[0].line, 2);
    let strict = inspect_strict(&fixture("lenient-malformed-line.jsonl")).unwrap_err();
    assert!(matches!(strict.failure, InspectFailure::Malformed(_)));
    assert!(at(&exp, &["strictInspection"])
        .as_str()
        .unwrap()
        .starts_with(strict.failure.reason()));
}

#[test]
fn openai_replay_payload_is_sanitized_with_one_entry_patch() {
    let text = fixture_text("openai-replay-sanitize.jsonl").replace("<CWD>", "/tmp");
    let records = parse_session_entries(&text).unwrap().records;
    let mut session = Session::from_records(records);
    let patches = session.sanitize_openai_replay();
    assert_eq!(patches.len(), 1);
    let patch = &patches[0];
    assert_eq!(patch.record_type(), RecordType::EntryPatch);
    assert_eq!(
        patch.to_line(),
        concat!(
            r#"{"type":"entry_patch","entryId":"assistant","patch":{"message":{"role":"assistant","#,
            r#""content":[{"type":"thinking","thinking":"private"}],"provider":"openai","model":"gpt-5","#,
            r#""timestamp":1,"usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"cost":{"total":0}}}}}"#
        )
    );
    let message = session.get_entry("assistant").unwrap().message().unwrap();
    assert!(!message.contains_key("providerPayload"));
    assert_eq!(
        message_content(session.get_entry("assistant").unwrap()),
        r#"[{"type":"thinking","thinking":"private"}]"#
    );
    // Replaying the patch over the original file gives the sanitized message.
    let patched = format!("{text}{}\n", patch.to_line());
    let replayed = parse_session_entries(&patched).unwrap().records;
    assert_eq!(replayed[1].message(), Some(message));
    // A second pass finds nothing left to do.
    assert!(session.sanitize_openai_replay().is_empty());
}

fn role_of(message: &Value) -> String {
    message
        .as_object()
        .and_then(|o| o.get_str("role"))
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn real_large_session_context_matches_the_original() {
    let loaded = load_session(&fixture("real/large-session.jsonl")).unwrap();
    assert!(loaded.skipped.is_empty());
    let session = &loaded.session;
    assert_eq!(session.entry_count(), 1018);
    let ctx = session.build_context();
    assert_eq!(ctx.messages.len(), 914);
    let count = |role: &str| ctx.messages.iter().filter(|m| role_of(m) == role).count();
    assert_eq!(
        (count("user"), count("assistant"), count("toolResult")),
        (88, 453, 373)
    );
    assert_eq!(ctx.thinking_level, Value::string("off"));
    // Every message passes through unchanged, in path order.
    let originals: Vec<&Value> = session
        .entries()
        .filter(|r| r.record_type() == RecordType::Message)
        .map(|r| r.get("message").unwrap())
        .collect();
    assert!(ctx
        .messages
        .iter()
        .map(|m| m.as_ref())
        .eq(originals.into_iter()));
}

#[test]
fn real_session_with_compactions_keeps_summary_kept_and_later_messages() {
    let loaded = load_session(&fixture("real/before-compaction.jsonl")).unwrap();
    let session = &loaded.session;
    let ctx = session.build_context();
    assert_eq!(ctx.messages.len(), 446);
    assert_eq!(role_of(&ctx.messages[0]), "compactionSummary");
    let compactions: Vec<usize> = session
        .entry_indices()
        .filter(|&i| session.record(i).record_type() == RecordType::Compaction)
        .collect();
    assert_eq!(compactions.len(), 2);
    let last = session.record(compactions[1]);
    assert_eq!(
        ctx.messages[0].as_object().unwrap().get("summary"),
        last.get("summary")
    );
    // v1 firstKeptEntryIndex 551 became the id of the record at index 551.
    let first_kept = last.get_str("firstKeptEntryId").unwrap();
    assert_eq!(session.record(551).id(), Some(first_kept));
    let first_kept_at = session.index_of(first_kept).unwrap();
    let messages_between = |from: usize, to: usize| -> Vec<&Value> {
        (from..to)
            .map(|i| session.record(i))
            .filter(|r| r.record_type() == RecordType::Message)
            .map(|r| r.get("message").unwrap())
            .collect()
    };
    let kept = messages_between(first_kept_at, compactions[1]);
    let after = messages_between(compactions[1] + 1, session.records().len());
    assert_eq!((kept.len(), after.len()), (77, 368));
    assert!(ctx.messages[1..78]
        .iter()
        .map(|m| m.as_ref())
        .eq(kept.into_iter()));
    assert!(ctx.messages[78..]
        .iter()
        .map(|m| m.as_ref())
        .eq(after.into_iter()));
}

#[test]
fn every_real_line_round_trips_byte_for_byte_at_every_parse_depth() {
    for name in ["real/large-session.jsonl", "real/before-compaction.jsonl"] {
        let text = fixture_text(name);
        for (n, line) in text.lines().enumerate() {
            for depth in [0, 1, 2, 3, 128] {
                let value = json::parse_shallow(line, depth).unwrap();
                assert_eq!(
                    json::to_compact(&value),
                    line,
                    "{name}:{} at depth {depth}",
                    n + 1
                );
            }
        }
    }
}
