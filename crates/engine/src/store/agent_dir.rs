//! Where the agent keeps its files.
//!
//! Resolution, in order:
//! 1. `$GJC_CODING_AGENT_DIR`, else `$PI_CODING_AGENT_DIR`: the agent directory, made
//!    absolute against the current directory. An empty value is unset.
//! 2. Otherwise `~/<configDirName>/agent`, where `configDirName` is `$GJC_CONFIG_DIR`, else
//!    `$PI_CONFIG_DIR`, else `.gjc`. A name is trimmed; an empty name, or one that still has a
//!    `..` segment after lexical normalisation (either slash counts as a separator), is
//!    skipped. The name is always joined *beneath* home, even if it looks absolute.
//!
//! A value of any of these four variables that equals what the current directory's `./.env`
//! assigns to the same name is ignored, as the agent does: the agent's runtime loads
//! `./.env` into its environment, and a repository must not be able to redirect the agent's
//! files. gjcfs never loads `.env` files, so a variable gjcfs sees comes from the real
//! environment; the rule is applied anyway, with the agent's `.env` parser, so that both
//! resolve the same directory. (The agent's runtime also loads `.env.local` and similar
//! files, whose values the agent then honours; gjcfs does not read those, so a directory set
//! only there is not seen.)
//!
//! XDG redirection: on Linux and macOS, and only when the agent directory is the default
//! one, a "data" path goes to `$XDG_DATA_HOME/gjc/<name>` (no `agent/` level) if
//! `$XDG_DATA_HOME/gjc` exists; likewise `XDG_STATE_HOME` for "state" paths and
//! `XDG_CACHE_HOME` for "cache" paths.
//!
//! Paths are combined lexically, as the agent's path functions do: `.` and `..` segments
//! and repeated or trailing slashes are normalised away, symbolic links are not resolved.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Component, Path, PathBuf};

use crate::format::js_text::js_trim;
use crate::storage::{FileStorage, SessionStorage};

/// The default config directory name under home.
pub const DEFAULT_CONFIG_DIR_NAME: &str = ".gjc";
/// The directory name under `$XDG_*_HOME`.
const XDG_APP_NAME: &str = "gjc";
/// The prompt-history database, a "data" path.
pub const HISTORY_DB_NAME: &str = "history.db";

const AGENT_DIR_VARS: [&str; 2] = ["GJC_CODING_AGENT_DIR", "PI_CODING_AGENT_DIR"];
const CONFIG_DIR_VARS: [&str; 2] = ["GJC_CONFIG_DIR", "PI_CONFIG_DIR"];
const XDG_VARS: [&str; 3] = ["XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"];

/// Which XDG base directory a path belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// Persistent data (sessions, blobs, the prompt history); redirected to `$XDG_DATA_HOME/gjc`.
    Data,
    /// State kept between runs (such as terminal sessions); redirected to `$XDG_STATE_HOME/gjc`.
    State,
    /// Disposable caches; redirected to `$XDG_CACHE_HOME/gjc`.
    Cache,
}

/// Why the agent directory could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum AgentDirError {
    /// No agent directory was set or given, so the default one under home is needed, and
    /// home is unknown.
    #[cfg_attr(
        not(windows),
        error("cannot find the home directory (HOME is not set) to locate the agent directory")
    )]
    #[cfg_attr(
        windows,
        error(
            "cannot find the home directory (USERPROFILE is not set) to locate the agent directory"
        )
    )]
    NoHome,
    /// A relative agent directory was set or given and the current directory cannot be read
    /// (`NotFound` when [`Environment::current_dir`] is `None`).
    #[error("cannot read the current directory to resolve the agent directory: {0}")]
    NoCurrentDir(io::Error),
}

