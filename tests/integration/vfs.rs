//! The filesystem model without a kernel: layout, sizes, stable inodes, write semantics.

use std::fs;
use std::path::Path;

use gjcfs::engine::json::{self, Value};
use gjcfs::engine::load_session;
use gjcfs::engine::manager::{SessionManager, StorageConfig};
use gjcfs::vfs::{
    AttrChange, Caching, KeptListing, ListedAttr, NamespaceChange, NodeKind, OpenMode, Part,
    SessionSource, Vfs, VfsConfig, VfsError, ROOT_INO,
};

use crate::common::vfs_io::{read_file, write_file};

fn message(role: &str, text: &str) -> Value {
    json::parse(&format!(
        r#"{{"role":"{role}","content":"{text}","provider":"p","model":"m","timestamp":1}}"#
    ))
    .unwrap()
}

/// A truncation to `size`.
fn size(size: u64) -> AttrChange {
    AttrChange {
        size: Some(size),
        others: false,
    }
}

/// A change of mode, owner or times.
fn others() -> AttrChange {
    AttrChange {
        size: None,
        others: true,
    }
}

/// A new managed session of workspace `tmp/workspace` in the store under `tmp/agent`.
fn managed(tmp: &Path, workspace: &str) -> SessionManager {
    let ws = tmp.join(workspace);
    fs::create_dir_all(&ws).unwrap();
    SessionManager::create_managed(
        &ws,
        &tmp.join("agent/sessions"),
        StorageConfig::files(tmp.join("agent/blobs")),
    )
    .unwrap()
}

/// A managed session with q → a → q2, and its ids.
fn setup(tmp: &Path) -> (String, Vec<String>) {
    let m = managed(tmp, "workspace");
    let ids = vec![
        m.append_message(message("user", "q")).unwrap(),
        m.append_message(message("assistant", "a")).unwrap(),
        m.append_message(message("user", "q2")).unwrap(),
    ];
    m.close().unwrap();
    (m.session_id(), ids)
}

/// A second session, in a second workspace (a second directory of the sessions root): a
/// user question and a reply.
fn second_session(tmp: &Path) -> SessionManager {
    let m = managed(tmp, "workspace2");
    m.append_message(message("user", "other")).unwrap();
    m.append_message(message("assistant", "reply")).unwrap();
    m.close().unwrap();
    m
}

fn vfs_config(tmp: &Path, read_only: bool) -> VfsConfig {
    VfsConfig {
        storage: std::sync::Arc::new(gjcfs::vfs::FileStorage),
        source: SessionSource::SessionsRoot(tmp.join("agent/sessions")),
        blob_dir: tmp.join("agent/blobs"),
        read_only,
        max_loaded: 1,
        history_db: tmp.join("agent/history.db"),
        owner_uid: None,
        search_index: None,
        saved_usage: None,
        saved_listing: None,
        saved_renderings: None,
        redact: false,
    }
}

fn vfs(tmp: &Path, read_only: bool) -> Vfs {
    Vfs::new(vfs_config(tmp, read_only))
}

fn read_all(v: &Vfs, ino: u64) -> Vec<u8> {
    read_file(v, ino).unwrap()
}

/// The names directory `ino` lists.
fn listed_names(v: &Vfs, ino: u64) -> Vec<String> {
    v.readdir(ino)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect()
}

fn session_ino(v: &Vfs, sid: &str) -> u64 {
    let sessions = v.lookup(ROOT_INO, "sessions").unwrap().ino;
    v.lookup(sessions, sid).unwrap().ino
}

/// A fresh writable model over a new store: the model, the session's id, its entry ids,
/// and the inodes of its `entries/` and `entries/new`.
fn writable_entries(tmp: &Path) -> (Vfs, String, Vec<String>, u64, u64) {
    let (sid, ids) = setup(tmp);
    let v = vfs(tmp, false);
    let entries = v.lookup(session_ino(&v, &sid), "entries").unwrap().ino;
    let new = v.lookup(entries, "new").unwrap().ino;
    (v, sid, ids, entries, new)
}

#[test]
fn layout_sizes_and_inodes_agree() {
    let tmp = tempfile::tempdir().unwrap();
    let (sid, ids) = setup(tmp.path());
    let v = vfs(tmp.path(), false);
    let sessions = v.lookup(ROOT_INO, "sessions").unwrap();
    assert_eq!(sessions.kind, NodeKind::Directory);
    assert_eq!(sessions.perm, 0o700);
    let listed = v.readdir(sessions.ino).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name, sid);
    let sdir = session_ino(&v, &sid);
    assert_eq!(listed[0].ino, sdir);
    let names = listed_names(&v, sdir);
    assert_eq!(
        names,
        [
            "header.json",
            "session.jsonl",
            "entries",
            "leaf",
            "context.json",
            "context.md",
            "context.html",
            "pages",
            "tree.txt",
            "tree.svg",
            "leaves",
            "usage.json",
            "labels",
            "errors",
            "blobs"
        ]
    );

    let header = v.lookup(sdir, "header.json").unwrap();
    let bytes = read_all(&v, header.ino);
    assert_eq!(header.size, bytes.len() as u64);
    assert_eq!(header.perm, 0o400);
    let value = json::parse(std::str::from_utf8(&bytes).unwrap()).unwrap();
    assert_eq!(value.as_object().unwrap().get_str("id"), Some(sid.as_str()));

    let entries = v.lookup(sdir, "entries").unwrap().ino;
    let listing = v.readdir(entries).unwrap();
    let expected: Vec<String> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| format!("{i:06}-{id}.json"))
        .chain(["new".to_owned()])
        .collect();
    let names: Vec<String> = listing.iter().map(|e| e.name.clone()).collect();
    assert_eq!(names, expected);
    let by_index = v.lookup(entries, &expected[1]).unwrap();
    let by_id = v.lookup(entries, &format!("{}.json", ids[1])).unwrap();
    assert_eq!(by_index.ino, by_id.ino);
    assert_eq!(listing[1].ino, by_id.ino);
    let entry = read_all(&v, by_id.ino);
    assert_eq!(by_id.size, entry.len() as u64);
    assert!(String::from_utf8(entry)
        .unwrap()
        .contains("\"content\": \"a\""));
    assert_eq!(
        v.lookup(entries, "000001-nope.json"),
        Err(VfsError::NotFound)
    );

    let leaf = v.lookup(sdir, "leaf").unwrap();
    assert_eq!(read_all(&v, leaf.ino), format!("{}\n", ids[2]).into_bytes());
    let context = v.lookup(sdir, "context.json").unwrap();
    assert_eq!(context.size, read_all(&v, context.ino).len() as u64);
    // Looked up again (the LRU holds one session), the numbers are the same.
    assert_eq!(session_ino(&v, &sid), sdir);
    assert_eq!(v.getattr(by_id.ino).unwrap(), by_id);
}

