//! `gjcfs usage [--by day|project|model] [--json]`: token usage and cost over the store.

use std::io::{BufWriter, IsTerminal, Write};

use anyhow::Result;
use clap::{Args, ValueEnum};
use gjcfs_engine::discovery::keep_live_copies;
use gjcfs_engine::json;
use gjcfs_engine::storage::{FileStorage, SessionStorage};
use gjcfs_engine::store_usage::{scan_sessions, Grouping, StoreUsage};
use gjcfs_engine::usage::UsageSum;
use gjcfs_engine::views::thousands;

use super::output::terminal_safe;
use super::store::StoreArgs;

/// How many unreadable files are named one by one before the rest are only counted.
const FAILED_SHOWN: usize = 5;
/// Progress is shown for stores of at least this many files.
const PROGRESS_FROM: usize = 500;

#[derive(Args)]
pub struct UsageArgs {
    /// Group the totals: by the UTC day of each reply, by project (the session's working
    /// directory), or by model.
    #[arg(long, value_enum, value_name = "GROUP")]
    by: Option<By>,
    /// Print JSON: {"sessions","records","copies","skipped","totals"} and the groups
    /// ("byDay", "byProject" or "byModel").
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Clone, Copy, ValueEnum)]
enum By {
    Day,
    Project,
    Model,
}

pub fn run(args: UsageArgs) -> Result<()> {
    let by = args.by.map(|b| match b {
        By::Day => Grouping::Day,
        By::Project => Grouping::Project,
        By::Model => Grouping::Model,
    });
    let paths = args.store.transcripts()?;
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 8));
    let show_progress = paths.len() >= PROGRESS_FROM && std::io::stderr().is_terminal();
    let total = paths.len();
    let progress = |done: usize| {
        if show_progress && (done.is_multiple_of(100) || done == total) {
            eprint!("\rgjcfs: reading sessions {done}/{total}");
        }
    };
    let scan = scan_sessions(&paths, threads, &progress);
    if show_progress {
        eprint!("\r\x1b[K");
    }
    for (path, err) in scan.failed.iter().take(FAILED_SHOWN) {
        eprintln!("gjcfs: warning: skipped {}: {err}", path.display());
    }
    if scan.failed.len() > FAILED_SHOWN {
        eprintln!(
            "gjcfs: warning: skipped {} more files that could not be read as sessions",
            scan.failed.len() - FAILED_SHOWN
        );
    }
    // A session in several files (a legacy session and its managed copy) counts once.
    let mut contributions: Vec<_> = scan
        .contributions
        .into_iter()
        .map(|(path, c)| {
            let mtime_ms = FileStorage.stat(&path).map_or(0, |s| s.mtime_ms);
            (path, c, mtime_ms)
        })
        .collect();
    keep_live_copies(&mut contributions, |(path, c, ms)| {
        (&c.session_id, *ms, path)
    });
    let usage = StoreUsage::combine(contributions.iter().map(|(_, c, _)| c));
    let mut out = BufWriter::new(std::io::stdout().lock());
    if args.json {
        writeln!(out, "{}", json::to_pretty(&usage.to_value(by)))?;
    } else {
        write_table(&mut out, &usage, by)?;
    }
    out.flush()?;
    Ok(())
}

/// A token count: grouped digits when it is a whole number.
fn count(n: f64) -> String {
    if n.fract() == 0.0 && (0.0..9e15).contains(&n) {
        thousands(n as u64)
    } else {
        format!("{n}")
    }
}

fn row(label: &str, sum: &UsageSum) -> Vec<String> {
    let t = &sum.totals;
    vec![
        label.to_owned(),
        thousands(sum.records),
        count(t.input),
        count(t.output),
        count(t.cache_read),
        count(t.cache_write),
        count(t.premium_requests),
        format!("${:.4}", t.cost),
    ]
}

fn write_table(out: &mut impl Write, usage: &StoreUsage, by: Option<Grouping>) -> Result<()> {
    writeln!(
        out,
        "{} sessions, {} usage records counted, {} copies in forks not counted, {} invalid",
        thousands(usage.sessions as u64),
        thousands(usage.totals.records),
        thousands(usage.copies),
        thousands(usage.skipped)
    )?;
    let first = match by {
        None => "",
        Some(Grouping::Day) => "DAY",
        Some(Grouping::Project) => "PROJECT",
        Some(Grouping::Model) => "MODEL",
    };
    let mut rows = vec![[
        first,
        "RECORDS",
        "INPUT",
        "OUTPUT",
        "CACHE READ",
        "CACHE WRITE",
        "PREMIUM",
        "COST",
    ]
    .map(str::to_owned)
    .to_vec()];
    if let Some(by) = by {
        // Projects are the sessions' cwds, models what the replies named.
        rows.extend(
            usage
                .groups(by)
                .iter()
                .map(|(key, sum)| row(&terminal_safe(key), sum)),
        );
    }
    rows.push(row("total", &usage.totals));
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    writeln!(out)?;
    for r in &rows {
        let mut line = format!("{:<w$}", r[0], w = widths[0]);
        for (cell, w) in r.iter().zip(&widths).skip(1) {
            line.push_str(&format!("  {cell:>w$}"));
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}
