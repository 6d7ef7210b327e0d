//! The adapter over a real store, without Dokan: the calls Windows makes, by path.

use std::path::Path;
use std::sync::Arc;

use gjcfs_engine::json;
use gjcfs_engine::manager::{SessionManager, StorageConfig};
use gjcfs_engine::storage::{FileStorage, SessionStorage};
use gjcfs_vfs::{SessionSource, Vfs, VfsConfig};
use parking_lot::Mutex;

use crate::adapter::*;
use crate::security::{self, Sid};
use crate::status::*;

const USER: &str = "S-1-5-21-1-2-3-1001";

/// A store with one session (a question, its answer labelled `a:b`), the adapter over it,
/// and the session's id.
fn store(tmp: &Path, read_only: bool) -> (Adapter, String) {
    let ws = tmp.join("workspace");
    FileStorage.ensure_dir(&ws).expect("workspace");
    let manager = SessionManager::create_managed(
        &ws,
        &tmp.join("agent/sessions"),
        StorageConfig::files(tmp.join("agent/blobs")),
    )
    .expect("session");
    manager.append_message(message("user", "q")).expect("q");
    let answer = manager
        .append_message(message("assistant", "a"))
        .expect("a");
    manager
        .append_label_change(&answer, Some("a:b"))
        .expect("label");
    manager.close().expect("close");
    let vfs = Vfs::new(VfsConfig {
        storage: std::sync::Arc::new(gjcfs_engine::storage::FileStorage),
        source: SessionSource::SessionsRoot(tmp.join("agent/sessions")),
        blob_dir: tmp.join("agent/blobs"),
        read_only,
        max_loaded: 4,
        history_db: tmp.join("agent/history.db"),
        owner_uid: None,
        search_index: None,
        saved_usage: None,
        saved_listing: None,
        saved_renderings: None,
        redact: false,
    });
    let owner = Sid::parse(USER).expect("sid");
    (Adapter::new(Arc::new(vfs), owner), manager.session_id())
}

fn message(role: &str, text: &str) -> json::Value {
    json::parse(&format!(
        r#"{{"role":"{role}","content":"{text}","provider":"p","model":"m","timestamp":1}}"#
    ))
    .expect("json")
}

const READ: u32 = 0x8000_0000;
const WRITE: u32 = 0x4000_0000;
const ATTRIBUTES_ONLY: u32 = 0x0080;

fn request(desired_access: u32, disposition: u32) -> CreateRequest {
    CreateRequest {
        desired_access,
        disposition,
        options: 0,
    }
}

fn open(a: &Adapter, path: &str, access: u32, disposition: u32) -> Result<Handle, NtStatus> {
    a.create(path, request(access, disposition), Some(a.owner()))
}

fn read_all(a: &Adapter, path: &str) -> Vec<u8> {
    let handle = open(a, path, READ, FILE_OPEN).expect(path);
    let bytes = a.read(&handle, 0, 1 << 20).expect("read");
    a.close(&handle).expect("close");
    bytes
}

#[test]
fn files_open_by_path_in_any_case_and_read_as_the_model_serves_them() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (a, sid) = store(tmp.path(), false);
    let exact = read_all(&a, &format!("\\sessions\\{sid}\\header.json"));
    assert!(exact.starts_with(b"{"));
    let folded = read_all(
        &a,
        &format!("\\SESSIONS\\{}\\Header.JSON", sid.to_uppercase()),
    );
    assert_eq!(folded, exact);
    // An open for attributes alone opens nothing of the model, and still reads if asked.
    let handle = open(
        &a,
        &format!("\\sessions\\{sid}\\leaf"),
        ATTRIBUTES_ONLY,
        FILE_OPEN,
    )
    .expect("attributes");
    let info = a.info(&handle).expect("info");
    assert_eq!(
        info.attributes,
        security::FILE_ATTRIBUTE_NORMAL,
        "leaf is writable"
    );
    assert_eq!(
        a.read(&handle, 0, 100).expect("read").len() as u64,
        info.size
    );
    a.close(&handle).expect("close");
    let dir = open(&a, "\\sessions", READ, FILE_OPEN).expect("dir");
    assert!(dir.is_dir);
    assert_eq!(
        a.info(&dir).expect("info").attributes,
        security::FILE_ATTRIBUTE_DIRECTORY
    );
    assert_eq!(a.read(&dir, 0, 1), Err(STATUS_FILE_IS_A_DIRECTORY));
}

