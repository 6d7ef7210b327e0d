//! The search index against a plain scan of the replayed records: the same sessions and
//! entries for marker words placed in known fields, through appends, entry patches, title
//! renames, branches, file replacement and removal; damaged indexes; the CLI.

use std::collections::BTreeSet;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{gjcfs_bin, set_mtime};
use gjcfs::corpus::{generate_file, Format, Limit, Options};
use gjcfs::engine::read::load::{load_entries_from_file, load_session, LoadStatus};
use gjcfs::search::snippet::contains_folded;
use gjcfs::search::text::record_text;
use gjcfs::search::words::word_list;
use gjcfs::search::{
    remove_index, Change, Filters, Query, QueryError, SearchIndex, UpdateReport, FORMAT, INDEX_FILE,
};

/// (session id, entry id or "title", on the leaf path).
type Found = BTreeSet<(String, String, bool)>;

/// Every replayed record's (and title's) text, with what a hit on it names.
type Texts = Vec<((String, String, bool), String)>;

/// The texts of every file's replayed records, read as a reader of the session reads them.
fn texts(paths: &[PathBuf]) -> Texts {
    let mut texts = Texts::new();
    for path in paths {
        let loaded = load_entries_from_file(path).unwrap();
        if loaded.status != LoadStatus::Loaded {
            continue;
        }
        let session = load_session(path).unwrap().session;
        let leaf_path: BTreeSet<usize> = session
            .leaf()
            .map(|l| session.path_to(l).into_iter().collect())
            .unwrap_or_default();
        let header = session.header();
        let id = header.id().unwrap().to_owned();
        if let Some(title) = header.title() {
            texts.push(((id.clone(), "title".into(), true), title.to_owned()));
        }
        for i in session.entry_indices() {
            let record = session.record(i);
            let entry = record.id().unwrap().to_owned();
            let hit = (id.clone(), entry, leaf_path.contains(&i));
            texts.push((hit, record_text(record)));
        }
    }
    texts
}

/// The records whose text `has` accepts.
fn found_in(texts: &Texts, has: &dyn Fn(&str) -> bool) -> Found {
    texts
        .iter()
        .filter(|(_, text)| has(text))
        .map(|(hit, _)| hit.clone())
        .collect()
}

fn search(index: &SearchIndex, word: &str) -> Found {
    search_for(index, &Query::parse(word).unwrap())
}

fn search_for(index: &SearchIndex, query: &Query) -> Found {
    let filters = Filters {
        limit: 100_000,
        ..Filters::default()
    };
    index
        .search(query, &filters)
        .unwrap()
        .into_iter()
        .map(|h| {
            let entry = h.entry_id.unwrap_or_else(|| "title".into());
            (h.session_id, entry, h.on_leaf_path)
        })
        .collect()
}

struct Store {
    _dir: tempfile::TempDir,
    root: PathBuf,
    index_dir: PathBuf,
}

impl Store {
    fn new(sessions: u64) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("sessions");
        std::fs::create_dir(&root).unwrap();
        for seed in 1..=sessions {
            let options = Options {
                seed,
                limit: Limit::Entries(40),
                format: Format::V5,
                cwd: None,
            };
            generate_file(&root.join(format!("s{seed}.jsonl")), &options).unwrap();
        }
        let index_dir = dir.path().join("index");
        Store {
            _dir: dir,
            root,
            index_dir,
        }
    }

    fn paths(&self) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(&self.root)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        paths.sort();
        paths
    }

    fn file(&self, n: u32) -> PathBuf {
        self.root.join(format!("s{n}.jsonl"))
    }
}

fn append(path: &Path, lines: &[String]) {
    let mut file = OpenOptions::new().append(true).open(path).unwrap();
    for line in lines {
        writeln!(file, "{line}").unwrap();
    }
}

fn leaf_of(path: &Path) -> String {
    load_session(path)
        .unwrap()
        .session
        .leaf_id()
        .unwrap()
        .to_owned()
}

fn user(id: &str, parent: &str, text: &str) -> String {
    format!(
        r#"{{"type":"message","id":"{id}","parentId":"{parent}","timestamp":"2026-03-01T10:00:00.000Z","message":{{"role":"user","content":"{text}","timestamp":1772359200000}}}}"#
    )
}

