//! `--since DATE` and `--until DATE`, the one time range of `search` and `usage`.

use anyhow::Result;
use gjcfs_engine::format::time::parse_iso_millis;
use gjcfs_engine::store::usage::TimeRange;

use super::output::BadQuery;

/// The time range flags, parsed by clap: a date that cannot be read is a usage error.
#[derive(clap::Args, Clone, Default)]
pub struct TimeRangeArgs {
    /// Only from this date or time on: YYYY-MM-DD or YYYYMMDD (the start of that day in
    /// UTC), an ISO timestamp, today, yesterday (the start of the day, UTC), or Nd (N days
    /// before now, e.g. 7d).
    #[arg(long, value_name = "DATE", value_parser = parse_time)]
    pub since: Option<Moment>,
    /// Only before this date or time (as --since: YYYY-MM-DD and YYYYMMDD are the start of
    /// that day, UTC; also today, yesterday, Nd).
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

/// A day in milliseconds.
const DAY_MS: i64 = 86_400_000;

/// Reads YYYY-MM-DD or YYYYMMDD (midnight UTC), an ISO timestamp, `today` or `yesterday`
/// (midnight UTC), or `Nd` (N days before now).
pub fn parse_time(text: &str) -> Result<Moment, String> {
    parse_time_at(text, now_ms())
}

/// [`parse_time`] with `now` (milliseconds since the epoch) as the current time.
fn parse_time_at(text: &str, now: i64) -> Result<Moment, String> {
    let midnight = now - now.rem_euclid(DAY_MS);
    let compact = |t: &str| {
        (t.len() == 8 && t.bytes().all(|b| b.is_ascii_digit()))
            .then(|| format!("{}-{}-{}", &t[..4], &t[4..6], &t[6..]))
    };
    let days_back = |t: &str| {
        t.strip_suffix('d')?
            .parse::<u32>()
            .ok()
            .filter(|&n| n > 0)
            .map(|n| now - i64::from(n) * DAY_MS)
    };
    let ms = match text {
        "today" => Some(midnight),
        "yesterday" => Some(midnight - DAY_MS),
        _ => parse_iso_millis(text)
            .or_else(|| {
                let day = compact(text).unwrap_or_else(|| text.to_owned());
                parse_iso_millis(&format!("{day}T00:00:00.000Z"))
            })
            .or_else(|| days_back(text)),
    };
    ms.map(|ms| Moment {
        text: text.to_owned(),
        ms,
    })
    .ok_or_else(|| {
        format!(
            "invalid date {text:?}: expected YYYY-MM-DD, YYYYMMDD, an ISO timestamp, today, \
             yesterday or Nd (N days ago)"
        )
    })
}

/// The current time in milliseconds since the epoch.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
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
        assert!(parse_time("someday").unwrap_err().contains("YYYY-MM-DD"));
        assert_eq!(parse_time("20260102").unwrap().ms, 1_767_312_000_000);
        // 2026-01-02T13:00:00Z as now.
        let now = 1_767_312_000_000 + 13 * 3_600_000;
        assert_eq!(parse_time_at("today", now).unwrap().ms, 1_767_312_000_000);
        assert_eq!(
            parse_time_at("yesterday", now).unwrap().ms,
            1_767_225_600_000
        );
        assert_eq!(parse_time_at("7d", now).unwrap().ms, now - 7 * DAY_MS);
        for bad in ["0d", "-1d", "d", "7days", "2026010", "202601021"] {
            assert!(parse_time_at(bad, now).is_err(), "{bad}");
        }
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
