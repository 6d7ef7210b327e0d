//! Property tests of reading in parallel against one pass.

use super::patches::{build_patch_line, patch_header, patch_item, PatchItem};
use super::*;

/// Damage done to one line of a generated file.
#[derive(Clone, Debug)]
enum Damage {
    /// The line ends with `\r\n`.
    Crlf,
    /// A blank line (empty, spaces and tabs, or a lone `\r`) goes before it.
    BlankBefore(u8),
    /// A byte that is never valid UTF-8 alone goes in at this position.
    InvalidByte(Index, u8),
    /// The line is cut short at this position (a torn write).
    Tear(Index),
}

fn damage() -> impl Strategy<Value = (Index, Damage)> {
    let kind = prop_oneof![
        Just(Damage::Crlf),
        any::<u8>().prop_map(Damage::BlankBefore),
        (any::<Index>(), any::<u8>()).prop_map(|(at, b)| Damage::InvalidByte(at, b)),
        any::<Index>().prop_map(Damage::Tear),
    ];
    (any::<Index>(), kind)
}

/// A session file of patch-replay lines (a header of any version, 6 included), damaged.
fn damaged_file(
    version: Option<i64>,
    items: &[PatchItem],
    damage: &[(Index, Damage)],
    bom: bool,
    final_newline: bool,
) -> Vec<u8> {
    let mut lines: Vec<Vec<u8>> = vec![canon(&patch_header(version, true)).into_bytes()];
    lines.extend(
        items
            .iter()
            .map(|item| build_patch_line(item).0.into_bytes()),
    );
    for (at, damage) in damage {
        let i = at.index(lines.len());
        match damage {
            Damage::Crlf => lines[i].push(b'\r'),
            Damage::BlankBefore(k) => {
                let blank = [&b""[..], b"  \t ", b"\r"][*k as usize % 3];
                lines.insert(i, blank.to_vec());
            }
            Damage::InvalidByte(pos, b) => {
                let pos = pos.index(lines[i].len() + 1);
                lines[i].insert(pos, 0x80 | (b & 0x7F) | if b % 2 == 0 { 0x40 } else { 0 });
            }
            Damage::Tear(pos) => {
                let len = lines[i].len();
                lines[i].truncate(pos.index(len + 1));
            }
        }
    }
    let mut bytes = if bom {
        "\u{FEFF}".as_bytes().to_vec()
    } else {
        Vec::new()
    };
    bytes.extend(lines.join(&b'\n'));
    if final_newline {
        bytes.push(b'\n');
    }
    bytes
}

proptest! {
    #![proptest_config(cases(512))]

    /// Cut into any number of chunks, read on as many threads, a file replays to exactly
    /// what one pass gives: the same records, the same skipped lines with their numbers, the
    /// same error; and the reader reports the same bytes read.
    #[test]
    fn parallel_reading_replays_exactly_as_one_pass(
        version in prop::option::of(1i64..=6),
        items in prop::collection::vec(patch_item(), 0..24),
        damage in prop::collection::vec(damage(), 0..8),
        bom in any::<bool>(),
        final_newline in any::<bool>(),
        chunks in 2usize..40,
    ) {
        let bytes = damaged_file(version, &items, &damage, bom, final_newline);
        let one_pass = parse_session_reader(&bytes[..]);
        let newlines = bytes.iter().filter(|&&b| b == b'\n').count();
        let invalid = std::str::from_utf8(&bytes).err().map(|e| e.valid_up_to() as u64);
        let tail = &bytes[bytes.len().saturating_sub(TAIL)..];
        for k in [1, 2, 3, chunks] {
            let lines = read_lines_in(&bytes[..], 0, bytes.len() as u64, 1, k);
            prop_assert_eq!(lines.newlines, newlines);
            prop_assert_eq!(lines.count, newlines + usize::from(!bytes.ends_with(b"\n") && !bytes.is_empty()));
            prop_assert_eq!(lines.end, bytes.len() as u64);
            prop_assert_eq!(lines.invalid_utf8, invalid);
            prop_assert_eq!(&lines.tail[..], tail);
            match (replay_lines(lines), &one_pass) {
                (Ok(parallel), Ok(one)) => {
                    prop_assert_eq!(&parallel.records, &one.records, "{} chunks", k);
                    prop_assert_eq!(&parallel.skipped, &one.skipped, "{} chunks", k);
                    // The summaries taken on the threads index exactly as the records do.
                    let summaries = parallel.summaries.expect("summaries");
                    let records = parallel.records;
                    prop_assert_eq!(
                        Session::from_summarized(records.clone(), &summaries),
                        Session::from_records(records)
                    );
                }
                (Err(parallel), Err(one)) => prop_assert_eq!(parallel.to_string(), one.to_string()),
                (parallel, one) => prop_assert!(false, "{} chunks: {:?} vs {:?}", k, parallel.map(|r| r.records.len()), one.as_ref().map(|r| r.records.len())),
            }
        }
    }
}
