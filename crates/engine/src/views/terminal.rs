//! A terminal's control sequences in text read from sessions (tool output keeps the colour
//! codes of the programs the agent ran): recognised here once, so that every reading view
//! and every snippet drops the same ones, and none reaches a terminal that prints a view.
//!
//! Recognised, and dropped whole:
//! - CSI: ESC `[` (or U+009B), parameter and intermediate characters (U+0020–U+003F), one
//!   final character (`@`–`~`); a character that is neither ends the sequence and is text;
//! - OSC: ESC `]` up to BEL or ESC `\` (window titles, hyperlinks);
//! - any other ESC sequence: ESC, intermediate characters (U+0020–U+002F), one final
//!   character (`ESC ( B`, `ESC 7`, `ESC c`).

use std::borrow::Cow;

/// Where a text is in a control sequence, read one character at a time.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Escapes {
    state: State,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum State {
    #[default]
    Text,
    /// After ESC.
    Esc,
    /// After ESC and intermediate characters.
    EscIntermediate,
    /// Inside a CSI sequence.
    Csi,
    /// Inside an OSC string.
    Osc,
    /// After ESC inside an OSC string.
    OscEsc,
}

impl Escapes {
    /// Whether `c`, the next character, belongs to a control sequence (and is not shown).
    pub fn hides(&mut self, c: char) -> bool {
        let (next, hidden) = match (self.state, c) {
            (State::Text, '\u{1b}') => (State::Esc, true),
            (State::Text, '\u{9b}') => (State::Csi, true),
            (State::Text, _) => (State::Text, false),
            (State::Esc, '[') => (State::Csi, true),
            (State::Esc, ']') => (State::Osc, true),
            (State::Esc | State::EscIntermediate, '\u{20}'..='\u{2f}') => {
                (State::EscIntermediate, true)
            }
            (State::Esc | State::EscIntermediate, _) => (State::Text, true),
            (State::Csi, '\u{20}'..='\u{3f}') => (State::Csi, true),
            (State::Csi, '@'..='~') => (State::Text, true),
            (State::Csi, _) => (State::Text, false),
            (State::Osc, '\u{7}') => (State::Text, true),
            (State::Osc, '\u{1b}') => (State::OscEsc, true),
            (State::Osc, _) => (State::Osc, true),
            (State::OscEsc, _) => (State::Text, true),
        };
        self.state = next;
        hidden
    }
}

/// `text` without its control sequences and without the control characters a terminal
/// acts on (carriage returns, backspaces, bells…): newlines and tabs stay.
pub fn without_escapes(text: &str) -> Cow<'_, str> {
    let kept = |c: char| c == '\n' || c == '\t' || !c.is_control();
    if text.chars().all(kept) {
        return Cow::Borrowed(text);
    }
    let mut escapes = Escapes::default();
    Cow::Owned(
        text.chars()
            .filter(|&c| !escapes.hides(c) && kept(c))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_titles_and_controls_are_dropped_and_the_text_kept() {
        assert_eq!(without_escapes("plain\ttext\n"), "plain\ttext\n");
        assert!(matches!(without_escapes("plain"), Cow::Borrowed(_)));
        assert_eq!(
            without_escapes("\u{1b}[31m✗\u{1b}[0m failed\r\n"),
            "✗ failed\n"
        );
        assert_eq!(
            without_escapes("\u{1b}]0;title\u{7}a\u{1b}]8;;http://x\u{1b}\\link"),
            "alink"
        );
        assert_eq!(without_escapes("\u{9b}1;2Hx\u{1b}(By\u{1b}7z"), "xyz");
        // A CSI cut short: what follows is text.
        assert_eq!(without_escapes("\u{1b}[12\u{e9}t\u{1b}"), "\u{e9}t");
    }
}
