//! The table of `gjcfs usage`: a line that says what was counted, then a row per group (with
//! a breakdown, an indented row per model under each) and the total.

use std::io::Write;

use anyhow::Result;
use gjcfs_engine::session::usage::UsageSum;
use gjcfs_engine::store::usage::{models_by_cost, Grouping, ModelSums, StoreUsage};
use gjcfs_engine::views::thousands;

use super::super::output::{terminal_safe, token_count as count};
use super::super::style;
use super::super::zone::Zone;
use super::Titles;

/// The columns of numbers, after a row's labels.
const NUMBERS: [&str; 7] = [
    "RECORDS",
    "INPUT",
    "OUTPUT",
    "CACHE READ",
    "CACHE WRITE",
    "PREMIUM",
    "COST",
];

/// What sets a model's row of a breakdown off from its group's.
const MODEL_INDENT: &str = "  ";

/// Writes the report: the line of what was counted, then the table.
pub(super) fn write(
    out: &mut impl Write,
    usage: &StoreUsage,
    by: Option<Grouping>,
    zone: &Zone,
    titles: &Titles,
) -> Result<()> {
    writeln!(out, "{}", first_line(usage, zone))?;
    let zone_name = terminal_safe(zone.name());
    let labels: Vec<String> = match by {
        None => vec![String::new()],
        Some(Grouping::Session) => vec!["SESSION".to_owned(), "PROJECT".to_owned()],
        Some(Grouping::Day) => vec![format!("DAY ({zone_name})")],
        Some(Grouping::Week) => vec![format!("WEEK ({zone_name})")],
        Some(Grouping::Month) => vec![format!("MONTH ({zone_name})")],
        Some(Grouping::Project) => vec!["PROJECT".to_owned()],
        Some(Grouping::Model) => vec!["MODEL".to_owned()],
    };
    let label_count = labels.len();
    let mut header = labels;
    header.extend(NUMBERS.map(str::to_owned));
    if by == Some(Grouping::Session) {
        header.push("TITLE".to_owned());
    }
    let mut rows = vec![header];
    if let Some(by) = by {
        // Projects are the sessions' cwds, models what the replies named.
        for (key, sum) in usage.groups(by) {
            let mut cells = vec![terminal_safe(key).into_owned()];
            if by == Grouping::Session {
                let cwd = usage.session_cwds.get(key).map_or("", String::as_str);
                cells.push(terminal_safe(cwd).into_owned());
            }
            let mut row = numbers(cells, sum);
            if by == Grouping::Session {
                row.push(titles.cell(key));
            }
            rows.push(row);
            breakdown(&mut rows, usage.models(Some(by), key), label_count);
        }
    }
    let mut total = vec!["total".to_owned()];
    total.resize(label_count, String::new());
    rows.push(numbers(total, &usage.totals));
    breakdown(&mut rows, usage.models(None, ""), label_count);
    write_rows(out, &rows, label_count)
}

/// What the report counted: the sessions with replies in the range, the dates of the first
/// and the last, the zone; then the replies counted and those that were not, and how many
/// sessions the store holds.
fn first_line(usage: &StoreUsage, zone: &Zone) -> String {
    let sessions = |n: usize| {
        let s = if n == 1 { "" } else { "s" };
        format!("{} session{s}", thousands(n as u64))
    };
    let dates = match usage.dates() {
        Some((first, last)) if first == last => format!(", {first}"),
        Some((first, last)) => format!(", {first} – {last}"),
        None => String::new(),
    };
    let outside = if usage.outside_range > 0 {
        format!(", {} outside the range", thousands(usage.outside_range))
    } else {
        String::new()
    };
    format!(
        "{}{dates}, {}: {} usage records counted, {} copies in forks not counted, {} invalid\
         {outside}; {} in the store",
        sessions(usage.sessions_counted()),
        terminal_safe(zone.name()),
        thousands(usage.totals.records),
        thousands(usage.copies),
        thousands(usage.skipped),
        sessions(usage.sessions),
    )
}

/// A row: its labels, then the numbers.
fn numbers(labels: Vec<String>, sum: &UsageSum) -> Vec<String> {
    let t = &sum.totals;
    let mut cells = labels;
    cells.extend([
        thousands(sum.records),
        count(t.input),
        count(t.output),
        count(t.cache_read),
        count(t.cache_write),
        count(t.premium_requests),
        format!("${:.4}", t.cost),
    ]);
    cells
}

