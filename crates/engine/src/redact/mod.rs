//! Redaction for sharing: the secrets of a session's text replaced by typed placeholders,
//! `[redacted: <rule id>]`, with a [`Report`] of what was replaced (counts per rule, never
//! the secrets).
//!
//! What is a secret:
//! - what a rule of gjcfs's own built-in set finds (`rules/gjcfs.toml`, written for gjcfs
//!   from the token formats the providers document, each rule with made-up examples the
//!   tests redact): provider and cloud keys and tokens by their prefixes, PEM private key
//!   blocks, JWTs, a value assigned to a password, token, secret or API key (`password=…`),
//!   a password in a URL, a long high-entropy token;
//! - what a rule of a file the user adds finds ([`use_rules`]: `--redact-rules FILE`, and
//!   [`default_rules_file`] when it exists), typically gitleaks' own `config/gitleaks.toml`
//!   (fetched by `scripts/update-secret-rules.sh`). Every file has gitleaks' format and is
//!   run as gitleaks runs it on a text: keywords as a prefilter, the regex, the secret group,
//!   the entropy minimum, the allowlists; rules bound to file paths never apply (a text has
//!   no path);
//! - the whole output of the agent's `read` tool call of a `.env` file (`.env`, `.env.*`,
//!   `*.env`): rule [`ENV_FILE`].
//!
//! Where (a session's JSON, [`redact_lines`], [`redacted_session`]): every string value of
//! every record, except the structure's own: the members named in [`KEPT_MEMBERS`] (ids,
//! parent ids, types, roles, timestamps, tool call ids, blob references, signatures), the
//! `data` of an image block or of a provider's encrypted (`redactedThinking`) thinking, and
//! the cold-spill marker. Object keys are never changed, so a
//! redacted line is still a record of the same entry.
//!
//! What it cannot promise: a secret no rule matches (a short password in prose), a secret
//! split across strings or messages, a secret inside an image, or one encoded (base64,
//! percent-encoding) is not found.

mod records;
mod rules;
mod scan;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::OnceLock;

use crate::storage::SessionStorage;

pub use records::{redact_lines, redacted_session, KEPT_MEMBERS};
pub use rules::RuleSetInfo;

use scan::{Found, Scanner};

/// The rule id of the output of a `read` tool call of a `.env` file.
pub const ENV_FILE: &str = "env-file";

/// The text a secret found by `rule` is replaced with.
pub fn placeholder(rule: &str) -> String {
    format!("[redacted: {rule}]")
}

/// What a redaction replaced: how many secrets, by rule id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    counts: BTreeMap<String, usize>,
}

impl Report {
    /// Counts `n` secrets replaced under `rule`.
    pub fn add(&mut self, rule: &str, n: usize) {
        *self.counts.entry(rule.to_owned()).or_default() += n;
    }

    /// Adds the counts of `other`.
    pub fn merge(&mut self, other: &Report) {
        for (rule, &n) in &other.counts {
            self.add(rule, n);
        }
    }

    /// How many secrets were replaced.
    pub fn total(&self) -> usize {
        self.counts.values().sum()
    }

    /// Whether nothing was replaced.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// The count of each rule that replaced something, by rule id.
    pub fn counts(&self) -> impl Iterator<Item = (&str, usize)> {
        self.counts.iter().map(|(rule, &n)| (rule.as_str(), n))
    }
}

/// `rule n, rule n, …` by rule id; `nothing` when empty.
impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("nothing");
        }
        for (i, (rule, n)) in self.counts().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{rule} {n}")?;
        }
        Ok(())
    }
}

/// The rules, compiled at first use (or by [`use_rules`]) and kept for the process.
static SCANNER: OnceLock<Scanner> = OnceLock::new();

fn scanner() -> &'static Scanner {
    SCANNER.get_or_init(|| Scanner::new(rules::RuleSet::builtin()))
}

/// The rule sets redaction applies: how many rules of each, and what did not compile.
pub fn rule_set() -> &'static RuleSetInfo {
    &scanner().set.info
}

