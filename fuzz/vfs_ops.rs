//! The check behind the `vfs_ops` fuzz target, shared with
//! `tests/integration/fuzz_regressions.rs`: the bytes are read as a sequence of operations
//! on the mount model over a `MemoryStorage` (appends through `entries/new`, of a message or
//! of any bytes, leaf writes, of a known id or of any bytes, the agent appending from
//! outside, storage faults at any call, crashes, reads of every file), and after each one
//!
//! - nothing panics, and every file the session directory lists reads to its size;
//! - every entry listed after an acknowledged write is still listed, crashes included (an
//!   acknowledged append or leaf move is durable);
//! - the bytes of a second session nobody writes are unchanged.

// Each user includes this file for its one check.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use gjcfs::engine::json;
use gjcfs::engine::manager::{SessionManager, WriteTarget};
use gjcfs::engine::storage::{Fault, FaultKind, MemoryStorage, SessionStorage};
use gjcfs::vfs::{NodeKind, Vfs, VfsError, ROOT_INO};

// `tests/integration/common/vfs_io.rs`, which the includer makes `super::vfs_io`.
use super::vfs_io::{config, memory_vfs, read_file, write_file, SESSIONS_ROOT};

/// At most this many operations are taken from one input.
const MAX_OPS: usize = 48;

pub fn vfs_ops(data: &[u8]) {
    let mut world = World::new();
    let mut input = data.iter().copied();
    for _ in 0..MAX_OPS {
        let Some(op) = input.next() else { break };
        world.step(op, &mut input);
    }
    world.vfs.close_all();
}

/// The store, its server and what the check holds of them.
struct World {
    storage: MemoryStorage,
    vfs: Vfs,
    /// The written session: its file and id.
    path: PathBuf,
    sid: String,
    /// The second session, and its bytes.
    other: PathBuf,
    other_bytes: Vec<u8>,
    /// Every entry id listed after an acknowledged write.
    acked: BTreeSet<String>,
    /// Every entry id ever listed, for leaf writes to choose from.
    known: Vec<String>,
}

/// A session of the workspace `/w` created through the engine with a question and its
/// answer: its file.
fn new_session(storage: &MemoryStorage, text: &str) -> PathBuf {
    storage.ensure_dir(Path::new("/w")).unwrap();
    let manager =
        SessionManager::create_managed(Path::new("/w"), Path::new(SESSIONS_ROOT), config(storage))
            .unwrap();
    for role in ["user", "assistant"] {
        manager.append_message(message(role, text)).unwrap();
    }
    let path = manager
        .session_file()
        .expect("a session written at the answer");
    manager.close().unwrap();
    path
}

fn message(role: &str, text: &str) -> json::Value {
    json::parse(&format!(
        r#"{{"role":"{role}","content":"{text}","provider":"p","model":"m","timestamp":1}}"#
    ))
    .unwrap()
}

/// The session id a file's header names.
fn session_id(storage: &MemoryStorage, path: &Path) -> String {
    let bytes = storage.file(path).unwrap();
    let header = bytes.split(|&b| b == b'\n').next().unwrap();
    let header = json::parse(std::str::from_utf8(header).unwrap()).unwrap();
    let id = header.as_object().and_then(|o| o.get("id")).unwrap();
    id.as_str().unwrap().to_owned()
}

impl World {
    fn new() -> World {
        let storage = MemoryStorage::new();
        let path = new_session(&storage, "q");
        let other = new_session(&storage, "other");
        let other_bytes = storage.file(&other).unwrap();
        let vfs = memory_vfs(&storage);
        let sid = session_id(&storage, &path);
        let mut world = World {
            storage,
            vfs,
            path,
            sid,
            other,
            other_bytes,
            acked: BTreeSet::new(),
            known: Vec::new(),
        };
        world.check(true);
        world
    }

