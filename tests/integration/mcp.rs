//! `gjcfs mcp` driven by the official MCP SDK client (PyPI `mcp`, tests/mcp/client.py):
//! every tool called over stdio against the demo agent directory (generated sessions, the
//! two real transcripts, a legacy one and a prompt history), its answers checked against
//! the commands they mirror, and bad input answered with errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use gjcfs::engine::json::{self, Value};

use crate::common::cannot_run;

/// How long one client run may take before it counts as hung.
const CLIENT_LIMIT: Duration = Duration::from_secs(120);

/// Whether the SDK client can run here; if not, [`cannot_run`].
fn sdk_ready() -> bool {
    let found = Command::new("python3")
        .args(["-c", "import mcp"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    found || cannot_run("the MCP SDK for Python is not installed (pip install mcp)")
}

/// The demo agent directory (scripts/make-demo-agent.sh), built once for these tests, and
/// the cache directory their searches share.
struct Demo {
    _tmp: tempfile::TempDir,
    agent: PathBuf,
    cache: PathBuf,
    workspace: PathBuf,
    real_workspace: PathBuf,
}

fn demo() -> &'static Demo {
    static DEMO: OnceLock<Demo> = OnceLock::new();
    DEMO.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let dir = crate::demo_agent::make_demo_agent(&tmp.path().join("demo"));
        Demo {
            agent: dir.join("agent"),
            cache: tmp.path().join("cache"),
            workspace: dir.join("workspace"),
            real_workspace: dir.join("pi-mono"),
            _tmp: tmp,
        }
    })
}

/// Runs the SDK client: `calls` (a JSON array of {"tool","arguments"}) against `gjcfs mcp
/// --agent-dir AGENT`, started in `cwd`; the client's report.
fn client(demo: &Demo, cwd: &Path, calls: &str) -> Value {
    client_in(demo, cwd, calls, &[("XDG_CACHE_HOME", &demo.cache)])
}

/// [`client`] with `env` as the client's (and so the server's) environment beside the
/// test's own.
fn client_in(demo: &Demo, cwd: &Path, calls: &str, env: &[(&str, &Path)]) -> Value {
    let tmp = tempfile::tempdir().unwrap();
    let calls_file = tmp.path().join("calls.json");
    std::fs::write(&calls_file, calls).unwrap();
    let child = Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/client.py"))
        .arg(env!("CARGO_BIN_EXE_gjcfs"))
        .arg(&calls_file)
        .arg("--")
        .arg("--agent-dir")
        .arg(&demo.agent)
        .current_dir(cwd)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out =
        within(CLIENT_LIMIT, child).unwrap_or_else(|| panic!("the MCP client hung on {calls}"));
    assert!(
        out.status.success(),
        "client: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    json::parse(std::str::from_utf8(&out.stdout).unwrap()).unwrap()
}

/// The output of `child` once it exits, read while it runs (a child that fills its pipe
/// waits for the reader); `None`, the child killed, when it runs longer than `limit`.
fn within(limit: Duration, child: std::process::Child) -> Option<std::process::Output> {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    match rx.recv_timeout(limit) {
        Ok(out) => Some(out.unwrap()),
        Err(_) => {
            // SAFETY: kill has no memory preconditions; the child is not yet reaped (its
            // waiting thread still waits), so the pid is still its own.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            let _ = rx.recv();
            None
        }
    }
}

/// `gjcfs ARGS… --agent-dir AGENT` in `cwd`, with the tests' cache; its standard output.
fn cli(demo: &Demo, cwd: &Path, args: &[&str]) -> String {
    crate::common::stdout_of(
        Command::new(env!("CARGO_BIN_EXE_gjcfs"))
            .args(args)
            .arg("--agent-dir")
            .arg(&demo.agent)
            .current_dir(cwd)
            .env("XDG_CACHE_HOME", &demo.cache),
    )
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines().map(|l| json::parse(l).unwrap()).collect()
}

fn get<'a>(value: &'a Value, key: &str) -> &'a Value {
    value
        .as_object()
        .and_then(|o| o.get(key))
        .unwrap_or_else(|| panic!("no {key} in {}", json::to_compact(value)))
}

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    get(value, key).as_str().unwrap_or_default()
}

