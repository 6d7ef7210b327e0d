//! Cases where running the original engine on a file showed a difference, pinned against
//! what the original printed for the same file (`tests/fixtures/peer/`): where gjcfs now
//! matches it, equality; where gjcfs deliberately differs (`docs/FORMAT.md`), exactly the
//! documented difference.

use crate::common::{fixture, fixture_text};
use gjcfs::engine::json::{self, Value};
use gjcfs::engine::load_session;

fn peer(name: &str) -> std::path::PathBuf {
    fixture(&format!("peer/{name}"))
}

fn recorded(name: &str) -> Value {
    json::parse(&fixture_text(&format!("peer/{name}"))).expect("JSON")
}

fn context_value(name: &str) -> Value {
    load_session(&peer(name))
        .unwrap()
        .session
        .build_context()
        .to_value()
}

#[test]
fn a_last_entry_without_an_id_gives_the_empty_context() {
    assert_eq!(
        json::to_compact(&context_value("entries-without-ids.jsonl")),
        json::to_compact(&recorded("entries-without-ids.context.json"))
    );
    // The entries are there; only the leaf names none of them.
    let session = load_session(&peer("entries-without-ids.jsonl"))
        .unwrap()
        .session;
    assert_eq!(session.entry_count(), 2);
    assert_eq!(session.leaf_id(), None);
}

/// The spellings Bun's `Date` guesses and gjcfs reads as NaN (`docs/FORMAT.md`): entries
/// 11 (`2026-1-1`), 16 (`2026-02-30…`, rolled over by Bun), 25 (`Jan 1 2026`) and 26
/// (`2026/01/01`) of `timestamps.jsonl`.
const UNREAD_SPELLINGS: [usize; 4] = [11, 16, 25, 26];

#[test]
fn entry_timestamps_are_read_as_new_date_reads_them() {
    let ours = context_value("timestamps.jsonl");
    let theirs = recorded("timestamps.context.json");
    let stamps = |ctx: &Value| -> Vec<String> {
        crate::common::at(ctx, &["messages"])
            .as_array()
            .unwrap()
            .iter()
            .map(|m| json::to_compact(crate::common::at(m, &["timestamp"])))
            .collect()
    };
    let (ours, theirs) = (stamps(&ours), stamps(&theirs));
    assert_eq!(ours.len(), theirs.len());
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        if UNREAD_SPELLINGS.contains(&i) {
            assert_eq!(a, "null", "entry {i}");
            assert_ne!(b, "null", "entry {i}: the original reads it");
        } else {
            assert_eq!(a, b, "entry {i}");
        }
    }
}

/// gjcfs's `entries` lines for a fixture.
fn our_lines(name: &str) -> Vec<String> {
    load_session(&peer(&format!("lenient/{name}.jsonl")))
        .unwrap()
        .session
        .records()
        .iter()
        .map(|r| r.to_line().trim_end().to_owned())
        .collect()
}

fn their_lines(name: &str) -> Vec<String> {
    fixture_text(&format!("peer/lenient/{name}.entries.jsonl"))
        .lines()
        .map(str::to_owned)
        .collect()
}

fn file_lines(name: &str) -> Vec<String> {
    fixture_text(&format!("peer/lenient/{name}.jsonl"))
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_line_that_is_not_an_object_is_skipped() {
    // The original keeps `123` as a record (and a rewrite writes it back).
    let theirs: Vec<String> = their_lines("non-object-line")
        .into_iter()
        .filter(|l| l.starts_with('{'))
        .collect();
    assert_eq!(our_lines("non-object-line"), theirs);
    assert!(their_lines("non-object-line").contains(&"123".to_owned()));
}

#[test]
fn a_null_line_is_skipped_where_the_original_fails_the_file() {
    assert!(fixture_text("peer/lenient/null-line.entries.err").contains("TypeError"));
    let expected: Vec<String> = file_lines("null-line")
        .into_iter()
        .filter(|l| l != "null")
        .collect();
    assert_eq!(our_lines("null-line"), expected);
}

#[test]
fn a_line_with_more_than_one_value_is_skipped_whole() {
    // The original keeps the first value of the line and drops the rest.
    for name in ["two-values-one-line", "value-then-garbage"] {
        let file = file_lines(name);
        let odd = file
            .iter()
            .position(|l| json::parse(l).is_err())
            .expect("one line holds more than a value");
        let ours = our_lines(name);
        let expected: Vec<String> = file
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != odd)
            .map(|(_, l)| l.clone())
            .collect();
        assert_eq!(ours, expected, "{name}");
        let theirs = their_lines(name);
        assert!(
            file[odd].starts_with(&theirs[odd]),
            "{name}: the original kept its first value"
        );
    }
}

#[test]
fn integers_beyond_two_to_the_53_keep_their_digits() {
    let ours = our_lines("big-integer");
    let theirs = their_lines("big-integer");
    assert_eq!(ours, file_lines("big-integer"));
    let rounded: Vec<String> = ours
        .iter()
        .map(|l| l.replace("12345678901234567890", "12345678901234567000"))
        .collect();
    assert_eq!(rounded, theirs, "the original rounds to a double");
}

