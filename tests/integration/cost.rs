//! Cost reports through the command line, against totals computed by hand: `gjcfs usage`
//! with every grouping and a time range, and each session's own usage in `gjcfs ls`.

use std::fs;
use std::path::Path;

use gjcfs::engine::json::{self, Value};

use crate::common::gjcfs_stdout;

/// A reply with usage: `input` tokens in, a tenth of that out, and `cost` dollars.
fn reply(id: &str, parent: &str, time: &str, model: &str, input: u32, cost: f64) -> String {
    format!(
        r#"{{"type":"message","id":"{id}","parentId":"{parent}","timestamp":"{time}","message":{{"role":"assistant","content":[{{"type":"text","text":"answer"}}],"provider":"anthropic","model":"{model}","usage":{{"input":{input},"output":{},"cacheRead":0,"cacheWrite":0,"totalTokens":{},"cost":{{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":{cost}}}}},"stopReason":"stop","timestamp":1}}}}"#,
        input / 10,
        input + input / 10
    )
}

fn session(dir: &Path, name: &str, header: &str, lines: &[String]) {
    fs::create_dir_all(dir).unwrap();
    let mut text = format!("{header}\n");
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    fs::write(dir.join(name), text).unwrap();
}

/// Three sessions: `parent` (in /w1: a1 on Monday 2026-01-05, a2 on Saturday 2026-01-31),
/// its fork `fork` (copies of a1 and a2, and a3 on Monday 2026-02-02) and `other` (in /w2:
/// b1 at midnight starting Sunday 2026-03-01).
fn store() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let sessions = tmp.path().join("agent/sessions");
    let question = |id: &str, parent: Option<&str>| {
        let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
        format!(
            r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-05T09:00:00.000Z","message":{{"role":"user","content":"question","timestamp":1}}}}"#
        )
    };
    let a1 = reply("a1", "q1", "2026-01-05T10:00:00.000Z", "m1", 100, 1.0);
    let a2 = reply("a2", "a1", "2026-01-31T23:00:00.000Z", "m2", 200, 2.0);
    session(
        &sessions.join("--w1--"),
        "2026-01-01T00-00-00-000Z_parent.jsonl",
        r#"{"type":"session","version":5,"id":"parent","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w1"}"#,
        &[question("q1", None), a1.clone(), a2.clone()],
    );
    session(
        &sessions.join("--w1--"),
        "2026-02-01T00-00-00-000Z_fork.jsonl",
        r#"{"type":"session","version":5,"id":"fork","timestamp":"2026-02-01T00:00:00.000Z","cwd":"/w1","parentSession":"parent"}"#,
        &[
            question("q1", None),
            a1,
            a2,
            reply("a3", "a2", "2026-02-02T08:00:00.000Z", "m1", 400, 4.0),
        ],
    );
    session(
        &sessions.join("--w2--"),
        "2026-01-10T00-00-00-000Z_other.jsonl",
        r#"{"type":"session","version":5,"id":"other","timestamp":"2026-01-10T00:00:00.000Z","cwd":"/w2"}"#,
        &[
            question("q9", None),
            reply("b1", "q9", "2026-03-01T00:00:00.000Z", "m2", 800, 8.0),
        ],
    );
    tmp
}

fn agent(tmp: &tempfile::TempDir) -> String {
    tmp.path().join("agent").to_str().unwrap().to_owned()
}

fn member<'a>(value: &'a Value, key: &str) -> &'a Value {
    value
        .as_object()
        .unwrap()
        .get(key)
        .unwrap_or_else(|| panic!("no {key:?} in {}", json::to_compact(value)))
}

fn number(value: &Value, key: &str) -> f64 {
    member(value, key).as_f64().unwrap()
}

/// Each group's (key, records, input, cost).
fn groups(report: &Value, key: &str) -> Vec<(String, f64, f64, f64)> {
    member(report, key)
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                number(v, "records"),
                number(v, "input"),
                number(v, "cost"),
            )
        })
        .collect()
}

/// A group as [`groups`] gives it: (key, records, input, cost).
type Group<'a> = (&'a str, f64, f64, f64);

fn expected(rows: &[Group]) -> Vec<(String, f64, f64, f64)> {
    rows.iter()
        .map(|&(k, n, i, c)| (k.to_owned(), n, i, c))
        .collect()
}

fn usage_json(agent: &str, extra: &[&str]) -> Value {
    let mut args = vec!["usage", "--json", "--agent-dir", agent];
    args.extend_from_slice(extra);
    json::parse(gjcfs_stdout(&args).trim()).unwrap()
}

