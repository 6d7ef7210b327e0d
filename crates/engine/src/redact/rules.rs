//! The secret rules: gjcfs's own built-in set (`rules/gjcfs.toml`) and the files a user
//! adds (`--redact-rules`, typically gitleaks' `config/gitleaks.toml`), read from TOML into
//! compiled rules.
//!
//! Every file has gitleaks' format: `[[rules]]` with `id`, `regex`, `secretGroup`,
//! `entropy`, `keywords`, `path` and `[[rules.allowlists]]` (`regexes`, `regexTarget`,
//! `stopwords`, `condition`, `paths`, `commits`), and one global `[allowlist]`; any other
//! key (the built-in set's `examples`, gitleaks' `description`, `tags`, `[extend]`, …) is
//! ignored. What a rule means is gitleaks', for a text that has no file path:
//! - a rule with a `path` applies to files whose path matches it, so it never applies here
//!   ([`RuleSetInfo::path_bound`]);
//! - an allowlist's `paths` and `commits` never match, so an allowlist with `condition =
//!   "AND"` that names any of them never allows.
//!
//! Regexes are Go's (RE2) syntax; they are compiled by the `regex` crate after
//! [`translate`]: Go's `\w`, `\d`, `\s`, `\b` are ASCII, the crate's are Unicode, so
//! they are spelled out as ASCII classes. A rule whose regex still fails to compile is left
//! out and named in [`RuleSetInfo::refused`] (the tests require none of the built-in set).

use regex::{Regex, RegexBuilder};
use toml_edit::{Document, Item, Table};

/// gjcfs's own rules, each with its made-up examples.
pub(crate) const BUILTIN: &str = include_str!("rules/gjcfs.toml");

/// The built-in rules for secrets of any kind, which yield to a specific rule finding the
/// same secret (as do a user file's `generic-*` rules).
const GENERIC: [&str; 3] = ["secret-assignment", "url-credentials", "high-entropy-token"];

/// The compiled program of one regex may take this much memory (the crate's default is
/// 10 MiB; the largest rules of gitleaks' set need more once their ASCII classes are
/// case-folded).
const REGEX_SIZE_LIMIT: usize = 64 << 20;

/// What an allowlist's regexes are matched against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// The secret (the default).
    Secret,
    /// The whole match of the rule's regex.
    Match,
    /// The line the match is on.
    Line,
}

/// An allowlist: findings it matches are not secrets.
#[derive(Debug)]
pub(crate) struct Allowlist {
    pub(crate) target: Target,
    /// `condition = "AND"`: every check it names must hold.
    pub(crate) all: bool,
    /// It names paths or commits, which never match a text.
    pub(crate) names_files: bool,
    pub(crate) regexes: Vec<Regex>,
    /// Lower-case; a secret containing one is allowed.
    pub(crate) stopwords: Vec<String>,
}

/// One rule, compiled.
#[derive(Debug)]
pub(crate) struct Rule {
    pub(crate) id: String,
    pub(crate) regex: Regex,
    /// The capture group holding the secret; 0: the first non-empty group, else the match.
    pub(crate) secret_group: usize,
    /// A secret's Shannon entropy must be above this (0: no minimum).
    pub(crate) entropy: f64,
    /// Lower-case; the rule runs only on a text holding one of them (all texts when none).
    pub(crate) keywords: Vec<String>,
    pub(crate) allowlists: Vec<Allowlist>,
    /// The file it is from: 0 the built-in set, then the files added, in order.
    pub(crate) file: usize,
    /// A rule for secrets of any kind ([`GENERIC`], a user file's `generic-*`), which
    /// yields to a specific rule finding the same secret.
    pub(crate) generic: bool,
}

/// Why a file's text is no rule file (nothing of it is added).
#[derive(Debug)]
pub(crate) enum NotRules {
    /// It is not TOML: the parser's message.
    Toml(String),
    /// It holds no `[[rules]]`.
    NoRules,
}