/// What resolution reads: the environment variables, home, the current directory, and the
/// current directory's `./.env`. [`Environment::current`] reads the process's own.
#[derive(Debug, Clone, Default)]
pub struct Environment {
    /// Environment variables by name (only the ones resolution looks at are needed).
    pub vars: HashMap<String, OsString>,
    /// The user's home directory; `None` when it cannot be found.
    pub home: Option<PathBuf>,
    /// The current directory, which relative agent directories are resolved against; `None`
    /// when it cannot be read.
    pub current_dir: Option<PathBuf>,
    /// The assignments of `./.env`, parsed with [`parse_env_file`].
    pub dotenv: HashMap<String, String>,
    /// Whether XDG redirection applies on this platform (Linux and macOS).
    pub xdg_platform: bool,
}

impl Environment {
    /// The process's environment, home, current directory and `./.env`.
    pub fn current() -> Self {
        let vars = AGENT_DIR_VARS
            .iter()
            .chain(&CONFIG_DIR_VARS)
            .chain(&XDG_VARS)
            .filter_map(|name| std::env::var_os(name).map(|v| ((*name).to_owned(), v)))
            .collect();
        let current_dir = std::env::current_dir().ok();
        let dotenv = current_dir
            .as_deref()
            .and_then(|dir| read_dotenv(&dir.join(".env")))
            .map(|bytes| parse_env_file(&String::from_utf8_lossy(&bytes)))
            .unwrap_or_default();
        Environment {
            vars,
            home: std::env::home_dir(),
            current_dir,
            dotenv,
            xdg_platform: cfg!(any(target_os = "linux", target_os = "macos")),
        }
    }

    /// A variable's value, unless it is empty or equals what `./.env` assigns to it.
    fn trusted(&self, name: &str) -> Option<&OsStr> {
        let value = self.vars.get(name)?;
        if value.is_empty() {
            return None;
        }
        if self
            .dotenv
            .get(name)
            .is_some_and(|v| OsStr::new(v) == value.as_os_str())
        {
            return None;
        }
        Some(value)
    }

    /// The config directory name: the first acceptable of `$GJC_CONFIG_DIR` and
    /// `$PI_CONFIG_DIR`, else `.gjc`.
    pub fn config_dir_name(&self) -> String {
        CONFIG_DIR_VARS
            .iter()
            .find_map(|name| self.trusted(name).and_then(sanitize_config_dir_name))
            .unwrap_or_else(|| DEFAULT_CONFIG_DIR_NAME.to_owned())
    }

    /// The agent directory override from the environment, if any (not yet made absolute).
    pub fn agent_dir_override(&self) -> Option<&OsStr> {
        AGENT_DIR_VARS.iter().find_map(|name| self.trusted(name))
    }
}

/// A config directory name, trimmed; `None` if empty or if it escapes with `..`.
fn sanitize_config_dir_name(value: &OsStr) -> Option<String> {
    let value = value.to_string_lossy();
    let trimmed = js_trim(&value);
    if trimmed.is_empty() {
        return None;
    }
    let normalized = normalize(Path::new(trimmed));
    let escapes = normalized
        .to_string_lossy()
        .split(['/', '\\'])
        .any(|segment| segment == "..");
    (!escapes).then(|| trimmed.to_owned())
}

/// The resolved agent directory and its per-category bases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentDirs {
    agent_dir: PathBuf,
    is_default: bool,
    xdg_data: Option<PathBuf>,
    xdg_state: Option<PathBuf>,
    xdg_cache: Option<PathBuf>,
}

impl AgentDirs {
    /// Resolves from the process's environment.
    pub fn from_env() -> Result<Self, AgentDirError> {
        Self::resolve(&Environment::current())
    }

    /// Resolves from `env`, honouring the agent-directory variables.
    pub fn resolve(env: &Environment) -> Result<Self, AgentDirError> {
        Self::build(env, env.agent_dir_override())
    }

    /// An explicitly chosen agent directory (the agent's `setAgentDir`, gjcfs's
    /// `--agent-dir`): made absolute; XDG redirection still applies if it is the default one.
    /// An empty `dir` means the default.
    pub fn with_agent_dir(env: &Environment, dir: &Path) -> Result<Self, AgentDirError> {
        Self::build(env, Some(dir.as_os_str()).filter(|d| !d.is_empty()))
    }

