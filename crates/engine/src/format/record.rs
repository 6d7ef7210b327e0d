//! Session records: the header and every entry type, as ordered JSON objects with typed views.
//!
//! A record is the object on one line of a session file. It is kept as an ordered
//! [`Object`], so every key — known or not — and its position survive a rewrite. Typed access
//! goes through views ([`Header`], [`Record::message`]) that borrow from the object; the object stays
//! the single source of truth.
//!
//! Records are parsed two levels deep (the record and the objects directly under it, such as
//! `message`); anything deeper (message content, usage, details) stays raw JSON until asked
//! for.

use crate::json::{self, Object, ParseError, Value};

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
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    ty: RecordType,
    fields: Object,
}

impl Record {
    /// The record of these members; its type is read from the `type` member now.
    pub fn new(fields: Object) -> Self {
        let ty = RecordType::from_type(fields.get_str("type"));
        Record { ty, fields }
    }

    /// Parses one line; anything but a JSON object is an error.
    pub fn parse_line(line: &str) -> Result<Self, LineError> {
        match json::parse_shallow(line, RECORD_PARSE_DEPTH)? {
            Value::Object(fields) => Ok(Record::new(fields)),
            _ => Err(LineError::NotAnObject),
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

    /// The record's members, in their order on the line.
    pub fn fields(&self) -> &Object {
        &self.fields
    }

    /// Mutable access to the members. The `type` member must not be changed through it.
    pub fn fields_mut(&mut self) -> &mut Object {
        &mut self.fields
    }

    /// The record's members, taking them out of the record.
    pub fn into_fields(self) -> Object {
        self.fields
    }

    /// The member `key`, if there is one.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.get(key)
    }

    /// The member `key` when it is a string; `None` when it is absent or not a string.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.fields.get_str(key)
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
        json::write_object_compact(&self.fields, &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Appends the compact line and a newline to `out`.
    pub fn write_line(&self, out: &mut Vec<u8>) {
        json::write_object_compact(&self.fields, out);
        out.push(b'\n');
    }

    /// The header view, when this is a `session` record.
    pub fn as_header(&self) -> Option<Header<'_>> {
        self.is_header().then_some(Header(&self.fields))
    }

    /// The message payload of a `message` entry.
    pub fn message(&self) -> Option<&Object> {
        match self.ty {
            RecordType::Message => self.get("message").and_then(Value::as_object),
            _ => None,
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
