//! `context.html`: the context at the session's current leaf as one self-contained HTML
//! page, from the same parts as `context.md` ([`super::transcript`]).
//!
//! Format (invariants):
//! - One document: `<!DOCTYPE html>`, UTF-8, a Content-Security-Policy that forbids every
//!   script, frame, form, base URL and remote load (`default-src 'none'`; inline style
//!   only; images only from `file:` (the mount's `blobs/`) and `data:` (an export)), the
//!   style inline, no script, no external font, nothing fetched from a network.
//! - A `<header>` with the title, and the facts of `context.md` as a `<dl>` plus the usage
//!   summed over the context's messages (tokens and cost), named `usage, this branch`, and,
//!   where the session's other branches add to it, the whole session's as `usage, whole
//!   session` (what `gjcfs ls --long` counts).
//! - A `<nav class="contents">` lists the user prompts on the page, each by its first line
//!   linked to its message, folded when there are more than 30.
//! - One `<section class="message role-<role>" id="m<n>">` per context message, in context
//!   order: an `<h2>` with the number (a link to its own anchor), the role, the detail, the
//!   time (`<time>`), the entry id, the entry's label and the message's usage (tokens,
//!   cost); then its parts. Prose is Markdown rendered ([`super::prose`]: raw HTML as text,
//!   links only to web and mail addresses, images never loaded); code, commands and output
//!   are monospace blocks labelled by a `<figcaption>`, code highlighted
//!   ([`super::highlight`]); a tool call is shown as what it did ([`super::tool_view`]);
//!   thinking is folded (`<details>`); tool output longer than `context.md` shows is folded
//!   whole, its size in the summary; a compaction or branch summary is marked by its
//!   section's class and a line naming it.
//! - Images stored as blobs are `<img>`s: linked as `<prefix><sha256>` ([`Images::Link`]),
//!   or embedded as `data:` URLs read from the blob store and checked against their hash
//!   ([`Images::Embed`]; a missing
//!   blob is named instead). Only PNG, JPEG, GIF and WebP are embedded as such; any other
//!   type is named. Inline base64 images are named with their type and size, as in
//!   `context.md`.
//! - Every string from the session is escaped for where it goes ([`text`], [`attr`]): `&`,
//!   `<`, `>` everywhere and both quotes in attributes; terminal escape sequences (CSI) are
//!   dropped, other control characters but tab and newline, and the bidirectional
//!   controls, become U+FFFD (as lone surrogates already are). No session text is
//!   ever put in a style or a tag name: links point only to the page's own anchors, to blob
//!   hashes the engine checked (64 hex digits) and to the `http:`, `https:` and `mailto:`
//!   links of the prose (followed on a click only), and classes are made of ASCII letters
//!   taken from the role or the highlighter's scope names.
//! - The style ([`super::page_style`]) follows the reader's light or dark preference and
//!   prints without backgrounds, with folded parts open.

use std::io::{self, Write};

pub use super::escape::{attr, text};
use super::highlight::code_block;
use super::markdown::{cut_point, line_count};
use super::page_style::STYLE;
use super::prose::push_prose;
use super::tool_view::push_tool_call;
use super::transcript::{self, Facts, Heading, Image, PageOf, Sink, Window};
use super::tree_svg::{write_tree_svg, TreeLinks};
use super::{thousands, token_count};
use crate::format::blob::BlobStore;
use crate::json::Value;
use crate::session::tree::Session;
use crate::session::usage::UsageTotals;

/// How a page shows images stored in the blob store.
#[derive(Clone, Copy)]
pub enum Images<'a> {
    /// `<img src="<prefix><sha256>">`: the mount's `blobs/` beside the page.
    Link(&'a str),
    /// `<img src="data:…">` with the bytes read (and checked) from this store: a page that
    /// needs nothing beside it.
    Embed(&'a BlobStore),
}

/// The page's Content-Security-Policy.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; \
     img-src file: data:; base-uri 'none'; form-action 'none'";

/// What a page shows and how it links.
pub struct PageOptions<'a> {
    /// How images stored as blobs are shown.
    pub images: Images<'a>,
    /// Cold-spilled content is read back from this blob store first.
    pub cold: Option<&'a BlobStore>,
    /// The entry whose context the page shows; `None`: the current leaf.
    pub leaf: Option<&'a str>,
    /// The drawing of the tree, folded under the facts, with these links.
    pub tree: Option<TreeLinks<'a>>,
    /// Which page of [`PAGE_MESSAGES`] messages (from 1; `None`: the last, the newest).
    pub page: Option<usize>,
    /// Where the other pages are; `None`: a page on its own, which names the messages it
    /// leaves out.
    pub page_links: Option<PageLinks<'a>>,
}

