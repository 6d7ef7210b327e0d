//! Prompt-history benchmarks (results and commands in `docs/benchmarks-archive.md`, "Prompt
//! history").
//!
//! - `history_search`: `HistoryStorage::search` (limit 20) over a generated database of
//!   1,000,000 prompts (`GJCFS_BENCH_HISTORY_ROWS` changes the count) for a few query
//!   shapes, and `get_recent` for reference.
//! - `history_search_agent_sql`: the same searches with the agent's statements as they are
//!   (checked to return the same rows), for comparison.
//! - `history_add`: 100,000 distinct prompts through `add`, then `flush`, into a fresh
//!   database: the whole time from the first `add` until the rows are committed.
//!
//! The search database is built in a temporary directory (or at `GJCFS_BENCH_HISTORY_DB`,
//! and reused from there when it exists): the storage creates the schema,
//! then the rows go in with the agent's own `INSERT` (so the agent's trigger fills the
//! full-text index) in large transactions, with explicit `created_at` values spread over
//! two years. `add` would stamp every row with the current second, which no real history
//! looks like; its speed is measured separately by `history_add`.
//!
//! The corpus is deterministic (fixed seed): prompts of 3 to 30 words drawn from a
//! Zipf-distributed vocabulary of about 20,000 words (common programming words, then
//! generated ones), with identifiers, paths and numbers mixed in, 1 % long pasted logs, and
//! 40 project directories of Zipf-distributed popularity.

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use gjcfs::engine::HistoryStorage;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

const SEED: u64 = 7;
const SEARCH_LIMIT: usize = 20;
const ADD_ROWS: usize = 100_000;

const COMMON: &[&str] = &[
    "the",
    "a",
    "to",
    "in",
    "and",
    "of",
    "for",
    "is",
    "it",
    "this",
    "that",
    "with",
    "on",
    "fix",
    "add",
    "test",
    "tests",
    "make",
    "file",
    "function",
    "error",
    "why",
    "does",
    "not",
    "can",
    "you",
    "please",
    "use",
    "code",
    "run",
    "build",
    "update",
    "refactor",
    "remove",
    "change",
    "implement",
    "should",
    "when",
    "from",
    "new",
    "check",
    "into",
    "what",
    "how",
    "type",
    "return",
    "value",
    "commit",
    "git",
    "branch",
    "merge",
    "rebase",
    "push",
    "config",
    "parser",
    "lexer",
    "server",
    "client",
    "request",
    "response",
    "handler",
    "module",
    "struct",
    "trait",
    "async",
    "await",
    "string",
    "vector",
    "map",
    "cache",
    "index",
    "query",
    "database",
    "table",
    "schema",
    "migration",
    "docs",
    "readme",
    "comment",
    "rename",
    "move",
    "split",
    "inline",
    "extract",
    "method",
    "class",
    "interface",
    "api",
    "endpoint",
    "route",
    "auth",
    "token",
    "session",
    "user",
    "login",
    "logout",
    "password",
    "deploy",
    "release",
    "version",
    "bump",
    "dependency",
    "package",
    "install",
    "lint",
    "format",
    "warning",
    "panic",
    "crash",
    "bug",
    "issue",
    "review",
    "pr",
    "diff",
    "patch",
    "log",
    "logs",
    "debug",
    "trace",
    "benchmark",
    "performance",
    "slow",
    "fast",
    "memory",
    "leak",
    "thread",
    "lock",
    "mutex",
    "channel",
    "timeout",
    "retry",
    "loop",
    "iterator",
    "closure",
    "lifetime",
    "borrow",
    "checker",
    "compile",
    "compiler",
    "macro",
    "generic",
    "enum",
    "match",
    "option",
    "result",
    "unwrap",
    "expect",
    "serde",
    "json",
    "yaml",
    "toml",
    "css",
    "html",
    "react",
    "component",
    "state",
    "props",
    "hook",
    "render",
    "style",
    "button",
    "form",
    "submit",
    "input",
    "validation",
    "modal",
    "page",
    "layout",
    "docker",
    "kubernetes",
    "pipeline",
    "ci",
    "workflow",
    "script",
    "shell",
    "bash",
    "python",
    "rust",
    "typescript",
    "javascript",
    "go",
    "golang",
    "sql",
    "sqlite",
    "postgres",
    "redis",
    "kafka",
    "queue",
    "worker",
    "job",
    "cron",
    "schedule",
    "limit",
    "rate",
    "emit",
    "event",
    "listener",
    "socket",
    "stream",
    "buffer",
    "encode",
    "decode",
    "utf8",
    "unicode",
    "escape",
    "parse",
    "serialize",
    "snapshot",
    "fixture",
    "mock",
    "stub",
    "assert",
    "coverage",
    "flaky",
    "again",
    "now",
    "also",
    "then",
    "only",
    "all",
    "some",
    "every",
    "first",
    "last",
    "next",
];

