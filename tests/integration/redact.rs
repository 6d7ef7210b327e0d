//! `--redact`: `gjcfs export --redact` in every format, and the pages of `gjcfs mount
//! --redact`, over a store whose session holds fake secrets of each kind.

use std::fs;
use std::path::{Path, PathBuf};

use gjcfs::engine::json;

use crate::common::fixture;
use crate::common::mount::{p, Mount};

const AWS: &str = "AKIAZ3MSJV4WWNKWW5FG";
const ANTHROPIC: &str = "sk-ant-api03-9dK2mQx7Lp4vR8sT1wY6zB3nF5hJ0cXaE2gU7iO9kM4pS6dW1qZ8rT3yV5bN7mL0xC2vB4nM6aS8dF0gH2jK4lQ9w8E7rAA";
const PASSWORD: &str = "hunter2horse";
const PEM_BODY: &str = "MIIEowIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi8AsRDKJ4ks2yHU/KtJTGFZrNT";
const ENV_LINE: &str = "DATABASE_URL_SUFFIX=plainvalue";
/// A token of a kind only the rules of `--redact-rules` know
/// (`tests/fixtures/secrets/acme-rules.toml`).
const ACME: &str = "acme_live_k3j4h5g6f7d8s9a0q1w2e3r4";
/// One the file's allowlist allows.
const ACME_ALLOWED: &str = "acme_test_000000000000000000000000";

/// Every secret of the store, none of which an output may hold.
const SECRETS: [&str; 5] = [AWS, ANTHROPIC, PASSWORD, PEM_BODY, ENV_LINE];

/// What each session's report must say: one secret of each kind.
const REPORTED: &str = "redacted 5 secret(s): anthropic-api-key 1, aws-access-token 1, \
                        env-file 1, private-key 1, secret-assignment 1";

/// A store of one managed session holding the secrets: a prompt with an AWS key and an
/// Anthropic key, an answer with a password and a private key, and a `read` of a `.env`
/// file with its output.
struct SecretStore {
    tmp: tempfile::TempDir,
    sid: String,
    file: PathBuf,
}

impl SecretStore {
    fn agent(&self) -> PathBuf {
        self.tmp.path().join("agent")
    }
}

fn message(json_text: &str) -> json::Value {
    json::parse(json_text).unwrap()
}

fn secret_store() -> SecretStore {
    let tmp = tempfile::tempdir().unwrap();
    let m = crate::common::mount::new_managed_session(tmp.path());
    let pem = format!(
        "-----BEGIN RSA PRIVATE KEY-----\\n{PEM_BODY}\\nO9GPhjfHYkArVq9ev4hm4BSGIy2h0xZz4p1YgxkkOeWd2BfjMBVoN7eAhlKVELU8\\n-----END RSA PRIVATE KEY-----"
    );
    let messages = [
        format!(
            r#"{{"role":"user","content":"deploy with aws_key = {AWS} and ANTHROPIC_API_KEY={ANTHROPIC}","timestamp":1}}"#
        ),
        format!(
            r#"{{"role":"assistant","content":[{{"type":"text","text":"Run: mysql password={PASSWORD} and use\n{pem}"}},{{"type":"toolCall","id":"call_1","name":"read","arguments":{{"path":"/work/.env"}}}}],"provider":"p","model":"m","timestamp":2}}"#
        ),
        format!(
            r#"{{"role":"toolResult","toolCallId":"call_1","toolName":"read","content":[{{"type":"text","text":"{ENV_LINE}\n"}}],"isError":false,"timestamp":3}}"#
        ),
        format!(
            r#"{{"role":"assistant","content":"Done; the Acme tokens {ACME} and {ACME_ALLOWED} stay.","provider":"p","model":"m","timestamp":4}}"#
        ),
    ];
    for text in &messages {
        m.append_message(message(text)).unwrap();
    }
    m.close().unwrap();
    SecretStore {
        sid: m.session_id(),
        file: m.session_file().unwrap(),
        tmp,
    }
}

fn export(store: &SecretStore, format: &str, out: &Path, redact: bool) -> std::process::Output {
    export_with(store, format, out, redact.then_some(&[]))
}

/// `gjcfs export` of the store's session; `redact`: `--redact` and these arguments. The
/// user's configuration is the store's `config/` (no secret rules unless a test writes
/// them).
fn export_with(
    store: &SecretStore,
    format: &str,
    out: &Path,
    redact: Option<&[&str]>,
) -> std::process::Output {
    let mut command = std::process::Command::new(crate::common::gjcfs_bin());
    command
        .args(["export", &store.sid, "--format", format, "--out", p(out)])
        .args(["--agent-dir", p(&store.agent())])
        .env("XDG_CONFIG_HOME", store.tmp.path().join("config"));
    if let Some(args) = redact {
        command.arg("--redact").args(args);
    }
    let output = command.output().unwrap();
    assert!(output.status.success(), "{output:?}");
    output
}

fn assert_redacted(text: &str, what: &str) {
    for secret in SECRETS {
        assert!(!text.contains(secret), "{what} holds {secret}");
    }
    for rule in [
        "aws-access-token",
        "anthropic-api-key",
        "secret-assignment",
        "private-key",
        "env-file",
    ] {
        assert!(
            text.contains(&format!("[redacted: {rule}]")),
            "{what} has no placeholder of {rule}"
        );
    }
}

