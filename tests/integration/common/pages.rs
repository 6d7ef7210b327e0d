//! Sessions and checks shared by the tests of the HTML pages (`html.rs`, `html_browser.rs`):
//! a session of hostile text, branched and long sessions, and a check of a page's structure
//! tag by tag, so that no session text can add an element, an attribute, a link or a
//! resource.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use gjcfs::engine::format::blob::BlobStore;
use gjcfs::engine::json::{self, Value};
use gjcfs::engine::storage::FileStorage;

use super::gjcfs_stdout;
use super::mount::p;

/// What a script in the page would set if one ever ran.
pub const MARKER: &str = "gjcfsPwned";

/// Hostile strings: markup, script, event handlers, URLs, CSS, controls.
pub fn hostile() -> Vec<String> {
    vec![
        format!("<script>window.{MARKER}=1</script>"),
        format!("</details></pre></div></section><script>window.{MARKER}=2</script>"),
        format!("<img src=x onerror=\"window.{MARKER}=3\">"),
        format!("<svg onload=\"window.{MARKER}=4\"><circle r=5/></svg>"),
        "<a href=\"javascript:alert(1)\">click</a> javascript:alert(1)".to_owned(),
        "</style><style>body{background:url(http://example.invalid/x.png)}</style>".to_owned(),
        "\" onmouseover=\"alert(1)\" x=\"' onfocus='alert(2)'".to_owned(),
        "<!-- comment --><![CDATA[ x ]]><?php echo 1 ?>".to_owned(),
        "nul\u{0}bell\u{7}esc\u{1b}[31mred del\u{7f}".to_owned(),
        "<meta http-equiv=\"refresh\" content=\"0;url=http://example.invalid\">".to_owned(),
        "<base href=\"http://example.invalid/\"><link rel=stylesheet href=http://example.invalid>"
            .to_owned(),
        // Markdown-borne: links, images, autolinks, reference definitions, HTML blocks,
        // a fence's info string, a link's title.
        "[click](javascript:alert(1)) [data](data:text/html;base64,PHNjcmlwdD4=) [f](file:///etc/passwd)"
            .to_owned(),
        "![remote](http://example.invalid/x.png) ![svg](data:image/svg+xml,<svg onload=alert(1)>)"
            .to_owned(),
        "<http://example.invalid/auto> <javascript:alert(1)> <mailto:a@example.invalid>".to_owned(),
        "[ref] and ![img][ref]\n\n[ref]: javascript:alert(1) \"t\"".to_owned(),
        format!("<div onclick=\"x\">\n<script>window.{MARKER}=5</script>\n</div>\n\nafter"),
        format!("```\"><script>window.{MARKER}=6</script>\ncode\n```"),
        "[t](https://example.invalid \"\\\" onmouseover=\\\"alert(1)\")".to_owned(),
    ]
}

