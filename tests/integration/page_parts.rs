//! Every kind of part a page shows, in a real browser (`tests/fixtures/views/
//! page-elements.jsonl`): rendered Markdown, highlighted code, tools as what they did,
//! labelled arguments and output, the contents list; light, dark and print, each with a
//! screenshot in `target/tmp/screenshots/` (the README's are copies).

use std::fs;

use crate::common::browser::{Browser, Page};
use crate::common::pages::check_structure;
use crate::common::{fixture, gjcfs_stdout};

/// A number the page computes.
fn count(browser: &mut Browser, page: &Page, expression: &str) -> f64 {
    browser
        .eval(page, expression)
        .as_f64()
        .unwrap_or_else(|| panic!("{expression}"))
}

/// A string the page computes.
fn string(browser: &mut Browser, page: &Page, expression: &str) -> String {
    browser
        .eval(page, expression)
        .as_str()
        .unwrap_or_else(|| panic!("{expression}"))
        .to_owned()
}

#[test]
fn a_page_shows_every_kind_of_part() {
    let fixture = fixture("views/page-elements.jsonl");
    let html = gjcfs_stdout(&[
        "show".as_ref(),
        fixture.as_os_str(),
        "--format".as_ref(),
        "html".as_ref(),
    ]);
    assert_eq!(check_structure(&html), 13);
    // Markdown rendered, not shown raw (the tree's one-line previews aside).
    let main = &html[html.find("<main>").unwrap()..];
    for raw in ["## Plan", "```rust", "| step |", "- [x]", "~~the old"] {
        assert!(!main.contains(raw), "{raw} shown raw");
    }
    for part in [
        "<h2>Plan</h2>",
        "<table>",
        "<blockquote>",
        "<del>the old notes</del>",
        "☑ understood",
        "<a href=\"https://example.com/docs\">the docs</a>",
    ] {
        assert!(html.contains(part), "{part}");
    }
    // Tools as what they did.
    for part in [
        "<p class=\"what\">read <code>src/report.rs</code> <span class=\"note\">from line 1, 40 lines</span></p>",
        "<p class=\"what\">searched for <code>fn print_table</code> in <code>src</code>, <code>tests</code></p>",
        "<p class=\"what\">edited <code>src/report.rs</code></p>",
        "<p class=\"what\">wrote <code>src/json.py</code> <span class=\"note\">6 lines</span></p>",
        "<p class=\"what\">ran a command</p>",
        "<figcaption>diff</figcaption>",
        "<figcaption>file</figcaption><pre class=\"code file\"><code><span class=\"hl-",
        "<figcaption>command</figcaption><pre class=\"code command\"><code>cargo test",
        "<summary>output: ",
    ] {
        assert!(html.contains(part), "{part}");
    }
    // No escaped JSON string of a file or a command.
    assert!(
        !html.contains("\\n    print(json.dumps"),
        "a file as a JSON string"
    );
    assert!(!html.contains("\\u001b"), "a terminal escape as JSON");

    if !crate::common::browser::browser_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("page.html");
    fs::write(&file, &html).unwrap();
    let mut browser = Browser::start();
    let page = browser.open(&file);
    assert!(page.errors.is_empty(), "{:?}", page.errors);
    assert_eq!(page.requests.len(), 1, "{:?}", page.requests);
    assert_eq!(count(&mut browser, &page, "document.scripts.length"), 0.0);
    assert_eq!(
        count(
            &mut browser,
            &page,
            "document.querySelectorAll('nav.contents li a').length"
        ),
        2.0,
        "one link per prompt"
    );
    assert_eq!(
        string(
            &mut browser,
            &page,
            "document.querySelector('nav.contents a').getAttribute('href')"
        ),
        "#m1"
    );
    let figures = string(
        &mut browser,
        &page,
        "Array.from(document.querySelectorAll('figcaption')).map(f => f.textContent).join(',')",
    );
    for label in ["output", "diff", "file", "command", "arguments"] {
        assert!(
            figures.split(',').any(|f| f == label),
            "{label} in {figures}"
        );
    }
    // Code is monospace and coloured; prose is not monospace.
    let mono = string(
        &mut browser,
        &page,
        "getComputedStyle(document.querySelector('pre.code')).fontFamily",
    );
    assert!(mono.contains("monospace"), "{mono}");
    let prose = string(
        &mut browser,
        &page,
        "getComputedStyle(document.querySelector('.md p')).fontFamily",
    );
    assert!(!prose.contains("monospace"), "{prose}");
    let keyword = "getComputedStyle(document.querySelector('pre.file .hl-keyword')).color";
    let body = "getComputedStyle(document.body).backgroundColor";
    let light = (
        string(&mut browser, &page, keyword),
        string(&mut browser, &page, body),
    );
    assert_eq!(light.1, "rgb(255, 255, 255)");
    assert_ne!(
        light.0,
        string(&mut browser, &page, "getComputedStyle(document.body).color")
    );
    browser.screenshot(&page, "page-parts-light");

    browser.emulate(&page, "screen", "dark");
    let dark = (
        string(&mut browser, &page, keyword),
        string(&mut browser, &page, body),
    );
    assert_ne!(dark.1, light.1, "a dark ground");
    assert_ne!(dark.0, light.0, "keywords coloured for the dark");
    browser.screenshot(&page, "page-parts-dark");

    browser.emulate(&page, "print", "light");
    assert_eq!(
        string(
            &mut browser,
            &page,
            "getComputedStyle(document.querySelector('nav.contents')).display"
        ),
        "none"
    );
    // A folded output is shown whole in print.
    let folded = "document.querySelector('details.output pre').getBoundingClientRect().height";
    assert!(
        count(&mut browser, &page, folded) > 100.0,
        "folded output printed"
    );
    browser.screenshot(&page, "page-parts-print");
}
