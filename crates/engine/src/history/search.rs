//! Prompt search, as the agent's `search(query, limit, cwd?)` runs it.
//!
//! The result is defined by the agent's SQL:
//! 1. the query is tokenized ([`tokenize`]); no tokens, no rows;
//! 2. full-text step: rows whose indexed text has, for every token, a term starting with it
//!    ([`fts_query`]), optionally in `cwd`, ordered `created_at DESC, id DESC`, first `limit`;
//!    an error here is swallowed (no rows);
//! 3. if that filled `limit`, it is the result;
//! 4. substring step: rows whose prompt contains every token (`LIKE`, ASCII
//!    case-insensitive, [`like_pattern`]), optionally in `cwd`, same order, first `limit`;
//! 5. the full-text rows, then the substring rows not among them, at most `limit`.
//!
//! How it is computed. The agent's statements sort every match before taking the first
//! `limit`, and scan the table in `created_at` order through row lookups: on a large
//! history a frequent word or a rare substring takes hundreds of milliseconds. Here each
//! step streams its matches in an order SQLite produces without sorting and keeps the best
//! `limit` (by `created_at DESC, id DESC`), stopping as soon as no unseen match can enter:
//! - the full-text matches, and the substring matches of a whole-table search, stream in
//!   descending id. A second cursor walks the `created_at` index (or the cwd index) from
//!   the top and yields, for the smallest id `X` streamed so far, the largest `created_at`
//!   of any row with id below `X`. Once that bound is no better than the worst row kept (or
//!   there is no such row), the stream stops. In a history whose times grow with ids, that
//!   is as soon as `limit` matches are found; if times are out of order it only stops later.
//!   The two take turns in doubling time slices, so a rare word exhausts its few matches
//!   cheaply while a frequent one stops early;
//! - the substring matches of a cwd-scoped search stream in descending `created_at` through
//!   the cwd index and stop at the first match older than the worst row kept.
//!
//! The rows chosen are exactly those of the agent's statements (the `created_at` order is
//! SQLite's: integers and reals compared as numbers). A history holding `created_at`
//! values that are neither numbers nor NULL, or a missing index, makes the search use the
//! agent's statements as they are.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashSet};
use std::fmt::Write as _;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rusqlite::types::{Value, ValueRef};
use rusqlite::{params_from_iter, Connection, OptionalExtension, Rows};

use super::{entry, HistoryEntry};

/// The first time slice of the stream and of the bound cursor, which take turns with
/// doubling slices (see [`top_by_id_desc`]).
const FIRST_SLICE: Duration = Duration::from_micros(50);

/// Splits a query the way the full-text index splits text: lower-cased, on runs of anything
/// that is not a Unicode letter or number, without empty tokens.
pub fn tokenize(query: &str) -> Vec<String> {
    static SEPARATORS: OnceLock<regex::Regex> = OnceLock::new();
    let separators =
        SEPARATORS.get_or_init(|| regex::Regex::new(r"[^\p{L}\p{N}]+").expect("static regex"));
    separators
        .split(&query.to_lowercase())
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The FTS5 query for tokens: each a quoted phrase with a prefix `*`, implicitly ANDed.
pub fn fts_query(tokens: &[String]) -> String {
    let mut out = String::new();
    for (i, token) in tokens.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let _ = write!(out, "\"{}\"*", token.replace('"', "\"\""));
    }
    out
}

/// A `LIKE` pattern matching `token` anywhere, with `\`, `%` and `_` escaped by `\`.
pub fn like_pattern(token: &str) -> String {
    let mut out = String::with_capacity(token.len() + 2);
    out.push('%');
    for c in token.chars() {
        if matches!(c, '\\' | '%' | '_') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

/// Which way to compute each step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Plan {
    /// Streaming with early stop (falls back to `Reference` where it cannot be used).
    Streaming,
    /// The agent's statements as they are (the tests compare the plans).
    #[cfg(test)]
    Reference,
}

/// The search; `limit` is already clamped and non-zero.
pub(super) fn search(
    conn: &Connection,
    query: &str,
    limit: usize,
    cwd: Option<&str>,
    plan: Plan,
) -> rusqlite::Result<Vec<HistoryEntry>> {
    let tokens = tokenize(query);
    if tokens.is_empty() {
        return Ok(Vec::new());
    }
    // One snapshot for every statement of the search.
    let tx = conn.unchecked_transaction()?;
    let fts = fts_query(&tokens);
    let fts_ids = fts_step(conn, &fts, limit, cwd, plan).unwrap_or_default();
    let ids = if fts_ids.len() >= limit {
        fts_ids
    } else {
        let substring_ids = substring_step(conn, &tokens, limit, cwd, plan)?;
        if fts_ids.is_empty() {
            substring_ids
        } else {
            let mut seen = HashSet::new();
            let mut merged: Vec<i64> = fts_ids.into_iter().filter(|id| seen.insert(*id)).collect();
            for id in substring_ids {
                if merged.len() >= limit {
                    break;
                }
                if seen.insert(id) {
                    merged.push(id);
                }
            }
            merged
        }
    };
    let entries = fetch(conn, &ids)?;
    tx.finish()?;
    Ok(entries)
}

/// The rows of `ids`, in that order (ids no longer present are skipped).
fn fetch(conn: &Connection, ids: &[i64]) -> rusqlite::Result<Vec<HistoryEntry>> {
    let mut stmt =
        conn.prepare_cached("SELECT id, prompt, created_at, cwd FROM history WHERE id = ?1")?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(e) = stmt.query_row([id], entry).optional()? {
            out.push(e);
        }
    }
    Ok(out)
}

