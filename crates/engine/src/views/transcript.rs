//! The context at the session's leaf as a sequence of parts — the facts, then per message a
//! heading and its pieces (prose, thinking, tool calls, output, images, summaries) — which
//! each reading view renders in its own syntax ([`super::markdown`], [`super::html`]). The
//! rules of what a message shows, in which order, and how each value is read from the JSON
//! are here once; a renderer only chooses how a part looks.
//!
//! Invariants:
//! - Messages come in context order ([`Session::build_context`], rehydrated from the blob
//!   store when asked), numbered from 1, each as [`Sink::heading`], its pieces, then
//!   [`Sink::end_message`].
//! - One-line values (roles, models, tool names, ids, times, paths) come through
//!   [`one_line`]: no control character, no newline; prose, thinking, code and output come
//!   as written (lone surrogates as U+FFFD) less a terminal's control sequences and the
//!   control characters other than newline and tab ([`super::terminal`]), so that no view
//!   replays them on a terminal. Nothing here escapes for a syntax: that is the renderer's.
//! - Blank prose and blank thinking are not passed on. Base64 image data never is: an
//!   image is a blob hash, an invalid reference, or an inline image's type and size.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io;

use super::terminal::without_escapes;
use super::{one_line, thousands, title_line};
use crate::format::blob::{parse_blob_ref, BlobStore, BLOB_REF_PREFIX};
use crate::format::cold_spill::rehydrate_record;
use crate::format::time::format_iso_millis;
use crate::json::{self, Object, Value};
use crate::session::tree::Session;
use crate::session::usage::UsageTotals;
use crate::store::discovery::user_text;

/// How long a one-line detail (a model, a tool name, an error message) may get.
pub const DETAIL_CHARS: usize = 200;
/// How long a title may get.
pub const TITLE_CHARS: usize = 100;

/// What the page says of the session before its messages.
pub struct Facts {
    /// The session's title by the rule of every listing — the header's title, else the
    /// first line of its first prompt — on one line of at most [`TITLE_CHARS`]
    /// characters, else `Session <id>`; ` · at <entry>` added for a context built at an
    /// entry named by the caller.
    pub title: String,
    /// The header's session id on one line.
    pub id: String,
    /// The header's `cwd` on one line, if it has one.
    pub cwd: Option<String>,
    /// The leaf shown (for a leaf marker, the entry it stands for); `None` for a null leaf.
    pub leaf: Option<String>,
    /// How many messages the context holds (on every page).
    pub messages: usize,
    /// The context's thinking level on one line (`off` unless set; a non-string
    /// value as compact JSON).
    pub thinking_level: String,
    /// The context's default model, if it names one.
    pub model: Option<String>,
    /// The usage of every message of the context that has one, summed: this branch's.
    pub usage: UsageTotals,
    /// The usage of every entry of the session, every branch (as `gjcfs ls --long`).
    pub session_usage: UsageTotals,
    /// The page of the messages walked (all of them in one page without a [`Window`]).
    pub page: PageOf,
    /// The user prompts on the page, for a list of contents: each message's number and the
    /// first line of its text (at most [`TITLE_CHARS`] characters).
    pub prompts: Vec<(usize, String)>,
}

/// A window onto the context's messages: pages of `size` messages counted from the first
/// message, so the last page holds the newest and may be short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// How many messages a page holds; 0 means one page of all of them.
    pub size: usize,
    /// From 1; `None` (or past the end): the last page.
    pub page: Option<usize>,
}

/// Which page of how many the walk gives, and the message numbers on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageOf {
    /// From 1.
    pub page: usize,
    /// How many pages there are (at least 1).
    pub pages: usize,
    /// The numbers (from 1) of the first message on the page and of the one after the last.
    pub first: usize,
    /// The number of the message after the last one on the page.
    pub end: usize,
}

