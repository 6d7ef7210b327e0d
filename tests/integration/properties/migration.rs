//! Property tests of the v1–v4 migrations against a model.

use super::*;

#[derive(Clone, Debug)]
struct MigChoice {
    kind: u8,
    k: usize,
    index_kind: u8,
    preset_keys: u8,
    parent_k: usize,
}

fn mig_choice() -> impl Strategy<Value = MigChoice> {
    (
        any::<u8>(),
        any::<usize>(),
        any::<u8>(),
        any::<u8>(),
        any::<usize>(),
    )
        .prop_map(|(kind, k, index_kind, preset_keys, parent_k)| MigChoice {
            kind,
            k,
            index_kind,
            preset_keys,
            parent_k,
        })
}

/// What a generated v1 compaction carries as `firstKeptEntryIndex`.
#[derive(Clone, Debug, PartialEq)]
enum KeptIndex {
    None,
    /// A numeric index (an integer, or the fraction text given).
    Number(i64),
    Fraction,
    Text,
}

struct MigFile {
    version: i64,
    records: Vec<M>,
    /// Per record: the v1 compaction index it carries.
    kept_index: Vec<KeptIndex>,
}

fn build_mig_file(
    version: i64,
    explicit_v1: bool,
    second_header: Option<usize>,
    choices: &[MigChoice],
) -> MigFile {
    let mut header = obj(vec![("type", jstr("session"))]);
    if version > 1 || explicit_v1 {
        header.set("version", int(version));
    }
    header.set("id", jstr("s"));
    header.set("timestamp", jstr("2026-01-01T00:00:00.000Z"));
    header.set("cwd", jstr("/w"));
    let mut file = MigFile {
        version,
        records: vec![header],
        kept_index: vec![KeptIndex::None],
    };
    let total = choices.len() + 1 + usize::from(second_header.is_some());
    for (i, c) in choices.iter().enumerate() {
        if second_header == Some(i) {
            let mut second = obj(vec![("type", jstr("session"))]);
            if version > 1 {
                second.set("version", int(version));
            }
            second.set("id", jstr("second"));
            second.set("cwd", jstr("/second"));
            file.records.push(second);
            file.kept_index.push(KeptIndex::None);
        }
        let mut record = obj(vec![]);
        let mut kept = KeptIndex::None;
        if version == 1 && c.preset_keys % 8 == 0 {
            // A legacy row that already has the keys: they keep their positions.
            record.set("parentId", jstr("old-parent"));
            record.set("id", jstr("old"));
        }
        let ty = match c.kind % 6 {
            0 | 1 => "message",
            2 => "compaction",
            3 => "model_change",
            4 => "thinking_level_change",
            _ => "custom",
        };
        record.set("type", jstr(ty));
        if version > 1 {
            record.set("id", jstr(&format!("e{i}")));
            let parent = match c.parent_k % 4 {
                0 => M::Null,
                _ if i == 0 => M::Null,
                1 => jstr("dangling"),
                _ => jstr(&format!("e{}", c.parent_k % i)),
            };
            record.set("parentId", parent);
        }
        record.set("timestamp", jstr("2026-01-01T00:00:01.000Z"));
        match ty {
            "message" => {
                let role = ["user", "assistant", "hookMessage"][c.k % 3];
                record.set(
                    "message",
                    obj(vec![
                        ("role", jstr(role)),
                        ("content", jstr("x")),
                        ("timestamp", int(1)),
                    ]),
                );
            }
            "compaction" => {
                record.set("summary", jstr("sum"));
                if version == 1 {
                    kept = match c.index_kind % 8 {
                        0 => KeptIndex::None,
                        1 => KeptIndex::Fraction,
                        2 => KeptIndex::Text,
                        3 => KeptIndex::Number(-1),
                        _ => KeptIndex::Number((c.k % (total + 2)) as i64),
                    };
                    match &kept {
                        KeptIndex::None => {}
                        KeptIndex::Number(n) => record.set("firstKeptEntryIndex", int(*n)),
                        KeptIndex::Fraction => {
                            record.set("firstKeptEntryIndex", M::Num("1.5".into()))
                        }
                        KeptIndex::Text => record.set("firstKeptEntryIndex", jstr("1")),
                    }
                } else {
                    record.set("firstKeptEntryId", jstr(&format!("e{}", c.k % (i + 1))));
                }
                record.set("tokensBefore", int(100));
            }
            "model_change" => record.set("model", jstr("p/m")),
            "thinking_level_change" => record.set("thinkingLevel", jstr("high")),
            _ => record.set("customType", jstr("c")),
        }
        file.records.push(record);
        file.kept_index.push(kept);
    }
    file
}