/// A PNG of one pixel.
pub fn one_pixel_png() -> Vec<u8> {
    data_encoding::BASE64
        .decode(b"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
        .unwrap()
}

pub fn string(s: &str) -> String {
    json::to_compact(&Value::string(s))
}

/// An agent directory with one session full of hostile text, and an image of each kind.
pub fn hostile_store() -> (tempfile::TempDir, String) {
    let tmp = tempfile::tempdir().unwrap();
    let agent = tmp.path().join("agent");
    let scope = agent.join("sessions/--w--");
    fs::create_dir_all(&scope).unwrap();
    let blobs = BlobStore::new(agent.join("blobs"), Arc::new(FileStorage));
    let png = blobs.put(&one_pixel_png()).unwrap();
    let html_blob = blobs.put(b"<script>alert(1)</script>").unwrap();
    let bad = hostile();
    let all = bad.join(" ");
    let mut lines = vec![format!(
        r#"{{"type":"session","version":5,"id":"hostile","timestamp":"2026-01-01T00:00:00.000Z","cwd":{},"title":{}}}"#,
        string(&all),
        string(&bad[0])
    )];
    let mut parent = "null".to_owned();
    let mut n = 0;
    let mut push = |lines: &mut Vec<String>, body: String| {
        n += 1;
        let id = format!("e{n:07}");
        lines.push(format!(
            r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:{:02}.000Z","message":{body}}}"#,
            n % 60
        ));
        parent = format!("\"{id}\"");
    };
    for text in &bad {
        push(
            &mut lines,
            format!(
                r#"{{"role":"user","content":{},"timestamp":1}}"#,
                string(text)
            ),
        );
        push(
            &mut lines,
            format!(
                r#"{{"role":"assistant","content":[{{"type":"thinking","thinking":{t}}},{{"type":"text","text":{t}}},{{"type":"toolCall","id":{t},"name":{t},"arguments":{{"k":{t}}}}},{{"type":{t}}}],"provider":{t},"model":{t},"usage":{{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"cost":{{"total":0.5}}}},"stopReason":{t},"errorMessage":{t},"timestamp":1}}"#,
                t = string(text)
            ),
        );
        push(
            &mut lines,
            format!(
                r#"{{"role":"toolResult","toolCallId":"c","toolName":{t},"content":[{{"type":"text","text":{t}}}],"isError":true,"timestamp":1}}"#,
                t = string(text)
            ),
        );
    }
    // The tools a page shows as what they did, with hostile arguments.
    let t = string(&all);
    let calls = [
        format!(r#"{{"name":"write","arguments":{{"path":{t},"content":{t}}}}}"#),
        format!(r#"{{"name":"edit","arguments":{{"path":{t},"oldText":{t},"newText":"x"}}}}"#),
        format!(
            r#"{{"name":"edit","arguments":{{"path":{t},"edits":[{{"oldText":"a","newText":{t}}}]}}}}"#
        ),
        format!(r#"{{"name":"edit","arguments":{{"input":{t}}}}}"#),
        format!(r#"{{"name":"bash","arguments":{{"command":{t},"cwd":{t},"env":{{"X":{t}}}}}}}"#),
        format!(r#"{{"name":"read","arguments":{{"path":{t},"offset":1,"limit":2}}}}"#),
        format!(r#"{{"name":"search","arguments":{{"pattern":{t},"paths":[{t}]}}}}"#),
        format!(r#"{{"name":"find","arguments":{{"paths":[{t}],"hidden":{t}}}}}"#),
    ];
    let blocks: Vec<String> = calls
        .iter()
        .enumerate()
        .map(|(i, call)| format!(r#"{{"type":"toolCall","id":"k{i}",{}"#, &call[1..]))
        .collect();
    push(
        &mut lines,
        format!(
            r#"{{"role":"assistant","content":[{}],"stopReason":"toolUse","timestamp":1}}"#,
            blocks.join(",")
        ),
    );
    // A role nobody knows, a lone surrogate, a 10 MB line, images of every kind.
    push(
        &mut lines,
        format!(
            r#"{{"role":{},"content":"lone \ud800 surrogate","timestamp":1}}"#,
            string(&bad[2])
        ),
    );
    let long = format!("{}{}", bad[0], "x".repeat(10 << 20));
    push(
        &mut lines,
        format!(
            r#"{{"role":"bashExecution","command":{},"output":{},"exitCode":{},"timestamp":1}}"#,
            string(&bad[1]),
            string(&long),
            string(&bad[3])
        ),
    );
    push(
        &mut lines,
        format!(
            r#"{{"role":"user","content":[{{"type":"image","data":"blob:sha256:{png}","mimeType":"image/png"}},{{"type":"image","data":"blob:sha256:{html_blob}","mimeType":"text/html"}},{{"type":"image","data":"blob:sha256:{png}","mimeType":{}}},{{"type":"image","data":"blob:sha256:../../etc/passwd","mimeType":"image/png"}},{{"type":"image","data":"aGVsbG8=","mimeType":{}}}],"timestamp":1}}"#,
            string(&bad[5]),
            string(&bad[6])
        ),
    );
    lines.push(format!(
        r#"{{"type":"label","id":"l1","parentId":{parent},"timestamp":"2026-01-01T00:01:00.000Z","targetId":"e0000001","label":{}}}"#,
        string(&bad[0])
    ));
    let mut text = lines.join("\n");
    text.push('\n');
    fs::write(scope.join("2026-01-01T00-00-00-000Z_hostile.jsonl"), text).unwrap();
    let agent = agent.to_str().unwrap().to_owned();
    (tmp, agent)
}

/// The elements and attributes a page may have, and what its links and sources may be.
pub const TAGS: [&str; 55] = [
    "!DOCTYPE",
    "html",
    "head",
    "meta",
    "title",
    "style",
    "body",
    "header",
    "h1",
    "dl",
    "dt",
    "dd",
    "code",
    "main",
    "section",
    "h2",
    "a",
    "span",
    "time",
    "div",
    "details",
    "summary",
    "pre",
    "p",
    "img",
    "ul",
    "li",
    "svg",
    "path",
    "circle",
    "text",
    "h3",
    "table",
    "tr",
    "th",
    "td",
    "rect",
    "title",
    "g",
    "nav",
    "b",
    "figure",
    "figcaption",
    "strong",
    "em",
    "ol",
    "h4",
    "h5",
    "h6",
    "blockquote",
    "br",
    "del",
    "thead",
    "tbody",
    "hr",
];
pub const ATTRIBUTES: [&str; 32] = [
    "open",
    "title",
    "style",
    "start",
    "lang",
    "charset",
    "http-equiv",
    "content",
    "name",
    "class",
    "id",
    "href",
    "src",
    "alt",
    "xmlns",
    "version",
    "width",
    "height",
    "viewBox",
    "font-family",
    "font-size",
    "d",
    "fill",
    "stroke",
    "cx",
    "cy",
    "r",
    "x",
    "y",
    "font-weight",
    "text-decoration",
    "text-anchor",
];

/// Checks every tag of `page` against the allowed structure; panics naming the first one
/// that is not allowed. Returns how many message sections it has.
pub fn check_structure(page: &str) -> usize {
    let mut sections = 0;
    let mut rest = page;
    while let Some(at) = rest.find('<') {
        rest = &rest[at + 1..];
        let end = rest.find('>').expect("every tag is closed");
        let tag = &rest[..end];
        rest = &rest[end + 1..];
        let tag = tag.strip_prefix('/').unwrap_or(tag);
        // A self-closing SVG element.
        let tag = tag.strip_suffix('/').unwrap_or(tag);
        let (name, attrs) = tag.split_once(' ').unwrap_or((tag, ""));
        assert!(TAGS.contains(&name), "element {name:?} in <{tag}>");
        if name == "!DOCTYPE" {
            continue;
        }
        // Attributes: name="value", the value free of quotes (they are escaped).
        let mut attrs = attrs.trim();
        while !attrs.is_empty() {
            let (attr, after) = attrs.split_once("=\"").unwrap_or_else(|| panic!("<{tag}>"));
            let (value, after) = after.split_once('"').unwrap_or_else(|| panic!("<{tag}>"));
            assert!(ATTRIBUTES.contains(&attr), "attribute {attr:?} in <{tag}>");
            match attr {
                // The page's own anchors and its sibling pages, never a scheme or a host; or
                // a web or mail address the prose links to.
                "href" => assert!(
                    value.starts_with("#m")
                        || value.ends_with(".html")
                            && !value.contains([':', '\\'])
                            && !value.starts_with('/')
                        || ["http://", "https://", "mailto:"]
                            .iter()
                            .any(|s| value.starts_with(s)),
                    "href {value:?}"
                ),
                // A table column's alignment.
                "style" => assert!(
                    ["left", "center", "right"]
                        .iter()
                        .any(|a| value == format!("text-align: {a}")),
                    "style {value:?}"
                ),
                "xmlns" => assert_eq!(value, "http://www.w3.org/2000/svg"),
                "src" => assert!(
                    value.starts_with("blobs/") && value.len() == 6 + 64
                        || value.starts_with("data:image/png;base64,"),
                    "src {value:?}"
                ),
                "http-equiv" => assert_eq!(value, "Content-Security-Policy"),
                _ => {}
            }
            if name == "section" && attr == "class" {
                sections += 1;
            }
            attrs = after.trim_start();
        }
    }
    // No style but the page's own, and it comes first; one drawing at most.
    assert!(page.matches("<svg ").count() <= 1);
    assert_eq!(page.matches("<style>").count(), 1);
    assert!(page.find("<style>") < page.find("<body>"));
    sections
}

/// `gjcfs export --all` of the store into `<tmp>/export`.
pub fn export_all(tmp: &tempfile::TempDir, agent: &str) -> std::path::PathBuf {
    let out = tmp.path().join("export");
    let said = std::process::Command::new(crate::common::gjcfs_bin())
        .args(["export", "--all", "--out", p(&out), "--agent-dir", agent])
        .output()
        .unwrap();
    assert!(said.status.success(), "{said:?}");
    out
}

pub fn context_messages(agent: &str, session: &str) -> usize {
    let context = json::parse(&gjcfs_stdout(&["context", session, "--agent-dir", agent])).unwrap();
    match context.as_object().unwrap().get("messages").unwrap() {
        Value::Array(messages) => messages.len(),
        _ => panic!("messages"),
    }
}

/// The hostile store with a generated session, the branched one and the two real
/// transcripts beside it.
pub fn mixed_store() -> (tempfile::TempDir, String) {
    let (tmp, agent) = hostile_store();
    write_branched(Path::new(&agent));
    let ws = tmp.path().join("ws");
    fs::create_dir_all(&ws).unwrap();
    crate::common::generate_managed(Path::new(&agent), &ws, 400);
    let real = Path::new(&agent).join("sessions/--real--");
    fs::create_dir_all(&real).unwrap();
    for fixture in fs::read_dir(crate::common::fixture("real")).unwrap() {
        let path = fixture.unwrap().path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            fs::copy(&path, real.join(path.file_name().unwrap())).unwrap();
        }
    }
    (tmp, agent)
}

/// Every link target of the drawing in `page`, in drawing order.
pub fn tree_links(page: &str) -> Vec<String> {
    let Some(svg) = page.split("<svg ").nth(1) else {
        return Vec::new();
    };
    let svg = svg.split("</svg>").next().unwrap();
    svg.split("<a href=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .map(str::to_owned)
        .collect()
}

pub fn context_messages_at(agent: &str, session: &str, leaf: &str) -> usize {
    let context = json::parse(&gjcfs_stdout(&[
        "context",
        session,
        "--leaf",
        leaf,
        "--agent-dir",
        agent,
    ]))
    .unwrap();
    match context.as_object().unwrap().get("messages").unwrap() {
        Value::Array(messages) => messages.len(),
        _ => panic!("messages"),
    }
}

/// A store with one session of three branches (ends c3, b2 and d2; the leaf is the last
/// entry, d2); its id.
pub fn branched_store() -> (tempfile::TempDir, String, String) {
    let tmp = tempfile::tempdir().unwrap();
    let agent = tmp.path().join("agent");
    write_branched(&agent);
    (
        tmp,
        agent.to_str().unwrap().to_owned(),
        "branched".to_owned(),
    )
}

/// Writes the session of [`branched_store`] into the agent directory `agent`.
pub fn write_branched(agent: &Path) {
    let scope = agent.join("sessions/--branched--");
    fs::create_dir_all(&scope).unwrap();
    let header = r#"{"type":"session","version":5,"id":"branched","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#;
    let text = crate::common::SessionText::with_header(header)
        .message("a1", None, "user", "first question")
        .message("a2", Some("a1"), "assistant", "first answer")
        .message("c1", Some("a2"), "user", "on branch c")
        .message("c2", Some("c1"), "assistant", "c answer")
        .message("c3", Some("c2"), "user", "c goes on")
        .message("b1", Some("a2"), "user", "on branch b")
        .message("b2", Some("b1"), "assistant", "b answer")
        .message("d1", Some("a1"), "assistant", "another first answer")
        .message("d2", Some("d1"), "user", "on branch d")
        .text();
    fs::write(scope.join("2026-01-01T00-00-00-000Z_branched.jsonl"), text).unwrap();
}

/// The rows of every table of an index: the link of its first cell, and its other cells.
pub fn index_rows(page: &str) -> Vec<(String, Vec<String>)> {
    page.split("<tr><td><a href=\"")
        .skip(1)
        .map(|row| {
            let row = row.split("</tr>").next().unwrap();
            let href = row.split('"').next().unwrap().to_owned();
            let cells = row
                .split("<td")
                .skip(1)
                .map(|c| {
                    let c = c.split_once('>').unwrap().1;
                    c.split("</td>").next().unwrap().to_owned()
                })
                .collect();
            (href, cells)
        })
        .collect()
}