/// Why one rule (or an allowlist) of a file is refused: what [`RuleSetInfo::refused`] says.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RuleError {
    /// A key every rule must have is missing.
    #[error("no {0}")]
    Missing(&'static str),
    /// A key that holds an array holds something else.
    #[error("{0} is not an array")]
    NotAnArray(&'static str),
    /// An array of strings holds something else too.
    #[error("{0} holds a value that is not a string")]
    NotAString(&'static str),
    /// `secretGroup` is not the number of a capture group of the regex.
    #[error("secretGroup names no group of the regex")]
    NoSuchGroup,
    /// `entropy` is not a number.
    #[error("entropy is not a number")]
    EntropyNotANumber,
    /// `allowlists` is not an array of tables.
    #[error("allowlists is not an array of tables")]
    AllowlistsNotTables,
    /// `regexTarget` is none of `secret`, `match`, `line`.
    #[error("unknown regexTarget {0:?}")]
    UnknownTarget(String),
    /// `condition` is neither `OR` nor `AND`.
    #[error("unknown condition {0:?}")]
    UnknownCondition(String),
    /// A regex does not compile: the compiler's message.
    #[error(transparent)]
    Regex(#[from] regex::Error),
}

/// The rule sets in use and what of them compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSetInfo {
    /// How many built-in rules apply (all of them: the tests require it).
    pub builtin: usize,
    /// Each file added (`--redact-rules`, the default file): its name and how many of its
    /// rules apply to text.
    pub files: Vec<(String, usize)>,
    /// How many rules apply to text in all.
    pub rules: usize,
    /// The ids of rules that apply to file paths only, never to text.
    pub path_bound: Vec<String>,
    /// The rules whose regex does not compile: id and the compiler's message.
    pub refused: Vec<(String, String)>,
}

/// Every rule that applies to text, and the global allowlists.
#[derive(Debug)]
pub(crate) struct RuleSet {
    pub(crate) rules: Vec<Rule>,
    /// Each file's `[allowlist]`, by file: it applies to that file's rules only.
    pub(crate) global: Vec<(usize, Allowlist)>,
    pub(crate) info: RuleSetInfo,
}

impl RuleSet {
    /// gjcfs's own rules.
    pub(crate) fn builtin() -> Self {
        let mut set = RuleSet {
            rules: Vec::new(),
            global: Vec::new(),
            info: RuleSetInfo {
                builtin: 0,
                files: Vec::new(),
                rules: 0,
                path_bound: Vec::new(),
                refused: Vec::new(),
            },
        };
        set.read("gjcfs.toml", BUILTIN)
            .expect("the built-in rules are TOML with [[rules]]");
        for rule in &mut set.rules {
            rule.generic = GENERIC.contains(&rule.id.as_str());
        }
        set.info.builtin = set.rules.len();
        set.info.rules = set.rules.len();
        set
    }

    /// Adds the rules of the file `name`, of text `text`, after the others; its rules that
    /// cannot be read are refused under their ids. An error when the file is no TOML or
    /// holds no `[[rules]]` (then nothing of it is added).
    pub(crate) fn add_file(&mut self, name: &str, text: &str) -> Result<(), NotRules> {
        let before = self.rules.len();
        self.read(name, text)?;
        for rule in &mut self.rules[before..] {
            rule.generic = rule.id.starts_with("generic-");
        }
        let added = self.rules.len() - before;
        self.info.files.push((name.to_owned(), added));
        self.info.rules = self.rules.len();
        Ok(())
    }

    /// Adds the rules of the TOML file `text`; a rule that cannot be read is refused under
    /// its id.
    fn read(&mut self, name: &str, text: &str) -> Result<(), NotRules> {
        let doc = Document::parse(text).map_err(|e| NotRules::Toml(e.to_string()))?;
        let file = self.info.files.len() + usize::from(self.info.builtin > 0);
        let Some(rules) = doc.get("rules").and_then(Item::as_array_of_tables) else {
            return Err(NotRules::NoRules);
        };
        if let Some(global) = doc.get("allowlist").and_then(Item::as_table) {
            match allowlist(global) {
                Ok(a) => self.global.push((file, a)),
                Err(e) => self
                    .info
                    .refused
                    .push((format!("{name} [allowlist]"), e.to_string())),
            }
        }
        for table in rules.iter() {
            let id = str_of(table, "id").unwrap_or_default().to_owned();
            if table.contains_key("path") {
                self.info.path_bound.push(id);
                continue;
            }
            match rule(table) {
                Ok(rule) => self.rules.push(Rule { file, ..rule }),
                Err(e) => self.info.refused.push((id, e.to_string())),
            }
        }
        Ok(())
    }
}

fn str_of<'t>(table: &'t Table, key: &str) -> Option<&'t str> {
    table.get(key).and_then(Item::as_str)
}

