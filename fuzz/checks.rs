//! The checks behind the fuzz targets, shared with `tests/integration/fuzz_regressions.rs`, which runs
//! saved inputs through them under `cargo test`. Each check panics when the engine breaks one
//! of its invariants on the given bytes.

// Each fuzz target includes this file for one of the checks.
#![allow(dead_code)]

use std::collections::HashSet;

use gjcfs::engine::format::migrate::migrate;
use gjcfs::engine::read::inspect::parse_strict;
use gjcfs::engine::read::load::{entries_from_records, LoadStatus};
use gjcfs::engine::read::replay::{parse_session_entries, parse_session_reader};
use gjcfs::engine::{json, Record, Session};
use gjcfs::search::snippet::contains_folded;
use gjcfs::search::substring::pieces;
use gjcfs::search::words::{index_text, words};

/// Any text: `parse`, `validate` and `parse_shallow` agree on whether it is JSON; when it is,
/// an object's spans and a record read from it agree with parsing ([`check_object_spans`]),
/// the compact and pretty writers produce JSON that parses back to an equal value, and a
/// value kept raw below any depth writes the same bytes as the fully parsed value.
pub fn json_roundtrip(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let parsed = json::parse(&text);
    assert_eq!(json::validate(&text).is_ok(), parsed.is_ok());
    for depth in 0..4 {
        let shallow = json::parse_shallow(&text, depth);
        assert_eq!(shallow.is_ok(), parsed.is_ok(), "depth {depth}");
        if let (Ok(shallow), Ok(full)) = (&shallow, &parsed) {
            assert_eq!(shallow, full, "depth {depth}");
        }
    }
    let Ok(value) = parsed else { return };
    check_object_spans(&text, &value);

    let compact = json::to_compact(&value);
    let again = json::parse(&compact).expect("compact output is JSON");
    assert_eq!(again, value);
    assert_eq!(
        json::to_compact(&again),
        compact,
        "compact output is stable"
    );

    let pretty = json::to_pretty(&value);
    let from_pretty = json::parse(&pretty).expect("pretty output is JSON");
    assert_eq!(from_pretty, value);

    // The compact text is already in written form, so raw containers copy or re-indent to
    // exactly what the parsed tree writes.
    for depth in 0..4 {
        let shallow = json::parse_shallow(&compact, depth).expect("compact output is JSON");
        assert_eq!(json::to_compact(&shallow), compact, "depth {depth}");
        assert_eq!(json::to_pretty(&shallow), pretty, "depth {depth}");
    }
}

/// A JSON text and its value: the spans of an object build what parsing two levels deep
/// builds, and a record read from the text (kept as text, its members built when asked)
/// answers as the record of the object parsed two levels deep (raw containers are written
/// as they were read, so a record of the fully parsed object may write other whitespace).
fn check_object_spans(text: &str, value: &json::Value) {
    let spans = json::object_spans(text).expect("valid JSON has spans or none");
    let shallow = json::parse_shallow(text, 2).expect("valid JSON");
    let (Some(spans), Some(object)) = (spans, shallow.as_object()) else {
        assert!(!value.is_object(), "an object has spans");
        return;
    };
    let block = json::SharedText::new(text.to_owned());
    match json::object_at_depth_two(&block, 0..text.len(), &spans) {
        Some(built) => {
            let built = json::Value::Object(built);
            assert_eq!(built, shallow);
            assert_eq!(json::to_compact(&built), json::to_compact(&shallow));
        }
        None => assert!(spans.all().iter().any(|m| m.key(text).contains('\\'))),
    }
    let read = Record::parse_line(text).expect("an object is a record");
    let built = Record::new(object.clone());
    assert_eq!(read.record_type(), built.record_type());
    for key in ["type", "id", "parentId", "timestamp", "title", "cwd"] {
        assert_eq!(read.get_str(key), built.get_str(key), "{key}");
    }
    assert_eq!(read.fields(), built.fields());
    assert_eq!(read.to_line(), built.to_line());
}

