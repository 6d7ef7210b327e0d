//! Deterministic generator of realistic session files, for tests, benchmarks and demos.
//!
//! A corpus is one session file written the way the agent writes it:
//! - compact JSON lines built with the engine's own JSON model, so every line is exactly what
//!   the engine's writer produces, keys in the order each writer emits them;
//! - ISO entry timestamps (`YYYY-MM-DDTHH:MM:SS.mmmZ`), integer-millisecond message
//!   timestamps, 8-hex entry ids and a UUIDv7-shaped session id.
//!
//! The v5 format ([`Format::V5`]) holds a header, a short start-up block (model, thinking
//! level, configured model chain, `session_init`, tool selections) and then a conversation:
//! turns of a user message, assistant messages (text, thinking with `thinkingSignature`,
//! tool calls; usage with cost) and tool results with outputs from a few bytes to tens of
//! kilobytes, and between turns every other entry type — model, thinking-level and
//! service-tier changes, compactions (whose `firstKeptEntryId` names an earlier entry on
//! the same branch), branch summaries, custom entries and messages, labels (naming existing
//! entries), TTSR injections, mode changes, tool selections and model chains. Now and then
//! the conversation branches: the next entry continues from an earlier entry of the current
//! branch rather than from the previous line. A few user messages carry a small image
//! (base64 under 1,024 characters, so never externalised to the blob store), a few tool
//! outputs carry terminal colour escapes, and a rare one ends in a lone UTF-16 surrogate,
//! as truncated output can.
//!
//! The legacy format ([`Format::V1`]) writes what a version-1 agent wrote: no `version` in
//! the header, no `id`/`parentId` on entries, a linear conversation, legacy `model_change`
//! rows (`provider` + `modelId`) and compactions with `firstKeptEntryIndex`.
//!
//! Patch records are never written, so loading a v5 corpus and writing its records back
//! reproduces the file byte for byte.
//!
//! Output is a pure function of [`Options`]: the seed drives a [`SmallRng`], and nothing
//! else (no clock, no hash-map order) reaches the file.
//!
//! Size limits ([`Limit::Bytes`]): while the file is being written, large payloads are
//! capped at half of the bytes still missing, so the file ends within about one small entry
//! (at most a couple of kilobytes) past the target.

mod text;

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use gjcfs_engine::json::{self, JsString, Number, Object, Value};
use gjcfs_engine::time::{format_iso_millis, parse_iso_millis};

/// Which on-disk format to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The current format (version 5).
    V5,
    /// The legacy version-1 format, for migration benchmarks.
    V1,
}

/// When to stop writing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// Exactly this many entries after the header.
    Entries(u64),
    /// Stop once the file holds at least this many bytes.
    Bytes(u64),
}

/// What to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    pub seed: u64,
    pub limit: Limit,
    pub format: Format,
}

/// What was written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Entries after the header.
    pub entries: u64,
    /// Bytes in the file, header included.
    pub bytes: u64,
    /// Entries per `type` (`message` entries are further split by role as `message:<role>`).
    pub by_type: BTreeMap<String, u64>,
}

/// Writes one session to `out` and returns what was written.
pub fn generate(options: &Options, out: impl Write) -> io::Result<Summary> {
    let mut g = Generator::new(options, out);
    g.run()?;
    g.out.flush()?;
    Ok(g.summary)
}

/// Writes one session to a new file at `path` (replacing any file there).
pub fn generate_file(path: &Path, options: &Options) -> io::Result<Summary> {
    let file = File::create(path)?;
    let mut writer = BufWriter::with_capacity(1 << 20, file);
    let summary = generate(options, &mut writer)?;
    writer
        .into_inner()
        .map_err(|e| e.into_error())?
        .sync_all()?;
    Ok(summary)
}

/// The session as bytes in memory.
pub fn generate_bytes(options: &Options) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail.
    generate(options, &mut out).expect("writing to memory");
    out
}

/// A size that could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid size {0:?}: expected a number with an optional unit B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024)")]
pub struct SizeError(pub String);

/// Parses a byte size such as `100MB`, `1.5GiB`, `512KiB` or `2048`.
///
/// KB, MB and GB are powers of 1000; KiB, MiB and GiB powers of 1024; units are
/// case-insensitive and may follow a space. A single-letter unit (`k`, `M`, `G`) means the
/// decimal one.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let err = || SizeError(text.to_owned());
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "m" | "mb" => 1_000_000,
        "g" | "gb" => 1_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        _ => return Err(err()),
    };
    if number.is_empty() || number.starts_with('.') || number.ends_with('.') {
        return Err(err());
    }
    let value: f64 = number.parse().map_err(|_| err())?;
    let bytes = value * factor as f64;
    if !(1.0..=1e15).contains(&bytes) {
        return Err(err());
    }
    Ok(bytes.round() as u64)
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::V5 => "v5",
            Format::V1 => "v1",
        })
    }
}

// ---------------------------------------------------------------------------------------
// Value helpers.

fn s(text: impl Into<JsString>) -> Value {
    Value::String(text.into())
}

fn int(n: i64) -> Value {
    Value::Number(Number::from_i64(n))
}

fn strings(items: &[&str]) -> Value {
    Value::Array(items.iter().map(|t| s(*t)).collect())
}

fn object<const N: usize>(members: [(&str, Value); N]) -> Value {
    let mut o = Object::with_capacity(N);
    for (k, v) in members {
        o.insert(k, v);
    }
    Value::Object(o)
}

fn text_block(text: String) -> Value {
    object([("type", s("text")), ("text", s(text))])
}

/// A string value holding `text` followed by a lone high surrogate, as truncated model or
/// tool output can end.
fn with_lone_surrogate(text: &str) -> Value {
    let quoted = json::to_compact(&s(text));
    let literal = format!("{}\\ud83d\"", &quoted[..quoted.len() - 1]);
    json::parse(&literal).unwrap_or_else(|_| s(text))
}