/// Entries with a marker in each searchable field, and markers where nothing is searched.
fn marked_entries(parent: &str) -> Vec<String> {
    vec![
        user("aa000001", parent, "where is zyxuser hidden -> ZyxUpper ΟΔΟΣ"),
        format!(
            r#"{{"type":"message","id":"aa000002","parentId":"aa000001","timestamp":"2026-03-01T10:00:01.000Z","message":{{"role":"assistant","content":[{{"type":"thinking","thinking":"zyxthink","thinkingSignature":"zyxsignature"}},{{"type":"text","text":"zyxanswer"}},{{"type":"toolCall","id":"c1","name":"edit","arguments":{{"path":"zyxpath.rs","edits":[{{"new":"zyxnew"}}]}}}}]}}}}"#
        ),
        format!(
            r#"{{"type":"message","id":"aa000003","parentId":"aa000002","timestamp":"2026-03-01T10:00:02.000Z","message":{{"role":"toolResult","toolCallId":"c1","toolName":"edit","content":[{{"type":"text","text":"zyxresult"}}],"details":{{"diff":"zyxdetails"}}}}}}"#
        ),
        r#"{"type":"custom_message","id":"aa000004","parentId":"aa000003","timestamp":"2026-03-01T10:00:03.000Z","customType":"t","content":[{"type":"text","text":"zyxcustommsg"}],"display":true}"#.to_owned(),
        r#"{"type":"compaction","id":"aa000005","parentId":"aa000004","timestamp":"2026-03-01T10:00:04.000Z","summary":"zyxcompaction","firstKeptEntryId":"aa000001","tokensBefore":10}"#.to_owned(),
        r#"{"type":"label","id":"aa000006","parentId":"aa000005","timestamp":"2026-03-01T10:00:05.000Z","targetId":"aa000001","label":"zyxlabel"}"#.to_owned(),
        r#"{"type":"custom","id":"aa000007","parentId":"aa000006","timestamp":"2026-03-01T10:00:06.000Z","customType":"t","data":{"x":"zyxstate"}}"#.to_owned(),
        r#"{"type":"session_init","id":"aa000008","parentId":"aa000007","timestamp":"2026-03-01T10:00:07.000Z","systemPrompt":"zyxsystem","task":"zyxtask","tools":["zyxtool"]}"#.to_owned(),
        r#"{"type":"header_patch","patch":{"title":"zyxtitle session"}}"#.to_owned(),
    ]
}

const SEARCHED: &[&str] = &[
    "zyxuser",
    "zyxthink",
    "zyxanswer",
    "zyxpath",
    "zyxnew",
    "zyxresult",
    "zyxcustommsg",
    "zyxcompaction",
    "zyxlabel",
    "zyxtask",
    "zyxtitle",
];
const NOT_SEARCHED: &[&str] = &[
    "zyxsignature",
    "zyxdetails",
    "zyxstate",
    "zyxsystem",
    "zyxtool",
];
/// Markers of later steps, and a word of every generated session.
const LATER: &[&str] = &[
    "zyxpatched",
    "zyxbranch",
    "zyxrenamed",
    "zyxreplaced",
    "session",
];

/// Substrings of every shape (see `substring.rs`): inside a word, ending one and starting
/// the next, whole words between separators, separators alone, other scripts.
const SUBSTRINGS: &[&str] = &[
    "xuser hid",
    "is zyxus",
    "er hidden -",
    " -> ",
    "yxupp",
    "ΟΔΟ",
    "δοσ",
    "xpath.r",
    "itle sess",
    "ow zyxpatc",
    "s z",
    "ession",
];

fn assert_agrees(store: &Store, index: &SearchIndex, step: &str) {
    let texts = texts(&store.paths());
    for word in SEARCHED.iter().chain(NOT_SEARCHED).chain(LATER) {
        assert_eq!(
            search(index, word),
            found_in(&texts, &|text| word_list(text).iter().any(|w| w == word)),
            "{step}: {word}"
        );
        let inside = &word[1..word.len() - 1];
        for needle in [inside, &word[2..]] {
            assert_substring_agrees(index, &texts, needle, step);
        }
    }
    for needle in SUBSTRINGS {
        assert_substring_agrees(index, &texts, needle, step);
    }
}

fn assert_substring_agrees(index: &SearchIndex, texts: &Texts, needle: &str, step: &str) {
    assert_eq!(
        search_for(index, &Query::substring(needle).unwrap()),
        found_in(texts, &|text| contains_folded(text, needle)),
        "{step}: substring {needle:?}"
    );
}

/// The changes an update found, by file name.
type Changes = Vec<(String, Change)>;

fn named(report: UpdateReport) -> Changes {
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    report
        .changes
        .into_iter()
        .map(|c| {
            let name = c.path.file_name().unwrap().to_string_lossy().into_owned();
            (name, c.change)
        })
        .collect()
}

/// An update given the store's files.
fn update_files(index: &SearchIndex, store: &Store) -> Changes {
    named(index.update(&store.paths(), 2, &|_| {}).unwrap())
}

/// An update given the store's directory, which it lists (or not, when it has settled).
fn update_dir(index: &SearchIndex, store: &Store) -> Changes {
    named(
        index
            .update_dirs(std::slice::from_ref(&store.root), 2, &|_| {})
            .unwrap(),
    )
}

#[test]
fn hits_equal_a_scan_of_the_replayed_records_through_every_change() {
    every_change(Store::new(3), &update_files);
}

