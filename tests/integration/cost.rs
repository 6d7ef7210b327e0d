//! Cost reports through the command line, against totals computed by hand: `gjcfs usage`
//! with every grouping, a time range, a time zone and a breakdown by model, and each
//! session's own usage in `gjcfs ls`. Every run is given its TZ.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use gjcfs::engine::json::{self, Value};

use crate::common::{gjcfs_bin, gjcfs_stdout};

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

/// Three sessions: `parent` (in /w1: a1 on Monday 2026-01-05, a2 on Saturday 2026-01-31 at
/// 23:00 UTC, already Sunday 2026-02-01 in Berlin), its fork `fork` (copies of a1 and a2,
/// and a3 on Monday 2026-02-02) and `other` (in /w2: b1 at midnight UTC starting Sunday
/// 2026-03-01, still Saturday 2026-02-28 in New York; its title is longer than a table's
/// column, and has a second line and an escape sequence).
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
        &format!(
            r#"{{"type":"session","version":5,"id":"other","timestamp":"2026-01-10T00:00:00.000Z","cwd":"/w2","title":{}}}"#,
            json::to_compact(&Value::string(OTHER_TITLE))
        ),
        &[
            question("q9", None),
            reply("b1", "q9", "2026-03-01T00:00:00.000Z", "m2", 800, 8.0),
        ],
    );
    tmp
}

/// The title of `other`: its first line, without the escape, is what a listing shows.
const OTHER_TITLE: &str = "The \u{1b}[1musage report\u{1b}[0m by day, with a title longer than \
     any table gives it\nand a second line";

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

/// `gjcfs usage --agent-dir AGENT ARGS…` run with the time zone `tz` as TZ.
fn usage_run(tz: &str, agent: &str, args: &[&str]) -> Output {
    Command::new(gjcfs_bin())
        .args(["usage", "--agent-dir", agent])
        .args(args)
        .env("TZ", tz)
        .output()
        .unwrap()
}

