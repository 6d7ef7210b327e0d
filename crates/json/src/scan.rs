//! Finding where a string's text stops: at a quote, a backslash or a control character
//! (the "stop bytes" of the string grammar).
//!
//! Two scans, both exact and both safe on any input:
//! - [`next_string_stop`] finds the first stop byte, eight bytes at a time. Callers that
//!   act on each stop (decoding, escaping) use it.
//! - [`string_end`] skips a whole string body, 64 bytes at a time: it takes the stop bytes
//!   of a block as one 64-bit mask and walks its bits, so an escape costs a few bit
//!   operations instead of a new scan. Text escapes a newline or a quote every dozen bytes
//!   or so, and with a scan per stop most of the time went to restarting it. Anything that
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
/// no control character comes first; otherwise `Err` with the position to go on from byte
/// by byte — a stop byte that is not a plain escape, or the start of the input's last 63
/// bytes. Everything before that position is valid string text, and it never lies inside
/// an escape.
pub(super) fn string_end(bytes: &[u8], from: usize) -> Result<usize, usize> {
    let mut pos = from;
    while let Some(block) = bytes.get(pos..pos + 64) {
        let mut stops = block_stops(block);
        // The first index of the block not yet covered by an escape.
        let mut next = 0;
        while stops != 0 {
            let i = stops.trailing_zeros() as usize;
            stops &= stops - 1;
            if i < next {
                // The quote or backslash an escape names.
                continue;
            }
            let at = pos + i;
            match bytes[at] {
                b'"' => return Ok(at + 1),
                b'\\' => next = i + escape_len(bytes, at).ok_or(at)?,
                _ => return Err(at),
            }
        }
        pos += next.max(64);
    }
    Err(pos)
}

/// The length of the escape whose backslash is at `at`, if it is one JSON has.
fn escape_len(bytes: &[u8], at: usize) -> Option<usize> {
    match bytes.get(at + 1)? {
        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some(2),
        b'u' => bytes
            .get(at + 2..at + 6)?
            .iter()
            .all(u8::is_ascii_hexdigit)
            .then_some(6),
        _ => None,
    }
}

/// The stop bytes of a 64-byte block: bit `i` is set when `block[i]` is one.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
fn block_stops(block: &[u8]) -> u64 {
    // SAFETY: the build's target has SSE2 (every x86-64 processor does).
    unsafe { sse2_block_stops(block) }
}

/// [`block_stops`] with SSE2: sixteen bytes compared at a time.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "sse2")]
fn sse2_block_stops(block: &[u8]) -> u64 {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    assert!(block.len() >= 64);
    let quote = _mm_set1_epi8(b'"' as i8);
    let backslash = _mm_set1_epi8(b'\\' as i8);
    let below_space = _mm_set1_epi8(0x1F);
    let mut mask = 0u64;
    for (k, lane) in block[..64].chunks_exact(16).enumerate() {
        // SAFETY: `lane` holds 16 readable bytes, and the load takes no alignment.
        let x = unsafe { _mm_loadu_si128(lane.as_ptr().cast::<__m128i>()) };
        // A byte is below 0x20 exactly when its unsigned maximum with 0x1F is 0x1F.
        let control = _mm_cmpeq_epi8(_mm_max_epu8(x, below_space), below_space);
        let stops = _mm_or_si128(
            _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)),
            control,
        );
        mask |= u64::from(_mm_movemask_epi8(stops) as u16) << (16 * k);
    }
    mask
}

/// The stop bytes of a 64-byte block: bit `i` is set when `block[i]` is one.
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
fn block_stops(block: &[u8]) -> u64 {
    portable_block_stops(block)
}

/// [`block_stops`] without vector instructions: exact per-byte tests on eight bytes at a
/// time (no borrow crosses a byte), each word's flags gathered into eight bits.
#[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
fn portable_block_stops(block: &[u8]) -> u64 {
    const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // The high bit of each byte of `x` that is zero.
    let zero = |x: u64| !(((x & LOW7) + LOW7) | x) & HIGH;
    let mut mask = 0u64;
    for (k, chunk) in block[..64].chunks_exact(8).enumerate() {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        let quote = zero(w ^ 0x2222_2222_2222_2222);
        let backslash = zero(w ^ 0x5C5C_5C5C_5C5C_5C5C);
        // Below 0x20: the high bit clear and the low seven bits plus 0x60 still below 0x80.
        let control = !(((w & LOW7) + 0x6060_6060_6060_6060) | w) & HIGH;
        let flags = (quote | backslash | control) >> 7;
        // Gather the low bit of each byte into the top byte, byte `i` to bit `56 + i`.
        let gathered = flags.wrapping_mul(0x0102_0408_1020_4080) >> 56;
        mask |= gathered << (8 * k);
    }
    mask
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
    fn stops_of(block: &[u8]) -> u64 {
        (0..64)
            .filter(|&i| is_string_stop(block[i]))
            .fold(0, |m, i| m | 1 << i)
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
                Some(b'\\') => at += escape_len(bytes, at).ok_or(at)?,
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
                let stop = bytes.get(resume).is_some_and(|&b| is_string_stop(b));
                assert!(stop || bytes.len() - resume < 64, "resumes at {resume}");
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