    fn build(env: &Environment, explicit: Option<&OsStr>) -> Result<Self, AgentDirError> {
        let default_agent = env
            .home
            .as_deref()
            .map(|home| join(&join(home, Path::new(&env.config_dir_name())), "agent"));
        let agent_dir = match explicit {
            Some(dir) => {
                let dir = Path::new(dir);
                if dir.is_absolute() {
                    normalize(dir)
                } else {
                    let cwd = env.current_dir.as_deref().ok_or_else(|| {
                        AgentDirError::NoCurrentDir(io::ErrorKind::NotFound.into())
                    })?;
                    join(cwd, dir)
                }
            }
            None => default_agent.clone().ok_or(AgentDirError::NoHome)?,
        };
        let is_default = default_agent.as_deref() == Some(agent_dir.as_path());
        let xdg = |name: &str| -> Option<PathBuf> {
            if !(env.xdg_platform && is_default) {
                return None;
            }
            let base = env.vars.get(name).filter(|v| !v.is_empty())?;
            let dir = join(Path::new(base), XDG_APP_NAME);
            // Followed, as the agent's existence check follows a symlink.
            FileStorage.stat(&dir).is_ok().then_some(dir)
        };
        Ok(AgentDirs {
            xdg_data: xdg("XDG_DATA_HOME"),
            xdg_state: xdg("XDG_STATE_HOME"),
            xdg_cache: xdg("XDG_CACHE_HOME"),
            agent_dir,
            is_default,
        })
    }

    /// The agent directory itself.
    pub fn agent_dir(&self) -> &Path {
        &self.agent_dir
    }

    /// Whether the agent directory is the default `~/<configDirName>/agent`.
    pub fn is_default(&self) -> bool {
        self.is_default
    }

    /// The base directory of a category: its XDG directory, or the agent directory.
    pub fn base(&self, category: Category) -> &Path {
        match category {
            Category::Data => self.xdg_data.as_deref(),
            Category::State => self.xdg_state.as_deref(),
            Category::Cache => self.xdg_cache.as_deref(),
        }
        .unwrap_or(&self.agent_dir)
    }

    /// A path of the given category under the agent directory (or its XDG directory).
    pub fn path(&self, name: &str, category: Category) -> PathBuf {
        join(self.base(category), name)
    }

    /// `<agentDir>/sessions`, the sessions root (a data path).
    pub fn sessions_root(&self) -> PathBuf {
        self.path("sessions", Category::Data)
    }

    /// `<agentDir>/blobs`, the blob store (a data path).
    pub fn blob_dir(&self) -> PathBuf {
        self.path("blobs", Category::Data)
    }

    /// `<agentDir>/history.db`, a data path.
    pub fn history_db(&self) -> PathBuf {
        self.path(HISTORY_DB_NAME, Category::Data)
    }
}

/// Lexical normalisation: drops `.` segments and repeated or trailing slashes, and folds
/// `..` into its parent (a `..` above the root of an absolute path is dropped; leading `..`
/// of a relative path are kept). An empty result is `.`.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out: Vec<Component<'_>> = Vec::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => match out.last() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => out.push(component),
            },
            _ => out.push(component),
        }
    }
    if out.is_empty() {
        return PathBuf::from(".");
    }
    out.iter().collect()
}

/// Joins `rest` beneath `base` and normalises, treating a leading slash of `rest` as part of
/// the relative path (as the agent's path join does), never as a new root.
pub fn join(base: &Path, rest: impl AsRef<Path>) -> PathBuf {
    let mut joined = base.to_path_buf();
    for component in rest.as_ref().components() {
        if !matches!(component, Component::RootDir | Component::Prefix(_)) {
            joined.push(component);
        }
    }
    normalize(&joined)
}

