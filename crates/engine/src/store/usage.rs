//! Usage statistics over a whole session store, each reply counted once across forks.
//!
//! A fork or branched copy repeats its parent's entries with their ids: `fork`/`forkFrom`
//! write the parent's session id into the new header's `parentSession`,
//! `createBranchedSession` the parent's transcript path (legacy headers: `branchedFrom`).
//! Summing every session's own statistics would count the copied replies again, so the
//! store is summed from per-session [`SessionUsageContribution`]s — built once per session,
//! cheap to keep and to combine again — by [`StoreUsage::combine`].
//!
//! Invariants:
//! - A session's parent reference is its header's `parentSession`, else its legacy
//!   `branchedFrom`. It resolves to a session id: the reference itself when a session of the
//!   store has that id, else the id in its file name (`<timestamp>_<id>.jsonl`: the part
//!   after the last `/` and the last `_`, without `.jsonl`).
//! - The lineage root of a session is found by following parents through the store's
//!   sessions: the first session without a parent, or the resolved id of a parent the store
//!   does not hold (so two forks of a deleted session share a root). In a cycle of parents,
//!   the root is the smallest id on the cycle.
//! - Every usage record the engine's statistics count in a session ([`Session::counted_usage`])
//!   has the identity (lineage root, entry id, entry timestamp). Files older than v2 have no
//!   ids (the migration draws random ones at every load), so their records are identified
//!   by (lineage root, entry timestamp) alone. Ids are only 8 hex digits, so the same id in
//!   unrelated sessions is expected; the lineage root keeps them apart.
//! - Sessions are visited oldest first (header timestamp, then session id, then the order
//!   given). A record counts in the first session that holds its identity; the same identity
//!   in a later session is a copy, counted in [`StoreUsage::copies`] only. A record repeated
//!   within one session counts each time, as the session's own statistics count it.
//! - A record's time is its entry's timestamp, else its message's `timestamp` (epoch
//!   milliseconds) when the entry's is unparsable, else none. A [`TimeRange`] keeps the
//!   records whose time is in `[since, until)`; a record without a time is in no bounded
//!   range. Copies share their original's time, so a range keeps or drops both.
//! - Groups (every record counted falls in exactly one group of each grouping, so each
//!   grouping's sums add up to the totals): session — the id of the session the record
//!   counts in (its `cwd` beside it); day — the date (`YYYY-MM-DD`) of its time in the
//!   report's zone ([`Report::utc_offset_ms`]; UTC unless given); week — the ISO 8601 week
//!   of that date (`YYYY-Www`, weeks from Monday); month — `YYYY-MM`; a record without a
//!   time is in the `unknown` day, week and month; project — the header `cwd` of the
//!   session it counts in; model — [`usage_model`](crate::session::usage::usage_model).
//! - With a breakdown ([`Report::models`]), every group but a model's also sums its records
//!   by model ([`StoreUsage::models`]): a group's models add up to the group, and the
//!   totals' models are the groups by model.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use crate::format::migrate::Migration;
use crate::format::time::{format_iso_millis, iso_week_of_day, month_of_day, parse_iso_millis};
use crate::json::{Object, Value};
use crate::read::load::{load_session, LoadError, LoadedSession};
use crate::session::tree::Session;
use crate::session::usage::{UsageSum, UsageTotals};

mod scan;
pub use scan::{
    scan_sessions, scan_sessions_cached, Scanned, StoreScan, UsageCache, SAVED_USAGE_FILE,
};

const DAY_MS: i64 = 86_400_000;

/// What one session adds to the store's usage: its lineage and every usage record its
/// statistics count.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionUsageContribution {
    /// The header's session id (empty when it has none).
    pub session_id: String,
    /// The header's `parentSession` (else legacy `branchedFrom`), as written.
    pub parent: Option<String>,
    /// The header's timestamp.
    pub created: String,
    /// The header's `cwd`.
    pub cwd: String,
    /// How many message entries the session holds (on every branch).
    pub messages: usize,
    /// Whether entry ids come from the file (false for files older than v2).
    pub stable_ids: bool,
    /// Every usage record the session's statistics count, in file order.
    pub records: Vec<ContributedUsage>,
    /// How many usage records were invalid and not counted.
    pub skipped: usize,
}