fn items<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    match get(value, key) {
        Value::Array(items) => items,
        other => panic!("{key} is not an array: {}", json::to_compact(other)),
    }
}

/// The answer of call `i` of a report, which must have succeeded.
fn ok(report: &Value, i: usize) -> &Value {
    let result = &items(report, "results")[i];
    result
        .as_object()
        .unwrap()
        .get("ok")
        .unwrap_or_else(|| panic!("call {i} failed: {}", json::to_compact(result)))
}

/// The error of call `i` of a report, which must have failed.
fn error(report: &Value, i: usize) -> String {
    let result = &items(report, "results")[i];
    let o = result.as_object().unwrap();
    assert!(
        o.get("ok").is_none(),
        "call {i} should fail: {}",
        json::to_compact(result)
    );
    o.get_str("error").unwrap().to_owned()
}

#[test]
fn the_sdk_client_lists_every_tool_with_a_schema_and_a_description() {
    if !sdk_ready() {
        return;
    }
    let demo = demo();
    let report = client(demo, &demo.workspace, "[]");
    assert_eq!(text(get(&report, "server"), "name"), "gjcfs");
    let tools = items(&report, "tools");
    let mut names: Vec<&str> = tools.iter().map(|t| text(t, "name")).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "files_touched",
            "history_search",
            "list_sessions",
            "read_session",
            "search_sessions",
            "session_tree",
            "usage"
        ]
    );
    for tool in tools {
        let name = text(tool, "name");
        assert!(text(tool, "description").len() > 100, "{name}: description");
        let schema = get(tool, "inputSchema");
        assert_eq!(text(schema, "type"), "object", "{name}");
        assert!(get(schema, "properties").as_object().is_some(), "{name}");
        let hints = get(tool, "annotations");
        assert_eq!(get(hints, "readOnlyHint"), &Value::Bool(true), "{name}");
        let required: Vec<&str> = match schema.as_object().unwrap().get("required") {
            Some(Value::Array(r)) => r.iter().map(|v| v.as_str().unwrap()).collect(),
            _ => Vec::new(),
        };
        let expected: &[&str] = match name {
            "search_sessions" | "history_search" => &["query"],
            "files_touched" => &["path"],
            "read_session" | "session_tree" => &["session"],
            _ => &[],
        };
        assert_eq!(required, expected, "{name}: required");
        // Every argument is described for the model.
        for (arg, spec) in get(schema, "properties").as_object().unwrap().iter() {
            assert!(
                !text(spec, "description").is_empty(),
                "{name}.{arg:?} has no description"
            );
        }
    }
}

#[test]
fn the_server_keeps_its_index_in_the_cache_directory_of_its_environment() {
    if !sdk_ready() {
        return;
    }
    let demo = demo();
    let dir = tempfile::tempdir().unwrap();
    let (home, cache) = (dir.path().join("home"), dir.path().join("cache"));
    std::fs::create_dir_all(&home).unwrap();
    let calls =
        r#"[{"tool": "search_sessions", "arguments": {"query": "compaction", "all": true}}]"#;
    let env = [
        ("HOME", home.as_path()),
        ("XDG_CACHE_HOME", cache.as_path()),
    ];
    let report = client_in(demo, &demo.workspace, calls, &env);
    assert!(!items(ok(&report, 0), "hits").is_empty());
    assert!(
        cache.join("gjcfs/search").is_dir(),
        "the index is in XDG_CACHE_HOME"
    );
    assert!(!home.join(".cache").exists(), "nothing under HOME/.cache");
}

