//! The corpus generator writes sessions the engine reads cleanly, strictly and back to the
//! same bytes.

use std::collections::{HashMap, HashSet};
use std::process::Command;

use gjcfs::corpus::{self, Format, Limit, Options};
use gjcfs::engine::format::ids::is_short_entry_id;
use gjcfs::engine::format::migrate::Migration;
use gjcfs::engine::format::time::{format_iso_millis, parse_iso_millis};
use gjcfs::engine::json::Value;
use gjcfs::engine::read::inspect::parse_strict;
use gjcfs::engine::{load_session, Record, RecordType};

fn v5(seed: u64, entries: u64) -> Options {
    Options {
        seed,
        limit: Limit::Entries(entries),
        format: Format::V5,
        cwd: None,
    }
}

fn v1(seed: u64, entries: u64) -> Options {
    Options {
        format: Format::V1,
        ..v5(seed, entries)
    }
}

/// Writes a corpus into a temporary file and loads it.
fn load(options: &Options) -> (Vec<u8>, gjcfs::engine::LoadedSession) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("corpus.jsonl");
    let summary = corpus::generate_file(&path, options).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(summary.bytes, bytes.len() as u64);
    let loaded = load_session(&path).unwrap();
    (bytes, loaded)
}

fn serialize(records: &[Record]) -> Vec<u8> {
    let mut out = Vec::new();
    for record in records {
        record.write_line(&mut out);
    }
    out
}

#[test]
fn corpora_load_without_skipped_lines() {
    for options in [v5(1, 2_000), v5(2, 2_000), v1(1, 2_000), v1(9, 500)] {
        let (bytes, loaded) = load(&options);
        assert!(
            loaded.skipped.is_empty(),
            "{options:?}: {:?}",
            loaded.skipped
        );
        let lines = bytes.iter().filter(|&&b| b == b'\n').count();
        assert_eq!(loaded.session.records().len(), lines, "{options:?}");
        assert_eq!(
            loaded.session.entry_count() as u64,
            options_entries(&options)
        );
        let expected_migration = match options.format {
            Format::V5 => Migration::NotNeeded,
            Format::V1 => Migration::Migrated { from: 1.0 },
        };
        assert_eq!(loaded.migration, expected_migration);
    }
}

fn options_entries(options: &Options) -> u64 {
    match options.limit {
        Limit::Entries(n) => n,
        Limit::Bytes(_) => panic!("entry limit expected"),
    }
}

#[test]
fn every_record_passes_the_strict_schema() {
    for options in [v5(1, 3_000), v5(4, 3_000), v1(1, 3_000)] {
        let bytes = corpus::generate_bytes(&options);
        let (session, _) =
            parse_strict(&bytes).unwrap_or_else(|e| panic!("{options:?} is not strict: {e}"));
        assert_eq!(session.entry_count(), 3_000);
        // The context builds and ends on a message of the conversation.
        assert!(!session.build_context().messages.is_empty());
    }
}

#[test]
fn a_few_thousand_entries_hold_every_entry_type() {
    let all = [
        "message",
        "thinking_level_change",
        "model_change",
        "service_tier_change",
        "configured_model_chain",
        "compaction",
        "branch_summary",
        "custom",
        "custom_message",
        "label",
        "ttsr_injection",
        "session_init",
        "mode_change",
        "mcp_tool_selection",
        "discovered_builtin_tool_selection",
    ];
    for seed in [0, 1, 2, 3] {
        let summary = corpus::generate(&v5(seed, 3_000), std::io::sink()).unwrap();
        for ty in all {
            let n: u64 = summary
                .by_type
                .iter()
                .filter(|(k, _)| k.as_str() == ty || k.starts_with(&format!("{ty}:")))
                .map(|(_, n)| n)
                .sum();
            assert!(n > 0, "seed {seed}: no {ty} in {:?}", summary.by_type);
        }
        for role in ["user", "assistant", "toolResult"] {
            assert!(
                summary.by_type.contains_key(&format!("message:{role}")),
                "seed {seed}: no {role} message"
            );
        }
    }
    // Every type the engine knows, except the header and patches, is covered.
    for ty in all {
        assert!(!matches!(
            RecordType::from_type(Some(ty)),
            RecordType::Unknown | RecordType::Session
        ));
    }
}

