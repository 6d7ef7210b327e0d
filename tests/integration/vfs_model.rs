//! The mount model against a reference model: random sequences of operations on a `Vfs`
//! over a `MemoryStorage` (appends through `entries/new`, leaf moves through `leaf`, the
//! agent appending to or rewriting the file from outside, reads of every file, faults
//! injected into the writes, crashes), and after each one, what the mount shows (the
//! entries in order, the leaf, the context's messages) must be what a small model of the
//! session says.
//!
//! The model is a list of messages, each with its parent, and the leaf: an append through
//! the mount or from outside hangs a message under the leaf and moves the leaf to it; a
//! leaf write moves the leaf; a rewrite from outside changes nothing the mount shows. A
//! write that fails changes nothing; one that succeeds is applied. A search for a message's
//! text finds that message and no other (the texts are single words, each its own). After
//! a crash the
//! session holds every acknowledged message (managed appends are durable when
//! acknowledged), and a second session nobody writes keeps its bytes.

use std::path::Path;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::TestCaseError;

use gjcfs::engine::json::{self, Value};
use gjcfs::engine::manager::{SessionManager, WriteTarget};
use gjcfs::engine::storage::{Fault, FaultKind, MemoryStorage};
use gjcfs::vfs::{NodeKind, Vfs, VfsError, ROOT_INO};

use crate::common::memory::{config, managed_transcript};
use crate::common::vfs_io::{memory_vfs, read_file, write_file};

/// What happens next.
#[derive(Debug, Clone)]
enum Op {
    /// A message appended through `entries/new`, in one or two writes.
    AppendNew { split: bool },
    /// `echo ID > leaf` with the id of one of the messages.
    MoveLeaf(Index),
    /// The agent appends a message to the file itself.
    OutsideAppend,
    /// The agent rewrites the whole file (temp file, fsync, rename), as its migrations and
    /// `rewriteEntries` do: the same session in a new file.
    OutsideRewrite,
    /// Every file of the session directory is looked up, opened and read.
    ReadAll,
    /// `search/<text>/results.jsonl` is read for the text of one of the messages.
    Search(Index),
    /// An append through `entries/new` while storage operation `after` (counted from now)
    /// fails.
    FaultyAppend { after: u8, kind: FaultKind },
    /// The machine stops: what was not durable is gone, and a new server starts.
    Crash,
}

fn op() -> impl Strategy<Value = Op> {
    let kind = prop_oneof![
        Just(FaultKind::Errno(libc::EIO)),
        Just(FaultKind::Errno(libc::ENOSPC)),
        Just(FaultKind::ShortWrite),
    ];
    prop_oneof![
        3 => any::<bool>().prop_map(|split| Op::AppendNew { split }),
        3 => any::<Index>().prop_map(Op::MoveLeaf),
        2 => Just(Op::OutsideAppend),
        1 => Just(Op::OutsideRewrite),
        1 => Just(Op::ReadAll),
        2 => any::<Index>().prop_map(Op::Search),
        3 => (0u8..24, kind).prop_map(|(after, kind)| Op::FaultyAppend { after, kind }),
        1 => Just(Op::Crash),
    ]
}

/// The session as the model has it: each message's text and parent, and the leaf.
#[derive(Debug, Clone, PartialEq)]
struct Model {
    messages: Vec<(String, Option<usize>)>,
    leaf: Option<usize>,
}

impl Model {
    /// `q0` and `a0`, as [`managed_transcript`] writes them.
    fn start() -> Model {
        Model {
            messages: vec![("q".into(), None), ("a".into(), Some(0))],
            leaf: Some(1),
        }
    }

    fn append(&mut self, text: String) {
        self.messages.push((text, self.leaf));
        self.leaf = Some(self.messages.len() - 1);
    }

    /// The texts from the root to the leaf.
    fn path(&self) -> Vec<String> {
        let mut path = Vec::new();
        let mut at = self.leaf;
        while let Some(i) = at {
            path.push(self.messages[i].0.clone());
            at = self.messages[i].1;
        }
        path.reverse();
        path
    }
}