#[test]
fn entries_new_appends_whatever_the_write_offset() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (a, sid) = store(tmp.path(), false);
    let entries = format!("\\sessions\\{sid}\\entries");
    let before = a.find(&entries).expect("entries").len();
    let new = open(&a, &format!("{entries}\\new"), WRITE, FILE_OPEN).expect("new");
    let line = br#"{"type":"custom_message","customType":"note","content":"x","display":false}"#;
    let mut with_newline = line.to_vec();
    with_newline.push(b'\n');
    assert_eq!(
        a.write(&new, 4096, &with_newline, false),
        Ok(with_newline.len() as u32)
    );
    assert_eq!(
        a.write(&new, 0, &with_newline, true),
        Ok(with_newline.len() as u32)
    );
    a.close(&new).expect("close");
    assert_eq!(a.find(&entries).expect("entries").len(), before + 2);
}

#[test]
fn the_leaf_is_written_at_its_offsets_and_appended_at_its_end() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (a, sid) = store(tmp.path(), false);
    let entries = a
        .find(&format!("\\sessions\\{sid}\\entries"))
        .expect("entries");
    let first = entries[0].name.trim_end_matches(".json").to_owned();
    let leaf = format!("\\sessions\\{sid}\\leaf");
    let handle = open(&a, &leaf, WRITE, FILE_OVERWRITE).expect("leaf");
    let (head, tail) = first.split_at(3);
    assert_eq!(a.write(&handle, 0, head.as_bytes(), false), Ok(3));
    a.write(&handle, 0, tail.as_bytes(), true).expect("append");
    a.write(&handle, 0, b"\n", true).expect("newline");
    a.close(&handle).expect("the leaf moves");
    let now = String::from_utf8(read_all(&a, &leaf)).expect("utf-8");
    assert!(
        first.ends_with(now.trim()),
        "{now:?} is the first entry {first:?}"
    );
}

#[test]
fn the_layout_refuses_creates_deletes_and_renames_with_windows_codes() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (a, sid) = store(tmp.path(), false);
    let session = format!("\\sessions\\{sid}");
    let leaf = format!("{session}\\leaf");
    assert_eq!(
        open(&a, &format!("{session}\\new.txt"), WRITE, FILE_CREATE).err(),
        Some(STATUS_ACCESS_DENIED)
    );
    assert_eq!(
        open(&a, &format!("{session}\\new.txt"), READ, FILE_OPEN).err(),
        Some(STATUS_OBJECT_NAME_NOT_FOUND)
    );
    assert_eq!(
        open(&a, "\\sessions\\nobody\\leaf", READ, FILE_OPEN_IF).err(),
        Some(STATUS_OBJECT_PATH_NOT_FOUND)
    );
    assert_eq!(
        open(&a, &leaf, WRITE, FILE_CREATE).err(),
        Some(STATUS_OBJECT_NAME_COLLISION)
    );
    let delete_on_close = CreateRequest {
        desired_access: READ,
        disposition: FILE_OPEN,
        options: FILE_DELETE_ON_CLOSE,
    };
    assert_eq!(
        a.create(&leaf, delete_on_close, Some(a.owner())).err(),
        Some(STATUS_CANNOT_DELETE)
    );
    assert_eq!(a.removal(&leaf), STATUS_CANNOT_DELETE);
    assert_eq!(a.removal(&session), STATUS_CANNOT_DELETE);
    assert_eq!(a.rename(&leaf), STATUS_ACCESS_DENIED);
    let not_a_dir = CreateRequest {
        options: FILE_DIRECTORY_FILE,
        ..request(READ, FILE_OPEN)
    };
    assert_eq!(
        a.create(&leaf, not_a_dir, Some(a.owner())).err(),
        Some(STATUS_NOT_A_DIRECTORY)
    );
    let header = format!("{session}\\header.json");
    assert_eq!(
        open(&a, &header, WRITE, FILE_OPEN).err(),
        Some(STATUS_ACCESS_DENIED)
    );
    let handle = open(&a, &header, READ, FILE_OPEN).expect("header");
    assert_eq!(a.write(&handle, 0, b"x", false), Err(STATUS_ACCESS_DENIED));
    assert_eq!(a.set_other(&handle, false), Ok(()));
    assert_eq!(a.set_other(&handle, true), Err(STATUS_ACCESS_DENIED));
    assert_eq!(a.set_size(&handle, 0), Err(STATUS_ACCESS_DENIED));
}

