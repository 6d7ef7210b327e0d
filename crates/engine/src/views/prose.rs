//! Prose in pages: a message's Markdown rendered as HTML (CommonMark with tables,
//! strikethrough and task lists), with nothing the text writes taken as markup.
//!
//! Invariants:
//! - The text is cleaned first (as [`super::escape::text`] cleans it); the Markdown writer
//!   escapes every text and attribute it writes.
//! - Raw HTML is text: an HTML block is shown as a preformatted block of its source, inline
//!   HTML as its source.
//! - A link is a link only to an `http:`, `https:` or `mailto:` URL, which a reader may
//!   click and the page never loads; any other target (`javascript:`, `data:`, `file:`, a
//!   relative path, the page's own anchors) is shown as its text followed by the target in
//!   parentheses. An image is never loaded: it is shown as `[image: <alt>] (<url>)`.
//! - A line break in a paragraph is kept (prompts are typed as lines, not as Markdown).
//! - A task list's boxes are the characters ☑ and ☐, not form controls.
//! - Fenced and indented code is [`super::highlight::code_block`], in the fence's language.

use pulldown_cmark::{CodeBlockKind, CowStr, Event, Options, Parser, Tag, TagEnd};

use super::escape::cleaned;
use super::highlight::code_block;

/// Appends `markdown` rendered as HTML to `out` (see the module invariants).
pub fn push_prose(out: &mut String, markdown: &str) {
    let source = cleaned(markdown);
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut events = Safe::default();
    let parser = Parser::new_ext(&source, options).filter_map(|event| events.pass(event));
    pulldown_cmark::html::push_html(out, parser);
}

/// What the renderer is inside of, to close it as it was opened.
#[derive(Default)]
struct Safe {
    /// The code block being gathered: its language and text.
    code: Option<(String, String)>,
    /// For each open link or image, what to write at its end (`None`: a real link's end).
    ends: Vec<Option<String>>,
}

impl Safe {
    fn pass<'a>(&mut self, event: Event<'a>) -> Option<Event<'a>> {
        if let Some((_, code)) = &mut self.code {
            match event {
                Event::Text(t) | Event::Html(t) | Event::InlineHtml(t) => {
                    code.push_str(&t);
                    return None;
                }
                Event::End(TagEnd::CodeBlock | TagEnd::HtmlBlock) => {
                    let (lang, code) = self.code.take()?;
                    return Some(Event::Html(code_block(&code, &lang, "").into()));
                }
                _ => return None,
            }
        }
        Some(match event {
            Event::Start(Tag::CodeBlock(kind)) => {
                let lang = match kind {
                    CodeBlockKind::Fenced(info) => {
                        info.split_whitespace().next().unwrap_or("").to_owned()
                    }
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some((lang, String::new()));
                return None;
            }
            Event::Start(Tag::HtmlBlock) => {
                self.code = Some((String::new(), String::new()));
                return None;
            }
            Event::Html(t) | Event::InlineHtml(t) => Event::Text(t),
            Event::SoftBreak => Event::HardBreak,
            // A task's box as a character: a page holds no form control.
            Event::TaskListMarker(done) => Event::Text(if done { "☑ " } else { "☐ " }.into()),
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            }) => {
                if clickable(&dest_url) {
                    self.ends.push(None);
                    Event::Start(Tag::Link {
                        link_type,
                        dest_url,
                        title,
                        id,
                    })
                } else {
                    self.ends.push(Some(format!(" ({dest_url})")));
                    return None;
                }
            }
            Event::Start(Tag::Image { dest_url, .. }) => {
                self.ends.push(Some(format!("] ({dest_url})")));
                Event::Text(CowStr::Borrowed("[image: "))
            }
            Event::End(TagEnd::Link | TagEnd::Image) => match self.ends.pop().flatten() {
                Some(end) => Event::Text(end.into()),
                None => Event::End(TagEnd::Link),
            },
            other => other,
        })
    }
}

/// Whether a link to `url` may be followed by a click: a web or mail address.
fn clickable(url: &str) -> bool {
    let lower = url.trim_start().to_ascii_lowercase();
    ["http://", "https://", "mailto:"]
        .iter()
        .any(|scheme| lower.starts_with(scheme))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn html(markdown: &str) -> String {
        let mut out = String::new();
        push_prose(&mut out, markdown);
        out
    }

    #[test]
    fn markdown_is_rendered() {
        assert_eq!(html("## Goal"), "<h2>Goal</h2>\n");
        assert_eq!(
            html("a **b** `c`\nd"),
            "<p>a <strong>b</strong> <code>c</code><br />\nd</p>\n"
        );
        let table = html("| a | b |\n|---|---|\n| 1 | 2 |");
        assert!(
            table.contains("<table>") && table.contains("<td>2</td>"),
            "{table}"
        );
        let code = html("```rust\nfn main() {}\n```");
        assert!(
            code.starts_with("<pre class=\"code \"><code><span class=\"hl-"),
            "{code}"
        );
        assert_eq!(
            html("- [x] done\n- [ ] not"),
            "<ul>\n<li>☑ done</li>\n<li>☐ not</li>\n</ul>\n"
        );
        assert_eq!(
            html("[site](https://example.com/a?b=\"c\")"),
            "<p><a href=\"https://example.com/a?b=%22c%22\">site</a></p>\n"
        );
    }

    #[test]
    fn markup_in_the_text_stays_text() {
        assert_eq!(
            html("<script>alert(1)</script>"),
            "<pre class=\"code \"><code>&lt;script&gt;alert(1)&lt;/script&gt;</code></pre>\n"
        );
        assert_eq!(
            html("a <img src=x onerror=alert(1)> b"),
            "<p>a &lt;img src=x onerror=alert(1)&gt; b</p>\n"
        );
        assert_eq!(
            html("[x](javascript:alert(1))"),
            "<p>x (javascript:alert(1))</p>\n"
        );
        assert_eq!(
            html("<javascript:alert(1)>"),
            "<p>javascript:alert(1) (javascript:alert(1))</p>\n"
        );
        assert_eq!(
            html("[r][1]\n\n[1]: data:text/html,<b>x</b>"),
            "<p>r (data:text/html,&lt;b&gt;x&lt;/b&gt;)</p>\n"
        );
        assert_eq!(
            html("![alt](https://example.com/x.png)"),
            "<p>[image: alt] (https://example.com/x.png)</p>\n"
        );
        assert_eq!(
            html("[*a*](file:///etc/passwd \"t\")"),
            "<p><em>a</em> (file:///etc/passwd)</p>\n"
        );
        // A link's title is an attribute, escaped.
        assert!(
            html("[a](https://x.org \"\\\" onmouseover=\\\"y\")").contains("&quot; onmouseover")
        );
        // Controls and terminal escapes go before the parser sees the text.
        assert_eq!(
            html("\u{1b}[31mred\u{1b}[0m\u{202e}"),
            "<p>red\u{fffd}</p>\n"
        );
    }
}