const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "ten", "ra", "vo", "zu", "pel", "dra", "qui", "sto", "ne", "bri", "fa",
    "gor", "hu", "jin", "wex", "ti", "ul", "an", "cos", "el", "ix", "on", "pra", "sen", "tor",
];

/// A Zipf-distributed vocabulary sampler.
struct Vocabulary {
    words: Vec<String>,
    cumulative: Vec<f64>,
}

impl Vocabulary {
    /// Common words first, then generated ones, up to `size`.
    fn generated(rng: &mut SmallRng, size: usize) -> Self {
        let mut words: Vec<String> = COMMON.iter().map(|w| (*w).to_owned()).collect();
        while words.len() < size {
            let n = rng.random_range(2..=4);
            let word: String = (0..n)
                .map(|_| SYLLABLES[rng.random_range(0..SYLLABLES.len())])
                .collect();
            words.push(word);
        }
        Self::zipf(words)
    }

    /// Word `k` (from 1) drawn with weight `1/k`.
    fn zipf(words: Vec<String>) -> Self {
        let mut total = 0.0;
        let cumulative = (1..=words.len())
            .map(|rank| {
                total += 1.0 / rank as f64;
                total
            })
            .collect();
        Vocabulary { words, cumulative }
    }

    fn pick(&self, rng: &mut SmallRng) -> &str {
        let x = rng.random::<f64>() * self.cumulative[self.cumulative.len() - 1];
        let i = self.cumulative.partition_point(|&c| c < x);
        &self.words[i.min(self.words.len() - 1)]
    }
}

/// Deterministic prompts and their (cwd, created_at).
struct Corpus {
    rng: SmallRng,
    vocabulary: Vocabulary,
    projects: Vocabulary,
    time: i64,
}

impl Corpus {
    fn new() -> Self {
        let mut rng = SmallRng::seed_from_u64(SEED);
        let vocabulary = Vocabulary::generated(&mut rng, 20_000);
        let projects = Vocabulary::zipf(
            (0..40)
                .map(|i| format!("/home/dev/src/project-{i:02}"))
                .collect(),
        );
        Corpus {
            rng,
            vocabulary,
            projects,
            // 2024-01-01.
            time: 1_704_067_200,
        }
    }

    fn word(&mut self) -> String {
        self.vocabulary.pick(&mut self.rng).to_owned()
    }

    fn prompt(&mut self) -> String {
        let mut out = String::new();
        let words = self.rng.random_range(3..=30);
        for i in 0..words {
            if i > 0 {
                out.push(' ');
            }
            match self.rng.random_range(0..100) {
                0..=3 => {
                    let (a, b) = (self.word(), self.word());
                    out.push_str(&format!("src/{a}/{b}.rs"));
                }
                4..=7 => {
                    let (a, b) = (self.word(), self.word());
                    out.push_str(&format!("{a}_{b}"));
                }
                8..=9 => {
                    let n = self.rng.random_range(0..100_000);
                    out.push_str(&n.to_string());
                }
                _ => {
                    let w = self.word();
                    out.push_str(&w);
                }
            }
            if self.rng.random_range(0..12) == 0 {
                out.push_str([",", ".", "?", ":"][self.rng.random_range(0..4)]);
            }
        }
        if self.rng.random_range(0..100) == 0 {
            // A pasted log.
            let lines = self.rng.random_range(10..60);
            for n in 0..lines {
                let (a, b) = (self.word(), self.word());
                out.push_str(&format!(
                    "\n[{n:04}] ERROR {a}::{b}: failed at line {}",
                    self.rng.random_range(1..5000)
                ));
            }
        }
        out
    }

