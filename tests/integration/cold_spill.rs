//! Cold-spilled content read back as the original engine reads it, checked against the
//! contexts the original recorded for the same files (`tests/fixtures/peer/`), through the
//! engine API, the views and the command line. The files are never changed by a read.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use crate::common::{fixture, fixture_text, gjcfs_bin};
use gjcfs::engine::format::blob::BlobStore;
use gjcfs::engine::format::cold_spill::{rehydrate_record, EVICTED_NOTICE};
use gjcfs::engine::json;
use gjcfs::engine::load_session;
use gjcfs::engine::storage::FileStorage;
use gjcfs::engine::views::{markdown, tree};

fn peer(name: &str) -> PathBuf {
    fixture(&format!("peer/{name}"))
}

fn blobs_at(dir: &Path) -> BlobStore {
    BlobStore::new(dir, Arc::new(FileStorage))
}

fn peer_blobs() -> BlobStore {
    blobs_at(&peer("blobs"))
}

/// What the original printed, as gjcfs writes the same value (compact, key order kept).
fn recorded(name: &str) -> String {
    json::to_compact(&json::parse(&fixture_text(&format!("peer/{name}"))).expect("JSON"))
}

/// gjcfs's context of a fixture at `leaf` (the current leaf when `None`), as the agent
/// builds it: sanitized, blobs resolved, cold spill rehydrated.
fn context(file: &Path, leaf: Option<&str>, blobs: &BlobStore) -> String {
    let mut loaded = load_session(file).expect("loads");
    loaded.session.sanitize_openai_replay();
    let session = &loaded.session;
    let ctx = match leaf {
        Some(id) => session.build_context_for(id),
        None => session.build_context(),
    };
    json::to_compact(&ctx.with_blobs_resolved(blobs).to_value())
}

#[test]
fn contexts_before_a_compaction_show_the_original_text() {
    for (name, leaf) in [
        ("coldspill", "2ef788f0"),
        ("coldspill-shapes", "6a1b1e3b"),
        ("cold-edge", "k1"),
    ] {
        let file = peer(&format!("{name}.jsonl"));
        let before = std::fs::read(&file).unwrap();
        let ours = context(&file, Some(leaf), &peer_blobs());
        assert_eq!(
            ours,
            recorded(&format!("{name}.context-{leaf}.json")),
            "{name} at {leaf}"
        );
        assert!(
            !ours.contains(EVICTED_NOTICE) || name == "cold-edge",
            "{name}"
        );
        assert_eq!(std::fs::read(&file).unwrap(), before, "{name} is unchanged");
    }
    // At the current leaf the evicted entries are behind the compaction.
    assert_eq!(
        context(&peer("coldspill.jsonl"), None, &peer_blobs()),
        recorded("coldspill.context.json")
    );
}

#[test]
fn without_the_blob_store_the_context_keeps_the_notices() {
    let session = load_session(&peer("coldspill.jsonl")).unwrap().session;
    let stored = json::to_compact(&session.build_context_for("2ef788f0").to_value());
    assert_eq!(stored.matches(EVICTED_NOTICE).count(), 5);
}

#[test]
fn a_corrupt_blob_gives_the_unavailable_text() {
    // The original fails the whole read here (BlobCorruptError); gjcfs shows what it shows
    // for a missing blob.
    let tmp = agent_dir();
    let store = tmp.path().join("blobs");
    let hash = gjcfs::engine::format::blob::sha256_hex(b"the real text");
    std::fs::write(store.join(&hash), b"tampered text").unwrap();
    let session = load_session(&peer("cold-edge.jsonl")).unwrap().session;
    let record = session.get_entry("m4").unwrap();
    let rehydrated = rehydrate_record(record, &blobs_at(&store));
    assert_eq!(
        json::to_compact(rehydrated.get("message").unwrap()),
        format!(
            "{{\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":\"[Cold-spill blob unavailable: blob:sha256:{hash}; original 13 chars unavailable]\"}}],\"timestamp\":4}}"
        )
    );
    // With the intact blob it is the text.
    let intact = rehydrate_record(record, &peer_blobs());
    assert!(json::to_compact(intact.get("message").unwrap()).contains("\"the real text\""));
}

#[test]
fn views_show_the_original_text_at_a_leaf_before_the_compaction() {
    let mut session = load_session(&peer("coldspill.jsonl")).unwrap().session;
    session.branch("2ef788f0").unwrap();
    let blobs = peer_blobs();
    let md =
        String::from_utf8(markdown::context_md_rehydrated(&session, "blobs/", &blobs)).unwrap();
    assert!(md.contains("Long question sentence 0. Long question sentence 1."));
    assert!(
        md.contains("\"content\": \"file line 0. file line 1."),
        "{md}"
    );
    assert!(!md.contains(EVICTED_NOTICE));
    let plain = String::from_utf8(markdown::context_md(&session, "blobs/")).unwrap();
    assert!(plain.contains(EVICTED_NOTICE));

    let tree = String::from_utf8(tree::tree_txt_rehydrated(&session, &blobs)).unwrap();
    let line = |text: &str, id: &str| {
        text.lines()
            .find(|l| l.starts_with(id))
            .unwrap_or_else(|| panic!("{id} in {text}"))
            .to_owned()
    };
    assert_eq!(
        line(&tree, "ee8b7ce6"),
        "ee8b7ce6 user: Long question sentence 0. Long question sentence 1. Long que…"
    );
    assert!(line(&tree, "387cfc02").contains("tool output line 0."));
    let plain = String::from_utf8(tree::tree_txt(&session)).unwrap();
    assert!(line(&plain, "ee8b7ce6").contains("[Compacted history content evicted"));
}

