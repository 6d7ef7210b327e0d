use std::path::{Path, PathBuf};

use super::listing::Listing;
use super::*;
use gjcfs_engine::storage::FileStorage;

fn session(n: u32) -> String {
    format!(
        "{{\"type\":\"session\",\"version\":5,\"id\":\"s{n}\",\"timestamp\":\"2026-03-01T10:00:00.000Z\",\"cwd\":\"/w\"}}\n\
         {{\"type\":\"message\",\"id\":\"m1\",\"parentId\":null,\"timestamp\":\"2026-03-01T10:00:01.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"first words\",\"timestamp\":1}}}}\n"
    )
}

/// The line of a user message `id` under `parent` holding `text`.
fn message_line(id: &str, parent: &str, text: &str) -> String {
    format!(
        "{{\"type\":\"message\",\"id\":\"{id}\",\"parentId\":\"{parent}\",\"timestamp\":\"2026-03-01T10:00:02.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"{text}\",\"timestamp\":2}}}}\n"
    )
}

/// Appends a user message `m2` under `m1` holding `text` to the session at `path`.
fn append_message(path: &Path, text: &str) {
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    std::io::Write::write_all(&mut file, message_line("m2", "m1", text).as_bytes()).unwrap();
}

/// An index of one session file holding `text`, in a directory of its own.
fn index_of(text: &str) -> (tempfile::TempDir, SearchIndex) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("sessions");
    std::fs::create_dir(&store).unwrap();
    let path = store.join("s1.jsonl");
    std::fs::write(&path, text).unwrap();
    let index = SearchIndex::open(&dir.path().join("index")).unwrap();
    index.update(&[path], 1, &|_| {}).unwrap();
    (dir, index)
}

#[test]
fn the_page_cache_is_the_queries_one_before_and_after_an_update() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("sessions");
    std::fs::create_dir(&store).unwrap();
    std::fs::write(store.join("s1.jsonl"), session(1)).unwrap();
    let index = SearchIndex::open(&dir.path().join("index")).unwrap();
    let cache = |index: &SearchIndex| -> i64 {
        let inner = index.inner.lock();
        inner
            .conn
            .query_row("PRAGMA cache_size", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(cache(&index), -512);
    let report = index.update(&[store.join("s1.jsonl")], 2, &|_| {}).unwrap();
    assert_eq!(report.changes.len(), 1);
    assert_eq!(cache(&index), -512, "after the update");
}

#[test]
fn an_update_of_stats_alone_writes_them_into_the_listing_as_a_whole_listing_holds_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("sessions");
    std::fs::create_dir(&store).unwrap();
    for n in 1..=3 {
        std::fs::write(store.join(format!("s{n}.jsonl")), session(n)).unwrap();
    }
    // A settled directory (Windows records no directory's version, and a directory is
    // opened there otherwise).
    #[cfg(unix)]
    std::fs::File::open(&store)
        .and_then(|d| {
            d.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1 << 30))
        })
        .unwrap();
    let dirs = [store.clone()];
    let index = SearchIndex::open(&dir.path().join("index")).unwrap();
    assert_eq!(
        index.update_dirs(&dirs, 1, &|_| {}).unwrap().changes.len(),
        3
    );
    let before = saved_listing::read_listing(&index.inner.lock().conn)
        .unwrap()
        .unwrap();

    append_message(&store.join("s2.jsonl"), "more words");
    let report = index.update_dirs(&dirs, 1, &|_| {}).unwrap();
    assert_eq!(report.changes.len(), 1);

    let inner = index.inner.lock();
    let after = saved_listing::read_listing(&inner.conn)
        .unwrap()
        .expect("the listing agrees with the index after the update");
    let stamps = file_rows::read_stamps(&inner.conn).unwrap();
    let (now, ()) = scan::look_while(&FileStorage, &dirs, None, 1, || ());
    let writes = now.patches(&before, &stamps).unwrap();
    assert_eq!(writes.len(), 1, "one stat changed: {writes:?}");
    assert_eq!(Listing::decode(now.listing(&stamps)), Some(after));
}

