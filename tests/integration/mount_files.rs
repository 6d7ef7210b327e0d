//! `files/` through a real mount of the two real transcripts (their `read`, `edit` and
//! `write` calls under `/Users/badlogic/workspaces/pi-mono/…`), looked at with `ls`,
//! `cat`, `readlink` and `find`, and compared with what `gjcfs files --json` says of the
//! same store: the directories are the components of the touched paths, each link leads to
//! the entry file of the touching entry, `touches.jsonl` is the command's output, and a
//! name no touched path has is not there.

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::mount::{ok, p, run, within, Mount};
use crate::common::{fixture, gjcfs_stdout, SessionText};
use gjcfs::engine::json::{self, Object};

/// The directory the test looks at most.
const SRC: &str = "/Users/badlogic/workspaces/pi-mono/packages/coding-agent/src";
/// How many links a directory shows, and `touches.jsonl`'s lines at most (the mount's).
const LINKS: usize = 100;
const TOUCHES: usize = 10_000;

/// A store holding the two real transcripts, and the directory of an index of its own
/// for `gjcfs files`.
struct Store {
    dir: tempfile::TempDir,
}

impl Store {
    fn new() -> Store {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("sessions")).unwrap();
        for name in ["before-compaction.jsonl", "large-session.jsonl"] {
            let to = dir.path().join("sessions").join(name);
            fs::copy(fixture(&format!("real/{name}")), to).unwrap();
        }
        Store { dir }
    }

    fn sessions(&self) -> PathBuf {
        self.dir.path().join("sessions")
    }

    /// The output of `gjcfs files PATH --all --json --limit LIMIT` on the store.
    fn files_json(&self, path: &str, limit: usize) -> String {
        let (sessions, index) = (self.sessions(), self.dir.path().join("index"));
        let limit = limit.to_string();
        gjcfs_stdout(&[
            "files",
            path,
            "--all",
            "--json",
            "--limit",
            &limit,
            "--session-dir",
            p(&sessions),
            "--index",
            p(&index),
        ])
    }

    /// `gjcfs files PATH`'s touches, newest first, every one of them.
    fn touches(&self, path: &str) -> Vec<Object> {
        self.files_json(path, TOUCHES)
            .lines()
            .map(|l| json::parse(l).unwrap().as_object().unwrap().clone())
            .collect()
    }
}

fn field<'a>(touch: &'a Object, key: &str) -> &'a str {
    touch.get_str(key).unwrap()
}

/// `files/<path>` in the mount (`path` absolute).
fn in_files(mount: &Mount, path: &str) -> PathBuf {
    mount
        .path()
        .join("files")
        .join(path.trim_start_matches('/'))
}

fn lines(text: &str) -> Vec<String> {
    text.lines().map(str::to_owned).collect()
}

/// The names `ls -a` lists in `dir`, without `.` and `..`, in byte order.
fn ls(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = lines(&ok("ls", &["-a", p(dir)]))
        .into_iter()
        .filter(|n| n != "." && n != "..")
        .collect();
    names.sort();
    names
}

/// The links a directory of `path`'s touches shows: `NNN-<session>-<entry>`, newest first.
fn expected_links(touches: &[Object]) -> Vec<String> {
    touches
        .iter()
        .take(LINKS)
        .enumerate()
        .map(|(at, t)| {
            format!(
                "{:03}-{}-{}",
                at + 1,
                field(t, "session"),
                field(t, "entry")
            )
        })
        .collect()
}

/// The next component of each touched path under `dir`.
fn next_components(touches: &[Object], dir: &str) -> BTreeSet<String> {
    let prefix = format!("{dir}/");
    touches
        .iter()
        .filter_map(|t| field(t, "resolved").strip_prefix(&prefix))
        .map(|rest| rest.split('/').next().unwrap().to_owned())
        .collect()
}

