//! What a word is, for the index and for every query: the one definition.
//!
//! Text is lower-cased one character at a time (each character's full lower case,
//! [`char::to_lowercase`], as a substring query compares text), and the lower-cased text is
//! split into runs of word characters ([`is_word_char`]: Unicode letters and digits, and
//! private-use characters); anything else separates. So `Foo.BAR` holds the words `foo`
//! and `bar`, and accents count (`café` is not `cafe`).
//!
//! The word index is given each document's words as one space-separated string
//! ([`index_text`]) and splits it with FTS5's `ascii` tokenizer, which keeps every
//! non-ASCII byte and ASCII letter or digit inside a token: exactly these words. Queries
//! are split by the same functions, so a word a document holds is the word a query for it
//! asks for.
//!
//! Splitting the lower-cased text (not lower-casing the words of the text) is what lets a
//! substring query name the words it must touch ([`super::substring`]): every match of a
//! substring in the lower-cased text holds its runs of word characters at the same places.

use std::ops::ControlFlow;

/// Whether `c` (a lower-cased character) belongs inside a word.
pub fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || ('\u{E000}'..='\u{F8FF}').contains(&c)
}

/// Calls `f(start, end, word)` for each word of `text`, in order: `start..end` is the byte
/// range of `text` whose characters it came from, `word` the lower-cased word.
pub fn for_each_word(text: &str, mut f: impl FnMut(usize, usize, &str)) {
    try_for_each_word(text, |start, end, word| {
        f(start, end, word);
        ControlFlow::Continue(())
    });
}

/// [`for_each_word`] until `f` breaks.
pub fn try_for_each_word(text: &str, mut f: impl FnMut(usize, usize, &str) -> ControlFlow<()>) {
    // The word being read, and the byte range of `text` it came from so far.
    let mut word = String::new();
    let (mut start, mut end) = (0, 0);
    let bytes = text.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        let b = bytes[at];
        if b.is_ascii() {
            if b.is_ascii_alphanumeric() {
                if word.is_empty() {
                    start = at;
                }
                word.push(b.to_ascii_lowercase() as char);
                end = at + 1;
            } else if !word.is_empty() {
                if f(start, end, &word).is_break() {
                    return;
                }
                word.clear();
            }
            at += 1;
            continue;
        }
        let c = text[at..].chars().next().unwrap_or_default();
        for l in c.to_lowercase() {
            if is_word_char(l) {
                if word.is_empty() {
                    start = at;
                }
                word.push(l);
                end = at + c.len_utf8();
            } else if !word.is_empty() {
                if f(start, end, &word).is_break() {
                    return;
                }
                word.clear();
            }
        }
        at += c.len_utf8();
    }
    if !word.is_empty() {
        let _ = f(start, end, &word);
    }
}

/// The words of `text` with the byte ranges they came from ([`for_each_word`]).
pub fn words(text: &str) -> Vec<(usize, usize, String)> {
    let mut out = Vec::new();
    for_each_word(text, |s, e, w| out.push((s, e, w.to_owned())));
    out
}

/// The lower-cased words of `text` alone.
pub fn word_list(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_word(text, |_, _, w| out.push(w.to_owned()));
    out
}

/// What the word index is given of `text`: its words, space-separated.
pub fn index_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for_each_word(text, |_, _, w| {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    });
    out
}

/// `text` lower-cased one character at a time, as words and substrings compare it.
pub fn fold(text: &str) -> String {
    if text.is_ascii() {
        return text.to_ascii_lowercase();
    }
    text.chars().flat_map(char::to_lowercase).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The definition, one character at a time: each character's lower case, split into
    /// runs of word characters.
    fn by_definition(text: &str) -> Vec<(usize, usize, String)> {
        let mut out: Vec<(usize, usize, String)> = Vec::new();
        let mut open = false;
        for (at, c) in text.char_indices() {
            for l in c.to_lowercase() {
                if !is_word_char(l) {
                    open = false;
                    continue;
                }
                match out.last_mut() {
                    Some(last) if open => {
                        last.1 = at + c.len_utf8();
                        last.2.push(l);
                    }
                    _ => out.push((at, at + c.len_utf8(), l.to_string())),
                }
                open = true;
            }
        }
        out
    }

    proptest! {
        #[test]
        fn words_are_the_definitions(
            text in proptest::collection::vec(
                prop_oneof![
                    4 => proptest::char::range('0', 'z'),
                    2 => Just(' '),
                    1 => proptest::sample::select(vec![
                        'é', 'İ', 'K', '\u{212A}', 'ß', 'Σ', '\u{E000}', '_', '-', '—', '\n',
                        '\u{301}', 'ǅ', '日',
                    ]),
                    1 => any::<char>(),
                ],
                0..40,
            ).prop_map(|cs| cs.into_iter().collect::<String>())
        ) {
            prop_assert_eq!(words(&text), by_definition(&text));
        }

        #[test]
        fn the_words_of_ascii_text_are_the_definitions(text in "[ -~\t\n]{0,60}") {
            prop_assert!(text.is_ascii());
            prop_assert_eq!(words(&text), by_definition(&text));
        }
    }

    #[test]
    fn words_are_runs_of_word_characters_of_the_lower_cased_text() {
        assert_eq!(
            words("  Héllo, W0rld_x!"),
            [
                (2, 8, "héllo".to_owned()),
                (10, 15, "w0rld".to_owned()),
                (16, 17, "x".to_owned())
            ]
        );
        assert_eq!(word_list("Foo.BAR baz"), ["foo", "bar", "baz"]);
        // Each character's own lower case: a final capital sigma is σ, not ς.
        assert_eq!(word_list("ΟΔΟΣ"), ["οδοσ"]);
        // İ lower-cases to i and a combining dot, which is no word character: the word
        // ends there, and its range covers the whole İ.
        assert_eq!(
            words("İx"),
            [(0, 2, "i".to_owned()), (2, 3, "x".to_owned())]
        );
        assert_eq!(index_text("A-b  c\u{E000}"), "a b c\u{E000}");
        assert_eq!(index_text(" -- "), "");
        assert_eq!(fold("ÀB"), "àb");
    }

    #[test]
    fn the_index_text_is_the_words_space_separated() {
        for text in [
            "Parser failed: torn_line 42x",
            "  a.b-c d\te\nf ",
            "İstanbul ΟΔΟΣ straße — café…x",
            "",
            "--",
        ] {
            assert_eq!(index_text(text), word_list(text).join(" "), "{text:?}");
        }
    }

    #[test]
    fn ascii_and_other_text_split_alike() {
        for text in ["Parser failed: torn_line 42x", "a.b-c d\te\nf"] {
            let mut other = text.to_owned();
            other.push('é');
            let mut want = word_list(text);
            // The é joins the last word.
            let last = want.last_mut().unwrap();
            last.push('é');
            assert_eq!(word_list(&other), want, "{text}");
        }
    }
}
