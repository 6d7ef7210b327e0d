//! Names Windows forbids, written reversibly.
//!
//! A model name is shown on Windows with these characters written as `%XX` (each byte of
//! their UTF-8 form, two uppercase hex digits): `%` itself, `< > : " / \ | ? *`, control
//! characters, a dot or a space at the end of the name (Windows drops them), and the first
//! letter of a reserved device name (`CON`, `PRN`, `AUX`, `NUL`, `COM0`–`COM9`,
//! `LPT0`–`LPT9`, their superscript-digit forms, `CONIN$`, `CONOUT$`; in any case, alone or
//! before an extension: `nul.json` shows as `%6Eul.json`). Every other character stays as
//! it is, so the names the layout uses (`session.jsonl`, ids, `NNNNNN-<id>.json`) read the
//! same on Windows.
//!
//! [`decode`] is the way back, and accepts only what [`encode`] writes (hex digits in either
//! case, since Windows compares names ignoring case): each model name has exactly one
//! Windows name and each Windows name at most one model name.

/// The Windows name of model name `name`.
pub fn encode(name: &str) -> String {
    let reserved = is_reserved_device_name(name);
    let last = name.chars().count().saturating_sub(1);
    let mut out = String::with_capacity(name.len());
    for (i, c) in name.chars().enumerate() {
        let escape = c == '%'
            || c.is_control()
            || matches!(c, '<' | '>' | ':' | '"' | '/' | '\\' | '|' | '?' | '*')
            || (i == last && matches!(c, '.' | ' '))
            || (i == 0 && reserved);
        if escape {
            let mut buf = [0; 4];
            for byte in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{byte:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The model name Windows name `name` shows, if it is one [`encode`] writes.
pub fn decode(name: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(name.len());
    let mut rest = name.as_bytes();
    while let Some((&first, tail)) = rest.split_first() {
        if first == b'%' {
            let hex = tail.get(..2)?;
            let text = std::str::from_utf8(hex).ok()?;
            if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            bytes.push(u8::from_str_radix(text, 16).ok()?);
            rest = &tail[2..];
        } else {
            bytes.push(first);
            rest = tail;
        }
    }
    let decoded = String::from_utf8(bytes).ok()?;
    encode(&decoded)
        .eq_ignore_ascii_case(name)
        .then_some(decoded)
}

/// Whether Windows reserves `name` for a device (whatever follows a first dot).
fn is_reserved_device_name(name: &str) -> bool {
    let stem = name.split('.').next().unwrap_or(name).trim_end_matches(' ');
    let upper = stem.to_uppercase();
    if matches!(
        upper.as_str(),
        "CON" | "PRN" | "AUX" | "NUL" | "CONIN$" | "CONOUT$"
    ) {
        return true;
    }
    let (Some(prefix), Some(digit)) = (upper.get(..3), upper.get(3..)) else {
        return false;
    };
    matches!(prefix, "COM" | "LPT")
        && matches!(
            digit,
            "0" | "1" | "2" | "3" | "4" | "5" | "6" | "7" | "8" | "9" | "¹" | "²" | "³"
        )
}

/// Whether Windows takes `name` as a file name as it is: none of the characters it forbids,
/// no dot or space at the end, not a device.
pub fn is_valid_windows_name(name: &str) -> bool {
    !name.is_empty()
        && !name.chars().any(|c| {
            c.is_control() || matches!(c, '<' | '>' | ':' | '"' | '/' | '\\' | '|' | '?' | '*')
        })
        && !name.ends_with(['.', ' '])
        && !is_reserved_device_name(name)
}

/// The model names of a Windows path from the mount root (`\a\b`; empty names skipped),
/// or `None` when a name is not one [`encode`] writes.
pub fn model_names(path: &str) -> Option<Vec<String>> {
    path.split('\\')
        .filter(|n| !n.is_empty())
        .map(decode)
        .collect()
}

/// The Windows path, from the mount root, of model names `names` (`\` for the root).
pub fn windows_path<S: AsRef<str>>(names: &[S]) -> String {
    if names.is_empty() {
        return "\\".to_owned();
    }
    names
        .iter()
        .map(|n| format!("\\{}", encode(n.as_ref())))
        .collect()
}

/// A link target of the model (`../entries/000002-<id>.json`, `/`-separated, relative) as
/// a relative Windows path to the same node: `..\entries\000002-<id>.json`.
pub fn windows_link_target(target: &str) -> String {
    target
        .split('/')
        .map(|n| match n {
            "." | ".." => n.to_owned(),
            name => encode(name),
        })
        .collect::<Vec<_>>()
        .join("\\")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names_windows_forbids_are_written_with_escapes() {
        let cases = [
            ("session.jsonl", "session.jsonl"),
            ("000002-a1b2.json", "000002-a1b2.json"),
            ("a:b", "a%3Ab"),
            ("what?*", "what%3F%2A"),
            ("<\"x\">|", "%3C%22x%22%3E%7C"),
            ("a\\b/c", "a%5Cb%2Fc"),
            ("line\nbreak", "line%0Abreak"),
            ("tab\t", "tab%09"),
            ("100%", "100%25"),
            ("trailing.", "trailing%2E"),
            ("trailing ", "trailing%20"),
            ("dots..", "dots.%2E"),
            (".", "%2E"),
            ("..", ".%2E"),
            (".hidden", ".hidden"),
            ("CON", "%43ON"),
            ("nul.json", "%6Eul.json"),
            ("Com1.tar.gz", "%43om1.tar.gz"),
            ("LPT¹", "%4CPT¹"),
            ("conin$", "%63onin$"),
            ("console", "console"),
            ("COM10", "COM10"),
            ("AUX .txt", "%41UX .txt"),
            ("日本", "日本"),
            ("é:", "é%3A"),
        ];
        for (model, windows) in cases {
            assert_eq!(encode(model), windows, "{model:?}");
            assert!(is_valid_windows_name(windows), "{windows:?}");
            assert_eq!(decode(windows).as_deref(), Some(model), "{windows:?}");
        }
        assert_eq!(encode("\u{7f}"), "%7F");
        assert_eq!(encode("\u{85}"), "%C2%85");
    }

    #[test]
    fn only_names_encode_writes_decode() {
        // Hex digits in either case: Windows compares names ignoring case.
        assert_eq!(decode("a%3ab").as_deref(), Some("a:b"));
        for foreign in [
            "100%",
            "a%3",
            "a%zz",
            "%61",
            "%2Ehidden",
            "a%2Eb",
            "CON",
            "%FF",
            "x.",
        ] {
            assert_eq!(decode(foreign), None, "{foreign:?}");
        }
    }

    #[test]
    fn paths_and_link_targets_are_written_name_by_name() {
        assert_eq!(windows_path::<&str>(&[]), "\\");
        assert_eq!(
            windows_path(&["sessions", "s", "labels", "a:b"]),
            "\\sessions\\s\\labels\\a%3Ab"
        );
        assert_eq!(
            model_names("\\sessions\\s\\labels\\a%3Ab"),
            Some(vec![
                "sessions".into(),
                "s".into(),
                "labels".into(),
                "a:b".into()
            ])
        );
        assert_eq!(model_names("\\"), Some(vec![]));
        assert_eq!(model_names("\\sessions\\100%"), None);
        assert_eq!(
            windows_link_target("../entries/000002-x.json"),
            "..\\entries\\000002-x.json"
        );
        assert_eq!(
            windows_link_target("../../sessions/id:1"),
            "..\\..\\sessions\\id%3A1"
        );
    }

    proptest! {
        #[test]
        fn every_name_round_trips_to_a_valid_windows_name(name in "\\PC{1,40}|[.: %?*<>|\"\\\\/a-zA-Z0-9\u{0}-\u{1f}]{1,12}") {
            let windows = encode(&name);
            prop_assert!(is_valid_windows_name(&windows), "{:?} -> {:?}", name, windows);
            prop_assert_eq!(decode(&windows), Some(name.clone()));
        }

        #[test]
        fn a_windows_name_decodes_to_at_most_the_one_name_that_encodes_to_it(name in "[%.:a-fA-F0-9 ]{1,10}") {
            if let Some(model) = decode(&name) {
                prop_assert!(encode(&model).eq_ignore_ascii_case(&name));
            }
        }
    }
}
