//! What gjcfs shows on a terminal, checked on a pseudo-terminal: colour (`--color`,
//! `NO_COLOR`, `TERM=dumb`) and progress, and that neither reaches a pipe.

use std::fs;
use std::path::Path;
use std::process::Command;

use crate::common::gjcfs_bin;
use crate::common::pty::{run_on_terminal, Screen};

/// An agent directory with one session whose reply says `zebraword`.
fn store() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let scope = tmp.path().join("agent/sessions/--w--");
    fs::create_dir_all(&scope).unwrap();
    let text = crate::common::SessionText::new()
        .message("q1", None, "user", "where is the zebraword")
        .message("a1", Some("q1"), "assistant", "the zebraword is here")
        .text();
    fs::write(scope.join("2026-01-01T00-00-00-000Z_s.jsonl"), text).unwrap();
    tmp
}

fn agent(tmp: &tempfile::TempDir) -> String {
    tmp.path().join("agent").to_str().unwrap().to_owned()
}

/// `search zebraword` over the store, with its index in the store's temp dir, then `extra`.
fn search_args(tmp: &tempfile::TempDir, extra: &[&str]) -> Vec<String> {
    let index = tmp.path().join("index");
    let mut args = ["search", "zebraword", "--all", "--agent-dir"]
        .map(str::to_owned)
        .to_vec();
    args.extend([
        agent(tmp),
        "--index".to_owned(),
        index.to_str().unwrap().to_owned(),
    ]);
    args.extend(extra.iter().map(|&a| a.to_owned()));
    args
}

/// `gjcfs search zebraword` on a terminal.
fn search(tmp: &tempfile::TempDir, extra: &[&str], env: &[(&str, Option<&str>)]) -> Screen {
    let owned = search_args(tmp, extra);
    let args: Vec<&str> = owned.iter().map(String::as_str).collect();
    let screen = run_on_terminal(&args, env);
    assert!(screen.status.success(), "{args:?}: {}", screen.text);
    assert!(screen.text.contains("zebraword"), "{}", screen.text);
    screen
}

#[test]
fn colour_on_a_terminal_follows_color_no_color_and_term() {
    let tmp = store();
    // Matches are highlighted on a terminal by default.
    let plain = search(&tmp, &[], &[]);
    assert!(
        plain.text.contains("\u{1b}[1m\u{1b}[31mzebraword\u{1b}[0m"),
        "{:?}",
        plain.text
    );
    for (extra, env, why) in [
        (&[][..], &[("NO_COLOR", Some("1"))][..], "NO_COLOR=1"),
        (&[], &[("TERM", Some("dumb"))], "TERM=dumb"),
        (&["--color", "never"], &[], "--color never"),
        (&["--color=never"], &[], "--color=never"),
        (&[], &[("CLICOLOR", Some("0"))], "CLICOLOR=0"),
    ] {
        let screen = search(&tmp, extra, env);
        assert!(!screen.has_escapes(), "{why}: {:?}", screen.text);
    }
    // An empty NO_COLOR is no request; a flag beats the environment.
    assert!(search(&tmp, &[], &[("NO_COLOR", Some(""))]).has_escapes());
    assert!(search(&tmp, &["--color", "always"], &[("NO_COLOR", Some("1"))]).has_escapes());
    assert!(search(&tmp, &["--color", "always"], &[("TERM", Some("dumb"))]).has_escapes());
}

