//! Property tests of patch replay against a model.

use super::*;

#[derive(Clone, Debug)]
pub(super) enum PatchItem {
    Message {
        id_k: usize,
        text: Vec<u16>,
    },
    Other {
        id_k: usize,
    },
    HeaderPatch {
        cwd: Option<String>,
        title: Option<Vec<u16>>,
        source: Option<bool>,
        variant: u8,
    },
    EntryPatch {
        target_k: usize,
        text: Vec<u16>,
        variant: u8,
    },
    SecondHeader,
    Garbage(u8),
}

pub(super) fn patch_item() -> impl Strategy<Value = PatchItem> {
    prop_oneof![
        3 => (any::<usize>(), js_string()).prop_map(|(id_k, text)| PatchItem::Message { id_k, text }),
        1 => any::<usize>().prop_map(|id_k| PatchItem::Other { id_k }),
        3 => (
            prop::option::of(plain_text()),
            prop::option::of(js_string()),
            prop::option::of(any::<bool>()),
            any::<u8>(),
        )
            .prop_map(|(cwd, title, source, variant)| PatchItem::HeaderPatch {
                cwd,
                title,
                source,
                variant,
            }),
        3 => (any::<usize>(), js_string(), any::<u8>())
            .prop_map(|(target_k, text, variant)| PatchItem::EntryPatch { target_k, text, variant }),
        1 => Just(PatchItem::SecondHeader),
        1 => any::<u8>().prop_map(PatchItem::Garbage),
    ]
}

/// The pool of entry ids, shared by messages and other entries so that ids collide.
fn pool_id(k: usize) -> String {
    format!("m{}", k % 5)
}

