//! The views through a real mount: `context.md`, `tree.txt`, `usage.json` and `labels/`
//! of each session, and the store's `usage.json`, read with `cat`, `ls` and `readlink` and
//! compared with the golden files of `tests/golden/` and with the CLI's output.

use std::fs;
use std::io::Write;
use std::path::Path;

use std::time::Duration;

use crate::common::mount::{each_mode, ok, p, run, within, Mount};
use crate::common::{fixture, gjcfs_bin, renumbered};
use gjcfs::engine::json::{self, Value};
use gjcfs::engine::load_session;
use gjcfs::vfs::label_file_name;

fn golden_text(name: &str) -> String {
    fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden")
            .join(name),
    )
    .unwrap()
}

/// Writes the session of fixture `name` into `dir` as `<session id>.jsonl` (a v1 transcript
/// with its drawn ids renumbered, as the goldens hold them) and returns the id and path.
fn store_fixture(dir: &Path, name: &str, renumber: bool) -> (String, std::path::PathBuf) {
    let session = load_session(&fixture(name)).unwrap().session;
    let session = if renumber {
        renumbered(session)
    } else {
        session
    };
    let sid = session.header().id().unwrap().to_owned();
    let mut text = String::new();
    for record in session.records() {
        text.push_str(&record.to_line());
        text.push('\n');
    }
    let path = dir.join(format!("{sid}.jsonl"));
    fs::write(&path, text).unwrap();
    (sid, path)
}

/// `cat` of a view through the mount, checked against `stat`'s size.
fn cat_view(dir: &Path, name: &str) -> String {
    let path = dir.join(name);
    let text = ok("cat", &[p(&path)]);
    let size: u64 = ok("stat", &["-c", "%s", p(&path)]).trim().parse().unwrap();
    assert_eq!(size, text.len() as u64, "{name}: stat size");
    text
}

#[test]
fn each_session_shows_its_views_as_the_goldens_and_the_cli_hold_them() {
    require_fuse!();
    let store = tempfile::tempdir().unwrap();
    let cases = [
        ("real/before-compaction.jsonl", "before-compaction", true),
        ("real/large-session.jsonl", "large-session", true),
        ("views/elements.jsonl", "elements", false),
    ];
    let stored: Vec<(String, std::path::PathBuf, &str)> = cases
        .iter()
        .map(|(file, golden, renumber)| {
            let (sid, path) = store_fixture(store.path(), file, *renumber);
            (sid, path, *golden)
        })
        .collect();
    let mount = Mount::start(&["--session-dir", p(store.path())]);
    for (sid, path, golden) in &stored {
        let dir = mount.path().join("sessions").join(sid);
        let listing = ok("ls", &[p(&dir)]);
        for name in ["context.md", "tree.txt", "usage.json", "labels"] {
            assert!(listing.lines().any(|l| l == name), "{name} in {listing}");
        }
        for (file, format) in [
            ("context.md", "md"),
            ("tree.txt", "tree"),
            ("usage.json", "usage"),
        ] {
            let shown = cat_view(&dir, file);
            let expected = golden_text(&format!("{golden}.{file}"));
            assert_eq!(shown, expected, "{golden}: {file} through the mount");
            let cli = ok(
                p(&gjcfs_bin()),
                &[
                    "show",
                    p(path),
                    "--format",
                    format,
                    "--agent-dir",
                    "/nonexistent",
                ],
            );
            // The CLI links images into the agent's blob store, the mount into the
            // session's own blobs/.
            let cli = cli.replace("](/nonexistent/blobs/", "](blobs/");
            assert_eq!(cli, expected, "{golden}: gjcfs show --format {format}");
        }
    }
}

