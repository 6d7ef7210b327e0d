use super::rules::{translate, RuleSet, BUILTIN};
use super::*;
use crate::read::replay::parse_session_entries;
use crate::session::tree::Session;
use std::path::Path;

fn redacted(text: &str) -> (String, Report) {
    let mut report = Report::default();
    let out = redact_text(text, &mut report).into_owned();
    (out, report)
}

/// Every built-in rule's id and examples, as `rules/gjcfs.toml` lists them.
fn builtin_examples() -> Vec<(String, Vec<String>)> {
    let doc: toml_edit::Document<&str> = toml_edit::Document::parse(BUILTIN).unwrap();
    let rules = doc["rules"].as_array_of_tables().unwrap();
    rules
        .iter()
        .map(|rule| {
            let examples = rule.get("examples").and_then(|e| e.as_array());
            let examples = examples.into_iter().flatten();
            (
                rule["id"].as_str().unwrap().to_owned(),
                examples.map(|e| e.as_str().unwrap().to_owned()).collect(),
            )
        })
        .collect()
}

#[test]
fn every_builtin_rule_compiles_and_has_examples() {
    let info = rule_set();
    assert_eq!(
        info.refused,
        Vec::<(String, String)>::new(),
        "rules refused"
    );
    assert!(info.path_bound.is_empty());
    let rules = builtin_examples();
    assert_eq!((info.builtin, info.rules), (rules.len(), rules.len()));
    assert!(info.files.is_empty());
    let mut ids: Vec<&str> = rules.iter().map(|(id, _)| id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), rules.len(), "rule ids are unique");
    for (id, examples) in &rules {
        assert!(!examples.is_empty(), "{id} has no example");
    }
}

#[test]
fn every_example_of_every_builtin_rule_is_redacted_by_its_own_rule() {
    let scanner = scanner();
    let mut missed = Vec::new();
    let mut count = 0;
    for (i, (rule, examples)) in builtin_examples().iter().enumerate() {
        assert_eq!(&scanner.rule(i).id, rule);
        for text in examples {
            count += 1;
            let mut found = Vec::new();
            scanner.find_by(i, text, &mut found);
            let (out, report) = redacted(text);
            if found.is_empty() || !out.contains(&placeholder(rule)) {
                missed.push(format!("{rule}: {text:?} became {out:?} ({report})"));
            }
        }
    }
    assert!(count > 60, "{count} examples");
    assert!(
        missed.is_empty(),
        "{} of {count} examples missed:\n{}",
        missed.len(),
        missed.join("\n")
    );
}

/// Fake secrets of the kinds the issue names, each with the rule that must replace it.
const FAKE: &[(&str, &str)] = &[
    ("aws_key = AKIAZ3MSJV4WWNKWW5FG", "aws-access-token"),
    (
        "export ANTHROPIC_API_KEY=sk-ant-api03-9dK2mQx7Lp4vR8sT1wY6zB3nF5hJ0cXaE2gU7iO9kM4pS6dW1qZ8rT3yV5bN7mL0xC2vB4nM6aS8dF0gH2jK4lQ9w8E7rAA",
        "anthropic-api-key",
    ),
    (
        "OPENAI_API_KEY=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",
        "openai-api-key",
    ),
    ("curl -u admin password=hunter2 https://x", "secret-assignment"),
    ("DB_PASSWORD: \"correct horse\"", "secret-assignment"),
    ("token=ab12cd34", "secret-assignment"),
    ("secret=Tr0ub4dor&3", "secret-assignment"),
    ("postgres://app:s3cr3tpw@db.internal:5432/app", "url-credentials"),
    (
        "Authorization: eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
        "jwt",
    ),
    (
        "seed Zq8vN3xLr6TgW1yKc5JbPm9HdS2fQa7E then",
        "high-entropy-token",
    ),
];

const PEM: &str = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi8AsRDKJ4ks2yHU/KtJTGFZrNT\nO9GPhjfHYkArVq9ev4hm4BSGIy2h0xZz4p1YgxkkOeWd2BfjMBVoN7eAhlKVELU8\ndfSLm1wMJn1YdJcQ0OmY8u8dKp4O3sCYzF9b+0+uE5Hq1j1aJ9MYqKD5tQoZOzu2\n-----END RSA PRIVATE KEY-----";