#[test]
fn leaf_writes_branch_reset_or_fail_without_change() {
    let tmp = tempfile::tempdir().unwrap();
    let (sid, ids) = setup(tmp.path());
    let v = vfs(tmp.path(), false);
    let sdir = session_ino(&v, &sid);
    let leaf = v.lookup(sdir, "leaf").unwrap().ino;
    let context = v.lookup(sdir, "context.json").unwrap().ino;

    let line = format!("{}\n", ids[1]);
    let (a, b) = line.as_bytes().split_at(5);
    write_file(&v, leaf, &[a, b]).unwrap();
    assert_eq!(read_all(&v, leaf), line.as_bytes());
    // The context changed: a lookup (as the kernel makes at every open) finds its new
    // version under a number of its own.
    let moved = v.lookup(sdir, "context.json").unwrap().ino;
    assert_ne!(moved, context);
    let ctx = json::parse(std::str::from_utf8(&read_all(&v, moved)).unwrap()).unwrap();
    let messages = ctx.as_object().unwrap().get("messages").unwrap();
    assert_eq!(messages.as_array().unwrap().len(), 2);

    let err = write_file(&v, leaf, &[b"nope\n"]).unwrap_err();
    assert!(matches!(err, VfsError::InvalidArgument(_)), "{err:?}");
    assert_eq!(read_all(&v, leaf), line.as_bytes());
    let errors = v.lookup(sdir, "errors").unwrap();
    let text = String::from_utf8(read_all(&v, errors.ino)).unwrap();
    assert!(text.contains("leaf: ") && text.contains("nope"), "{text}");
    assert_eq!(errors.size, text.len() as u64);

    // A shell's redirection flushes a duplicate descriptor before writing: a bare O_TRUNC
    // does not reset the leaf then, and the failed write leaves it as it was.
    let o = v
        .open(
            leaf,
            OpenMode {
                write: true,
                truncate: true,
                ..Default::default()
            },
        )
        .unwrap();
    v.flush(o.fh, None).unwrap();
    assert_eq!(read_all(&v, leaf), line.as_bytes());
    assert!(v.write(o.fh, 0, b"nope\n").is_err());
    v.flush(o.fh, None).unwrap();
    v.release(o.fh).unwrap();
    assert_eq!(read_all(&v, leaf), line.as_bytes());

    // O_TRUNC and nothing written: reset at release.
    write_file(&v, leaf, &[]).unwrap();
    assert!(read_all(&v, leaf).is_empty());
    write_file(&v, leaf, &[ids[0].as_bytes()]).unwrap();
    assert_eq!(read_all(&v, leaf), format!("{}\n", ids[0]).into_bytes());
    write_file(&v, leaf, &[b"\n"]).unwrap();
    assert!(read_all(&v, leaf).is_empty());
}

#[test]
fn entries_new_appends_lines_and_rejects_invalid_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let (v, _, _, entries, new) = writable_entries(tmp.path());
    let file = fs::read_dir(tmp.path().join("agent/sessions"))
        .unwrap()
        .map(|d| d.unwrap().path())
        .find(|p| p.is_dir())
        .and_then(|d| {
            fs::read_dir(d)
                .unwrap()
                .map(|f| f.unwrap().path())
                .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        })
        .unwrap();
    let count = || load_session(&file).unwrap().session.entry_count();
    assert_eq!(count(), 3);

    // Split across writes, the last line unterminated: appended at release.
    write_file(
        &v,
        new,
        &[
            b"{\"role\":\"user\",",
            b"\"content\":\"one\"}\n{\"role\":\"user\",\"content\":\"two\"}",
        ],
    )
    .unwrap();
    assert_eq!(count(), 5);
    assert_eq!(v.readdir(entries).unwrap().len(), 6);

    for bad in [
        &b"not json\n"[..],
        b"[1]\n",
        b"{\"type\":\"bogus\"}\n",
        b"{\"type\":\"message\",\"id\":\"x\",\"message\":{\"role\":\"user\",\"content\":\"c\"}}\n",
    ] {
        let err = write_file(&v, new, &[bad]).unwrap_err();
        assert!(
            matches!(err, VfsError::InvalidArgument(_)),
            "{bad:?}: {err:?}"
        );
    }
    assert_eq!(count(), 5);
}

#[test]
fn a_close_by_a_process_that_did_not_write_applies_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (v, _, _, entries, new) = writable_entries(tmp.path());
    let listed = || v.readdir(entries).unwrap().len();
    assert_eq!(listed(), 4);
    let write = OpenMode {
        write: true,
        ..Default::default()
    };
    let o = v.open(new, write).unwrap();
    let (writer, child) = (Some(1), Some(2));
    let first = b"{\"role\":\"user\",\"content\":\"one\"}\n{\"role\":\"user\",";
    v.write_part(o.fh, 0, first, Part::MayContinue, writer)
        .unwrap();
    // A child that inherited the descriptor closes it: neither the held line nor the
    // unterminated one is taken, and the child hears of nothing.
    v.flush(o.fh, child).unwrap();
    assert_eq!(listed(), 4);
    let rest = b"\"content\":\"two\"}\n";
    v.write_part(o.fh, first.len() as u64, rest, Part::Last, writer)
        .unwrap();
    assert_eq!(
        listed(),
        6,
        "the write(2) is taken whole at its last request"
    );
    // Half a line, then the writer's own close: the half line is its last line.
    v.write_part(o.fh, 0, b"{\"role\":\"user\",", Part::Last, writer)
        .unwrap();
    v.flush(o.fh, child).unwrap();
    assert_eq!(listed(), 6);
    v.write_part(o.fh, 0, b"\"content\":\"three\"}", Part::Last, writer)
        .unwrap();
    v.flush(o.fh, writer).unwrap();
    assert_eq!(listed(), 7);
    v.release(o.fh).unwrap();
}

#[test]
fn everything_else_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (sid, _) = setup(tmp.path());
    let v = vfs(tmp.path(), false);
    let sdir = session_ino(&v, &sid);
    let header = v.lookup(sdir, "header.json").unwrap().ino;
    let write = OpenMode {
        write: true,
        ..Default::default()
    };
    assert_eq!(v.open(header, write), Err(VfsError::AccessDenied));
    assert_eq!(v.open(sdir, write), Err(VfsError::IsADirectory));
    assert_eq!(
        v.set_attr(header, None, size(0), None),
        Err(VfsError::AccessDenied)
    );
    assert_eq!(
        v.set_attr(header, None, others(), None),
        Err(VfsError::NotPermitted)
    );
    // Nothing asked changes nothing: the attributes as they are.
    assert_eq!(
        v.set_attr(header, None, AttrChange::default(), None),
        v.getattr(header)
    );
    // A size with anything else is refused as a whole, even where the size alone is taken.
    let leaf = v.lookup(sdir, "leaf").unwrap().ino;
    let both = AttrChange {
        size: Some(0),
        others: true,
    };
    assert_eq!(
        v.set_attr(leaf, None, both, None),
        Err(VfsError::NotPermitted)
    );
    assert_eq!(
        v.change_namespace(sdir, NamespaceChange::Remove),
        VfsError::NotPermitted
    );
    assert_eq!(
        v.change_namespace(sdir, NamespaceChange::Create),
        VfsError::AccessDenied
    );
    assert_eq!(
        v.change_namespace(header, NamespaceChange::Create),
        VfsError::NotADirectory
    );

    let ro = vfs(tmp.path(), true);
    let sdir = session_ino(&ro, &sid);
    let leaf = ro.lookup(sdir, "leaf").unwrap().ino;
    assert_eq!(ro.open(leaf, write), Err(VfsError::ReadOnly));
    assert_eq!(
        ro.set_attr(leaf, None, size(0), None),
        Err(VfsError::ReadOnly)
    );
    assert_eq!(
        ro.change_namespace(sdir, NamespaceChange::Rename),
        VfsError::ReadOnly
    );
}