/// The bytes of a `.env` file (a symlink to one is followed, as a shell would); a FIFO or
/// any other non-regular file there is ignored without blocking.
fn read_dotenv(path: &Path) -> Option<Vec<u8>> {
    // The storage opens without following a symlink at the final component, never blocks
    // and refuses anything but a regular file: resolve the path first.
    let real = FileStorage.canonicalize(path).ok()?;
    FileStorage.read(&real).ok()
}

/// Parses a `.env` file as the agent does: `KEY=value` lines, trimmed; blank lines and lines
/// starting with `#` skipped; keys must be shell identifiers; a value wrapped in matching
/// single or double quotes loses them; values holding NUL are skipped; a later assignment
/// wins. Nothing else (no `export`, no escapes, no inline comments).
pub fn parse_env_file(text: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for line in text.split('\n') {
        let line = js_trim(line);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = js_trim(key);
        if !is_env_name(key) {
            continue;
        }
        let mut value = js_trim(value);
        let quoted = (value.starts_with('"') && value.ends_with('"'))
            || (value.starts_with('\'') && value.ends_with('\''));
        if quoted {
            value = value.get(1..value.len() - 1).unwrap_or("");
        }
        if value.contains('\0') {
            continue;
        }
        out.insert(key.to_owned(), value.to_owned());
    }
    out
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
fn is_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> Environment {
        Environment {
            vars: vars
                .iter()
                .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
                .collect(),
            home: Some(PathBuf::from("/home/u")),
            current_dir: Some(PathBuf::from("/work/proj")),
            dotenv: HashMap::new(),
            xdg_platform: true,
        }
    }

    fn agent_dir(env: &Environment) -> PathBuf {
        AgentDirs::resolve(env).unwrap().agent_dir().to_owned()
    }

    #[test]
    fn default_is_home_dot_gjc_agent() {
        let dirs = AgentDirs::resolve(&env(&[])).unwrap();
        assert_eq!(dirs.agent_dir(), Path::new("/home/u/.gjc/agent"));
        assert!(dirs.is_default());
        assert_eq!(
            dirs.history_db(),
            Path::new("/home/u/.gjc/agent/history.db")
        );
    }

    #[test]
    #[cfg_attr(windows, ignore = "POSIX paths: `/a` is not absolute on Windows")]
    fn agent_dir_variables_in_order_and_made_absolute() {
        assert_eq!(
            agent_dir(&env(&[
                ("GJC_CODING_AGENT_DIR", "/a"),
                ("PI_CODING_AGENT_DIR", "/b")
            ])),
            Path::new("/a")
        );
        assert_eq!(
            agent_dir(&env(&[("PI_CODING_AGENT_DIR", "/b/./c/../d/")])),
            Path::new("/b/d")
        );
        assert_eq!(
            agent_dir(&env(&[("GJC_CODING_AGENT_DIR", "rel/agent")])),
            Path::new("/work/proj/rel/agent")
        );
        // An empty value is unset.
        assert_eq!(
            agent_dir(&env(&[
                ("GJC_CODING_AGENT_DIR", ""),
                ("PI_CODING_AGENT_DIR", "/b")
            ])),
            Path::new("/b")
        );
    }

    #[test]
    fn config_dir_name_variables_and_rejections() {
        let name = |vars: &[(&str, &str)]| env(vars).config_dir_name();
        assert_eq!(name(&[]), ".gjc");
        assert_eq!(name(&[("GJC_CONFIG_DIR", " .mine ")]), ".mine");
        assert_eq!(
            name(&[("GJC_CONFIG_DIR", ".a"), ("PI_CONFIG_DIR", ".b")]),
            ".a"
        );
        assert_eq!(name(&[("PI_CONFIG_DIR", ".b")]), ".b");
        // `..` segments are rejected and the next candidate is used.
        assert_eq!(
            name(&[("GJC_CONFIG_DIR", "../evil"), ("PI_CONFIG_DIR", ".b")]),
            ".b"
        );
        assert_eq!(name(&[("GJC_CONFIG_DIR", "a/../../x")]), ".gjc");
        // A backslash separates segments on Windows only (as for the agent's own path
        // functions there): `a\..\x` is `x` there, one odd name elsewhere.
        #[cfg(not(windows))]
        assert_eq!(name(&[("GJC_CONFIG_DIR", "a\\..\\x")]), ".gjc");
        #[cfg(windows)]
        assert_eq!(name(&[("GJC_CONFIG_DIR", "a\\..\\x")]), "a\\..\\x");
        #[cfg(windows)]
        assert_eq!(name(&[("GJC_CONFIG_DIR", "a\\..\\..\\x")]), ".gjc");
        assert_eq!(name(&[("GJC_CONFIG_DIR", "   ")]), ".gjc");
        // A `..` that normalises away is fine.
        assert_eq!(name(&[("GJC_CONFIG_DIR", "a/../b")]), "a/../b");
        assert_eq!(
            agent_dir(&env(&[("GJC_CONFIG_DIR", "a/../b")])),
            Path::new("/home/u/b/agent")
        );
        // An absolute-looking name still goes beneath home.
        assert_eq!(
            agent_dir(&env(&[("GJC_CONFIG_DIR", "/etc/x")])),
            Path::new("/home/u/etc/x/agent")
        );
    }

    #[test]
    #[cfg_attr(windows, ignore = "POSIX paths: `/a` is not absolute on Windows")]
    fn values_from_the_project_dotenv_are_ignored() {
        let mut e = env(&[
            ("GJC_CODING_AGENT_DIR", "/from-env"),
            ("GJC_CONFIG_DIR", ".cfg"),
        ]);
        e.dotenv = parse_env_file("GJC_CODING_AGENT_DIR=/from-env\nGJC_CONFIG_DIR='.cfg'\n");
        assert_eq!(agent_dir(&e), Path::new("/home/u/.gjc/agent"));
        e.dotenv = parse_env_file("GJC_CODING_AGENT_DIR=/other\n");
        assert_eq!(agent_dir(&e), Path::new("/from-env"));
        assert_eq!(e.config_dir_name(), ".cfg");
    }

    #[test]
    fn env_file_parsing() {
        let parsed = parse_env_file(
            "\u{feff}# comment\n A = 1 \nB=\"two\"\nC='three'\nD=\"\nexport E=5\n9F=6\nG\nB=again\nH=a\0b\nI=x # not a comment\r\n",
        );
        assert_eq!(parsed.get("A").map(String::as_str), Some("1"));
        assert_eq!(parsed.get("B").map(String::as_str), Some("again"));
        assert_eq!(parsed.get("C").map(String::as_str), Some("three"));
        assert_eq!(parsed.get("D").map(String::as_str), Some(""));
        assert_eq!(
            parsed.get("I").map(String::as_str),
            Some("x # not a comment")
        );
        for absent in ["export E", "E", "9F", "G", "H"] {
            assert!(!parsed.contains_key(absent), "{absent}");
        }
    }

    #[test]
    #[cfg_attr(windows, ignore = "POSIX paths: `/a` is not absolute on Windows")]
    fn xdg_data_redirects_only_the_default_dir_when_it_exists() {
        let xdg = tempfile::tempdir().unwrap();
        let xdg_str = xdg.path().to_str().unwrap();
        let mut e = env(&[("XDG_DATA_HOME", xdg_str), ("XDG_STATE_HOME", xdg_str)]);
        // `$XDG_DATA_HOME/gjc` does not exist yet: no redirection.
        assert_eq!(
            AgentDirs::resolve(&e).unwrap().history_db(),
            Path::new("/home/u/.gjc/agent/history.db")
        );
        FileStorage.create_dir(&xdg.path().join("gjc")).unwrap();
        let dirs = AgentDirs::resolve(&e).unwrap();
        assert_eq!(dirs.history_db(), xdg.path().join("gjc/history.db"));
        assert_eq!(
            dirs.path("terminal-sessions", Category::State),
            xdg.path().join("gjc/terminal-sessions")
        );
        assert_eq!(
            dirs.path("resident-cache", Category::Cache),
            Path::new("/home/u/.gjc/agent/resident-cache")
        );
        // An explicit directory equal to the default is still the default one.
        let explicit = AgentDirs::with_agent_dir(&e, Path::new("/home/u/.gjc/agent/")).unwrap();
        assert_eq!(explicit.history_db(), xdg.path().join("gjc/history.db"));
        // A non-default directory is never redirected.
        let other = AgentDirs::with_agent_dir(&e, Path::new("/elsewhere")).unwrap();
        assert_eq!(other.history_db(), Path::new("/elsewhere/history.db"));
        e.vars
            .insert("GJC_CODING_AGENT_DIR".into(), OsString::from("/elsewhere"));
        assert_eq!(
            AgentDirs::resolve(&e).unwrap().history_db(),
            Path::new("/elsewhere/history.db")
        );
        // Other platforms never redirect.
        e.vars.remove("GJC_CODING_AGENT_DIR");
        e.xdg_platform = false;
        assert_eq!(
            AgentDirs::resolve(&e).unwrap().history_db(),
            Path::new("/home/u/.gjc/agent/history.db")
        );
    }

    #[test]
    #[cfg_attr(windows, ignore = "POSIX paths: `/a` is not absolute on Windows")]
    fn missing_home_is_an_error_only_without_an_override() {
        let mut e = env(&[]);
        e.home = None;
        assert!(matches!(AgentDirs::resolve(&e), Err(AgentDirError::NoHome)));
        e.vars
            .insert("GJC_CODING_AGENT_DIR".into(), OsString::from("/x"));
        assert_eq!(agent_dir(&e), Path::new("/x"));
    }

    /// The Windows spellings: the default is `%USERPROFILE%\.gjc\agent`, an override is
    /// made absolute against the current directory, and XDG never applies.
    #[cfg(windows)]
    #[test]
    fn windows_default_and_overrides() {
        let mut e = env(&[]);
        e.home = Some(PathBuf::from(r"C:\Users\u"));
        e.current_dir = Some(PathBuf::from(r"C:\work\proj"));
        e.xdg_platform = Environment::current().xdg_platform;
        assert!(!e.xdg_platform);
        let dirs = AgentDirs::resolve(&e).unwrap();
        assert_eq!(dirs.agent_dir(), Path::new(r"C:\Users\u\.gjc\agent"));
        assert_eq!(
            dirs.history_db(),
            Path::new(r"C:\Users\u\.gjc\agent\history.db")
        );
        e.vars
            .insert("XDG_DATA_HOME".into(), OsString::from(r"C:\xdg"));
        assert_eq!(
            AgentDirs::resolve(&e).unwrap().history_db(),
            Path::new(r"C:\Users\u\.gjc\agent\history.db")
        );
        e.vars
            .insert("GJC_CODING_AGENT_DIR".into(), OsString::from(r"D:\agent"));
        assert_eq!(agent_dir(&e), Path::new(r"D:\agent"));
        e.vars
            .insert("GJC_CODING_AGENT_DIR".into(), OsString::from(r"rel\a"));
        assert_eq!(agent_dir(&e), Path::new(r"C:\work\proj\rel\a"));
    }

    #[test]
    fn lexical_paths() {
        assert_eq!(normalize(Path::new("/a/./b//c/../")), Path::new("/a/b"));
        assert_eq!(normalize(Path::new("/../a")), Path::new("/a"));
        assert_eq!(normalize(Path::new("../a/..")), Path::new(".."));
        assert_eq!(normalize(Path::new("a/..")), Path::new("."));
        assert_eq!(join(Path::new("/h"), "/x/y"), Path::new("/h/x/y"));
        assert_eq!(join(Path::new("/h"), "x/../../y"), Path::new("/y"));
    }
}
