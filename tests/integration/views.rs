//! The views (`context.md`, `tree.txt`, `usage.json`), label resolution and store usage, on
//! the real transcripts, a hand-made session holding every element
//! (`tests/fixtures/views/elements.jsonl`) and generated stores.
//!
//! Views are pinned by golden files under `tests/golden/`; `GJCFS_BLESS=1 cargo test --test
//! views` rewrites them (review the diff before committing).

use std::path::{Path, PathBuf};

use crate::common::{fixture, golden, renumbered};
use gjcfs::engine::json::Value;
use gjcfs::engine::load_session;
use gjcfs::engine::store::usage::{scan_sessions, Grouping, StoreUsage};
use gjcfs::engine::views::{markdown, tree, usage};
use gjcfs::engine::Session;

fn load(path: &Path) -> Session {
    let loaded = load_session(path).expect("session loads");
    assert!(loaded.skipped.is_empty());
    loaded.session
}

fn real(name: &str) -> Session {
    renumbered(load(&fixture(&format!("real/{name}.jsonl"))))
}

fn elements() -> Session {
    load(&fixture("views/elements.jsonl"))
}

fn md(session: &Session) -> String {
    String::from_utf8(markdown::context_md(session, "blobs/")).unwrap()
}

fn tree_text(session: &Session) -> String {
    String::from_utf8(tree::tree_txt(session)).unwrap()
}

fn usage_value(session: &Session) -> Value {
    gjcfs::engine::json::parse(std::str::from_utf8(&usage::session_usage_json(session)).unwrap())
        .unwrap()
}

fn number(value: &Value, path: &[&str]) -> f64 {
    crate::common::at(value, path).as_f64().expect("a number")
}

/// The number of `## n.` section headings.
fn sections(md: &str) -> usize {
    md.lines()
        .filter(|l| {
            l.starts_with("## ")
                && l[3..]
                    .split_once(". ")
                    .is_some_and(|(n, _)| n.parse::<usize>().is_ok())
        })
        .count()
}

#[test]
fn real_transcripts_match_their_goldens() {
    for name in ["large-session", "before-compaction"] {
        let session = real(name);
        golden(
            &format!("{name}.context.md"),
            &markdown::context_md(&session, "blobs/"),
        );
        golden(&format!("{name}.tree.txt"), &tree::tree_txt(&session));
        golden(
            &format!("{name}.usage.json"),
            &usage::session_usage_json(&session),
        );
    }
}

#[test]
fn real_transcripts_render_every_context_message_and_entry() {
    // The counts the original context builder gives (tests/fixtures/README.md).
    let large = real("large-session");
    let text = md(&large);
    assert_eq!(sections(&text), 914);
    let named = text
        .lines()
        .filter(|l| l.starts_with("## ") && l.ends_with('`') && l.contains(" · `"))
        .count();
    assert_eq!(named, 914, "every section names its entry");
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("## ") && l.contains(". toolResult · "))
            .count(),
        373
    );
    // Titled by its first prompt, as `gjcfs ls` shows it.
    assert!(text.starts_with("# /mode\n\n- session: `d703a1a9-1b7b-4fb1-b512-c9738b1fe617`\n- cwd: `/Users/badlogic/workspaces/pi-mono`\n- leaf: `"));
    assert!(text.ends_with("\n\n") && !text.ends_with("\n\n\n"));
    let tree = tree_text(&large);
    assert_eq!(tree.lines().count(), large.entry_count());
    assert!(!tree.contains('├'), "a v1 transcript is linear");
    assert!(tree.lines().last().unwrap().ends_with("  ← leaf"));

    let compacted = real("before-compaction");
    let text = md(&compacted);
    assert_eq!(sections(&text), 446);
    assert!(text.contains("\n## 1. compactionSummary · 2025-12-08T23:54:21.502Z · `"));
    assert!(text.contains("**Compaction summary** (185,014 tokens before compaction)\n\n# Context Checkpoint: Coding Agent Refactoring\n"));
    assert!(text.contains("## 2. user · 2025-12-08T23:48:59.422Z · `"));
    assert!(text.contains(". bashExecution · "));
    // Every cut tool output states its full size.
    let cuts = text.matches("\n… (truncated: ").count();
    assert!(cuts > 10, "{cuts} outputs cut");
    let usage = usage_value(&compacted);
    assert_eq!(number(&usage, &["records"]), 484.0);
    assert_eq!(
        number(&usage, &["byModel", "anthropic/claude-opus-4-5", "records"]),
        484.0
    );
    assert_eq!(number(&usage, &["output"]), 187_895.0);
}