#[test]
fn labels_link_to_their_entries_and_views_follow_the_leaf() {
    require_fuse!();
    let store = tempfile::tempdir().unwrap();
    let (sid, _) = store_fixture(store.path(), "views/elements.jsonl", false);
    let mount = Mount::start(&["--session-dir", p(store.path())]);
    let dir = mount.path().join("sessions").join(&sid);
    let session = load_session(&fixture("views/elements.jsonl"))
        .unwrap()
        .session;
    let labels = session.label_targets();
    assert!(!labels.is_empty(), "the fixture holds labels");
    let listed = ok("ls", &[p(&dir.join("labels"))]);
    let mut names: Vec<String> = labels.keys().map(|l| label_file_name(l)).collect();
    names.sort();
    assert_eq!(listed.lines().collect::<Vec<_>>(), names);
    assert!(
        names.contains(&"a%2Fb".to_owned()),
        "a label that is no file name shows too"
    );
    for (label, id) in &labels {
        let link = dir.join("labels").join(label_file_name(label));
        let target = ok("readlink", &[p(&link)]);
        assert!(
            target.trim_end().starts_with("../entries/")
                && target.trim_end().ends_with(&format!("-{id}.json")),
            "{label} -> {target}"
        );
        let through = ok("cat", &[p(&link)]);
        let direct = ok("cat", &[p(&dir.join("entries").join(format!("{id}.json")))]);
        assert_eq!(through, direct);
    }

    // A new label through entries/new, then the same label cleared.
    let first = session.entry_indices().next().unwrap();
    let first_id = session.record(first).id().unwrap().to_owned();
    let new = dir.join("entries/new");
    let append = |line: &str| {
        ok(
            "sh",
            &["-c", &format!("printf '%s\\n' '{line}' >> {}", p(&new))],
        );
    };
    append(&format!(
        r#"{{"type":"label","targetId":"{first_id}","label":"fresh-mark"}}"#
    ));
    assert!(ok("ls", &[p(&dir.join("labels"))])
        .lines()
        .any(|l| l == "fresh-mark"));
    assert!(cat_view(&dir, "tree.txt").contains(&format!("{first_id} [fresh-mark]")));
    append(&format!(
        r#"{{"type":"label","targetId":"{first_id}","label":""}}"#
    ));
    assert!(!ok("ls", &[p(&dir.join("labels"))])
        .lines()
        .any(|l| l == "fresh-mark"));
    assert!(run("readlink", &[p(&dir.join("labels/fresh-mark"))])
        .stdout
        .is_empty());

    // Branching to the first entry: the views follow.
    ok(
        "sh",
        &["-c", &format!("echo {first_id} > {}", p(&dir.join("leaf")))],
    );
    let md = cat_view(&dir, "context.md");
    assert!(md.contains(&format!("- leaf: `{first_id}`")), "{md}");
    let tree = cat_view(&dir, "tree.txt");
    let marked: Vec<&str> = tree.lines().filter(|l| l.ends_with("← leaf")).collect();
    assert_eq!(marked.len(), 1, "{tree}");
    assert!(marked[0].contains(&first_id), "{}", marked[0]);
}

fn usage_json(text: &str) -> Value {
    json::parse(text).expect("usage.json is JSON")
}

fn member<'a>(value: &'a Value, key: &str) -> &'a Value {
    value.as_object().unwrap().get(key).unwrap()
}

