//! Property tests of the context a session builds against a model of the agent's
//! `buildSessionContext`.

use super::*;

#[derive(Clone, Debug)]
struct CtxChoice {
    parent_kind: u8,
    parent_k: usize,
    kind: u8,
    flag: u8,
    k: usize,
    text: Vec<u16>,
    text2: String,
    details: Option<M>,
    ts: (Option<M>, Option<i64>),
}

fn ctx_choice() -> impl Strategy<Value = CtxChoice> {
    (
        any::<u8>(),
        any::<usize>(),
        any::<u8>(),
        any::<u8>(),
        any::<usize>(),
        js_string(),
        plain_text(),
        prop::option::of(json_value()),
        timestamp(),
    )
        .prop_map(
            |(parent_kind, parent_k, kind, flag, k, text, text2, details, ts)| CtxChoice {
                parent_kind,
                parent_k,
                kind,
                flag,
                k,
                text,
                text2,
                details,
                ts,
            },
        )
}

/// What a `configured_model_chain` entry does, by the normalisation rules
#[derive(Clone, Debug)]
enum ChainEffect {
    Ignore,
    Clear,
    Set(M),
}

/// What an entry means to the context model.
#[derive(Clone, Debug)]
enum CtxKind {
    /// A `message` entry: its payload, and `provider/model` when it is an assistant message.
    Message(M, Option<String>),
    /// An entry that emits this message (custom message, non-empty branch summary).
    Emits(M),
    Compaction {
        summary_message: M,
        first_kept: Option<String>,
        remote: bool,
    },
    ModelChange {
        model: String,
        role: String,
    },
    /// A `configured_model_chain` and what it does to the chain map.
    Chain(String, ChainEffect),
    ServiceTier(Option<String>),
    McpSelection {
        names: M,
        legacy_builtin: Option<M>,
    },
    BuiltinSelection(M),
    Mode {
        mode: String,
        data: Option<M>,
    },
    Thinking(Option<String>),
    /// A `ttsr_injection`: rule names, rule records by name, and a message count.
    Ttsr {
        rules: Vec<String>,
        records: Vec<(String, M)>,
        count: Option<M>,
    },
    Silent,
}

struct CtxEntry {
    id: String,
    parent: Option<usize>,
    kind: CtxKind,
}

fn millis(ts: Option<i64>) -> M {
    ts.map_or(M::Null, int)
}

fn text_content(text: &[u16], as_blocks: bool) -> M {
    if as_blocks {
        M::Arr(vec![obj(vec![
            ("type", jstr("text")),
            ("text", M::Str(text.to_vec())),
        ])])
    } else {
        M::Str(text.to_vec())
    }
}

