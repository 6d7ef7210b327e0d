//! `read_session`: a window of the context at a session's leaf, each message as text with
//! its entry id, role and time, long ones cut with a note that says how to read on.
//!
//! The messages are those `gjcfs context` gives (the agent's load-time sanitizer applied,
//! cold-spilled content read back from the blob store), walked by the same reading views
//! as `context.md` ([`transcript::walk`]); this module only says how each part reads as
//! plain text.

use std::io;
use std::sync::Arc;

use gjcfs_engine::format::blob::BlobStore;
use gjcfs_engine::json as engine_json;
use gjcfs_engine::session::tree::Session;
use gjcfs_engine::storage::FileStorage;
use gjcfs_engine::views::transcript::{self, Facts, Heading, Image, Sink};
use serde_json::{json, Value};

use super::answer::{cut, Answer, ToolError};
use super::params::{self, ReadSession, DEFAULT_CHARS, MAX_CHARS};
use super::resume::resume_command;
use super::sessions::{load, session_file};
use crate::cli::store::StoreArgs;

/// How many bytes of message text one answer holds at most (about 10,000 tokens): the
/// messages past it are left for the next call, as `more` says.
pub const ANSWER_CHARS: usize = 40_000;

pub fn read_session(store: &StoreArgs, p: ReadSession) -> Answer {
    let limit = params::limit(p.limit).map_err(ToolError::Invalid)?;
    let max_chars = match p.max_chars {
        Some(0) => return Err(ToolError::invalid("max_chars must be at least 1")),
        Some(n) => n.min(MAX_CHARS),
        None => DEFAULT_CHARS,
    };
    if p.around_entry.is_some() && p.offset.is_some() {
        return Err(ToolError::invalid(
            "give around_entry or offset, not both: around_entry picks the window itself",
        ));
    }
    let path = session_file(store, &p.session)?;
    let mut loaded = load(&path)?;
    loaded.sanitize();
    let session = &loaded.session;
    let window = window(session, &p, limit)?;
    let blobs = store
        .agent_dirs()
        .ok()
        .map(|dirs| BlobStore::new(dirs.blob_dir(), Arc::new(FileStorage)));
    let mut sink = TextSink {
        first: window.first + 1,
        end: window.first + 1 + limit,
        max_chars,
        text_offset: p.text_offset,
        messages: Vec::new(),
        current: None,
        facts: None,
    };
    transcript::walk(
        session,
        window.leaf.as_deref(),
        blobs.as_ref(),
        None,
        &mut sink,
    )
    .map_err(|e| ToolError::Failed(e.to_string()))?;
    let facts = sink.facts.take().unwrap_or(Value::Null);
    let mut messages = sink.messages;
    within_budget(&mut messages);
    let calls = Calls {
        session: &p.session,
        leaf: window.leaf.as_deref(),
    };
    let more = calls.around(&window, messages.len(), limit);
    let messages: Vec<Value> = messages
        .into_iter()
        .map(|mut m| {
            if m.left > 0 {
                m.text.push_str(&format!(
                    "\n[cut: {} more characters; {} reads on]",
                    m.left,
                    calls.read(m.n - 1, 1, &format!(", text_offset={}", m.next_char))
                ));
            }
            json!({
                "index": m.n - 1,
                "entry": m.entry,
                "role": m.role,
                "detail": m.detail,
                "time": m.time,
                "label": m.label,
                "text": m.text,
            })
        })
        .collect();
    let header = session.header();
    let id = header.id().unwrap_or_default();
    let cwd = header.cwd().unwrap_or_default();
    Ok(json!({
        "session": id,
        "cwd": cwd,
        "facts": facts,
        "messages": messages,
        "total": window.total,
        "offset": window.first,
        "more": more,
        "resume": resume_command(store, id, cwd),
    }))
}

/// Which messages a call reads: those of the context at `leaf` (`None`: the current
/// leaf) from `first` (from 0) on, of `total`.
struct Window {
    leaf: Option<String>,
    first: usize,
    total: usize,
}

