//! What the agent's strict checks refuse in a transcript that reads leniently: records that
//! break the schema (after migration) and bytes that are not UTF-8, each named by its line.
//! The agent refuses to resume such a session, and gjcfs to open it for writing.

use std::path::Path;

use super::{Report, Severity};
use crate::read::inspect::schema_refusals;
use crate::session::tree::Session;
use crate::storage::SessionStorage;

/// Reports the records of `session` the schema check refuses, one finding per rule broken,
/// naming the lines (`lines`: each record's line number).
pub(super) fn report_refused_records(
    session: &Session,
    lines: &[usize],
    path: &Path,
    report: &mut Report,
) {
    let mut by_rule: Vec<(&'static str, Vec<usize>)> = Vec::new();
    for refused in schema_refusals(session, lines) {
        match by_rule.iter_mut().find(|(why, _)| *why == refused.why) {
            Some((_, lines)) => lines.push(refused.line),
            None => by_rule.push((refused.why, vec![refused.line])),
        }
    }
    for (why, lines) in by_rule {
        let one = lines.len() == 1;
        report.add(
            Severity::Error,
            "refused_record",
            path,
            format!(
                "{} refused by the strict checks ({why}): the agent refuses to resume the \
                 session, and gjcfs to open it for writing, until {} mended or removed",
                lines_named(&lines),
                if one { "it is" } else { "they are" },
            ),
            None,
        );
    }
}

/// Reports the first byte that is not UTF-8, at offset `at`, with its line.
pub(super) fn report_invalid_utf8(
    storage: &dyn SessionStorage,
    path: &Path,
    at: u64,
    report: &mut Report,
) {
    let line = usize::try_from(at)
        .ok()
        .and_then(|at| storage.read_prefix(path, at).ok())
        .map(|before| format!("line {}, ", 1 + memchr::memchr_iter(b'\n', &before).count()))
        .unwrap_or_default();
    report.add(
        Severity::Error,
        "invalid_utf8",
        path,
        format!(
            "the byte at {line}byte {at} is not UTF-8: readers see U+FFFD in its place, and \
             the strict checks refuse the file, so the agent refuses to resume the session"
        ),
        None,
    );
}

/// "line 3 is", "lines 3, 7 and 9 are", "lines 3, 7, 9, 12, 15 and 2 more are".
pub(super) fn lines_named(lines: &[usize]) -> String {
    const SHOWN: usize = 5;
    let shown: Vec<String> = lines.iter().take(SHOWN).map(usize::to_string).collect();
    match lines.len() {
        1 => format!("line {} is", shown[0]),
        n if n <= SHOWN => format!(
            "lines {} and {} are",
            shown[..n - 1].join(", "),
            shown[n - 1]
        ),
        n => format!("lines {} and {} more are", shown.join(", "), n - SHOWN),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_lists_read_well() {
        assert_eq!(lines_named(&[3]), "line 3 is");
        assert_eq!(lines_named(&[3, 7, 9]), "lines 3, 7 and 9 are");
        assert_eq!(
            lines_named(&[1, 2, 3, 4, 5, 6, 7]),
            "lines 1, 2, 3, 4, 5 and 2 more are"
        );
    }
}