#[test]
fn hits_equal_a_scan_through_every_change_when_a_settled_directory_is_not_listed() {
    let store = Store::new(3);
    set_mtime(&store.root, 0);
    every_change(store, &update_dir);
}

fn every_change(store: Store, changes: &dyn Fn(&SearchIndex, &Store) -> Changes) {
    let index = SearchIndex::open(&store.index_dir).unwrap();
    assert_eq!(changes(&index, &store).len(), 3);
    assert_agrees(&store, &index, "built");

    // Appended entries are indexed on their own, each marker where a scan finds it.
    let s1 = store.file(1);
    append(&s1, &marked_entries(&leaf_of(&s1)));
    assert_eq!(
        changes(&index, &store),
        [(
            "s1.jsonl".into(),
            Change::Appended {
                records: 8,
                edited: 0
            }
        )]
    );
    assert_agrees(&store, &index, "appended");
    for word in SEARCHED {
        assert!(!search(&index, word).is_empty(), "{word} is searchable");
    }
    for word in NOT_SEARCHED {
        assert!(search(&index, word).is_empty(), "{word} is not searched");
    }

    // An entry patch replaces a message's text: the old marker is gone.
    append(
        &s1,
        &[r#"{"type":"entry_patch","entryId":"aa000001","patch":{"message":{"role":"user","content":"now zyxpatched"}}}"#.to_owned()],
    );
    assert_eq!(
        changes(&index, &store),
        [(
            "s1.jsonl".into(),
            Change::Appended {
                records: 0,
                edited: 1
            }
        )]
    );
    assert!(search(&index, "zyxuser").is_empty());
    assert_agrees(&store, &index, "patched");

    // A branch from an earlier entry moves entries off the leaf path.
    append(&s1, &[user("bb000001", "aa000002", "zyxbranch")]);
    assert!(matches!(
        changes(&index, &store)[..],
        [(_, Change::Appended { records: 1, .. })]
    ));
    let off: Vec<_> = search(&index, "zyxcompaction").into_iter().collect();
    assert!(!off[0].2, "the compaction is off the new branch");
    assert_agrees(&store, &index, "branched");

    // A rename.
    append(
        &s1,
        &[r#"{"type":"header_patch","patch":{"title":"zyxrenamed"}}"#.to_owned()],
    );
    changes(&index, &store);
    assert!(search(&index, "zyxtitle").is_empty());
    assert_agrees(&store, &index, "renamed");

    // A line appended without its newline yet is not indexed until it is complete.
    let mut file = OpenOptions::new().append(true).open(&s1).unwrap();
    let line = user("cc000001", "bb000001", "zyxreplaced partial");
    write!(file, "{}", &line[..20]).unwrap();
    changes(&index, &store);
    assert_agrees(&store, &index, "torn");
    writeln!(file, "{}", &line[20..]).unwrap();
    drop(file);
    changes(&index, &store);
    assert_agrees(&store, &index, "completed");

    // A file replaced through a rename is read again whole.
    let s2 = store.file(2);
    let tmp = store.root.join("s2.tmp");
    let mut text = std::fs::read_to_string(&s2).unwrap();
    text.push_str(&user("dd000001", &leaf_of(&s2), "zyxreplaced"));
    text.push('\n');
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, &s2).unwrap();
    assert_eq!(
        changes(&index, &store),
        [("s2.jsonl".into(), Change::Reindexed)]
    );
    assert_agrees(&store, &index, "replaced");

    // A shrunk file too.
    let text = std::fs::read_to_string(&s1).unwrap();
    let cut: Vec<&str> = text.lines().collect();
    std::fs::write(&s1, cut[..cut.len() - 3].join("\n") + "\n").unwrap();
    assert_eq!(
        changes(&index, &store),
        [("s1.jsonl".into(), Change::Reindexed)]
    );
    assert_agrees(&store, &index, "shrunk");

    // A removed file is dropped.
    std::fs::remove_file(store.file(3)).unwrap();
    assert_eq!(
        changes(&index, &store),
        [("s3.jsonl".into(), Change::Removed)]
    );
    assert_agrees(&store, &index, "removed");
    assert!(changes(&index, &store).is_empty(), "nothing changed");

    // A second process's view: the same index opened again agrees.
    drop(index);
    let again = SearchIndex::open(&store.index_dir).unwrap();
    assert!(changes(&again, &store).is_empty());
    assert_agrees(&store, &again, "reopened");
}

#[test]
fn a_settled_directory_is_listed_again_only_when_its_version_changes() {
    let store = Store::new(2);
    let root = store.root.clone();
    let index = SearchIndex::open(&store.index_dir).unwrap();
    set_mtime(&root, 0);
    assert_eq!(update_dir(&index, &store).len(), 2);
    let names = |changes: Changes| -> Vec<String> { changes.into_iter().map(|c| c.0).collect() };

    // Appends leave the directory's version as it was: the files recorded are stat'ed.
    let s1 = store.file(1);
    append(&s1, &[user("aa000001", &leaf_of(&s1), "zyxuser")]);
    assert_eq!(names(update_dir(&index, &store)), ["s1.jsonl"]);
    assert_agrees(&store, &index, "appended");

    // A file created with the directory's modification time set back to the one recorded
    // is seen all the same: the directory's change time moved on, and with it its version.
    let copy = root.join("s9.jsonl");
    std::fs::copy(store.file(2), &copy).unwrap();
    set_mtime(&root, 0);
    assert_eq!(names(update_dir(&index, &store)), ["s9.jsonl"]);
    assert_agrees(&store, &index, "listed again");
    // The version recorded now is trusted until the directory's version changes.
    set_mtime(&root, 1);
    assert!(update_dir(&index, &store).is_empty());

    // A directory changed in the last seconds is listed every time, whatever its time.
    let now = std::time::SystemTime::now();
    std::fs::File::open(&root)
        .unwrap()
        .set_modified(now)
        .unwrap();
    assert!(update_dir(&index, &store).is_empty());
    std::fs::copy(store.file(2), root.join("s8.jsonl")).unwrap();
    std::fs::File::open(&root)
        .unwrap()
        .set_modified(now)
        .unwrap();
    assert_eq!(names(update_dir(&index, &store)), ["s8.jsonl"]);

    // Removed files are found gone although the listing names them.
    set_mtime(&root, 2);
    assert!(update_dir(&index, &store).is_empty());
    std::fs::remove_file(&copy).unwrap();
    set_mtime(&root, 2);
    assert_eq!(
        update_dir(&index, &store),
        [("s9.jsonl".into(), Change::Removed)]
    );

    // Any other change of what is indexed drops the listing: here an update given only one
    // of the files drops the other, which the next update of the directory brings back
    // although the directory and the files are as listed.
    set_mtime(&root, 3);
    assert!(update_dir(&index, &store).is_empty());
    let report = index.update(std::slice::from_ref(&s1), 1, &|_| {}).unwrap();
    assert_eq!(named(report).len(), 2, "the others are dropped");
    assert_eq!(update_dir(&index, &store).len(), 2, "and indexed again");
    assert_agrees(&store, &index, "dropped and back");
    append(&s1, &[user("aa000002", "aa000001", "zyxanswer")]);
    assert!(index.update_session(&s1).unwrap().is_some());
    assert!(update_dir(&index, &store).is_empty());
    assert_agrees(&store, &index, "updated elsewhere");

    // A listing that does not decode is not used.
    drop(index);
    let conn = rusqlite::Connection::open(store.index_dir.join(INDEX_FILE)).unwrap();
    let rows = conn
        .execute("UPDATE listing SET data = x'00ff'", [])
        .unwrap();
    assert_eq!(rows, 1, "a listing was recorded");
    drop(conn);
    let again = SearchIndex::open(&store.index_dir).unwrap();
    assert!(update_dir(&again, &store).is_empty());
    append(&s1, &[user("aa000003", "aa000002", "zyxlabel")]);
    assert_eq!(names(update_dir(&again, &store)), ["s1.jsonl"]);
    assert_agrees(&store, &again, "after a damaged listing");
}

#[test]
fn no_listing_is_recorded_from_stamps_another_connection_changed_meanwhile() {
    let store = Store::new(3);
    set_mtime(&store.root, 0);
    let a = SearchIndex::open(&store.index_dir).unwrap();
    assert_eq!(update_dir(&a, &store).len(), 3);
    // s1 shrunk: read again whole, which reports progress before anything is written.
    let s1 = store.file(1);
    let text = std::fs::read_to_string(&s1).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    std::fs::write(&s1, lines[..lines.len() - 2].join("\n") + "\n").unwrap();
    // Meanwhile another connection drops s2 and s3 from the index.
    let b = SearchIndex::open(&store.index_dir).unwrap();
    let done = std::cell::Cell::new(false);
    let meanwhile = |_: gjcfs::search::Progress| {
        if !done.replace(true) {
            let report = b.update(std::slice::from_ref(&s1), 1, &|_| {}).unwrap();
            assert_eq!(
                named(report).len(),
                3,
                "b indexed s1 and dropped the others"
            );
        }
    };
    let report = a
        .update_dirs(std::slice::from_ref(&store.root), 2, &meanwhile)
        .unwrap();
    assert!(done.get());
    assert_eq!(named(report), [("s1.jsonl".into(), Change::Reindexed)]);
    // What `a` knew of s2 and s3 was not recorded as the listing: they are indexed again.
    let mut again = update_dir(&a, &store);
    again.sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(
        again,
        [
            ("s2.jsonl".into(), Change::Added),
            ("s3.jsonl".into(), Change::Added)
        ]
    );
    assert_agrees(&store, &a, "after another connection's change");
}

#[test]
fn a_search_run_while_the_files_are_checked_counts_only_if_none_changed() {
    let store = Store::new(2);
    set_mtime(&store.root, 0);
    let index = SearchIndex::open(&store.index_dir).unwrap();
    let dirs = [store.root.clone()];
    let query = Query::parse("zyxuser").unwrap();
    let search = || {
        let (report, hits) = index
            .search_dirs(&dirs, 2, &|_| {}, &query, &Filters::default())
            .unwrap();
        let ids: Vec<Option<String>> = hits.into_iter().map(|h| h.entry_id).collect();
        (named(report), ids)
    };
    let (built, hits) = search();
    assert_eq!(built.len(), 2);
    assert!(hits.is_empty());
    // The search run during the check saw the index before the append: it is run again.
    let s1 = store.file(1);
    append(&s1, &[user("aa000001", &leaf_of(&s1), "zyxuser")]);
    let (appended, hits) = search();
    assert_eq!(appended.len(), 1);
    assert_eq!(hits, [Some("aa000001".to_owned())]);
    let (nothing, again) = search();
    assert!(nothing.is_empty());
    assert_eq!(again, hits);
    assert_agrees(&store, &index, "searched while checked");
}

#[test]
fn directories_added_to_and_gone_from_a_store_of_several_are_found() {
    let store = Store::new(4);
    let dirs: Vec<PathBuf> = ["a", "b", "c"].iter().map(|d| store.root.join(d)).collect();
    for (k, dir) in dirs.iter().enumerate() {
        std::fs::create_dir(dir).unwrap();
        let n = k as u32 + 1;
        std::fs::rename(store.file(n), dir.join(format!("s{n}.jsonl"))).unwrap();
        set_mtime(dir, 0);
    }
    let index = SearchIndex::open(&store.index_dir).unwrap();
    let update = |dirs: &[PathBuf]| {
        let mut changes = named(index.update_dirs(dirs, 2, &|_| {}).unwrap());
        changes.sort_by(|x, y| x.0.cmp(&y.0));
        changes
    };
    assert_eq!(update(&dirs[..2]).len(), 2);
    assert!(update(&dirs[..2]).is_empty());
    // A directory more.
    assert_eq!(update(&dirs), [("s3.jsonl".into(), Change::Added)]);
    // An append in the last one, found without listing any.
    let s3 = dirs[2].join("s3.jsonl");
    append(&s3, &[user("aa000001", &leaf_of(&s3), "zyxuser")]);
    assert!(matches!(
        &update(&dirs)[..],
        [(name, Change::Appended { records: 1, .. })] if name == "s3.jsonl"
    ));
    // The first directory gone from the store.
    assert_eq!(update(&dirs[1..]), [("s1.jsonl".into(), Change::Removed)]);
    assert!(update(&dirs[1..]).is_empty());
    let found = search(&index, "zyxuser");
    assert_eq!(found.len(), 1);
}

#[test]
fn large_sessions_written_a_batch_at_a_time_are_indexed_whole() {
    // Sessions of many batches of rows (and of more batches than wait for the writer),
    // read on several threads next to small ones: every entry of every file is indexed, in
    // one transaction per file.
    let store = Store::new(3);
    for (n, entries) in [(4, 5_000), (5, 1_500)] {
        let options = Options {
            seed: n,
            limit: Limit::Entries(entries),
            format: Format::V5,
            cwd: None,
        };
        generate_file(&store.file(n as u32), &options).unwrap();
    }
    let index = SearchIndex::open(&store.index_dir).unwrap();
    let report = index.update(&store.paths(), 5, &|_| {}).unwrap();
    assert_eq!(named(report).len(), 5);
    let db = rusqlite::Connection::open(store.index_dir.join(INDEX_FILE)).unwrap();
    for path in store.paths() {
        let session = load_session(&path).unwrap().session;
        let title = usize::from(session.header().title().is_some_and(|t| !t.is_empty()));
        let docs: i64 = db
            .query_row(
                "SELECT count(*) FROM docs d JOIN files f ON f.id = d.file WHERE f.path = ?1",
                [path.to_str().unwrap().as_bytes()],
                |r| r.get(0),
            )
            .unwrap();
        let want = session.entry_indices().count() + title;
        assert_eq!(docs as usize, want, "{}", path.display());
    }
    let texts = texts(&store.paths());
    assert_eq!(
        search(&index, "session"),
        found_in(&texts, &|text| word_list(text)
            .iter()
            .any(|w| w == "session"))
    );
    assert_substring_agrees(&index, &texts, "ession", "large");
}

#[test]
fn a_search_rechecks_the_files_of_its_hits() {
    let store = Store::new(1);
    let index = SearchIndex::open(&store.index_dir).unwrap();
    let s1 = store.file(1);
    append(&s1, &[user("aa000001", &leaf_of(&s1), "zyxuser")]);
    update_files(&index, &store);
    // Patched without an update: the search must not return the old text's hit.
    append(
        &s1,
        &[r#"{"type":"entry_patch","entryId":"aa000001","patch":{"message":{"role":"user","content":"zyxpatched"}}}"#.to_owned()],
    );
    assert!(search(&index, "zyxuser").is_empty());
    assert_agrees(&store, &index, "rechecked");
    // A file removed without an update gives no hits.
    std::fs::remove_file(&s1).unwrap();
    assert!(search(&index, "zyxpatched").is_empty());
}

#[test]
fn substrings_phrases_and_filters() {
    let store = Store::new(2);
    let s1 = store.file(1);
    append(&s1, &marked_entries(&leaf_of(&s1)));
    let index = SearchIndex::open(&store.index_dir).unwrap();
    update_files(&index, &store);
    let all = |q: Query, f: Filters| index.search(&q, &f).unwrap();
    let filters = Filters::default();
    let hits = all(Query::substring("XUSER HID").unwrap(), filters.clone());
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].entry_id.as_deref(), Some("aa000001"));
    assert_eq!(hits[0].kind, "user");
    let hit = &hits[0].snippet;
    assert_eq!(
        &hit.text[hit.highlights[0].0..hit.highlights[0].1],
        "xuser hid"
    );
    assert_eq!(
        all(Query::parse("\"is zyxuser\"").unwrap(), filters.clone()).len(),
        1
    );
    assert!(all(Query::parse("\"zyxuser is\"").unwrap(), filters.clone()).is_empty());
    assert_eq!(
        all(Query::parse("zyxuser hidden").unwrap(), filters.clone()).len(),
        1
    );
    assert!(all(Query::parse("zyxuser zyxanswer").unwrap(), filters.clone()).is_empty());
    // Filters.
    let role = |role| Filters {
        role: Some(role),
        ..Filters::default()
    };
    let q = || Query::parse("zyxresult").unwrap();
    assert_eq!(all(q(), role(gjcfs::search::Role::Tool)).len(), 1);
    assert!(all(q(), role(gjcfs::search::Role::User)).is_empty());
    let since = |ms| Filters {
        since_ms: Some(ms),
        ..Filters::default()
    };
    assert_eq!(all(q(), since(1_772_359_200_000)).len(), 1);
    assert!(all(q(), since(1_772_359_300_000)).is_empty());
    let session = crate::common::session_id(&s1);
    let of = |prefix: &str| Filters {
        session: Some(prefix.to_owned()),
        ..Filters::default()
    };
    assert_eq!(all(q(), of(&session[..8])).len(), 1);
    assert!(all(q(), of("ffffffff")).is_empty());
    let cwd = load_session(&s1)
        .unwrap()
        .session
        .header()
        .cwd()
        .unwrap()
        .to_owned();
    let at = |cwd: &str| Filters {
        cwd: Some(cwd.to_owned()),
        ..Filters::default()
    };
    assert_eq!(all(q(), at(&cwd)).len(), 1);
    assert!(all(q(), at("/nowhere")).is_empty());
    // Relevance first: the document with the word twice ranks above.
    append(
        &s1,
        &[user(
            "ee000001",
            "aa000007",
            "zyxresult zyxresult zyxresult",
        )],
    );
    let hits = all(q(), Filters::default());
    assert_eq!(hits[0].entry_id.as_deref(), Some("ee000001"));
}