#[test]
fn fake_secrets_of_each_kind_are_replaced_by_their_rules_placeholder() {
    for (text, rule) in FAKE {
        let (out, report) = redacted(text);
        assert!(
            out.contains(&placeholder(rule)),
            "{text:?} became {out:?} ({report})"
        );
    }
    let (out, report) = redacted(&format!("the key:\n{PEM}\nend"));
    assert_eq!(out, "the key:\n[redacted: private-key]\nend");
    assert_eq!(report.to_string(), "private-key 1");
    // The secret is gone and nothing but it.
    let (out, _) = redacted("aws_key = AKIAZ3MSJV4WWNKWW5FG # ci");
    assert_eq!(out, "aws_key = [redacted: aws-access-token] # ci");
}

#[test]
fn ordinary_text_and_the_structures_own_strings_stay_unchanged() {
    let kept = [
        "The password is required, and the token expires after an hour.",
        "Token: refreshed before each request; the secret: keep it out of logs.",
        "entry 3f2a9c1d follows 0b1e4d7a on the branch",
        "550e8400-e29b-41d4-a716-446655440000",
        "blob:sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08  demo.tar",
        "commit 83d9cd684c87d95d656c1458ef04895a7f1cbd8e",
        "/home/user/Projects/MyApp2/src/components/ButtonGroupContainer.tsx",
        "AbstractSingletonProxyFactoryBeanConfigurationHelper2",
        "fn password_hash(password: &str) -> String { hash(password) }",
        "let token = process.env.API_TOKEN;",
        "password: string;",
        "\ttokens = \"import\";\n\tconst contextTokens = lastAssistantMessage",
        "const searchTokens = query.toLowerCase();",
        "max_tokens: 4096, maxTokens=8192",
        "let tokenizer = \"whitespace\";",
        "Set ANTHROPIC_API_KEY=sk-ant-... before running.",
        "STRIPE_PUBLISHABLE_KEY=pk_live_51Hq9TfKe2LxWv7RmZ3nBc8DyA0sJ4uGp6iQ1oE5tY",
        "Stripe.setPublishableKey('pk_test_51Hq9TfKe2LxWv7RmZ3nBc8DyA0sJ4uGp6iQ1oE5tY')",
        "import { Component } from '@angular/core'; export class AppModule {}",
        "self.network_connection_manager.reconnect_after_failure(timeout=30)",
        "See https://docs.example.com/guide/getting-started#install for details.",
        "git@github.com:example/repo.git",
        "d41d8cd98f00b204e9800998ecf8427e  empty.txt",
        "eyJ is how base64 of a JSON object starts.",
        "The task SKIPPED 3 tests; ask for help.",
        "",
    ];
    for text in kept {
        let (out, report) = redacted(text);
        assert_eq!(out, text, "{report}");
    }
}

#[test]
fn a_redacted_text_is_redacted_again_to_itself() {
    for (text, _) in FAKE {
        let (once, _) = redacted(text);
        let (twice, report) = redacted(&once);
        assert_eq!(twice, once, "{report}");
    }
}

const SESSION: &str = concat!(
    r#"{"type":"session","version":5,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#,
    "\n",
    r#"{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"deploy with password=hunter2 please"}}"#,
    "\n",
    r#"{"type":"message","id":"b2c3d4e5","parentId":"a1b2c3d4","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"call_Zq8vN3xLr6TgW1yKc5JbPm9H","name":"read","arguments":{"path":"/w/.env"}}]}}"#,
    "\n",
    r#"{"type":"message","id":"c3d4e5f6","parentId":"b2c3d4e5","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"toolResult","toolCallId":"call_Zq8vN3xLr6TgW1yKc5JbPm9H","toolName":"read","content":[{"type":"text","text":"HOST=db\nPORT=5432\n"}],"isError":false}}"#,
    "\n",
    r#"{"type":"message","id":"d4e5f6a7","parentId":"c3d4e5f6","timestamp":"2026-01-01T00:00:04.000Z","message":{"role":"user","content":[{"type":"image","data":"QUtJQVozTVNKVjRXV05LV1c1RkdaY3I4dk4zeExyNlRnVzF5S2M1SmJQbTlIZFMyZlFhN0U=","mimeType":"image/png"},{"type":"text","text":"key AKIAZ3MSJV4WWNKWW5FG"}]}}"#,
    "\n",
    "not json: token=ab12cd34\n",
);

