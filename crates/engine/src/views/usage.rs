//! `usage.json`: the session's usage statistics ([`Session::usage_statistics`])
//! with a breakdown per model.
//!
//! Format (invariants): pretty JSON (two-space indent) ended by a newline, one object:
//! - `input`, `output`, `cacheRead`, `cacheWrite`, `premiumRequests`, `cost`: the engine's
//!   totals over every entry in file order, exactly as [`UsageTotals::to_value`] writes them;
//! - `records`: how many usage records were counted;
//! - `byModel`: model name ([`usage_model`](crate::session::usage::usage_model)) → the same
//!   six totals and `records` over that model's records, keys in byte order;
//! - `skipped`: the ids of the entries whose usage record was invalid and not counted, in
//!   file order.
//!
//! [`UsageTotals::to_value`]: crate::session::usage::UsageTotals::to_value

use std::collections::BTreeMap;

use crate::json::{self, Object, Value};
use crate::session::tree::Session;
use crate::session::usage::UsageSum;
use crate::store::usage::Grouping;

/// The most characters of a session's title in a store report's JSON
/// ([`add_session_titles`]).
pub const JSON_TITLE_CHARS: usize = 200;

/// Adds to each group of `bySession` in `report` (the JSON of a store's usage,
/// [`StoreUsage::to_value`](crate::store::usage::StoreUsage::to_value)) the session's title:
/// `title(id)` on one line, its first line only, at most [`JSON_TITLE_CHARS`] characters
/// (empty without one).
pub fn add_session_titles(report: &mut Object, title: &dyn Fn(&str) -> Option<String>) {
    if let Some(Value::Object(sessions)) = report.get_mut(Grouping::Session.json_key()) {
        for (id, group) in sessions.iter_mut() {
            if let Value::Object(group) = group {
                let title = title(&id.to_string_lossy());
                let line = super::title_line(title.as_deref(), None, JSON_TITLE_CHARS);
                group.insert("title", Value::string(line));
            }
        }
    }
}

/// The `usage.json` value.
pub fn session_usage_value(session: &Session) -> Value {
    let (stats, counted) = session.counted_usage();
    let mut by_model: BTreeMap<&str, UsageSum> = BTreeMap::new();
    for c in &counted {
        by_model.entry(&c.model).or_default().add(&c.amounts);
    }
    let Value::Object(mut o) = stats.totals.to_value() else {
        unreachable!("totals are an object")
    };
    o.insert("records", Value::number(counted.len() as f64));
    let mut models = Object::with_capacity(by_model.len());
    for (model, sum) in &by_model {
        models.insert(model, sum.to_value());
    }
    o.insert("byModel", Value::Object(models));
    o.insert(
        "skipped",
        Value::Array(
            stats
                .skipped
                .iter()
                .map(|id| Value::string(id.as_str()))
                .collect(),
        ),
    );
    Value::Object(o)
}

/// `usage.json` as bytes.
pub fn session_usage_json(session: &Session) -> Vec<u8> {
    let mut out = Vec::new();
    json::write_pretty(&session_usage_value(session), &mut out, 0);
    out.push(b'\n');
    out
}