#[test]
fn every_element_matches_its_golden() {
    let session = elements();
    golden(
        "elements.context.md",
        &markdown::context_md(&session, "blobs/"),
    );
    golden("elements.tree.txt", &tree::tree_txt(&session));
    golden("elements.usage.json", &usage::session_usage_json(&session));
}

#[test]
fn context_md_renders_every_element() {
    let text = md(&elements());
    for expected in [
        "# Every element\n\n- session: `0194a1b2-0000-7000-8000-00000000e1e1`\n- cwd: `/work/demo`\n- leaf: `e21`\n- messages: 13\n- thinking level: off\n- model: anthropic/claude-sonnet-4-5\n\n## 1. compactionSummary · 2026-01-02T10:00:09.000Z · `e09`\n",
        "**Compaction summary** (12,345 tokens before compaction)\n\nThe user reported",
        "## 2. assistant · anthropic/claude-sonnet-4-5 · 2026-01-02T10:00:02.000Z · `e02`\n\n<details><summary>thinking</summary>\n\nThe parser fails on empty arrays.\nLet me read it first.\n\n</details>\n\nI will read the parser.\n\n**Tool call** `read` · `call_read_1`\n\n```json\n{\n  \"path\": \"src/parser.rs\",\n  \"limit\": 60\n}\n```\n",
        "40 fn line_40() {}\n```\n… (truncated: 1,122 bytes, 60 lines in full)\n",
        "![image](blobs/abababababababababababababababababababababababababababababababab)\n",
        "*[image: image/png, 70 bytes inline, not shown]*\n",
        "## 4. user · 2026-01-02T10:00:04.000Z · `e04`",
        "## 5. assistant · openai/gpt-5.1-codex · ",
        "```sh\n$ cargo test parser\n```\n\n```text\nrunning 3 tests\ntest parser::empty ... FAILED\n```\n\n*exit code 101*\n",
        "## 7. custom · note · 2026-01-02T10:00:11.000Z · `e11`\n\nA note from an extension.\n",
        "**Branch summary** (branched from `e11`)\n\nApproach A special-cased",
        "*Stopped: error — Overloaded: try again later*\n",
        "## 10. toolResult · bash, error · 2026-01-02T10:00:15.000Z · `e15`\n\n**Error**\n\n```text\nsh: cargo: command not found\n```\n",
        // The output holds a ``` fence of its own, so its block is fenced with four.
        "````text\nThe subagent fixed the loop:\n```diff\n",
        "```python\nprint(len([]))\n```\n\n```text\n0\n```\n\n*exit code 0*\n",
        "- `src/parser.rs` (1 line)\n",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    assert_eq!(sections(&text), 13);
    // The abandoned branch and what the compaction dropped are not in the context.
    assert!(!text.contains("approach A:") && !text.contains("Please look at the parser"));
    assert!(!text.contains("iVBORw0KGgo"), "no inline base64");
    assert!(!text.contains("c2lnbmF0dXJl"), "no signatures");
}

#[test]
fn tree_txt_draws_branches_labels_and_the_leaf() {
    let text = tree_text(&elements());
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 21);
    assert_eq!(
        lines[0],
        "e01 user: Please look at the parser. It fails on `[]`."
    );
    assert_eq!(lines[1], "e02 [reading] assistant: I will read the parser.");
    assert_eq!(
        lines[3],
        "e04 user: Here is the screenshot and a small icon. [image] [image]"
    );
    assert_eq!(lines[7], "e08 label: e04 (cleared)");
    assert_eq!(
        lines[11],
        "├─ e12 [a/b] assistant: Trying approach A: special-case `[]`."
    );
    assert_eq!(
        lines[12],
        "e13 branch_summary: Approach A special-cased `[]` and broke nested arrays."
    );
    assert_eq!(
        lines[14],
        "e15 toolResult(bash, error): sh: cargo: command not found"
    );
    assert_eq!(lines[20], "e21 label: e10 → reading  ← leaf");
    assert!(lines[2].starts_with("e03 toolResult(read): 1 fn line_1() {} 2 fn line_2() {}"));
    assert_eq!(
        lines[2].chars().count(),
        "e03 toolResult(read): ".len() + 61,
        "60 characters and …"
    );
}

