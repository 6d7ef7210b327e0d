//! `gjcfs usage [--by GROUP] [--since DATE] [--until DATE] [--timezone ZONE] [--breakdown]
//! [--json]`: token usage and cost over the store.

use std::collections::HashMap;
use std::io::{BufWriter, Write};

use anyhow::Result;
use clap::{Args, ValueEnum};
use gjcfs_engine::json::{self, Object, Value};
use gjcfs_engine::store::discovery::{keep_live_copies, SessionInfo};
use gjcfs_engine::store::usage::{Grouping, Report, StoreUsage};
use gjcfs_engine::views::title_line;

use super::ls::{store_listing, TITLE_WIDTH};
use super::output::{left_to_exit, title_cell, warn};
use super::progress::Progress;
use super::range::TimeRangeArgs;
use super::store::StoreArgs;
use super::zone::{parse_zone, Zone};

mod table;

/// How many unreadable files are named one by one before the rest are only counted.
const FAILED_SHOWN: usize = 5;
/// Progress is shown for stores of at least this many files.
const PROGRESS_FROM: usize = 500;

/// `--since` and `--until` as `usage` reads them: in --timezone.
const SINCE_HELP: &str = "Only from this date or time on: YYYY-MM-DD or YYYYMMDD (the start of \
    that day in --timezone), an ISO timestamp (in --timezone without an offset), today, \
    yesterday (the start of the day), or Nd (N days before now, e.g. 7d)";
const UNTIL_HELP: &str = "Only before this date or time (as --since: YYYY-MM-DD and YYYYMMDD \
    are the start of that day in --timezone; also today, yesterday, Nd)";

#[derive(Args)]
#[command(mut_arg("since", |a| a.help(SINCE_HELP)), mut_arg("until", |a| a.help(UNTIL_HELP)))]
pub struct UsageArgs {
    /// Group the totals: by the session a reply counts in (its oldest copy, shown with its
    /// project and title), by the day, ISO week (YYYY-Www, from Monday) or month of each
    /// reply in --timezone, by project (the session's working directory), or by model.
    #[arg(long, value_enum, value_name = "GROUP")]
    by: Option<By>,
    /// Only replies in this range (--since from, --until before).
    #[command(flatten)]
    range: TimeRangeArgs,
    /// The time zone of the days, weeks and months, and of the dates of --since and
    /// --until: an IANA name (Europe/Berlin) or UTC [default: the machine's own: TZ, else
    /// the system's setting; UTC without either].
    #[arg(long, value_name = "ZONE", value_parser = parse_zone)]
    timezone: Option<Zone>,
    /// Under each row, a row per model with its tokens and cost, the dearest first.
    #[arg(long)]
    breakdown: bool,
    /// Print JSON: {"timezone","sessionsInRange","firstDay","lastDay","sessions","records",
    /// "copies","skipped","outsideRange","totals"} and the groups ("bySession" with each
    /// session's "cwd" and "title", "byDay", "byWeek", "byMonth", "byProject" or
    /// "byModel"); with --breakdown, the totals and each group have "models".
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
    let zone = args.timezone.unwrap_or_else(Zone::local);
    let offset = |ms| zone.offset_ms(ms);
    let report = Report {
        range: args.range.range_in(zone.tz())?,
        utc_offset_ms: &offset,
        models: args.breakdown,
    };
    let usage = store_usage(&args.store, &report, PROGRESS_FROM)?;
    let titles = match by {
        Some(Grouping::Session) => Titles::of_store(&args.store)?,
        _ => Titles::default(),
    };
    let mut out = BufWriter::new(std::io::stdout().lock());
    if args.json {
        let value = report_value(&usage, by, &zone, &titles);
        writeln!(out, "{}", json::to_pretty(&value))?;
    } else {
        table::write(&mut out, &usage, by, &zone, &titles)?;
    }
    out.flush()?;
    left_to_exit((usage, titles));
    Ok(())
}

/// The usage of the whole store as `report` counts it, each reply counted once; the files
/// that cannot be read are named on stderr. Progress is shown from `progress_from` files on.
pub fn store_usage(
    store: &StoreArgs,
    report: &Report<'_>,
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
    let usage = StoreUsage::report(contributions.iter().map(|s| &s.contribution), report);
    store.let_go(contributions);
    Ok(usage)
}

/// The titles of the store's sessions by id, as `gjcfs ls` shows them.
#[derive(Default)]
struct Titles(HashMap<String, SessionInfo>);

impl Titles {
    /// Those of every session of the store ([`store_listing`]).
    fn of_store(store: &StoreArgs) -> Result<Titles> {
        let listing = store_listing(store)?;
        Ok(Titles(
            listing.into_iter().map(|i| (i.id.clone(), i)).collect(),
        ))
    }

    /// The title of session `id` in a table: as `gjcfs ls` shows it, `(untitled)` without
    /// one.
    fn cell(&self, id: &str) -> String {
        let info = self.0.get(id);
        title_cell(
            info.and_then(|i| i.title.as_deref()),
            info.and_then(SessionInfo::first_prompt),
            TITLE_WIDTH,
        )
    }

    /// The title of session `id` by the rule of every listing, if it has one.
    fn line(&self, id: &str) -> Option<String> {
        let info = self.0.get(id)?;
        let line = title_line(info.title.as_deref(), info.first_prompt(), usize::MAX);
        (!line.is_empty()).then_some(line)
    }
}

/// The report as `--json` prints it: the zone, the sessions and dates in the range, then the
/// engine's members ([`StoreUsage::to_value`]), each session's group with its title.
fn report_value(usage: &StoreUsage, by: Option<Grouping>, zone: &Zone, titles: &Titles) -> Value {
    let Value::Object(mut engine) = usage.to_value(by) else {
        unreachable!("the usage is an object")
    };
    let dates = usage.dates();
    let day = |d: Option<&str>| d.map_or(Value::Null, Value::string);
    let ours = [
        ("timezone", Value::string(zone.name())),
        (
            "sessionsInRange",
            Value::number(usage.sessions_counted() as f64),
        ),
        ("firstDay", day(dates.map(|d| d.0))),
        ("lastDay", day(dates.map(|d| d.1))),
    ];
    let mut o = Object::from_distinct(ours.into_iter().map(|(k, v)| (k.into(), v)));
    // The engine's members moved after ours, in their order (a few: no copy of the groups).
    let keys: Vec<String> = engine
        .keys()
        .map(|k| k.to_string_lossy().into_owned())
        .collect();
    for key in keys {
        if let Some(value) = engine.remove(&key) {
            o.insert(&key, value);
        }
    }
    if by == Some(Grouping::Session) {
        gjcfs_engine::views::usage::add_session_titles(&mut o, &|id| titles.line(id));
    }
    Value::Object(o)
}