impl PageOf {
    /// The page of `window` in a context of `messages` messages.
    pub fn of(messages: usize, window: Option<Window>) -> PageOf {
        let Some(window) = window.filter(|w| w.size > 0) else {
            return PageOf {
                page: 1,
                pages: 1,
                first: 1,
                end: messages + 1,
            };
        };
        let pages = messages.div_ceil(window.size).max(1);
        let page = window
            .page
            .filter(|&p| (1..=pages).contains(&p))
            .unwrap_or(pages);
        let first = (page - 1) * window.size + 1;
        PageOf {
            page,
            pages,
            first,
            end: (first + window.size).min(messages + 1),
        }
    }
}

/// The line that opens a message.
pub struct Heading {
    /// From 1, in context order.
    pub n: usize,
    /// The message's `role` as stored (`message` when it has none).
    pub role: String,
    /// The model of an assistant message, the tool of a tool result (`, error` added), the
    /// `customType` of a custom message.
    pub detail: Option<String>,
    /// The ISO time of the entry the message comes from (else the message's own).
    pub time: Option<String>,
    /// The entry's id (the compaction's for a compaction summary).
    pub entry_id: Option<String>,
    /// The entry's label, if it has one.
    pub label: Option<String>,
    /// The usage the message records, as the session's statistics count it.
    pub usage: Option<UsageTotals>,
}

/// An image block.
pub enum Image<'a> {
    /// Stored in the blob store under this SHA-256 (64 lowercase hex digits, checked), with
    /// the block's `mimeType` as written (untrusted).
    Blob {
        /// The blob's SHA-256, as 64 lower-case hex digits.
        hash: &'a str,
        /// The block's `mimeType`, if it is a well-formed string (untrusted).
        mime: Option<&'a str>,
    },
    /// A `blob:` reference that names no valid hash.
    InvalidRef,
    /// Inline base64 data, not passed on: its MIME type and decoded size.
    Inline {
        /// The block's `mimeType` on one line, else `unknown type`.
        mime: String,
        /// The decoded size in bytes, estimated from the length of the base64 text.
        bytes: usize,
    },
    /// An image block without data.
    Empty,
}