impl<'a> PageOptions<'a> {
    /// A page on its own with its images shown as `images`: the context at the current
    /// leaf, whole, with no tree, nothing read back from a blob store and no other pages.
    pub fn plain(images: Images<'a>) -> Self {
        PageOptions {
            images,
            cold: None,
            leaf: None,
            tree: None,
            page: None,
            page_links: None,
        }
    }
}

/// A page's list of contents is open when it names at most this many prompts.
const CONTENTS_OPEN_UP_TO: usize = 30;

/// How many messages a page holds: a context longer than this is paged, so that a browser
/// opens any page in about a second.
pub const PAGE_MESSAGES: usize = 1_000;

/// Where the pages of a context are: page `n` at `<dir><n>.html`, the last one at `last`.
#[derive(Clone, Copy)]
pub struct PageLinks<'a> {
    /// The prefix of every page but the last: page `n` is at `<dir><n>.html`.
    pub dir: &'a str,
    /// The link to the last page.
    pub last: &'a str,
}

/// Writes the page of the context (see the module invariants).
pub fn write_context_html<W: Write + ?Sized>(
    session: &Session,
    options: &PageOptions<'_>,
    out: &mut W,
) -> io::Result<()> {
    let mut page = Page {
        out,
        images: options.images,
        tree: options
            .tree
            .as_ref()
            .map(|links| (session, options.cold, links)),
        page_links: options.page_links,
    };
    let window = Window {
        size: PAGE_MESSAGES,
        page: options.page,
    };
    transcript::walk(session, options.leaf, options.cold, Some(window), &mut page)?;
    page.out.write_all(b"</main>\n</body>\n</html>\n")
}

/// [`write_context_html`] as bytes.
pub fn context_html(session: &Session, options: &PageOptions<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    write_context_html(session, options, &mut out).expect("writing to a Vec cannot fail");
    out
}

/// The tokens (input, output and cache) and cost of a usage, for a reader.
fn usage_line(u: &UsageTotals) -> String {
    let tokens = u.input + u.output + u.cache_read + u.cache_write;
    format!("{} tokens, ${:.4}", token_count(tokens), u.cost)
}

/// The class of a role: its ASCII letters.
fn role_class(role: &str) -> String {
    role.chars().filter(char::is_ascii_alphabetic).collect()
}

/// The image types embedded as such.
fn embeddable(mime: &str) -> bool {
    matches!(
        mime,
        "image/png" | "image/jpeg" | "image/gif" | "image/webp"
    )
}

/// The session, cold store and links of the drawing a page holds.
type TreeOf<'a> = (&'a Session, Option<&'a BlobStore>, &'a TreeLinks<'a>);

struct Page<'a, W: Write + ?Sized> {
    out: &'a mut W,
    images: Images<'a>,
    tree: Option<TreeOf<'a>>,
    page_links: Option<PageLinks<'a>>,
}

