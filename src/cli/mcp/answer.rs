//! What a tool of `gjcfs mcp` answers: a JSON object, or an error the client is told of
//! as an MCP error with a message a model can act on.

use serde_json::Value;

use super::super::output::{error_line, is_nothing_found, is_usage_error};
use super::super::range::{parse_time, TimeRangeArgs};
use gjcfs_engine::store::usage::TimeRange;

/// Why a tool gave no answer.
#[derive(Debug, PartialEq)]
pub enum ToolError {
    /// The call's arguments cannot be answered (a bad query, an unknown session, an
    /// unreadable date): the model can correct them.
    Invalid(String),
    /// The store could not be read.
    Failed(String),
}

impl ToolError {
    pub fn invalid(message: impl Into<String>) -> Self {
        ToolError::Invalid(message.into())
    }
}

/// A command's error as a tool's: usage errors and bad queries are the caller's.
impl From<anyhow::Error> for ToolError {
    fn from(err: anyhow::Error) -> Self {
        if is_usage_error(&err) {
            ToolError::Invalid(error_line(&err))
        } else {
            ToolError::Failed(error_line(&err))
        }
    }
}

/// A tool's answer.
pub type Answer = Result<Value, ToolError>;

/// A value of the engine's JSON as the protocol's.
pub fn from_engine(value: &gjcfs_engine::json::Value) -> Value {
    serde_json::from_str(&gjcfs_engine::json::to_compact(value))
        .expect("the engine writes valid JSON")
}

/// An answer of `T`, or `empty` when the command found nothing (which, for a tool, is an
/// answer: an empty list and why).
pub fn or_nothing<T>(
    result: anyhow::Result<T>,
    empty: impl FnOnce(String) -> Value,
) -> Result<Result<T, Value>, ToolError> {
    match result {
        Ok(found) => Ok(Ok(found)),
        Err(err) if is_nothing_found(&err) => Ok(Err(empty(error_line(&err)))),
        Err(err) => Err(err.into()),
    }
}

/// The time range of `since` and `until` (YYYY-MM-DD or ISO timestamps).
pub fn range(since: Option<&str>, until: Option<&str>) -> Result<TimeRange, ToolError> {
    let moment = |name: &str, text: Option<&str>| {
        text.map(parse_time)
            .transpose()
            .map_err(|e| ToolError::invalid(format!("{name}: {e}")))
    };
    let args = TimeRangeArgs {
        since: moment("since", since)?,
        until: moment("until", until)?,
    };
    Ok(args.range()?)
}

/// What a list answer says of what it left out: `shown` items from `offset` on, of
/// `total` (or of more than `offset + shown` when `total` is not known), and the call
/// that gives the next page.
pub fn page_note(offset: usize, shown: usize, total: Option<usize>, more: bool) -> Value {
    let next = offset + shown;
    match (total, more) {
        (Some(total), _) if next < total => Value::String(format!(
            "{shown} shown from {offset}, of {total}: call again with offset={next} for the next ones"
        )),
        (None, true) => Value::String(format!(
            "{shown} shown from {offset}, and there are more: call again with offset={next} \
             for the next ones"
        )),
        _ => Value::Null,
    }
}

/// `text` cut to at most `max` characters from character `from` on, and how many
/// characters of it are left after the cut.
pub fn cut(text: &str, from: usize, max: usize) -> (&str, usize) {
    let mut chars = text.char_indices().skip(from);
    let Some((start, _)) = chars.next() else {
        return ("", 0);
    };
    let rest = &text[start..];
    match rest.char_indices().nth(max) {
        None => (rest, 0),
        Some((end, _)) => (&rest[..end], rest[end..].chars().count()),
    }
}

/// `text` cut to `max` characters, with a note of how many more it has.
pub fn capped(text: &str, max: usize) -> String {
    match cut(text, 0, max) {
        (all, 0) => all.to_owned(),
        (shown, left) => format!("{shown}… [{left} more characters]"),
    }
}

/// The title a session is shown under, as every listing shows it
/// ([`gjcfs_engine::views::title_line`]), of at most [`super::params::TITLE_CHARS`]
/// characters.
pub fn title(title: Option<&str>, first_prompt: Option<&str>) -> String {
    gjcfs_engine::views::title_line(title, first_prompt, super::params::TITLE_CHARS)
}

/// `value` as a shell word: itself when it needs no quoting, else in single quotes.
pub fn shell_word(value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+:@%=,".contains(&b));
    if plain {
        value.to_owned()
    } else {
        format!("'{}'", value.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_by_characters_and_counts_what_is_left() {
        assert_eq!(cut("héllo wörld", 0, 5), ("héllo", 6));
        assert_eq!(cut("héllo wörld", 6, 100), ("wörld", 0));
        assert_eq!(cut("héllo", 9, 3), ("", 0));
        assert_eq!(cut("", 0, 3), ("", 0));
        assert_eq!(capped("abcdef", 4), "abcd… [2 more characters]");
        assert_eq!(capped("abc", 4), "abc");
    }

    #[test]
    fn quotes_shell_words_that_need_it() {
        assert_eq!(shell_word("/home/me/proj"), "/home/me/proj");
        assert_eq!(shell_word("/tmp/a b"), "'/tmp/a b'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
        assert_eq!(shell_word("$(rm -rf ~)"), "'$(rm -rf ~)'");
    }

    #[test]
    fn page_notes_name_the_next_offset() {
        assert_eq!(page_note(0, 20, Some(20), false), Value::Null);
        let note = page_note(20, 20, Some(50), false);
        assert!(note.as_str().unwrap().contains("offset=40"), "{note}");
        let note = page_note(0, 5, None, true);
        assert!(note.as_str().unwrap().contains("offset=5"), "{note}");
        assert_eq!(page_note(0, 5, None, false), Value::Null);
    }

    #[test]
    fn dates_are_read_and_an_empty_range_is_the_callers_error() {
        let r = range(Some("2026-01-02"), None).unwrap();
        assert_eq!(r.since_ms, Some(1_767_312_000_000));
        assert!(
            matches!(range(Some("soon"), None), Err(ToolError::Invalid(m)) if m.contains("since"))
        );
        assert!(matches!(
            range(Some("2026-02-01"), Some("2026-01-01")),
            Err(ToolError::Invalid(_))
        ));
    }
}