/// The window a call asks for: at the leaf it names, else at the current leaf, or, for an
/// entry off the current branch, at that entry itself; from `offset`, around
/// `around_entry`, else the last `limit` messages.
fn window(session: &Session, p: &ReadSession, limit: usize) -> Result<Window, ToolError> {
    let no_entry = |what: &str, id: &str| {
        ToolError::invalid(format!("{what}: session {} has no entry {id}", p.session))
    };
    if let Some(leaf) = &p.leaf {
        session
            .index_of(leaf)
            .ok_or_else(|| no_entry("leaf", leaf))?;
    }
    let sources = |leaf: Option<&str>| -> Vec<usize> {
        match leaf {
            Some(id) => session.build_context_for(id).sources,
            None => session.build_context().sources,
        }
    };
    let mut leaf = p.leaf.clone();
    let mut in_context = sources(leaf.as_deref());
    let first = match (&p.around_entry, p.offset) {
        (Some(entry), _) => {
            let index = session
                .index_of(entry)
                .ok_or_else(|| no_entry("around_entry", entry))?;
            if !in_context.contains(&index) {
                leaf = Some(entry.clone());
                in_context = sources(Some(entry));
            }
            let at = in_context.iter().position(|&s| s == index).ok_or_else(|| {
                ToolError::invalid(format!(
                    "around_entry: entry {entry} is not a message of any context (a setting \
                     or a label); search hits name message entries"
                ))
            })?;
            at.saturating_sub((limit - 1) / 2)
                .min(in_context.len().saturating_sub(limit))
        }
        (None, Some(offset)) => offset,
        (None, None) => in_context.len().saturating_sub(limit),
    };
    Ok(Window {
        leaf,
        first,
        total: in_context.len(),
    })
}

/// Keeps the messages within [`ANSWER_CHARS`]: the first always, then as many as fit.
fn within_budget(messages: &mut Vec<Message>) {
    let mut budget = ANSWER_CHARS;
    let fit = messages
        .iter()
        .position(|m| {
            let over = m.text.len() > budget;
            budget = budget.saturating_sub(m.text.len());
            over
        })
        .map_or(messages.len(), |at| at.max(1));
    messages.truncate(fit);
}

/// The calls that read on, as an answer names them.
struct Calls<'a> {
    session: &'a str,
    leaf: Option<&'a str>,
}

impl Calls<'_> {
    fn read(&self, offset: usize, limit: usize, extra: &str) -> String {
        let leaf = self
            .leaf
            .map_or_else(String::new, |l| format!(", leaf={l:?}"));
        format!(
            "read_session(session={:?}{leaf}, offset={offset}, limit={limit}{extra})",
            self.session
        )
    }

    /// What comes before and after `shown` messages of `window`, and the calls that read
    /// them; `null` when the window shows them all.
    fn around(&self, window: &Window, shown: usize, limit: usize) -> Value {
        let (first, total) = (window.first, window.total);
        let mut more = Vec::new();
        if first > 0 && shown > 0 {
            more.push(format!(
                "messages 0–{} come before: {}",
                first - 1,
                self.read(first.saturating_sub(limit), limit.min(first), "")
            ));
        }
        if first + shown < total {
            more.push(format!(
                "messages {}–{} come after: {}",
                first + shown,
                total - 1,
                self.read(first + shown, limit, "")
            ));
        }
        if shown == 0 && total > 0 {
            more.push(format!(
                "offset {first} is past the last message ({})",
                total - 1
            ));
        }
        if more.is_empty() {
            Value::Null
        } else {
            Value::String(more.join("; "))
        }
    }
}

/// One message as text.
struct Message {
    /// From 1.
    n: usize,
    entry: Option<String>,
    role: String,
    detail: Option<String>,
    time: Option<String>,
    label: Option<String>,
    /// The parts, each as plain text, a blank line apart.
    text: String,
    /// How many characters of it are left out after the cut, and where the rest starts.
    left: usize,
    next_char: usize,
}

/// Gathers the messages numbered `first..end` as text.
struct TextSink {
    first: usize,
    end: usize,
    max_chars: usize,
    text_offset: usize,
    messages: Vec<Message>,
    current: Option<Message>,
    facts: Option<Value>,
}

