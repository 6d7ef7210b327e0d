//! Code in pages, highlighted when the page is rendered: a `<pre class="code">` whose
//! tokens are `<span class="hl-…">`s named after the syntax's scopes (`hl-keyword`,
//! `hl-string`, `hl-comment`, …), coloured by the page's style for light and dark
//! ([`super::page_style`]). No script, no inline colour.
//!
//! Invariants:
//! - A diff (`diff`) is classed line by line (headers, hunk ranges, insertions,
//!   deletions) without the highlighter.
//! - The language is looked up by a fence's token (`rust`, `py`, `sh`, `diff`) or a file
//!   name's extension; unknown, or code longer than [`HIGHLIGHT_MAX_BYTES`], or code the
//!   highlighter gives up on, is the same `<pre>` with the text escaped and no spans.
//! - The text is cleaned first (as [`super::escape::text`] cleans it), so a highlighted
//!   block holds no more than an escaped one: the highlighter escapes `&`, `<`, `>` and
//!   quotes itself, and the classes come from the syntax definitions built into the
//!   program, never from the text.

use std::sync::OnceLock;

use syntect::html::{ClassStyle, ClassedHTMLGenerator};
use syntect::parsing::{SyntaxReference, SyntaxSet};
use syntect::util::LinesWithEndings;

use super::escape::{cleaned, text};

/// Code longer than this is shown unhighlighted: highlighting runs at a few MB/s, and a page
/// must open in about a second.
pub const HIGHLIGHT_MAX_BYTES: usize = 32 * 1024;

/// The prefix of every class the highlighter writes.
const CLASS_PREFIX: &str = "hl-";

fn syntaxes() -> &'static SyntaxSet {
    static SYNTAXES: OnceLock<SyntaxSet> = OnceLock::new();
    SYNTAXES.get_or_init(SyntaxSet::load_defaults_newlines)
}

/// The syntax a fence's token or a file extension names, if the program knows it.
fn syntax_for(token: &str) -> Option<&'static SyntaxReference> {
    let token = token.trim();
    if token.is_empty() || token.len() > 32 {
        return None;
    }
    let set = syntaxes();
    set.find_syntax_by_token(token)
        .or_else(|| set.find_syntax_by_extension(&token.to_ascii_lowercase()))
        .filter(|s| s.name != "Plain Text")
}

/// The language of a file by its name (its extension, else the name itself, as
/// `Makefile`), as a token [`code_block`] takes; empty when unknown.
pub fn language_of_path(path: &str) -> &str {
    let name = path.rsplit(['/', '\\']).next().unwrap_or(path);
    match name.rsplit_once('.') {
        Some((_, ext)) if !ext.is_empty() => ext,
        _ => name,
    }
}

/// `code` as a `<pre class="code <class>">` (see the module invariants), highlighted as
/// `lang` when the program knows it.
pub fn code_block(code: &str, lang: &str, class: &str) -> String {
    if lang == "diff" {
        return format!(
            "<pre class=\"code {class}\"><code>{}</code></pre>\n",
            diff_lines(code)
        );
    }
    let highlighted = (code.len() <= HIGHLIGHT_MAX_BYTES)
        .then(|| syntax_for(lang))
        .flatten()
        .and_then(|syntax| highlighted(&cleaned(code), syntax));
    match highlighted {
        Some(html) => format!("<pre class=\"code {class}\"><code>{html}</code></pre>\n"),
        None => format!(
            "<pre class=\"code {class}\"><code>{}</code></pre>\n",
            text(code)
        ),
    }
}

/// A unified diff, each line classed by its first characters as the diff syntax would
/// class it (headers, hunk ranges, insertions, deletions): diffs are the most common code
/// in a session, and this costs no more than escaping them.
fn diff_lines(diff: &str) -> String {
    let mut html = String::with_capacity(diff.len() + diff.len() / 4);
    for line in diff.split_inclusive('\n') {
        let class = if line.starts_with("+++") || line.starts_with("---") {
            "hl-meta hl-header"
        } else if line.starts_with("@@") {
            "hl-meta hl-diff hl-range"
        } else if line.starts_with('+') {
            "hl-markup hl-inserted"
        } else if line.starts_with('-') {
            "hl-markup hl-deleted"
        } else {
            html.push_str(&text(line));
            continue;
        };
        html.push_str(&format!("<span class=\"{class}\">{}</span>", text(line)));
    }
    html
}

fn highlighted(code: &str, syntax: &SyntaxReference) -> Option<String> {
    let mut html = ClassedHTMLGenerator::new_with_class_style(
        syntax,
        syntaxes(),
        ClassStyle::SpacedPrefixed {
            prefix: CLASS_PREFIX,
        },
    );
    for line in LinesWithEndings::from(code) {
        html.parse_html_for_line_which_includes_newline(line).ok()?;
    }
    Some(html.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_languages_get_spans_and_the_text_stays_escaped() {
        let html = code_block("fn main() { let s = \"<b>\"; }\n", "rust", "");
        assert!(html.contains("<span class=\"hl-"), "{html}");
        assert!(html.contains("&lt;b&gt;"), "{html}");
        assert!(!html.contains("<b>"), "{html}");
        assert!(code_block("x = 1\n", "py", "").contains("hl-"));
        assert_eq!(
            code_block("--- a\n+++ a\n@@ -1 +1 @@\n-<a>\n+b\n c", "diff", "diff"),
            "<pre class=\"code diff\"><code><span class=\"hl-meta hl-header\">--- a\n</span>\
             <span class=\"hl-meta hl-header\">+++ a\n</span>\
             <span class=\"hl-meta hl-diff hl-range\">@@ -1 +1 @@\n</span>\
             <span class=\"hl-markup hl-deleted\">-&lt;a&gt;\n</span>\
             <span class=\"hl-markup hl-inserted\">+b\n</span> c</code></pre>\n"
        );
    }

    #[test]
    fn unknown_long_or_hostile_code_is_plain_escaped_text() {
        let plain = code_block("<script>x</script>", "no-such-lang", "arguments");
        assert_eq!(
            plain,
            "<pre class=\"code arguments\"><code>&lt;script&gt;x&lt;/script&gt;</code></pre>\n"
        );
        let long = "let a = 1;\n".repeat(HIGHLIGHT_MAX_BYTES / 10);
        assert!(!code_block(&long, "rust", "").contains("<span"));
        // Terminal escapes and controls go before the highlighter sees the text.
        let html = code_block("echo \u{1b}[31mred\u{1b}[0m\u{202e}\n", "sh", "");
        assert!(
            !html.contains('\u{1b}') && !html.contains('\u{202e}'),
            "{html}"
        );
        // A hostile token names nothing.
        assert!(!code_block("x", "\" onload=\"y", "").contains("onload"));
    }

    #[test]
    fn a_path_names_its_language() {
        assert_eq!(language_of_path("src/main.rs"), "rs");
        assert_eq!(language_of_path("C:\\x\\Makefile"), "Makefile");
        assert_eq!(language_of_path("a/.bashrc"), "bashrc");
        assert!(code_block("fn x() {}\n", language_of_path("a/b.rs"), "").contains("hl-"));
    }
}
