//! A search never answers from an index it cannot vouch for: the index file removed,
//! truncated, damaged or replaced while a watcher follows the store, and an index another
//! process is writing (a long transaction).

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::gjcfs_bin;
use gjcfs::search::{remove_index, SearchIndex, Store, INDEX_FILE};

/// A store of one directory with one session holding `word`, and where its index goes.
struct Sessions {
    tmp: tempfile::TempDir,
    root: PathBuf,
    index_dir: PathBuf,
}

impl Sessions {
    fn new(word: &str) -> Sessions {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap().join("sessions");
        std::fs::create_dir(&root).unwrap();
        let index_dir = tmp.path().join("index");
        let sessions = Sessions {
            tmp,
            root,
            index_dir,
        };
        std::fs::write(sessions.file(1), session(1, word)).unwrap();
        sessions
    }

    fn file(&self, n: u32) -> PathBuf {
        self.root.join(format!("s{n}.jsonl"))
    }

    fn index_file(&self) -> PathBuf {
        self.index_dir.join(INDEX_FILE)
    }

    fn store(&self) -> Store {
        Store::Dir(self.root.clone())
    }

    /// `gjcfs search WORD` over this store, answering within 30 s.
    fn search(&self, word: &str) -> Output {
        let mut child = Command::new(gjcfs_bin())
            .args(["search", word, "--json", "--session-dir"])
            .arg(&self.root)
            .arg("--index")
            .arg(&self.index_dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if started.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("`gjcfs search {word}` gave no answer in 30 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        child.wait_with_output().unwrap()
    }

    /// How many hits a search for `word` gives; it must not fail.
    fn hits(&self, word: &str) -> usize {
        let out = self.search(word);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() || (stdout.is_empty() && stderr.contains("no hits")),
            "{word}: {:?}: {stderr}",
            out.status
        );
        stdout.lines().count()
    }
}

/// A session `s{n}` whose first message holds `word`.
fn session(n: u32, word: &str) -> String {
    format!(
        "{{\"type\":\"session\",\"version\":5,\"id\":\"s{n}\",\"timestamp\":\"2026-03-01T10:00:00.000Z\",\"cwd\":\"/w\"}}\n{}",
        message_line("m1", None, word)
    )
}

fn message_line(id: &str, parent: Option<&str>, text: &str) -> String {
    let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
    format!(
        "{{\"type\":\"message\",\"id\":\"{id}\",\"parentId\":{parent},\"timestamp\":\"2026-03-01T10:00:01.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"{text}\",\"timestamp\":1}}}}\n"
    )
}

fn append(path: &Path, text: &str) {
    let mut file = OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(text.as_bytes()).unwrap();
}

/// Polls `f` for up to twenty seconds; whether it came true.
fn within_seconds(mut f: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(20) {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// What is done to the index file while a watcher follows the store.
#[derive(Debug, Clone, Copy)]
enum Harm {
    Removed,
    Truncated,
    Damaged,
    /// Replaced by the index of another, empty store.
    Replaced,
}

fn harm(sessions: &Sessions, harm: Harm) {
    let file = sessions.index_file();
    match harm {
        Harm::Removed => remove_index(&sessions.index_dir).unwrap(),
        Harm::Truncated => {
            OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(&file)
                .unwrap();
        }
        Harm::Damaged => {
            let mut f = OpenOptions::new().write(true).open(&file).unwrap();
            f.write_all(&[0x5a; 100]).unwrap();
        }
        Harm::Replaced => {
            let other = sessions.tmp.path().join("other");
            let empty = sessions.tmp.path().join("empty");
            std::fs::create_dir(&empty).unwrap();
            let index = SearchIndex::open(&other).unwrap();
            index.update_dirs(&[empty], 1, &|_| {}).unwrap();
            drop(index);
            remove_index(&sessions.index_dir).unwrap();
            std::fs::rename(other.join(INDEX_FILE), &file).unwrap();
        }
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_search_after_the_watched_index_is_removed_truncated_damaged_or_replaced_finds_earlier_words() {
    for case in [
        Harm::Removed,
        Harm::Truncated,
        Harm::Damaged,
        Harm::Replaced,
    ] {
        let sessions = Sessions::new("quokka");
        assert_eq!(sessions.hits("quokka"), 1, "{case:?}: the index is built");
        let index = Arc::new(SearchIndex::open(&sessions.index_dir).unwrap());
        let dirs = [sessions.root.clone()];
        let watching = index.watch(sessions.store(), 1).unwrap();
        assert!(within_seconds(|| index.is_fresh(&dirs)), "{case:?}");
        // Written while the watcher follows the store.
        append(&sessions.file(1), &message_line("m2", Some("m1"), "wombat"));
        assert_eq!(sessions.hits("wombat"), 1, "{case:?}: watched");

        harm(&sessions, case);
        assert_eq!(sessions.hits("quokka"), 1, "{case:?}: written long before");
        assert_eq!(
            sessions.hits("wombat"),
            1,
            "{case:?}: written while watched"
        );

        // The watcher follows the file at the index's path again, and vouches for it.
        let fresh = || {
            SearchIndex::open(&sessions.index_dir)
                .map(|index| index.is_fresh(&dirs))
                .unwrap_or(false)
        };
        assert!(within_seconds(fresh), "{case:?}: claimed again");
        append(&sessions.file(1), &message_line("m3", Some("m2"), "numbat"));
        assert_eq!(sessions.hits("numbat"), 1, "{case:?}: after");
        drop(watching);
    }
}

/// Whether a search's error output says the index was busy.
fn said_busy(out: &Output) -> bool {
    String::from_utf8_lossy(&out.stderr).contains("being written by another process")
}

#[test]
fn a_search_while_another_process_holds_the_index_write_lock_answers_from_what_is_committed() {
    let sessions = Sessions::new("quokka");
    assert_eq!(sessions.hits("quokka"), 1, "the index is built");
    // A session the next search must index, while another connection holds the write lock
    // (a mount stopped in the middle of a transaction, or one indexing a large session).
    std::fs::write(sessions.file(2), session(2, "wombat")).unwrap();
    let writer = rusqlite::Connection::open(sessions.index_file()).unwrap();
    writer.execute_batch("BEGIN IMMEDIATE").unwrap();
    let out = sessions.search("quokka");
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
    assert!(said_busy(&out), "the search says it could not update");
    writer.execute_batch("ROLLBACK").unwrap();
    drop(writer);
    // Once the lock is free the new session is indexed.
    let out = sessions.search("wombat");
    assert!(out.status.success() && !said_busy(&out), "{out:?}");
}
