//! The HTML pages in a real browser (a headless Chromium over the DevTools protocol,
//! `common/browser.rs`): every page of the mount and of an export loads from `file://` with
//! no console error, no request but local files and no script run, renders as many messages
//! as `context.json` holds, and leaves a screenshot in `target/tmp/screenshots/`.

use std::fs;
use std::path::Path;

use crate::common::browser::{Browser, Page};
use crate::common::mount::Mount;
use crate::common::pages::*;

/// Opens `page` in the browser and checks what a reader gets: no console error, nothing
/// requested but local files and data, no script run, and `messages` rendered messages.
fn check_in_browser(browser: &mut Browser, page: &Path, messages: usize, shot: &str) -> Page {
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

#[test]
fn every_page_of_the_mount_loads_in_a_browser() {
    require_fuse!();
    require_browser!();
    let (_tmp, agent) = mixed_store();
    let mount = Mount::start(&["--agent-dir", &agent, "--read-only"]);
    let mut browser = Browser::start();
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
    let mut browser = Browser::start();
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
    // The pages beside them: each branch end's, in <id>.leaves/ (all checked; the branched
    // session's counted, the generated one's depend on its seed).
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
            if id == "branched" {
                beside += 1;
            }
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
    let mut browser = Browser::start();
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

#[test]
fn tree_links_lead_a_browser_to_the_context_at_each_branch_end() {
    require_fuse!();
    require_browser!();
    let (_tmp, agent, sid) = branched_store();
    let mount = Mount::start(&["--agent-dir", &agent, "--read-only"]);
    let dir = mount.session_dir(&sid);
    let mut browser = Browser::start();
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

#[test]
fn the_store_index_loads_in_a_browser() {
    require_fuse!();
    require_browser!();
    let (tmp, agent) = hostile_store();
    let out = export_all(&tmp, &agent);
    let mut browser = Browser::start();
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