/// Under a row, a row per model of its breakdown, the dearest first.
fn breakdown(rows: &mut Vec<Vec<String>>, models: Option<&ModelSums>, label_count: usize) {
    for (model, sum) in models.map(models_by_cost).unwrap_or_default() {
        let mut labels = vec![format!("{MODEL_INDENT}{}", terminal_safe(model))];
        labels.resize(label_count, String::new());
        rows.push(numbers(labels, sum));
    }
}

/// The rows in columns, the first (the header) painted: labels to the left, numbers to the
/// right, a title last to the left.
fn write_rows(out: &mut impl Write, rows: &[Vec<String>], label_count: usize) -> Result<()> {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            let cells = rows.iter().filter_map(|r| r.get(c));
            cells.map(|cell| cell.chars().count()).max().unwrap_or(0)
        })
        .collect();
    let is_number = |c: usize| (label_count..label_count + NUMBERS.len()).contains(&c);
    writeln!(out)?;
    let bold = style::stdout_colored();
    for (i, r) in rows.iter().enumerate() {
        let mut line = String::new();
        for (c, (cell, w)) in r.iter().zip(&widths).enumerate() {
            if c > 0 {
                line.push_str("  ");
            }
            if is_number(c) {
                line.push_str(&format!("{cell:>w$}"));
            } else {
                line.push_str(&format!("{cell:<w$}"));
            }
        }
        let line = line.trim_end();
        if i == 0 {
            writeln!(out, "{}", style::paint(line, style::HEADER, bold))?;
        } else {
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use gjcfs_engine::session::usage::UsageTotals;

    use super::*;
    use crate::cli::zone::parse_zone;

    fn sum(records: u64, cost: f64) -> UsageSum {
        UsageSum {
            records,
            totals: UsageTotals {
                input: 10.0 * records as f64,
                cost,
                ..UsageTotals::default()
            },
        }
    }

    #[test]
    fn the_first_line_says_what_was_counted_and_a_breakdown_follows_each_row() {
        let mut usage = StoreUsage {
            sessions: 3,
            totals: sum(3, 3.0),
            outside_range: 2,
            ..StoreUsage::default()
        };
        usage.by_session.insert("s1".to_owned(), sum(3, 3.0));
        usage.session_cwds.insert("s1".to_owned(), "/w".to_owned());
        usage.by_day.insert("2026-01-02".to_owned(), sum(3, 3.0));
        usage.by_model.insert("cheap".to_owned(), sum(2, 1.0));
        usage.by_model.insert("dear".to_owned(), sum(1, 2.0));
        let zone = parse_zone("Europe/Berlin").unwrap();
        assert_eq!(
            first_line(&usage, &zone),
            "1 session, 2026-01-02, Europe/Berlin: 3 usage records counted, 0 copies in forks \
             not counted, 0 invalid, 2 outside the range; 3 sessions in the store"
        );

        // With a breakdown, each row's models follow it, the dearest first.
        let models: ModelSums = usage.by_model.clone();
        let sessions = BTreeMap::from([("s1".to_owned(), models)]);
        usage.models = Some(HashMap::from([(Grouping::Session, sessions)]));
        let mut out = Vec::new();
        write(
            &mut out,
            &usage,
            Some(Grouping::Session),
            &zone,
            &Titles::default(),
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        let rows: Vec<&str> = text.lines().skip(2).collect();
        let cells = |row: &str| {
            row.split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            cells(rows[0])[..3],
            ["SESSION", "PROJECT", "RECORDS"],
            "{text}"
        );
        assert_eq!(cells(rows[0]).last().unwrap(), "TITLE", "{text}");
        assert!(
            rows[1].starts_with("s1 ") && rows[1].ends_with("$3.0000  (untitled)"),
            "{text}"
        );
        assert!(
            rows[2].starts_with("  dear ") && rows[2].ends_with("$2.0000"),
            "{text}"
        );
        assert!(
            rows[3].starts_with("  cheap ") && rows[3].ends_with("$1.0000"),
            "{text}"
        );
        assert!(rows[4].starts_with("total "), "{text}");
        assert!(
            rows[5].starts_with("  dear ") && rows[6].starts_with("  cheap "),
            "{text}"
        );
        assert_eq!(rows.len(), 7, "{text}");
    }
}