#[test]
fn the_store_usage_matches_gjcfs_usage_and_follows_new_replies() {
    require_fuse!();
    let store = tempfile::tempdir().unwrap();
    for seed in ["1", "2", "3"] {
        ok(
            p(&gjcfs_bin()),
            &[
                "generate",
                p(&store.path().join(format!("s{seed}.jsonl"))),
                "--entries",
                "60",
                "--seed",
                seed,
            ],
        );
    }
    // A fork: a copy of s1 under another id whose header names s1 as its parent.
    let s1 = fs::read_to_string(store.path().join("s1.jsonl")).unwrap();
    let (header, rest) = s1.split_once('\n').unwrap();
    let mut header_value = json::parse(header).unwrap();
    let parent = member(&header_value, "id").as_str().unwrap().to_owned();
    if let Value::Object(o) = &mut header_value {
        o.insert("id", Value::string("00000000-0000-7000-8000-0000000f0f0f"));
        o.insert("parentSession", Value::string(parent.as_str()));
    }
    fs::write(
        store.path().join("fork.jsonl"),
        format!("{}\n{rest}", json::to_compact(&header_value)),
    )
    .unwrap();

    let mount = Mount::start(&["--session-dir", p(store.path())]);
    let root_usage = mount.path().join("usage.json");
    let shown = usage_json(&ok("cat", &[p(&root_usage)]));
    let cli = |by: &str| {
        usage_json(&ok(
            p(&gjcfs_bin()),
            &[
                "usage",
                "--json",
                "--by",
                by,
                // The mount's usage.json counts days in UTC.
                "--timezone",
                "UTC",
                "--session-dir",
                p(store.path()),
            ],
        ))
    };
    for (by, key) in [
        ("session", "bySession"),
        ("day", "byDay"),
        ("week", "byWeek"),
        ("month", "byMonth"),
        ("project", "byProject"),
        ("model", "byModel"),
    ] {
        let expected = cli(by);
        for common in [
            "sessions",
            "records",
            "copies",
            "skipped",
            "outsideRange",
            "totals",
        ] {
            assert_eq!(
                member(&shown, common),
                member(&expected, common),
                "{common}"
            );
        }
        assert_eq!(member(&shown, key), member(&expected, key), "{key}");
    }
    assert_eq!(member(&shown, "sessions").as_f64(), Some(4.0));
    assert!(
        member(&shown, "copies").as_f64().unwrap() > 0.0,
        "the fork's copies"
    );

    // The agent appends a reply with usage to s2: the store's usage follows.
    let before = member(member(&shown, "totals"), "output").as_f64().unwrap();
    let s2 = store.path().join("s2.jsonl");
    let last_id = fs::read_to_string(&s2)
        .unwrap()
        .lines()
        .rev()
        .find_map(|l| {
            let v = json::parse(l).ok()?;
            Some(v.as_object()?.get_str("id")?.to_owned())
        })
        .unwrap();
    let line = format!(
        r#"{{"type":"message","id":"feedf00d","parentId":"{last_id}","timestamp":"2026-03-01T00:00:00.000Z","message":{{"role":"assistant","content":[{{"type":"text","text":"late"}}],"provider":"anthropic","model":"late-model","usage":{{"input":10,"output":1000,"cacheRead":0,"cacheWrite":0,"cost":{{"total":0.5}}}}}}}}"#
    );
    fs::OpenOptions::new()
        .append(true)
        .open(&s2)
        .unwrap()
        .write_all(format!("{line}\n").as_bytes())
        .unwrap();
    let output = |usage: &Value| member(member(usage, "totals"), "output").as_f64().unwrap();
    let mut after = shown.clone();
    within(Duration::from_secs(3), || {
        after = usage_json(&ok("cat", &[p(&root_usage)]));
        output(&after) != before
    });
    assert_eq!(
        member(member(&after, "totals"), "output").as_f64().unwrap(),
        before + 1000.0
    );
    let late = member(member(&after, "byModel"), "anthropic/late-model");
    assert_eq!(member(late, "output").as_f64(), Some(1000.0));
}