/// Polls `f` for up to ten seconds; whether it came true.
#[cfg(target_os = "linux")]
fn within_seconds(mut f: impl FnMut() -> bool) -> bool {
    let started = std::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_secs(10) {
        if f() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    false
}

#[cfg(target_os = "linux")]
#[test]
fn a_watched_index_is_trusted_and_has_every_change_made_before_a_search() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let scope = root.join("v2-a");
    std::fs::create_dir_all(&scope).unwrap();
    std::fs::write(scope.join("s1.jsonl"), session(1)).unwrap();
    let store = Store::Root(root.clone());
    let index = std::sync::Arc::new(SearchIndex::open(&dir.path().join("index")).unwrap());
    let dirs = || store.dirs(&FileStorage).unwrap();
    let search = |word: &str| {
        let query = Query::parse(word).unwrap();
        let (report, hits) = index
            .search_dirs(&dirs(), 1, &|_| {}, &query, &Filters::default())
            .unwrap();
        (report.trusted, hits.len())
    };
    assert_eq!(
        search("first"),
        (false, 1),
        "no watcher: the store is checked"
    );

    let watching = index.watch(store.clone(), 1).unwrap();
    assert!(within_seconds(|| index.is_fresh(&dirs())));
    // An append, then at once a search: the watcher took it in before answering.
    append_message(&scope.join("s1.jsonl"), "quokka words");
    assert_eq!(search("quokka"), (true, 1));
    // A new scope with a session: the watcher follows the new directory too.
    let other = root.join("v2-b");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(
        other.join("s2.jsonl"),
        session(2).replace("first", "numbat"),
    )
    .unwrap();
    assert!(within_seconds(|| search("numbat") == (true, 1)));
    std::fs::remove_file(scope.join("s1.jsonl")).unwrap();
    assert_eq!(search("quokka"), (true, 0), "a removed session's words go");

    drop(watching);
    assert!(!index.is_fresh(&dirs()), "no watcher, no trust");
    assert_eq!(search("numbat"), (false, 1));
}

#[test]
fn long_texts_are_held_compressed_and_found_whole_by_words_phrases_and_substrings() {
    let long_prompt = format!(
        "{} pangolin\\nsecond line",
        "tell me about parsers ".repeat(20)
    );
    let reply = format!("{} the torn-line marker", "parser ".repeat(50));
    let text = session(1).replace("first words", &long_prompt) + &message_line("m2", "m1", &reply);
    let (_dir, index) = index_of(&text);

    let inner = index.inner.lock();
    let held: Vec<(String, Option<String>, String)> = inner
        .conn
        .prepare("SELECT entry_id, kind, typeof(text) FROM docs ORDER BY seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        held,
        [
            ("m1".to_owned(), Some("user".to_owned()), "blob".to_owned()),
            ("m2".to_owned(), Some("user".to_owned()), "blob".to_owned()),
        ]
    );
    drop(inner);

    let hits = |q: Query| index.search(&q, &Filters::default()).unwrap();
    let found = hits(Query::parse("\"torn line marker\"").unwrap());
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].entry_id.as_deref(), Some("m2"));
    assert_eq!(found[0].kind, "user");
    assert!(found[0].snippet.text.contains("torn-line marker"));
    // The first prompt is kept as its first line, cut after PROMPT_CHARS characters.
    let prompt = found[0].first_prompt.as_deref().unwrap();
    assert!(long_prompt.starts_with(prompt), "{prompt}");
    assert_eq!(
        prompt.chars().filter(|c| !c.is_whitespace()).count(),
        PROMPT_CHARS
    );
    let found = hits(Query::substring("angoli").unwrap());
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].entry_id.as_deref(), Some("m1"));
    assert!(found[0].snippet.text.contains("pangolin"));
    let found = hits(Query::parse("parser").unwrap());
    assert_eq!(found.len(), 1);
}

#[test]
fn a_common_word_is_ranked_by_the_lengths_its_compressed_texts_hold() {
    let mut text = session(1);
    let n = rank::COMMON_FROM + 10;
    for k in 0..n {
        // One short message holding the word among the newest (the window ranked), the
        // others long: the short one ranks first. The long ones compress to fewer bytes
        // than it holds: ranked by what is stored, they would come first.
        let filler = if k == n - 20 {
            "0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJ"
        } else {
            &*"filler words ".repeat(40)
        };
        text.push_str(&message_line(
            &format!("c{k}"),
            "m1",
            &format!("wombat {filler}"),
        ));
    }
    let (_dir, index) = index_of(&text);
    let found = index
        .search(&Query::parse("wombat").unwrap(), &Filters::default())
        .unwrap();
    assert!(!found.is_empty());
    let short = format!("c{}", n - 20);
    assert_eq!(found[0].entry_id.as_deref(), Some(short.as_str()));
}

