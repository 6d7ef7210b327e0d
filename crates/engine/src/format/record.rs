//! Session records: the header and every entry type, as ordered JSON objects with typed views.
//!
//! A record is the object on one line of a session file. Its members are an ordered
//! [`Object`], so every key — known or not — and its position survive a rewrite. Typed access
//! goes through views ([`Header`], [`Record::message`]) that borrow from the members, which
//! stay the single source of truth.
//!
//! A record read from a file is kept as its validated line and the places of its members
//! (a line under 1 KiB lets its places go once read, and finds them again in its text when
//! asked); its type, ids and plain string members are read from the text. Its members are
//! built the first time something asks for them, two levels deep (the record and the objects
//! directly under it, such as `message`); anything deeper (message content, usage, details)
//! stays raw JSON pointing into the line's text until asked for. Writing a record out, or
//! giving one member away ([`Record::member`]), builds the members for that moment only.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::OnceLock;

mod kept_line;

pub(crate) use kept_line::{check_line, CheckedLine, CheckedText, ReadLine};

use crate::json::{self, Object, ParseError, SharedText, Value};
use kept_line::{KeptLine, LineString};

/// Containers at this nesting level and deeper stay raw when a line is parsed.
pub const RECORD_PARSE_DEPTH: usize = 2;

/// The `type` of a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RecordType {
    /// `session`: the header, the first line of a session file.
    Session,
    /// `header_patch`: sets header fields (`cwd`, `title`, `titleSource`); v4 and later.
    HeaderPatch,
    /// `entry_patch`: replaces the `message` of an earlier `message` entry; v4 and later.
    EntryPatch,
    /// `message`: a message of the conversation (user, assistant, tool result, …).
    Message,
    /// `thinking_level_change`: sets the thinking level (`null`: off).
    ThinkingLevelChange,
    /// `model_change`: sets the model of a role (the default role when none is given).
    ModelChange,
    /// `service_tier_change`: sets the service tier (`null`: none).
    ServiceTierChange,
    /// `configured_model_chain`: sets or clears the model chain of a role.
    ConfiguredModelChain,
    /// `compaction`: a summary that stands in for the entries before `firstKeptEntryId`.
    Compaction,
    /// `branch_summary`: a summary of the branch left when the leaf moved.
    BranchSummary,
    /// `custom`: data of a `customType` that adds no message to the context.
    Custom,
    /// `custom_message`: a message of a `customType` that the context includes.
    CustomMessage,
    /// `label`: names (or, empty, clears the name of) the entry `targetId`.
    Label,
    /// `ttsr_injection`: records TTSR rules injected into the conversation.
    TtsrInjection,
    /// `session_init`: the system prompt, task and tools a session started with.
    SessionInit,
    /// `mode_change`: sets the agent's mode and its data.
    ModeChange,
    /// `mcp_tool_selection`: the selected MCP tools (and possibly discovered built-in ones).
    McpToolSelection,
    /// `discovered_builtin_tool_selection`: the selected discovered built-in tools.
    DiscoveredBuiltinToolSelection,
    /// A `type` this engine does not know (kept and written back, ignored by the context).
    Unknown,
    /// No string `type` at all.
    Missing,
}

impl RecordType {
    /// The type a record's `type` member names: `None` (no string `type`) is
    /// [`RecordType::Missing`], a string this engine does not know [`RecordType::Unknown`].
    pub fn from_type(ty: Option<&str>) -> Self {
        use RecordType::*;
        match ty {
            None => Missing,
            Some(t) => match t {
                "session" => Session,
                "header_patch" => HeaderPatch,
                "entry_patch" => EntryPatch,
                "message" => Message,
                "thinking_level_change" => ThinkingLevelChange,
                "model_change" => ModelChange,
                "service_tier_change" => ServiceTierChange,
                "configured_model_chain" => ConfiguredModelChain,
                "compaction" => Compaction,
                "branch_summary" => BranchSummary,
                "custom" => Custom,
                "custom_message" => CustomMessage,
                "label" => Label,
                "ttsr_injection" => TtsrInjection,
                "session_init" => SessionInit,
                "mode_change" => ModeChange,
                "mcp_tool_selection" => McpToolSelection,
                "discovered_builtin_tool_selection" => DiscoveredBuiltinToolSelection,
                _ => Unknown,
            },
        }
    }
}

/// One line of a session file.
///
/// A record read from a file keeps the line's validated text and where its members are
/// (module `kept_line`): its type, ids and other plain string members are read
/// from the text, and its members are built as values only the first time something asks
/// for more. The text is let go when a member is changed. A record made in memory holds
/// only its members.
///
/// Invariant: the members built from a line are what the line parses to.
#[derive(Clone, Debug)]
pub struct Record {
    ty: RecordType,
    body: Body,
}