/// Why [`use_rules`] took no rules: a file it cannot use (named by its path), or rules
/// already in use.
#[derive(Debug, thiserror::Error)]
pub enum RedactError {
    /// The file cannot be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why it cannot be read.
        source: io::Error,
    },
    /// The file is not UTF-8 text.
    #[error("{}: {source}", path.display())]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// Where its text stops being UTF-8.
        source: std::str::Utf8Error,
    },
    /// The file is not TOML.
    #[error("{}: not a rule file: {message}", path.display())]
    NotToml {
        /// The file.
        path: PathBuf,
        /// The TOML parser's message.
        message: String,
    },
    /// The file is TOML but holds no `[[rules]]`.
    #[error("{}: not a rule file: no [[rules]]", path.display())]
    NoRules {
        /// The file.
        path: PathBuf,
    },
    /// The rules were compiled already (something was redacted, or [`use_rules`] was
    /// called before), so they can no longer change.
    #[error("the secret rules are in use already")]
    InUse,
}

/// Makes redaction apply, for the rest of the process, the built-in rules and those of
/// each of `files` after them (gitleaks' format; a rule that does not compile is left out
/// and named in [`RuleSetInfo::refused`]). Call it before anything is redacted. An error
/// names a file that cannot be read, is no TOML or holds no `[[rules]]`, or says that the
/// rules are in use already.
pub fn use_rules(
    storage: &dyn SessionStorage,
    files: &[PathBuf],
) -> Result<&'static RuleSetInfo, RedactError> {
    let mut set = rules::RuleSet::builtin();
    for file in files {
        let path = || file.to_owned();
        let bytes = storage.read(file).map_err(|source| RedactError::Read {
            path: path(),
            source,
        })?;
        let text = std::str::from_utf8(&bytes).map_err(|source| RedactError::NotUtf8 {
            path: path(),
            source,
        })?;
        set.add_file(&file.display().to_string(), text)
            .map_err(|e| match e {
                rules::NotRules::Toml(message) => RedactError::NotToml {
                    path: path(),
                    message,
                },
                rules::NotRules::NoRules => RedactError::NoRules { path: path() },
            })?;
    }
    SCANNER
        .set(Scanner::new(set))
        .map_err(|_| RedactError::InUse)?;
    Ok(rule_set())
}

/// Where a user's own secret rules are read from when no `--redact-rules` names a file
/// and it exists: `gjcfs/secret-rules.toml` in the user's configuration directory
/// ([`config_dir`]: `$XDG_CONFIG_HOME` if absolute, else `~/.config`; on Windows
/// `%APPDATA%`). `None` when there is no such directory.
///
/// [`config_dir`]: crate::storage::user_dirs::config_dir
pub fn default_rules_file() -> Option<PathBuf> {
    let config = crate::storage::user_dirs::config_dir()?;
    Some(config.join("gjcfs").join(RULES_FILE_NAME))
}

/// The name of the default rules file in gjcfs's configuration directory.
pub const RULES_FILE_NAME: &str = "secret-rules.toml";

/// `text` with every secret replaced by its placeholder (borrowed when there is none),
/// counted in `report`. Secrets that overlap are replaced as one, under the rule of the
/// one that starts first (the longer one when two start together, and a specific rule's
/// rather than a generic one's when they cover the same text).
pub fn redact_text<'t>(text: &'t str, report: &mut Report) -> Cow<'t, str> {
    redact_by(scanner(), text, report)
}

/// [`redact_text`] by the rules of `scanner`.
fn redact_by<'t>(scanner: &Scanner, text: &'t str, report: &mut Report) -> Cow<'t, str> {
    let mut found = scanner.find(text);
    if found.is_empty() {
        return Cow::Borrowed(text);
    }
    found.sort_by_key(|f| {
        (
            f.start,
            std::cmp::Reverse(f.end),
            scanner.rule(f.rule).generic,
        )
    });
    let mut merged: Vec<Found> = Vec::with_capacity(found.len());
    for f in found {
        match merged.last_mut() {
            Some(last) if f.start < last.end => last.end = last.end.max(f.end),
            _ => merged.push(f),
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for f in &merged {
        let rule = &scanner.rule(f.rule).id;
        out.push_str(&text[at..f.start]);
        out.push_str(&placeholder(rule));
        report.add(rule, 1);
        at = f.end;
    }
    out.push_str(&text[at..]);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests;