#[test]
fn damaged_or_foreign_index_files_are_replaced() {
    let store = Store::new(1);
    std::fs::create_dir_all(&store.index_dir).unwrap();
    let file = store.index_dir.join(INDEX_FILE);
    let cases: Vec<Box<dyn Fn()>> = vec![
        Box::new(|| std::fs::write(&file, b"not a database at all, just some text").unwrap()),
        Box::new(|| {
            let conn = rusqlite::Connection::open(&file).unwrap();
            conn.execute_batch("CREATE TABLE files (x); INSERT INTO files VALUES (1);")
                .unwrap();
        }),
        Box::new(|| {
            let conn = rusqlite::Connection::open(&file).unwrap();
            conn.pragma_update(None, "user_version", FORMAT + 1)
                .unwrap();
        }),
        // This format's ids, and a table of it missing.
        Box::new(|| {
            let conn = rusqlite::Connection::open(&file).unwrap();
            conn.execute_batch("DROP TABLE words_data").unwrap();
        }),
    ];
    for (n, damage) in cases.iter().enumerate() {
        remove_index(&store.index_dir).unwrap();
        if n >= 2 {
            // A real index, then made another format or damaged.
            let index = SearchIndex::open(&store.index_dir).unwrap();
            update_files(&index, &store);
        }
        damage();
        let index = SearchIndex::open(&store.index_dir).unwrap();
        assert_eq!(update_files(&index, &store).len(), 1, "case {n}: rebuilt");
        assert_agrees(&store, &index, "rebuilt");
        // A new file, with the index's own page size (SQLite's default is 4 KB).
        let conn = rusqlite::Connection::open(&file).unwrap();
        let page_size: i64 = conn
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .unwrap();
        assert_eq!(page_size, 32 << 10, "case {n}");
    }
    // Damage in pages the checks on opening do not read: the second half of the file, or
    // every page but the first (the schema), so that the first read of any table fails.
    for keep in [None, Some(32 << 10)] {
        drop(SearchIndex::open(&store.index_dir).unwrap());
        let mut bytes = std::fs::read(&file).unwrap();
        let from = keep.unwrap_or(bytes.len() / 2);
        assert!(from < bytes.len());
        for b in &mut bytes[from..] {
            *b = 0x5a;
        }
        std::fs::write(&file, bytes).unwrap();
        let index = SearchIndex::open(&store.index_dir).unwrap();
        let changes = update_files(&index, &store);
        if keep.is_some() {
            // The update's first read found the damage: the index was made anew.
            assert_eq!(changes.len(), 1, "rebuilt");
        }
        assert_agrees(&store, &index, "recovered");
    }
}

