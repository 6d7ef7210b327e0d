//! `context.md`: the context at the session's current leaf (what the agent would send to the
//! model, [`Session::build_context`]) as readable Markdown.
//!
//! Format (invariants):
//! - The first line is `# <title>` (the session's title as every listing shows it: the
//!   header's title, else its first prompt's first line; `Session <id>` with neither; see
//!   [`super::transcript::Facts::title`]),
//!   followed by a blank line and a list of facts: ``- session: `<id>` ``,
//!   ``- cwd: `<cwd>` ``, ``- leaf: `<entry id>` `` (`none` for a null leaf; for a leaf marker, the entry it
//!   stands for: see [`crate::manager::leaf_marker`]), `- messages: <n>`,
//!   `- thinking level: <level>` and, when the context names one, `- model: <provider/model>`.
//! - Then one section per context message, in context order, each opened by one heading line
//!   ``## <n>. <role>[ · <detail>][ · <time>][ · `<entry id>`]`` and ended by a blank line:
//!   `<n>` counts from 1; `<role>` is the message's `role` as stored; `<detail>` is the model
//!   (`provider/model`) of an assistant message, the tool name of a tool result (`, error`
//!   added for an error result) or the `customType` of a custom message; `<time>` is the
//!   ISO timestamp of the entry the message comes from (the message's own `timestamp`
//!   when the entry has none); `<entry id>` is that entry's id (the compaction's for a
//!   compaction summary).
//! - User, developer, assistant and custom text is written as written, unshortened, less a
//!   terminal's control sequences and the control characters other than newline and tab
//!   (tool output keeps colour codes; `cat context.md` must not replay them).
//!   A thinking block becomes `<details><summary>thinking</summary>`, a blank line, the
//!   thinking text, a blank line and `</details>`; a redacted one becomes
//!   `*(redacted thinking)*`. A tool call becomes ``**Tool call** `<name>` · `<call id>` ``
//!   followed by its arguments as pretty JSON in a fenced `json` block.
//! - Tool output (the text of a tool result, the output of a bash or python execution, and
//!   the JSON of a message with an unknown shape) is written in a fenced block, cut after
//!   [`OUTPUT_MAX_LINES`] lines or [`OUTPUT_MAX_BYTES`] bytes, whichever comes first; a cut
//!   block is followed by `… (truncated: <bytes> bytes, <lines> lines in full)` with the
//!   full sizes. Empty output is written as `*(no output)*`.
//! - A compaction summary opens with `**Compaction summary** (<n> tokens before
//!   compaction)`, a branch summary with ``**Branch summary** (branched from `<id>`)``; the
//!   summary text follows as written.
//! - An image stored as a blob (`blob:sha256:<hex>`) becomes `![image](<prefix><hex>)`,
//!   `<prefix>` being the caller's (`blobs/` beside a mounted session); an inline image
//!   becomes `*[image: <mime type>, <n> bytes inline, not shown]*`. Base64 data is never
//!   written.
//! - Fences are made of backticks, one more than the longest run of backticks in the fenced
//!   text (at least three), so no content can close them.
//! - Every block (the facts, a heading, a paragraph, a fenced block) is followed by a blank
//!   line, so the output ends in `\n\n`. Nothing is read from disk: blobs are linked, not
//!   resolved. The `_rehydrated` variants first read cold-spilled content back from the blob
//!   store (what the agent shows in place of the eviction notice).

use std::io::{self, Write};

use super::thousands;
use super::transcript::{self, Facts, Heading, Image, Sink};
use crate::format::blob::BlobStore;
use crate::json::{self, Value};
use crate::session::tree::Session;

/// Tool output longer than this many bytes is cut.
pub const OUTPUT_MAX_BYTES: usize = 2_000;
/// Tool output longer than this many lines is cut.
pub const OUTPUT_MAX_LINES: usize = 40;

/// Writes `context.md` for the context at the session's current leaf. Image blobs are linked
/// as `<blobs_prefix><sha256>`. The output is written in many small pieces: give a buffer
/// (`Vec<u8>`, `BufWriter`).
pub fn write_context_md<W: Write + ?Sized>(
    session: &Session,
    blobs_prefix: &str,
    out: &mut W,
) -> io::Result<()> {
    transcript::walk(
        session,
        None,
        None,
        None,
        &mut Markdown { out, blobs_prefix },
    )
}

/// [`write_context_md`] with cold-spilled content read back from `blobs`
/// ([`crate::format::cold_spill`]), as the agent shows it: the only read from disk.
pub fn write_context_md_rehydrated<W: Write + ?Sized>(
    session: &Session,
    blobs_prefix: &str,
    blobs: &BlobStore,
    out: &mut W,
) -> io::Result<()> {
    transcript::walk(
        session,
        None,
        Some(blobs),
        None,
        &mut Markdown { out, blobs_prefix },
    )
}

