//! The HTML pages of sessions and of the store (`gjcfs show --format html`, `gjcfs export`,
//! the mount's `context.html`, `tree.svg`, `leaves/`, `pages/`, `index.html`, `usage.svg`),
//! checked as text: their structure against hostile session text, their links, paging and
//! liveness. `html_browser.rs` opens them in a browser.

use std::fs;
use std::path::Path;

use gjcfs::engine::json;

use crate::common::gjcfs_stdout;
use crate::common::mount::{ok, p, within, Mount};
use crate::common::pages::*;

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
    let (s, mount) = mounted_store!();
    let agent = s.agent_dir();
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
        // The same messages as `gjcfs context --leaf`, in its order.
        let context = json::parse(&gjcfs_stdout(&[
            "context",
            &sid,
            "--leaf",
            id,
            "--agent-dir",
            &agent,
        ]))
        .unwrap();
        let json::Value::Array(messages) = context.as_object().unwrap().get("messages").unwrap()
        else {
            panic!("messages")
        };
        let expected: Vec<String> = messages
            .iter()
            .map(|m| {
                m.as_object()
                    .unwrap()
                    .get_str("content")
                    .unwrap()
                    .to_owned()
            })
            .collect();
        let shown: Vec<String> = leaf_page
            .split("<div class=\"md\"><p>")
            .skip(1)
            .map(|t| t.split("</p>").next().unwrap().to_owned())
            .collect();
        assert_eq!(shown, expected, "{name}");
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
    // The index follows within the store usage's recheck window (0.5 s).
    let counted = || {
        let page = ok("cat", &[p(&mount.path().join("index.html"))]);
        messages(&index_rows(&page)).parse::<usize>().unwrap()
    };
    assert!(
        within(std::time::Duration::from_secs(5), || counted()
            == before + 1),
        "{} messages, {before} before",
        counted()
    );
    let svg = ok("cat", &[p(&mount.path().join("usage.svg"))]);
    assert!(svg.starts_with("<svg "));
    let names = ok("ls", &[p(mount.path())]);
    assert!(
        names.contains("index.html") && names.contains("usage.svg"),
        "{names}"
    );
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
            .split("<nav class=\"pages\"")
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

#[test]
fn export_names_only_portable_files_and_follows_no_planted_symlink() {
    let tmp = tempfile::tempdir().unwrap();
    let agent = tmp.path().join("agent");
    let scope = agent.join("sessions/--w--");
    fs::create_dir_all(&scope).unwrap();
    // Ids that would climb out on Windows, name a drive or a device, or take the index's name.
    for (n, id) in ["..\\\\..\\\\evil", "C:evil", "CON", "index", "ok-1"]
        .iter()
        .enumerate()
    {
        let text = crate::common::SessionText::with_header(&format!(
            r#"{{"type":"session","version":5,"id":{},"timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}}"#,
            json::to_compact(&json::Value::string(*id))
        ))
        .message("a1", None, "user", "hello")
        .text();
        fs::write(
            scope.join(format!("2026-01-01T00-00-0{n}-000Z_s{n}.jsonl")),
            text,
        )
        .unwrap();
    }
    let a = agent.to_str().unwrap();
    let out = tmp.path().join("out");
    let said = std::process::Command::new(crate::common::gjcfs_bin())
        .args(["export", "--all", "--out", p(&out), "--agent-dir", a])
        .output()
        .unwrap();
    assert_eq!(said.status.code(), Some(1), "{said:?}");
    let stderr = String::from_utf8_lossy(&said.stderr);
    assert!(
        stderr.contains("cannot name a file on every system"),
        "{stderr}"
    );
    assert!(stderr.contains("names the store's own page"), "{stderr}");
    assert!(
        stderr.contains("4 session(s) could not be exported"),
        "{stderr}"
    );
    let mut names: Vec<String> = fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["index.html", "ok-1.html", "usage.svg"]);
    let index = fs::read_to_string(out.join("index.html")).unwrap();
    assert_eq!(
        index.matches("<tr><td><a href=").count(),
        2,
        "ok-1 by project and by day"
    );

    // A directory for leaf pages planted as a symlink is refused, not written through.
    let (tmp, agent, sid) = branched_store();
    let out = tmp.path().join("out");
    let elsewhere = tmp.path().join("elsewhere");
    fs::create_dir_all(&out).unwrap();
    fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, out.join(format!("{sid}.leaves"))).unwrap();
    let said = std::process::Command::new(crate::common::gjcfs_bin())
        .args(["export", &sid, "--out", p(&out), "--agent-dir", &agent])
        .output()
        .unwrap();
    assert_eq!(said.status.code(), Some(1), "{said:?}");
    assert!(String::from_utf8_lossy(&said.stderr).contains("a symlink is not followed"));
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
    // The directory the user names may itself be a link to one.
    let named = tmp.path().join("named");
    std::os::unix::fs::symlink(&elsewhere, &named).unwrap();
    let said = std::process::Command::new(crate::common::gjcfs_bin())
        .args(["export", &sid, "--out", p(&named), "--agent-dir", &agent])
        .output()
        .unwrap();
    assert!(said.status.success(), "{said:?}");
    assert!(elsewhere.join(format!("{sid}.html")).is_file());
}

#[test]
fn a_page_says_which_usage_is_its_branch_and_which_the_whole_session() {
    let demo = concat!(env!("CARGO_MANIFEST_DIR"), "/demo/sessions/demo.jsonl");
    let page = crate::common::gjcfs_stdout(&["show", demo, "--format", "html"]);
    let usage = gjcfs::engine::json::parse(&crate::common::gjcfs_stdout(&[
        "show", demo, "--format", "usage",
    ]))
    .unwrap();
    let cost = usage
        .as_object()
        .unwrap()
        .get("cost")
        .unwrap()
        .as_f64()
        .unwrap();
    let fact = |name: &str| {
        let at = page
            .find(&format!("<dt>{name}</dt><dd>"))
            .unwrap_or_else(|| panic!("no {name} fact"));
        let rest = &page[at..];
        rest[..rest.find("</dd>").unwrap()].to_owned()
    };
    // The demo session has a branch: its page counts less than the whole session.
    let branch = fact("usage, this branch");
    let whole = fact("usage, whole session");
    assert_ne!(branch, whole);
    assert!(whole.ends_with(&format!("${cost:.4}")), "{whole} vs {cost}");
}
