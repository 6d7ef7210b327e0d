//! The prompt history store (`HistoryStorage`): schema, adding and batching,
//! durability across drop and process exit, two processes writing at once, compatibility
//! with databases the agent created, the legacy migration, damaged files, and search.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use gjcfs::engine::history::{HistoryEntry, HistoryError, HistoryStorage};
use rusqlite::Connection;

/// The agent's open-time SQL, written out as the agent runs it.
const AGENT_DDL: &str = "
PRAGMA journal_mode=WAL;
PRAGMA synchronous=NORMAL;
PRAGMA busy_timeout=5000;

CREATE TABLE IF NOT EXISTS history (
\tid INTEGER PRIMARY KEY AUTOINCREMENT,
\tprompt TEXT NOT NULL,
\tcreated_at INTEGER NOT NULL DEFAULT (CAST(strftime('%s','now') AS INTEGER)),
\tcwd TEXT
);
CREATE INDEX IF NOT EXISTS idx_history_created_at ON history(created_at DESC);
CREATE INDEX IF NOT EXISTS idx_history_cwd_created_at ON history(cwd, created_at DESC);

CREATE VIRTUAL TABLE IF NOT EXISTS history_fts USING fts5(prompt, content='history', content_rowid='id');

CREATE TRIGGER IF NOT EXISTS history_ai AFTER INSERT ON history BEGIN
\tINSERT INTO history_fts(rowid, prompt) VALUES (new.id, new.prompt);
\tEND;
";

/// An older agent's schema, whose `created_at` default used `unixepoch()`.
const LEGACY_DDL: &str = "
CREATE TABLE history (
\tid INTEGER PRIMARY KEY AUTOINCREMENT,
\tprompt TEXT NOT NULL,
\tcreated_at INTEGER NOT NULL DEFAULT (unixepoch()),
\tcwd TEXT
);
CREATE INDEX idx_history_created_at ON history(created_at DESC);
CREATE INDEX idx_history_cwd_created_at ON history(cwd, created_at DESC);
CREATE VIRTUAL TABLE history_fts USING fts5(prompt, content='history', content_rowid='id');
CREATE TRIGGER history_ai AFTER INSERT ON history BEGIN
\tINSERT INTO history_fts(rowid, prompt) VALUES (new.id, new.prompt);
END;
";

struct Db {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

fn db() -> Db {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent/history.db");
    Db { _dir: dir, path }
}

fn raw(path: &Path) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.busy_timeout(Duration::from_secs(30)).unwrap();
    conn
}

/// A storage holding `rows` (prompt, cwd), added in order and flushed.
fn storage_with(db: &Db, rows: &[(&str, Option<&str>)]) -> HistoryStorage {
    let storage = HistoryStorage::open(&db.path).unwrap();
    for (prompt, cwd) in rows {
        assert!(storage.add(prompt, *cwd), "{prompt} was queued");
    }
    storage.flush().unwrap();
    storage
}

/// Inserts rows with raw SQL, as the agent writes them, with explicit timestamps.
fn insert_raw(conn: &Connection, rows: &[(&str, i64, Option<&str>)]) {
    for (prompt, created_at, cwd) in rows {
        conn.execute(
            "INSERT INTO history (prompt, created_at, cwd) VALUES (?1, ?2, ?3)",
            rusqlite::params![prompt, created_at, cwd],
        )
        .unwrap();
    }
}

fn prompts(entries: &[HistoryEntry]) -> Vec<&str> {
    entries.iter().map(|e| e.prompt.as_str()).collect()
}

fn count(path: &Path) -> i64 {
    raw(path)
        .query_row("SELECT count(*) FROM history", [], |r| r.get(0))
        .unwrap()
}

fn schema(conn: &Connection) -> Vec<(String, String, Option<String>)> {
    let mut stmt = conn
        .prepare("SELECT type, name, sql FROM sqlite_master ORDER BY type, name")
        .unwrap();
    let rows = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap();
    rows.collect::<Result<_, _>>().unwrap()
}

fn has_object(conn: &Connection, kind: &str, name: &str) -> bool {
    conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = ?1 AND name = ?2",
        [kind, name],
        |r| r.get::<_, i64>(0),
    )
    .unwrap()
        == 1
}

