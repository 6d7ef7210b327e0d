//! The conversation: turns of a user message, assistant messages, tool calls and results.

use std::io::{self, Write};

use rand::RngExt;

use gjcfs_engine::json::{Object, Value};

use super::Generator;
use crate::tables::*;
use crate::text;
use crate::values::*;

impl<W: Write> Generator<W> {
    pub(super) fn turn(&mut self) -> io::Result<()> {
        if self.chance(3) {
            return self.bash_execution();
        }
        self.user_message()?;
        let steps = match self.rng.random_range(0..100) {
            0..=29 => 0,
            30..=59 => 1,
            60..=79 => 2,
            80..=91 => 3,
            _ => self.rng.random_range(4..9),
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
        let ending = match self.rng.random_range(0..100) {
            0..=3 => Ending::Aborted,
            4 => Ending::Error,
            _ => Ending::Stop,
        };
        self.assistant_message(ending).map(drop)
    }

    pub(super) fn user_message(&mut self) -> io::Result<()> {
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
        m.insert("timestamp", int(self.now - self.rng.random_range(1..20)));
        o.insert("message", Value::Object(m));
        self.commit(id, o)
    }

    /// A small PNG-looking image whose base64 stays under 1,024 characters.
    pub(super) fn image_block(&mut self) -> Value {
        let n = self.rng.random_range(120..700);
        let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
        bytes.extend((0..n).map(|_| self.rng.random::<u8>()));
        object([
            ("type", s("image")),
            ("data", s(text::base64(&bytes))),
            ("mimeType", s("image/png")),
        ])
    }

    pub(super) fn bash_execution(&mut self) -> io::Result<()> {
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
    pub(super) fn assistant_message(
        &mut self,
        ending: Ending,
    ) -> io::Result<Vec<(String, &'static str)>> {
        let started = self.now + self.rng.random_range(5..50);
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
            let n = self.rng.random_range(100..800);
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
            for _ in 0..self.rng.random_range(1..4) {
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
            m.insert("ttft", int(self.rng.random_range(300..4_000)));
        }
        o.insert("message", Value::Object(m));
        self.commit(id, o)?;
        Ok(calls)
    }

    pub(super) fn usage(&mut self, model: &ModelSpec, failed: bool) -> Value {
        let (input, output, cache_read, cache_write) = if failed {
            (0, 0, 0, 0)
        } else {
            (
                self.rng.random_range(1..6_000i64),
                self.rng.random_range(20..4_000i64),
                self.rng.random_range(0..160_000i64),
                if self.chance(40) {
                    self.rng.random_range(100..8_000i64)
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
            u.insert("reasoningTokens", int(self.rng.random_range(0..output + 1)));
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

    pub(super) fn tool_call(&mut self, provider: &str) -> ((String, &'static str), Value) {
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
                        ("offset", int(self.rng.random_range(1..500))),
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

    pub(super) fn tool_result(
        &mut self,
        (call_id, tool): (String, &'static str),
    ) -> io::Result<()> {
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
                    lone_surrogate = self.rng.random_range(0..400) == 0;
                }
                "edit" => {
                    let path = text::file_path(&mut self.rng);
                    out.push_str(&format!("Successfully replaced text in {path}."));
                    let mut d = String::new();
                    let n = self.size(100, 2_500);
                    text::diff(&mut self.rng, n, &mut d);
                    details = Some(object([
                        ("diff", s(d)),
                        ("firstChangedLine", int(self.rng.random_range(1..900))),
                    ]));
                }
                "write" => {
                    let path = text::file_path(&mut self.rng);
                    let n = self.rng.random_range(200..12_000);
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
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Ending {
    ToolUse,
    Stop,
    Aborted,
    Error,
}
