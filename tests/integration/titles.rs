//! One title per session on every surface. `gjcfs ls`, `gjcfs export --all` (its
//! `index.html` and each session's page) and the mount (its `index.html`, each session's
//! `context.html` and the names in `recent/` and `by-date/`) all show a session under the
//! title of the one rule (`store::discovery::shown_title`, `views::title_line`): its
//! header's title, else its first prompt — the first line of it, on one line.
//!
//! The reference is what `gjcfs ls --all --json` lists (`title`, else `firstMessage`) put
//! through that rule, whole; for the generated store it is also the title each session was
//! written to have. A surface may cut a title at its own length ([`agrees`]) but shows
//! nothing else: never `(untitled)`, nothing, another prompt, nor more than the first line.
//! Every command runs with a cache of its own, so that no surface shows what another one
//! completed and saved.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use gjcfs::engine::json;
use gjcfs::engine::store::discovery::NO_MESSAGES;
use gjcfs::engine::views::title_line;

use crate::common::mount::{p, Mount};
use crate::common::pages::string;

/// How many characters of a title a page's `<title>` and `<h1>`, and a row of an index,
/// show (`views::transcript::TITLE_CHARS`, `views::store_index`).
const PAGE_CHARS: usize = 100;
/// How many a row of `gjcfs ls` shows (`TITLE_WIDTH` of `src/cli/ls.rs`).
const TABLE_CHARS: usize = 60;
/// How many a name in `recent/` and `by-date/` keeps (`crates/vfs/src/navigation.rs`).
const NAME_CHARS: usize = 60;
/// How many sessions `recent/` names.
const RECENT: usize = 100;
/// How many sessions the generated store holds.
const GENERATED: usize = 2_000;
/// Every how many sessions of the generated store the mount's `context.html` is read.
const PAGE_SAMPLE: usize = 20;

/// A session as `gjcfs ls --all --json` lists it.
struct Listed {
    id: String,
    /// Its title by the one rule, whole, on one line.
    title: String,
    /// The header's ISO timestamp.
    created: String,
    /// The file's modification time, ISO.
    modified: String,
}

/// The standard output of `gjcfs ARGS…`, which must succeed, run with a cache directory of
/// its own (under `work`), so that it reads nothing another command saved.
fn gjcfs_alone(work: &Path, args: &[&str]) -> String {
    let cache = tempfile::tempdir_in(work).unwrap();
    crate::common::stdout_of(
        Command::new(crate::common::gjcfs_bin())
            .args(args)
            .env("XDG_CACHE_HOME", cache.path()),
    )
}

/// The sessions of the store at `agent` as `gjcfs ls --all --json` lists them, newest
/// first; every one has a title, and an id whose first 8 characters are its own.
fn listing(work: &Path, agent: &str) -> Vec<Listed> {
    let out = gjcfs_alone(work, &["ls", "--all", "--json", "--agent-dir", agent]);
    let listed: Vec<Listed> = out
        .lines()
        .map(|line| {
            let value = json::parse(line).unwrap();
            let o = value.as_object().unwrap();
            let member = |key: &str| o.get_str(key).unwrap_or_else(|| panic!("{key}: {line}"));
            let prompt = o.get_str("firstMessage").filter(|m| *m != NO_MESSAGES);
            Listed {
                id: member("id").to_owned(),
                title: title_line(o.get_str("title"), prompt, usize::MAX),
                created: member("created").to_owned(),
                modified: member("modified").to_owned(),
            }
        })
        .collect();
    for s in &listed {
        assert!(!s.title.is_empty(), "gjcfs ls: {} has no title", s.id);
    }
    let shorts: BTreeSet<String> = listed.iter().map(|s| short(&s.id)).collect();
    assert_eq!(
        shorts.len(),
        listed.len(),
        "the ids' first 8 characters repeat"
    );
    listed
}

/// The first 8 characters of an id, which a name in `recent/` and `by-date/` ends with.
fn short(id: &str) -> String {
    id.chars().take(8).collect()
}