/// One counted usage record of a session.
#[derive(Debug, Clone, PartialEq)]
pub struct ContributedUsage {
    /// The 8-hex-digit id of the entry carrying the record (empty when it has none; drawn
    /// anew at every load for files older than v2, see
    /// [`SessionUsageContribution::stable_ids`]).
    pub entry_id: String,
    /// The entry's ISO timestamp as stored.
    pub timestamp: String,
    /// The record's time in milliseconds since the epoch, if it has one.
    pub time_ms: Option<i64>,
    /// The model the record is attributed to
    /// ([`usage_model`](crate::session::usage::usage_model)).
    pub model: String,
    /// The record's token counts, premium requests and cost.
    pub amounts: UsageTotals,
}

impl SessionUsageContribution {
    /// The contribution of a loaded session; `migration` says whether it was a v1 file.
    pub fn from_session(session: &Session, migration: Migration) -> Self {
        let header = session.header();
        let (stats, counted) = session.counted_usage();
        let records = counted
            .into_iter()
            .map(|c| {
                let record = session.record(c.index);
                let timestamp = record.timestamp().unwrap_or_default();
                let time_ms = parse_iso_millis(timestamp).or_else(|| {
                    let ms = record.message()?.get("timestamp")?.as_f64()?;
                    ms.is_finite().then_some(ms as i64)
                });
                ContributedUsage {
                    entry_id: record.id().unwrap_or_default().to_owned(),
                    timestamp: timestamp.to_owned(),
                    time_ms,
                    model: c.model,
                    amounts: c.amounts,
                }
            })
            .collect();
        let parent = header
            .parent_session()
            .or_else(|| header.0.get_str("branchedFrom"));
        SessionUsageContribution {
            session_id: header.id().unwrap_or_default().to_owned(),
            parent: parent.map(str::to_owned),
            created: header.timestamp().unwrap_or_default().to_owned(),
            cwd: header.cwd().unwrap_or_default().to_owned(),
            messages: session
                .records()
                .iter()
                .filter(|r| r.record_type() == crate::format::record::RecordType::Message)
                .count(),
            stable_ids: !matches!(migration, Migration::Migrated { from } if from < 2.0),
            records,
            skipped: stats.skipped.len(),
        }
    }

    /// Every usage record of the session summed: what the session itself records, copies
    /// of a parent's replies included (what `gjcfs ls` shows per session).
    pub fn own_usage(&self) -> UsageSum {
        let mut sum = UsageSum::default();
        for record in &self.records {
            sum.add(&record.amounts);
        }
        sum
    }

    /// The contribution of a loaded session ([`SessionUsageContribution::from_session`] with
    /// the migration it was loaded with).
    pub fn from_loaded(loaded: &LoadedSession) -> Self {
        Self::from_session(&loaded.session, loaded.migration)
    }

    /// Loads a session file and returns its contribution.
    pub fn from_file(path: &Path) -> Result<Self, LoadError> {
        load_session(path).map(|loaded| Self::from_loaded(&loaded))
    }
}

/// How store usage is grouped (see the module invariants).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Grouping {
    /// By the id of the session a record counts in.
    Session,
    /// By the date of a record's time in the report's zone, `YYYY-MM-DD`.
    Day,
    /// By the ISO 8601 week of that date, `YYYY-Www`.
    Week,
    /// By the month of that date, `YYYY-MM`.
    Month,
    /// By the header `cwd` of the session a record counts in.
    Project,
    /// By the model a record is attributed to.
    Model,
}

impl Grouping {
    /// Every grouping, in the order `usage.json` writes them.
    pub const ALL: [Grouping; 6] = [
        Grouping::Session,
        Grouping::Day,
        Grouping::Week,
        Grouping::Month,
        Grouping::Project,
        Grouping::Model,
    ];

    /// The member of [`StoreUsage::to_value`] holding the groups.
    pub fn json_key(self) -> &'static str {
        match self {
            Grouping::Session => "bySession",
            Grouping::Day => "byDay",
            Grouping::Week => "byWeek",
            Grouping::Month => "byMonth",
            Grouping::Project => "byProject",
            Grouping::Model => "byModel",
        }
    }
}

/// The records a report counts, by their time: `[since, until)`, either end open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimeRange {
    /// Milliseconds since the epoch, inclusive.
    pub since_ms: Option<i64>,
    /// Milliseconds since the epoch, exclusive.
    pub until_ms: Option<i64>,
}

impl TimeRange {
    /// Every record, with or without a time.
    pub const ALL: TimeRange = TimeRange {
        since_ms: None,
        until_ms: None,
    };

    fn is_bounded(&self) -> bool {
        self.since_ms.is_some() || self.until_ms.is_some()
    }

