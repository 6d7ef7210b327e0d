//! The typed appends of the session manager and its leaf moves.

use crate::format::record::Record;
use crate::json::{Object, Value};

use super::{sanitize_title, ModelChain, SessionManager, SessionResult};

impl SessionManager {
    /// `branch`: moves the leaf to an existing entry.
    pub fn branch(&self, id: &str) -> SessionResult<()> {
        Ok(self.state.lock().session.branch(id)?)
    }

    /// `resetLeaf`: the next append starts a new root.
    pub fn reset_leaf(&self) {
        self.state.lock().session.reset_leaf();
    }

    /// Appends an entry of `ty` with its own fields; returns the new id.
    pub fn append_fields(&self, ty: &str, fields: &Object) -> SessionResult<String> {
        self.state.lock().append(ty, fields)
    }

    /// Appends an entry given from outside (see [`super::external_entry`]), after the lines other
    /// processes appended, as [`SessionManager::append_external_all`] does.
    pub fn append_external(&self, input: Object) -> SessionResult<String> {
        let mut ids = self.append_external_all(vec![input])?;
        Ok(ids.pop().unwrap_or_default())
    }

    /// `appendMessage`: appends `message` (a message object with its `role`) as a `message`
    /// entry; returns the new id.
    pub fn append_message(&self, message: Value) -> SessionResult<String> {
        self.append_fields("message", &members([("message", Some(message))]))
    }

    /// `appendThinkingLevelChange`: records the thinking level (`None` is written as `null`,
    /// which the context reads as `off`); returns the new id.
    pub fn append_thinking_level_change(&self, level: Option<&str>) -> SessionResult<String> {
        let level = level.map_or(Value::Null, Value::string);
        self.append_fields(
            "thinking_level_change",
            &members([("thinkingLevel", Some(level))]),
        )
    }

    /// `appendModelChange`: records `model` (`provider/model`) for `role` (`None` leaves the
    /// role out: the default role); returns the new id.
    pub fn append_model_change(&self, model: &str, role: Option<&str>) -> SessionResult<String> {
        let fields = members([
            ("model", Some(Value::string(model))),
            ("role", role.map(Value::string)),
        ]);
        self.append_fields("model_change", &fields)
    }

    /// Records the service tier in a `service_tier_change` entry (`None` is written as `null`
    /// and clears it); returns the new id.
    pub fn append_service_tier_change(&self, tier: Option<&str>) -> SessionResult<String> {
        let tier = tier.map_or(Value::Null, Value::string);
        self.append_fields(
            "service_tier_change",
            &members([("serviceTier", Some(tier))]),
        )
    }

    /// `appendCompaction`: records a compaction: its `summary`, the id of the first entry the
    /// compacted context keeps, the context's token count before it and optional `details`;
    /// returns the new id.
    pub fn append_compaction(
        &self,
        summary: &str,
        first_kept_entry_id: &str,
        tokens_before: f64,
        details: Option<Value>,
    ) -> SessionResult<String> {
        let fields = members([
            ("summary", Some(Value::string(summary))),
            ("firstKeptEntryId", Some(Value::string(first_kept_entry_id))),
            ("tokensBefore", Some(Value::number(tokens_before))),
            ("details", details),
        ]);
        self.append_fields("compaction", &fields)
    }

    /// `appendCustomEntry`: a `custom` entry of `custom_type` with optional `data`, kept out
    /// of the context's messages; returns the new id.
    pub fn append_custom_entry(
        &self,
        custom_type: &str,
        data: Option<Value>,
    ) -> SessionResult<String> {
        let fields = members([
            ("customType", Some(Value::string(custom_type))),
            ("data", data),
        ]);
        self.append_fields("custom", &fields)
    }

    /// `appendCustomMessageEntry`: a `custom_message` entry of `custom_type` with `content`,
    /// whether it is displayed, optional `details` and an `attribution` (`"agent"` when
    /// `None`); the context shows it as a message. Returns the new id.
    pub fn append_custom_message_entry(
        &self,
        custom_type: &str,
        content: Value,
        display: bool,
        details: Option<Value>,
        attribution: Option<&str>,
    ) -> SessionResult<String> {
        let fields = members([
            ("customType", Some(Value::string(custom_type))),
            ("content", Some(content)),
            ("display", Some(Value::Bool(display))),
            ("details", details),
            ("attribution", attribution.map(Value::string)),
        ]);
        self.append_fields("custom_message", &fields)
    }

    /// `appendLabelChange`: `None` or an empty label clears it. The target must exist.
    pub fn append_label_change(
        &self,
        target_id: &str,
        label: Option<&str>,
    ) -> SessionResult<String> {
        let mut state = self.state.lock();
        if state.session.index_of(target_id).is_none() {
            return Err(crate::session::tree::EntryNotFound(target_id.to_owned()).into());
        }
        let fields = members([
            ("targetId", Some(Value::string(target_id))),
            ("label", label.map(Value::string)),
        ]);
        state.append("label", &fields)
    }

