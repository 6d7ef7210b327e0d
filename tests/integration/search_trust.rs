//! A search never answers from an index it cannot vouch for: the index file removed,
//! truncated, damaged or replaced while a watcher follows the store, and an index another
//! process is writing (a long transaction).

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::common::gjcfs_bin;
use gjcfs::search::INDEX_FILE;

/// A store of one directory with one session holding `word`, and where its index goes.
struct Sessions {
    /// Holds the store and its index; read by the tests that watch (Linux only).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
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

    /// `gjcfs search WORD` over this store, answering within 30 s.
    fn search(&self, word: &str) -> Output {
        let mut command = Command::new(gjcfs_bin());
        command
            .args(["search", word, "--json", "--session-dir"])
            .arg(&self.root)
            .arg("--index")
            .arg(&self.index_dir);
        answer(&mut command, word)
    }

    /// How many hits a search for `word` gives; it must not fail.
    fn hits(&self, word: &str) -> usize {
        count_hits(&self.search(word), word)
    }
}

/// Runs the search `command` for `word`; its output, which must come within 30 s.
fn answer(command: &mut Command, word: &str) -> Output {
    answer_within(command, word, Duration::from_secs(30))
}

/// Runs the search `command` for `word`; its output, which must come within `limit`.
fn answer_within(command: &mut Command, word: &str, limit: Duration) -> Output {
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`gjcfs search {word}` gave no answer in {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// The hits of a search's `--json` output; it must have succeeded, or found none.
fn count_hits(out: &Output, word: &str) -> usize {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() || (stdout.is_empty() && stderr.contains("no hits")),
        "{word}: {:?}: {stderr}",
        out.status
    );
    stdout.lines().count()
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

/// A watcher follows the store from its change events, which only the disk on Linux gives.
#[cfg(target_os = "linux")]
mod watched {
    use super::*;
    use gjcfs::search::{remove_index, SearchIndex, Store};
    use std::fs::OpenOptions;
    use std::io::Write;
    use std::path::Path;
    use std::sync::Arc;

    impl Sessions {
        fn store(&self) -> Store {
            Store::Dir(self.root.clone())
        }
    }

    fn append(path: &Path, text: &str) {
        let mut file = OpenOptions::new().append(true).open(path).unwrap();
        file.write_all(text.as_bytes()).unwrap();
    }

    /// Polls `f` for up to twenty seconds; whether it came true.
    pub(super) fn within_seconds(f: impl FnMut() -> bool) -> bool {
        crate::common::within(Duration::from_secs(20), f)
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

    #[test]
    fn a_search_after_the_watched_index_is_removed_truncated_damaged_or_replaced_finds_earlier_words(
    ) {
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
}

/// A mount watching a store's index, and `gjcfs search` beside it with the mount's cache.
#[cfg(target_os = "linux")]
mod through_a_mount {
    use super::*;
    use crate::common::mount::{message, store, Mount, Store};
    use gjcfs::engine::manager::{SessionManager, StorageConfig};
    use gjcfs::search::{remove_index, SearchIndex};
    use std::path::Path;
    use std::sync::Arc;

    /// The hits of `gjcfs search WORD --all` over the store of `s` with the cache `cache`;
    /// the search must answer (exit 0, or 1 with no hits) within 90 s: a search may have to
    /// index a large session itself (a debug build on a loaded machine, the mount's claim
    /// let go), but it never waits without end.
    fn hits(s: &Store, cache: &Path, word: &str) -> usize {
        let mut command = Command::new(gjcfs_bin());
        command.env("XDG_CACHE_HOME", cache).args([
            "search",
            word,
            "--all",
            "--json",
            "--agent-dir",
            &s.agent_dir(),
        ]);
        count_hits(
            &answer_within(&mut command, word, Duration::from_secs(90)),
            word,
        )
    }

    /// Appends a user message holding `text` to the session of `s`, as the agent does.
    fn append_message(s: &Store, text: &str) {
        let m = SessionManager::open_managed(
            &s.file,
            StorageConfig::files(s.tmp.path().join("agent/blobs")),
        )
        .unwrap();
        m.append_message(message("user", text)).unwrap();
        m.close().unwrap();
    }

    /// Waits until the mount holds the claim of the index under `cache`: a shared lock of
    /// the claim file cannot be had.
    fn wait_for_the_claim(cache: &Path) {
        let claim = index_dir(cache).join("search.sqlite.watch");
        let claimed = || {
            claim.exists()
                && !Command::new("flock")
                    .args(["-n", "-s"])
                    .arg(&claim)
                    .arg("true")
                    .status()
                    .unwrap()
                    .success()
        };
        assert!(
            super::watched::within_seconds(claimed),
            "the mount claims the index"
        );
    }

    /// The index directory under `cache` once a search has made it.
    fn index_dir(cache: &Path) -> PathBuf {
        std::fs::read_dir(cache.join("gjcfs/search"))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path()
    }

    #[test]
    fn a_search_beside_a_mount_whose_index_was_removed_or_replaced_finds_earlier_words() {
        require_fuse!();
        for replace in [false, true] {
            let s = store();
            let cache = s.tmp.path().join("cache");
            let _mount = Mount::start_with_cache(&["--agent-dir", &s.agent_dir()], &cache);
            assert_eq!(hits(&s, &cache, "MOUNTTOKEN"), 1, "the index is built");
            wait_for_the_claim(&cache);
            append_message(&s, "written while watched QUOKKA");
            assert_eq!(hits(&s, &cache, "QUOKKA"), 1);
            let dir = index_dir(&cache);
            remove_index(&dir).unwrap();
            if replace {
                // The index of another, empty store in its place.
                let empty = s.tmp.path().join("empty");
                std::fs::create_dir(&empty).unwrap();
                let other = s.tmp.path().join("other");
                let index = SearchIndex::open(&other).unwrap();
                index.update_dirs(&[empty], 1, &|_| {}).unwrap();
                drop(index);
                std::fs::rename(other.join(INDEX_FILE), dir.join(INDEX_FILE)).unwrap();
            }
            for word in ["MOUNTTOKEN", "QUOKKA"] {
                assert_eq!(hits(&s, &cache, word), 1, "replace={replace}: {word}");
            }
            append_message(&s, "written after WOMBAT");
            assert_eq!(hits(&s, &cache, "WOMBAT"), 1, "replace={replace}");
        }
    }

    /// A session file of about `mb` megabytes beside the session of `s`, written whole.
    fn big_session(s: &Store, mb: usize) -> PathBuf {
        let path = s.file.with_file_name("2026-01-02T00-00-00-000Z_big.jsonl");
        let mut text = String::from(
            "{\"type\":\"session\",\"version\":5,\"id\":\"big\",\"timestamp\":\"2026-01-02T00:00:00.000Z\",\"cwd\":\"/w\"}\n",
        );
        let mut n = 0;
        while text.len() < mb << 20 {
            let words: String = (0..60).map(|w| format!("word{}x{w} ", n % 997)).collect();
            text.push_str(&format!(
                "{{\"type\":\"message\",\"id\":\"b{n}\",\"parentId\":null,\"timestamp\":\"2026-01-02T00:00:01.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"{words}\",\"timestamp\":1}}}}\n"
            ));
            n += 1;
        }
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn searches_while_a_mount_indexes_a_flood_of_appends_and_a_large_session_answer() {
        require_fuse!();
        let s = store();
        let cache = s.tmp.path().join("cache");
        let _mount = Mount::start_with_cache(&["--agent-dir", &s.agent_dir()], &cache);
        assert_eq!(hits(&s, &cache, "MOUNTTOKEN"), 1, "the index is built");
        wait_for_the_claim(&cache);
        // A large session for the mount to index, and a writer appending about 300,000
        // lines a minute for the whole test: every one a change the mount indexes.
        big_session(&s, 80);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flood = {
            let (stop, file) = (stop.clone(), s.file.clone());
            std::thread::spawn(move || {
                let mut out = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&file)
                    .unwrap();
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let line = format!(
                        "{{\"type\":\"message\",\"id\":\"f{n}\",\"parentId\":null,\"timestamp\":\"2026-03-01T10:00:01.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"flood line {n}\",\"timestamp\":1}}}}\n"
                    );
                    std::io::Write::write_all(&mut out, line.as_bytes()).unwrap();
                    n += 1;
                    if n.is_multiple_of(5) {
                        // A fixed pause: the flood's pace.
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                n
            })
        };
        for round in 0..6 {
            assert_eq!(hits(&s, &cache, "MOUNTTOKEN"), 1, "round {round}");
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let lines = flood.join().unwrap();
        assert!(lines > 0);
        // Once the flood stops, the mount takes the large session in.
        let started = Instant::now();
        while hits(&s, &cache, "word5x7") == 0 {
            assert!(
                started.elapsed() < Duration::from_secs(180),
                "the large session is found"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}