    /// The next row: prompt, cwd, created_at (non-decreasing, about a minute apart on
    /// average, in bursts).
    fn row(&mut self) -> (String, String, i64) {
        self.time += if self.rng.random_range(0..50) == 0 {
            self.rng.random_range(600..20_000)
        } else {
            self.rng.random_range(2..60)
        };
        let cwd = self.projects.pick(&mut self.rng).to_owned();
        (self.prompt(), cwd, self.time)
    }
}

fn search_rows() -> usize {
    std::env::var("GJCFS_BENCH_HISTORY_ROWS")
        .ok()
        .map(|v| v.parse().expect("GJCFS_BENCH_HISTORY_ROWS is a number"))
        .unwrap_or(1_000_000)
}

/// Builds the search database: schema by the storage, rows by the agent's insert.
fn build_database(path: &Path, rows: usize) {
    HistoryStorage::open(path)
        .expect("opens")
        .close()
        .expect("closes");
    let mut conn = rusqlite::Connection::open(path).expect("opens");
    let mut corpus = Corpus::new();
    let started = Instant::now();
    let mut done = 0;
    while done < rows {
        let tx = conn.transaction().expect("transaction");
        {
            let mut insert = tx
                .prepare("INSERT INTO history (prompt, created_at, cwd) VALUES (?1, ?2, ?3)")
                .expect("prepares");
            for _ in 0..(rows - done).min(50_000) {
                let (prompt, cwd, created_at) = corpus.row();
                insert
                    .execute(rusqlite::params![prompt, created_at, cwd])
                    .expect("inserts");
                done += 1;
            }
        }
        tx.commit().expect("commits");
    }
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE); ANALYZE;")
        .expect("checkpoint");
    eprintln!(
        "history bench: {rows} prompts, {:.1} MB, built in {:.1} s",
        std::fs::metadata(path).map_or(0, |m| m.len()) as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
}

