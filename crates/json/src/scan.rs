//! Finding where a string's text stops: at a quote, a backslash or a control character
//! (the "stop bytes" of the string grammar).
//!
//! Two scans, both exact and both safe on any input:
//! - [`next_string_stop`] finds the first stop byte, eight bytes at a time. Callers that
//!   act on each stop (decoding, escaping) use it.
//! - [`string_end`] skips a whole string body, 64 bytes at a time: it takes a block's
//!   backslashes and its quotes and control characters as two 64-bit masks, walks the
//!   backslashes to mark the bytes they escape, and ends the string at the first quote or
//!   control character left, so an escape costs a few bit operations instead of a new
//!   scan. Text escapes a newline or a quote every dozen bytes or so, and with a scan per
//!   stop most of the time went to restarting it. Anything that
//!   is not a plain escape or the closing quote (a control character, a bad escape, the
//!   last 63 bytes of the input) is handed back to the caller's byte-by-byte path, which
//!   reports errors, so both paths accept and refuse exactly the same texts.

/// The position of the first string stop byte ([`is_string_stop`]) at or after `from`, or
/// `bytes.len()`.
///
/// Long strings dominate session files, so the scan looks at eight bytes at a time; only
/// the last few bytes are stepped through one by one.
pub(super) fn next_string_stop(bytes: &[u8], from: usize) -> usize {
    let mut pos = from;
    while let Some(chunk) = bytes.get(pos..pos + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let stops = string_stops(u64::from_le_bytes(word));
        if stops != 0 {
            return pos + (stops.trailing_zeros() / 8) as usize;
        }
        pos += 8;
    }
    while let Some(&b) = bytes.get(pos) {
        if is_string_stop(b) {
            break;
        }
        pos += 1;
    }
    pos
}

/// Whether a string scan stops at `b`: a quote, a backslash or a control character.
pub(super) fn is_string_stop(b: u8) -> bool {
    b == b'"' || b == b'\\' || b < 0x20
}

/// The string stop bytes ([`is_string_stop`]) among the eight bytes of `word` (read
/// little-endian, so byte `i` is bits `8i..8i+8`): a mask whose lowest set bit is the high
/// bit of the first stop byte, or 0 when there is none.
///
/// Classic word-at-a-time tests: `(x - 0x01..01) & !x & 0x80..80` flags the zero bytes of
/// `x` (applied to `word` XOR the repeated quote and backslash), and
/// `(word - 0x20..20) & !word & 0x80..80` flags the bytes below 0x20. A flag above a true
/// match can be spurious (a borrow carries into the next byte), but a borrow only starts at a
/// true match, so the lowest flag is always exact. Bytes of 0x80 and above (UTF-8
/// sequences) are never flagged, because `!word` clears their high bit.
fn string_stops(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_byte = |x: u64| x.wrapping_sub(ONES) & !x;
    let quote = zero_byte(word ^ (ONES * u64::from(b'"')));
    let backslash = zero_byte(word ^ (ONES * u64::from(b'\\')));
    let control = word.wrapping_sub(ONES * 0x20) & !word;
    (quote | backslash | control) & HIGH
}

/// Where the string body starting at `from` ends, if its text is plain: `Ok` with the
/// position just past the closing quote when every escape before it is one of JSON's and
/// no control character comes first; otherwise `Err` with a position to go on from byte by
/// byte, at or before the first fault: the start of a block with a bad escape, a control
/// character, or the start of the input's last 63 bytes. Everything before that position
/// is valid string text, and it never lies inside an escape.
///
/// A block's backslashes are walked in order: each that is not itself escaped escapes the
/// next byte. The first quote or control character no escape names ends the string.
pub(super) fn string_end(bytes: &[u8], from: usize) -> Result<usize, usize> {
    let mut pos = from;
    while let Some(block) = bytes.get(pos..pos + 64) {
        let stops = block_stops(block);
        // The bytes of the block escapes name, and whether the last byte escapes the
        // next block's first.
        let mut escaped = 0u64;
        let mut carried = 0;
        let mut backslashes = stops.backslashes;
        while backslashes != 0 {
            let i = backslashes.trailing_zeros() as usize;
            // The escaped byte is text, even a backslash.
            backslashes &= !(3u64 << i);
            if !is_plain_escape(bytes, pos + i) {
                return Err(pos);
            }
            if i == 63 {
                carried = 1;
            } else {
                escaped |= 2 << i;
            }
        }
        let ends = stops.ends & !escaped;
        if ends != 0 {
            let at = pos + ends.trailing_zeros() as usize;
            return if bytes[at] == b'"' {
                Ok(at + 1)
            } else {
                Err(at)
            };
        }
        pos += 64 + carried;
    }
    Err(pos)
}