#[test]
fn usage_json_sums_every_reply_and_breaks_it_down_by_model() {
    let usage = usage_value(&elements());
    // e02, e05, e12 (on the abandoned branch: usage counts every entry) and e14, plus the
    // task result e16.
    assert_eq!(number(&usage, &["records"]), 5.0);
    assert_eq!(
        number(&usage, &["input"]),
        1200.0 + 900.0 + 500.0 + 700.0 + 3000.0
    );
    assert_eq!(number(&usage, &["premiumRequests"]), 1.0);
    assert_eq!(
        number(
            &usage,
            &["byModel", "anthropic/claude-sonnet-4-5", "records"]
        ),
        3.0
    );
    assert_eq!(
        number(&usage, &["byModel", "openai/gpt-5.1-codex", "cacheRead"]),
        2000.0
    );
    assert_eq!(
        number(&usage, &["byModel", "openai/gpt-5-mini", "input"]),
        3000.0
    );
    let models: Vec<String> = crate::common::at(&usage, &["byModel"])
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        models,
        [
            "anthropic/claude-sonnet-4-5",
            "openai/gpt-5-mini",
            "openai/gpt-5.1-codex"
        ]
    );
}

#[test]
fn labels_resolve_to_their_latest_entries() {
    let targets: Vec<(String, String)> = elements().label_targets().into_iter().collect();
    // "screenshot" was cleared, "reading" moved from e02 to e10.
    assert_eq!(
        targets,
        [
            ("a/b".to_owned(), "e12".to_owned()),
            ("approach-b".to_owned(), "e14".to_owned()),
            ("reading".to_owned(), "e10".to_owned())
        ]
    );
}

#[test]
fn views_follow_the_leaf_after_branching() {
    let mut session = elements();
    session.branch("e12").unwrap();
    let text = md(&session);
    assert!(text.contains("- leaf: `e12`\n- messages: 8\n"), "{text}");
    assert!(text.contains("Trying approach A: special-case `[]`."));
    assert!(!text.contains("Approach B") && !text.contains("Branch summary"));
    let tree = tree_text(&session);
    let lines: Vec<&str> = tree.lines().collect();
    // The branch holding the leaf now continues the column; the other one hangs off it.
    assert_eq!(
        lines[11],
        "├─ e13 branch_summary: Approach A special-cased `[]` and broke nested arrays."
    );
    assert_eq!(
        lines[12],
        "│  e14 [approach-b] assistant: Approach B: fix the loop."
    );
    assert_eq!(
        lines[20],
        "e12 [a/b] assistant: Trying approach A: special-case `[]`.  ← leaf"
    );
    session.reset_leaf();
    let text = md(&session);
    assert!(text.contains("- leaf: none\n- messages: 0\n"));
    assert_eq!(sections(&text), 0);
}

#[test]
fn a_long_chain_renders_without_recursion() {
    const N: usize = 100_000;
    let mut text = String::from(
        "{\"type\":\"session\",\"version\":5,\"id\":\"deep\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/\"}\n",
    );
    for i in 0..N {
        let parent = if i == 0 {
            "null".to_owned()
        } else {
            format!("\"{:08x}\"", i - 1)
        };
        text.push_str(&format!(
            "{{\"type\":\"message\",\"id\":\"{i:08x}\",\"parentId\":{parent},\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"m{i}\"}}}}\n"
        ));
    }
    let session = Session::from_records(
        gjcfs::engine::read::replay::parse_session_entries(&text)
            .unwrap()
            .records,
    );
    let tree = tree_text(&session);
    assert_eq!(tree.lines().count(), N);
    assert!(tree.lines().all(|l| !l.starts_with(['├', '│', ' '])));
    assert!(tree.ends_with(&format!("{:08x} user: m{}  ← leaf\n", N - 1, N - 1)));
    assert_eq!(sections(&md(&session)), N);
}