#[test]
fn search_and_list_answer_what_the_commands_answer() {
    if !sdk_ready() {
        return;
    }
    let demo = demo();
    let ws = &demo.workspace;
    let report = client(
        demo,
        ws,
        r#"[
            {"tool": "search_sessions", "arguments": {"query": "compaction", "all": true, "limit": 5}},
            {"tool": "search_sessions", "arguments": {"query": "compaction", "all": true, "offset": 5, "limit": 5}},
            {"tool": "search_sessions", "arguments": {"query": "compaction"}},
            {"tool": "list_sessions", "arguments": {"all": true, "limit": 100}},
            {"tool": "list_sessions", "arguments": {"limit": 2}},
            {"tool": "search_sessions", "arguments": {"query": "zzqqxxnothing", "all": true}}
        ]"#,
    );
    let cli_hits = json_lines(&cli(
        demo,
        ws,
        &["search", "compaction", "--all", "--limit", "10", "--json"],
    ));
    let key = |h: &Value| (text(h, "session").to_owned(), text(h, "entry").to_owned());
    let expected: Vec<_> = cli_hits.iter().map(key).collect();
    let first = ok(&report, 0);
    let second = ok(&report, 1);
    let got: Vec<_> = items(first, "hits")
        .iter()
        .chain(items(second, "hits"))
        .map(key)
        .collect();
    assert_eq!(
        got, expected,
        "two pages of five are the command's ten hits"
    );
    assert!(
        text(first, "more").contains("offset=5"),
        "{}",
        text(first, "more")
    );
    // Each hit session comes with its title, workspace and the command that resumes it.
    for (session, _) in &got[..5] {
        let info = get(get(first, "sessions"), session);
        let cwd = text(info, "cwd");
        assert_eq!(
            text(info, "resume"),
            format!("cd {cwd} && gjc --resume {session}")
        );
        let hit = cli_hits
            .iter()
            .find(|h| text(h, "session") == session)
            .unwrap();
        assert_eq!(cwd, text(hit, "cwd"));
    }
    // Without `all`, the workspace the server runs in.
    let here = ok(&report, 2);
    assert_eq!(text(here, "workspace"), ws.to_str().unwrap());
    let cli_here = json_lines(&cli(demo, ws, &["search", "compaction", "--json"]));
    assert_eq!(
        items(here, "hits").iter().map(key).collect::<Vec<_>>(),
        cli_here.iter().map(key).collect::<Vec<_>>()
    );

    let listed = json_lines(&cli(demo, ws, &["ls", "--all", "--json"]));
    let ids = |list: &[Value], k: &str| {
        list.iter()
            .map(|s| text(s, k).to_owned())
            .collect::<Vec<_>>()
    };
    let all = ok(&report, 3);
    assert_eq!(ids(items(all, "sessions"), "id"), ids(&listed, "id"));
    assert_eq!(get(all, "total").as_f64(), Some(listed.len() as f64));
    assert_eq!(get(all, "more"), &Value::Null);
    let two = ok(&report, 4);
    let in_ws = json_lines(&cli(demo, ws, &["ls", "--json"]));
    assert_eq!(ids(items(two, "sessions"), "id"), ids(&in_ws[..2], "id"));
    assert!(text(two, "more").contains("offset=2"));
    // Nothing found is an answer, not an error.
    let none = ok(&report, 5);
    assert!(items(none, "hits").is_empty());
    assert!(text(none, "more").contains("no hits"));
}

/// The id of the real transcript recorded before a compaction.
fn real_session(demo: &Demo) -> String {
    let listed = json_lines(&cli(demo, &demo.real_workspace, &["ls", "--json"]));
    let mut ids: Vec<(usize, String)> = listed
        .iter()
        .map(|s| {
            (
                get(s, "messageCount").as_f64().unwrap() as usize,
                text(s, "id").to_owned(),
            )
        })
        .collect();
    ids.sort();
    ids.pop().unwrap().1
}