    /// Whether a record of this time is counted.
    pub fn contains(&self, time_ms: Option<i64>) -> bool {
        match time_ms {
            None => !self.is_bounded(),
            Some(t) => {
                self.since_ms.is_none_or(|since| t >= since)
                    && self.until_ms.is_none_or(|until| t < until)
            }
        }
    }
}

/// How [`StoreUsage::report`] counts and groups the records.
#[derive(Clone, Copy)]
pub struct Report<'a> {
    /// The records counted, by their time.
    pub range: TimeRange,
    /// The offset from UTC, in milliseconds, of the zone whose days, weeks and months group
    /// the records, in force at an instant (milliseconds since the epoch).
    pub utc_offset_ms: &'a dyn Fn(i64) -> i64,
    /// Whether every group's records are also summed by model ([`StoreUsage::models`]).
    pub models: bool,
}

/// UTC's offset at every instant.
fn no_offset(_: i64) -> i64 {
    0
}

impl Report<'_> {
    /// Every record, by UTC days, without a breakdown.
    pub const ALL: Report<'static> = Report {
        range: TimeRange::ALL,
        utc_offset_ms: &no_offset,
        models: false,
    };
}

/// Sums by model name.
pub type ModelSums = BTreeMap<String, UsageSum>;

/// The models of `models` by cost, the dearest first (then by name): the order of a
/// breakdown.
pub fn models_by_cost(models: &ModelSums) -> Vec<(&str, &UsageSum)> {
    let mut sorted: Vec<(&str, &UsageSum)> = models.iter().map(|(m, s)| (m.as_str(), s)).collect();
    sorted.sort_by(|a, b| {
        b.1.totals
            .cost
            .total_cmp(&a.1.totals.cost)
            .then(a.0.cmp(b.0))
    });
    sorted
}

/// Usage summed over a store, copies across fork lineages counted once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StoreUsage {
    /// How many contributions (session files) were combined.
    pub sessions: usize,
    /// Every record counted (in the range, copies left out), summed.
    pub totals: UsageSum,
    /// Records not counted because an older session of the lineage holds them.
    pub copies: u64,
    /// Invalid usage records, summed over the sessions' own statistics.
    pub skipped: u64,
    /// Records left out because their time is outside the report's [`TimeRange`].
    pub outside_range: u64,
    /// The counted records by the id of the session they count in.
    pub by_session: BTreeMap<String, UsageSum>,
    /// The counted records by date (`YYYY-MM-DD`, `unknown` without a time).
    pub by_day: BTreeMap<String, UsageSum>,
    /// The counted records by ISO 8601 week (`YYYY-Www`, `unknown` without a time).
    pub by_week: BTreeMap<String, UsageSum>,
    /// The counted records by month (`YYYY-MM`, `unknown` without a time).
    pub by_month: BTreeMap<String, UsageSum>,
    /// The counted records by the header `cwd` of the session they count in.
    pub by_project: BTreeMap<String, UsageSum>,
    /// The counted records by the model they are attributed to.
    pub by_model: BTreeMap<String, UsageSum>,
    /// The `cwd` of each session of [`StoreUsage::by_session`].
    pub session_cwds: BTreeMap<String, String>,
    /// With a breakdown ([`Report::models`]): each group's records by model, for every
    /// grouping but by model (keyed as [`StoreUsage::groups`]); `None` without.
    pub models: Option<HashMap<Grouping, BTreeMap<String, ModelSums>>>,
}

