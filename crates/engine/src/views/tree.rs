//! `tree.txt`: every entry of the session tree ([`Session::tree`]) on one line, drawn like the
//! agent's `/tree` view but so that long conversations stay flat.
//!
//! Format (invariants):
//! - One line per entry of the tree, in depth-first order, each ended by `\n`; nothing else.
//!   (An entry whose id a later entry reuses is not in the tree: the id names the later one.)
//! - A line is `<gutter><id> [<label>] <kind>: <preview>  ← leaf`, where only `<gutter>`
//!   and `<id>` are always present. `<id>` is the entry id as stored (`-` when it has none),
//!   followed by a space; `[<label>]` is the entry's current label; `<kind>` is the message
//!   role for a `message` entry (`toolResult(<tool name>)` for a tool result) and the entry
//!   type for any other entry; `<preview>` is up to [`PREVIEW_CHARS`] characters of the
//!   entry's text on one line ([`one_line`]) — for an assistant message without text, its
//!   tool calls (`→ read, edit`) or else why it stopped (`(aborted: …)`); `  ← leaf` marks
//!   the current leaf (for a leaf marker, the entry it stands for). Leaf markers themselves
//!   have no line: each is the leaf pointer on its parent, and entries appended after it
//!   hang off that parent.
//! - Children are ordered by timestamp, as in the agent, except that the child whose
//!   subtree holds the current leaf comes last. The last child of an entry continues in the
//!   entry's own column, without a connector, so the path from the root to the leaf (and a
//!   linear conversation) is one unindented column. Every other child opens a side branch:
//!   its line starts with `├─ ` and the lines of its subtree with `│  `, under the column of
//!   the entry it branches from. Several roots are drawn as children of an invisible root.
//! - The tree is walked with an explicit stack, so any depth renders; the gutter grows by
//!   three columns per nested side branch only.
//! - The `_rehydrated` variants take each preview from the entry's cold-spilled content read
//!   back from the blob store, where the plain ones show the eviction notice stored in the file.

use std::io::{self, Write};

use super::{one_line, OneLine};
use crate::format::blob::BlobStore;
use crate::format::cold_spill::rehydrate_record;
use crate::format::record::{Record, RecordType};
use crate::json::{self, lazy, JsString, Object, Value};
use crate::session::tree::Session;

/// How many characters of an entry's text a line shows.
pub const PREVIEW_CHARS: usize = 60;

const SIDE: &str = "├─ ";
const SIDE_CONTINUES: &str = "│  ";
const LEAF_MARK: &str = "  ← leaf";

/// Writes `tree.txt`. The output is written in many small pieces: give a buffer (`Vec<u8>`,
/// `BufWriter`).
pub fn write_tree<W: Write + ?Sized>(session: &Session, out: &mut W) -> io::Result<()> {
    write_lines(session, None, out)
}

/// [`write_tree`] with each preview taken from the entry's cold-spilled content, read back
/// from `blobs` ([`crate::format::cold_spill`]).
pub fn write_tree_rehydrated<W: Write + ?Sized>(
    session: &Session,
    blobs: &BlobStore,
    out: &mut W,
) -> io::Result<()> {
    write_lines(session, Some(blobs), out)
}

/// [`write_tree_rehydrated`] as bytes.
pub fn tree_txt_rehydrated(session: &Session, blobs: &BlobStore) -> Vec<u8> {
    let mut out = Vec::new();
    write_tree_rehydrated(session, blobs, &mut out).expect("writing to a Vec cannot fail");
    out
}

/// One line of the tree: an entry, where it is drawn and what it says.
pub struct TreeRow {
    /// The entry's record index.
    pub index: usize,
    /// How many side branches it is nested in (the gutter's width, in columns of three).
    pub depth: usize,
    /// Whether it opens a side branch (`├─ `) rather than continuing its parent's column.
    pub side: bool,
    /// The row of its parent in the tree; `None` for a root.
    pub parent: Option<usize>,
    /// Whether it has no children: the end of a branch, a place a context can be built at.
    pub is_branch_end: bool,
    /// Whether it is the current leaf (for a leaf marker, the entry it stands for).
    pub is_leaf: bool,
    /// `<id> [<label>] <kind>: <preview>`, without the leaf mark.
    pub text: String,
}

