//! Short builders of the engine's JSON values, for the generator's records.

use gjcfs_engine::json::{self, JsString, Number, Object, Value};

pub(crate) fn s(text: impl Into<JsString>) -> Value {
    Value::String(text.into())
}

pub(crate) fn int(n: i64) -> Value {
    Value::Number(Number::from_i64(n))
}

pub(crate) fn strings(items: &[&str]) -> Value {
    Value::Array(items.iter().map(|t| s(*t)).collect())
}

pub(crate) fn object<const N: usize>(members: [(&str, Value); N]) -> Value {
    let mut o = Object::with_capacity(N);
    for (k, v) in members {
        o.insert(k, v);
    }
    Value::Object(o)
}

pub(crate) fn text_block(text: String) -> Value {
    object([("type", s("text")), ("text", s(text))])
}

/// A string value holding `text` followed by a lone high surrogate, as truncated model or
/// tool output can end.
pub(crate) fn with_lone_surrogate(text: &str) -> Value {
    let quoted = json::to_compact(&s(text));
    let literal = format!("{}\\ud83d\"", &quoted[..quoted.len() - 1]);
    json::parse(&literal).unwrap_or_else(|_| s(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lone_surrogates_are_written_as_escapes() {
        let v = with_lone_surrogate("cut \"here\"");
        assert_eq!(json::to_compact(&v), "\"cut \\\"here\\\"\\ud83d\"");
        assert!(v.as_str().is_none());
    }
}
