use super::listing::Listing;
use super::*;

fn session(n: u32) -> String {
    format!(
        "{{\"type\":\"session\",\"version\":5,\"id\":\"s{n}\",\"timestamp\":\"2026-03-01T10:00:00.000Z\",\"cwd\":\"/w\"}}\n\
         {{\"type\":\"message\",\"id\":\"m1\",\"parentId\":null,\"timestamp\":\"2026-03-01T10:00:01.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"first words\",\"timestamp\":1}}}}\n"
    )
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

    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(store.join("s2.jsonl"))
        .unwrap();
    std::io::Write::write_all(
        &mut file,
        b"{\"type\":\"message\",\"id\":\"m2\",\"parentId\":\"m1\",\"timestamp\":\"2026-03-01T10:00:02.000Z\",\"message\":{\"role\":\"user\",\"content\":\"more words\",\"timestamp\":2}}\n",
    )
    .unwrap();
    drop(file);
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
