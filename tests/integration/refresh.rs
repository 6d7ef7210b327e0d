//! `SessionManager::refresh_from_file`: lines appended to the session file from outside are
//! read on their own, and memory is then what a load of the file gives.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::sample::Index;

use gjcfs::corpus::{self, Format, Limit, Options};
use gjcfs::engine::json::{self, Value};
use gjcfs::engine::manager::{Refresh, ReloadReason, SessionManager, StorageConfig};
use gjcfs::engine::read::replay::SkippedLine;
use gjcfs::engine::{load_session, Session};

const TS: &str = "2026-01-01T00:00:00.000Z";

fn config(dir: &Path) -> StorageConfig {
    StorageConfig::files(dir.join("blobs"))
}

/// A generated v5 session of `entries` entries in `dir`.
fn session_file(dir: &Path, entries: u64) -> PathBuf {
    let path = dir.join("session.jsonl");
    let options = Options {
        seed: 7,
        limit: Limit::Entries(entries),
        format: Format::V5,
        cwd: None,
    };
    corpus::generate_file(&path, &options).unwrap();
    path
}

/// A generated session of `entries` entries, opened leniently.
fn opened(entries: u64) -> (tempfile::TempDir, PathBuf, SessionManager) {
    let dir = tempfile::tempdir().unwrap();
    let path = session_file(dir.path(), entries);
    let manager = SessionManager::open(&path, "/w", config(dir.path())).unwrap();
    (dir, path, manager)
}

/// Refreshes, expecting a reload; returns why.
fn reload_reason(manager: &SessionManager) -> ReloadReason {
    match manager.refresh_from_file().unwrap() {
        Refresh::NeedsReload(reason) => reason,
        other => panic!("expected a reload, got {other:?}"),
    }
}

/// Appends raw bytes, as another process would.
fn append(path: &Path, bytes: &[u8]) {
    let mut file = OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(bytes).unwrap();
}

/// Appends one complete line.
fn append_line(path: &Path, line: &str) {
    append(path, format!("{line}\n").as_bytes());
}

/// Refreshes, expecting appended lines; returns the number of new records.
fn appended(manager: &SessionManager) -> usize {
    match manager.refresh_from_file().unwrap() {
        Refresh::Appended { records, .. } => records,
        other => panic!("expected appended lines, got {other:?}"),
    }
}

fn message_line(id: &str, parent: Option<&str>, role: &str, text: &str) -> String {
    let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
    format!(
        r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"{TS}","message":{{"role":"{role}","content":[{{"type":"text","text":"{text}"}}],"timestamp":1}}}}"#
    )
}

fn label_line(id: &str, parent: &str, target: &str, label: &str) -> String {
    format!(
        r#"{{"type":"label","id":"{id}","parentId":"{parent}","timestamp":"{TS}","targetId":"{target}","label":"{label}"}}"#
    )
}

/// The session a load of the file gives, as `SessionManager::open` would hold it.
fn loaded(path: &Path) -> Session {
    load_session(path).unwrap().session
}

fn in_memory(manager: &SessionManager) -> Session {
    manager.read(Session::clone)
}

fn context(session: &Session) -> Value {
    session.build_context().to_value()
}

fn assert_same_as_a_load(manager: &SessionManager, path: &Path) {
    let memory = in_memory(manager);
    let load = loaded(path);
    assert_eq!(memory.leaf_id(), load.leaf_id());
    assert_eq!(
        json::to_compact(&context(&memory)),
        json::to_compact(&context(&load))
    );
    assert!(memory == load, "memory differs from a load of the file");
}

fn leaf(manager: &SessionManager) -> String {
    manager.leaf_id().unwrap()
}

