//! Text as HTML and SVG take it: escaped for an element's content or a double-quoted
//! attribute, with a terminal's control sequences dropped.

/// `s` as HTML text (an element's content).
pub fn text(s: &str) -> String {
    escape(s, false)
}

/// `s` as the value of a double-quoted attribute.
pub fn attr(s: &str) -> String {
    escape(s, true)
}

/// `s` with what [`text`] drops or replaces already dropped or replaced, and nothing
/// escaped: for a writer that escapes as it writes (the Markdown renderer, the highlighter).
pub(super) fn cleaned(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut escapes = super::terminal::Escapes::default();
    for c in s.chars() {
        if let Some(c) = kept(c, &mut escapes) {
            out.push(c);
        }
    }
    out
}

/// What becomes of `c`: nothing (inside a terminal's sequence), U+FFFD (a control character
/// but tab and newline, a bidirectional control), or itself.
fn kept(c: char, escapes: &mut super::terminal::Escapes) -> Option<char> {
    if escapes.hides(c) {
        return None;
    }
    Some(match c {
        // Bidirectional controls would reorder what follows them on the page.
        '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {
            '\u{fffd}'
        }
        '\t' | '\n' => c,
        c if c.is_control() => '\u{fffd}',
        c => c,
    })
}

fn escape(s: &str, in_attribute: bool) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    // A terminal's sequences (colours, titles) are dropped whole, as a terminal would not
    // print them.
    let mut escapes = super::terminal::Escapes::default();
    for c in s.chars().filter_map(|c| kept(c, &mut escapes)) {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if in_attribute => out.push_str("&quot;"),
            '\'' if in_attribute => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