#[test]
fn entries_keep_the_reference_to_a_missing_blob() {
    // The agent's full rewrite writes its placeholder over the reference, losing it; gjcfs
    // prints (and rewrites) the records with the reference kept.
    let ours = our_lines("missing-blob");
    assert_eq!(ours, file_lines("missing-blob"));
    let rewrite: Vec<String> = fixture_text("peer/lenient/missing-blob.rewrite.jsonl")
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(ours.len(), rewrite.len());
    let hash = "281e7b08baeccfadd53d0809b2562ebd7d6d5e762d187aa11b364622966de025";
    let placeholder = format!(
        "[Session resident imageData blob missing: sha256:{hash}; original content unavailable]"
    );
    for (a, b) in ours.iter().zip(&rewrite) {
        assert_eq!(a.replace(&format!("blob:sha256:{hash}"), &placeholder), *b);
    }
}

#[test]
fn listing_takes_a_first_prompt_past_the_prefix_from_its_raw_text() {
    use gjcfs::engine::storage::FileStorage;
    use gjcfs::engine::store::discovery::session_info;
    let expected = recorded("listing.expected.json");
    let Value::Object(first) = crate::common::at(&expected, &["firstMessage"]) else {
        panic!("an object");
    };
    assert_eq!(first.len(), 12);
    for (name, text) in first.iter() {
        let name = name.to_string_lossy();
        let info = session_info(&FileStorage, &peer(&format!("listing/{name}")))
            .unwrap()
            .expect("a session");
        assert_eq!(Some(info.first_message.as_str()), text.as_str(), "{name}");
    }
}

#[test]
fn project_local_transcripts_are_found_where_the_agent_lists_them() {
    use gjcfs::engine::storage::FileStorage;
    use gjcfs::engine::store::discovery::project_local_transcripts;
    let expected = recorded("listing.expected.json");
    let names = |key: &str| -> Vec<String> {
        crate::common::at(&expected, &["projectLocal", key])
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    };
    let ws = tempfile::tempdir().unwrap();
    for relative in names("present") {
        let path = ws.path().join(&relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"").unwrap();
    }
    let found: Vec<String> = project_local_transcripts(&FileStorage, ws.path())
        .iter()
        .map(|p| {
            p.strip_prefix(ws.path())
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(found, names("listed"));
    assert!(project_local_transcripts(&FileStorage, &ws.path().join("none")).is_empty());
}

/// A leaf moved through the mount (`engine::manager::leaf_marker`): the original engine resumes the
/// file with the context of the chosen entry, and continues the chosen branch.
#[test]
fn a_leaf_marker_resumes_the_original_at_the_chosen_entry() {
    let session = load_session(&peer("leaf-marker.jsonl")).unwrap().session;
    let recorded = json::to_compact(&recorded("leaf-marker.context.json"));
    assert_eq!(
        json::to_compact(&session.build_context().to_value()),
        recorded
    );
    assert_eq!(
        json::to_compact(&session.build_context_for("8f84c48b").to_value()),
        recorded
    );
    assert_eq!(
        gjcfs::engine::manager::leaf_marker::shown_leaf(&session),
        Some("8f84c48b")
    );
    let marker = session.leaf_id().unwrap().to_owned();
    let appended = fixture_text("peer/leaf-marker.open-append.jsonl");
    let first = json::parse(appended.lines().next().unwrap()).unwrap();
    assert_eq!(
        first.as_object().unwrap().get_str("parentId"),
        Some(marker.as_str()),
        "the original's next entry continues the chosen branch"
    );
}

/// A v1 file's entries get ids derived from the file, the same in every load; the first
/// write persists exactly those; and the original opens the migrated file strictly, resumes
/// it and builds the same context.
#[test]
fn ids_derived_for_a_v1_file_are_what_its_first_write_persists_and_the_original_reads() {
    let ids = |name: &str| -> Vec<String> {
        load_session(&peer(&format!("v1-derived-ids/{name}")))
            .unwrap()
            .session
            .entries()
            .map(|e| e.id().unwrap().to_owned())
            .collect()
    };
    let shown = ids("source.jsonl");
    assert_eq!(shown, ids("source.jsonl"), "every load the same");
    let persisted = ids("migrated.jsonl");
    assert_eq!(persisted[..shown.len()], shown[..], "the write kept them");
    let migrated = load_session(&peer("v1-derived-ids/migrated.jsonl")).unwrap();
    assert_eq!(
        json::to_compact(&migrated.session.build_context().to_value()),
        json::to_compact(&recorded("v1-derived-ids/migrated.context.json"))
    );
    let opened = recorded("v1-derived-ids/migrated.open-append.json");
    let opened = opened.as_object().unwrap();
    assert_eq!(opened.get("accepted").and_then(Value::as_bool), Some(true));
    assert_eq!(
        opened
            .get("strictOpen")
            .unwrap()
            .as_object()
            .unwrap()
            .get_str("kind"),
        Some("opened")
    );
    assert_eq!(
        opened.get_str("leafId"),
        persisted.last().map(String::as_str)
    );
}
