//! What the mount model keeps of a session it no longer holds loaded: once a session was
//! read, looking it up, listing it and opening its rendered files again loads nothing and
//! renders nothing while its file is unchanged, and answers as the loaded session did; a
//! change of the file is seen at once, as new numbers of the rendered files.

use std::path::{Path, PathBuf};

use gjcfs::engine::storage::MemoryStorage;
use gjcfs::vfs::{Caching, NodeKind, OpenMode, Vfs, ROOT_INO};

use crate::common::memory::managed_transcript;
use crate::common::vfs_io::{memory_vfs, read_file};
use crate::common::SessionText;

/// Every node under directory `ino` by path, with its kind and size; the bytes of each file
/// too when `read`.
fn walk(v: &Vfs, ino: u64, at: &str, read: bool, out: &mut Vec<(String, NodeKind, u64, Vec<u8>)>) {
    for entry in v.readdir(ino).unwrap() {
        if entry.name == "." || entry.name == ".." || entry.name == "new" {
            continue;
        }
        let path = format!("{at}/{}", entry.name);
        let attr = v.lookup(ino, &entry.name).unwrap();
        let bytes = match attr.kind {
            NodeKind::File if read => read_file(v, attr.ino).unwrap(),
            _ => Vec::new(),
        };
        out.push((path.clone(), attr.kind, attr.size, bytes));
        if attr.kind == NodeKind::Directory {
            walk(v, attr.ino, &path, read, out);
        }
    }
}

fn session_dir(v: &Vfs, sid: &str) -> u64 {
    let sessions = v.lookup(ROOT_INO, "sessions").unwrap().ino;
    v.lookup(sessions, sid).unwrap().ino
}

fn opens(storage: &MemoryStorage) -> usize {
    storage
        .op_log()
        .iter()
        .filter(|op| op.starts_with("open"))
        .count()
}

/// Five more sessions beside `path`'s (the model keeps four loaded): reading each pushes
/// the others out.
fn others(storage: &MemoryStorage, path: &Path) -> Vec<String> {
    (1..=5)
        .map(|n| {
            let sid = format!("other-{n}");
            let header = format!(
                r#"{{"type":"session","version":5,"id":"{sid}","timestamp":"2026-01-02T00:00:00.000Z","cwd":"/w"}}"#
            );
            let text = SessionText::with_header(&header)
                .message("o0", None, "user", "other")
                .text();
            let file: PathBuf = path.with_file_name(format!("2026-01-02T00-00-0{n}-000Z_o.jsonl"));
            storage.put_file(&file, text.as_bytes());
            sid
        })
        .collect()
}

fn push_out(v: &Vfs, others: &[String]) {
    for sid in others {
        let context = v.lookup(session_dir(v, sid), "context.json").unwrap().ino;
        read_file(v, context).unwrap();
    }
}

/// The session of [`managed_transcript`].
const SID: &str = "test-session";

/// A store of [`SID`] and the sessions of [`others`], with a model that read every file of
/// [`SID`] (the files, as [`walk`] gives them).
#[allow(clippy::type_complexity)]
fn read_whole() -> (
    MemoryStorage,
    PathBuf,
    Vec<String>,
    Vfs,
    Vec<(String, NodeKind, u64, Vec<u8>)>,
) {
    let storage = MemoryStorage::new();
    let path = managed_transcript(&storage);
    let others = others(&storage, &path);
    let v = memory_vfs(&storage);
    let mut first = Vec::new();
    walk(&v, session_dir(&v, SID), "", true, &mut first);
    (storage, path, others, v, first)
}

