//! Timestamps as JavaScript's `Date` reads and writes them.
//!
//! - Written: `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC, milliseconds), as `Date.prototype.toISOString`.
//! - Read: the ECMAScript date-time string format — `YYYY`, `YYYY-MM`, `YYYY-MM-DD`, each
//!   optionally followed by `THH:mm`, `:ss`, `.sss` (any number of fraction digits, the first
//!   three used) and `Z` or `±HH:mm`; `±YYYYYY` extended years. A date-time without an offset
//!   is read as UTC (JavaScript would use the local zone; session files always carry `Z`).
//!   Anything else is `None` (JavaScript's NaN).
//! - Read as `new Date(value).getTime()` ([`date_millis`], [`parse_date`]): besides that
//!   format, the spellings other writers of these files produce and Bun's `Date` accepts —
//!   a space or a lower-case `t` between date and time, a lower-case `z`, an offset written
//!   `±HHMM`, `Date.prototype.toUTCString` (`Thu, 01 Jan 2026 00:00:00 GMT`) and
//!   `Date.prototype.toString` (`Thu Jan 01 2026 00:00:00 GMT+0000 (…)`); a number is a
//!   time value (truncated), `null` is 0, a boolean 0 or 1. Bun's other guesses (`2026/01/01`,
//!   `Jan 1 2026`, `2026-1-1`, a day past the month's end rolled over) are `None`.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::json::Value;

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    days_from_civil(
        if m == 12 { y + 1 } else { y },
        if m == 12 { 1 } else { m + 1 },
        1,
    ) - days_from_civil(y, m, 1)
}

/// The ISO 8601 week of a day count since 1970-01-01, as `YYYY-Www`: weeks start on
/// Monday, and week 1 is the week holding the year's first Thursday (so 2021-01-01 is in
/// `2020-W53`, 2024-12-30 in `2025-W01`).
pub fn iso_week_of_day(day: i64) -> String {
    // 1970-01-01 was a Thursday; 0 is Monday.
    let weekday = (day + 3).rem_euclid(7);
    let thursday = day - weekday + 3;
    let (year, _, _) = civil_from_days(thursday);
    let week = (thursday - days_from_civil(year, 1, 1)) / 7 + 1;
    format!("{year:04}-W{week:02}")
}

/// The month of a day count since 1970-01-01, as `YYYY-MM`.
pub fn month_of_day(day: i64) -> String {
    let (year, month, _) = civil_from_days(day);
    format!("{year:04}-{month:02}")
}

