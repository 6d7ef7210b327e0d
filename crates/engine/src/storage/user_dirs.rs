//! The user's own directories that gjcfs keeps its files under: the configuration directory
//! (the secret rules) and the cache directory (the search indexes), found as the XDG base
//! directory specification says, and on Windows in the application data directories.
//!
//! [`config_dir`] and [`cache_dir`] read the process's environment; what they answer is
//! worked out by `user_dir` from the values alone, which the tests give it.

use std::ffi::OsString;
use std::path::PathBuf;

/// Which of the user's directories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UserDir {
    /// Configuration: `$XDG_CONFIG_HOME`, else `~/.config`; on Windows `%APPDATA%`.
    Config,
    /// Caches: `$XDG_CACHE_HOME`, else `~/.cache`; on Windows `%LOCALAPPDATA%`.
    Cache,
}

impl UserDir {
    /// The XDG variable that names it.
    fn xdg_var(self) -> &'static str {
        match self {
            UserDir::Config => "XDG_CONFIG_HOME",
            UserDir::Cache => "XDG_CACHE_HOME",
        }
    }

    /// The Windows variable that names it when no XDG one does.
    fn windows_var(self) -> &'static str {
        match self {
            UserDir::Config => "APPDATA",
            UserDir::Cache => "LOCALAPPDATA",
        }
    }

    /// Its name under `$HOME` elsewhere.
    fn under_home(self) -> &'static str {
        match self {
            UserDir::Config => ".config",
            UserDir::Cache => ".cache",
        }
    }
}

/// The user's configuration directory: `$XDG_CONFIG_HOME` if it is an absolute path, else
/// `$HOME/.config` (on Windows `%APPDATA%`) if that is; `None` when neither is.
pub fn config_dir() -> Option<PathBuf> {
    user_dir(UserDir::Config, cfg!(windows), |name| {
        std::env::var_os(name)
    })
}

/// The user's cache directory: `$XDG_CACHE_HOME` if it is an absolute path, else
/// `$HOME/.cache` (on Windows `%LOCALAPPDATA%`) if that is; `None` when neither is.
pub fn cache_dir() -> Option<PathBuf> {
    user_dir(UserDir::Cache, cfg!(windows), |name| std::env::var_os(name))
}

/// The directory `dir` given the environment variables `var` answers: its XDG variable if
/// that is an absolute path (an empty or relative one is ignored), else, if it is absolute,
/// its Windows variable on `windows` and `$HOME` joined with its name elsewhere.
pub(crate) fn user_dir(
    dir: UserDir,
    windows: bool,
    var: impl Fn(&str) -> Option<OsString>,
) -> Option<PathBuf> {
    let absolute = |path: PathBuf| Some(path).filter(|p| p.is_absolute());
    if let Some(xdg) = var(dir.xdg_var()).and_then(|v| absolute(v.into())) {
        return Some(xdg);
    }
    let fallback = match windows {
        true => PathBuf::from(var(dir.windows_var())?),
        false => PathBuf::from(var("HOME")?).join(dir.under_home()),
    };
    absolute(fallback)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// An absolute path on this platform: `/<rest>`, on Windows `C:\<rest>`.
    fn abs(rest: &str) -> String {
        match cfg!(windows) {
            true => format!("C:\\{}", rest.replace('/', "\\")),
            false => format!("/{rest}"),
        }
    }

    /// `dir` given the variables `vars` (name, value), on Windows or elsewhere.
    fn dir(kind: UserDir, windows: bool, vars: &[(&str, &str)]) -> Option<PathBuf> {
        user_dir(kind, windows, |name| {
            let value = vars.iter().find(|(n, _)| *n == name)?.1;
            Some(OsString::from(value))
        })
    }

    #[test]
    fn an_absolute_xdg_directory_is_taken_as_it_is() {
        let (config, cache) = (abs("xdg/config"), abs("xdg/cache"));
        let home = abs("home/u");
        for windows in [false, true] {
            let vars = [
                ("XDG_CONFIG_HOME", config.as_str()),
                ("XDG_CACHE_HOME", cache.as_str()),
                ("HOME", &home),
                ("APPDATA", &home),
                ("LOCALAPPDATA", &home),
            ];
            let config = dir(UserDir::Config, windows, &vars);
            assert_eq!(config.as_deref(), Some(Path::new(&abs("xdg/config"))));
            let cache = dir(UserDir::Cache, windows, &vars);
            assert_eq!(cache.as_deref(), Some(Path::new(&abs("xdg/cache"))));
        }
    }

    #[test]
    fn without_an_absolute_xdg_directory_home_or_the_application_data_is_taken() {
        let (home, roaming, local) = (abs("home/u"), abs("AppData/Roaming"), abs("AppData/Local"));
        for xdg in [None, Some(""), Some("relative/dir")] {
            let mut vars = vec![
                ("HOME", home.as_str()),
                ("APPDATA", &roaming),
                ("LOCALAPPDATA", &local),
            ];
            if let Some(xdg) = xdg {
                vars.extend([("XDG_CONFIG_HOME", xdg), ("XDG_CACHE_HOME", xdg)]);
            }
            let config = dir(UserDir::Config, false, &vars);
            assert_eq!(config, Some(Path::new(&home).join(".config")), "{xdg:?}");
            let cache = dir(UserDir::Cache, false, &vars);
            assert_eq!(cache, Some(Path::new(&home).join(".cache")), "{xdg:?}");
            let config = dir(UserDir::Config, true, &vars);
            assert_eq!(config, Some(PathBuf::from(&roaming)), "{xdg:?}");
            let cache = dir(UserDir::Cache, true, &vars);
            assert_eq!(cache, Some(PathBuf::from(&local)), "{xdg:?}");
        }
    }

    #[test]
    fn no_directory_without_an_absolute_path_to_it() {
        for kind in [UserDir::Config, UserDir::Cache] {
            for windows in [false, true] {
                assert_eq!(dir(kind, windows, &[]), None);
                let relative = [
                    ("XDG_CONFIG_HOME", "rel"),
                    ("XDG_CACHE_HOME", "rel"),
                    ("HOME", "rel"),
                    ("APPDATA", "rel"),
                    ("LOCALAPPDATA", "rel"),
                ];
                assert_eq!(dir(kind, windows, &relative), None);
                let empty = relative.map(|(name, _)| (name, ""));
                assert_eq!(dir(kind, windows, &empty), None);
            }
        }
        // Windows reads no HOME, and elsewhere no application data directory.
        let home = abs("home/u");
        assert_eq!(dir(UserDir::Config, true, &[("HOME", &home)]), None);
        assert_eq!(dir(UserDir::Cache, false, &[("LOCALAPPDATA", &home)]), None);
    }
}
