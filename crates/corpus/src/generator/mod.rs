//! The generator: one pass over a seeded random source, writing each record as it is made.
//! This module holds its state, the line writer and the header; `conversation` the turns
//! (user, assistant, tool calls and results), `entries` every other entry type and the
//! branching.

mod conversation;
mod entries;

use std::collections::HashSet;
use std::io::{self, Write};

use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use rand::{RngExt, SeedableRng};

use gjcfs_engine::format::time::{format_iso_millis, parse_iso_millis};
use gjcfs_engine::json::{self, Object, Value};

use crate::tables::*;
use crate::text;
use crate::values::*;
use crate::{Format, Limit, Options, Summary};

/// Writes one session to `out` and returns what was written.
pub(crate) fn generate(options: &Options, out: impl Write) -> io::Result<Summary> {
    let mut g = Generator::new(options, out);
    g.run()?;
    g.out.flush()?;
    Ok(g.summary)
}

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
    /// The header's `cwd`, if the options give one.
    cwd: Option<String>,
    out: W,
    summary: Summary,
    /// The bytes counted against a byte limit: those written, the header counted as it is
    /// with the cwd the seed draws, so that a cwd given changes nothing after the header.
    counted: u64,
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
    /// Payload bytes drawn for the entry being built, not yet written: a byte limit caps
    /// each payload by what is missing after them, so that the parts of one entry together
    /// stay under it.
    drawn: usize,
}

impl<W: Write> Generator<W> {
    fn new(options: &Options, out: W) -> Self {
        let mut rng = SmallRng::seed_from_u64(options.seed);
        let base = parse_iso_millis("2026-01-05T08:00:00.000Z").unwrap_or(0);
        let now = base
            + (options.seed % 365) as i64 * 86_400_000
            + rng.random_range(0..36_000_000i64)
            + rng.random_range(0..1000i64);
        Generator {
            rng,
            format: options.format,
            limit: options.limit,
            cwd: options.cwd.clone(),
            out,
            summary: Summary::default(),
            counted: 0,
            now,
            session_id: String::new(),
            ids: HashSet::new(),
            all_ids: Vec::new(),
            path: Vec::new(),
            model: 0,
            plan_mode: false,
            line: Vec::with_capacity(1 << 16),
            drawn: 0,
        }
    }

    fn v5(&self) -> bool {
        self.format == Format::V5
    }

    fn done(&self) -> bool {
        match self.limit {
            Limit::Entries(n) => self.summary.entries >= n,
            Limit::Bytes(n) => self.counted >= n,
        }
    }

    /// `n`, or less when a byte limit is close: at most half of what is still missing once
    /// the payloads already drawn for this entry are counted.
    fn cap(&mut self, n: usize) -> usize {
        let capped = match self.limit {
            Limit::Entries(_) => n,
            Limit::Bytes(target) => {
                let missing = target.saturating_sub(self.counted) as usize;
                n.min((missing.saturating_sub(self.drawn) / 2).max(48))
            }
        };
        self.drawn += capped;
        capped
    }

    /// A payload size drawn from `lo..hi`, capped by the byte limit.
    fn size(&mut self, lo: usize, hi: usize) -> usize {
        let n = self.rng.random_range(lo..hi);
        self.cap(n)
    }

    /// A tool output size: mostly small, sometimes several kilobytes, now and then tens of
    /// kilobytes.
    fn output_size(&mut self) -> usize {
        let n = match self.rng.random_range(0..100) {
            0..=44 => self.rng.random_range(40..800),
            45..=79 => self.rng.random_range(800..6_000),
            80..=94 => self.rng.random_range(6_000..25_000),
            _ => self.rng.random_range(25_000..80_000),
        };
        self.cap(n)
    }

    fn advance(&mut self, lo: i64, hi: i64) -> i64 {
        self.now += self.rng.random_range(lo..hi);
        self.now
    }

    fn chance(&mut self, percent: u32) -> bool {
        self.rng.random_range(0..100) < percent
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        *items.choose(&mut self.rng).expect("non-empty table")
    }

    fn uuid_v4(&mut self) -> String {
        let bytes: [u8; 16] = self.rng.random();
        uuid::Builder::from_random_bytes(bytes)
            .into_uuid()
            .hyphenated()
            .to_string()
    }

    fn uuid_v7(&mut self, millis: i64) -> String {
        let bytes: [u8; 10] = self.rng.random();
        uuid::Builder::from_unix_timestamp_millis(millis.max(0) as u64, &bytes)
            .into_uuid()
            .hyphenated()
            .to_string()
    }

    fn new_id(&mut self) -> u32 {
        loop {
            let id: u32 = self.rng.random();
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
        self.counted += self.line.len() as u64;
        self.drawn = 0;
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
            let events = match self.rng.random_range(0..100) {
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

    // Header and start-up.

    fn header(&mut self) -> io::Result<()> {
        let drawn = self.pick(CWDS);
        let given = self.cwd.take();
        let cwd = given.as_deref().unwrap_or(drawn);
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
            return self.write_header(&h, drawn, cwd);
        }
        self.session_id = self.uuid_v7(self.now);
        h.insert("version", int(5));
        h.insert("id", s(self.session_id.clone()));
        let mut title = String::new();
        text::sentences(&mut self.rng, 20, &mut title);
        match self.rng.random_range(0..10) {
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
        self.write_header(&h, drawn, cwd)
    }

    /// Writes the header `h`, which holds `cwd`, counting it against a byte limit as it is
    /// with the cwd `drawn`.
    fn write_header(&mut self, h: &Object, drawn: &str, cwd: &str) -> io::Result<()> {
        self.write_line(h)?;
        let json_len = |text: &str| {
            let mut bytes = Vec::with_capacity(text.len() + 2);
            json::write_compact(&s(text), &mut bytes);
            bytes.len() as u64
        };
        self.counted = self.counted + json_len(drawn) - json_len(cwd);
        Ok(())
    }

    /// What a fresh session appends before the first prompt.
    fn startup(&mut self) -> io::Result<()> {
        self.session_init()?;
        self.model_change()?;
        self.thinking_level_change()?;
        self.configured_model_chain()?;
        self.tool_selections()
    }
}
