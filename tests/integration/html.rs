//! The HTML page of a session (`gjcfs show --format html`, `gjcfs export`, the mount's
//! `context.html`) against hostile session text: the page's structure is checked tag by tag,
//! so no session text can add an element, an attribute, a link or a resource.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use gjcfs::engine::blob::BlobStore;
use gjcfs::engine::json::{self, Value};
use gjcfs::engine::storage::FileStorage;

use crate::common::gjcfs_stdout;
use crate::common::mount::{ok, p, Mount};

/// What a script in the page would set if one ever ran.
const MARKER: &str = "gjcfsPwned";

/// Hostile strings: markup, script, event handlers, URLs, CSS, controls.
fn hostile() -> Vec<String> {
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
    ]
}

/// A PNG of one pixel.
fn one_pixel_png() -> Vec<u8> {
    data_encoding::BASE64
        .decode(b"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
        .unwrap()
}

fn string(s: &str) -> String {
    json::to_compact(&Value::string(s))
}

/// An agent directory with one session full of hostile text, and an image of each kind.
fn hostile_store() -> (tempfile::TempDir, String) {
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
const TAGS: [&str; 41] = [
    "!DOCTYPE", "html", "head", "meta", "title", "style", "body", "header", "h1", "dl", "dt", "dd",
    "code", "main", "section", "h2", "a", "span", "time", "div", "details", "summary", "pre", "p",
    "img", "ul", "li", "svg", "path", "circle", "text", "h3", "table", "tr", "th", "td", "rect",
    "title", "g", "nav", "b",
];
const ATTRIBUTES: [&str; 28] = [
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
fn check_structure(page: &str) -> usize {
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
                // The page's own anchors and its sibling pages: never a scheme or a host.
                "href" => assert!(
                    value.starts_with("#m")
                        || value.ends_with(".html")
                            && !value.contains([':', '\\'])
                            && !value.starts_with('/'),
                    "href {value:?}"
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
fn export_all(tmp: &tempfile::TempDir, agent: &str) -> std::path::PathBuf {
    let out = tmp.path().join("export");
    let said = std::process::Command::new(crate::common::gjcfs_bin())
        .args(["export", "--all", "--out", p(&out), "--agent-dir", agent])
        .output()
        .unwrap();
    assert!(said.status.success(), "{said:?}");
    out
}

fn context_messages(agent: &str, session: &str) -> usize {
    let context = json::parse(&gjcfs_stdout(&["context", session, "--agent-dir", agent])).unwrap();
    match context.as_object().unwrap().get("messages").unwrap() {
        Value::Array(messages) => messages.len(),
        _ => panic!("messages"),
    }
}

fn assert_safe(page: &str, agent: &str) {
    assert!(
        page.contains("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none';")
    );
    assert!(
        !page.to_ascii_lowercase().contains("<script"),
        "a script tag"
    );
    assert!(
        !page.contains('\u{0}') && !page.contains('\u{1b}'),
        "a control character"
    );
    assert!(page.contains("&lt;script&gt;window.gjcfsPwned=1&lt;/script&gt;"));
    let sections = check_structure(page);
    assert_eq!(sections, context_messages(agent, "hostile"));
    // The 10 MB output is there, folded.
    assert!(page.contains("<details class=\"output\"><summary>output: 10,485,"));
}

#[test]
fn a_page_of_hostile_text_has_only_its_own_structure() {
    let (_tmp, agent) = hostile_store();
    let page = gjcfs_stdout(&["show", "hostile", "--format", "html", "--agent-dir", &agent]);
    assert_safe(&page, &agent);
    // Images: the PNG embedded, the others named, the bad reference refused.
    assert_eq!(
        page.matches("src=\"data:image/png;base64,").count(),
        1,
        "only the PNG"
    );
    assert!(page.contains("[image: text/html, 25 bytes, not shown]"));
    assert!(page.contains("[image: invalid blob reference]"));
    assert!(page.contains("bytes inline, not shown]"));
}

#[test]
fn export_writes_a_page_per_session_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let (tmp, agent) = hostile_store();
    let out = export_all(&tmp, &agent);
    let page = fs::read_to_string(out.join("hostile.html")).unwrap();
    assert_safe(&page, &agent);
    // The messages are `show`'s; only the drawing's links differ (an export has pages to
    // link to).
    let shown = gjcfs_stdout(&["show", "hostile", "--format", "html", "--agent-dir", &agent]);
    let main = |page: &str| page.split("<main>").nth(1).map(str::to_owned);
    assert!(main(&page).is_some() && main(&page) == main(&shown));
    let mode = |path: &Path| fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&out), 0o700);
    assert_eq!(mode(&out.join("hostile.html")), 0o600);
    // Markdown and the transcript itself; nothing else is left in the directory.
    for (format, check) in [("md", "# <script>"), ("jsonl", "{\"type\":\"session\"")] {
        let said = std::process::Command::new(crate::common::gjcfs_bin())
            .args(["export", "hostile", "--format", format, "--out", p(&out)])
            .args(["--agent-dir", &agent])
            .output()
            .unwrap();
        assert!(said.status.success(), "{said:?}");
        let text = fs::read_to_string(out.join(format!("hostile.{format}"))).unwrap();
        assert!(text.starts_with(check), "{format}");
    }
    let jsonl = fs::read(out.join("hostile.jsonl")).unwrap();
    let original = tmp
        .path()
        .join("agent/sessions/--w--/2026-01-01T00-00-00-000Z_hostile.jsonl");
    assert_eq!(
        jsonl,
        fs::read(original).unwrap(),
        "the transcript's own bytes"
    );
    let mut names: Vec<String> = fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "hostile.html",
            "hostile.jsonl",
            "hostile.md",
            "index.html",
            "usage.svg"
        ]
    );

    // A session that is not there: exit 1, nothing written for it.
    let missing = std::process::Command::new(crate::common::gjcfs_bin())
        .args(["export", "nope", "--out", p(&out), "--agent-dir", &agent])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(1));
}

