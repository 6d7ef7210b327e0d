//! `buildSessionContext`: what is sent to the model at a leaf.
//!
//! The path is the leaf's ancestor chain, root first (cycles and unknown parents end it).
//! State is scanned over the whole path; messages are emitted from `message`,
//! `custom_message` and non-empty `branch_summary` entries. With a compaction on the path,
//! the last one wins: its summary comes first, then — unless it carries an OpenAI remote
//! replacement history — the path entries from its `firstKeptEntryId` up to it, then every
//! entry after it.

use std::borrow::Cow;

use crate::format::blob::BlobStore;
use crate::format::cold_spill::{self, rehydrate_value};
use crate::format::js_text::template_text;
use crate::format::persist::resolve_blob_refs;
use crate::format::record::{Record, RecordType};
use crate::format::time::date_millis;
use crate::json::{self, JsString, Object, Value};
use crate::session::tree::Session;

/// The context at one leaf. Messages borrow from the session where they pass through.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionContext<'a> {
    /// The messages sent to the model, in order: the last compaction's summary first when
    /// the path has one, then the messages of `message`, `custom_message` and non-empty
    /// `branch_summary` entries (a `message` entry's own `message` member, borrowed).
    pub messages: Vec<Cow<'a, Value>>,
    /// `sources[i]`: the record index of the entry `messages[i]` comes from (the compaction
    /// entry for its summary).
    pub sources: Vec<usize>,
    /// The messages that come from cold-spilled entries: (position in `messages`, payload
    /// path base, the entry's `evictedContent` marker). [`SessionContext::with_cold_spill_rehydrated`]
    /// reads their payloads back.
    pub evicted: Vec<(usize, &'static str, &'a Value)>,
    /// The `thinkingLevel` of the latest `thinking_level_change` on the path, as written;
    /// `"off"` when there is none or it is absent or `null`.
    pub thinking_level: Value,
    /// The `serviceTier` of the latest `service_tier_change` on the path; `None` when there
    /// is none or it is absent or `null`.
    pub service_tier: Option<Value>,
    /// Role → `provider/model`.
    pub models: Object,
    /// Role → normalised configured model chain.
    pub configured_model_chains: Object,
    /// The names of the TTSR rules injected on the path, each once, in first-seen order.
    pub injected_ttsr_rules: Vec<String>,
    /// Rule records in first-seen order (name, record).
    pub injected_ttsr_rule_records: Vec<(String, Value)>,
    /// The `ttsrMessageCount` of the latest `ttsr_injection` on the path that has a finite
    /// number there; 0 when none has.
    pub ttsr_message_count: Value,
    /// The `selectedToolNames` of the latest `mcp_tool_selection` on the path that has an
    /// array there; empty when none has.
    pub selected_mcp_tool_names: Vec<Value>,
    /// The discovered built-in tools selected by the latest entry on the path that selects
    /// them (a `discovered_builtin_tool_selection`, or an `mcp_tool_selection` with a
    /// `selectedDiscoveredBuiltinToolNames` array); `None` when no entry does.
    pub selected_discovered_builtin_tool_names: Option<Vec<Value>>,
    /// Whether the path has an `mcp_tool_selection` entry.
    pub has_persisted_mcp_tool_selection: bool,
    /// Whether an entry on the path selects discovered built-in tools (see
    /// [`SessionContext::selected_discovered_builtin_tool_names`]).
    pub has_persisted_discovered_builtin_tool_selection: bool,
    /// The `mode` of the latest `mode_change` on the path (`None` when that entry has
    /// none); `"none"` when the path has no `mode_change`.
    pub mode: Option<Value>,
    /// The `data` of the latest `mode_change` on the path, if it has one.
    pub mode_data: Option<Value>,
}