    /// Takes one operation (`op` and what it reads of `input`), then checks the world.
    fn step(&mut self, op: u8, input: &mut impl Iterator<Item = u8>) {
        let mut next = || input.next().unwrap_or(0);
        let acknowledged = match op % 8 {
            0 => {
                let line = format!("{{\"role\":\"user\",\"content\":\"m{}\"}}\n", next());
                let split = usize::from(next()) % line.len();
                self.append(&[&line.as_bytes()[..split], &line.as_bytes()[split..]])
            }
            1 => {
                let bytes: Vec<u8> = (0..next() % 48).map(|_| next()).collect();
                self.append(&[&bytes])
            }
            2 if !self.known.is_empty() => {
                let id = &self.known[usize::from(next()) % self.known.len()];
                let line = format!("{id}\n");
                self.write_named("leaf", &[line.as_bytes()])
            }
            3 => {
                let bytes: Vec<u8> = (0..next() % 24).map(|_| next()).collect();
                self.write_named("leaf", &[&bytes])
            }
            4 => {
                self.outside_append(next());
                true
            }
            5 => {
                let kind = match next() % 3 {
                    0 => FaultKind::Errno(5),  // EIO
                    1 => FaultKind::Errno(28), // ENOSPC
                    _ => FaultKind::ShortWrite,
                };
                let at = self.storage.op_count() + u64::from(next() % 32);
                self.storage.set_fault(Some(Fault { at, kind }));
                let line = format!("{{\"role\":\"user\",\"content\":\"f{}\"}}\n", next());
                self.append(&[line.as_bytes()]);
                self.storage.set_fault(None);
                false
            }
            6 => {
                // The machine stops under the server: nothing it still holds is written.
                self.storage.crash();
                self.vfs = memory_vfs(&self.storage);
                false
            }
            _ => {
                self.read_every_file().expect("every listed file reads");
                false
            }
        };
        self.check(acknowledged);
    }

    fn session_dir(&self) -> Result<u64, VfsError> {
        let sessions = self.vfs.lookup(ROOT_INO, "sessions")?.ino;
        Ok(self.vfs.lookup(sessions, &self.sid)?.ino)
    }

    /// Writes `pieces` to the session's file `name`: whether the write was acknowledged.
    fn write_named(&self, name: &str, pieces: &[&[u8]]) -> bool {
        let write = || {
            let ino = self.vfs.lookup(self.session_dir()?, name)?.ino;
            write_file(&self.vfs, ino, pieces)
        };
        write().is_ok()
    }

    fn append(&self, pieces: &[&[u8]]) -> bool {
        let append = || {
            let entries = self.vfs.lookup(self.session_dir()?, "entries")?.ino;
            let new = self.vfs.lookup(entries, "new")?.ino;
            write_file(&self.vfs, new, pieces)
        };
        append().is_ok()
    }

    /// The agent appending a message under the file's leaf.
    fn outside_append(&self, n: u8) {
        let manager = SessionManager::open_for_writing(
            &self.path,
            &WriteTarget::default(),
            config(&self.storage),
        )
        .unwrap();
        manager
            .append_message(message("user", &format!("o{n}")))
            .unwrap();
        manager.close().unwrap();
    }

    fn read_every_file(&self) -> Result<(), VfsError> {
        let dir = self.session_dir()?;
        let entries = self.vfs.lookup(dir, "entries")?.ino;
        for parent in [dir, entries] {
            for entry in self.vfs.readdir(parent)? {
                let attr = self.vfs.lookup(parent, &entry.name)?;
                if attr.kind == NodeKind::File && entry.name != "new" {
                    let bytes = read_file(&self.vfs, attr.ino)?;
                    assert_eq!(bytes.len() as u64, attr.size, "{}: size", entry.name);
                }
            }
        }
        Ok(())
    }

    /// The entry ids `entries/` lists.
    fn listed(&self) -> BTreeSet<String> {
        let entries = self
            .session_dir()
            .and_then(|dir| self.vfs.lookup(dir, "entries"))
            .expect("the session's entries");
        let names = self.vfs.readdir(entries.ino).expect("entries/ lists");
        names
            .into_iter()
            .filter(|e| e.name != "new")
            .map(|e| {
                let id = e.name.split_once('-').map_or(e.name.as_str(), |(_, id)| id);
                id.trim_end_matches(".json").to_owned()
            })
            .collect()
    }

    fn check(&mut self, acknowledged: bool) {
        let listed = self.listed();
        let lost: Vec<_> = self.acked.difference(&listed).collect();
        assert!(lost.is_empty(), "acknowledged entries lost: {lost:?}");
        for id in &listed {
            if !self.known.contains(id) {
                self.known.push(id.clone());
            }
        }
        if acknowledged {
            self.acked = listed;
        }
        assert_eq!(
            self.storage.file(&self.other).as_deref(),
            Some(&self.other_bytes[..]),
            "the other session changed"
        );
    }
}
