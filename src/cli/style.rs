//! Colour: `--color auto|always|never` for the whole process, clap's own help and errors
//! included.
//!
//! Under `auto` (the default) a stream is coloured when it is a terminal, `NO_COLOR` is
//! unset or empty, `CLICOLOR` is not `0` and `TERM` is not `dumb` (`CLICOLOR_FORCE` colours
//! even a pipe); `always` and `never` override all of these, as a flag should. Text read
//! from files never carries escapes of its own to the terminal: tables escape it first
//! ([`super::output::terminal_safe`]); only the styles below are written.

use std::ffi::OsString;
use std::fmt::Display;

use anstream::{AutoStream, ColorChoice};
use anstyle::{AnsiColor, Style};

/// When to colour.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorWhen {
    /// On a terminal, unless NO_COLOR is set or TERM is dumb.
    #[default]
    Auto,
    Always,
    Never,
}

/// A search hit's matched words.
pub const MATCH: Style = AnsiColor::Red.on_default().bold();
/// `error:` before an error.
pub const ERROR: Style = AnsiColor::Red.on_default().bold();
/// `warning:` before a warning.
pub const WARNING: Style = AnsiColor::Yellow.on_default().bold();
/// A table's header row.
pub const HEADER: Style = Style::new().bold();

/// Makes `when` the choice of the whole process. Under `auto`, `TERM=dumb` decides at once:
/// anstream alone would still colour a terminal that says it is dumb when `CI` is set.
pub fn set(when: ColorWhen) {
    let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
    ColorChoice::write_global(match when {
        ColorWhen::Auto if dumb => ColorChoice::Never,
        ColorWhen::Auto => ColorChoice::Auto,
        ColorWhen::Always => ColorChoice::Always,
        ColorWhen::Never => ColorChoice::Never,
    });
}

/// The `--color` a command line gives, read before clap parses it so that clap's own help
/// and errors follow it: the last `--color WHEN` or `--color=WHEN` before `--`. A value
/// that is not a choice is left to clap to refuse.
pub fn from_args(args: impl IntoIterator<Item = OsString>) -> Option<ColorWhen> {
    let mut found = None;
    let mut args = args.into_iter().skip(1);
    while let Some(arg) = args.next() {
        let value = match arg.to_str() {
            Some("--") => break,
            Some("--color") => args.next(),
            Some(a) => a.strip_prefix("--color=").map(OsString::from),
            None => None,
        };
        if let Some(value) = value {
            found = match value.to_str() {
                Some("auto") => Some(ColorWhen::Auto),
                Some("always") => Some(ColorWhen::Always),
                Some("never") => Some(ColorWhen::Never),
                _ => found,
            };
        }
    }
    found
}

/// Whether what gjcfs writes to standard output is coloured.
pub fn stdout_colored() -> bool {
    AutoStream::choice(&std::io::stdout()) != ColorChoice::Never
}

/// Whether what gjcfs writes to standard error is coloured.
pub fn stderr_colored() -> bool {
    AutoStream::choice(&std::io::stderr()) != ColorChoice::Never
}

/// `text` in `style` when `on`, else as it is.
pub fn paint(text: impl Display, style: Style, on: bool) -> String {
    if on {
        format!("{style}{text}{style:#}")
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn reads_the_last_color_flag_before_the_end_of_options() {
        assert_eq!(from_args(args(&["gjcfs", "ls"])), None);
        assert_eq!(
            from_args(args(&["gjcfs", "--color", "never", "ls"])),
            Some(ColorWhen::Never)
        );
        assert_eq!(
            from_args(args(&["gjcfs", "ls", "--color=never", "--color=always"])),
            Some(ColorWhen::Always)
        );
        assert_eq!(
            from_args(args(&["gjcfs", "--color", "bogus"])),
            None,
            "clap refuses it"
        );
        assert_eq!(
            from_args(args(&["gjcfs", "append", "--", "--color=never"])),
            None
        );
    }

    #[test]
    fn paints_only_when_asked() {
        assert_eq!(paint("hit", MATCH, false), "hit");
        assert_eq!(paint("hit", MATCH, true), "\u{1b}[1m\u{1b}[31mhit\u{1b}[0m");
    }
}