fn search(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    // GJCFS_BENCH_HISTORY_DB keeps the database at a path of one's choice and reuses it
    // when it exists (it must then have been built with the same row count).
    let path = std::env::var_os("GJCFS_BENCH_HISTORY_DB")
        .map_or_else(|| dir.path().join("history.db"), Into::into);
    let rows = search_rows();
    if !path.exists() {
        build_database(&path, rows);
    }
    let storage = HistoryStorage::open(&path).expect("opens");
    let project = "/home/dev/src/project-03";
    // A word from the tail of the vocabulary (about a hundred prompts), and a number (a few
    // prompts, so the substring step must look at every row).
    let rare = Corpus::new().vocabulary.words[19_000].clone();
    let queries: &[(&str, &str, Option<&str>)] = &[
        ("prefix_word", "refac", None),
        ("common_word", "the", None),
        ("infix_substring", "ssion", None),
        ("two_tokens", "fix test", None),
        ("cwd_scoped", "parser", Some(project)),
        ("rare_word", &rare, None),
        ("number", "48213", None),
        ("no_match", "qqzzx", None),
    ];
    let mut group = c.benchmark_group("history_search");
    group.sample_size(30);
    group.measurement_time(Duration::from_secs(5));
    for (name, query, cwd) in queries {
        let hits = storage
            .search(query, SEARCH_LIMIT, *cwd)
            .expect("searches")
            .len();
        eprintln!("history bench: {name} {query:?} -> {hits} rows");
        group.bench_function(*name, |b| {
            b.iter(|| {
                storage
                    .search(black_box(query), SEARCH_LIMIT, *cwd)
                    .expect("searches")
            })
        });
    }
    group.finish();

    // The same searches with the agent's statements as they are, for comparison.
    let conn = rusqlite::Connection::open(&path).expect("opens");
    let mut group = c.benchmark_group("history_search_agent_sql");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(3));
    for (name, query, cwd) in queries {
        let hits = agent_search(&conn, query, SEARCH_LIMIT, *cwd);
        let ours: Vec<i64> = storage
            .search(query, SEARCH_LIMIT, *cwd)
            .expect("searches")
            .iter()
            .map(|e| e.id)
            .collect();
        assert_eq!(
            hits, ours,
            "{name}: the same rows as the agent's statements"
        );
        group.bench_function(*name, |b| {
            b.iter(|| agent_search(&conn, black_box(query), SEARCH_LIMIT, *cwd))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("history_search");
    group.bench_function("get_recent", |b| {
        b.iter(|| storage.get_recent(SEARCH_LIMIT, None).expect("reads"))
    });
    group.bench_function("get_recent_cwd", |b| {
        b.iter(|| {
            storage
                .get_recent(SEARCH_LIMIT, Some(project))
                .expect("reads")
        })
    });
    group.finish();
}

/// The agent's search (details §15) with its own statements, returning ids.
fn agent_search(
    conn: &rusqlite::Connection,
    query: &str,
    limit: usize,
    cwd: Option<&str>,
) -> Vec<i64> {
    use rusqlite::types::Value;
    let tokens = gjcfs::engine::history::tokenize(query);
    if tokens.is_empty() {
        return Vec::new();
    }
    let fts = gjcfs::engine::history::fts_query(&tokens);
    let run = |sql: &str, params: Vec<Value>| -> Vec<i64> {
        let mut stmt = conn.prepare_cached(sql).expect("prepares");
        let rows = stmt
            .query_map(rusqlite::params_from_iter(params), |r| r.get(0))
            .expect("runs");
        rows.collect::<Result<_, _>>().expect("reads")
    };
    let limit_value = Value::Integer(limit as i64);
    let fts_ids = match cwd {
        None => run(
            "SELECT h.id, h.prompt, h.created_at, h.cwd FROM history_fts f JOIN history h ON h.id = f.rowid \
             WHERE history_fts MATCH ? ORDER BY h.created_at DESC, h.id DESC LIMIT ?",
            vec![fts.into(), limit_value.clone()],
        ),
        Some(cwd) => run(
            "SELECT h.id, h.prompt, h.created_at, h.cwd FROM history_fts f JOIN history h ON h.id = f.rowid \
             WHERE history_fts MATCH ? AND h.cwd = ? ORDER BY h.created_at DESC, h.id DESC LIMIT ?",
            vec![fts.into(), cwd.to_owned().into(), limit_value.clone()],
        ),
    };
    if fts_ids.len() >= limit {
        return fts_ids;
    }
    let likes = vec!["prompt LIKE ? ESCAPE '\\' COLLATE NOCASE"; tokens.len()].join(" AND ");
    let mut params: Vec<Value> = tokens
        .iter()
        .map(|t| gjcfs::engine::history::like_pattern(t).into())
        .collect();
    let cwd_clause = if let Some(cwd) = cwd {
        params.push(cwd.to_owned().into());
        " AND cwd = ?"
    } else {
        ""
    };
    params.push(limit_value);
    let sub_ids = run(
        &format!(
            "SELECT id, prompt, created_at, cwd FROM history WHERE {likes}{cwd_clause} \
             ORDER BY created_at DESC, id DESC LIMIT ?"
        ),
        params,
    );
    let mut merged = fts_ids;
    for id in sub_ids {
        if merged.len() >= limit {
            break;
        }
        if !merged.contains(&id) {
            merged.push(id);
        }
    }
    merged
}

fn add(c: &mut Criterion) {
    let mut corpus = Corpus::new();
    let prompts: Vec<(String, String)> = (0..ADD_ROWS)
        .map(|i| {
            let (prompt, cwd, _) = corpus.row();
            (format!("{prompt} #{i}"), cwd)
        })
        .collect();
    let mut group = c.benchmark_group("history_add");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.bench_function("100k_add_then_flush", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let dir = tempfile::tempdir().expect("temp dir");
                let storage = HistoryStorage::open(dir.path().join("history.db")).expect("opens");
                let started = Instant::now();
                for (prompt, cwd) in &prompts {
                    storage.add(prompt, Some(cwd));
                }
                storage.flush().expect("flushes");
                total += started.elapsed();
                assert_eq!(
                    storage.get_recent(1, None).expect("reads")[0].id,
                    ADD_ROWS as i64
                );
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, search, add);
criterion_main!(benches);
