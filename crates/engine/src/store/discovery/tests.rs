use super::*;
use crate::storage::MemoryStorage;

fn header(id: &str, version: u32, extra: &str) -> String {
    format!(
        r#"{{"type":"session","version":{version},"id":"{id}","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"{extra}}}"#
    )
}

#[test]
fn message_lines_are_counted_across_read_buffers() {
    let storage = crate::storage::MemoryStorage::new();
    let dir = Path::new("/d");
    storage.ensure_dir(dir).unwrap();
    let mut text = String::from("{\"type\":\"session\",\"id\":\"s\"}\n");
    for n in 0..5000 {
        let pad = "x".repeat(n % 97);
        text.push_str(&format!(
            "{{\"type\":\"message\",\"id\":\"m{n}\",\"p\":\"{pad}\"}}\n"
        ));
        text.push_str("{\"type\":\"label\",\"x\":\"{\\\"type\\\":\\\"message\\\"\"}\n");
    }
    text.push_str("{\"type\":\"mess");
    let path = dir.join("s.jsonl");
    storage.put_file(&path, text.as_bytes());
    assert_eq!(count_message_lines(&storage, &path).unwrap(), 5000);
}

#[test]
fn a_cached_listing_reads_only_the_files_that_changed() {
    let storage = MemoryStorage::new();
    let dir = Path::new("/s");
    storage.ensure_dir(dir).unwrap();
    let user = r#"{"type":"message","id":"m","parentId":null,"timestamp":"t","message":{"role":"user","content":"hello"}}"#;
    let session = |id: &str| format!("{}\n{user}\n", header(id, 5, ""));
    storage.put_file(&dir.join("a.jsonl"), session("a").as_bytes());
    storage.put_file(&dir.join("b.jsonl"), session("b").as_bytes());
    storage.put_file(&dir.join("notes.jsonl"), b"not a session\n");
    let opens = |storage: &MemoryStorage| {
        storage
            .op_log()
            .iter()
            .filter(|op| op.starts_with("open"))
            .count()
    };
    let ids = |infos: Vec<SessionInfo>| {
        let mut ids: Vec<String> = infos.into_iter().map(|i| i.id).collect();
        ids.sort();
        ids
    };
    let mut cache = ListingCache::default();
    let first = list_dir_cached(&storage, dir, &mut cache, &|_, _| {}).unwrap();
    assert_eq!(ids(first.clone()), ["a", "b"]);
    let read_once = opens(&storage);
    assert!(read_once >= 3, "each file is read the first time");
    // Nothing changed: every file is only looked at, the file that is no session too.
    let again = list_dir_cached(&storage, dir, &mut cache, &|_, _| {}).unwrap();
    assert_eq!(again, first);
    assert_eq!(opens(&storage), read_once);
    // An append changes the file's length and time: that file alone is read again.
    let longer = format!("{}{}\n", session("b"), user.replace("hello", "more"));
    storage.put_file(&dir.join("b.jsonl"), longer.as_bytes());
    storage.unlink(&dir.join("a.jsonl")).unwrap();
    let after = list_dir_cached(&storage, dir, &mut cache, &|_, _| {}).unwrap();
    assert_eq!(opens(&storage), read_once + 1);
    assert_eq!(ids(after.clone()), ["b"]);
    assert_eq!(after[0].message_count, 2);
    assert_eq!(after, list_dir(&storage, dir).unwrap());
}