impl StoreUsage {
    /// Combines the contributions of the store's sessions (see the module invariants).
    pub fn combine<'a>(
        contributions: impl IntoIterator<Item = &'a SessionUsageContribution>,
    ) -> Self {
        Self::report(contributions, &Report::ALL)
    }

    /// As [`StoreUsage::combine`], counting only the records in the report's range and
    /// grouping them by the days of its zone, with a breakdown by model if it asks for one.
    pub fn report<'a>(
        contributions: impl IntoIterator<Item = &'a SessionUsageContribution>,
        report: &Report<'_>,
    ) -> Self {
        let all: Vec<&SessionUsageContribution> = contributions.into_iter().collect();
        let lineage = Lineage::new(&all);
        let mut order: Vec<usize> = (0..all.len()).collect();
        order.sort_by(|&a, &b| {
            (all[a].created.as_str(), all[a].session_id.as_str(), a).cmp(&(
                all[b].created.as_str(),
                all[b].session_id.as_str(),
                b,
            ))
        });
        let mut usage = StoreUsage {
            sessions: all.len(),
            models: report.models.then(HashMap::new),
            ..StoreUsage::default()
        };
        // By the day number of the zone's date (days since 1970-01-01).
        let mut by_day: BTreeMap<Option<i64>, Partial> = BTreeMap::new();
        let record_count = all.iter().map(|c| c.records.len()).sum();
        let mut owners: HashMap<(&str, &str, &str), usize> = HashMap::with_capacity(record_count);
        for &i in &order {
            let c = all[i];
            usage.skipped += c.skipped as u64;
            let root = lineage.root(i);
            let mut counted = Partial::default();
            for r in &c.records {
                if !report.range.contains(r.time_ms) {
                    usage.outside_range += 1;
                    continue;
                }
                let id = if c.stable_ids {
                    r.entry_id.as_str()
                } else {
                    ""
                };
                let owner = *owners.entry((root, id, r.timestamp.as_str())).or_insert(i);
                if owner != i {
                    usage.copies += 1;
                    continue;
                }
                usage.totals.add(&r.amounts);
                counted.add(r, report.models);
                let day = r
                    .time_ms
                    .map(|ms| (ms + (report.utc_offset_ms)(ms)).div_euclid(DAY_MS));
                by_day.entry(day).or_default().add(r, report.models);
                match usage.by_model.get_mut(&r.model) {
                    Some(sum) => sum.add(&r.amounts),
                    None => {
                        let mut sum = UsageSum::default();
                        sum.add(&r.amounts);
                        usage.by_model.insert(r.model.clone(), sum);
                    }
                }
            }
            if counted.sum.records > 0 {
                usage.merge_group(Grouping::Project, &c.cwd, &counted);
                usage.merge_group(Grouping::Session, &c.session_id, &counted);
                usage
                    .session_cwds
                    .entry(c.session_id.clone())
                    .or_insert_with(|| c.cwd.clone());
            }
        }
        for (day, group) in by_day {
            let keys = match day {
                None => ["unknown", "unknown", "unknown"].map(str::to_owned),
                Some(d) => [
                    format_iso_millis(d * DAY_MS)[..10].to_owned(),
                    iso_week_of_day(d),
                    month_of_day(d),
                ],
            };
            for (by, key) in [Grouping::Day, Grouping::Week, Grouping::Month]
                .iter()
                .zip(keys)
            {
                usage.merge_group(*by, &key, &group);
            }
        }
        usage
    }

    /// Adds a group's records to the group `key` of `by`, and its models to the group's.
    fn merge_group(&mut self, by: Grouping, key: &str, group: &Partial) {
        let groups = match by {
            Grouping::Session => &mut self.by_session,
            Grouping::Day => &mut self.by_day,
            Grouping::Week => &mut self.by_week,
            Grouping::Month => &mut self.by_month,
            Grouping::Project => &mut self.by_project,
            Grouping::Model => &mut self.by_model,
        };
        merge_into(groups, key, &group.sum);
        if let Some(models) = &mut self.models {
            let groups = models.entry(by).or_default();
            if !groups.contains_key(key) {
                groups.insert(key.to_owned(), ModelSums::new());
            }
            let sums = groups.get_mut(key).expect("inserted above");
            for (model, sum) in &group.models {
                merge_into(sums, model, sum);
            }
        }
    }

    /// The groups of a grouping, by key ([`StoreUsage::by_session`] and its siblings).
    pub fn groups(&self, by: Grouping) -> &BTreeMap<String, UsageSum> {
        match by {
            Grouping::Session => &self.by_session,
            Grouping::Day => &self.by_day,
            Grouping::Week => &self.by_week,
            Grouping::Month => &self.by_month,
            Grouping::Project => &self.by_project,
            Grouping::Model => &self.by_model,
        }
    }

    /// With a breakdown, the records of the group `key` of `by` by model (`None` without
    /// one, and for the groups by model); with `by` `None`, those of the totals.
    pub fn models(&self, by: Option<Grouping>, key: &str) -> Option<&ModelSums> {
        let models = self.models.as_ref()?;
        match by {
            None => Some(&self.by_model),
            Some(by) => models.get(&by)?.get(key),
        }
    }

    /// How many sessions have records counted: those of [`StoreUsage::by_session`].
    pub fn sessions_counted(&self) -> usize {
        self.by_session.len()
    }

    /// The first and the last date (`YYYY-MM-DD`) with records counted, `None` without any.
    pub fn dates(&self) -> Option<(&str, &str)> {
        let mut dated = self
            .by_day
            .keys()
            .map(String::as_str)
            .filter(|&day| day != "unknown");
        let first = dated.next()?;
        Some((first, dated.next_back().unwrap_or(first)))
    }

    /// `{"sessions", "records", "copies", "skipped", "outsideRange", "totals": {…}}`, and
    /// with a grouping its groups ([`Grouping::json_key`]: key → totals and `records`, keys
    /// in byte order; a session's group also has its `cwd`). Totals are written as
    /// [`UsageSum::to_value`] writes them. With a breakdown, the totals and every group but
    /// a model's have `models`: `[{"model", totals…, "records"}]`, by [`models_by_cost`].
    pub fn to_value(&self, by: Option<Grouping>) -> Value {
        self.to_value_grouped(by.as_slice())
    }

    /// As [`StoreUsage::to_value`], with the groups of every grouping of `by`, in that order.
    pub fn to_value_grouped(&self, by: &[Grouping]) -> Value {
        let mut o = Object::with_capacity(6 + by.len());
        o.insert("sessions", Value::number(self.sessions as f64));
        o.insert("records", Value::number(self.totals.records as f64));
        o.insert("copies", Value::number(self.copies as f64));
        o.insert("skipped", Value::number(self.skipped as f64));
        o.insert("outsideRange", Value::number(self.outside_range as f64));
        o.insert("totals", self.group_value(None, "", &self.totals));
        for &by in by {
            // The keys of a map, so distinct: 100,000 sessions are not each looked up
            // among the ones before.
            let g = Object::from_distinct(self.groups(by).iter().map(|(key, sum)| {
                let mut value = self.group_value(Some(by), key, sum);
                if let (Grouping::Session, Value::Object(members)) = (by, &mut value) {
                    let cwd = self.session_cwds.get(key).map_or("", String::as_str);
                    members.insert("cwd", Value::string(cwd));
                }
                (key.as_str().into(), value)
            }));
            o.insert(by.json_key(), Value::Object(g));
        }
        Value::Object(o)
    }

    /// A group's sum (the totals' with `by` `None`), with its models under a breakdown.
    fn group_value(&self, by: Option<Grouping>, key: &str, sum: &UsageSum) -> Value {
        let mut value = sum.to_value();
        if let (Some(models), Value::Object(members)) = (self.models(by, key), &mut value) {
            let models = models_by_cost(models).into_iter().map(|(model, sum)| {
                let Value::Object(totals) = sum.to_value() else {
                    unreachable!("a sum is an object")
                };
                let model = ("model".into(), Value::string(model));
                let members = totals.iter().map(|(k, v)| (k.clone(), v.clone()));
                Value::Object(Object::from_distinct(std::iter::once(model).chain(members)))
            });
            members.insert("models", Value::Array(models.collect()));
        }
        value
    }
}