#[test]
fn v5_corpus_round_trips_byte_for_byte() {
    for options in [v5(1, 3_000), v5(7, 1_500)] {
        let (bytes, loaded) = load(&options);
        let written = serialize(loaded.session.records());
        assert!(written == bytes, "{options:?}: the rewrite differs");
    }
}

#[test]
fn same_seed_same_bytes() {
    for options in [v5(11, 800), v1(11, 800)] {
        assert_eq!(
            corpus::generate_bytes(&options),
            corpus::generate_bytes(&options)
        );
    }
    assert_ne!(
        corpus::generate_bytes(&v5(11, 800)),
        corpus::generate_bytes(&v5(12, 800))
    );
}

#[test]
fn size_limit_lands_close_to_the_target() {
    for (seed, target, format) in [
        (0, 100_000u64, Format::V5),
        (1, 1_000_000, Format::V5),
        (2, 8_000_000, Format::V5),
        (3, 3_000_000, Format::V1),
    ] {
        let options = Options {
            seed,
            limit: Limit::Bytes(target),
            format,
            cwd: None,
        };
        let bytes = corpus::generate_bytes(&options);
        let len = bytes.len() as u64;
        assert!(len >= target, "{options:?}: {len} bytes");
        assert!(
            len as f64 <= target as f64 * 1.02,
            "{options:?}: {len} bytes is more than 2% over"
        );
    }
}

/// Shapes the format prescribes: ids, timestamps, references and block contents.
#[test]
fn v5_corpus_has_the_prescribed_shapes() {
    let (_, loaded) = load(&v5(5, 4_000));
    let session = &loaded.session;
    let header = session.header();
    let sid = header.id().unwrap();
    assert_eq!(sid.len(), 36);
    assert_eq!(&sid[14..15], "7", "{sid} is not a UUIDv7");
    assert!(matches!(&sid[19..20], "8" | "9" | "a" | "b"));
    assert_eq!(header.version(), 5.0);

    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut previous: Option<&str> = None;
    let mut last_time = i64::MIN;
    let mut branched = 0;
    let mut thinking_signed = 0;
    let mut tool_calls = 0;
    let mut images = 0;
    let mut large_outputs = 0;
    for (i, record) in session.records().iter().enumerate().skip(1) {
        let id = record.id().unwrap();
        assert!(is_short_entry_id(id), "{id}");
        assert!(seen.insert(id, i).is_none(), "duplicate id {id}");
        let ts = record.timestamp().unwrap();
        let ms = parse_iso_millis(ts).unwrap();
        assert_eq!(format_iso_millis(ms), ts, "timestamp format");
        assert!(ms >= last_time, "timestamps go back at {id}");
        last_time = ms;
        match record.parent_id() {
            Some(parent) => {
                assert!(seen.contains_key(parent), "{id}: parent {parent} unknown");
                if Some(parent) != previous {
                    branched += 1;
                }
            }
            None => assert_eq!(i, 1, "only the first entry is a root"),
        }
        previous = Some(id);

        match record.record_type() {
            RecordType::Compaction => {
                let kept = record.get_str("firstKeptEntryId").unwrap();
                let ancestors: HashSet<usize> = session.path_to(i).into_iter().collect();
                assert!(
                    ancestors.contains(&session.index_of(kept).unwrap()),
                    "compaction {id} keeps {kept}, which is not on its branch"
                );
            }
            RecordType::Label => {
                let target = record.get_str("targetId").unwrap();
                assert!(seen.contains_key(target), "label {id} names {target}");
            }
            RecordType::BranchSummary => {
                assert_eq!(record.get_str("fromId"), record.parent_id());
            }
            RecordType::Message => {
                let message = record.message().unwrap();
                // bashExecution messages have no content.
                let content = message.get("content").map(Value::expanded);
                let blocks = content.as_deref().and_then(Value::as_array);
                for block in blocks.unwrap_or_default() {
                    let block = block.as_object().unwrap();
                    match block.get_str("type") {
                        Some("thinking") if block.get_str("thinkingSignature").is_some() => {
                            thinking_signed += 1
                        }
                        Some("toolCall") => tool_calls += 1,
                        Some("image") => {
                            images += 1;
                            assert!(block.get_str("data").unwrap().len() < 1024);
                        }
                        Some("text") => {
                            let text = block.get("text").unwrap().as_js_string().unwrap();
                            if text.wtf8_bytes().len() >= 20_000 {
                                large_outputs += 1;
                            }
                        }
                        _ => {}
                    }
                }
                if message.get_str("role") == Some("assistant") {
                    let usage = message.get("usage").unwrap().expanded();
                    let cost = usage.as_object().unwrap().get("cost").unwrap();
                    assert!(matches!(
                        cost.as_object().unwrap().get("total"),
                        Some(Value::Number(_))
                    ));
                }
            }
            _ => {}
        }
    }
    assert!(branched > 0, "no entry continues from an earlier one");
    assert!(thinking_signed > 0 && tool_calls > 0 && images > 0);
    assert!(large_outputs > 0, "no tool output of tens of kilobytes");
    // The leaf is the last entry, and its context reaches back to the start or a compaction.
    assert_eq!(session.leaf(), Some(session.records().len() - 1));
}