#[test]
fn only_the_mounting_user_opens_anything() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (a, _) = store(tmp.path(), false);
    let other = Sid::parse("S-1-5-21-1-2-3-1002").expect("sid");
    for requester in [Some(&other), None] {
        assert_eq!(
            a.create("\\sessions", request(READ, FILE_OPEN), requester)
                .err(),
            Some(STATUS_ACCESS_DENIED)
        );
    }
    let root = open(&a, "\\", READ, FILE_OPEN).expect("root");
    let all = security::OWNER_SECURITY_INFORMATION | security::DACL_SECURITY_INFORMATION;
    let sd = a.security(&root, all).expect("descriptor");
    assert_eq!(
        sd,
        security::descriptor(a.owner(), gjcfs_vfs::NodeKind::Directory, 0o700, all)
    );
}

#[test]
fn a_read_only_mount_refuses_writes_as_write_protected() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (a, sid) = store(tmp.path(), true);
    assert_eq!(
        open(
            &a,
            &format!("\\sessions\\{sid}\\entries\\new"),
            WRITE,
            FILE_OPEN
        )
        .err(),
        Some(STATUS_MEDIA_WRITE_PROTECTED)
    );
    assert_eq!(
        open(&a, &format!("\\sessions\\{sid}\\x"), WRITE, FILE_CREATE).err(),
        Some(STATUS_MEDIA_WRITE_PROTECTED)
    );
}

#[test]
fn links_are_read_only_files_holding_their_windows_target() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (a, sid) = store(tmp.path(), false);
    let labels = format!("\\sessions\\{sid}\\labels");
    let found = a.find(&labels).expect("labels");
    assert_eq!(found.len(), 1);
    // The label `a:b`, written as Windows allows.
    assert_eq!(found[0].name, "a%3Ab");
    assert_eq!(found[0].info.attributes, security::FILE_ATTRIBUTE_READONLY);
    let path = format!("{labels}\\{}", found[0].name);
    let target = String::from_utf8(read_all(&a, &path)).expect("utf-8");
    assert_eq!(found[0].info.size, target.len() as u64);
    let entry = target.strip_prefix("..\\entries\\").expect(&target);
    let entries = a
        .find(&format!("\\sessions\\{sid}\\entries"))
        .expect("entries");
    assert_eq!(entries[1].name, entry, "the label's entry");
    assert_eq!(
        open(&a, &path, WRITE, FILE_OPEN).err(),
        Some(STATUS_ACCESS_DENIED)
    );
    let projects = a.find("\\projects").expect("projects");
    let project = format!("\\projects\\{}", projects[0].name);
    let link = format!("{project}\\{sid}");
    assert_eq!(
        String::from_utf8(read_all(&a, &link)).expect("utf-8"),
        format!("..\\..\\sessions\\{sid}")
    );
    assert_eq!(
        open(&a, &format!("{link}\\leaf"), READ, FILE_OPEN).err(),
        Some(STATUS_OBJECT_PATH_NOT_FOUND),
        "a link is a file, not a way through"
    );
}

#[test]
fn a_change_is_notified_by_the_paths_of_what_changed() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (a, sid) = store(tmp.path(), false);
    let changed = Arc::new(Mutex::new(Vec::<u64>::new()));
    let sink = changed.clone();
    a.vfs().set_invalidator(Box::new(move |inos: &[u64]| {
        sink.lock().extend_from_slice(inos)
    }));
    let session = format!("\\sessions\\{sid}");
    let leaf = format!("{session}\\leaf");
    read_all(&a, &leaf);
    a.find(&format!("{session}\\entries")).expect("entries");
    let new = open(&a, &format!("{session}\\entries\\new"), WRITE, FILE_OPEN).expect("new");
    let line =
        b"{\"type\":\"custom_message\",\"customType\":\"n\",\"content\":\"x\",\"display\":false}\n";
    a.write(&new, 0, line, false).expect("append");
    a.close(&new).expect("close");
    let paths = a.changed_paths(&changed.lock());
    // The nodes Windows has seen (a node never looked at has nothing cached of it).
    for expected in [session.clone(), leaf, format!("{session}\\entries")] {
        assert_eq!(
            paths.iter().filter(|p| **p == expected).count(),
            1,
            "{expected} in {paths:?}"
        );
    }
    assert!(
        a.changed_paths(&[9_999_999]).is_empty(),
        "an unknown node has no path"
    );
}