/// The records of a group as they are counted: their sum and, with a breakdown, their sums
/// by model.
#[derive(Default)]
struct Partial<'a> {
    sum: UsageSum,
    models: BTreeMap<&'a str, UsageSum>,
}

impl<'a> Partial<'a> {
    /// Adds a record, to its model's sum too when `models`.
    fn add(&mut self, record: &'a ContributedUsage, models: bool) {
        self.sum.add(&record.amounts);
        if models {
            self.models
                .entry(record.model.as_str())
                .or_default()
                .add(&record.amounts);
        }
    }
}

/// Adds `sum` to the group `key`.
fn merge_into(groups: &mut BTreeMap<String, UsageSum>, key: &str, sum: &UsageSum) {
    match groups.get_mut(key) {
        Some(group) => group.merge(sum),
        None => {
            groups.insert(key.to_owned(), *sum);
        }
    }
}

/// Lineage roots of the contributions being combined.
struct Lineage<'a> {
    all: &'a [&'a SessionUsageContribution],
    by_id: HashMap<&'a str, usize>,
}

impl<'a> Lineage<'a> {
    fn new(all: &'a [&'a SessionUsageContribution]) -> Self {
        let mut by_id = HashMap::with_capacity(all.len());
        for (i, c) in all.iter().enumerate() {
            by_id.entry(c.session_id.as_str()).or_insert(i);
        }
        Lineage { all, by_id }
    }

    /// The session id a parent reference names.
    fn resolve(&self, reference: &'a str) -> &'a str {
        if self.by_id.contains_key(reference) {
            return reference;
        }
        let name = reference.rsplit('/').next().unwrap_or(reference);
        let stem = name.strip_suffix(".jsonl").unwrap_or(name);
        stem.rsplit('_').next().unwrap_or(stem)
    }

    /// The lineage root of contribution `i`.
    fn root(&self, i: usize) -> &'a str {
        let mut seen: Vec<&'a str> = vec![self.all[i].session_id.as_str()];
        let mut at = i;
        while let Some(reference) = self.all[at].parent.as_deref() {
            let parent = self.resolve(reference);
            let Some(&next) = self.by_id.get(parent) else {
                return parent;
            };
            if let Some(pos) = seen.iter().position(|&s| s == parent) {
                return seen[pos..].iter().copied().min().unwrap_or(parent);
            }
            seen.push(parent);
            at = next;
        }
        seen[seen.len() - 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The groups of `by`: each key with its record count.
    fn keys(usage: &StoreUsage, by: Grouping) -> Vec<(String, u64)> {
        usage
            .groups(by)
            .iter()
            .map(|(k, v)| (k.clone(), v.records))
            .collect()
    }

    fn owned(pairs: &[(&str, u64)]) -> Vec<(String, u64)> {
        pairs.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect()
    }
    use crate::json;

    fn contribution(
        id: &str,
        parent: Option<&str>,
        records: &[(&str, &str)],
    ) -> SessionUsageContribution {
        SessionUsageContribution {
            session_id: id.to_owned(),
            parent: parent.map(str::to_owned),
            created: format!("2026-01-01T00:00:00.000Z {id}"),
            cwd: format!("/work/{id}"),
            messages: records.len(),
            stable_ids: true,
            records: records
                .iter()
                .map(|(entry_id, timestamp)| ContributedUsage {
                    entry_id: (*entry_id).to_owned(),
                    timestamp: (*timestamp).to_owned(),
                    time_ms: parse_iso_millis(timestamp),
                    model: "m".to_owned(),
                    amounts: UsageTotals {
                        input: 1.0,
                        ..UsageTotals::default()
                    },
                })
                .collect(),
            skipped: 0,
        }
    }

    #[test]
    fn lineage_roots_follow_ids_paths_and_missing_parents() {
        let all = [
            contribution("p", None, &[]),
            contribution("f", Some("p"), &[]),
            contribution(
                "g",
                Some("/home/u/.gjc/agent/sessions/x/2026-01-01T00-00-00-000Z_f.jsonl"),
                &[],
            ),
            contribution("x1", Some("gone"), &[]),
            contribution(
                "x2",
                Some("/elsewhere/2025-01-01T00-00-00-000Z_gone.jsonl"),
                &[],
            ),
            contribution("c1", Some("c2"), &[]),
            contribution("c2", Some("c1"), &[]),
            contribution("c3", Some("c2"), &[]),
        ];
        let refs: Vec<&SessionUsageContribution> = all.iter().collect();
        let lineage = Lineage::new(&refs);
        let roots: Vec<&str> = (0..all.len()).map(|i| lineage.root(i)).collect();
        assert_eq!(roots, ["p", "p", "p", "gone", "gone", "c1", "c1", "c1"]);
    }

    #[test]
    fn copies_count_once_in_the_oldest_session_of_a_lineage() {
        let ts = "2026-01-01T10:00:00.000Z";
        let mut parent = contribution("p", None, &[("aaaa0001", ts), ("aaaa0002", ts)]);
        parent.created = "2026-01-01T09:00:00.000Z".to_owned();
        // The fork is listed first but is newer: the parent still owns the copied records.
        let mut fork = contribution(
            "f",
            Some("p"),
            &[("aaaa0001", ts), ("aaaa0002", ts), ("aaaa0003", ts)],
        );
        fork.created = "2026-01-02T09:00:00.000Z".to_owned();
        // An unrelated session that happens to reuse an id and a timestamp.
        let unrelated = contribution("u", None, &[("aaaa0001", ts)]);
        // A record repeated within one session counts each time.
        let repeated = contribution("r", None, &[("bbbb0001", ts), ("bbbb0001", ts)]);
        let usage = StoreUsage::combine([&fork, &parent, &unrelated, &repeated]);
        assert_eq!(usage.sessions, 4);
        assert_eq!(usage.totals.records, 6);
        assert_eq!(usage.copies, 2);
        assert_eq!(usage.totals.totals.input, 6.0);
        let projects: Vec<(&str, u64)> = usage
            .by_project
            .iter()
            .map(|(k, v)| (k.as_str(), v.records))
            .collect();
        assert_eq!(
            projects,
            [
                ("/work/f", 1),
                ("/work/p", 2),
                ("/work/r", 2),
                ("/work/u", 1)
            ]
        );
        assert_eq!(usage.by_day.keys().collect::<Vec<_>>(), ["2026-01-01"]);
    }

    #[test]
    fn files_without_ids_are_matched_by_timestamp() {
        let ts = "2026-01-01T10:00:00.000Z";
        let mut original = contribution("v1", None, &[("1111aaaa", ts)]);
        let mut copy = contribution("v1-copy", Some("v1"), &[("2222bbbb", ts)]);
        original.stable_ids = false;
        copy.stable_ids = false;
        let usage = StoreUsage::combine([&original, &copy]);
        assert_eq!((usage.totals.records, usage.copies), (1, 1));
        let no_day = contribution("d", None, &[("x", "not a date")]);
        assert_eq!(
            StoreUsage::combine([&no_day])
                .by_day
                .keys()
                .collect::<Vec<_>>(),
            ["unknown"]
        );
    }

    #[test]
    fn groups_by_session_week_and_month_and_keeps_a_time_range() {
        let mut parent = contribution(
            "p",
            None,
            &[
                ("a1", "2026-01-31T23:59:59.999Z"),
                ("a2", "2026-02-01T00:00:00.000Z"),
            ],
        );
        parent.created = "2026-01-31T00:00:00.000Z".to_owned();
        // A fork of p repeats a2 and adds a3; s2 is unrelated and has a record without time.
        let mut fork = contribution(
            "f",
            Some("p"),
            &[
                ("a2", "2026-02-01T00:00:00.000Z"),
                ("a3", "2026-02-09T12:00:00.000Z"),
            ],
        );
        fork.created = "2026-02-02T00:00:00.000Z".to_owned();
        let other = contribution(
            "s2",
            None,
            &[("b1", "2025-12-29T08:00:00.000Z"), ("b2", "?")],
        );
        let all = [&parent, &fork, &other];
        let usage = StoreUsage::combine(all);
        assert_eq!((usage.totals.records, usage.copies), (5, 1));
        assert_eq!(
            keys(&usage, Grouping::Session),
            owned(&[("f", 1), ("p", 2), ("s2", 2)])
        );
        assert_eq!(usage.session_cwds["f"], "/work/f");
        // 2025-12-29 opens 2026-W01; 2026-01-31 is a Saturday of W05, 02-01 its Sunday.
        assert_eq!(
            keys(&usage, Grouping::Week),
            owned(&[
                ("2026-W01", 1),
                ("2026-W05", 2),
                ("2026-W07", 1),
                ("unknown", 1)
            ])
        );
        assert_eq!(
            keys(&usage, Grouping::Month),
            owned(&[
                ("2025-12", 1),
                ("2026-01", 1),
                ("2026-02", 2),
                ("unknown", 1)
            ])
        );
        for by in Grouping::ALL {
            let sum: u64 = usage.groups(by).values().map(|g| g.records).sum();
            assert_eq!(sum, usage.totals.records, "{by:?}");
        }
        // February only: a2 once (its copy in the fork is a copy), a3; the rest outside.
        let range = TimeRange {
            since_ms: parse_iso_millis("2026-02-01"),
            until_ms: parse_iso_millis("2026-03-01"),
        };
        let february = StoreUsage::report(
            all,
            &Report {
                range,
                ..Report::ALL
            },
        );
        assert_eq!(
            (
                february.totals.records,
                february.copies,
                february.outside_range
            ),
            (2, 1, 3)
        );
        assert_eq!(february.totals.totals.input, 2.0);
        assert_eq!(
            keys(&february, Grouping::Session),
            owned(&[("f", 1), ("p", 1)])
        );
        let value = february.to_value(Some(Grouping::Session));
        assert_eq!(
            json::to_compact(&value),
            "{\"sessions\":3,\"records\":2,\"copies\":1,\"skipped\":0,\"outsideRange\":3,\
             \"totals\":{\"input\":2,\"output\":0,\"cacheRead\":0,\"cacheWrite\":0,\
             \"premiumRequests\":0,\"cost\":0,\"records\":2},\"bySession\":{\"f\":{\"input\":1,\
             \"output\":0,\"cacheRead\":0,\"cacheWrite\":0,\"premiumRequests\":0,\"cost\":0,\
             \"records\":1,\"cwd\":\"/work/f\"},\"p\":{\"input\":1,\"output\":0,\"cacheRead\":0,\
             \"cacheWrite\":0,\"premiumRequests\":0,\"cost\":0,\"records\":1,\"cwd\":\"/work/p\"}}}"
        );
    }

    #[test]
    fn days_are_the_zones_and_a_breakdown_sums_each_group_by_model() {
        // Sunday 2026-05-31 23:30 UTC closes week 22 and May; a2 is the next day in UTC.
        let mut s = contribution(
            "s",
            None,
            &[
                ("a1", "2026-05-31T23:30:00.000Z"),
                ("a2", "2026-06-01T00:30:00.000Z"),
                ("a3", "2026-06-01T12:00:00.000Z"),
            ],
        );
        s.records[1].model = "n".to_owned();
        s.records[1].amounts.cost = 5.0;
        s.records[2].amounts.cost = 1.0;
        let utc = StoreUsage::combine([&s]);
        assert_eq!(
            keys(&utc, Grouping::Day),
            owned(&[("2026-05-31", 1), ("2026-06-01", 2)])
        );
        assert_eq!(utc.models(None, ""), None, "no breakdown asked for");
        // Two hours ahead of UTC (Berlin in summer), 23:30 is 01:30 on Monday, June 1st.
        let ahead = |_: i64| 2 * 3_600_000;
        let zoned = |offset: &dyn Fn(i64) -> i64| {
            StoreUsage::report(
                [&s],
                &Report {
                    utc_offset_ms: offset,
                    models: true,
                    ..Report::ALL
                },
            )
        };
        let berlin = zoned(&ahead);
        assert_eq!(keys(&berlin, Grouping::Day), owned(&[("2026-06-01", 3)]));
        assert_eq!(keys(&berlin, Grouping::Week), owned(&[("2026-W23", 3)]));
        assert_eq!(keys(&berlin, Grouping::Month), owned(&[("2026-06", 3)]));
        // An hour behind, 00:30 is still Sunday; the offset is the one at each instant.
        let behind = |ms: i64| {
            if ms < s.records[2].time_ms.unwrap() {
                -3_600_000
            } else {
                0
            }
        };
        let west = zoned(&behind);
        assert_eq!(
            keys(&west, Grouping::Week),
            owned(&[("2026-W22", 2), ("2026-W23", 1)])
        );
        assert_eq!(
            keys(&west, Grouping::Month),
            owned(&[("2026-05", 2), ("2026-06", 1)])
        );

        // Each group's models add up to the group; the totals' are the groups by model.
        for usage in [&berlin, &west] {
            for by in Grouping::ALL {
                for (key, sum) in usage.groups(by) {
                    let Some(models) = usage.models(Some(by), key) else {
                        assert_eq!(by, Grouping::Model);
                        continue;
                    };
                    let mut added = UsageSum::default();
                    models.values().for_each(|m| added.merge(m));
                    assert_eq!(&added, sum, "{by:?} {key}");
                }
            }
            assert_eq!(usage.models(None, ""), Some(&usage.by_model));
        }
        let day = berlin.models(Some(Grouping::Day), "2026-06-01").unwrap();
        let order: Vec<(&str, u64)> = models_by_cost(day)
            .iter()
            .map(|(m, s)| (*m, s.records))
            .collect();
        assert_eq!(order, [("n", 1), ("m", 2)], "the dearest first");
        let value = json::to_compact(&berlin.to_value(Some(Grouping::Month)));
        let m = "\"input\":2,\"output\":0,\"cacheRead\":0,\"cacheWrite\":0,\"premiumRequests\":0,\
                 \"cost\":1,\"records\":2}";
        let n = "\"input\":1,\"output\":0,\"cacheRead\":0,\"cacheWrite\":0,\"premiumRequests\":0,\
                 \"cost\":5,\"records\":1}";
        let models = format!("\"models\":[{{\"model\":\"n\",{n},{{\"model\":\"m\",{m}]");
        assert!(
            value.contains("\"totals\":{\"input\":3,") && value.contains(&models),
            "{value}"
        );
        assert_eq!(
            value.matches(&models).count(),
            2,
            "the totals and June: {value}"
        );
        assert!(!json::to_compact(&utc.to_value(Some(Grouping::Day))).contains("models"));
        assert_eq!(utc.dates(), Some(("2026-05-31", "2026-06-01")));
        assert_eq!(berlin.dates(), Some(("2026-06-01", "2026-06-01")));
        assert_eq!(berlin.sessions_counted(), 1);
        let undated = contribution("u", None, &[("x", "?")]);
        assert_eq!(StoreUsage::combine([&undated]).dates(), None);
    }
}