#[test]
fn files_shows_the_touched_paths_of_the_real_transcripts_as_gjcfs_files_answers() {
    require_fuse!();
    let store = Store::new();
    let mount = Mount::start(&["--session-dir", p(&store.sessions())]);
    let src = in_files(&mount, SRC);
    let touches = store.touches(SRC);
    assert!(touches.len() > LINKS, "{} touches", touches.len());

    // The next components, the newest links and `touches.jsonl`.
    let components = next_components(&touches, SRC);
    for name in ["core", "modes", "tui", "theme", "main.ts"] {
        assert!(components.contains(name), "{name} in {components:?}");
    }
    let links = expected_links(&touches);
    let mut expected: Vec<String> = components.iter().cloned().collect();
    expected.extend(links.iter().cloned());
    expected.push("touches.jsonl".into());
    expected.sort();
    assert_eq!(ls(&src), expected);
    let top = ls(&mount.path().join("files"));
    assert_eq!(top, ["Users", "~"]);

    // Each link leads to the touching entry's file, whose bytes `cat` reads through it.
    let paths: Vec<PathBuf> = links.iter().map(|l| src.join(l)).collect();
    let targets = lines(&ok(
        "readlink",
        &paths.iter().map(|l| p(l)).collect::<Vec<_>>(),
    ));
    let up = "../".repeat(SRC.split('/').count());
    for ((link, target), touch) in links.iter().zip(&targets).zip(&touches) {
        let (sid, entry) = (field(touch, "session"), field(touch, "entry"));
        assert_eq!(
            *target,
            format!("{up}sessions/{sid}/entries/{entry}.json"),
            "{link}"
        );
    }
    for (link, touch) in links.iter().zip(&touches).step_by(7) {
        let (sid, entry) = (field(touch, "session"), field(touch, "entry"));
        let through = ok("cat", &[p(&src.join(link))]);
        let entry_file = mount.session_dir(sid).join(format!("entries/{entry}.json"));
        assert_eq!(through, ok("cat", &[p(&entry_file)]), "{link}");
        assert!(
            through.contains(field(touch, "written")),
            "{link}: {through}"
        );
        let resolved = ok("readlink", &["-f", p(&src.join(link))]);
        assert_eq!(resolved.trim_end(), p(&entry_file), "{link}");
    }

    // `touches.jsonl` is the command's output, every touch of the path.
    let jsonl = ok("cat", &[p(&src.join("touches.jsonl"))]);
    assert_eq!(jsonl, store.files_json(SRC, TOUCHES));
    assert_eq!(jsonl.lines().count(), touches.len());
    // A file's own directory: its touches alone.
    let file = format!("{SRC}/core/agent-session.ts");
    let file_touches = store.touches(&file);
    assert_eq!(
        ls(&in_files(&mount, &file)),
        [expected_links(&file_touches), vec!["touches.jsonl".into()]].concat()
    );
    let jsonl = ok("cat", &[p(&in_files(&mount, &file).join("touches.jsonl"))]);
    assert_eq!(jsonl, store.files_json(&file, file_touches.len()));
    // Paths the agent wrote from its home directory are under `~`.
    let home = store.touches("~/.pi/agent/themes/nord.json");
    assert!(!home.is_empty());
    assert_eq!(
        ls(&mount.path().join("files/~/.pi/agent/themes/nord.json")),
        [expected_links(&home), vec!["touches.jsonl".into()]].concat()
    );

    // A name no touched path has is not there.
    for absent in [
        src.join("no-such-file.ts"),
        src.join("cor"),
        in_files(&mount, "/home"),
    ] {
        let out = run("ls", &[p(&absent)]);
        assert!(!out.status.success(), "{}", absent.display());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("No such file or directory"), "{err}");
    }
    let out = run("stat", &[p(&src.join("core/touches.jsonl/x"))]);
    assert!(!out.status.success());

    // `find` walks every directory: each prefix of a touched path under SRC.
    let mut dirs = BTreeSet::from([SRC.to_owned()]);
    for touch in &touches {
        let resolved = field(touch, "resolved");
        let rest = resolved.strip_prefix(&format!("{SRC}/")).unwrap();
        let mut at = SRC.to_owned();
        for part in rest.split('/') {
            at = format!("{at}/{part}");
            dirs.insert(at.clone());
        }
    }
    let found: BTreeSet<String> = lines(&ok("find", &[p(&src), "-type", "d"]))
        .into_iter()
        .map(|d| {
            let below = d.strip_prefix(p(&mount.path().join("files"))).unwrap();
            below.to_owned()
        })
        .collect();
    assert_eq!(found, dirs);
    let listed = lines(&ok(
        "find",
        &[p(&src), "-name", "touches.jsonl", "-type", "f"],
    ));
    assert_eq!(listed.len(), dirs.len());
    let broken = ok("find", &[p(&src), "-xtype", "l"]);
    assert_eq!(broken, "", "every link leads to an entry");
}

