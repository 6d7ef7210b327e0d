//! `gjcfs usage [--by GROUP] [--since DATE] [--until DATE] [--json]`: token usage and cost
//! over the store.

use std::io::{BufWriter, Write};

use anyhow::Result;
use clap::{Args, ValueEnum};
use gjcfs_engine::json;
use gjcfs_engine::session::usage::UsageSum;
use gjcfs_engine::store::discovery::keep_live_copies;
use gjcfs_engine::store::usage::{Grouping, StoreUsage, TimeRange};
use gjcfs_engine::views::thousands;

use super::output::{left_to_exit, terminal_safe, token_count as count, warn};
use super::progress::Progress;
use super::range::TimeRangeArgs;
use super::store::StoreArgs;
use super::style;

/// How many unreadable files are named one by one before the rest are only counted.
const FAILED_SHOWN: usize = 5;
/// Progress is shown for stores of at least this many files.
const PROGRESS_FROM: usize = 500;

#[derive(Args)]
pub struct UsageArgs {
    /// Group the totals: by the session a reply counts in (its oldest copy), by the UTC
    /// day, ISO week (YYYY-Www, from Monday) or month of each reply, by project (the
    /// session's working directory), or by model.
    #[arg(long, value_enum, value_name = "GROUP")]
    by: Option<By>,
    /// Only replies in this range (--since from, --until before).
    #[command(flatten)]
    range: TimeRangeArgs,
    /// Print JSON: {"sessions","records","copies","skipped","outsideRange","totals"} and
    /// the groups ("bySession", "byDay", "byWeek", "byMonth", "byProject" or "byModel").
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Clone, Copy, ValueEnum)]
enum By {
    Session,
    Day,
    Week,
    Month,
    Project,
    Model,
}

pub fn run(args: UsageArgs) -> Result<()> {
    let by = args.by.map(|b| match b {
        By::Session => Grouping::Session,
        By::Day => Grouping::Day,
        By::Week => Grouping::Week,
        By::Month => Grouping::Month,
        By::Project => Grouping::Project,
        By::Model => Grouping::Model,
    });
    let range = args.range.range()?;
    let usage = store_usage(&args.store, range, PROGRESS_FROM)?;
    let mut out = BufWriter::new(std::io::stdout().lock());
    if args.json {
        writeln!(out, "{}", json::to_pretty(&usage.to_value(by)))?;
    } else {
        write_table(&mut out, &usage, by)?;
    }
    out.flush()?;
    left_to_exit(usage);
    Ok(())
}

/// The usage of the whole store in `range`, each reply counted once; the files that
/// cannot be read are named on stderr. Progress is shown from `progress_from` files on.
pub fn store_usage(
    store: &StoreArgs,
    range: TimeRange,
    progress_from: usize,
) -> Result<StoreUsage> {
    let paths = store.transcripts()?;
    let bar = Progress::files("reading sessions", paths.len(), progress_from);
    let scan = store.scan_usage(&paths, true, &|done| bar.set(done as u64))?;
    bar.finish();
    for (path, err) in scan.failed.iter().take(FAILED_SHOWN) {
        warn(format_args!("skipped {}: {err}", path.display()));
    }
    if scan.failed.len() > FAILED_SHOWN {
        warn(format_args!(
            "skipped {} more files that could not be read as sessions",
            scan.failed.len() - FAILED_SHOWN
        ));
    }
    // A session in several files (a legacy session and its managed copy) counts once.
    let mut contributions = scan.contributions;
    keep_live_copies(&mut contributions, |s| {
        (&s.contribution.session_id, s.modified_ms(), &s.path)
    });
    let usage = StoreUsage::combine_in(contributions.iter().map(|s| &s.contribution), range);
    store.let_go(contributions);
    Ok(usage)
}

/// A row: its labels (one, or a session's id and project), then the numbers.
fn row(labels: Vec<String>, sum: &UsageSum) -> Vec<String> {
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

fn write_table(out: &mut impl Write, usage: &StoreUsage, by: Option<Grouping>) -> Result<()> {
    let outside = if usage.outside_range > 0 {
        format!(", {} outside the range", thousands(usage.outside_range))
    } else {
        String::new()
    };
    writeln!(
        out,
        "{} sessions, {} usage records counted, {} copies in forks not counted, {} invalid{outside}",
        thousands(usage.sessions as u64),
        thousands(usage.totals.records),
        thousands(usage.copies),
        thousands(usage.skipped)
    )?;
    let labels: &[&str] = match by {
        None => &[""],
        Some(Grouping::Session) => &["SESSION", "PROJECT"],
        Some(Grouping::Day) => &["DAY"],
        Some(Grouping::Week) => &["WEEK"],
        Some(Grouping::Month) => &["MONTH"],
        Some(Grouping::Project) => &["PROJECT"],
        Some(Grouping::Model) => &["MODEL"],
    };
    let mut header: Vec<String> = labels.iter().map(|&l| l.to_owned()).collect();
    header.extend(
        [
            "RECORDS",
            "INPUT",
            "OUTPUT",
            "CACHE READ",
            "CACHE WRITE",
            "PREMIUM",
            "COST",
        ]
        .map(str::to_owned),
    );
    let mut rows = vec![header];
    if let Some(by) = by {
        // Projects are the sessions' cwds, models what the replies named.
        rows.extend(usage.groups(by).iter().map(|(key, sum)| {
            let mut cells = vec![terminal_safe(key).into_owned()];
            if by == Grouping::Session {
                let cwd = usage.session_cwds.get(key).map_or("", String::as_str);
                cells.push(terminal_safe(cwd).into_owned());
            }
            row(cells, sum)
        }));
    }
    let mut total = vec!["total".to_owned()];
    total.resize(labels.len(), String::new());
    rows.push(row(total, &usage.totals));
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    writeln!(out)?;
    let bold = style::stdout_colored();
    for (i, r) in rows.iter().enumerate() {
        let mut line = String::new();
        for (c, (cell, w)) in r.iter().zip(&widths).enumerate() {
            if c > 0 {
                line.push_str("  ");
            }
            // Labels to the left, numbers to the right.
            if c < labels.len() {
                line.push_str(&format!("{cell:<w$}"));
            } else {
                line.push_str(&format!("{cell:>w$}"));
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
