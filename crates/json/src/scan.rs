//! Finding where a string's text stops: at a quote, a backslash or a control character
//! (the "stop bytes" of the string grammar).
//!
//! Two scans, both exact and both safe on any input:
//! - [`next_string_stop`] finds the first stop byte, eight bytes at a time. Callers that
//!   act on each stop (decoding, escaping) use it.
//! - [`string_end`] skips a whole string body, 64 bytes at a time: it takes a block's
//!   backslashes, its quotes and control characters, and the bytes an escape commonly
//!   names as 64-bit masks, finds the bytes the backslashes escape with a few additions
//!   and shifts ([`escaped_bytes`], no loop over them), and ends the string at the first
//!   quote or control character left. Text escapes a newline or a quote every dozen bytes
//!   or so: with a scan per stop most of the time went to restarting it, and with a loop
//!   over a block's backslashes to mispredicting its end. Only an escape of a byte other
//!   than `"`, `\`, `n` and `t` is looked at on its own. A string whose first stop byte is
//!   its closing quote within eight bytes ends in one word. Anything that is not a plain
//!   escape or the closing quote (a control character, a bad escape, the last 63 bytes of
//!   the input) is handed back to the caller's byte-by-byte path, which reports errors, so
//!   both paths accept and refuse exactly the same texts.

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
/// byte, at or before the first fault: the start of a block with a bad escape (or the
/// backslash before it, when that one escapes the block's first byte), a control
/// character, or where the input's last 63 bytes start (likewise). Everything before that
/// position is valid string text, and it never lies inside an escape.
///
/// Each backslash that is not itself escaped escapes the next byte. The first quote or
/// control character no escape names ends the string.
pub(super) fn string_end(bytes: &[u8], from: usize) -> Result<usize, usize> {
    // Most strings are short (keys, ids, types): a quote among the first eight bytes, with
    // no other stop before it, ends one without a block.
    if let Some(chunk) = bytes.get(from..from + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let stops = string_stops(u64::from_le_bytes(word));
        let at = from + (stops.trailing_zeros() / 8) as usize;
        if stops != 0 && bytes[at] == b'"' {
            return Ok(at + 1);
        }
    }
    blocks_end(bytes, from)
}

/// [`string_end`] a block at a time, with the widest vectors the processor has: AVX2 where
/// it has them (checked once, then read from a cache), SSE2 otherwise.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
fn blocks_end(bytes: &[u8], from: usize) -> Result<usize, usize> {
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor has AVX2, as just checked.
        unsafe { avx2_blocks_end(bytes, from) }
    } else {
        blocks_end_with(bytes, from, block_stops)
    }
}

/// [`blocks_end`] compiled for AVX2, its blocks' stops taken 32 bytes at a time.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "avx2")]
fn avx2_blocks_end(bytes: &[u8], from: usize) -> Result<usize, usize> {
    blocks_end_with(bytes, from, |block| avx2_block_stops(block))
}

/// [`string_end`] a block at a time.
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
fn blocks_end(bytes: &[u8], from: usize) -> Result<usize, usize> {
    blocks_end_with(bytes, from, block_stops)
}

/// [`string_end`] a block at a time, each block's stops taken by `stops_of`.
#[inline(always)]
fn blocks_end_with(
    bytes: &[u8],
    from: usize,
    stops_of: impl Fn(&[u8]) -> BlockStops,
) -> Result<usize, usize> {
    let mut pos = from;
    // 1 when the last byte of the block before escapes this block's first.
    let mut carry = 0u64;
    while let Some(block) = bytes.get(pos..pos + 64) {
        let stops = stops_of(block);
        let escaped = escaped_bytes(stops.backslashes, carry);
        let ends = stops.ends & !escaped;
        // The bytes before the end: all of them when the string goes on.
        let before_end = (ends & ends.wrapping_neg()).wrapping_sub(1);
        let unusual = escaped & !stops.common_escapes & before_end;
        if unusual != 0 && !all_plain_escapes(bytes, pos, unusual) {
            return Err(pos - carry as usize);
        }
        if ends != 0 {
            let at = pos + ends.trailing_zeros() as usize;
            return if bytes[at] == b'"' {
                Ok(at + 1)
            } else {
                Err(at)
            };
        }
        carry = (stops.backslashes & !escaped) >> 63;
        pos += 64;
    }
    Err(pos - carry as usize)
}

