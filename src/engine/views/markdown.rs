//! `context.md`: the context at the session's current leaf (what the agent would send to the
//! model, [`Session::build_context`]) as readable Markdown.
//!
//! Format (invariants):
//! - The first line is `# <title>` (the header's title on one line, else `Session <id>`),
//!   followed by a blank line and a list of facts: ``- session: `<id>` ``,
//!   ``- cwd: `<cwd>` ``, ``- leaf: `<entry id>` `` (`none` for a null leaf; for a leaf marker, the entry it
//!   stands for: see [`crate::leaf_marker`]), `- messages: <n>`,
//!   `- thinking level: <level>` and, when the context names one, `- model: <provider/model>`.
//! - Then one section per context message, in context order, each opened by one heading line
//!   ``## <n>. <role>[ · <detail>][ · <time>][ · `<entry id>`]`` and ended by a blank line:
//!   `<n>` counts from 1; `<role>` is the message's `role` as stored; `<detail>` is the model
//!   (`provider/model`) of an assistant message, the tool name of a tool result (`, error`
//!   added for an error result) or the `customType` of a custom message; `<time>` is the
//!   ISO timestamp of the entry the message comes from (the message's own `timestamp`
//!   when the entry has none); `<entry id>` is that entry's id (the compaction's for a
//!   compaction summary).
//! - User, developer, assistant and custom text is written as written, unshortened.
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

use std::borrow::Cow;
use std::io::{self, Write};

use super::super::blob::{parse_blob_ref, BlobStore, BLOB_REF_PREFIX};
use super::super::json::{self, Object, Value};
use super::super::session::Session;
use super::super::time::format_iso_millis;
use super::{one_line, thousands};

/// Tool output longer than this many bytes is cut.
pub const OUTPUT_MAX_BYTES: usize = 2_000;
/// Tool output longer than this many lines is cut.
pub const OUTPUT_MAX_LINES: usize = 40;

/// How long a one-line detail (a model, a tool name, an error message) may get.
const DETAIL_CHARS: usize = 200;

/// Writes `context.md` for the context at the session's current leaf. Image blobs are linked
/// as `<blobs_prefix><sha256>`. The output is written in many small pieces: give a buffer
/// (`Vec<u8>`, `BufWriter`).
pub fn write_context_md<W: Write + ?Sized>(
    session: &Session,
    blobs_prefix: &str,
    out: &mut W,
) -> io::Result<()> {
    write_md(session, blobs_prefix, None, out)
}

/// [`write_context_md`] with cold-spilled content read back from `blobs`
/// ([`crate::cold_spill`]), as the agent shows it: the only read from disk.
pub fn write_context_md_rehydrated<W: Write + ?Sized>(
    session: &Session,
    blobs_prefix: &str,
    blobs: &BlobStore,
    out: &mut W,
) -> io::Result<()> {
    write_md(session, blobs_prefix, Some(blobs), out)
}

/// [`write_context_md_rehydrated`] as bytes.
pub fn context_md_rehydrated(session: &Session, blobs_prefix: &str, blobs: &BlobStore) -> Vec<u8> {
    let mut out = Vec::new();
    write_context_md_rehydrated(session, blobs_prefix, blobs, &mut out)
        .expect("writing to a Vec cannot fail");
    out
}

fn write_md<W: Write + ?Sized>(
    session: &Session,
    blobs_prefix: &str,
    cold: Option<&BlobStore>,
    out: &mut W,
) -> io::Result<()> {
    let ctx = session.build_context();
    let ctx = match cold {
        Some(blobs) => ctx.with_cold_spill_rehydrated(blobs),
        None => ctx,
    };
    let mut md = Markdown { out, blobs_prefix };
    md.facts(session, &ctx)?;
    for (n, (message, &source)) in ctx.messages.iter().zip(&ctx.sources).enumerate() {
        md.message(n + 1, session, source, message)?;
    }
    Ok(())
}

/// `context.md` as bytes.
pub fn context_md(session: &Session, blobs_prefix: &str) -> Vec<u8> {
    let mut out = Vec::new();
    write_context_md(session, blobs_prefix, &mut out).expect("writing to a Vec cannot fail");
    out
}