/// Whether `shown` is the title `full` as a surface that keeps `max` characters of a
/// title shows it: the whole of it where it fits, else its first `max` characters — one
/// fewer where the cut falls on a space, which is dropped — and `…`. Never empty, never
/// `(untitled)`.
fn agrees(full: &str, shown: &str, max: usize) -> bool {
    if full.is_empty() || shown.is_empty() || shown.starts_with("(untitled)") {
        return false;
    }
    if full.chars().count() <= max {
        return shown == full;
    }
    let Some(kept) = shown.strip_suffix('…') else {
        return false;
    };
    let n = kept.chars().count();
    full.starts_with(kept) && (n == max || n + 1 == max && full[kept.len()..].starts_with(' '))
}

/// Fails unless `surface` shows session `id`, whose title is `full`, as `shown`
/// ([`agrees`]).
fn check(surface: &str, id: &str, full: &str, shown: &str, max: usize) {
    assert!(
        agrees(full, shown, max),
        "{surface} shows session {id} as {shown:?}, not as {full:?} (cut at {max} characters)"
    );
}

/// Text of an HTML page as it reads: the page's five escapes undone.
fn unescape(html: &str) -> String {
    html.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// The text of the first `<tag>` element of `page`, unescaped.
fn element(page: &str, tag: &str) -> String {
    let open = format!("<{tag}>");
    let start = page.find(&open).unwrap_or_else(|| panic!("no {open}")) + open.len();
    let end = start + page[start..].find(&format!("</{tag}>")).unwrap();
    unescape(&page[start..end])
}

/// Fails unless the page of session `s` (its `<title>` and its `<h1>`) shows its title.
fn check_page(surface: &str, page: &str, s: &Listed) {
    for tag in ["title", "h1"] {
        let shown = element(page, tag);
        check(
            &format!("{surface} <{tag}>"),
            &s.id,
            &s.title,
            &shown,
            PAGE_CHARS,
        );
    }
}

/// Fails unless the index `page` has two rows for every session of `listed` (one by
/// project, one by day) and no others, each linking to `href(id)` under its title.
fn check_index(surface: &str, page: &str, listed: &[Listed], href: impl Fn(&str) -> String) {
    let mut rows: HashMap<String, Vec<String>> = HashMap::new();
    for row in page.split("<tr><td><a href=\"").skip(1) {
        let (link, rest) = row.split_once("\">").unwrap();
        let text = rest.split("</a>").next().unwrap();
        rows.entry(unescape(link)).or_default().push(unescape(text));
    }
    assert_eq!(rows.len(), listed.len(), "{surface}: sessions linked");
    for s in listed {
        let link = href(&s.id);
        let texts = rows
            .get(&link)
            .unwrap_or_else(|| panic!("{surface}: no row links to {link}"));
        assert_eq!(texts.len(), 2, "{surface}: the rows of {}", s.id);
        for text in texts {
            check(surface, &s.id, &s.title, text, PAGE_CHARS);
        }
    }
}

/// Fails unless `gjcfs ls --all` shows every session of `listed` under its title: the last
/// cell of its row (after two spaces; a title on one line holds no two in a row).
fn check_table(work: &Path, agent: &str, listed: &[Listed]) {
    let table = gjcfs_alone(work, &["ls", "--all", "--agent-dir", agent]);
    let rows: HashMap<&str, &str> = table
        .lines()
        .skip(1)
        .map(|row| (row.split(' ').next().unwrap(), row))
        .collect();
    assert_eq!(rows.len(), listed.len(), "{table}");
    for s in listed {
        let row = rows[s.id.as_str()];
        let shown = row.rsplit("  ").next().unwrap();
        check("gjcfs ls", &s.id, &s.title, shown, TABLE_CHARS);
    }
}

/// Fails unless `gjcfs export --all` shows every session of `listed` under its title: in
/// the rows of its `index.html` and on the session's own page.
fn check_export(work: &Path, agent: &str, listed: &[Listed]) {
    let out = work.join("export");
    gjcfs_alone(
        work,
        &["export", "--all", "--out", p(&out), "--agent-dir", agent],
    );
    let index = fs::read_to_string(out.join("index.html")).unwrap();
    check_index("export's index.html", &index, listed, |id| {
        format!("{id}.html")
    });
    for s in listed {
        let page = fs::read_to_string(out.join(format!("{}.html", s.id))).unwrap();
        check_page("export's page", &page, s);
    }
}

/// The command line's surfaces: `gjcfs ls --all`'s table and `gjcfs export --all`.
fn check_cli(work: &Path, agent: &str, listed: &[Listed]) {
    check_table(work, agent, listed);
    check_export(work, agent, listed);
}

/// A title as a name in `recent/` and `by-date/` holds it, before the cut: `/` and control
/// characters made spaces and runs of blanks one space. This is `slug` of
/// `crates/vfs/src/navigation.rs`, which is private, on a title already on one line.
fn name_title(title: &str) -> String {
    let cleaned: String = title
        .chars()
        .map(|c| if c == '/' || c.is_control() { ' ' } else { c })
        .collect();
    cleaned.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A name `<prefix> <title> (<id8>)` (or `<prefix> (<id8>)`): its prefix, title and id8.
fn name_parts(name: &str) -> (&str, &str, &str) {
    let (head, id8) = name
        .strip_suffix(')')
        .and_then(|n| n.rsplit_once(" ("))
        .unwrap_or_else(|| panic!("not a name: {name:?}"));
    let (prefix, title) = head.split_once(' ').unwrap_or((head, ""));
    (prefix, title, id8)
}

/// The names in the directory `dir`.
fn names(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

/// Fails unless `recent/` names the newest [`RECENT`] sessions, ranked newest first
/// (`001`), each under its title.
fn check_recent(root: &Path, listed: &[Listed]) {
    let by_short: HashMap<String, &Listed> = listed.iter().map(|s| (short(&s.id), s)).collect();
    let mut ranked: BTreeMap<usize, &Listed> = BTreeMap::new();
    for name in names(&root.join("recent")) {
        let (rank, title, id8) = name_parts(&name);
        let s = by_short
            .get(id8)
            .unwrap_or_else(|| panic!("recent/{name}: no such session"));
        check("recent/", &s.id, &name_title(&s.title), title, NAME_CHARS);
        assert!(ranked.insert(rank.parse().unwrap(), s).is_none(), "{name}");
    }
    let count = listed.len().min(RECENT);
    let ranks: Vec<usize> = ranked.keys().copied().collect();
    assert_eq!(ranks, (1..=count).collect::<Vec<_>>(), "recent/'s ranks");
    let shown: Vec<&&Listed> = ranked.values().collect();
    for pair in shown.windows(2) {
        assert!(
            pair[0].modified >= pair[1].modified,
            "recent/ is newest first"
        );
    }
    let ids: BTreeSet<&str> = shown.iter().map(|s| s.id.as_str()).collect();
    let oldest_shown = shown
        .last()
        .map(|s| s.modified.as_str())
        .unwrap_or_default();
    for s in listed.iter().filter(|s| !ids.contains(s.id.as_str())) {
        assert!(
            s.modified.as_str() <= oldest_shown,
            "{} is not in recent/",
            s.id
        );
    }
}

/// Fails unless `by-date/` names every session once, in the directory of the day it was
/// started and by the time (`HH-MM`, as the header's timestamp has it), under its title.
fn check_by_date(root: &Path, listed: &[Listed]) {
    let by_short: HashMap<String, &Listed> = listed.iter().map(|s| (short(&s.id), s)).collect();
    let mut seen = BTreeSet::new();
    for day in names(&root.join("by-date")) {
        for name in names(&root.join("by-date").join(&day)) {
            let (time, title, id8) = name_parts(&name);
            let s = by_short
                .get(id8)
                .unwrap_or_else(|| panic!("by-date/{day}/{name}: no such session"));
            assert_eq!(day, s.created[..10], "by-date/{day}/{name}");
            assert_eq!(time, s.created[11..16].replace(':', "-"), "{name}");
            check("by-date/", &s.id, &name_title(&s.title), title, NAME_CHARS);
            assert!(seen.insert(s.id.as_str()), "by-date/ names {} twice", s.id);
        }
    }
    assert_eq!(seen.len(), listed.len(), "by-date/ names every session");
}

/// Mounts the store at `agent` read-only and fails unless it shows every session of
/// `listed` under its title: in the rows of its `index.html`, on every `pages_every`-th
/// session's `context.html`, and in the names of `recent/` and `by-date/`.
fn check_mount(agent: &str, listed: &[Listed], pages_every: usize) {
    let mount = Mount::start(&["--agent-dir", agent, "--read-only"]);
    let root = mount.path();
    let index = fs::read_to_string(root.join("index.html")).unwrap();
    check_index("the mount's index.html", &index, listed, |id| {
        format!("sessions/{id}/context.html")
    });
    for s in listed.iter().step_by(pages_every) {
        let page = fs::read_to_string(mount.session_dir(&s.id).join("context.html")).unwrap();
        check_page("the mount's context.html", &page, s);
    }
    check_recent(root, listed);
    check_by_date(root, listed);
}

/// Where a session of the generated store takes its title from, and the title it is shown
/// under.
struct Titled {
    /// The header's title.
    title: Option<String>,
    /// The first prompt's `content`, as JSON.
    content: String,
    /// Whether a long entry before the first prompt puts it past the first 4 KiB.
    late: bool,
    /// The title a header patch gives the session after its first reply.
    renamed: Option<String>,
    /// The title every surface shows, whole.
    shown: String,
}

/// How session `n` of the generated store is titled: one of ten kinds. (None has a
/// compaction: the `shortSummary` of one in a file's first 4 KiB titles a session without a
/// title of its own in every listing — `SessionInfo::title` — but not on its pages, which
/// show its first prompt; a disagreement left to be decided, not checked here.)
fn titled(n: usize) -> Titled {
    let prompt = |text: &str, shown: &str| Titled {
        title: None,
        content: string(text),
        late: false,
        renamed: None,
        shown: shown.to_owned(),
    };
    match n % 10 {
        // The header's title, with markup and slashes; the prompt is not the title.
        0 => {
            let title = format!("Session {n}: <b>bold</b> & a/b/c.rs");
            Titled {
                title: Some(title.clone()),
                ..prompt(&format!("a prompt {n}, not the title"), &title)
            }
        }
        1 => {
            let text = format!("rename a/b/{n}.rs & check <T> where x < y && y > z");
            prompt(&text, &text)
        }
        // Several lines: the first one.
        2 => prompt(
            &format!("first line {n} of a prompt\nsecond line\n\n  third line"),
            &format!("first line {n} of a prompt"),
        ),
        // Colours and a terminal title set, tabs and runs of spaces.
        3 => prompt(
            &format!("\u{1b}[1;31mred {n}\u{1b}[0m and \u{1b}]0;a window\u{7}plain   text\tend"),
            &format!("red {n} and plain text end"),
        ),
        // Longer than any surface shows, in characters of several bytes.
        4 => {
            let text = format!("long {n} {}", "naïve 日本語 word/path ".repeat(12));
            prompt(&text, text.trim_end())
        }
        // A title of two lines: the first one.
        5 => Titled {
            title: Some(format!("two-line title {n}\nits second line")),
            ..prompt(&format!("a prompt {n}"), &format!("two-line title {n}"))
        },
        // A blank title: the prompt.
        6 => {
            let text = format!("a blank title {n} falls back to the prompt");
            Titled {
                title: Some("   ".to_owned()),
                ..prompt(&text, &text)
            }
        }
        // Text blocks around an image, joined by a space.
        7 => Titled {
            content: format!(
                r#"[{{"type":"text","text":"blocks {n} first"}},{{"type":"image","data":"aGVsbG8=","mimeType":"image/png"}},{{"type":"text","text":"second block"}}]"#
            ),
            ..prompt("", &format!("blocks {n} first second block"))
        },
        // The first prompt past the file's first 4 KiB, which holds no message.
        8 => {
            let text = format!("after a long start {n}: <why> & how?");
            Titled {
                late: true,
                ..prompt(&text, &text)
            }
        }
        // Renamed by a header patch after the first reply.
        _ => {
            let title = format!("renamed {n} <later> & a/b");
            Titled {
                renamed: Some(title.clone()),
                ..prompt(&format!("the original prompt {n}"), &title)
            }
        }
    }
}

/// Session `n` of the generated store: its id, header timestamp and file text, and the
/// title it is shown under. Sessions start 7 minutes apart from 2026-03-01 (ten days).
fn generated_session(n: usize) -> (String, String, String, String) {
    let id = format!("0195{n:04x}-7c3e-7000-8000-{n:012x}");
    let minutes = n * 7;
    let created = format!(
        "2026-03-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        1 + minutes / 1440,
        minutes % 1440 / 60,
        minutes % 60,
        n % 60,
        n % 1000
    );
    let t = titled(n);
    let title = t
        .title
        .as_deref()
        .map_or(String::new(), |t| format!(",\"title\":{}", string(t)));
    let mut lines = vec![format!(
        r#"{{"type":"session","version":5,"id":"{id}","timestamp":"{created}","cwd":"/w{}"{title}}}"#,
        n % 4
    )];
    // Members in the order the agent writes them: `type` first.
    let entry = |ty: &str, id: &str, parent: Option<&str>, rest: &str| {
        let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
        format!(
            r#"{{"type":"{ty}","id":"{id}","parentId":{parent},"timestamp":"{created}",{rest}}}"#
        )
    };
    let mut parent = None;
    if t.late {
        let note = "x".repeat(5_000);
        let rest = format!(r#""customType":"start","data":{{"note":"{note}"}}"#);
        lines.push(entry("custom", "c0", None, &rest));
        parent = Some("c0");
    }
    let message = |id: &str, parent: Option<&str>, role: &str, content: &str| {
        let rest = format!(
            r#""message":{{"role":"{role}","content":{content},"provider":"p","model":"m","timestamp":1}}"#
        );
        entry("message", id, parent, &rest)
    };
    lines.push(message("u1", parent, "user", &t.content));
    let reply = r#"[{"type":"text","text":"done"}]"#;
    lines.push(message("a1", Some("u1"), "assistant", reply));
    if let Some(renamed) = &t.renamed {
        let patch = format!(r#"{{"title":{}}}"#, string(renamed));
        lines.push(format!(r#"{{"type":"header_patch","patch":{patch}}}"#));
    }
    let later = string(&format!("a later prompt {n}, never the title"));
    lines.push(message("u2", Some("a1"), "user", &later));
    let mut text = lines.join("\n");
    text.push('\n');
    (id, created, text, t.shown)
}

/// Writes [`GENERATED`] sessions of a few entries each into the agent directory `agent`,
/// in four project directories, each file modified a second after the one before; the
/// title each is shown under, by id.
fn generated_store(agent: &Path) -> HashMap<String, String> {
    let mut shown = HashMap::new();
    for n in 0..GENERATED {
        let (id, created, text, title) = generated_session(n);
        let dir = agent.join(format!("sessions/--w{}--", n % 4));
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join(format!("{}_{id}.jsonl", created.replace([':', '.'], "-")));
        fs::write(&file, text).unwrap();
        crate::common::set_mtime(&file, n as u64);
        shown.insert(id, title);
    }
    shown
}

/// The generated store in a new temporary directory, its agent directory, and its listing,
/// which shows every session under the title it was written to have.
fn generated() -> (tempfile::TempDir, PathBuf, Vec<Listed>) {
    let tmp = tempfile::tempdir().unwrap();
    let agent = tmp.path().join("agent");
    let shown = generated_store(&agent);
    let listed = listing(tmp.path(), p(&agent));
    assert_eq!(listed.len(), GENERATED);
    for s in &listed {
        assert_eq!(s.title, shown[&s.id], "gjcfs ls --json: session {}", s.id);
    }
    (tmp, agent, listed)
}

/// The demo agent directory of `scripts/make-demo-agent.sh`, built in a new temporary
/// directory (`demo_agent::make_demo_agent`, with a cache directory of its own), and its
/// listing.
fn demo() -> (tempfile::TempDir, PathBuf, Vec<Listed>) {
    let tmp = tempfile::tempdir().unwrap();
    let agent = crate::demo_agent::make_demo_agent(&tmp.path().join("demo")).join("agent");
    let listed = listing(tmp.path(), p(&agent));
    assert_eq!(listed.len(), 7);
    (tmp, agent, listed)
}

/// The mixed store of the page tests (hostile text, a branched session, a generated one and
/// the two real transcripts) and its listing.
fn mixed() -> (tempfile::TempDir, PathBuf, Vec<Listed>) {
    let (tmp, agent) = crate::common::pages::mixed_store();
    let listed = listing(tmp.path(), &agent);
    assert!(listed.len() >= 5, "{}", listed.len());
    (tmp, PathBuf::from(agent), listed)
}

#[test]
fn the_comparison_refuses_what_is_not_the_title() {
    let long: Vec<String> = (0..30).map(|i| format!("w{i:02}")).collect();
    let long = long.join(" ");
    let long = long.as_str();
    assert!(agrees("fix it", "fix it", 60));
    assert!(agrees(long, &format!("{}…", &long[..60]), 60));
    // The cut falls on a space, which is dropped.
    assert!(agrees(long, &format!("{}…", &long[..59]), 60));
    let refused: Vec<(&str, String)> = vec![
        ("fix it", "(untitled) 0195abcd".into()),
        ("fix it", "(untitled)".into()),
        ("fix it", "".into()),
        ("", "".into()),
        ("fix it", "fix it too".into()),
        ("fix it", "fix".into()),
        ("fix it", "fix…".into()),
        ("fix it", "another prompt".into()),
        ("first line", "first line second line".into()),
        (long, long[..60].into()),
        (long, format!("{}…", &long[..40])),
        (long, format!("{}…", &long[4..64])),
    ];
    for (full, shown) in refused {
        assert!(
            !agrees(full, &shown, 60),
            "{full:?} is not shown as {shown:?}"
        );
    }
    assert_eq!(
        name_parts("001 a (b) title (0195abcd)"),
        ("001", "a (b) title", "0195abcd")
    );
    assert_eq!(name_parts("09-41 (0195abcd)"), ("09-41", "", "0195abcd"));
    assert_eq!(name_title("a/b  c\td"), "a b c d");
}

#[test]
fn ls_and_export_show_the_demo_agents_titles() {
    let (tmp, agent, listed) = demo();
    check_cli(tmp.path(), p(&agent), &listed);
}

#[test]
fn the_mount_shows_the_demo_agents_titles() {
    require_fuse!();
    let (_tmp, agent, listed) = demo();
    check_mount(p(&agent), &listed, 1);
}

#[test]
fn ls_and_export_show_the_mixed_stores_titles() {
    let (tmp, agent, listed) = mixed();
    check_cli(tmp.path(), p(&agent), &listed);
}

#[test]
fn the_mount_shows_the_mixed_stores_titles() {
    require_fuse!();
    let (_tmp, agent, listed) = mixed();
    check_mount(p(&agent), &listed, 1);
}

#[test]
fn ls_and_export_show_the_titles_of_2000_generated_sessions() {
    let (tmp, agent, listed) = generated();
    check_cli(tmp.path(), p(&agent), &listed);
}

#[test]
fn the_mount_shows_the_titles_of_2000_generated_sessions() {
    require_fuse!();
    let (_tmp, agent, listed) = generated();
    check_mount(p(&agent), &listed, PAGE_SAMPLE);
}
