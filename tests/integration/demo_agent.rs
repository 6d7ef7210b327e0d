//! `scripts/make-demo-agent.sh` builds a demo agent directory with gjcfs's own tools.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use gjcfs::engine::json;

fn gjcfs(args: &[&str]) -> String {
    crate::common::gjcfs_stdout(args)
}

fn jsonl_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    files
}

fn header_cwd(file: &Path) -> String {
    let text = fs::read_to_string(file).unwrap();
    let header = json::parse(text.lines().next().unwrap()).unwrap();
    header
        .as_object()
        .unwrap()
        .get_str("cwd")
        .unwrap()
        .to_owned()
}

/// Builds the demo agent directory at `dir` with scripts/make-demo-agent.sh and the
/// tested binary; `dir`, canonical. The script lists what it built, which saves the
/// listing in a cache directory: `<dir>.cache`, beside it, not the user's.
pub fn make_demo_agent(dir: &Path) -> PathBuf {
    let out = Command::new("bash")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scripts/make-demo-agent.sh"
        ))
        .arg(dir)
        .env("GJCFS", env!("CARGO_BIN_EXE_gjcfs"))
        .env("XDG_CACHE_HOME", dir.with_extension("cache"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    fs::canonicalize(dir).unwrap()
}

#[test]
fn the_demo_agent_holds_a_scope_an_image_blob_a_legacy_transcript_and_a_history() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = make_demo_agent(&tmp.path().join("demo"));
    let ws = dir.join("workspace");
    let agent = dir.join("agent");
    let ws_text = ws.to_str().unwrap();
    let agent_text = agent.to_str().unwrap();

    // The managed scopes: four sessions of the workspace, bound to it, and the two real
    // transcripts in the scope of their own workspace.
    let scopes: Vec<PathBuf> = fs::read_dir(agent.join("sessions"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("v2-"))
        .collect();
    assert_eq!(scopes.len(), 2);
    let real_ws = dir.join("pi-mono");
    let (real_scope, scope): (Vec<&PathBuf>, Vec<&PathBuf>) = scopes.iter().partition(|s| {
        jsonl_in(s)
            .iter()
            .any(|f| header_cwd(f) == real_ws.to_str().unwrap())
    });
    let (real_scope, scope) = (real_scope[0], scope[0]);
    let real = jsonl_in(real_scope);
    assert_eq!(real.len(), 2, "{real:?}");
    for (file, fixture) in real.iter().zip(["large-session", "before-compaction"]) {
        let recorded = fs::read_to_string(format!(
            "{}/tests/fixtures/real/{fixture}.jsonl",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        let copied = fs::read_to_string(file).unwrap();
        // The same conversation; only the header names the demo's workspace.
        assert_eq!(
            copied.lines().skip(1).collect::<Vec<_>>(),
            recorded.lines().skip(1).collect::<Vec<_>>()
        );
    }
    assert!(scope.join(".gjc-managed-session-scope.v2.json").is_file());
    let managed = jsonl_in(scope);
    assert_eq!(managed.len(), 4);
    for file in &managed {
        assert_eq!(header_cwd(file), ws_text);
    }
    let main = managed
        .iter()
        .find(|p| p.to_str().unwrap().ends_with("_main.jsonl"))
        .unwrap();
    let text = fs::read_to_string(main).unwrap();
    for kind in [r#""type":"compaction""#, r#""type":"label""#] {
        assert!(text.contains(kind), "the main session has no {kind}");
    }
    // A branch: two entries with the same parent.
    let mut parents = std::collections::HashSet::new();
    let branched = text.lines().skip(1).any(|line| {
        let entry = json::parse(line).unwrap();
        let parent = entry
            .as_object()
            .unwrap()
            .get_str("parentId")
            .map(str::to_owned);
        parent.is_some() && !parents.insert(parent)
    });
    assert!(branched, "the main session has no branch");

    // The image went to the blob store; the transcript references it.
    let blobs: Vec<String> = fs::read_dir(agent.join("blobs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(blobs.len(), 1);
    // A real picture: the demo's chart, a PNG.
    let chart = fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/demo/chart.png")).unwrap();
    assert!(chart.starts_with(b"\x89PNG\r\n\x1a\n"));
    assert_eq!(
        fs::read(agent.join("blobs").join(&blobs[0])).unwrap(),
        chart
    );
    let image = managed
        .iter()
        .find(|p| p.to_str().unwrap().ends_with("_image.jsonl"))
        .unwrap();
    assert!(fs::read_to_string(image)
        .unwrap()
        .contains(&format!("blob:sha256:{}", blobs[0])));

    // The legacy directory and its v1 transcript.
    let legacy_name = format!("--{}--", ws_text.trim_start_matches('/').replace('/', "-"));
    let legacy = jsonl_in(&agent.join("sessions").join(legacy_name));
    assert_eq!(legacy.len(), 1);
    assert_eq!(header_cwd(&legacy[0]), ws_text);
    // v1: no ids, no parent links.
    let v1 = fs::read_to_string(&legacy[0]).unwrap();
    assert!(v1.lines().count() > 10);
    assert!(!v1.contains(r#""parentId""#));

    // Every session lists, the legacy one included.
    let listed = gjcfs(&["ls", "--all", "--agent-dir", agent_text, "--json"]);
    assert_eq!(listed.lines().count(), 7, "{listed}");
    assert_eq!(
        listed.lines().filter(|l| l.contains(ws_text)).count(),
        5,
        "{listed}"
    );
    let listed_here = gjcfs(&["ls", "--cwd", ws_text, "--agent-dir", agent_text, "--json"]);
    assert_eq!(listed_here.lines().count(), 5, "{listed_here}");

    let history = gjcfs(&["history", "--cwd", ws_text, "--agent-dir", agent_text]);
    assert_eq!(history.lines().count(), 3, "{history}");
}