/// [`write_context_md_rehydrated`] as bytes.
pub fn context_md_rehydrated(session: &Session, blobs_prefix: &str, blobs: &BlobStore) -> Vec<u8> {
    let mut out = Vec::new();
    write_context_md_rehydrated(session, blobs_prefix, blobs, &mut out)
        .expect("writing to a Vec cannot fail");
    out
}

/// `context.md` as bytes.
pub fn context_md(session: &Session, blobs_prefix: &str) -> Vec<u8> {
    let mut out = Vec::new();
    write_context_md(session, blobs_prefix, &mut out).expect("writing to a Vec cannot fail");
    out
}

/// The shortest run of backticks that no run inside `text` matches (at least three).
fn fence_for(text: &str) -> String {
    let (mut longest, mut run) = (0, 0);
    for b in text.bytes() {
        run = if b == b'`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    "`".repeat((longest + 1).max(3))
}

/// Where tool output is cut: after [`OUTPUT_MAX_LINES`] lines or [`OUTPUT_MAX_BYTES`] bytes
/// (at a character boundary), whichever comes first; `text.len()` when it fits.
pub(super) fn cut_point(text: &str) -> usize {
    let by_lines = memchr::memchr_iter(b'\n', text.as_bytes())
        .nth(OUTPUT_MAX_LINES - 1)
        .map_or(text.len(), |at| at + 1);
    let mut cut = by_lines.min(OUTPUT_MAX_BYTES).min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    if cut == text.len() - usize::from(text.ends_with('\n')) {
        // Only the final newline would be cut: the text fits.
        return text.len();
    }
    cut
}

/// The number of lines of `text` (a final newline ends the last line, it opens none).
pub(super) fn line_count(text: &str) -> usize {
    let newlines = memchr::memchr_iter(b'\n', text.as_bytes()).count();
    newlines + usize::from(!text.is_empty() && !text.ends_with('\n'))
}

struct Markdown<'a, W: Write + ?Sized> {
    out: &'a mut W,
    blobs_prefix: &'a str,
}

impl<W: Write + ?Sized> Markdown<'_, W> {
    /// A fenced block holding all of `text`.
    fn fenced(&mut self, text: &str, lang: &str) -> io::Result<()> {
        let fence = fence_for(text);
        writeln!(self.out, "{fence}{lang}")?;
        self.out.write_all(text.as_bytes())?;
        if !text.ends_with('\n') {
            self.out.write_all(b"\n")?;
        }
        writeln!(self.out, "{fence}\n")
    }
}

