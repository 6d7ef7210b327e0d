//! What of a session is searchable: the text of each replayed record.
//!
//! One document per record that has text ([`record_text`]), plus one for the session's
//! title. The text is what a reader of the session sees, never metadata or opaque data:
//! - `message` entries, by role: the `content` of user, developer, custom and assistant
//!   messages and of tool results — a string, or its blocks: `text`, `thinking` (not its
//!   signature), and a `toolCall`'s name followed by every string inside its arguments, one
//!   a line; images and redacted thinking are skipped. A `bashExecution` or
//!   `pythonExecution` message contributes its command (or code) and output. Any other
//!   role contributes its `content` the same way.
//! - `custom_message`: its `content`, as a message's; `compaction` and `branch_summary`:
//!   their `summary`; `label`: its label; `session_init`: its `task` (what a sub-agent was
//!   asked to do).
//! - Text a compaction moved into the blob store (cold spill) counts as the text of the
//!   entry it belongs to, read back when the index has the store's blob store
//!   (`SearchIndex::with_blobs`).
//! - Every other entry type (model and mode changes, tool selections, `custom` extension
//!   state, …) holds no text.
//!
//! Parts are joined with a newline. Strings holding lone UTF-16 surrogates are read with
//! U+FFFD in their place.

use gjcfs_engine::format::record::{Record, RecordType};
use gjcfs_engine::json::{Object, Value};

/// The kind a document has, as hits report it: a message's role (`user`, `assistant`,
/// `toolResult`, …), the entry type of other entries, or [`TITLE_KIND`].
pub fn record_kind(record: &Record) -> String {
    match record.record_type() {
        RecordType::Message => record
            .message()
            .and_then(|m| m.get_str("role"))
            .unwrap_or("message")
            .to_owned(),
        _ => record.get_str("type").unwrap_or("entry").to_owned(),
    }
}

/// The kind of the document holding a session's title.
pub const TITLE_KIND: &str = "title";

/// The searchable text of a record (see the module documentation); empty when it has none.
pub fn record_text(record: &Record) -> String {
    let mut out = Text::default();
    match record.record_type() {
        RecordType::Message => {
            if let Some(message) = record.message() {
                message_text(message, &mut out);
            }
        }
        RecordType::CustomMessage => content_text(record.get("content"), &mut out),
        RecordType::Compaction | RecordType::BranchSummary => out.value(record.get("summary")),
        RecordType::Label => out.value(record.get("label")),
        // What a sub-agent was asked to do (not its system prompt or tools).
        RecordType::SessionInit => out.value(record.get("task")),
        _ => {}
    }
    out.0
}

fn message_text(message: &Object, out: &mut Text) {
    match message.get_str("role") {
        Some("bashExecution") => {
            out.value(message.get("command"));
            out.value(message.get("output"));
        }
        Some("pythonExecution") => {
            out.value(message.get("code"));
            out.value(message.get("output"));
        }
        _ => content_text(message.get("content"), out),
    }
}

/// A message `content`: a string, or an array of blocks.
fn content_text(content: Option<&Value>, out: &mut Text) {
    let Some(content) = content else {
        return;
    };
    let content = content.expanded();
    match content.as_ref() {
        Value::String(_) => out.value(Some(&content)),
        Value::Array(blocks) => {
            // Blocks one level below the record (a custom message's) stay raw when read.
            for block in blocks {
                if let Some(block) = block.object_view() {
                    block_text(&block, out);
                }
            }
        }
        _ => {}
    }
}

fn block_text(block: &Object, out: &mut Text) {
    match block.get_str("type") {
        Some("text") => out.value(block.get("text")),
        Some("thinking") => out.value(block.get("thinking")),
        Some("toolCall") => {
            out.value(block.get("name"));
            if let Some(arguments) = block.get("arguments") {
                out.strings_in(&arguments.expanded());
            }
        }
        _ => {}
    }
}

/// Text being gathered, parts one a line.
#[derive(Default)]
struct Text(String);

impl Text {
    fn push(&mut self, part: &str) {
        if part.is_empty() {
            return;
        }
        if !self.0.is_empty() {
            self.0.push('\n');
        }
        self.0.push_str(part);
    }

    /// A string value; anything else adds nothing.
    fn value(&mut self, value: Option<&Value>) {
        if let Some(Value::String(s)) = value {
            self.push(&s.to_string_lossy());
        }
    }

    /// Every string inside a value (object members' values and array items, depth first).
    fn strings_in(&mut self, value: &Value) {
        match value {
            Value::String(s) => self.push(&s.to_string_lossy()),
            Value::Array(items) => items.iter().for_each(|v| self.strings_in(v)),
            Value::Object(o) => o.iter().for_each(|(_, v)| self.strings_in(v)),
            Value::Raw(_) => self.strings_in(&value.expanded()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(line: &str) -> String {
        record_text(&Record::parse_line(line).unwrap())
    }

    #[test]
    fn messages_give_the_text_a_reader_sees() {
        assert_eq!(
            text(r#"{"type":"message","id":"a","message":{"role":"user","content":"hello"}}"#),
            "hello"
        );
        let assistant = r#"{"type":"message","id":"a","message":{"role":"assistant","content":[{"type":"thinking","thinking":"ponder","thinkingSignature":"SIGNATURE"},{"type":"text","text":"answer"},{"type":"toolCall","id":"c","name":"edit","arguments":{"path":"a.rs","edits":[{"old":"x"}],"n":3}},{"type":"redactedThinking","data":"SECRET"},{"type":"image","data":"BASE64"}]}}"#;
        assert_eq!(text(assistant), "ponder\nanswer\nedit\na.rs\nx");
        let bash = r#"{"type":"message","id":"a","message":{"role":"bashExecution","command":"ls","output":"file","exitCode":0}}"#;
        assert_eq!(text(bash), "ls\nfile");
    }

    #[test]
    fn other_entries() {
        assert_eq!(
            text(r#"{"type":"compaction","id":"a","summary":"sum","tokensBefore":3}"#),
            "sum"
        );
        assert_eq!(
            text(r#"{"type":"label","id":"a","targetId":"b","label":"mark"}"#),
            "mark"
        );
        assert_eq!(
            text(
                r#"{"type":"custom_message","id":"a","customType":"t","content":[{"type":"text","text":"cm"}]}"#
            ),
            "cm"
        );
        assert_eq!(
            text(r#"{"type":"custom","id":"a","customType":"t","data":{"x":"state"}}"#),
            ""
        );
        assert_eq!(
            text(r#"{"type":"model_change","id":"a","provider":"p","modelId":"m"}"#),
            ""
        );
        assert_eq!(
            text(
                r#"{"type":"session_init","id":"a","systemPrompt":"SYSTEM","task":"port the parser","tools":["read"]}"#
            ),
            "port the parser"
        );
    }
}
