//! Usage statistics of a session (details §11): token counts, premium requests and cost,
//! summed over every entry in file order.
//!
//! Counted: the `usage` of assistant messages, and `details.usage` of `toolResult` messages
//! whose `toolName` is `"task"`. A usage record counts only when `input`, `output`,
//! `cacheRead` and `cacheWrite` are finite numbers ≥ 0, `premiumRequests` is absent (0) or a
//! finite number ≥ 0, and `cost` is absent (0) or an object (not an array) whose `total` is
//! a finite number ≥ 0. A record that would make any total non-finite is skipped whole.
//! Skipped records are reported by entry id.

use super::json::Value;
use super::record::Record;
use super::session::Session;

/// Summed usage.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UsageTotals {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
    pub premium_requests: f64,
    pub cost: f64,
}

/// The totals and the entries whose usage was not counted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UsageStatistics {
    pub totals: UsageTotals,
    /// Ids of the entries whose usage record was invalid, in file order.
    pub skipped: Vec<String>,
}

impl UsageTotals {
    /// The totals as the agent reports them.
    pub fn to_value(&self) -> Value {
        let mut o = super::json::Object::with_capacity(6);
        for (key, v) in [
            ("input", self.input),
            ("output", self.output),
            ("cacheRead", self.cache_read),
            ("cacheWrite", self.cache_write),
            ("premiumRequests", self.premium_requests),
            ("cost", self.cost),
        ] {
            o.insert(key, Value::number(v));
        }
        Value::Object(o)
    }
}

fn non_negative(v: Option<&Value>) -> Option<f64> {
    v?.as_f64().filter(|n| n.is_finite() && *n >= 0.0)
}

/// The usage record an entry carries, if it is one that counts.
fn usage_of(record: &Record) -> Option<Value> {
    let message = record.message()?;
    match message.get_str("role")? {
        "assistant" => message.get("usage").map(|u| u.expanded().into_owned()),
        "toolResult" if message.get_str("toolName") == Some("task") => {
            let details = message.get("details")?.object_view()?;
            details.get("usage").map(|u| u.expanded().into_owned())
        }
        _ => None,
    }
}

/// The amounts of a valid usage record.
fn amounts(usage: &Value) -> Option<UsageTotals> {
    let u = usage.as_object()?;
    let premium = match u.get("premiumRequests") {
        None => 0.0,
        some => non_negative(some)?,
    };
    let cost = match u.get("cost") {
        None => 0.0,
        Some(c) => {
            let c = c.object_view()?;
            non_negative(c.get("total"))?
        }
    };
    Some(UsageTotals {
        input: non_negative(u.get("input"))?,
        output: non_negative(u.get("output"))?,
        cache_read: non_negative(u.get("cacheRead"))?,
        cache_write: non_negative(u.get("cacheWrite"))?,
        premium_requests: premium,
        cost,
    })
}

impl UsageStatistics {
    /// Adds one entry's usage, if it carries any.
    pub fn add(&mut self, record: &Record) {
        let Some(usage) = usage_of(record) else {
            return;
        };
        let t = &self.totals;
        let next = amounts(&usage).map(|a| UsageTotals {
            input: t.input + a.input,
            output: t.output + a.output,
            cache_read: t.cache_read + a.cache_read,
            cache_write: t.cache_write + a.cache_write,
            premium_requests: t.premium_requests + a.premium_requests,
            cost: t.cost + a.cost,
        });
        match next {
            Some(n)
                if [
                    n.input,
                    n.output,
                    n.cache_read,
                    n.cache_write,
                    n.premium_requests,
                    n.cost,
                ]
                .iter()
                .all(|v| v.is_finite()) =>
            {
                self.totals = n
            }
            _ => self
                .skipped
                .push(record.id().unwrap_or_default().to_owned()),
        }
    }
}

impl Session {
    /// The usage statistics over every entry in file order.
    pub fn usage_statistics(&self) -> UsageStatistics {
        let mut stats = UsageStatistics::default();
        for record in self.entries() {
            stats.add(record);
        }
        stats
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::json::to_compact;
    use crate::engine::replay::parse_session_entries;
    use crate::engine::session::Session;

    fn session(lines: &[&str]) -> Session {
        let mut text = String::from(
            "{\"type\":\"session\",\"version\":5,\"id\":\"s\",\"timestamp\":\"t\",\"cwd\":\"/\"}\n",
        );
        for (i, l) in lines.iter().enumerate() {
            text.push_str(&format!(
                "{{\"type\":\"message\",\"id\":\"e{i}\",\"parentId\":null,\"timestamp\":\"t\",\"message\":{l}}}\n"
            ));
        }
        Session::from_records(parse_session_entries(&text).unwrap().records)
    }

    #[test]
    fn sums_assistant_and_task_usage() {
        let s = session(&[
            r#"{"role":"assistant","usage":{"input":10,"output":2.5,"cacheRead":1,"cacheWrite":0,"premiumRequests":1,"cost":{"total":0.25}}}"#,
            r#"{"role":"toolResult","toolName":"task","details":{"usage":{"input":5,"output":1,"cacheRead":0,"cacheWrite":3,"cost":{"total":0.5}}}}"#,
            r#"{"role":"toolResult","toolName":"bash","details":{"usage":{"input":1000,"output":1,"cacheRead":0,"cacheWrite":0}}}"#,
            r#"{"role":"user","usage":{"input":1000,"output":1,"cacheRead":0,"cacheWrite":0}}"#,
        ]);
        let stats = s.usage_statistics();
        assert!(stats.skipped.is_empty());
        assert_eq!(
            to_compact(&stats.totals.to_value()),
            r#"{"input":15,"output":3.5,"cacheRead":1,"cacheWrite":3,"premiumRequests":1,"cost":0.75}"#
        );
    }

    #[test]
    fn invalid_records_are_skipped_whole_and_reported() {
        let s = session(&[
            r#"{"role":"assistant","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0}}"#,
            r#"{"role":"assistant","usage":{"input":1,"output":1,"cacheRead":0}}"#,
            r#"{"role":"assistant","usage":{"input":"1","output":1,"cacheRead":0,"cacheWrite":0}}"#,
            r#"{"role":"assistant","usage":{"input":-1,"output":1,"cacheRead":0,"cacheWrite":0}}"#,
            r#"{"role":"assistant","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"premiumRequests":null}}"#,
            r#"{"role":"assistant","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"cost":[1]}}"#,
            r#"{"role":"assistant","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"cost":null}}"#,
            r#"{"role":"assistant","usage":{"input":1e308,"output":1,"cacheRead":0,"cacheWrite":0}}"#,
            r#"{"role":"assistant","usage":{"input":1e308,"output":1,"cacheRead":0,"cacheWrite":0}}"#,
        ]);
        let stats = s.usage_statistics();
        assert_eq!(stats.skipped, ["e1", "e2", "e3", "e4", "e5", "e6", "e8"]);
        assert_eq!(stats.totals.output, 2.0);
        assert_eq!(stats.totals.input, 1.0 + 1e308);
    }
}