#[test]
fn an_append_outside_the_model_is_seen_on_the_next_access() {
    let tmp = tempfile::tempdir().unwrap();
    let (sid, ids) = setup(tmp.path());
    let v = vfs(tmp.path(), false);
    let sdir = session_ino(&v, &sid);
    let entries = v.lookup(sdir, "entries").unwrap().ino;
    let leaf = v.lookup(sdir, "leaf").unwrap().ino;
    assert_eq!(v.readdir(entries).unwrap().len(), 4);
    let entry_ino = v.lookup(entries, &format!("{}.json", ids[0])).unwrap().ino;

    let file = fs::read_dir(tmp.path().join("agent/sessions"))
        .unwrap()
        .map(|d| d.unwrap().path())
        .filter(|p| p.is_dir())
        .flat_map(|d| fs::read_dir(d).unwrap().map(|f| f.unwrap().path()))
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .unwrap();
    let agent =
        SessionManager::open_managed(&file, StorageConfig::files(tmp.path().join("agent/blobs")))
            .unwrap();
    let added = agent
        .append_message(message("assistant", "outside"))
        .unwrap();
    agent.close().unwrap();

    assert_eq!(v.readdir(entries).unwrap().len(), 5);
    assert_eq!(read_all(&v, leaf), format!("{added}\n").into_bytes());
    // Reloading keeps the numbers.
    assert_eq!(
        v.lookup(entries, &format!("{}.json", ids[0])).unwrap().ino,
        entry_ino
    );
}

#[test]
fn a_watched_store_lists_every_change_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let (sid, _) = setup(tmp.path());
    let v = vfs(tmp.path(), false);
    let sessions = v.lookup(ROOT_INO, "sessions").unwrap().ino;
    let listed = |v: &Vfs| -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = v
            .readdir(sessions)
            .unwrap()
            .into_iter()
            .filter(|e| e.name != "." && e.name != "..")
            .map(|e| {
                let mtime = v.lookup(sessions, &e.name).unwrap().mtime_ms as u64;
                (e.name, mtime)
            })
            .collect();
        out.sort();
        out
    };
    let first = listed(&v);
    assert_eq!(first.len(), 1);
    // Unchanged: the same listing (a scan skipped where the store is watched).
    assert_eq!(listed(&v), first);
    // A new session in a new workspace (a new directory of the root).
    let m = second_session(tmp.path());
    let two = listed(&v);
    assert_eq!(two.len(), 2, "{two:?}");
    // An append moves the session's time (past a tick of the file system's clock: a fixed
    // wait); a removal takes it away.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let file = m.session_file().unwrap();
    let appender =
        SessionManager::open_managed(&file, StorageConfig::files(tmp.path().join("agent/blobs")))
            .unwrap();
    appender.append_message(message("user", "more")).unwrap();
    appender.close().unwrap();
    let three = listed(&v);
    let other = m.session_id();
    let time = |l: &[(String, u64)]| l.iter().find(|(id, _)| *id == other).unwrap().1;
    assert!(time(&three) > time(&two), "{two:?} {three:?}");
    fs::remove_file(&file).unwrap();
    assert_eq!(
        listed(&v)
            .iter()
            .map(|(id, _)| id.clone())
            .collect::<Vec<_>>(),
        [sid]
    );
}

#[test]
fn blobs_are_listed_and_read_checked() {
    use gjcfs::engine::format::blob::BlobStore;
    use gjcfs::engine::storage::FileStorage;
    let tmp = tempfile::tempdir().unwrap();
    setup(tmp.path());
    let store = BlobStore::new(
        tmp.path().join("agent/blobs"),
        std::sync::Arc::new(FileStorage),
    );
    let hash = store.put(b"image bytes").unwrap();
    let v = vfs(tmp.path(), false);
    let names = listed_names(&v, ROOT_INO);
    assert_eq!(
        names,
        [
            "sessions",
            "blobs",
            "history",
            "projects",
            "by-date",
            "recent",
            "search",
            "files",
            "index.html",
            "usage.json",
            "usage.svg",
            "check",
            ".ignore"
        ]
    );
    let blobs = v.lookup(ROOT_INO, "blobs").unwrap().ino;
    let listed = v.readdir(blobs).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name, hash);
    let blob = v.lookup(blobs, &hash).unwrap();
    assert_eq!(blob.ino, listed[0].ino);
    assert_eq!(blob.size, 11);
    assert_eq!(read_all(&v, blob.ino), b"image bytes");
    assert_eq!(v.lookup(blobs, "not-a-hash"), Err(VfsError::NotFound));
    assert_eq!(v.lookup(blobs, &"0".repeat(64)), Err(VfsError::NotFound));

    // A blob whose bytes no longer match its name is not served.
    fs::write(tmp.path().join("agent/blobs").join(&hash), b"tampered!!!").unwrap();
    let opened = v.open(
        blob.ino,
        OpenMode {
            read: true,
            ..Default::default()
        },
    );
    assert!(matches!(opened, Err(VfsError::Unreadable(_))), "{opened:?}");
}

#[test]
fn history_prompts_and_search_come_from_the_database() {
    use gjcfs::engine::history::HistoryStorage;
    let tmp = tempfile::tempdir().unwrap();
    setup(tmp.path());
    let db = tmp.path().join("agent/history.db");
    let v = vfs(tmp.path(), false);
    let history = v.lookup(ROOT_INO, "history").unwrap().ino;
    let prompts = v.lookup(history, "prompts.jsonl").unwrap();
    assert_eq!(prompts.size, 0);
    assert!(read_all(&v, prompts.ino).is_empty());
    assert!(!db.exists(), "the mount never creates the database");
    v.close_all();

    let storage = HistoryStorage::open(&db).unwrap();
    storage.add("fix the parser", Some("/w"));
    storage.add("write the docs", Some("/w"));
    storage.close().unwrap();

    let v = vfs(tmp.path(), false);
    let history = v.lookup(ROOT_INO, "history").unwrap().ino;
    let prompts = v.lookup(history, "prompts.jsonl").unwrap();
    let text = String::from_utf8(read_all(&v, prompts.ino)).unwrap();
    assert_eq!(prompts.size, text.len() as u64);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].contains("\"prompt\":\"fix the parser\""), "{text}");
    assert!(lines[1].contains("\"prompt\":\"write the docs\""), "{text}");

    let search = v.lookup(history, "search").unwrap().ino;
    assert!(v.readdir(search).unwrap().is_empty());
    let hit = v.lookup(search, "pars").unwrap();
    let found = String::from_utf8(read_all(&v, hit.ino)).unwrap();
    assert_eq!(found.lines().count(), 1);
    assert!(found.contains("fix the parser"));
    assert_eq!(hit.size, found.len() as u64);
    assert!(read_all(&v, v.lookup(search, "nothing here").unwrap().ino).is_empty());
    assert!(v.close_all().is_empty());
}

#[test]
fn a_session_lists_the_blobs_it_references() {
    use gjcfs::engine::format::blob::BlobStore;
    use gjcfs::engine::storage::FileStorage;
    let tmp = tempfile::tempdir().unwrap();
    let (sid, _) = setup(tmp.path());
    let store = BlobStore::new(
        tmp.path().join("agent/blobs"),
        std::sync::Arc::new(FileStorage),
    );
    let used = store.put(b"used").unwrap();
    let missing = "a".repeat(64);
    store.put(b"unused").unwrap();
    let v = vfs(tmp.path(), false);
    let sdir = session_ino(&v, &sid);
    let entries = v.lookup(sdir, "entries").unwrap().ino;
    let new = v.lookup(entries, "new").unwrap().ino;
    let line = format!(
        r#"{{"type":"custom","customType":"img","data":{{"a":"blob:sha256:{used}","b":"blob:sha256:{missing}"}}}}"#
    );
    write_file(&v, new, &[line.as_bytes(), b"\n"]).unwrap();

    let sblobs = v.lookup(sdir, "blobs").unwrap().ino;
    let listed = v.readdir(sblobs).unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].name, used);
    let top = v.lookup(ROOT_INO, "blobs").unwrap().ino;
    assert_eq!(v.lookup(top, &used).unwrap().ino, listed[0].ino);
    assert_eq!(read_all(&v, listed[0].ino), b"used");
    assert_eq!(v.lookup(sblobs, &missing), Err(VfsError::NotFound));
    assert_eq!(v.readdir(top).unwrap().len(), 2);
}