impl Default for SessionContext<'_> {
    fn default() -> Self {
        SessionContext {
            messages: Vec::new(),
            sources: Vec::new(),
            evicted: Vec::new(),
            thinking_level: Value::string("off"),
            service_tier: None,
            models: Object::new(),
            configured_model_chains: Object::new(),
            injected_ttsr_rules: Vec::new(),
            injected_ttsr_rule_records: Vec::new(),
            ttsr_message_count: Value::number(0.0),
            selected_mcp_tool_names: Vec::new(),
            selected_discovered_builtin_tool_names: None,
            has_persisted_mcp_tool_selection: false,
            has_persisted_discovered_builtin_tool_selection: false,
            mode: Some(Value::string("none")),
            mode_data: None,
        }
    }
}

impl Session {
    /// The context at the current leaf (empty when the leaf is null). The agent holds its
    /// leaf as an entry id, so a leaf entry without a string id (a v3+ file whose last entry
    /// has none) names no entry: the context is empty, as the agent's is.
    pub fn build_context(&self) -> SessionContext<'_> {
        let leaf = self.leaf().filter(|&i| self.record(i).id().is_some());
        build_session_context(self, leaf)
    }

    /// The context at the entry `leaf_id`; an id not in the session falls back to the last
    /// entry, as the original does.
    pub fn build_context_for(&self, leaf_id: &str) -> SessionContext<'_> {
        let leaf = self
            .index_of(leaf_id)
            .or_else(|| self.entry_indices().last());
        build_session_context(self, leaf)
    }
}

/// Builds the context with the leaf at record index `leaf` (`None`: the empty context).
pub fn build_session_context(session: &Session, leaf: Option<usize>) -> SessionContext<'_> {
    let Some(leaf) = leaf else {
        return SessionContext::default();
    };
    let path = session.path_to(leaf);
    let mut scan = StateScan::default();
    for (pos, &i) in path.iter().enumerate() {
        scan.visit(session.record(i), pos);
    }
    let compaction_at = scan.compaction_at;
    let mut ctx = scan.finish();
    let mut out = Emitted {
        messages: Vec::with_capacity(path.len()),
        sources: Vec::with_capacity(path.len()),
        evicted: Vec::new(),
    };
    match compaction_at {
        None => path.iter().for_each(|&i| out.emit(session, i)),
        Some(at) => {
            let compaction = session.record(path[at]);
            let payload = remote_compaction_payload(compaction);
            let keep_before = payload.is_none();
            out.push(
                path[at],
                Cow::Owned(compaction_summary_message(compaction, payload)),
            );
            if keep_before {
                if let Some(first_kept) = compaction.get_str("firstKeptEntryId") {
                    let before = &path[..at];
                    if let Some(start) = first_position_of(session, before, first_kept) {
                        before[start..].iter().for_each(|&i| out.emit(session, i));
                    }
                }
            }
            path[at + 1..].iter().for_each(|&i| out.emit(session, i));
        }
    }
    ctx.messages = out.messages;
    ctx.sources = out.sources;
    ctx.evicted = out.evicted;
    ctx
}

/// The messages of a context being built, each with the record index it comes from.
struct Emitted<'a> {
    messages: Vec<Cow<'a, Value>>,
    sources: Vec<usize>,
    evicted: Vec<(usize, &'static str, &'a Value)>,
}

impl<'a> Emitted<'a> {
    fn push(&mut self, source: usize, message: Cow<'a, Value>) {
        self.messages.push(message);
        self.sources.push(source);
    }

    /// Adds the message the entry at record index `i` contributes, if any.
    fn emit(&mut self, session: &'a Session, i: usize) {
        let record = session.record(i);
        if let Some(message) = emitted_message(record) {
            if let (Some(base), Some(marker)) = (
                cold_spill::payload_base(record.record_type()),
                cold_spill::marker(record),
            ) {
                self.evicted.push((self.messages.len(), base, marker));
            }
            self.push(i, message);
        }
    }
}

