//! Builds a full-text index of a session store's replayed records with one engine and times
//! the build and a few queries. Usage:
//!   search-compare ENGINE STORE_DIR INDEX_DIR RARE COMMON "PHRASE" SUBSTRING
//! ENGINE: fts5-unicode61 | fts5-trigram | fts5-trigram-none | tantivy | tantivy-ngram3

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Instant;

use gjcfs::engine::load::{load_entries_from_file, LoadStatus};
use gjcfs::engine::search::text::record_text;

fn docs_of(path: &Path) -> Vec<String> {
    let Ok(loaded) = load_entries_from_file(path) else {
        return Vec::new();
    };
    if loaded.status != LoadStatus::Loaded {
        return Vec::new();
    }
    loaded
        .records
        .iter()
        .map(record_text)
        .filter(|t| !t.is_empty())
        .collect()
}

/// Extracts documents on a thread while the caller indexes them.
fn stream(paths: Vec<PathBuf>, mut sink: impl FnMut(Vec<String>)) {
    let (tx, rx) = mpsc::sync_channel::<Vec<String>>(64);
    let reader = std::thread::spawn(move || {
        for p in paths {
            if tx.send(docs_of(&p)).is_err() {
                return;
            }
        }
    });
    for docs in rx {
        sink(docs);
    }
    reader.join().unwrap();
}

fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                dir_size(&e.path())
            } else {
                e.metadata().unwrap().len()
            }
        })
        .sum()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn time_query(mut q: impl FnMut() -> usize) -> (f64, usize) {
    let n = q();
    let runs: Vec<f64> = (0..15)
        .map(|_| {
            let t = Instant::now();
            q();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    (median(runs), n)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (engine, store, index) = (&args[1], PathBuf::from(&args[2]), PathBuf::from(&args[3]));
    let queries = [
        ("rare", &args[4]),
        ("common", &args[5]),
        ("phrase", &args[6]),
        ("substring", &args[7]),
    ];
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&store)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    paths.sort();
    let bytes: u64 = paths.iter().map(|p| p.metadata().unwrap().len()).sum();
    let _ = std::fs::remove_dir_all(&index);
    std::fs::create_dir_all(&index).unwrap();
    let start = Instant::now();
    let mut text_bytes = 0u64;
    let mut docs = 0u64;
    let results: Vec<(&str, f64, usize)>;
    if let Some(tok) = engine.strip_prefix("fts5-") {
        let (tokenize, detail) = match tok {
            "unicode61" => ("unicode61 remove_diacritics 2", "full"),
            "trigram" => ("trigram", "full"),
            "trigram-none" => ("trigram", "none"),
            _ => panic!("engine"),
        };
        let conn = rusqlite::Connection::open(index.join("index.db")).unwrap();
        conn.execute_batch(&format!(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF;
             CREATE TABLE docs(id INTEGER PRIMARY KEY, text TEXT);
             CREATE VIRTUAL TABLE fts USING fts5(text, content='', contentless_delete=1, tokenize='{tokenize}', detail={detail});"
        ))
        .unwrap();
        conn.execute_batch("BEGIN").unwrap();
        {
            let mut ins_doc = conn.prepare("INSERT INTO docs(text) VALUES (?1)").unwrap();
            let mut ins_fts = conn
                .prepare("INSERT INTO fts(rowid, text) VALUES (?1, ?2)")
                .unwrap();
            stream(paths.clone(), |batch| {
                for t in batch {
                    text_bytes += t.len() as u64;
                    docs += 1;
                    ins_doc.execute([&t]).unwrap();
                    ins_fts
                        .execute(rusqlite::params![conn.last_insert_rowid(), t])
                        .unwrap();
                }
            });
        }
        conn.execute_batch(
            "COMMIT; INSERT INTO fts(fts) VALUES('optimize'); PRAGMA wal_checkpoint(TRUNCATE);",
        )
        .unwrap();
        let build = start.elapsed().as_secs_f64();
        report(engine, bytes, text_bytes, docs, build, dir_size(&index));
        let mut stmt = conn
            .prepare("SELECT d.text FROM (SELECT rowid FROM fts WHERE fts MATCH ?1 ORDER BY rank LIMIT 20) f JOIN docs d ON d.id = f.rowid")
            .unwrap();
        let mut count = conn
            .prepare("SELECT count(*) FROM fts WHERE fts MATCH ?1")
            .unwrap();
        results = queries
            .iter()
            .map(|(name, q)| {
                let m = format!("\"{}\"", q.replace('"', "\"\""));
                let (ms, _) = time_query(|| {
                    let rows: Vec<String> = stmt
                        .query_map([&m], |r| r.get(0))
                        .unwrap()
                        .map(|r| r.unwrap())
                        .collect();
                    rows.len()
                });
                let total: i64 = count.query_row([&m], |r| r.get(0)).unwrap();
                (*name, ms, total as usize)
            })
            .collect();
    } else {
        use tantivy::collector::{Count, TopDocs};
        use tantivy::query::QueryParser;
        use tantivy::schema::{IndexRecordOption, Schema, TextFieldIndexing, TextOptions, STORED};
        use tantivy::tokenizer::{LowerCaser, NgramTokenizer, TextAnalyzer};
        use tantivy::{doc, Index, TantivyDocument};
        let ngram = engine == "tantivy-ngram3";
        let mut schema = Schema::builder();
        let tokenizer = if ngram { "ngram3" } else { "default" };
        let opts = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(tokenizer)
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        ) | STORED;
        let text = schema.add_text_field("text", opts);
        let index_t = Index::create_in_dir(&index, schema.build()).unwrap();
        index_t.tokenizers().register(
            "ngram3",
            TextAnalyzer::builder(NgramTokenizer::new(3, 3, false).unwrap())
                .filter(LowerCaser)
                .build(),
        );
        let mut writer = index_t.writer(512_000_000).unwrap();
        stream(paths.clone(), |batch| {
            for t in batch {
                text_bytes += t.len() as u64;
                docs += 1;
                writer.add_document(doc!(text => t)).unwrap();
            }
        });
        writer.commit().unwrap();
        writer.wait_merging_threads().unwrap();
        let build = start.elapsed().as_secs_f64();
        report(engine, bytes, text_bytes, docs, build, dir_size(&index));
        let reader = index_t.reader().unwrap();
        let searcher = reader.searcher();
        let parser = QueryParser::for_index(&index_t, vec![text]);
        results = queries
            .iter()
            .map(|(name, q)| {
                let query = parser
                    .parse_query(&format!("\"{}\"", q.replace('"', "")))
                    .unwrap();
                let (ms, _) = time_query(|| {
                    let top = searcher.search(&query, &TopDocs::with_limit(20)).unwrap();
                    for (_, addr) in &top {
                        let _d: TantivyDocument = searcher.doc(*addr).unwrap();
                    }
                    top.len()
                });
                (*name, ms, searcher.search(&query, &Count).unwrap())
            })
            .collect();
    }
    for (name, ms, n) in results {
        println!("{engine}\tquery {name}\t{ms:.2} ms\t{n} matching docs");
    }
}

fn report(engine: &str, bytes: u64, text: u64, docs: u64, secs: f64, size: u64) {
    println!(
        "{engine}\tbuild {secs:.2} s = {:.1} MB/s of transcript ({:.1} MB text in {docs} docs)\tindex {:.1} MB = {:.2}x transcripts",
        bytes as f64 / 1e6 / secs,
        text as f64 / 1e6,
        size as f64 / 1e6,
        size as f64 / bytes as f64
    );
}
