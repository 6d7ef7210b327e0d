//! Loading a large file on several threads gives what one pass over it gives.

use gjcfs::corpus::{self, Format, Limit, Options};
use gjcfs::engine::format::lines::TAIL;
use gjcfs::engine::read::load::load_entries_from_file;
use gjcfs::engine::read::replay::parse_session_reader;

#[test]
fn a_large_damaged_file_loads_on_threads_exactly_as_one_pass_reads_it() {
    let clean = corpus::generate_bytes(&Options {
        seed: 3,
        limit: Limit::Bytes(10_000_000),
        format: Format::V5,
        cwd: None,
    });
    // CRLF endings, blank lines, invalid UTF-8 and torn lines all over the file, and a last
    // line without a newline.
    let mut bytes = Vec::with_capacity(clean.len() + 4096);
    for (i, line) in clean.split(|&b| b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        match i % 41 {
            1 => {
                bytes.extend_from_slice(line);
                bytes.push(b'\r');
            }
            2 => {
                bytes.extend_from_slice(b"  \t\n\n");
                bytes.extend_from_slice(line);
            }
            3 => {
                bytes.extend_from_slice(&line[..line.len() / 2]);
                bytes.push(0xFF);
                bytes.extend_from_slice(&line[line.len() / 2..]);
            }
            4 => bytes.extend_from_slice(&line[..line.len() / 3]),
            _ => bytes.extend_from_slice(line),
        }
        bytes.push(b'\n');
    }
    bytes.extend_from_slice(b"{\"type\":\"custom\",\"id\":\"last\",\"customType\":\"x\"}");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("damaged.jsonl");
    std::fs::write(&path, &bytes).unwrap();
    let loaded = load_entries_from_file(&path).unwrap();
    let one_pass = parse_session_reader(&bytes[..]).unwrap();
    assert!(one_pass.skipped.len() > 50, "the damage shows");
    assert_eq!(loaded.records, one_pass.records);
    assert_eq!(loaded.skipped, one_pass.skipped);
    let mark = loaded.mark.unwrap();
    assert_eq!(mark.end, bytes.len() as u64);
    assert_eq!(mark.newlines, bytes.iter().filter(|&&b| b == b'\n').count());
    assert_eq!(mark.tail, &bytes[bytes.len() - TAIL..]);
    assert!(mark.patches_apply);
}