fn fts_step(
    conn: &Connection,
    fts: &str,
    limit: usize,
    cwd: Option<&str>,
    plan: Plan,
) -> rusqlite::Result<Vec<i64>> {
    if plan == Plan::Streaming {
        let sql = "SELECT h.id, h.created_at, h.cwd IS ?2 FROM history_fts f \
                   JOIN history h ON h.id = f.rowid WHERE history_fts MATCH ?1 ORDER BY f.rowid DESC";
        let mut stmt = conn.prepare_cached(sql)?;
        let mut stream = stmt.query(rusqlite::params![fts, cwd])?;
        if let Some(ids) = top_by_id_desc(conn, &mut stream, limit, cwd, cwd.is_some())? {
            return Ok(ids);
        }
    }
    let (sql, params): (&str, Vec<Value>) = match cwd {
        None => (
            "SELECT h.id FROM history_fts f JOIN history h ON h.id = f.rowid \
             WHERE history_fts MATCH ?1 ORDER BY h.created_at DESC, h.id DESC LIMIT ?2",
            vec![fts.to_owned().into(), (limit as i64).into()],
        ),
        Some(cwd) => (
            "SELECT h.id FROM history_fts f JOIN history h ON h.id = f.rowid \
             WHERE history_fts MATCH ?1 AND h.cwd = ?2 ORDER BY h.created_at DESC, h.id DESC LIMIT ?3",
            vec![fts.to_owned().into(), cwd.to_owned().into(), (limit as i64).into()],
        ),
    };
    ids_of(conn, sql, params)
}

fn substring_step(
    conn: &Connection,
    tokens: &[String],
    limit: usize,
    cwd: Option<&str>,
    plan: Plan,
) -> rusqlite::Result<Vec<i64>> {
    let likes = vec!["prompt LIKE ? ESCAPE '\\' COLLATE NOCASE"; tokens.len()].join(" AND ");
    let mut params: Vec<Value> = tokens.iter().map(|t| like_pattern(t).into()).collect();
    if plan == Plan::Streaming {
        match cwd {
            None => {
                let sql =
                    format!("SELECT id, created_at, 1 FROM history WHERE {likes} ORDER BY id DESC");
                let mut stmt = conn.prepare_cached(&sql)?;
                let mut stream = stmt.query(params_from_iter(&params))?;
                if let Some(ids) = top_by_id_desc(conn, &mut stream, limit, None, false)? {
                    return Ok(ids);
                }
            }
            Some(cwd) => {
                let sql = format!(
                    "SELECT id, created_at FROM history INDEXED BY idx_history_cwd_created_at \
                     WHERE cwd = ? AND {likes} ORDER BY created_at DESC"
                );
                if let Ok(mut stmt) = conn.prepare(&sql) {
                    let mut stream_params = vec![Value::from(cwd.to_owned())];
                    stream_params.extend(params.iter().cloned());
                    let mut stream = stmt.query(params_from_iter(&stream_params))?;
                    if let Some(ids) = top_by_time_desc(&mut stream, limit)? {
                        return Ok(ids);
                    }
                }
            }
        }
    }
    let cwd_clause = if cwd.is_some() { " AND cwd = ?" } else { "" };
    let sql = format!(
        "SELECT id FROM history WHERE {likes}{cwd_clause} ORDER BY created_at DESC, id DESC LIMIT ?"
    );
    if let Some(cwd) = cwd {
        params.push(cwd.to_owned().into());
    }
    params.push((limit as i64).into());
    ids_of(conn, &sql, params)
}