/// Opening reads the first row of every table: damage to the first page of one that a
/// search or an update reads late, or not at all, replaces the index at once.
#[test]
fn an_index_with_a_damaged_table_is_replaced_on_opening() {
    let store = Store::new(1);
    let file = store.index_dir.join(INDEX_FILE);
    for table in ["listing", "terms", "meta"] {
        remove_index(&store.index_dir).unwrap();
        let index = SearchIndex::open(&store.index_dir).unwrap();
        assert_eq!(update_files(&index, &store).len(), 1, "{table}: indexed");
        drop(index);
        let (root, page_size) = {
            let conn = rusqlite::Connection::open(&file).unwrap();
            conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
                .unwrap();
            let root: i64 = conn
                .query_row(
                    "SELECT rootpage FROM sqlite_schema WHERE name = ?1",
                    [table],
                    |r| r.get(0),
                )
                .unwrap();
            let size: i64 = conn
                .query_row("PRAGMA page_size", [], |r| r.get(0))
                .unwrap();
            (root as usize, size as usize)
        };
        let mut bytes = std::fs::read(&file).unwrap();
        let at = (root - 1) * page_size;
        bytes[at..at + page_size].fill(0x5a);
        std::fs::write(&file, bytes).unwrap();
        let index = SearchIndex::open(&store.index_dir).unwrap();
        assert_eq!(update_files(&index, &store).len(), 1, "{table}: rebuilt");
        assert_agrees(&store, &index, table);
    }
}

