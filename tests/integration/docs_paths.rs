//! The documents that map the repository name only what is in it: every repository path
//! `docs/ARCHITECTURE.md` and `docs/PERFORMANCE.md` name exists, and every link of theirs
//! reaches its file and, for a `#section`, a heading of that file.
//!
//! A repository path is a code span that contains `/` or ends in a source or document
//! extension, written from the repository's root (`crates/vfs/src/fs.rs`). Other spans are
//! left alone: absolute paths of the system (`/proc/…`), paths in a mount written from its
//! mountpoint (`MP/sessions/…`), and spans with spaces or pattern characters (commands,
//! `<id>`, `*`). Fenced code blocks are not read.

use std::fs;
use std::path::Path;

/// The documents checked.
const DOCS: &[&str] = &["docs/ARCHITECTURE.md", "docs/PERFORMANCE.md"];

/// The endings of a span that names a file even without a `/`.
const EXTENSIONS: &[&str] = &[".rs", ".md", ".toml", ".sh", ".py"];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `text` without its fenced code blocks.
fn prose(text: &str) -> String {
    let mut fenced = false;
    let mut out = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The code spans of `prose` that name repository paths.
fn named_paths(prose: &str) -> Vec<&str> {
    prose
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| {
            let plain =
                !span.contains(|c: char| c.is_whitespace() || "<>*:=(){}[]|$@,'\"".contains(c));
            let pathlike = span.contains('/') || EXTENSIONS.iter().any(|ext| span.ends_with(ext));
            plain && pathlike && !span.starts_with(['/', '~']) && !span.starts_with("MP/")
        })
        .collect()
}

/// The targets of the links of `prose` (`[text](target)`) that are not web addresses.
fn link_targets(prose: &str) -> Vec<&str> {
    prose
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split_once(')').map(|(target, _)| target))
        .filter(|target| !target.contains("://") && !target.starts_with("mailto:"))
        .collect()
}

/// The anchor GitHub gives a heading: lower case, spaces as `-`, and of the rest only
/// letters, digits, `-` and `_`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of the headings of `prose`, a repeated one numbered as GitHub numbers it.
fn anchors(prose: &str) -> Vec<String> {
    let mut bases: Vec<String> = Vec::new();
    let mut found = Vec::new();
    for line in prose.lines().filter(|line| line.starts_with('#')) {
        let base = anchor(line.trim_start_matches('#'));
        let seen = bases.iter().filter(|b| **b == base).count();
        found.push(if seen == 0 {
            base.clone()
        } else {
            format!("{base}-{seen}")
        });
        bases.push(base);
    }
    found
}

#[test]
fn every_path_the_documents_name_exists() {
    let mut missing = Vec::new();
    for doc in DOCS {
        let text = fs::read_to_string(root().join(doc)).unwrap();
        for path in named_paths(&prose(&text)) {
            if !root().join(path).exists() {
                missing.push(format!("{doc}: `{path}`"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "paths named that are not in the repository (a repository path is written from its \
         root; a path in a mount as `MP/…`):\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_link_of_the_documents_reaches_its_file_and_section() {
    let mut broken = Vec::new();
    for doc in DOCS {
        let dir = root().join(doc).parent().unwrap().to_owned();
        let text = fs::read_to_string(root().join(doc)).unwrap();
        for target in link_targets(&prose(&text)) {
            let (file, section) = target.split_once('#').unwrap_or((target, ""));
            let file = if file.is_empty() {
                root().join(doc)
            } else {
                dir.join(file)
            };
            let Ok(linked) = fs::read_to_string(&file) else {
                broken.push(format!("{doc}: ({target}): no such file"));
                continue;
            };
            if !section.is_empty() && !anchors(&prose(&linked)).iter().any(|a| a == section) {
                broken.push(format!("{doc}: ({target}): no such heading"));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_checks_find_what_they_look_for() {
    let text = "See `crates/x/`, `a.rs`, `MP/sessions/`, `/proc/<pid>`, `cargo test`, \
                `Vfs`, `a::b`.\n```text\n`in/a/block`\n```\n[a](b.md#c-d) [w](https://e.org/x)\n";
    let prose = prose(text);
    assert_eq!(named_paths(&prose), ["crates/x/", "a.rs"]);
    assert_eq!(link_targets(&prose), ["b.md#c-d"]);
    assert_eq!(
        anchor(" `gjcfs mcp` at 50,000 sessions: the root's `.ignore` (2026-12-07)"),
        "gjcfs-mcp-at-50000-sessions-the-roots-ignore-2026-12-07"
    );
    assert_eq!(
        anchor(" 2. `build_context()` and `grep -r`"),
        "2-build_context-and-grep--r"
    );
    assert_eq!(anchors("# A\n## A\n## A\n"), ["a", "a-1", "a-2"]);
}
