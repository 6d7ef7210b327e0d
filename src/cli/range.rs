//! `--since DATE` and `--until DATE`, the one time range of `search`, `files` and `usage`.
//! Dates are days of a time zone: UTC, or `usage`'s `--timezone`.

use anyhow::Result;
use gjcfs_engine::format::time::parse_iso_millis;
use gjcfs_engine::store::usage::TimeRange;
use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

use super::output::BadQuery;

/// The time range flags, parsed by clap: a date that cannot be read is a usage error.
#[derive(clap::Args, Clone, Default)]
pub struct TimeRangeArgs {
    /// Only from this date or time on: YYYY-MM-DD or YYYYMMDD (the start of that day in
    /// UTC), an ISO timestamp (UTC without an offset), today, yesterday (the start of the
    /// day, UTC), or Nd (N days before now, e.g. 7d).
    #[arg(long, value_name = "DATE", value_parser = parse_time)]
    pub since: Option<Moment>,
    /// Only before this date or time (as --since: YYYY-MM-DD and YYYYMMDD are the start of
    /// that day, UTC; also today, yesterday, Nd).
    #[arg(long, value_name = "DATE", value_parser = parse_time)]
    pub until: Option<Moment>,
}

/// A date or time given on the command line, as written and what it names.
#[derive(Clone, Debug)]
pub struct Moment {
    text: String,
    when: When,
}

/// What a [`Moment`] names, to be placed in a time zone.
#[derive(Clone, Copy, Debug, PartialEq)]
enum When {
    /// An instant (a timestamp with an offset), in milliseconds since the epoch.
    At(i64),
    /// A time of day in the zone: the milliseconds of that date and time read as UTC.
    Civil(i64),
    /// The start of the day this many days before today (today: 0, yesterday: 1).
    DayStart(u32),
    /// This many days before now: the same time of day, this many dates back.
    DaysBack(u32),
}

/// Reads YYYY-MM-DD or YYYYMMDD (the start of the day), an ISO timestamp, `today` or
/// `yesterday` (the start of the day), or `Nd` (N days before now); where they fall is
/// known once the zone is ([`TimeRangeArgs::range_in`]).
pub fn parse_time(text: &str) -> Result<Moment, String> {
    let compact = (text.len() == 8 && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| format!("{}-{}-{}", &text[..4], &text[4..6], &text[6..]));
    let days_back = || {
        text.strip_suffix('d')?
            .parse::<u32>()
            .ok()
            .filter(|&n| n > 0)
    };
    // An offset (Z or ±HH:MM) can only follow a time.
    let has_offset = text
        .split_once('T')
        .is_some_and(|(_, time)| time.ends_with('Z') || time.contains(['+', '-']));
    let when = match text {
        "today" => Some(When::DayStart(0)),
        "yesterday" => Some(When::DayStart(1)),
        _ => match parse_iso_millis(compact.as_deref().unwrap_or(text)) {
            Some(ms) if has_offset => Some(When::At(ms)),
            Some(ms) => Some(When::Civil(ms)),
            None => days_back().map(When::DaysBack),
        },
    };
    when.map(|when| Moment {
        text: text.to_owned(),
        when,
    })
    .ok_or_else(|| {
        format!(
            "invalid date {text:?}: expected YYYY-MM-DD, YYYYMMDD, an ISO timestamp, today, \
             yesterday or Nd (N days ago)"
        )
    })
}

impl Moment {
    /// The moment in milliseconds since the epoch, its days those of `tz`, `now` being the
    /// current time; `None` past the years jiff knows (±9999).
    fn ms_in(&self, tz: &TimeZone, now: Timestamp) -> Option<i64> {
        let today = || now.to_zoned_datetime(tz.clone());
        let instant = match self.when {
            When::At(ms) => return Some(ms),
            When::Civil(ms) => {
                let time = Timestamp::from_millisecond(ms).ok()?;
                let civil: DateTime = TimeZone::UTC.to_datetime(time);
                tz.to_timestamp(civil).ok()?
            }
            When::DayStart(n) => today()
                .date()
                .checked_sub(i64::from(n).days())
                .ok()?
                .to_zoned_datetime(tz.clone())
                .ok()?
                .timestamp(),
            When::DaysBack(n) => today().checked_sub(i64::from(n).days()).ok()?.timestamp(),
        };
        Some(instant.as_millisecond())
    }
}

impl TimeRangeArgs {
    /// The range, its days UTC's ([`TimeRangeArgs::range_in`]).
    pub fn range(&self) -> Result<TimeRange> {
        self.range_in(&TimeZone::UTC)
    }