/// The tree's rows in drawing order (see the module invariants); `cold` rehydrates the
/// previews.
pub fn tree_rows(session: &Session, cold: Option<&BlobStore>) -> Vec<TreeRow> {
    let mut tree = session.tree();
    // Leaf markers are the leaf pointer on their parent, not entries: their children take
    // their places.
    let unmarked = |list: &[usize], children: &[Vec<usize>]| {
        let mut out = Vec::with_capacity(list.len());
        let mut stack: Vec<usize> = list.iter().rev().copied().collect();
        while let Some(i) = stack.pop() {
            if crate::manager::leaf_marker::is_marker(session, i) {
                stack.extend(children[i].iter().rev());
            } else {
                out.push(i);
            }
        }
        out
    };
    tree.roots = unmarked(&tree.roots, &tree.children);
    let spliced: Vec<Vec<usize>> = tree
        .children
        .iter()
        .map(|list| unmarked(list, &tree.children))
        .collect();
    tree.children = spliced;
    // The entry the leaf stands for (a leaf marker stands for the entry it was put on).
    let leaf = crate::manager::leaf_marker::shown_leaf(session).and_then(|id| session.index_of(id));
    // The ancestors of the leaf in the tree (which may differ from `path_to` around cycles).
    let mut parent = vec![usize::MAX; tree.children.len()];
    for (p, children) in tree.children.iter().enumerate() {
        for &c in children {
            parent[c] = p;
        }
    }
    let mut holds_leaf = vec![false; tree.children.len()];
    let mut at = leaf;
    while let Some(i) = at.filter(|&i| !holds_leaf[i]) {
        holds_leaf[i] = true;
        at = Some(parent[i]).filter(|&p| p != usize::MAX);
    }
    let leaf_last = |list: &mut Vec<usize>| {
        if let Some(pos) = list.iter().position(|&c| holds_leaf[c]) {
            let on_path = list.remove(pos);
            list.push(on_path);
        }
    };
    leaf_last(&mut tree.roots);

    let mut rows = Vec::new();
    let mut line = String::new();
    // (record index, depth, opens a side branch, parent row)
    let mut stack: Vec<(usize, usize, bool, Option<usize>)> = Vec::new();
    push_children(&mut stack, &tree.roots, 0, None);
    while let Some((i, depth, side, parent_row)) = stack.pop() {
        line.clear();
        entry_line(session, i, false, cold, &mut line);
        let children = &mut tree.children[i];
        leaf_last(children);
        let row = rows.len();
        rows.push(TreeRow {
            index: i,
            depth,
            side,
            parent: parent_row,
            is_branch_end: children.is_empty(),
            is_leaf: leaf == Some(i),
            text: line.clone(),
        });
        push_children(&mut stack, children, depth + usize::from(side), Some(row));
    }
    rows
}

fn write_lines<W: Write + ?Sized>(
    session: &Session,
    cold: Option<&BlobStore>,
    out: &mut W,
) -> io::Result<()> {
    let mut line = String::new();
    for row in tree_rows(session, cold) {
        line.clear();
        for _ in 0..row.depth {
            line.push_str(SIDE_CONTINUES);
        }
        if row.side {
            line.push_str(SIDE);
        }
        line.push_str(&row.text);
        if row.is_leaf {
            line.push_str(LEAF_MARK);
        }
        line.push('\n');
        out.write_all(line.as_bytes())?;
    }
    Ok(())
}

/// `tree.txt` as bytes.
pub fn tree_txt(session: &Session) -> Vec<u8> {
    let mut out = Vec::new();
    write_tree(session, &mut out).expect("writing to a Vec cannot fail");
    out
}

/// Pushes `children` so that they pop in order: the last one continues the column, the
/// others open side branches.
fn push_children(
    stack: &mut Vec<(usize, usize, bool, Option<usize>)>,
    children: &[usize],
    depth: usize,
    parent_row: Option<usize>,
) {
    for (n, &c) in children.iter().enumerate().rev() {
        stack.push((c, depth, n + 1 < children.len(), parent_row));
    }
}

