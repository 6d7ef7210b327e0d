//! `gjcfs files PATH`, the real binary, against what the transcripts themselves say: each
//! file read as plain JSON lines, its `read`/`edit`/`write` tool calls and its summaries'
//! file lists gathered and resolved here, and the command's answer compared with them — on
//! a generated store (v5, every entry type, several workspaces) and on the two real
//! transcripts the agent recorded (v1, whose entry ids the migration derives: taken from
//! `gjcfs entries`, line for line).

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::{fixture, gjcfs_bin, gjcfs_stdout};
use gjcfs::corpus::{generate_file, Format, Limit, Options};
use gjcfs::engine::json::{self, Object, Value};

/// (entry id, action, source, path as written, path resolved).
type Touch = (String, String, String, String, String);

/// `path` resolved as the test reads the rule: joined to `cwd` unless absolute (or `~`),
/// then `.` and empty parts dropped and `..` folded into its parent.
fn resolved(path: &str, cwd: &str) -> String {
    let joined = if path.starts_with('/') || path.starts_with('~') {
        path.to_owned()
    } else {
        format!("{cwd}/{path}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    let body = parts.join("/");
    if joined.starts_with('/') {
        format!("/{body}")
    } else {
        body
    }
}

fn strings(value: Option<&Value>) -> Vec<String> {
    let items = value.and_then(Value::as_array).unwrap_or_default();
    items
        .iter()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

/// The touches of one record (its id given), read from its JSON.
fn record_touches(record: &Object, id: &str, cwd: &str, out: &mut BTreeSet<Touch>) {
    let mut push = |action: &str, source: &str, path: String| {
        if !path.is_empty() {
            let full = resolved(&path, cwd);
            out.insert((id.into(), action.into(), source.into(), path, full));
        }
    };
    match record.get_str("type") {
        Some("message") => {
            let message = record.get("message").and_then(Value::as_object).unwrap();
            if message.get_str("role") != Some("assistant") {
                return;
            }
            let blocks = message.get("content").and_then(Value::as_array);
            for block in blocks.unwrap_or_default() {
                let Some(block) = block.as_object() else {
                    continue;
                };
                let action = match (block.get_str("type"), block.get_str("name")) {
                    (Some("toolCall"), Some("read")) => "read",
                    (Some("toolCall"), Some("edit" | "write")) => "changed",
                    _ => continue,
                };
                let arguments = block.get("arguments").and_then(Value::as_object);
                if let Some(path) = arguments.and_then(|a| a.get_str("path")) {
                    push(action, block.get_str("name").unwrap(), path.to_owned());
                }
            }
        }
        Some(ty @ ("compaction" | "branch_summary")) => {
            let details = record.get("details").and_then(Value::as_object);
            for path in strings(details.and_then(|d| d.get("readFiles"))) {
                push("read", ty, path);
            }
            for path in strings(details.and_then(|d| d.get("modifiedFiles"))) {
                push("changed", ty, path);
            }
        }
        _ => {}
    }
}

/// Every touch of the session file at `path`, read as plain JSON lines; the ids of a
/// file without them (v1) from `gjcfs entries`, whose lines are the file's, one for one.
fn transcript_touches(path: &Path) -> BTreeSet<Touch> {
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<Object> = text
        .lines()
        .map(|l| json::parse(l).unwrap().as_object().unwrap().clone())
        .collect();
    let cwd = lines[0].get_str("cwd").unwrap().to_owned();
    let entries: Vec<Object> = gjcfs_stdout(&["entries".as_ref(), path.as_os_str()])
        .lines()
        .map(|l| json::parse(l).unwrap().as_object().unwrap().clone())
        .collect();
    assert_eq!(entries.len(), lines.len(), "{}", path.display());
    let mut touches = BTreeSet::new();
    for (record, entry) in lines.iter().zip(&entries).skip(1) {
        assert_eq!(record.get_str("timestamp"), entry.get_str("timestamp"));
        let id = record.get_str("id").or(entry.get_str("id")).unwrap();
        record_touches(record, id, &cwd, &mut touches);
    }
    touches
}

/// A store directory and an index directory beside it.
struct Store {
    dir: tempfile::TempDir,
}

impl Store {
    fn new() -> Store {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sessions")).unwrap();
        Store { dir }
    }

    fn sessions(&self) -> PathBuf {
        self.dir.path().join("sessions")
    }

    fn files(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.sessions())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        files
    }

    /// `gjcfs files ARGS… --session-dir … --index …`.
    fn gjcfs_files(&self, args: &[&str]) -> Output {
        Command::new(gjcfs_bin())
            .arg("files")
            .args(args)
            .arg("--session-dir")
            .arg(self.sessions())
            .arg("--index")
            .arg(self.dir.path().join("index"))
            .output()
            .unwrap()
    }

    /// The JSON objects of `gjcfs files PATH --json` over every workspace, in order.
    fn answer(&self, path: &str) -> Vec<Object> {
        let out = self.gjcfs_files(&[path, "--all", "--json", "--limit", "100000"]);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| json::parse(l).unwrap().as_object().unwrap().clone())
            .collect()
    }
}

fn touch_of(o: &Object) -> Touch {
    let field = |k: &str| o.get_str(k).unwrap().to_owned();
    (
        field("entry"),
        field("action"),
        field("source"),
        field("written"),
        field("resolved"),
    )
}

/// The answer as a set, checked newest first on the way.
fn as_set(answer: &[Object]) -> BTreeSet<Touch> {
    let times: Vec<&str> = answer
        .iter()
        .map(|o| o.get_str("timestamp").unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "not newest first");
    answer.iter().map(touch_of).collect()
}

/// The expected touches whose resolved path is `path` or lies under it.
fn under(all: &BTreeSet<Touch>, path: &str) -> BTreeSet<Touch> {
    let dir = format!("{}/", path.trim_end_matches('/'));
    all.iter()
        .filter(|t| t.4 == path || t.4.starts_with(&dir))
        .cloned()
        .collect()
}

/// The resolved path touched most often.
fn most_touched(all: &BTreeSet<Touch>) -> String {
    let mut counts = std::collections::BTreeMap::<&str, usize>::new();
    for t in all {
        *counts.entry(&t.4).or_default() += 1;
    }
    let (path, _) = counts.into_iter().max_by_key(|(_, n)| *n).unwrap();
    path.to_owned()
}

#[test]
fn files_answers_what_the_tool_calls_of_a_generated_store_say() {
    let store = Store::new();
    for seed in 1..=4 {
        let options = Options {
            seed,
            limit: Limit::Entries(300),
            format: Format::V5,
            cwd: None,
        };
        generate_file(&store.sessions().join(format!("s{seed}.jsonl")), &options).unwrap();
    }
    let mut all = BTreeSet::new();
    for file in store.files() {
        all.extend(transcript_touches(&file));
    }
    assert!(all.iter().any(|t| t.2 == "compaction"), "a summary's lists");
    assert!(all.iter().any(|t| t.1 == "changed") && all.iter().any(|t| t.1 == "read"));
    assert_eq!(as_set(&store.answer("/")), all);
    let path = most_touched(&all);
    let expected = under(&all, &path);
    assert!(expected.len() > 1);
    assert_eq!(as_set(&store.answer(&path)), expected);
    // A directory: its files, not its namesakes.
    let dir = Path::new(&path)
        .parent()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(as_set(&store.answer(&dir)), under(&all, &dir));
    // One workspace: the sessions whose header has it.
    let cwd = store.answer(&path)[0].get_str("cwd").unwrap().to_owned();
    let out = store.gjcfs_files(&[&path, "--cwd", &cwd, "--json", "--limit", "100000"]);
    let lines = String::from_utf8(out.stdout).unwrap();
    assert!(lines
        .lines()
        .all(|l| l.contains(&format!("\"cwd\":\"{cwd}\""))));
    // Text lines within the limit, and what was left out said on stderr.
    let out = store.gjcfs_files(&[&path, "--all", "--limit", "1"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    let newest = &store.answer(&path)[0];
    let fields: Vec<&str> = text.trim_end().split("  ").collect();
    assert_eq!(fields[0], &newest.get_str("session").unwrap()[..8]);
    assert!(fields[3].starts_with(newest.get_str("action").unwrap()));
    assert_eq!(
        fields[4..],
        [
            newest.get_str("source").unwrap(),
            newest.get_str("entry").unwrap(),
            &path
        ]
    );
    let more = expected.len() - 1;
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("{more} more")));
    // Nothing found: exit status 1, said on stderr.
    let out = store.gjcfs_files(&["/no/such/file", "--all"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no session of the store"));
}

#[test]
fn files_takes_in_what_was_appended_and_resolves_relative_paths_against_the_cwd() {
    let store = Store::new();
    let file = store.sessions().join("s.jsonl");
    let options = Options {
        seed: 9,
        limit: Limit::Entries(200),
        format: Format::V5,
        cwd: None,
    };
    generate_file(&file, &options).unwrap();
    let before = store.answer("/");
    let session = gjcfs::engine::load_session(&file).unwrap().session;
    let (leaf, cwd) = (session.leaf_id().unwrap(), session.header().cwd().unwrap());
    let line = format!(
        r#"{{"type":"message","id":"ffff0001","parentId":"{leaf}","timestamp":"2099-01-01T00:00:00.000Z","message":{{"role":"assistant","content":[{{"type":"toolCall","id":"t","name":"write","arguments":{{"path":"../elsewhere/./new.txt","content":"x"}}}}]}}}}"#
    );
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    writeln!(f, "{line}").unwrap();
    drop(f);
    let after = store.answer("/");
    assert_eq!(after.len(), before.len() + 1);
    let new = resolved("../elsewhere/new.txt", cwd);
    assert_eq!(
        touch_of(&after[0]),
        (
            "ffff0001".into(),
            "changed".into(),
            "write".into(),
            "../elsewhere/./new.txt".into(),
            new.clone()
        )
    );
    assert_eq!(
        after[0].get("onLeafPath").and_then(Value::as_bool),
        Some(true)
    );
    // Asked relative to the current directory.
    let out = Command::new(gjcfs_bin())
        .current_dir("/")
        .args(["files", new.trim_start_matches('/'), "--all", "--json"])
        .arg("--session-dir")
        .arg(store.sessions())
        .arg("--index")
        .arg(store.dir.path().join("index"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"entry\":\"ffff0001\""));
}

#[test]
fn files_answers_what_the_real_transcripts_say() {
    let store = Store::new();
    for name in ["before-compaction.jsonl", "large-session.jsonl"] {
        std::fs::copy(
            fixture(&format!("real/{name}")),
            store.sessions().join(name),
        )
        .unwrap();
    }
    let mut all = BTreeSet::new();
    for file in store.files() {
        all.extend(transcript_touches(&file));
    }
    // Both sessions ran in one workspace; one wrote absolute paths, the other relative ones.
    let ws = "/Users/badlogic/workspaces/pi-mono";
    assert!(all.len() > 400, "{}", all.len());
    let absolute: BTreeSet<Touch> = all
        .iter()
        .filter(|t| t.4.starts_with('/'))
        .cloned()
        .collect();
    assert_eq!(as_set(&store.answer("/")), absolute);
    for path in [
        "packages/coding-agent/src/core/agent-session.ts",
        "packages/coding-agent/src/theme/theme.ts",
        "packages/coding-agent/src/tui",
        "packages/tui",
    ] {
        let path = format!("{ws}/{path}");
        let expected = under(&all, &path);
        assert!(!expected.is_empty(), "{path}");
        assert_eq!(as_set(&store.answer(&path)), expected, "{path}");
    }
    // A path the agent wrote with `~`, asked for as written.
    let home = "~/.pi/agent/themes/nord.json";
    assert_eq!(as_set(&store.answer(home)), under(&all, home));
    assert!(!under(&all, home).is_empty());
}