/// The strings of the array `key` (empty when absent).
fn strings(table: &Table, key: &'static str) -> Result<Vec<String>, RuleError> {
    let Some(item) = table.get(key) else {
        return Ok(Vec::new());
    };
    let array = item.as_array().ok_or(RuleError::NotAnArray(key))?;
    array
        .iter()
        .map(|v| v.as_str().map(str::to_owned))
        .collect::<Option<_>>()
        .ok_or(RuleError::NotAString(key))
}

fn rule(table: &Table) -> Result<Rule, RuleError> {
    let id = str_of(table, "id")
        .ok_or(RuleError::Missing("id"))?
        .to_owned();
    let regex = compile(str_of(table, "regex").ok_or(RuleError::Missing("regex"))?)?;
    let secret_group = match table.get("secretGroup").map(Item::as_integer) {
        None => 0,
        Some(Some(n)) if n >= 0 && (n as usize) < regex.captures_len() => n as usize,
        Some(_) => return Err(RuleError::NoSuchGroup),
    };
    let entropy = match table.get("entropy") {
        None => 0.0,
        Some(item) => item
            .as_float()
            .or_else(|| item.as_integer().map(|n| n as f64))
            .ok_or(RuleError::EntropyNotANumber)?,
    };
    let keywords = strings(table, "keywords")?
        .into_iter()
        .map(|k| k.to_lowercase())
        .collect();
    let allowlists = match table.get("allowlists").map(Item::as_array_of_tables) {
        None => Vec::new(),
        Some(Some(lists)) => lists.iter().map(allowlist).collect::<Result<_, _>>()?,
        Some(None) => return Err(RuleError::AllowlistsNotTables),
    };
    Ok(Rule {
        id,
        regex,
        secret_group,
        entropy,
        keywords,
        allowlists,
        file: 0,
        generic: false,
    })
}

fn allowlist(table: &Table) -> Result<Allowlist, RuleError> {
    let target = match str_of(table, "regexTarget") {
        None | Some("secret") => Target::Secret,
        Some("match") => Target::Match,
        Some("line") => Target::Line,
        Some(other) => return Err(RuleError::UnknownTarget(other.to_owned())),
    };
    let all = match str_of(table, "condition") {
        None | Some("OR") => false,
        Some("AND") => true,
        Some(other) => return Err(RuleError::UnknownCondition(other.to_owned())),
    };
    Ok(Allowlist {
        target,
        all,
        names_files: table.contains_key("paths") || table.contains_key("commits"),
        regexes: strings(table, "regexes")?
            .iter()
            .map(|r| compile(r))
            .collect::<Result<_, _>>()?,
        stopwords: strings(table, "stopwords")?
            .into_iter()
            .map(|w| w.to_lowercase())
            .collect(),
    })
}

/// Compiles a Go regex ([`translate`]d).
pub(crate) fn compile(go: &str) -> Result<Regex, RuleError> {
    let regex = RegexBuilder::new(&translate(go))
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build()?;
    Ok(regex)
}

