//! `usage` and `history_search`: the store's token usage and cost, and the prompts the
//! user typed.

use std::cmp::Ordering;

use gjcfs_engine::format::time::format_iso_millis;
use gjcfs_engine::store::usage::{Grouping, Report};
use serde_json::{json, Value};

use super::answer::{capped, from_engine, or_nothing, page_note, range, Answer, ToolError};
use super::params::{self, HistorySearch, Usage, PROMPT_CHARS};
use crate::cli::history::prompts;
use crate::cli::store::StoreArgs;
use crate::cli::usage::store_usage;

/// The store's totals in the range, each reply counted once, and with `by` the largest
/// groups (the newest for days, weeks and months).
pub fn usage(store: &StoreArgs, p: Usage) -> Answer {
    let limit = params::limit(p.limit).map_err(ToolError::Invalid)?;
    let by = match p.by.as_deref() {
        None => None,
        Some("session") => Some(Grouping::Session),
        Some("day") => Some(Grouping::Day),
        Some("week") => Some(Grouping::Week),
        Some("month") => Some(Grouping::Month),
        Some("project") => Some(Grouping::Project),
        Some("model") => Some(Grouping::Model),
        Some(other) => {
            return Err(ToolError::invalid(format!(
                "by {other:?}: expected session, day, week, month, project or model"
            )))
        }
    };
    let range = range(p.since.as_deref(), p.until.as_deref())?;
    // Days, weeks and months of UTC, as the tool's parameters say.
    let report = Report {
        range,
        ..Report::ALL
    };
    let usage = store_usage(store, &report, usize::MAX)?;
    let mut answer = from_engine(&usage.to_value(None));
    if let (Some(by), Value::Object(o)) = (by, &mut answer) {
        let mut groups: Vec<_> = usage.groups(by).iter().collect();
        match by {
            Grouping::Day | Grouping::Week | Grouping::Month => groups.reverse(),
            _ => groups.sort_by(|a, b| {
                b.1.totals
                    .cost
                    .partial_cmp(&a.1.totals.cost)
                    .unwrap_or(Ordering::Equal)
                    .then_with(|| a.0.cmp(b.0))
            }),
        }
        let total = groups.len();
        let shown: Vec<Value> = groups
            .into_iter()
            .take(limit)
            .map(|(key, sum)| {
                let mut group = from_engine(&sum.to_value());
                if let Value::Object(members) = &mut group {
                    members.insert("key".into(), key.as_str().into());
                    if by == Grouping::Session {
                        let cwd = usage.session_cwds.get(key).map_or("", String::as_str);
                        members.insert("cwd".into(), cwd.into());
                    }
                }
                group
            })
            .collect();
        let more = page_note(0, shown.len(), Some(total), false);
        o.insert("by".into(), by.json_key().into());
        o.insert("groups".into(), Value::Array(shown));
        o.insert("totalGroups".into(), total.into());
        o.insert(
            "more".into(),
            match more {
                Value::Null => Value::Null,
                _ => format!(
                    "the {limit} groups shown of {total}; raise limit (at most 100) for more"
                )
                .into(),
            },
        );
    }
    store.let_go(usage);
    Ok(answer)
}

/// The prompts of the agent's prompt history that match the query, best first.
pub fn history_search(store: &StoreArgs, p: HistorySearch) -> Answer {
    let limit = params::limit(p.limit).map_err(ToolError::Invalid)?;
    let db = store.agent_dirs()?.history_db();
    let found = or_nothing(
        prompts(&db, Some(&p.query), p.cwd.as_deref(), limit),
        |why| json!({ "prompts": [], "more": why }),
    )?;
    let entries = match found {
        Ok(entries) => entries,
        Err(empty) => return Ok(empty),
    };
    let shown = entries.len();
    let prompts: Vec<Value> = entries
        .iter()
        .map(|e| {
            json!({
                "prompt": capped(&e.prompt, PROMPT_CHARS),
                "time": format_iso_millis(e.created_at.saturating_mul(1000)),
                "cwd": e.cwd,
            })
        })
        .collect();
    Ok(json!({
        "prompts": prompts,
        "more": if shown == limit {
            Value::String(format!("{limit} shown; there may be more: raise limit (at most 100)"))
        } else {
            Value::Null
        },
    }))
}