#[test]
fn projects_link_each_workspace_to_its_sessions() {
    use gjcfs::engine::store::legacy::encode_absolute;
    use gjcfs::vfs::NodeKind;
    let tmp = tempfile::tempdir().unwrap();
    let (sid, _) = setup(tmp.path());
    let v = vfs(tmp.path(), false);
    let projects = v.lookup(ROOT_INO, "projects").unwrap().ino;
    let listed = v.readdir(projects).unwrap();
    assert_eq!(listed.len(), 1);
    let cwd = tmp.path().join("workspace");
    assert_eq!(listed[0].name, encode_absolute(cwd.to_str().unwrap()));
    let links = v.readdir(listed[0].ino).unwrap();
    assert_eq!(links.len(), 1);
    assert_eq!(links[0].name, sid);
    assert_eq!(links[0].kind, NodeKind::Symlink);
    let link = v.lookup(listed[0].ino, &sid).unwrap();
    assert_eq!(link.ino, links[0].ino);
    let target = v.readlink(link.ino).unwrap();
    assert_eq!(target, format!("../../sessions/{sid}"));
    assert_eq!(link.size, target.len() as u64);
    assert_eq!(v.lookup(listed[0].ino, "other"), Err(VfsError::NotFound));
    assert!(matches!(
        v.readlink(projects),
        Err(VfsError::InvalidArgument(_))
    ));
}

#[test]
fn the_lru_closes_and_reloads_sessions_without_changing_numbers() {
    let tmp = tempfile::tempdir().unwrap();
    let (first, first_ids) = setup(tmp.path());
    // A second workspace, so a second session.
    let m = second_session(tmp.path());
    let second = m.session_id();

    let v = vfs(tmp.path(), false); // max_loaded: 1
    let a = session_ino(&v, &first);
    let a_leaf = v.lookup(a, "leaf").unwrap().ino;
    // Branch in the first session, then touch the second (evicting the first).
    write_file(&v, a_leaf, &[format!("{}\n", first_ids[0]).as_bytes()]).unwrap();
    let b = session_ino(&v, &second);
    let b_entries = v.lookup(b, "entries").unwrap().ino;
    assert_eq!(v.readdir(b_entries).unwrap().len(), 3);
    // Reloaded from its file, the first session's leaf is where the branch put it: the
    // move was recorded in the file.
    assert_eq!(
        read_all(&v, a_leaf),
        format!("{}\n", first_ids[0]).into_bytes()
    );
    assert_eq!(session_ino(&v, &first), a);
    assert_eq!(v.lookup(a, "leaf").unwrap().ino, a_leaf);
    assert!(v.close_all().is_empty());
}

#[test]
fn an_open_directory_keeps_its_listing_and_a_new_open_rescans() {
    let tmp = tempfile::tempdir().unwrap();
    let (first, _) = setup(tmp.path());
    let v = vfs(tmp.path(), false);
    let sessions = v.lookup(ROOT_INO, "sessions").unwrap().ino;
    let names = |fh: u64| -> Vec<String> {
        let mut names: Vec<String> = v
            .dir_entries(fh)
            .unwrap()
            .iter()
            .map(|e| e.name.clone())
            .collect();
        names.sort();
        names
    };
    let before = v.opendir(sessions).unwrap().fh;
    assert_eq!(names(before), vec![first.clone()]);
    // A second session written by the agent.
    let m = managed(tmp.path(), "workspace");
    m.append_message(message("user", "q")).unwrap();
    m.append_message(message("assistant", "a")).unwrap();
    m.close().unwrap();
    let second = m.session_id();
    assert_eq!(names(before), vec![first.clone()]);
    // A lookup of a session the scan has not seen yet still finds it.
    assert!(v.lookup(sessions, &second).is_ok());
    let after = v.opendir(sessions).unwrap().fh;
    let mut both = vec![first, second.clone()];
    both.sort();
    assert_eq!(names(after), both);
    v.release(before).unwrap();
    assert_eq!(v.dir_entries(before), Err(VfsError::BadHandle));
    assert_eq!(names(after).len(), 2);
    assert_eq!(v.readdir(sessions).unwrap().len(), 2);
}

#[test]
fn a_kernel_keeps_a_listing_only_while_every_open_of_it_lists_the_same() {
    let tmp = tempfile::tempdir().unwrap();
    setup(tmp.path());
    let v = vfs(tmp.path(), false);
    let sessions = v.lookup(ROOT_INO, "sessions").unwrap().ino;
    let mut opens = 0;
    let mut opened = |kept: KeptListing| {
        opens += 1;
        let opened = v.opendir(sessions).unwrap();
        assert_eq!(opened.kept, kept, "open {opens}");
        opened.fh
    };
    let first = opened(KeptListing::Renewed);
    v.release(first).unwrap();
    let old = opened(KeptListing::Unchanged);
    // A second session: the next open renews the copy, and so does every open while the
    // handle of the old listing could still add to it.
    second_session(tmp.path());
    let new = opened(KeptListing::Renewed);
    v.release(new).unwrap();
    let new = opened(KeptListing::Renewed);
    v.release(new).unwrap();
    v.release(old).unwrap();
    let new = opened(KeptListing::Renewed);
    v.release(new).unwrap();
    let new = opened(KeptListing::Unchanged);
    v.release(new).unwrap();
    // The kernel forgot the directory, and its copy with it.
    v.forget(sessions, 1);
    opened(KeptListing::Renewed);
}

#[test]
fn history_prompts_hold_every_prompt_and_follow_new_ones() {
    use gjcfs::engine::history::HistoryStorage;
    let tmp = tempfile::tempdir().unwrap();
    setup(tmp.path());
    let db = tmp.path().join("agent/history.db");
    let storage = HistoryStorage::open(&db).unwrap();
    for i in 0..1200 {
        assert!(storage.add(&format!("prompt number {i}"), None));
    }
    storage.flush().unwrap();
    let v = vfs(tmp.path(), false);
    let history = v.lookup(ROOT_INO, "history").unwrap().ino;
    let lines = |v: &gjcfs::vfs::Vfs| {
        let prompts = v.lookup(history, "prompts.jsonl").unwrap();
        let text = String::from_utf8(read_all(v, prompts.ino)).unwrap();
        assert_eq!(prompts.size, text.len() as u64);
        text.lines().map(str::to_owned).collect::<Vec<_>>()
    };
    let first = lines(&v);
    assert_eq!(first.len(), 1200);
    assert!(first[0].contains("\"prompt\":\"prompt number 0\""));
    assert!(first[1199].contains("\"prompt\":\"prompt number 1199\""));
    // Another process (the agent) records one more while the view is cached.
    storage.add("one more", None);
    storage.close().unwrap();
    let second = lines(&v);
    assert_eq!(second.len(), 1201);
    assert!(second[1200].contains("\"prompt\":\"one more\""));
    assert!(v.close_all().is_empty());
}