// ---------------------------------------------------------------------------------------
// Static tables.

struct ModelSpec {
    api: &'static str,
    provider: &'static str,
    model: &'static str,
    /// Dollars per million tokens: input, output, cache read, cache write.
    price: [f64; 4],
}

const MODELS: &[ModelSpec] = &[
    ModelSpec {
        api: "anthropic-messages",
        provider: "anthropic",
        model: "claude-sonnet-4-5",
        price: [3.0, 15.0, 0.3, 3.75],
    },
    ModelSpec {
        api: "anthropic-messages",
        provider: "anthropic",
        model: "claude-opus-4-5",
        price: [5.0, 25.0, 0.5, 6.25],
    },
    ModelSpec {
        api: "openai-responses",
        provider: "openai",
        model: "gpt-5.1-codex",
        price: [1.25, 10.0, 0.125, 0.0],
    },
];

const CWDS: &[&str] = &[
    "/home/dev/projects/gjc",
    "/Users/dev/work/api-server",
    "/home/dev/src/pi-mono",
    "/work/proj",
];

const THINKING_LEVELS: &[&str] = &["off", "minimal", "low", "medium", "high", "xhigh"];
const TOOLS: &[&str] = &["read", "bash", "edit", "write", "grep", "find", "ls"];
const LABELS: &[&str] = &[
    "checkpoint",
    "before refactor",
    "good state",
    "bug repro",
    "wip",
];
const RULES: &[&str] = &[
    "no-console-log",
    "prefer-const",
    "no-any",
    "test-before-commit",
    "small-diffs",
];
const MCP_TOOLS: &[&str] = &[
    "github.search_issues",
    "github.create_pull_request",
    "linear.list_issues",
    "sentry.get_event",
    "postgres.query",
];
const BUILTIN_TOOLS: &[&str] = &["search_tool_bm25", "web_fetch", "web_search", "notebook"];

// ---------------------------------------------------------------------------------------
// The generator.

/// One entry on the current branch.
#[derive(Clone, Copy)]
struct PathItem {
    /// Position in the file (header = 0), for v1 `firstKeptEntryIndex`.
    seq: u64,
    id: u32,
    user: bool,
}

struct Generator<W> {
    rng: SmallRng,
    format: Format,
    limit: Limit,
    out: W,
    summary: Summary,
    /// The current time in milliseconds.
    now: i64,
    session_id: String,
    ids: HashSet<u32>,
    /// Every entry id written, in file order.
    all_ids: Vec<u32>,
    /// The current branch, root first; the last item is the leaf.
    path: Vec<PathItem>,
    model: usize,
    plan_mode: bool,
    line: Vec<u8>,
}

impl<W: Write> Generator<W> {
    fn new(options: &Options, out: W) -> Self {
        let mut rng = SmallRng::seed_from_u64(options.seed);
        let base = parse_iso_millis("2026-01-05T08:00:00.000Z").unwrap_or(0);
        let now = base
            + (options.seed % 365) as i64 * 86_400_000
            + rng.gen_range(0..36_000_000i64)
            + rng.gen_range(0..1000i64);
        Generator {
            rng,
            format: options.format,
            limit: options.limit,
            out,
            summary: Summary::default(),
            now,
            session_id: String::new(),
            ids: HashSet::new(),
            all_ids: Vec::new(),
            path: Vec::new(),
            model: 0,
            plan_mode: false,
            line: Vec::with_capacity(1 << 16),
        }
    }

    fn v5(&self) -> bool {
        self.format == Format::V5
    }

    fn done(&self) -> bool {
        match self.limit {
            Limit::Entries(n) => self.summary.entries >= n,
            Limit::Bytes(n) => self.summary.bytes >= n,
        }
    }

    /// `n`, or less when a byte limit is close: at most half of what is still missing.
    fn cap(&self, n: usize) -> usize {
        match self.limit {
            Limit::Entries(_) => n,
            Limit::Bytes(target) => {
                let missing = target.saturating_sub(self.summary.bytes) as usize;
                n.min((missing / 2).max(48))
            }
        }
    }

    /// A payload size drawn from `lo..hi`, capped by the byte limit.
    fn size(&mut self, lo: usize, hi: usize) -> usize {
        let n = self.rng.gen_range(lo..hi);
        self.cap(n)
    }

    /// A tool output size: mostly small, sometimes several kilobytes, now and then tens of
    /// kilobytes.
    fn output_size(&mut self) -> usize {
        let n = match self.rng.gen_range(0..100) {
            0..=44 => self.rng.gen_range(40..800),
            45..=79 => self.rng.gen_range(800..6_000),
            80..=94 => self.rng.gen_range(6_000..25_000),
            _ => self.rng.gen_range(25_000..80_000),
        };
        self.cap(n)
    }

    fn advance(&mut self, lo: i64, hi: i64) -> i64 {
        self.now += self.rng.gen_range(lo..hi);
        self.now
    }

    fn chance(&mut self, percent: u32) -> bool {
        self.rng.gen_range(0..100) < percent
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        *items.choose(&mut self.rng).expect("non-empty table")
    }

    fn uuid_v4(&mut self) -> String {
        let bytes: [u8; 16] = self.rng.gen();
        uuid::Builder::from_random_bytes(bytes)
            .into_uuid()
            .hyphenated()
            .to_string()
    }

    fn uuid_v7(&mut self, millis: i64) -> String {
        let bytes: [u8; 10] = self.rng.gen();
        uuid::Builder::from_unix_timestamp_millis(millis.max(0) as u64, &bytes)
            .into_uuid()
            .hyphenated()
            .to_string()
    }