#[test]
fn read_session_pages_the_context_of_a_real_transcript_and_reads_on_after_a_cut() {
    if !sdk_ready() {
        return;
    }
    let demo = demo();
    let id = real_session(demo);
    let context = json::parse(&cli(demo, &demo.workspace, &["context", &id])).unwrap();
    let messages = items(&context, "messages");
    let roles: Vec<&str> = messages.iter().map(|m| text(m, "role")).collect();
    // A user message of one text longer than the cut, and its text.
    let (at, prompt) = messages
        .iter()
        .enumerate()
        .find_map(|(i, m)| {
            if text(m, "role") != "user" {
                return None;
            }
            let content = match m.as_object()?.get("content")? {
                Value::String(s) => s.to_string_lossy().into_owned(),
                Value::Array(blocks) if blocks.len() == 1 => text(&blocks[0], "text").to_owned(),
                _ => return None,
            };
            (content.trim().chars().count() > 60).then_some((i, content))
        })
        .expect("a long prompt");
    let calls = format!(
        r#"[
            {{"tool": "read_session", "arguments": {{"session": "{id}"}}}},
            {{"tool": "read_session", "arguments": {{"session": "{id}", "offset": 0, "limit": 100}}}},
            {{"tool": "read_session", "arguments": {{"session": "{id}", "offset": {at}, "limit": 1, "max_chars": 40}}}},
            {{"tool": "read_session", "arguments": {{"session": "{id}", "offset": {at}, "limit": 1, "text_offset": 40}}}}
        ]"#,
        id = &id[..13]
    );
    let report = client(demo, &demo.workspace, &calls);
    let last = ok(&report, 0);
    assert_eq!(text(last, "session"), id);
    assert_eq!(get(last, "total").as_f64(), Some(messages.len() as f64));
    let shown = items(last, "messages");
    assert_eq!(
        shown.len(),
        20.min(messages.len()),
        "the last twenty by default"
    );
    let tail: Vec<&str> = shown.iter().map(|m| text(m, "role")).collect();
    assert_eq!(tail, roles[roles.len() - shown.len()..]);
    assert!(text(last, "more").contains("come before"));
    let first = ok(&report, 1);
    let head: Vec<&str> = items(first, "messages")
        .iter()
        .map(|m| text(m, "role"))
        .collect();
    assert_eq!(head, roles[..head.len()]);
    // Entry ids and times come with each message.
    for m in items(first, "messages") {
        assert!(!text(m, "entry").is_empty());
        assert!(text(m, "time").starts_with("20"));
    }
    // A long prompt, cut after 40 characters, and the rest from there.
    let cut = text(&items(ok(&report, 2), "messages")[0], "text").to_owned();
    let (shown, note) = cut.split_once("\n[cut: ").expect("a cut message says so");
    assert_eq!(shown.chars().count(), 40);
    assert!(
        note.contains(&format!("offset={at}, limit=1, text_offset=40")),
        "{note}"
    );
    let rest = text(&items(ok(&report, 3), "messages")[0], "text");
    assert_eq!(format!("{shown}{rest}"), prompt);
}