#[test]
fn a_session_no_longer_loaded_is_looked_up_listed_and_opened_without_a_load() {
    let (storage, path, others, v, first) = read_whole();
    let sid = SID;
    assert!(first.len() > 15, "{first:?}");
    push_out(&v, &others);

    let before = opens(&storage);
    let mut again = Vec::new();
    walk(&v, session_dir(&v, sid), "", false, &mut again);
    let shapes = |all: &[(String, NodeKind, u64, Vec<u8>)]| -> Vec<(String, NodeKind, u64)> {
        all.iter().map(|(p, k, s, _)| (p.clone(), *k, *s)).collect()
    };
    assert_eq!(shapes(&again), shapes(&first));
    // A rendered file opened again keeps the kernel's pages, and renders nothing.
    let context = v.lookup(session_dir(&v, sid), "context.html").unwrap().ino;
    let opened = v
        .open(
            context,
            OpenMode {
                read: true,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(opened.caching, Caching::Keep);
    v.release(opened.fh).unwrap();
    assert_eq!(opens(&storage), before, "nothing was loaded");
    // Its transcript is read where it is, without a load (one open: the read's own).
    let transcript = v.lookup(session_dir(&v, sid), "session.jsonl").unwrap().ino;
    assert_eq!(
        read_file(&v, transcript).unwrap(),
        storage.file(&path).unwrap()
    );
    assert_eq!(
        opens(&storage),
        before + 1,
        "the transcript alone was opened"
    );
    // Read again after all (a kernel that let its pages go), the same bytes.
    let mut reread = Vec::new();
    walk(&v, session_dir(&v, sid), "", true, &mut reread);
    assert_eq!(reread, first);

    // The agent appends: the next look sees it, and the next open lets the pages go.
    push_out(&v, &others);
    let text = String::from_utf8(storage.file(&path).unwrap()).unwrap();
    let longer = format!(
        "{text}{}",
        r#"{"type":"message","id":"q1","parentId":"a0","timestamp":"2026-01-01T00:00:09.000Z","message":{"role":"user","content":"more"}}"#
    ) + "\n";
    storage.put_file(&path, longer.as_bytes());
    let mut changed = Vec::new();
    walk(&v, session_dir(&v, sid), "", false, &mut changed);
    assert_ne!(shapes(&changed), shapes(&first));
    assert!(changed.iter().any(|(p, ..)| p.ends_with("-q1.json")));
    // The changed file has a number of its own: the old one still reads as it was, whole.
    let changed_context = v.lookup(session_dir(&v, sid), "context.html").unwrap().ino;
    assert_ne!(changed_context, context);
    let old = first.iter().find(|(p, ..)| p == "/context.html").unwrap();
    assert_eq!(read_file(&v, context).unwrap(), old.3);
    let now = read_file(&v, changed_context).unwrap();
    assert!(now.len() > old.3.len(), "the append shows");
    assert!(v.close_all().is_empty());
}

/// Opens every file under directory `ino` as a kernel that keeps pages does: a file whose
/// open keeps the pages is not read. Whether any of it loaded the session: each storage
/// open beyond the transcript's own read.
fn opened_as_a_kernel_would(v: &Vfs, ino: u64, storage: &MemoryStorage) -> Vec<String> {
    let mut loaded = Vec::new();
    for entry in v.readdir(ino).unwrap() {
        if entry.name == "." || entry.name == ".." {
            continue;
        }
        let attr = v.lookup(ino, &entry.name).unwrap();
        let before = opens(storage);
        match attr.kind {
            NodeKind::File => {
                let o = v
                    .open(
                        attr.ino,
                        OpenMode {
                            read: true,
                            ..Default::default()
                        },
                    )
                    .unwrap();
                if o.caching != Caching::Keep {
                    v.read(o.fh, 0, 1 << 20).unwrap();
                }
                v.release(o.fh).unwrap();
                let own = usize::from(entry.name == "session.jsonl");
                if opens(storage) - before > own {
                    loaded.push(entry.name.clone());
                }
            }
            NodeKind::Directory => loaded.extend(opened_as_a_kernel_would(v, attr.ino, storage)),
            NodeKind::Symlink => {}
        }
    }
    loaded
}

#[test]
fn a_second_pass_over_every_file_of_a_session_no_longer_loaded_loads_nothing() {
    let (storage, _, others, v, _) = read_whole();
    let sid = SID;
    push_out(&v, &others);
    // `entries/new` opened for reading, the `leaf`, `errors`, the transcript: none loads.
    let loaded = opened_as_a_kernel_would(&v, session_dir(&v, sid), &storage);
    assert!(loaded.is_empty(), "loaded for {loaded:?}");
}

/// A model over `storage` that keeps its listing at `saved`, if given.
fn listing_vfs(storage: &MemoryStorage, saved: Option<&str>) -> Vfs {
    let mut config = crate::common::vfs_io::memory_config(storage);
    config.saved_listing = saved.map(PathBuf::from);
    Vfs::new(config)
}

/// How many files have been opened to be read.
fn reads(storage: &MemoryStorage) -> usize {
    storage
        .op_log()
        .iter()
        .filter(|op| op.starts_with("open_read"))
        .count()
}

/// The sessions `sessions/` lists, and how many files the listing opened to read.
fn listed(storage: &MemoryStorage, v: &Vfs) -> (Vec<String>, usize) {
    let before = reads(storage);
    let sessions = v.lookup(ROOT_INO, "sessions").unwrap().ino;
    let mut names: Vec<String> = v
        .readdir(sessions)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .filter(|n| n != "." && n != "..")
        .collect();
    names.sort();
    (names, reads(storage) - before)
}

#[test]
fn a_second_model_lists_the_store_from_the_saved_listing_and_reads_only_what_changed() {
    let storage = MemoryStorage::new();
    let path = managed_transcript(&storage);
    let others = others(&storage, &path);
    let sessions = 1 + others.len();
    let saved = Some("/cache/listing");
    let (first, _) = listed(&storage, &listing_vfs(&storage, saved));
    assert_eq!(first.len(), sessions);
    assert!(storage.file(Path::new("/cache/listing")).is_some(), "saved");
    // A model without it reads every session; a new one with it (a mount started again)
    // reads the saved listing instead.
    let (names, unsaved) = listed(&storage, &listing_vfs(&storage, None));
    assert_eq!(names, first);
    let (names, from_saved) = listed(&storage, &listing_vfs(&storage, saved));
    assert_eq!(names, first);
    assert_eq!(
        from_saved + sessions - 1,
        unsaved,
        "one file read for {sessions}"
    );
    // A session changed since: only it is read again.
    let other = path.with_file_name("2026-01-02T00-00-01-000Z_o.jsonl");
    let mut text = storage.file(&other).unwrap();
    text.extend_from_slice(
        b"{\"type\":\"message\",\"id\":\"o1\",\"parentId\":\"o0\",\"timestamp\":\"2026-01-02T00:00:02.000Z\",\"message\":{\"role\":\"assistant\",\"content\":\"hi\"}}\n",
    );
    storage.put_file(&other, &text);
    let (names, after_change) = listed(&storage, &listing_vfs(&storage, saved));
    assert_eq!(names, first);
    assert_eq!(after_change, from_saved + 1);
}