/// The bytes that follow a backslash in a two-byte escape.
const SIMPLE_ESCAPES: [bool; 256] = {
    let mut table = [false; 256];
    let mut k = 0;
    let simple = b"\"\\/bfnrt";
    while k < simple.len() {
        table[simple[k] as usize] = true;
        k += 1;
    }
    table
};

/// Whether the backslash at `at` starts an escape JSON has.
fn is_plain_escape(bytes: &[u8], at: usize) -> bool {
    match bytes.get(at + 1) {
        Some(&c) if SIMPLE_ESCAPES[c as usize] => true,
        Some(b'u') => bytes
            .get(at + 2..at + 6)
            .is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit)),
        _ => false,
    }
}

/// The stop bytes of a 64-byte block, as two masks over its bytes (bit `i`: `block[i]`).
#[derive(Debug, PartialEq, Eq)]
struct BlockStops {
    /// The backslashes.
    backslashes: u64,
    /// The quotes and the control characters.
    ends: u64,
}

/// The stop bytes of a 64-byte block.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
fn block_stops(block: &[u8]) -> BlockStops {
    // SAFETY: the build's target has SSE2 (every x86-64 processor does).
    unsafe { sse2_block_stops(block) }
}

/// [`block_stops`] with SSE2: sixteen bytes compared at a time.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "sse2")]
fn sse2_block_stops(block: &[u8]) -> BlockStops {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    assert!(block.len() >= 64);
    let quote = _mm_set1_epi8(b'"' as i8);
    let backslash = _mm_set1_epi8(b'\\' as i8);
    let below_space = _mm_set1_epi8(0x1F);
    let mut stops = BlockStops {
        backslashes: 0,
        ends: 0,
    };
    for (k, lane) in block[..64].chunks_exact(16).enumerate() {
        // SAFETY: `lane` holds 16 readable bytes, and the load takes no alignment.
        let x = unsafe { _mm_loadu_si128(lane.as_ptr().cast::<__m128i>()) };
        // A byte is below 0x20 exactly when its unsigned maximum with 0x1F is 0x1F.
        let control = _mm_cmpeq_epi8(_mm_max_epu8(x, below_space), below_space);
        let ends = _mm_or_si128(_mm_cmpeq_epi8(x, quote), control);
        let bits = |v| u64::from(_mm_movemask_epi8(v) as u16) << (16 * k);
        stops.backslashes |= bits(_mm_cmpeq_epi8(x, backslash));
        stops.ends |= bits(ends);
    }
    stops
}

/// The stop bytes of a 64-byte block.
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
fn block_stops(block: &[u8]) -> BlockStops {
    portable_block_stops(block)
}

