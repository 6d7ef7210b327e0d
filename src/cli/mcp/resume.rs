//! The command that reopens a session in the agent.

use super::answer::shell_word;
use crate::cli::store::StoreArgs;

/// `cd CWD && gjc --resume ID`: the agent finds a session by id among its workspace's
/// sessions (one of another workspace it offers to fork), so the command starts in the
/// session's own directory. A store given as one directory is named to the agent with
/// `--session-dir`.
pub fn resume_command(store: &StoreArgs, id: &str, cwd: &str) -> String {
    let resume = match &store.session_dir {
        Some(dir) => format!(
            "gjc --session-dir {} --resume {}",
            shell_word(&dir.to_string_lossy()),
            shell_word(id)
        ),
        None => format!("gjc --resume {}", shell_word(id)),
    };
    if cwd.is_empty() {
        resume
    } else {
        format!("cd {} && {resume}", shell_word(cwd))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resumes_in_the_sessions_directory_and_quotes_what_needs_it() {
        let store = StoreArgs {
            agent_dir: None,
            session_dir: None,
            allow_empty: false,
            long_running: true,
        };
        assert_eq!(
            resume_command(&store, "019b-1", "/home/me/my proj"),
            "cd '/home/me/my proj' && gjc --resume 019b-1"
        );
        assert_eq!(resume_command(&store, "019b", ""), "gjc --resume 019b");
        let dir = StoreArgs {
            session_dir: Some("/s".into()),
            ..store
        };
        assert_eq!(
            resume_command(&dir, "a;b", "/w"),
            "cd /w && gjc --session-dir /s --resume 'a;b'"
        );
    }
}