fn lookup(v: &Vfs, parent: u64, name: &str) -> Result<u64, VfsError> {
    v.lookup(parent, name).map(|a| a.ino)
}

/// The session's directory in the mount.
fn session_dir(v: &Vfs, sid: &str) -> Result<u64, VfsError> {
    let sessions = lookup(v, ROOT_INO, "sessions")?;
    lookup(v, sessions, sid)
}

/// What the mount shows of the session: its message ids in file order, its leaf, and the
/// texts of its context's messages.
fn shown(v: &Vfs, sid: &str) -> Result<(Vec<String>, String, Vec<String>), VfsError> {
    let dir = session_dir(v, sid)?;
    let entries = lookup(v, dir, "entries")?;
    let mut names: Vec<String> = v
        .readdir(entries)?
        .into_iter()
        .map(|e| e.name)
        .filter(|n| n != "new")
        .collect();
    names.sort();
    let ids = names
        .iter()
        .map(|n| {
            let id = n.split_once('-').map_or(n.as_str(), |(_, id)| id);
            id.trim_end_matches(".json").to_owned()
        })
        .collect();
    let leaf = String::from_utf8(read_file(v, lookup(v, dir, "leaf")?)?).unwrap();
    let context = read_file(v, lookup(v, dir, "context.json")?)?;
    let context = json::parse(std::str::from_utf8(&context).unwrap()).unwrap();
    let texts = context
        .as_object()
        .and_then(|o| o.get("messages"))
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .map(|m| {
            let content = m.as_object().and_then(|o| o.get("content")).unwrap();
            content.as_str().map(str::to_owned).unwrap_or_default()
        })
        .collect();
    Ok((ids, leaf, texts))
}

/// Checks that the mount shows what `model` says; the message ids in file order.
fn check(v: &Vfs, sid: &str, model: &Model, when: &str) -> Result<Vec<String>, TestCaseError> {
    let (ids, leaf, texts) = shown(v, sid).map_err(|e| fail(when, e))?;
    prop_assert_eq!(ids.len(), model.messages.len(), "{}: entries", when);
    let want_leaf = model
        .leaf
        .map_or(String::new(), |i| format!("{}\n", ids[i]));
    prop_assert_eq!(leaf, want_leaf, "{}: leaf", when);
    prop_assert_eq!(texts, model.path(), "{}: context", when);
    Ok(ids)
}

fn fail(when: &str, e: VfsError) -> TestCaseError {
    TestCaseError::fail(format!("{when}: {e:?}"))
}

/// The message line `entries/new` takes.
fn new_line(text: &str) -> String {
    format!("{{\"role\":\"user\",\"content\":\"{text}\"}}\n")
}

/// The agent appending `text` under the file's leaf, through the engine.
fn outside_append(storage: &MemoryStorage, path: &Path, text: &str) {
    let manager =
        SessionManager::open_for_writing(path, &WriteTarget::default(), config(storage)).unwrap();
    let message = json::parse(&format!(
        r#"{{"role":"user","content":"{text}","timestamp":1}}"#
    ))
    .unwrap();
    manager.append_message(message).unwrap();
    manager.close().unwrap();
}

/// The agent rewriting the whole file, through the engine.
fn outside_rewrite(storage: &MemoryStorage, path: &Path) {
    let manager =
        SessionManager::open_for_writing(path, &WriteTarget::default(), config(storage)).unwrap();
    manager.rewrite_entries().unwrap();
    manager.close().unwrap();
}

/// Reads every file the session directory lists, and every file of its `entries/`.
fn read_every_file(v: &Vfs, sid: &str) -> Result<(), VfsError> {
    let dir = session_dir(v, sid)?;
    let entries = lookup(v, dir, "entries")?;
    for parent in [dir, entries] {
        for entry in v.readdir(parent)? {
            let attr = v.lookup(parent, &entry.name)?;
            if attr.kind == NodeKind::File && entry.name != "new" {
                let bytes = read_file(v, attr.ino)?;
                assert_eq!(bytes.len() as u64, attr.size, "{}: size", entry.name);
            }
        }
    }
    Ok(())
}