    /// Records the names of the TTSR rules injected, in a `ttsr_injection` entry; returns the
    /// new id.
    pub fn append_ttsr_injection(&self, rules: &[&str]) -> SessionResult<String> {
        let rules = Value::Array(rules.iter().map(|r| Value::string(*r)).collect());
        self.append_fields("ttsr_injection", &members([("injectedRules", Some(rules))]))
    }

    /// Appends a `session_init` entry whose own fields are the members of `init`, in their
    /// order; returns the new id.
    pub fn append_session_init(&self, init: &Object) -> SessionResult<String> {
        self.append_fields("session_init", init)
    }

    /// Records the agent's `mode` and its optional `data` in a `mode_change` entry; returns the
    /// new id.
    pub fn append_mode_change(&self, mode: &str, data: Option<Value>) -> SessionResult<String> {
        let fields = members([("mode", Some(Value::string(mode))), ("data", data)]);
        self.append_fields("mode_change", &fields)
    }

    /// Records the MCP tools selected (by name) and the id of the mutation that changed the
    /// selection, if any, in an `mcp_tool_selection` entry; returns the new id.
    pub fn append_mcp_tool_selection(
        &self,
        names: &[&str],
        correlation: Option<&str>,
    ) -> SessionResult<String> {
        self.append_fields("mcp_tool_selection", &selection(names, correlation))
    }

    /// Records the discovered built-in tools selected (by name) and the id of the mutation that
    /// changed the selection, if any, in a `discovered_builtin_tool_selection` entry; returns
    /// the new id.
    pub fn append_discovered_builtin_tool_selection(
        &self,
        names: &[&str],
        correlation: Option<&str>,
    ) -> SessionResult<String> {
        self.append_fields(
            "discovered_builtin_tool_selection",
            &selection(names, correlation),
        )
    }

    /// `appendConfiguredModelChain`: only the chain's own fields are kept (runtime fields
    /// such as an active index are not persisted).
    pub fn append_configured_model_chain(&self, chain: &ModelChain<'_>) -> SessionResult<String> {
        let fields = members([
            ("role", Some(Value::string(chain.role))),
            (
                "entries",
                Some(Value::Array(
                    chain.entries.iter().map(|e| Value::string(*e)).collect(),
                )),
            ),
            ("origin", Some(Value::string(chain.origin))),
            ("identity", chain.identity.map(Value::string)),
            ("explicitHead", Some(Value::Bool(chain.explicit_head))),
            ("cleared", chain.cleared.then_some(Value::Bool(true))),
        ]);
        self.append_fields("configured_model_chain", &fields)
    }

    /// `appendContextClearEntry`: a `context_clear` custom entry that starts a new root.
    pub fn append_context_clear(&self) -> SessionResult<String> {
        let fields = members([("customType", Some(Value::string("context_clear")))]);
        self.state
            .lock()
            .append_with_parent("custom", &fields, None)
    }

    /// `branchWithSummary`: moves the leaf to `from` (or to no entry) and appends a
    /// `branch_summary` there.
    pub fn branch_with_summary(
        &self,
        from: Option<&str>,
        summary: &str,
        details: Option<Value>,
    ) -> SessionResult<String> {
        let mut state = self.state.lock();
        match from {
            Some(id) => state.session.branch(id)?,
            None => state.session.reset_leaf(),
        }
        let fields = members([
            ("fromId", Some(Value::string(from.unwrap_or("root")))),
            ("summary", Some(Value::string(summary))),
            ("details", details),
        ]);
        state.append_with_parent("branch_summary", &fields, from.map(str::to_owned))
    }

    /// `setSessionName`: sets the title and appends a `header_patch`. Returns false when
    /// nothing changed (an automatic title never replaces a user's, and an empty name is
    /// refused).
    pub fn set_session_name(&self, name: &str, user: bool) -> SessionResult<bool> {
        let mut state = self.state.lock();
        state.check_writable()?;
        let source = if user { "user" } else { "auto" };
        if !user && state.session.header().title_source() == Some("user") {
            return Ok(false);
        }
        let title = sanitize_title(name);
        if title.is_empty() {
            return Ok(false);
        }
        let header = state.session.header_mut();
        header.insert("title", Value::string(title.as_str()));
        header.insert("titleSource", Value::string(source));
        let mut patch = Object::with_capacity(2);
        patch.insert("title", Value::string(title));
        patch.insert("titleSource", Value::string(source));
        let record = Record::new(members([
            ("type", Some(Value::string("header_patch"))),
            ("patch", Some(Value::Object(patch))),
        ]));
        state.persist_patches(&[record])?;
        Ok(true)
    }
}

/// An object from `(key, value)` pairs, leaving out absent values.
pub(super) fn members<const N: usize>(pairs: [(&str, Option<Value>); N]) -> Object {
    let mut obj = Object::with_capacity(N);
    for (key, value) in pairs {
        if let Some(value) = value {
            obj.insert(key, value);
        }
    }
    obj
}

fn selection(names: &[&str], correlation: Option<&str>) -> Object {
    members([
        (
            "selectedToolNames",
            Some(Value::Array(
                names.iter().map(|n| Value::string(*n)).collect(),
            )),
        ),
        ("mutationCorrelationId", correlation.map(Value::string)),
    ])
}