/// Writes a v5 session: `(id, timestamp second, model)` assistant replies with one input
/// token each, chained.
fn write_session(
    dir: &Path,
    id: &str,
    header_extra: &str,
    replies: &[(&str, u32, &str)],
) -> PathBuf {
    let mut text = format!(
        "{{\"type\":\"session\",\"version\":5,\"id\":\"{id}\",\"timestamp\":\"2026-01-0{}T00:00:00.000Z\",\"cwd\":\"/work/{id}\"{header_extra}}}\n",
        1 + dir.read_dir().unwrap().count() % 9
    );
    let mut parent = "null".to_owned();
    for (entry, second, model) in replies {
        let (provider, model) = model.split_once('/').unwrap();
        text.push_str(&format!(
            "{{\"type\":\"message\",\"id\":\"{entry}\",\"parentId\":{parent},\"timestamp\":\"2026-03-0{}T10:00:{second:02}.000Z\",\"message\":{{\"role\":\"assistant\",\"content\":[],\"provider\":\"{provider}\",\"model\":\"{model}\",\"usage\":{{\"input\":1,\"output\":2,\"cacheRead\":0,\"cacheWrite\":0,\"cost\":{{\"total\":0.5}}}}}}}}\n",
            1 + second / 30
        ));
        parent = format!("\"{entry}\"");
    }
    let path = dir.join(format!("2026-01-01T00-00-00-000Z_{id}.jsonl"));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn store_usage_counts_replies_copied_into_forks_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let p = [
        ("aaaa0001", 1, "anthropic/claude"),
        ("aaaa0002", 2, "anthropic/claude"),
    ];
    write_session(d, "parent", "", &p);
    // A fork (parentSession = id) and a branched copy (parentSession = the parent's path)
    // repeat the parent's replies and add their own.
    write_session(
        d,
        "fork",
        ",\"parentSession\":\"parent\"",
        &[p[0], p[1], ("aaaa0003", 40, "openai/gpt")],
    );
    let branched = format!(
        ",\"parentSession\":\"{}\"",
        d.join("2026-01-01T00-00-00-000Z_parent.jsonl").display()
    );
    write_session(
        d,
        "branched",
        &branched,
        &[p[0], ("aaaa0004", 41, "openai/gpt")],
    );
    // A fork of the fork.
    write_session(
        d,
        "grandchild",
        ",\"parentSession\":\"fork\"",
        &[p[0], ("aaaa0003", 40, "openai/gpt")],
    );
    // An unrelated session reusing an id and a timestamp: not a copy.
    write_session(d, "unrelated", "", &[("aaaa0001", 1, "anthropic/claude")]);
    // Two forks of a session that is gone share a lineage.
    write_session(
        d,
        "orphan1",
        ",\"parentSession\":\"gone\"",
        &[("cccc0001", 5, "anthropic/claude")],
    );
    write_session(
        d,
        "orphan2",
        ",\"parentSession\":\"/x/2025-12-01T00-00-00-000Z_gone.jsonl\"",
        &[("cccc0001", 5, "anthropic/claude")],
    );
    std::fs::write(d.join("notes.jsonl"), "not a session\n").unwrap();

    let paths =
        gjcfs::engine::store::discovery::transcript_paths(&gjcfs::engine::storage::FileStorage, d)
            .unwrap();
    assert_eq!(paths.len(), 8);
    let scan = scan_sessions(&paths, 3, &|_| {});
    assert_eq!(scan.contributions.len(), 7);
    assert_eq!(scan.failed.len(), 1);
    assert!(scan.failed[0].0.ends_with("notes.jsonl"));
    let usage = StoreUsage::combine(scan.contributions.iter().map(|s| &s.contribution));
    // parent 2 + fork 1 + branched 1 + unrelated 1 + orphans 1.
    assert_eq!(usage.totals.records, 6);
    // fork 2 + branched 1 + grandchild 2 + orphan 1.
    assert_eq!(usage.copies, 6);
    assert_eq!(usage.totals.totals.input, 6.0);
    assert_eq!(usage.totals.totals.cost, 3.0);
    let groups = |by| -> Vec<(String, u64)> {
        usage
            .groups(by)
            .iter()
            .map(|(k, v)| (k.clone(), v.records))
            .collect()
    };
    assert_eq!(
        groups(Grouping::Model),
        [("anthropic/claude".into(), 4), ("openai/gpt".into(), 2)]
    );
    assert_eq!(
        groups(Grouping::Day),
        [("2026-03-01".into(), 4), ("2026-03-02".into(), 2)]
    );
    let projects = groups(Grouping::Project);
    assert_eq!(projects.iter().map(|(_, n)| n).sum::<u64>(), 6);
    assert!(projects.contains(&("/work/parent".into(), 2)));
    assert!(!projects.iter().any(|(p, _)| p == "/work/grandchild"));

    // Every scan order gives the same sums.
    let mut reversed = paths.clone();
    reversed.reverse();
    let again = scan_sessions(&reversed, 1, &|_| {});
    assert_eq!(
        StoreUsage::combine(again.contributions.iter().map(|s| &s.contribution)),
        usage
    );
}

