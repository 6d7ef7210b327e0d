//! The touches table through the index's public API: what a session's records touched,
//! kept up to date through appends, patches, rewrites and removal, and the questions asked
//! of it.

use std::io::Write;
use std::path::PathBuf;

use super::*;

const CWD: &str = "/w/proj";

fn header(cwd: &str) -> String {
    format!(
        "{{\"type\":\"session\",\"version\":5,\"id\":\"s1\",\"timestamp\":\"2026-03-01T10:00:00.000Z\",\"cwd\":\"{cwd}\"}}\n"
    )
}

/// An assistant message `id` under `parent` at second `sec`, calling each (tool, path).
fn calls(id: &str, parent: Option<&str>, sec: u32, calls: &[(&str, &str)]) -> String {
    let blocks: Vec<String> = calls
        .iter()
        .enumerate()
        .map(|(n, (tool, path))| {
            format!(
                "{{\"type\":\"toolCall\",\"id\":\"c{n}\",\"name\":\"{tool}\",\"arguments\":{{\"path\":\"{path}\",\"content\":\"x\"}}}}"
            )
        })
        .collect();
    let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
    format!(
        "{{\"type\":\"message\",\"id\":\"{id}\",\"parentId\":{parent},\"timestamp\":\"2026-03-01T10:00:{sec:02}.000Z\",\"message\":{{\"role\":\"assistant\",\"content\":[{}]}}}}\n",
        blocks.join(",")
    )
}

/// A session holding the lines, in a directory of its own, and an index of it.
struct Fixture {
    dir: tempfile::TempDir,
    index: SearchIndex,
}

impl Fixture {
    fn new(text: &str) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sessions")).unwrap();
        std::fs::write(dir.path().join("sessions/s1.jsonl"), text).unwrap();
        let index = SearchIndex::open(&dir.path().join("index")).unwrap();
        let fixture = Fixture { dir, index };
        fixture.update();
        fixture
    }

    fn file(&self) -> PathBuf {
        self.dir.path().join("sessions/s1.jsonl")
    }

    fn update(&self) -> Vec<Change> {
        let dirs = [self.dir.path().join("sessions")];
        let report = self.index.update_dirs(&dirs, 1, &|_| {}).unwrap();
        assert!(report.failed.is_empty(), "{:?}", report.failed);
        report.changes.into_iter().map(|c| c.change).collect()
    }

    fn append(&self, text: &str) {
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(self.file())
            .unwrap();
        file.write_all(text.as_bytes()).unwrap();
    }

    /// (entry, action, source, resolved) of every touch of `path`, newest first.
    fn touched(&self, path: &str) -> Vec<(String, Action, String, String)> {
        let filters = TouchFilters {
            limit: 1000,
            ..TouchFilters::default()
        };
        let found = self.index.files_touched(path, &filters).unwrap();
        assert_eq!(found.total, found.touches.len());
        found
            .touches
            .into_iter()
            .map(|t| (t.entry_id.unwrap(), t.action, t.source, t.resolved))
            .collect()
    }

    /// Every row of the touches table with its document's entry and time, in order.
    fn table(&self) -> Vec<(String, String, String, String, String, Option<i64>)> {
        let inner = self.index.inner.lock();
        let mut stmt = inner
            .conn
            .prepare(
                "SELECT coalesce(d.entry_id, ''), t.action, t.source, t.written, t.resolved, \
                 d.time_ms FROM touches t JOIN docs d ON d.id = t.doc ORDER BY d.seq, t.rowid",
            )
            .unwrap();
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                ))
            })
            .unwrap();
        rows.collect::<Result<_, _>>().unwrap()
    }
}

fn touch(
    entry: &str,
    action: Action,
    source: &str,
    resolved: &str,
) -> (String, Action, String, String) {
    (entry.into(), action, source.into(), native(resolved))
}

