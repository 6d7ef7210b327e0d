//! `usage.svg`: the store's cost and tokens per day, as two bar charts one above the other,
//! from [`StoreUsage::by_day`](crate::store::usage::StoreUsage) (each reply counted
//! once across forks).
//!
//! Format (invariants):
//! - One `<svg>` (no script, no style sheet, nothing external): a title line with the
//!   range of days and the totals, then the cost chart and the tokens chart (input, output
//!   and cache tokens). Each has one bar per UTC day from the first day with usage to the
//!   last, days without usage included (as no bar), and its largest value written at its
//!   top; the first and last days are written under the charts.
//! - Every bar has a `<title>` (a tooltip): `YYYY-MM-DD: $cost, N tokens, R replies`.
//! - Usage without a day (`unknown`) is left out of the bars and said in the title line.
//!   With no usage at all the drawing says so and has no bars.

use std::collections::BTreeMap;
use std::io::{self, Write};

use super::escape::text;
use super::{thousands, token_count as token_text};
use crate::format::time::parse_iso_millis;
use crate::session::usage::UsageSum;

const DAY_MS: i64 = 86_400_000;
/// The drawing's size and the height of each chart, in pixels.
const WIDTH: usize = 900;
const CHART_HEIGHT: f64 = 140.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;

/// The tokens of a sum: input, output and cache.
pub fn tokens(sum: &UsageSum) -> f64 {
    let t = &sum.totals;
    t.input + t.output + t.cache_read + t.cache_write
}

/// A chart: its name, its colour, its top edge, and the value it draws of a day.
type Chart = (&'static str, &'static str, f64, fn(&UsageSum) -> f64);

/// Writes the drawing of `by_day` (keys `YYYY-MM-DD`, or `unknown`).
pub fn write_usage_svg<W: Write + ?Sized>(
    by_day: &BTreeMap<String, UsageSum>,
    out: &mut W,
) -> io::Result<()> {
    let days: Vec<(i64, &UsageSum)> = by_day
        .iter()
        .filter_map(|(day, sum)| Some((parse_iso_millis(day)?.div_euclid(DAY_MS), sum)))
        .collect();
    let unknown = by_day.get("unknown");
    let height = 2.0 * CHART_HEIGHT + 110.0;
    writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"{WIDTH}\" \
         height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" font-family=\"sans-serif\" \
         font-size=\"12\">"
    )?;
    let (Some(&(first, _)), Some(&(last, _))) = (days.first(), days.last()) else {
        writeln!(
            out,
            "<text x=\"10\" y=\"20\">No usage recorded.</text>\n</svg>"
        )?;
        return Ok(());
    };
    let mut total = UsageSum::default();
    for (_, sum) in &days {
        total.merge(sum);
    }
    let day_name = |d: i64| crate::format::time::format_iso_millis(d * DAY_MS)[..10].to_owned();
    let left_out = unknown.map_or(String::new(), |u| {
        format!("; {} replies without a day not drawn", thousands(u.records))
    });
    writeln!(
        out,
        "<text x=\"10\" y=\"18\" font-weight=\"bold\">Cost and tokens per day, {} to {}: ${:.2}, {} tokens, {} replies{}</text>",
        day_name(first),
        day_name(last),
        total.totals.cost,
        token_text(tokens(&total)),
        thousands(total.records),
        text(&left_out)
    )?;
    let span = (last - first + 1) as f64;
    let slot = (WIDTH as f64 - LEFT - RIGHT) / span;
    let bar = (slot * 0.8).clamp(1.0, 40.0);
    let charts: [Chart; 2] = [
        ("cost", "#1d4ed8", 40.0, |s| s.totals.cost),
        ("tokens", "#15803d", 80.0 + CHART_HEIGHT, tokens),
    ];
    for (name, colour, top, value) in charts {
        // A sum that overflowed draws nothing rather than NaN.
        let finite = |v: f64| if v.is_finite() { v } else { 0.0 };
        let max = days
            .iter()
            .map(|(_, s)| finite(value(s)))
            .fold(0.0, f64::max);
        let bottom = top + CHART_HEIGHT;
        let max_text = if name == "cost" {
            format!("${max:.2}")
        } else {
            token_text(max)
        };
        writeln!(
            out,
            "<text x=\"10\" y=\"{}\">{name}</text><text x=\"10\" y=\"{}\">{}</text>\
             <path d=\"M{LEFT} {top} V{bottom} H{}\" fill=\"none\" stroke=\"#999\"/>",
            top + CHART_HEIGHT / 2.0,
            top + 10.0,
            text(&max_text),
            WIDTH as f64 - RIGHT
        )?;
        for &(day, sum) in &days {
            let v = finite(value(sum));
            let h = if max > 0.0 {
                v / max * CHART_HEIGHT
            } else {
                0.0
            };
            let x = LEFT + (day - first) as f64 * slot + (slot - bar) / 2.0;
            writeln!(
                out,
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{bar:.1}\" height=\"{h:.1}\" fill=\"{colour}\">\
                 <title>{}: ${:.4}, {} tokens, {} replies</title></rect>",
                bottom - h,
                day_name(day),
                sum.totals.cost,
                token_text(tokens(sum)),
                thousands(sum.records)
            )?;
        }
    }
    let axis = 80.0 + 2.0 * CHART_HEIGHT + 18.0;
    writeln!(
        out,
        "<text x=\"{LEFT}\" y=\"{axis}\">{}</text>\
         <text x=\"{}\" y=\"{axis}\" text-anchor=\"end\">{}</text>\n</svg>",
        day_name(first),
        WIDTH as f64 - RIGHT,
        day_name(last)
    )
}

/// The drawing as bytes.
pub fn usage_svg(by_day: &BTreeMap<String, UsageSum>) -> Vec<u8> {
    let mut out = Vec::new();
    write_usage_svg(by_day, &mut out).expect("writing to a Vec cannot fail");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::usage::UsageTotals;

    fn sum(records: u64, cost: f64, input: f64) -> UsageSum {
        UsageSum {
            records,
            totals: UsageTotals {
                input,
                cost,
                ..UsageTotals::default()
            },
        }
    }

    #[test]
    fn a_bar_per_day_gaps_included_and_unknown_days_named() {
        let mut by_day = BTreeMap::new();
        by_day.insert("2026-01-01".to_owned(), sum(2, 1.0, 100.0));
        by_day.insert("2026-01-04".to_owned(), sum(1, 3.0, 50.0));
        by_day.insert("unknown".to_owned(), sum(5, 9.0, 1.0));
        let svg = String::from_utf8(usage_svg(&by_day)).unwrap();
        // Two charts, a bar for each day with usage.
        assert_eq!(svg.matches("<rect ").count(), 4);
        assert!(svg.contains("<title>2026-01-04: $3.0000, 50 tokens, 1 replies</title>"));
        assert!(svg.contains("2026-01-01 to 2026-01-04: $4.00, 150 tokens, 3 replies"));
        assert!(svg.contains("5 replies without a day not drawn"));
        // The costliest day is the full height; the other a third of it.
        assert!(svg.contains(&format!("height=\"{CHART_HEIGHT:.1}\" fill=\"#1d4ed8\"")));
        let empty = String::from_utf8(usage_svg(&BTreeMap::new())).unwrap();
        assert!(empty.contains("No usage recorded.") && !empty.contains("<rect"));
    }
}