/// Any bytes as a session file: lenient replay, then everything a loaded session offers.
/// What replay kept, written back line by line, replays to the same records (before and
/// after migration); the tree holds every indexed entry once; the sanitizer's entry patches,
/// appended to the file as loaded, replay to the sanitized session.
pub fn parse_session(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = parse_strict(data);
    let streamed = parse_session_reader(data);
    let Ok(replayed) = parse_session_entries(&text) else {
        assert!(streamed.is_err(), "the stream and the text disagree");
        return;
    };
    let streamed = streamed.expect("the stream and the text agree");
    assert_eq!(streamed.records, replayed.records);

    assert_rewrite_replays(&replayed.records);
    let loaded = entries_from_records(replayed.records, replayed.skipped);
    if loaded.status != LoadStatus::Loaded {
        return;
    }
    let mut records = loaded.records;
    migrate(&mut records);
    assert_rewrite_replays(&records);

    let mut session = Session::from_records(records);
    let ctx = session.build_context();
    let mut pretty = Vec::new();
    ctx.write_pretty(&mut pretty).expect("writing to memory");
    assert_eq!(
        String::from_utf8(pretty).expect("UTF-8"),
        json::to_pretty(&ctx.to_value())
    );
    check_tree(&session);

    let ids: Vec<String> = session
        .entries()
        .filter_map(|r| r.id().map(str::to_owned))
        .collect();
    for id in ids.iter().take(16) {
        let path = session.branch_path(Some(id)).expect("a known id");
        assert_eq!(path.last().and_then(|r| r.id()), Some(id.as_str()));
        let _ = session.build_context_for(id);
    }

    // Entry patches reach the last entry with an id, so the replay comparison needs ids
    // that are unique among entries.
    let unique = ids.iter().collect::<HashSet<_>>().len() == ids.len()
        && session.entries().all(|r| r.id().is_some());
    let mut file = write_all(session.records());
    let patches = session.sanitize_openai_replay();
    if unique && !patches.is_empty() {
        // The file as loaded, with the sanitizer's patch lines appended, replays to the
        // sanitized session.
        file.extend(write_all(&patches));
        let replayed = parse_session_entries(std::str::from_utf8(&file).expect("UTF-8"))
            .expect("written records replay");
        assert_eq!(replayed.records, session.records());
    }
}

fn write_all(records: &[Record]) -> Vec<u8> {
    let mut out = Vec::new();
    for record in records {
        record.write_line(&mut out);
    }
    out
}

/// Writing `records` and replaying the text gives `records` back.
fn assert_rewrite_replays(records: &[Record]) {
    let written = write_all(records);
    let text = String::from_utf8(written).expect("the writer emits UTF-8");
    let again = parse_session_entries(&text).expect("written records replay");
    assert!(again.skipped.is_empty(), "a written line was skipped");
    assert_eq!(
        again.records, records,
        "written records replay to themselves"
    );
}

fn check_tree(session: &Session) {
    let tree = session.tree();
    let n = session.records().len();
    let mut seen = vec![false; n];
    let mut stack = tree.roots.clone();
    let mut count = 0;
    while let Some(i) = stack.pop() {
        assert!(!seen[i], "entry {i} is in the tree twice");
        seen[i] = true;
        count += 1;
        stack.extend(&tree.children[i]);
    }
    let listed = tree.roots.len() + tree.children.iter().map(Vec::len).sum::<usize>();
    assert_eq!(count, listed, "an entry is unreachable from the roots");
    for i in session.entry_indices() {
        let record = session.record(i);
        let indexed = record.id().is_none_or(|id| session.index_of(id) == Some(i));
        assert_eq!(seen[i], indexed, "entry {i}");
    }
}

/// Any text and substring (the bytes before and after the first 0xFF, or, without one, the
/// text and its middle third): the word index is given the text's words space-separated,
/// each word comes from a slice of the text, and when the text holds the substring, each
/// run of letters of the substring touches one of the text's words as its place says —
/// which is how the index finds a substring's documents through their words.
pub fn search_text(data: &[u8]) {
    let (text, needle) = match data.iter().position(|&b| b == 0xff) {
        Some(at) => (
            String::from_utf8_lossy(&data[..at]).into_owned(),
            String::from_utf8_lossy(&data[at + 1..]).into_owned(),
        ),
        None => {
            let text = String::from_utf8_lossy(data).into_owned();
            let chars: Vec<char> = text.chars().collect();
            let needle = chars[chars.len() / 3..chars.len() * 2 / 3].iter().collect();
            (text, needle)
        }
    };
    let words = words(&text);
    let joined: Vec<&str> = words.iter().map(|(_, _, w)| w.as_str()).collect();
    assert_eq!(index_text(&text), joined.join(" "));
    for (start, end, word) in &words {
        assert!(
            !word.is_empty() && text.get(*start..*end).is_some(),
            "{word:?}"
        );
    }
    if contains_folded(&text, &needle) {
        for (run, place) in pieces(&needle) {
            assert!(
                words.iter().any(|(_, _, w)| place.holds(w, &run)),
                "{text:?} holds {needle:?}, but no word of it is touched by {run:?} ({place:?})"
            );
        }
    }
}