/// A path as the platform's lexical normalization writes it (`\` on Windows).
fn native(path: &str) -> String {
    path.replace('/', std::path::MAIN_SEPARATOR_STR)
}

#[test]
fn tool_calls_are_touches_of_their_resolved_paths() {
    let text = header(CWD)
        + &calls("a1", None, 1, &[("read", "src/main.rs"), ("bash", "src/main.rs")])
        + &calls("a2", Some("a1"), 2, &[("edit", "./src/../src/main.rs"), ("write", "/abs/out.txt")])
        + "{\"type\":\"message\",\"id\":\"u1\",\"parentId\":\"a2\",\"timestamp\":\"2026-03-01T10:00:03.000Z\",\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"toolCall\",\"name\":\"read\",\"arguments\":{\"path\":\"src/main.rs\"}}]}}\n";
    let f = Fixture::new(&text);
    assert_eq!(
        f.touched("/w/proj/src/main.rs"),
        [
            touch("a2", Action::Changed, "edit", "/w/proj/src/main.rs"),
            touch("a1", Action::Read, "read", "/w/proj/src/main.rs"),
        ]
    );
    assert_eq!(
        f.touched("/abs/out.txt"),
        [touch("a2", Action::Changed, "write", "/abs/out.txt")]
    );
    // The path as written is kept beside the resolved one, with the entry's time.
    let table = f.table();
    assert_eq!(table.len(), 3, "{table:?}");
    assert_eq!(table[1].3, "./src/../src/main.rs");
    assert_eq!(table[1].5, Some(1_772_359_202_000));
    // Relative and unnormalized query paths are normalized the same way.
    assert_eq!(f.touched("/w/proj/./src//main.rs").len(), 2);
    assert!(f.touched("src/main.rs").is_empty());
}

#[test]
fn compactions_and_branch_summaries_touch_their_file_lists() {
    let text = header(CWD)
        + &calls("a1", None, 1, &[("read", "a.rs")])
        + "{\"type\":\"compaction\",\"id\":\"c1\",\"parentId\":\"a1\",\"timestamp\":\"2026-03-01T10:00:02.000Z\",\"summary\":\"s\",\"firstKeptEntryId\":\"a1\",\"tokensBefore\":5,\"details\":{\"readFiles\":[\"a.rs\",\"/x/b.rs\"],\"modifiedFiles\":[\"c.rs\"]}}\n"
        + "{\"type\":\"branch_summary\",\"id\":\"b1\",\"parentId\":\"c1\",\"timestamp\":\"2026-03-01T10:00:03.000Z\",\"fromId\":\"a1\",\"summary\":\"s\",\"details\":{\"readFiles\":[\"c.rs\"]}}\n";
    let f = Fixture::new(&text);
    assert_eq!(
        f.touched("/w/proj/a.rs"),
        [
            touch("c1", Action::Read, "compaction", "/w/proj/a.rs"),
            touch("a1", Action::Read, "read", "/w/proj/a.rs"),
        ]
    );
    assert_eq!(
        f.touched("/w/proj/c.rs"),
        [
            touch("b1", Action::Read, "branch_summary", "/w/proj/c.rs"),
            touch("c1", Action::Changed, "compaction", "/w/proj/c.rs"),
        ]
    );
    assert_eq!(
        f.touched("/x/b.rs"),
        [touch("c1", Action::Read, "compaction", "/x/b.rs")]
    );
}

