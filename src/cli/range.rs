//! `--since DATE` and `--until DATE`, the one time range of `search` and `usage`.

use anyhow::Result;
use gjcfs_engine::format::time::parse_iso_millis;
use gjcfs_engine::store::usage::TimeRange;

use super::output::BadQuery;

/// The time range flags, parsed by clap: a date that cannot be read is a usage error.
#[derive(clap::Args, Clone, Default)]
pub struct TimeRangeArgs {
    /// Only from this date or time on (YYYY-MM-DD, the start of that day in UTC, or an ISO
    /// timestamp).
    #[arg(long, value_name = "DATE", value_parser = parse_time)]
    pub since: Option<Moment>,
    /// Only before this date or time (YYYY-MM-DD is the start of that day, UTC).
    #[arg(long, value_name = "DATE", value_parser = parse_time)]
    pub until: Option<Moment>,
}

/// A date or time given on the command line, as written and in milliseconds since the
/// epoch.
#[derive(Clone, Debug)]
pub struct Moment {
    text: String,
    ms: i64,
}

/// Reads YYYY-MM-DD (midnight UTC) or an ISO timestamp.
pub fn parse_time(text: &str) -> Result<Moment, String> {
    parse_iso_millis(text)
        .or_else(|| parse_iso_millis(&format!("{text}T00:00:00.000Z")))
        .map(|ms| Moment {
            text: text.to_owned(),
            ms,
        })
        .ok_or_else(|| format!("invalid date {text:?}: expected YYYY-MM-DD or an ISO timestamp"))
}

impl TimeRangeArgs {
    /// The range, refused (as a query that cannot be answered, exit status 2) when it is
    /// empty.
    pub fn range(&self) -> Result<TimeRange> {
        if let (Some(since), Some(until)) = (&self.since, &self.until) {
            if since.ms >= until.ms {
                return Err(BadQuery(format!(
                    "--since {} is not before --until {}: nothing can be in that range",
                    since.text, until.text
                ))
                .into());
            }
        }
        Ok(TimeRange {
            since_ms: self.since.as_ref().map(|m| m.ms),
            until_ms: self.until.as_ref().map(|m| m.ms),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_dates_and_timestamps_and_refuses_an_empty_range() {
        assert_eq!(parse_time("2026-01-02").unwrap().ms, 1_767_312_000_000);
        assert_eq!(
            parse_time("2026-01-02T01:00:00Z").unwrap().ms,
            1_767_315_600_000
        );
        assert!(parse_time("yesterday").unwrap_err().contains("YYYY-MM-DD"));
        let args = |since: &str, until: &str| TimeRangeArgs {
            since: Some(parse_time(since).unwrap()),
            until: Some(parse_time(until).unwrap()),
        };
        let range = args("2026-01-01", "2026-02-01").range().unwrap();
        assert!(range.contains(Some(1_767_312_000_000)));
        assert!(!range.contains(range.until_ms));
        assert!(!range.contains(None));
        let err = args("2026-02-01", "2026-02-01").range().unwrap_err();
        assert!(super::super::output::is_bad_query(&err));
        assert!(TimeRangeArgs::default().range().unwrap().contains(None));
    }
}