/// The entry ids `search/<word>/results.jsonl` lists, best first.
fn searched(v: &Vfs, word: &str) -> Result<Vec<String>, VfsError> {
    let dir = lookup(v, lookup(v, ROOT_INO, "search")?, word)?;
    let results = read_file(v, lookup(v, dir, "results.jsonl")?)?;
    Ok(std::str::from_utf8(&results)
        .unwrap()
        .lines()
        .map(|line| {
            let hit = json::parse(line).unwrap();
            let entry = hit.as_object().and_then(|o| o.get("entry"));
            entry.and_then(Value::as_str).unwrap_or_default().to_owned()
        })
        .collect())
}

fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let storage = MemoryStorage::new();
    let path = managed_transcript(&storage);
    let sid = "test-session";
    // A second session in the same scope, which nothing here writes.
    let other = path.with_file_name("2026-01-02T00-00-00-000Z_o.jsonl");
    let other_text = crate::common::SessionText::with_header(
        r#"{"type":"session","version":5,"id":"other-session","timestamp":"2026-01-02T00:00:00.000Z","cwd":"/w"}"#,
    )
    .message("o0", None, "user", "other")
    .text();
    storage.put_file(&other, other_text.as_bytes());
    let mut model = Model::start();
    let mut v = memory_vfs(&storage);
    let mut ids = check(&v, sid, &model, "at the start")?;
    for (n, op) in ops.iter().enumerate() {
        let when = format!("after op {n} {op:?}");
        let text = format!("m{n}");
        let new = || {
            let dir = session_dir(&v, sid)?;
            lookup(&v, lookup(&v, dir, "entries")?, "new")
        };
        match op {
            Op::AppendNew { split } => {
                let line = new_line(&text);
                let (a, b) = line
                    .as_bytes()
                    .split_at(if *split { 7 } else { line.len() });
                let new = new().map_err(|e| fail(&when, e))?;
                write_file(&v, new, &[a, b]).map_err(|e| fail(&when, e))?;
                model.append(text);
            }
            Op::MoveLeaf(to) => {
                let i = to.index(model.messages.len());
                let dir = session_dir(&v, sid).map_err(|e| fail(&when, e))?;
                let leaf = lookup(&v, dir, "leaf").map_err(|e| fail(&when, e))?;
                let line = format!("{}\n", ids[i]);
                write_file(&v, leaf, &[line.as_bytes()]).map_err(|e| fail(&when, e))?;
                model.leaf = Some(i);
            }
            Op::OutsideAppend => {
                outside_append(&storage, &path, &text);
                model.append(text);
            }
            Op::OutsideRewrite => outside_rewrite(&storage, &path),
            Op::ReadAll => read_every_file(&v, sid).map_err(|e| fail(&when, e))?,
            Op::Search(which) => {
                let i = which.index(model.messages.len());
                let found = searched(&v, &model.messages[i].0).map_err(|e| fail(&when, e))?;
                prop_assert_eq!(found, vec![ids[i].clone()], "{}: search", when);
            }
            Op::FaultyAppend { after, kind } => {
                let new = new().map_err(|e| fail(&when, e))?;
                let at = storage.op_count() + u64::from(*after);
                storage.set_fault(Some(Fault { at, kind: *kind }));
                let written = write_file(&v, new, &[new_line(&text).as_bytes()]);
                storage.set_fault(None);
                if written.is_ok() {
                    model.append(text);
                }
            }
            Op::Crash => {
                // The machine stops under the server: nothing it still holds is written.
                storage.crash();
                drop(v);
                v = memory_vfs(&storage);
            }
        }
        ids = check(&v, sid, &model, &when)?;
        prop_assert_eq!(
            storage.file(&other),
            Some(other_text.clone().into_bytes()),
            "{}: the other session changed",
            when
        );
    }
    v.close_all();
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 48,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_mount_shows_what_the_model_says(ops in proptest::collection::vec(op(), 1..24)) {
        run(&ops)?;
    }
}
