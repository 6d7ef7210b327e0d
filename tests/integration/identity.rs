//! One session, one identity, on every surface: the ids of a file without ids, through the
//! CLI, the search index and real mounts.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::gjcfs_bin;
use crate::common::mount::{ok, p, run, Mount};
use gjcfs::engine::json;
use gjcfs::engine::load_session;

/// A directory holding one generated v1 session (no ids in the file); its path.
fn v1_store(dir: &Path) -> PathBuf {
    let file = dir.join("legacy.jsonl");
    let out = Command::new(gjcfs_bin())
        .args(["generate", p(&file), "--entries", "40", "--version", "1"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    file
}

/// The entry ids `gjcfs entries` shows for `file`, in file order.
fn shown_ids(file: &Path) -> Vec<String> {
    ok(p(&gjcfs_bin()), &["entries", p(file)])
        .lines()
        .skip(1)
        .map(|line| {
            let value = json::parse(line).unwrap();
            value.as_object().unwrap().get_str("id").unwrap().to_owned()
        })
        .collect()
}

#[test]
fn a_file_without_ids_shows_the_same_ids_everywhere_and_its_first_write_keeps_them() {
    require_fuse!();
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    fs::create_dir(&store).unwrap();
    let file = v1_store(&store);
    let ids = shown_ids(&file);
    assert_eq!(ids, shown_ids(&file), "another process, the same ids");
    let header = fs::read_to_string(&file).unwrap();
    let header = json::parse(header.lines().next().unwrap()).unwrap();
    let sid = header
        .as_object()
        .unwrap()
        .get_str("id")
        .unwrap()
        .to_owned();
    let args = ["--session-dir", p(&store)];

    // The mount names the entries the same, and so do remounts.
    let mount = Mount::start(&args);
    let dir = mount.session_dir(&sid);
    let tree = ok("cat", &[p(&dir.join("tree.txt"))]);
    let listed = ok("ls", &[p(&dir.join("entries"))]);
    for (n, id) in ids.iter().enumerate() {
        assert!(listed.contains(&format!("{n:06}-{id}.json")), "{id}");
    }
    drop(mount);
    let mount = Mount::start(&args);
    let dir = mount.session_dir(&sid);
    assert_eq!(
        ok("cat", &[p(&dir.join("tree.txt"))]),
        tree,
        "a remount, the same tree"
    );

    // What a search finds is an entry of the mount and of the CLI.
    let index = tmp.path().join("index");
    let hits = ok(
        p(&gjcfs_bin()),
        &[
            "search",
            "the",
            "--json",
            "--session-dir",
            p(&store),
            "--index",
            p(&index),
        ],
    );
    let hit = json::parse(hits.lines().next().expect("a hit")).unwrap();
    let hit_id = hit
        .as_object()
        .unwrap()
        .get_str("entry")
        .unwrap()
        .to_owned();
    assert!(ids.contains(&hit_id), "{hit_id} is one of {ids:?}");
    let at = ok(p(&gjcfs_bin()), &["context", p(&file), "--leaf", &hit_id]);
    assert!(json::parse(&at).is_ok());
    let query = mount.path().join("search/the");
    let links: Vec<String> = ok("ls", &[p(&query)])
        .lines()
        .filter(|name| name.ends_with(".json"))
        .map(str::to_owned)
        .collect();
    assert!(!links.is_empty());
    for link in &links {
        let out = run("cat", &[p(&query.join(link))]);
        assert!(out.status.success(), "{link} dangles");
    }

    // A leaf chosen by that id reads back as that id, and the write that persisted the
    // migration wrote the ids shown before it.
    let out = run(
        "sh",
        &["-c", &format!("echo {hit_id} > {}", p(&dir.join("leaf")))],
    );
    assert!(out.status.success(), "{out:?}: {}", mount.log_text());
    assert_eq!(ok("cat", &[p(&dir.join("leaf"))]).trim(), hit_id);
    drop(mount);
    let written: Vec<String> = load_session(&file)
        .unwrap()
        .session
        .entries()
        .map(|e| e.id().unwrap().to_owned())
        .collect();
    assert_eq!(
        written[..ids.len()],
        ids[..],
        "the migration kept the ids shown"
    );
    let header = fs::read_to_string(&file).unwrap();
    assert!(header.lines().next().unwrap().contains("\"version\":5"));
}

/// `gjcfs ARGS…` that must succeed; its standard output parsed as JSON (one document).
fn gjcfs_json(args: &[&str]) -> json::Value {
    let text = ok(p(&gjcfs_bin()), args);
    json::parse(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The cost `gjcfs usage --json` reports for the store, and how many sessions it counted.
fn store_usage(agent: &str) -> (f64, f64) {
    let usage = gjcfs_json(&["usage", "--json", "--agent-dir", agent]);
    let usage = usage.as_object().unwrap();
    let cost = usage
        .get("totals")
        .unwrap()
        .as_object()
        .unwrap()
        .get("cost");
    (
        usage.get("sessions").unwrap().as_f64().unwrap(),
        cost.unwrap().as_f64().unwrap(),
    )
}

/// The cost `gjcfs show --format usage` reports for one session file.
fn session_cost(file: &Path) -> f64 {
    let usage = gjcfs_json(&["show", p(file), "--format", "usage"]);
    let usage = usage.as_object().unwrap();
    usage.get("cost").unwrap().as_f64().unwrap()
}

#[test]
fn a_legacy_session_and_its_managed_copy_count_once_on_every_surface() {
    require_fuse!();
    let s = crate::common::mount::store();
    let agent = s.agent_dir();
    let ws = s.tmp.path().join("workspace");
    let legacy_dir = s.tmp.path().join("agent/sessions/--legacy--");
    fs::create_dir(&legacy_dir).unwrap();
    let legacy = legacy_dir.join("2026-01-01T00-00-00-000Z_legacy.jsonl");
    let reply = r#"{"type":"message","id":"a1","parentId":"q1","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"zebrawordanswer"}],"provider":"anthropic","model":"claude","usage":{"input":10,"output":20,"cacheRead":0,"cacheWrite":0,"totalTokens":30,"cost":{"input":0.5,"output":1.0,"cacheRead":0,"cacheWrite":0,"total":1.5}},"stopReason":"stop","timestamp":2}}"#;
    let text = format!(
        "{{\"type\":\"session\",\"version\":5,\"id\":\"legacy-session\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"{}\"}}\n\
         {{\"type\":\"message\",\"id\":\"q1\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:01.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"zebraword question\",\"timestamp\":1}}}}\n{reply}\n",
        ws.display()
    );
    fs::write(&legacy, text).unwrap();
    let distinct = session_cost(&s.file) + session_cost(&legacy);
    let index = s.tmp.path().join("index");
    let search = || {
        ok(
            p(&gjcfs_bin()),
            &[
                "search",
                "zebraword",
                "--all",
                "--json",
                "--agent-dir",
                &agent,
                "--index",
                p(&index),
            ],
        )
    };
    let listed = || {
        ok(
            p(&gjcfs_bin()),
            &["ls", "--all", "--json", "--agent-dir", &agent],
        )
        .lines()
        .count()
    };
    let before = store_usage(&agent);
    assert_eq!(before, (2.0, distinct));
    assert_eq!(search().lines().count(), 1);
    assert_eq!(listed(), 2);

    // The first write copies the legacy session into its workspace's scope.
    let out = crate::common::gjcfs_with_stdin(
        &["append", p(&legacy), "--agent-dir", &agent],
        "{\"role\":\"user\",\"content\":\"after the copy\"}\n",
    );
    assert!(out.status.success(), "{out:?}");
    assert!(legacy.exists(), "the legacy file stays");
    let after = store_usage(&agent);
    assert_eq!(after, (2.0, distinct), "the copy is not counted again");
    let hits = search();
    assert_eq!(hits.lines().count(), 1, "{hits}");
    let hit = json::parse(hits.lines().next().unwrap()).unwrap();
    let path = hit.as_object().unwrap().get_str("path").unwrap().to_owned();
    assert!(
        !path.contains("--legacy--"),
        "the hit is the live copy's: {path}"
    );
    assert_eq!(listed(), 2);

    let mount = Mount::start(&["--agent-dir", &agent]);
    let usage = json::parse(&ok("cat", &[p(&mount.path().join("usage.json"))])).unwrap();
    let usage = usage.as_object().unwrap();
    assert_eq!(usage.get("sessions").unwrap().as_f64(), Some(2.0));
    let cost = usage
        .get("totals")
        .unwrap()
        .as_object()
        .unwrap()
        .get("cost");
    assert_eq!(cost.unwrap().as_f64(), Some(distinct));
    assert_eq!(
        ok("ls", &[p(&mount.path().join("sessions"))])
            .lines()
            .count(),
        2
    );
    // Every index of the mount links the one session once.
    let links = |dir: &str| {
        ok("find", &[p(&mount.path().join(dir)), "-type", "l"])
            .lines()
            .count()
    };
    for dir in ["recent", "projects", "by-date"] {
        assert_eq!(links(dir), 2, "{dir}");
    }
    let found = ok("ls", &[p(&mount.path().join("search/zebraword"))]);
    assert_eq!(
        found.lines().filter(|l| l.ends_with(".json")).count(),
        1,
        "{found}"
    );
}

#[test]
fn a_session_without_a_title_is_shown_under_its_first_prompt_everywhere() {
    require_fuse!();
    let s = crate::common::mount::store();
    let agent = s.agent_dir();
    let scope = s.file.parent().unwrap();
    // No title, and a long reply before the first prompt pushes it past the first 4 KiB.
    let long = "x".repeat(6000);
    let text = format!(
        "{{\"type\":\"session\",\"version\":5,\"id\":\"untitled-session\",\"timestamp\":\"2026-01-02T03:04:00.000Z\",\"cwd\":\"/w\"}}\n\
         {{\"type\":\"message\",\"id\":\"a0\",\"parentId\":null,\"timestamp\":\"2026-01-02T03:04:01.000Z\",\"message\":{{\"role\":\"assistant\",\"content\":\"{long}\",\"provider\":\"p\",\"model\":\"m\",\"timestamp\":1}}}}\n\
         {{\"type\":\"message\",\"id\":\"q1\",\"parentId\":\"a0\",\"timestamp\":\"2026-01-02T03:04:02.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"pelican prompt here\",\"timestamp\":2}}}}\n"
    );
    let file = scope.join("2026-01-02T03-04-00-000Z_untitled-session.jsonl");
    fs::write(&file, text).unwrap();
    fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();

    let listed = ok(p(&gjcfs_bin()), &["ls", "--all", "--agent-dir", &agent]);
    let row = listed
        .lines()
        .find(|l| l.starts_with("untitled-session"))
        .unwrap();
    assert!(row.ends_with("pelican prompt here"), "{row}");
    let index = s.tmp.path().join("index");
    let found = ok(
        p(&gjcfs_bin()),
        &[
            "search",
            "pelican",
            "--all",
            "--agent-dir",
            &agent,
            "--index",
            p(&index),
        ],
    );
    assert!(found.contains("  pelican prompt here  "), "{found}");

    let mount = Mount::start(&["--agent-dir", &agent]);
    let recent = ok("ls", &[p(&mount.path().join("recent"))]);
    assert!(
        recent
            .lines()
            .any(|n| n.contains("pelican prompt here (untitled")),
        "{recent}"
    );
    let day = ok("ls", &[p(&mount.path().join("by-date/2026-01-02"))]);
    assert_eq!(day.trim(), "03-04 pelican prompt here (untitled)", "{day}");
}

#[test]
fn names_tools_probe_are_not_queries_and_a_lookup_alone_records_none() {
    require_fuse!();
    let s = crate::common::mount::store();
    let agent = s.agent_dir();
    let history =
        gjcfs::engine::history::HistoryStorage::open(s.tmp.path().join("agent/history.db"))
            .unwrap();
    history.add("a prompt about MOUNTTOKEN", Some("/w"));
    history.close().unwrap();
    let mount = Mount::start(&["--agent-dir", &agent]);
    let search = mount.path().join("search");
    let prompts = mount.path().join("history/search");
    for dir in [&search, &prompts] {
        for probe in [
            ".git",
            ".ignore",
            ".rgignore",
            ".DS_Store",
            ".hidden",
            "desktop.ini",
            "Thumbs.db",
        ] {
            let err = fs::metadata(dir.join(probe)).unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::ENOENT), "{dir:?}/{probe}");
        }
    }
    // Looked up only: not a query anyone asked.
    assert!(search.join("questionword").is_dir());
    assert!(fs::metadata(prompts.join("prompt")).is_ok());
    assert_eq!(ok("ls", &[p(&search)]), "");
    assert_eq!(ok("ls", &[p(&prompts)]), "");
    // Listed or read: asked.
    ok("ls", &[p(&search.join("question"))]);
    ok("cat", &[p(&search.join("answer/results.jsonl"))]);
    ok("cat", &[p(&prompts.join("MOUNTTOKEN"))]);
    assert_eq!(ok("ls", &[p(&search)]), "answer\nquestion\n");
    assert_eq!(ok("ls", &[p(&prompts)]), "MOUNTTOKEN\n");
}

/// `gjcfs ARGS…` run in `cwd` with its cache in `cache`.
fn gjcfs_in(cwd: &Path, cache: &Path, args: &[&str]) -> std::process::Output {
    Command::new(gjcfs_bin())
        .args(args)
        .current_dir(cwd)
        .env("XDG_CACHE_HOME", cache)
        .output()
        .unwrap()
}

#[test]
fn nothing_found_says_where_it_looked_and_what_to_try() {
    let s = crate::common::mount::store();
    let agent = s.agent_dir();
    let elsewhere = tempfile::tempdir().unwrap();
    let cache = elsewhere.path().join("cache");
    let stderr = |out: &std::process::Output| String::from_utf8_lossy(&out.stderr).into_owned();

    // Outside any workspace: nothing, status 1, and the way to the rest of the store.
    let ls = gjcfs_in(elsewhere.path(), &cache, &["ls", "--agent-dir", &agent]);
    assert_eq!(ls.status.code(), Some(1), "{}", stderr(&ls));
    assert!(ls.stdout.is_empty());
    assert!(
        stderr(&ls).contains("no sessions for workspace")
            && stderr(&ls).contains("1 session file in the store: `gjcfs ls --all`"),
        "{}",
        stderr(&ls)
    );
    let search = gjcfs_in(
        elsewhere.path(),
        &cache,
        &["search", "MOUNTTOKEN", "--agent-dir", &agent],
    );
    assert_eq!(search.status.code(), Some(1));
    assert!(
        stderr(&search).contains("`gjcfs search --all`"),
        "{}",
        stderr(&search)
    );
    let found = gjcfs_in(
        elsewhere.path(),
        &cache,
        &["search", "MOUNTTOKEN", "--all", "--agent-dir", &agent],
    );
    assert_eq!(found.status.code(), Some(0), "{}", stderr(&found));

    // A directory that is no agent directory is refused like a missing one.
    let not_agent = elsewhere.path().join("etc");
    fs::create_dir(&not_agent).unwrap();
    fs::write(not_agent.join("hosts"), "127.0.0.1 localhost\n").unwrap();
    let out = gjcfs_in(
        elsewhere.path(),
        &cache,
        &["ls", "--all", "--agent-dir", p(&not_agent)],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("not an agent directory"),
        "{}",
        stderr(&out)
    );

    // An unknown --session and an inverted range are errors.
    let out = gjcfs_in(
        elsewhere.path(),
        &cache,
        &[
            "search",
            "MOUNTTOKEN",
            "--all",
            "--session",
            "nope",
            "--agent-dir",
            &agent,
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no session of the store has an id starting with \"nope\""),
        "{}",
        stderr(&out)
    );
    let out = gjcfs_in(
        elsewhere.path(),
        &cache,
        &[
            "search",
            "MOUNTTOKEN",
            "--all",
            "--since",
            "2026-02-01",
            "--until",
            "2026-01-01",
            "--agent-dir",
            &agent,
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("is not before --until"),
        "{}",
        stderr(&out)
    );

    // A mistyped store leaves no index behind.
    let fresh_cache = elsewhere.path().join("fresh-cache");
    let out = gjcfs_in(
        elsewhere.path(),
        &fresh_cache,
        &["search", "x", "--agent-dir", "/nonexistent/agent"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        !fresh_cache.exists(),
        "an index was made for a store that is not there"
    );
}

/// How many leaf markers the transcript holds.
fn markers(file: &Path) -> usize {
    fs::read_to_string(file)
        .unwrap()
        .lines()
        .filter(|l| l.contains("\"customType\":\"gjcfs.leaf\""))
        .count()
}

#[test]
fn leaf_moves_read_as_the_leaf_pointer_and_an_editor_save_is_one_move() {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let (s, mount) = mounted_store!();
    let dir = mount.session_dir(&s.sid);
    let leaf = dir.join("leaf");
    let echo = |id: &str| {
        let out = run("sh", &["-c", &format!("echo {id} > {}", p(&leaf))]);
        assert!(out.status.success(), "{out:?}");
    };
    for i in 0..8 {
        echo(&s.ids[i % 3]);
    }
    echo(&s.ids[1]);
    let tree = ok("cat", &[p(&dir.join("tree.txt"))]);
    assert!(!tree.contains("gjcfs.leaf"), "{tree}");
    assert_eq!(tree.lines().count(), 3, "the entries, no markers: {tree}");
    assert_eq!(tree.matches("← leaf").count(), 1);
    let leaf_line = tree.lines().find(|l| l.contains("← leaf")).unwrap();
    assert!(leaf_line.contains(&s.ids[1]), "{tree}");
    let listed = ok("ls", &[p(&dir.join("entries"))]);
    assert_eq!(listed.lines().count(), 4, "three entries and new: {listed}");
    let md = ok("cat", &[p(&dir.join("context.md"))]);
    assert!(!md.contains("gjcfs.leaf"), "{md}");
    // A reset: no marker line in the tree either.
    let out = run("sh", &["-c", &format!(": > {}", p(&leaf))]);
    assert!(out.status.success());
    assert_eq!(ok("cat", &[p(&leaf)]), "");
    let tree = ok("cat", &[p(&dir.join("tree.txt"))]);
    assert!(!tree.contains("custom"), "{tree}");

    // An editor saving: truncated by path (truncate(2)), then written and closed — one
    // move.
    let truncate_path = |path: &Path| {
        let c = std::ffi::CString::new(p(path)).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::truncate(c.as_ptr(), 0) }, 0, "truncate(2)");
    };
    echo(&s.ids[1]);
    let before = markers(&s.file);
    truncate_path(&leaf);
    let mut file = fs::OpenOptions::new().write(true).open(&leaf).unwrap();
    file.write_all(format!("{}\n", s.ids[0]).as_bytes())
        .unwrap();
    drop(file);
    assert_eq!(ok("cat", &[p(&leaf)]).trim(), s.ids[0]);
    assert_eq!(markers(&s.file), before + 1, "one move, no reset first");
    // Truncated through the open file, fsynced, then written — one move.
    echo(&s.ids[1]);
    let before = markers(&s.file);
    let mut file = fs::OpenOptions::new()
        .write(true)
        .custom_flags(0)
        .open(&leaf)
        .unwrap();
    file.set_len(0).unwrap();
    file.sync_all().unwrap();
    file.write_all(format!("{}\n", s.ids[2]).as_bytes())
        .unwrap();
    drop(file);
    assert_eq!(ok("cat", &[p(&leaf)]).trim(), s.ids[2]);
    assert_eq!(markers(&s.file), before + 1, "one move, no reset first");
    // Truncated by path and left so: the reset comes a moment later.
    echo(&s.ids[1]);
    let before = markers(&s.file);
    truncate_path(&leaf);
    assert_eq!(ok("cat", &[p(&leaf)]), "", "reads as reset at once");
    assert_eq!(markers(&s.file), before, "not yet written");
    assert!(crate::common::mount::within(
        std::time::Duration::from_secs(5),
        || { markers(&s.file) == before + 1 }
    ));
    assert_eq!(ok("cat", &[p(&leaf)]), "");
}

#[test]
fn help_and_messages_say_what_is_true() {
    let help = |cmd: &str| ok(p(&gjcfs_bin()), &[cmd, "--help"]);
    assert!(!help("ls").contains('+'), "{}", help("ls"));
    assert!(
        help("mount").contains("search/<query>/"),
        "{}",
        help("mount")
    );
    assert!(help("mount").contains("check"), "{}", help("mount"));
    let tmp = tempfile::tempdir().unwrap();
    let out = run(p(&gjcfs_bin()), &["show", p(tmp.path())]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("a directory, not a session file"), "{err}");
    // The size reported is the size written, the cwd put in included.
    let file = tmp.path().join("g.jsonl");
    let cwd = tmp.path().join("a-rather-long-workspace-directory-name");
    let out = run(
        p(&gjcfs_bin()),
        &["generate", p(&file), "--entries", "5", "--cwd", p(&cwd)],
    );
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    let size = fs::metadata(&file).unwrap().len();
    assert!(
        said.contains(&format!(", {size} bytes")),
        "{said} (the file has {size})"
    );
}