#[derive(Clone, Debug)]
enum Body {
    /// Read from a file and unchanged: the line, and its members once built (boxed: most
    /// records of a large session are never built, and an empty box costs a word).
    Read(KeptLine, OnceLock<Box<Object>>),
    /// Made or changed in memory.
    Built(Object),
}

impl PartialEq for Record {
    fn eq(&self, other: &Self) -> bool {
        self.ty == other.ty && self.fields() == other.fields()
    }
}

impl Record {
    /// The record of these members; its type is read from the `type` member now.
    pub fn new(fields: Object) -> Self {
        let ty = RecordType::from_type(fields.get_str("type"));
        Record {
            ty,
            body: Body::Built(fields),
        }
    }

    /// Parses one line; anything but a JSON object is an error. The line is validated
    /// whole and kept as text; its members are built when first asked for.
    pub fn parse_line(line: &str) -> Result<Self, LineError> {
        Ok(match check_line(line)? {
            CheckedLine::Text(checked) => {
                let mut record =
                    Record::kept(SharedText::new(line.to_owned()), 0..line.len(), checked);
                record.forget_short_places();
                record
            }
            CheckedLine::Built(fields) => Record::new(fields),
        })
    }

    /// Lets a short line read from a file go of its members' places (they are found again
    /// in its text when asked for); see `kept_line::PLACES_KEPT_FROM`.
    pub(crate) fn forget_short_places(&mut self) {
        if let Body::Read(line, _) = &mut self.body {
            line.forget_short_places();
        }
    }

    /// The record of a line checked by `check_line` and kept at `block[range]`.
    pub(crate) fn from_checked(
        block: &SharedText,
        range: Range<usize>,
        checked: CheckedLine,
    ) -> Self {
        match checked {
            CheckedLine::Text(checked) => Record::kept(block.clone(), range, checked),
            CheckedLine::Built(fields) => Record::new(fields),
        }
    }

    fn kept(block: SharedText, range: Range<usize>, checked: CheckedText) -> Self {
        Record {
            ty: checked.ty,
            body: Body::Read(KeptLine::new(block, range, checked), OnceLock::new()),
        }
    }

    /// The record's type, as its `type` member named it when the record was made.
    pub fn record_type(&self) -> RecordType {
        self.ty
    }

    /// Whether this is the header (`type: "session"`).
    pub fn is_header(&self) -> bool {
        self.ty == RecordType::Session
    }

    /// The record's members, in their order on the line (built from the line the first
    /// time).
    pub fn fields(&self) -> &Object {
        match &self.body {
            Body::Read(line, fields) => fields.get_or_init(|| Box::new(line.build())),
            Body::Built(fields) => fields,
        }
    }

    /// Mutable access to the members; the line's text is dropped, as it may no longer be
    /// what the members are. The `type` member must not be changed through it.
    pub fn fields_mut(&mut self) -> &mut Object {
        if let Body::Read(line, fields) = &mut self.body {
            let fields = fields.take().map_or_else(|| line.build(), |f| *f);
            self.body = Body::Built(fields);
        }
        match &mut self.body {
            Body::Built(fields) => fields,
            Body::Read(..) => unreachable!("made Built above"),
        }
    }

    /// The record's members, taking them out of the record.
    pub fn into_fields(self) -> Object {
        match self.body {
            Body::Read(line, fields) => fields.into_inner().map_or_else(|| line.build(), |f| *f),
            Body::Built(fields) => fields,
        }
    }