#[test]
fn usage_groups_every_way_with_each_reply_counted_once() {
    let tmp = store();
    let a = agent(&tmp);
    // a1, a2, a3, b1: the fork's copies of a1 and a2 count in the parent only.
    let cases: [(&str, &str, Vec<Group>); 6] = [
        (
            "session",
            "bySession",
            vec![
                ("fork", 1.0, 400.0, 4.0),
                ("other", 1.0, 800.0, 8.0),
                ("parent", 2.0, 300.0, 3.0),
            ],
        ),
        (
            "day",
            "byDay",
            vec![
                ("2026-01-05", 1.0, 100.0, 1.0),
                ("2026-01-31", 1.0, 200.0, 2.0),
                ("2026-02-02", 1.0, 400.0, 4.0),
                ("2026-03-01", 1.0, 800.0, 8.0),
            ],
        ),
        (
            // ISO weeks from Monday: 01-31 closes W05, 02-02 opens W06, 03-01 closes W09.
            "week",
            "byWeek",
            vec![
                ("2026-W02", 1.0, 100.0, 1.0),
                ("2026-W05", 1.0, 200.0, 2.0),
                ("2026-W06", 1.0, 400.0, 4.0),
                ("2026-W09", 1.0, 800.0, 8.0),
            ],
        ),
        (
            "month",
            "byMonth",
            vec![
                ("2026-01", 2.0, 300.0, 3.0),
                ("2026-02", 1.0, 400.0, 4.0),
                ("2026-03", 1.0, 800.0, 8.0),
            ],
        ),
        (
            "project",
            "byProject",
            vec![("/w1", 3.0, 700.0, 7.0), ("/w2", 1.0, 800.0, 8.0)],
        ),
        (
            "model",
            "byModel",
            vec![
                ("anthropic/m1", 2.0, 500.0, 5.0),
                ("anthropic/m2", 2.0, 1000.0, 10.0),
            ],
        ),
    ];
    for (by, key, rows) in cases {
        let report = usage_json(&a, &["--by", by]);
        assert_eq!(number(&report, "sessions"), 3.0, "{by}");
        assert_eq!(number(&report, "records"), 4.0, "{by}");
        assert_eq!(number(&report, "copies"), 2.0, "{by}");
        assert_eq!(number(&report, "outsideRange"), 0.0, "{by}");
        let totals = member(&report, "totals");
        assert_eq!(
            (number(totals, "input"), number(totals, "cost")),
            (1500.0, 15.0)
        );
        assert_eq!(groups(&report, key), expected(&rows), "{by}");
    }
    let by_session = usage_json(&a, &["--by", "session"]);
    let parent = member(member(&by_session, "bySession"), "parent");
    assert_eq!(member(parent, "cwd").as_str(), Some("/w1"));

    // The table: a row per session with its project, then the total.
    let table = gjcfs_stdout(&["usage", "--by", "session", "--agent-dir", &a]);
    let rows: Vec<Vec<&str>> = table
        .lines()
        .skip(2)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0][..3], ["SESSION", "PROJECT", "RECORDS"], "{table}");
    assert_eq!(rows[1][..3], ["fork", "/w1", "1"], "{table}");
    assert_eq!(rows[3][..3], ["parent", "/w1", "2"], "{table}");
    assert_eq!(rows[4][0], "total", "{table}");
    assert_eq!(rows[4].last(), Some(&"$15.0000"), "{table}");
}

#[test]
fn usage_counts_only_the_replies_in_the_range() {
    let tmp = store();
    let a = agent(&tmp);
    // a2 (late on 01-31) and a3 are in; a1 before, b1 at --until exactly, out.
    let report = usage_json(
        &a,
        &[
            "--since",
            "2026-01-31",
            "--until",
            "2026-03-01",
            "--by",
            "session",
        ],
    );
    assert_eq!(number(&report, "records"), 2.0);
    assert_eq!(number(&report, "copies"), 1.0, "the fork's a2");
    assert_eq!(number(&report, "outsideRange"), 3.0, "a1 twice, b1");
    assert_eq!(number(member(&report, "totals"), "cost"), 6.0);
    assert_eq!(
        groups(&report, "bySession"),
        expected(&[("fork", 1.0, 400.0, 4.0), ("parent", 1.0, 200.0, 2.0)])
    );
    // A time within a day.
    let report = usage_json(&a, &["--since", "2026-01-31T23:30:00Z"]);
    assert_eq!(number(member(&report, "totals"), "cost"), 12.0, "a3 and b1");

    let table = gjcfs_stdout(&["usage", "--since", "2026-02-01", "--agent-dir", &a]);
    assert!(
        table.starts_with(
            "3 sessions, 2 usage records counted, 0 copies in forks not counted, 0 invalid, \
             4 outside the range"
        ),
        "{table}"
    );

    for (args, why) in [
        (
            vec!["--since", "2026-02-01", "--until", "2026-02-01"],
            "is not before",
        ),
        (vec!["--since", "last week"], "invalid date"),
    ] {
        let mut all = vec!["usage", "--agent-dir", a.as_str()];
        all.extend(args);
        let out = std::process::Command::new(crate::common::gjcfs_bin())
            .args(&all)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{all:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(why),
            "{all:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn ls_gives_each_session_its_own_tokens_and_cost() {
    let tmp = store();
    let a = agent(&tmp);
    let listing = gjcfs_stdout(&["ls", "--all", "--json", "--agent-dir", &a]);
    let mut own: Vec<(String, f64, f64, f64)> = listing
        .lines()
        .map(|line| {
            let row = json::parse(line).unwrap();
            let usage = member(&row, "usage");
            (
                member(&row, "id").as_str().unwrap().to_owned(),
                number(usage, "records"),
                number(usage, "output"),
                number(usage, "cost"),
            )
        })
        .collect();
    own.sort_by(|x, y| x.0.cmp(&y.0));
    // What each session records, a fork's copies included (unlike `usage --by session`).
    assert_eq!(
        own,
        expected(&[
            ("fork", 3.0, 70.0, 7.0),
            ("other", 1.0, 80.0, 8.0),
            ("parent", 2.0, 30.0, 3.0),
        ])
    );

    let table = gjcfs_stdout(&["ls", "--all", "--long", "--agent-dir", &a]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["SESSION", "MODIFIED", "(UTC)", "MSGS", "TOKENS", "COST", "CWD", "TITLE"]
    );
    let fork = table.lines().find(|l| l.starts_with("fork ")).unwrap();
    let cells: Vec<&str> = fork.split_whitespace().collect();
    // 100 + 10 + 200 + 20 + 400 + 40 tokens.
    assert_eq!(cells[3..7], ["4", "770", "$7.0000", "/w1"], "{fork}");
    // Without --long, no usage is read or shown.
    let short = gjcfs_stdout(&["ls", "--all", "--agent-dir", &a]);
    assert!(!short.contains("COST") && !short.contains('$'), "{short}");
}