#[test]
fn a_patched_message_holds_its_new_text_compressed() {
    let (dir, index) = index_of(&session(1));
    let path = dir.path().join("sessions/s1.jsonl");
    let patched = "patched outside, ".repeat(10);
    let patch = format!(
        "{{\"type\":\"entry_patch\",\"entryId\":\"m1\",\"patch\":{{\"message\":{{\"role\":\"user\",\"content\":\"{patched}\"}}}}}}\n"
    );
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut file, patch.as_bytes()).unwrap();
    index.update(&[path], 1, &|_| {}).unwrap();
    let inner = index.inner.lock();
    let (kind, text) = inner
        .conn
        .query_row(
            "SELECT typeof(text), text FROM docs WHERE entry_id = 'm1'",
            [],
            |r| Ok((r.get::<_, String>(0)?, stored_text::text_of(r.get_ref(1)?)?)),
        )
        .unwrap();
    assert_eq!(
        (kind.as_str(), text.as_deref()),
        ("blob", Some(patched.as_str()))
    );
}

/// The word the erasure tests plant; no other text of theirs holds it.
const ERASED: &str = "zqxjkvbwordunique";

/// A session `n` holding [`ERASED`] in a short prompt, a long answer (stored compressed)
/// and a tool's output.
fn session_holding_the_word(n: u32) -> String {
    let long = format!("{ERASED} {}", "and a longer answer around it ".repeat(20));
    format!(
        "{}\
         {{\"type\":\"message\",\"id\":\"m2\",\"parentId\":\"m1\",\"timestamp\":\"2026-03-01T10:00:02.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"{ERASED}\",\"timestamp\":2}}}}\n\
         {{\"type\":\"message\",\"id\":\"m3\",\"parentId\":\"m2\",\"timestamp\":\"2026-03-01T10:00:03.000Z\",\"message\":{{\"role\":\"assistant\",\"content\":[{{\"type\":\"text\",\"text\":\"{long}\"}},{{\"type\":\"toolCall\",\"id\":\"c1\",\"name\":\"bash\",\"arguments\":{{\"command\":\"ls\"}}}}],\"timestamp\":3}}}}\n\
         {{\"type\":\"message\",\"id\":\"m4\",\"parentId\":\"m3\",\"timestamp\":\"2026-03-01T10:00:04.000Z\",\"message\":{{\"role\":\"toolResult\",\"toolCallId\":\"c1\",\"toolName\":\"bash\",\"content\":[{{\"type\":\"text\",\"text\":\"out {ERASED}.txt\"}}],\"isError\":false,\"timestamp\":4}}}}\n",
        session(n)
    )
}

/// How often `needle` occurs in the bytes of the index file and its write-ahead log.
fn occurrences_in_index(index: &SearchIndex, needle: &str) -> usize {
    let path = index.path().unwrap().to_owned();
    let mut wal = path.clone().into_os_string();
    wal.push("-wal");
    [
        std::fs::read(&path).unwrap(),
        std::fs::read(&wal).unwrap_or_default(),
    ]
    .iter()
    .map(|bytes| memchr::memmem::find_iter(bytes, needle.as_bytes()).count())
    .sum()
}

/// A store of sessions 1–3, session 2 holding [`ERASED`], indexed; the word is found.
fn store_with_the_word() -> (tempfile::TempDir, PathBuf, SearchIndex) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("sessions");
    std::fs::create_dir(&store).unwrap();
    for n in 1..=3 {
        let text = if n == 2 {
            session_holding_the_word(n)
        } else {
            session(n)
        };
        std::fs::write(store.join(format!("s{n}.jsonl")), text).unwrap();
    }
    let index = SearchIndex::open(&dir.path().join("index")).unwrap();
    let query = Query::parse(ERASED).unwrap();
    let dirs = [store.clone()];
    let (_, hits) = index
        .search_dirs(&dirs, 1, &|_| {}, &query, &Filters::default())
        .unwrap();
    assert_eq!(
        hits.len(),
        3,
        "the prompt, the answer and the tool's output"
    );
    let substring = Query::substring(&ERASED[3..12]).unwrap();
    assert_eq!(
        index.search(&substring, &Filters::default()).unwrap().len(),
        3
    );
    (dir, store, index)
}