#[test]
fn a_hit_is_read_in_context_and_the_tree_names_every_branch() {
    if !sdk_ready() {
        return;
    }
    let demo = demo();
    let ws = &demo.workspace;
    let hit = json_lines(&cli(
        demo,
        ws,
        &["search", "compaction", "--limit", "1", "--json"],
    ))
    .remove(0);
    let (session, entry) = (text(&hit, "session"), text(&hit, "entry"));
    let tree = cli(demo, ws, &["show", session, "--format", "tree"]);
    let calls = format!(
        r#"[
            {{"tool": "read_session", "arguments": {{"session": "{session}", "around_entry": "{entry}", "limit": 3}}}},
            {{"tool": "session_tree", "arguments": {{"session": "{session}"}}}}
        ]"#
    );
    let report = client(demo, ws, &calls);
    let around = ok(&report, 0);
    let shown = items(around, "messages");
    assert!(shown.len() <= 3);
    assert!(
        shown.iter().any(|m| text(m, "entry") == entry),
        "the hit's entry {entry} is in the window"
    );
    let branches = ok(&report, 1);
    let ends = items(branches, "branches");
    assert!(ends.len() >= 2, "the demo session has a branch");
    assert_eq!(get(&ends[0], "isLeaf"), &Value::Bool(true));
    assert_eq!(get(&ends[0], "branchesFrom"), &Value::Null);
    assert_eq!(text(&ends[0], "entry"), text(branches, "leaf"));
    for end in &ends[1..] {
        let from = text(end, "branchesFrom");
        assert!(tree.contains(from), "branch point {from} is in the tree");
        assert!(tree.contains(text(end, "entry")));
    }
    // As many branch ends as the tree has entries without children.
    assert_eq!(
        get(branches, "total").as_f64(),
        Some(branch_ends(&tree) as f64)
    );
}

/// How many entries of `gjcfs show --format tree` end a branch: in a tree, one more than
/// the side branches, each drawn from a `├─ ` line.
fn branch_ends(tree: &str) -> usize {
    1 + tree.lines().filter(|l| l.contains("├─ ")).count()
}

#[test]
fn files_touched_answers_what_gjcfs_files_answers_page_by_page() {
    if !sdk_ready() {
        return;
    }
    let demo = demo();
    let ws = &demo.workspace;
    // The real transcripts' tool calls name files under their own project.
    let dir = "/Users/badlogic/workspaces/pi-mono/packages/coding-agent/src";
    let expected = json_lines(&cli(
        demo,
        ws,
        &["files", dir, "--all", "--limit", "30", "--json"],
    ));
    assert_eq!(
        expected.len(),
        30,
        "the real transcripts touch many files there"
    );
    let calls = format!(
        r#"[
            {{"tool": "files_touched", "arguments": {{"path": "{dir}", "all": true, "limit": 15}}}},
            {{"tool": "files_touched", "arguments": {{"path": "{dir}", "all": true, "offset": 15, "limit": 15}}}},
            {{"tool": "files_touched", "arguments": {{"path": "{dir}"}}}},
            {{"tool": "files_touched", "arguments": {{"path": ""}}}}
        ]"#
    );
    let report = client(demo, ws, &calls);
    let key = |t: &Value| {
        [
            "session",
            "entry",
            "action",
            "source",
            "resolved",
            "written",
            "timestamp",
        ]
        .map(|k| text(t, k).to_owned())
    };
    let (first, second) = (ok(&report, 0), ok(&report, 1));
    let got: Vec<_> = items(first, "touches")
        .iter()
        .chain(items(second, "touches"))
        .map(key)
        .collect();
    assert_eq!(got, expected.iter().map(key).collect::<Vec<_>>());
    let total = get(first, "total").as_f64().unwrap() as usize;
    assert!(total > 30);
    assert!(text(first, "more").contains("offset=15"));
    for touch in &expected[..15] {
        let info = get(get(first, "sessions"), text(touch, "session"));
        assert!(text(info, "resume").ends_with(text(touch, "session")));
    }
    // The demo workspace's own sessions never touched that project's files.
    let here = ok(&report, 2);
    assert!(items(here, "touches").is_empty());
    assert!(
        text(here, "more").contains("all=true"),
        "{}",
        text(here, "more")
    );
    assert!(error(&report, 3).contains("path"));
}