/// Appends `<id> [<label>] <kind>: <preview>` (and the leaf mark) for record `i`.
fn entry_line(
    session: &Session,
    i: usize,
    is_leaf: bool,
    cold: Option<&BlobStore>,
    line: &mut String,
) {
    let record = match cold {
        Some(blobs) => rehydrate_record(session.record(i), blobs),
        None => std::borrow::Cow::Borrowed(session.record(i)),
    };
    match record.id() {
        Some(id) => line.push_str(&one_line(id, usize::MAX)),
        None => line.push('-'),
    }
    line.push(' ');
    if let Some(label) = record.id().and_then(|id| session.label(id)) {
        line.push('[');
        line.push_str(&one_line(label, usize::MAX));
        line.push_str("] ");
    }
    let (kind, preview) = describe(&record);
    line.push_str(&one_line(&kind, usize::MAX));
    if !preview.is_empty() {
        line.push_str(": ");
        line.push_str(&preview);
    }
    if is_leaf {
        line.push_str(LEAF_MARK);
    }
}

/// A string member as text.
fn str_member(o: &Object, key: &str) -> Option<String> {
    match o.get(key)? {
        Value::String(s) => Some(s.to_string_lossy().into_owned()),
        _ => None,
    }
}

/// A member as text: strings as they are, other values as compact JSON, absent as empty.
fn member_text(o: &Object, key: &str) -> String {
    match o.get(key) {
        None => String::new(),
        Some(Value::String(s)) => s.to_string_lossy().into_owned(),
        Some(other) => json::to_compact(other),
    }
}

/// The names in a list member, joined by `, `.
fn list_text(o: &Object, key: &str) -> String {
    match o.get(key).map(Value::expanded).as_deref() {
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| match v {
                Value::String(s) => s.to_string_lossy().into_owned(),
                other => json::to_compact(other),
            })
            .collect::<Vec<_>>()
            .join(", "),
        _ => String::new(),
    }
}

/// The kind and the preview (on one line, shortened) of an entry.
fn describe(record: &Record) -> (String, String) {
    let o = record.fields();
    let ty = member_text(o, "type");
    let preview = match record.record_type() {
        RecordType::Message => {
            return match record.get("message").and_then(Value::as_object) {
                Some(m) => message_line(m),
                None => (ty, String::new()),
            }
        }
        RecordType::ModelChange => match str_member(o, "model") {
            Some(model) => match str_member(o, "role") {
                Some(role) if role != "default" => format!("{model} ({role})"),
                _ => model,
            },
            // The legacy v1 shape.
            None => [str_member(o, "provider"), str_member(o, "modelId")]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join("/"),
        },
        RecordType::ThinkingLevelChange => member_text(o, "thinkingLevel"),
        RecordType::ServiceTierChange => member_text(o, "serviceTier"),
        RecordType::ConfiguredModelChain => {
            format!("{}: {}", member_text(o, "role"), list_text(o, "entries"))
        }
        RecordType::Compaction => str_member(o, "shortSummary")
            .or_else(|| str_member(o, "summary"))
            .unwrap_or_default(),
        RecordType::BranchSummary => member_text(o, "summary"),
        RecordType::Custom => member_text(o, "customType"),
        RecordType::CustomMessage => {
            let mut line = OneLine::new(PREVIEW_CHARS);
            line.push(member_text(o, "customType").chars());
            line.push(": ".chars());
            content_preview(o.get("content"), &mut line, None);
            return (ty, line.finish());
        }
        RecordType::Label => {
            let label = member_text(o, "label");
            let target = member_text(o, "targetId");
            if label.is_empty() {
                format!("{target} (cleared)")
            } else {
                format!("{target} → {label}")
            }
        }
        RecordType::TtsrInjection => list_text(o, "injectedRules"),
        RecordType::SessionInit => str_member(o, "task")
            .or_else(|| str_member(o, "systemPrompt"))
            .unwrap_or_default(),
        RecordType::ModeChange => member_text(o, "mode"),
        RecordType::McpToolSelection | RecordType::DiscoveredBuiltinToolSelection => {
            list_text(o, "selectedToolNames")
        }
        _ => String::new(),
    };
    let kind = if ty.is_empty() {
        "entry".to_owned()
    } else {
        ty
    };
    (kind, one_line(&preview, PREVIEW_CHARS))
}