    fn new_id(&mut self) -> u32 {
        loop {
            let id: u32 = self.rng.gen();
            if self.ids.insert(id) {
                return id;
            }
        }
    }

    fn leaf(&self) -> Option<u32> {
        self.path.last().map(|p| p.id)
    }

    fn write_line(&mut self, record: &Object) -> io::Result<()> {
        self.line.clear();
        json::write_object_compact(record, &mut self.line);
        self.line.push(b'\n');
        self.out.write_all(&self.line)?;
        self.summary.bytes += self.line.len() as u64;
        Ok(())
    }

    /// A new entry: its id and the object holding the leading members
    /// (`type,id,parentId,timestamp` in v5, `type,timestamp` in v1).
    fn start(&mut self, ty: &str, gap: (i64, i64)) -> (u32, Object) {
        let mut o = Object::with_capacity(8);
        o.insert("type", s(ty));
        let id = self.new_id();
        self.advance(gap.0, gap.1);
        if self.v5() {
            self.put_base(&mut o, id);
        } else {
            o.insert("timestamp", s(format_iso_millis(self.now)));
        }
        (id, o)
    }

    /// Appends `id,parentId,timestamp`.
    fn put_base(&self, o: &mut Object, id: u32) {
        o.insert("id", s(format!("{id:08x}")));
        o.insert(
            "parentId",
            self.leaf().map_or(Value::Null, |p| s(format!("{p:08x}"))),
        );
        o.insert("timestamp", s(format_iso_millis(self.now)));
    }

    /// Writes an entry and makes it the leaf; once the limit is reached, drops it.
    fn commit(&mut self, id: u32, record: Object) -> io::Result<()> {
        if self.done() {
            return Ok(());
        }
        let ty = record.get_str("type").unwrap_or_default().to_owned();
        let role = record
            .get("message")
            .and_then(Value::as_object)
            .and_then(|m| m.get_str("role"))
            .map(str::to_owned);
        self.write_line(&record)?;
        self.summary.entries += 1;
        let key = match &role {
            Some(role) => format!("{ty}:{role}"),
            None => ty,
        };
        *self.summary.by_type.entry(key).or_default() += 1;
        self.path.push(PathItem {
            seq: self.summary.entries,
            id,
            user: role.as_deref() == Some("user"),
        });
        self.all_ids.push(id);
        Ok(())
    }

    fn run(&mut self) -> io::Result<()> {
        self.header()?;
        if self.v5() {
            self.startup()?;
        }
        while !self.done() {
            self.turn()?;
            let events = match self.rng.gen_range(0..100) {
                0..=44 => 0,
                45..=84 => 1,
                _ => 2,
            };
            for _ in 0..events {
                if self.done() {
                    break;
                }
                self.event()?;
            }
        }
        Ok(())
    }

    // -----------------------------------------------------------------------------------
    // Header and start-up.

    fn header(&mut self) -> io::Result<()> {
        let cwd = self.pick(CWDS);
        let timestamp = s(format_iso_millis(self.now));
        let mut h = Object::with_capacity(8);
        h.insert("type", s("session"));
        if self.format == Format::V1 {
            let model = &MODELS[0];
            h.insert("id", s(self.uuid_v4()));
            h.insert("timestamp", timestamp);
            h.insert("cwd", s(cwd));
            h.insert("provider", s(model.provider));
            h.insert("modelId", s(model.model));
            h.insert("thinkingLevel", s("off"));
            return self.write_line(&h);
        }
        self.session_id = self.uuid_v7(self.now);
        h.insert("version", int(5));
        h.insert("id", s(self.session_id.clone()));
        let mut title = String::new();
        text::sentences(&mut self.rng, 20, &mut title);
        match self.rng.gen_range(0..10) {
            // fork(): title and titleSource before the timestamp; parent session id.
            0 | 1 => {
                let parent = self.uuid_v7(self.now - 3_600_000);
                h.insert("title", s(title));
                h.insert("titleSource", s("auto"));
                h.insert("timestamp", timestamp);
                h.insert("cwd", s(cwd));
                h.insert("parentSession", s(parent));
            }
            // forkFrom: the fresh order, then title and titleSource.
            2 => {
                h.insert("timestamp", timestamp);
                h.insert("cwd", s(cwd));
                h.insert("title", s(title));
                h.insert("titleSource", s("user"));
            }
            // createBranchedSession: the parent transcript path.
            3 => {
                let parent_ms = self.now - 7_200_000;
                let parent_id = self.uuid_v7(parent_ms);
                let mut digest = String::new();
                for _ in 0..52 {
                    digest.push(self.pick(&b"abcdefghijklmnopqrstuvwxyz234567"[..]) as char);
                }
                let stamp = format_iso_millis(parent_ms).replace([':', '.'], "-");
                h.insert("timestamp", timestamp);
                h.insert("cwd", s(cwd));
                h.insert(
                    "parentSession",
                    s(format!(
                        "/home/dev/.gjc/agent/sessions/v2-{digest}/{stamp}_{parent_id}.jsonl"
                    )),
                );
            }
            _ => {
                h.insert("timestamp", timestamp);
                h.insert("cwd", s(cwd));
            }
        }
        self.write_line(&h)
    }

    /// What a fresh session appends before the first prompt.
    fn startup(&mut self) -> io::Result<()> {
        self.session_init()?;
        self.model_change()?;
        self.thinking_level_change()?;
        self.configured_model_chain()?;
        self.tool_selections()
    }

    // -----------------------------------------------------------------------------------
    // Conversation.