/// A model line: a record to keep, or a patch with the effect it has if it applies.
pub(super) enum PatchLine {
    Record(M),
    HeaderPatch(Option<Vec<(&'static str, M)>>),
    EntryPatch(Option<(String, M)>),
    Skipped,
}

pub(super) fn build_patch_line(item: &PatchItem) -> (String, PatchLine) {
    match item {
        PatchItem::Message { id_k, text } => {
            let record = obj(vec![
                ("type", jstr("message")),
                ("id", jstr(&pool_id(*id_k))),
                ("parentId", M::Null),
                ("timestamp", jstr("2026-01-01T00:00:01.000Z")),
                (
                    "message",
                    obj(vec![
                        ("role", jstr("user")),
                        ("content", M::Str(text.clone())),
                        ("timestamp", int(1)),
                    ]),
                ),
            ]);
            (canon(&record), PatchLine::Record(record))
        }
        PatchItem::Other { id_k } => {
            let record = obj(vec![
                ("type", jstr("label")),
                ("id", jstr(&pool_id(*id_k))),
                ("parentId", M::Null),
                ("timestamp", jstr("2026-01-01T00:00:01.000Z")),
                ("targetId", jstr("m0")),
                ("label", jstr("l")),
            ]);
            (canon(&record), PatchLine::Record(record))
        }
        PatchItem::SecondHeader => {
            let record = obj(vec![
                ("type", jstr("session")),
                ("version", int(3)),
                ("id", jstr("second")),
                ("timestamp", jstr("2026-01-01T00:00:00.000Z")),
                ("cwd", jstr("/second")),
            ]);
            (canon(&record), PatchLine::Record(record))
        }
        PatchItem::Garbage(k) => {
            let text = ["not json", "{\"type\":", "42", "[1]", "", "   ", "null"][*k as usize % 7];
            (text.to_owned(), PatchLine::Skipped)
        }
        PatchItem::HeaderPatch {
            cwd,
            title,
            source,
            variant,
        } => {
            let mut fields: Vec<(&'static str, M)> = Vec::new();
            if let Some(c) = cwd {
                fields.push(("cwd", jstr(c)));
            }
            if let Some(t) = title {
                fields.push(("title", M::Str(t.clone())));
            }
            if let Some(user) = source {
                fields.push(("titleSource", jstr(if *user { "user" } else { "auto" })));
            }
            let patch = obj(fields.clone());
            let p = canon(&patch);
            let valid = |text: String| (text, PatchLine::HeaderPatch(Some(fields.clone())));
            let invalid = |text: String| (text, PatchLine::HeaderPatch(None));
            match variant % 16 {
                0..=4 => valid(format!("{{\"type\":\"header_patch\",\"patch\":{p}}}")),
                5 => valid(format!("{{\"patch\":{p},\"type\":\"header_patch\"}}")),
                6 => valid(format!(
                    "{{\"type\":\"header_patch\",\"patch\":{{\"title\":\"decoy\"}},\"patch\":{p}}}"
                )),
                7 => invalid(format!(
                    "{{\"type\":\"header_patch\",\"patch\":{p},\"x\":1}}"
                )),
                8 => {
                    let mut extra = patch.clone();
                    extra.set("id", jstr("x"));
                    invalid(format!(
                        "{{\"type\":\"header_patch\",\"patch\":{}}}",
                        canon(&extra)
                    ))
                }
                9 => invalid("{\"type\":\"header_patch\",\"patch\":{\"title\":5}}".into()),
                10 => invalid(
                    "{\"type\":\"header_patch\",\"patch\":{\"titleSource\":\"robot\"}}".into(),
                ),
                11 => invalid(format!("{{\"type\":\"header_patch\",\"patch\":[{p}]}}")),
                12 => invalid("{\"type\":\"header_patch\",\"patch\":null}".into()),
                13 => invalid("{\"type\":\"header_patch\"}".into()),
                14 => invalid("{\"type\":\"header_patch\",\"patch\":{\"cwd\":null}}".into()),
                _ => invalid("{\"type\":\"header_patch\",\"patch\":\"title\"}".into()),
            }
        }
        PatchItem::EntryPatch {
            target_k,
            text,
            variant,
        } => {
            let target = if target_k % 7 == 6 {
                "ghost".to_owned()
            } else {
                pool_id(*target_k)
            };
            let message = obj(vec![
                ("role", jstr("user")),
                (
                    "content",
                    M::Arr(vec![obj(vec![
                        ("type", jstr("text")),
                        ("text", M::Str(text.clone())),
                    ])]),
                ),
                ("timestamp", int(2)),
            ]);
            let m = canon(&message);
            let t = canon(&jstr(&target));
            let valid = |text: String, message: M| {
                (text, PatchLine::EntryPatch(Some((target.clone(), message))))
            };
            let invalid = |text: String| (text, PatchLine::EntryPatch(None));
            match variant % 16 {
                0..=4 => valid(
                    format!("{{\"type\":\"entry_patch\",\"entryId\":{t},\"patch\":{{\"message\":{m}}}}}"),
                    message,
                ),
                5 => valid(
                    format!("{{\"patch\":{{\"message\":{m}}},\"entryId\":{t},\"type\":\"entry_patch\"}}"),
                    message,
                ),
                6 => invalid(format!("{{\"type\":\"entry_patch\",\"entryId\":{t},\"patch\":{{}}}}")),
                7 => invalid(format!(
                    "{{\"type\":\"entry_patch\",\"entryId\":{t},\"patch\":{{\"message\":{m}}},\"x\":1}}"
                )),
                8 => invalid(format!(
                    "{{\"type\":\"entry_patch\",\"entryId\":{t},\"patch\":{{\"message\":{m},\"x\":1}}}}"
                )),
                9 => invalid(format!("{{\"type\":\"entry_patch\",\"entryId\":5,\"patch\":{{\"message\":{m}}}}}")),
                10 => invalid(format!("{{\"type\":\"entry_patch\",\"entryId\":{t},\"patch\":{{\"message\":[{m}]}}}}")),
                11 => invalid(format!("{{\"type\":\"entry_patch\",\"entryId\":{t},\"patch\":{{\"message\":\"x\"}}}}")),
                12 => invalid(format!("{{\"type\":\"entry_patch\",\"entryId\":{t},\"patch\":{{\"message\":null}}}}")),
                13 => invalid(format!("{{\"type\":\"entry_patch\",\"entryId\":{t},\"patch\":[{m}]}}")),
                14 => invalid(format!("{{\"type\":\"entry_patch\",\"patch\":{{\"message\":{m}}}}}")),
                _ => valid(
                    format!("{{\"type\":\"entry_patch\",\"entryId\":{t},\"patch\":{{\"message\":{{}}}}}}"),
                    obj(vec![]),
                ),
            }
        }
    }
}

pub(super) fn patch_header(version: Option<i64>, title: bool) -> M {
    let mut header = obj(vec![("type", jstr("session"))]);
    if let Some(v) = version {
        header.set("version", int(v));
    }
    header.set("id", jstr("s"));
    if title {
        header.set("title", jstr("original"));
        header.set("titleSource", jstr("user"));
    }
    header.set("timestamp", jstr("2026-01-01T00:00:00.000Z"));
    header.set("cwd", jstr("/original"));
    header
}

/// Patch replay over the model lines: the kept records after patches.
fn model_replay(lines: Vec<PatchLine>) -> Vec<M> {
    let mut out: Vec<M> = Vec::new();
    let mut header: Option<usize> = None;
    let mut by_id: HashMap<Vec<u16>, usize> = HashMap::new();
    let patches_apply = |out: &Vec<M>, header: Option<usize>| {
        header.is_some_and(|h| match out[h].get("version") {
            Some(M::Num(v)) => v.parse::<f64>().is_ok_and(|v| v >= 4.0),
            _ => false,
        })
    };
    for line in lines {
        match line {
            PatchLine::Skipped => {}
            PatchLine::HeaderPatch(effect) => {
                if let (true, Some(fields)) = (patches_apply(&out, header), effect) {
                    let h = header.expect("a header");
                    for (k, v) in fields {
                        out[h].set(k, v);
                    }
                }
            }
            PatchLine::EntryPatch(effect) => {
                if let (true, Some((target, message))) = (patches_apply(&out, header), effect) {
                    let target: Vec<u16> = target.encode_utf16().collect();
                    if let Some(&at) = by_id.get(&target) {
                        if out[at].get("type") == Some(&jstr("message")) {
                            out[at].set("message", message);
                        }
                    }
                }
            }
            PatchLine::Record(record) => {
                if record.get("type") == Some(&jstr("session")) {
                    header.get_or_insert(out.len());
                } else if let Some(M::Str(id)) = record.get("id") {
                    by_id.insert(id.clone(), out.len());
                }
                out.push(record);
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn patch_replay_matches_the_model(
        version in prop::option::of(1i64..=5),
        titled in any::<bool>(),
        header_at in any::<Index>(),
        items in prop::collection::vec(patch_item(), 0..24),
    ) {
        let header = patch_header(version, titled);
        let at = if header_at.index(4) == 0 { 0 } else { header_at.index(items.len() + 1) };
        let mut text = String::new();
        let mut lines = Vec::new();
        // Every kept record as written, and the version of the first header in the file.
        let mut as_written = Vec::new();
        let mut first_version: Option<Option<i64>> = None;
        let mut push = |line: String, model: PatchLine, text: &mut String, lines: &mut Vec<PatchLine>| {
            if let PatchLine::Record(r) = &model {
                as_written.push(canon(r));
                if is_session(r) && first_version.is_none() {
                    first_version = Some(match r.get("version") {
                        Some(M::Num(v)) => v.parse().ok(),
                        _ => None,
                    });
                }
            }
            text.push_str(&line);
            text.push('\n');
            lines.push(model);
        };
        for (i, item) in items.iter().enumerate() {
            if i == at {
                push(canon(&header), PatchLine::Record(header.clone()), &mut text, &mut lines);
            }
            let (line, model) = build_patch_line(item);
            push(line, model, &mut text, &mut lines);
        }
        if at >= items.len() {
            push(canon(&header), PatchLine::Record(header.clone()), &mut text, &mut lines);
        }
        let expected: Vec<String> = model_replay(lines).iter().map(canon).collect();
        let replayed = parse_session_entries(&text).map_err(fail)?;
        prop_assert_eq!(&lines_of(&replayed.records), &expected, "file:\n{}", text);

        // Below version 4 no patch ever applies: every kept record is as written.
        if first_version.is_some_and(|v| v.unwrap_or(1) < 4) {
            prop_assert_eq!(lines_of(&replayed.records), as_written);
        }
    }
}
