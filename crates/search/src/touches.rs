//! Which files a record says the agent read or changed: the agent's own rule for the file
//! lists of its compactions, applied to every replayed record.
//!
//! - An assistant message's `toolCall` blocks: `read` with a string `arguments.path` read
//!   that file; `edit` and `write` with one changed it. Other tools (`bash`, `grep`, …)
//!   touch nothing here, whatever their arguments name.
//! - A `compaction` or `branch_summary` record's `details`: each string of `readFiles` was
//!   read, each of `modifiedFiles` changed (the lists the agent kept of the history the
//!   summary replaced).
//!
//! A path is taken as text, as written (a lone UTF-16 surrogate read as U+FFFD), and never
//! opened. It is resolved against the session's `cwd` when relative and normalized
//! lexically ([`resolve`]). An empty path touches nothing.

use std::path::Path;

use gjcfs_engine::format::record::{Record, RecordType};
use gjcfs_engine::json::{Object, Value};
use gjcfs_engine::store::agent_dir::normalize;

/// What a record did to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    /// Read it (the `read` tool, a summary's `readFiles`).
    Read,
    /// Changed it (the `edit` and `write` tools, a summary's `modifiedFiles`).
    Changed,
}

impl Action {
    /// `read` or `changed`, as the index and `gjcfs files` name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Read => "read",
            Action::Changed => "changed",
        }
    }

    /// The action named by [`Action::as_str`].
    pub fn parse(name: &str) -> Option<Action> {
        match name {
            "read" => Some(Action::Read),
            "changed" => Some(Action::Changed),
            _ => None,
        }
    }
}

/// One file a record touched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Touch {
    pub action: Action,
    /// The tool's name (`read`, `edit`, `write`), or the record's type (`compaction`,
    /// `branch_summary`).
    pub source: String,
    /// The path as the record has it.
    pub written: String,
    /// The path resolved against the session's cwd ([`resolve`]).
    pub resolved: String,
}

/// The files `record` touched, in the order it names them; relative paths resolved
/// against `cwd`, the session header's.
pub fn record_touches(record: &Record, cwd: &str) -> Vec<Touch> {
    let mut out = Touches {
        cwd,
        list: Vec::new(),
    };
    match record.record_type() {
        RecordType::Message => {
            if let Some(message) = record.message() {
                if message.get_str("role") == Some("assistant") {
                    out.tool_calls(message.get("content"));
                }
            }
        }
        RecordType::Compaction | RecordType::BranchSummary => {
            let source = record.get_str("type").unwrap_or_default();
            if let Some(details) = record.get("details").and_then(Value::object_view) {
                out.listed(&details, "readFiles", Action::Read, source);
                out.listed(&details, "modifiedFiles", Action::Changed, source);
            }
        }
        _ => {}
    }
    out.list
}

/// `written` resolved: an absolute path as it is, a relative one joined to `cwd`, then
/// normalized lexically ([`normalize`]: `.` and repeated slashes dropped, `..` folded into
/// its parent), without looking at any filesystem. A path starting with `~` is kept
/// (normalized) rather than joined: the home directory of the machine the session ran on
/// is not known.
pub fn resolve(written: &str, cwd: &str) -> String {
    let path = Path::new(written);
    let joined = if path.is_absolute() || written.starts_with('~') {
        path.to_owned()
    } else {
        Path::new(cwd).join(path)
    };
    normalize(&joined).to_string_lossy().into_owned()
}

/// Touches being gathered.
struct Touches<'a> {
    cwd: &'a str,
    list: Vec<Touch>,
}

