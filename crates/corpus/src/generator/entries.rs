//! Every entry type but the conversation's: changes of model, thinking level and service
//! tier, start-up records, labels, custom entries, compactions and branches.

use std::io::{self, Write};

use rand::seq::SliceRandom;
use rand::RngExt;

use gjcfs_engine::json::{Object, Value};

use super::{Generator, PathItem};
use crate::tables::*;
use crate::text;
use crate::values::*;

impl<W: Write> Generator<W> {
    pub(super) fn event(&mut self) -> io::Result<()> {
        if !self.v5() {
            return match self.rng.random_range(0..10) {
                0..=4 => self.thinking_level_change(),
                5..=7 => self.model_change(),
                _ => self.compaction(),
            };
        }
        match self.rng.random_range(0..100) {
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

    pub(super) fn thinking_level_change(&mut self) -> io::Result<()> {
        let (id, mut o) = self.start("thinking_level_change", (100, 30_000));
        let level = if self.v5() && self.chance(3) {
            Value::Null
        } else {
            s(self.pick(THINKING_LEVELS))
        };
        o.insert("thinkingLevel", level);
        self.commit(id, o)
    }

    pub(super) fn model_change(&mut self) -> io::Result<()> {
        let (id, mut o) = self.start("model_change", (100, 30_000));
        let previous = self.model;
        let next = self.rng.random_range(0..MODELS.len());
        let spec = &MODELS[next];
        if !self.v5() {
            self.model = next;
            o.insert("provider", s(spec.provider));
            o.insert("modelId", s(spec.model));
            return self.commit(id, o);
        }
        o.insert("model", s(format!("{}/{}", spec.provider, spec.model)));
        match self.rng.random_range(0..10) {
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

    pub(super) fn service_tier_change(&mut self) -> io::Result<()> {
        let (id, mut o) = self.start("service_tier_change", (100, 30_000));
        let tier = match self.rng.random_range(0..3) {
            0 => Value::Null,
            1 => s("flex"),
            _ => s("priority"),
        };
        o.insert("serviceTier", tier);
        self.commit(id, o)
    }

    pub(super) fn configured_model_chain(&mut self) -> io::Result<()> {
        let (id, mut o) = self.start("configured_model_chain", (50, 5_000));
        let role = self.pick(&["default", "default", "smol", "slow"]);
        o.insert("role", s(role));
        let cleared = role != "default" && self.chance(15);
        if cleared {
            o.insert("entries", Value::Array(Vec::new()));
        } else {
            let n = self.rng.random_range(1..=MODELS.len());
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
                s(format!("chain-{:04x}", self.rng.random::<u16>())),
            );
        }
        o.insert("explicitHead", Value::Bool(self.chance(50)));
        if cleared {
            o.insert("cleared", Value::Bool(true));
        }
        self.commit(id, o)
    }

    pub(super) fn session_init(&mut self) -> io::Result<()> {
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
    pub(super) fn tool_selections(&mut self) -> io::Result<()> {
        let correlation = self.chance(80).then(|| self.uuid_v4());
        let (id, mut o) = self.start("mcp_tool_selection", (50, 5_000));
        let mut names = MCP_TOOLS.to_vec();
        names.shuffle(&mut self.rng);
        names.truncate(self.rng.random_range(0..=MCP_TOOLS.len()));
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
        names.truncate(self.rng.random_range(1..=BUILTIN_TOOLS.len()));
        o.insert("selectedToolNames", strings(&names));
        if let Some(c) = correlation {
            o.insert("mutationCorrelationId", s(c));
        }
        self.commit(id, o)
    }

    pub(super) fn mode_change(&mut self) -> io::Result<()> {
        let (id, mut o) = self.start("mode_change", (100, 10_000));
        if self.plan_mode {
            o.insert("mode", s("none"));
        } else {
            o.insert("mode", s("plan"));
            let name = self.rng.random::<u32>();
            o.insert(
                "data",
                object([("planFile", s(format!("/tmp/gjc-plan-{name:08x}.md")))]),
            );
        }
        self.plan_mode = !self.plan_mode;
        self.commit(id, o)
    }

    pub(super) fn ttsr_injection(&mut self) -> io::Result<()> {
        let (id, mut o) = self.start("ttsr_injection", (10, 2_000));
        let mut rules = RULES.to_vec();
        rules.shuffle(&mut self.rng);
        rules.truncate(self.rng.random_range(1..4));
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
                        r.insert("repeatGap", int(self.rng.random_range(2..20)));
                    }
                    Value::Object(r)
                })
                .collect();
            o.insert("injectedRuleRecords", Value::Array(records));
            o.insert("ttsrMessageCount", int(self.rng.random_range(1..400)));
        }
        self.commit(id, o)
    }

    pub(super) fn label(&mut self) -> io::Result<()> {
        if self.all_ids.is_empty() {
            return Ok(());
        }
        let recent = self.all_ids.len().saturating_sub(200);
        let target = self.all_ids[self.rng.random_range(recent..self.all_ids.len())];
        let (id, mut o) = self.start("label", (500, 60_000));
        o.insert("targetId", s(format!("{target:08x}")));
        if self.chance(85) {
            o.insert("label", s(self.pick(LABELS)));
        }
        self.commit(id, o)
    }

    /// A new custom record of type `ty` (`custom` or `custom_message`), up to `gap` ms
    /// after the last: its id, the object holding `type,customType`, and the custom type (their base members
    /// come last, after the payload).
    fn start_custom(
        &mut self,
        ty: &str,
        kinds: &[&'static str],
        gap: i64,
    ) -> (u32, Object, &'static str) {
        let id = self.new_id();
        self.advance(10, gap);
        let mut o = Object::with_capacity(9);
        o.insert("type", s(ty));
        let kind = self.pick(kinds);
        o.insert("customType", s(kind));
        (id, o, kind)
    }

    /// A `custom` entry: `type,customType,data?,id,parentId,timestamp`.
    pub(super) fn custom(&mut self) -> io::Result<()> {
        let (id, mut o, _) = self.start_custom(
            "custom",
            &["gjc-todo", "plan-state", "extension:git-status"],
            5_000,
        );
        if self.chance(90) {
            let todos = (0..self.rng.random_range(1..6))
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
    pub(super) fn custom_message(&mut self) -> io::Result<()> {
        let (id, mut o, kind) = self.start_custom(
            "custom_message",
            &["irc:review", "file-watch", "background-job"],
            20_000,
        );
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
            details.insert("sequence", int(self.rng.random_range(1..1_000)));
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
    pub(super) fn compaction(&mut self) -> io::Result<()> {
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
            n => users[n - self.rng.random_range(1..=n.min(3))],
        };
        let (id, mut o) = self.start("compaction", (20_000, 120_000));
        let mut summary = String::from("# Context Checkpoint\n\n");
        let n = self.size(800, 6_000);
        text::prose(&mut self.rng, n, &mut summary);
        o.insert("summary", s(summary));
        if !self.v5() {
            o.insert("firstKeptEntryIndex", int(kept.seq as i64));
            o.insert("tokensBefore", int(self.rng.random_range(80_000..190_000)));
            return self.commit(id, o);
        }
        if self.chance(70) {
            let mut short = String::new();
            text::sentences(&mut self.rng, 50, &mut short);
            o.insert("shortSummary", s(short));
        }
        o.insert("firstKeptEntryId", s(format!("{:08x}", kept.id)));
        o.insert("tokensBefore", int(self.rng.random_range(80_000..190_000)));
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
    pub(super) fn branch(&mut self) -> bool {
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
    pub(super) fn branch_with_summary(&mut self) -> io::Result<()> {
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