/// Collects the inode numbers `v` announces: a call takes those announced since the last.
fn announcements(v: &Vfs) -> impl Fn() -> Vec<u64> {
    use std::sync::{Arc, Mutex};
    let told: Arc<Mutex<Vec<u64>>> = Arc::default();
    let sink = told.clone();
    v.set_invalidator(Box::new(move |inos| sink.lock().unwrap().extend(inos)));
    move || std::mem::take(&mut *told.lock().unwrap())
}

#[test]
fn changes_are_announced_with_the_nodes_they_touch() {
    let tmp = tempfile::tempdir().unwrap();
    let (sid, ids) = setup(tmp.path());
    let v = vfs(tmp.path(), false);
    let take = announcements(&v);

    let sdir = session_ino(&v, &sid);
    let entries = v.lookup(sdir, "entries").unwrap().ino;
    let entry_inos: Vec<u64> = ids
        .iter()
        .map(|id| v.lookup(entries, &format!("{id}.json")).unwrap().ino)
        .collect();
    let leaf = v.lookup(sdir, "leaf").unwrap().ino;
    let context = v.lookup(sdir, "context.json").unwrap().ino;
    take();

    // A branch: the leaf and the views, no entry.
    write_file(&v, leaf, &[format!("{}\n", ids[0]).as_bytes()]).unwrap();
    let branch = take();
    assert!(branch.contains(&leaf) && branch.contains(&context));
    assert!(entry_inos.iter().all(|e| !branch.contains(e)), "{branch:?}");

    // The agent patches the second entry from outside: read on its own, and of the
    // entries only that one is announced.
    let file = load_session_path(tmp.path());
    let patch = format!(
        "{{\"type\":\"entry_patch\",\"entryId\":\"{}\",\"patch\":{{\"message\":{{\"role\":\"assistant\",\"content\":\"patched\"}}}}}}\n",
        ids[1]
    );
    let mut text = fs::read_to_string(&file).unwrap();
    text.push_str(&patch);
    fs::write(&file, text).unwrap();
    v.poll_outside_changes();
    let outside = take();
    assert!(outside.contains(&entry_inos[1]) && outside.contains(&context));
    assert!(!outside.contains(&entry_inos[0]) && !outside.contains(&entry_inos[2]));
    let shown = String::from_utf8(read_all(&v, entry_inos[1])).unwrap();
    assert!(shown.contains("\"patched\""), "{shown}");
    // Nothing changed since: nothing announced.
    v.poll_outside_changes();
    assert!(take().is_empty());
    assert!(v.close_all().is_empty());
}

#[test]
fn the_store_event_of_a_write_in_progress_announces_no_entry_it_did_not_change() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex, Weak};
    let tmp = tempfile::tempdir().unwrap();
    let (sid, ids) = setup(tmp.path());
    let v = Arc::new(vfs(tmp.path(), false));
    let sdir = session_ino(&v, &sid);
    let entries = v.lookup(sdir, "entries").unwrap().ino;
    let entry_inos: Vec<u64> = ids
        .iter()
        .map(|id| v.lookup(entries, &format!("{id}.json")).unwrap().ino)
        .collect();
    let new = v.lookup(entries, "new").unwrap().ino;
    write_file(&v, new, &[b"{\"role\":\"user\",\"content\":\"opened\"}\n"]).unwrap();
    v.follow_store_events();
    // While the next write holds the session (it announces what it took in), the store's
    // events are followed from another thread, as the mount's poller does: the event of
    // that very write is among them.
    let told: Arc<Mutex<Vec<u64>>> = Arc::default();
    let armed = Arc::new(AtomicBool::new(false));
    let model: Weak<Vfs> = Arc::downgrade(&v);
    {
        let (told, armed) = (told.clone(), armed.clone());
        v.set_invalidator(Box::new(move |inos| {
            told.lock().unwrap().extend(inos);
            if armed.swap(false, Ordering::SeqCst) {
                let model = model.upgrade().unwrap();
                std::thread::spawn(move || model.follow_store_events())
                    .join()
                    .unwrap();
            }
        }));
    }
    armed.store(true, Ordering::SeqCst);
    write_file(&v, new, &[b"{\"role\":\"user\",\"content\":\"again\"}\n"]).unwrap();
    assert!(
        !armed.load(Ordering::SeqCst),
        "followed while the write held the session"
    );
    let during = std::mem::take(&mut *told.lock().unwrap());
    assert!(
        entry_inos.iter().all(|e| !during.contains(e)),
        "entries the write did not touch were announced: {during:?}"
    );
    // Followed once the write is done: nothing changed outside, nothing more announced of
    // the entries.
    v.follow_store_events();
    let after = std::mem::take(&mut *told.lock().unwrap());
    assert!(entry_inos.iter().all(|e| !after.contains(e)), "{after:?}");
    assert!(v.close_all().is_empty());
}

/// A read-only model over the session of [`setup`] in `tmp`, read by node, and the
/// session's directory.
fn served_by_node(tmp: &Path) -> (Vfs, u64) {
    let (sid, _) = setup(tmp);
    let v = vfs(tmp, true);
    v.serve_reads_by_node();
    let session = session_ino(&v, &sid);
    (v, session)
}

/// The agent appends an assistant message "later" to the session, outside the model; its
/// id.
fn append_later(tmp: &Path) -> String {
    let m = SessionManager::open_managed(
        &load_session_path(tmp),
        StorageConfig::files(tmp.join("agent/blobs")),
    )
    .unwrap();
    let added = m.append_message(message("assistant", "later")).unwrap();
    m.close().unwrap();
    added
}

/// Only the disk on Linux can watch the store's directories.
#[cfg(target_os = "linux")]
#[test]
fn a_sessions_fixed_nodes_are_kept_while_its_changes_are_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let (sid, _) = setup(tmp.path());
    let v = vfs(tmp.path(), false);
    let take = announcements(&v);
    // Listed by a scan, which set the watch of the store's directories up first.
    let sessions = v.lookup(ROOT_INO, "sessions").unwrap().ino;
    assert_eq!(listed_names(&v, sessions), vec![sid.clone()]);
    let dir = v.lookup(sessions, &sid).unwrap();
    assert!(!dir.stable, "the session may go away");
    // (A rendered view's number holds one version: it is looked up at every open instead.)
    let kept = ["leaf", "session.jsonl", "entries", "blobs", "labels"];
    let attrs: Vec<gjcfs::vfs::Attr> = kept.iter().map(|n| v.lookup(dir.ino, n).unwrap()).collect();
    assert!(attrs.iter().all(|a| a.stable), "{attrs:?}");
    assert!(!v.lookup(dir.ino, "errors").unwrap().stable);
    v.follow_store_events();
    take();
    v.follow_store_events();
    assert!(take().is_empty(), "nothing changed");

    // The agent appends: the next follow announces every node kept, with the change
    // already taken in.
    append_later(tmp.path());
    v.follow_store_events();
    let announced = take();
    assert!(
        attrs.iter().all(|a| announced.contains(&a.ino)),
        "{announced:?}"
    );
    let transcript = v.getattr(attrs[1].ino).unwrap();
    assert!(transcript.size > attrs[1].size);

    // A session no longer loaded (the model keeps one here) is announced whole.
    let file = load_session_path(tmp.path());
    let other = second_session(tmp.path()).session_id();
    assert_eq!(listed_names(&v, sessions).len(), 2);
    let other_leaf = v.lookup(v.lookup(sessions, &other).unwrap().ino, "leaf");
    read_all(&v, other_leaf.unwrap().ino);
    v.follow_store_events();
    take();
    let m = SessionManager::open_managed(&file, StorageConfig::files(tmp.path().join("b")));
    m.unwrap()
        .append_message(message("assistant", "again"))
        .unwrap();
    v.follow_store_events();
    let announced = take();
    assert!(
        attrs.iter().all(|a| announced.contains(&a.ino)),
        "{announced:?}"
    );
    assert!(v.close_all().is_empty());
}