/// The standard output of a `usage_run` that must succeed.
fn usage_out(tz: &str, agent: &str, args: &[&str]) -> String {
    let out = usage_run(tz, agent, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {stderr}");
    String::from_utf8(out.stdout).unwrap()
}

/// `usage --json` in UTC.
fn usage_json(agent: &str, extra: &[&str]) -> Value {
    usage_json_in("UTC", agent, extra)
}

fn usage_json_in(tz: &str, agent: &str, extra: &[&str]) -> Value {
    let mut args = vec!["--json"];
    args.extend_from_slice(extra);
    json::parse(usage_out(tz, agent, &args).trim()).unwrap()
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
    let table = usage_out("UTC", &a, &["--by", "session"]);
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

    let table = usage_out("UTC", &a, &["--since", "2026-02-01"]);
    assert_eq!(
        table.lines().next(),
        Some(
            "2 sessions, 2026-02-02 – 2026-03-01, UTC: 2 usage records counted, 0 copies in \
             forks not counted, 0 invalid, 4 outside the range; 3 sessions in the store"
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
        let out = usage_run("UTC", &a, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(why),
            "{args:?}: {}",
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

#[test]
fn usage_counts_days_and_dates_in_the_time_zone() {
    let tmp = store();
    let a = agent(&tmp);
    let by_month = |tz: &str, extra: &[&str]| {
        let mut args = vec!["--by", "month"];
        args.extend_from_slice(extra);
        let report = usage_json_in(tz, &a, &args);
        (
            member(&report, "timezone").as_str().unwrap().to_owned(),
            groups(&report, "byMonth"),
        )
    };
    // a2, at 23:00 UTC on January 31st, is on February 1st in Berlin (TZ, as a machine's
    // own zone), and b1, at midnight UTC on March 1st, on February 28th in New York.
    assert_eq!(
        by_month("UTC", &[]),
        (
            "UTC".to_owned(),
            expected(&[
                ("2026-01", 2.0, 300.0, 3.0),
                ("2026-02", 1.0, 400.0, 4.0),
                ("2026-03", 1.0, 800.0, 8.0),
            ])
        )
    );
    assert_eq!(
        by_month("Europe/Berlin", &[]),
        (
            "Europe/Berlin".to_owned(),
            expected(&[
                ("2026-01", 1.0, 100.0, 1.0),
                ("2026-02", 2.0, 600.0, 6.0),
                ("2026-03", 1.0, 800.0, 8.0),
            ])
        )
    );
    // --timezone wins over TZ.
    assert_eq!(
        by_month("Europe/Berlin", &["--timezone", "America/New_York"]),
        (
            "America/New_York".to_owned(),
            expected(&[("2026-01", 2.0, 300.0, 3.0), ("2026-02", 2.0, 1200.0, 12.0)])
        )
    );
    let days = usage_json_in("Europe/Berlin", &a, &["--by", "day"]);
    assert_eq!(
        groups(&days, "byDay"),
        expected(&[
            ("2026-01-05", 1.0, 100.0, 1.0),
            ("2026-02-01", 1.0, 200.0, 2.0),
            ("2026-02-02", 1.0, 400.0, 4.0),
            ("2026-03-01", 1.0, 800.0, 8.0),
        ])
    );

    // A date is the start of that day in the zone: Berlin's February starts at 23:00 UTC,
    // so a2 is in it; New York's March starts at 05:00 UTC, so b1 is before it.
    let range = |tz: &str| {
        let report = usage_json_in(
            "UTC",
            &a,
            &[
                "--timezone",
                tz,
                "--since",
                "20260201",
                "--until",
                "2026-03-01",
            ],
        );
        let dates =
            ["firstDay", "lastDay"].map(|k| member(&report, k).as_str().unwrap().to_owned());
        (
            number(&report, "sessionsInRange"),
            number(&report, "records"),
            number(member(&report, "totals"), "cost"),
            dates,
        )
    };
    assert_eq!(
        range("UTC"),
        (
            1.0,
            1.0,
            4.0,
            ["2026-02-02", "2026-02-02"].map(str::to_owned)
        )
    );
    assert_eq!(
        range("Europe/Berlin"),
        (
            2.0,
            2.0,
            6.0,
            ["2026-02-01", "2026-02-02"].map(str::to_owned)
        )
    );
    assert_eq!(
        range("America/New_York"),
        (
            2.0,
            2.0,
            12.0,
            ["2026-02-02", "2026-02-28"].map(str::to_owned)
        )
    );

    // The table names the zone in its first line and above the days.
    let table = usage_out(
        "Europe/Berlin",
        &a,
        &["--by", "day", "--since", "2026-02-01"],
    );
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(
        lines[0],
        "3 sessions, 2026-02-01 – 2026-03-01, Europe/Berlin: 3 usage records counted, 1 copies \
         in forks not counted, 0 invalid, 2 outside the range; 3 sessions in the store",
        "{table}"
    );
    assert!(
        lines[2].starts_with("DAY (Europe/Berlin)  RECORDS"),
        "{table}"
    );
    assert!(lines[3].starts_with("2026-02-01 "), "{table}");

    // An unknown zone is a usage error; a TZ that names none leaves UTC, with a warning.
    let out = usage_run("UTC", &a, &["--timezone", "Mars/Olympus_Mons"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown time zone \"Mars/Olympus_Mons\""),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
    let out = usage_run("Mars/Olympus_Mons", &a, &["--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("TZ=\"Mars/Olympus_Mons\" is not a time zone: UTC is used"),
        "{stderr}"
    );
    let report = json::parse(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    assert_eq!(member(&report, "timezone").as_str(), Some("UTC"));
}

/// Each model of a group's breakdown: (model, records, input, cost).
fn models(group: &Value) -> Vec<(String, f64, f64, f64)> {
    member(group, "models")
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                member(m, "model").as_str().unwrap().to_owned(),
                number(m, "records"),
                number(m, "input"),
                number(m, "cost"),
            )
        })
        .collect()
}

#[test]
fn usage_breakdown_splits_every_row_by_model() {
    let tmp = store();
    let a = agent(&tmp);
    let keys = [
        ("session", "bySession"),
        ("day", "byDay"),
        ("week", "byWeek"),
        ("month", "byMonth"),
        ("project", "byProject"),
    ];
    for (by, key) in keys {
        let report = usage_json(&a, &["--by", by, "--breakdown"]);
        for (name, group) in member(&report, key).as_object().unwrap().iter() {
            let models = models(group);
            let sum = |f: fn(&(String, f64, f64, f64)) -> f64| models.iter().map(f).sum::<f64>();
            let got = (sum(|m| m.1), sum(|m| m.2), sum(|m| m.3));
            let row = (
                number(group, "records"),
                number(group, "input"),
                number(group, "cost"),
            );
            assert_eq!(got, row, "{by} {name:?}");
        }
        // The dearest model first: m2 (a2 and b1) before m1 (a1 and a3).
        assert_eq!(
            models(member(&report, "totals")),
            expected(&[
                ("anthropic/m2", 2.0, 1000.0, 10.0),
                ("anthropic/m1", 2.0, 500.0, 5.0)
            ]),
            "{by}"
        );
    }
    let report = usage_json(&a, &["--by", "session", "--breakdown"]);
    assert_eq!(
        models(member(member(&report, "bySession"), "parent")),
        expected(&[
            ("anthropic/m2", 1.0, 200.0, 2.0),
            ("anthropic/m1", 1.0, 100.0, 1.0)
        ])
    );
    let by_model = usage_json(&a, &["--by", "model", "--breakdown"]);
    for (_, group) in member(&by_model, "byModel").as_object().unwrap().iter() {
        assert!(group.as_object().unwrap().get("models").is_none());
    }
    assert!(member(&usage_json(&a, &[]), "totals")
        .as_object()
        .unwrap()
        .get("models")
        .is_none());

    // The table: an indented row per model under each row, the total's too.
    let table = usage_out("UTC", &a, &["--by", "month", "--breakdown"]);
    let rows: Vec<Vec<&str>> = table
        .lines()
        .skip(3)
        .map(|l| l.split_whitespace().collect())
        .collect();
    let expected_rows: [&[&str]; 9] = [
        &["2026-01", "2", "300", "30", "0", "0", "0", "$3.0000"],
        &["anthropic/m2", "1", "200", "20", "0", "0", "0", "$2.0000"],
        &["anthropic/m1", "1", "100", "10", "0", "0", "0", "$1.0000"],
        &["2026-02", "1", "400", "40", "0", "0", "0", "$4.0000"],
        &["anthropic/m1", "1", "400", "40", "0", "0", "0", "$4.0000"],
        &["2026-03", "1", "800", "80", "0", "0", "0", "$8.0000"],
        &["anthropic/m2", "1", "800", "80", "0", "0", "0", "$8.0000"],
        &["total", "4", "1,500", "150", "0", "0", "0", "$15.0000"],
        &[
            "anthropic/m2",
            "2",
            "1,000",
            "100",
            "0",
            "0",
            "0",
            "$10.0000",
        ],
    ];
    assert_eq!(rows[..9], expected_rows, "{table}");
    assert_eq!(rows.len(), 10, "{table}");
    let model_row = table.lines().find(|l| l.contains("anthropic/m1")).unwrap();
    assert!(model_row.starts_with("  anthropic/m1"), "{table}");
}

#[test]
fn usage_by_session_shows_the_title_ls_shows() {
    let tmp = store();
    let a = agent(&tmp);
    let listing = gjcfs_stdout(&["ls", "--all", "--agent-dir", &a]);
    let table = usage_out("UTC", &a, &["--by", "session"]);
    assert!(
        table.lines().nth(2).unwrap().ends_with("COST  TITLE"),
        "{table}"
    );
    // The last cell of a row: a title has no run of two spaces (whitespace is one space).
    let title = |text: &str, id: &str| -> String {
        let row = text
            .lines()
            .find(|l| l.starts_with(&format!("{id} ")))
            .unwrap();
        row.rsplit("  ").next().unwrap().to_owned()
    };
    for id in ["fork", "other", "parent"] {
        assert_eq!(
            title(&table, id),
            title(&listing, id),
            "{id}: {table}\n{listing}"
        );
    }
    // Its title's first line, the escapes dropped and cut as ls cuts it; else the first
    // prompt.
    let other = title(&table, "other");
    assert!(
        other.starts_with("The usage report by day, with a title"),
        "{other}"
    );
    assert!(
        other.ends_with('…') && other.chars().count() == 60,
        "{other}"
    );
    assert_eq!(title(&table, "parent"), "question");
    assert!(!table.contains('\u{1b}'), "{table:?}");

    let report = usage_json(&a, &["--by", "session"]);
    let sessions = member(&report, "bySession");
    assert_eq!(
        member(member(sessions, "parent"), "title").as_str(),
        Some("question")
    );
    assert_eq!(
        member(member(sessions, "other"), "title").as_str(),
        Some("The usage report by day, with a title longer than any table gives it")
    );
}