#[cfg(unix)]
#[test]
fn the_index_files_are_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let store = Store::new(1);
    let index = SearchIndex::open(&store.index_dir).unwrap();
    update_dir(&index, &store);
    // Replaced when damaged: the new file is owner-only too.
    drop(index);
    std::fs::write(store.index_dir.join(INDEX_FILE), b"not a database").unwrap();
    let index = SearchIndex::open(&store.index_dir).unwrap();
    assert_eq!(update_dir(&index, &store).len(), 1);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&store.index_dir), 0o700);
    let mut seen = Vec::new();
    for entry in std::fs::read_dir(&store.index_dir).unwrap() {
        let path = entry.unwrap().path();
        assert_eq!(mode(&path), 0o600, "{}", path.display());
        seen.push(path.file_name().unwrap().to_string_lossy().into_owned());
    }
    seen.sort();
    assert_eq!(
        seen,
        [
            INDEX_FILE,
            &format!("{INDEX_FILE}-shm"),
            &format!("{INDEX_FILE}-wal")
        ]
    );
}

#[test]
fn bad_queries_are_errors() {
    assert!(matches!(
        Query::parse("a \"b"),
        Err(QueryError::UnbalancedQuote { .. })
    ));
    assert!(matches!(Query::parse(""), Err(QueryError::Empty)));
    assert!(matches!(
        Query::substring("ab"),
        Err(QueryError::SubstringTooShort { .. })
    ));
}