#[cfg(target_os = "linux")]
#[test]
fn changes_lost_by_the_watch_announce_every_session() {
    use std::io::Write;
    let tmp = tempfile::tempdir().unwrap();
    let (first, _) = setup(tmp.path());
    let second = second_session(tmp.path()).session_id();
    let v = vfs(tmp.path(), false);
    let take = announcements(&v);
    let sessions = v.lookup(ROOT_INO, "sessions").unwrap().ino;
    assert_eq!(listed_names(&v, sessions).len(), 2);
    let leaves: Vec<u64> = [&first, &second]
        .iter()
        .map(|sid| {
            let dir = v.lookup(sessions, sid).unwrap().ino;
            v.lookup(dir, "leaf").unwrap().ino
        })
        .collect();
    v.follow_store_events();
    take();
    // More events than the kernel queues: two files of a watched directory written in
    // turn (alike events in a row are folded into one).
    let limit: usize = fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .map_or(16384, |s| s.trim().parse().unwrap());
    let scope = load_session_path(tmp.path()).parent().unwrap().to_owned();
    let mut files = ["f", "g"].map(|name| {
        fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(scope.join(name))
            .unwrap()
    });
    for k in 0..=limit {
        files[k % 2].write_all(b"x").unwrap();
    }
    // No session file changed; the first session, no longer loaded (the model keeps
    // one here), is announced all the same. The loaded one was checked against its file.
    v.follow_store_events();
    let announced = take();
    assert!(announced.contains(&leaves[0]), "{leaves:?} {announced:?}");
    assert!(v.close_all().is_empty());
}

#[cfg(target_os = "linux")]
#[test]
fn a_workspace_directory_replaced_announces_its_sessions_until_a_scan_watches_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (first, _) = setup(tmp.path());
    let scope = load_session_path(tmp.path()).parent().unwrap().to_owned();
    let second = second_session(tmp.path()).session_id();
    let v = vfs(tmp.path(), false);
    let take = announcements(&v);
    let sessions = v.lookup(ROOT_INO, "sessions").unwrap().ino;
    assert_eq!(listed_names(&v, sessions).len(), 2);
    let leaf_of = |sid: &str| {
        let dir = v.lookup(sessions, sid).unwrap().ino;
        v.lookup(dir, "leaf").unwrap()
    };
    let first_leaf = leaf_of(&first);
    assert!(first_leaf.stable && leaf_of(&second).stable);
    v.follow_store_events();
    take();
    // The first session's workspace directory is replaced by a copy: its files are no
    // longer the ones watched.
    let aside = tmp.path().join("aside");
    fs::rename(&scope, &aside).unwrap();
    std::os::unix::fs::DirBuilderExt::mode(&mut fs::DirBuilder::new(), 0o700)
        .create(&scope)
        .unwrap();
    for entry in fs::read_dir(&aside).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            fs::copy(entry.path(), scope.join(entry.file_name())).unwrap();
        }
    }
    v.follow_store_events();
    assert!(take().contains(&first_leaf.ino));
    // Nothing is kept long until a scan watches the directories as they are.
    assert!(!leaf_of(&second).stable);
    assert_eq!(listed_names(&v, sessions).len(), 2);
    assert!(leaf_of(&first).stable && leaf_of(&second).stable);
    assert!(v.close_all().is_empty());
}

/// The path of the one session file under `tmp`'s agent directory.
fn load_session_path(tmp: &Path) -> std::path::PathBuf {
    let root = tmp.join("agent/sessions");
    let scope = fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .unwrap();
    let file = fs::read_dir(&scope)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .unwrap();
    assert!(load_session(&file).is_ok());
    file
}

#[test]
fn absent_names_get_no_inode_and_queries_are_forgotten_with_the_kernel() {
    let tmp = tempfile::tempdir().unwrap();
    let (sid, _) = setup(tmp.path());
    let v = vfs(tmp.path(), false);
    let blobs = v.lookup(ROOT_INO, "blobs").unwrap().ino;
    let sdir = session_ino(&v, &sid);
    let first = v.lookup(sdir, "leaf").unwrap().ino;
    let entries = v.lookup(sdir, "entries").unwrap().ino;
    for n in 0..2000u32 {
        let hash = format!("{n:064x}");
        assert_eq!(v.lookup(blobs, &hash), Err(VfsError::NotFound));
        assert_eq!(
            v.lookup(entries, &format!("{n:06}-nope.json")),
            Err(VfsError::NotFound)
        );
    }
    let next = v.lookup(sdir, "tree.txt").unwrap().ino;
    assert_eq!(next, first + 2, "the failed lookups numbered nothing");

    let history = v.lookup(ROOT_INO, "history").unwrap().ino;
    let search = v.lookup(history, "search").unwrap().ino;
    let query = v.lookup(search, "anything").unwrap().ino;
    assert_eq!(v.lookup(search, "anything").unwrap().ino, query);
    v.forget(query, 1);
    assert!(v.getattr(query).is_ok(), "one reference is left");
    v.forget(query, 1);
    assert_eq!(v.getattr(query), Err(VfsError::NotFound));
    v.forget(sdir, 10);
    assert!(v.getattr(sdir).is_ok(), "only queries are forgotten");
}

#[test]
fn the_blob_store_is_never_followed_through_a_symlink_nor_a_fifo_opened() {
    use std::os::unix::fs::symlink;
    let tmp = tempfile::tempdir().unwrap();
    setup(tmp.path());
    let blob_dir = tmp.path().join("agent/blobs");
    fs::create_dir_all(&blob_dir).unwrap();
    let outside = tmp.path().join("secret");
    fs::write(&outside, b"not a blob").unwrap();
    let linked = "a".repeat(64);
    symlink(&outside, blob_dir.join(&linked)).unwrap();
    let fifo = "b".repeat(64);
    let c_path = std::ffi::CString::new(blob_dir.join(&fifo).to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let v = vfs(tmp.path(), false);
    let blobs = v.lookup(ROOT_INO, "blobs").unwrap().ino;
    assert!(v.readdir(blobs).unwrap().is_empty(), "neither is listed");
    assert_eq!(v.lookup(blobs, &linked), Err(VfsError::NotFound));
    assert_eq!(v.lookup(blobs, &fifo), Err(VfsError::NotFound));

    // A blob store that is itself a symlink is refused, not followed.
    let real = tmp.path().join("elsewhere");
    fs::rename(&blob_dir, &real).unwrap();
    symlink(&real, &blob_dir).unwrap();
    let v = vfs(tmp.path(), false);
    assert!(matches!(
        v.lookup(ROOT_INO, "blobs"),
        Err(VfsError::Refused(_))
    ));
}

#[test]
fn session_ids_that_cannot_name_a_directory_are_left_out_and_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let (sid, _) = setup(tmp.path());
    let dir = tmp.path().join("plain");
    fs::create_dir_all(&dir).unwrap();
    for (n, id) in ["bad\nid", "-rf", "ok-id"].iter().enumerate() {
        let header = format!(
            r#"{{"type":"session","version":5,"id":{},"timestamp":"2026-01-0{}T00:00:00.000Z","cwd":"/w"}}"#,
            json::to_compact(&Value::string(*id)),
            n + 1
        );
        fs::write(dir.join(format!("s{n}.jsonl")), header + "\n").unwrap();
    }
    let v = Vfs::new(VfsConfig {
        storage: std::sync::Arc::new(gjcfs::vfs::FileStorage),
        source: SessionSource::Dir(dir),
        blob_dir: tmp.path().join("agent/blobs"),
        read_only: false,
        max_loaded: 4,
        history_db: tmp.path().join("agent/history.db"),
        owner_uid: None,
        search_index: None,
        saved_usage: None,
        saved_listing: None,
        saved_renderings: None,
        redact: false,
    });
    let sessions = v.lookup(ROOT_INO, "sessions").unwrap().ino;
    let names = listed_names(&v, sessions);
    assert_eq!(names, ["ok-id"]);
    let notices = v.take_notices();
    assert_eq!(notices.len(), 2, "{notices:?}");
    assert!(
        notices.iter().any(|n| n.contains("\"bad\\nid\"")),
        "{notices:?}"
    );
    v.readdir(sessions).unwrap();
    assert!(v.take_notices().is_empty(), "each is reported once");
    drop(sid);
}