#[test]
fn v1_corpus_migrates_to_a_linear_chain_with_resolved_compactions() {
    let (_, loaded) = load(&v1(3, 3_000));
    let records = loaded.session.records();
    assert!(records[0].as_header().unwrap().version_value().is_some());
    let mut compactions = 0;
    for pair in records[1..].windows(2) {
        assert_eq!(pair[1].parent_id(), pair[0].id());
    }
    for record in records {
        if record.record_type() == RecordType::Compaction {
            compactions += 1;
            assert!(!record.fields().contains_key("firstKeptEntryIndex"));
            let kept = record.get_str("firstKeptEntryId").unwrap();
            assert!(loaded.session.index_of(kept).is_some());
        }
    }
    assert!(compactions > 0);
}

#[test]
fn cli_writes_the_same_bytes_as_the_library() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cli.jsonl");
    let status = Command::new(crate::common::gjcfs_bin())
        .args([
            "generate",
            "--entries",
            "400",
            "--seed",
            "21",
            "--version",
            "1",
        ])
        .arg(&path)
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(
        std::fs::read(&path).unwrap(),
        corpus::generate_bytes(&v1(21, 400))
    );

    let sized = dir.path().join("sized.jsonl");
    let output = Command::new(crate::common::gjcfs_bin())
        .args(["generate", "--size", "250KB"])
        .arg(&sized)
        .output()
        .unwrap();
    assert!(output.status.success());
    let len = std::fs::metadata(&sized).unwrap().len();
    assert!((250_000..=255_000).contains(&len), "{len}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("entries"));

    // Exactly one of --entries and --size.
    for args in [
        &["generate", "x.jsonl"][..],
        &["generate", "x.jsonl", "--entries", "1", "--size", "1KB"][..],
        &["generate", "x.jsonl", "--size", "12XB"][..],
    ] {
        let output = Command::new(crate::common::gjcfs_bin())
            .current_dir(dir.path())
            .args(args)
            .output()
            .unwrap();
        assert!(!output.status.success(), "{args:?} should fail");
    }
    assert!(!dir.path().join("x.jsonl").exists());
}

