//! Property tests of writing back, torn last lines and malformed middle lines.

use super::*;

fn v5_session() -> impl Strategy<Value = Vec<M>> {
    let entry = (
        prop::sample::select(vec![
            "message",
            "custom_message",
            "compaction",
            "branch_summary",
            "label",
            "custom",
            "model_change",
            "session_init",
            "a_future_type",
        ]),
        any::<usize>(),
        timestamp(),
        prop::collection::vec((json_key(), json_value()), 0..3),
    );
    (
        prop::option::of(js_string()),
        prop::collection::vec(entry, 0..12),
    )
        .prop_map(|(title, entries)| {
            let mut header = header_v5();
            if let Some(t) = title {
                header.set("title", M::Str(t));
                header.set("titleSource", jstr("auto"));
            }
            let mut records = vec![header];
            for (i, (ty, parent_k, ts, extra)) in entries.into_iter().enumerate() {
                let parent = if i == 0 {
                    M::Null
                } else {
                    jstr(&format!("e{}", parent_k % i))
                };
                let mut members = vec![
                    ("type".encode_utf16().collect(), jstr(ty)),
                    ("id".encode_utf16().collect(), jstr(&format!("e{i}"))),
                    ("parentId".encode_utf16().collect(), parent),
                ];
                if let Some(t) = ts.0 {
                    members.push(("timestamp".encode_utf16().collect(), t));
                }
                members.extend(extra);
                records.push(M::Obj(distinct_keys(members)));
            }
            records
        })
}

fn written(records: &[Record]) -> Vec<u8> {
    let mut out = Vec::new();
    for record in records {
        record.write_line(&mut out);
    }
    out
}

proptest! {
    #![proptest_config(cases(128))]

    #[test]
    fn v5_files_round_trip_byte_for_byte(records in v5_session()) {
        let text = jsonl(&records);
        let replayed = parse_session_entries(&text).map_err(fail)?;
        prop_assert!(replayed.skipped.is_empty());
        prop_assert_eq!(replayed.records.len(), records.len());
        let out = written(&replayed.records);
        prop_assert_eq!(String::from_utf8_lossy(&out), text.as_str());

        // The same file read as a byte stream, with CRLF line ends, or without the final
        // newline gives the same records.
        let streamed = parse_session_reader(text.as_bytes()).map_err(fail)?;
        prop_assert_eq!(written(&streamed.records), out.clone());
        let crlf = parse_session_entries(&text.replace('\n', "\r\n")).map_err(fail)?;
        prop_assert_eq!(written(&crlf.records), out.clone());
        let unterminated = parse_session_entries(text.trim_end_matches('\n')).map_err(fail)?;
        prop_assert_eq!(written(&unterminated.records), out);
    }

    #[test]
    fn a_torn_last_line_drops_exactly_that_record(records in v5_session(), cut in any::<Index>()) {
        let text = jsonl(&records);
        let full = parse_session_entries(&text).map_err(fail)?;
        let body = text.trim_end_matches('\n');
        let last_start = body.rfind('\n').map_or(0, |i| i + 1);
        let last_len = body.len() - last_start;
        let cut = cut.index(last_len);
        let torn = &text.as_bytes()[..last_start + cut];
        let replayed = parse_session_reader(torn).map_err(fail)?;
        let expected = lines_of(&full.records[..full.records.len() - 1]);
        prop_assert_eq!(lines_of(&replayed.records), expected);
        prop_assert_eq!(replayed.skipped.len(), usize::from(cut > 0));
    }

    #[test]
    fn opened_for_writing_a_torn_last_line_is_cut_exactly_when_the_rest_is_strict(
        records in v5_session(),
        cut in any::<Index>(),
    ) {
        use gjcfs::engine::manager::{SessionManager, StorageConfig, WriteTarget};
        let text = jsonl(&records);
        let body = text.trim_end_matches('\n');
        let last_start = body.rfind('\n').map_or(0, |i| i + 1);
        prop_assume!(last_start > 0);
        let kept = &text[..last_start];
        // A proper, non-empty prefix of the last line: never a record.
        let cut = 1 + cut.index(body.len() - last_start - 1);
        let torn = &text.as_bytes()[..last_start + cut];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, torn).unwrap();
        let config = StorageConfig::files(dir.path().join("blobs"));
        let opened = SessionManager::open_for_writing(&path, &WriteTarget::default(), config);
        let now = std::fs::read(&path).unwrap();
        if gjcfs::engine::read::inspect::parse_strict(kept.as_bytes()).is_ok() {
            let m = opened.map_err(fail)?;
            let reported = m.cut_torn_tail().map(|c| (c.offset, c.len));
            prop_assert_eq!(reported, Some((kept.len() as u64, cut as u64)));
            prop_assert_eq!(now, kept.as_bytes());
        } else {
            prop_assert_eq!(opened.ok().and_then(|m| m.cut_torn_tail()), None);
            prop_assert_eq!(now, torn);
        }
    }

    #[test]
    fn a_malformed_middle_line_keeps_every_other_record(
        records in v5_session(),
        at in any::<Index>(),
        garbage_kind in any::<Index>(),
        cut in any::<Index>(),
    ) {
        let lines: Vec<String> = records.iter().map(canon).collect();
        let at = 1 + at.index(lines.len());
        let fixed = ["not json", "123", "[1,2]", "null", "\"str\"", "{\"a\":1} trailing", "{,}", "}"];
        let garbage = match garbage_kind.index(fixed.len() + 1) {
            k if k < fixed.len() => fixed[k].to_owned(),
            _ => {
                // A proper, non-empty prefix of one of the lines.
                let line = &lines[cut.index(lines.len())];
                let ends: Vec<usize> = line.char_indices().map(|(i, _)| i).filter(|&i| i > 0).collect();
                match ends.len() {
                    0 => "{".to_owned(),
                    n => line[..ends[cut.index(n)]].to_owned(),
                }
            }
        };
        let mut damaged = lines.clone();
        damaged.insert(at, garbage);
        let text = damaged.join("\n") + "\n";
        let replayed = parse_session_entries(&text).map_err(fail)?;
        prop_assert_eq!(lines_of(&replayed.records), lines);
        prop_assert_eq!(replayed.skipped.len(), 1);
        prop_assert_eq!(replayed.skipped[0].line, at + 1);
    }
}