fn ids_of(conn: &Connection, sql: &str, params: Vec<Value>) -> rusqlite::Result<Vec<i64>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map(params_from_iter(params), |row| row.get(0))?;
    rows.collect()
}

/// A `created_at` value in SQLite's order: NULL below every number; integers and reals
/// compared as numbers. Text and blobs (which sort above numbers) are not represented.
#[derive(Debug, Clone, Copy)]
enum Time {
    Null,
    Int(i64),
    Real(f64),
}

impl Time {
    fn from_sql(value: ValueRef<'_>) -> Option<Time> {
        match value {
            ValueRef::Null => Some(Time::Null),
            ValueRef::Integer(i) => Some(Time::Int(i)),
            ValueRef::Real(f) => Some(Time::Real(f)),
            ValueRef::Text(_) | ValueRef::Blob(_) => None,
        }
    }

    fn cmp(self, other: Time) -> Ordering {
        match (self, other) {
            (Time::Null, Time::Null) => Ordering::Equal,
            (Time::Null, _) => Ordering::Less,
            (_, Time::Null) => Ordering::Greater,
            (Time::Int(a), Time::Int(b)) => a.cmp(&b),
            (Time::Real(a), Time::Real(b)) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
            (Time::Int(a), Time::Real(b)) => cmp_int_real(a, b),
            (Time::Real(a), Time::Int(b)) => cmp_int_real(b, a).reverse(),
        }
    }
}

/// An integer against a real, exactly.
fn cmp_int_real(i: i64, r: f64) -> Ordering {
    let as_real = i as f64;
    match as_real.partial_cmp(&r) {
        Some(Ordering::Equal) if r.abs() < 9.2e18 => i.cmp(&(r as i64)),
        Some(o) => o,
        None => Ordering::Equal,
    }
}

/// A candidate; greater is better (`created_at DESC, id DESC`).
#[derive(Debug, Clone, Copy)]
struct Ranked {
    time: Time,
    id: i64,
}

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        self.time.cmp(other.time).then(self.id.cmp(&other.id))
    }
}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Ranked {}

/// The best `limit` candidates seen, worst on top.
struct Best {
    heap: BinaryHeap<Reverse<Ranked>>,
    limit: usize,
}

impl Best {
    fn new(limit: usize) -> Self {
        Best {
            heap: BinaryHeap::with_capacity(limit + 1),
            limit,
        }
    }

    /// Keeps `candidate` if it is among the best so far; returns whether it was kept.
    fn offer(&mut self, candidate: Ranked) -> bool {
        if self.heap.len() < self.limit {
            self.heap.push(Reverse(candidate));
            true
        } else if self.worst().is_some_and(|w| candidate > w) {
            self.heap.pop();
            self.heap.push(Reverse(candidate));
            true
        } else {
            false
        }
    }

    fn full(&self) -> bool {
        self.heap.len() >= self.limit
    }

    fn worst(&self) -> Option<Ranked> {
        self.heap.peek().map(|r| r.0)
    }

    /// The ids, best first.
    fn into_ids(self) -> Vec<i64> {
        self.heap
            .into_sorted_vec()
            .into_iter()
            .map(|r| r.0.id)
            .collect()
    }
}

/// The largest `created_at` among rows (in scope) with an id below a bound that only
/// decreases: a walk down the `created_at` index that stops at the first such row.
struct TimeBound<'s> {
    rows: Rows<'s>,
    current: Option<(i64, Time)>,
    exhausted: bool,
}

enum Bound {
    /// The largest `created_at` below the id (`None`: no row below it).
    Known(Option<Time>),
    /// Not found within the step budget.
    Pending,
    /// A `created_at` that is not a number: the streaming plan cannot be used.
    Unusable,
}

impl TimeBound<'_> {
    fn below(&mut self, id: i64, mut steps: usize) -> rusqlite::Result<Bound> {
        loop {
            if let Some((row_id, time)) = self.current {
                if row_id < id {
                    return Ok(Bound::Known(Some(time)));
                }
                self.current = None;
            }
            if self.exhausted {
                return Ok(Bound::Known(None));
            }
            if steps == 0 {
                return Ok(Bound::Pending);
            }
            steps -= 1;
            match self.rows.next()? {
                None => self.exhausted = true,
                Some(row) => {
                    let Some(time) = Time::from_sql(row.get_ref(1)?) else {
                        return Ok(Bound::Unusable);
                    };
                    self.current = Some((row.get(0)?, time));
                }
            }
        }
    }
}