/// The bytes of a block that a backslash escapes, given its backslashes and `carry` (1 when
/// the block before ends in a backslash that escapes this block's first byte).
///
/// Backslashes come in runs. A run that starts at `s` (its first backslash not escaped)
/// escapes the bytes after `s` at an odd distance from it, up to the byte after the run:
/// every second backslash of it and, when the run is odd in length, the byte that follows
/// it. Adding to the backslashes the first bit of each run that starts at an even position
/// clears exactly those runs (the carry runs through each and stops past it), which tells
/// the two kinds of run apart without a loop: a run escapes the bytes after its start whose
/// position has the other parity.
fn escaped_bytes(backslashes: u64, carry: u64) -> u64 {
    const EVEN: u64 = 0x5555_5555_5555_5555;
    // A first byte the block before escapes is text, even a backslash.
    let runs = backslashes & !carry;
    let starts = runs & !(runs << 1);
    let from_even = runs & !runs.wrapping_add(starts & EVEN);
    let from_odd = runs & !from_even;
    ((from_even << 1) & !EVEN) | ((from_odd << 1) & EVEN) | carry
}

/// Whether each byte of the block at `pos` that `escaped` flags completes a JSON escape
/// with the backslash before it (which may end the block before).
fn all_plain_escapes(bytes: &[u8], pos: usize, mut escaped: u64) -> bool {
    while escaped != 0 {
        let i = escaped.trailing_zeros() as usize;
        escaped &= escaped - 1;
        if !is_plain_escape(bytes, pos + i - 1) {
            return false;
        }
    }
    true
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

/// The stop bytes of a 64-byte block, as masks over its bytes (bit `i`: `block[i]`).
#[derive(Debug, PartialEq, Eq)]
struct BlockStops {
    /// The backslashes.
    backslashes: u64,
    /// The quotes and the control characters.
    ends: u64,
    /// The bytes that, after a backslash, make the escapes text uses most: `"`, `\\`, `n`,
    /// `t`.
    common_escapes: u64,
}

/// The stop bytes of a 64-byte block.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
fn block_stops(block: &[u8]) -> BlockStops {
    // SAFETY: the build's target has SSE2 (every x86-64 processor does).
    unsafe { sse2_block_stops(block) }
}

/// Defines a [`block_stops`] over vectors of `$width` bytes: the x86-64 intrinsics of one
/// vector width, named by their prefix and the vector type.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
macro_rules! vector_block_stops {
    ($(#[$doc:meta])* $name:ident, $feature:literal, $width:literal, $vector:ident,
     $load:ident, $set1:ident, $cmpeq:ident, $max:ident, $or:ident, $movemask:ident) => {
        $(#[$doc])*
        #[target_feature(enable = $feature)]
        fn $name(block: &[u8]) -> BlockStops {
            use std::arch::x86_64::{$cmpeq, $load, $max, $movemask, $or, $set1, $vector};
            assert!(block.len() >= 64);
            let quote = $set1(b'"' as i8);
            let backslash = $set1(b'\\' as i8);
            let letter_n = $set1(b'n' as i8);
            let letter_t = $set1(b't' as i8);
            let below_space = $set1(0x1F);
            let mut stops = BlockStops {
                backslashes: 0,
                ends: 0,
                common_escapes: 0,
            };
            for (k, lane) in block[..64].chunks_exact($width).enumerate() {
                // SAFETY: `lane` holds `$width` readable bytes, and the load takes no
                // alignment.
                let x = unsafe { $load(lane.as_ptr().cast::<$vector>()) };
                // A byte is below 0x20 exactly when its unsigned maximum with 0x1F is 0x1F.
                let control = $cmpeq($max(x, below_space), below_space);
                let quotes = $cmpeq(x, quote);
                let backslashes = $cmpeq(x, backslash);
                let letters = $or($cmpeq(x, letter_n), $cmpeq(x, letter_t));
                let common = $or($or(quotes, backslashes), letters);
                // The mask of one vector: one bit a byte, as many bits as bytes.
                let bits = |v| {
                    u64::from($movemask(v) as u32 & (u32::MAX >> (32 - $width))) << ($width * k)
                };
                stops.backslashes |= bits(backslashes);
                stops.ends |= bits($or(quotes, control));
                stops.common_escapes |= bits(common);
            }
            stops
        }
    };
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
vector_block_stops!(
    /// [`block_stops`] with SSE2: sixteen bytes compared at a time.
    sse2_block_stops, "sse2", 16, __m128i, _mm_loadu_si128, _mm_set1_epi8, _mm_cmpeq_epi8,
    _mm_max_epu8, _mm_or_si128, _mm_movemask_epi8
);

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
vector_block_stops!(
    /// [`block_stops`] with AVX2: thirty-two bytes compared at a time.
    avx2_block_stops, "avx2", 32, __m256i, _mm256_loadu_si256, _mm256_set1_epi8,
    _mm256_cmpeq_epi8, _mm256_max_epu8, _mm256_or_si256, _mm256_movemask_epi8
);

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
        common_escapes: 0,
    };
    for (k, chunk) in block[..64].chunks_exact(8).enumerate() {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        let quote = zero(w ^ 0x2222_2222_2222_2222);
        let backslash = zero(w ^ 0x5C5C_5C5C_5C5C_5C5C);
        // Below 0x20: the high bit clear and the low seven bits plus 0x60 still below 0x80.
        let control = !(((w & LOW7) + 0x6060_6060_6060_6060) | w) & HIGH;
        let letters = zero(w ^ 0x6E6E_6E6E_6E6E_6E6E) | zero(w ^ 0x7474_7474_7474_7474);
        stops.backslashes |= gather(backslash) << (8 * k);
        stops.ends |= gather(quote | control) << (8 * k);
        stops.common_escapes |= gather(quote | backslash | letters) << (8 * k);
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
            common_escapes: mask(|b| matches!(b, b'"' | b'\\' | b'n' | b't')),
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
                    for (name, stops) in block_scans() {
                        assert_eq!(stops(&block), stops_of(&block), "{name}: {b} at {at}");
                    }
                }
            }
        }
        for one_in in [2, 7, 64] {
            let bytes = noise(0x9E37_79B9_7F4A_7C15 ^ one_in, 64 * 500, one_in);
            for block in bytes.chunks_exact(64) {
                for (name, stops) in block_scans() {
                    assert_eq!(stops(block), stops_of(block), "{name}");
                }
            }
        }
    }

    /// A way to take a block's stops.
    type BlockScan = fn(&[u8]) -> BlockStops;

    /// Every way this build and processor take a block's stops, each by name.
    fn block_scans() -> Vec<(&'static str, BlockScan)> {
        let mut scans: Vec<(&'static str, BlockScan)> =
            vec![("default", block_stops), ("portable", portable_block_stops)];
        scans.extend(avx2_scan());
        scans
    }

    /// The AVX2 way, where the build and the processor have it.
    fn avx2_scan() -> Option<(&'static str, BlockScan)> {
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: only where the processor has AVX2, as just checked.
            return Some(("avx2", |block| unsafe { avx2_block_stops(block) }));
        }
        None
    }

    /// [`escaped_bytes`] one byte at a time: a backslash not itself escaped escapes the
    /// next byte.
    fn escaped_by_byte(backslashes: u64, carry: u64) -> u64 {
        let mut escapes_next = carry == 1;
        let mut escaped = 0;
        for i in 0..64 {
            if escapes_next {
                escaped |= 1 << i;
                escapes_next = false;
            } else {
                escapes_next = backslashes >> i & 1 == 1;
            }
        }
        escaped
    }

    #[test]
    fn escaped_bytes_are_the_ones_a_byte_by_byte_walk_finds() {
        let mut masks = vec![0, u64::MAX, 1, 1 << 63, 0x5555_5555_5555_5555];
        // A run of every length at every position, alone and after another run.
        for len in 1..=64 {
            for at in 0..=64 - len {
                let run = (u64::MAX >> (64 - len)) << at;
                masks.extend([run, run | 1, run | 0b101, run | 1 << 63]);
            }
        }
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Dense and sparse backslashes.
            masks.extend([x, x & x.rotate_left(17), x | x.rotate_left(9)]);
        }
        for backslashes in masks {
            for carry in [0, 1] {
                assert_eq!(
                    escaped_bytes(backslashes, carry),
                    escaped_by_byte(backslashes, carry),
                    "{backslashes:064b} carry {carry}"
                );
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

    /// Whether [`string_end`], and the block scan with each way of taking a block's stops,
    /// agree with the byte-by-byte scan ([`agrees_with`]).
    fn agrees(bytes: &[u8], from: usize) {
        agrees_with(string_end(bytes, from), bytes, from);
        for (name, stops) in block_scans() {
            let by_blocks = blocks_end_with(bytes, from, stops);
            if let Ok(end) = by_blocks {
                assert_eq!(Ok(end), string_end(bytes, from), "{name}");
            }
            agrees_with(by_blocks, bytes, from);
        }
    }

    /// Whether `fast`, a scan's answer, agrees with the byte-by-byte scan: the same end, or
    /// a position to go on from at or before the byte-by-byte answer's, from which that
    /// answer follows.
    fn agrees_with(fast: Result<usize, usize>, bytes: &[u8], from: usize) {
        let slow = string_end_by_byte(bytes, from);
        match fast {
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
        // A backslash run of every length, starting on either side of a block boundary,
        // before a quote, a letter or a bad escape: escaped or closing.
        for start in 54..72 {
            for run in 0..10 {
                for after in [&b"\"more\""[..], b"n\"", b"x\""] {
                    // The input ending soon after, or going on for more than a block.
                    for tail in [0, 80] {
                        let mut bytes = vec![b'x'; start];
                        bytes.extend(std::iter::repeat_n(b'\\', run));
                        bytes.extend_from_slice(after);
                        bytes.extend(std::iter::repeat_n(b'y', tail));
                        for from in [0, 1, 7] {
                            agrees(&bytes, from);
                        }
                    }
                }
            }
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