impl TextSink {
    fn part(&mut self, text: &str) -> io::Result<()> {
        if let Some(m) = &mut self.current {
            if !m.text.is_empty() {
                m.text.push_str("\n\n");
            }
            m.text.push_str(text);
        }
        Ok(())
    }
}

impl Sink for TextSink {
    fn facts(&mut self, facts: &Facts) -> io::Result<()> {
        self.facts = Some(json!({
            "title": facts.title,
            "leaf": facts.leaf,
            "model": facts.model,
            "thinkingLevel": facts.thinking_level,
        }));
        Ok(())
    }

    fn heading(&mut self, h: &Heading) -> io::Result<()> {
        self.current = (self.first..self.end).contains(&h.n).then(|| Message {
            n: h.n,
            entry: h.entry_id.clone(),
            role: h.role.clone(),
            detail: h.detail.clone(),
            time: h.time.clone(),
            label: h.label.clone(),
            text: String::new(),
            left: 0,
            next_char: 0,
        });
        Ok(())
    }

    fn text(&mut self, text: &str) -> io::Result<()> {
        self.part(text)
    }

    fn thinking(&mut self, text: &str) -> io::Result<()> {
        self.part(&format!("<thinking>\n{text}\n</thinking>"))
    }

    fn redacted_thinking(&mut self) -> io::Result<()> {
        self.part("<thinking>(redacted)</thinking>")
    }

    fn tool_call(
        &mut self,
        name: &str,
        id: Option<&str>,
        arguments: Option<&engine_json::Value>,
    ) -> io::Result<()> {
        let id = id.map_or_else(String::new, |id| format!(" ({id})"));
        let arguments = arguments.map_or_else(|| "{}".to_owned(), engine_json::to_pretty);
        self.part(&format!("[tool call {name}{id}]\n{arguments}"))
    }

    fn code(&mut self, text: &str, _lang: &str) -> io::Result<()> {
        self.part(text)
    }

    fn output(&mut self, text: &str, _lang: &str) -> io::Result<()> {
        self.part(if text.is_empty() { "(no output)" } else { text })
    }

    fn image(&mut self, image: Image<'_>) -> io::Result<()> {
        self.part(&match image {
            Image::Blob { hash, mime } => {
                format!(
                    "[image {}, blob sha256:{hash}]",
                    mime.unwrap_or("of unknown type")
                )
            }
            Image::InvalidRef => "[image: an invalid blob reference]".to_owned(),
            Image::Inline { mime, bytes } => format!("[image {mime}, {bytes} bytes inline]"),
            Image::Empty => "[image without data]".to_owned(),
        })
    }

    fn unknown_block(&mut self, block_type: &str) -> io::Result<()> {
        self.part(&format!("[a block of type {block_type}]"))
    }

    fn error_result(&mut self) -> io::Result<()> {
        self.part("[the tool failed]")
    }

    fn stopped(&mut self, reason: &str, error: Option<&str>) -> io::Result<()> {
        let error = error.map_or_else(String::new, |e| format!(": {e}"));
        self.part(&format!("[stopped: {reason}{error}]"))
    }

    fn compaction(&mut self, tokens_before: &str) -> io::Result<()> {
        self.part(&format!(
            "[summary of the conversation before it was compacted; {tokens_before} tokens before]"
        ))
    }

    fn branch_summary(&mut self, from: &str) -> io::Result<()> {
        self.part(&format!("[summary of a branch left at {from}]"))
    }

    fn status(&mut self, status: &[String]) -> io::Result<()> {
        self.part(&format!("[{}]", status.join(", ")))
    }

    fn files(&mut self, files: &[(String, Option<String>)]) -> io::Result<()> {
        let list: Vec<String> = files
            .iter()
            .map(|(path, lines)| match lines {
                Some(lines) => format!("{path} ({lines})"),
                None => path.clone(),
            })
            .collect();
        self.part(&format!("[files: {}]", list.join(", ")))
    }

    fn end_message(&mut self) -> io::Result<()> {
        if let Some(mut m) = self.current.take() {
            let (shown, left) = cut(&m.text, self.text_offset, self.max_chars);
            m.next_char = self.text_offset + shown.chars().count();
            m.text = shown.to_owned();
            m.left = left;
            self.messages.push(m);
        }
        Ok(())
    }
}