/// The best `limit` ids of a stream of `(id, created_at, in_scope)` rows in descending id.
/// `None` if the streaming plan cannot be used. `scope` is the cwd the bound is taken in.
///
/// The stream and the bound cursor take turns. The stream hands over as soon as the kept
/// rows are complete (or improve while the cursor is level with the stream); the cursor
/// hands back when it has reached the stream's position, or when its time slice ends, and
/// then both get doubled slices. So a frequent match stops as soon as the cursor proves the
/// rest cannot enter, and a rare one is read to its end at little more than that cost.
/// Timing only decides when a proof is attempted, never the rows chosen.
fn top_by_id_desc(
    conn: &Connection,
    stream: &mut Rows<'_>,
    limit: usize,
    scope: Option<&str>,
    filter: bool,
) -> rusqlite::Result<Option<Vec<i64>>> {
    let bound_sql = match scope {
        None => {
            "SELECT id, created_at FROM history INDEXED BY idx_history_created_at \
                 ORDER BY created_at DESC"
        }
        Some(_) => {
            "SELECT id, created_at FROM history INDEXED BY idx_history_cwd_created_at \
                    WHERE cwd = ?1 ORDER BY created_at DESC"
        }
    };
    // Without the index there is no cheap bound: the stream is read to its end. (Statements
    // naming an index are prepared afresh, so that a dropped index shows here.)
    let mut bound_stmt = conn.prepare(bound_sql).ok();
    let mut bound = match (&mut bound_stmt, scope) {
        (Some(stmt), None) => Some(stmt.query([])?),
        (Some(stmt), Some(cwd)) => Some(stmt.query([cwd])?),
        (None, _) => None,
    }
    .map(|rows| TimeBound {
        rows,
        current: None,
        exhausted: false,
    });
    let mut best = Best::new(limit);
    let mut lowest_id: i64;
    let mut slice = FIRST_SLICE;
    // Whether the cursor has reached the current bound and found it too high, so that the
    // next improvement of the kept rows is worth another look.
    let mut bound_caught_up = false;
    loop {
        // The stream's turn: until its slice ends, or until there is something to prove.
        let deadline = Instant::now() + slice;
        let mut pulled = 0u32;
        loop {
            let Some(row) = stream.next()? else {
                return Ok(Some(best.into_ids()));
            };
            let id: i64 = row.get(0)?;
            lowest_id = id;
            let Some(time) = Time::from_sql(row.get_ref(1)?) else {
                return Ok(None);
            };
            let was_full = best.full();
            let entered = (!filter || row.get::<_, Option<bool>>(2)? == Some(true))
                && best.offer(Ranked { time, id });
            if bound.is_some() && entered && best.full() && (!was_full || bound_caught_up) {
                break;
            }
            pulled += 1;
            if pulled.is_multiple_of(32) && Instant::now() >= deadline {
                break;
            }
        }
        // The bound's turn: without an index the stream is read to its end.
        let Some(bound) = &mut bound else {
            continue;
        };
        let deadline = Instant::now() + slice;
        loop {
            match bound.below(lowest_id, 256)? {
                Bound::Known(None) => return Ok(Some(best.into_ids())),
                Bound::Known(Some(time)) => {
                    // No unseen row can beat the worst kept one (ties lose on the id).
                    if best.full() && best.worst().is_some_and(|w| time.cmp(w.time).is_le()) {
                        return Ok(Some(best.into_ids()));
                    }
                    bound_caught_up = true;
                    break;
                }
                Bound::Pending if Instant::now() < deadline => {}
                Bound::Pending => {
                    // Behind: both go on, with longer turns.
                    bound_caught_up = false;
                    slice = slice.saturating_mul(2);
                    break;
                }
                Bound::Unusable => return Ok(None),
            }
        }
    }
}