fn gjcfs(args: &[&str]) -> std::process::Output {
    Command::new(gjcfs_bin())
        .args(args)
        .output()
        .expect("gjcfs runs")
}

#[test]
fn cli_search_knows_a_store_however_its_path_is_spelled() {
    let store = Store::new(2);
    let s1 = store.file(1);
    append(&s1, &marked_entries(&leaf_of(&s1)));
    let index = store.index_dir.to_str().unwrap();
    let parent = store.root.parent().unwrap();
    let search_from = |cwd: &Path, dir: &str| {
        let out = Command::new(gjcfs_bin())
            .current_dir(cwd)
            .args([
                "search",
                "zyxuser",
                "--json",
                "--session-dir",
                dir,
                "--index",
                index,
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let relative = search_from(parent, "sessions");
    let absolute = search_from(Path::new("/"), store.root.to_str().unwrap());
    let dotted = search_from(&store.root, "../sessions/.");
    assert_eq!(relative, absolute);
    assert_eq!(relative, dotted);
    assert!(relative.contains(&format!(
        "\"path\":\"{}\"",
        std::fs::canonicalize(&s1).unwrap().display()
    )));
    // One set of files in the index, not one per spelling.
    let db = rusqlite::Connection::open(store.index_dir.join(INDEX_FILE)).unwrap();
    let files: i64 = db
        .query_row("SELECT count(*) FROM files", [], |r| r.get(0))
        .unwrap();
    assert_eq!(files, 2);
}

#[test]
fn cli_search_prints_hits_and_json() {
    let store = Store::new(2);
    let s1 = store.file(1);
    append(&s1, &marked_entries(&leaf_of(&s1)));
    let root = store.root.to_str().unwrap();
    let index = store.index_dir.to_str().unwrap();
    let out = gjcfs(&["search", "zyxuser", "--session-dir", root, "--index", index]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains("aa000001") && text.contains("where is zyxuser hidden"));
    let out = gjcfs(&[
        "search",
        "zyxresult",
        "--json",
        "--session-dir",
        root,
        "--index",
        index,
    ]);
    let line = String::from_utf8(out.stdout).unwrap();
    let hit = gjcfs::engine::json::parse(line.trim()).unwrap();
    let hit = hit.as_object().unwrap();
    assert_eq!(hit.get_str("entry"), Some("aa000003"));
    assert_eq!(hit.get_str("kind"), Some("toolResult"));
    assert_eq!(hit.get_str("type"), Some("message"));
    assert_eq!(hit.get_str("snippet"), Some("zyxresult"));
    assert_eq!(hit.get_str("timestamp"), Some("2026-03-01T10:00:02.000Z"));
    assert_eq!(hit.get("onLeafPath").and_then(|v| v.as_bool()), Some(true));
    assert!(hit.get_str("session").is_some() && hit.get_str("path").is_some());
    // A bad query exits with status 2.
    for bad in [vec!["a \"b"], vec!["--substring", "ab"], vec!["--", "--"]] {
        let mut args = vec!["search", "--session-dir", root, "--index", index];
        args.extend(bad.iter().copied());
        let out = gjcfs(&args);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(String::from_utf8_lossy(&out.stderr).starts_with("gjcfs: error: "));
    }
}

#[test]
fn cli_search_without_a_writable_index_dir_searches_in_memory() {
    let store = Store::new(1);
    let s1 = store.file(1);
    append(&s1, &marked_entries(&leaf_of(&s1)));
    // A directory cannot be made under a regular file, even by root.
    let blocked = store.root.join("s1.jsonl").join("index");
    let out = gjcfs(&[
        "search",
        "zyxlabel",
        "--session-dir",
        store.root.to_str().unwrap(),
        "--index",
        blocked.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("using an index in memory"));
    assert!(String::from_utf8_lossy(&out.stdout).contains("aa000006"));
}

#[test]
fn cli_search_over_an_agent_directory_reads_every_scope_directory() {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agent");
    let sessions = agent.join("sessions");
    let mut files = Vec::new();
    for (seed, name) in [
        (1, "scope-a/a.jsonl"),
        (2, "scope-b/b.jsonl"),
        (3, "stray.jsonl"),
    ] {
        let path = sessions.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let options = Options {
            seed,
            limit: Limit::Entries(20),
            format: Format::V5,
            cwd: None,
        };
        generate_file(&path, &options).unwrap();
        append(&path, &[user("aa000001", &leaf_of(&path), "zyxscope")]);
        files.push(path);
    }
    let index = dir.path().join("index");
    let found = || {
        let out = gjcfs(&[
            "search",
            "zyxscope",
            "--all",
            "--json",
            "--agent-dir",
            agent.to_str().unwrap(),
            "--index",
            index.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut paths: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|line| {
                let hit = gjcfs::engine::json::parse(line).unwrap();
                let path = hit.as_object().unwrap().get_str("path").unwrap().to_owned();
                path
            })
            .collect();
        paths.sort();
        paths
    };
    // The scope directories' sessions, as `gjcfs ls` lists them; not a file beside them.
    let display = |p: &PathBuf| p.to_string_lossy().into_owned();
    assert_eq!(found(), [display(&files[0]), display(&files[1])]);
    std::fs::remove_dir_all(sessions.join("scope-b")).unwrap();
    assert_eq!(found(), [display(&files[0])]);
}
