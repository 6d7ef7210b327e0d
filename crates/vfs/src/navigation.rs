//! `by-date/` and `recent/`: the sessions by the day they were started and newest first,
//! as symlink trees into `sessions/`, named so that a person finds a conversation again:
//!
//! ```text
//! by-date/2026-03-14/09-41 fix the flaky parser test (0194f1a2)  → ../../sessions/<id>
//! recent/001 fix the flaky parser test (0194f1a2)                → ../sessions/<id>
//! ```
//!
//! A name is the time (`HH-MM`, UTC, from the header's timestamp) or the rank (newest
//! first by the transcript's mtime, at most [`RECENT_MAX`]), the session's title (else its
//! first message; its first line, as every surface shows it) made safe as a file name, and
//! the first 8 characters of its id, which keep names distinct.
//!
//! Both trees are made from the whole listing at once, and made anew only when the listing
//! changed (`Sessions::navigation`), not for each link looked up.

use std::collections::BTreeMap;

use gjcfs_engine::views::title_line;

use super::slots::Listed;

/// How many sessions `recent/` shows.
pub const RECENT_MAX: usize = 100;
/// How many characters of a title a name keeps.
const TITLE_CHARS: usize = 60;

/// A title as part of a file name: its first line as every surface shows it
/// ([`title_line`]: terminal escape sequences and control characters dropped), no `/`, runs
/// of blanks made one space, at most [`TITLE_CHARS`] characters.
fn slug(title: &str) -> String {
    let cleaned: String = title_line(Some(title), None, usize::MAX)
        .chars()
        .map(|c| if c == '/' || c.is_control() { ' ' } else { c })
        .collect();
    let words: Vec<&str> = cleaned.split_whitespace().collect();
    let joined = words.join(" ");
    let mut out: String = joined.chars().take(TITLE_CHARS).collect();
    if joined.chars().count() > TITLE_CHARS {
        out.push('…');
    }
    out
}

/// `<prefix> <title> (<id8>)`, or `<prefix> (<id8>)` without a title.
fn name(prefix: &str, listed: &Listed, sid: &str) -> String {
    let short: String = sid.chars().take(8).collect();
    let title = slug(&listed.title);
    if title.is_empty() {
        format!("{prefix} ({short})")
    } else {
        format!("{prefix} {title} ({short})")
    }
}

/// The day (`YYYY-MM-DD`) and time (`HH-MM`) a session was started, from its header's
/// ISO timestamp.
fn started(listed: &Listed) -> Option<(String, String)> {
    let created = &listed.created;
    let day = created.get(..10)?;
    let time = created.get(11..16)?.replace(':', "-");
    let valid = day.bytes().enumerate().all(|(i, b)| {
        if i == 4 || i == 7 {
            b == b'-'
        } else {
            b.is_ascii_digit()
        }
    });
    valid.then(|| (day.to_owned(), time))
}

/// `by-date/` and `recent/` of one listing, made once for it: a lookup or a listing of
/// either reads them, never the whole listing again.
#[derive(Debug, Default)]
pub(super) struct Navigation {
    /// Day → (name → session id) ([`by_date`]).
    pub by_date: BTreeMap<String, BTreeMap<String, String>>,
    /// Name → session id ([`recent`]).
    pub recent: BTreeMap<String, String>,
}

impl Navigation {
    pub(super) fn of<'a>(listing: impl Iterator<Item = (&'a String, &'a Listed)> + Clone) -> Self {
        Navigation {
            by_date: by_date(listing.clone()),
            recent: recent(listing),
        }
    }
}

/// Day → (name → session id), for every session with a readable start time.
pub(super) fn by_date<'a>(
    listing: impl Iterator<Item = (&'a String, &'a Listed)>,
) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut days: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (sid, listed) in listing {
        if let Some((day, time)) = started(listed) {
            days.entry(day)
                .or_default()
                .insert(name(&time, listed, sid), sid.clone());
        }
    }
    days
}

/// Name → session id of the newest [`RECENT_MAX`] sessions, ranked `001` newest.
pub(super) fn recent<'a>(
    listing: impl Iterator<Item = (&'a String, &'a Listed)>,
) -> BTreeMap<String, String> {
    let mut all: Vec<(&String, &Listed)> = listing.collect();
    all.sort_by(|(a_id, a), (b_id, b)| b.modified_ms.cmp(&a.modified_ms).then(a_id.cmp(b_id)));
    all.into_iter()
        .take(RECENT_MAX)
        .enumerate()
        .map(|(rank, (sid, listed))| (name(&format!("{:03}", rank + 1), listed, sid), sid.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(title: &str, created: &str, modified_ms: i64) -> Listed {
        Listed {
            path: Default::default(),
            cwd: "/w".into(),
            modified_ms,
            seen: None,
            title: title.into(),
            created: created.into(),
        }
    }

    #[test]
    fn names_are_safe_distinct_and_ordered() {
        let a = (
            "0194f1a2-aaaa".to_owned(),
            listed("fix a/b\nparser", "2026-03-14T09:41:07.000Z", 5),
        );
        let b = (
            "0194f1a3-bbbb".to_owned(),
            listed("", "2026-03-14T09:41:59.000Z", 9),
        );
        let c = ("0194f1a4-cccc".to_owned(), listed("x", "not a date", 1));
        let listing = [a.clone(), b.clone(), c.clone()];
        let days = by_date(listing.iter().map(|(s, l)| (s, l)));
        let names: Vec<(&String, &String)> = days["2026-03-14"].iter().collect();
        assert_eq!(
            names,
            [
                (&"09-41 (0194f1a3)".to_owned(), &b.0),
                // The first line, made safe.
                (&"09-41 fix a b (0194f1a2)".to_owned(), &a.0)
            ]
        );
        assert_eq!(days.len(), 1, "a session without a date is in no day");
        let recent = recent(listing.iter().map(|(s, l)| (s, l)));
        let ranked: Vec<&String> = recent.keys().collect();
        assert_eq!(
            ranked,
            [
                "001 (0194f1a3)",
                "002 fix a b (0194f1a2)",
                "003 x (0194f1a4)"
            ]
        );
        let long = slug(&"word ".repeat(40));
        assert_eq!(long.chars().count(), TITLE_CHARS + 1);
    }
}
