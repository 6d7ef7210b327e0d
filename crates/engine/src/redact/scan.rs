//! Finding the secrets of one text, as gitleaks finds them (`detect.go`'s `detectRule`):
//! 1. the rules whose keywords the text holds (case-insensitively; a rule without keywords
//!    always runs) are found in one pass ([`Scanner`]);
//! 2. each such rule's regex finds its matches; a match's secret is the rule's
//!    `secretGroup`, else its first non-empty group, else the match (newlines trimmed);
//! 3. a secret whose Shannon entropy is not above the rule's `entropy` is dropped, and so
//!    is one an allowlist allows (its file's global one, then the rule's).
//!
//! Not done here: gitleaks' decoding of base64/hex/percent-encoded text before matching,
//! its multi-part (`[[rules.required]]`) rules, and its `gitleaks:allow` comment (a text
//! to share is redacted whatever it says of itself).

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};

use super::rules::{Allowlist, Rule, RuleSet, Target};

/// A secret in a text: its byte range and the rule that found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) rule: usize,
}

/// The rule set with its keyword prefilter.
#[derive(Debug)]
pub(crate) struct Scanner {
    pub(crate) set: RuleSet,
    /// Every rule's keywords, lower-case, each once.
    keywords: AhoCorasick,
    /// For each keyword, the rules naming it.
    keyword_rules: Vec<Vec<usize>>,
    /// The rules without keywords.
    always: Vec<usize>,
}

impl Scanner {
    pub(crate) fn new(set: RuleSet) -> Self {
        let mut words: Vec<String> = Vec::new();
        let mut keyword_rules: Vec<Vec<usize>> = Vec::new();
        let mut always = Vec::new();
        for (i, rule) in set.rules.iter().enumerate() {
            if rule.keywords.is_empty() {
                always.push(i);
            }
            for k in &rule.keywords {
                match words.iter().position(|w| w == k) {
                    Some(at) => keyword_rules[at].push(i),
                    None => {
                        words.push(k.clone());
                        keyword_rules.push(vec![i]);
                    }
                }
            }
        }
        let keywords = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(&words)
            .expect("keywords are plain strings");
        Scanner {
            set,
            keywords,
            keyword_rules,
            always,
        }
    }

    /// The rules to run on `text`, in rule order.
    fn rules_for(&self, text: &str) -> Vec<usize> {
        let mut run = vec![false; self.set.rules.len()];
        for &i in &self.always {
            run[i] = true;
        }
        for m in self.keywords.find_overlapping_iter(text) {
            for &i in &self.keyword_rules[m.pattern().as_usize()] {
                run[i] = true;
            }
        }
        (0..run.len()).filter(|&i| run[i]).collect()
    }

    /// Every secret of `text`, in the order found (rule by rule).
    pub(crate) fn find(&self, text: &str) -> Vec<Found> {
        let mut found = Vec::new();
        for i in self.rules_for(text) {
            self.find_by(i, text, &mut found);
        }
        found
    }

    /// The secrets rule `i` finds in `text`.
    pub(crate) fn find_by(&self, i: usize, text: &str, found: &mut Vec<Found>) {
        let rule = &self.set.rules[i];
        for caps in rule.regex.captures_iter(text) {
            let whole = caps.get(0).expect("group 0 is the match");
            let trimmed = whole.as_str().trim_matches('\n');
            if trimmed.is_empty() {
                continue;
            }
            let start = whole.start()
                + (whole.as_str().len() - whole.as_str().trim_start_matches('\n').len());
            let matched = (start, start + trimmed.len());
            let secret = match rule.secret_group {
                0 => (1..caps.len())
                    .find_map(|g| caps.get(g).filter(|m| !m.is_empty()))
                    .map_or(matched, |m| (m.start(), m.end())),
                g => match caps.get(g) {
                    Some(m) if !m.is_empty() => (m.start(), m.end()),
                    _ => continue,
                },
            };
            let secret_text = &text[secret.0..secret.1];
            if rule.entropy != 0.0 && shannon_entropy(secret_text) <= rule.entropy {
                continue;
            }
            let view = Finding {
                secret: secret_text,
                matched: &text[matched.0..matched.1],
                line: line_around(text, matched.0, matched.1),
            };
            let global = self.set.global.iter().filter(|(f, _)| *f == rule.file);
            if allowed(global.map(|(_, a)| a), &view) || allowed(&rule.allowlists, &view) {
                continue;
            }
            found.push(Found {
                start: secret.0,
                end: secret.1,
                rule: i,
            });
        }
    }

    pub(crate) fn rule(&self, i: usize) -> &Rule {
        &self.set.rules[i]
    }
}

/// What allowlists look at of one finding.
struct Finding<'t> {
    secret: &'t str,
    matched: &'t str,
    line: &'t str,
}

/// Whether one of `lists` allows the finding.
fn allowed<'a>(lists: impl IntoIterator<Item = &'a Allowlist>, finding: &Finding<'_>) -> bool {
    lists.into_iter().any(|list| {
        let target = match list.target {
            Target::Secret => finding.secret,
            Target::Match => finding.matched,
            Target::Line => finding.line,
        };
        let regex = !target.is_empty() && list.regexes.iter().any(|r| r.is_match(target));
        let lower = finding.secret.to_lowercase();
        let stopword = !lower.is_empty() && list.stopwords.iter().any(|w| lower.contains(w));
        if list.all {
            // Paths and commits never match a text; a check not named counts for nothing.
            !list.names_files
                && (!list.regexes.is_empty() || !list.stopwords.is_empty())
                && (list.regexes.is_empty() || regex)
                && (list.stopwords.is_empty() || stopword)
        } else {
            regex || stopword
        }
    })
}

/// The line of `text` holding `start..end` (the whole lines it spans).
fn line_around(text: &str, start: usize, end: usize) -> &str {
    let from = text[..start].rfind('\n').map_or(0, |at| at + 1);
    let to = text[end..].find('\n').map_or(text.len(), |at| end + at);
    &text[from..to]
}

/// Shannon entropy in bits per character, as gitleaks computes it (characters counted,
/// divided by the length in bytes).
pub(crate) fn shannon_entropy(text: &str) -> f64 {
    if text.is_empty() {
        return 0.0;
    }
    let mut counts: Vec<(char, usize)> = Vec::new();
    for c in text.chars() {
        match counts.iter_mut().find(|(d, _)| *d == c) {
            Some((_, n)) => *n += 1,
            None => counts.push((c, 1)),
        }
    }
    let len = text.len() as f64;
    counts
        .iter()
        .map(|&(_, n)| {
            let p = n as f64 / len;
            -p * p.log2()
        })
        .sum()
}