impl<W: Write + ?Sized> Sink for Markdown<'_, W> {
    fn facts(&mut self, f: &Facts) -> io::Result<()> {
        writeln!(self.out, "# {}\n", f.title)?;
        writeln!(self.out, "- session: `{}`", f.id)?;
        if let Some(cwd) = &f.cwd {
            writeln!(self.out, "- cwd: `{cwd}`")?;
        }
        match &f.leaf {
            Some(leaf) => writeln!(self.out, "- leaf: `{leaf}`")?,
            None => writeln!(self.out, "- leaf: none")?,
        }
        writeln!(self.out, "- messages: {}", f.messages)?;
        writeln!(self.out, "- thinking level: {}", f.thinking_level)?;
        if let Some(model) = &f.model {
            writeln!(self.out, "- model: {model}")?;
        }
        writeln!(self.out)
    }

    fn heading(&mut self, h: &Heading) -> io::Result<()> {
        write!(self.out, "## {}. {}", h.n, h.role)?;
        if let Some(detail) = &h.detail {
            write!(self.out, " · {detail}")?;
        }
        if let Some(time) = &h.time {
            write!(self.out, " · {time}")?;
        }
        if let Some(id) = &h.entry_id {
            write!(self.out, " · `{id}`")?;
        }
        writeln!(self.out, "\n")
    }

    /// Prose written as written, followed by a blank line.
    fn text(&mut self, text: &str) -> io::Result<()> {
        self.out.write_all(text.as_bytes())?;
        self.out
            .write_all(if text.ends_with('\n') { b"\n" } else { b"\n\n" })
    }

    fn thinking(&mut self, text: &str) -> io::Result<()> {
        writeln!(self.out, "<details><summary>thinking</summary>\n")?;
        self.text(text)?;
        writeln!(self.out, "</details>\n")
    }

    fn redacted_thinking(&mut self) -> io::Result<()> {
        writeln!(self.out, "*(redacted thinking)*\n")
    }

    fn tool_call(
        &mut self,
        name: &str,
        id: Option<&str>,
        arguments: Option<&Value>,
    ) -> io::Result<()> {
        write!(self.out, "**Tool call** `{name}`")?;
        if let Some(id) = id {
            write!(self.out, " · `{id}`")?;
        }
        writeln!(self.out, "\n")?;
        match arguments {
            Some(args) => self.fenced(&json::to_pretty(args), "json"),
            None => Ok(()),
        }
    }

    fn code(&mut self, text: &str, lang: &str) -> io::Result<()> {
        self.fenced(text, lang)
    }

    /// Tool output: a fenced block cut past the limits, with the full size when cut.
    fn output(&mut self, text: &str, lang: &str) -> io::Result<()> {
        if text.is_empty() {
            return writeln!(self.out, "*(no output)*\n");
        }
        let cut = cut_point(text);
        let kept = &text[..cut];
        let fence = fence_for(kept);
        writeln!(self.out, "{fence}{lang}")?;
        self.out.write_all(kept.as_bytes())?;
        if !kept.ends_with('\n') {
            self.out.write_all(b"\n")?;
        }
        writeln!(self.out, "{fence}")?;
        if cut < text.len() {
            writeln!(
                self.out,
                "… (truncated: {} bytes, {} lines in full)",
                thousands(text.len() as u64),
                thousands(line_count(text) as u64)
            )?;
        }
        writeln!(self.out)
    }

    fn image(&mut self, image: Image<'_>) -> io::Result<()> {
        match image {
            Image::Blob { hash, .. } => {
                writeln!(self.out, "![image]({}{hash})\n", self.blobs_prefix)
            }
            Image::InvalidRef => writeln!(self.out, "*[image: invalid blob reference]*\n"),
            Image::Inline { mime, bytes } => writeln!(
                self.out,
                "*[image: {mime}, {} bytes inline, not shown]*\n",
                thousands(bytes as u64)
            ),
            Image::Empty => writeln!(self.out, "*[image]*\n"),
        }
    }

    fn unknown_block(&mut self, block_type: &str) -> io::Result<()> {
        writeln!(self.out, "*[{block_type} block]*\n")
    }

    fn error_result(&mut self) -> io::Result<()> {
        writeln!(self.out, "**Error**\n")
    }

    fn stopped(&mut self, reason: &str, error: Option<&str>) -> io::Result<()> {
        match error {
            Some(error) => writeln!(self.out, "*Stopped: {reason} — {error}*\n"),
            None => writeln!(self.out, "*Stopped: {reason}*\n"),
        }
    }

    fn compaction(&mut self, tokens_before: &str) -> io::Result<()> {
        writeln!(
            self.out,
            "**Compaction summary** ({tokens_before} tokens before compaction)\n"
        )
    }

    fn branch_summary(&mut self, from: &str) -> io::Result<()> {
        writeln!(self.out, "**Branch summary** (branched from `{from}`)\n")
    }

    fn status(&mut self, status: &[String]) -> io::Result<()> {
        writeln!(self.out, "*{}*\n", status.join(", "))
    }

    fn files(&mut self, files: &[(String, Option<String>)]) -> io::Result<()> {
        for (path, lines) in files {
            write!(self.out, "- `{path}`")?;
            if let Some(lines) = lines {
                write!(self.out, " ({lines})")?;
            }
            writeln!(self.out)?;
        }
        writeln!(self.out)
    }

    fn end_message(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_outgrow_backtick_runs_in_the_text() {
        assert_eq!(fence_for("plain"), "```");
        assert_eq!(fence_for("a ``` b ```` c"), "`````");
    }

    #[test]
    fn output_is_cut_by_lines_or_bytes_at_a_character_boundary() {
        let short = "a\nb\n";
        assert_eq!(cut_point(short), short.len());
        let lines: String = (0..50).map(|i| format!("{i}\n")).collect();
        let cut = cut_point(&lines);
        assert_eq!(line_count(&lines[..cut]), OUTPUT_MAX_LINES);
        assert!(lines[..cut].ends_with("39\n"));
        let exactly: String = (0..OUTPUT_MAX_LINES).map(|i| format!("{i}\n")).collect();
        assert_eq!(cut_point(&exactly), exactly.len());
        let wide = "é".repeat(OUTPUT_MAX_BYTES);
        let cut = cut_point(&wide);
        assert!(cut <= OUTPUT_MAX_BYTES && wide.is_char_boundary(cut));
        assert_eq!(cut, OUTPUT_MAX_BYTES);
        let odd = format!("x{}", "é".repeat(OUTPUT_MAX_BYTES));
        assert_eq!(cut_point(&odd), OUTPUT_MAX_BYTES - 1);
    }

    #[test]
    fn lines_are_counted_as_editors_count_them() {
        assert_eq!(line_count(""), 0);
        assert_eq!(line_count("a"), 1);
        assert_eq!(line_count("a\n"), 1);
        assert_eq!(line_count("a\nb"), 2);
    }
}