/// `gjcfs generate ARGS OUT` run in `dir`: the file's text and what it said on stderr.
fn generate_in(dir: &std::path::Path, out: &str, args: &[&str]) -> (String, String) {
    let output = Command::new(crate::common::gjcfs_bin())
        .current_dir(dir)
        .arg("generate")
        .args(args)
        .arg(out)
        .output()
        .unwrap();
    assert!(output.status.success(), "{args:?}: {output:?}");
    let said = String::from_utf8(output.stderr).unwrap();
    (std::fs::read_to_string(dir.join(out)).unwrap(), said)
}

#[test]
fn cli_cwd_is_the_headers_and_the_rest_is_the_session_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let absolute = std::path::absolute("/x/y").unwrap();
    let relative = dir.path().join("rel");
    for limit in [&["--entries", "250"][..], &["--size", "300KB"]] {
        for version in ["5", "1"] {
            let args = [limit, &["--seed", "7", "--version", version]].concat();
            let (plain, _) = generate_in(dir.path(), "plain.jsonl", &args);
            let (plain_header, plain_rest) = plain.split_once('\n').unwrap();
            for (cwd, expected) in [("/x/y", &absolute), ("rel", &relative)] {
                let args = [&args[..], &["--cwd", cwd]].concat();
                let (text, said) = generate_in(dir.path(), "cwd.jsonl", &args);
                let (header, rest) = text.split_once('\n').unwrap();
                assert!(
                    rest == plain_rest,
                    "{args:?}: the entries are the same bytes"
                );
                let header = gjcfs::engine::json::parse(header).unwrap();
                let plain_header = gjcfs::engine::json::parse(plain_header).unwrap();
                let (header, plain_header) = (
                    header.as_object().unwrap(),
                    plain_header.as_object().unwrap(),
                );
                assert_eq!(header.get_str("cwd"), expected.to_str(), "{args:?}");
                let others = |o: &gjcfs::engine::json::Object| {
                    let o = o.iter().filter(|(k, _)| k.as_str() != Some("cwd"));
                    o.map(|(k, v)| (k.to_string_lossy().into_owned(), v.clone()))
                        .collect::<Vec<_>>()
                };
                assert_eq!(others(header), others(plain_header), "{args:?}");
                let entries = rest.lines().count();
                if limit[0] == "--entries" {
                    assert_eq!(entries, 250);
                }
                let reported = format!(": {entries} entries, {} bytes\n", text.len());
                assert!(said.ends_with(&reported), "{said:?}, expected {reported:?}");
            }
        }
    }
}

/// Whether `keys` follow `spec`, a space-separated key list in emission order where a
/// trailing `?` marks an optional key: every key is listed, in order, and every required one
/// is present.
fn follows(keys: &[String], spec: &str) -> bool {
    let mut at = 0;
    for item in spec.split(' ') {
        let (name, optional) = match item.strip_suffix('?') {
            Some(name) => (name, true),
            None => (item, false),
        };
        if keys.get(at).map(String::as_str) == Some(name) {
            at += 1;
        } else if !optional {
            return false;
        }
    }
    at == keys.len()
}

fn keys_of(value: &Value) -> Vec<String> {
    value
        .expanded()
        .as_object()
        .expect("an object")
        .keys()
        .map(|k| k.to_string_lossy().into_owned())
        .collect()
}