/// Milliseconds since the epoch of an ISO timestamp, or `None` where JavaScript gives NaN.
pub fn parse_iso_millis(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let mut p = 0;
    let num = |p: &mut usize, len: usize| -> Option<i64> {
        let digits = b.get(*p..*p + len)?;
        if !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        *p += len;
        std::str::from_utf8(digits).ok()?.parse().ok()
    };
    let year = match b.first()? {
        sign @ (b'+' | b'-') => {
            p = 1;
            let y = num(&mut p, 6)?;
            if *sign == b'-' {
                if y == 0 {
                    return None;
                }
                -y
            } else {
                y
            }
        }
        _ => num(&mut p, 4)?,
    };
    let (mut month, mut day) = (1, 1);
    if b.get(p) == Some(&b'-') {
        p += 1;
        month = num(&mut p, 2)?;
        if b.get(p) == Some(&b'-') {
            p += 1;
            day = num(&mut p, 2)?;
        }
    }
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    let (mut h, mut mi, mut sec, mut ms) = (0, 0, 0, 0);
    let mut offset_min = 0;
    if b.get(p) == Some(&b'T') {
        p += 1;
        h = num(&mut p, 2)?;
        if b.get(p) != Some(&b':') {
            return None;
        }
        p += 1;
        mi = num(&mut p, 2)?;
        if b.get(p) == Some(&b':') {
            p += 1;
            sec = num(&mut p, 2)?;
            if b.get(p) == Some(&b'.') {
                p += 1;
                let start = p;
                while b.get(p).is_some_and(u8::is_ascii_digit) {
                    p += 1;
                }
                if p == start {
                    return None;
                }
                let frac = &s[start..p.min(start + 3)];
                ms = format!("{frac:0<3}").parse().ok()?;
            }
        }
        match b.get(p) {
            Some(b'Z') => p += 1,
            Some(sign @ (b'+' | b'-')) => {
                let sign = if *sign == b'-' { -1 } else { 1 };
                p += 1;
                let oh = num(&mut p, 2)?;
                if b.get(p) != Some(&b':') {
                    return None;
                }
                p += 1;
                let om = num(&mut p, 2)?;
                if oh > 23 || om > 59 {
                    return None;
                }
                offset_min = sign * (oh * 60 + om);
            }
            _ => {}
        }
        let valid = (h < 24 && mi < 60 && sec < 60) || (h == 24 && mi == 0 && sec == 0 && ms == 0);
        if !valid {
            return None;
        }
    }
    if p != b.len() {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let millis = (((days * 24 + h) * 60 + mi - offset_min) * 60 + sec) * 1000 + ms;
    // JavaScript dates span ±8.64e15 ms.
    (millis.abs() <= 8_640_000_000_000_000).then_some(millis)
}

/// JavaScript's largest time value, in milliseconds either side of the epoch.
const MAX_TIME: f64 = 8.64e15;

/// `new Date(value).getTime()`, `None` for NaN (see the module documentation).
pub fn date_millis(value: &Value) -> Option<i64> {
    match value {
        Value::Null => Some(0),
        Value::Bool(b) => Some(i64::from(*b)),
        Value::Number(n) => {
            let t = n.as_f64();
            (t.is_finite() && t.abs() <= MAX_TIME).then(|| t.trunc() as i64)
        }
        Value::String(s) => parse_date(&s.to_string_lossy()),
        Value::Array(_) | Value::Object(_) | Value::Raw(_) => None,
    }
}

/// A date string as `Date` reads the spellings named in the module documentation.
pub fn parse_date(s: &str) -> Option<i64> {
    parse_iso_millis(s)
        .or_else(|| parse_iso_millis(&normalized_iso(s)?))
        .or_else(|| parse_date_words(s))
}

/// An ISO-like date-time with a space or `t` separator, a `z`, or a `±HHMM` offset, in the
/// strict form; `None` when there is nothing to change.
fn normalized_iso(s: &str) -> Option<String> {
    let mut text: Vec<u8> = s.as_bytes().to_vec();
    if text.len() < 16 || !matches!(text[10], b' ' | b't' | b'T') {
        return None;
    }
    text[10] = b'T';
    if text.last() == Some(&b'z') {
        *text.last_mut()? = b'Z';
    }
    let n = text.len();
    let compact_offset =
        n > 5 && matches!(text[n - 5], b'+' | b'-') && text[n - 4..].iter().all(u8::is_ascii_digit);
    if compact_offset {
        text.insert(n - 2, b':');
    }
    let changed = text.as_slice() != s.as_bytes();
    changed.then(|| String::from_utf8(text).ok()).flatten()
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

/// `Thu, 01 Jan 2026 00:00:00 GMT` or `Thu Jan 01 2026 00:00:00 GMT+0000 (zone name)`.
fn parse_date_words(s: &str) -> Option<i64> {
    let s = match s.find(" (") {
        Some(at) if s.ends_with(')') => &s[..at],
        _ => s,
    };
    let words: Vec<&str> = s.split_whitespace().collect();
    let month_of = |w: &str| {
        MONTHS
            .iter()
            .position(|m| w.eq_ignore_ascii_case(m))
            .map(|i| i + 1)
    };
    let (day, month, year, time, zone) = match words.as_slice() {
        [_, day, month, year, time, zone] if month_of(month).is_some() => {
            (*day, month_of(month)?, *year, *time, *zone)
        }
        [_, month, day, year, time, zone] => (*day, month_of(month)?, *year, *time, *zone),
        _ => return None,
    };
    let offset = match zone
        .strip_prefix("GMT")
        .or_else(|| zone.strip_prefix("UTC"))?
    {
        "" => "Z".to_owned(),
        off if off.len() == 5 => format!("{}:{}", &off[..3], &off[3..]),
        _ => return None,
    };
    let day: u32 = day.parse().ok()?;
    if year.len() != 4 || time.len() != 8 {
        return None;
    }
    parse_iso_millis(&format!("{year}-{month:02}-{day:02}T{time}{offset}"))
}

/// `Date.prototype.toISOString` of a millisecond timestamp.
pub fn format_iso_millis(millis: i64) -> String {
    let days = millis.div_euclid(86_400_000);
    let rem = millis.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    let (h, mi, s, ms) = (
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000,
    );
    let year = if (0..=9999).contains(&y) {
        format!("{y:04}")
    } else if y < 0 {
        format!("-{:06}", -y)
    } else {
        format!("+{y:06}")
    };
    format!("{year}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z")
}

/// Milliseconds since the epoch, now.
pub fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The current time as an ISO timestamp.
pub fn now_iso() -> String {
    format_iso_millis(now_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_iso_forms_javascript_accepts() {
        assert_eq!(parse_iso_millis("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(
            parse_iso_millis("2025-01-01T00:00:01Z"),
            Some(1_735_689_601_000)
        );
        assert_eq!(
            parse_iso_millis("2025-11-20T23:33:01.550Z"),
            Some(1_763_681_581_550)
        );
        assert_eq!(parse_iso_millis("2025-01-01"), Some(1_735_689_600_000));
        assert_eq!(
            parse_iso_millis("2025-01-01T01:00+01:00"),
            Some(1_735_689_600_000)
        );
        assert_eq!(
            parse_iso_millis("2025-01-01T00:00:00.1234Z"),
            Some(1_735_689_600_123)
        );
        assert_eq!(
            parse_iso_millis("2024-02-29T00:00:00Z"),
            Some(1_709_164_800_000)
        );
    }

    #[test]
    fn rejects_what_javascript_reads_as_nan() {
        for bad in [
            "",
            "nope",
            "2025-13-01",
            "2025-02-30",
            "2025-01-01T25:00Z",
            "2025-01-01T00:00:00.Z",
            "2025-01-01 x",
        ] {
            assert_eq!(parse_iso_millis(bad), None, "{bad}");
        }
    }

    #[test]
    fn reads_dates_as_new_date_reads_them() {
        let jan1 = Some(1_767_225_600_000);
        for spelling in [
            "2026-01-01T00:00:00.000Z",
            "2026-01-01 00:00:00Z",
            "2026-01-01t00:00:00z",
            "2026-01-01T00:00:00+0000",
            "2026-01-01T01:00:00+0100",
            "Thu, 01 Jan 2026 00:00:00 GMT",
            "Thu Jan 01 2026 00:00:00 GMT+0000 (Coordinated Universal Time)",
            "Thu Jan 01 2026 01:00:00 GMT+0100",
        ] {
            assert_eq!(parse_date(spelling), jan1, "{spelling}");
        }
        for nan in [
            "2026/01/01",
            "Jan 1 2026",
            "",
            "1767225600000",
            "Thu, 01 Foo 2026 00:00:00 GMT",
        ] {
            assert_eq!(parse_date(nan), None, "{nan}");
        }
        let value = |text: &str| crate::json::parse(text).unwrap();
        assert_eq!(date_millis(&value("1767225600000")), jan1);
        assert_eq!(date_millis(&value("1.9")), Some(1));
        assert_eq!(date_millis(&value("-1.9")), Some(-1));
        assert_eq!(date_millis(&value("null")), Some(0));
        assert_eq!(date_millis(&value("true")), Some(1));
        assert_eq!(date_millis(&value("9e15")), None);
        assert_eq!(date_millis(&value("[1]")), None);
    }

    #[test]
    fn formats_like_to_iso_string() {
        assert_eq!(format_iso_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            format_iso_millis(1_763_681_581_550),
            "2025-11-20T23:33:01.550Z"
        );
        assert_eq!(format_iso_millis(-1), "1969-12-31T23:59:59.999Z");
        for ms in [0, 951_782_400_123, 4_102_444_800_000, -62_135_596_800_000] {
            assert_eq!(parse_iso_millis(&format_iso_millis(ms)), Some(ms));
        }
    }

    #[test]
    fn names_iso_weeks_and_months() {
        let day = |s: &str| parse_iso_millis(s).unwrap().div_euclid(86_400_000);
        for (date, week) in [
            ("2021-01-01", "2020-W53"),
            ("2021-01-04", "2021-W01"),
            ("2024-12-29", "2024-W52"),
            ("2024-12-30", "2025-W01"),
            ("2026-12-02", "2026-W49"),
            ("1970-01-01", "1970-W01"),
            ("1969-12-28", "1969-W52"),
        ] {
            assert_eq!(iso_week_of_day(day(date)), week, "{date}");
        }
        assert_eq!(month_of_day(day("2026-02-28")), "2026-02");
        assert_eq!(month_of_day(day("1969-12-31")), "1969-12");
    }
}
