//! Entry and session identifiers.
//!
//! - An entry id is the last 8 hex characters of a random UUID v4. Up to 100 draws are
//!   checked against the ids in use; if all collide, a 16-hex-digit snowflake is used:
//!   `((ms − 1420070400000) << 22) | seq`, with a process-wide 22-bit counter that starts at a
//!   random value.
//! - A session id is a lower-case UUID v7.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

const SNOWFLAKE_EPOCH_MS: u64 = 1_420_070_400_000;
const ID_ATTEMPTS: usize = 100;

/// A new entry id not accepted by `in_use` (an 8-hex id, or a snowflake after 100 clashes).
pub fn new_entry_id(mut in_use: impl FnMut(&str) -> bool) -> String {
    for _ in 0..ID_ATTEMPTS {
        let uuid = uuid::Uuid::new_v4().simple().to_string();
        let id = uuid[uuid.len() - 8..].to_owned();
        if !in_use(&id) {
            return id;
        }
    }
    snowflake()
}

/// A process-unique 16-hex-digit time-ordered id.
pub fn snowflake() -> String {
    static SEQ: OnceLock<AtomicU32> = OnceLock::new();
    let seq = SEQ
        .get_or_init(|| AtomicU32::new(rand::random::<u32>()))
        .fetch_add(1, Ordering::Relaxed)
        & 0x3F_FFFF;
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let value = (ms.saturating_sub(SNOWFLAKE_EPOCH_MS) << 22) | seq as u64;
    format!("{value:016x}")
}

/// The id an entry of a file without ids (v1) is given when it is migrated: derived from the
/// file itself, so that the same bytes give the same ids in every load and process, and
/// the first write persists exactly the ids shown before it. The SHA-256 of the session id,
/// the entry's place among the file's records, its type and its timestamp is read eight hex
/// digits at a time until one is not `in_use`; past its eight windows, the next digest (a
/// round counter is added) — deterministic in file order. The original draws random ids
/// here (see `docs/FORMAT.md`).
pub fn derived_entry_id(
    session_id: &str,
    index: usize,
    ty: &str,
    timestamp: &str,
    mut in_use: impl FnMut(&str) -> bool,
) -> String {
    use sha2::{Digest, Sha256};
    for round in 0u64.. {
        let mut hasher = Sha256::new();
        for part in [
            session_id,
            &index.to_string(),
            ty,
            timestamp,
            &round.to_string(),
        ] {
            hasher.update(part.as_bytes());
            hasher.update([0]);
        }
        let hex = crate::format::blob::hex(&hasher.finalize());
        for window in 0..8 {
            let id = &hex[window * 8..window * 8 + 8];
            if !in_use(id) {
                return id.to_owned();
            }
        }
    }
    unreachable!("the rounds never end")
}

/// A new session id: a lower-case UUID v7.
pub fn new_session_id() -> String {
    uuid::Uuid::now_v7().hyphenated().to_string()
}

/// Whether `id` has the shape of a generated entry id (8 lower-case hex characters).
pub fn is_short_entry_id(id: &str) -> bool {
    id.len() == 8 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_ids_are_eight_hex_and_avoid_collisions() {
        let id = new_entry_id(|_| false);
        assert!(is_short_entry_id(&id), "{id}");
        let fallback = new_entry_id(|_| true);
        assert_eq!(fallback.len(), 16);
        assert!(fallback.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(snowflake(), snowflake());
    }

    #[test]
    fn derived_ids_depend_on_the_file_only_and_avoid_those_in_use() {
        let a = derived_entry_id("s", 1, "message", "t", |_| false);
        assert!(is_short_entry_id(&a), "{a}");
        assert_eq!(a, derived_entry_id("s", 1, "message", "t", |_| false));
        assert_ne!(a, derived_entry_id("s", 2, "message", "t", |_| false));
        assert_ne!(a, derived_entry_id("other", 1, "message", "t", |_| false));
        assert_ne!(a, derived_entry_id("s", 1, "message", "t2", |_| false));
        // A clash takes the next window, the same one each time.
        let next = derived_entry_id("s", 1, "message", "t", |id| id == a);
        assert_ne!(next, a);
        assert_eq!(next, derived_entry_id("s", 1, "message", "t", |id| id == a));
        // Every window taken: the next round.
        let mut refused = 0;
        let late = derived_entry_id("s", 1, "message", "t", |_| {
            refused += 1;
            refused <= 8
        });
        assert!(is_short_entry_id(&late));
    }

    #[test]
    fn session_ids_are_uuid_v7() {
        let id = new_session_id();
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "7");
        assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"));
    }
}