#[test]
fn key_order_matches_each_writer() {
    const BASE: &str = "type id parentId timestamp";
    let entry_spec = |ty: &str| -> String {
        let tail = match ty {
            "message" => "message",
            "thinking_level_change" => "thinkingLevel",
            "model_change" => "model role? previousModel? reason? thinkingLevel?",
            "service_tier_change" => "serviceTier",
            "configured_model_chain" => "role entries origin identity? explicitHead cleared?",
            "compaction" => {
                "summary shortSummary? firstKeptEntryId tokensBefore details? fromExtension? preserveData?"
            }
            "branch_summary" => "fromId summary details? fromExtension?",
            "custom" => return "type customType data? id parentId timestamp".into(),
            "custom_message" => {
                return "type customType content display details? attribution id parentId timestamp"
                    .into()
            }
            "label" => "targetId label?",
            "ttsr_injection" => "injectedRules injectedRuleRecords? ttsrMessageCount?",
            "mcp_tool_selection" | "discovered_builtin_tool_selection" => {
                "selectedToolNames mutationCorrelationId?"
            }
            "session_init" => "systemPrompt task tools outputSchema?",
            "mode_change" => "mode data?",
            other => panic!("unexpected entry type {other}"),
        };
        format!("{BASE} {tail}")
    };
    let message_spec = |role: &str| {
        match role {
        "user" => "role content synthetic? attribution? providerPayload? timestamp",
        "assistant" => {
            "role content api provider model responseId? usage stopReason errorMessage? timestamp duration? ttft?"
        }
        "toolResult" => {
            "role toolCallId toolName content details? isError attribution? prunedAt? timestamp"
        }
        "bashExecution" => {
            "role command output exitCode cancelled truncated fullOutputPath? timestamp"
        }
        other => panic!("unexpected role {other}"),
    }
    };
    let headers = [
        "type version id timestamp cwd parentSession?",
        "type version id title titleSource timestamp cwd parentSession",
        "type version id timestamp cwd title titleSource",
    ];
    let mut header_shapes = HashSet::new();
    for seed in 0..12 {
        let bytes = corpus::generate_bytes(&v5(seed, 1_500));
        let text = std::str::from_utf8(&bytes).unwrap();
        for (n, line) in text.lines().enumerate() {
            let value = gjcfs::engine::json::parse(line).unwrap();
            let keys = keys_of(&value);
            if n == 0 {
                let shape = headers.iter().position(|h| follows(&keys, h));
                header_shapes.insert(shape.unwrap_or_else(|| panic!("header keys {keys:?}")));
                continue;
            }
            let record = value.as_object().unwrap();
            let ty = record.get_str("type").unwrap();
            assert!(follows(&keys, &entry_spec(ty)), "{ty} keys {keys:?}");
            if let Some(message) = record.get("message") {
                let role = message.as_object().unwrap().get_str("role").unwrap();
                let keys = keys_of(message);
                assert!(follows(&keys, message_spec(role)), "{role} keys {keys:?}");
                if role == "assistant" {
                    let usage = keys_of(message.as_object().unwrap().get("usage").unwrap());
                    let spec = "input output cacheRead cacheWrite totalTokens premiumRequests? reasoningTokens? cost";
                    assert!(follows(&usage, spec), "usage keys {usage:?}");
                }
            }
        }
    }
    assert_eq!(
        header_shapes.len(),
        headers.len(),
        "every header writer is used"
    );

    let bytes = corpus::generate_bytes(&v1(1, 2_000));
    let text = std::str::from_utf8(&bytes).unwrap();
    for (n, line) in text.lines().enumerate() {
        let value = gjcfs::engine::json::parse(line).unwrap();
        let keys = keys_of(&value);
        let spec = if n == 0 {
            "type id timestamp cwd provider modelId thinkingLevel"
        } else {
            match value.as_object().unwrap().get_str("type").unwrap() {
                "message" => "type timestamp message",
                "thinking_level_change" => "type timestamp thinkingLevel",
                "model_change" => "type timestamp provider modelId",
                "compaction" => "type timestamp summary firstKeptEntryIndex tokensBefore",
                other => panic!("unexpected v1 type {other}"),
            }
        };
        assert!(follows(&keys, spec), "v1 keys {keys:?}");
    }
}

#[test]
fn key_order_check_rejects_misordered_and_unknown_keys() {
    let keys = |list: &[&str]| list.iter().map(|k| k.to_string()).collect::<Vec<_>>();
    assert!(follows(&keys(&["a", "c"]), "a b? c"));
    assert!(!follows(&keys(&["c", "a"]), "a b? c"));
    assert!(!follows(&keys(&["a"]), "a b? c"));
    assert!(!follows(&keys(&["a", "c", "d"]), "a b? c"));
}