#[test]
fn a_cold_spilled_session_read_through_the_mount_shows_the_original_text() {
    require_fuse!();
    let tmp = tempfile::tempdir().unwrap();
    let agent = tmp.path().join("agent");
    let blobs = agent.join("blobs");
    std::fs::create_dir_all(&blobs).unwrap();
    for entry in std::fs::read_dir(fixture("peer/blobs")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), blobs.join(entry.file_name())).unwrap();
    }
    let dir = tmp.path().join("sessions");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("coldspill.jsonl");
    std::fs::copy(fixture("peer/coldspill.jsonl"), &file).unwrap();
    let sid = crate::common::session_id(&file);
    let mount = Mount::start(&["--agent-dir", p(&agent), "--session-dir", p(&dir)]);
    let session = mount.path().join("sessions").join(&sid);
    ok(
        "sh",
        &[
            "-c",
            &format!("echo 2ef788f0 > {}", p(&session.join("leaf"))),
        ],
    );
    // The context at that leaf is the one the original engine recorded.
    let context = json::parse(&ok("cat", &[p(&session.join("context.json"))])).unwrap();
    let recorded = json::parse(
        &std::fs::read_to_string(fixture("peer/coldspill.context-2ef788f0.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        context.as_object().unwrap().get("messages"),
        recorded.as_object().unwrap().get("messages")
    );
    let notice = gjcfs::engine::format::cold_spill::EVICTED_NOTICE;
    for view in ["context.json", "context.md", "tree.txt"] {
        let text = ok("cat", &[p(&session.join(view))]);
        assert!(!text.contains(notice), "{view} shows the eviction notice");
    }
    let found = run("grep", &["-rlF", notice, p(&session.join("entries"))]);
    assert_eq!(
        found.status.code(),
        Some(1),
        "entries still show the notice: {found:?}"
    );
    // search/ finds the words the blob store holds, and not the notice.
    let search = mount.path().join("search");
    assert_eq!(
        ok("ls", &[p(&search.join("question sentence 7"))]),
        format!("001-{sid}-ee8b7ce6.json\nresults.jsonl\n")
    );
    assert_eq!(
        ok("ls", &[p(&search.join("durable cold storage"))]),
        "results.jsonl\n"
    );
    let raw = std::fs::read_to_string(&file).unwrap();
    assert!(
        raw.contains("evictedContent"),
        "the file itself keeps its markers"
    );
}

#[test]
fn context_json_is_what_the_agent_sends_with_the_openai_replay_sanitized_in_memory() {
    require_fuse!();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sessions");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("openai.jsonl");
    std::fs::copy(fixture("peer/openai-sanitizer.jsonl"), &file).unwrap();
    let before = std::fs::read(&file).unwrap();
    let sid = crate::common::session_id(&file);
    let mount = Mount::start(&["--session-dir", p(&dir), "--agent-dir", p(tmp.path())]);
    let context = ok(
        "cat",
        &[p(&mount
            .path()
            .join("sessions")
            .join(&sid)
            .join("context.json"))],
    );
    let recorded = std::fs::read_to_string(fixture("peer/openai-sanitizer.context.json")).unwrap();
    assert_eq!(
        json::parse(&context)
            .unwrap()
            .as_object()
            .unwrap()
            .get("messages"),
        json::parse(&recorded)
            .unwrap()
            .as_object()
            .unwrap()
            .get("messages")
    );
    drop(mount);
    assert_eq!(
        std::fs::read(&file).unwrap(),
        before,
        "reading wrote nothing"
    );
}

#[test]
fn a_long_listing_of_a_session_never_read_shows_each_view_at_its_size() {
    require_fuse!();
    let store = tempfile::tempdir().unwrap();
    let (sid, _) = store_fixture(store.path(), "real/before-compaction.jsonl", true);
    let views = [
        "context.json",
        "context.md",
        "context.html",
        "tree.txt",
        "tree.svg",
        "usage.json",
    ];
    each_mode(|mode| {
        let mount = Mount::start(&[&["--session-dir", p(store.path())], mode].concat());
        let dir = mount.path().join("sessions").join(&sid);
        // The listing gives no size of a view not rendered yet; `ls -l` then asks each
        // name's attributes, which must be the sizes the files read at.
        let long = ok("ls", &["-ln", "--time-style=+", p(&dir)]);
        for view in views {
            let line = long
                .lines()
                .find(|l| l.split_whitespace().last() == Some(view))
                .unwrap_or_else(|| panic!("{view} not in {long}"));
            let size: u64 = line.split_whitespace().nth(4).unwrap().parse().unwrap();
            let bytes = fs::read(dir.join(view)).unwrap();
            assert!(size > 0, "{view}: {line}");
            assert_eq!(size, bytes.len() as u64, "{view} ({mode:?})");
        }
    });
}

/// Bytes the process `pid` has read so far (`rchar` of `/proc/<pid>/io`).
fn bytes_read_by(pid: u32) -> u64 {
    let io = fs::read_to_string(format!("/proc/{pid}/io")).unwrap();
    io.lines()
        .find_map(|line| line.strip_prefix("rchar: "))
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn the_stores_usage_json_comes_from_the_usage_gjcfs_usage_saved() {
    require_fuse!();
    let tmp = tempfile::tempdir().unwrap();
    let sessions = tmp.path().join("sessions");
    fs::create_dir(&sessions).unwrap();
    for seed in 0..40 {
        let file = sessions.join(format!("s{seed}.jsonl"));
        let out = std::process::Command::new(gjcfs_bin())
            .args(["generate", p(&file), "--size", "100KB", "--seed"])
            .arg(seed.to_string())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    let cache = tmp.path().join("cache");
    let usage = std::process::Command::new(gjcfs_bin())
        .env("XDG_CACHE_HOME", &cache)
        .args(["usage", "--json", "--session-dir", p(&sessions)])
        .output()
        .unwrap();
    assert!(usage.status.success(), "{usage:?}");
    let mount = Mount::start_with_cache(&["--session-dir", p(&sessions)], &cache);
    // The listing reads the start of every session; usage.json then reads none of them.
    ok("ls", &[p(&mount.path().join("sessions"))]);
    let before = bytes_read_by(mount.pid());
    let shown = usage_json(&ok("cat", &[p(&mount.path().join("usage.json"))]));
    let read = bytes_read_by(mount.pid()) - before;
    assert!(
        read < 1 << 20,
        "{read} bytes read for usage.json (the sessions hold 4 MB)"
    );
    let saved = json::parse(&String::from_utf8_lossy(&usage.stdout)).unwrap();
    let totals = shown.as_object().unwrap().get("totals");
    assert!(totals.is_some(), "{shown:?}");
    assert_eq!(
        totals,
        saved.as_object().unwrap().get("totals"),
        "the same totals as gjcfs usage"
    );
}