/// [`block_stops`] without vector instructions: exact per-byte tests on eight bytes at a
/// time (no carry crosses a byte), each word's flags gathered into eight bits.
#[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
fn portable_block_stops(block: &[u8]) -> BlockStops {
    const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // The high bit of each byte of `x` that is zero.
    let zero = |x: u64| !(((x & LOW7) + LOW7) | x) & HIGH;
    // The high bits of eight bytes gathered into eight bits: byte `i` to bit `i`.
    let gather = |flags: u64| (flags >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56;
    let mut stops = BlockStops {
        backslashes: 0,
        ends: 0,
    };
    for (k, chunk) in block[..64].chunks_exact(8).enumerate() {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        let quote = zero(w ^ 0x2222_2222_2222_2222);
        // Below 0x20: the high bit clear and the low seven bits plus 0x60 still below 0x80.
        let control = !(((w & LOW7) + 0x6060_6060_6060_6060) | w) & HIGH;
        stops.backslashes |= gather(zero(w ^ 0x5C5C_5C5C_5C5C_5C5C)) << (8 * k);
        stops.ends |= gather(quote | control) << (8 * k);
    }
    stops
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first_stop(bytes: &[u8], from: usize) -> usize {
        bytes[from..]
            .iter()
            .position(|&b| is_string_stop(b))
            .map_or(bytes.len(), |at| from + at)
    }

    /// Pseudo-random bytes (xorshift), a stop byte about one in `one_in`.
    fn noise(seed: u64, len: usize, one_in: u64) -> Vec<u8> {
        let mut x = seed;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let b = x as u8;
                if (x >> 32).is_multiple_of(one_in) {
                    [b'"', b'\\', b % 0x20][(x >> 40) as usize % 3]
                } else if is_string_stop(b) {
                    b | 0x40
                } else {
                    b
                }
            })
            .collect()
    }

    #[test]
    fn word_scan_finds_the_first_stop_byte() {
        let first = |word: u64| word.to_le_bytes().into_iter().position(is_string_stop);
        let word_scan = |word: u64| {
            let stops = string_stops(word);
            (stops != 0).then_some((stops.trailing_zeros() / 8) as usize)
        };
        // Every byte value at every position, among plain ASCII and non-ASCII neighbours.
        for fill in [b'a', 0x20, 0x21, 0x7F, 0x80, 0xC3, 0xFF] {
            for at in 0..8 {
                for b in 0..=255u8 {
                    let mut bytes = [fill; 8];
                    bytes[at] = b;
                    let word = u64::from_le_bytes(bytes);
                    assert_eq!(word_scan(word), first(word), "{bytes:?}");
                }
            }
        }
        // Pseudo-random words, including several stop bytes at once.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            assert_eq!(word_scan(x), first(x), "{:016x}", x);
        }
    }

    #[test]
    fn the_scan_stops_at_the_first_stop_byte_from_every_start() {
        // Runs of plain bytes (ASCII and not) of every length up to three blocks, with a
        // stop byte of each kind, or none, at the end.
        for len in 0..50 {
            for fill in [b'a', 0x20, 0x7F, 0x80, 0xE9, 0xFF] {
                for end in [None, Some(b'"'), Some(b'\\'), Some(0x00), Some(0x1F)] {
                    let mut bytes = vec![fill; len];
                    bytes.extend(end);
                    for from in 0..=bytes.len().min(20) {
                        assert_eq!(
                            next_string_stop(&bytes, from),
                            first_stop(&bytes, from),
                            "{bytes:?} from {from}"
                        );
                    }
                }
            }
        }
        let bytes = noise(0x2545_F491_4F6C_DD1D, 4096, 16);
        for from in 0..bytes.len() {
            assert_eq!(next_string_stop(&bytes, from), first_stop(&bytes, from));
        }
    }

    /// The stop bytes of a block, one byte at a time.
    fn stops_of(block: &[u8]) -> BlockStops {
        let mask = |test: fn(u8) -> bool| {
            (0..64)
                .filter(|&i| test(block[i]))
                .fold(0, |m, i| m | 1 << i)
        };
        BlockStops {
            backslashes: mask(|b| b == b'\\'),
            ends: mask(|b| b == b'"' || b < 0x20),
        }
    }

    #[test]
    fn a_blocks_mask_flags_exactly_its_stop_bytes() {
        // Every byte value at every position, among neighbours of every kind.
        for fill in [b'a', 0x00, 0x1F, 0x20, b'"', b'\\', 0x7F, 0x80, 0xE9, 0xFF] {
            for at in 0..64 {
                for b in 0..=255u8 {
                    let mut block = [fill; 64];
                    block[at] = b;
                    assert_eq!(block_stops(&block), stops_of(&block), "{b} at {at}");
                    assert_eq!(
                        portable_block_stops(&block),
                        stops_of(&block),
                        "{b} at {at}"
                    );
                }
            }
        }
        for one_in in [2, 7, 64] {
            let bytes = noise(0x9E37_79B9_7F4A_7C15 ^ one_in, 64 * 500, one_in);
            for block in bytes.chunks_exact(64) {
                assert_eq!(block_stops(block), stops_of(block));
                assert_eq!(portable_block_stops(block), stops_of(block));
            }
        }
    }

    /// [`string_end`] one byte at a time.
    fn string_end_by_byte(bytes: &[u8], from: usize) -> Result<usize, usize> {
        let mut at = from;
        loop {
            match bytes.get(at) {
                Some(b'"') => return Ok(at + 1),
                Some(b'\\') if is_plain_escape(bytes, at) => {
                    at += if bytes[at + 1] == b'u' { 6 } else { 2 }
                }
                Some(b'\\') => return Err(at),
                Some(&b) if b < 0x20 => return Err(at),
                Some(_) => at += 1,
                None => return Err(at),
            }
        }
    }

    /// Whether `fast` agrees with the byte-by-byte scan: the same end, or a position to go
    /// on from at or before the byte-by-byte answer's, from which that answer follows.
    fn agrees(bytes: &[u8], from: usize) {
        let slow = string_end_by_byte(bytes, from);
        match string_end(bytes, from) {
            Ok(end) => assert_eq!(Ok(end), slow, "{bytes:?} from {from}"),
            Err(resume) => {
                let (Ok(s) | Err(s)) = slow;
                assert!(resume <= s, "{bytes:?} from {from}: {resume} past {s}");
                assert!(resume >= from);
                assert_eq!(string_end_by_byte(bytes, resume), slow);
                // It gives up only at a fault, near the end, or before a bad escape.
                let stop = bytes.get(resume).is_some_and(|&b| is_string_stop(b));
                let block = resume..bytes.len().min(resume + 64);
                let bad_escape = block
                    .into_iter()
                    .any(|i| bytes[i] == b'\\' && !is_plain_escape(bytes, i));
                assert!(
                    stop || bad_escape || bytes.len() - resume < 64,
                    "resumes at {resume}"
                );
            }
        }
    }

    #[test]
    fn a_string_ends_where_the_byte_by_byte_scan_says() {
        // Escapes of every kind straddling every block boundary, then the closing quote.
        for escape in [
            &br#"\n"#[..],
            br#"\""#,
            br#"\\"#,
            br#"\u00e9"#,
            br#"\u12"#,
            br#"\x"#,
        ] {
            for before in 50..140 {
                let mut bytes = vec![b'a'; before];
                bytes.extend_from_slice(escape);
                bytes.extend_from_slice(b"tail\"");
                bytes.extend(std::iter::repeat_n(b'z', 70));
                for from in [0, 1, 13, 63, 64] {
                    agrees(&bytes, from);
                }
            }
        }
        // A backslash run of every length before a quote: escaped or closing.
        for run in 0..8 {
            let mut bytes = vec![b'x'; 60];
            bytes.extend(std::iter::repeat_n(b'\\', run));
            bytes.extend_from_slice(b"\"more\"");
            bytes.extend(std::iter::repeat_n(b'y', 80));
            agrees(&bytes, 0);
        }
        // Random text with stops of every kind, dense and sparse, from every start.
        for one_in in [3, 12, 100] {
            let bytes = noise(0x2545_F491_4F6C_DD1D ^ one_in, 2048, one_in);
            for from in 0..bytes.len() {
                agrees(&bytes, from);
            }
        }
    }
}