#[test]
fn an_overlong_line_to_entries_new_is_refused_whole_and_the_next_one_taken() {
    let tmp = tempfile::tempdir().unwrap();
    let (v, sid, ids, _, new) = writable_entries(tmp.path());
    let o = v
        .open(
            new,
            OpenMode {
                write: true,
                ..Default::default()
            },
        )
        .unwrap();
    let chunk = vec![b'x'; 1 << 20];
    let mut refused = None;
    for n in 0..(gjcfs::vfs::LINE_MAX >> 20) + 2 {
        if let Err(e) = v.write(o.fh, 0, &chunk) {
            refused = Some((n, e));
            break;
        }
    }
    let (at, error) = refused.expect("the line is refused");
    assert_eq!(at, gjcfs::vfs::LINE_MAX >> 20, "at the limit, not before");
    assert!(matches!(error, VfsError::TooLarge(_)), "{error:?}");
    let line = br#"{"role":"user","content":"after"}"#;
    let mut tail = b"rest of the long line\n".to_vec();
    tail.extend_from_slice(line);
    tail.push(b'\n');
    // The write that ends the long line is refused whole: a write is appended all
    // together or not at all.
    assert!(matches!(
        v.write(o.fh, 0, &tail),
        Err(VfsError::TooLarge(_))
    ));
    let mut next = line.to_vec();
    next.push(b'\n');
    assert_eq!(v.write(o.fh, 0, &next).unwrap(), next.len());
    v.release(o.fh).unwrap();
    let session = load_session(&load_session_path(tmp.path()))
        .unwrap()
        .session;
    assert_eq!(
        session.entry_count(),
        ids.len() + 1,
        "only the line after it"
    );
    let errors = v.lookup(session_ino(&v, &sid), "errors").unwrap();
    assert!(String::from_utf8(read_all(&v, errors.ino))
        .unwrap()
        .contains("longer than"));
}

#[test]
fn a_deeply_nested_message_renders_in_linear_size() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("plain");
    fs::create_dir_all(&dir).unwrap();
    let depth = 40_000;
    let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let text = format!(
        "{}\n{}\n",
        r#"{"type":"session","version":5,"id":"deep","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#,
        format_args!(
            r#"{{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":"hi","deep":{nested}}}}}"#
        )
    );
    fs::write(dir.join("deep.jsonl"), &text).unwrap();
    let v = Vfs::new(VfsConfig {
        storage: std::sync::Arc::new(gjcfs::vfs::FileStorage),
        source: SessionSource::Dir(dir),
        blob_dir: tmp.path().join("blobs"),
        read_only: true,
        max_loaded: 4,
        history_db: tmp.path().join("history.db"),
        owner_uid: None,
        search_index: None,
        saved_usage: None,
        saved_listing: None,
        saved_renderings: None,
        redact: false,
    });
    let sdir = session_ino(&v, "deep");
    for name in ["context.json", "context.md", "tree.txt"] {
        let node = v.lookup(sdir, name).unwrap();
        assert!(node.size < 64 * text.len() as u64, "{name}: {}", node.size);
        assert_eq!(read_all(&v, node.ino).len() as u64, node.size);
    }
}

#[test]
fn only_the_owner_and_root_may_write() {
    let tmp = tempfile::tempdir().unwrap();
    let (sid, ids) = setup(tmp.path());
    let v = Vfs::new(VfsConfig {
        owner_uid: Some(1000),
        ..vfs_config(tmp.path(), false)
    });
    let sdir = session_ino(&v, &sid);
    let leaf = v.lookup(sdir, "leaf").unwrap().ino;
    let as_user = |uid| OpenMode {
        write: true,
        truncate: true,
        caller_uid: Some(uid),
        ..Default::default()
    };
    assert_eq!(v.open(leaf, as_user(1001)), Err(VfsError::AccessDenied));
    assert_eq!(
        v.set_attr(leaf, None, size(0), Some(1001)),
        Err(VfsError::AccessDenied)
    );
    for uid in [1000, 0] {
        let o = v.open(leaf, as_user(uid)).unwrap();
        v.write(o.fh, 0, format!("{}\n", ids[0]).as_bytes())
            .unwrap();
        v.release(o.fh).unwrap();
    }
}

#[test]
fn reads_by_node_give_each_version_of_a_rendered_file_a_number_of_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let (v, session) = served_by_node(tmp.path());
    let lookup = |name: &str| v.lookup(session, name).unwrap();
    let entries = lookup("entries").ino;
    let names = listed_names(&v, entries);
    let entry = v.lookup(entries, &names[0]).unwrap().ino;
    let transcript = lookup("session.jsonl").ino;

    // Entries, the transcript and rendered files read as they do through handles.
    for file in [
        lookup("context.json").ino,
        lookup("leaf").ino,
        lookup("tree.txt").ino,
        transcript,
        entry,
    ] {
        let attr = v.getattr(file).unwrap();
        let by_node = v.read_node(file, 0, 1 << 20).unwrap();
        assert_eq!(by_node, read_all(&v, file));
        assert_eq!(attr.size, by_node.len() as u64);
        // In pieces, as a kernel reads a page at a time.
        let pieces: Vec<u8> = (0..by_node.len().div_ceil(7))
            .flat_map(|i| v.read_node(file, i as u64 * 7, 7).unwrap())
            .collect();
        assert_eq!(pieces, by_node);
        assert_eq!(attr.lookup_each_open, file != entry && file != transcript);
    }
    assert!(matches!(
        v.read_node(entries, 0, 10),
        Err(VfsError::IsADirectory)
    ));

    // The agent appends: the numbers given before still hold what they held.
    let (context, leaf) = (lookup("context.json"), lookup("leaf"));
    assert_eq!(
        lookup("context.json"),
        context,
        "unchanged: the same number"
    );
    let old = v.read_node(context.ino, 0, 1 << 20).unwrap();
    let old_leaf = v.read_node(leaf.ino, 0, 100).unwrap();
    let added = append_later(tmp.path());
    assert_eq!(v.read_node(context.ino, 0, 1 << 20).unwrap(), old);
    assert_eq!(v.getattr(context.ino).unwrap(), context);
    // A lookup finds the new bytes, under a new number.
    let now = lookup("context.json");
    assert_ne!(now.ino, context.ino);
    let new = v.read_node(now.ino, 0, 1 << 20).unwrap();
    assert_eq!(now.size, new.len() as u64);
    assert!(String::from_utf8(new).unwrap().contains("later"));
    assert_eq!(lookup("context.json"), now);
    // The leaf names another entry, of the same length: a new number too.
    let moved = lookup("leaf");
    assert_eq!(moved.size, leaf.size);
    assert_ne!(moved.ino, leaf.ino);
    assert_eq!(v.read_node(leaf.ino, 0, 100).unwrap(), old_leaf);
    assert_eq!(
        v.read_node(moved.ino, 0, 100).unwrap(),
        format!("{added}\n").as_bytes()
    );

    // An old number names nothing once the kernel forgot every lookup of it (three
    // here); the current one stays, and the next lookup keeps its bytes again.
    v.forget(context.ino, 2);
    assert_eq!(
        v.getattr(context.ino).unwrap(),
        context,
        "one reference left"
    );
    v.forget(context.ino, 1);
    assert_eq!(v.getattr(context.ino), Err(VfsError::NotFound));
    v.forget(now.ino, 2);
    assert_eq!(lookup("context.json"), now);
    assert_eq!(
        v.read_node(now.ino, 0, 1 << 20).unwrap().len() as u64,
        now.size
    );
}