/// The first position on `path` of an entry with id `id`. Without duplicate ids in the
/// session the entry is found through the index and its position by comparing indices
/// backwards (the kept range is usually short); otherwise every id on the path is compared.
fn first_position_of(session: &Session, path: &[usize], id: &str) -> Option<usize> {
    if session.has_duplicate_ids() {
        return path
            .iter()
            .position(|&i| session.record(i).id() == Some(id));
    }
    let target = session.index_of(id)?;
    path.iter().rposition(|&i| i == target)
}

/// The message an entry contributes, if any.
fn emitted_message(record: &Record) -> Option<Cow<'_, Value>> {
    match record.record_type() {
        RecordType::Message => record.member("message"),
        RecordType::CustomMessage => Some(Cow::Owned(custom_message(record))),
        RecordType::BranchSummary if record.get("summary").is_some_and(Value::is_truthy) => {
            Some(Cow::Owned(branch_summary_message(record)))
        }
        _ => None,
    }
}

/// `new Date(entry.timestamp).getTime()` (`null` for NaN and an absent timestamp).
fn entry_millis(record: &Record) -> Value {
    record
        .get("timestamp")
        .and_then(date_millis)
        .map_or(Value::Null, |ms| Value::number(ms as f64))
}

/// Sets `key` when `value` is present (JavaScript drops `undefined` members).
fn put(obj: &mut Object, key: &str, value: Option<&Value>) {
    if let Some(v) = value {
        obj.insert(key, v.clone());
    }
}

/// `createCustomMessage`.
fn custom_message(record: &Record) -> Value {
    let mut m = Object::with_capacity(7);
    m.insert("role", Value::string("custom"));
    for key in ["customType", "content", "display", "details", "attribution"] {
        put(&mut m, key, record.get(key));
    }
    m.insert("timestamp", entry_millis(record));
    Value::Object(m)
}

/// `createBranchSummaryMessage`.
fn branch_summary_message(record: &Record) -> Value {
    let mut m = Object::with_capacity(4);
    m.insert("role", Value::string("branchSummary"));
    put(&mut m, "summary", record.get("summary"));
    put(&mut m, "fromId", record.get("fromId"));
    m.insert("timestamp", entry_millis(record));
    Value::Object(m)
}

/// `createCompactionSummaryMessage`.
fn compaction_summary_message(record: &Record, provider_payload: Option<Value>) -> Value {
    let mut m = Object::with_capacity(6);
    m.insert("role", Value::string("compactionSummary"));
    put(&mut m, "summary", record.get("summary"));
    put(&mut m, "shortSummary", record.get("shortSummary"));
    put(&mut m, "tokensBefore", record.get("tokensBefore"));
    put(&mut m, "providerPayload", provider_payload.as_ref());
    m.insert("timestamp", entry_millis(record));
    Value::Object(m)
}

/// The `openaiResponsesHistory` payload of a compaction that preserved a remote replacement
/// history, if it has a non-empty provider and an array history.
fn remote_compaction_payload(compaction: &Record) -> Option<Value> {
    let preserve = compaction.get("preserveData")?.object_view()?;
    let remote = preserve.get("openaiRemoteCompaction")?.object_view()?;
    let provider = remote.get_str("provider").filter(|p| !p.is_empty())?;
    let history = remote.get("replacementHistory").filter(|h| h.is_array())?;
    let mut payload = Object::with_capacity(3);
    payload.insert("type", Value::string("openaiResponsesHistory"));
    payload.insert("provider", Value::string(provider));
    payload.insert("items", history.clone());
    Some(Value::Object(payload))
}

/// The items of an array value, each parsed (non-arrays give `None`).
fn value_list(value: Option<&Value>) -> Option<Vec<Value>> {
    match value?.expanded().as_ref() {
        Value::Array(items) => Some(items.iter().map(|i| i.expanded().into_owned()).collect()),
        _ => None,
    }
}