impl Touches<'_> {
    fn push(&mut self, action: Action, source: &str, written: &Value) {
        let Value::String(written) = written else {
            return;
        };
        let written = written.to_string_lossy();
        if written.is_empty() {
            return;
        }
        self.list.push(Touch {
            action,
            source: source.to_owned(),
            resolved: resolve(&written, self.cwd),
            written: written.into_owned(),
        });
    }

    /// The `read`, `edit` and `write` calls of a message's `content`.
    fn tool_calls(&mut self, content: Option<&Value>) {
        let Some(content) = content else {
            return;
        };
        let content = content.expanded();
        let Value::Array(blocks) = content.as_ref() else {
            return;
        };
        for block in blocks {
            let Some(block) = block.object_view() else {
                continue;
            };
            if block.get_str("type") != Some("toolCall") {
                continue;
            }
            let (action, name) = match block.get_str("name") {
                Some(name @ "read") => (Action::Read, name),
                Some(name @ ("edit" | "write")) => (Action::Changed, name),
                _ => continue,
            };
            let arguments = block.get("arguments").and_then(Value::object_view);
            if let Some(path) = arguments.as_deref().and_then(|a| a.get("path")) {
                self.push(action, name, &path.expanded());
            }
        }
    }

    /// Each string of the array `details[key]`.
    fn listed(&mut self, details: &Object, key: &str, action: Action, source: &str) {
        let Some(list) = details.get(key) else {
            return;
        };
        if let Value::Array(paths) = list.expanded().as_ref() {
            for path in paths {
                self.push(action, source, &path.expanded());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touches(line: &str, cwd: &str) -> Vec<(Action, String, String, String)> {
        record_touches(&Record::parse_line(line).unwrap(), cwd)
            .into_iter()
            .map(|t| (t.action, t.source, t.written, t.resolved))
            .collect()
    }

    fn touch(
        action: Action,
        source: &str,
        written: &str,
        resolved: &str,
    ) -> (Action, String, String, String) {
        (action, source.into(), written.into(), native(resolved))
    }

    /// A path as the platform's lexical normalization writes it (`\` on Windows).
    fn native(path: &str) -> String {
        path.replace('/', std::path::MAIN_SEPARATOR_STR)
    }

    #[test]
    fn read_edit_and_write_calls_touch_their_paths_and_other_tools_none() {
        let line = r#"{"type":"message","id":"a","message":{"role":"assistant","content":[
            {"type":"text","text":"read /etc/passwd"},
            {"type":"toolCall","id":"1","name":"read","arguments":{"path":"src/main.rs","offset":10,"limit":5}},
            {"type":"toolCall","id":"2","name":"edit","arguments":{"path":"/abs/lib.rs","oldText":"a","newText":"b"}},
            {"type":"toolCall","id":"3","name":"write","arguments":{"path":"./out/../new.txt","content":"x"}},
            {"type":"toolCall","id":"4","name":"bash","arguments":{"command":"cat x","path":"bash.txt"}},
            {"type":"toolCall","id":"5","name":"grep","arguments":{"pattern":"p","path":"src"}},
            {"type":"toolCall","id":"6","name":"read","arguments":{"path":7}},
            {"type":"toolCall","id":"7","name":"read","arguments":{"file":"other.rs"}},
            {"type":"toolCall","id":"8","name":"read","arguments":{"path":""}},
            {"type":"toolCall","id":"9","name":"Read","arguments":{"path":"case.rs"}}
        ]}}"#
            .replace('\n', "");
        assert_eq!(
            touches(&line, "/w/proj"),
            [
                touch(Action::Read, "read", "src/main.rs", "/w/proj/src/main.rs"),
                touch(Action::Changed, "edit", "/abs/lib.rs", "/abs/lib.rs"),
                touch(
                    Action::Changed,
                    "write",
                    "./out/../new.txt",
                    "/w/proj/new.txt"
                ),
            ]
        );
    }

    #[test]
    fn only_an_assistant_calls_tools() {
        let line = r#"{"type":"message","id":"a","message":{"role":"user","content":[{"type":"toolCall","name":"read","arguments":{"path":"a.rs"}}]}}"#;
        assert!(touches(line, "/w").is_empty());
        let text =
            r#"{"type":"message","id":"a","message":{"role":"assistant","content":"read a.rs"}}"#;
        assert!(touches(text, "/w").is_empty());
    }

    #[test]
    fn relative_paths_resolve_against_the_cwd_lexically() {
        assert_eq!(resolve("a/./b//c.rs", "/w/p"), native("/w/p/a/b/c.rs"));
        assert_eq!(resolve("../sibling/x", "/w/p"), native("/w/sibling/x"));
        assert_eq!(resolve("../../../../x", "/w/p"), native("/x"));
        assert_eq!(resolve("/abs/./y/../z", "/w/p"), native("/abs/z"));
        assert_eq!(resolve("x", "/w/p/"), native("/w/p/x"));
        assert_eq!(resolve("~/.config/x", "/w/p"), native("~/.config/x"));
        // Without a cwd a relative path stays relative: no query path can equal it.
        assert_eq!(resolve("src/a.rs", ""), native("src/a.rs"));
    }

    #[test]
    fn summaries_touch_their_detail_lists() {
        let compaction = r#"{"type":"compaction","id":"c","summary":"s","details":{"readFiles":["a.rs","/b.rs",3],"modifiedFiles":["c.rs"]}}"#;
        assert_eq!(
            touches(compaction, "/w"),
            [
                touch(Action::Read, "compaction", "a.rs", "/w/a.rs"),
                touch(Action::Read, "compaction", "/b.rs", "/b.rs"),
                touch(Action::Changed, "compaction", "c.rs", "/w/c.rs"),
            ]
        );
        let branch = r#"{"type":"branch_summary","id":"b","fromId":"x","summary":"s","details":{"readFiles":["d.rs"]}}"#;
        assert_eq!(
            touches(branch, "/w"),
            [touch(Action::Read, "branch_summary", "d.rs", "/w/d.rs")]
        );
        let bare = r#"{"type":"compaction","id":"c","summary":"s","details":{"readFiles":"a.rs"}}"#;
        assert!(touches(bare, "/w").is_empty());
        // Another entry type with the same details touches nothing.
        let custom =
            r#"{"type":"custom","id":"c","customType":"t","details":{"readFiles":["a.rs"]}}"#;
        assert!(touches(custom, "/w").is_empty());
    }
}