#[test]
fn a_directory_names_every_path_under_it_and_nothing_beside_it() {
    let text = header(CWD)
        + &calls("a1", None, 1, &[("read", "src/a.rs"), ("read", "srcx/b.rs")])
        // Names that sort between `src` and `src/`.
        + &calls("a0", Some("a1"), 1, &[("read", "src.rs"), ("read", "src-old/e.rs")])
        + &calls("a2", Some("a0"), 2, &[("write", "src"), ("edit", "src/deep/c.rs")])
        + &calls("a3", Some("a2"), 3, &[("read", "/other/src/d.rs")]);
    let f = Fixture::new(&text);
    let entries =
        |path: &str| -> Vec<String> { f.touched(path).into_iter().map(|t| t.3).collect() };
    assert_eq!(
        entries("/w/proj/src"),
        ["/w/proj/src/deep/c.rs", "/w/proj/src", "/w/proj/src/a.rs"].map(native)
    );
    assert_eq!(entries("/w/proj/src/"), entries("/w/proj/src"));
    assert_eq!(
        entries("/w/proj/src/deep"),
        [native("/w/proj/src/deep/c.rs")]
    );
    assert_eq!(entries("/w/proj/sr"), Vec::<String>::new());
    assert_eq!(entries("/w/proj/src.rs"), [native("/w/proj/src.rs")]);
    assert_eq!(entries("/w/proj").len(), 6);
    assert_eq!(entries("/").len(), 7);
}

#[test]
fn touches_come_newest_first_within_the_limit_and_say_how_many_there_are() {
    // a3 is written last but is the oldest; a2's two calls share its time.
    let text = header(CWD)
        + &calls("a1", None, 2, &[("read", "f.rs")])
        + &calls("a2", Some("a1"), 5, &[("read", "f.rs"), ("edit", "f.rs")])
        + &calls("a3", Some("a2"), 1, &[("write", "f.rs")]);
    let f = Fixture::new(&text);
    assert_eq!(
        f.touched("/w/proj/f.rs"),
        [
            touch("a2", Action::Changed, "edit", "/w/proj/f.rs"),
            touch("a2", Action::Read, "read", "/w/proj/f.rs"),
            touch("a1", Action::Read, "read", "/w/proj/f.rs"),
            touch("a3", Action::Changed, "write", "/w/proj/f.rs"),
        ]
    );
    let ask = |filters: TouchFilters| f.index.files_touched("/w/proj/f.rs", &filters).unwrap();
    let two = ask(TouchFilters {
        limit: 2,
        ..TouchFilters::default()
    });
    assert_eq!(two.total, 4);
    assert_eq!(two.touches.len(), 2);
    assert_eq!(two.touches[1].action, Action::Read);
    let none = ask(TouchFilters {
        limit: 0,
        ..TouchFilters::default()
    });
    assert_eq!((none.total, none.touches.len()), (4, 0));
    // 10:00:02 up to 10:00:05, excluded.
    let window = ask(TouchFilters {
        since_ms: Some(1_772_359_202_000),
        until_ms: Some(1_772_359_205_000),
        ..TouchFilters::default()
    });
    assert_eq!(window.total, 1);
    assert_eq!(window.touches[0].entry_id.as_deref(), Some("a1"));
    let elsewhere = ask(TouchFilters {
        cwd: Some("/w/other".into()),
        ..TouchFilters::default()
    });
    assert_eq!(elsewhere, Touches::default());
    let here = ask(TouchFilters {
        cwd: Some(CWD.into()),
        ..TouchFilters::default()
    });
    assert_eq!(here.total, 4);
    let t = &here.touches[0];
    assert_eq!((t.session_id.as_str(), t.cwd.as_str()), ("s1", CWD));
    assert_eq!(t.path, f.file());
    assert!(t.on_leaf_path);
}

