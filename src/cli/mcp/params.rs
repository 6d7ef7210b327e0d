//! The arguments of each tool of `gjcfs mcp`: what a model may pass, with the JSON schema
//! and descriptions the server lists for it.

use schemars::JsonSchema;
use serde::Deserialize;

/// How many items a list answer holds when the call does not say.
pub const DEFAULT_LIMIT: usize = 20;
/// The most items one list answer holds.
pub const MAX_LIMIT: usize = 100;
/// How many characters of one message `read_session` shows when the call does not say.
pub const DEFAULT_CHARS: usize = 2_000;
/// The most characters of one message `read_session` shows.
pub const MAX_CHARS: usize = 20_000;
/// How many characters of a session's title an answer shows (on one line).
pub const TITLE_CHARS: usize = 200;
/// How many characters of one prompt `history_search` shows.
pub const PROMPT_CHARS: usize = 2_000;

/// `search_sessions`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchSessions {
    /// Words that must all occur (whole words, any case), or "quoted phrases" that must
    /// occur as written. Example: `parser "torn line"`.
    pub query: String,
    /// Only sessions started in this directory (absolute path). Default: the directory
    /// the server runs in, unless `all` is true.
    pub cwd: Option<String>,
    /// Search the sessions of every directory, not one workspace.
    #[serde(default)]
    pub all: bool,
    /// Only hits from this date or time on (YYYY-MM-DD, today, yesterday, 7d, or
    /// an ISO timestamp; days start at midnight UTC).
    pub since: Option<String>,
    /// Only hits before this date or time (YYYY-MM-DD, today, yesterday, 7d, or
    /// an ISO timestamp; days start at midnight UTC).
    pub until: Option<String>,
    /// Only messages of this role: `user`, `assistant` or `tool` (tool results and
    /// shell executions).
    pub role: Option<String>,
    /// Match `query` as a substring anywhere (at least 3 characters) instead of words.
    #[serde(default)]
    pub substring: bool,
    /// Skip this many hits (for the next page).
    #[serde(default)]
    pub offset: usize,
    /// At most this many hits (default 20, at most 100).
    pub limit: Option<usize>,
}

/// `read_session`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadSession {
    /// The session's id, or a unique prefix of it (as `search_sessions` and
    /// `list_sessions` give it).
    pub session: String,
    /// Read the context at this entry instead of the session's current leaf (an entry id;
    /// `session_tree` lists the ends of the branches).
    pub leaf: Option<String>,
    /// Show the messages around this entry (an entry id, e.g. a search hit's `entry`).
    pub around_entry: Option<String>,
    /// Start at this message (0 is the first). Default: the last `limit` messages.
    pub offset: Option<usize>,
    /// At most this many messages (default 20, at most 100).
    pub limit: Option<usize>,
    /// At most this many characters of each message (default 2000, at most 20000); a cut
    /// message says how to read the rest.
    pub max_chars: Option<usize>,
    /// Show each message from this character on (to read the rest of a cut message).
    #[serde(default)]
    pub text_offset: usize,
}

/// `list_sessions`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListSessions {
    /// Only sessions of this directory (absolute path). Default: the directory the server
    /// runs in, unless `all` is true.
    pub cwd: Option<String>,
    /// List the sessions of every directory.
    #[serde(default)]
    pub all: bool,
    /// Only sessions modified from this date or time on (YYYY-MM-DD, today, 7d, or
    /// an ISO timestamp; days start at midnight UTC).
    pub since: Option<String>,
    /// Only sessions modified before this date or time (YYYY-MM-DD, today, 7d, or
    /// an ISO timestamp; days start at midnight UTC).
    pub until: Option<String>,
    /// Skip this many sessions (for the next page).
    #[serde(default)]
    pub offset: usize,
    /// At most this many sessions (default 20, at most 100).
    pub limit: Option<usize>,
}

/// `session_tree`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionTree {
    /// The session's id, or a unique prefix of it.
    pub session: String,
    /// At most this many branch ends, newest first (default 20, at most 100).
    pub limit: Option<usize>,
}

/// `usage`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    /// Group the totals: `session`, `day`, `week`, `month`, `project` or `model`.
    pub by: Option<String>,
    /// Only replies from this date or time on (YYYY-MM-DD, today, 7d, or
    /// an ISO timestamp; days start at midnight UTC).
    pub since: Option<String>,
    /// Only replies before this date or time (YYYY-MM-DD, today, 7d, or
    /// an ISO timestamp; days start at midnight UTC).
    pub until: Option<String>,
    /// At most this many groups, largest cost first (default 20, at most 100).
    pub limit: Option<usize>,
}

/// `files_touched`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FilesTouched {
    /// The file, or a directory (every file under it): absolute, or relative to the
    /// directory the server runs in. Nothing is opened; a deleted file is found too.
    pub path: String,
    /// Only sessions started in this directory (absolute path). Default: the directory
    /// the server runs in, unless `all` is true.
    pub cwd: Option<String>,
    /// Look in the sessions of every directory.
    #[serde(default)]
    pub all: bool,
    /// Only touches from this date or time on (YYYY-MM-DD, today, 7d, or
    /// an ISO timestamp; days start at midnight UTC).
    pub since: Option<String>,
    /// Only touches before this date or time (YYYY-MM-DD, today, 7d, or
    /// an ISO timestamp; days start at midnight UTC).
    pub until: Option<String>,
    /// Skip this many touches (for the next page).
    #[serde(default)]
    pub offset: usize,
    /// At most this many touches (default 20, at most 100).
    pub limit: Option<usize>,
}

/// `history_search`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistorySearch {
    /// Words to find in the prompts the user typed (prefix matches of every word first).
    pub query: String,
    /// Only prompts typed in this directory (absolute path).
    pub cwd: Option<String>,
    /// At most this many prompts (default 20, at most 100).
    pub limit: Option<usize>,
}

/// The limit a call asked for, defaulted and capped.
pub fn limit(asked: Option<usize>) -> Result<usize, String> {
    match asked {
        None => Ok(DEFAULT_LIMIT),
        Some(0) => Err("limit must be at least 1".to_owned()),
        Some(n) => Ok(n.min(MAX_LIMIT)),
    }
}