#[test]
fn metadata_comes_from_the_prefix_and_the_tail() {
    let storage = MemoryStorage::new();
    let dir = Path::new("/s");
    storage.ensure_dir(dir).unwrap();
    let filler = format!(
        r#"{{"type":"custom","customType":"x","data":"{}","id":"c","parentId":"m","timestamp":"t"}}"#,
        "y".repeat(5000)
    );
    let text = [
        header("abc", 5, r#","title":"Original""#),
        r#"{"type":"message","id":"m","parentId":null,"timestamp":"t","message":{"role":"user","content":[{"type":"text","text":"hello"},{"type":"text","text":"there"}]}}"#.into(),
        filler,
        r#"{"type":"header_patch","patch":{"title":"Patched title"}}"#.into(),
        r#"{"type":"header_patch","patch":{"cwd":"/moved"}}"#.into(),
        r#"{"type":"header_patch","patch":{"title":"bad","extra":1}}"#.into(),
    ]
    .join("\n")
        + "\n";
    let path = dir.join("2026-01-01T00-00-00-000Z_abc.jsonl");
    storage.put_file(&path, text.as_bytes());
    let info = session_info(&storage, &path).unwrap().unwrap();
    assert_eq!(info.title.as_deref(), Some("Patched title"));
    assert_eq!(info.cwd, "/moved");
    assert_eq!(info.first_message, "hello there");
    assert_eq!(info.message_count, 1);
    assert!(info.message_count_is_estimate);

    // Version 3: tail patches are not applied.
    let v3 = text.replacen(r#""version":5"#, r#""version":3"#, 1);
    storage.put_file(&path, v3.as_bytes());
    assert_eq!(
        session_info(&storage, &path)
            .unwrap()
            .unwrap()
            .title
            .as_deref(),
        Some("Original")
    );

    // A future version is not listed.
    storage.put_file(&path, header("abc", 6, "").as_bytes());
    assert_eq!(session_info(&storage, &path).unwrap(), None);
}

#[test]
fn listing_skips_hidden_and_invalid_files_and_sorts_newest_first() {
    let storage = MemoryStorage::new();
    let dir = Path::new("/s");
    storage.ensure_dir(dir).unwrap();
    storage.put_file(&dir.join("a_one.jsonl"), header("one", 5, "").as_bytes());
    storage.put_file(
        &dir.join(".hidden.jsonl"),
        header("hidden", 5, "").as_bytes(),
    );
    storage.put_file(&dir.join("bad.jsonl"), b"{not json");
    storage.put_file(&dir.join("notes.txt"), header("txt", 5, "").as_bytes());
    storage.put_file(&dir.join("b_two.jsonl"), header("two", 5, "").as_bytes());
    let ids: Vec<String> = list_dir(&storage, dir)
        .unwrap()
        .into_iter()
        .map(|i| i.id)
        .collect();
    assert_eq!(ids, ["two", "one"]);
    let infos = list_dir(&storage, dir).unwrap();
    assert_eq!(match_prefix(&infos, "TW").len(), 1);
    assert_eq!(match_prefix(&infos, "a_").len(), 1);
    assert_eq!(match_prefix(&infos, "o").len(), 1);
    assert!(match_prefix(&infos, "zzz").is_empty());
    // Progress counts every transcript file read, sessions or not.
    let seen = std::cell::RefCell::new(Vec::new());
    list_dir_with(&storage, dir, &|done, total| {
        seen.borrow_mut().push((done, total))
    })
    .unwrap();
    assert_eq!(seen.into_inner(), [(1, 3), (2, 3), (3, 3)]);
    let seen = std::cell::RefCell::new(Vec::new());
    let all = list_all_with(&storage, Path::new("/"), &|done, total| {
        seen.borrow_mut().push((done, total))
    })
    .unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(seen.into_inner().last(), Some(&(3, 3)));
}

#[test]
fn recent_sessions_are_named_by_title_then_prompt_then_time() {
    let storage = MemoryStorage::new();
    let dir = Path::new("/s");
    storage.ensure_dir(dir).unwrap();
    let prompt = r#"{"type":"message","id":"m","parentId":null,"timestamp":"t","message":{"role":"user","content":"fix the\nparser"}}"#;
    storage.put_file(
        &dir.join("a.jsonl"),
        header("a", 5, r#","title":"Titled\u0007 one""#).as_bytes(),
    );
    storage.put_file(
        &dir.join("b.jsonl"),
        format!("{}\n{prompt}\n", header("b", 5, "")).as_bytes(),
    );
    storage.put_file(&dir.join("c.jsonl"), header("c", 5, "").as_bytes());
    let names: Vec<String> = get_recent_sessions(&storage, dir, 10)
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(names, ["Untitled · 00:00", "fix the", "Titled one"]);
    assert_eq!(get_recent_sessions(&storage, dir, 1).unwrap().len(), 1);
    assert_eq!(
        find_most_recent_session(&storage, dir),
        Some(dir.join("c.jsonl"))
    );
    assert_eq!(find_most_recent_session(&storage, Path::new("/none")), None);
}

#[test]
fn list_all_spans_every_scope_and_keeps_the_newest_copy_of_an_id() {
    let storage = MemoryStorage::new();
    let root = Path::new("/agent/sessions");
    for scope in ["v2-aaa", "--legacy--"] {
        storage.ensure_dir(&root.join(scope)).unwrap();
    }
    storage.put_file(
        &root.join("--legacy--/old_dup.jsonl"),
        header("dup", 5, r#","title":"old""#).as_bytes(),
    );
    storage.put_file(
        &root.join("v2-aaa/x_one.jsonl"),
        header("one", 5, "").as_bytes(),
    );
    storage.put_file(
        &root.join("v2-aaa/new_dup.jsonl"),
        header("dup", 5, r#","title":"new""#).as_bytes(),
    );
    let all = list_all(&storage, root).unwrap();
    let summary: Vec<(String, Option<String>)> = all
        .iter()
        .map(|i| (i.id.clone(), i.title.clone()))
        .collect();
    assert_eq!(
        summary,
        [("dup".into(), Some("new".into())), ("one".into(), None)]
    );
    assert!(list_all(&storage, Path::new("/nowhere"))
        .unwrap()
        .is_empty());
}