#[test]
fn a_session_files_lines_are_redacted_value_by_value_and_stay_a_session() {
    let mut report = Report::default();
    let out = redact_lines(SESSION.as_bytes(), &mut report);
    let text = String::from_utf8(out).unwrap();
    assert_eq!(
        report.to_string(),
        "aws-access-token 1, env-file 1, secret-assignment 2"
    );
    for secret in ["hunter2", "HOST=db", "AKIAZ3MSJV4WWNKWW5FG ", "ab12cd34"] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    let before: Vec<&str> = SESSION.lines().collect();
    let after: Vec<&str> = text.lines().collect();
    assert_eq!(after.len(), before.len());
    assert_eq!(after[0], before[0], "an unchanged line keeps its bytes");
    assert_eq!(after[2], before[2], "the tool call's id and path are kept");
    assert!(after[3].contains(r#""text":"[redacted: env-file]""#));
    assert!(after[4]
        .contains("QUtJQVozTVNKVjRXV05LV1c1RkdaY3I4dk4zeExyNlRnVzF5S2M1SmJQbTlIZFMyZlFhN0U="));
    assert_eq!(after[5], "not json: token=[redacted: secret-assignment]");
    let original = parse_session_entries(SESSION).unwrap().records;
    let records = parse_session_entries(&text).unwrap().records;
    assert_eq!(records.len(), original.len());
    for (a, b) in records.iter().zip(&original) {
        assert_eq!(
            (a.id(), a.parent_id(), a.record_type()),
            (b.id(), b.parent_id(), b.record_type())
        );
    }
}

#[test]
fn a_sessions_redacted_copy_keeps_its_tree_and_leaf() {
    let records = parse_session_entries(SESSION).unwrap().records;
    let mut session = Session::from_records(records);
    session.branch("b2c3d4e5").unwrap();
    let mut report = Report::default();
    let copy = redacted_session(&session, None, &mut report);
    assert_eq!(report.total(), 3);
    assert_eq!(copy.leaf_id(), Some("b2c3d4e5"));
    assert_eq!(copy.tree(), session.tree());
    let first = copy.record(1).message().unwrap();
    assert_eq!(
        first.get_str("content"),
        Some("deploy with password=[redacted: secret-assignment] please")
    );
}

#[test]
fn go_regexes_are_spelled_as_the_regex_crate_reads_them_meaning_the_same() {
    for (go, rust) in [
        (r"\bA\w+\d\s", r"(?-u:\b)A[0-9A-Za-z_]+[0-9][\t\n\f\r ]"),
        (r"[\w.-]{0,50}?", r"[0-9A-Za-z_.-]{0,50}?"),
        (r"[^\S\n]", r"[^[^\t\n\f\r ]\n]"),
        (r"[[:alnum:]&&~~]", r"[[:alnum:]\&\&\~\~]"),
        (r"\$?{{[^}]+}}", r"\$?\{\{[^}]+\}\}"),
        (r"^\$(?:\d+|{\d+})$", r"^\$(?:[0-9]+|\{[0-9]+\})$"),
        (r"a{2,}b{3}c{1,4}", r"a{2,}b{3}c{1,4}"),
    ] {
        assert_eq!(translate(go), rust, "{go}");
        rules::compile(go).unwrap();
    }
    // Go's \w and \b are ASCII: a secret beside a non-ASCII letter is still found.
    let (out, _) = redacted("clé:AKIAZ3MSJV4WWNKWW5FG");
    assert_eq!(out, "clé:[redacted: aws-access-token]");
}

/// A user's file in gitleaks' format, with keys gjcfs does not read.
/// The user's rule file of the integration tests too.
const ACME: &str = include_str!("../../../../tests/fixtures/secrets/acme-rules.toml");

#[test]
fn a_users_file_adds_its_rules_after_the_builtin_ones() {
    let mut set = RuleSet::builtin();
    let builtin = set.rules.len();
    set.add_file("acme.toml", ACME).unwrap();
    assert_eq!(set.info.files, [("acme.toml".to_owned(), 1)]);
    assert_eq!(set.info.rules, builtin + 1);
    assert_eq!(set.info.path_bound, ["bound-to-paths"]);
    assert_eq!(set.info.refused.len(), 1);
    assert_eq!(set.info.refused[0].0, "acme-broken");
    let scanner = Scanner::new(set);
    let mut report = Report::default();
    let text = "use acme_live_k3j4h5g6f7d8s9a0q1w2e3r4 or acme_test_000000000000000000000000 \
                or acme_live_sample1sample2sample3 with AKIAZ3MSJV4WWNKWW5FG";
    assert_eq!(
        redact_by(&scanner, text, &mut report),
        "use acme_live_[redacted: acme-token] or acme_test_000000000000000000000000 \
         or acme_live_sample1sample2sample3 with [redacted: aws-access-token]",
        "the file's global allowlist is its own rules' only"
    );
    assert_eq!(report.to_string(), "acme-token 1, aws-access-token 1");
    for bad in ["not = [toml", "title = \"no rules\""] {
        assert!(
            RuleSet::builtin().add_file("bad.toml", bad).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn a_rule_file_gjcfs_cannot_use_is_an_error_of_its_cause_naming_it() {
    use crate::storage::MemoryStorage;
    let storage = MemoryStorage::new();
    let (bad_text, not_toml, empty) = ("/r/latin1.toml", "/r/not.toml", "/r/empty.toml");
    storage.put_file(Path::new(bad_text), b"title = \"caf\xe9\"\n");
    storage.put_file(Path::new(not_toml), b"not = [toml");
    storage.put_file(Path::new(empty), b"title = \"no rules\"\n");
    let error = |file: &str| use_rules(&storage, &[PathBuf::from(file)]).unwrap_err();

    let missing = error("/r/missing.toml");
    assert!(
        matches!(&missing, RedactError::Read { path, source }
            if path == Path::new("/r/missing.toml") && source.kind() == io::ErrorKind::NotFound),
        "{missing:?}"
    );
    let cause = std::error::Error::source(&missing).expect("the io error is its source");
    assert_eq!(missing.to_string(), format!("/r/missing.toml: {cause}"));

    let latin1 = error(bad_text);
    assert!(matches!(latin1, RedactError::NotUtf8 { .. }), "{latin1:?}");
    assert_eq!(
        latin1.to_string(),
        "/r/latin1.toml: invalid utf-8 sequence of 1 bytes from index 12"
    );

    let toml = error(not_toml);
    let RedactError::NotToml { path, message } = &toml else {
        panic!("{toml:?}");
    };
    assert_eq!(path, Path::new(not_toml));
    let parser = toml_edit::Document::parse("not = [toml").unwrap_err();
    assert_eq!(message, &parser.to_string(), "the parser's own message");
    assert_eq!(
        toml.to_string(),
        format!("/r/not.toml: not a rule file: {parser}")
    );

    let no_rules = error(empty);
    assert!(matches!(&no_rules, RedactError::NoRules { path } if path == Path::new(empty)));
    assert_eq!(
        no_rules.to_string(),
        "/r/empty.toml: not a rule file: no [[rules]]"
    );

    // Once the rules are compiled (the first redaction does it), they stay.
    scanner();
    let in_use = use_rules(&storage, &[]).unwrap_err();
    assert!(matches!(in_use, RedactError::InUse), "{in_use:?}");
    assert_eq!(in_use.to_string(), "the secret rules are in use already");
}

#[test]
fn a_rule_gjcfs_cannot_read_is_refused_saying_why() {
    let file = r#"
[[rules]]
id = "fine"
regex = "fine_[a-z]{8}"

[[rules]]
regex = "no-id"

[[rules]]
id = "no-regex"

[[rules]]
id = "bad-group"
regex = "a(b)"
secretGroup = 2

[[rules]]
id = "bad-entropy"
regex = "a"
entropy = "high"

[[rules]]
id = "bad-keywords"
regex = "a"
keywords = "a"

[[rules]]
id = "bad-stopwords"
regex = "a"
[[rules.allowlists]]
stopwords = ["x", 1]

[[rules]]
id = "bad-allowlists"
regex = "a"
allowlists = 3

[[rules]]
id = "bad-target"
regex = "a"
[[rules.allowlists]]
regexTarget = "file"

[[rules]]
id = "bad-condition"
regex = "a"
[[rules.allowlists]]
condition = "XOR"

[[rules]]
id = "bad-regex"
regex = "a(b"

[allowlist]
regexes = ["(("]
"#;
    let mut set = RuleSet::builtin();
    set.add_file("mixed.toml", file).unwrap();
    assert_eq!(set.info.files, [("mixed.toml".to_owned(), 1)]);
    let refused: Vec<(&str, &str)> = (set.info.refused.iter())
        .map(|(id, why)| (id.as_str(), why.lines().next().unwrap_or_default()))
        .collect();
    assert_eq!(
        refused,
        [
            ("mixed.toml [allowlist]", "regex parse error:"),
            ("", "no id"),
            ("no-regex", "no regex"),
            ("bad-group", "secretGroup names no group of the regex"),
            ("bad-entropy", "entropy is not a number"),
            ("bad-keywords", "keywords is not an array"),
            (
                "bad-stopwords",
                "stopwords holds a value that is not a string"
            ),
            ("bad-allowlists", "allowlists is not an array of tables"),
            ("bad-target", "unknown regexTarget \"file\""),
            ("bad-condition", "unknown condition \"XOR\""),
            ("bad-regex", "regex parse error:"),
        ]
    );
}