impl<W: Write + ?Sized> Page<'_, W> {
    /// Which messages the page holds, and links to the other pages, when there are more.
    fn pages(&mut self, page: &PageOf, messages: usize) -> io::Result<()> {
        if page.pages == 1 {
            return Ok(());
        }
        write!(
            self.out,
            "<nav class=\"pages\">Messages {}–{} of {}, page {} of {}",
            thousands(page.first as u64),
            thousands(page.end as u64 - 1),
            thousands(messages as u64),
            page.page,
            page.pages
        )?;
        match self.page_links {
            Some(links) => {
                self.out.write_all(b":")?;
                for n in 1..=page.pages {
                    let href = if n == page.pages {
                        links.last.to_owned()
                    } else {
                        format!("{}{n}.html", links.dir)
                    };
                    if n == page.page {
                        write!(self.out, " <b>{n}</b>")?;
                    } else {
                        write!(self.out, " <a href=\"{}\">{n}</a>", attr(&href))?;
                    }
                }
            }
            None => write!(
                self.out,
                " (the newest {}; the earlier ones are in context.md and context.json)",
                thousands(PAGE_MESSAGES as u64)
            )?,
        }
        self.out.write_all(b"</nav>\n")
    }

    /// The list of the page's prompts, each a link to its message; open when short.
    fn contents(&mut self, prompts: &[(usize, String)]) -> io::Result<()> {
        if prompts.is_empty() {
            return Ok(());
        }
        let open = if prompts.len() <= CONTENTS_OPEN_UP_TO {
            " open=\"\""
        } else {
            ""
        };
        let unit = if prompts.len() == 1 {
            "prompt"
        } else {
            "prompts"
        };
        let mut html = format!(
            "<nav class=\"contents\"><details{open}><summary>Contents: {} {unit}</summary><ol>\n",
            thousands(prompts.len() as u64)
        );
        for (n, line) in prompts {
            html.push_str(&format!("<li><a href=\"#m{n}\">{}</a></li>\n", text(line)));
        }
        html.push_str("</ol></details></nav>\n");
        self.out.write_all(html.as_bytes())
    }

    /// A block of `lang` labelled `label`.
    fn figure(&mut self, label: &str, body: &str, lang: &str) -> io::Result<()> {
        write!(self.out, "<figure><figcaption>{label}</figcaption>")?;
        self.out
            .write_all(code_block(body, lang, label).as_bytes())?;
        self.out.write_all(b"</figure>\n")
    }

    /// Markdown rendered in a `<div class="md">`.
    fn prose(&mut self, body: &str) -> io::Result<()> {
        let mut html = String::from("<div class=\"md\">");
        push_prose(&mut html, body);
        html.push_str("</div>\n");
        self.out.write_all(html.as_bytes())
    }

    fn embed(&mut self, hash: &str, mime: Option<&str>, blobs: &BlobStore) -> io::Result<()> {
        let mime = mime.unwrap_or_default();
        match blobs.get_checked(hash) {
            Ok(Some(bytes)) if embeddable(mime) => writeln!(
                self.out,
                "<p><img alt=\"image\" src=\"data:{mime};base64,{}\"></p>",
                data_encoding::BASE64.encode(&bytes)
            ),
            Ok(Some(bytes)) => writeln!(
                self.out,
                "<p class=\"note\">[image: {}, {} bytes, not shown]</p>",
                text(mime),
                thousands(bytes.len() as u64)
            ),
            Ok(None) | Err(_) => writeln!(
                self.out,
                "<p class=\"note\">[image: blob {hash} unavailable]</p>"
            ),
        }
    }
}