/// A renderer of the parts.
pub trait Sink {
    /// The facts, first, before any message.
    fn facts(&mut self, facts: &Facts) -> io::Result<()>;
    /// A message opens; its pieces follow, then [`Sink::end_message`].
    fn heading(&mut self, heading: &Heading) -> io::Result<()>;
    /// Prose, never blank.
    fn text(&mut self, text: &str) -> io::Result<()>;
    /// A thinking block's text, never blank.
    fn thinking(&mut self, text: &str) -> io::Result<()>;
    /// A thinking block whose content the provider redacted.
    fn redacted_thinking(&mut self) -> io::Result<()>;
    /// A tool call: its name, its call id, and its arguments as written (untrusted: any
    /// JSON value).
    fn tool_call(
        &mut self,
        name: &str,
        id: Option<&str>,
        arguments: Option<&Value>,
    ) -> io::Result<()>;
    /// Code shown whole (a bash command with its `$ `, python code): `lang` is `sh` or
    /// `python`.
    fn code(&mut self, text: &str, lang: &str) -> io::Result<()>;
    /// Output a reader may want cut or folded (a tool result's text, an execution's output,
    /// the JSON of a value of unknown shape): `lang` is `text` or `json`.
    fn output(&mut self, text: &str, lang: &str) -> io::Result<()>;
    /// An image block.
    fn image(&mut self, image: Image<'_>) -> io::Result<()>;
    /// A block of a type the views do not know.
    fn unknown_block(&mut self, block_type: &str) -> io::Result<()>;
    /// A tool result marked as an error (before its output).
    fn error_result(&mut self) -> io::Result<()>;
    /// An assistant message that stopped abnormally: the reason, and the error message.
    fn stopped(&mut self, reason: &str, error: Option<&str>) -> io::Result<()>;
    /// A compaction summary opens: the tokens before the compaction (grouped digits, or
    /// `?`). Its summary follows as [`Sink::text`].
    fn compaction(&mut self, tokens_before: &str) -> io::Result<()>;
    /// A branch summary opens: the entry branched from. Its summary follows as text.
    fn branch_summary(&mut self, from: &str) -> io::Result<()>;
    /// An execution's end: `exit code N`, `cancelled`, `output truncated`, in that order.
    fn status(&mut self, status: &[String]) -> io::Result<()>;
    /// Mentioned files: each path, with its line count (`1 line`, `12 lines`) if known.
    fn files(&mut self, files: &[(String, Option<String>)]) -> io::Result<()>;
    /// The message opened by the last [`Sink::heading`] is complete.
    fn end_message(&mut self) -> io::Result<()>;
}

/// Walks the context at the session's current leaf (or at the entry `leaf`) into `sink`,
/// the messages of one page of `window` only (all without one); with `cold`, cold-spilled
/// content is read back from that blob store first (the only read from disk).
pub fn walk(
    session: &Session,
    leaf: Option<&str>,
    cold: Option<&BlobStore>,
    window: Option<Window>,
    sink: &mut impl Sink,
) -> io::Result<()> {
    let ctx = match leaf {
        Some(id) => session.build_context_for(id),
        None => session.build_context(),
    };
    let ctx = match cold {
        Some(blobs) => ctx.with_cold_spill_rehydrated(blobs),
        None => ctx,
    };
    let counted = session.counted_usage().1;
    // Summed in file order: a sum of costs in another order may differ in its last bits,
    // and the page would then differ from one rendering to the next.
    let session_usage = counted
        .iter()
        .fold(UsageTotals::default(), |sum, c| sum.plus(&c.amounts));
    let usage: HashMap<usize, UsageTotals> =
        counted.into_iter().map(|c| (c.index, c.amounts)).collect();
    let facts = facts(session, &ctx, (&usage, session_usage), leaf, window, cold);
    let page = facts.page;
    sink.facts(&facts)?;
    let mut walker = Walker { sink };
    let on_page = ctx
        .messages
        .iter()
        .zip(&ctx.sources)
        .enumerate()
        .skip(page.first - 1)
        .take(page.end - page.first);
    for (n, (message, &source)) in on_page {
        walker.message(n + 1, session, source, message, usage.get(&source))?;
    }
    Ok(())
}

/// The facts of the context `ctx`, built at the entry `leaf` (else the current leaf) and
/// shown through `window`.
fn facts(
    session: &Session,
    ctx: &super::super::SessionContext<'_>,
    (usage, session_usage): (&HashMap<usize, UsageTotals>, UsageTotals),
    leaf: Option<&str>,
    window: Option<Window>,
    cold: Option<&BlobStore>,
) -> Facts {
    let header = session.header();
    let id = one_line(header.id().unwrap_or_default(), usize::MAX);
    // The one title rule of every listing: the header's title, else the first prompt.
    // (A cold-spilled first prompt is read back, as the messages are.)
    let first_prompt = session.records().iter().find_map(|record| match cold {
        Some(blobs) => user_text(&rehydrate_record(record, blobs)),
        None => user_text(record),
    });
    let mut title = title_line(header.title(), first_prompt.as_deref(), TITLE_CHARS);
    if title.is_empty() {
        title = format!("Session {id}");
    }
    // A page at another entry than the session's leaf says so.
    if let Some(at) = leaf {
        title = format!("{title} · at {}", one_line(at, usize::MAX));
    }
    let mut total = UsageTotals::default();
    for source in &ctx.sources {
        if let Some(amounts) = usage.get(source) {
            total = total.plus(amounts);
        }
    }
    let page = PageOf::of(ctx.messages.len(), window);
    Facts {
        prompts: prompts(&ctx.messages, page),
        title,
        cwd: header.cwd().map(|cwd| one_line(cwd, usize::MAX)),
        leaf: leaf
            .or_else(|| crate::manager::leaf_marker::shown_leaf(session))
            .map(|leaf| one_line(leaf, usize::MAX)),
        messages: ctx.messages.len(),
        thinking_level: one_line(&scalar_text(&ctx.thinking_level), DETAIL_CHARS),
        model: ctx
            .models
            .get("default")
            .map(|m| one_line(&scalar_text(m), DETAIL_CHARS)),
        usage: total,
        session_usage,
        page,
        id,
    }
}

/// The user prompts among the messages on `page` (see [`Facts::prompts`]).
fn prompts(messages: &[Cow<'_, Value>], page: PageOf) -> Vec<(usize, String)> {
    let on_page = messages
        .iter()
        .enumerate()
        .skip(page.first - 1)
        .take(page.end - page.first);
    on_page
        .filter_map(|(i, message)| {
            let m = message.as_object()?;
            if m.get_str("role") != Some("user") {
                return None;
            }
            let content = m.get("content")?.expanded();
            let text = match content.as_ref() {
                Value::String(s) => s.to_string_lossy().into_owned(),
                Value::Array(blocks) => blocks.iter().find_map(|b| {
                    let b = b.expanded();
                    let b = b.as_object()?;
                    if b.get_str("type") != Some("text") {
                        return None;
                    }
                    text_of(b.get("text")).map(Cow::into_owned)
                })?,
                _ => return None,
            };
            let line = title_line(None, Some(&without_escapes(&text)), TITLE_CHARS);
            Some((
                i + 1,
                if line.is_empty() {
                    "(no text)".to_owned()
                } else {
                    line
                },
            ))
        })
        .collect()
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

struct Walker<'a, S: Sink> {
    sink: &'a mut S,
}

impl<S: Sink> Walker<'_, S> {
    fn message(
        &mut self,
        n: usize,
        session: &Session,
        source: usize,
        message: &Value,
        usage: Option<&UsageTotals>,
    ) -> io::Result<()> {
        let record = session.record(source);
        let empty = Object::new();
        let m = message.as_object().unwrap_or(&empty);
        let role = text_of(m.get("role"))
            .map_or_else(|| "message".to_owned(), |r| one_line(&r, DETAIL_CHARS));
        let time = match record.timestamp() {
            Some(ts) => Some(one_line(ts, DETAIL_CHARS)),
            None => m
                .get("timestamp")
                .and_then(Value::as_f64)
                .filter(|ms| ms.is_finite())
                .map(|ms| format_iso_millis(ms as i64)),
        };
        let entry_id = record.id().map(|id| one_line(id, usize::MAX));
        self.sink.heading(&Heading {
            n,
            detail: heading_detail(&role, m).map(|d| one_line(&d, DETAIL_CHARS)),
            time,
            label: entry_id
                .as_deref()
                .and_then(|id| session.label(id))
                .map(|l| one_line(l, DETAIL_CHARS)),
            entry_id,
            usage: usage.copied(),
            role: role.clone(),
        })?;
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
                self.sink.compaction(&tokens)?;
                self.text(text_of(m.get("summary")).as_deref().unwrap_or_default())?;
            }
            "branchSummary" => {
                let from = m.get("fromId").map_or_else(|| "?".to_owned(), scalar_text);
                self.sink.branch_summary(&one_line(&from, DETAIL_CHARS))?;
                self.text(text_of(m.get("summary")).as_deref().unwrap_or_default())?;
            }
            "fileMention" => self.file_mention(m)?,
            _ if m.contains_key("content") => self.content(m.get("content"))?,
            _ => self.sink.output(&json::to_pretty(message), "json")?,
        }
        self.sink.end_message()
    }

    fn text(&mut self, text: &str) -> io::Result<()> {
        if text.trim().is_empty() {
            return Ok(());
        }
        self.sink.text(&without_escapes(text))
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
            other => self.sink.output(&json::to_pretty(other), "json"),
        }
    }

    fn block(&mut self, block: &Value) -> io::Result<()> {
        let Some(b) = block.as_object() else {
            return self.sink.output(&json::to_pretty(block), "json");
        };
        match b.get_str("type").unwrap_or_default() {
            "text" => self.text(text_of(b.get("text")).as_deref().unwrap_or_default()),
            "thinking" => {
                let thinking = text_of(b.get("thinking")).unwrap_or_default();
                if thinking.trim().is_empty() {
                    return Ok(());
                }
                self.sink.thinking(&without_escapes(&thinking))
            }
            "redactedThinking" => self.sink.redacted_thinking(),
            "toolCall" => {
                let name = b.get("name").map(scalar_text).unwrap_or_default();
                let id = b
                    .get("id")
                    .map(|id| one_line(&scalar_text(id), DETAIL_CHARS));
                self.sink.tool_call(
                    &one_line(&name, DETAIL_CHARS),
                    id.as_deref(),
                    b.get("arguments"),
                )
            }
            "image" => self.image(b),
            other => self.sink.unknown_block(&one_line(other, DETAIL_CHARS)),
        }
    }

    fn image(&mut self, block: &Object) -> io::Result<()> {
        let image = match block.get_str("data") {
            Some(data) if data.starts_with(BLOB_REF_PREFIX) => match parse_blob_ref(data) {
                Some(hash) => {
                    let mime = block.get_str("mimeType");
                    return self.sink.image(Image::Blob { hash, mime });
                }
                None => Image::InvalidRef,
            },
            Some(data) => Image::Inline {
                mime: one_line(
                    block.get_str("mimeType").unwrap_or("unknown type"),
                    DETAIL_CHARS,
                ),
                bytes: data.trim_end_matches('=').len() * 3 / 4,
            },
            None => Image::Empty,
        };
        self.sink.image(image)
    }

    fn tool_result(&mut self, m: &Object) -> io::Result<()> {
        if m.get("isError") == Some(&Value::Bool(true)) {
            self.sink.error_result()?;
        }
        let content = m.get("content").map(Value::expanded);
        let blocks: Vec<Cow<'_, Value>> = match content.as_deref() {
            Some(Value::String(s)) => {
                return self
                    .sink
                    .output(&without_escapes(&s.to_string_lossy()), "text")
            }
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
        self.sink.output(&without_escapes(&output), "text")?;
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
        self.sink.code(&without_escapes(&input), lang)?;
        self.sink.output(
            &without_escapes(text_of(m.get("output")).as_deref().unwrap_or_default()),
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
        self.sink.status(&status)
    }

    fn stop_reason(&mut self, m: &Object) -> io::Result<()> {
        let reason = text_of(m.get("stopReason"));
        let error = text_of(m.get("errorMessage"));
        let normal = matches!(reason.as_deref(), None | Some("stop" | "toolUse"));
        if normal && error.is_none() {
            return Ok(());
        }
        self.sink.stopped(
            &one_line(reason.as_deref().unwrap_or("?"), DETAIL_CHARS),
            error.map(|e| one_line(&e, DETAIL_CHARS)).as_deref(),
        )
    }

    fn file_mention(&mut self, m: &Object) -> io::Result<()> {
        let files = m.get("files").map(Value::expanded);
        let Some(Value::Array(files)) = files.as_deref() else {
            return Ok(());
        };
        let mut listed = Vec::new();
        for file in files.iter().map(Value::expanded) {
            let Some(f) = file.as_object() else { continue };
            let path = f.get("path").map(scalar_text).unwrap_or_default();
            let lines = f.get("lineCount").and_then(Value::as_f64).map(|lines| {
                let unit = if lines == 1.0 { "line" } else { "lines" };
                format!("{} {unit}", json::format_js_number(lines))
            });
            listed.push((one_line(&path, usize::MAX), lines));
        }
        self.sink.files(&listed)
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
    fn pages_count_from_the_first_message_and_the_last_is_the_default() {
        let window = |page| Some(Window { size: 1000, page });
        assert_eq!(
            PageOf::of(2500, window(None)),
            PageOf {
                page: 3,
                pages: 3,
                first: 2001,
                end: 2501
            }
        );
        assert_eq!(
            PageOf::of(2500, window(Some(1))),
            PageOf {
                page: 1,
                pages: 3,
                first: 1,
                end: 1001
            }
        );
        assert_eq!(
            PageOf::of(2500, window(Some(9))).page,
            3,
            "past the end: the last"
        );
        assert_eq!(
            PageOf::of(0, window(None)),
            PageOf {
                page: 1,
                pages: 1,
                first: 1,
                end: 1
            }
        );
        assert_eq!(
            PageOf::of(7, None),
            PageOf {
                page: 1,
                pages: 1,
                first: 1,
                end: 8
            }
        );
    }
}