fn build_ctx_file(choices: &[CtxChoice]) -> (String, Vec<CtxEntry>) {
    let mut records = vec![header_v5()];
    let mut entries: Vec<CtxEntry> = Vec::new();
    for (i, c) in choices.iter().enumerate() {
        let id = format!("e{i}");
        let parent = match c.parent_kind % 10 {
            _ if i == 0 => None,
            0 => None,
            1 | 2 => Some(c.parent_k % i),
            _ => Some(i - 1),
        };
        let ts_ms = c.ts.1;
        let earlier_id = |k: usize| {
            if i == 0 {
                "ghost".to_owned()
            } else {
                format!("e{}", k % i)
            }
        };
        let (ty, fields, kind): (&str, Vec<(&str, M)>, CtxKind) = match c.kind % 16 {
            0..=2 => {
                let (message, model) = match c.flag % 3 {
                    0 => (
                        obj(vec![
                            ("role", jstr("user")),
                            ("content", text_content(&c.text, c.flag % 2 == 0)),
                            ("timestamp", int(1)),
                        ]),
                        None,
                    ),
                    1 => {
                        let provider = ["anthropic", "openai"][c.k % 2];
                        let model = format!("m{}", c.k % 3);
                        (
                            obj(vec![
                                ("role", jstr("assistant")),
                                ("content", text_content(&c.text, true)),
                                ("provider", jstr(provider)),
                                ("model", jstr(&model)),
                                ("timestamp", int(2)),
                            ]),
                            Some(format!("{provider}/{model}")),
                        )
                    }
                    _ => (
                        obj(vec![
                            ("role", jstr("toolResult")),
                            ("toolCallId", jstr("t")),
                            ("toolName", jstr("bash")),
                            ("content", text_content(&c.text, true)),
                            ("isError", M::Bool(false)),
                            ("timestamp", int(3)),
                        ]),
                        None,
                    ),
                };
                (
                    "message",
                    vec![("message", message.clone())],
                    CtxKind::Message(message, model),
                )
            }
            3 => {
                let content = text_content(&c.text, c.flag % 2 == 0);
                let display = M::Bool(c.flag % 3 == 0);
                let attribution = match c.k % 3 {
                    0 => None,
                    1 => Some(jstr("user")),
                    _ => Some(jstr("agent")),
                };
                let mut fields = vec![
                    ("customType", jstr("note")),
                    ("content", content.clone()),
                    ("display", display.clone()),
                ];
                let mut emitted = obj(vec![
                    ("role", jstr("custom")),
                    ("customType", jstr("note")),
                    ("content", content),
                    ("display", display),
                ]);
                if let Some(d) = &c.details {
                    fields.push(("details", d.clone()));
                    emitted.set("details", d.clone());
                }
                if let Some(a) = &attribution {
                    fields.push(("attribution", a.clone()));
                    emitted.set("attribution", a.clone());
                }
                emitted.set("timestamp", millis(ts_ms));
                ("custom_message", fields, CtxKind::Emits(emitted))
            }
            4 => {
                let summary = if c.flag % 3 == 0 {
                    Vec::new()
                } else {
                    c.text.clone()
                };
                let from_id = if c.flag % 2 == 0 {
                    "root".to_owned()
                } else {
                    earlier_id(c.k)
                };
                let kind = if summary.is_empty() {
                    CtxKind::Silent
                } else {
                    CtxKind::Emits(obj(vec![
                        ("role", jstr("branchSummary")),
                        ("summary", M::Str(summary.clone())),
                        ("fromId", jstr(&from_id)),
                        ("timestamp", millis(ts_ms)),
                    ]))
                };
                (
                    "branch_summary",
                    vec![("fromId", jstr(&from_id)), ("summary", M::Str(summary))],
                    kind,
                )
            }
            5 => {
                let first_kept = match c.k % 5 {
                    0 => None,
                    1 => Some("ghost".to_owned()),
                    k => Some(earlier_id(c.parent_k / 7 + k)),
                };
                let tokens = int((c.k % 100_000) as i64);
                let history = M::Arr(vec![obj(vec![("type", jstr("message"))])]);
                let (preserve, payload) = match c.flag % 7 {
                    0 | 1 => (
                        Some(obj(vec![(
                            "openaiRemoteCompaction",
                            obj(vec![
                                ("provider", jstr("openai")),
                                ("replacementHistory", history.clone()),
                            ]),
                        )])),
                        Some(obj(vec![
                            ("type", jstr("openaiResponsesHistory")),
                            ("provider", jstr("openai")),
                            ("items", history.clone()),
                        ])),
                    ),
                    2 => (
                        Some(obj(vec![(
                            "openaiRemoteCompaction",
                            obj(vec![
                                ("provider", jstr("")),
                                ("replacementHistory", history.clone()),
                            ]),
                        )])),
                        None,
                    ),
                    3 => (
                        Some(obj(vec![(
                            "openaiRemoteCompaction",
                            obj(vec![
                                ("provider", jstr("openai")),
                                ("replacementHistory", jstr("x")),
                            ]),
                        )])),
                        None,
                    ),
                    4 => (
                        Some(obj(vec![(
                            "openaiRemoteCompaction",
                            obj(vec![("replacementHistory", history)]),
                        )])),
                        None,
                    ),
                    _ => (None, None),
                };
                let short = (c.flag % 2 == 0).then(|| jstr(&c.text2));
                let mut fields = vec![("summary", M::Str(c.text.clone()))];
                let mut summary_message = obj(vec![
                    ("role", jstr("compactionSummary")),
                    ("summary", M::Str(c.text.clone())),
                ]);
                if let Some(s) = &short {
                    fields.push(("shortSummary", s.clone()));
                    summary_message.set("shortSummary", s.clone());
                }
                if let Some(f) = &first_kept {
                    fields.push(("firstKeptEntryId", jstr(f)));
                }
                fields.push(("tokensBefore", tokens.clone()));
                summary_message.set("tokensBefore", tokens);
                if let Some(p) = &preserve {
                    fields.push(("preserveData", p.clone()));
                }
                let remote = payload.is_some();
                if let Some(p) = payload {
                    summary_message.set("providerPayload", p);
                }
                summary_message.set("timestamp", millis(ts_ms));
                (
                    "compaction",
                    fields,
                    CtxKind::Compaction {
                        summary_message,
                        first_kept,
                        remote,
                    },
                )
            }
            6 => {
                let model = format!("prov/m{}", c.k % 3);
                let role = match c.flag % 4 {
                    0 => None,
                    1 => Some("default"),
                    2 => Some("smol"),
                    _ => Some("plan"),
                };
                let mut fields = vec![("model", jstr(&model))];
                if let Some(r) = role {
                    fields.push(("role", jstr(r)));
                }
                (
                    "model_change",
                    fields,
                    CtxKind::ModelChange {
                        model,
                        role: role.unwrap_or("default").to_owned(),
                    },
                )
            }
            7 => {
                let level = match c.flag % 3 {
                    0 => None,
                    1 => Some("high".to_owned()),
                    _ => Some("low".to_owned()),
                };
                (
                    "thinking_level_change",
                    vec![("thinkingLevel", level.as_deref().map_or(M::Null, jstr))],
                    CtxKind::Thinking(level),
                )
            }
            8 => (
                "custom",
                vec![
                    ("customType", jstr("c")),
                    ("data", c.details.clone().unwrap_or(M::Null)),
                ],
                CtxKind::Silent,
            ),
            11 => {
                let role = ["default", "smol", ""][c.k % 3];
                let entries = match c.flag % 4 {
                    0 => jstr("p/m0"),
                    1 => M::Arr(vec![jstr(""), int(5)]),
                    _ => M::Arr(vec![
                        jstr(&format!("p/m{}", c.k % 3)),
                        jstr(""),
                        jstr("q/x"),
                        int(5),
                    ]),
                };
                let origin = [None, Some(jstr("user")), Some(int(5))][c.parent_k % 3].clone();
                let identity =
                    [None, Some(jstr("id1")), Some(int(7))][(c.parent_k / 3) % 3].clone();
                let explicit_head =
                    [None, Some(M::Bool(true)), Some(jstr("true"))][(c.parent_k / 9) % 3].clone();
                let cleared = [None, Some(M::Bool(true)), Some(M::Bool(false))]
                    [c.flag as usize % 5 % 3]
                    .clone();
                let mut fields = vec![("role", jstr(role)), ("entries", entries.clone())];
                for (key, value) in [
                    ("origin", &origin),
                    ("identity", &identity),
                    ("explicitHead", &explicit_head),
                    ("cleared", &cleared),
                ] {
                    if let Some(v) = value {
                        fields.push((key, v.clone()));
                    }
                }
                let kept: Vec<M> = match &entries {
                    M::Arr(items) => items
                        .iter()
                        .filter(|e| matches!(e, M::Str(s) if !s.is_empty()))
                        .cloned()
                        .collect(),
                    _ => Vec::new(),
                };
                let effect = if role.is_empty() {
                    ChainEffect::Ignore
                } else if cleared == Some(M::Bool(true)) {
                    ChainEffect::Clear
                } else if kept.is_empty() {
                    ChainEffect::Ignore
                } else {
                    let mut chain = obj(vec![
                        ("role", jstr(role)),
                        ("entries", M::Arr(kept)),
                        (
                            "origin",
                            match &origin {
                                Some(o @ M::Str(_)) => o.clone(),
                                _ => jstr("session"),
                            },
                        ),
                    ]);
                    if let Some(id @ M::Str(_)) = &identity {
                        chain.set("identity", id.clone());
                    }
                    chain.set(
                        "explicitHead",
                        M::Bool(explicit_head == Some(M::Bool(true))),
                    );
                    ChainEffect::Set(chain)
                };
                (
                    "configured_model_chain",
                    fields,
                    CtxKind::Chain(role.to_owned(), effect),
                )
            }
            12 => {
                let tier = (c.flag % 2 == 0).then(|| "priority".to_owned());
                (
                    "service_tier_change",
                    vec![("serviceTier", tier.as_deref().map_or(M::Null, jstr))],
                    CtxKind::ServiceTier(tier),
                )
            }
            13 => {
                let names = M::Arr((0..c.k % 3).map(|j| jstr(&format!("mcp{j}"))).collect());
                let legacy_builtin = (c.flag % 2 == 0).then(|| {
                    M::Arr(
                        (0..c.parent_k % 3)
                            .map(|j| jstr(&format!("b{j}")))
                            .collect(),
                    )
                });
                let mut fields = vec![("selectedToolNames", names.clone())];
                if let Some(l) = &legacy_builtin {
                    fields.push(("selectedDiscoveredBuiltinToolNames", l.clone()));
                }
                (
                    "mcp_tool_selection",
                    fields,
                    CtxKind::McpSelection {
                        names,
                        legacy_builtin,
                    },
                )
            }
            14 => {
                let names = M::Arr((0..c.k % 3).map(|j| jstr(&format!("b{j}"))).collect());
                (
                    "discovered_builtin_tool_selection",
                    vec![("selectedToolNames", names.clone())],
                    CtxKind::BuiltinSelection(names),
                )
            }
            15 => {
                let mode = ["plan", "none", "review"][c.k % 3].to_owned();
                let mut fields = vec![("mode", jstr(&mode))];
                if let Some(d) = &c.details {
                    fields.push(("data", d.clone()));
                }
                (
                    "mode_change",
                    fields,
                    CtxKind::Mode {
                        mode,
                        data: c.details.clone(),
                    },
                )
            }
            9 => (
                "label",
                vec![("targetId", jstr(&earlier_id(c.k))), ("label", jstr("l"))],
                CtxKind::Silent,
            ),
            _ => {
                let rules: Vec<String> = (0..c.k % 4)
                    .map(|j| format!("r{}", (c.k / 4 + j * 3) % 4))
                    .collect();
                let records: Vec<(String, M)> = (0..c.flag as usize % 3)
                    .map(|j| {
                        let name = format!("r{}", (c.parent_k + j) % 4);
                        let mut record = obj(vec![
                            ("name", jstr(&name)),
                            ("lastInjectedAt", int(((c.parent_k / 4 + j) % 1000) as i64)),
                        ]);
                        if j == 1 {
                            record.set("repeatMode", jstr("always"));
                        }
                        (name, record)
                    })
                    .collect();
                let count = (c.flag % 4 == 0).then(|| int((c.k % 50) as i64));
                let mut fields = vec![(
                    "injectedRules",
                    M::Arr(rules.iter().map(|r| jstr(r)).collect()),
                )];
                if c.flag % 5 != 0 {
                    fields.push((
                        "injectedRuleRecords",
                        M::Arr(records.iter().map(|(_, r)| r.clone()).collect()),
                    ));
                }
                if let Some(n) = &count {
                    fields.push(("ttsrMessageCount", n.clone()));
                }
                let records = if c.flag % 5 != 0 { records } else { Vec::new() };
                (
                    "ttsr_injection",
                    fields,
                    CtxKind::Ttsr {
                        rules,
                        records,
                        count,
                    },
                )
            }
        };
        let mut record = obj(vec![
            ("type", jstr(ty)),
            ("id", jstr(&id)),
            (
                "parentId",
                parent.map_or(M::Null, |p| jstr(&format!("e{p}"))),
            ),
        ]);
        if let Some(t) = &c.ts.0 {
            record.set("timestamp", t.clone());
        }
        for (k, v) in fields {
            record.set(k, v);
        }
        records.push(record);
        entries.push(CtxEntry { id, parent, kind });
    }
    (jsonl(&records), entries)
}

