//! The exit status of every command, in one place; the README's "Exit status" table lists
//! the same values (a test holds them together).

use std::process::ExitCode;

/// How a command ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// Done, and something was found.
    Done = 0,
    /// Nothing found (said on stderr, with where the command looked), or an error: one line
    /// on stderr.
    Failed = 1,
    /// A usage error: an argument the command cannot take (clap's own errors exit 2 too), a
    /// query that cannot be searched, an output directory inside the store.
    Usage = 2,
    /// `gjcfs check`: warnings are left (nothing of a session is at risk).
    WarningsLeft = 3,
    /// `gjcfs check`: errors are left (a session or what the store holds for it is damaged).
    ErrorsLeft = 4,
}

impl Exit {
    /// Every status, in order.
    pub const ALL: [Exit; 5] = [
        Exit::Done,
        Exit::Failed,
        Exit::Usage,
        Exit::WarningsLeft,
        Exit::ErrorsLeft,
    ];

    /// The status as a number.
    pub fn code(self) -> u8 {
        self as u8
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_readme_lists_every_status() {
        let readme = include_str!("../../README.md");
        let table = readme
            .split("**Exit status**")
            .nth(1)
            .expect("the README has the table");
        let listed: Vec<u8> = table
            .lines()
            .skip(4)
            .take_while(|line| line.starts_with('|'))
            .flat_map(|line| {
                let first = line.trim_start_matches('|').split('|').next().unwrap_or("");
                first
                    .split(',')
                    .map(|n| n.trim().parse::<u8>().expect("a status"))
                    .collect::<Vec<_>>()
            })
            .collect();
        let all: Vec<u8> = Exit::ALL.iter().map(|e| e.code()).collect();
        assert_eq!(listed, all);
    }
}