/// A string value as text (lone surrogates become U+FFFD).
fn text_of(value: Option<&Value>) -> Option<Cow<'_, str>> {
    match value? {
        Value::String(s) => Some(s.to_string_lossy()),
        _ => None,
    }
}

/// A scalar as one line of text: strings as they are, anything else as compact JSON.
fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.to_string_lossy().into_owned(),
        other => json::to_compact(other),
    }
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
fn cut_point(text: &str) -> usize {
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
fn line_count(text: &str) -> usize {
    let newlines = memchr::memchr_iter(b'\n', text.as_bytes()).count();
    newlines + usize::from(!text.is_empty() && !text.ends_with('\n'))
}

struct Markdown<'a, W: Write + ?Sized> {
    out: &'a mut W,
    blobs_prefix: &'a str,
}

impl<W: Write + ?Sized> Markdown<'_, W> {
    fn facts(
        &mut self,
        session: &Session,
        ctx: &super::super::SessionContext<'_>,
    ) -> io::Result<()> {
        let header = session.header();
        let id = one_line(header.id().unwrap_or_default(), usize::MAX);
        let title = header
            .title()
            .map(|t| one_line(t, usize::MAX))
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| format!("Session {id}"));
        writeln!(self.out, "# {title}\n")?;
        writeln!(self.out, "- session: `{id}`")?;
        if let Some(cwd) = header.cwd() {
            writeln!(self.out, "- cwd: `{}`", one_line(cwd, usize::MAX))?;
        }
        match crate::leaf_marker::shown_leaf(session) {
            Some(leaf) => writeln!(self.out, "- leaf: `{}`", one_line(leaf, usize::MAX))?,
            None => writeln!(self.out, "- leaf: none")?,
        }
        writeln!(self.out, "- messages: {}", ctx.messages.len())?;
        writeln!(
            self.out,
            "- thinking level: {}",
            one_line(&scalar_text(&ctx.thinking_level), DETAIL_CHARS)
        )?;
        if let Some(model) = ctx.models.get("default") {
            writeln!(
                self.out,
                "- model: {}",
                one_line(&scalar_text(model), DETAIL_CHARS)
            )?;
        }
        writeln!(self.out)
    }

    fn message(
        &mut self,
        n: usize,
        session: &Session,
        source: usize,
        message: &Value,
    ) -> io::Result<()> {
        let record = session.record(source);
        let empty = Object::new();
        let m = message.as_object().unwrap_or(&empty);
        let role = text_of(m.get("role"))
            .map_or_else(|| "message".to_owned(), |r| one_line(&r, DETAIL_CHARS));
        write!(self.out, "## {n}. {role}")?;
        if let Some(detail) = heading_detail(&role, m) {
            write!(self.out, " · {}", one_line(&detail, DETAIL_CHARS))?;
        }
        let time = match record.timestamp() {
            Some(ts) => Some(one_line(ts, DETAIL_CHARS)),
            None => m
                .get("timestamp")
                .and_then(Value::as_f64)
                .filter(|ms| ms.is_finite())
                .map(|ms| format_iso_millis(ms as i64)),
        };
        if let Some(time) = time {
            write!(self.out, " · {time}")?;
        }
        if let Some(id) = record.id() {
            write!(self.out, " · `{}`", one_line(id, usize::MAX))?;
        }
        writeln!(self.out, "\n")?;
        match role.as_str() {
            "assistant" => {
                self.content(m.get("content"))?;
                self.stop_reason(m)?;
            }
            "toolResult" => self.tool_result(m)?,
            "bashExecution" => self.execution(m, "command", "sh")?,
            "pythonExecution" => self.execution(m, "code", "python")?,
            "compactionSummary" => {
                let tokens = m.get("tokensBefore").map_or_else(
                    || "?".to_owned(),
                    |t| match t.as_f64() {
                        Some(n) if n >= 0.0 && n.fract() == 0.0 && n < 9e15 => thousands(n as u64),
                        _ => scalar_text(t),
                    },
                );
                writeln!(
                    self.out,
                    "**Compaction summary** ({tokens} tokens before compaction)\n"
                )?;
                self.text(text_of(m.get("summary")).as_deref().unwrap_or_default())?;
            }
            "branchSummary" => {
                let from = m.get("fromId").map_or_else(|| "?".to_owned(), scalar_text);
                writeln!(
                    self.out,
                    "**Branch summary** (branched from `{}`)\n",
                    one_line(&from, DETAIL_CHARS)
                )?;
                self.text(text_of(m.get("summary")).as_deref().unwrap_or_default())?;
            }
            "fileMention" => self.file_mention(m)?,
            _ if m.contains_key("content") => self.content(m.get("content"))?,
            _ => self.output(&json::to_pretty(message), "json")?,
        }
        Ok(())
    }

    /// Prose written as written, followed by a blank line.
    fn text(&mut self, text: &str) -> io::Result<()> {
        if text.trim().is_empty() {
            return Ok(());
        }
        self.out.write_all(text.as_bytes())?;
        self.out
            .write_all(if text.ends_with('\n') { b"\n" } else { b"\n\n" })
    }

    /// A `content` value: a string, or an array of blocks.
    fn content(&mut self, content: Option<&Value>) -> io::Result<()> {
        let Some(content) = content else {
            return Ok(());
        };
        match content.expanded().as_ref() {
            Value::String(s) => self.text(&s.to_string_lossy()),
            // Blocks stay raw in a record's own `content` (a custom message's).
            Value::Array(blocks) => blocks.iter().try_for_each(|b| self.block(&b.expanded())),
            Value::Null => Ok(()),
            other => self.output(&json::to_pretty(other), "json"),
        }
    }

    fn block(&mut self, block: &Value) -> io::Result<()> {
        let Some(b) = block.as_object() else {
            return self.output(&json::to_pretty(block), "json");
        };
        match b.get_str("type").unwrap_or_default() {
            "text" => self.text(text_of(b.get("text")).as_deref().unwrap_or_default()),
            "thinking" => {
                let thinking = text_of(b.get("thinking")).unwrap_or_default();
                if thinking.trim().is_empty() {
                    return Ok(());
                }
                writeln!(self.out, "<details><summary>thinking</summary>\n")?;
                self.text(&thinking)?;
                writeln!(self.out, "</details>\n")
            }
            "redactedThinking" => writeln!(self.out, "*(redacted thinking)*\n"),
            "toolCall" => {
                let name = b.get("name").map(scalar_text).unwrap_or_default();
                write!(
                    self.out,
                    "**Tool call** `{}`",
                    one_line(&name, DETAIL_CHARS)
                )?;
                if let Some(id) = b.get("id") {
                    write!(
                        self.out,
                        " · `{}`",
                        one_line(&scalar_text(id), DETAIL_CHARS)
                    )?;
                }
                writeln!(self.out, "\n")?;
                match b.get("arguments") {
                    Some(args) => self.fenced(&json::to_pretty(args), "json"),
                    None => Ok(()),
                }
            }
            "image" => self.image(b),
            other => writeln!(self.out, "*[{} block]*\n", one_line(other, DETAIL_CHARS)),
        }
    }

    fn image(&mut self, block: &Object) -> io::Result<()> {
        match block.get_str("data") {
            Some(data) if data.starts_with(BLOB_REF_PREFIX) => match parse_blob_ref(data) {
                Some(hash) => writeln!(self.out, "![image]({}{hash})\n", self.blobs_prefix),
                None => writeln!(self.out, "*[image: invalid blob reference]*\n"),
            },
            Some(data) => {
                let mime = block.get_str("mimeType").unwrap_or("unknown type");
                let bytes = data.trim_end_matches('=').len() * 3 / 4;
                writeln!(
                    self.out,
                    "*[image: {}, {} bytes inline, not shown]*\n",
                    one_line(mime, DETAIL_CHARS),
                    thousands(bytes as u64)
                )
            }
            None => writeln!(self.out, "*[image]*\n"),
        }
    }

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

    fn tool_result(&mut self, m: &Object) -> io::Result<()> {
        if m.get("isError") == Some(&Value::Bool(true)) {
            writeln!(self.out, "**Error**\n")?;
        }
        let content = m.get("content").map(Value::expanded);
        let blocks: Vec<Cow<'_, Value>> = match content.as_deref() {
            Some(Value::String(s)) => return self.output(&s.to_string_lossy(), "text"),
            Some(Value::Array(blocks)) => blocks.iter().map(Value::expanded).collect(),
            _ => Vec::new(),
        };
        let mut output = String::new();
        for block in &blocks {
            if let Some(text) = block.as_object().and_then(|b| {
                (b.get_str("type") == Some("text")).then(|| text_of(b.get("text")))?
            }) {
                if !output.is_empty() {
                    output.push('\n');
                }
                output.push_str(&text);
            }
        }
        self.output(&output, "text")?;
        for block in &blocks {
            match block.as_object() {
                Some(b) if b.get_str("type") == Some("text") => {}
                Some(b) if b.get_str("type") == Some("image") => self.image(b)?,
                _ => self.block(block)?,
            }
        }
        Ok(())
    }

    /// A bash or python execution: the command or code, then its output and exit status.
    fn execution(&mut self, m: &Object, input_key: &str, lang: &str) -> io::Result<()> {
        let input = text_of(m.get(input_key)).unwrap_or_default();
        let input = if lang == "sh" {
            Cow::Owned(format!("$ {input}"))
        } else {
            input
        };
        self.fenced(&input, lang)?;
        self.output(
            text_of(m.get("output")).as_deref().unwrap_or_default(),
            "text",
        )?;
        let mut status = Vec::new();
        if let Some(code) = m.get("exitCode").filter(|c| !c.is_null()) {
            status.push(format!("exit code {}", scalar_text(code)));
        }
        if m.get("cancelled") == Some(&Value::Bool(true)) {
            status.push("cancelled".to_owned());
        }
        if m.get("truncated") == Some(&Value::Bool(true)) {
            status.push("output truncated".to_owned());
        }
        if status.is_empty() {
            return Ok(());
        }
        writeln!(self.out, "*{}*\n", status.join(", "))
    }

    fn stop_reason(&mut self, m: &Object) -> io::Result<()> {
        let reason = text_of(m.get("stopReason"));
        let error = text_of(m.get("errorMessage"));
        let normal = matches!(reason.as_deref(), None | Some("stop" | "toolUse"));
        if normal && error.is_none() {
            return Ok(());
        }
        let mut line = format!(
            "*Stopped: {}",
            one_line(reason.as_deref().unwrap_or("?"), DETAIL_CHARS)
        );
        if let Some(error) = error {
            line.push_str(" — ");
            line.push_str(&one_line(&error, DETAIL_CHARS));
        }
        writeln!(self.out, "{line}*\n")
    }

    fn file_mention(&mut self, m: &Object) -> io::Result<()> {
        let files = m.get("files").map(Value::expanded);
        let Some(Value::Array(files)) = files.as_deref() else {
            return Ok(());
        };
        for file in files.iter().map(Value::expanded) {
            let Some(f) = file.as_object() else { continue };
            let path = f.get("path").map(scalar_text).unwrap_or_default();
            write!(self.out, "- `{}`", one_line(&path, usize::MAX))?;
            if let Some(lines) = f.get("lineCount").and_then(Value::as_f64) {
                let unit = if lines == 1.0 { "line" } else { "lines" };
                write!(self.out, " ({} {unit})", json::format_js_number(lines))?;
            }
            writeln!(self.out)?;
        }
        writeln!(self.out)
    }
}

/// The detail a heading names after the role, if any.
fn heading_detail(role: &str, m: &Object) -> Option<String> {
    match role {
        "assistant" => match (text_of(m.get("provider")), text_of(m.get("model"))) {
            (Some(p), Some(model)) => Some(format!("{p}/{model}")),
            (None, Some(model)) => Some(model.into_owned()),
            (Some(p), None) => Some(p.into_owned()),
            (None, None) => None,
        },
        "toolResult" => {
            let name = m
                .get("toolName")
                .map(scalar_text)
                .unwrap_or_else(|| "?".to_owned());
            Some(if m.get("isError") == Some(&Value::Bool(true)) {
                format!("{name}, error")
            } else {
                name
            })
        }
        "custom" => m.get("customType").map(scalar_text),
        _ => None,
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