/// What the context model computes, as canonical text: the messages, and the whole context
/// object
struct ModelContext {
    messages: Vec<String>,
    full: String,
}

/// Sets `key` in an ordered map: in place when present, appended otherwise.
fn map_set(map: &mut Vec<(String, M)>, key: &str, value: M) {
    match map.iter_mut().find(|(k, _)| k == key) {
        Some(slot) => slot.1 = value,
        None => map.push((key.to_owned(), value)),
    }
}

fn map_obj(map: &[(String, M)]) -> M {
    obj(map.iter().map(|(k, v)| (k.as_str(), v.clone())).collect())
}

/// The model: the path, the state scan, message emission, and the
/// return value
fn model_context(entries: &[CtxEntry], leaf: Option<usize>) -> ModelContext {
    let mut path = Vec::new();
    let mut at = leaf;
    while let Some(i) = at {
        path.push(i);
        at = entries[i].parent;
    }
    path.reverse();

    let mut thinking = jstr("off");
    let mut service_tier: Option<M> = None;
    let mut models: Vec<(String, M)> = Vec::new();
    let mut explicit_default = false;
    let mut chains: Vec<(String, M)> = Vec::new();
    let mut ttsr_rules: Vec<String> = Vec::new();
    let mut ttsr_records: Vec<(String, M)> = Vec::new();
    let mut ttsr_count = int(0);
    let mut mcp_names = M::Arr(Vec::new());
    let mut builtin_names: Option<M> = None;
    let mut has_mcp = false;
    let mut has_builtin = false;
    let mut mode = Some(jstr("none"));
    let mut mode_data: Option<M> = None;
    let mut compaction = None;
    for (pos, &i) in path.iter().enumerate() {
        match &entries[i].kind {
            CtxKind::Thinking(level) => thinking = jstr(level.as_deref().unwrap_or("off")),
            CtxKind::ModelChange { model, role } => {
                if role == "default" {
                    explicit_default = true;
                }
                map_set(&mut models, role, jstr(model));
            }
            CtxKind::Message(_, Some(model)) if !explicit_default => {
                map_set(&mut models, "default", jstr(model));
            }
            CtxKind::Chain(role, effect) => match effect {
                ChainEffect::Ignore => {}
                ChainEffect::Clear => chains.retain(|(r, _)| r != role),
                ChainEffect::Set(chain) => map_set(&mut chains, role, chain.clone()),
            },
            CtxKind::ServiceTier(tier) => service_tier = tier.as_deref().map(jstr),
            CtxKind::McpSelection {
                names,
                legacy_builtin,
            } => {
                mcp_names = names.clone();
                has_mcp = true;
                if let Some(list) = legacy_builtin {
                    builtin_names = Some(list.clone());
                    has_builtin = true;
                }
            }
            CtxKind::BuiltinSelection(names) => {
                builtin_names = Some(names.clone());
                has_builtin = true;
            }
            CtxKind::Mode { mode: m, data } => {
                mode = Some(jstr(m));
                mode_data = data.clone();
            }
            CtxKind::Ttsr {
                rules,
                records,
                count,
            } => {
                for name in rules {
                    if !ttsr_rules.contains(name) {
                        ttsr_rules.push(name.clone());
                    }
                    if !ttsr_records.iter().any(|(n, _)| n == name) {
                        let record = obj(vec![("name", jstr(name)), ("lastInjectedAt", int(0))]);
                        ttsr_records.push((name.clone(), record));
                    }
                }
                for (name, record) in records {
                    if !ttsr_rules.contains(name) {
                        ttsr_rules.push(name.clone());
                    }
                    map_set(&mut ttsr_records, name, record.clone());
                }
                if let Some(n) = count {
                    ttsr_count = n.clone();
                }
            }
            CtxKind::Compaction { .. } => compaction = Some(pos),
            _ => {}
        }
    }
    for (role, model) in &models {
        if !chains.iter().any(|(r, _)| r == role) {
            let chain = obj(vec![
                ("role", jstr(role)),
                ("entries", M::Arr(vec![model.clone()])),
                ("origin", jstr("legacy_session")),
                ("explicitHead", M::Bool(true)),
            ]);
            chains.push((role.clone(), chain));
        }
    }

    let emitted = |i: usize| match &entries[i].kind {
        CtxKind::Message(m, _) | CtxKind::Emits(m) => Some(m.clone()),
        _ => None,
    };
    let mut messages = Vec::new();
    match compaction {
        None => messages.extend(path.iter().filter_map(|&i| emitted(i))),
        Some(at) => {
            let CtxKind::Compaction {
                summary_message,
                first_kept,
                remote,
            } = &entries[path[at]].kind
            else {
                unreachable!("a compaction position");
            };
            messages.push(summary_message.clone());
            if !remote {
                let start = first_kept
                    .as_ref()
                    .and_then(|f| path[..at].iter().position(|&i| entries[i].id == *f));
                if let Some(start) = start {
                    messages.extend(path[start..at].iter().filter_map(|&i| emitted(i)));
                }
            }
            messages.extend(path[at + 1..].iter().filter_map(|&i| emitted(i)));
        }
    }

    let mut full = obj(vec![
        ("messages", M::Arr(messages.clone())),
        ("thinkingLevel", thinking),
    ]);
    if let Some(tier) = service_tier {
        full.set("serviceTier", tier);
    }
    full.set("models", map_obj(&models));
    full.set("configuredModelChains", map_obj(&chains));
    full.set(
        "injectedTtsrRules",
        M::Arr(ttsr_rules.iter().map(|r| jstr(r)).collect()),
    );
    full.set(
        "injectedTtsrRuleRecords",
        M::Arr(ttsr_records.into_iter().map(|(_, r)| r).collect()),
    );
    full.set("ttsrMessageCount", ttsr_count);
    full.set("selectedMCPToolNames", mcp_names);
    if let Some(list) = builtin_names {
        full.set("selectedDiscoveredBuiltinToolNames", list);
    }
    full.set("hasPersistedMCPToolSelection", M::Bool(has_mcp));
    full.set(
        "hasPersistedDiscoveredBuiltinToolSelection",
        M::Bool(has_builtin),
    );
    if let Some(m) = mode {
        full.set("mode", m);
    }
    if let Some(d) = mode_data {
        full.set("modeData", d);
    }
    ModelContext {
        messages: messages.iter().map(canon).collect(),
        full: canon(&full),
    }
}