/// An assistant message `id` under `parent` at second `sec` of 2026-01-01 calling `tool`
/// on `path`.
fn call(id: &str, parent: Option<&str>, sec: u32, tool: &str, path: &str) -> String {
    let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
    format!(
        r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:{sec:02}.000Z","message":{{"role":"assistant","content":[{{"type":"toolCall","id":"c","name":"{tool}","arguments":{{"path":"{path}","content":"x"}}}}],"provider":"p","model":"m"}}}}"#
    )
}

/// Writes a session of `lines` (a v5 header of `sid` in `/work/proj` first) at `file`,
/// owner-only as the agent writes them.
fn write_session(file: &Path, sid: &str, lines: &[String]) {
    use std::os::unix::fs::PermissionsExt;
    let header = format!(
        r#"{{"type":"session","version":5,"id":"{sid}","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/work/proj"}}"#
    );
    let mut text = SessionText::with_header(&header);
    for line in lines {
        text = text.line(line);
    }
    fs::write(file, text.text()).unwrap();
    fs::set_permissions(file, fs::Permissions::from_mode(0o600)).unwrap();
}

#[test]
fn files_follows_the_touches_written_after_it_was_listed() {
    require_fuse!();
    let store = tempfile::tempdir().unwrap();
    let file = store.path().join("one.jsonl");
    let sid = "files-session";
    write_session(&file, sid, &[call("a1", None, 1, "read", "src/one.rs")]);
    let mount = Mount::start(&["--session-dir", p(store.path())]);
    let src = mount.path().join("files/work/proj/src");
    assert_eq!(
        ls(&src),
        [&format!("001-{sid}-a1"), "one.rs", "touches.jsonl"]
    );
    let shows = |dir: &Path, name: &str| {
        within(Duration::from_secs(5), || ls(dir).iter().any(|n| n == name))
    };

    // The agent appends outside the mount; then a write through the mount.
    let mut appended = fs::OpenOptions::new().append(true).open(&file).unwrap();
    writeln!(
        appended,
        "{}",
        call("a2", Some("a1"), 2, "edit", "src/two.rs")
    )
    .unwrap();
    drop(appended);
    assert!(shows(&src, "two.rs"), "{:?}", ls(&src));
    assert_eq!(
        ls(&src.join("two.rs")),
        [format!("001-{sid}-a2"), "touches.jsonl".into()]
    );
    let line = r#"{"role":"assistant","content":[{"type":"toolCall","id":"c","name":"write","arguments":{"path":"/work/proj/src/three.rs","content":"x"}}],"provider":"p","model":"m","timestamp":1}"#;
    let new = mount.session_dir(sid).join("entries/new");
    ok("sh", &["-c", &format!("echo '{line}' >> '{}'", p(&new))]);
    let leaf = ok("cat", &[p(&mount.session_dir(sid).join("leaf"))]);
    let leaf = leaf.trim();
    assert!(shows(&src, "three.rs"), "{:?}", ls(&src));
    let three = src.join("three.rs");
    let link = format!("001-{sid}-{leaf}");
    assert_eq!(ls(&three), [link.clone(), "touches.jsonl".into()]);
    assert_eq!(
        ok("readlink", &[p(&three.join(&link))]).trim_end(),
        format!("../../../../../sessions/{sid}/entries/{leaf}.json")
    );
    assert!(ok("cat", &[p(&three.join(&link))]).contains("/work/proj/src/three.rs"));

    // A session the agent starts: its paths show too.
    write_session(
        &store.path().join("two.jsonl"),
        "other-session",
        &[call("b1", None, 3, "read", "/work/other/x.rs")],
    );
    let work = mount.path().join("files/work");
    assert!(shows(&work, "other"), "{:?}", ls(&work));
}