#[test]
fn store_usage_matches_legacy_copies_without_ids() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = concat!(
        "{\"type\":\"session\",\"id\":\"legacy\",\"timestamp\":\"2025-11-01T00:00:00.000Z\",\"cwd\":\"/old\"}\n",
        "{\"type\":\"message\",\"timestamp\":\"2025-11-01T00:00:01.000Z\",\"message\":{\"role\":\"assistant\",\"content\":[],\"provider\":\"anthropic\",\"model\":\"claude\",\"usage\":{\"input\":7,\"output\":1,\"cacheRead\":0,\"cacheWrite\":0}}}\n",
    );
    std::fs::write(dir.path().join("a_legacy.jsonl"), v1).unwrap();
    // The agent's legacy migration copies a session, keeping its id; a branched v1 copy
    // names its origin in `branchedFrom`.
    std::fs::write(dir.path().join("b_legacy.jsonl"), v1).unwrap();
    let branched = v1.replacen(
        "\"id\":\"legacy\"",
        "\"id\":\"legacy-branch\",\"branchedFrom\":\"/old/sessions/2025-11-01T00-00-00-000Z_legacy.jsonl\"",
        1,
    );
    std::fs::write(dir.path().join("c_branch.jsonl"), branched).unwrap();
    let paths = gjcfs::engine::store::discovery::transcript_paths(
        &gjcfs::engine::storage::FileStorage,
        dir.path(),
    )
    .unwrap();
    let scan = scan_sessions(&paths, 2, &|_| {});
    let usage = StoreUsage::combine(scan.contributions.iter().map(|s| &s.contribution));
    assert_eq!(
        (usage.sessions, usage.totals.records, usage.copies),
        (3, 1, 2)
    );
    assert_eq!(usage.totals.totals.input, 7.0);
}

#[test]
fn context_md_drops_a_terminals_control_sequences_and_keeps_the_text() {
    // Tool output with colours, a title, a carriage return; a bash execution's output.
    let session = crate::common::SessionText::new()
        .message("u1", None, "user", r"run the tests\u001b[0m")
        .entry(
            "message",
            "t1",
            Some("u1"),
            r#""message":{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"\u001b]0;title\u0007\u001b[31m✗ 2 failed\u001b[0m\r\nok\tdone"}],"isError":false,"timestamp":1}"#,
        )
        .entry(
            "message",
            "b1",
            Some("t1"),
            r#""message":{"role":"bashExecution","command":"ls --color","output":"\u001b[1;34msrc\u001b[0m","exitCode":0,"timestamp":2}"#,
        )
        .session();
    let md = String::from_utf8(markdown::context_md(&session, "blobs/")).unwrap();
    assert!(
        !md.contains('\u{1b}') && !md.contains('\r') && !md.contains('\u{7}'),
        "{md}"
    );
    for kept in ["run the tests", "✗ 2 failed\nok\tdone", "src"] {
        assert!(md.contains(kept), "{kept:?} is kept: {md}");
    }
}