/// How many characters after a `{` make a repetition with it (`n}`, `n,}`, `n,m}`).
fn repetition(rest: impl Iterator<Item = char>) -> Option<usize> {
    let mut len = 0;
    let (mut digits, mut comma) = (0, false);
    for c in rest {
        len += 1;
        match c {
            '0'..='9' => digits += 1,
            ',' if !comma && digits > 0 => comma = true,
            '}' if digits > 0 => return Some(len),
            _ => return None,
        }
    }
    None
}

/// Go's ASCII Perl classes, as classes of the `regex` crate, and their content inside a
/// bracketed class.
fn perl_class(c: char) -> Option<(&'static str, &'static str)> {
    Some(match c {
        'w' => ("[0-9A-Za-z_]", "0-9A-Za-z_"),
        'W' => ("[^0-9A-Za-z_]", "[^0-9A-Za-z_]"),
        'd' => ("[0-9]", "0-9"),
        'D' => ("[^0-9]", "[^0-9]"),
        's' => ("[\\t\\n\\f\\r ]", "\\t\\n\\f\\r "),
        'S' => ("[^\\t\\n\\f\\r ]", "[^\\t\\n\\f\\r ]"),
        _ => return None,
    })
}

/// A Go (RE2) regex in the `regex` crate's syntax, meaning the same:
/// - `\w \d \s` (and their negations) are ASCII in Go: spelled out as ASCII classes;
/// - `\b \B` are ASCII in Go: `(?-u:\b)`;
/// - a `{` that starts no repetition (`{n}`, `{n,}`, `{n,m}`) is a literal in Go and an
///   error in the crate: it is escaped, and so is a `}` closing none;
/// - inside a bracketed class, `[` not opening `[:name:]` is a literal in Go and a nested
///   class in the crate, and `&&`, `~~`, `--` are literals in Go and set operations in the
///   crate: they are escaped.
pub(crate) fn translate(go: &str) -> String {
    let mut out = String::with_capacity(go.len() + 16);
    let mut chars = go.chars().peekable();
    // Inside a bracketed class: whether the next character is its first.
    let mut class: Option<bool> = None;
    while let Some(c) = chars.next() {
        match (c, class) {
            ('\\', _) => {
                let Some(next) = chars.next() else {
                    out.push('\\');
                    break;
                };
                match (perl_class(next), next, class) {
                    (Some((outside, _)), _, None) => out.push_str(outside),
                    (Some((_, inside)), _, Some(_)) => out.push_str(inside),
                    (None, 'b' | 'B', None) => {
                        out.push_str("(?-u:\\");
                        out.push(next);
                        out.push(')');
                    }
                    _ => {
                        out.push('\\');
                        out.push(next);
                    }
                }
                if class.is_some() {
                    class = Some(false);
                }
            }
            ('[', None) => {
                out.push('[');
                if chars.peek() == Some(&'^') {
                    out.push('^');
                    chars.next();
                }
                class = Some(true);
            }
            ('[', Some(_)) if chars.peek() == Some(&':') => {
                // A POSIX class `[:name:]`, copied whole.
                out.push('[');
                for d in chars.by_ref() {
                    out.push(d);
                    if d == ']' {
                        break;
                    }
                }
                class = Some(false);
            }
            ('{', None) => match repetition(chars.clone()) {
                Some(len) => {
                    out.push('{');
                    out.extend(chars.by_ref().take(len));
                }
                None => out.push_str("\\{"),
            },
            ('}', None) => out.push_str("\\}"),
            (']', Some(false)) => {
                out.push(']');
                class = None;
            }
            ('[' | '&' | '~' | '-', Some(first)) => {
                let doubled = c != '-' || out.ends_with('-');
                if c != '-' || (doubled && !first) {
                    out.push('\\');
                }
                out.push(c);
                class = Some(false);
            }
            (_, Some(_)) => {
                out.push(c);
                class = Some(false);
            }
            _ => out.push(c),
        }
    }
    out
}
