//! Usage statistics of a session: token counts, premium requests and cost,
//! summed over every entry in file order.
//!
//! Counted: the `usage` of assistant messages, and `details.usage` of `toolResult` messages
//! whose `toolName` is `"task"`. A usage record counts only when `input`, `output`,
//! `cacheRead` and `cacheWrite` are finite numbers ≥ 0, `premiumRequests` is absent (0) or a
//! finite number ≥ 0, and `cost` is absent (0) or an object (not an array) whose `total` is
//! a finite number ≥ 0. A record that would make any total non-finite is skipped whole.
//! Skipped records are reported by entry id.
//!
//! Each counted record is attributed to a model ([`usage_model`]) for per-model breakdowns:
//! an assistant message's `provider/model`, a task result's `details.provider/model`, else
//! [`UNKNOWN_MODEL`].

use crate::format::record::Record;
use crate::json::Value;
use crate::session::tree::Session;

/// Summed usage.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UsageTotals {
    /// Input tokens (the records' `input`).
    pub input: f64,
    /// Output tokens (`output`).
    pub output: f64,
    /// Input tokens read from the provider's prompt cache (`cacheRead`).
    pub cache_read: f64,
    /// Input tokens written to the provider's prompt cache (`cacheWrite`).
    pub cache_write: f64,
    /// Premium requests (`premiumRequests`; 0 for a record without it).
    pub premium_requests: f64,
    /// Cost in US dollars (`cost.total`; 0 for a record without `cost`).
    pub cost: f64,
}

/// The model name usage is attributed to when its record names none.
pub const UNKNOWN_MODEL: &str = "unknown";

/// One usage record the statistics counted.
#[derive(Debug, Clone, PartialEq)]
pub struct CountedUsage {
    /// The record index of the entry carrying it.
    pub index: usize,
    /// The model it is attributed to ([`usage_model`]).
    pub model: String,
    /// What the record counted.
    pub amounts: UsageTotals,
}

/// A sum of counted usage records and how many there were (a per-model or per-day group).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UsageSum {
    /// How many usage records were added.
    pub records: u64,
    /// Their member-wise sum.
    pub totals: UsageTotals,
}

impl UsageSum {
    /// Adds one counted record's amounts.
    pub fn add(&mut self, amounts: &UsageTotals) {
        self.records += 1;
        self.totals = self.totals.plus(amounts);
    }

    /// Adds another sum's records and totals.
    pub fn merge(&mut self, other: &UsageSum) {
        self.records += other.records;
        self.totals = self.totals.plus(&other.totals);
    }

    /// The totals as [`UsageTotals::to_value`] writes them, then `records`.
    pub fn to_value(&self) -> Value {
        let Value::Object(mut o) = self.totals.to_value() else {
            unreachable!("totals are an object")
        };
        o.insert("records", Value::number(self.records as f64));
        Value::Object(o)
    }
}

/// The totals and the entries whose usage was not counted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UsageStatistics {
    /// The sum of every counted usage record.
    pub totals: UsageTotals,
    /// Ids of the entries whose usage record was invalid, in file order.
    pub skipped: Vec<String>,
}

impl UsageTotals {
    /// The member-wise sum.
    pub fn plus(&self, other: &UsageTotals) -> UsageTotals {
        UsageTotals {
            input: self.input + other.input,
            output: self.output + other.output,
            cache_read: self.cache_read + other.cache_read,
            cache_write: self.cache_write + other.cache_write,
            premium_requests: self.premium_requests + other.premium_requests,
            cost: self.cost + other.cost,
        }
    }

    fn is_finite(&self) -> bool {
        [
            self.input,
            self.output,
            self.cache_read,
            self.cache_write,
            self.premium_requests,
            self.cost,
        ]
        .iter()
        .all(|v| v.is_finite())
    }

    /// The totals as the agent reports them.
    pub fn to_value(&self) -> Value {
        let mut o = crate::json::Object::with_capacity(6);
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

/// The model a counted usage record is attributed to: `<provider>/<model>` of an assistant
/// message, or of a task tool result's `details` (just `<model>` without a provider);
/// [`UNKNOWN_MODEL`] when the record names no model.
pub fn usage_model(record: &Record) -> String {
    let named = |o: &crate::json::Object| {
        let model = o.get_str("model").filter(|m| !m.is_empty())?;
        Some(match o.get_str("provider").filter(|p| !p.is_empty()) {
            Some(provider) => format!("{provider}/{model}"),
            None => model.to_owned(),
        })
    };
    let model = record
        .message()
        .and_then(|message| match message.get_str("role") {
            Some("assistant") => named(message),
            _ => message
                .get("details")
                .and_then(Value::object_view)
                .and_then(|details| named(&details)),
        });
    model.unwrap_or_else(|| UNKNOWN_MODEL.to_owned())
}

impl UsageStatistics {
    /// Adds one entry's usage, if it carries any; returns the amounts counted (`None` when
    /// the entry carries no usage or its record was skipped).
    pub fn add(&mut self, record: &Record) -> Option<UsageTotals> {
        let usage = usage_of(record)?;
        match amounts(&usage).filter(|a| self.totals.plus(a).is_finite()) {
            Some(a) => {
                self.totals = self.totals.plus(&a);
                Some(a)
            }
            None => {
                self.skipped
                    .push(record.id().unwrap_or_default().to_owned());
                None
            }
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

    /// The usage statistics and, in file order, every record they counted with its model.
    pub fn counted_usage(&self) -> (UsageStatistics, Vec<CountedUsage>) {
        let mut stats = UsageStatistics::default();
        let mut counted = Vec::new();
        for index in self.entry_indices() {
            let record = self.record(index);
            if let Some(amounts) = stats.add(record) {
                counted.push(CountedUsage {
                    index,
                    model: usage_model(record),
                    amounts,
                });
            }
        }
        (stats, counted)
    }
}

#[cfg(test)]
mod tests {
    use super::UNKNOWN_MODEL;
    use crate::json::to_compact;
    use crate::read::replay::parse_session_entries;
    use crate::session::tree::Session;

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
    fn counted_records_are_attributed_to_their_model() {
        let s = session(&[
            r#"{"role":"assistant","provider":"anthropic","model":"claude","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0}}"#,
            r#"{"role":"assistant","model":"bare","usage":{"input":2,"output":1,"cacheRead":0,"cacheWrite":0}}"#,
            r#"{"role":"assistant","provider":"p","usage":{"input":3,"output":1,"cacheRead":0,"cacheWrite":0}}"#,
            r#"{"role":"assistant","provider":"p","model":"m","usage":{"input":-1,"output":1,"cacheRead":0,"cacheWrite":0}}"#,
            r#"{"role":"toolResult","toolName":"task","details":{"provider":"openai","model":"mini","usage":{"input":4,"output":1,"cacheRead":0,"cacheWrite":0}}}"#,
            r#"{"role":"toolResult","toolName":"task","details":{"usage":{"input":5,"output":1,"cacheRead":0,"cacheWrite":0}}}"#,
        ]);
        let (stats, counted) = s.counted_usage();
        assert_eq!(stats, s.usage_statistics());
        let got: Vec<(usize, &str, f64)> = counted
            .iter()
            .map(|c| (c.index, c.model.as_str(), c.amounts.input))
            .collect();
        assert_eq!(
            got,
            [
                (1, "anthropic/claude", 1.0),
                (2, "bare", 2.0),
                (3, UNKNOWN_MODEL, 3.0),
                (5, "openai/mini", 4.0),
                (6, UNKNOWN_MODEL, 5.0),
            ]
        );
        assert_eq!(stats.skipped, ["e3"]);
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