proptest! {
    #![proptest_config(cases(192))]

    #[test]
    fn context_matches_the_model_of_build_session_context(
        choices in prop::collection::vec(ctx_choice(), 0..24),
        leaf_kind in 0u8..10,
        leaf_k in any::<usize>(),
    ) {
        let (text, entries) = build_ctx_file(&choices);
        let replayed = parse_session_entries(&text).map_err(fail)?;
        prop_assert!(replayed.skipped.is_empty());
        let mut session = Session::from_records(replayed.records);
        let n = entries.len();
        let last = n.checked_sub(1);
        let (model_leaf, unknown) = match leaf_kind {
            6 | 7 if n > 0 => {
                let k = leaf_k % n;
                session.branch(&entries[k].id).map_err(fail)?;
                (Some(k), false)
            }
            8 => (last, true),
            9 => {
                session.reset_leaf();
                (None, false)
            }
            _ => (last, false),
        };
        let ctx = if unknown {
            session.build_context_for("ghost")
        } else {
            session.build_context()
        };
        let model = model_context(&entries, model_leaf);
        let got: Vec<String> = ctx.messages.iter().map(|m| json::to_compact(m)).collect();
        prop_assert_eq!(got, model.messages);
        prop_assert_eq!(json::to_compact(&ctx.to_value()), model.full);
    }
}
