//! String operations the way JavaScript performs them, where the original engine's results
//! depend on JavaScript's definitions rather than Rust's.

/// Whether `c` is whitespace for `String.prototype.trim`: the ECMAScript `WhiteSpace` and
/// `LineTerminator` characters. Unlike Rust's `char::is_whitespace`, this includes U+FEFF
/// and excludes U+0085.
pub fn is_js_whitespace(c: char) -> bool {
    c == '\u{feff}' || (c.is_whitespace() && c != '\u{85}')
}

/// `String.prototype.trim`.
pub fn js_trim(s: &str) -> &str {
    s.trim_matches(is_js_whitespace)
}

use crate::json::{self, Value};

/// JavaScript's template-literal rendering (`${value}`) of an optional value: `undefined`
/// when absent, `[object Object]` for containers.
pub fn template_text(value: Option<&Value>) -> String {
    match value {
        None => "undefined".to_owned(),
        Some(Value::String(s)) => s.to_string_lossy().into_owned(),
        Some(Value::Number(n)) => json::format_js_number(n.as_f64()),
        Some(Value::Null) => "null".to_owned(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Array(_) | Value::Raw(_) | Value::Object(_)) => "[object Object]".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_what_javascript_trims() {
        assert_eq!(js_trim(" \t\n\r\u{b}\u{c}x y\u{a0}\u{2028}\u{3000}"), "x y");
        assert_eq!(js_trim("\u{feff}bom\u{feff}"), "bom");
        assert_eq!(js_trim("\u{85}nel\u{85}"), "\u{85}nel\u{85}");
        assert_eq!(js_trim("   "), "");
    }
}
