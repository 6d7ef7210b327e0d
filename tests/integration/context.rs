//! `buildSessionContext` behaviour, as the original's build-context, compaction,
//! configured-model-chain and TTSR tests check it.

use crate::common::{contents, SessionText};
use gjcfs::engine::json::{self, Value};

fn roles(ctx: &gjcfs::engine::SessionContext<'_>) -> Vec<String> {
    ctx.messages
        .iter()
        .map(|m| m.as_object().unwrap().get_str("role").unwrap().to_owned())
        .collect()
}

#[test]
fn empty_session_gives_the_empty_context() {
    let session = SessionText::new().session();
    let ctx = session.build_context();
    assert!(ctx.messages.is_empty());
    assert_eq!(ctx.thinking_level, Value::string("off"));
    assert!(ctx.models.is_empty());
    assert_eq!(
        json::to_compact(&ctx.to_value()),
        concat!(
            r#"{"messages":[],"thinkingLevel":"off","models":{},"configuredModelChains":{},"#,
            r#""injectedTtsrRules":[],"injectedTtsrRuleRecords":[],"ttsrMessageCount":0,"#,
            r#""selectedMCPToolNames":[],"hasPersistedMCPToolSelection":false,"#,
            r#""hasPersistedDiscoveredBuiltinToolSelection":false,"mode":"none"}"#
        )
    );
}

#[test]
fn linear_conversation_keeps_order_and_infers_the_model() {
    let session = SessionText::new()
        .message("a", None, "user", "one")
        .message("b", Some("a"), "assistant", "two")
        .message("c", Some("b"), "user", "three")
        .message("d", Some("c"), "assistant", "four")
        .session();
    let ctx = session.build_context();
    assert_eq!(contents(&ctx), ["one", "two", "three", "four"]);
    assert_eq!(ctx.models.get_str("default"), Some("anthropic/claude"));
}

#[test]
fn thinking_level_entries_set_state_without_messages() {
    let session = SessionText::new()
        .message("a", None, "user", "hi")
        .entry(
            "thinking_level_change",
            "t",
            Some("a"),
            r#""thinkingLevel":"high""#,
        )
        .session();
    let ctx = session.build_context();
    assert_eq!(ctx.messages.len(), 1);
    assert_eq!(ctx.thinking_level, Value::string("high"));
    let cleared = SessionText::new()
        .entry(
            "thinking_level_change",
            "t",
            None,
            r#""thinkingLevel":"high""#,
        )
        .entry(
            "thinking_level_change",
            "u",
            Some("t"),
            r#""thinkingLevel":null"#,
        )
        .session();
    assert_eq!(cleared.build_context().thinking_level, Value::string("off"));
}