#[test]
fn appended_entries_add_their_touches_and_patches_replace_them() {
    let f = Fixture::new(&(header(CWD) + &calls("a1", None, 1, &[("read", "a.rs")])));
    f.append(&calls("a2", Some("a1"), 2, &[("edit", "a.rs")]));
    assert_eq!(
        f.update(),
        [Change::Appended {
            records: 1,
            edited: 0
        }]
    );
    assert_eq!(f.touched("/w/proj/a.rs").len(), 2);
    // A patch of an indexed message, and of one appended with it.
    let patch = |id: &str, path: &str| {
        format!(
            "{{\"type\":\"entry_patch\",\"entryId\":\"{id}\",\"patch\":{{\"message\":{{\"role\":\"assistant\",\"content\":[{{\"type\":\"toolCall\",\"id\":\"c\",\"name\":\"write\",\"arguments\":{{\"path\":\"{path}\",\"content\":\"y\"}}}}]}}}}}}\n"
        )
    };
    f.append(
        &(patch("a1", "b.rs")
            + &calls("a3", Some("a2"), 3, &[("read", "c.rs")])
            + &patch("a3", "d.rs")),
    );
    assert_eq!(
        f.update(),
        [Change::Appended {
            records: 1,
            edited: 1
        }]
    );
    assert_eq!(
        f.touched("/w/proj"),
        [
            touch("a3", Action::Changed, "write", "/w/proj/d.rs"),
            touch("a2", Action::Changed, "edit", "/w/proj/a.rs"),
            touch("a1", Action::Changed, "write", "/w/proj/b.rs"),
        ]
    );
    // What a whole read of the file gives.
    let appended = f.table();
    let fresh = SearchIndex::open_in_memory().unwrap();
    fresh.update(&[f.file()], 1, &|_| {}).unwrap();
    let whole = Fixture {
        dir: tempfile::tempdir().unwrap(),
        index: fresh,
    };
    assert_eq!(appended, whole.table());
}

#[test]
fn a_file_read_again_has_its_touches_replaced_and_a_removed_one_none() {
    let f = Fixture::new(&(header(CWD) + &calls("a1", None, 1, &[("read", "old.rs")])));
    // Rewritten: another file at the path, read whole.
    std::fs::write(
        f.file(),
        header(CWD) + &calls("a1", None, 1, &[("read", "new.rs")]),
    )
    .unwrap();
    assert_eq!(f.update(), [Change::Reindexed]);
    assert!(f.touched("/w/proj/old.rs").is_empty());
    assert_eq!(f.touched("/w/proj/new.rs").len(), 1);
    // A header patch that moves the session elsewhere resolves its paths anew.
    f.append("{\"type\":\"header_patch\",\"patch\":{\"cwd\":\"/w/moved\"}}\n");
    assert_eq!(f.update(), [Change::Reindexed]);
    assert!(f.touched("/w/proj/new.rs").is_empty());
    assert_eq!(f.touched("/w/moved/new.rs").len(), 1);
    std::fs::remove_file(f.file()).unwrap();
    assert_eq!(f.update(), [Change::Removed]);
    assert!(f.touched("/").is_empty());
    assert!(f.table().is_empty());
    let rows: i64 = f
        .index
        .inner
        .lock()
        .conn
        .query_row("SELECT count(*) FROM touches", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 0);
}

#[test]
fn an_entry_off_the_leaf_path_says_so_and_the_dirs_variant_brings_the_index_up_to_date() {
    // a2 and a3 are siblings; the leaf is a3.
    let text = header(CWD)
        + &calls("a1", None, 1, &[("read", "f.rs")])
        + &calls("a2", Some("a1"), 2, &[("edit", "f.rs")])
        + &calls("a3", Some("a1"), 3, &[("write", "f.rs")]);
    let f = Fixture::new(&text);
    let dirs = [f.dir.path().join("sessions")];
    let ask = || {
        f.index
            .files_touched_dirs(&dirs, 1, &|_| {}, "/w/proj/f.rs", &TouchFilters::default())
            .unwrap()
    };
    let (report, found) = ask();
    assert!(report.changes.is_empty());
    let leaf: Vec<(&str, bool)> = found
        .touches
        .iter()
        .map(|t| (t.entry_id.as_deref().unwrap(), t.on_leaf_path))
        .collect();
    assert_eq!(leaf, [("a3", true), ("a2", false), ("a1", true)]);
    f.append(&calls("a4", Some("a2"), 4, &[("read", "f.rs")]));
    let (report, found) = ask();
    assert_eq!(report.changes.len(), 1);
    let leaf: Vec<(&str, bool)> = found
        .touches
        .iter()
        .map(|t| (t.entry_id.as_deref().unwrap(), t.on_leaf_path))
        .collect();
    assert_eq!(
        leaf,
        [("a4", true), ("a3", false), ("a2", true), ("a1", true)]
    );
}

