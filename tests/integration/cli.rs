//! The `gjcfs` command as a user runs it.

use std::process::{Command, Output};

use crate::common::{cannot_run, fixture, gjcfs_bin, root_for, SessionText};
use gjcfs::engine::json::{self, Value};

fn gjcfs(args: &[&str]) -> Output {
    Command::new(gjcfs_bin())
        .args(args)
        .output()
        .expect("gjcfs runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).unwrap()
}

#[test]
fn context_prints_pretty_json_of_the_current_leaf() {
    let path = fixture("real/large-session.jsonl");
    let out = gjcfs(&["context", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("{\n  \"messages\": [\n    {\n"));
    assert!(text.ends_with("}\n"));
    let ctx = json::parse(&text).unwrap();
    let messages = ctx
        .as_object()
        .unwrap()
        .get("messages")
        .unwrap()
        .as_array()
        .unwrap();
    assert_eq!(messages.len(), 914);
    assert_eq!(
        ctx.as_object().unwrap().get_str("thinkingLevel"),
        Some("off")
    );
}

#[test]
fn context_is_what_the_agent_sends_after_its_load_time_sanitizer() {
    let path = fixture("openai-replay-sanitize.jsonl");
    let before = std::fs::read(&path).unwrap();
    let out = gjcfs(&["context", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ctx = json::parse(&stdout(&out)).unwrap();
    let message = &ctx
        .as_object()
        .unwrap()
        .get("messages")
        .unwrap()
        .as_array()
        .unwrap()[0];
    let message = message.as_object().unwrap();
    assert_eq!(message.get_str("role"), Some("assistant"));
    assert!(message.get("providerPayload").is_none(), "{message:?}");
    let content = message.get("content").unwrap().expanded();
    let block = content.as_array().unwrap()[0].as_object().unwrap();
    assert_eq!(block.get_str("thinking"), Some("private"));
    assert!(block.get("thinkingSignature").is_none(), "{block:?}");
    assert_eq!(std::fs::read(&path).unwrap(), before, "in memory only");
}

#[test]
fn context_at_a_leaf_and_unknown_leaf_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    std::fs::write(
        &path,
        SessionText::new()
            .message("a", None, "user", "one")
            .message("b", Some("a"), "assistant", "two")
            .message("c", Some("a"), "assistant", "other")
            .text(),
    )
    .unwrap();
    let p = path.to_str().unwrap();
    let at_b = json::parse(&stdout(&gjcfs(&["context", p, "--leaf", "b"]))).unwrap();
    let contents: Vec<&str> = at_b
        .as_object()
        .unwrap()
        .get("messages")
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_object().unwrap().get_str("content").unwrap())
        .collect();
    assert_eq!(contents, ["one", "two"]);
    let out = gjcfs(&["context", p, "--leaf", "zzz"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("entry zzz not found"), "{err}");
}

#[test]
fn bad_files_give_one_clear_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let not_session = dir.path().join("notes.jsonl");
    std::fs::write(&not_session, "{\"hello\":1}\n").unwrap();
    let missing = dir.path().join("missing.jsonl");
    let future = fixture("future-v6.jsonl");
    for (path, needle) in [
        (missing.as_path(), "no such session file"),
        (not_session.as_path(), "not a session file"),
        (future.as_path(), "Unsupported session version: 6"),
        (dir.path(), "a directory, not a session file"),
    ] {
        for cmd in ["context", "entries"] {
            let out = gjcfs(&[cmd, path.to_str().unwrap()]);
            assert_eq!(out.status.code(), Some(1), "{cmd} {path:?}");
            let err = stderr(&out);
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(
                err.starts_with("gjcfs: error: ") && err.contains(needle),
                "{err}"
            );
        }
    }
}

#[test]
fn malformed_lines_are_skipped_with_a_warning() {
    let path = fixture("lenient-malformed-line.jsonl");
    let out = gjcfs(&["entries", path.to_str().unwrap()]);
    assert!(out.status.success());
    assert!(
        stderr(&out).contains("skipped line 2: invalid JSON"),
        "{}",
        stderr(&out)
    );
    assert_eq!(stdout(&out).lines().count(), 2);
}

#[test]
fn entries_prints_replayed_and_migrated_records() {
    let out = gjcfs(&[
        "entries",
        fixture("v4-patch-fixture.jsonl").to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let text = stdout(&out);
    assert_eq!(
        text,
        concat!(
            r#"{"type":"session","version":5,"id":"v4","title":"Patched title","timestamp":"1970-01-01T00:00:00.000Z","cwd":"/fixture-v4-patched"}"#,
            "\n",
            r#"{"type":"message","id":"message","parentId":null,"timestamp":"1970-01-01T00:00:01.000Z","message":{"role":"user","content":"after patch","timestamp":0}}"#,
            "\n",
        )
    );
}

#[test]
fn entries_of_a_current_file_reproduce_it_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let text = SessionText::new()
        .message(
            "a",
            None,
            "user",
            "caf\u{e9} \\\"quoted\\\" \\u001f \u{1F600} \\udc00",
        )
        .entry(
            "custom",
            "c",
            Some("a"),
            r#""customType":"x","data":{"0":1,"n":1.5e-7,"big":12345678901234567890}"#,
        )
        .text();
    std::fs::write(&path, &text).unwrap();
    let out = gjcfs(&["entries", path.to_str().unwrap()]);
    assert_eq!(stdout(&out), text);
    // Non-canonical spellings come out as the original's writer spells them.
    let foreign = text
        .replace("\u{1F600}", "\\ud83d\\ude00")
        .replace(r#"{"0":1,"n":1.5e-7,"#, r#"{"n":1.5e-7,"0":1,"#);
    assert_ne!(foreign, text);
    std::fs::write(&path, &foreign).unwrap();
    let out = gjcfs(&["entries", path.to_str().unwrap()]);
    assert_eq!(stdout(&out), text);
    // A v1 transcript comes out migrated: version last in the header, ids on every entry.
    let out = gjcfs(&[
        "entries",
        fixture("real/large-session.jsonl").to_str().unwrap(),
    ]);
    let first = stdout(&out).lines().next().unwrap().to_owned();
    assert!(
        first.ends_with(r#""thinkingLevel":"off","version":5}"#),
        "{first}"
    );
    let entries: Vec<Value> = stdout(&out)
        .lines()
        .skip(1)
        .map(|l| json::parse(l).unwrap())
        .collect();
    assert!(entries
        .iter()
        .all(|e| e.as_object().unwrap().get_str("id").is_some()));
}

#[test]
fn help_describes_each_command() {
    let out = gjcfs(&["--help"]);
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(text.contains("context") && text.contains("entries"));
    // One line a command: `NAME  summary`, the summary a phrase without a full stop.
    let commands: Vec<&str> = text
        .split("Commands:\n")
        .nth(1)
        .unwrap()
        .lines()
        .take_while(|l| !l.is_empty())
        .collect();
    assert!(commands.len() >= 13, "{text}");
    for line in &commands {
        let (name, summary) = line.trim_start().split_once(' ').unwrap_or((line, ""));
        assert!(
            line.starts_with("  ") && !line.starts_with("   "),
            "a continued line: {line:?}"
        );
        assert!(!summary.trim().is_empty(), "{name} has no summary");
        assert!(!summary.ends_with('.'), "{line:?}");
    }
    for cmd in ["context", "entries"] {
        let out = gjcfs(&[cmd, "--help"]);
        assert!(out.status.success());
        assert!(stdout(&out).contains("FILE"), "{cmd}");
    }
    let out = gjcfs(&["context"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn closed_stdout_is_not_an_error() {
    use std::io::Read;
    use std::process::Stdio;
    let tmp = tempfile::tempdir().unwrap();
    let agent = tmp.path().join("agent");
    let dir = agent.join("sessions/--w--");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("a.jsonl");
    let (file, agent) = (file.to_str().unwrap(), agent.to_str().unwrap());
    let made = gjcfs(&["generate", file, "--entries", "3000", "--seed", "3"]);
    assert!(made.status.success(), "{}", stderr(&made));
    let index = tmp.path().join("index");
    let index = index.to_str().unwrap();
    let search = [
        "--all",
        "--limit",
        "100000",
        "--agent-dir",
        agent,
        "--index",
        index,
    ];
    // Each prints far more than a pipe holds; the reader closes it after 10 bytes.
    for args in [
        vec!["entries", file],
        vec!["context", file],
        vec!["show", file, "--format", "tree"],
        vec!["show", file, "--format", "md"],
        [&["search", "the"][..], &search].concat(),
        [&["search", "the", "--json"][..], &search].concat(),
        [&["search", "--substring", "the"][..], &search].concat(),
    ] {
        let mut child = Command::new(gjcfs_bin())
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = [0u8; 10];
        child.stdout.take().unwrap().read_exact(&mut first).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).is_empty(), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn append_reads_entries_from_stdin_and_stops_at_the_first_bad_line() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    std::fs::write(
        &path,
        SessionText::new()
            .message("a", None, "user", "q")
            .message("b", Some("a"), "assistant", "answer")
            .text(),
    )
    .unwrap();
    let input = concat!(
        "{\"role\":\"user\",\"content\":\"hello\"}\n",
        "\n",
        "{\"type\":\"label\",\"targetId\":\"a\",\"label\":\"checkpoint\"}\n",
        "{\"type\":\"label\",\"targetId\":\"nope\",\"label\":\"x\"}\n",
        "{\"role\":\"user\",\"content\":\"never\"}\n",
    );
    let mut child = Command::new(gjcfs_bin())
        .args(["append", path.to_str().unwrap()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("stdin line 4") && err.contains("Entry nope not found"),
        "{err}"
    );
    let session = gjcfs::engine::load_session(&path).unwrap().session;
    let types: Vec<&str> = session
        .entries()
        .map(|e| e.get_str("type").unwrap())
        .collect();
    assert_eq!(types, ["message", "message", "message", "label"]);
    assert_eq!(session.label("a"), Some("checkpoint"));
    let hello = session.entries().nth(2).unwrap();
    assert_eq!(hello.parent_id(), Some("b"));

    let missing = dir.path().join("missing.jsonl");
    let out = gjcfs(&["append", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no such session file"));
    assert!(!missing.exists());
}

#[test]
fn images_appended_go_to_the_agent_blob_store_and_context_resolves_them() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agent");
    let path = dir.path().join("s.jsonl");
    std::fs::write(
        &path,
        SessionText::new()
            .message("a", None, "user", "q")
            .message("b", Some("a"), "assistant", "answer")
            .text(),
    )
    .unwrap();
    let data = "QUJD".repeat(400);
    let line = format!(
        "{{\"role\":\"user\",\"content\":[{{\"type\":\"image\",\"data\":\"{data}\",\"mimeType\":\"image/png\"}}]}}\n"
    );
    let mut child = Command::new(gjcfs_bin())
        .args([
            "append",
            path.to_str().unwrap(),
            "--agent-dir",
            agent.to_str().unwrap(),
        ])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(line.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains(&data));
    assert_eq!(std::fs::read_dir(agent.join("blobs")).unwrap().count(), 1);
    let out = gjcfs(&[
        "context",
        path.to_str().unwrap(),
        "--agent-dir",
        agent.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&data),
        "the context carries the image data again"
    );
    // Without the blob store the placeholder stands in.
    let elsewhere = dir.path().join("other");
    let out = gjcfs(&[
        "context",
        path.to_str().unwrap(),
        "--agent-dir",
        elsewhere.to_str().unwrap(),
    ]);
    assert!(stdout(&out).contains("[Session resident imageData blob missing: sha256:"));
}

#[test]
fn ls_lists_a_workspace_or_every_session_newest_first() {
    use gjcfs::engine::manager::{SessionManager, StorageConfig};
    use gjcfs::engine::store::scope::{prepare_scope, resolve_identity};
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agent");
    let ws = dir.path().join("ws");
    let other_ws = dir.path().join("other");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&other_ws).unwrap();
    let root = agent.join("sessions");
    let make = |workspace: &std::path::Path, title: &str| {
        let identity = resolve_identity(workspace).unwrap();
        let scope = prepare_scope(&root, &identity).unwrap();
        let m = SessionManager::create(
            &identity.canonical_path,
            &scope,
            StorageConfig::files(agent.join("blobs")),
        );
        m.append_message(
            json::parse(r#"{"role":"user","content":"first question","timestamp":1}"#).unwrap(),
        )
        .unwrap();
        m.append_message(
            json::parse(
                r#"{"role":"assistant","content":[],"provider":"p","model":"m","timestamp":2}"#,
            )
            .unwrap(),
        )
        .unwrap();
        m.set_session_name(title, true).unwrap();
        m.close().unwrap();
        (m.session_id(), m.session_file().unwrap())
    };
    let (mine, mine_file) = make(&ws, "Mine");
    let (theirs, theirs_file) = make(&other_ws, "Theirs");
    crate::common::set_mtime(&mine_file, 0);
    crate::common::set_mtime(&theirs_file, 10);
    let a = agent.to_str().unwrap();

    let out = gjcfs(&["ls", "--agent-dir", a, "--cwd", ws.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let mut lines = text.lines();
    assert!(
        lines.next().unwrap().starts_with("SESSION "),
        "a header row: {text}"
    );
    let row = lines.next().unwrap();
    assert!(lines.next().is_none(), "{text}");
    assert!(
        row.starts_with(&mine) && row.contains("Mine") && row.contains("  2  "),
        "{text}"
    );
    let out = gjcfs(&[
        "ls",
        "--agent-dir",
        a,
        "--cwd",
        ws.to_str().unwrap(),
        "--json",
    ]);
    let row = json::parse(stdout(&out).trim()).unwrap();
    assert_eq!(row.as_object().unwrap().get_str("provenance"), Some("v2"));

    let out = gjcfs(&["ls", "--agent-dir", a, "--all", "--json"]);
    let rows: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| json::parse(l).unwrap())
        .collect();
    let ids: Vec<&str> = rows
        .iter()
        .map(|r| r.as_object().unwrap().get_str("id").unwrap())
        .collect();
    assert_eq!(ids, [theirs.as_str(), mine.as_str()]);
    assert_eq!(
        rows[1].as_object().unwrap().get_str("firstMessage"),
        Some("first question")
    );

    let empty = gjcfs(&[
        "ls",
        "--agent-dir",
        dir.path().join("none").to_str().unwrap(),
        "--all",
        "--allow-empty",
    ]);
    assert_eq!(empty.status.code(), Some(1), "nothing found");
    assert!(empty.stdout.is_empty());
    let bad = gjcfs(&[
        "ls",
        "--agent-dir",
        a,
        "--cwd",
        dir.path().join("missing").to_str().unwrap(),
    ]);
    assert_eq!(bad.status.code(), Some(1));
}

/// Whether `text` holds a character that a terminal acts on instead of showing (control
/// characters but the line ends, bidirectional controls).
fn has_terminal_control(text: &str) -> bool {
    text.chars().any(|c| {
        (c.is_control() && c != '\n')
            || matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    })
}

#[test]
fn tables_show_control_characters_from_files_as_escapes_and_json_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agent");
    let scope = agent.join("sessions/--w--");
    std::fs::create_dir_all(&scope).unwrap();
    let nasty = "\u{1b}[31m\r\n\u{202e}";
    let id = format!("id{nasty}1");
    let cwd = format!("/w{nasty}cwd");
    let header = json::to_compact(&json::parse(&format!(
        r#"{{"type":"session","version":5,"id":{},"timestamp":"2026-01-01T00:00:00.000Z","cwd":{},"title":{}}}"#,
        json::to_compact(&Value::string(id.as_str())),
        json::to_compact(&Value::string(cwd.as_str())),
        json::to_compact(&Value::string(format!("title{nasty}rest").as_str())),
    ))
    .unwrap());
    let text = SessionText::with_header(&header)
        .message("a", None, "user", "q")
        .entry(
            "message",
            "b",
            Some("a"),
            &format!(
                r#""message":{{"role":"assistant","content":[],"provider":"p","model":{},"usage":{{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"totalTokens":15,"cost":{{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}}}},"timestamp":2}}"#,
                json::to_compact(&Value::string(format!("model{nasty}").as_str()))
            ),
        )
        .text();
    std::fs::write(scope.join("s.jsonl"), text).unwrap();
    let a = agent.to_str().unwrap();
    let escaped = "\\u{1b}[31m\\r\\n\\u{202e}";

    let out = gjcfs(&["ls", "--all", "--agent-dir", a]);
    assert!(out.status.success(), "{}", stderr(&out));
    let table = stdout(&out);
    assert!(!has_terminal_control(&table), "{table:?}");
    assert_eq!(table.lines().count(), 2, "a header and one row: {table:?}");
    let table = table.lines().nth(1).unwrap().to_owned();
    assert!(table.starts_with(&format!("id{escaped}1  ")), "{table:?}");
    assert!(table.contains(&format!("/w{escaped}cwd")), "{table:?}");
    // The title's first line only, its controls and escape sequences dropped.
    assert!(table.trim_end().ends_with("title"), "{table:?}");

    let out = gjcfs(&["ls", "--all", "--json", "--agent-dir", a]);
    let row = json::parse(stdout(&out).trim()).unwrap();
    let row = row.as_object().unwrap();
    assert_eq!(row.get_str("id"), Some(id.as_str()));
    assert_eq!(row.get_str("cwd"), Some(cwd.as_str()));

    for by in ["project", "model"] {
        let out = gjcfs(&["usage", "--by", by, "--agent-dir", a]);
        assert!(out.status.success(), "{}", stderr(&out));
        let table = stdout(&out);
        assert!(!has_terminal_control(&table), "{by}: {table:?}");
        assert!(table.contains(escaped), "{by}: {table:?}");
    }

    let workspace = dir.path().join(format!("ws{nasty}"));
    std::fs::create_dir_all(&workspace).unwrap();
    let prompt = format!("prompt{nasty}end");
    let out = gjcfs(&[
        "history",
        "add",
        &prompt,
        "--cwd",
        workspace.to_str().unwrap(),
        "--agent-dir",
        a,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = gjcfs(&["history", "--agent-dir", a]);
    let table = stdout(&out);
    assert!(!has_terminal_control(&table), "{table:?}");
    assert!(
        table.contains(&format!("ws{escaped}  prompt{escaped}end")),
        "{table:?}"
    );
    let out = gjcfs(&["history", "--json", "--agent-dir", a]);
    let row = json::parse(stdout(&out).trim()).unwrap();
    assert_eq!(
        row.as_object().unwrap().get_str("prompt"),
        Some(prompt.as_str())
    );
}

#[test]
fn a_missing_agent_directory_is_an_error_unless_an_empty_store_is_asked_for() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("typo");
    let missing = missing.to_str().unwrap();
    for args in [
        vec!["ls", "--all", "--agent-dir", missing],
        vec!["usage", "--agent-dir", missing],
        vec!["usage", "--session-dir", missing],
    ] {
        let out = gjcfs(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("directory here") && err.contains("--allow-empty"),
            "{err}"
        );
    }
    let usage = gjcfs(&["usage", "--agent-dir", missing, "--allow-empty"]);
    assert!(usage.status.success(), "{}", stderr(&usage));
    // An empty store lists nothing: found nothing, status 1, and it says where it looked.
    let ls = gjcfs(&["ls", "--all", "--agent-dir", missing, "--allow-empty"]);
    assert_eq!(ls.status.code(), Some(1));
    assert!(ls.stdout.is_empty());
    assert!(
        stderr(&ls).contains("no sessions in the store"),
        "{}",
        stderr(&ls)
    );
    assert!(!tmp.path().join("typo").exists(), "nothing was created");
}

// --- Never lose or alter a session -------------------------------------------------------

fn gjcfs_within(args: &[&str], stdin: &str) -> Output {
    crate::common::gjcfs_with_stdin(args, stdin)
}

/// `gjcfs append FILE --agent-dir AGENT` with `stdin`.
fn append_with_agent(file: &std::path::Path, agent: &std::path::Path, stdin: &str) -> Output {
    let (file, agent) = (file.to_str().unwrap(), agent.to_str().unwrap());
    gjcfs_within(&["append", file, "--agent-dir", agent], stdin)
}

fn mkfifo(path: &std::path::Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// A fresh agent directory with one managed session of workspace `ws`; returns the
/// agent directory, the workspace and the transcript.
fn managed_agent(
    tmp: &std::path::Path,
) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let agent = tmp.join("agent");
    let ws = tmp.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let file = crate::common::generate_managed(&agent, &ws, 6);
    (agent, ws, file)
}

#[test]
fn nothing_blocks_on_a_fifo() {
    let tmp = tempfile::tempdir().unwrap();
    let (agent, ws, file) = managed_agent(tmp.path());
    let a = agent.to_str().unwrap();
    let fifo = tmp.path().join("fifo.jsonl");
    mkfifo(&fifo);
    let f = fifo.to_str().unwrap();
    for args in [
        vec!["entries", f],
        vec!["context", f],
        vec!["append", f, "--agent-dir", a],
    ] {
        let out = gjcfs_within(&args, "{\"role\":\"user\",\"content\":\"x\"}\n");
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            stderr(&out).contains("not a regular file"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    assert_eq!(gjcfs_within(&["show", f], "").status.code(), Some(1));
    // A FIFO among the sessions of a scope is skipped by listings.
    mkfifo(&file.with_file_name("x.jsonl"));
    for args in [
        vec!["ls", "--agent-dir", a, "--all"],
        vec!["ls", "--agent-dir", a, "--cwd", ws.to_str().unwrap()],
        vec!["usage", "--agent-dir", a],
    ] {
        let out = gjcfs_within(&args, "");
        assert!(out.status.code().is_some(), "{args:?}");
    }
    let out = gjcfs_within(&["ls", "--agent-dir", a, "--all", "--json"], "");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("s.jsonl"), "{}", stdout(&out));
}

#[test]
fn reading_commands_never_touch_a_backup_in_a_legacy_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let (agent, ws, file) = managed_agent(tmp.path());
    let a = agent.to_str().unwrap();
    let legacy = agent
        .join("sessions")
        .join(gjcfs::engine::store::legacy::encode_absolute(
            std::fs::canonicalize(&ws).unwrap().to_str().unwrap(),
        ));
    std::fs::create_dir_all(&legacy).unwrap();
    let session = legacy.join("old.jsonl");
    std::fs::copy(&file, &session).unwrap();
    // A backup whose primary is missing: the original's recovery would rename it back.
    let backup = legacy.join("gone.jsonl.12345.bak");
    std::fs::copy(&file, &backup).unwrap();
    let listing = |dir: &std::path::Path| {
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let meta = e.metadata().unwrap();
                (e.file_name(), meta.len(), meta.modified().unwrap())
            })
            .collect();
        names.sort();
        names
    };
    let before = listing(&legacy);
    let (s, b) = (session.to_str().unwrap(), backup.to_str().unwrap());
    for args in [
        vec!["ls", "--agent-dir", a, "--all"],
        vec!["ls", "--agent-dir", a, "--cwd", ws.to_str().unwrap()],
        vec!["show", s, "--agent-dir", a],
        vec!["show", "gone", "--agent-dir", a],
        vec!["usage", "--agent-dir", a],
        vec!["context", s, "--agent-dir", a],
        vec!["entries", s],
        vec!["entries", b],
    ] {
        gjcfs_within(&args, "");
        assert_eq!(listing(&legacy), before, "{args:?}");
    }
}

#[test]
fn append_refuses_what_is_not_a_session_and_leaves_it_byte_identical() {
    let tmp = tempfile::tempdir().unwrap();
    let agent = tmp.path().join("agent");
    for (name, content) in [
        ("damaged.jsonl", "{\"type\":\"sess\n{\"type\":\"message\",\"id\":\"a\",\"parentId\":null,\"timestamp\":\"t\",\"message\":{\"role\":\"user\",\"content\":\"q\"}}\n"),
        ("config.json", "{\"theme\":\"dark\",\"fontSize\":12}\n"),
        ("notes.txt", "remember the milk\n"),
        ("empty.jsonl", ""),
    ] {
        let path = tmp.path().join(name);
        std::fs::write(&path, content).unwrap();
        let out = append_with_agent(&path, &agent, "{\"role\":\"user\",\"content\":\"x\"}\n");
        assert_eq!(out.status.code(), Some(1), "{name}");
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{name}: {err}");
        assert!(err.contains("not a session file"), "{name}: {err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), content, "{name}");
    }
    assert!(!agent.exists(), "nothing created");
}

#[test]
fn append_to_a_legacy_session_writes_its_managed_copy() {
    let tmp = tempfile::tempdir().unwrap();
    let (agent, ws, file) = managed_agent(tmp.path());
    let legacy = agent
        .join("sessions")
        .join(gjcfs::engine::store::legacy::encode_absolute(
            std::fs::canonicalize(&ws).unwrap().to_str().unwrap(),
        ));
    std::fs::create_dir_all(&legacy).unwrap();
    let session = legacy.join("2026-01-01T00-00-00-000Z_old.jsonl");
    let text = std::fs::read_to_string(&file).unwrap().replacen(
        &format!(
            "\"id\":\"{}\"",
            gjcfs::engine::load_session(&file)
                .unwrap()
                .session
                .header()
                .id()
                .unwrap()
        ),
        "\"id\":\"old-session\"",
        1,
    );
    std::fs::write(&session, &text).unwrap();
    let mtime = std::fs::metadata(&session).unwrap().modified().unwrap();
    let out = append_with_agent(
        &session,
        &agent,
        "{\"role\":\"user\",\"content\":\"appended to the copy\"}\n",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let copy = file.with_file_name(session.file_name().unwrap());
    assert!(
        stderr(&out).contains(copy.to_str().unwrap()),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_to_string(&session).unwrap(), text);
    assert_eq!(
        std::fs::metadata(&session).unwrap().modified().unwrap(),
        mtime
    );
    assert!(std::fs::read_to_string(&copy)
        .unwrap()
        .contains("appended to the copy"));
    // A crash tore the copy's last line: the next write through the legacy path cuts it
    // off the copy, and the legacy file is still not touched.
    let whole = std::fs::read(&copy).unwrap();
    let mut torn = whole.clone();
    torn.extend_from_slice(br#"{"type":"mess"#);
    std::fs::write(&copy, &torn).unwrap();
    let line = "{\"role\":\"user\",\"content\":\"after the tear\"}\n";
    let out = append_with_agent(&session, &agent, line);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cut off the torn last line"),
        "{}",
        stderr(&out)
    );
    let now = std::fs::read(&copy).unwrap();
    assert_eq!(now[..whole.len()], whole[..]);
    assert!(!String::from_utf8_lossy(&now).contains("\"mess\n"));
    assert!(String::from_utf8_lossy(&now).contains("after the tear"));
    assert_eq!(std::fs::read_to_string(&session).unwrap(), text);
}

/// Gives `path` a POSIX ACL granting uid 4321 read access; false when the filesystem
/// cannot store one.
#[cfg(target_os = "linux")]
fn add_acl(path: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    // The kernel's xattr ACL format: version 2, then (tag, perm, id) entries.
    let mut acl = 2u32.to_le_bytes().to_vec();
    for (tag, perm, id) in [
        (0x01u16, 6u16, u32::MAX),
        (0x02, 4, 4321),
        (0x04, 0, u32::MAX),
        (0x10, 4, u32::MAX),
        (0x20, 0, u32::MAX),
    ] {
        acl.extend(tag.to_le_bytes());
        acl.extend(perm.to_le_bytes());
        acl.extend(id.to_le_bytes());
    }
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: valid NUL-terminated strings and a buffer of the given length.
    let rc = unsafe {
        libc::setxattr(
            c.as_ptr(),
            c"system.posix_acl_access".as_ptr(),
            acl.as_ptr().cast(),
            acl.len(),
            0,
        )
    };
    rc == 0
}

/// Gives `path` an extended ACL entry granting everyone read access; false when the
/// filesystem cannot store one.
#[cfg(target_os = "macos")]
fn add_acl(path: &std::path::Path) -> bool {
    std::process::Command::new("chmod")
        .args(["+a", "everyone allow read"])
        .arg(path)
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn append_cuts_the_torn_last_line_a_crash_left_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let (agent, _, file) = managed_agent(tmp.path());
    let whole = std::fs::read(&file).unwrap();
    let mut torn = whole.clone();
    torn.extend_from_slice(br#"{"type":"message","id":"cr"#);
    std::fs::write(&file, &torn).unwrap();
    let out = append_with_agent(&file, &agent, "{\"role\":\"user\",\"content\":\"AFTER\"}\n");
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let said = format!(
        "cut off the torn last line a crash left (26 bytes at byte {})",
        whole.len()
    );
    assert!(err.contains(&said), "{err}");
    let now = std::fs::read(&file).unwrap();
    assert_eq!(now[..whole.len()], whole[..]);
    assert!(std::str::from_utf8(&now[whole.len()..])
        .unwrap()
        .contains("AFTER"));
    assert!(gjcfs::engine::read::inspect::inspect_strict(&file).is_ok());
}

#[test]
fn append_refuses_a_managed_transcript_that_is_not_private() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let (agent, _, file) = managed_agent(tmp.path());
    let a = agent.to_str().unwrap();
    let line = "{\"role\":\"user\",\"content\":\"x\"}\n";
    let refused = |what: &str| {
        let before = std::fs::read(&file).unwrap();
        let out = gjcfs_within(&["append", file.to_str().unwrap(), "--agent-dir", a], line);
        assert_eq!(out.status.code(), Some(1), "{what}");
        assert_eq!(stderr(&out).lines().count(), 1, "{what}: {}", stderr(&out));
        assert_eq!(std::fs::read(&file).unwrap(), before, "{what}");
        stderr(&out)
    };
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(refused("0644").contains("mode 644"));
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    if root_for("the foreign-owner case (a chown)") {
        std::os::unix::fs::chown(&file, Some(4321), None).unwrap();
        assert!(refused("foreign owner").contains("owned by uid 4321"));
        std::os::unix::fs::chown(&file, Some(0), None).unwrap();
    }
    if add_acl(&file) {
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(refused("ACL").contains("ACL"));
    } else {
        cannot_run("the ACL case: the filesystem stores no ACL");
    }
}

#[test]
fn context_entries_and_append_take_a_session_id_or_a_unique_prefix() {
    let tmp = tempfile::tempdir().unwrap();
    let agent = tmp.path().join("agent");
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let file = crate::common::generate_managed(&agent, &ws, 6);
    let sid = crate::common::session_id(&file);
    let a = agent.to_str().unwrap();
    for target in [sid.as_str(), &sid[..10]] {
        let by_id = gjcfs(&["entries", target, "--agent-dir", a]);
        assert!(
            by_id.status.success(),
            "{}",
            String::from_utf8_lossy(&by_id.stderr)
        );
        let by_path = gjcfs(&["entries", file.to_str().unwrap()]);
        assert_eq!(by_id.stdout, by_path.stdout);
        let context = gjcfs(&["context", target, "--agent-dir", a]);
        assert!(
            context.status.success(),
            "{}",
            String::from_utf8_lossy(&context.stderr)
        );
    }
    let out = crate::common::gjcfs_with_stdin(
        &["append", &sid[..10], "--agent-dir", a],
        "{\"role\":\"user\",\"content\":\"BYPREFIX\"}\n",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::read_to_string(&file).unwrap().contains("BYPREFIX"));
    let unknown = gjcfs(&["entries", "ffffffff", "--agent-dir", a]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no session matches ffffffff"));
}

#[test]
fn every_command_that_reads_the_store_takes_the_same_store_flags() {
    for cmd in [
        "ls", "context", "entries", "append", "show", "usage", "search", "check", "mount",
    ] {
        let help = stdout(&gjcfs(&[cmd, "--help"]));
        for flag in ["--agent-dir <DIR>", "--session-dir <DIR>", "--allow-empty"] {
            assert!(help.contains(flag), "{cmd} lacks {flag}: {help}");
        }
    }
    // One directory of sessions, away from any agent directory: found by id there.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("loose");
    std::fs::create_dir(&dir).unwrap();
    let file = dir.join("s.jsonl");
    let made = gjcfs(&["generate", file.to_str().unwrap(), "--entries", "6"]);
    assert!(made.status.success(), "{}", stderr(&made));
    let sid = crate::common::session_id(&file);
    let (d, empty) = (dir.to_str().unwrap(), tmp.path().join("agent"));
    let agent = empty.to_str().unwrap();
    let store = ["--session-dir", d, "--agent-dir", agent, "--allow-empty"];
    fn with<'a>(args: &[&'a str], store: &[&'a str]) -> Vec<&'a str> {
        [args, store].concat()
    }
    for cmd in ["entries", "context"] {
        let out = gjcfs(&with(&[cmd, &sid[..8]], &store));
        assert!(out.status.success(), "{cmd}: {}", stderr(&out));
    }
    let listed = gjcfs(&with(&["ls", "--json"], &store));
    assert!(listed.status.success(), "{}", stderr(&listed));
    assert_eq!(stdout(&listed).lines().count(), 1);
    assert!(stdout(&listed).contains(&sid));
    let out = crate::common::gjcfs_with_stdin(
        &with(&["append", &sid[..8]], &store),
        "{\"role\":\"user\",\"content\":\"INLOOSEDIR\"}\n",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(std::fs::read_to_string(&file)
        .unwrap()
        .contains("INLOOSEDIR"));
    // Without the session directory the id is not found: the flag was what found it.
    let out = gjcfs(&["entries", &sid[..8], "--agent-dir", agent, "--allow-empty"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
}

#[test]
fn ls_and_usage_keep_what_they_read_between_runs_and_follow_every_change() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("sessions");
    std::fs::create_dir(&store).unwrap();
    let cache = dir.path().join("cache");
    let session = |n: u32| store.join(format!("s{n}.jsonl"));
    let header = |n: u32| {
        format!(
            r#"{{"type":"session","version":5,"id":"session-{n}","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/work"}}"#
        )
    };
    let write = |n: u32| {
        std::fs::write(
            session(n),
            SessionText::with_header(&header(n))
                .message("a", None, "user", &format!("question {n}"))
                .message("b", Some("a"), "assistant", "answer")
                .text(),
        )
        .unwrap();
    };
    (1..=3).for_each(write);
    let run = |cache: &std::path::Path, args: &[&str]| {
        let out = Command::new(gjcfs_bin())
            .env("XDG_CACHE_HOME", cache)
            .args(args)
            .args(["--session-dir", store.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };
    let ls = |cache: &std::path::Path| run(cache, &["ls", "--json"]);
    let usage = |cache: &std::path::Path| run(cache, &["usage", "--json"]);
    // What a run with nothing kept says, every time.
    let fresh = || {
        let empty = tempfile::tempdir().unwrap();
        (ls(empty.path()), usage(empty.path()))
    };
    let first = (ls(&cache), usage(&cache));
    assert_eq!(first, fresh());
    // The saved listing and usage: owner-only files in the store's cache directory.
    let kept = std::fs::read_dir(cache.join("gjcfs/search"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    for name in ["listing", "usage"] {
        let meta = std::fs::metadata(kept.join(name)).unwrap();
        let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions());
        assert_eq!(mode & 0o777, 0o600, "{name}");
    }
    assert_eq!(
        (ls(&cache), usage(&cache)),
        first,
        "taken from what was kept"
    );
    // An append with usage, a new session, a removed one: each shows at once.
    let reply = r#"{"role":"assistant","content":[],"provider":"p","model":"m","usage":{"input":1000,"output":7,"cacheRead":0,"cacheWrite":0,"cost":{"total":0.5}}}"#;
    let mut child = Command::new(gjcfs_bin())
        .args(["append", session(2).to_str().unwrap()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::io::Write::write_all(
        child.stdin.as_mut().unwrap(),
        format!("{reply}\n").as_bytes(),
    )
    .unwrap();
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    write(5);
    std::fs::remove_file(session(3)).unwrap();
    let after = (ls(&cache), usage(&cache));
    assert_ne!(after, first);
    assert_eq!(after, fresh());
    assert!(after.1.contains("1000"), "{}", after.1);
    // Damaged or foreign files kept there are not trusted.
    for name in ["listing", "usage"] {
        let bytes = std::fs::read(kept.join(name)).unwrap();
        std::fs::write(kept.join(name), &bytes[..bytes.len() / 2]).unwrap();
    }
    assert_eq!((ls(&cache), usage(&cache)), after);
    std::fs::write(kept.join("listing"), b"gjcfs\0svusage\0\0\0\x01\0\0\0").unwrap();
    assert_eq!(ls(&cache), after.0);
}