#[test]
fn usage_and_history_answer_what_the_commands_answer() {
    if !sdk_ready() {
        return;
    }
    let demo = demo();
    let ws = &demo.workspace;
    let report = client(
        demo,
        ws,
        r#"[
            {"tool": "usage", "arguments": {}},
            {"tool": "usage", "arguments": {"by": "model", "limit": 100}},
            {"tool": "usage", "arguments": {"by": "day", "limit": 1}},
            {"tool": "history_search", "arguments": {"query": "compaction"}}
        ]"#,
    );
    let usage = json::parse(&cli(demo, ws, &["usage", "--json"])).unwrap();
    let totals = get(&usage, "totals").as_object().unwrap();
    let answered = get(ok(&report, 0), "totals");
    assert_eq!(answered.as_object().unwrap().len(), totals.len());
    for (key, value) in totals.iter() {
        assert_eq!(
            get(answered, key.as_str().unwrap()),
            value,
            "totals.{key:?}"
        );
    }
    let by_model = ok(&report, 1);
    let cost: f64 = items(by_model, "groups")
        .iter()
        .map(|g| get(g, "cost").as_f64().unwrap())
        .sum();
    let total = get(get(&usage, "totals"), "cost").as_f64().unwrap();
    assert!((cost - total).abs() < 1e-6, "{cost} vs {total}");
    let by_day = ok(&report, 2);
    assert_eq!(items(by_day, "groups").len(), 1);
    let days = get(by_day, "totalGroups").as_f64().unwrap();
    if days > 1.0 {
        assert!(text(by_day, "more").contains("raise limit"));
    }
    let prompts = json_lines(&cli(
        demo,
        ws,
        &["history", "search", "compaction", "--json"],
    ));
    let got: Vec<&str> = items(ok(&report, 3), "prompts")
        .iter()
        .map(|p| text(p, "prompt"))
        .collect();
    let expected: Vec<&str> = prompts.iter().map(|p| text(p, "prompt")).collect();
    assert!(!expected.is_empty());
    assert_eq!(got, expected);
}

#[test]
fn bad_arguments_and_unknown_sessions_are_errors_and_the_server_goes_on() {
    if !sdk_ready() {
        return;
    }
    let demo = demo();
    let id = real_session(demo);
    let calls = format!(
        r#"[
            {{"tool": "read_session", "arguments": {{"session": "nosuchsession"}}}},
            {{"tool": "read_session", "arguments": {{"session": "../../etc/passwd"}}}},
            {{"tool": "read_session", "arguments": {{"session": "{id}", "around_entry": "nosuchentry"}}}},
            {{"tool": "read_session", "arguments": {{"session": "{id}", "leaf": "nosuchentry"}}}},
            {{"tool": "search_sessions", "arguments": {{"query": "x", "role": "robot"}}}},
            {{"tool": "search_sessions", "arguments": {{"query": "x", "since": "last week"}}}},
            {{"tool": "search_sessions", "arguments": {{"query": "x", "unknown": 1}}}},
            {{"tool": "search_sessions", "arguments": {{}}}},
            {{"tool": "list_sessions", "arguments": {{"limit": 0}}}},
            {{"tool": "usage", "arguments": {{"by": "year"}}}},
            {{"tool": "session_tree", "arguments": {{"session": ""}}}},
            {{"tool": "history_search", "arguments": {{"query": "!!!"}}}},
            {{"tool": "no_such_tool", "arguments": {{}}}},
            {{"tool": "list_sessions", "arguments": {{"all": true, "limit": 1}}}}
        ]"#
    );
    let report = client(demo, &demo.workspace, &calls);
    let says = [
        "no session matches nosuchsession",
        "no session matches ../../etc/passwd",
        "no entry nosuchentry",
        "no entry nosuchentry",
        "robot",
        "since",
        "unknown",
        "query",
        "limit",
        "year",
        "session",
        "no word",
        "",
    ];
    for (i, expected) in says.iter().enumerate() {
        let message = error(&report, i);
        assert!(message.contains(expected), "call {i}: {message:?}");
    }
    // After every error, the server still answers.
    assert_eq!(items(ok(&report, 13), "sessions").len(), 1);
}

