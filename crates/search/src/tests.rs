use super::listing::Listing;
use super::*;

fn session(n: u32) -> String {
    format!(
        "{{\"type\":\"session\",\"version\":5,\"id\":\"s{n}\",\"timestamp\":\"2026-03-01T10:00:00.000Z\",\"cwd\":\"/w\"}}\n\
         {{\"type\":\"message\",\"id\":\"m1\",\"parentId\":null,\"timestamp\":\"2026-03-01T10:00:01.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"first words\",\"timestamp\":1}}}}\n"
    )
}

/// Appends a user message `m2` under `m1` holding `text` to the session at `path`.
fn append_message(path: &Path, text: &str) {
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    let line = format!(
        "{{\"type\":\"message\",\"id\":\"m2\",\"parentId\":\"m1\",\"timestamp\":\"2026-03-01T10:00:02.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"{text}\",\"timestamp\":2}}}}\n"
    );
    std::io::Write::write_all(&mut file, line.as_bytes()).unwrap();
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
    let index = Arc::new(SearchIndex::open(&dir.path().join("index")).unwrap());
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