// The names are asked by prefix as the index keeps it, with the platform's separator.
#[cfg(unix)]
#[test]
fn the_names_under_a_directory_are_the_next_components_of_its_touched_paths_once_each() {
    let text = header(CWD)
        + &calls("a1", None, 1, &[("read", "src/a.rs"), ("read", "srcx/b.rs")])
        // Names that sort between `src` and `src/`, and a path touched twice.
        + &calls("a0", Some("a1"), 1, &[("read", "src.rs"), ("read", "src-old/e.rs"), ("read", "src/a.rs")])
        + &calls("a2", Some("a0"), 2, &[("write", "src"), ("edit", "src/deep/c.rs"), ("read", "src/z/y/x.rs")])
        + &calls("a3", Some("a2"), 3, &[("read", "/other/src/d.rs"), ("read", "~/notes.md"), ("read", "~/.config/app.toml")]);
    let f = Fixture::new(&text);
    let names = |parent: &str| f.index.touched_names(parent).unwrap();
    let none: Vec<String> = Vec::new();
    assert_eq!(names("/w/proj/"), ["src", "src-old", "src.rs", "srcx"]);
    assert_eq!(names("/w/proj/src/"), ["a.rs", "deep", "z"]);
    assert_eq!(names("/w/proj/src/z/"), ["y"]);
    assert_eq!(names("/w/proj/src/z/y/"), ["x.rs"]);
    // A touched file holds no names, nor does a prefix of a name.
    assert_eq!(names("/w/proj/src/a.rs/"), none);
    assert_eq!(names("/w/proj/sr/"), none);
    assert_eq!(names("/"), ["other", "w"]);
    assert_eq!(names("/w/"), ["proj"]);
    // From the start of every path: the absolute ones begin with an empty name, left out;
    // the paths written from a home directory begin with `~`.
    assert_eq!(names(""), ["~"]);
    assert_eq!(names("~/"), [".config", "notes.md"]);
    // Each name's touches are what `files_touched` finds under it.
    for name in names("/w/proj/src/") {
        assert!(
            !f.touched(&format!("/w/proj/src/{name}")).is_empty(),
            "{name}"
        );
    }
}

// The names are asked by prefix as the index keeps it, with the platform's separator.
#[cfg(unix)]
#[test]
fn the_names_come_from_the_live_copy_of_a_session_and_follow_its_changes() {
    let f = Fixture::new(&(header(CWD) + &calls("a1", None, 1, &[("read", "live/a.rs")])));
    // An older copy of the same session, elsewhere in the store: not the live copy.
    let copy = f.dir.path().join("sessions/s1-copy.jsonl");
    std::fs::write(
        &copy,
        header(CWD) + &calls("a1", None, 1, &[("read", "stale/b.rs")]),
    )
    .unwrap();
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
    std::fs::File::options()
        .write(true)
        .open(&copy)
        .unwrap()
        .set_modified(old)
        .unwrap();
    assert_eq!(f.update(), [Change::Added]);
    assert_eq!(f.index.touched_names("/w/proj/").unwrap(), ["live"]);
    // The live copy appends: its new paths are named; removed, the copy is the live one.
    f.append(&calls("a2", Some("a1"), 2, &[("edit", "new/c.rs")]));
    f.update();
    assert_eq!(f.index.touched_names("/w/proj/").unwrap(), ["live", "new"]);
    std::fs::remove_file(f.file()).unwrap();
    f.update();
    assert_eq!(f.index.touched_names("/w/proj/").unwrap(), ["stale"]);
}
