//! The completion scripts and man pages, generated from the command definitions: each
//! shell's script loaded into that shell and asked to complete, the man pages rendered by
//! groff without a warning and equal to the ones in `docs/man/`.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::{gjcfs_stdout, tool_ready};

/// The commands, as the top-level help names them.
const COMMANDS: &[&str] = &[
    "context",
    "ls",
    "append",
    "entries",
    "history",
    "generate",
    "mount",
    "show",
    "export",
    "usage",
    "search",
    "files",
    "mcp",
    "umount",
    "check",
    "completions",
    "man",
];

fn completions(shell: &str, dir: &Path) -> std::path::PathBuf {
    let path = dir.join(format!("gjcfs.{shell}"));
    std::fs::write(&path, gjcfs_stdout(&["completions", shell])).unwrap();
    path
}

/// `shell`'s completion script in a temporary directory, when the shell is installed.
fn script_for(shell: &str) -> Option<(tempfile::TempDir, std::path::PathBuf)> {
    if !tool_ready(shell) {
        return None;
    }
    let tmp = tempfile::tempdir().unwrap();
    let script = completions(shell, tmp.path());
    Some((tmp, script))
}

fn ran(out: Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn bash_completes_commands_and_flags() {
    let Some((_tmp, script)) = script_for("bash") else {
        return;
    };
    // What bash's completion would offer for a command line whose last word is partial.
    let complete = |line: &str| {
        let words: Vec<&str> = line.split(' ').collect();
        let program = format!(
            "source '{}'; COMP_WORDS=({}); COMP_CWORD={}; COMP_LINE='{line}'; \
             COMP_POINT={}; _gjcfs gjcfs '{}' '{}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display(),
            words.join(" "),
            words.len() - 1,
            line.len(),
            words[words.len() - 1],
            words[words.len() - 2],
        );
        ran(Command::new("bash")
            .arg("-c")
            .arg(program)
            .output()
            .unwrap())
    };
    assert_eq!(complete("gjcfs mou"), "mount\n");
    let offered = complete("gjcfs ");
    for command in COMMANDS {
        assert!(
            offered.lines().any(|w| w == *command),
            "{command}: {offered}"
        );
    }
    assert_eq!(complete("gjcfs ls --ses"), "--session-dir\n");
    assert_eq!(complete("gjcfs show x --format t"), "tree\n");
}

#[test]
fn fish_completes_commands_and_flags() {
    let Some((_tmp, script)) = script_for("fish") else {
        return;
    };
    let complete = |line: &str| {
        let program = format!("source '{}'; complete -C '{line}'", script.display());
        ran(Command::new("fish")
            .arg("-c")
            .arg(program)
            .output()
            .unwrap())
    };
    let first = |text: String| {
        text.lines()
            .map(|l| l.split('\t').next().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(first(complete("gjcfs mou")), ["mount"]);
    assert!(first(complete("gjcfs ls --ses")).contains(&"--session-dir".to_owned()));
}

#[test]
fn zsh_and_powershell_scripts_name_every_command() {
    let tmp = tempfile::tempdir().unwrap();
    // How each script names a command's own completions.
    type CaseOf = fn(&str) -> String;
    let cases: [(&str, CaseOf); 2] = [
        ("zsh", |c| format!("({c})\n_arguments")),
        ("powershell", |c| format!("'gjcfs;{c}' {{")),
    ];
    for (shell, case) in cases {
        let text = std::fs::read_to_string(completions(shell, tmp.path())).unwrap();
        for command in COMMANDS {
            assert!(text.contains(&case(command)), "{shell}: {command}");
        }
        assert!(text.contains("--session-dir"), "{shell}");
    }
    if tool_ready("zsh") {
        // zsh parses the script (a completion function: loading it needs compinit).
        let script = tmp.path().join("gjcfs.zsh");
        ran(Command::new("zsh").arg("-n").arg(&script).output().unwrap());
    }
}

#[test]
fn man_pages_render_cleanly_and_docs_man_is_current() {
    let tmp = tempfile::tempdir().unwrap();
    gjcfs_stdout(&["man".as_ref(), "--out".as_ref(), tmp.path().as_os_str()]);
    let names = |dir: &Path| {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    };
    let generated = names(tmp.path());
    let expected: Vec<String> = std::iter::once("gjcfs.1".to_owned())
        .chain(COMMANDS.iter().map(|c| format!("gjcfs-{c}.1")))
        .chain(["gjcfs-history-add.1", "gjcfs-history-search.1"].map(String::from))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(generated, expected);
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/man");
    assert_eq!(
        names(&docs),
        generated,
        "docs/man: run `gjcfs man --out docs/man`"
    );
    for name in &generated {
        let page = std::fs::read(tmp.path().join(name)).unwrap();
        assert_eq!(
            std::fs::read(docs.join(name)).unwrap(),
            page,
            "docs/man/{name} is out of date: run `gjcfs man --out docs/man`"
        );
    }
    if !tool_ready("groff") {
        return;
    }
    for name in &generated {
        // -k: the pages are UTF-8; -ww: every warning.
        let out = Command::new("groff")
            .args(["-k", "-man", "-Tutf8", "-ww", "-z"])
            .arg(tmp.path().join(name))
            .output()
            .unwrap();
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "{name}: {out:?}"
        );
    }
    let ls = Command::new("groff")
        .args(["-k", "-man", "-Tutf8"])
        .arg(tmp.path().join("gjcfs-ls.1"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&ls.stdout);
    assert!(
        text.contains("--session-dir") || text.contains("--ses"),
        "{text}"
    );
}
