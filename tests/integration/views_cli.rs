//! `gjcfs show` and `gjcfs usage` as a user runs them.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::{fixture, gjcfs_bin};
use gjcfs::engine::json;
use gjcfs::engine::load_session;
use gjcfs::engine::views::{markdown, tree, usage};

fn gjcfs(args: &[&str]) -> Output {
    Command::new(gjcfs_bin())
        .args(args)
        .env_remove("GJC_CODING_AGENT_DIR")
        .output()
        .expect("gjcfs runs")
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "status {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn failed(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(out.stdout.is_empty());
    String::from_utf8(out.stderr.clone()).unwrap()
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A session directory holding the elements fixture and a copy under another id.
fn session_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture("views/elements.jsonl")).unwrap();
    std::fs::write(
        dir.path()
            .join("2026-01-02T10-00-00-000Z_0194a1b2-0000-7000-8000-00000000e1e1.jsonl"),
        &text,
    )
    .unwrap();
    std::fs::write(
        dir.path()
            .join("2026-01-02T10-00-00-000Z_0194a1b2-0000-7000-8000-00000000e2e2.jsonl"),
        text.replacen("00000000e1e1", "00000000e2e2", 1),
    )
    .unwrap();
    dir
}

#[test]
fn show_prints_each_view_of_a_file_as_the_library_renders_it() {
    let path = fixture("views/elements.jsonl");
    let agent = tempfile::tempdir().unwrap();
    let session = load_session(&path).unwrap().session;
    let prefix = format!("{}/", agent.path().join("blobs").display());
    let md = ok(&gjcfs(&[
        "show",
        s(&path),
        "--format",
        "md",
        "--agent-dir",
        s(agent.path()),
    ]));
    assert_eq!(md.as_bytes(), markdown::context_md(&session, &prefix));
    assert!(md.contains(&format!("![image]({prefix}abab")));
    // md is the default.
    assert_eq!(
        ok(&gjcfs(&["show", s(&path), "--agent-dir", s(agent.path())])),
        md
    );
    let tree_out = ok(&gjcfs(&["show", s(&path), "--format", "tree"]));
    assert_eq!(tree_out.as_bytes(), tree::tree_txt(&session));
    let usage_out = ok(&gjcfs(&["show", s(&path), "--format", "usage"]));
    assert_eq!(usage_out.as_bytes(), usage::session_usage_json(&session));
    assert_eq!(
        json::parse(&usage_out)
            .unwrap()
            .as_object()
            .unwrap()
            .get("records"),
        Some(&json::Value::number(5.0))
    );
}

/// `gjcfs show TARGET ARGS… --session-dir DIR`.
fn show_in(dir: &Path, target: &str, args: &[&str]) -> Output {
    let mut all = vec!["show", target];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--session-dir", s(dir)]);
    gjcfs(&all)
}

#[test]
fn show_finds_a_session_by_id_or_unique_prefix() {
    let dir = session_dir();
    let dir = dir.path();
    let by_id = ok(&show_in(
        dir,
        "0194a1b2-0000-7000-8000-00000000e2e2",
        &["--format", "tree"],
    ));
    assert!(by_id.ends_with("e21 label: e10 → reading  ← leaf\n"));
    let by_prefix = ok(&show_in(
        dir,
        "0194a1b2-0000-7000-8000-00000000e1",
        &["--format", "usage"],
    ));
    assert!(by_prefix.contains("\"records\": 5"));

    let err = failed(&show_in(dir, "0194a1b2", &[]));
    assert_eq!(
        err,
        "gjcfs: error: 0194a1b2 is ambiguous: 2 sessions match (0194a1b2-0000-7000-8000-00000000e1e1, 0194a1b2-0000-7000-8000-00000000e2e2)\n"
    );
    let err = failed(&show_in(dir, "ffff", &[]));
    assert_eq!(
        err,
        format!(
            "gjcfs: error: no session matches ffff in {}\n",
            dir.display()
        )
    );
    let err = failed(&gjcfs(&["show", "missing/file.jsonl"]));
    assert_eq!(
        err,
        "gjcfs: error: missing/file.jsonl: no such session file\n"
    );
    let err = failed(&gjcfs(&["show", s(&fixture("future-v6.jsonl"))]));
    assert!(err.contains("Unsupported session version: 6"), "{err}");
}

#[test]
fn show_looks_in_every_scope_of_the_agent_directory() {
    let agent = tempfile::tempdir().unwrap();
    let scope = agent.path().join("sessions/--work-demo--");
    std::fs::create_dir_all(&scope).unwrap();
    std::fs::copy(
        fixture("views/elements.jsonl"),
        scope.join("2026-01-02T10-00-00-000Z_0194a1b2-0000-7000-8000-00000000e1e1.jsonl"),
    )
    .unwrap();
    let md = ok(&gjcfs(&[
        "show",
        "0194a1b2",
        "--agent-dir",
        s(agent.path()),
    ]));
    assert!(md.starts_with("# Every element\n"));
    let err = failed(&gjcfs(&[
        "show",
        "0194a1b2",
        "--agent-dir",
        s(&agent.path().join("none")),
    ]));
    assert!(
        err.starts_with("gjcfs: error: ") && err.contains("none: no agent directory here"),
        "{err}"
    );
}