fn gjcfs(args: &[&str]) -> String {
    let out = Command::new(gjcfs_bin()).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// An agent directory holding the fixtures' blob store.
fn agent_dir() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("blobs");
    std::fs::create_dir(&store).unwrap();
    for entry in std::fs::read_dir(peer("blobs")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), store.join(entry.file_name())).unwrap();
    }
    tmp
}

#[test]
fn the_command_line_rehydrates_context_show_and_entries_on_request() {
    let agent = agent_dir();
    let agent = agent.path().to_str().unwrap();
    let file = peer("coldspill.jsonl");
    let file = file.to_str().unwrap();

    let ctx = gjcfs(&["context", file, "--leaf", "2ef788f0", "--agent-dir", agent]);
    assert_eq!(
        json::to_compact(&json::parse(&ctx).unwrap()),
        recorded("coldspill.context-2ef788f0.json")
    );
    let tree = gjcfs(&["show", file, "--format", "tree", "--agent-dir", agent]);
    assert!(
        tree.contains("ee8b7ce6 user: Long question sentence 0."),
        "{tree}"
    );

    // `entries` prints the records as stored, and rehydrated when asked to.
    let stored = gjcfs(&["entries", file]);
    assert_eq!(stored, fixture_text("peer/coldspill.jsonl"));
    let rehydrated = gjcfs(&["entries", file, "--rehydrate", "--agent-dir", agent]);
    assert_eq!(rehydrated.lines().count(), stored.lines().count());
    assert!(!rehydrated.contains(EVICTED_NOTICE));
    assert_eq!(
        rehydrated.matches("\"evictedContent\"").count(),
        stored.matches("\"evictedContent\"").count(),
        "the markers stay"
    );
    let first = json::parse(rehydrated.lines().nth(1).unwrap()).unwrap();
    let text = crate::common::at(&first, &["message", "content", "0", "text"]);
    assert!(text
        .as_str()
        .unwrap()
        .starts_with("Long question sentence 0."));
    assert_eq!(text.as_str().unwrap().chars().count(), 3249);
}

#[test]
fn the_context_is_what_the_agent_sends_after_its_replay_sanitizer() {
    let file = peer("openai-sanitizer.jsonl");
    let before = std::fs::read(&file).unwrap();
    let agent = agent_dir();
    let out = gjcfs(&[
        "context",
        file.to_str().unwrap(),
        "--agent-dir",
        agent.path().to_str().unwrap(),
    ]);
    assert_eq!(
        json::to_compact(&json::parse(&out).unwrap()),
        recorded("openai-sanitizer.context.json")
    );
    assert!(!out.contains("thinkingSignature") && !out.contains("providerPayload"));
    assert_eq!(std::fs::read(&file).unwrap(), before, "never written");
    // `entries` prints the records as stored.
    assert!(gjcfs(&["entries", file.to_str().unwrap()]).contains("\"providerPayload\""));
}

/// An agent directory holding the fixtures' blob store and the cold-spilled session.
fn agent_with_session() -> (tempfile::TempDir, PathBuf) {
    let agent = agent_dir();
    let dir = agent.path().join("sessions").join("--work--");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("coldspill.jsonl");
    std::fs::copy(peer("coldspill.jsonl"), &file).unwrap();
    (agent, file)
}

/// The entries `gjcfs search ARGS…` finds in the agent directory (none: exit status 1).
fn found(agent: &Path, args: &[&str]) -> Vec<String> {
    let index = agent.join("index");
    let out = Command::new(gjcfs_bin())
        .args(["search", "--all", "--json"])
        .args(args)
        .arg("--agent-dir")
        .arg(agent)
        .arg("--index")
        .arg(&index)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    if out.status.code() == Some(1) {
        assert_eq!(stdout, "", "nothing found, nothing printed");
        return Vec::new();
    }
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .map(|line| {
            let hit = json::parse(line).unwrap();
            hit.as_object()
                .unwrap()
                .get_str("entry")
                .unwrap()
                .to_owned()
        })
        .collect()
}

#[test]
fn search_finds_text_a_compaction_moved_to_the_blob_store() {
    let (agent, file) = agent_with_session();
    let before = std::fs::read_to_string(&file).unwrap();
    // The words live only in the blobs; the file holds the notice put in their place.
    assert!(!before.contains("question sentence") && !before.contains("tool output line"));
    assert!(before.contains(EVICTED_NOTICE));
    assert_eq!(
        found(agent.path(), &["\"question sentence 7\""]),
        ["ee8b7ce6"]
    );
    assert_eq!(
        found(agent.path(), &["--substring", "tool output line 3"]),
        ["387cfc02"]
    );
    // The entries are searched as they were written, not as the notice.
    assert_eq!(
        found(agent.path(), &["\"durable cold storage\""]),
        Vec::<String>::new()
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        before,
        "never written"
    );
}