    /// The range, its dates the days of `tz`; refused (as a query that cannot be answered,
    /// exit status 2) when it is empty or out of reach.
    pub fn range_in(&self, tz: &TimeZone) -> Result<TimeRange> {
        self.range_at(tz, Timestamp::now())
    }

    /// [`TimeRangeArgs::range_in`] with `now` as the current time.
    fn range_at(&self, tz: &TimeZone, now: Timestamp) -> Result<TimeRange> {
        let ms = |moment: &Option<Moment>| -> Result<Option<i64>> {
            moment
                .as_ref()
                .map(|m| {
                    m.ms_in(tz, now).ok_or_else(|| {
                        BadQuery(format!("{}: out of the years a date can have", m.text))
                    })
                })
                .transpose()
                .map_err(Into::into)
        };
        let (since_ms, until_ms) = (ms(&self.since)?, ms(&self.until)?);
        if let (Some(since), Some(until), Some(s), Some(u)) =
            (since_ms, until_ms, &self.since, &self.until)
        {
            if since >= until {
                return Err(BadQuery(format!(
                    "--since {} is not before --until {}: nothing can be in that range",
                    s.text, u.text
                ))
                .into());
            }
        }
        Ok(TimeRange { since_ms, until_ms })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY_MS: i64 = 86_400_000;

    /// `text` placed in `tz` at `now` (milliseconds since the epoch).
    fn at(text: &str, tz: &TimeZone, now: i64) -> i64 {
        let now = Timestamp::from_millisecond(now).unwrap();
        parse_time(text).unwrap().ms_in(tz, now).unwrap()
    }

    #[test]
    fn reads_dates_and_timestamps_and_refuses_an_empty_range() {
        let utc = &TimeZone::UTC;
        assert_eq!(at("2026-01-02", utc, 0), 1_767_312_000_000);
        assert_eq!(at("2026-01-02T01:00:00Z", utc, 0), 1_767_315_600_000);
        assert!(parse_time("someday").unwrap_err().contains("YYYY-MM-DD"));
        assert_eq!(at("20260102", utc, 0), 1_767_312_000_000);
        // 2026-01-02T13:00:00Z as now.
        let now = 1_767_312_000_000 + 13 * 3_600_000;
        assert_eq!(at("today", utc, now), 1_767_312_000_000);
        assert_eq!(at("yesterday", utc, now), 1_767_225_600_000);
        assert_eq!(at("7d", utc, now), now - 7 * DAY_MS);
        for bad in ["0d", "-1d", "d", "7days", "2026010", "202601021"] {
            assert!(parse_time(bad).is_err(), "{bad}");
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
        let err = args("-100000-01-01", "2026-01-01").range().unwrap_err();
        assert!(err.to_string().contains("out of the years"), "{err}");
    }

    #[test]
    fn dates_are_days_of_the_zone_and_instants_stay_put() {
        let berlin = &TimeZone::get("Europe/Berlin").unwrap();
        let new_york = &TimeZone::get("America/New_York").unwrap();
        // Midnight in Berlin is 23:00 UTC the day before in winter, 22:00 in summer.
        assert_eq!(at("2026-01-02", berlin, 0), 1_767_312_000_000 - 3_600_000);
        assert_eq!(at("20260702", berlin, 0), 1_782_950_400_000 - 7_200_000);
        assert_eq!(
            at("2026-01-02T01:00", berlin, 0),
            1_767_315_600_000 - 3_600_000
        );
        assert_eq!(at("2026-01-02T01:00:00Z", berlin, 0), 1_767_315_600_000);
        assert_eq!(
            at("2026-01-02T01:00+01:00", &TimeZone::UTC, 0),
            1_767_312_000_000
        );
        // At 2026-01-02T02:00Z it is already the 2nd in Berlin, still the 1st in New York.
        let now = 1_767_312_000_000 + 2 * 3_600_000;
        assert_eq!(at("today", berlin, now), 1_767_312_000_000 - 3_600_000);
        assert_eq!(
            at("today", new_york, now),
            1_767_225_600_000 + 5 * 3_600_000
        );
        assert_eq!(at("yesterday", berlin, now), 1_767_225_600_000 - 3_600_000);
        // A week back across the change to summer time (2026-03-29 in Berlin): the same
        // time of day, so 7 days less an hour.
        let after = 1_775_044_800_000; // 2026-04-01T12:00Z, 14:00 in Berlin.
        assert_eq!(at("7d", berlin, after), after - 7 * DAY_MS + 3_600_000);
        assert_eq!(at("7d", &TimeZone::UTC, after), after - 7 * DAY_MS);
    }
}