/// The state scan: the latest thinking level, models, selections and mode on the path.
#[derive(Default)]
struct StateScan<'a> {
    ctx: SessionContext<'static>,
    explicit_default_model: bool,
    /// The latest assistant message since the last explicit default model; its model becomes
    /// `models.default` when the scan ends (the slot keeps the position of the first one).
    pending_assistant: Option<&'a Record>,
    /// Position on the path of the last compaction.
    compaction_at: Option<usize>,
}

impl<'a> StateScan<'a> {
    fn visit(&mut self, record: &'a Record, pos: usize) {
        let ctx = &mut self.ctx;
        match record.record_type() {
            RecordType::ThinkingLevelChange => {
                ctx.thinking_level = match record.get("thinkingLevel") {
                    None | Some(Value::Null) => Value::string("off"),
                    Some(v) => v.clone(),
                };
            }
            RecordType::ModelChange => {
                if let Some(model) = record.get("model").filter(|m| m.is_truthy()) {
                    let role = match record.get("role") {
                        None | Some(Value::Null) => "default".to_owned(),
                        other => template_text(other),
                    };
                    if role == "default" {
                        self.explicit_default_model = true;
                        self.pending_assistant = None;
                    }
                    ctx.models.insert(&role, model.clone());
                }
            }
            RecordType::ConfiguredModelChain => {
                if let Some((role, chain)) = normalize_chain(record) {
                    match chain {
                        Some(chain) => ctx.configured_model_chains.insert(&role, chain),
                        None => {
                            ctx.configured_model_chains.remove(&role);
                        }
                    }
                }
            }
            RecordType::ServiceTierChange => {
                ctx.service_tier = record.get("serviceTier").filter(|v| !v.is_null()).cloned();
            }
            // Only the last assistant message is built, when the scan ends.
            RecordType::Message
                if !self.explicit_default_model && record.is_message_of("assistant") =>
            {
                if !ctx.models.contains_key("default") {
                    ctx.models.insert("default", Value::Null);
                }
                self.pending_assistant = Some(record);
            }
            RecordType::Compaction => self.compaction_at = Some(pos),
            RecordType::TtsrInjection => self.visit_ttsr(record),
            RecordType::McpToolSelection => {
                if let Some(list) = value_list(record.get("selectedToolNames")) {
                    ctx.selected_mcp_tool_names = list;
                }
                ctx.has_persisted_mcp_tool_selection = true;
                if let Some(list) = value_list(record.get("selectedDiscoveredBuiltinToolNames")) {
                    ctx.selected_discovered_builtin_tool_names = Some(list);
                    ctx.has_persisted_discovered_builtin_tool_selection = true;
                }
            }
            RecordType::DiscoveredBuiltinToolSelection => {
                ctx.selected_discovered_builtin_tool_names =
                    Some(value_list(record.get("selectedToolNames")).unwrap_or_default());
                ctx.has_persisted_discovered_builtin_tool_selection = true;
            }
            RecordType::ModeChange => {
                ctx.mode = record.get("mode").cloned();
                ctx.mode_data = record.get("data").cloned();
            }
            _ => {}
        }
    }