#[test]
fn an_export_with_redact_holds_no_secret_in_any_format_and_reports_each_rule() {
    let store = secret_store();
    let stored = fs::read_to_string(&store.file).unwrap();
    for secret in SECRETS {
        assert!(stored.contains(secret), "the store holds {secret}");
    }
    for format in ["html", "md", "jsonl"] {
        let out = store.tmp.path().join(format!("out-{format}"));
        let output = export(&store, format, &out, true);
        let written = fs::read_to_string(out.join(format!("{}.{format}", store.sid))).unwrap();
        assert_redacted(&written, format);
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert!(
            stderr.contains("gjcfs: redacting secrets by built-in ") && !stderr.contains("; plus"),
            "{stderr}"
        );
        assert!(
            written.contains(ACME),
            "no rule of the built-in set knows Acme's"
        );
        assert!(
            stderr.contains(&format!("gjcfs: {}: {REPORTED}\n", store.sid)),
            "{format}: {stderr}"
        );
        assert!(
            stderr.contains(&format!("gjcfs: in all: {REPORTED}\n")),
            "{stderr}"
        );
        for secret in SECRETS {
            assert!(!stderr.contains(secret), "the report names {secret}");
        }
        // Without --redact the export holds them as stored.
        let plain = store.tmp.path().join(format!("plain-{format}"));
        export(&store, format, &plain, false);
        let written = fs::read_to_string(plain.join(format!("{}.{format}", store.sid))).unwrap();
        assert!(written.contains(AWS), "{format} without --redact");
    }
}

#[test]
fn a_redacted_jsonl_export_is_a_session_of_the_same_entries() {
    let store = secret_store();
    let out = store.tmp.path().join("out");
    export(&store, "jsonl", &out, true);
    let original = gjcfs::engine::load_session(&store.file).unwrap();
    let exported = gjcfs::engine::load_session(&out.join(format!("{}.jsonl", store.sid))).unwrap();
    assert!(exported.skipped.is_empty());
    let ids = |s: &gjcfs::engine::Session| -> Vec<(Option<String>, Option<String>, String)> {
        s.records()
            .iter()
            .map(|r| {
                (
                    r.id().map(str::to_owned),
                    r.parent_id().map(str::to_owned),
                    r.get_str("type").unwrap_or_default().to_owned(),
                )
            })
            .collect()
    };
    assert_eq!(ids(&exported.session), ids(&original.session));
    assert_eq!(exported.session.leaf_id(), original.session.leaf_id());
    assert_eq!(
        exported.session.header().id(),
        original.session.header().id()
    );
    // Lines without secrets are the stored lines, byte for byte.
    let stored = fs::read_to_string(&store.file).unwrap();
    let written = fs::read_to_string(out.join(format!("{}.jsonl", store.sid))).unwrap();
    let (stored, written): (Vec<&str>, Vec<&str>) =
        (stored.lines().collect(), written.lines().collect());
    assert_eq!(stored.len(), written.len());
    assert_eq!(stored[0], written[0]);
    assert_eq!(stored.last(), written.last());
}

#[test]
fn a_mount_with_redact_shows_pages_without_secrets_and_the_data_as_stored() {
    require_fuse!();
    let store = secret_store();
    let agent = store.agent();
    let mount = Mount::start(&["--agent-dir", p(&agent), "--redact"]);
    let dir = mount.session_dir(&store.sid);
    for page in ["context.html", "context.md"] {
        let text = fs::read_to_string(dir.join(page)).unwrap();
        assert_redacted(&text, page);
    }
    let index = fs::read_to_string(mount.path().join("index.html")).unwrap();
    assert!(!index.contains(AWS), "the index's title");
    let transcript = fs::read_to_string(dir.join("session.jsonl")).unwrap();
    assert!(transcript.contains(AWS) && transcript.contains(PASSWORD));
    let context = fs::read_to_string(dir.join("context.json")).unwrap();
    assert!(context.contains(AWS));
}

#[test]
fn redact_rules_adds_a_users_rules_to_the_builtin_ones_and_so_does_the_default_file() {
    let store = secret_store();
    let rules = store.tmp.path().join("acme.toml");
    fs::copy(fixture("secrets/acme-rules.toml"), &rules).unwrap();
    let default = store.tmp.path().join("config/gjcfs/secret-rules.toml");
    for (n, args) in [vec!["--redact-rules", p(&rules)], vec![]]
        .into_iter()
        .enumerate()
    {
        if n == 1 {
            // No flag: the default file, when it exists.
            fs::create_dir_all(default.parent().unwrap()).unwrap();
            fs::copy(&rules, &default).unwrap();
        }
        let out = store.tmp.path().join(format!("out-{n}"));
        let output = export_with(&store, "md", &out, Some(&args));
        let written = fs::read_to_string(out.join(format!("{}.md", store.sid))).unwrap();
        assert_redacted(&written, "md");
        assert!(!written.contains(ACME), "{written}");
        assert!(written.contains("acme_live_[redacted: acme-token]"));
        assert!(written.contains(ACME_ALLOWED), "the file's allowlist");
        let stderr = String::from_utf8(output.stderr).unwrap();
        let file = if n == 0 { &rules } else { &default };
        assert!(
            stderr.contains(&format!("; plus {}: 1 rules\n", file.display())),
            "{stderr}"
        );
        assert!(
            stderr.contains("secret rule acme-broken is left out"),
            "{stderr}"
        );
        assert!(stderr.contains("acme-token 1"), "{stderr}");
    }
    // A file that is not one of rules is an error, and so is a missing one.
    for bad in ["not = [toml", ""] {
        fs::write(&rules, bad).unwrap();
        let output = std::process::Command::new(crate::common::gjcfs_bin())
            .args(["export", &store.sid, "--format", "md", "--redact"])
            .args(["--redact-rules", p(&rules), "--out"])
            .arg(store.tmp.path().join("out-bad"))
            .args(["--agent-dir", p(&store.agent())])
            .output()
            .unwrap();
        assert!(!output.status.success(), "{bad:?}");
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert!(stderr.contains("not a rule file"), "{stderr}");
    }
}