    fn turn(&mut self) -> io::Result<()> {
        if self.chance(3) {
            return self.bash_execution();
        }
        self.user_message()?;
        let steps = match self.rng.gen_range(0..100) {
            0..=29 => 0,
            30..=59 => 1,
            60..=79 => 2,
            80..=91 => 3,
            _ => self.rng.gen_range(4..9),
        };
        for _ in 0..steps {
            if self.done() {
                return Ok(());
            }
            let calls = self.assistant_message(Ending::ToolUse)?;
            for call in calls {
                if self.done() {
                    return Ok(());
                }
                self.tool_result(call)?;
            }
        }
        if self.done() {
            return Ok(());
        }
        let ending = match self.rng.gen_range(0..100) {
            0..=3 => Ending::Aborted,
            4 => Ending::Error,
            _ => Ending::Stop,
        };
        self.assistant_message(ending).map(drop)
    }

    fn user_message(&mut self) -> io::Result<()> {
        let (id, mut o) = self.start("message", (4_000, 600_000));
        let size = if self.chance(5) {
            self.size(2_000, 12_000)
        } else {
            self.size(20, 1_200)
        };
        let mut prompt = String::with_capacity(size + 64);
        if size > 2_000 {
            text::sentences(&mut self.rng, 80, &mut prompt);
            prompt.push_str("\n\n```\n");
            text::shell_output(&mut self.rng, size, &mut prompt);
            prompt.push_str("```");
        } else {
            text::sentences(&mut self.rng, size, &mut prompt);
        }
        let content = if self.chance(50) {
            s(prompt)
        } else {
            let mut blocks = vec![text_block(prompt)];
            if self.chance(6) {
                blocks.push(self.image_block());
            }
            Value::Array(blocks)
        };
        let mut m = Object::with_capacity(4);
        m.insert("role", s("user"));
        m.insert("content", content);
        if self.chance(10) {
            m.insert("attribution", s("user"));
        }
        m.insert("timestamp", int(self.now - self.rng.gen_range(1..20)));
        o.insert("message", Value::Object(m));
        self.commit(id, o)
    }

    /// A small PNG-looking image whose base64 stays under 1,024 characters.
    fn image_block(&mut self) -> Value {
        let n = self.rng.gen_range(120..700);
        let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
        bytes.extend((0..n).map(|_| self.rng.gen::<u8>()));
        object([
            ("type", s("image")),
            ("data", s(text::base64(&bytes))),
            ("mimeType", s("image/png")),
        ])
    }

    fn bash_execution(&mut self) -> io::Result<()> {
        let (id, mut o) = self.start("message", (3_000, 120_000));
        let command = self.pick(&["ls", "git status", "npm test", "git diff --stat", "make"]);
        let size = self.output_size();
        let mut output = String::with_capacity(size + 128);
        text::shell_output(&mut self.rng, size, &mut output);
        let truncated = size > 30_000;
        let mut m = Object::with_capacity(8);
        m.insert("role", s("bashExecution"));
        m.insert("command", s(command));
        m.insert("output", s(output));
        m.insert("exitCode", int(if self.chance(80) { 0 } else { 1 }));
        m.insert("cancelled", Value::Bool(false));
        m.insert("truncated", Value::Bool(truncated));
        if truncated {
            let name = self.uuid_v4();
            m.insert("fullOutputPath", s(format!("/tmp/gjc-bash-{name}.log")));
        }
        m.insert("timestamp", int(self.now));
        o.insert("message", Value::Object(m));
        self.commit(id, o)
    }

    /// Writes an assistant message; returns its tool calls (id, tool name).
    fn assistant_message(&mut self, ending: Ending) -> io::Result<Vec<(String, &'static str)>> {
        let started = self.now + self.rng.gen_range(5..50);
        let (id, mut o) = self.start("message", (800, 60_000));
        let model = &MODELS[self.model];
        let mut content = Vec::new();
        if self.chance(55) {
            let mut thinking = String::new();
            let n = self.size(100, 3_000);
            text::prose(&mut self.rng, n, &mut thinking);
            let mut signature = String::new();
            let n = self.size(200, 1_200);
            text::base64ish(&mut self.rng, n, &mut signature);
            content.push(object([
                ("type", s("thinking")),
                ("thinking", s(thinking)),
                ("thinkingSignature", s(signature)),
            ]));
        } else if self.chance(2) {
            let mut data = String::new();
            let n = self.rng.gen_range(100..800);
            text::base64ish(&mut self.rng, n, &mut data);
            content.push(object([("type", s("redactedThinking")), ("data", s(data))]));
        }
        if ending != Ending::ToolUse || self.chance(60) {
            let mut answer = String::new();
            let n = if ending == Ending::Stop {
                self.size(60, 4_000)
            } else {
                self.size(20, 400)
            };
            text::prose(&mut self.rng, n, &mut answer);
            content.push(text_block(answer));
        }
        let mut calls = Vec::new();
        if ending == Ending::ToolUse {
            for _ in 0..self.rng.gen_range(1..4) {
                let (call, block) = self.tool_call(model.provider);
                calls.push(call);
                content.push(block);
            }
        }
        let mut m = Object::with_capacity(14);
        m.insert("role", s("assistant"));
        m.insert("content", Value::Array(content));
        m.insert("api", s(model.api));
        m.insert("provider", s(model.provider));
        m.insert("model", s(model.model));
        if model.provider == "openai" {
            let mut rid = String::from("resp_");
            text::alnum(&mut self.rng, 40, &mut rid);
            m.insert("responseId", s(rid));
        }
        m.insert("usage", self.usage(model, ending == Ending::Error));
        m.insert(
            "stopReason",
            s(match ending {
                Ending::ToolUse => "toolUse",
                Ending::Stop => "stop",
                Ending::Aborted => "aborted",
                Ending::Error => "error",
            }),
        );
        match ending {
            Ending::Aborted => m.insert("errorMessage", s("Request was aborted")),
            Ending::Error => m.insert(
                "errorMessage",
                s("529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"),
            ),
            _ => {}
        }
        m.insert("timestamp", int(started));
        if self.chance(70) {
            m.insert("duration", int(self.now - started));
            m.insert("ttft", int(self.rng.gen_range(300..4_000)));
        }
        o.insert("message", Value::Object(m));
        self.commit(id, o)?;
        Ok(calls)
    }

