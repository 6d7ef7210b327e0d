//! The session manager: deferred persistence, appends, patches, rewrites, forks, error
//! latching and rollback (the original's persistence tests).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::common::{fixture, SessionText};
use gjcfs::engine::json::{self, Value};
use gjcfs::engine::manager::{AppendPhase, SessionError, SessionManager, StorageConfig};
use gjcfs::engine::read::inspect::parse_strict;
use gjcfs::engine::storage::{Fault, FaultKind, MemoryStorage};
use gjcfs::engine::{load_session, LoadError};

fn user(text: &str) -> Value {
    json::parse(&format!(
        r#"{{"role":"user","content":"{text}","timestamp":1}}"#
    ))
    .unwrap()
}

fn assistant(text: &str) -> Value {
    json::parse(&format!(
        r#"{{"role":"assistant","content":[{{"type":"text","text":"{text}"}}],"api":"anthropic-messages","provider":"anthropic","model":"claude","usage":{{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}}}},"stopReason":"stop","timestamp":2}}"#
    ))
    .unwrap()
}

fn lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn config(dir: &Path) -> StorageConfig {
    StorageConfig::files(dir.join("blobs"))
}

fn write_fixture(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    fs::copy(fixture(name), &path).unwrap();
    path
}

#[test]
fn nothing_is_written_before_the_first_assistant_message() {
    let dir = tempfile::tempdir().unwrap();
    let m = SessionManager::create("/work", dir.path(), config(dir.path()));
    let file = m.session_file().unwrap();
    let u = m.append_message(user("hi")).unwrap();
    m.append_thinking_level_change(Some("high")).unwrap();
    assert!(!file.exists(), "deferred until an assistant message exists");
    let a = m.append_message(assistant("hello")).unwrap();
    assert_eq!(
        lines(&file).len(),
        4,
        "header and three entries in one rewrite"
    );
    let c = m.append_custom_entry("ext", None).unwrap();
    m.flush().unwrap();
    let all = lines(&file);
    assert_eq!(all.len(), 5);
    // Parent chain: each append hangs under the previous leaf.
    let loaded = load_session(&file).unwrap().session;
    let parents: Vec<Option<&str>> = loaded.entries().map(|e| e.parent_id()).collect();
    assert_eq!(parents[0], None);
    assert_eq!(parents[2], loaded.records()[2].id());
    assert_eq!(loaded.record(3).id(), Some(a.as_str()));
    assert_eq!(loaded.leaf_id(), Some(c.as_str()));
    assert_eq!(loaded.record(1).id(), Some(u.as_str()));
    assert!(all[0].starts_with(r#"{"type":"session","version":5,"id":""#));
    assert!(file
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .ends_with(&format!("_{}.jsonl", m.session_id())));
    // What the manager wrote passes the strict checks and round-trips byte for byte.
    let bytes = fs::read(&file).unwrap();
    parse_strict(&bytes).unwrap();
    for line in &all {
        assert_eq!(&json::to_compact(&json::parse(line).unwrap()), line);
    }
}

#[test]
fn custom_messages_and_summaries_do_not_trigger_persistence() {
    let dir = tempfile::tempdir().unwrap();
    let m = SessionManager::create("/work", dir.path(), config(dir.path()));
    m.append_custom_message_entry("ext", Value::string("x"), true, None, None)
        .unwrap();
    m.append_message(
        json::parse(r#"{"role":"bashExecution","command":"ls","timestamp":1}"#).unwrap(),
    )
    .unwrap();
    m.flush().unwrap();
    assert!(!m.session_file().unwrap().exists());
}

#[test]
fn opening_a_legacy_file_writes_nothing_until_the_first_append() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_fixture(dir.path(), "v1-minimal.jsonl");
    let before = fs::read(&path).unwrap();
    let mtime = fs::metadata(&path).unwrap().modified().unwrap();
    let m = SessionManager::open(&path, "/tmp", config(dir.path())).unwrap();
    m.flush().unwrap();
    assert_eq!(fs::read(&path).unwrap(), before);
    assert_eq!(fs::metadata(&path).unwrap().modified().unwrap(), mtime);
    m.append_message(user("again")).unwrap();
    m.flush().unwrap();
    let all = lines(&path);
    assert_eq!(all.len(), 4);
    assert!(
        all[0].ends_with(r#""cwd":"/tmp","version":5}"#),
        "{}",
        all[0]
    );
    let session = load_session(&path).unwrap().session;
    assert!(session.entries().all(|e| e.id().is_some()));
}

#[test]
fn rewrite_entries_and_ensure_on_disk_rewrite_a_legacy_file_at_once() {
    for force in ["rewrite", "ensure"] {
        let dir = tempfile::tempdir().unwrap();
        let path = write_fixture(dir.path(), "v2-already-has-ids.jsonl");
        let m = SessionManager::open(&path, "/tmp", config(dir.path())).unwrap();
        match force {
            "rewrite" => m.rewrite_entries().unwrap(),
            _ => m.ensure_on_disk().unwrap(),
        }
        let all = lines(&path);
        assert_eq!(all.len(), 3, "{force}");
        assert!(all[0].contains(r#""version":5"#), "{force}");
        assert!(all[2].contains(r#""id":"def67890","parentId":"abc12345""#));
    }
}

#[test]
fn renaming_appends_one_small_header_patch() {
    let dir = tempfile::tempdir().unwrap();
    let m = SessionManager::create("/work", dir.path(), config(dir.path()));
    let huge = "x".repeat(1_000_000);
    m.append_message(user(&huge)).unwrap();
    m.append_message(assistant("ok")).unwrap();
    m.ensure_on_disk().unwrap();
    let file = m.session_file().unwrap();
    let size = fs::metadata(&file).unwrap().len();
    assert!(m.set_session_name("renamed session", true).unwrap());
    m.flush().unwrap();
    let grown = fs::metadata(&file).unwrap().len() - size;
    assert!(grown < 128, "grew by {grown}");
    let last = lines(&file).pop().unwrap();
    assert_eq!(
        last,
        r#"{"type":"header_patch","patch":{"title":"renamed session","titleSource":"user"}}"#
    );
    // An automatic title never replaces the user's.
    assert!(!m.set_session_name("auto title", false).unwrap());
    let header = load_session(&file).unwrap().session;
    assert_eq!(header.header().title(), Some("renamed session"));
    assert_eq!(header.header().title_source(), Some("user"));
    assert_eq!(header.header().version(), 5.0);
    // Appends after the patch still work.
    m.append_message(user("later")).unwrap();
    m.flush().unwrap();
    assert_eq!(load_session(&file).unwrap().session.entry_count(), 3);
}

#[test]
fn long_titles_are_cleaned_and_cut_to_1000_units() {
    let m = SessionManager::in_memory("/work");
    assert!(m.set_session_name(&"漢".repeat(10_000), true).unwrap());
    assert_eq!(
        m.read(|s| s.header().title().unwrap().chars().count()),
        1000
    );
    assert!(m.set_session_name("a\u{0}\tb \n  c\u{9f}", true).unwrap());
    assert_eq!(
        m.read(|s| s.header().title().map(str::to_owned)),
        Some("a b c".to_owned())
    );
    assert!(!m.set_session_name(" \u{1} ", true).unwrap());
}

#[test]
fn sanitizer_patches_are_owed_to_the_first_append_never_written_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("replay.jsonl");
    let text = fs::read_to_string(fixture("openai-replay-sanitize.jsonl"))
        .unwrap()
        .replace("<CWD>", dir.path().to_str().unwrap());
    fs::write(&path, &text).unwrap();
    let m = SessionManager::open(&path, "/", config(dir.path())).unwrap();
    m.close().unwrap();
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        text,
        "nothing written at open"
    );
    let message = m.read(|s| s.get_entry("assistant").unwrap().message().unwrap().clone());
    assert!(
        !message.contains_key("providerPayload"),
        "sanitized in memory"
    );
    let id = m.append_message(user("next")).unwrap();
    m.close().unwrap();
    let after = fs::read_to_string(&path).unwrap();
    assert!(after.starts_with(&text), "only appended");
    let added: Vec<&str> = after[text.len()..].lines().collect();
    assert_eq!(added.len(), 2, "the owed patch, then the entry");
    assert!(added[0].starts_with(r#"{"type":"entry_patch","entryId":"assistant","patch":{"message":{"role":"assistant","content":[{"type":"thinking","thinking":"private"}]"#));
    assert!(added[1].contains(&format!(r#""id":"{id}""#)));
    // Reopening finds nothing more to patch: the next append adds only its own line.
    let again = SessionManager::open(&path, "/", config(dir.path())).unwrap();
    again.append_message(user("last")).unwrap();
    again.close().unwrap();
    assert_eq!(
        fs::read_to_string(&path).unwrap().lines().count(),
        after.lines().count() + 1
    );
}

#[test]
fn a_failed_owed_patch_fails_the_first_append_and_leaves_the_file() {
    let storage = MemoryStorage::new();
    let path = PathBuf::from("/s/replay.jsonl");
    storage.ensure_dir(Path::new("/s")).unwrap();
    let text = fs::read_to_string(fixture("openai-replay-sanitize.jsonl")).unwrap();
    storage.put_file(&path, text.as_bytes());
    let cfg = memory_config(&storage);
    let m = SessionManager::open(&path, "/", cfg).unwrap();
    assert_eq!(storage.file(&path).unwrap(), text.as_bytes());
    let start = storage.op_count();
    storage.set_faults(
        (start..start + 50)
            .map(|at| Fault {
                at,
                kind: FaultKind::Errno(libc::EIO),
            })
            .collect(),
    );
    let err = m.append_message(user("q")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    assert_eq!(storage.file(&path).unwrap(), text.as_bytes());
    assert_eq!(storage.paths(), vec![path]);
}

use gjcfs::engine::storage::SessionStorage;

fn memory_config(storage: &MemoryStorage) -> StorageConfig {
    let shared: Arc<dyn SessionStorage> = Arc::new(storage.clone());
    StorageConfig {
        blobs: gjcfs::engine::format::blob::BlobStore::new("/agent/blobs", shared.clone()),
        storage: shared,
    }
}

#[test]
fn a_failed_append_is_rolled_back_and_the_error_latched() {
    let storage = MemoryStorage::new();
    let m = SessionManager::create("/w", "/s", memory_config(&storage));
    storage.ensure_dir(Path::new("/s")).unwrap();
    m.append_message(user("q")).unwrap();
    let a = m.append_message(assistant("a")).unwrap();
    let file = m.session_file().unwrap();
    let on_disk = storage.file(&file).unwrap();
    storage.set_fault(Some(Fault {
        at: storage.op_count(),
        kind: FaultKind::Errno(libc::ENOSPC),
    }));
    let leaf_before = m.leaf_id();
    let err = m.append_message(user("lost?")).unwrap_err();
    match &err {
        SessionError::Append {
            phase, entry_id, ..
        } => {
            assert_eq!(*phase, AppendPhase::CurrentAppend);
            assert!(err
                .to_string()
                .starts_with(&format!("entry {entry_id} was not appended: ")));
        }
        other => panic!("unexpected {other}"),
    }
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
    assert_eq!(m.leaf_id(), leaf_before);
    assert_eq!(m.leaf_id().as_deref(), Some(a.as_str()));
    assert_eq!(m.read(|s| s.entry_count()), 2);
    assert_eq!(storage.file(&file).unwrap(), on_disk);
    storage.set_fault(None);
    let refused = m.append_message(user("after")).unwrap_err();
    // Refused before an entry was built: the message names no entry.
    let said = refused.to_string();
    assert!(
        said.starts_with("nothing was appended: an earlier write of the session failed: "),
        "{said}"
    );
    match refused {
        SessionError::Append { phase, source, .. } => {
            assert_eq!(phase, AppendPhase::PriorFailure);
            assert_eq!(source.raw_os_error(), Some(libc::ENOSPC));
        }
        other => panic!("unexpected {other}"),
    }
    assert!(m.flush().is_err());
    assert!(m.persist_error().is_some());
    // Switching session clears the latch.
    m.new_session(None);
    assert!(m.persist_error().is_none());
    m.append_message(user("fresh")).unwrap();
}

#[test]
fn an_append_after_a_torn_last_line_is_not_swallowed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("torn.jsonl");
    let text = SessionText::new()
        .message("a", None, "user", "q")
        .message("b", Some("a"), "assistant", "a")
        .text();
    fs::write(
        &path,
        format!("{text}{{\"type\":\"message\",\"id\":\"c\",\"par"),
    )
    .unwrap();
    let m = SessionManager::open(&path, "/work", config(dir.path())).unwrap();
    append_after_a_tear(&m, &path, 3);
}

#[test]
fn opened_for_writing_a_file_cuts_its_torn_last_line_only_when_nothing_else_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let good = SessionText::new()
        .message("a", None, "user", "q")
        .message("b", Some("a"), "assistant", "a")
        .text();
    let fragment = "{\"type\":\"message\",\"id\":\"c\",\"par";
    let open = |text: &str| {
        let path = dir.path().join("s.jsonl");
        fs::write(&path, format!("{text}{fragment}")).unwrap();
        let target = gjcfs::engine::manager::WriteTarget::default();
        let m = SessionManager::open_for_writing(&path, &target, config(dir.path())).unwrap();
        (m, path)
    };
    let (m, path) = open(&good);
    let cut = m.cut_torn_tail().expect("cut");
    assert_eq!(
        (cut.offset, cut.len),
        (good.len() as u64, fragment.len() as u64)
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), good, "cut at open");
    let id = m.append_message(user("after the tear")).unwrap();
    m.close().unwrap();
    let (session, _) = parse_strict(&fs::read(&path).unwrap()).unwrap();
    assert_eq!(session.leaf_id(), Some(id.as_str()));
    // With another line damaged too, the file is left to the lenient rules: the torn line
    // stays and is ended by the append.
    let damaged = good.replace("\"q\"", "\"q");
    let (m, path) = open(&damaged);
    assert_eq!(m.cut_torn_tail(), None);
    assert!(fs::read_to_string(&path).unwrap().ends_with(fragment));
    let id = m.append_message(user("after the tear")).unwrap();
    m.close().unwrap();
    let loaded = load_session(&path).unwrap();
    assert_eq!(loaded.skipped.len(), 2, "the damaged line and the torn one");
    assert_eq!(loaded.session.leaf_id(), Some(id.as_str()));
}

/// Appends through `m` to `path`, whose last line is torn, then checks that only that line
/// is lost and the new entry is the leaf of the `entries` now in the file.
fn append_after_a_tear(m: &SessionManager, path: &Path, entries: usize) {
    let id = m.append_message(user("after the tear")).unwrap();
    m.close().unwrap();
    let loaded = load_session(path).unwrap();
    assert_eq!(loaded.skipped.len(), 1, "only the torn line is lost");
    assert_eq!(loaded.session.leaf_id(), Some(id.as_str()));
    assert_eq!(loaded.session.entry_count(), entries);
}

#[test]
fn labels_branches_and_context_clear() {
    let m = SessionManager::in_memory("/work");
    let a = m.append_message(user("a")).unwrap();
    let b = m.append_message(assistant("b")).unwrap();
    assert!(matches!(
        m.append_label_change("nope", Some("x")),
        Err(SessionError::EntryNotFound(_))
    ));
    m.append_label_change(&a, Some("start")).unwrap();
    assert_eq!(
        m.read(|s| s.label(&a).map(str::to_owned)),
        Some("start".into())
    );
    m.branch(&a).unwrap();
    let s = m.branch_with_summary(Some(&a), "tried b", None).unwrap();
    let parent = m.read(|x| x.get_entry(&s).unwrap().parent_id().map(str::to_owned));
    assert_eq!(parent.as_deref(), Some(a.as_str()));
    assert!(m.branch("missing").is_err());
    assert!(matches!(
        m.branch_with_summary(Some("missing"), "x", None),
        Err(SessionError::EntryNotFound(_))
    ));
    let root = m.branch_with_summary(None, "from root", None).unwrap();
    m.read(|x| {
        let e = x.get_entry(&root).unwrap();
        assert_eq!(e.parent_id(), None);
        assert_eq!(e.get_str("fromId"), Some("root"));
    });
    m.branch(&b).unwrap();
    let clear = m.append_context_clear().unwrap();
    let after = m.append_message(user("after clear")).unwrap();
    m.read(|x| {
        assert_eq!(
            x.get_entry(&clear).unwrap().get("parentId"),
            Some(&Value::Null)
        );
        let ctx = x.build_context();
        assert_eq!(ctx.messages.len(), 1);
        assert_eq!(x.leaf_id(), Some(after.as_str()));
        assert_eq!(x.entry_count(), 7);
    });
}

#[test]
fn fork_copies_the_session_under_a_new_id() {
    let dir = tempfile::tempdir().unwrap();
    let m = SessionManager::create("/work", dir.path(), config(dir.path()));
    m.append_message(user("q")).unwrap();
    m.append_message(assistant("a")).unwrap();
    m.set_session_name("named", true).unwrap();
    let old_id = m.session_id();
    let (old, new) = m.fork().unwrap();
    assert_ne!(old, new);
    assert_eq!(m.session_file().unwrap(), new);
    assert_ne!(m.session_id(), old_id);
    let forked = load_session(&new).unwrap().session;
    assert_eq!(forked.header().parent_session(), Some(old_id.as_str()));
    assert_eq!(forked.header().title(), Some("named"));
    assert_eq!(forked.entry_count(), 2);
    assert!(lines(&new)[0].starts_with(r#"{"type":"session","version":5,"id":""#));
    assert!(lines(&new)[0].contains(r#""title":"named","titleSource":"user","timestamp""#));
    assert!(SessionManager::in_memory("/").fork().is_err());
}

#[test]
fn branched_session_keeps_the_path_and_its_labels() {
    let dir = tempfile::tempdir().unwrap();
    let m = SessionManager::create("/work", dir.path(), config(dir.path()));
    let a = m.append_message(user("a")).unwrap();
    let b = m.append_message(assistant("b")).unwrap();
    let c = m.append_message(user("c")).unwrap();
    m.append_label_change(&a, Some("first")).unwrap();
    m.append_label_change(&c, Some("off path")).unwrap();
    m.branch(&b).unwrap();
    let old_file = m.session_file().unwrap();
    assert!(matches!(
        m.create_branched_session("nope"),
        Err(SessionError::EntryNotFound(_))
    ));
    let new = m.create_branched_session(&b).unwrap().unwrap();
    let session = load_session(&new).unwrap().session;
    assert_eq!(
        session.header().parent_session(),
        Some(old_file.to_str().unwrap())
    );
    let types: Vec<&str> = session
        .entries()
        .map(|e| e.get_str("type").unwrap())
        .collect();
    assert_eq!(types, ["message", "message", "label"]);
    assert_eq!(session.label(&a), Some("first"));
    assert_eq!(session.label(&c), None);
    let label = session.entries().last().unwrap();
    assert_eq!(label.parent_id(), Some(b.as_str()));
    assert_eq!(m.session_file().unwrap(), new);
    // In memory the same happens without a file.
    let mem = SessionManager::in_memory("/w");
    let x = mem.append_message(user("x")).unwrap();
    mem.append_message(user("y")).unwrap();
    assert_eq!(mem.create_branched_session(&x).unwrap(), None);
    assert_eq!(mem.read(|s| s.entry_count()), 1);
}

#[test]
fn fork_from_copies_a_legacy_file_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("dest");
    let m = SessionManager::fork_from(
        &fixture("real/large-session.jsonl"),
        "/work",
        &dest,
        config(dir.path()),
    )
    .unwrap();
    let file = m.session_file().unwrap();
    let session = load_session(&file).unwrap().session;
    assert_eq!(
        session.header().parent_session(),
        Some("d703a1a9-1b7b-4fb1-b512-c9738b1fe617")
    );
    assert_eq!(session.entry_count(), 1018);
    assert_eq!(session.build_context().messages.len(), 914);
    assert!(lines(&file)[0].starts_with(r#"{"type":"session","version":5,"id":""#));
}

#[test]
fn external_entries_are_validated_before_anything_is_appended() {
    let m = SessionManager::in_memory("/w");
    let a = m
        .append_external(
            json::parse(r#"{"role":"user","content":"hi"}"#)
                .unwrap()
                .as_object()
                .unwrap()
                .clone(),
        )
        .unwrap();
    let obj = |t: &str| json::parse(t).unwrap().as_object().unwrap().clone();
    let label = m
        .append_external(obj(&format!(
            r#"{{"type":"label","targetId":"{a}","label":"checkpoint"}}"#
        )))
        .unwrap();
    assert_eq!(m.leaf_id(), Some(label));
    for bad in [
        r#"{"type":"label","targetId":"missing","label":"x"}"#,
        r#"{"type":"label","id":"x","targetId":"t"}"#,
        r#"{"type":"compaction","summary":"s"}"#,
        r#"{"type":"whatever"}"#,
    ] {
        assert!(m.append_external(obj(bad)).is_err(), "{bad}");
    }
    assert_eq!(m.read(|s| s.entry_count()), 2);
}

#[test]
fn concurrent_appends_are_serialized() {
    let dir = tempfile::tempdir().unwrap();
    let m = Arc::new(SessionManager::create(
        "/work",
        dir.path(),
        config(dir.path()),
    ));
    m.append_message(user("q")).unwrap();
    m.append_message(assistant("a")).unwrap();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let m = m.clone();
            std::thread::spawn(move || {
                for i in 0..50 {
                    m.append_custom_entry("t", Some(Value::string(format!("{t}-{i}"))))
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    m.close().unwrap();
    let session = load_session(&m.session_file().unwrap()).unwrap().session;
    assert_eq!(session.entry_count(), 402);
    // One linear chain: every entry's parent is the entry before it.
    let records = session.records();
    for i in 2..records.len() {
        assert_eq!(records[i].parent_id(), records[i - 1].id());
    }
}

#[test]
fn images_go_to_the_blob_store_and_come_back_in_the_context() {
    let dir = tempfile::tempdir().unwrap();
    let m = SessionManager::create("/work", dir.path(), config(dir.path()));
    let bytes: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
    let b64 = data_encoding::BASE64.encode(&bytes);
    let message = json::parse(&format!(
        r#"{{"role":"user","content":[{{"type":"image","data":"{b64}","mimeType":"image/png"}}],"timestamp":1}}"#
    ))
    .unwrap();
    m.append_message(message.clone()).unwrap();
    m.append_message(assistant("nice")).unwrap();
    m.close().unwrap();
    let file = m.session_file().unwrap();
    let text = fs::read_to_string(&file).unwrap();
    assert!(!text.contains(&b64));
    let hash = gjcfs::engine::format::blob::sha256_hex(&bytes);
    assert!(text.contains(&format!("blob:sha256:{hash}")));
    assert_eq!(
        fs::read(dir.path().join("blobs").join(&hash)).unwrap(),
        bytes
    );
    let session = load_session(&file).unwrap().session;
    let stored = session.entries().next().unwrap().get("message").unwrap();
    let resolved = gjcfs::engine::format::persist::resolve_blob_refs(stored, &m.blobs());
    assert_eq!(resolved.as_ref(), &message);
}

#[test]
fn open_refuses_a_missing_or_non_session_file_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in [
        ("missing.jsonl", None),
        ("empty.jsonl", Some("")),
        ("junk.jsonl", Some("{\"x\":1}\n")),
        ("config.json", Some("{\"theme\":\"dark\"}")),
        ("notes.txt", Some("just some text\n")),
    ] {
        let path = dir.path().join(name);
        if let Some(c) = content {
            fs::write(&path, c).unwrap();
        }
        let err = SessionManager::open(&path, "/project", config(dir.path())).unwrap_err();
        match (content, &err) {
            (None, SessionError::Load(LoadError::Missing { .. })) => {}
            (Some(_), SessionError::Load(LoadError::NotASession { .. })) => {}
            _ => panic!("{name}: {err}"),
        }
        assert_eq!(fs::read_to_string(&path).ok().as_deref(), content, "{name}");
    }
    assert_eq!(
        fs::read_dir(dir.path()).unwrap().count(),
        4,
        "nothing created"
    );
}

#[test]
fn set_session_file_switches_and_refuses_malformed_files() {
    let dir = tempfile::tempdir().unwrap();
    let m = SessionManager::create("/work", dir.path(), config(dir.path()));
    let good = write_fixture(dir.path(), "v4-patch-fixture.jsonl");
    let before = fs::read(&good).unwrap();
    m.set_session_file(&good).unwrap();
    assert_eq!(
        m.read(|s| s.header().title().map(str::to_owned)),
        Some("Patched title".into())
    );
    assert_eq!(fs::read(&good).unwrap(), before, "no writes on adoption");
    let bad = write_fixture(dir.path(), "lenient-malformed-line.jsonl");
    assert!(matches!(
        m.set_session_file(&bad),
        Err(SessionError::Inspect { .. })
    ));
    let fresh = dir.path().join("new.jsonl");
    m.set_session_file(&fresh).unwrap();
    assert_eq!(lines(&fresh).len(), 1);
}

#[test]
fn a_file_deleted_behind_the_manager_is_written_again() {
    let dir = tempfile::tempdir().unwrap();
    let m = SessionManager::create("/work", dir.path(), config(dir.path()));
    m.append_message(user("q")).unwrap();
    m.append_message(assistant("a")).unwrap();
    let file = m.session_file().unwrap();
    fs::remove_file(&file).unwrap();
    m.append_message(user("again")).unwrap();
    m.flush().unwrap();
    assert_eq!(load_session(&file).unwrap().session.entry_count(), 3);
}

#[test]
fn move_to_relocates_the_file_and_rewrites_the_cwd() {
    let dir = tempfile::tempdir().unwrap();
    let m = SessionManager::create("/old", dir.path().join("a"), config(dir.path()));
    m.append_message(user("q")).unwrap();
    m.append_message(assistant("a")).unwrap();
    let old = m.session_file().unwrap();
    let dest = dir.path().join("b");
    m.move_to("/new", &dest).unwrap();
    let new = m.session_file().unwrap();
    assert_eq!(new, dest.join(old.file_name().unwrap()));
    assert!(!old.exists());
    assert!(lines(&new)[0].contains(r#""cwd":"/new""#));
    let reopened = load_session(&new).unwrap().session;
    assert_eq!(reopened.header().cwd(), Some("/new"));
    assert_eq!(reopened.entry_count(), 2);
    // A destination that exists is refused and both files stay.
    let other = SessionManager::create("/x", dir.path().join("c"), config(dir.path()));
    other.append_message(user("q")).unwrap();
    other.append_message(assistant("a")).unwrap();
    let blocker = dir.path().join("d");
    fs::create_dir_all(&blocker).unwrap();
    let taken = blocker.join(other.session_file().unwrap().file_name().unwrap());
    fs::write(&taken, "occupied").unwrap();
    assert!(matches!(
        other.move_to("/y", &blocker),
        Err(SessionError::AlreadyExists { .. })
    ));
    assert_eq!(fs::read_to_string(&taken).unwrap(), "occupied");
    assert!(other.session_file().unwrap().exists());
    // A fresh session moves without creating a file; it is written later at the new place.
    let fresh = SessionManager::create("/f", dir.path().join("e"), config(dir.path()));
    fresh.move_to("/g", &dir.path().join("h")).unwrap();
    assert!(!fresh.session_file().unwrap().exists());
    fresh.append_message(assistant("first")).unwrap();
    assert!(lines(&fresh.session_file().unwrap())[0].contains(r#""cwd":"/g""#));
}

#[test]
fn every_entry_type_written_passes_strict_inspection_and_round_trips() {
    use gjcfs::engine::manager::ModelChain;
    let dir = tempfile::tempdir().unwrap();
    let m = SessionManager::create("/work", dir.path(), config(dir.path()));
    let q = m.append_message(user("q")).unwrap();
    m.append_message(assistant("a")).unwrap();
    m.append_thinking_level_change(Some("high")).unwrap();
    m.append_model_change("openai/gpt", Some("smol")).unwrap();
    m.append_service_tier_change(None).unwrap();
    m.append_configured_model_chain(&ModelChain {
        role: "default",
        entries: &["a/b", "c/d"],
        origin: "user",
        identity: None,
        explicit_head: true,
        cleared: false,
    })
    .unwrap();
    m.append_compaction("summary", &q, 1234.0, None).unwrap();
    m.append_custom_entry("ext", Some(Value::Null)).unwrap();
    m.append_custom_message_entry("ext", Value::string("shown"), true, None, Some("user"))
        .unwrap();
    m.append_label_change(&q, Some("start")).unwrap();
    m.append_ttsr_injection(&["rule"]).unwrap();
    let init = json::parse(r#"{"systemPrompt":"p","task":"t","tools":["read"]}"#).unwrap();
    m.append_session_init(init.as_object().unwrap()).unwrap();
    m.append_mode_change("plan", None).unwrap();
    m.append_mcp_tool_selection(&["srv.tool"], Some("corr"))
        .unwrap();
    m.append_discovered_builtin_tool_selection(&[], Some("corr"))
        .unwrap();
    m.branch_with_summary(Some(&q), "side", None).unwrap();
    m.set_session_name("all types", false).unwrap();
    m.close().unwrap();
    let file = m.session_file().unwrap();
    let bytes = fs::read(&file).unwrap();
    let (session, _) = parse_strict(&bytes).unwrap();
    assert_eq!(session.entry_count(), 16);
    for line in lines(&file) {
        assert_eq!(json::to_compact(&json::parse(&line).unwrap()), line);
    }
    let ctx = session.build_context();
    assert_eq!(ctx.messages.len(), 2, "user message and the branch summary");
}

// --- Never lose or alter a session -------------------------------------------------------

use gjcfs::engine::manager::{ReadRules, Refresh, WriteTarget};
use gjcfs::engine::store::legacy::MigrationPolicy;

/// The bytes and mtime of a file, to show it was not touched.
fn snapshot(path: &Path) -> (Vec<u8>, std::time::SystemTime) {
    (
        fs::read(path).unwrap(),
        fs::metadata(path).unwrap().modified().unwrap(),
    )
}

/// Every write a manager offers; each must fail with `ReadOnly`.
fn assert_every_write_is_refused(m: &SessionManager, elsewhere: &Path) {
    let read_only = |what: &str, r: Result<(), SessionError>| match r {
        Err(SessionError::ReadOnly { .. }) => {}
        other => panic!("{what}: {other:?}"),
    };
    read_only("append", m.append_message(user("x")).map(drop));
    let entry = json::parse(r#"{"role":"user","content":"x"}"#).unwrap();
    let entry = entry.as_object().unwrap().clone();
    read_only(
        "append_external",
        m.append_external(entry.clone()).map(drop),
    );
    read_only(
        "append_external_all",
        m.append_external_all(vec![entry]).map(drop),
    );
    read_only("set_session_name", m.set_session_name("t", true).map(drop));
    read_only("rewrite_entries", m.rewrite_entries());
    read_only("ensure_on_disk", m.ensure_on_disk());
    read_only("fork", m.fork().map(drop));
    let leaf = m.leaf_id().unwrap();
    read_only(
        "create_branched_session",
        m.create_branched_session(&leaf).map(drop),
    );
    read_only("move_to", m.move_to("/elsewhere", elsewhere));
    read_only(
        "set_session_file",
        m.set_session_file(&elsewhere.join("new.jsonl")),
    );
}

#[test]
fn load_for_reading_migrates_and_sanitizes_in_memory_and_never_writes() {
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other");
    fs::create_dir(&other).unwrap();
    // A v1 file (migrated in memory) with a torn last line (skipped).
    let v1 = dir.path().join("v1.jsonl");
    fs::write(
        &v1,
        fixture_text_of("v1-minimal.jsonl") + r#"{"type":"message","timest"#,
    )
    .unwrap();
    // A file the OpenAI replay sanitizer changes.
    let replay = dir.path().join("replay.jsonl");
    fs::write(&replay, fixture_text_of("openai-replay-sanitize.jsonl")).unwrap();
    for path in [&v1, &replay] {
        let before = snapshot(path);
        let m = SessionManager::load_for_reading(path, config(dir.path()), ReadRules::Explicit)
            .unwrap();
        assert!(m.read(|s| s.entries().all(|e| e.id().is_some())));
        assert_every_write_is_refused(&m, &other);
        m.close().unwrap();
        drop(m);
        assert_eq!(snapshot(path), before, "{}", path.display());
    }
    let m =
        SessionManager::load_for_reading(&replay, config(dir.path()), ReadRules::Explicit).unwrap();
    let message = m.read(|s| s.get_entry("assistant").unwrap().message().unwrap().clone());
    assert!(!message.contains_key("providerPayload"));
    // It follows lines appended from outside.
    let line = r#"{"type":"message","id":"outside1","parentId":"assistant","timestamp":"2026-01-01T00:00:09.000Z","message":{"role":"user","content":"more","timestamp":9}}"#;
    let mut f = fs::OpenOptions::new().append(true).open(&replay).unwrap();
    std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes()).unwrap();
    let before = snapshot(&replay);
    assert!(matches!(
        m.refresh_from_file().unwrap(),
        Refresh::Appended { records: 1, .. }
    ));
    assert_eq!(m.leaf_id().as_deref(), Some("outside1"));
    assert_eq!(snapshot(&replay), before);
    assert_eq!(
        fs::read_dir(dir.path()).unwrap().count(),
        3,
        "nothing created"
    );

    let missing = dir.path().join("missing.jsonl");
    assert!(matches!(
        SessionManager::load_for_reading(&missing, config(dir.path()), ReadRules::Explicit),
        Err(SessionError::Load(LoadError::Missing { .. }))
    ));
    let text = dir.path().join("notes.jsonl");
    fs::write(&text, "not a session\n").unwrap();
    assert!(matches!(
        SessionManager::load_for_reading(&text, config(dir.path()), ReadRules::Explicit),
        Err(SessionError::Load(LoadError::NotASession { .. }))
    ));
    assert_eq!(fs::read_to_string(&text).unwrap(), "not a session\n");
}

fn fixture_text_of(name: &str) -> String {
    fs::read_to_string(fixture(name)).unwrap()
}

/// A managed transcript with a question and an answer in a fresh agent directory.
fn managed_session(tmp: &Path) -> (PathBuf, PathBuf) {
    let ws = tmp.join("workspace");
    fs::create_dir_all(&ws).unwrap();
    let root = tmp.join("agent/sessions");
    let m = SessionManager::create_managed(&ws, &root, config(tmp)).unwrap();
    m.append_message(user("q")).unwrap();
    m.append_message(assistant("a")).unwrap();
    m.close().unwrap();
    (ws, m.session_file().unwrap())
}

#[test]
fn reading_a_managed_transcript_keeps_the_boundary_but_reads_leniently() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let (_, file) = managed_session(tmp.path());
    let mut f = fs::OpenOptions::new().append(true).open(&file).unwrap();
    std::io::Write::write_all(&mut f, br#"{"type":"message","torn"#).unwrap();
    let before = snapshot(&file);
    let rules = ReadRules::for_path(&file);
    assert_eq!(rules, ReadRules::Managed);
    let m = SessionManager::load_for_reading(&file, config(tmp.path()), rules).unwrap();
    assert_eq!(m.read(|s| s.entry_count()), 2, "the torn line is skipped");
    assert_every_write_is_refused(&m, tmp.path());
    assert_eq!(snapshot(&file), before);
    // The strict write path refuses the torn line, saying why.
    let err = SessionManager::open_managed(&file, config(tmp.path())).unwrap_err();
    assert!(matches!(err, SessionError::Inspect { .. }), "{err}");

    fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
    let err = SessionManager::load_for_reading(&file, config(tmp.path()), rules).unwrap_err();
    assert!(err.to_string().contains("mode 644"), "{err}");
    fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
    // A binding for another workspace fails closed.
    let binding = file
        .parent()
        .unwrap()
        .join(gjcfs::engine::store::scope::BINDING_FILE);
    let bound = fs::read_to_string(&binding).unwrap();
    let elsewhere =
        gjcfs::engine::store::scope::binding_bytes(&gjcfs::engine::store::scope::Identity {
            platform: "posix",
            canonical_path: "/somewhere/else".into(),
        });
    fs::write(&binding, &elsewhere).unwrap();
    for result in [
        SessionManager::load_for_reading(&file, config(tmp.path()), rules),
        SessionManager::open_managed(&file, config(tmp.path())),
    ] {
        match result {
            Err(SessionError::Scope(
                gjcfs::engine::store::scope::ScopeError::BindingConflict { .. },
            )) => {}
            other => panic!("{other:?}"),
        }
    }
    fs::write(&binding, bound).unwrap();
    assert!(SessionManager::load_for_reading(&file, config(tmp.path()), rules).is_ok());
}

#[test]
fn a_scope_that_does_not_verify_is_refused_on_open() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let (_, file) = managed_session(tmp.path());
    let scope = file.parent().unwrap().to_owned();
    let binding = scope.join(gjcfs::engine::store::scope::BINDING_FILE);
    type Step<'a> = Box<dyn Fn() + 'a>;
    let cases: [(&str, Step, Step); 3] = [
        (
            "group-readable scope",
            Box::new(|| fs::set_permissions(&scope, fs::Permissions::from_mode(0o750)).unwrap()),
            Box::new(|| fs::set_permissions(&scope, fs::Permissions::from_mode(0o700)).unwrap()),
        ),
        (
            "no binding",
            Box::new(|| fs::rename(&binding, scope.join("aside")).unwrap()),
            Box::new(|| fs::rename(scope.join("aside"), &binding).unwrap()),
        ),
        (
            "hard-linked binding",
            Box::new(|| fs::hard_link(&binding, tmp.path().join("link")).unwrap()),
            Box::new(|| fs::remove_file(tmp.path().join("link")).unwrap()),
        ),
    ];
    for (what, break_it, fix_it) in cases {
        break_it();
        assert!(
            matches!(
                SessionManager::open_managed(&file, config(tmp.path())),
                Err(SessionError::Scope(_))
            ),
            "{what}"
        );
        fix_it();
        SessionManager::open_managed(&file, config(tmp.path())).unwrap();
    }
}

#[test]
fn a_full_rewrite_of_a_file_changed_on_disk_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // A v1 file: its first write is a full rewrite (the migration).
    let path = write_fixture(dir.path(), "v1-minimal.jsonl");
    let m = SessionManager::open(&path, "/tmp", config(dir.path())).unwrap();
    // Another process appends meanwhile.
    let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
    std::io::Write::write_all(
        &mut f,
        b"{\"type\":\"custom\",\"customType\":\"outside\"}\n",
    )
    .unwrap();
    let before = snapshot(&path);
    let err = m.append_message(user("q")).unwrap_err();
    assert!(matches!(err, SessionError::ChangedOnDisk { .. }), "{err}");
    assert_eq!(m.read(|s| s.entry_count()), 2, "rolled back in memory");
    assert!(matches!(
        m.rewrite_entries(),
        Err(SessionError::ChangedOnDisk { .. })
    ));
    assert_eq!(snapshot(&path), before, "the file is untouched");
    assert_eq!(
        fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no temp file left"
    );
    // Not latched: the file is as memory reflects it once reopened.
    let again = SessionManager::open(&path, "/tmp", config(dir.path())).unwrap();
    again.append_message(user("q")).unwrap();
    assert!(fs::read_to_string(&path).unwrap().contains("outside"));
}

#[test]
fn a_full_rewrite_is_refused_while_another_process_holds_the_file_for_writing() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_fixture(dir.path(), "v2-already-has-ids.jsonl");
    let m = SessionManager::open(&path, "/tmp", config(dir.path())).unwrap();
    let before = snapshot(&path);
    // A child process that keeps the file open for appending (as a live agent does).
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg("exec 3>>\"$1\"; echo ready; exec sleep 30")
        .arg("sh")
        .arg(&path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut ready,
    )
    .unwrap();
    let started = std::time::Instant::now();
    let err = m.rewrite_entries().unwrap_err();
    let took = started.elapsed();
    child.kill().unwrap();
    child.wait().unwrap();
    match &err {
        SessionError::OpenElsewhere { pids, .. } => assert_eq!(pids, &[child.id()]),
        other => panic!("{other}"),
    }
    eprintln!("refused rewrite (one check: stat and a /proc scan) took {took:?}");
    assert_eq!(snapshot(&path), before);
    assert_eq!(
        fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no temp file left"
    );
    // Once it is gone, the rewrite goes ahead.
    m.rewrite_entries().unwrap();
    assert!(lines(&path)[0].contains(r#""version":5"#));
}

#[test]
fn a_full_rewrite_is_refused_when_the_storage_reports_another_writer() {
    let storage = MemoryStorage::new();
    storage.ensure_dir(Path::new("/s")).unwrap();
    let path = PathBuf::from("/s/a.jsonl");
    let text = fixture_text_of("v2-already-has-ids.jsonl");
    storage.put_file(&path, text.as_bytes());
    let m = SessionManager::open(&path, "/", memory_config(&storage)).unwrap();
    storage.set_foreign_writers(&path, vec![4242]);
    let err = m.append_message(user("q")).unwrap_err();
    assert!(
        matches!(&err, SessionError::OpenElsewhere { pids, .. } if pids == &[4242]),
        "{err}"
    );
    assert_eq!(storage.file(&path).unwrap(), text.as_bytes());
    assert_eq!(storage.paths(), vec![path.clone()]);
    storage.set_foreign_writers(&path, Vec::new());
    m.append_message(user("q")).unwrap();
}

#[test]
fn a_torn_tail_left_by_another_process_after_the_writer_opened_is_ended_first() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    fs::write(
        &path,
        SessionText::new()
            .message("a", None, "user", "q")
            .message("b", Some("a"), "assistant", "a")
            .text(),
    )
    .unwrap();
    let m = SessionManager::open(&path, "/work", config(dir.path())).unwrap();
    m.append_message(user("first")).unwrap();
    // Another process crashes in the middle of its line; our writer is already open.
    let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
    std::io::Write::write_all(&mut f, br#"{"type":"message","id":"x","par"#).unwrap();
    append_after_a_tear(&m, &path, 4);
}

/// A question and its answer at `/s/a.jsonl` in memory, opened: (storage, path, text,
/// manager).
fn answered_in_memory() -> (MemoryStorage, PathBuf, String, SessionManager) {
    let storage = MemoryStorage::new();
    storage.ensure_dir(Path::new("/s")).unwrap();
    let path = PathBuf::from("/s/a.jsonl");
    let text = SessionText::new()
        .message("a", None, "user", "q")
        .message("b", Some("a"), "assistant", "a")
        .text();
    storage.put_file(&path, text.as_bytes());
    let m = SessionManager::open(&path, "/", memory_config(&storage)).unwrap();
    (storage, path, text, m)
}

#[test]
fn a_failed_append_leaves_no_torn_partial() {
    for kind in [FaultKind::ShortWrite, FaultKind::Errno(libc::ENOSPC)] {
        let (storage, path, _, m) = answered_in_memory();
        m.append_message(user("kept")).unwrap();
        let before = storage.file(&path).unwrap();
        let write = storage.op_count() + 1; // end, then write
        storage.set_fault(Some(Fault { at: write, kind }));
        assert!(m.append_message(user("x".repeat(100).as_str())).is_err());
        assert_eq!(storage.file(&path).unwrap(), before, "{kind:?}");
    }
}

#[test]
fn append_external_all_is_all_or_nothing_and_one_write() {
    let (storage, path, text, m) = answered_in_memory();
    let obj = |t: &str| json::parse(t).unwrap().as_object().unwrap().clone();
    let ok = || {
        vec![
            obj(r#"{"role":"user","content":"one"}"#),
            obj(r#"{"type":"label","targetId":"a","label":"start"}"#),
            obj(r#"{"type":"custom","customType":"x"}"#),
        ]
    };
    for bad in [
        obj(r#"{"type":"ttsr_injection"}"#),
        obj(r#"{"type":"label","targetId":"nowhere","label":"x"}"#),
        obj(r#"{"type":"message","id":"given"}"#),
    ] {
        let mut batch = ok();
        batch.push(bad);
        assert!(m.append_external_all(batch).is_err());
        assert_eq!(m.read(|s| s.entry_count()), 2);
        assert_eq!(storage.file(&path).unwrap(), text.as_bytes());
    }
    // A failing write takes nothing.
    storage.set_fault(Some(Fault {
        at: storage.op_count() + 2, // open_writer, end, write
        kind: FaultKind::ShortWrite,
    }));
    assert!(m.append_external_all(ok()).is_err());
    assert_eq!(m.read(|s| s.entry_count()), 2);
    assert_eq!(m.leaf_id().as_deref(), Some("b"));
    assert_eq!(storage.file(&path).unwrap(), text.as_bytes());
    // The same batch on a fresh manager: all in one write, chained under the leaf.
    storage.set_fault(None);
    let m = SessionManager::open(&path, "/", memory_config(&storage)).unwrap();
    let writes = |s: &MemoryStorage| s.op_log().iter().filter(|o| **o == "write").count();
    let before = writes(&storage);
    let ids = m.append_external_all(ok()).unwrap();
    assert_eq!(writes(&storage) - before, 1);
    let text = String::from_utf8(storage.file(&path).unwrap()).unwrap();
    let records = gjcfs::engine::read::replay::parse_session_entries(&text)
        .unwrap()
        .records;
    let on_disk: Vec<(&str, Option<&str>)> = records[3..]
        .iter()
        .map(|r| (r.id().unwrap(), r.parent_id()))
        .collect();
    assert_eq!(
        on_disk,
        [
            (ids[0].as_str(), Some("b")),
            (ids[1].as_str(), Some(ids[0].as_str())),
            (ids[2].as_str(), Some(ids[1].as_str())),
        ]
    );
    assert_eq!(
        m.read(|s| s.label("a").map(str::to_owned)),
        Some("start".into())
    );
}

#[test]
fn a_crash_left_temp_file_is_removed_by_the_next_write_open_not_by_reading() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_fixture(dir.path(), "v2-already-has-ids.jsonl");
    let temp = dir.path().join(".v2-already-has-ids.jsonl.123456789.tmp");
    fs::write(&temp, "half a rewrite").unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    fs::File::options()
        .write(true)
        .open(&temp)
        .unwrap()
        .set_modified(old)
        .unwrap();
    let backup = dir.path().join("gone.jsonl.987.bak");
    fs::copy(&path, &backup).unwrap();
    SessionManager::load_for_reading(&path, config(dir.path()), ReadRules::Explicit).unwrap();
    gjcfs::engine::store::discovery::list_dir(&gjcfs::engine::storage::FileStorage, dir.path())
        .unwrap();
    assert!(temp.exists() && backup.exists(), "reading recovers nothing");
    SessionManager::open(&path, "/", config(dir.path())).unwrap();
    assert!(!temp.exists(), "the orphaned temp is gone");
    assert!(
        !backup.exists() && dir.path().join("gone.jsonl").exists(),
        "the backup is back"
    );
}

fn write_target(root: &Path, policy: MigrationPolicy) -> WriteTarget {
    WriteTarget {
        sessions_root: Some(root.to_owned()),
        policy,
    }
}

/// An agent directory with a legacy directory holding a transcript of `ws`.
fn legacy_layout(tmp: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let ws = tmp.join("ws");
    fs::create_dir_all(&ws).unwrap();
    let ws = fs::canonicalize(&ws).unwrap();
    let root = tmp.join("agent/sessions");
    let legacy = root.join(gjcfs::engine::store::legacy::encode_absolute(
        ws.to_str().unwrap(),
    ));
    fs::create_dir_all(&legacy).unwrap();
    let file = legacy.join("2026-01-01T00-00-00-000Z_legacy.jsonl");
    let header = format!(
        r#"{{"type":"session","version":5,"id":"legacy","timestamp":"2026-01-01T00:00:00.000Z","cwd":"{}"}}"#,
        ws.display()
    );
    fs::write(
        &file,
        SessionText::with_header(&header)
            .message("a", None, "user", "q")
            .message("b", Some("a"), "assistant", "a")
            .text(),
    )
    .unwrap();
    (ws, root, file)
}

#[test]
fn open_for_writing_copies_a_legacy_transcript_into_the_scope_and_writes_the_copy() {
    let tmp = tempfile::tempdir().unwrap();
    let (ws, root, file) = legacy_layout(tmp.path());
    let before = snapshot(&file);
    let target = write_target(&root, MigrationPolicy::CopyRetain);
    let m = SessionManager::open_for_writing(&file, &target, config(tmp.path())).unwrap();
    let written = m.session_file().unwrap();
    let identity = gjcfs::engine::store::scope::resolve_identity(&ws).unwrap();
    assert_eq!(
        written,
        root.join(gjcfs::engine::store::scope::scope_dir_name(&identity))
            .join(file.file_name().unwrap())
    );
    let id = m.append_message(user("more")).unwrap();
    assert_eq!(
        load_session(&written).unwrap().session.leaf_id(),
        Some(id.as_str())
    );
    assert_eq!(
        snapshot(&file),
        before,
        "the legacy file is byte-identical, mtime included"
    );
    // Opening the legacy path again writes the same copy.
    let again = SessionManager::open_for_writing(&file, &target, config(tmp.path())).unwrap();
    assert_eq!(again.session_file().unwrap(), written);
    assert_eq!(again.read(|s| s.entry_count()), 3);
    // A v2 transcript is opened managed, anything else explicitly.
    let v2 = SessionManager::open_for_writing(&written, &target, config(tmp.path())).unwrap();
    assert_eq!(v2.session_file().unwrap(), written);
    let explicit = tmp.path().join("plain.jsonl");
    fs::copy(&written, &explicit).unwrap();
    let plain = SessionManager::open_for_writing(&explicit, &target, config(tmp.path())).unwrap();
    assert_eq!(plain.session_file().unwrap(), explicit);
}

#[test]
fn open_for_writing_fails_and_changes_nothing_when_a_legacy_transcript_cannot_migrate() {
    let tmp = tempfile::tempdir().unwrap();
    let (ws, root, file) = legacy_layout(tmp.path());
    let before = snapshot(&file);
    let disabled = write_target(&root, MigrationPolicy::Disabled);
    let err = SessionManager::open_for_writing(&file, &disabled, config(tmp.path())).unwrap_err();
    assert!(
        err.to_string().contains("legacy_migration_disabled"),
        "{err}"
    );
    let copy_retain = write_target(&root, MigrationPolicy::CopyRetain);
    // A file the listing does not offer as a candidate (not `*.jsonl`) is not migrated.
    let odd = file.with_file_name("copy.jsonl.old");
    fs::copy(&file, &odd).unwrap();
    let odd_before = snapshot(&odd);
    let err = SessionManager::open_for_writing(&odd, &copy_retain, config(tmp.path())).unwrap_err();
    assert!(err.to_string().contains("invalid_candidate"), "{err}");
    assert_eq!(snapshot(&odd), odd_before);
    // A scope bound to another workspace (a binding conflict).
    let identity = gjcfs::engine::store::scope::resolve_identity(&ws).unwrap();
    let scope = root.join(gjcfs::engine::store::scope::scope_dir_name(&identity));
    fs::create_dir(&scope).unwrap();
    fs::set_permissions(&scope, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let binding = scope.join(gjcfs::engine::store::scope::BINDING_FILE);
    let other = gjcfs::engine::store::scope::Identity {
        platform: "posix",
        canonical_path: "/somewhere/else".into(),
    };
    fs::write(&binding, gjcfs::engine::store::scope::binding_bytes(&other)).unwrap();
    let err =
        SessionManager::open_for_writing(&file, &copy_retain, config(tmp.path())).unwrap_err();
    assert!(err.to_string().contains("binding_conflict"), "{err}");
    assert_eq!(fs::read_dir(&scope).unwrap().count(), 1, "nothing copied");
    fs::remove_file(&binding).unwrap();
    fs::remove_dir(&scope).unwrap();
    // The workspace is gone.
    fs::remove_dir(&ws).unwrap();
    let err =
        SessionManager::open_for_writing(&file, &copy_retain, config(tmp.path())).unwrap_err();
    assert!(matches!(err, SessionError::Legacy(_)), "{err}");
    assert_eq!(snapshot(&file), before);
    let dirs: Vec<_> = fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(dirs.len(), 1, "no scope was made: {dirs:?}");
}