/// The migrations applied to the model records, given the ids the engine drew for a v1 file.
fn model_migrate(file: &MigFile, drawn_ids: &[Option<String>]) -> Vec<M> {
    let mut out = file.records.clone();
    let first_header = out.iter().position(is_session).expect("a header");
    if file.version < 2 {
        let mut previous: Option<String> = None;
        for r in 0..out.len() {
            if is_session(&out[r]) {
                out[r].set("version", int(2));
                continue;
            }
            let id = drawn_ids[r].clone().expect("an id was drawn");
            out[r].set("id", jstr(&id));
            out[r].set("parentId", previous.as_deref().map_or(M::Null, jstr));
            previous = Some(id);
            match &file.kept_index[r] {
                KeptIndex::Number(n) => {
                    // The record at that index of the full list, as it stands at this
                    // point of the pass: earlier entries have their new id, later ones only
                    // an id they were written with.
                    let target = usize::try_from(*n)
                        .ok()
                        .filter(|&t| t < out.len() && !is_session(&out[t]));
                    let target_id = target.and_then(|t| match out[t].get("id") {
                        Some(M::Str(id)) => Some(M::Str(id.clone())),
                        _ => None,
                    });
                    out[r].remove("firstKeptEntryIndex");
                    if let Some(id) = target_id {
                        out[r].set("firstKeptEntryId", id);
                    }
                }
                KeptIndex::Fraction => out[r].remove("firstKeptEntryIndex"),
                KeptIndex::None | KeptIndex::Text => {}
            }
        }
    }
    if file.version < 3 {
        for record in out.iter_mut() {
            if is_session(record) {
                record.set("version", int(3));
            } else if let Some(message) = record.get("message") {
                if message.get("role") == Some(&jstr("hookMessage")) {
                    let mut message = message.clone();
                    message.set("role", jstr("custom"));
                    record.set("message", message);
                }
            }
        }
    }
    out[first_header].set("version", int(5));
    out
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn migration_matches_the_model_and_is_idempotent(
        version in 1i64..=3,
        explicit_v1 in any::<bool>(),
        second_header in prop::option::of(0usize..12),
        choices in prop::collection::vec(mig_choice(), 0..12),
    ) {
        let file = build_mig_file(version, explicit_v1, second_header, &choices);
        let text = jsonl(&file.records);
        let mut records = parse_session_entries(&text).map_err(fail)?.records;
        prop_assert_eq!(records.len(), file.records.len());
        prop_assert_eq!(migrate(&mut records), Migration::Migrated { from: version as f64 });

        prop_assert_eq!(records[0].as_header().map(|h| h.version()), Some(5.0));
        let drawn: Vec<Option<String>> = records
            .iter()
            .map(|r| (!r.is_header()).then(|| r.id().map(str::to_owned)).flatten())
            .collect();
        for (r, record) in records.iter().enumerate() {
            prop_assert!(record.is_header() || record.id().is_some(), "record {} has no id", r);
        }
        if version == 1 {
            let ids: Vec<&String> = drawn.iter().flatten().collect();
            for id in &ids {
                prop_assert!(
                    id.len() == 8 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
                    "id {:?}", id
                );
            }
            prop_assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len(), "ids are unique");
            // The parent chain is linear in file order.
            let mut previous: Option<&str> = None;
            for record in records.iter().filter(|r| !r.is_header()) {
                prop_assert_eq!(record.parent_id(), previous);
                previous = record.id();
            }
        }
        let expected: Vec<String> = model_migrate(&file, &drawn).iter().map(canon).collect();
        prop_assert_eq!(&lines_of(&records), &expected);

        let before = lines_of(&records);
        prop_assert_eq!(migrate(&mut records), Migration::NotNeeded);
        prop_assert_eq!(lines_of(&records), before);
    }
}
