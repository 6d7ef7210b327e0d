//! `gjcfs history` as a user runs it.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::gjcfs_bin;
use gjcfs::engine::json;
use gjcfs::engine::HistoryStorage;

/// A command with no agent-directory settings from the environment running the tests.
fn gjcfs(home: &Path) -> Command {
    let mut cmd = Command::new(gjcfs_bin());
    for var in [
        "GJC_CODING_AGENT_DIR",
        "PI_CODING_AGENT_DIR",
        "GJC_CONFIG_DIR",
        "PI_CONFIG_DIR",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
        "XDG_CACHE_HOME",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("HOME", home).current_dir(home);
    cmd
}

fn run(cmd: &mut Command, args: &[&str]) -> Output {
    cmd.args(args).output().expect("gjcfs runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).unwrap()
}

/// A history database at `<agent_dir>/history.db` with fixed rows.
fn seed(agent_dir: &Path) {
    let path = agent_dir.join("history.db");
    HistoryStorage::open(&path).unwrap().close().unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    for (prompt, created_at, cwd) in [
        ("git commit --amend", 1_700_000_000, Some("/w/app")),
        (
            "explain\tthe \"borrow\" checker\nplease",
            1_700_000_100,
            None,
        ),
        ("submit the form", 1_700_000_200, Some("/w/lib")),
        ("commit the docs", 1_700_000_300, Some("/w/app")),
    ] {
        conn.execute(
            "INSERT INTO history (prompt, created_at, cwd) VALUES (?1, ?2, ?3)",
            rusqlite::params![prompt, created_at, cwd],
        )
        .unwrap();
    }
}

fn agent(home: &Path) -> std::path::PathBuf {
    let dir = home.join("agent");
    seed(&dir);
    dir
}

#[test]
fn lists_recent_prompts_one_a_line_newest_first() {
    let home = tempfile::tempdir().unwrap();
    let dir = agent(home.path());
    let out = run(
        &mut gjcfs(home.path()),
        &["history", "--agent-dir", dir.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "2023-11-14 22:18:20  /w/app  commit the docs\n\
         2023-11-14 22:16:40  /w/lib  submit the form\n\
         2023-11-14 22:15:00  -  explain\\tthe \"borrow\" checker\\nplease\n\
         2023-11-14 22:13:20  /w/app  git commit --amend\n"
    );
    assert!(stderr(&out).is_empty());
}

#[test]
fn json_lines_limit_and_cwd() {
    let home = tempfile::tempdir().unwrap();
    let dir = agent(home.path());
    let dir = dir.to_str().unwrap();
    let out = run(
        &mut gjcfs(home.path()),
        &["history", "--json", "--limit", "3", "--agent-dir", dir],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            r#"{"id":4,"prompt":"commit the docs","created_at":1700000300,"cwd":"/w/app"}"#,
            r#"{"id":3,"prompt":"submit the form","created_at":1700000200,"cwd":"/w/lib"}"#,
            r#"{"id":2,"prompt":"explain\tthe \"borrow\" checker\nplease","created_at":1700000100}"#,
        ]
    );
    for line in lines {
        json::parse(line).unwrap();
    }

    let out = run(
        &mut gjcfs(home.path()),
        &["history", "--cwd", "/w/app/", "--agent-dir", dir],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "2023-11-14 22:18:20  /w/app  commit the docs\n\
         2023-11-14 22:13:20  /w/app  git commit --amend\n"
    );
}

#[test]
fn search_prints_matches_in_search_order() {
    let home = tempfile::tempdir().unwrap();
    let dir = agent(home.path());
    let dir = dir.to_str().unwrap();
    let out = run(
        &mut gjcfs(home.path()),
        &["history", "search", "commit", "--agent-dir", dir],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "2023-11-14 22:18:20  /w/app  commit the docs\n\
         2023-11-14 22:13:20  /w/app  git commit --amend\n"
    );
    // Options may come before the subcommand too.
    let out = run(
        &mut gjcfs(home.path()),
        &[
            "history",
            "--agent-dir",
            dir,
            "--json",
            "search",
            "mit",
            "--limit",
            "2",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let ids: Vec<f64> = stdout(&out)
        .lines()
        .map(|l| {
            json::parse(l)
                .unwrap()
                .as_object()
                .unwrap()
                .get("id")
                .unwrap()
                .as_f64()
                .unwrap()
        })
        .collect();
    assert_eq!(ids, [4.0, 3.0]);
    let out = run(
        &mut gjcfs(home.path()),
        &["history", "search", "zzz", "--agent-dir", dir],
    );
    assert_eq!(out.status.code(), Some(1), "nothing found");
    assert!(stdout(&out).is_empty());
    assert!(
        stderr(&out).contains("no prompt matches \"zzz\""),
        "{}",
        stderr(&out)
    );
    // A query without a word to search for is an error, exit status 2.
    let out = run(
        &mut gjcfs(home.path()),
        &["history", "search", "(( \"", "--agent-dir", dir],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("holds no word to search for"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_agent_directory_comes_from_the_environment_and_home() {
    let home = tempfile::tempdir().unwrap();
    // Default: ~/.gjc/agent.
    seed(&home.path().join(".gjc/agent"));
    let out = run(&mut gjcfs(home.path()), &["history", "--limit", "1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).ends_with("commit the docs\n"));

    // $GJC_CODING_AGENT_DIR, relative to the current directory.
    let other = home.path().join("elsewhere");
    HistoryStorage::open(other.join("history.db"))
        .unwrap()
        .close()
        .unwrap();
    let out = run(
        gjcfs(home.path()).env("GJC_CODING_AGENT_DIR", "elsewhere"),
        &["history"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no prompts recorded"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).is_empty());

    // --agent-dir wins over the environment.
    let out = run(
        gjcfs(home.path()).env("GJC_CODING_AGENT_DIR", "elsewhere"),
        &["history", "--limit", "1", "--agent-dir", ".gjc/agent"],
    );
    assert!(stdout(&out).ends_with("commit the docs\n"));

    // XDG data redirection for the default directory once $XDG_DATA_HOME/gjc exists.
    let xdg = home.path().join("xdg");
    std::fs::create_dir_all(xdg.join("gjc")).unwrap();
    let out = run(
        gjcfs(home.path()).env("XDG_DATA_HOME", &xdg),
        &["history", "add", "kept in xdg"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(
        gjcfs(home.path()).env("XDG_DATA_HOME", &xdg),
        &["history", "--json"],
    );
    assert!(stdout(&out).contains("kept in xdg"));
    assert!(xdg.join("gjc/history.db").exists());
}

#[test]
fn add_records_prompts_with_the_cwd_and_they_survive_exit() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("fresh/agent");
    let dir = dir.to_str().unwrap();
    let out = run(
        &mut gjcfs(home.path()),
        &[
            "history",
            "add",
            " first ",
            "first",
            "second",
            "--agent-dir",
            dir,
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).is_empty() && stderr(&out).is_empty());
    let out = run(
        &mut gjcfs(home.path()),
        &[
            "history",
            "add",
            "third",
            "--cwd",
            "proj",
            "--agent-dir",
            dir,
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));

    let storage = HistoryStorage::open(home.path().join("fresh/agent/history.db")).unwrap();
    let rows = storage.get_recent(10, None).unwrap();
    // The child's current directory as it reads it (symbolic links resolved).
    let here = std::fs::canonicalize(home.path())
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let got: Vec<(&str, Option<&str>)> = rows
        .iter()
        .map(|e| (e.prompt.as_str(), e.cwd.as_deref()))
        .collect();
    let proj = format!("{here}/proj");
    assert_eq!(
        got,
        [
            ("third", Some(proj.as_str())),
            ("second", Some(here.as_str())),
            ("first", Some(here.as_str())),
        ]
    );
}

#[test]
fn errors_are_one_line_and_exit_non_zero() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("agent");
    let dir_str = dir.to_str().unwrap();

    let out = run(
        &mut gjcfs(home.path()),
        &["history", "--agent-dir", dir_str],
    );
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out),
        format!(
            "gjcfs: error: {}: no prompt history database\n",
            dir.join("history.db").display()
        )
    );
    assert!(!dir.exists(), "a read creates nothing");

    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("history.db"), "my notes\n").unwrap();
    for args in [
        vec!["history", "--agent-dir", dir_str],
        vec!["history", "search", "notes", "--agent-dir", dir_str],
        vec!["history", "add", "x", "--agent-dir", dir_str],
    ] {
        let out = run(&mut gjcfs(home.path()), &args);
        assert!(!out.status.success());
        assert_eq!(
            stderr(&out),
            format!(
                "gjcfs: error: {}: not a SQLite database (left unchanged)\n",
                dir.join("history.db").display()
            )
        );
        assert_eq!(
            std::fs::read(dir.join("history.db")).unwrap(),
            b"my notes\n"
        );
    }

    let out = run(
        &mut gjcfs(home.path()),
        &["history", "add", "x", "--json", "--agent-dir", dir_str],
    );
    assert!(!out.status.success());
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
}

/// Under the usual umask 022 a database gjcfs creates, and the files SQLite makes beside it,
/// are owner-only; one that exists keeps its mode.
#[test]
fn a_history_gjcfs_creates_is_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::tempdir().unwrap();
    let agent = home.path().join("agent");
    std::fs::create_dir(&agent).unwrap();
    let db = agent.join("history.db");
    let out = run(
        Command::new("sh")
            .arg("-c")
            .arg("umask 022 && exec \"$0\" \"$@\"")
            .arg(gjcfs_bin())
            .env("HOME", home.path()),
        &[
            "history",
            "add",
            "a private prompt",
            "--agent-dir",
            agent.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&db), 0o600);
    // Its companions while it is open (SQLite gives them the database file's mode).
    let storage = HistoryStorage::open(&db).unwrap();
    storage.add("another", None);
    storage.flush().unwrap();
    for companion in ["history.db-wal", "history.db-shm"] {
        assert_eq!(mode(&agent.join(companion)), 0o600, "{companion}");
    }
    storage.close().unwrap();
    // One that exists, as the agent made it, keeps its mode.
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = run(
        &mut gjcfs(home.path()),
        &[
            "history",
            "add",
            "more",
            "--agent-dir",
            agent.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(mode(&db), 0o644);
}