    fn usage(&mut self, model: &ModelSpec, failed: bool) -> Value {
        let (input, output, cache_read, cache_write) = if failed {
            (0, 0, 0, 0)
        } else {
            (
                self.rng.gen_range(1..6_000i64),
                self.rng.gen_range(20..4_000i64),
                self.rng.gen_range(0..160_000i64),
                if self.chance(40) {
                    self.rng.gen_range(100..8_000i64)
                } else {
                    0
                },
            )
        };
        let cost = |tokens: i64, price: f64| price / 1_000_000.0 * tokens as f64;
        let costs = [
            cost(input, model.price[0]),
            cost(output, model.price[1]),
            cost(cache_read, model.price[2]),
            cost(cache_write, model.price[3]),
        ];
        let total = costs[0] + costs[1] + costs[2] + costs[3];
        let mut u = Object::with_capacity(8);
        u.insert("input", int(input));
        u.insert("output", int(output));
        u.insert("cacheRead", int(cache_read));
        u.insert("cacheWrite", int(cache_write));
        u.insert(
            "totalTokens",
            int(input + output + cache_read + cache_write),
        );
        if model.provider == "openai" && !failed {
            u.insert("reasoningTokens", int(self.rng.gen_range(0..output + 1)));
        }
        u.insert(
            "cost",
            object([
                ("input", Value::number(costs[0])),
                ("output", Value::number(costs[1])),
                ("cacheRead", Value::number(costs[2])),
                ("cacheWrite", Value::number(costs[3])),
                ("total", Value::number(total)),
            ]),
        );
        Value::Object(u)
    }