#[test]
fn a_pipe_gets_colour_only_when_asked() {
    let tmp = store();
    let run = |extra: &[&str], env: &[(&str, &str)]| {
        let mut command = Command::new(gjcfs_bin());
        command
            .args(search_args(&tmp, extra))
            .env_remove("NO_COLOR")
            .env_remove("CLICOLOR_FORCE");
        command.envs(env.iter().copied());
        let out = command.output().unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    assert!(!run(&[], &[]).contains('\u{1b}'));
    assert!(run(&["--color", "always"], &[]).contains("\u{1b}[1m\u{1b}[31mzebraword"));
    assert!(run(&[], &[("CLICOLOR_FORCE", "1")]).contains('\u{1b}'));
    assert!(!run(&["--color", "never"], &[("CLICOLOR_FORCE", "1")]).contains('\u{1b}'));
}

#[test]
fn errors_help_and_tables_are_coloured_on_a_terminal_only_as_asked() {
    let tmp = store();
    let a = agent(&tmp);
    let missing = tmp.path().join("missing");
    let missing = missing.to_str().unwrap();
    let error = run_on_terminal(&["ls", "--all", "--agent-dir", missing], &[]);
    assert_eq!(error.status.code(), Some(1));
    assert!(
        error
            .text
            .contains("gjcfs: \u{1b}[1m\u{1b}[31merror:\u{1b}[0m "),
        "{:?}",
        error.text
    );
    let error = run_on_terminal(
        &["ls", "--all", "--agent-dir", missing],
        &[("NO_COLOR", Some("1"))],
    );
    assert!(error.text.contains("gjcfs: error: "), "{:?}", error.text);
    assert!(!error.has_escapes(), "{:?}", error.text);

    // clap's help and usage errors follow the same choice, read before clap parses.
    assert!(run_on_terminal(&["ls", "--help"], &[]).has_escapes());
    for args in [
        &["--color", "never", "ls", "--help"][..],
        &["ls", "--help", "--color=never"],
        &["ls", "--no-such-flag", "--color", "never"],
    ] {
        let screen = run_on_terminal(args, &[]);
        assert!(!screen.has_escapes(), "{args:?}: {:?}", screen.text);
    }
    let screen = run_on_terminal(&["ls", "--help"], &[("NO_COLOR", Some("1"))]);
    assert!(!screen.has_escapes(), "{:?}", screen.text);
    let screen = run_on_terminal(&["--color", "sometimes", "ls"], &[]);
    assert_eq!(screen.status.code(), Some(2), "{:?}", screen.text);

    // A table's header row is bold; its rows are as piped.
    let table = run_on_terminal(&["usage", "--agent-dir", &a], &[]);
    assert!(table.text.contains("\u{1b}[1m"), "{:?}", table.text);
    let ls = run_on_terminal(&["ls", "--all", "--agent-dir", &a], &[]);
    assert!(ls.text.starts_with("\u{1b}[1mSESSION"), "{:?}", ls.text);
    let ls = run_on_terminal(&["ls", "--all", "--agent-dir", &a, "--color", "never"], &[]);
    assert!(ls.text.starts_with("SESSION"), "{:?}", ls.text);
}

/// Writes `n` small sessions into one scope of the agent directory `agent`.
fn many_sessions(agent: &Path, n: usize) {
    let scope = agent.join("sessions/--many--");
    fs::create_dir_all(&scope).unwrap();
    for i in 0..n {
        let header = format!(
            r#"{{"type":"session","version":5,"id":"s{i:05}","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/many"}}"#
        );
        let text = crate::common::SessionText::with_header(&header)
            .message("q1", None, "user", "hello")
            .text();
        fs::write(
            scope.join(format!("2026-01-01T00-00-00-000Z_s{i:05}.jsonl")),
            text,
        )
        .unwrap();
    }
}

#[test]
fn long_work_shows_progress_on_a_terminal_and_nowhere_else() {
    let tmp = tempfile::tempdir().unwrap();
    let many = tmp.path().join("agent");
    many_sessions(&many, 600);
    let a = many.to_str().unwrap();
    for (args, what) in [
        (
            &["usage", "--agent-dir", a][..],
            "gjcfs: reading sessions [",
        ),
        (
            &["ls", "--all", "--long", "--agent-dir", a],
            "gjcfs: reading sessions [",
        ),
        (&["check", "--agent-dir", a], "gjcfs: checking sessions ["),
    ] {
        let screen = run_on_terminal(args, &[]);
        assert!(screen.text.contains(what), "{args:?}: {:?}", screen.text);
        assert!(
            screen.text.contains("/600 files"),
            "{args:?}: {:?}",
            screen.text
        );
        // Not on a dumb terminal, and never in a pipe.
        let dumb = run_on_terminal(args, &[("TERM", Some("dumb"))]);
        assert!(!dumb.text.contains(what), "{args:?}: {:?}", dumb.text);
        let piped = Command::new(gjcfs_bin()).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&piped.stderr);
        assert!(!stderr.contains(what), "{args:?}: {stderr}");
    }
    // Below the threshold, a short listing draws no bar.
    let small = store();
    let screen = run_on_terminal(&["usage", "--agent-dir", &agent(&small)], &[]);
    assert!(
        !screen.text.contains("reading sessions"),
        "{:?}",
        screen.text
    );
}
