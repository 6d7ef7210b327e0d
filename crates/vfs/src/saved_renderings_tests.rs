//! What is rendered of each session saved between runs (`sessions/saved_renderings.rs`), over a store
//! in memory: a model started after another one rendered the views gives their sizes, the
//! session's names and its entries' attributes without loading or rendering anything, for
//! the same transcript and renderer only, and reads the views whole; a size saved wrong
//! costs one stale read, never a file cut short.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{OpenMode, SavedRenderings, SessionSource, Vfs, VfsError};
use gjcfs_engine::storage::{MemoryStorage, SessionStorage};

const STORE: &str = "/store";
const SESSION: &str = "/store/2026-03-01T10-00-00-000Z_s1.jsonl";
const SAVED: &str = "/cache/renderings";

/// The files whose sizes are saved, as paths below the session's directory.
const VIEWS: [&str; 7] = [
    "context.json",
    "context.md",
    "context.html",
    "tree.txt",
    "tree.svg",
    "usage.json",
    "leaves/a2.html",
];

/// A session of three messages, `a2` and `a3` both children of `a1`.
fn store() -> MemoryStorage {
    let storage = MemoryStorage::new();
    storage.ensure_dir(Path::new(STORE)).unwrap();
    let lines = [
        r#"{"type":"session","version":5,"id":"s1","timestamp":"2026-03-01T10:00:00.000Z","cwd":"/w/proj"}"#,
        r#"{"type":"message","id":"a1","parentId":null,"timestamp":"2026-03-01T10:00:01.000Z","message":{"role":"user","content":"first **question**"}}"#,
        r#"{"type":"message","id":"a2","parentId":"a1","timestamp":"2026-03-01T10:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"one answer"}]}}"#,
        r#"{"type":"message","id":"a3","parentId":"a1","timestamp":"2026-03-01T10:00:03.000Z","message":{"role":"assistant","content":[{"type":"text","text":"another answer, longer"}]}}"#,
    ];
    storage.put_file(Path::new(SESSION), (lines.join("\n") + "\n").as_bytes());
    storage
}

fn model(storage: &MemoryStorage, renderer: Option<u64>) -> Vfs {
    let mut config = crate::test_config(
        Arc::new(storage.clone()),
        SessionSource::Dir(STORE.into()),
        Path::new("/agent"),
    );
    config.saved_renderings = renderer.map(|renderer| SavedRenderings {
        path: PathBuf::from(SAVED),
        renderer,
    });
    Vfs::new(config)
}

fn path_of(view: &str) -> String {
    format!("sessions/s1/{view}")
}

/// The size `stat` gives of `view`, and whether giving it rendered the view (the number
/// it has holds its bytes).
fn stat(vfs: &Vfs, view: &str) -> (u64, bool) {
    let attr = vfs.resolve_path(&path_of(view)).unwrap();
    (attr.size, vfs.snapshots.bytes(attr.ino).is_some())
}

fn read(vfs: &Vfs, view: &str) -> Result<Vec<u8>, VfsError> {
    let ino = vfs.resolve_path(&path_of(view)).unwrap().ino;
    let opened = vfs.open(
        ino,
        OpenMode {
            read: true,
            ..OpenMode::default()
        },
    )?;
    let bytes = vfs.read(opened.fh, 0, 1 << 24);
    vfs.release(opened.fh)?;
    bytes
}

/// Every view's bytes, read in a model that saves their sizes, which it then closes.
fn rendered_once(storage: &MemoryStorage, renderer: u64) -> Vec<Vec<u8>> {
    let first = model(storage, Some(renderer));
    let bytes: Vec<Vec<u8>> = VIEWS.iter().map(|v| read(&first, v).unwrap()).collect();
    for (view, bytes) in VIEWS.iter().zip(&bytes) {
        assert!(!bytes.is_empty(), "{view}");
        assert_eq!(stat(&first, view).0, bytes.len() as u64, "{view}");
    }
    assert!(first.close_all().is_empty());
    assert!(storage.exists(Path::new(SAVED)), "the sizes are saved");
    bytes
}

#[test]
fn a_later_model_gives_saved_sizes_without_rendering_and_reads_the_views_whole() {
    let storage = store();
    let bytes = rendered_once(&storage, 7);
    let second = model(&storage, Some(7));
    for (view, bytes) in VIEWS.iter().zip(&bytes) {
        assert_eq!(
            stat(&second, view),
            (bytes.len() as u64, false),
            "{view}: its saved size, nothing rendered"
        );
    }
    // A listing with attributes gives them too.
    let dir = second.resolve_path("sessions/s1").unwrap().ino;
    for entry in second.readdir(dir).unwrap() {
        if let Some(at) = VIEWS.iter().position(|v| *v == entry.name) {
            let listed = second.listed_entry(dir, &entry).unwrap();
            let crate::ListedAttr::Known(attr) = listed else {
                panic!("{}: listed unsized: {listed:?}", entry.name);
            };
            assert_eq!(attr.size, bytes[at].len() as u64, "{}", entry.name);
        }
    }
    for (view, bytes) in VIEWS.iter().zip(&bytes) {
        assert_eq!(&read(&second, view).unwrap(), bytes, "{view}: read whole");
    }
}