/// The kind and preview of a `message` entry.
fn message_line(m: &Object) -> (String, String) {
    let role = str_member(m, "role").unwrap_or_else(|| "message".to_owned());
    let mut line = OneLine::new(PREVIEW_CHARS);
    let kind = match role.as_str() {
        "toolResult" => {
            let error = if m.get("isError") == Some(&Value::Bool(true)) {
                ", error"
            } else {
                ""
            };
            content_preview(m.get("content"), &mut line, None);
            format!("toolResult({}{error})", member_text(m, "toolName"))
        }
        "assistant" => {
            let mut calls = Vec::new();
            content_preview(m.get("content"), &mut line, Some(&mut calls));
            if line.is_empty() && !calls.is_empty() {
                line.push("→ ".chars());
                line.push(calls.join(", ").chars());
            }
            let stopped = str_member(m, "stopReason").filter(|r| r != "stop" && r != "toolUse");
            if let (true, Some(reason)) = (line.is_empty(), stopped) {
                let error =
                    str_member(m, "errorMessage").map_or_else(String::new, |e| format!(": {e}"));
                line.push(format!("({reason}{error})").chars());
            }
            role
        }
        "bashExecution" => {
            line.push(format!("$ {}", member_text(m, "command")).chars());
            role
        }
        "pythonExecution" => {
            line.push(member_text(m, "code").chars());
            role
        }
        "compactionSummary" | "branchSummary" => {
            line.push(member_text(m, "summary").chars());
            role
        }
        "fileMention" => {
            if let Some(Value::Array(files)) = m.get("files").map(Value::expanded).as_deref() {
                let paths: Vec<String> = files
                    .iter()
                    .filter_map(|f| f.as_object().map(|f| member_text(f, "path")))
                    .collect();
                line.push(paths.join(", ").chars());
            }
            role
        }
        _ => {
            content_preview(m.get("content"), &mut line, None);
            role
        }
    };
    (kind, line.finish())
}

/// Reads a `content` value into a preview line — a string, or its text blocks separated by
/// spaces (images as `[image]`) — until the line is full, and collects the names of its
/// tool calls into `calls` when asked. Raw content is read lazily: a preview decodes only
/// the characters it shows.
fn content_preview(
    content: Option<&Value>,
    line: &mut OneLine,
    mut calls: Option<&mut Vec<String>>,
) {
    let mut block = |b: Block<'_>| {
        match b {
            Block::Text(text) => {
                line.separate();
                text.push_into(line);
            }
            Block::Image => {
                line.separate();
                line.push("[image]".chars());
            }
            Block::ToolCall(name) => {
                if let Some(calls) = calls.as_deref_mut() {
                    calls.push(name);
                }
            }
            Block::Other => {}
        }
        // Past a full line only tool call names are still wanted, and only when there is no
        // text, which a full line has.
        !line.is_full()
    };
    match content {
        Some(Value::String(s)) => {
            line.push(s.to_string_lossy().chars());
        }
        Some(Value::Raw(raw)) => {
            for item in lazy::array_items(raw.as_str()) {
                if !block(Block::from_raw(item)) {
                    break;
                }
            }
        }
        Some(Value::Array(items)) => {
            for item in items {
                let b = match item {
                    Value::Raw(raw) => Block::from_raw(raw.as_str()),
                    Value::Object(o) => Block::from_object(o),
                    _ => Block::Other,
                };
                if !block(b) {
                    break;
                }
            }
        }
        _ => {}
    }
}

/// What a preview needs of one content block.
enum Block<'a> {
    Text(Text<'a>),
    Image,
    ToolCall(String),
    Other,
}

/// The text of a block: a parsed string, or a string literal decoded as it is read.
enum Text<'a> {
    Parsed(&'a JsString),
    Literal(&'a str),
}

impl Text<'_> {
    fn push_into(&self, line: &mut OneLine) {
        match self {
            Text::Parsed(s) => line.push(s.to_string_lossy().chars()),
            Text::Literal(literal) => line.push(lazy::string_chars(literal)),
        };
    }
}