/// The best `limit` ids of a stream of `(id, created_at)` rows in descending `created_at`
/// (ties in any order). `None` if the streaming plan cannot be used.
fn top_by_time_desc(stream: &mut Rows<'_>, limit: usize) -> rusqlite::Result<Option<Vec<i64>>> {
    let mut best = Best::new(limit);
    while let Some(row) = stream.next()? {
        let Some(time) = Time::from_sql(row.get_ref(1)?) else {
            return Ok(None);
        };
        if best.full() && best.worst().is_some_and(|w| time.cmp(w.time).is_lt()) {
            break;
        }
        best.offer(Ranked {
            time,
            id: row.get(0)?,
        });
    }
    Ok(Some(best.into_ids()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{RngExt, SeedableRng};

    #[test]
    fn tokenizes_like_the_index() {
        assert_eq!(tokenize("git-commit --amend"), ["git", "commit", "amend"]);
        assert_eq!(tokenize("  Ünïcode_ΣΑΣ 42x "), ["ünïcode", "σας", "42x"]);
        assert_eq!(tokenize("日本語 テスト"), ["日本語", "テスト"]);
        assert!(tokenize("--- !!! ...").is_empty());
        assert!(tokenize("").is_empty());
    }

    #[test]
    fn fts_and_like_quoting() {
        let tokens = vec!["git".to_owned(), "a\"b".to_owned()];
        assert_eq!(fts_query(&tokens), "\"git\"* \"a\"\"b\"*");
        assert_eq!(like_pattern("a%b_c\\d"), "%a\\%b\\_c\\\\d%");
    }

    #[test]
    fn times_compare_as_sqlite_orders_them() {
        use Time::*;
        assert!(Null.cmp(Int(i64::MIN)).is_lt());
        assert!(Int(2).cmp(Real(1.5)).is_gt());
        assert!(Real(2.0).cmp(Int(2)).is_eq());
        assert!(Int(i64::MAX).cmp(Real(9.3e18)).is_lt());
        assert!(Int((1 << 53) + 1).cmp(Real((1u64 << 53) as f64)).is_gt());
    }

    /// A database in memory with the agent's schema and random rows: times with ties, out
    /// of order, and reals (or growing with ids); a few cwds; words that share prefixes and
    /// infixes.
    fn random_history(rng: &mut SmallRng, rows: usize, monotonic: bool) -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        super::super::create_schema(&conn).unwrap();
        let words = [
            "commit", "recommit", "submit", "mit", "git", "gitlab", "fix", "prefix", "fixture",
            "test", "attest", "testing", "go", "golang", "cargo", "Commit", "MIT", "école",
        ];
        let cwds = [None, Some("/a"), Some("/b"), Some("/c")];
        let mut time = 1_000i64;
        for _ in 0..rows {
            let n = rng.random_range(1..5);
            let prompt: Vec<&str> = (0..n)
                .map(|_| words[rng.random_range(0..words.len())])
                .collect();
            let created_at: Value = if monotonic {
                time += rng.random_range(0..3);
                time.into()
            } else {
                // (NULL cannot be stored: the column is NOT NULL.)
                match rng.random_range(0..20) {
                    0 => Value::Real(rng.random_range(0..40) as f64),
                    1 => Value::Real(rng.random_range(0..40) as f64 + 0.5),
                    _ => Value::Integer(rng.random_range(0..40)),
                }
            };
            conn.execute(
                "INSERT INTO history (prompt, created_at, cwd) VALUES (?1, ?2, ?3)",
                rusqlite::params![prompt.join(" "), created_at, cwds[rng.random_range(0..4)]],
            )
            .unwrap();
        }
        conn
    }

    #[test]
    fn streaming_plans_choose_the_same_rows_as_the_agents_statements() {
        let mut rng = SmallRng::seed_from_u64(11);
        let queries = [
            "mit", "commit", "git", "fix", "test", "go", "ix", "es", "it co", "fix test", "MIT",
            "école", "ecole", "zz", "t",
        ];
        for round in 0..12 {
            let conn = random_history(&mut rng, 300, round % 2 == 0);
            for query in queries {
                for limit in [1, 3, 20, 1000] {
                    for cwd in [None, Some("/a"), Some("/c")] {
                        let fast = search(&conn, query, limit, cwd, Plan::Streaming).unwrap();
                        let reference = search(&conn, query, limit, cwd, Plan::Reference).unwrap();
                        assert_eq!(fast, reference, "round {round} {query:?} {limit} {cwd:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn text_times_and_missing_indexes_fall_back_to_the_agents_statements() {
        let mut rng = SmallRng::seed_from_u64(5);
        let conn = random_history(&mut rng, 200, true);
        conn.execute(
            "INSERT INTO history (prompt, created_at, cwd) VALUES ('old commit', 'text', '/a')",
            [],
        )
        .unwrap();
        for (query, cwd) in [
            ("commit", None),
            ("ommit", Some("/a")),
            ("commit", Some("/a")),
        ] {
            let fast = search(&conn, query, 5, cwd, Plan::Streaming).unwrap();
            assert_eq!(fast, search(&conn, query, 5, cwd, Plan::Reference).unwrap());
            assert_eq!(fast[0].prompt, "old commit", "{query}");
        }
        conn.execute_batch(
            "DROP INDEX idx_history_created_at; DROP INDEX idx_history_cwd_created_at;",
        )
        .unwrap();
        for (query, cwd) in [("commit", None), ("mit", Some("/a")), ("git", Some("/b"))] {
            assert_eq!(
                search(&conn, query, 5, cwd, Plan::Streaming).unwrap(),
                search(&conn, query, 5, cwd, Plan::Reference).unwrap()
            );
        }
    }
}