#[test]
fn the_mount_serves_context_html_and_it_follows_appends() {
    require_fuse!();
    let s = crate::common::mount::store();
    let agent = s.agent_dir();
    let mount = Mount::start(&["--agent-dir", &agent]);
    let page_path = mount.session_dir(&s.sid).join("context.html");
    let page = ok("cat", &[p(&page_path)]);
    let sections = check_structure(&page);
    assert_eq!(sections, context_messages(&agent, &s.sid));
    assert!(page.contains("question MOUNTTOKEN"));

    // Hostile text appended through the mount shows on the next read, escaped.
    let new = mount.session_dir(&s.sid).join("entries/new");
    let line = format!(
        "{{\"role\":\"user\",\"content\":{}}}\n",
        string(&hostile().join(" "))
    );
    let mut file = fs::OpenOptions::new().append(true).open(&new).unwrap();
    std::io::Write::write_all(&mut file, line.as_bytes()).unwrap();
    drop(file);
    let page = ok("cat", &[p(&page_path)]);
    assert_eq!(check_structure(&page), sections + 1);
    assert!(!page.to_ascii_lowercase().contains("<script"));
    assert!(page.contains("&lt;script&gt;window.gjcfsPwned=1&lt;/script&gt;"));
    drop(mount);

    // The hostile store's page, and its images linked into the session's own blobs/.
    let (_tmp, agent) = hostile_store();
    let mount = Mount::start(&["--agent-dir", &agent, "--read-only"]);
    let page = ok(
        "cat",
        &[p(&mount.session_dir("hostile").join("context.html"))],
    );
    assert_eq!(check_structure(&page), context_messages(&agent, "hostile"));
    let links: Vec<&str> = page
        .split("src=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .collect();
    assert_eq!(links.len(), 3, "the three valid references");
    for link in links {
        assert!(mount.session_dir("hostile").join(link).is_file(), "{link}");
    }
}

/// Opens `page` in the browser and checks what a reader gets: no console error, nothing
/// requested but local files and data, no script run, and `messages` rendered messages.
fn check_in_browser(
    browser: &mut crate::common::browser::Browser,
    page: &Path,
    messages: usize,
    shot: &str,
) -> crate::common::browser::Page {
    let loaded = browser.open(page);
    assert!(
        loaded.errors.is_empty(),
        "{}: {:?}",
        page.display(),
        loaded.errors
    );
    assert!(!loaded.requests.is_empty(), "the page itself is a request");
    for url in &loaded.requests {
        assert!(
            url.starts_with("file://") || url.starts_with("data:"),
            "{}: requested {url}",
            page.display()
        );
    }
    let rendered = browser.eval(
        &loaded,
        "document.querySelectorAll('section.message').length",
    );
    assert_eq!(
        rendered.as_f64(),
        Some(messages as f64),
        "{}",
        page.display()
    );
    let marker = browser.eval(&loaded, &format!("typeof window.{MARKER}"));
    assert_eq!(
        marker.as_str(),
        Some("undefined"),
        "a script ran in {}",
        page.display()
    );
    let scripts = browser.eval(&loaded, "document.scripts.length");
    assert_eq!(scripts.as_f64(), Some(0.0));
    browser.screenshot(&loaded, shot);
    loaded
}

/// The hostile store with a generated session, the branched one and the two real
/// transcripts beside it.
fn mixed_store() -> (tempfile::TempDir, String) {
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

#[test]
fn every_page_of_the_mount_loads_in_a_browser() {
    require_fuse!();
    require_browser!();
    let (_tmp, agent) = mixed_store();
    let mount = Mount::start(&["--agent-dir", &agent, "--read-only"]);
    let mut browser = crate::common::browser::Browser::start();
    let mut sessions = 0;
    for dir in fs::read_dir(mount.path().join("sessions")).unwrap() {
        let dir = dir.unwrap().path();
        let id = dir.file_name().unwrap().to_str().unwrap().to_owned();
        let messages = context_messages(&agent, &id);
        check_in_browser(
            &mut browser,
            &dir.join("context.html"),
            messages,
            "mount-session",
        );
        let drawing = browser.open(&dir.join("tree.svg"));
        assert!(drawing.errors.is_empty(), "{id}: {:?}", drawing.errors);
        for leaf in fs::read_dir(dir.join("leaves")).unwrap() {
            let leaf = leaf.unwrap().path();
            let entry = leaf.file_stem().unwrap().to_str().unwrap().to_owned();
            let at = context_messages_at(&agent, &id, &entry).min(1000);
            check_in_browser(&mut browser, &leaf, at, "mount-leaf");
        }
        sessions += 1;
    }
    assert_eq!(sessions, 5);
    let index = browser.open(&mount.path().join("index.html"));
    assert!(index.errors.is_empty(), "{:?}", index.errors);
    let chart = browser.open(&mount.path().join("usage.svg"));
    assert!(chart.errors.is_empty(), "{:?}", chart.errors);
}

#[test]
fn exported_pages_load_in_a_browser_with_no_error_request_or_script() {
    require_browser!();
    let (tmp, agent) = mixed_store();
    let out = export_all(&tmp, &agent);
    let mut browser = crate::common::browser::Browser::start();
    let mut pages = 0;
    for page in fs::read_dir(&out).unwrap() {
        let page = page.unwrap().path();
        let id = page.file_stem().unwrap().to_str().unwrap().to_owned();
        // The session pages: the index and the chart are checked on their own.
        if id == "index" || page.extension().is_none_or(|e| e != "html") {
            continue;
        }
        let shot = format!("export-{id}");
        let loaded = check_in_browser(&mut browser, &page, context_messages(&agent, &id), &shot);
        if id == "hostile" {
            // The one embedded image decoded; nothing else is an image.
            let widths = browser.eval(
                &loaded,
                "Array.from(document.images).map(i => i.naturalWidth).join(',')",
            );
            assert_eq!(widths.as_str(), Some("1"));
        }
        pages += 1;
    }
    assert_eq!(
        pages, 5,
        "hostile, generated, branched and the two real transcripts"
    );
    // The pages beside them: each branch end's, in <id>.leaves/.
    let mut beside = 0;
    for dir in fs::read_dir(&out).unwrap() {
        let dir = dir.unwrap().path();
        let Some(id) = dir.to_str().unwrap().strip_suffix(".leaves") else {
            continue;
        };
        let id = Path::new(id)
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        for leaf in fs::read_dir(&dir).unwrap() {
            let leaf = leaf.unwrap().path();
            let entry = leaf.file_stem().unwrap().to_str().unwrap().to_owned();
            let at = context_messages_at(&agent, &id, &entry).min(1000);
            check_in_browser(&mut browser, &leaf, at, "export-leaf");
            beside += 1;
        }
    }
    assert_eq!(beside, 2, "the branched session's ends but its leaf");
    // The store's index and chart of the five.
    let index = browser.open(&out.join("index.html"));
    assert!(index.errors.is_empty(), "{:?}", index.errors);
    let links = browser.eval(&index, "document.querySelectorAll('td a').length");
    assert_eq!(
        links.as_f64(),
        Some(10.0),
        "five sessions by project and by day"
    );
    browser.screenshot(&index, "export-index-of-five");
    let chart = browser.open(&out.join("usage.svg"));
    assert!(chart.errors.is_empty(), "{:?}", chart.errors);
    browser.screenshot(&chart, "export-usage-of-five");
}

#[test]
fn the_mounts_pages_load_in_a_browser_with_their_images() {
    require_fuse!();
    require_browser!();
    let (_tmp, agent) = hostile_store();
    let mount = Mount::start(&["--agent-dir", &agent, "--read-only"]);
    let page = mount.session_dir("hostile").join("context.html");
    let mut browser = crate::common::browser::Browser::start();
    let loaded = check_in_browser(
        &mut browser,
        &page,
        context_messages(&agent, "hostile"),
        "mount-context",
    );
    // The images come from the session's blobs/ in the mount: the PNG decodes (twice, under
    // its own type and a hostile one); the HTML blob is no image.
    let blobs = format!(
        "file://{}/",
        mount.session_dir("hostile").join("blobs").display()
    );
    assert_eq!(
        loaded
            .requests
            .iter()
            .filter(|u| u.starts_with(&blobs))
            .count(),
        2,
        "{:?}",
        loaded.requests
    );
    let widths = browser.eval(
        &loaded,
        "Array.from(document.images).map(i => i.naturalWidth).join(',')",
    );
    assert_eq!(widths.as_str(), Some("1,0,1"));
}

/// Every link target of the drawing in `page`, in drawing order.
fn tree_links(page: &str) -> Vec<String> {
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

fn context_messages_at(agent: &str, session: &str, leaf: &str) -> usize {
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
fn branched_store() -> (tempfile::TempDir, String, String) {
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
fn write_branched(agent: &Path) {
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

#[test]
fn the_tree_is_drawn_and_every_branch_end_has_its_page_in_the_mount_and_an_export() {
    require_fuse!();
    let (tmp, agent, sid) = branched_store();
    let mount = Mount::start(&["--agent-dir", &agent, "--read-only"]);
    let dir = mount.session_dir(&sid);
    let svg = ok("cat", &[p(&dir.join("tree.svg"))]);
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    let tree_lines = ok("cat", &[p(&dir.join("tree.txt"))]).lines().count();
    assert_eq!(
        svg.matches("<circle ").count(),
        tree_lines,
        "a dot per tree.txt line"
    );
    let mut leaves: Vec<String> = fs::read_dir(dir.join("leaves"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    leaves.sort();
    assert_eq!(leaves, ["b2.html", "c3.html", "d2.html"]);
    // The page's drawing links each branch end into leaves/ (the leaf: the page itself).
    let page = ok("cat", &[p(&dir.join("context.html"))]);
    check_structure(&page);
    let links = tree_links(&page);
    assert!(links.contains(&"context.html".to_owned()), "{links:?}");
    let mut linked: Vec<String> = links
        .iter()
        .filter_map(|l| l.strip_prefix("leaves/"))
        .map(str::to_owned)
        .collect();
    linked.sort();
    assert!(
        linked.iter().all(|l| leaves.contains(l)),
        "{linked:?} {leaves:?}"
    );
    assert!(linked.len() + 1 >= leaves.len());
    // Each leaf page is the context at that entry.
    for name in &leaves {
        let id = name.strip_suffix(".html").unwrap();
        let leaf_page = ok("cat", &[p(&dir.join("leaves").join(name))]);
        assert_eq!(
            check_structure(&leaf_page),
            context_messages_at(&agent, &sid, id),
            "{name}"
        );
        assert!(leaf_page.contains(&format!("<dt>leaf</dt><dd><code>{id}</code>")));
        assert!(tree_links(&leaf_page).contains(&"../context.html".to_owned()));
    }
    assert!(fs::read(dir.join("leaves/nope.html")).is_err());
    drop(mount);

    // The export: the page, and the pages of the other branch ends beside it.
    let out = export_all(&tmp, &agent);
    let page = fs::read_to_string(out.join(format!("{sid}.html"))).unwrap();
    for link in tree_links(&page) {
        let target = out.join(&link);
        assert!(target.is_file(), "{link}");
        if let Some(name) = link.split('/').nth(1) {
            let id = name.strip_suffix(".html").unwrap();
            let leaf_page = fs::read_to_string(&target).unwrap();
            assert_eq!(
                check_structure(&leaf_page),
                context_messages_at(&agent, &sid, id)
            );
            for back in tree_links(&leaf_page) {
                assert!(target.parent().unwrap().join(&back).is_file(), "{back}");
            }
        }
    }
    assert!(out.join(format!("{sid}.leaves")).is_dir());
}

#[test]
fn tree_links_lead_a_browser_to_the_context_at_each_branch_end() {
    require_fuse!();
    require_browser!();
    let (_tmp, agent, sid) = branched_store();
    let mount = Mount::start(&["--agent-dir", &agent, "--read-only"]);
    let dir = mount.session_dir(&sid);
    let mut browser = crate::common::browser::Browser::start();
    let page = dir.join("context.html");
    let loaded = check_in_browser(&mut browser, &page, context_messages(&agent, &sid), "tree");
    let hrefs = browser.eval(
        &loaded,
        "Array.from(document.querySelectorAll('svg a')).map(a => a.getAttribute('href')).join('\\n')",
    );
    let hrefs: Vec<String> = hrefs.as_str().unwrap().lines().map(str::to_owned).collect();
    // The drawing on its own: it loads, requests nothing else, and runs nothing.
    let drawing = browser.open(&dir.join("tree.svg"));
    assert!(drawing.errors.is_empty(), "{:?}", drawing.errors);
    assert_eq!(drawing.requests.len(), 1, "{:?}", drawing.requests);
    let dots = browser.eval(&drawing, "document.querySelectorAll('circle').length");
    assert_eq!(dots.as_f64(), Some(9.0), "a dot per entry");
    browser.screenshot(&drawing, "tree-svg");
    let leaves: Vec<&String> = hrefs.iter().filter(|h| h.starts_with("leaves/")).collect();
    assert!(!leaves.is_empty(), "{hrefs:?}");
    for href in leaves.iter().take(3) {
        let id = href
            .strip_prefix("leaves/")
            .and_then(|h| h.strip_suffix(".html"))
            .unwrap();
        check_in_browser(
            &mut browser,
            &dir.join(href.as_str()),
            context_messages_at(&agent, &sid, id),
            "leaf",
        );
    }
}

/// The rows of every table of an index: the link of its first cell, and its other cells.
fn index_rows(page: &str) -> Vec<(String, Vec<String>)> {
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

#[test]
fn the_store_index_and_chart_list_every_session_in_an_export_and_the_mount() {
    require_fuse!();
    let (tmp, agent) = hostile_store();
    let ws = tmp.path().join("ws");
    fs::create_dir_all(&ws).unwrap();
    let generated = crate::common::generate_managed(Path::new(&agent), &ws, 300);
    let generated_id = crate::common::session_id(&generated);
    let out = export_all(&tmp, &agent);
    let index = fs::read_to_string(out.join("index.html")).unwrap();
    check_structure(&index);
    let rows = index_rows(&index);
    // Each session once by project and once by day, linked to its page.
    assert_eq!(rows.len(), 4, "{rows:?}");
    for (href, _) in &rows {
        assert!(out.join(href).is_file(), "{href}");
    }
    // A row's cost is the session's own, as `gjcfs ls --json` gives it.
    let listing = gjcfs_stdout(&["ls", "--all", "--json", "--agent-dir", &agent]);
    for line in listing.lines() {
        let row = json::parse(line).unwrap();
        let row = row.as_object().unwrap();
        let id = row.get_str("id").unwrap();
        let cost = row.get("usage").unwrap().as_object().unwrap().get("cost");
        let cost = format!("${:.4}", cost.unwrap().as_f64().unwrap());
        let shown: Vec<&Vec<String>> = rows
            .iter()
            .filter(|(href, _)| href == &format!("{id}.html"))
            .map(|(_, cells)| cells)
            .collect();
        assert_eq!(shown.len(), 2, "{id}");
        assert!(
            shown.iter().all(|cells| cells.last() == Some(&cost)),
            "{id}: {cost}"
        );
    }
    let svg = fs::read_to_string(out.join("usage.svg")).unwrap();
    assert!(svg.starts_with("<svg ") && svg.contains("<rect "));
    assert!(index.contains("<svg "), "the chart is in the index");

    // The mount's index links into sessions/, and follows an append.
    let mount = Mount::start(&["--agent-dir", &agent]);
    let page = ok("cat", &[p(&mount.path().join("index.html"))]);
    check_structure(&page);
    let rows = index_rows(&page);
    assert_eq!(rows.len(), 4);
    for (href, _) in &rows {
        assert!(mount.path().join(href).is_file(), "{href}");
    }
    // The session's row by project (the first): started, messages, tokens, cost.
    let messages = |rows: &[(String, Vec<String>)]| -> String {
        rows.iter()
            .find(|(href, _)| href.contains(&generated_id))
            .map(|(_, cells)| cells[1].clone())
            .unwrap()
    };
    let before: usize = messages(&rows).parse().unwrap();
    let new = mount.session_dir(&generated_id).join("entries/new");
    let mut file = fs::OpenOptions::new().append(true).open(&new).unwrap();
    std::io::Write::write_all(&mut file, b"{\"role\":\"user\",\"content\":\"one more\"}\n")
        .unwrap();
    drop(file);
    std::thread::sleep(std::time::Duration::from_millis(600));
    let page = ok("cat", &[p(&mount.path().join("index.html"))]);
    let after: usize = messages(&index_rows(&page)).parse().unwrap();
    assert_eq!(after, before + 1);
    let svg = ok("cat", &[p(&mount.path().join("usage.svg"))]);
    assert!(svg.starts_with("<svg "));
    let names = ok("ls", &[p(mount.path())]);
    assert!(
        names.contains("index.html") && names.contains("usage.svg"),
        "{names}"
    );
}

#[test]
fn the_store_index_loads_in_a_browser() {
    require_fuse!();
    require_browser!();
    let (tmp, agent) = hostile_store();
    let out = export_all(&tmp, &agent);
    let mut browser = crate::common::browser::Browser::start();
    let mount = Mount::start(&["--agent-dir", &agent, "--read-only"]);
    for (index, shot) in [
        (out.join("index.html"), "export-index"),
        (mount.path().join("index.html"), "mount-index"),
    ] {
        let loaded = browser.open(&index);
        assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
        assert!(loaded.requests.iter().all(|u| u.starts_with("file://")));
        let links = browser.eval(&loaded, "document.querySelectorAll('td a').length");
        assert_eq!(links.as_f64(), Some(2.0), "by project and by day");
        let scripts = browser.eval(&loaded, "document.scripts.length");
        assert_eq!(scripts.as_f64(), Some(0.0));
        browser.screenshot(&loaded, shot);
    }
    let chart = browser.open(&out.join("usage.svg"));
    assert!(chart.errors.is_empty(), "{:?}", chart.errors);
    browser.screenshot(&chart, "usage-svg");
}

/// A store with one linear session of `n` messages; its id is `long`.
fn long_store(n: usize) -> (tempfile::TempDir, String) {
    let tmp = tempfile::tempdir().unwrap();
    let agent = tmp.path().join("agent");
    let scope = agent.join("sessions/--w--");
    fs::create_dir_all(&scope).unwrap();
    let header = r#"{"type":"session","version":5,"id":"long","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#;
    let mut text = crate::common::SessionText::with_header(header);
    let mut parent: Option<String> = None;
    for i in 0..n {
        let id = format!("m{i:07}");
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        text = text.message(&id, parent.as_deref(), role, &format!("message number {i}"));
        parent = Some(id);
    }
    fs::write(
        scope.join("2026-01-01T00-00-00-000Z_long.jsonl"),
        text.text(),
    )
    .unwrap();
    (tmp, agent.to_str().unwrap().to_owned())
}

/// The number of the first message section of a page.
fn first_message(page: &str) -> usize {
    page.split("<section class=\"message")
        .nth(1)
        .and_then(|s| s.split("id=\"m").nth(1))
        .and_then(|s| s.split('"').next())
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn a_long_context_is_paged_in_the_mount_and_the_export() {
    require_fuse!();
    let (tmp, agent) = long_store(2_500);
    assert_eq!(context_messages(&agent, "long"), 2_500);
    let mount = Mount::start(&["--agent-dir", &agent, "--read-only"]);
    let dir = mount.session_dir("long");
    // context.html is the last page: the newest messages, 2,001 to 2,500.
    let last = ok("cat", &[p(&dir.join("context.html"))]);
    assert_eq!(check_structure(&last), 500);
    assert_eq!(first_message(&last), 2001);
    assert!(last.contains("Messages 2,001–2,500 of 2,500, page 3 of 3:"));
    assert!(last.contains("<a href=\"pages/1.html\">1</a> <a href=\"pages/2.html\">2</a> <b>3</b>"));
    assert_eq!(ok("ls", &[p(&dir.join("pages"))]), "1.html\n2.html\n");
    for (n, first) in [(1, 1), (2, 1001)] {
        let page = ok("cat", &[p(&dir.join(format!("pages/{n}.html")))]);
        assert_eq!(check_structure(&page), 1000);
        assert_eq!(first_message(&page), first);
        assert!(page.contains("<a href=\"../context.html\">3</a>"));
    }
    assert!(
        fs::read(dir.join("pages/3.html")).is_err(),
        "the last page is context.html"
    );
    assert!(fs::read(dir.join("pages/0.html")).is_err());
    assert!(fs::read(dir.join("pages/01.html")).is_err());
    drop(mount);

    let out = export_all(&tmp, &agent);
    let own = fs::read_to_string(out.join("long.html")).unwrap();
    assert_eq!(first_message(&own), 2001);
    for n in [1, 2] {
        let page = fs::read_to_string(out.join(format!("long.pages/{n}.html"))).unwrap();
        assert_eq!(check_structure(&page), 1000);
        let nav = page
            .split("<nav")
            .nth(1)
            .unwrap()
            .split("</nav>")
            .next()
            .unwrap();
        for link in nav.split("href=\"").skip(1) {
            let href = link.split('"').next().unwrap();
            assert!(out.join("long.pages").join(href).is_file(), "{href}");
        }
    }
    // A page on its own (`gjcfs show`) says which messages it leaves out.
    let shown = gjcfs_stdout(&["show", "long", "--format", "html", "--agent-dir", &agent]);
    assert_eq!(check_structure(&shown), 500);
    assert!(shown.contains("page 3 of 3 (the newest 1,000; the earlier ones are in context.md"));
}