    fn visit_ttsr(&mut self, record: &Record) {
        let ctx = &mut self.ctx;
        let add_rule = |ctx: &mut SessionContext<'_>, name: &str| {
            if !ctx.injected_ttsr_rules.iter().any(|r| r == name) {
                ctx.injected_ttsr_rules.push(name.to_owned());
            }
        };
        for name in value_list(record.get("injectedRules")).unwrap_or_default() {
            let Some(name) = name.as_str() else { continue };
            add_rule(ctx, name);
            if !ctx
                .injected_ttsr_rule_records
                .iter()
                .any(|(n, _)| n == name)
            {
                let mut rec = Object::with_capacity(2);
                rec.insert("name", Value::string(name));
                rec.insert("lastInjectedAt", Value::number(0.0));
                ctx.injected_ttsr_rule_records
                    .push((name.to_owned(), Value::Object(rec)));
            }
        }
        for rec in value_list(record.get("injectedRuleRecords")).unwrap_or_default() {
            // Records are parsed two levels deep, so these objects are usually still raw text.
            let rec = rec.expanded().into_owned();
            let Some(name) = rec
                .as_object()
                .and_then(|o| o.get_str("name"))
                .map(str::to_owned)
            else {
                continue;
            };
            add_rule(ctx, &name);
            match ctx
                .injected_ttsr_rule_records
                .iter_mut()
                .find(|(n, _)| *n == name)
            {
                Some(slot) => slot.1 = rec,
                None => ctx.injected_ttsr_rule_records.push((name, rec)),
            }
        }
        if let Some(count) = record.get("ttsrMessageCount") {
            if count.as_f64().is_some_and(f64::is_finite) {
                ctx.ttsr_message_count = count.clone();
            }
        }
    }

    /// The scanned state, with a synthesised chain for every role that has a model but no
    /// configured chain.
    fn finish(self) -> SessionContext<'static> {
        let mut ctx = self.ctx;
        if let Some(m) = self.pending_assistant.and_then(Record::message) {
            let model = format!(
                "{}/{}",
                template_text(m.get("provider")),
                template_text(m.get("model"))
            );
            ctx.models.insert("default", Value::string(model));
        }
        let models: Vec<(JsString, Value)> = ctx
            .models
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (role, model) in models {
            let role_text = role.to_string_lossy();
            if !ctx.configured_model_chains.contains_key(&role_text) {
                let mut chain = Object::with_capacity(4);
                chain.insert("role", Value::String(role.clone()));
                chain.insert("entries", Value::Array(vec![model]));
                chain.insert("origin", Value::string("legacy_session"));
                chain.insert("explicitHead", Value::Bool(true));
                ctx.configured_model_chains
                    .insert(&role_text, Value::Object(chain));
            }
        }
        ctx
    }
}

/// Normalises a `configured_model_chain` entry: `None` to ignore it, `Some((role, None))`
/// for a clearing entry, `Some((role, Some(chain)))` to set a chain.
fn normalize_chain(record: &Record) -> Option<(String, Option<Value>)> {
    let role = record.get_str("role").filter(|r| !r.is_empty())?.to_owned();
    let cleared = record.get("cleared") == Some(&Value::Bool(true));
    let origin = record.get_str("origin").unwrap_or("session");
    let explicit_head = record.get("explicitHead") == Some(&Value::Bool(true));
    if cleared {
        return Some((role, None));
    }
    let entries: Vec<Value> = value_list(record.get("entries"))?
        .into_iter()
        .filter(|e| e.as_js_string().is_some_and(|s| !s.wtf8_bytes().is_empty()))
        .collect();
    if entries.is_empty() {
        return None;
    }
    let mut chain = Object::with_capacity(5);
    chain.insert("role", Value::string(role.as_str()));
    chain.insert("entries", Value::Array(entries));
    chain.insert("origin", Value::string(origin));
    if let Some(identity) = record
        .get("identity")
        .filter(|v| matches!(v, Value::String(_)))
    {
        chain.insert("identity", identity.clone());
    }
    chain.insert("explicitHead", Value::Bool(explicit_head));
    Some((role, Some(Value::Object(chain))))
}

/// Whether a `configured_model_chain` entry normalises (the strict schema check).
pub fn chain_normalizes(record: &Record) -> bool {
    normalize_chain(record).is_some()
}

impl<'a> SessionContext<'a> {
    /// The context with the cold-spilled payloads of its messages read back from `blobs`
    /// ([`cold_spill`]), as the agent builds the context it sends.
    pub fn with_cold_spill_rehydrated(mut self, blobs: &BlobStore) -> Self {
        for (at, base, marker) in std::mem::take(&mut self.evicted) {
            let message = &mut self.messages[at];
            if let Cow::Owned(value) = rehydrate_value(message, base, marker, blobs) {
                *message = Cow::Owned(value);
            }
        }
        self
    }