#[test]
fn the_server_passes_over_a_bad_line_and_exits_zero_when_its_input_closes() {
    let demo = demo();
    let mut child = Command::new(env!("CARGO_BIN_EXE_gjcfs"))
        .args(["mcp", "--agent-dir"])
        .arg(&demo.agent)
        .env("XDG_CACHE_HOME", &demo.cache)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
    )
    .unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    // A line that is not JSON-RPC is passed over; the next call is answered.
    writeln!(stdin, "this is not JSON {{\"id\":").unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"list_sessions","arguments":{{"all":true,"limit":1}}}}}}"#
    )
    .unwrap();
    drop(stdin);
    let out =
        within(Duration::from_secs(20), child).expect("gjcfs mcp exits when its input closes");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer = String::from_utf8(out.stdout).unwrap();
    assert!(answer.contains(r#""serverInfo""#), "{answer}");
    let listed = answer
        .lines()
        .find(|l| l.contains(r#""id":2"#))
        .expect("the call after the bad line is answered");
    assert!(listed.contains(r#""isError":false"#), "{listed}");
}

#[test]
fn a_missing_store_is_refused_before_serving() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gjcfs"))
        .args(["mcp", "--agent-dir"])
        .arg(tmp.path().join("nothing"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing"));
}

/// The tools the server lists, by name, with their argument names, from a raw stdio
/// exchange (no SDK needed).
fn listed_tools(demo: &Demo) -> Vec<(String, Vec<String>)> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gjcfs"))
        .args(["mcp", "--agent-dir"])
        .arg(&demo.agent)
        .env("XDG_CACHE_HOME", &demo.cache)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write;
    let mut stdin = child.stdin.take().unwrap();
    for line in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    ] {
        writeln!(stdin, "{line}").unwrap();
    }
    drop(stdin);
    let out = within(Duration::from_secs(20), child).expect("gjcfs mcp answers tools/list");
    let text = String::from_utf8(out.stdout).unwrap();
    let listed = json_lines(&text)
        .into_iter()
        .find(|l| get(l, "id").as_f64() == Some(2.0))
        .expect("a tools/list answer");
    tool_arguments(items(get(&listed, "result"), "tools"), "inputSchema", "")
}

/// Each tool's name (less `prefix`) and the names of its arguments in `schema_key`, sorted.
fn tool_arguments(tools: &[Value], schema_key: &str, prefix: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = tools
        .iter()
        .map(|t| {
            let name = text(t, "name").strip_prefix(prefix).unwrap().to_owned();
            let properties = get(get(t, schema_key), "properties").as_object().unwrap();
            let mut args: Vec<String> = properties
                .iter()
                .map(|(k, _)| k.as_str().unwrap().to_owned())
                .collect();
            args.sort();
            (name, args)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn the_original_agents_mcp_client_saw_the_tools_the_server_lists() {
    let demo = demo();
    let recorded = json::parse(&crate::common::fixture_text("gjc-mcp/recorded.json")).unwrap();
    assert!(get(&recorded, "errors").as_object().unwrap().is_empty());
    // The agent names each tool mcp__<server>_<tool> and keeps every argument.
    let seen = tool_arguments(items(&recorded, "tools"), "parameters", "mcp__gjcfs_");
    assert_eq!(
        listed_tools(demo),
        seen,
        "the tools changed since tests/fixtures/gjc-mcp/recorded.json: record it again"
    );
    // What the model was shown: an answer as JSON text, and an unknown session as an error.
    let calls = items(&recorded, "calls");
    let shown = |i: usize| text(&items(get(&calls[i], "result"), "content")[0], "text").to_owned();
    let hits = json::parse(&shown(0)).unwrap();
    assert_eq!(items(&hits, "hits").len(), 3);
    let details = get(get(&calls[1], "result"), "details");
    assert_eq!(get(details, "isError"), &Value::Bool(true));
    assert!(shown(1).contains("-32602: no session matches no-such-session"));
    let tree = json::parse(&shown(2)).unwrap();
    assert_eq!(
        text(&items(&tree, "branches")[0], "entry"),
        text(&tree, "leaf")
    );
}