impl<'a> Block<'a> {
    fn from_raw(text: &'a str) -> Self {
        let Some(ty) = lazy::member(text, "type") else {
            return Block::Other;
        };
        if lazy::is_string(ty, "text") {
            lazy::member(text, "text").map_or(Block::Other, |t| Block::Text(Text::Literal(t)))
        } else if lazy::is_string(ty, "image") {
            Block::Image
        } else if lazy::is_string(ty, "toolCall") {
            let name = lazy::member(text, "name").map_or_else(String::new, |n| {
                if n.trim_start().starts_with('"') {
                    lazy::string_chars(n).collect()
                } else {
                    n.to_owned()
                }
            });
            Block::ToolCall(name)
        } else {
            Block::Other
        }
    }

    fn from_object(o: &'a Object) -> Self {
        match o.get_str("type") {
            Some("text") => match o.get("text") {
                Some(Value::String(s)) => Block::Text(Text::Parsed(s)),
                _ => Block::Other,
            },
            Some("image") => Block::Image,
            Some("toolCall") => Block::ToolCall(member_text(o, "name")),
            _ => Block::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::replay::parse_session_entries;

    /// User messages `(id, parent)` in file order, one second apart; the text is the id.
    fn session(entries: &[(&str, Option<&str>)]) -> Session {
        let mut text =
            String::from("{\"type\":\"session\",\"version\":5,\"id\":\"s\",\"cwd\":\"/\"}\n");
        for (n, (id, parent)) in entries.iter().enumerate() {
            let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
            text.push_str(&format!(
                "{{\"type\":\"message\",\"id\":\"{id}\",\"parentId\":{parent},\"timestamp\":\"2026-01-01T00:00:{n:02}.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"{id} text\"}}}}\n"
            ));
        }
        Session::from_records(parse_session_entries(&text).unwrap().records)
    }

    fn tree(session: &Session) -> String {
        String::from_utf8(tree_txt(session)).unwrap()
    }

    #[test]
    fn side_branches_hang_off_the_column_and_the_path_to_the_leaf_runs_straight() {
        let s = session(&[
            ("a", None),
            ("b", Some("a")),
            ("c", Some("b")),
            ("d", Some("a")),
            ("e", Some("d")),
            ("f", Some("b")),
        ]);
        assert_eq!(
            tree(&s),
            "a user: a text\n\
             ├─ d user: d text\n\
             │  e user: e text\n\
             b user: b text\n\
             ├─ c user: c text\n\
             f user: f text  ← leaf\n"
        );
    }

    #[test]
    fn side_branches_nest_and_several_roots_share_an_invisible_root() {
        let mut s = session(&[
            ("r1", None),
            ("a", Some("r1")),
            ("b", Some("a")),
            ("c", Some("a")),
            ("d", Some("b")),
            ("e", Some("b")),
            ("r2", None),
            ("x", Some("r2")),
        ]);
        s.branch("c").unwrap();
        assert_eq!(
            tree(&s),
            "├─ r2 user: r2 text\n\
             │  x user: x text\n\
             r1 user: r1 text\n\
             a user: a text\n\
             ├─ b user: b text\n\
             │  ├─ d user: d text\n\
             │  e user: e text\n\
             c user: c text  ← leaf\n"
        );
        s.reset_leaf();
        assert!(!tree(&s).contains("← leaf"));
    }

    #[test]
    fn orphans_and_cycles_are_roots_and_every_entry_has_one_line() {
        let s = session(&[
            ("a", Some("b")),
            ("b", Some("a")),
            ("o", Some("missing")),
            ("self", Some("self")),
        ]);
        let text = tree(&s);
        assert_eq!(text.lines().count(), 4, "{text}");
        for id in ["a ", "b ", "o ", "self "] {
            assert_eq!(
                text.lines()
                    .filter(|l| l.trim_start_matches(['├', '─', '│', ' ']).starts_with(id))
                    .count(),
                1,
                "{text}"
            );
        }
    }
}