/// Searches the store for [`ERASED`] (which updates the index first), as a word and as a
/// substring: neither finds it.
fn search_finds_no_word(index: &SearchIndex, store: &Path) {
    let dirs = [store.to_owned()];
    for query in [
        Query::parse(ERASED).unwrap(),
        Query::substring(&ERASED[3..12]).unwrap(),
    ] {
        let (_, hits) = index
            .search_dirs(&dirs, 1, &|_| {}, &query, &Filters::default())
            .unwrap();
        assert!(hits.is_empty(), "{hits:?}");
    }
}

/// Appends to the sessions other than 2, each a few times, and brings the index up to date.
fn use_the_index_further(index: &SearchIndex, store: &Path) {
    for round in 0..4 {
        for n in [1, 3] {
            let path = store.join(format!("s{n}.jsonl"));
            let mut file = std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap();
            let line = message_line(&format!("x{round}"), "m1", &format!("more words {round}"));
            std::io::Write::write_all(&mut file, line.as_bytes()).unwrap();
        }
        index.update_dirs(&[store.to_owned()], 1, &|_| {}).unwrap();
    }
}

#[test]
fn nothing_of_a_removed_session_stays_in_the_index_file() {
    let (_dir, store, index) = store_with_the_word();
    assert!(
        occurrences_in_index(&index, ERASED) > 0,
        "indexed in plain text"
    );
    std::fs::remove_file(store.join("s2.jsonl")).unwrap();
    search_finds_no_word(&index, &store);
    assert_eq!(occurrences_in_index(&index, ERASED), 0, "after the removal");
    use_the_index_further(&index, &store);
    assert_eq!(
        occurrences_in_index(&index, ERASED),
        0,
        "after further updates"
    );
}

#[test]
fn nothing_of_a_session_rewritten_without_a_word_stays_in_the_index_file() {
    let (_dir, store, index) = store_with_the_word();
    std::fs::write(store.join("s2.jsonl"), session(2)).unwrap();
    search_finds_no_word(&index, &store);
    assert_eq!(occurrences_in_index(&index, ERASED), 0, "after the rewrite");
    use_the_index_further(&index, &store);
    assert_eq!(
        occurrences_in_index(&index, ERASED),
        0,
        "after further updates"
    );
}

#[test]
fn nothing_of_a_session_dropped_alone_stays_in_the_index_file() {
    // The path a watcher takes for a file it is told of.
    let (_dir, store, index) = store_with_the_word();
    let path = store.join("s2.jsonl");
    std::fs::remove_file(&path).unwrap();
    let change = index.update_session(&path).unwrap().unwrap();
    assert_eq!(change.change, Change::Removed);
    assert_eq!(occurrences_in_index(&index, ERASED), 0, "after the removal");
}

#[test]
fn a_word_another_session_holds_stays_in_the_vocabulary() {
    let (_dir, store, index) = store_with_the_word();
    let substring = Query::substring(&ERASED[3..12]).unwrap();
    let found = |index: &SearchIndex| {
        let (_, hits) = index
            .search_dirs(
                std::slice::from_ref(&store),
                1,
                &|_| {},
                &substring,
                &Filters::default(),
            )
            .unwrap();
        hits.len()
    };
    std::fs::write(store.join("s4.jsonl"), session_holding_the_word(4)).unwrap();
    assert_eq!(found(&index), 6);
    std::fs::remove_file(store.join("s2.jsonl")).unwrap();
    assert_eq!(found(&index), 3, "session 4's");
    std::fs::remove_file(store.join("s4.jsonl")).unwrap();
    assert_eq!(found(&index), 0);
    // Indexed again after it was dropped from the vocabulary.
    std::fs::write(store.join("s2.jsonl"), session_holding_the_word(2)).unwrap();
    assert_eq!(found(&index), 3);
}