fn table_sql(conn: &Connection) -> String {
    conn.query_row(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'history'",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

/// Runs one of the `child_*` tests below in a new process of this test binary.
fn spawn_child(test: &str, envs: &[(&str, String)]) -> std::process::Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    // The test's full name in this binary: its module path without the crate.
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    let name = format!("{module}::{test}");
    cmd.args([name.as_str(), "--exact", "--ignored", "--test-threads=1"]);
    cmd.stdout(std::process::Stdio::null());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// Waits (up to a generous bound, only to avoid hanging) until `done` holds.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

// ---------------------------------------------------------------------------------------
// Schema

#[test]
fn open_creates_the_agents_schema_in_wal_mode() {
    let db = db();
    let storage = HistoryStorage::open(&db.path).unwrap();
    assert_eq!(storage.path(), db.path);
    let conn = raw(&db.path);
    for (kind, name) in [
        ("table", "history"),
        ("table", "history_fts"),
        ("index", "idx_history_created_at"),
        ("index", "idx_history_cwd_created_at"),
        ("trigger", "history_ai"),
    ] {
        assert!(has_object(&conn, kind, name), "{kind} {name}");
    }
    let sql = table_sql(&conn);
    assert!(
        sql.contains("CAST(strftime('%s','now') AS INTEGER)"),
        "{sql}"
    );
    let fts: String = conn
        .query_row(
            "SELECT sql FROM sqlite_master WHERE name = 'history_fts'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        fts.contains("fts5(prompt, content='history', content_rowid='id')"),
        "{fts}"
    );
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    // Only the insert trigger exists.
    let triggers: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'trigger'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(triggers, 1);
}

#[test]
fn reopening_changes_nothing() {
    let db = db();
    storage_with(&db, &[("one", None)]).close().unwrap();
    let before = schema(&raw(&db.path));
    HistoryStorage::open(&db.path).unwrap().close().unwrap();
    assert_eq!(schema(&raw(&db.path)), before);
}

#[test]
fn a_missing_fts_index_is_rebuilt_from_the_table() {
    let db = db();
    std::fs::create_dir_all(db.path.parent().unwrap()).unwrap();
    let conn = raw(&db.path);
    conn.execute_batch(
        "CREATE TABLE history (id INTEGER PRIMARY KEY AUTOINCREMENT, prompt TEXT NOT NULL,
         created_at INTEGER NOT NULL DEFAULT (CAST(strftime('%s','now') AS INTEGER)), cwd TEXT);",
    )
    .unwrap();
    insert_raw(
        &conn,
        &[("refactor the parser", 100, None), ("other", 200, None)],
    );
    let storage = HistoryStorage::open(&db.path).unwrap();
    assert_eq!(
        prompts(&storage.search("refac", 10, None).unwrap()),
        ["refactor the parser"]
    );
    let fts_rows: i64 = conn
        .query_row(
            "SELECT count(*) FROM history_fts WHERE history_fts MATCH 'other'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(fts_rows, 1);
}

// ---------------------------------------------------------------------------------------
// add

#[test]
fn add_trims_skips_empty_and_consecutive_duplicates() {
    let db = db();
    let storage = HistoryStorage::open(&db.path).unwrap();
    assert!(storage.add("  fix the build \n", Some("/a")));
    assert!(!storage.add("fix the build", Some("/a")));
    // The duplicate check is global, not per cwd.
    assert!(!storage.add("\u{feff}fix the build\t", Some("/b")));
    assert!(!storage.add("   \n\t", Some("/a")));
    assert!(!storage.add("", None));
    assert!(storage.add("run tests", None));
    // Not consecutive any more: accepted again.
    assert!(storage.add("fix the build", Some("/b")));
    storage.flush().unwrap();
    let recent = storage.get_recent(10, None).unwrap();
    assert_eq!(
        prompts(&recent),
        ["fix the build", "run tests", "fix the build"]
    );
    assert_eq!(recent[0].cwd.as_deref(), Some("/b"));
    assert_eq!(recent[1].cwd, None);
    assert_eq!(recent[2].cwd.as_deref(), Some("/a"));
    let now = gjcfs::engine::format::time::now_millis() / 1000;
    assert!(recent.iter().all(|e| (e.created_at - now).abs() < 3600));
}

#[test]
fn the_last_prompt_starts_as_the_newest_row() {
    let db = db();
    storage_with(&db, &[("first", None), ("second", None)])
        .close()
        .unwrap();
    let storage = HistoryStorage::open(&db.path).unwrap();
    assert!(!storage.add("second", Some("/x")));
    assert!(storage.add("first", None));
    storage.close().unwrap();
    assert_eq!(count(&db.path), 3);
}

#[test]
fn queued_prompts_are_written_by_the_timer_without_a_flush() {
    let db = db();
    let storage = HistoryStorage::open(&db.path).unwrap();
    for i in 0..50 {
        storage.add(&format!("prompt {i}"), None);
    }
    wait_until("the batch timer", || count(&db.path) == 50);
    let recent = storage.get_recent(1, None).unwrap();
    assert_eq!(prompts(&recent), ["prompt 49"]);
}

#[test]
fn drop_and_close_write_what_is_queued() {
    let db = db();
    {
        let storage = HistoryStorage::open(&db.path).unwrap();
        storage.add("dropped with this queued", None);
    }
    assert_eq!(count(&db.path), 1);
    let storage = HistoryStorage::open(&db.path).unwrap();
    storage.add("closed with this queued", None);
    storage.close().unwrap();
    assert_eq!(count(&db.path), 2);
}

#[test]
fn a_failed_batch_stays_queued_and_is_retried() {
    let db = db();
    let storage = HistoryStorage::open(&db.path).unwrap();
    let conn = raw(&db.path);
    conn.execute_batch(
        "CREATE TRIGGER refuse BEFORE INSERT ON history WHEN new.prompt = 'boom'
         BEGIN SELECT RAISE(ABORT, 'refused'); END;",
    )
    .unwrap();
    storage.add("before", None);
    storage.add("boom", None);
    let err = storage.flush().unwrap_err();
    assert!(matches!(err, HistoryError::Sqlite { .. }), "{err:?}");
    // The whole batch was rolled back.
    assert_eq!(count(&db.path), 0);
    storage.add("after", None);
    conn.execute_batch("DROP TRIGGER refuse").unwrap();
    storage.flush().unwrap();
    assert_eq!(
        prompts(&storage.get_recent(10, None).unwrap()),
        ["after", "boom", "before"]
    );
}

#[test]
fn close_reports_a_final_write_that_failed() {
    let db = db();
    let storage = HistoryStorage::open(&db.path).unwrap();
    raw(&db.path)
        .execute_batch(
            "CREATE TRIGGER refuse BEFORE INSERT ON history
             BEGIN SELECT RAISE(ABORT, 'refused'); END;",
        )
        .unwrap();
    storage.add("lost", None);
    let err = storage.close().unwrap_err();
    assert!(err.to_string().contains("history.db"), "{err}");
    assert_eq!(count(&db.path), 0);
}

#[test]
fn storage_is_shared_between_threads() {
    let db = db();
    let storage = std::sync::Arc::new(HistoryStorage::open(&db.path).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let storage = std::sync::Arc::clone(&storage);
            std::thread::spawn(move || {
                for i in 0..25 {
                    storage.add(&format!("thread {t} prompt {i}"), None);
                    if i % 10 == 0 {
                        storage.search("prompt", 5, None).unwrap();
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    storage.flush().unwrap();
    assert_eq!(count(&db.path), 100);
}

// ---------------------------------------------------------------------------------------
// Processes

/// Child of `prompts_queued_at_process_exit_are_written`: queues prompts, leaks the
/// storage (so no drop runs) and exits the process.
#[test]
#[ignore = "run in a child process by another test"]
fn child_add_then_exit() {
    let Ok(path) = std::env::var("GJCFS_TEST_HISTORY_DB") else {
        return;
    };
    let storage = HistoryStorage::open(path).unwrap();
    for i in 0..3 {
        storage.add(&format!("queued at exit {i}"), Some("/exit"));
    }
    std::mem::forget(storage);
    std::process::exit(0);
}

#[test]
fn prompts_queued_at_process_exit_are_written() {
    let db = db();
    let status = spawn_child(
        "child_add_then_exit",
        &[("GJCFS_TEST_HISTORY_DB", db.path.display().to_string())],
    )
    .wait()
    .unwrap();
    assert!(status.success());
    let storage = HistoryStorage::open(&db.path).unwrap();
    assert_eq!(
        prompts(&storage.get_recent(10, Some("/exit")).unwrap()),
        ["queued at exit 2", "queued at exit 1", "queued at exit 0"]
    );
}

const WRITES_PER_CHILD: usize = 300;

/// Child of `two_processes_write_at_once`: waits for the start signal, then adds and
/// flushes prompts one by one (one transaction each).
#[test]
#[ignore = "run in a child process by another test"]
fn child_writer() {
    let (Ok(path), Ok(name), Ok(go)) = (
        std::env::var("GJCFS_TEST_HISTORY_DB"),
        std::env::var("GJCFS_TEST_WRITER"),
        std::env::var("GJCFS_TEST_GO"),
    ) else {
        return;
    };
    wait_until("the start signal", || Path::new(&go).exists());
    let storage = HistoryStorage::open(path).unwrap();
    for i in 0..WRITES_PER_CHILD {
        assert!(storage.add(&format!("{name} prompt {i}"), Some(&name)));
        storage.flush().unwrap();
        if i % 50 == 0 {
            storage.search("prompt", 10, None).unwrap();
        }
    }
    storage.close().unwrap();
}

#[test]
fn two_processes_write_at_once() {
    let db = db();
    let go = db._dir.path().join("go");
    let children: Vec<_> = ["alpha", "beta"]
        .iter()
        .map(|name| {
            spawn_child(
                "child_writer",
                &[
                    ("GJCFS_TEST_HISTORY_DB", db.path.display().to_string()),
                    ("GJCFS_TEST_WRITER", (*name).to_owned()),
                    ("GJCFS_TEST_GO", go.display().to_string()),
                ],
            )
        })
        .collect();
    std::fs::write(&go, b"").unwrap();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let conn = raw(&db.path);
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    conn.execute(
        "INSERT INTO history_fts(history_fts) VALUES('integrity-check')",
        [],
    )
    .unwrap();
    assert_eq!(count(&db.path), 2 * WRITES_PER_CHILD as i64);
    let storage = HistoryStorage::open(&db.path).unwrap();
    for name in ["alpha", "beta"] {
        let rows = storage.get_recent(1000, Some(name)).unwrap();
        assert_eq!(rows.len(), WRITES_PER_CHILD);
        // Each writer's prompts are in its own order (newest first).
        for (k, row) in rows.iter().enumerate() {
            assert_eq!(
                row.prompt,
                format!("{name} prompt {}", WRITES_PER_CHILD - 1 - k)
            );
        }
        let found = storage.search(&format!("{name} 299"), 10, None).unwrap();
        assert_eq!(prompts(&found), [format!("{name} prompt 299").as_str()]);
    }
}

// ---------------------------------------------------------------------------------------
// Compatibility with the agent's databases

#[test]
fn a_database_created_by_the_agents_sql_opens_and_searches_unchanged() {
    let db = db();
    std::fs::create_dir_all(db.path.parent().unwrap()).unwrap();
    let conn = raw(&db.path);
    conn.execute_batch(AGENT_DDL).unwrap();
    insert_raw(
        &conn,
        &[
            ("git commit --amend", 1_700_000_000, Some("/w/app")),
            ("explain the borrow checker", 1_700_000_100, Some("/w/lib")),
            ("submit the form", 1_700_000_100, None),
            ("commit the docs", 1_700_000_050, Some("/w/app")),
        ],
    );
    // As the agent inserts: the default timestamp.
    conn.execute(
        "INSERT INTO history (prompt, cwd) VALUES (?1, ?2)",
        ["latest prompt", "/w/app"],
    )
    .unwrap();
    let before = schema(&conn);

    let storage = HistoryStorage::open(&db.path).unwrap();
    assert_eq!(schema(&conn), before);
    let recent = storage.get_recent(10, None).unwrap();
    assert_eq!(
        prompts(&recent),
        [
            "latest prompt",
            "submit the form",
            "explain the borrow checker",
            "commit the docs",
            "git commit --amend"
        ]
    );
    assert_eq!(
        recent[1],
        HistoryEntry {
            id: 3,
            prompt: "submit the form".into(),
            created_at: 1_700_000_100,
            cwd: None
        }
    );
    assert_eq!(
        prompts(&storage.get_recent(10, Some("/w/app")).unwrap()),
        ["latest prompt", "commit the docs", "git commit --amend"]
    );
    // No token starts with "mit": every hit comes from the substring step.
    assert_eq!(
        prompts(&storage.search("mit", 10, None).unwrap()),
        ["submit the form", "commit the docs", "git commit --amend"]
    );
    assert_eq!(
        prompts(&storage.search("commit", 10, None).unwrap()),
        ["commit the docs", "git commit --amend"]
    );
    // The last row is the duplicate reference; new rows go through the agent's trigger.
    assert!(!storage.add("latest prompt", None));
    storage.add("borrow more", Some("/w/lib"));
    storage.close().unwrap();
    let found: Vec<i64> = conn
        .prepare("SELECT rowid FROM history_fts WHERE history_fts MATCH 'borrow' ORDER BY rowid")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(found, [2, 6]);
    assert_eq!(schema(&conn), before);
}

#[test]
fn a_legacy_unixepoch_table_is_migrated() {
    let db = db();
    std::fs::create_dir_all(db.path.parent().unwrap()).unwrap();
    let conn = raw(&db.path);
    conn.execute_batch(LEGACY_DDL).unwrap();
    insert_raw(
        &conn,
        &[
            ("oldest prompt", 1_600_000_000, Some("/p")),
            ("middle prompt", 1_650_000_000, None),
            ("newest prompt", 1_690_000_000, Some("/p")),
        ],
    );
    // A gap in the ids, which must survive.
    conn.execute(
        "INSERT INTO history (id, prompt, created_at, cwd) VALUES (10, 'gap prompt', 1500000000, '/q')",
        [],
    )
    .unwrap();
    let before = HistoryStorage::open(&db.path)
        .map(|s| s.get_recent(10, None).unwrap())
        .unwrap();

    assert!(!table_sql(&conn).contains("unixepoch("));
    assert!(table_sql(&conn).contains("CAST(strftime('%s','now') AS INTEGER)"));
    assert!(!has_object(&conn, "table", "history_legacy"));
    assert!(has_object(&conn, "index", "idx_history_created_at"));
    assert!(has_object(&conn, "table", "history_fts"));
    assert!(has_object(&conn, "trigger", "history_ai"));
    // The agent's quirk: the cwd index went with the legacy table and comes back on the
    // next open.
    assert!(!has_object(&conn, "index", "idx_history_cwd_created_at"));
    assert_eq!(
        prompts(&before),
        [
            "newest prompt",
            "middle prompt",
            "oldest prompt",
            "gap prompt"
        ]
    );
    assert_eq!(before[3].id, 10);
    assert_eq!(before[3].created_at, 1_500_000_000);
    assert_eq!(before[3].cwd.as_deref(), Some("/q"));

    let storage = HistoryStorage::open(&db.path).unwrap();
    assert!(has_object(&conn, "index", "idx_history_cwd_created_at"));
    assert_eq!(storage.get_recent(10, None).unwrap(), before);
    assert_eq!(
        prompts(&storage.search("gap", 10, None).unwrap()),
        ["gap prompt"]
    );
    // New rows get the new default and reach the index.
    storage.add("after migration", None);
    storage.flush().unwrap();
    let added = &storage.search("migration", 10, None).unwrap()[0];
    assert_eq!(added.id, 11);
    let now = gjcfs::engine::format::time::now_millis() / 1000;
    assert!((added.created_at - now).abs() < 3600);
}

// ---------------------------------------------------------------------------------------
// Damaged files

fn siblings(path: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_file_that_is_not_sqlite_is_an_error_and_left_alone() {
    let db = db();
    std::fs::create_dir_all(db.path.parent().unwrap()).unwrap();
    let content = b"these are my notes, not a database\n".repeat(200);
    std::fs::write(&db.path, &content).unwrap();
    let err = HistoryStorage::open(&db.path).err().unwrap();
    assert!(matches!(err, HistoryError::NotADatabase { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "{}: not a SQLite database (left unchanged)",
            db.path.display()
        )
    );
    assert_eq!(std::fs::read(&db.path).unwrap(), content);
    assert_eq!(siblings(&db.path), ["history.db"]);
}

#[test]
fn a_corrupt_database_is_an_error_and_left_alone() {
    let db = db();
    storage_with(&db, &[("one", None), ("two", None)])
        .close()
        .unwrap();
    let mut bytes = std::fs::read(&db.path).unwrap();
    // Page 1's b-tree header (the schema table) starts after the 100-byte file header.
    bytes[100..108].copy_from_slice(&[0xff; 8]);
    std::fs::write(&db.path, &bytes).unwrap();
    let err = HistoryStorage::open(&db.path).err().unwrap();
    assert!(matches!(err, HistoryError::Corrupt { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "{}: the database is corrupt (left unchanged)",
            db.path.display()
        )
    );
    assert_eq!(std::fs::read(&db.path).unwrap(), bytes);
}

// ---------------------------------------------------------------------------------------
// getRecent

#[test]
fn recent_orders_by_time_then_id_and_clamps_the_limit() {
    let db = db();
    let storage = HistoryStorage::open(&db.path).unwrap();
    let conn = raw(&db.path);
    insert_raw(
        &conn,
        &[
            ("b", 200, None),
            ("a", 300, None),
            ("c", 200, None),
            ("d", 100, None),
        ],
    );
    assert_eq!(
        prompts(&storage.get_recent(10, None).unwrap()),
        ["a", "c", "b", "d"]
    );
    assert_eq!(prompts(&storage.get_recent(2, None).unwrap()), ["a", "c"]);
    assert!(storage.get_recent(0, None).unwrap().is_empty());
    let tx = conn.unchecked_transaction().unwrap();
    for i in 0..1005 {
        tx.execute(
            "INSERT INTO history (prompt, created_at) VALUES (?1, 50)",
            [format!("bulk {i}")],
        )
        .unwrap();
    }
    tx.commit().unwrap();
    assert_eq!(storage.get_recent(5000, None).unwrap().len(), 1000);
    assert_eq!(storage.search("bulk", 5000, None).unwrap().len(), 1000);
}

// ---------------------------------------------------------------------------------------
// search (the agent's history-storage-search tests)

#[test]
fn query_is_tokenised_like_the_index() {
    let db = db();
    let storage = storage_with(
        &db,
        &[("run git commit --amend now", None), ("other", None)],
    );
    assert_eq!(
        prompts(&storage.search("git-commit", 10, None).unwrap()),
        ["run git commit --amend now"]
    );
}

#[test]
fn infix_tokens_match_through_the_substring_fallback_and_tokens_are_anded() {
    let db = db();
    let storage = storage_with(
        &db,
        &[
            ("git commit", None),
            ("submit the form", None),
            ("commit the docs", None),
            ("unrelated", None),
        ],
    );
    assert_eq!(
        prompts(&storage.search("mit", 10, None).unwrap()),
        ["commit the docs", "submit the form", "git commit"]
    );
    assert_eq!(
        prompts(&storage.search("mit doc", 10, None).unwrap()),
        ["commit the docs"]
    );
    assert!(storage.search("mit zzz", 10, None).unwrap().is_empty());
}

#[test]
fn fts_matches_come_before_substring_matches_and_each_row_once() {
    let db = db();
    let storage = storage_with(
        &db,
        &[
            ("commit now", None),
            ("recommend it", None),
            ("compile", None),
        ],
    );
    let found = storage.search("com", 10, None).unwrap();
    assert_eq!(prompts(&found), ["compile", "commit now", "recommend it"]);
    let ids: std::collections::HashSet<i64> = found.iter().map(|e| e.id).collect();
    assert_eq!(ids.len(), 3);
}

#[test]
fn substring_matching_ignores_ascii_case_only() {
    let db = db();
    let storage = storage_with(&db, &[("Recommit", None), ("xÉCOLEx", None)]);
    assert_eq!(
        prompts(&storage.search("MIT", 10, None).unwrap()),
        ["Recommit"]
    );
    // LIKE folds ASCII only: "écol" does not match "ÉCOL" inside a word.
    assert!(storage.search("écol", 10, None).unwrap().is_empty());
    // The full-text index folds any case and diacritics (prefix match on a token).
    let storage2 = storage_with(&db, &[("ÉCOLE normale", None)]);
    assert_eq!(
        prompts(&storage2.search("ecole", 10, None).unwrap()),
        ["ÉCOLE normale"]
    );
}

#[test]
fn a_query_without_letters_or_digits_finds_nothing() {
    let db = db();
    let storage = storage_with(&db, &[("--- !!!", None), ("a-b", None)]);
    assert!(storage.search("--- !!!", 10, None).unwrap().is_empty());
    assert!(storage.search("", 10, None).unwrap().is_empty());
    assert!(storage.search("a", 0, None).unwrap().is_empty());
}

#[test]
fn fts_hits_that_fill_the_limit_are_returned_newest_first() {
    let db = db();
    let storage = storage_with(
        &db,
        &[
            ("alpha one", None),
            ("alpha two", None),
            ("alpha three", None),
            ("xalphax substring only", None),
        ],
    );
    assert_eq!(
        prompts(&storage.search("alpha", 2, None).unwrap()),
        ["alpha three", "alpha two"]
    );
    assert_eq!(
        prompts(&storage.search("alpha", 4, None).unwrap()),
        [
            "alpha three",
            "alpha two",
            "alpha one",
            "xalphax substring only"
        ]
    );
}

#[test]
fn short_tokens_match_and_narrow_with_infix_tokens() {
    let db = db();
    let storage = storage_with(
        &db,
        &[
            ("go build ./...", None),
            ("go test ./...", None),
            ("golang lint", None),
            ("rebuild all", None),
        ],
    );
    assert_eq!(
        prompts(&storage.search("go", 10, None).unwrap()),
        ["golang lint", "go test ./...", "go build ./..."]
    );
    assert_eq!(
        prompts(&storage.search("go uil", 10, None).unwrap()),
        ["go build ./..."]
    );
}

#[test]
fn recent_and_search_filter_by_cwd() {
    let db = db();
    let storage = storage_with(
        &db,
        &[
            ("fix the parser", Some("/a")),
            ("fix the lexer", Some("/b")),
            ("prefix tests", Some("/b")),
            ("fix docs", None),
        ],
    );
    assert_eq!(
        prompts(&storage.get_recent(10, Some("/a")).unwrap()),
        ["fix the parser"]
    );
    assert_eq!(
        prompts(&storage.search("fix", 10, Some("/b")).unwrap()),
        ["fix the lexer", "prefix tests"]
    );
    assert_eq!(
        prompts(&storage.search("fix", 10, None).unwrap()),
        [
            "fix docs",
            "fix the lexer",
            "fix the parser",
            "prefix tests"
        ]
    );
    assert!(storage.search("fix", 10, Some("/c")).unwrap().is_empty());
}

#[test]
fn non_ascii_prompts_are_found() {
    let db = db();
    let storage = storage_with(
        &db,
        &[("커밋 메시지를 고쳐줘", None), ("日本語のテスト", None)],
    );
    assert_eq!(
        prompts(&storage.search("커밋", 10, None).unwrap()),
        ["커밋 메시지를 고쳐줘"]
    );
    assert_eq!(
        prompts(&storage.search("テスト", 10, None).unwrap()),
        ["日本語のテスト"]
    );
}

#[test]
fn a_failing_full_text_step_falls_back_to_substrings() {
    let db = db();
    let storage = storage_with(&db, &[("deploy the site", None)]);
    raw(&db.path)
        .execute_batch("DROP TRIGGER history_ai; DROP TABLE history_fts;")
        .unwrap();
    assert_eq!(
        prompts(&storage.search("deploy", 10, None).unwrap()),
        ["deploy the site"]
    );
}

#[test]
fn every_prompt_is_listed_oldest_first_beyond_the_recent_limit() {
    let db = db();
    let storage = HistoryStorage::open(&db.path).unwrap();
    let conn = raw(&db.path);
    // Timestamps out of id order: the order is by time, then id.
    let owned: Vec<(String, i64)> = (0..1500)
        .map(|i| (format!("prompt {i}"), 1_000_000 + (i * 7919) % 1500))
        .collect();
    let rows: Vec<(&str, i64, Option<&str>)> = owned
        .iter()
        .map(|(p, t)| (p.as_str(), *t, Some("/w")))
        .collect();
    insert_raw(&conn, &rows);
    let mut all = Vec::new();
    storage.for_each_oldest_first(|e| all.push(e)).unwrap();
    assert_eq!(all.len(), 1500);
    assert!(all
        .windows(2)
        .all(|w| (w[0].created_at, w[0].id) < (w[1].created_at, w[1].id)));
    let mut recent = storage.get_recent(1000, None).unwrap();
    recent.reverse();
    assert_eq!(all[500..], recent[..]);
}