    fn tool_call(&mut self, provider: &str) -> ((String, &'static str), Value) {
        let mut call_id = String::new();
        if provider == "anthropic" {
            call_id.push_str("toolu_01");
            text::alnum(&mut self.rng, 22, &mut call_id);
        } else {
            call_id.push_str("call_");
            text::alnum(&mut self.rng, 24, &mut call_id);
        }
        let tool = self.pick(TOOLS);
        let path = text::file_path(&mut self.rng);
        let arguments = match tool {
            "read" => {
                if self.chance(30) {
                    object([
                        ("path", s(path)),
                        ("offset", int(self.rng.gen_range(1..500))),
                        ("limit", int(200)),
                    ])
                } else {
                    object([("path", s(path))])
                }
            }
            "bash" => {
                let command = format!(
                    "cd {} && {}",
                    self.pick(CWDS),
                    self.pick(&[
                        "npm test 2>&1 | tail -50",
                        "git diff",
                        "cargo check",
                        "ls -la"
                    ])
                );
                object([("command", s(command)), ("timeout", int(120))])
            }
            "edit" => {
                let (mut old, mut new) = (String::new(), String::new());
                let n = self.size(40, 1_500);
                text::code(&mut self.rng, n, &mut old);
                let n = self.size(40, 1_500);
                text::code(&mut self.rng, n, &mut new);
                object([("path", s(path)), ("oldText", s(old)), ("newText", s(new))])
            }
            "write" => {
                let mut body = String::new();
                let n = self.size(200, 12_000);
                text::code(&mut self.rng, n, &mut body);
                object([("path", s(path)), ("content", s(body))])
            }
            "grep" => object([
                ("pattern", s(text::ident(&mut self.rng))),
                ("path", s("src")),
            ]),
            _ => object([("path", s(path.rsplit_once('/').map_or(".", |p| p.0)))]),
        };
        let block = object([
            ("type", s("toolCall")),
            ("id", s(call_id.clone())),
            ("name", s(tool)),
            ("arguments", arguments),
        ]);
        ((call_id, tool), block)
    }

    fn tool_result(&mut self, (call_id, tool): (String, &'static str)) -> io::Result<()> {
        let (id, mut o) = self.start("message", (5, 5_000));
        let is_error = self.chance(5);
        let mut out = String::new();
        let mut details = None;
        let mut lone_surrogate = false;
        if is_error {
            out.push_str("Error: ");
            text::sentences(&mut self.rng, 60, &mut out);
        } else {
            match tool {
                "read" => {
                    let n = self.output_size();
                    text::numbered_code(&mut self.rng, n, &mut out);
                }
                "bash" => {
                    let n = self.output_size();
                    text::shell_output(&mut self.rng, n, &mut out);
                    lone_surrogate = self.rng.gen_range(0..400) == 0;
                }
                "edit" => {
                    let path = text::file_path(&mut self.rng);
                    out.push_str(&format!("Successfully replaced text in {path}."));
                    let mut d = String::new();
                    let n = self.size(100, 2_500);
                    text::diff(&mut self.rng, n, &mut d);
                    details = Some(object([
                        ("diff", s(d)),
                        ("firstChangedLine", int(self.rng.gen_range(1..900))),
                    ]));
                }
                "write" => {
                    let path = text::file_path(&mut self.rng);
                    let n = self.rng.gen_range(200..12_000);
                    out.push_str(&format!("Successfully wrote {n} bytes to {path}"));
                }
                _ => {
                    let n = self.size(40, 3_000);
                    text::shell_output(&mut self.rng, n, &mut out);
                }
            }
        }
        let block = if lone_surrogate {
            object([("type", s("text")), ("text", with_lone_surrogate(&out))])
        } else {
            text_block(out)
        };
        let mut m = Object::with_capacity(7);
        m.insert("role", s("toolResult"));
        m.insert("toolCallId", s(call_id));
        m.insert("toolName", s(tool));
        m.insert("content", Value::Array(vec![block]));
        if let Some(details) = details {
            m.insert("details", details);
        }
        m.insert("isError", Value::Bool(is_error));
        m.insert("timestamp", int(self.now));
        o.insert("message", Value::Object(m));
        self.commit(id, o)
    }

    // -----------------------------------------------------------------------------------
    // Other entries.

    fn event(&mut self) -> io::Result<()> {
        if !self.v5() {
            return match self.rng.gen_range(0..10) {
                0..=4 => self.thinking_level_change(),
                5..=7 => self.model_change(),
                _ => self.compaction(),
            };
        }
        match self.rng.gen_range(0..100) {
            0..=11 => self.thinking_level_change(),
            12..=21 => self.model_change(),
            22..=33 => self.label(),
            34..=43 => self.custom(),
            44..=52 => self.custom_message(),
            53..=59 => self.ttsr_injection(),
            60..=66 => self.mode_change(),
            67..=73 => self.service_tier_change(),
            74..=81 => self.compaction(),
            82..=84 => self.branch_with_summary(),
            85..=87 => {
                self.branch();
                Ok(())
            }
            88..=93 => self.tool_selections(),
            _ => self.configured_model_chain(),
        }
    }

    fn thinking_level_change(&mut self) -> io::Result<()> {
        let (id, mut o) = self.start("thinking_level_change", (100, 30_000));
        let level = if self.v5() && self.chance(3) {
            Value::Null
        } else {
            s(self.pick(THINKING_LEVELS))
        };
        o.insert("thinkingLevel", level);
        self.commit(id, o)
    }

    fn model_change(&mut self) -> io::Result<()> {
        let (id, mut o) = self.start("model_change", (100, 30_000));
        let previous = self.model;
        let next = self.rng.gen_range(0..MODELS.len());
        let spec = &MODELS[next];
        if !self.v5() {
            self.model = next;
            o.insert("provider", s(spec.provider));
            o.insert("modelId", s(spec.model));
            return self.commit(id, o);
        }
        o.insert("model", s(format!("{}/{}", spec.provider, spec.model)));
        match self.rng.gen_range(0..10) {
            0..=3 => {}
            4..=7 => {
                o.insert("role", s("default"));
                let prev = &MODELS[previous];
                o.insert(
                    "previousModel",
                    s(format!("{}/{}", prev.provider, prev.model)),
                );
                o.insert("reason", s(self.pick(&["user", "fallback", "cycle"])));
            }
            _ => o.insert("role", s(self.pick(&["smol", "slow", "plan"]))),
        }
        if self.chance(20) {
            o.insert("thinkingLevel", s(self.pick(THINKING_LEVELS)));
        }
        // Only the default role drives the assistant messages.
        if !matches!(o.get_str("role"), Some(role) if role != "default") {
            self.model = next;
        }
        self.commit(id, o)
    }

    fn service_tier_change(&mut self) -> io::Result<()> {
        let (id, mut o) = self.start("service_tier_change", (100, 30_000));
        let tier = match self.rng.gen_range(0..3) {
            0 => Value::Null,
            1 => s("flex"),
            _ => s("priority"),
        };
        o.insert("serviceTier", tier);
        self.commit(id, o)
    }

    fn configured_model_chain(&mut self) -> io::Result<()> {
        let (id, mut o) = self.start("configured_model_chain", (50, 5_000));
        let role = self.pick(&["default", "default", "smol", "slow"]);
        o.insert("role", s(role));
        let cleared = role != "default" && self.chance(15);
        if cleared {
            o.insert("entries", Value::Array(Vec::new()));
        } else {
            let n = self.rng.gen_range(1..=MODELS.len());
            let mut entries: Vec<Value> = MODELS
                .iter()
                .map(|m| s(format!("{}/{}", m.provider, m.model)))
                .collect();
            entries.shuffle(&mut self.rng);
            entries.truncate(n);
            o.insert("entries", Value::Array(entries));
        }
        o.insert("origin", s(self.pick(&["session", "settings"])));
        if !cleared && self.chance(30) {
            o.insert(
                "identity",
                s(format!("chain-{:04x}", self.rng.gen::<u16>())),
            );
        }
        o.insert("explicitHead", Value::Bool(self.chance(50)));
        if cleared {
            o.insert("cleared", Value::Bool(true));
        }
        self.commit(id, o)
    }

    fn session_init(&mut self) -> io::Result<()> {
        let (id, mut o) = self.start("session_init", (5, 200));
        let mut prompt = String::from("You are an expert coding assistant. ");
        let n = self.size(1_500, 8_000);
        text::prose(&mut self.rng, n, &mut prompt);
        let mut task = String::new();
        text::sentences(&mut self.rng, 60, &mut task);
        o.insert("systemPrompt", s(prompt));
        o.insert("task", s(task));
        o.insert("tools", strings(TOOLS));
        if self.chance(50) {
            o.insert(
                "outputSchema",
                object([
                    ("type", s("object")),
                    (
                        "properties",
                        object([("summary", object([("type", s("string"))]))]),
                    ),
                    ("required", strings(&["summary"])),
                ]),
            );
        }
        self.commit(id, o)
    }

    /// An MCP selection, usually followed by a discovered built-in selection sharing its
    /// correlation id.
    fn tool_selections(&mut self) -> io::Result<()> {
        let correlation = self.chance(80).then(|| self.uuid_v4());
        let (id, mut o) = self.start("mcp_tool_selection", (50, 5_000));
        let mut names = MCP_TOOLS.to_vec();
        names.shuffle(&mut self.rng);
        names.truncate(self.rng.gen_range(0..=MCP_TOOLS.len()));
        o.insert("selectedToolNames", strings(&names));
        if let Some(c) = &correlation {
            o.insert("mutationCorrelationId", s(c.as_str()));
        }
        self.commit(id, o)?;
        if correlation.is_none() || self.done() {
            return Ok(());
        }
        let (id, mut o) = self.start("discovered_builtin_tool_selection", (0, 3));
        let mut names = BUILTIN_TOOLS.to_vec();
        names.shuffle(&mut self.rng);
        names.truncate(self.rng.gen_range(1..=BUILTIN_TOOLS.len()));
        o.insert("selectedToolNames", strings(&names));
        if let Some(c) = correlation {
            o.insert("mutationCorrelationId", s(c));
        }
        self.commit(id, o)
    }

    fn mode_change(&mut self) -> io::Result<()> {
        let (id, mut o) = self.start("mode_change", (100, 10_000));
        if self.plan_mode {
            o.insert("mode", s("none"));
        } else {
            o.insert("mode", s("plan"));
            let name = self.rng.gen::<u32>();
            o.insert(
                "data",
                object([("planFile", s(format!("/tmp/gjc-plan-{name:08x}.md")))]),
            );
        }
        self.plan_mode = !self.plan_mode;
        self.commit(id, o)
    }

    fn ttsr_injection(&mut self) -> io::Result<()> {
        let (id, mut o) = self.start("ttsr_injection", (10, 2_000));
        let mut rules = RULES.to_vec();
        rules.shuffle(&mut self.rng);
        rules.truncate(self.rng.gen_range(1..4));
        o.insert("injectedRules", strings(&rules));
        if self.chance(60) {
            let records = rules
                .iter()
                .map(|name| {
                    let mut r = Object::with_capacity(4);
                    r.insert("name", s(*name));
                    r.insert("lastInjectedAt", int(self.now));
                    if self.chance(50) {
                        r.insert("repeatMode", s("gap"));
                        r.insert("repeatGap", int(self.rng.gen_range(2..20)));
                    }
                    Value::Object(r)
                })
                .collect();
            o.insert("injectedRuleRecords", Value::Array(records));
            o.insert("ttsrMessageCount", int(self.rng.gen_range(1..400)));
        }
        self.commit(id, o)
    }

    fn label(&mut self) -> io::Result<()> {
        if self.all_ids.is_empty() {
            return Ok(());
        }
        let recent = self.all_ids.len().saturating_sub(200);
        let target = self.all_ids[self.rng.gen_range(recent..self.all_ids.len())];
        let (id, mut o) = self.start("label", (500, 60_000));
        o.insert("targetId", s(format!("{target:08x}")));
        if self.chance(85) {
            o.insert("label", s(self.pick(LABELS)));
        }
        self.commit(id, o)
    }

    /// A `custom` entry: `type,customType,data?,id,parentId,timestamp`.
    fn custom(&mut self) -> io::Result<()> {
        let id = self.new_id();
        self.advance(10, 5_000);
        let mut o = Object::with_capacity(6);
        o.insert("type", s("custom"));
        let kind = self.pick(&["gjc-todo", "plan-state", "extension:git-status"]);
        o.insert("customType", s(kind));
        if self.chance(90) {
            let todos = (0..self.rng.gen_range(1..6))
                .map(|i| {
                    let mut title = String::new();
                    text::sentences(&mut self.rng, 30, &mut title);
                    object([
                        ("id", int(i)),
                        ("title", s(title)),
                        ("done", Value::Bool(self.chance(50))),
                    ])
                })
                .collect();
            o.insert(
                "data",
                object([("version", int(1)), ("items", Value::Array(todos))]),
            );
        }
        self.put_base(&mut o, id);
        self.commit(id, o)
    }

    /// A `custom_message`:
    /// `type,customType,content,display,details?,attribution,id,parentId,timestamp`.
    fn custom_message(&mut self) -> io::Result<()> {
        let id = self.new_id();
        self.advance(10, 20_000);
        let mut o = Object::with_capacity(9);
        o.insert("type", s("custom_message"));
        let kind = self.pick(&["irc:review", "file-watch", "background-job"]);
        o.insert("customType", s(kind));
        let mut body = String::new();
        let n = self.size(40, 2_500);
        text::prose(&mut self.rng, n, &mut body);
        let content = if self.chance(60) {
            s(body)
        } else {
            Value::Array(vec![text_block(body)])
        };
        o.insert("content", content);
        o.insert("display", Value::Bool(self.chance(70)));
        if self.chance(70) {
            let mut details = Object::with_capacity(3);
            details.insert("source", s(kind));
            details.insert("sequence", int(self.rng.gen_range(1..1_000)));
            if kind.starts_with("irc:") {
                details.insert(
                    "observationId",
                    s(format!("session:{}:entry:{id:08x}", self.session_id)),
                );
            }
            o.insert("details", Value::Object(details));
        }
        o.insert(
            "attribution",
            s(if self.chance(80) { "agent" } else { "user" }),
        );
        self.put_base(&mut o, id);
        self.commit(id, o)
    }

    /// A compaction whose first kept entry is a recent user message on the current branch.
    fn compaction(&mut self) -> io::Result<()> {
        let window = self.path.len().saturating_sub(60);
        let users: Vec<PathItem> = self.path[window..]
            .iter()
            .filter(|p| p.user)
            .copied()
            .collect();
        let kept = match users.len() {
            0 => match self.path.last() {
                Some(p) => *p,
                None => return Ok(()),
            },
            n => users[n - self.rng.gen_range(1..=n.min(3))],
        };
        let (id, mut o) = self.start("compaction", (20_000, 120_000));
        let mut summary = String::from("# Context Checkpoint\n\n");
        let n = self.size(800, 6_000);
        text::prose(&mut self.rng, n, &mut summary);
        o.insert("summary", s(summary));
        if !self.v5() {
            o.insert("firstKeptEntryIndex", int(kept.seq as i64));
            o.insert("tokensBefore", int(self.rng.gen_range(80_000..190_000)));
            return self.commit(id, o);
        }
        if self.chance(70) {
            let mut short = String::new();
            text::sentences(&mut self.rng, 50, &mut short);
            o.insert("shortSummary", s(short));
        }
        o.insert("firstKeptEntryId", s(format!("{:08x}", kept.id)));
        o.insert("tokensBefore", int(self.rng.gen_range(80_000..190_000)));
        if self.chance(80) {
            let read: Vec<&str> = (0..3).map(|_| text::file_path(&mut self.rng)).collect();
            let modified: Vec<&str> = (0..2).map(|_| text::file_path(&mut self.rng)).collect();
            o.insert(
                "details",
                object([
                    ("readFiles", strings(&read)),
                    ("modifiedFiles", strings(&modified)),
                ]),
            );
        }
        if self.chance(15) {
            o.insert("fromExtension", Value::Bool(self.chance(50)));
        }
        if MODELS[self.model].provider == "openai" && self.chance(30) {
            let mut encrypted = String::new();
            text::base64ish(&mut self.rng, 600, &mut encrypted);
            o.insert(
                "preserveData",
                object([(
                    "openaiRemoteCompaction",
                    object([
                        ("provider", s("openai")),
                        (
                            "replacementHistory",
                            Value::Array(vec![object([
                                ("type", s("compaction")),
                                ("encrypted_content", s(encrypted)),
                            ])]),
                        ),
                    ]),
                )]),
            );
        } else if self.chance(10) {
            o.insert("preserveData", object([("hookState", Value::Bool(true))]));
        }
        self.commit(id, o)
    }

    /// Moves the leaf back to an entry just before a recent user message on the current
    /// branch, so that the next entry starts a sibling branch. Returns whether it moved.
    fn branch(&mut self) -> bool {
        let window = self.path.len().saturating_sub(30);
        let points: Vec<usize> = (window.max(1)..self.path.len())
            .filter(|&k| self.path[k].user)
            .map(|k| k - 1)
            .collect();
        if points.is_empty() {
            return false;
        }
        let at = self.pick(&points);
        self.path.truncate(at + 1);
        true
    }

    /// Branches and records a summary of the abandoned path (`branchWithSummary`).
    fn branch_with_summary(&mut self) -> io::Result<()> {
        if !self.branch() {
            return Ok(());
        }
        let from = self.leaf().map(|p| format!("{p:08x}"));
        let (id, mut o) = self.start("branch_summary", (1_000, 30_000));
        o.insert("fromId", s(from.unwrap_or_else(|| "root".to_owned())));
        let mut summary = String::from("The user explored an alternative: ");
        let n = self.size(200, 2_500);
        text::prose(&mut self.rng, n, &mut summary);
        o.insert("summary", s(summary));
        if self.chance(40) {
            let read: Vec<&str> = (0..2).map(|_| text::file_path(&mut self.rng)).collect();
            o.insert("details", object([("readFiles", strings(&read))]));
        }
        if self.chance(20) {
            o.insert("fromExtension", Value::Bool(true));
        }
        self.commit(id, o)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Ending {
    ToolUse,
    Stop,
    Aborted,
    Error,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(seed: u64, limit: Limit, format: Format) -> Options {
        Options {
            seed,
            limit,
            format,
        }
    }

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("2048"), Ok(2048));
        assert_eq!(parse_size("100MB"), Ok(100_000_000));
        assert_eq!(parse_size("100 mb"), Ok(100_000_000));
        assert_eq!(parse_size("20MiB"), Ok(20 << 20));
        assert_eq!(parse_size("1.5k"), Ok(1_500));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        for bad in ["", "MB", "12XB", "-5MB", "1..2MB", ".5MB", "0", "5.MB"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn entry_limit_is_exact_and_counted() {
        let opts = options(3, Limit::Entries(500), Format::V5);
        let bytes = generate_bytes(&opts);
        let text = std::str::from_utf8(&bytes).unwrap();
        assert_eq!(text.lines().count(), 501);
        let summary = generate(&opts, io::sink()).unwrap();
        assert_eq!(summary.entries, 500);
        assert_eq!(summary.bytes, bytes.len() as u64);
        assert_eq!(summary.by_type.values().sum::<u64>(), 500);
    }

    #[test]
    fn lone_surrogates_are_written_as_escapes() {
        let v = with_lone_surrogate("cut \"here\"");
        assert_eq!(json::to_compact(&v), "\"cut \\\"here\\\"\\ud83d\"");
        assert!(v.as_str().is_none());
    }

    #[test]
    fn v1_entries_have_no_ids() {
        let bytes = generate_bytes(&options(5, Limit::Entries(800), Format::V1));
        let text = std::str::from_utf8(&bytes).unwrap();
        let mut lines = text.lines();
        let header = json::parse(lines.next().unwrap()).unwrap();
        assert!(header.as_object().unwrap().get("version").is_none());
        let mut compactions = 0;
        for (n, line) in lines.enumerate() {
            let v = json::parse(line).unwrap();
            let o = v.as_object().unwrap();
            assert!(o.get("id").is_none() && o.get("parentId").is_none());
            if o.get_str("type") == Some("compaction") {
                compactions += 1;
                let index = o.get("firstKeptEntryIndex").unwrap().as_f64().unwrap();
                assert!(index >= 1.0 && (index as usize) <= n, "{index} at line {n}");
            }
        }
        assert!(compactions > 0);
    }
}
