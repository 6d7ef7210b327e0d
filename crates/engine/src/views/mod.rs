//! Read-only renderings of a session for people and tools, computed from a loaded
//! [`Session`](super::Session): the context at the leaf as Markdown ([`markdown`]) and as
//! HTML pages ([`html`]), the whole entry tree as text ([`tree`]) and drawn ([`tree_svg`]),
//! and the usage statistics as JSON ([`usage`]); for a whole store, its index page
//! ([`store_index`]) and usage chart ([`usage_chart`]). A page's parts come from one walk of
//! the context ([`transcript`]), rendered by [`prose`], [`highlight`], [`tool_view`],
//! [`terminal`], [`escape`] and [`page_style`].
//!
//! Each view is a function of the session and its options (the prefix image links start
//! with, the page and the links of a page): the same session always renders to the same
//! bytes, and nothing is written but the output. What is read beyond the session is the
//! blob store a caller gives: cold-spilled content read back (the `_rehydrated` Markdown,
//! a page's `cold` option) and images embedded in a page. Every module states its format
//! as an invariant in its own documentation.

pub mod escape;
pub mod highlight;
pub mod html;
pub mod markdown;
pub mod page_style;
pub mod prose;
pub mod store_index;
pub mod terminal;
pub mod tool_view;
pub mod transcript;
pub mod tree;
pub mod tree_svg;
pub mod usage;
pub mod usage_chart;

/// `text` on one line: runs of whitespace (newlines included) become one space, control
/// characters and ANSI escape sequences are dropped, and the ends are trimmed. Past `max`
/// characters the text is cut and ends in `…`.
pub fn one_line(text: &str, max: usize) -> String {
    let mut line = OneLine::new(max);
    line.push(text.chars());
    line.finish()
}

/// The title a session is shown under, by the rule of every listing
/// ([`crate::store::discovery::shown_title`]: its own title, else its first prompt), as the
/// first line of that text on one line of at most `max` characters ([`one_line`]); empty
/// with neither.
pub fn title_line(title: Option<&str>, first_prompt: Option<&str>, max: usize) -> String {
    let shown = crate::store::discovery::shown_title(title, first_prompt);
    one_line(shown.lines().next().unwrap_or_default(), max)
}

/// One line of text built from pieces by the rules of [`one_line`] (a piece boundary counts
/// as whitespace only through [`OneLine::separate`]), which can tell when it is full, so
/// that a reader stops decoding.
pub(crate) struct OneLine {
    out: String,
    count: usize,
    max: usize,
    pending_space: bool,
    full: bool,
    escapes: terminal::Escapes,
}

impl OneLine {
    pub(crate) fn new(max: usize) -> Self {
        OneLine {
            out: String::new(),
            count: 0,
            max,
            pending_space: false,
            full: false,
            escapes: terminal::Escapes::default(),
        }
    }

    /// Adds characters; returns false once the line is full (it ends in `…`).
    pub(crate) fn push(&mut self, chars: impl IntoIterator<Item = char>) -> bool {
        let mut chars = chars.into_iter();
        while !self.full {
            let Some(c) = chars.next() else { break };
            if self.escapes.hides(c) {
            } else if c.is_whitespace() {
                self.pending_space = self.count > 0;
            } else if c.is_control() {
            } else if self.count + usize::from(self.pending_space) >= self.max {
                self.out.push('…');
                self.full = true;
            } else {
                if self.pending_space {
                    self.out.push(' ');
                    self.count += 1;
                    self.pending_space = false;
                }
                self.out.push(c);
                self.count += 1;
            }
        }
        !self.full
    }

    /// Separates what comes next from what came before by a space.
    pub(crate) fn separate(&mut self) {
        self.pending_space = self.count > 0;
    }

    pub(crate) fn is_full(&self) -> bool {
        self.full
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub(crate) fn finish(self) -> String {
        self.out
    }
}

/// `n` in decimal with a comma between groups of three digits (`12,345`).
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// A token count for a reader: grouped digits when it is a whole number, else as it is.
pub fn token_count(n: f64) -> String {
    if n.fract() == 0.0 && (0.0..9e15).contains(&n) {
        thousands(n as u64)
    } else {
        format!("{n}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_collapses_whitespace_drops_escapes_and_cuts() {
        assert_eq!(one_line("  a\n\n b\tc  ", 60), "a b c");
        assert_eq!(one_line("\u{1b}[31m✗\u{1b}[0m failed\u{7}", 60), "✗ failed");
        assert_eq!(one_line("abcdef", 3), "abc…");
        assert_eq!(one_line("ab cdef", 3), "ab…");
        assert_eq!(one_line("abc", 3), "abc");
        assert_eq!(one_line("日本語テキスト", 2), "日本…");
        assert_eq!(one_line("", 5), "");
    }

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(12_345_678), "12,345,678");
    }
}