impl<W: Write + ?Sized> Sink for Page<'_, W> {
    fn facts(&mut self, f: &Facts) -> io::Result<()> {
        write!(
            self.out,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta http-equiv=\"Content-Security-Policy\" content=\"{CONTENT_SECURITY_POLICY}\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<header>\n\
             <h1>{}</h1>\n<dl class=\"facts\">\n",
            text(&f.title),
            text(&f.title)
        )?;
        let mut fact =
            |name: &str, value: &str| writeln!(self.out, "<dt>{name}</dt><dd>{value}</dd>");
        fact("session", &format!("<code>{}</code>", text(&f.id)))?;
        if let Some(cwd) = &f.cwd {
            fact("cwd", &format!("<code>{}</code>", text(cwd)))?;
        }
        match &f.leaf {
            Some(leaf) => fact("leaf", &format!("<code>{}</code>", text(leaf)))?,
            None => fact("leaf", "none")?,
        }
        fact("messages", &f.messages.to_string())?;
        fact("thinking level", &text(&f.thinking_level))?;
        if let Some(model) = &f.model {
            fact("model", &text(model))?;
        }
        // Which usage is which: this branch's messages, or every branch of the session.
        fact("usage, this branch", &usage_line(&f.usage))?;
        if f.session_usage != f.usage {
            fact("usage, whole session", &usage_line(&f.session_usage))?;
        }
        self.out.write_all(b"</dl>\n")?;
        if let Some((session, cold, links)) = self.tree {
            self.out
                .write_all(b"<details class=\"tree\"><summary>tree</summary>\n")?;
            write_tree_svg(session, cold, links, self.out)?;
            self.out.write_all(b"</details>\n")?;
        }
        self.contents(&f.prompts)?;
        self.pages(&f.page, f.messages)?;
        self.out.write_all(b"</header>\n<main>\n")
    }

    fn heading(&mut self, h: &Heading) -> io::Result<()> {
        write!(
            self.out,
            "<section class=\"message role-{}\" id=\"m{n}\">\n<h2><a href=\"#m{n}\">{n}.</a> {}",
            role_class(&h.role),
            text(&h.role),
            n = h.n
        )?;
        if let Some(detail) = &h.detail {
            write!(self.out, "<span class=\"detail\">{}</span>", text(detail))?;
        }
        if let Some(time) = &h.time {
            write!(self.out, "<time>{}</time>", text(time))?;
        }
        if let Some(id) = &h.entry_id {
            write!(self.out, "<code class=\"entry\">{}</code>", text(id))?;
        }
        if let Some(label) = &h.label {
            write!(self.out, "<span class=\"label\">{}</span>", text(label))?;
        }
        if let Some(usage) = &h.usage {
            write!(
                self.out,
                "<span class=\"usage\">{}</span>",
                usage_line(usage)
            )?;
        }
        self.out.write_all(b"</h2>\n")
    }

    fn text(&mut self, body: &str) -> io::Result<()> {
        self.prose(body)
    }

    fn thinking(&mut self, body: &str) -> io::Result<()> {
        self.out
            .write_all(b"<details class=\"thinking\"><summary>thinking</summary>")?;
        self.prose(body)?;
        self.out.write_all(b"</details>\n")
    }

    fn redacted_thinking(&mut self) -> io::Result<()> {
        writeln!(self.out, "<p class=\"note\">(redacted thinking)</p>")
    }

    fn tool_call(
        &mut self,
        name: &str,
        id: Option<&str>,
        arguments: Option<&Value>,
    ) -> io::Result<()> {
        let mut html = String::new();
        push_tool_call(&mut html, name, id, arguments);
        self.out.write_all(html.as_bytes())
    }

    fn code(&mut self, body: &str, lang: &str) -> io::Result<()> {
        // The style writes a command's prompt, so that a copy takes the command alone.
        match lang {
            // Plain, as a tool call's command ([`super::tool_view`]).
            "sh" => self.figure("command", body.strip_prefix("$ ").unwrap_or(body), ""),
            _ => self.figure("code", body, lang),
        }
    }

    fn output(&mut self, body: &str, lang: &str) -> io::Result<()> {
        if body.is_empty() {
            return writeln!(self.out, "<p class=\"note\">(no output)</p>");
        }
        if cut_point(body) == body.len() {
            return self.figure("output", body, lang);
        }
        writeln!(
            self.out,
            "<details class=\"output\"><summary>output: {} bytes, {} lines</summary>",
            thousands(body.len() as u64),
            thousands(line_count(body) as u64)
        )?;
        self.figure("output", body, lang)?;
        self.out.write_all(b"</details>\n")
    }

    fn image(&mut self, image: Image<'_>) -> io::Result<()> {
        match (image, self.images) {
            (Image::Blob { hash, .. }, Images::Link(prefix)) => writeln!(
                self.out,
                "<p><img alt=\"image\" src=\"{}{hash}\"></p>",
                attr(prefix)
            ),
            (Image::Blob { hash, mime }, Images::Embed(blobs)) => self.embed(hash, mime, blobs),
            (Image::InvalidRef, _) => {
                writeln!(
                    self.out,
                    "<p class=\"note\">[image: invalid blob reference]</p>"
                )
            }
            (Image::Inline { mime, bytes }, _) => writeln!(
                self.out,
                "<p class=\"note\">[image: {}, {} bytes inline, not shown]</p>",
                text(&mime),
                thousands(bytes as u64)
            ),
            (Image::Empty, _) => writeln!(self.out, "<p class=\"note\">[image]</p>"),
        }
    }

    fn unknown_block(&mut self, block_type: &str) -> io::Result<()> {
        writeln!(
            self.out,
            "<p class=\"note\">[{} block]</p>",
            text(block_type)
        )
    }

    fn error_result(&mut self) -> io::Result<()> {
        writeln!(self.out, "<p class=\"error\">Error</p>")
    }

    fn stopped(&mut self, reason: &str, error: Option<&str>) -> io::Result<()> {
        let error = error.map(|e| format!(" — {}", text(e))).unwrap_or_default();
        writeln!(
            self.out,
            "<p class=\"stopped\">Stopped: {}{error}</p>",
            text(reason)
        )
    }

    fn compaction(&mut self, tokens_before: &str) -> io::Result<()> {
        writeln!(
            self.out,
            "<p><span class=\"kind\">Compaction summary</span> ({} tokens before compaction)</p>",
            text(tokens_before)
        )
    }

    fn branch_summary(&mut self, from: &str) -> io::Result<()> {
        writeln!(
            self.out,
            "<p><span class=\"kind\">Branch summary</span> (branched from <code>{}</code>)</p>",
            text(from)
        )
    }

    fn status(&mut self, status: &[String]) -> io::Result<()> {
        writeln!(
            self.out,
            "<p class=\"status\">{}</p>",
            text(&status.join(", "))
        )
    }

    fn files(&mut self, files: &[(String, Option<String>)]) -> io::Result<()> {
        self.out.write_all(b"<ul class=\"files\">\n")?;
        for (path, lines) in files {
            write!(self.out, "<li><code>{}</code>", text(path))?;
            if let Some(lines) = lines {
                write!(self.out, " ({})", text(lines))?;
            }
            self.out.write_all(b"</li>\n")?;
        }
        self.out.write_all(b"</ul>\n")
    }

    fn end_message(&mut self) -> io::Result<()> {
        self.out.write_all(b"</section>\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_quotes_and_controls() {
        assert_eq!(
            text("<script>a&b</script>\"'"),
            "&lt;script&gt;a&amp;b&lt;/script&gt;\"'"
        );
        assert_eq!(attr("x\" onload='y'"), "x&quot; onload=&#39;y&#39;");
        assert_eq!(
            text("a\0b\u{1b}[1;31mc\td\ne\r\u{1b}7x"),
            "a\u{fffd}bc\td\ne\u{fffd}x"
        );
        assert_eq!(
            text("cut \u{1b}[31"),
            "cut ",
            "an unfinished sequence ends the text"
        );
        // Only the sequence's own bytes go: text after a broken one stays.
        assert_eq!(text("\u{1b}[隠す"), "隠す");
        assert_eq!(text("\u{1b}[12;3隠"), "隠");
        assert_eq!(text("a\u{202e}b\u{2066}c"), "a\u{fffd}b\u{fffd}c");
    }

    /// Costs whose sum depends on the order they are added in.
    fn costly_session() -> Session {
        let mut lines = vec![
            r#"{"type":"session","version":5,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#.to_owned(),
        ];
        let mut parent = "null".to_owned();
        for (n, cost) in [0.1, 0.2, 0.3, 1e-17, 0.7, 1e16, 0.3, 0.06]
            .iter()
            .enumerate()
        {
            let id = format!("m{n}");
            lines.push(format!(
                r#"{{"type":"message","id":"{id}","parentId":{parent},"message":{{"role":"assistant","content":[{{"type":"text","text":"t"}}],"provider":"p","model":"m","usage":{{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"cost":{{"total":{cost}}}}}}}}}"#
            ));
            parent = format!("\"{id}\"");
        }
        let text = lines.join("\n") + "\n";
        Session::from_records(
            crate::read::replay::parse_session_entries(&text)
                .unwrap()
                .records,
        )
    }

    #[test]
    fn a_page_is_the_same_at_every_rendering() {
        let session = costly_session();
        let options = PageOptions::plain(Images::Link("blobs/"));
        let render = || String::from_utf8(context_html(&session, &options)).unwrap();
        let first = render();
        assert!(first.contains("usage, this branch"), "{first}");
        assert!(
            !first.contains("usage, whole session"),
            "one branch: its usage is the whole session's"
        );
        for _ in 0..20 {
            assert_eq!(render(), first);
        }
    }

    #[test]
    fn classes_keep_only_ascii_letters() {
        assert_eq!(role_class("toolResult"), "toolResult");
        assert_eq!(role_class("x\" onclick=\"y"), "xonclicky");
    }
}