/// A store where `fork` repeats the two replies of `parent` and adds one.
fn forked_store() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let reply = |id: &str, parent: &str, day: u32, model: &str| {
        format!(
            "{{\"type\":\"message\",\"id\":\"{id}\",\"parentId\":{parent},\"timestamp\":\"2026-02-{day:02}T08:00:00.000Z\",\"message\":{{\"role\":\"assistant\",\"content\":[],\"provider\":\"anthropic\",\"model\":\"{model}\",\"usage\":{{\"input\":1000,\"output\":10,\"cacheRead\":5,\"cacheWrite\":0,\"cost\":{{\"total\":0.25}}}}}}}}\n"
        )
    };
    let parent = format!(
        "{{\"type\":\"session\",\"version\":5,\"id\":\"parent\",\"timestamp\":\"2026-02-01T00:00:00.000Z\",\"cwd\":\"/work/a\"}}\n{}{}",
        reply("aaaa0001", "null", 1, "opus"),
        reply("aaaa0002", "\"aaaa0001\"", 2, "sonnet")
    );
    let fork = format!(
        "{{\"type\":\"session\",\"version\":5,\"id\":\"fork\",\"timestamp\":\"2026-02-03T00:00:00.000Z\",\"cwd\":\"/work/b\",\"parentSession\":\"parent\"}}\n{}{}{}",
        reply("aaaa0001", "null", 1, "opus"),
        reply("aaaa0002", "\"aaaa0001\"", 2, "sonnet"),
        reply("aaaa0003", "\"aaaa0002\"", 3, "sonnet")
    );
    std::fs::write(
        dir.path().join("2026-02-01T00-00-00-000Z_parent.jsonl"),
        parent,
    )
    .unwrap();
    std::fs::write(dir.path().join("2026-02-03T00-00-00-000Z_fork.jsonl"), fork).unwrap();
    dir
}

#[test]
fn usage_prints_totals_and_groups_with_fork_copies_counted_once() {
    let dir = forked_store();
    let usage = |args: &[&str]| {
        let mut all = vec!["usage", "--timezone", "UTC", "--session-dir", s(dir.path())];
        all.extend_from_slice(args);
        ok(&gjcfs(&all))
    };
    let table = usage(&[]);
    assert_eq!(
        table,
        "2 sessions, 2026-02-01 – 2026-02-03, UTC: 3 usage records counted, 2 copies in forks \
         not counted, 0 invalid; 2 sessions in the store\n\
         \n\
         \x20      RECORDS  INPUT  OUTPUT  CACHE READ  CACHE WRITE  PREMIUM     COST\n\
         total        3  3,000      30          15            0        0  $0.7500\n"
    );
    let by_day = usage(&["--by", "day"]);
    assert!(by_day.contains("\nDAY (UTC)   RECORDS  INPUT"), "{by_day}");
    assert!(
        by_day.contains(
            "\n2026-02-01        1  1,000      10           5            0        0  $0.2500\n"
        ),
        "{by_day}"
    );
    assert!(by_day.contains("\n2026-02-03        1  1,000"), "{by_day}");

    let value = json::parse(&usage(&["--by", "project", "--json"])).unwrap();
    assert_eq!(
        json::to_compact(&value),
        concat!(
            r#"{"timezone":"UTC","sessionsInRange":2,"firstDay":"2026-02-01","lastDay":"2026-02-03","#,
            r#""sessions":2,"records":3,"copies":2,"skipped":0,"outsideRange":0,"#,
            r#""totals":{"input":3000,"output":30,"cacheRead":15,"cacheWrite":0,"premiumRequests":0,"cost":0.75,"records":3},"#,
            r#""byProject":{"/work/a":{"input":2000,"output":20,"cacheRead":10,"cacheWrite":0,"premiumRequests":0,"cost":0.5,"records":2},"#,
            r#""/work/b":{"input":1000,"output":10,"cacheRead":5,"cacheWrite":0,"premiumRequests":0,"cost":0.25,"records":1}}}"#
        )
    );
    let by_model = json::parse(&usage(&["--by", "model", "--json"])).unwrap();
    assert_eq!(
        crate::common::at(&by_model, &["byModel", "anthropic/sonnet", "records"]).as_f64(),
        Some(2.0)
    );
    assert_eq!(
        crate::common::at(&by_model, &["byModel", "anthropic/opus", "records"]).as_f64(),
        Some(1.0)
    );
}

#[test]
fn usage_warns_about_files_that_are_not_sessions_and_reads_the_rest() {
    let dir = forked_store();
    std::fs::write(
        dir.path().join("broken.jsonl"),
        "{\"type\":\"session\",\"version\":9,\"id\":\"x\"}\n",
    )
    .unwrap();
    let out = gjcfs(&["usage", "--json", "--session-dir", s(dir.path())]);
    let value = json::parse(&ok(&out)).unwrap();
    assert_eq!(crate::common::at(&value, &["sessions"]).as_f64(), Some(2.0));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.starts_with("gjcfs: warning: skipped "), "{err}");
    assert!(
        err.contains("broken.jsonl: Unsupported session version: 9"),
        "{err}"
    );

    let empty = tempfile::tempdir().unwrap();
    // A directory with neither sessions nor a history is no agent directory...
    let err = failed(&gjcfs(&["usage", "--agent-dir", s(empty.path())]));
    assert!(err.contains("not an agent directory"), "{err}");
    // ...unless an empty store is asked for.
    let agent = ok(&gjcfs(&[
        "usage",
        "--agent-dir",
        s(empty.path()),
        "--allow-empty",
        "--timezone",
        "UTC",
    ]));
    assert!(
        agent.starts_with(
            "0 sessions, UTC: 0 usage records counted, 0 copies in forks not counted, \
             0 invalid; 0 sessions in the store\n"
        ),
        "{agent}"
    );
    let err = failed(&gjcfs(&[
        "usage",
        "--session-dir",
        s(&empty.path().join("none")),
    ]));
    assert!(err.contains("none: no session directory here"), "{err}");
}