    /// The context with its cold-spilled payloads rehydrated and every blob reference in its
    /// messages resolved from `blobs`, as the agent sees its messages after loading (missing
    /// blobs become its placeholder text).
    pub fn with_blobs_resolved(self, blobs: &BlobStore) -> Self {
        let mut this = self.with_cold_spill_rehydrated(blobs);
        this.messages = std::mem::take(&mut this.messages)
            .into_iter()
            .map(|message| match message {
                Cow::Borrowed(value) => resolve_blob_refs(value, blobs),
                Cow::Owned(value) => Cow::Owned(match resolve_blob_refs(&value, blobs) {
                    Cow::Owned(resolved) => resolved,
                    Cow::Borrowed(_) => value,
                }),
            })
            .collect();
        this
    }

    /// Writes the context as `JSON.stringify(context, null, 2)` would, one message at a time,
    /// without copying the messages.
    pub fn write_pretty(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        let mut buf = Vec::new();
        self.write_pretty_in(&mut buf, &mut |buf| {
            out.write_all(buf)?;
            buf.clear();
            Ok(())
        })
    }

    /// [`SessionContext::write_pretty`] into `out` itself: no message is written twice over.
    pub fn write_pretty_into(&self, out: &mut Vec<u8>) {
        let _ = self.write_pretty_in(out, &mut |_| Ok(()));
    }

    /// Writes the context into `buf`, handing it to `flush` after each message and at the
    /// end (which may take its bytes away).
    fn write_pretty_in(
        &self,
        buf: &mut Vec<u8>,
        flush: &mut dyn FnMut(&mut Vec<u8>) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        buf.extend_from_slice(b"{\n  \"messages\": [");
        for (i, message) in self.messages.iter().enumerate() {
            buf.extend_from_slice(if i == 0 { b"\n    " } else { b",\n    " });
            json::write_pretty(message, buf, 2);
            flush(buf)?;
        }
        buf.extend_from_slice(if self.messages.is_empty() {
            b"]"
        } else {
            b"\n  ]"
        });
        let Value::Object(rest) = self.to_value_with_messages(Vec::new()) else {
            unreachable!("the context is an object")
        };
        for (key, value) in rest.iter().skip(1) {
            buf.extend_from_slice(b",\n  ");
            json::write_string(key, buf);
            buf.extend_from_slice(b": ");
            json::write_pretty(value, buf, 1);
        }
        buf.extend_from_slice(b"\n}");
        flush(buf)
    }

    /// The context as a JSON object with the original's member order; absent members are
    /// left out as `JSON.stringify` leaves out `undefined`.
    pub fn to_value(&self) -> Value {
        self.to_value_with_messages(self.messages.iter().map(|m| m.as_ref().clone()).collect())
    }

