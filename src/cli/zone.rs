//! `--timezone ZONE`: the time zone whose days a report counts in, by IANA name, else the
//! machine's own.

use jiff::tz::TimeZone;
use jiff::Timestamp;

use super::output::warn;

/// A time zone and the name a report shows it under.
#[derive(Clone, Debug)]
pub struct Zone {
    tz: TimeZone,
    name: String,
}

/// Reads `--timezone`: an IANA name (`Europe/Berlin`, `UTC`), looked up in the system's time
/// zone database (the one bundled on Windows). An unknown name is a usage error.
pub fn parse_zone(text: &str) -> Result<Zone, String> {
    let tz = TimeZone::get(text).map_err(|e| {
        format!(
            "unknown time zone {text:?} ({e}): expected an IANA name such as Europe/Berlin, or UTC"
        )
    })?;
    let name = tz.iana_name().unwrap_or(text).to_owned();
    Ok(Zone { tz, name })
}

impl Zone {
    /// UTC.
    pub fn utc() -> Zone {
        Zone {
            tz: TimeZone::UTC,
            name: "UTC".to_owned(),
        }
    }

    /// The machine's zone: the TZ variable, else /etc/localtime (Windows: its own setting);
    /// UTC when neither gives one, with a warning when TZ is set to what is no zone.
    pub fn local() -> Zone {
        let tz_var = std::env::var("TZ").ok().filter(|v| !v.is_empty());
        match TimeZone::try_system() {
            Ok(tz) => {
                // A zone read from a file or given as a POSIX rule has no IANA name.
                let name = tz
                    .iana_name()
                    .map(str::to_owned)
                    .or(tz_var)
                    .unwrap_or_else(|| "local time".to_owned());
                Zone { tz, name }
            }
            Err(_) => {
                if let Some(var) = tz_var {
                    warn(format_args!("TZ={var:?} is not a time zone: UTC is used"));
                }
                Zone::utc()
            }
        }
    }

    /// The zone, for jiff.
    pub fn tz(&self) -> &TimeZone {
        &self.tz
    }

    /// The IANA name (`UTC` for UTC), else the TZ variable the zone came from.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The zone's offset from UTC in milliseconds at `ms` (milliseconds since the epoch);
    /// UTC's (0) outside the years jiff knows (±9999).
    pub fn offset_ms(&self, ms: i64) -> i64 {
        Timestamp::from_millisecond(ms)
            .map_or(0, |t| i64::from(self.tz.to_offset(t).seconds()) * 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_looked_up_and_offsets_follow_summer_time() {
        let berlin = parse_zone("europe/berlin").unwrap();
        assert_eq!(berlin.name(), "Europe/Berlin");
        // 2026-01-15 and 2026-07-15, noon UTC.
        assert_eq!(berlin.offset_ms(1_768_478_400_000), 3_600_000);
        assert_eq!(berlin.offset_ms(1_784_116_800_000), 7_200_000);
        assert_eq!(berlin.offset_ms(i64::MAX), 0);
        assert_eq!(parse_zone("UTC").unwrap().name(), "UTC");
        assert_eq!(Zone::utc().offset_ms(1_784_116_800_000), 0);
        let err = parse_zone("Mars/Olympus_Mons").unwrap_err();
        assert!(
            err.contains("unknown time zone \"Mars/Olympus_Mons\""),
            "{err}"
        );
    }
}