/// Every path below the session's directory with its size (0 for a directory), walked
/// as `du` walks it: a listing, then each name's attributes.
fn walk(vfs: &Vfs, dir: &str) -> Vec<(String, u64)> {
    let ino = vfs.resolve_path(dir).unwrap().ino;
    let mut found = Vec::new();
    for entry in vfs.readdir(ino).unwrap() {
        let path = format!("{dir}/{}", entry.name);
        let attr = vfs.resolve_path(&path).unwrap();
        match attr.kind {
            crate::NodeKind::Directory => found.extend(walk(vfs, &path)),
            _ => found.push((path, attr.size)),
        }
    }
    found.sort();
    found
}

#[test]
fn a_later_model_walks_a_session_without_loading_it() {
    let storage = store();
    let first = model(&storage, Some(7));
    let walked = walk(&first, "sessions/s1");
    assert!(walked
        .iter()
        .any(|(p, _)| p.ends_with("/entries/000002-a3.json")));
    assert!(first.close_all().is_empty());
    let second = model(&storage, Some(7));
    assert_eq!(
        walk(&second, "sessions/s1"),
        walked,
        "the same names and sizes"
    );
    assert!(
        !second.sessions.is_loaded("s1"),
        "answered from what was saved"
    );
    // Read, the session is loaded, and its files are what the walk said.
    for (path, size) in &walked {
        if !path.ends_with("/new") && !path.contains("/labels/") {
            let view = path.trim_start_matches("sessions/s1/");
            assert_eq!(read(&second, view).unwrap().len() as u64, *size, "{path}");
        }
    }
    assert!(second.sessions.is_loaded("s1"));
}

#[test]
fn sizes_count_only_for_their_transcript_and_their_renderer() {
    let storage = store();
    rendered_once(&storage, 7);
    // Another program renders afresh.
    let other = model(&storage, Some(8));
    assert!(stat(&other, "context.html").1, "rendered");
    // A model that keeps no sizes renders too.
    assert!(stat(&model(&storage, None), "context.html").1);
    // The transcript changed: its views are rendered for what it holds now.
    let mut text = storage.read(Path::new(SESSION)).unwrap();
    text.extend_from_slice(br#"{"type":"message","id":"a4","parentId":"a3","timestamp":"2026-03-01T10:00:04.000Z","message":{"role":"user","content":"and a third question"}}"#);
    text.push(b'\n');
    storage.put_file(Path::new(SESSION), &text);
    let later = model(&storage, Some(7));
    let (size, rendered) = stat(&later, "context.md");
    assert!(rendered, "rendered for the new version");
    assert_eq!(size, read(&later, "context.md").unwrap().len() as u64);
    assert!(String::from_utf8(read(&later, "context.md").unwrap())
        .unwrap()
        .contains("and a third question"));
}

#[test]
fn a_size_saved_wrong_costs_one_stale_read_and_is_forgotten() {
    let storage = store();
    let bytes = rendered_once(&storage, 7);
    let html = &bytes[2];
    // The saved size of context.html made one byte longer.
    let mut saved = storage.read(Path::new(SAVED)).unwrap();
    let size = (html.len() as u64).to_le_bytes();
    let at: Vec<usize> = saved
        .windows(8)
        .enumerate()
        .filter(|(_, w)| *w == size)
        .map(|(at, _)| at)
        .collect();
    assert_eq!(at.len(), 1, "the size is saved once");
    saved[at[0]..at[0] + 8].copy_from_slice(&(html.len() as u64 + 1).to_le_bytes());
    storage.put_file(Path::new(SAVED), &saved);

    let vfs = model(&storage, Some(7));
    assert_eq!(stat(&vfs, "context.html"), (html.len() as u64 + 1, false));
    assert_eq!(read(&vfs, "context.html"), Err(VfsError::Stale));
    // Opened again, the view is rendered and sized anew.
    assert_eq!(stat(&vfs, "context.html"), (html.len() as u64, true));
    assert_eq!(&read(&vfs, "context.html").unwrap(), html);
}

#[test]
fn a_damaged_saved_file_is_no_saved_sizes() {
    let storage = store();
    rendered_once(&storage, 7);
    let mut saved = storage.read(Path::new(SAVED)).unwrap();
    saved.truncate(saved.len() - 3);
    storage.put_file(Path::new(SAVED), &saved);
    let vfs = model(&storage, Some(7));
    let (size, rendered) = stat(&vfs, "tree.svg");
    assert!(rendered);
    assert_eq!(size, read(&vfs, "tree.svg").unwrap().len() as u64);
}

#[test]
fn the_views_are_listed_in_the_order_of_their_numbers() {
    for (n, view) in crate::layout::View::ALL.into_iter().enumerate() {
        assert_eq!(view as usize, n, "{view:?}");
    }
}