    fn to_value_with_messages(&self, messages: Vec<Value>) -> Value {
        let mut o = Object::with_capacity(14);
        o.insert("messages", Value::Array(messages));
        o.insert("thinkingLevel", self.thinking_level.clone());
        put(&mut o, "serviceTier", self.service_tier.as_ref());
        o.insert("models", Value::Object(self.models.clone()));
        o.insert(
            "configuredModelChains",
            Value::Object(self.configured_model_chains.clone()),
        );
        o.insert(
            "injectedTtsrRules",
            Value::Array(
                self.injected_ttsr_rules
                    .iter()
                    .map(|r| Value::string(r.as_str()))
                    .collect(),
            ),
        );
        o.insert(
            "injectedTtsrRuleRecords",
            Value::Array(
                self.injected_ttsr_rule_records
                    .iter()
                    .map(|(_, r)| r.clone())
                    .collect(),
            ),
        );
        o.insert("ttsrMessageCount", self.ttsr_message_count.clone());
        o.insert(
            "selectedMCPToolNames",
            Value::Array(self.selected_mcp_tool_names.clone()),
        );
        if let Some(list) = &self.selected_discovered_builtin_tool_names {
            o.insert(
                "selectedDiscoveredBuiltinToolNames",
                Value::Array(list.clone()),
            );
        }
        o.insert(
            "hasPersistedMCPToolSelection",
            Value::Bool(self.has_persisted_mcp_tool_selection),
        );
        o.insert(
            "hasPersistedDiscoveredBuiltinToolSelection",
            Value::Bool(self.has_persisted_discovered_builtin_tool_selection),
        );
        put(&mut o, "mode", self.mode.as_ref());
        put(&mut o, "modeData", self.mode_data.as_ref());
        Value::Object(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;
    use crate::read::replay::parse_session_entries;

    #[test]
    fn remote_compaction_history_read_from_a_file_replaces_kept_messages() {
        let text = concat!(
            "{\"type\":\"session\",\"version\":5,\"id\":\"s\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/\"}\n",
            "{\"type\":\"message\",\"id\":\"a\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:01.000Z\",\"message\":{\"role\":\"user\",\"content\":\"kept?\"}}\n",
            "{\"type\":\"compaction\",\"id\":\"c\",\"parentId\":\"a\",\"timestamp\":\"2026-01-01T00:00:02.000Z\",\"summary\":\"s\",\"firstKeptEntryId\":\"a\",\"tokensBefore\":1,",
            "\"preserveData\":{\"openaiRemoteCompaction\":{\"provider\":\"openai\",\"replacementHistory\":[{\"type\":\"message\"}]}}}\n",
        );
        let session = Session::from_records(parse_session_entries(text).unwrap().records);
        let ctx = session.build_context();
        assert_eq!(ctx.messages.len(), 1);
        assert_eq!(
            json::to_compact(&ctx.messages[0]),
            "{\"role\":\"compactionSummary\",\"summary\":\"s\",\"tokensBefore\":1,\"providerPayload\":{\"type\":\"openaiResponsesHistory\",\"provider\":\"openai\",\"items\":[{\"type\":\"message\"}]},\"timestamp\":1767225602000}"
        );
    }

    #[test]
    fn a_context_leaves_the_records_it_reads_unbuilt() {
        let text = concat!(
            "{\"type\":\"session\",\"version\":5,\"id\":\"s\",\"cwd\":\"/\"}\n",
            "{\"type\":\"message\",\"id\":\"a\",\"parentId\":null,\"message\":{\"role\":\"user\",\"content\":\"q\"}}\n",
            "{\"type\":\"message\",\"id\":\"b\",\"parentId\":\"a\",\"message\":{\"role\":\"assistant\",\"provider\":\"p\",\"model\":\"m\",\"content\":[]}}\n",
            "{\"type\":\"message\",\"id\":\"c\",\"parentId\":\"b\",\"message\":{\"role\":\"user\",\"content\":\"again\"}}\n",
        );
        let session = Session::from_records(parse_session_entries(text).unwrap().records);
        let ctx = session.build_context();
        assert_eq!(ctx.messages.len(), 3);
        assert_eq!(ctx.models.get_str("default"), Some("p/m"));
        assert_eq!(
            ctx.messages[2]
                .as_object()
                .and_then(|m| m.get_str("content")),
            Some("again")
        );
        // Only the last assistant message is built, to read its model.
        let built: Vec<&str> = session
            .entries()
            .filter(|record| record.is_built())
            .filter_map(Record::id)
            .collect();
        assert_eq!(built, ["b"]);
    }

    #[test]
    fn sources_name_the_entry_each_message_comes_from() {
        let text = concat!(
            "{\"type\":\"session\",\"version\":5,\"id\":\"s\",\"cwd\":\"/\"}\n",
            "{\"type\":\"message\",\"id\":\"a\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:01.000Z\",\"message\":{\"role\":\"user\",\"content\":\"dropped\"}}\n",
            "{\"type\":\"message\",\"id\":\"b\",\"parentId\":\"a\",\"timestamp\":\"2026-01-01T00:00:02.000Z\",\"message\":{\"role\":\"user\",\"content\":\"kept\"}}\n",
            "{\"type\":\"compaction\",\"id\":\"c\",\"parentId\":\"b\",\"timestamp\":\"2026-01-01T00:00:03.000Z\",\"summary\":\"s\",\"firstKeptEntryId\":\"b\",\"tokensBefore\":1}\n",
            "{\"type\":\"custom_message\",\"customType\":\"n\",\"content\":\"note\",\"display\":true,\"id\":\"d\",\"parentId\":\"c\",\"timestamp\":\"2026-01-01T00:00:04.000Z\"}\n",
            "{\"type\":\"label\",\"id\":\"e\",\"parentId\":\"d\",\"timestamp\":\"2026-01-01T00:00:05.000Z\",\"targetId\":\"b\",\"label\":\"l\"}\n",
            "{\"type\":\"branch_summary\",\"id\":\"f\",\"parentId\":\"e\",\"timestamp\":\"2026-01-01T00:00:06.000Z\",\"fromId\":\"a\",\"summary\":\"x\"}\n",
        );
        let session = Session::from_records(parse_session_entries(text).unwrap().records);
        let ctx = session.build_context();
        let ids: Vec<&str> = ctx
            .sources
            .iter()
            .map(|&i| session.record(i).id().unwrap())
            .collect();
        assert_eq!(ids, ["c", "b", "d", "f"]);
        assert_eq!(ctx.sources.len(), ctx.messages.len());
        assert!(SessionContext::default().sources.is_empty());
    }

    #[test]
    fn ttsr_rule_records_read_from_a_file_are_kept() {
        let text = concat!(
            "{\"type\":\"session\",\"version\":5,\"id\":\"s\",\"cwd\":\"/\"}\n",
            "{\"type\":\"ttsr_injection\",\"id\":\"a\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:00.000Z\",",
            "\"injectedRules\":[\"r1\"],\"injectedRuleRecords\":[{\"name\":\"r2\",\"lastInjectedAt\":5}]}\n",
        );
        let session = Session::from_records(parse_session_entries(text).unwrap().records);
        let ctx = session.build_context();
        assert_eq!(ctx.injected_ttsr_rules, ["r1", "r2"]);
        let records: Vec<String> = ctx
            .injected_ttsr_rule_records
            .iter()
            .map(|(_, r)| json::to_compact(r))
            .collect();
        assert_eq!(
            records,
            [
                "{\"name\":\"r1\",\"lastInjectedAt\":0}",
                "{\"name\":\"r2\",\"lastInjectedAt\":5}"
            ]
        );
    }

    #[test]
    fn streaming_pretty_output_equals_the_pretty_value() {
        let text = concat!(
            "{\"type\":\"session\",\"version\":5,\"id\":\"s\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/\"}\n",
            "{\"type\":\"message\",\"id\":\"a\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:01.000Z\",\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}}\n",
            "{\"type\":\"mode_change\",\"id\":\"b\",\"parentId\":\"a\",\"timestamp\":\"2026-01-01T00:00:02.000Z\",\"mode\":\"plan\",\"data\":{\"x\":[1]}}\n",
        );
        let session = Session::from_records(parse_session_entries(text).unwrap().records);
        for ctx in [session.build_context(), SessionContext::default()] {
            let mut streamed = Vec::new();
            ctx.write_pretty(&mut streamed).unwrap();
            assert_eq!(
                String::from_utf8(streamed).unwrap(),
                json::to_pretty(&ctx.to_value())
            );
        }
    }
}
