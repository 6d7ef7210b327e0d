//! `.ignore` at the mount's root: the rules, in the syntax of `.gitignore`, that tools
//! which honour `.ignore` files (ripgrep, fd, and others built on the same ignore rules)
//! read before they walk the mount, so that a search of the whole mount reads each
//! session once, in `sessions/<id>/session.jsonl`, and skips what is derived from it.
//!
//! Invariants:
//! - Every name the rules name is derived from a session file, the blob store, the
//!   search index or the server's own state (`leaf`, `errors`): the transcripts,
//!   `history/` and the rules themselves stay searched.
//! - Each rule is anchored at the root (`/…`), so it names one place of the layout and
//!   nothing a session holds.
//! - The file is the same bytes on every mount: `rg -uu` and `fd --no-ignore` read past it.

/// The rules, one a line after the comments.
pub const IGNORE: &str = "\
# Tools that honour .ignore files (rg, fd) search each session once, in
# sessions/<id>/session.jsonl, and skip the views derived from it.
# `rg -uu` or `fd --no-ignore` read everything.
/sessions/*/header.json
/sessions/*/leaf
/sessions/*/errors
/sessions/*/entries/
/sessions/*/context.json
/sessions/*/context.md
/sessions/*/context.html
/sessions/*/pages/
/sessions/*/tree.txt
/sessions/*/tree.svg
/sessions/*/leaves/
/sessions/*/usage.json
/sessions/*/labels/
/sessions/*/blobs/
/projects/
/by-date/
/recent/
/search/
/files/
/blobs/
/index.html
/usage.json
/usage.svg
/check
";

#[cfg(test)]
mod tests {
    use super::IGNORE;

    #[test]
    fn every_rule_is_anchored_and_names_a_derived_place() {
        let rules: Vec<&str> = IGNORE
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .collect();
        assert!(rules.len() > 10);
        for rule in &rules {
            assert!(rule.starts_with('/'), "{rule} is not anchored");
        }
        for kept in ["session.jsonl", "history", ".ignore"] {
            assert!(
                !rules
                    .iter()
                    .any(|r| r.trim_end_matches('/').ends_with(kept)),
                "{kept} must stay searched"
            );
        }
    }
}