#[test]
fn a_version_whose_bytes_were_dropped_reads_again_unless_it_changed() {
    use gjcfs::engine::history::HistoryStorage;
    let tmp = tempfile::tempdir().unwrap();
    setup(tmp.path());
    let db = tmp.path().join("agent/history.db");
    let storage = HistoryStorage::open(&db).unwrap();
    storage.add("fix the parser", Some("/w"));
    storage.close().unwrap();
    let v = vfs(tmp.path(), true);
    v.serve_reads_by_node();
    let history = v.lookup(ROOT_INO, "history").unwrap().ino;
    let search = v.lookup(history, "search").unwrap().ino;
    let first = v.lookup(search, "parser").unwrap();
    let bytes = v.read_node(first.ino, 0, 1000).unwrap();
    // Far more rendered files asked than keep their bytes: the first one's are dropped,
    // its attributes kept, and it reads the same again.
    for i in 0..1500 {
        v.lookup(search, &format!("q{i}")).unwrap();
    }
    assert_eq!(v.getattr(first.ino).unwrap(), first);
    assert_eq!(v.read_node(first.ino, 0, 1000).unwrap(), bytes);
    for i in 0..1500 {
        v.lookup(search, &format!("r{i}")).unwrap();
    }
    // Changed meanwhile: the open version is gone, a new lookup finds the new one.
    let storage = HistoryStorage::open(&db).unwrap();
    storage.add("the parser again", Some("/w"));
    storage.close().unwrap();
    assert_eq!(v.getattr(first.ino).unwrap(), first);
    assert_eq!(v.read_node(first.ino, 0, 1000), Err(VfsError::Stale));
    let again = v.lookup(search, "parser").unwrap();
    assert_ne!(again.ino, first.ino);
    assert!(String::from_utf8(v.read_node(again.ino, 0, 1000).unwrap())
        .unwrap()
        .contains("the parser again"));
}

#[test]
fn a_sessions_rendered_files_get_a_number_per_version_in_every_mount() {
    let tmp = tempfile::tempdir().unwrap();
    let (sid, _) = setup(tmp.path());
    for read_only in [false, true] {
        let v = vfs(tmp.path(), read_only);
        let session = session_ino(&v, &sid);
        let context = v.lookup(session, "context.json").unwrap();
        assert!(context.lookup_each_open);
        let errors = v.lookup(session, "errors").unwrap();
        assert!(!errors.lookup_each_open, "not the session file's alone");
        append_later(tmp.path());
        let now = v.lookup(session, "context.json").unwrap();
        assert_ne!(now.ino, context.ino);
        assert!(now.size > context.size);
        // The old number holds the old version, whole.
        assert_eq!(v.getattr(context.ino).unwrap(), context);
        let old = read_file(&v, context.ino).unwrap();
        assert_eq!(old.len() as u64, context.size);
        let opened = v
            .open(
                now.ino,
                OpenMode {
                    read: true,
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(
            opened.caching,
            Caching::Keep,
            "a number's bytes never change"
        );
        v.release(opened.fh).unwrap();
    }
}

#[test]
fn a_listing_gives_a_renumbered_file_its_number_now() {
    let tmp = tempfile::tempdir().unwrap();
    let (v, session) = served_by_node(tmp.path());
    let before = v.lookup(session, "context.json").unwrap();
    let fh = v.opendir(session).unwrap().fh;
    append_later(tmp.path());
    // Renumbered by a lookup, and the old number forgotten, after the listing was made.
    let now = v.lookup(session, "context.json").unwrap();
    assert_ne!(now.ino, before.ino);
    v.forget(before.ino, 1);
    for entry in v.dir_entries(fh).unwrap().iter() {
        let attr = v.listed_entry(session, entry).unwrap();
        if entry.name == "context.json" {
            assert_eq!(attr, ListedAttr::Known(now));
        }
    }
    v.release(fh).unwrap();
}

/// What a listing with attributes (`readdirplus`) tells of session `sdir`'s file `name`.
fn listed_attr(v: &Vfs, sdir: u64, name: &str) -> ListedAttr {
    let listing = v.readdir(sdir).unwrap();
    let entry = listing.iter().find(|e| e.name == name).unwrap();
    v.listed_entry(sdir, entry).unwrap()
}

#[test]
fn a_listing_renders_no_view_and_the_first_lookup_gives_its_size() {
    let tmp = tempfile::tempdir().unwrap();
    let (sid, _) = setup(tmp.path());
    // Read through handles (a writable mount), then by node (read-only).
    for by_node in [false, true] {
        let v = vfs(tmp.path(), by_node);
        if by_node {
            v.serve_reads_by_node();
        }
        let read = |ino: u64| {
            if by_node {
                v.read_node(ino, 0, 1 << 20).unwrap()
            } else {
                read_all(&v, ino)
            }
        };
        let sdir = session_ino(&v, &sid);
        for view in [
            "context.json",
            "context.html",
            "context.md",
            "tree.svg",
            "usage.json",
        ] {
            let ListedAttr::Unrendered(provisional) = listed_attr(&v, sdir, view) else {
                panic!("{view} listed as rendered before any lookup");
            };
            assert_eq!(provisional.size, 0, "{view}");
            let looked = v.lookup(sdir, view).unwrap();
            assert!(looked.size > 0, "{view}");
            assert_eq!(read(looked.ino).len() as u64, looked.size, "{view}");
            // Rendered for the session as it is: a listing tells the same as the lookup.
            assert_eq!(
                listed_attr(&v, sdir, view),
                ListedAttr::Known(looked),
                "{view}"
            );
        }
        // The header and the directories need nothing past the session's load.
        let header = v.lookup(sdir, "header.json").unwrap();
        assert_eq!(
            listed_attr(&v, sdir, "header.json"),
            ListedAttr::Known(header)
        );
        let ListedAttr::Known(_) = listed_attr(&v, sdir, "entries") else {
            panic!("entries/ listed without its attributes");
        };
    }
    // Once the agent appends, the rendered context is of the session as it was: a listing
    // does not give its size as known, and the next lookup renders the change.
    let v = vfs(tmp.path(), false);
    let sdir = session_ino(&v, &sid);
    let before = v.lookup(sdir, "context.json").unwrap();
    let added = append_later(tmp.path());
    let ListedAttr::Unrendered(_) = listed_attr(&v, sdir, "context.json") else {
        panic!("context.json listed as rendered after an append");
    };
    let after = v.lookup(sdir, "context.json").unwrap();
    assert!(after.size > before.size);
    let bytes = read_all(&v, after.ino);
    assert_eq!(bytes.len() as u64, after.size);
    assert!(
        String::from_utf8(bytes).unwrap().contains("later"),
        "{added}"
    );
}