#[test]
fn lines_appended_outside_are_read_as_a_load_reads_them() {
    let (dir, path, m) = opened(300);
    assert_eq!(m.refresh_from_file().unwrap(), Refresh::Unchanged);
    let before = in_memory(&m);
    let target = before
        .entries()
        .find_map(|e| e.message().map(|_| e.id().unwrap().to_owned()));
    let target = target.unwrap();
    let tip = leaf(&m);
    let lines_before = fs::read(&path)
        .unwrap()
        .iter()
        .filter(|&&b| b == b'\n')
        .count();

    let text = [
        message_line("out1", Some(&tip), "user", "from outside"),
        String::new(),
        "not json".to_owned(),
        format!("{}\r", message_line("out2", Some("out1"), "user", "crlf")),
        label_line("out3", "out2", &target, "marked"),
        r#"{"type":"header_patch","patch":{"title":"renamed outside","titleSource":"user"}}"#
            .to_owned(),
        format!(
            r#"{{"type":"entry_patch","entryId":"{target}","patch":{{"message":{{"role":"user","content":"patched","timestamp":3}}}}}}"#
        ),
        // Taken apart by the load-time sanitizer, whose patch is then appended.
        format!(
            r#"{{"type":"message","id":"out4","parentId":"out3","timestamp":"{TS}","message":{{"role":"assistant","content":[{{"type":"thinking","thinking":"t","thinkingSignature":"s"}}],"providerPayload":{{"type":"openaiResponsesHistory","items":[]}},"timestamp":4}}}}"#
        ),
        // Names a parent that does not exist (yet).
        message_line("out5", Some("later"), "user", "orphan"),
        message_line("later", Some("out4"), "user", "late parent"),
    ]
    .join("\n")
        + "\n";
    append(&path, text.as_bytes());

    let refreshed = m.refresh_from_file().unwrap();
    let skipped = match refreshed {
        Refresh::Appended {
            records,
            skipped,
            edited,
        } => {
            assert_eq!(records, 6);
            assert_eq!(
                edited,
                [before.index_of(&target).unwrap()],
                "the patched entry"
            );
            skipped
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(
        skipped.iter().map(|s| s.line).collect::<Vec<_>>(),
        [lines_before + 3],
        "the garbage line, numbered in the file"
    );
    assert_eq!(skipped, load_session(&path).unwrap().skipped);
    assert_eq!(leaf(&m), "later");
    let memory = in_memory(&m);
    assert_eq!(memory.header().title(), Some("renamed outside"));
    assert_eq!(memory.label(&target), Some("marked"));
    assert_eq!(
        memory.parent_of(memory.index_of("out5").unwrap()),
        memory.index_of("later")
    );
    let out4 = memory.get_entry("out4").unwrap().message().unwrap();
    assert!(!out4.contains_key("providerPayload"), "sanitized");
    // A refresh never writes: the sanitizer's patch is owed to the next write, and memory
    // is what reopening the file gives (which sanitizes in memory too).
    assert!(fs::read_to_string(&path).unwrap().ends_with(&text));
    let reopened = gjcfs::engine::manager::SessionManager::load_for_reading(
        &path,
        config(dir.path()),
        gjcfs::engine::manager::ReadRules::Explicit,
    )
    .unwrap();
    assert!(
        in_memory(&m) == in_memory(&reopened),
        "memory differs from a reopen"
    );
    assert_eq!(m.refresh_from_file().unwrap(), Refresh::Unchanged);
}

#[test]
fn a_torn_line_waits_until_it_is_complete() {
    let (_dir, path, m) = opened(40);
    let line = message_line("half", Some(&leaf(&m)), "user", "written in two goes");
    let (first, second) = line.split_at(line.len() / 2);
    append(&path, first.as_bytes());
    let before = in_memory(&m);
    assert_eq!(m.refresh_from_file().unwrap(), Refresh::Unchanged);
    assert!(in_memory(&m) == before);
    append(&path, second.as_bytes());
    assert_eq!(
        m.refresh_from_file().unwrap(),
        Refresh::Unchanged,
        "no newline yet"
    );
    append(&path, format!("\n{}", &line[..10]).as_bytes());
    assert_eq!(
        m.refresh_from_file().unwrap(),
        Refresh::Appended {
            records: 1,
            skipped: Vec::new(),
            edited: Vec::new(),
        }
    );
    assert_eq!(leaf(&m), "half");
    append(
        &path,
        format!("{}\n", &line[10..])
            .replace("half", "next")
            .as_bytes(),
    );
    assert_eq!(appended(&m), 1);
    assert_eq!(leaf(&m), "next");
    assert_same_as_a_load(&m, &path);
}

#[test]
fn a_torn_line_read_by_the_load_is_ended_by_a_newline_or_needs_a_reload() {
    let dir = tempfile::tempdir().unwrap();
    let path = session_file(dir.path(), 20);
    append(&path, br#"{"type":"custom","id":"torn""#);
    let m = SessionManager::open(&path, "/w", config(dir.path())).unwrap();
    // The agent ends a torn line before its next append.
    append(
        &path,
        format!("\n{}\n", message_line("after", None, "user", "x")).as_bytes(),
    );
    assert_eq!(appended(&m), 1);
    assert_same_as_a_load(&m, &path);

    append(&path, br#"{"type":"custom","id":"torn2""#);
    let m = SessionManager::open(&path, "/w", config(dir.path())).unwrap();
    append(&path, b",\"customType\":\"x\"}\n");
    assert_eq!(reload_reason(&m), ReloadReason::TornLineContinued);
}

#[test]
fn own_appends_are_not_read_back_and_interleaved_ones_need_a_reload() {
    let (_dir, path, m) = opened(30);
    let mine = m.append_custom_entry("mine", None).unwrap();
    m.set_session_name("named here", true).unwrap();
    assert_eq!(m.refresh_from_file().unwrap(), Refresh::Unchanged);
    append_line(&path, &message_line("theirs", Some(&mine), "user", "x"));
    assert_eq!(appended(&m), 1);
    assert_same_as_a_load(&m, &path);

    // An outside line lands between the last refresh and an append of ours.
    append_line(&path, &message_line("unseen", Some("theirs"), "user", "y"));
    m.append_custom_entry("mine2", None).unwrap();
    assert_eq!(reload_reason(&m), ReloadReason::Untracked);
}

#[test]
fn a_leaf_moved_in_memory_stays_until_lines_are_appended() {
    let (_dir, path, m) = opened(30);
    let first = in_memory(&m)
        .entries()
        .next()
        .unwrap()
        .id()
        .unwrap()
        .to_owned();
    let tip = leaf(&m);
    m.branch(&first).unwrap();
    assert_eq!(m.refresh_from_file().unwrap(), Refresh::Unchanged);
    assert_eq!(leaf(&m), first);
    // Patches alone move it back too: after a reload it is on the last entry.
    append(
        &path,
        b"{\"type\":\"header_patch\",\"patch\":{\"title\":\"t\"}}\n",
    );
    assert_eq!(appended(&m), 0);
    assert_eq!(leaf(&m), tip);
    assert_same_as_a_load(&m, &path);
}

#[test]
fn a_rewritten_truncated_changed_or_missing_file_needs_a_reload() {
    let dir = tempfile::tempdir().unwrap();
    let path = session_file(dir.path(), 30);
    let original = fs::read(&path).unwrap();
    let reason = |prepare: &dyn Fn()| {
        fs::write(&path, &original).unwrap();
        let m = SessionManager::open(&path, "/w", config(dir.path())).unwrap();
        prepare();
        match m.refresh_from_file().unwrap() {
            Refresh::NeedsReload(reason) => reason,
            other => panic!("{other:?}"),
        }
    };
    let renamed = dir.path().join("new.jsonl");
    let rewrite = || {
        let mut bytes = original.clone();
        bytes.extend_from_slice(message_line("x", None, "user", "x").as_bytes());
        bytes.push(b'\n');
        fs::write(&renamed, bytes).unwrap();
        fs::rename(&renamed, &path).unwrap();
    };
    assert_eq!(reason(&rewrite), ReloadReason::Replaced);
    let truncate = || {
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(original.len() as u64 - 10).unwrap();
    };
    assert_eq!(reason(&truncate), ReloadReason::Truncated);
    let change_in_place = || {
        let mut bytes = original.clone();
        let at = bytes.len() - 5;
        bytes[at] = b'Z';
        bytes.extend_from_slice(b"{}\n");
        let mut file = OpenOptions::new().write(true).open(&path).unwrap();
        file.write_all(&bytes).unwrap();
    };
    assert_eq!(reason(&change_in_place), ReloadReason::Changed);
    let remove = || fs::remove_file(&path).unwrap();
    assert_eq!(reason(&remove), ReloadReason::Missing);
}

#[test]
fn a_migrated_session_needs_a_reload_for_appended_lines() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.jsonl");
    corpus::generate_file(
        &path,
        &Options {
            seed: 1,
            limit: Limit::Entries(20),
            format: Format::V1,
            cwd: None,
        },
    )
    .unwrap();
    let m = SessionManager::open(&path, "/w", config(dir.path())).unwrap();
    assert_eq!(m.refresh_from_file().unwrap(), Refresh::Unchanged);
    append(&path, b"{\"type\":\"custom\",\"customType\":\"x\"}\n");
    assert_eq!(reload_reason(&m), ReloadReason::Migrated);
    // The migration's full rewrite would drop the line appended outside: it is refused.
    let before = fs::read(&path).unwrap();
    assert!(matches!(
        m.rewrite_entries(),
        Err(gjcfs::engine::manager::SessionError::ChangedOnDisk { .. })
    ));
    assert_eq!(fs::read(&path).unwrap(), before);
    // Opened again, a write migrates the file; appends to it are then read.
    let m = SessionManager::open(&path, "/w", config(dir.path())).unwrap();
    m.rewrite_entries().unwrap();
    assert!(fs::read_to_string(&path)
        .unwrap()
        .contains("\"customType\":\"x\""));
    append_line(&path, &message_line("late", None, "user", "x"));
    assert_eq!(appended(&m), 1);
    assert_same_as_a_load(&m, &path);
}

#[test]
fn a_strictly_opened_session_holds_appended_lines_to_the_strict_checks() {
    let dir = tempfile::tempdir().unwrap();
    let path = session_file(dir.path(), 30);
    let strictly = |path: &Path| {
        let m = SessionManager::create("/w", dir.path(), config(dir.path()));
        m.set_session_file(path).map(|()| m)
    };
    let m = strictly(&path).unwrap();
    let tip = leaf(&m);
    append_line(&path, &message_line("ok", Some(&tip), "user", "fine"));
    assert_eq!(appended(&m), 1);
    for bad in [
        "not json\n",
        "{\"type\":\"custom\",\"id\":\"c\",\"parentId\":null}\n",
        "{\"type\":\"x\",\"id\":\"c\",\"parentId\":null,\"timestamp\":\"t\"}\n",
    ] {
        let other = dir.path().join("strict.jsonl");
        fs::write(&other, fs::read(&path).unwrap()).unwrap();
        let strict = strictly(&other).unwrap();
        append(&other, bad.as_bytes());
        assert!(
            matches!(
                strict.refresh_from_file().unwrap(),
                Refresh::NeedsReload(ReloadReason::Malformed(_))
            ),
            "{bad}"
        );
        assert!(strictly(&other).is_err(), "a reopen refuses it");
    }
}

// ---------------------------------------------------------------------------------------------
// Random append sequences.

/// One step: bytes appended outside (possibly ending inside a line), an append by the
/// manager, or a refresh.
#[derive(Clone, Debug)]
enum Step {
    Outside(Vec<Piece>, Index),
    Own,
    Refresh,
}

#[derive(Clone, Debug)]
enum Piece {
    Message {
        id: u8,
        parent: Option<u8>,
    },
    Label {
        id: u8,
        target: u8,
        clear: bool,
    },
    Title(u8),
    EntryPatch(u8),
    /// An assistant message the load-time sanitizer changes. Its id is unique: the
    /// sanitizer's patch names the entry by id, and with a duplicated id it reaches the
    /// later entry on the next load (as in the original), not the one sanitized in memory.
    Sanitized,
    Garbage,
    Blank,
    Crlf(Box<Piece>),
}

fn piece() -> impl Strategy<Value = Piece> {
    let leaf = prop_oneof![
        4 => (any::<u8>(), prop::option::of(any::<u8>()))
            .prop_map(|(id, parent)| Piece::Message { id, parent }),
        1 => (any::<u8>(), any::<u8>(), any::<bool>())
            .prop_map(|(id, target, clear)| Piece::Label { id, target, clear }),
        1 => any::<u8>().prop_map(Piece::Title),
        1 => any::<u8>().prop_map(Piece::EntryPatch),
        1 => Just(Piece::Sanitized),
        1 => Just(Piece::Garbage),
        1 => Just(Piece::Blank),
    ];
    leaf.prop_recursive(1, 2, 1, |inner| {
        inner.prop_map(|p| Piece::Crlf(Box::new(p)))
    })
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (prop::collection::vec(piece(), 1..5), any::<Index>())
            .prop_map(|(pieces, cut)| Step::Outside(pieces, cut)),
        1 => Just(Step::Own),
        3 => Just(Step::Refresh),
    ]
}

/// A small pool of ids, so that ids repeat and parents dangle and resolve later.
fn pool(k: u8) -> String {
    format!("p{}", k % 12)
}

/// The line for `piece`; `n` numbers the lines, for unique ids.
fn piece_line(piece: &Piece, n: usize) -> String {
    match piece {
        Piece::Message { id, parent } => {
            message_line(&pool(*id), parent.map(pool).as_deref(), "user", "m")
        }
        Piece::Label { id, target, clear } => {
            let mut line = label_line(&pool(*id), &pool(*id / 2), &pool(*target), "l");
            if *clear {
                line = line.replace(",\"label\":\"l\"", "");
            }
            line
        }
        Piece::Title(k) => {
            format!(r#"{{"type":"header_patch","patch":{{"title":"title {k}"}}}}"#)
        }
        Piece::EntryPatch(k) => format!(
            r#"{{"type":"entry_patch","entryId":"{}","patch":{{"message":{{"role":"user","content":"patched {k}"}}}}}}"#,
            pool(*k)
        ),
        Piece::Sanitized => format!(
            r#"{{"type":"message","id":"s{n}","parentId":null,"timestamp":"{TS}","message":{{"role":"assistant","content":[{{"type":"thinking","thinking":"t","thinkingSignature":"s"}}],"providerPayload":{{"type":"openaiResponsesHistory"}},"timestamp":1}}}}"#
        ),
        Piece::Garbage => "{\"torn".to_owned(),
        Piece::Blank => " \t".to_owned(),
        Piece::Crlf(inner) => format!("{}\r", piece_line(inner, n)),
    }
}

/// The complete lines of `bytes`.
fn complete_lines(bytes: &[u8]) -> &[u8] {
    &bytes[..bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1)]
}

/// What reopening `bytes` gives: a copy opened with `SessionManager::open` (which sanitizes
/// in memory as a refresh does), and the lines a load skips.
fn reopened(dir: &Path, bytes: &[u8]) -> (Session, Vec<SkippedLine>) {
    let copy = dir.join("reopened.jsonl");
    fs::write(&copy, bytes).unwrap();
    let skipped = load_session(&copy).unwrap().skipped;
    let session = in_memory(&SessionManager::open(&copy, "/w", config(dir)).unwrap());
    fs::remove_file(&copy).unwrap();
    (session, skipped)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// After any sequence of outside appends (cut anywhere, even inside a line or a CRLF),
    /// own appends and refreshes, a refresh leaves memory equal to reopening the file's
    /// complete lines, or, when a write of the manager landed behind bytes it had not read,
    /// or a torn line it read was continued, asks for a reload.
    #[test]
    fn refreshes_after_random_appends_equal_a_reopen(steps in prop::collection::vec(step(), 1..24)) {
        let dir = tempfile::tempdir().unwrap();
        let path = session_file(dir.path(), 10);
        let open = || SessionManager::open(&path, "/w", config(dir.path())).unwrap();
        let mut m = open();
        // The file as the manager last opened it: while it stays so, memory is its whole
        // content, a torn last line included (a load keeps a last line that parses).
        let mut opened_as = fs::read(&path).unwrap();
        let mut pending: Vec<u8> = Vec::new();
        let mut written = 0;
        for step in &steps {
            match step {
                Step::Outside(pieces, cut) => {
                    for piece in pieces {
                        written += 1;
                        pending.extend(piece_line(piece, written).into_bytes());
                        pending.push(b'\n');
                    }
                    let n = cut.index(pending.len() + 1);
                    append(&path, &pending[..n]);
                    pending.drain(..n);
                }
                Step::Own => {
                    m.append_custom_entry("own", None).unwrap();
                }
                Step::Refresh => {
                    let bytes = fs::read(&path).unwrap();
                    let read = if bytes == opened_as { &bytes[..] } else { complete_lines(&bytes) };
                    let (expected, skipped) = reopened(dir.path(), read);
                    let (memory, expected) = match m.refresh_from_file().unwrap() {
                        Refresh::NeedsReload(reason) => {
                            prop_assert!(
                                matches!(reason, ReloadReason::Untracked | ReloadReason::TornLineContinued),
                                "{:?}", reason
                            );
                            let (whole, _) = reopened(dir.path(), &bytes);
                            m = open();
                            opened_as = bytes;
                            (in_memory(&m), whole)
                        }
                        Refresh::Appended { skipped: new, .. } => {
                            prop_assert!(new.iter().all(|s| skipped.contains(s)));
                            (in_memory(&m), expected)
                        }
                        Refresh::Unchanged => (in_memory(&m), expected),
                    };
                    prop_assert!(memory == expected, "memory differs from a reopen after {:?}", steps);
                }
            }
        }
    }
}