    /// The member `key`, if there is one.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields().get(key)
    }

    /// The member `key`, borrowed when the members are built; otherwise built from the line
    /// for the moment, leaving the record's members unbuilt (a context of a million
    /// messages does not keep a million records built).
    pub fn member(&self, key: &str) -> Option<Cow<'_, Value>> {
        match &self.body {
            Body::Read(line, fields) if fields.get().is_none() => {
                line.build().remove(key).map(Cow::Owned)
            }
            _ => self.get(key).map(Cow::Borrowed),
        }
    }

    /// Whether the record's members are built (made in memory, or built from its line).
    #[cfg(test)]
    pub(crate) fn is_built(&self) -> bool {
        match &self.body {
            Body::Read(_, fields) => fields.get().is_some(),
            Body::Built(_) => true,
        }
    }

    /// Whether the record has a member `key`; a record as read answers from its line.
    pub fn has(&self, key: &str) -> bool {
        match &self.body {
            Body::Read(line, fields) if fields.get().is_none() => line.has(key),
            _ => self.get(key).is_some(),
        }
    }

    /// The member `key` when it is a string; `None` when it is absent or not a string.
    /// A string without escapes is read from the line without building the members.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        if let Body::Read(line, _) = &self.body {
            match line.string(key) {
                LineString::Plain(s) => return Some(s),
                LineString::NotAString => return None,
                LineString::Escaped => {}
            }
        }
        self.fields().get_str(key)
    }

    /// The line the record was read from, while no member has been changed; `None` for a
    /// record made or changed in memory.
    pub(crate) fn as_read(&self) -> Option<ReadLine<'_>> {
        match &self.body {
            Body::Read(line, _) => Some(ReadLine(line)),
            Body::Built(_) => None,
        }
    }

    /// The `id` when it is a string: an entry's id (8 lower-case hex digits, 16 when ids
    /// collide), or for the header the session id.
    pub fn id(&self) -> Option<&str> {
        self.get_str("id")
    }

    /// The parent id; `None` both for `null` and for a missing or non-string value.
    pub fn parent_id(&self) -> Option<&str> {
        self.get_str("parentId")
    }

    /// The `timestamp` when it is a string, as written (normally ISO-8601 UTC with
    /// milliseconds).
    pub fn timestamp(&self) -> Option<&str> {
        self.get_str("timestamp")
    }

    /// The compact line for this record, without the newline.
    pub fn to_line(&self) -> String {
        let mut out = Vec::new();
        json::write_object_compact(&self.fields_for_once(), &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Appends the compact line and a newline to `out`.
    pub fn write_line(&self, out: &mut Vec<u8>) {
        json::write_object_compact(&self.fields_for_once(), out);
        out.push(b'\n');
    }

    /// The members for one use: the built ones, or built from the line and not kept, so
    /// writing every record of a session out does not leave them all built.
    fn fields_for_once(&self) -> Cow<'_, Object> {
        match &self.body {
            Body::Read(line, fields) => match fields.get() {
                Some(fields) => Cow::Borrowed(fields),
                None => Cow::Owned(line.build()),
            },
            Body::Built(fields) => Cow::Borrowed(fields),
        }
    }

    /// The header view, when this is a `session` record.
    pub fn as_header(&self) -> Option<Header<'_>> {
        self.is_header().then(|| Header(self.fields()))
    }

    /// The message payload of a `message` entry.
    pub fn message(&self) -> Option<&Object> {
        match self.ty {
            RecordType::Message => self.get("message").and_then(Value::as_object),
            _ => None,
        }
    }

    /// Whether this is a `message` entry whose message's `role` is `role`; a record as read
    /// is answered from its line, without building its members.
    pub fn is_message_of(&self, role: &str) -> bool {
        if self.ty != RecordType::Message {
            return false;
        }
        match self.as_read() {
            Some(line) => line
                .nested_member("message", "role")
                .is_some_and(|found| json::lazy::is_string(found, role)),
            None => self.message().and_then(|m| m.get_str("role")) == Some(role),
        }
    }
}

/// One line of "one JSON object a line" input (what `gjcfs append` reads and `entries/new`
/// takes), parsed whole: the object, or why the line is not one.
pub fn parse_object_line(line: &str) -> Result<Object, LineError> {
    match json::parse(line)? {
        Value::Object(object) => Ok(object),
        _ => Err(LineError::NotAnObject),
    }
}

/// Why one line is not a record.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum LineError {
    /// The line is not exactly one JSON value: invalid JSON, or text after the value.
    #[error("invalid JSON: {0}")]
    Json(#[from] ParseError),
    /// The line is a JSON value but not an object (`123`, `"text"`, `[1]`, `null`).
    #[error("not a JSON object")]
    NotAnObject,
}

/// The header (`type: "session"`) of a session file.
#[derive(Clone, Copy, Debug)]
pub struct Header<'a>(pub &'a Object);

impl<'a> Header<'a> {
    /// The raw `version` value; absent means version 1.
    pub fn version_value(&self) -> Option<&'a Value> {
        self.0.get("version")
    }

    /// The numeric version (1 when absent or not a number).
    pub fn version(&self) -> f64 {
        self.version_value().and_then(Value::as_f64).unwrap_or(1.0)
    }

    /// The session id, when it is a string.
    pub fn id(&self) -> Option<&'a str> {
        self.0.get_str("id")
    }

    /// The session's title, when it is a string.
    pub fn title(&self) -> Option<&'a str> {
        self.0.get_str("title")
    }

    /// Who set the title, when it is a string: `"auto"` or `"user"`.
    pub fn title_source(&self) -> Option<&'a str> {
        self.0.get_str("titleSource")
    }

    /// When the session was created, when it is a string: ISO-8601 UTC with milliseconds,
    /// as written.
    pub fn timestamp(&self) -> Option<&'a str> {
        self.0.get_str("timestamp")
    }

    /// The workspace path as the agent was given it, when it is a string.
    pub fn cwd(&self) -> Option<&'a str> {
        self.0.get_str("cwd")
    }

    /// The `parentSession` lineage marker, when it is a string: an opaque reference (a
    /// session id or a file path) to the session this one was forked or branched from.
    pub fn parent_session(&self) -> Option<&'a str> {
        self.0.get_str("parentSession")
    }
}
