//! The session format's own words: the member names, roles and other short strings that
//! nearly every entry or message holds (a word rarer than about one record in two hundred
//! is not worth listing). The parser shares them ([`super::JsString::Static`]) instead of
//! allocating each one for every record: a large session holds a few million of them.
//!
//! The lookup is a small open-addressing table keyed by a cheap hash of the length and
//! three bytes, built once; a miss costs one or two comparisons.

use std::sync::OnceLock;

const WORDS: &[&str] = &[
    // Members of entries and of their messages.
    "type",
    "id",
    "parentId",
    "timestamp",
    "message",
    "role",
    "content",
    "api",
    "provider",
    "model",
    "usage",
    "stopReason",
    "errorMessage",
    "responseId",
    "toolCallId",
    "toolName",
    "isError",
    "details",
    "duration",
    "ttft",
    "attribution",
    "providerPayload",
    "thinkingLevel",
    "customType",
    "data",
    "display",
    "summary",
    "firstKeptEntryId",
    "tokensBefore",
    "targetId",
    "label",
    // Roles and stop reasons.
    "user",
    "assistant",
    "toolResult",
    "bashExecution",
    "custom",
    "stop",
    "toolUse",
    "length",
    "error",
    "aborted",
    // Message APIs and providers.
    "anthropic-messages",
    "openai-responses",
    "openai-completions",
    "anthropic",
    "openai",
];

/// The length of the longest word.
const LONGEST: usize = 18;

const SLOTS: usize = 256;

fn slot(text: &[u8]) -> usize {
    let (first, middle, last) = (text[0], text[text.len() / 2], text[text.len() - 1]);
    let h = (text.len() as u32)
        .wrapping_mul(0x9E37_79B9)
        .wrapping_add(u32::from(first).wrapping_mul(0x85EB_CA6B))
        .wrapping_add(u32::from(middle).wrapping_mul(0xC2B2_AE35))
        .wrapping_add(u32::from(last).wrapping_mul(0x27D4_EB2F));
    (h ^ (h >> 15)) as usize % SLOTS
}

fn table() -> &'static [Option<&'static str>; SLOTS] {
    static TABLE: OnceLock<[Option<&'static str>; SLOTS]> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = [None; SLOTS];
        for word in WORDS {
            let mut at = slot(word.as_bytes());
            while table[at].is_some() {
                at = (at + 1) % SLOTS;
            }
            table[at] = Some(*word);
        }
        table
    })
}

/// The shared copy of `text`, when it is one of the format's words.
pub(super) fn word(text: &str) -> Option<&'static str> {
    if text.is_empty() || text.len() > LONGEST {
        return None;
    }
    let table = table();
    let mut at = slot(text.as_bytes());
    while let Some(word) = table[at] {
        if word == text {
            return Some(word);
        }
        at = (at + 1) % SLOTS;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_and_nothing_else_is_found() {
        for w in WORDS {
            assert_eq!(word(w), Some(*w));
            assert_eq!(word(&format!("{w}x")), None);
        }
        assert_eq!(word(""), None);
        assert_eq!(word("anthropic-messagesx"), None);
        let longest = WORDS.iter().map(|w| w.len()).max().unwrap();
        assert_eq!(longest, LONGEST);
    }

    #[test]
    fn a_shared_word_is_the_same_string_as_an_allocated_one() {
        use super::super::{parse, JsString, Value};
        use std::hash::BuildHasher;
        let Value::Object(parsed) = parse(r#"{"type":"message"}"#).unwrap() else {
            panic!("an object");
        };
        let (key, value) = parsed.iter().next().unwrap();
        assert!(matches!(key, JsString::Static("type")));
        let built = JsString::from("type");
        assert_eq!(*key, built);
        let hasher = std::collections::hash_map::RandomState::new();
        assert_eq!(hasher.hash_one(key), hasher.hash_one(&built));
        assert_eq!(value, &Value::string("message"));
        assert_eq!(
            super::super::to_compact(&Value::Object(parsed.clone())),
            r#"{"type":"message"}"#
        );
    }
}