#[test]
fn custom_messages_keep_attribution_only_when_present() {
    let session = SessionText::new()
        .entry("custom_message", "a", None, r#""customType":"ext","content":"with","display":true,"attribution":"user""#)
        .entry("custom_message", "b", Some("a"), r#""customType":"ext","content":[{"type":"text","text":"without"}],"display":false,"details":{"k":1}"#)
        .session();
    let ctx = session.build_context();
    let first = json::to_compact(&ctx.messages[0]);
    assert_eq!(
        first,
        r#"{"role":"custom","customType":"ext","content":"with","display":true,"attribution":"user","timestamp":1767225601000}"#
    );
    let second = ctx.messages[1].as_object().unwrap();
    assert!(!second.contains_key("attribution"));
    assert_eq!(
        json::to_compact(second.get("details").unwrap()),
        r#"{"k":1}"#
    );
}

#[test]
fn explicit_model_change_wins_over_a_later_assistant() {
    let session = SessionText::new()
        .entry("model_change", "m", None, r#""model":"openai/gpt-4o""#)
        .message("a", Some("m"), "assistant", "hi")
        .entry(
            "model_change",
            "s",
            Some("a"),
            r#""model":"openai/small","role":"smol""#,
        )
        .session();
    let ctx = session.build_context();
    assert_eq!(ctx.models.get_str("default"), Some("openai/gpt-4o"));
    assert_eq!(ctx.models.get_str("smol"), Some("openai/small"));
    // Both roles get a synthesised legacy chain.
    assert_eq!(
        json::to_compact(ctx.configured_model_chains.get("smol").unwrap()),
        r#"{"role":"smol","entries":["openai/small"],"origin":"legacy_session","explicitHead":true}"#
    );
}

#[test]
fn legacy_model_change_shape_is_ignored_by_the_context() {
    let session = SessionText::new()
        .entry(
            "model_change",
            "m",
            None,
            r#""provider":"anthropic","modelId":"claude""#,
        )
        .session();
    assert!(session.build_context().models.is_empty());
}

fn compacted(first_kept: &str) -> SessionText {
    SessionText::new()
        .message("u1", None, "user", "u1")
        .message("a1", Some("u1"), "assistant", "a1")
        .message("u2", Some("a1"), "user", "u2")
        .message("a2", Some("u2"), "assistant", "a2")
        .entry(
            "compaction",
            "c1",
            Some("a2"),
            &format!(r#""summary":"S1","firstKeptEntryId":"{first_kept}","tokensBefore":1000"#),
        )
        .message("u3", Some("c1"), "user", "u3")
        .message("a3", Some("u3"), "assistant", "a3")
}

#[test]
fn compaction_emits_summary_then_kept_then_later_entries() {
    let ctx_session = compacted("u2").session();
    let ctx = ctx_session.build_context();
    assert_eq!(contents(&ctx), ["S1", "u2", "a2", "u3", "a3"]);
    let summary = json::to_compact(&ctx.messages[0]);
    assert_eq!(
        summary,
        r#"{"role":"compactionSummary","summary":"S1","tokensBefore":1000,"timestamp":1767225605000}"#
    );
    let all_kept = compacted("u1").session();
    assert_eq!(
        contents(&all_kept.build_context()),
        ["S1", "u1", "a1", "u2", "a2", "u3", "a3"]
    );
    let off_path = compacted("nowhere").session();
    assert_eq!(contents(&off_path.build_context()), ["S1", "u3", "a3"]);
}

#[test]
fn only_the_latest_compaction_counts() {
    let session = compacted("u2")
        .entry(
            "compaction",
            "c2",
            Some("a3"),
            r#""summary":"S2","firstKeptEntryId":"u3","tokensBefore":2000"#,
        )
        .message("u4", Some("c2"), "user", "u4")
        .session();
    assert_eq!(contents(&session.build_context()), ["S2", "u3", "a3", "u4"]);
}

#[test]
fn remote_replacement_history_replaces_kept_messages() {
    let session = SessionText::new()
        .message("u1", None, "user", "u1")
        .entry(
            "compaction",
            "c1",
            Some("u1"),
            r#""summary":"S","firstKeptEntryId":"u1","tokensBefore":5,"preserveData":{"openaiRemoteCompaction":{"provider":"openai","replacementHistory":[{"type":"message","x":1}]}}"#,
        )
        .message("u2", Some("c1"), "user", "u2")
        .session();
    let ctx = session.build_context();
    assert_eq!(contents(&ctx), ["S", "u2"]);
    let payload = ctx.messages[0]
        .as_object()
        .unwrap()
        .get("providerPayload")
        .unwrap();
    assert_eq!(
        json::to_compact(payload),
        r#"{"type":"openaiResponsesHistory","provider":"openai","items":[{"type":"message","x":1}]}"#
    );
    // An empty provider is not a remote compaction.
    let local = SessionText::new()
        .message("u1", None, "user", "u1")
        .entry("compaction", "c1", Some("u1"), r#""summary":"S","firstKeptEntryId":"u1","tokensBefore":5,"preserveData":{"openaiRemoteCompaction":{"provider":"","replacementHistory":[]}}"#)
        .session();
    assert_eq!(contents(&local.build_context()), ["S", "u1"]);
}

fn branched() -> SessionText {
    // u1 ─ a1 ─ u2 ─ a2            (main)
    //        └─ bs ─ u3            (side branch with a summary)
    SessionText::new()
        .message("u1", None, "user", "u1")
        .message("a1", Some("u1"), "assistant", "a1")
        .message("u2", Some("a1"), "user", "u2")
        .message("a2", Some("u2"), "assistant", "a2")
        .entry(
            "branch_summary",
            "bs",
            Some("a1"),
            r#""fromId":"a2","summary":"explored u2""#,
        )
        .message("u3", Some("bs"), "user", "u3")
}

#[test]
fn explicit_leaf_selects_its_branch_and_branch_summaries_become_messages() {
    let session = branched().session();
    assert_eq!(
        contents(&session.build_context()),
        ["u1", "a1", "explored u2", "u3"]
    );
    assert_eq!(
        contents(&session.build_context_for("a2")),
        ["u1", "a1", "u2", "a2"]
    );
    let ctx = session.build_context();
    assert_eq!(
        json::to_compact(&ctx.messages[2]),
        r#"{"role":"branchSummary","summary":"explored u2","fromId":"a2","timestamp":1767225605000}"#
    );
    // An unknown leaf falls back to the last entry.
    assert_eq!(
        contents(&session.build_context_for("missing")),
        ["u1", "a1", "explored u2", "u3"]
    );
}

#[test]
fn empty_branch_summary_emits_nothing() {
    let session = SessionText::new()
        .message("u1", None, "user", "u1")
        .entry(
            "branch_summary",
            "bs",
            Some("u1"),
            r#""fromId":"root","summary":"""#,
        )
        .session();
    assert_eq!(contents(&session.build_context()), ["u1"]);
}

#[test]
fn complex_tree_with_compaction_and_side_branch() {
    let session = compacted("u2")
        .entry(
            "branch_summary",
            "bs",
            Some("a2"),
            r#""fromId":"c1","summary":"side""#,
        )
        .message("s1", Some("bs"), "user", "s1")
        .session();
    assert_eq!(
        contents(&session.build_context_for("a3")),
        ["S1", "u2", "a2", "u3", "a3"]
    );
    assert_eq!(
        contents(&session.build_context()),
        ["u1", "a1", "u2", "a2", "side", "s1"]
    );
}

#[test]
fn orphans_and_cycles_end_the_walk() {
    let orphan = SessionText::new()
        .message("a", Some("gone"), "user", "a")
        .message("b", Some("a"), "user", "b")
        .session();
    assert_eq!(contents(&orphan.build_context()), ["a", "b"]);
    let cycle = SessionText::new()
        .message("a", Some("b"), "user", "a")
        .message("b", Some("a"), "user", "b")
        .session();
    assert_eq!(contents(&cycle.build_context()), ["a", "b"]);
    let own_parent = SessionText::new()
        .message("a", Some("a"), "user", "a")
        .session();
    assert_eq!(contents(&own_parent.build_context()), ["a"]);
}

#[test]
fn non_message_entries_inject_nothing_and_labels_never_appear() {
    let session = SessionText::new()
        .message("a", None, "user", "a")
        .entry(
            "custom",
            "c",
            Some("a"),
            r#""customType":"ext","data":{"s":1}"#,
        )
        .entry("label", "l", Some("c"), r#""targetId":"a","label":"mark""#)
        .entry(
            "session_init",
            "i",
            Some("l"),
            r#""systemPrompt":"p","task":"t","tools":[]"#,
        )
        .entry(
            "service_tier_change",
            "t",
            Some("i"),
            r#""serviceTier":"flex""#,
        )
        .entry("ttsr_injection", "r", Some("t"), r#""injectedRules":["x"]"#)
        .entry(
            "mcp_tool_selection",
            "m",
            Some("r"),
            r#""selectedToolNames":["srv.tool"]"#,
        )
        .entry(
            "mode_change",
            "o",
            Some("m"),
            r#""mode":"plan","data":{"planFile":"/p"}"#,
        )
        .message("b", Some("o"), "assistant", "b")
        .session();
    let ctx = session.build_context();
    assert_eq!(contents(&ctx), ["a", "b"]);
    assert_eq!(roles(&ctx), ["user", "assistant"]);
    assert_eq!(ctx.service_tier, Some(Value::string("flex")));
    assert_eq!(ctx.mode, Some(Value::string("plan")));
    assert_eq!(
        json::to_compact(ctx.mode_data.as_ref().unwrap()),
        r#"{"planFile":"/p"}"#
    );
    assert_eq!(ctx.selected_mcp_tool_names, vec![Value::string("srv.tool")]);
    assert!(ctx.has_persisted_mcp_tool_selection);
    assert!(!ctx.has_persisted_discovered_builtin_tool_selection);
    assert_eq!(ctx.selected_discovered_builtin_tool_names, None);
}

#[test]
fn service_tier_null_clears_it() {
    let session = SessionText::new()
        .entry("service_tier_change", "a", None, r#""serviceTier":"flex""#)
        .entry(
            "service_tier_change",
            "b",
            Some("a"),
            r#""serviceTier":null"#,
        )
        .session();
    let ctx = session.build_context();
    assert_eq!(ctx.service_tier, None);
    assert!(!json::to_compact(&ctx.to_value()).contains("serviceTier"));
}

#[test]
fn tool_selections_are_separate_domains() {
    let session = SessionText::new()
        .entry(
            "mcp_tool_selection",
            "m",
            None,
            r#""selectedToolNames":["a.b"],"selectedDiscoveredBuiltinToolNames":["legacy"]"#,
        )
        .session();
    let ctx = session.build_context();
    assert_eq!(
        ctx.selected_discovered_builtin_tool_names,
        Some(vec![Value::string("legacy")])
    );
    assert!(ctx.has_persisted_discovered_builtin_tool_selection);
    let v5 = SessionText::new()
        .entry(
            "discovered_builtin_tool_selection",
            "d",
            None,
            r#""selectedToolNames":[]"#,
        )
        .session();
    let ctx = v5.build_context();
    assert_eq!(ctx.selected_discovered_builtin_tool_names, Some(vec![]));
    assert!(ctx.has_persisted_discovered_builtin_tool_selection);
    assert!(!ctx.has_persisted_mcp_tool_selection);
}

#[test]
fn configured_chains_follow_the_branch_and_clearing_restores_legacy_synthesis() {
    let chain = |id: &str, parent: Option<&str>, entries: &str| {
        (
            id.to_owned(),
            parent.map(str::to_owned),
            format!(r#""role":"default","entries":{entries},"origin":"user""#),
        )
    };
    let (c1, p1, r1) = chain("c1", None, r#"["a/one","", 5]"#);
    let (c2, p2, r2) = chain("c2", Some("c1"), r#"["b/two"]"#);
    let text = SessionText::new()
        .entry("model_change", "m", None, r#""model":"legacy/model""#)
        .entry(
            "configured_model_chain",
            &c1,
            p1.as_deref().or(Some("m")),
            &r1,
        )
        .entry("configured_model_chain", &c2, p2.as_deref(), &r2)
        .entry(
            "configured_model_chain",
            "x",
            Some("c2"),
            r#""role":"default","cleared":true"#,
        );
    let session = text.session();
    let chain_of = |leaf: &str| {
        json::to_compact(
            session
                .build_context_for(leaf)
                .configured_model_chains
                .get("default")
                .unwrap(),
        )
    };
    assert_eq!(
        chain_of("c1"),
        r#"{"role":"default","entries":["a/one"],"origin":"user","explicitHead":false}"#
    );
    assert_eq!(
        chain_of("c2"),
        r#"{"role":"default","entries":["b/two"],"origin":"user","explicitHead":false}"#
    );
    assert_eq!(
        chain_of("x"),
        r#"{"role":"default","entries":["legacy/model"],"origin":"legacy_session","explicitHead":true}"#
    );
}

#[test]
fn ttsr_records_round_trip_and_legacy_rules_get_records() {
    let session = SessionText::new()
        .entry("ttsr_injection", "a", None, r#""injectedRules":["r1","r2"],"ttsrMessageCount":3"#)
        .entry(
            "ttsr_injection",
            "b",
            Some("a"),
            r#""injectedRules":["r1"],"injectedRuleRecords":[{"name":"r1","lastInjectedAt":7,"repeatMode":"gap","repeatGap":2},{"name":"r3","lastInjectedAt":9}]"#,
        )
        .session();
    let ctx = session.build_context();
    assert_eq!(ctx.injected_ttsr_rules, ["r1", "r2", "r3"]);
    let records: Vec<String> = ctx
        .injected_ttsr_rule_records
        .iter()
        .map(|(_, r)| json::to_compact(r))
        .collect();
    assert_eq!(
        records,
        [
            r#"{"name":"r1","lastInjectedAt":7,"repeatMode":"gap","repeatGap":2}"#,
            r#"{"name":"r2","lastInjectedAt":0}"#,
            r#"{"name":"r3","lastInjectedAt":9}"#,
        ]
    );
    assert_eq!(ctx.ttsr_message_count, Value::number(3.0));
}

#[test]
fn unparsable_entry_timestamp_becomes_null() {
    let session = SessionText::new()
        .line(r#"{"type":"branch_summary","id":"b","parentId":null,"timestamp":"yesterday","fromId":"root","summary":"s"}"#)
        .session();
    let ctx = session.build_context();
    assert_eq!(
        ctx.messages[0].as_object().unwrap().get("timestamp"),
        Some(&Value::Null)
    );
}
